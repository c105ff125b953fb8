"""``schema_meta.surely_valid``: never "valid" where the 2020-12 meta-schema says invalid."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from toolcodec.schema.meta import surely_valid
from toolcodec.schema.tools import InvalidToolsError, ToolRegistry

_KEYS = ["type", "properties", "required", "enum", "items", "additionalProperties", "anyOf",
         "oneOf", "allOf", "minimum", "maximum", "exclusiveMinimum", "multipleOf", "minLength",
         "maxItems", "description", "title", "format", "default", "const", "uniqueItems",
         "deprecated", "examples", "$ref", "pattern", "not", "x-custom", "nullable"]
_SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-3, 3), st.floats(-2, 2),
                     st.sampled_from(["string", "object", "integer", "nope", ""]))
_VALUES = st.recursive(_SCALARS, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
    st.sampled_from(_KEYS + ["a", "b"]), inner, max_size=3), max_leaves=10)


def _meta_valid(schema: object) -> bool:
    try:
        Draft202012Validator.check_schema(schema)
        return True
    except SchemaError:
        return False


@settings(max_examples=1500, deadline=None)
@given(st.dictionaries(st.sampled_from(_KEYS), _VALUES, max_size=5))
def test_never_valid_where_the_meta_schema_says_invalid(schema: dict) -> None:
    if surely_valid(schema):
        assert _meta_valid(schema), schema


@pytest.mark.parametrize("schema", [
    {"type": "object", "properties": {"city": {"type": "string", "description": "x"},
                                      "days": {"type": "integer", "minimum": 1}},
     "required": ["city"], "additionalProperties": False},
    {"type": "object", "properties": {"tags": {"type": "array", "items": {"type": "string"}},
                                      "unit": {"enum": ["c", "f"]},
                                      "x": {"anyOf": [{"type": "string"}, {"type": "null"}]}}},
    {"type": ["object", "null"], "x-vendor": {"anything": [1, 2]}},
    True,
])
def test_common_tool_schemas_are_known_valid_without_the_meta_schema(schema) -> None:
    assert surely_valid(schema) and _meta_valid(schema)


@pytest.mark.parametrize("schema,why", [
    ({"type": "object", "required": ["a", "a"]}, "duplicate required"),
    ({"type": "object", "properties": {"a": {"type": "strin"}}}, "unknown type"),
    ({"type": "object", "properties": {"a": {"minLength": -1}}}, "negative length"),
    ({"type": "object", "anyOf": []}, "empty anyOf"),
])
def test_invalid_schemas_still_refused_with_the_meta_schemas_reason(schema, why) -> None:
    assert not surely_valid(schema), why
    with pytest.raises(InvalidToolsError, match="invalid parameter schema"):
        ToolRegistry.from_tools([{"name": "f", "parameters": schema}])


@pytest.mark.parametrize("schema", [
    {"type": "object", "properties": {"a": {"$ref": "#/$defs/x"}}, "$defs": {"x": {}}},
    {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object"},
    {"type": "object", "properties": {"a": {"pattern": "^x"}}},
])
def test_what_it_does_not_check_is_left_to_the_meta_schema(schema) -> None:
    assert not surely_valid(schema)
