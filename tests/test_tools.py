"""Tool registry: accepted shapes, compiled validators, and every rejection."""

from __future__ import annotations

import pytest
from toolcodec.schema.tools import InvalidToolsError, ToolRegistry, ToolSpec

WEATHER_SCHEMA = {
    "type": "object",
    "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
    "required": ["city"],
}


def openai_tool(name: str, schema: dict | None = None, description: str = "") -> dict:
    function: dict = {"name": name, "description": description}
    if schema is not None:
        function["parameters"] = schema
    return {"type": "function", "function": function}


def test_openai_shape_is_registered_with_compiled_validator():
    reg = ToolRegistry.from_tools([openai_tool("get_weather", WEATHER_SCHEMA, "Weather")])
    spec = reg.get("get_weather")
    assert isinstance(spec, ToolSpec)
    assert spec.description == "Weather"
    assert spec.schema == WEATHER_SCHEMA
    assert spec.validator.is_valid({"city": "Oslo", "days": 3})
    assert not spec.validator.is_valid({"days": 3})


def test_bare_shape_and_input_schema_spelling():
    reg = ToolRegistry.from_tools(
        [
            {"name": "a", "parameters": WEATHER_SCHEMA},
            {"name": "b", "input_schema": WEATHER_SCHEMA},
            {"name": "c", "inputSchema": WEATHER_SCHEMA},
        ]
    )
    assert reg.names() == ["a", "b", "c"]
    for name in "abc":
        assert not reg.get(name).validator.is_valid({"city": 1})


def test_missing_parameters_means_an_object_with_no_properties():
    reg = ToolRegistry.from_tools([openai_tool("ping")])
    spec = reg.get("ping")
    assert spec.schema == {"type": "object", "properties": {}}
    assert spec.validator.is_valid({})
    assert not spec.validator.is_valid([])


def test_none_gives_empty_registry_and_lookup_misses():
    reg = ToolRegistry.from_tools(None)
    assert len(reg) == 0
    assert reg.names() == []
    assert reg.get("anything") is None


def test_order_len_and_contains():
    reg = ToolRegistry.from_tools([openai_tool(n) for n in ("z", "a", "m")])
    assert reg.names() == ["z", "a", "m"]
    assert len(reg) == 3
    assert "a" in reg and "b" not in reg


def test_integer_type_is_strict_so_floats_get_coerced():
    reg = ToolRegistry.from_tools([{"name": "t", "parameters": WEATHER_SCHEMA}])
    validator = reg.get("t").validator
    assert validator.is_valid({"city": "x", "days": 5})
    assert not validator.is_valid({"city": "x", "days": 5.0})
    assert not validator.is_valid({"city": "x", "days": True})


def test_declared_draft_07_keeps_its_tuple_items_meaning():
    schema = {
        "$schema": "http://json-schema.org/draft-07/schema#",
        "type": "object",
        "properties": {"pair": {"type": "array", "items": [{"type": "string"}]}},
    }
    reg = ToolRegistry.from_tools([{"name": "t", "parameters": schema}])
    assert not reg.get("t").validator.is_valid({"pair": [1]})
    assert reg.get("t").validator.is_valid({"pair": ["a", 1]})


@pytest.mark.parametrize(
    ("tools", "fragment"),
    [
        ("not a list", "must be a list"),
        ([["x"]], "tools[0]: expected an object, got list"),
        ([{"parameters": {}}], "tools[0]: 'name' must be a non-empty string"),
        ([{"name": "  "}], "'name' must be a non-empty string"),
        ([{"name": 7}], "'name' must be a non-empty string"),
        ([{"type": "function", "function": "f"}], "'function' must be an object"),
        ([{"type": "retrieval", "name": "r"}], "unsupported tool type 'retrieval'"),
        ([{"name": "d", "description": 3}], "'description' must be a string"),
        ([{"name": "p", "parameters": []}], "'parameters' must be a JSON Schema (an object or"),
        ([{"name": "p", "parameters": {"type": "string"}}], "must describe an object"),
        (
            [{"name": "p", "parameters": {"type": "object", "properties": {"a": {"type": 5}}}}],
            "invalid parameter schema",
        ),
    ],
)
def test_rejections_name_the_tool_and_problem(tools, fragment):
    with pytest.raises(InvalidToolsError) as info:
        ToolRegistry.from_tools(tools)
    assert fragment in str(info.value)


def test_duplicate_names_report_both_positions():
    with pytest.raises(InvalidToolsError) as info:
        ToolRegistry.from_tools([openai_tool("a"), openai_tool("b"), {"name": "a"}])
    message = str(info.value)
    assert "tools[2]" in message and "tools[0]" in message and "'a'" in message


def test_bad_schema_message_says_which_tool_and_where():
    bad = {"type": "object", "properties": {"n": {"type": "integer", "minimum": "zero"}}}
    with pytest.raises(InvalidToolsError) as info:
        ToolRegistry.from_tools([openai_tool("ok"), openai_tool("calc", bad)])
    message = str(info.value)
    assert message.startswith("tools[1] ('calc')")
    assert "/properties/n/minimum" in message


def test_invalid_tools_error_is_a_value_error():
    assert issubclass(InvalidToolsError, ValueError)
