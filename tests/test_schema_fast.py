"""``toolcodec.schema.fast``: never "valid" where the codec's jsonschema validator says invalid."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st
from toolcodec.schema.fast import compile_check, is_json_data
from toolcodec.schema.tools import ToolRegistry

NAMES = ["a", "b", "c"]
TYPES = ["string", "integer", "number", "boolean", "null", "array", "object"]

scalars = (st.none() | st.booleans() | st.integers(-5, 5) | st.sampled_from([0.0, 1.5, 5.0, -2.5])
           | st.sampled_from(["", "x", "ab", "abc", "a"]))
values = st.recursive(
    scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from(NAMES + ["z"]),
                                                                inner, max_size=4),
    max_leaves=12,
)


def _keyword(children):
    small = st.integers(0, 3)
    bound = st.integers(-3, 3) | st.sampled_from([0.5, 1.5, -1.0])
    return st.one_of(
        st.tuples(st.just("type"), st.sampled_from(TYPES) | st.lists(st.sampled_from(TYPES),
                                                                        min_size=1, max_size=3,
                                                                        unique=True)),
        st.tuples(st.just("properties"), st.dictionaries(st.sampled_from(NAMES), children,
                                                         max_size=3)),
        st.tuples(st.just("required"), st.lists(st.sampled_from(NAMES), max_size=3,
                                                unique=True)),
        st.tuples(st.just("additionalProperties"), st.just(False) | children),
        st.tuples(st.just("items"), children),
        st.tuples(st.just("enum"), st.lists(st.sampled_from(["x", "ab", "a", ""]), min_size=1,
                                            max_size=3, unique=True)),
        st.tuples(st.sampled_from(["minLength", "maxLength", "minItems", "maxItems"]), small),
        st.tuples(st.sampled_from(["minimum", "maximum", "exclusiveMinimum",
                                   "exclusiveMaximum"]), bound),
        st.tuples(st.sampled_from(["description", "format", "pattern", "const"]),
                  st.sampled_from(["x", "date", "^a"])),
    )


schemas = st.recursive(
    st.just({}) | st.builds(dict, st.lists(_keyword(st.just({"type": "string"})), max_size=3)),
    lambda children: st.builds(dict, st.lists(_keyword(children), max_size=4)),
    max_leaves=8,
)


def _validator(schema: dict):
    registry = ToolRegistry.from_tools([{"name": "t", "parameters": schema}])
    return registry.get("t").validator


@given(schemas, values)
def test_valid_for_sure_is_valid_for_jsonschema(schema, value) -> None:
    schema = {**schema, "type": "object"}  # a tool's parameters describe an object
    check = compile_check(schema)
    if check is not None and check(value):
        assert _validator(schema).is_valid(value), (schema, value)


@given(schemas, values)
def test_on_json_data_the_check_is_exactly_jsonschemas_answer(schema, value) -> None:
    # values as a JSON parser builds them (dict, list, str, int, float, bool, None): the
    # coercion trusts a "no" too, and asks jsonschema only for other Python values
    schema = {**schema, "type": "object"}
    check = compile_check(schema)
    if check is not None:
        assert check(value) == _validator(schema).is_valid(value), (schema, value)


def test_typical_tool_schema_compiles_and_answers_valid() -> None:
    schema = {"type": "object", "required": ["city"], "additionalProperties": False,
              "properties": {"city": {"type": "string", "description": "a city"},
                             "days": {"type": "integer", "minimum": 1, "maximum": 14},
                             "unit": {"enum": ["c", "f"]},
                             "tags": {"type": "array", "items": {"type": "string"}}}}
    check = compile_check(schema)
    assert check is not None
    assert check({"city": "Paris", "days": 3, "unit": "c", "tags": ["x"]})
    assert not check({"city": "Paris", "days": 3.0})  # 5.0 is not an integer argument
    assert not check({"city": "Paris", "days": True})
    assert not check({"days": 3})
    assert not check({"city": "Paris", "other": 1})


def test_keywords_outside_the_subset_are_left_to_jsonschema() -> None:
    for schema in ({"$ref": "#/$defs/x"}, {"properties": {"a": {"pattern": "^a"}}},
                   {"oneOf": [{"type": "string"}]}, {"$schema": "http://json-schema.org/draft-07/schema#"},
                   {"items": [{"type": "string"}]}, {"enum": [1, "a"]}, False):
        assert compile_check(schema) is None, schema


class _Text(str):
    pass


def _json_by_walk(value: object) -> bool:
    """is_json_data's meaning, spelt out."""
    if type(value) is dict:
        return all(type(k) is str for k in value) and all(map(_json_by_walk, value.values()))
    if type(value) is list:
        return all(map(_json_by_walk, value))
    return type(value) in (str, int, float, bool, type(None))


_ODD = st.sampled_from([_Text("x"), (1,), {1}, b"x"])
_KEYS = st.sampled_from(["a", "b", _Text("c")]) | st.integers(0, 2)


@given(st.recursive(scalars | _ODD, lambda inner: st.lists(inner, max_size=3)
                    | st.dictionaries(_KEYS, inner, max_size=3), max_leaves=8))
def test_is_json_data_is_the_walks_answer(value) -> None:
    # flat objects are told in C; anything else, and anything odd, by the walk
    assert is_json_data(value) == _json_by_walk(value)
