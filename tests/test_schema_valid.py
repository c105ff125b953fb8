"""``toolcodec.schema_valid``: "valid as it is" only where the full validation path agrees.

Whenever the one-walk check says yes, ``full_validation`` (every step: JSON data, Unicode
clean-up, coercion, jsonschema) must return the very same arguments, valid, with no repair.
And on clean JSON data it must say yes wherever jsonschema does, or the shortcut would be
useless for the calls it was built for.
"""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st
from toolcodec.heuristics import same_value
from toolcodec.limits import Limits
from toolcodec.schema_valid import compile_valid, plain
from toolcodec.tools import ToolRegistry
from toolcodec.validation import full_validation, validate_call

from tests.test_schema_fast import schemas

NAMES = ["a", "b", "c"]
odd_strings = st.sampled_from(["", "x", "ab", "abc", "a", "ｃｉｔｙ", "a\u200fb", "\ud800", "שלום",
                               "ﬁ", "null", " null "])
scalars = (st.none() | st.booleans() | st.integers(-5, 5) | st.sampled_from(
    [0.0, 1.5, 5.0, -2.5, float("nan"), 2**64, -(2**63) - 1, 2**64 - 1]) | odd_strings)
keys = st.sampled_from(NAMES + ["z", "ｃ", "a\u200e", "\udc00", "ﬁ"])
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(keys, inner, max_size=4)
    | st.tuples(inner) | st.dictionaries(st.integers(0, 2), inner, min_size=1, max_size=2),
    max_leaves=12,
)
arguments = st.dictionaries(keys, values, max_size=4)


def _registry(schema: dict) -> ToolRegistry:
    return ToolRegistry.from_tools([{"name": "t", "parameters": schema}])


@settings(max_examples=400)
@given(schemas, arguments, st.integers(1, 4), st.booleans())
def test_yes_means_the_full_path_returns_the_arguments_untouched(schema, args, depth,
                                                                 text_values):
    schema = {**schema, "type": "object"}
    check = compile_valid(schema)
    limits = Limits(max_depth=depth)
    if check is None or not check(args, depth):
        return
    full = full_validation(_registry(schema), "t", args, text_values=text_values,
                           nfkc_strings=False, limits=limits)
    assert full.ok and full.repairs == [] and full.errors == [], (schema, args, full)
    assert same_value(full.arguments, args)
    fast = validate_call(_registry(schema), "t", args, text_values=text_values, limits=limits)
    if not text_values:  # (under text_values a top-level "null" text takes the full path)
        assert fast.arguments is args
    assert fast.to_dict() == full.to_dict()


json_scalars = (st.none() | st.booleans() | st.integers(-5, 5)
                | st.sampled_from([0.0, 1.5, 5.0, -2.5]) | st.sampled_from(["", "x", "ab", "a"]))
json_values = st.recursive(
    json_scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from(NAMES + ["z"]),
                                                                inner, max_size=4),
    max_leaves=12,
)


@settings(max_examples=400)
@given(schemas, st.dictionaries(st.sampled_from(NAMES + ["z"]), json_values, max_size=4))
def test_on_clean_json_data_yes_wherever_jsonschema_says_valid(schema, args):
    schema = {**schema, "type": "object"}
    check = compile_valid(schema)
    if check is None:
        return
    validator = _registry(schema).get("t").validator
    assert check(args, 128) == validator.is_valid(args), (schema, args)


def test_what_normalisation_would_change_is_no():
    schema = {"type": "object", "properties": {"a": {"type": "string"}}}
    check = compile_valid(schema)
    assert check({"a": "שלום"}, 8)
    assert not check({"a": "a\u200fb"}, 8)  # a bidi control: removed by normalisation
    assert not check({"a": "\ud800"}, 8)  # a lone surrogate: replaced
    assert not check({"ｃ": "x"}, 8)  # a key NFKC folds
    assert not check({"a": "x", 1: "y"}, 8)  # not JSON data
    assert not check({"z": 2**64}, 8)  # past what a JSON result carries
    assert check({"z": [[1]]}, 3) and not check({"z": [[1]]}, 2)  # the depth limit


def test_schemas_outside_the_subset_compile_to_none():
    for schema in ({"type": "object", "properties": {"a": {"pattern": "^x"}}},
                   {"$ref": "#/$defs/x"}, {"anyOf": [{"type": "object"}]},
                   {"$schema": "http://json-schema.org/draft-07/schema#"}):
        assert compile_valid(schema) is None
    assert compile_valid(True) is plain
