"""``toolcodec.schema.valid``: "valid as it is" only where the full validation path agrees.

Whenever the one-walk check says yes, ``full_validation`` (every step: JSON data, Unicode
clean-up, coercion, jsonschema) must return the very same arguments, valid, with no repair.
And on clean JSON data it must say yes wherever jsonschema does, or the shortcut would be
useless for the calls it was built for.
"""

from __future__ import annotations

from hypothesis import assume, given, settings
from hypothesis import strategies as st
from toolcodec.repair.heuristics import same_value
from toolcodec.results.limits import Limits
from toolcodec.schema.tools import InvalidToolsError, ToolRegistry
from toolcodec.schema.valid import compile_valid, plain
from toolcodec.schema.validation import full_validation, validate_call

from tests.test_schema_fast import TYPES
from tests.test_schema_fast import schemas as simple_schemas

NAMES = ["a", "b", "c"]
DEFS = {"$defs": {"s": {"type": "string"}, "node": {"type": "object", "properties": {
    "v": {"type": "integer"}, "next": {"$ref": "#/$defs/node"}}}}}


def _keyword(children):
    small = st.integers(0, 3)
    bound = st.integers(-3, 3) | st.sampled_from([0.5, 1.5, -1.0])
    member = st.sampled_from(["x", "ab", "a", "", 1, 1.0, 0, True, False, None, 1.5])
    return st.one_of(
        st.tuples(st.just("type"), st.sampled_from(TYPES) | st.lists(
            st.sampled_from(TYPES), min_size=1, max_size=3, unique=True)),
        st.tuples(st.just("properties"), st.dictionaries(st.sampled_from(NAMES), children,
                                                         max_size=3)),
        st.tuples(st.just("required"), st.lists(st.sampled_from(NAMES), max_size=3,
                                                unique=True)),
        st.tuples(st.just("additionalProperties"), st.just(False) | children),
        st.tuples(st.just("items"), children),
        st.tuples(st.just("enum"), st.lists(member, min_size=1, max_size=4)),
        st.tuples(st.just("const"), member),
        st.tuples(st.sampled_from(["anyOf", "oneOf", "allOf"]),
                  st.lists(children, min_size=1, max_size=3)),
        st.tuples(st.just("$ref"), st.sampled_from(["#/$defs/s", "#/$defs/node"])),
        st.tuples(st.just("pattern"), st.sampled_from(["^a", "b$", "x"])),
        st.tuples(st.sampled_from(["minLength", "maxLength", "minItems", "maxItems",
                                   "minProperties", "maxProperties"]), small),
        st.tuples(st.sampled_from(["minimum", "maximum", "exclusiveMinimum",
                                   "exclusiveMaximum"]), bound),
        st.tuples(st.sampled_from(["description", "format"]), st.sampled_from(["x", "date"])),
        st.tuples(st.just("uniqueItems"), st.just(True)),
    )


rich_schemas = st.recursive(
    st.just({}) | st.builds(dict, st.lists(_keyword(st.just({"type": "string"})), max_size=3)),
    lambda children: st.builds(dict, st.lists(_keyword(children), max_size=4)),
    max_leaves=8,
).map(lambda schema: {**schema, **DEFS})
schemas = simple_schemas | rich_schemas
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
    try:
        return ToolRegistry.from_tools([{"name": "t", "parameters": schema}])
    except InvalidToolsError:
        assume(False)  # e.g. an empty enum: no tool set holds it
        raise


@settings(max_examples=400)
@given(schemas, arguments, st.integers(1, 4), st.booleans())
def test_yes_means_the_full_path_returns_the_arguments_untouched(schema, args, depth,
                                                                 text_values):
    schema = {**schema, "type": "object"}
    registry = _registry(schema)
    check = compile_valid(schema)
    limits = Limits(max_depth=depth)
    if check is None or not check(args, depth):
        return
    full = full_validation(registry, "t", args, text_values=text_values,
                           nfkc_strings=False, limits=limits)
    assert full.ok and full.repairs == [] and full.errors == [], (schema, args, full)
    assert same_value(full.arguments, args)
    fast = validate_call(_registry(schema), "t", args, text_values=text_values, limits=limits)
    if not text_values:  # (under text_values a top-level "null" text takes the full path)
        assert fast.arguments is args
    assert fast.to_dict() == full.to_dict()


json_scalars = (st.none() | st.booleans() | st.integers(-5, 5)
                | st.sampled_from([0.0, 1.5, 5.0, -2.5, 1.0]) | st.sampled_from(["", "x", "ab", "a",
                                                                      "ba", "xb"]))
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
    validator = _registry(schema).get("t").validator
    check = compile_valid(schema)
    if check is None:
        return
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
    for schema in ({"type": "object", "properties": {"a": {"not": {"type": "string"}}}},
                   {"$ref": "#/$defs/x"},  # a reference to nothing
                   {"$ref": "#/$defs/x", "type": "object", "$defs": {"x": {}}},  # siblings
                   {"type": "object", "properties": {"a": {"uniqueItems": True}}},
                   {"$schema": "http://json-schema.org/draft-04/schema#"}):
        assert compile_valid(schema) is None


def test_pydantic_style_schemas_compile():
    # the shape Pydantic v2 writes: $defs, $ref, Optional as anyOf with null, enums, titles
    schema = {"$defs": {"Unit": {"enum": ["c", "f"], "title": "Unit", "type": "string"},
                        "Place": {"properties": {"city": {"title": "City", "type": "string"},
                                                 "zip": {"anyOf": [{"type": "string",
                                                                    "pattern": "^[0-9]{5}$"},
                                                                   {"type": "null"}],
                                                         "default": None}},
                                  "required": ["city"], "title": "Place", "type": "object"}},
              "properties": {"place": {"$ref": "#/$defs/Place"}, "unit": {"$ref": "#/$defs/Unit"},
                             "days": {"const": 3}},
              "required": ["place"], "title": "Weather", "type": "object",
              "$schema": "https://json-schema.org/draft/2020-12/schema"}
    check = compile_valid(schema)
    assert check is not None
    assert check({"place": {"city": "Oslo", "zip": None}, "unit": "c", "days": 3}, 8)
    assert check({"place": {"city": "Oslo", "zip": "01234"}, "days": 3.0}, 8)
    assert not check({"place": {"city": "Oslo", "zip": "1234"}}, 8)
    assert not check({"place": {"city": "Oslo"}, "unit": "k"}, 8)
    assert compile_valid(True) is plain


def test_branches_under_a_recursive_reference_take_the_full_path():
    # anyOf of two arrays whose items refer back: 2^depth walks for a value that fails; the
    # full path's budget bounds that, so this check is not built for such a schema
    branching = {"$defs": {"t": {"anyOf": [{"type": "array", "items": {"$ref": "#/$defs/t"}},
                                           {"type": "array", "items": {"$ref": "#/$defs/t"}}]}},
                 "type": "object", "properties": {"a": {"$ref": "#/$defs/t"}}}
    assert compile_valid(branching) is None
    # recursion alone walks each value once: kept
    chain = {"$defs": {"n": {"type": "object", "properties": {"next": {"$ref": "#/$defs/n"}}}},
             "type": "object", "properties": {"a": {"$ref": "#/$defs/n"}}}
    check = compile_valid(chain)
    assert check is not None and check({"a": {"next": {"next": {}}}}, 8)
