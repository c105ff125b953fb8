"""Schema-guided coercion: every rule, every refusal, and the "valid stays as is" property."""

from __future__ import annotations

import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from toolcodec.schema import coerce
from toolcodec.schema.coerce import coerce_arguments
from toolcodec.schema.tools import ToolRegistry


def spec_for(properties: dict, **extra) -> object:
    schema = {"type": "object", "properties": properties, **extra}
    return ToolRegistry.from_tools([{"name": "t", "parameters": schema}]).get("t")


def coerce_one(schema: dict, value, *, text_values: bool = False):
    """Coerce ``{"v": value}`` against ``{"v": schema}``; return (new value, repairs)."""
    out, repairs = coerce_arguments(spec_for({"v": schema}), {"v": value}, text_values=text_values)
    return out["v"], repairs


INT, NUM, BOOL, STR = ({"type": t} for t in ("integer", "number", "boolean", "string"))


# --- integers -----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"), [("5", 5), (" 42 ", 42), ("-3", -3), ("5.0", 5), ("+7", 7), (5.0, 5)]
)
def test_integer_coercions(raw, expected):
    value, repairs = coerce_one(INT, raw)
    assert value == expected and type(value) is int
    assert repairs == ["schema.coerce_integer"]


@pytest.mark.parametrize("raw", ["5.5", "1,000", "0x1f", "1e3", "five", "", "NaN", True, 5.5])
def test_integer_refusals(raw):
    assert coerce_one(INT, raw) == (raw, [])


def test_fullwidth_digits_are_nfkc_folded_then_coerced():
    assert coerce_one(INT, "１２") == (12, ["text.nfkc", "schema.coerce_integer"])


def test_huge_digit_string_does_not_raise():
    raw = "9" * 5000
    assert coerce_one(INT, raw) == (raw, [])


# --- numbers, booleans, null, strings -----------------------------------------------------


@pytest.mark.parametrize(
    ("raw", "expected"), [("2.5", 2.5), (" -0.5 ", -0.5), ("3", 3), (".5", 0.5)]
)
def test_number_coercions(raw, expected):
    value, repairs = coerce_one(NUM, raw)
    assert value == expected and repairs == ["schema.coerce_number"]


@pytest.mark.parametrize("raw", ["1,000", "NaN", "Infinity", "0x10", "1e999", "2.5 kg", True])
def test_number_refusals(raw):
    assert coerce_one(NUM, raw) == (raw, [])


@pytest.mark.parametrize(("raw", "expected"), [("true", True), ("FALSE", False), (" True ", True)])
def test_boolean_coercions(raw, expected):
    assert coerce_one(BOOL, raw) == (expected, ["schema.coerce_boolean"])


@pytest.mark.parametrize("raw", ["yes", "no", "1", "0", "on", "off", "y", 1, 0])
def test_boolean_refusals_never_guess(raw):
    assert coerce_one(BOOL, raw) == (raw, [])


def test_null_string_becomes_null_only_where_null_is_allowed():
    assert coerce_one({"type": ["integer", "null"]}, "null") == (None, ["schema.coerce_null"])
    assert coerce_one(INT, "null") == ("null", [])
    # a string "null" is a perfectly good string: nothing to coerce
    assert coerce_one({"type": ["string", "null"]}, "null") == ("null", [])


@pytest.mark.parametrize(("raw", "expected"), [(5, "5"), (2.5, "2.5"), (True, "true"), (-1, "-1")])
def test_string_coercions(raw, expected):
    assert coerce_one(STR, raw) == (expected, ["schema.coerce_string"])


def test_string_refusals():
    assert coerce_one(STR, None) == (None, [])
    assert coerce_one(STR, {"a": 1}) == ({"a": 1}, [])


# --- arrays and objects -------------------------------------------------------------------


def test_scalar_is_wrapped_and_item_coerced():
    value, repairs = coerce_one({"type": "array", "items": INT}, "7")
    assert value == [7]
    assert repairs == ["schema.wrap_array", "schema.coerce_integer"]


def test_array_items_are_coerced_in_place():
    value, repairs = coerce_one({"type": "array", "items": INT}, ["1", 2, "3"])
    assert value == [1, 2, 3] and repairs == ["schema.coerce_integer"]


def test_prefix_items_steer_by_position():
    schema = {"type": "array", "prefixItems": [INT, BOOL], "items": STR}
    assert coerce_one(schema, ["1", "true", 3])[0] == [1, True, "3"]


def test_json_string_decoded_to_object_and_children_coerced():
    schema = {"type": "object", "properties": {"n": INT}}
    value, repairs = coerce_one(schema, '{"n": "4"}')
    assert value == {"n": 4}
    assert repairs == ["schema.decode_json_string", "schema.coerce_integer"]


def test_json_string_decoded_to_array():
    value, repairs = coerce_one({"type": "array", "items": STR}, '["a", "b"]')
    assert value == ["a", "b"] and repairs == ["schema.decode_json_string"]


def test_json_string_of_wrong_shape_is_refused():
    assert coerce_one({"type": "object"}, "[1]") == ("[1]", [])
    assert coerce_one({"type": "object"}, "not json") == ("not json", [])


ARRAY_OF_INT = {"type": "array", "items": INT}
OBJECT = {"type": "object"}


@pytest.mark.parametrize(
    ("schema", "raw"),
    [
        (ARRAY_OF_INT, "[1, 2"),  # cut off
        (OBJECT, '{"a": 1'),  # cut off
        (OBJECT, '{"a": 1} and then some words'),  # the words would be dropped
        (ARRAY_OF_INT, "[1, 2] [3]"),  # the second value would be dropped
    ],
)
def test_json_text_that_would_lose_content_is_not_decoded_or_wrapped(schema, raw):
    assert coerce_one(schema, raw) == (raw, [])


def test_decode_works_with_strict_json_when_repairer_missing(monkeypatch):
    monkeypatch.setitem(sys.modules, "toolcodec.repair.jsonrepair", None)  # import now fails
    assert coerce_one({"type": "array", "items": INT}, '["1"]') == (
        [1],
        ["schema.decode_json_string", "schema.coerce_integer"],
    )
    assert coerce_one({"type": "array"}, "[1,]") == ("[1,]", [])


def test_objects_are_not_wrapped_into_arrays():
    assert coerce_one({"type": "array"}, {"a": 1}) == ({"a": 1}, [])


def test_additional_and_pattern_properties_steer_children():
    spec = spec_for(
        {"known": INT},
        patternProperties={"^n_": INT},
        additionalProperties=BOOL,
    )
    out, _ = coerce_arguments(spec, {"known": "1", "n_x": "2", "other": "true"})
    assert out == {"known": 1, "n_x": 2, "other": True}


# --- enums --------------------------------------------------------------------------------

METHOD = {"type": "string", "enum": ["GET", "POST"]}


def test_enum_nfkc_match():
    assert coerce_one(METHOD, "ＰＯＳＴ") == ("POST", ["text.nfkc"])


def test_enum_case_only_match():
    assert coerce_one(METHOD, "post") == ("POST", ["schema.coerce_enum"])


def test_enum_ambiguous_case_match_is_refused():
    assert coerce_one({"enum": ["a", "A"]}, "ａ") == ("a", ["text.nfkc"])
    assert coerce_one({"enum": ["ab", "AB"]}, "Ab") == ("Ab", [])


def test_enum_without_match_is_refused():
    assert coerce_one(METHOD, "PUT") == ("PUT", [])


def test_numeric_enum_and_const_coerce_through_inferred_type():
    assert coerce_one({"enum": [1, 2, 3]}, "2") == (2, ["schema.coerce_integer"])
    assert coerce_one({"const": True}, "true") == (True, ["schema.coerce_boolean"])


# --- unions and references ----------------------------------------------------------------


def test_any_of_takes_the_single_branch_that_validates():
    nullable = {"anyOf": [INT, {"type": "null"}]}
    assert coerce_one(nullable, "5") == (5, ["schema.coerce_integer"])
    assert coerce_one(nullable, "null") == (None, ["schema.coerce_null"])


def test_any_of_ambiguous_results_are_refused():
    schema = {"anyOf": [INT, BOOL, {"type": "array", "items": STR}]}
    # "5" could be 5 or ["5"]: two results validate, so nothing is guessed
    assert coerce_one(schema, "5") == ("5", [])


def test_one_of_coerces_inside_the_matching_object_branch():
    schema = {
        "oneOf": [
            {
                "type": "object",
                "properties": {"kind": {"const": "a"}, "n": INT},
                "required": ["kind"],
            },
            {
                "type": "object",
                "properties": {"kind": {"const": "b"}, "s": STR},
                "required": ["kind"],
            },
        ]
    }
    assert coerce_one(schema, {"kind": "a", "n": "3"}) == (
        {"kind": "a", "n": 3},
        ["schema.coerce_integer"],
    )


def test_local_refs_are_followed():
    spec = ToolRegistry.from_tools(
        [
            {
                "name": "t",
                "parameters": {
                    "$defs": {
                        "Item": {"type": "object", "properties": {"n": {"$ref": "#/$defs/N"}}},
                        "N": INT,
                    },
                    "definitions": {"Flag": BOOL},
                    "type": "object",
                    "properties": {
                        "items": {"type": "array", "items": {"$ref": "#/$defs/Item"}},
                        "flag": {"$ref": "#/definitions/Flag"},
                    },
                },
            }
        ]
    ).get("t")
    out, repairs = coerce_arguments(spec, {"items": [{"n": "1"}, {"n": 2}], "flag": "false"})
    assert out == {"items": [{"n": 1}, {"n": 2}], "flag": False}
    assert repairs == ["schema.coerce_integer", "schema.coerce_boolean"]


def test_all_of_properties_steer_children():
    schema = {"allOf": [{"type": "object", "properties": {"n": INT}}, {"required": ["n"]}]}
    assert coerce_one(schema, {"n": "8"}) == ({"n": 8}, ["schema.coerce_integer"])


# --- markdown emphasis --------------------------------------------------------------------


@pytest.mark.parametrize("raw", ["**Paris**", "*urgent*", "**Warning**", "*args*"])
def test_emphasis_kept_where_the_string_is_valid(raw):
    # a valid value is never changed: `{"content": "**Warning**"}` is the model's Markdown
    assert coerce_one(STR, raw) == (raw, [])


def test_emphasis_undone_only_where_the_string_does_not_fit():
    assert coerce_one({"type": "string", "maxLength": 5}, "**Paris**") == (
        "Paris", ["json.markdown_emphasis"])
    assert coerce_one({"enum": ["high", "low"]}, "**high**") == (
        "high", ["json.markdown_emphasis"])


@pytest.mark.parametrize(
    "raw",
    ["**/*.py", "a ** b", "Review **Q3** numbers", "*", "**", "****", "** x**", "*x **", "***a***"],
)
def test_emphasis_lookalikes_are_left_alone(raw):
    assert coerce_one(STR, raw) == (raw, [])


def test_emphasis_kept_where_the_schema_needs_the_asterisks():
    assert coerce_one({"type": "string", "pattern": r"^\*"}, "*glob*") == ("*glob*", [])
    assert coerce_one({"enum": ["*a*", "b"]}, "*a*") == ("*a*", [])
    # unwrapping would make the items equal, which uniqueItems forbids
    schema = {"type": "array", "items": STR, "uniqueItems": True}
    assert coerce_one(schema, ["*a*", "a"]) == (["*a*", "a"], [])


def test_emphasis_then_enum_match():
    assert coerce_one(METHOD, "**post**") == (
        "POST",
        ["json.markdown_emphasis", "schema.coerce_enum"],
    )


def test_emphasis_not_applied_where_a_string_is_not_allowed():
    assert coerce_one(INT, "**5**") == ("**5**", [])


# --- text values (XML) --------------------------------------------------------------------


def test_text_values_convert_without_coerce_ids():
    spec = spec_for(
        {
            "n": INT,
            "x": NUM,
            "b": BOOL,
            "z": {"type": ["string", "null"], "maxLength": 0},
            "o": {"type": "object", "properties": {"k": INT}},
            "a": {"type": "array", "items": INT},
        }
    )
    raw = {"n": "3", "x": "1.5", "b": "false", "z": "null", "o": '{"k": "1"}', "a": "[1, 2]"}
    out, repairs = coerce_arguments(spec, raw, text_values=True)
    assert out == {"n": 3, "x": 1.5, "b": False, "z": None, "o": {"k": 1}, "a": [1, 2]}
    assert repairs == []


def test_text_values_nested_child_tags_have_their_leaves_coerced():
    spec = spec_for(
        {"o": {"type": "object", "properties": {"k": INT, "l": {"type": "array", "items": BOOL}}}}
    )
    out, repairs = coerce_arguments(
        spec, {"o": {"k": "1", "l": ["true", "FALSE"]}}, text_values=True
    )
    assert out == {"o": {"k": 1, "l": [True, False]}} and repairs == []


def test_text_values_still_report_real_repairs():
    spec = spec_for({"a": {"type": "array", "items": INT}, "m": METHOD, "s": STR, "n": INT})
    out, repairs = coerce_arguments(
        spec, {"a": "4", "m": "**GET**", "s": "*x*", "n": "１"}, text_values=True
    )
    assert out == {"a": [4], "m": "GET", "s": "*x*", "n": 1}
    assert repairs == ["schema.wrap_array", "json.markdown_emphasis", "text.nfkc"]


def test_text_values_refusals_stay_refusals():
    assert coerce_one(BOOL, "yes", text_values=True) == ("yes", [])
    assert coerce_one(INT, "5.5", text_values=True) == ("5.5", [])


# --- general guarantees -------------------------------------------------------------------


def test_input_is_not_mutated_and_unchanged_parts_are_shared():
    keep = {"deep": ["x"]}
    spec = spec_for({"n": INT, "keep": {"type": "object"}})
    args = {"n": "1", "keep": keep}
    out, _ = coerce_arguments(spec, args)
    assert args == {"n": "1", "keep": {"deep": ["x"]}}
    assert out["keep"] is keep


def test_valid_arguments_come_back_as_the_same_object():
    spec = spec_for({"n": INT, "s": STR})
    args = {"n": 1, "s": "plain"}
    out, repairs = coerce_arguments(spec, args)
    assert out is args and repairs == []


def test_invalid_elsewhere_does_not_touch_valid_values():
    spec = spec_for({"n": INT, "s": STR, "f": NUM}, required=["missing"])
    args = {"n": 1, "s": "5", "f": 2}
    out, repairs = coerce_arguments(spec, args)
    assert out == args and repairs == []


def test_repairs_are_in_order_of_first_use_without_duplicates():
    spec = spec_for({"a": INT, "b": BOOL, "c": INT})
    _, repairs = coerce_arguments(spec, {"a": "1", "b": "true", "c": "2"})
    assert repairs == ["schema.coerce_integer", "schema.coerce_boolean"]


# --- property: what validates is left alone ------------------------------------------------

LEAF_SCHEMAS = [INT, NUM, BOOL, STR, {"type": "null"}, {"type": ["string", "null"]}, {}]
PROPERTY_SCHEMA = {
    "type": "object",
    "properties": {
        "i": INT,
        "n": NUM,
        "b": BOOL,
        "s": STR,
        "e": {"enum": ["GET", "POST", 1]},
        "l": {"type": "array", "items": {"anyOf": [INT, STR]}},
        "o": {"type": "object", "additionalProperties": {"type": ["string", "number"]}},
    },
}
SPEC = ToolRegistry.from_tools([{"name": "p", "parameters": PROPERTY_SCHEMA}]).get("p")

scalars = (
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=12)
)
values = st.recursive(
    scalars,
    lambda children: (
        st.lists(children, max_size=3) | st.dictionaries(st.text(max_size=4), children, max_size=3)
    ),
    max_leaves=10,
)
arguments = st.dictionaries(
    st.sampled_from(["i", "n", "b", "s", "e", "l", "o", "x"]), values, max_size=6
)


@settings(max_examples=200)
@given(arguments)
def test_valid_arguments_are_returned_unchanged(args):
    if not SPEC.validator.is_valid(args):
        return
    out, repairs = coerce_arguments(SPEC, args)
    assert out is args and repairs == []


@settings(max_examples=200)
@given(arguments, st.booleans())
def test_coercion_never_raises_and_output_is_json_data(args, text_values):
    out, repairs = coerce_arguments(SPEC, args, text_values=text_values)
    assert isinstance(out, dict) and set(out) == set(args)
    assert all(r.startswith(("schema.", "text.", "json.")) for r in repairs)
    again, more = coerce_arguments(SPEC, out, text_values=text_values)
    if SPEC.validator.is_valid(out):
        # a second pass finds nothing left to repair
        assert again == out and more == []


@settings(max_examples=200)
@given(st.sampled_from(LEAF_SCHEMAS), scalars)
def test_valid_leaves_are_untouched(schema, value):
    spec = spec_for({"v": schema})
    args = {"v": value}
    if spec.validator.is_valid(args):
        out, repairs = coerce_arguments(spec, args)
        assert out is args and repairs == []


def test_boolean_subschemas():
    spec = spec_for({"any": True, "never": False, "n": INT})
    out, repairs = coerce_arguments(spec, {"any": "**x**", "never": "5", "n": "1"})
    assert out == {"any": "**x**", "never": "5", "n": 1}
    assert repairs == ["schema.coerce_integer"]


def test_recursive_ref_to_root():
    spec = ToolRegistry.from_tools(
        [
            {
                "name": "tree",
                "parameters": {
                    "type": "object",
                    "properties": {"v": INT, "kids": {"type": "array", "items": {"$ref": "#"}}},
                },
            }
        ]
    ).get("tree")
    out, repairs = coerce_arguments(spec, {"v": "1", "kids": [{"v": "2", "kids": [{"v": "3"}]}]})
    assert out == {"v": 1, "kids": [{"v": 2, "kids": [{"v": 3}]}]}
    assert repairs == ["schema.coerce_integer"]


class _Args(dict):
    """A dict subclass, as a Python caller may pass: not JSON data for the fast check."""


def test_a_python_caller_s_own_containers_are_coerced_like_plain_ones():
    # On JSON data the compiled check's "no" is trusted; on other Python values jsonschema is
    # asked instead, and the coercion must not differ
    spec = ToolRegistry.from_tools([{"name": "t", "parameters": {
        "type": "object", "properties": {"n": {"type": "integer"},
                                         "tags": {"type": "array", "items": {"type": "string"}}},
        "required": ["n"]}}]).get("t")
    for raw in ({"n": "3", "tags": "x"}, {"n": 3, "tags": ["x"]}, {"n": "x"}):
        assert coerce_arguments(spec, _Args(raw)) == coerce_arguments(spec, dict(raw))


# --- flat tools: the short way is the walk ------------------------------------------------

_SAMPLED_TEXTS = ["5", " 42 ", "-3", "5.0", "+7", "5.5", "1e3", ".5", "1,000", "0x1f", "true",
                  "False", " TRUE ", "yes", "null", "", "**7**", "NaN", "1e999", "\uff15",
                  "\u0661\u0662", "9" * 30, "abc", "3 apples"]
# the listed texts (each edge of a conversion: spaces, signs, fractions, NFKC digits, case,
# emphasis, overflow) most of the time, any short text now and then
_TEXTS = st.integers(0, 3 * len(_SAMPLED_TEXTS)).flatmap(
    lambda n: st.just(_SAMPLED_TEXTS[n]) if n < len(_SAMPLED_TEXTS)
    else st.text(alphabet="0123456789.+-eE truefalsn*\uff10", max_size=8) if n % 2
    else st.text(max_size=6))
_PARAM = st.fixed_dictionaries(
    {"type": st.sampled_from(["string", "integer", "number", "boolean"])},
    optional={"description": st.text(max_size=5), "title": st.text(max_size=5)})
# what a flat tool has not: the walk steers by it (an enum, a bound a string may miss)
_NOT_FLAT = st.sampled_from([{"enum": ["5", "7"]}, {"maxLength": 1}, {"minimum": 6},
                             {"type": ["integer", "string"]}, {"type": "null"}])


@st.composite
def _flat_calls(draw):
    params = draw(st.dictionaries(st.sampled_from("abcdef"), _PARAM, min_size=1, max_size=5))
    if draw(st.integers(0, 3)) == 0:  # now and then a parameter the short way must leave
        name = draw(st.sampled_from(sorted(params)))
        params[name] = {**params[name], **draw(_NOT_FLAT)}
    names = draw(st.lists(st.sampled_from(sorted(params)), unique=True))
    if draw(st.integers(0, 9)) == 0:
        names.append("z")  # not a parameter
    values = {name: draw(_TEXTS) for name in names}
    if names and draw(st.integers(0, 9)) == 0:
        values[names[0]] = draw(st.sampled_from([5, 2.5, True, None, ["5"]]))  # not text
    return params, values


@settings(max_examples=400)
@given(call=_flat_calls(), required=st.booleans(), text_values=st.booleans())
def test_a_flat_tools_text_values_coerce_as_the_walk_coerces_them(call, required,
                                                                  text_values):
    params, values = call
    extra = {"required": sorted(params)} if required else {}
    spec = spec_for(params, **extra)
    short = coerce.coerce_checked(spec, values, text_values=text_values)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(coerce, "_coerce_flat", lambda *_: coerce._NO)
        walked = coerce.coerce_checked(spec_for(params, **extra), values,
                                       text_values=text_values)
    assert short == walked
    assert list(short[0]) == list(walked[0])  # the parameters' order too
    assert [type(v) for v in short[0].values()] == [type(v) for v in walked[0].values()]
