"""Tool results: structured when valid, repaired when possible, raw text otherwise."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st
from toolcodec.results.toolresults import ResultSchemas, validate_result
from toolcodec.schema.tools import InvalidToolsError

WEATHER_OUT = {"type": "object", "properties": {"temp": {"type": "number"},
                                                "sunny": {"type": "boolean"}},
               "required": ["temp"]}
TOOLS = [
    {"type": "function", "function": {"name": "weather", "parameters": {"type": "object"},
                                      "output_schema": WEATHER_OUT}},
    {"name": "mcp_tool", "inputSchema": {"type": "object"},
     "outputSchema": {"type": "array", "items": {"type": "integer"}}},
    {"name": "no_schema"},
]
SCHEMAS = ResultSchemas.from_tools(TOOLS)


def test_registry_reads_both_spellings_and_skips_tools_without_one() -> None:
    assert SCHEMAS.names() == ["weather", "mcp_tool"]


def test_valid_output_is_structured_and_unchanged() -> None:
    r = validate_result("weather", '{"temp": 21.5, "sunny": true}', schemas=SCHEMAS)
    assert r.to_dict() == {"ok": True, "mode": "structured", "value": {"temp": 21.5,
                           "sunny": True}, "repairs": [], "errors": []}
    assert validate_result("mcp_tool", [1, 2], schemas=SCHEMAS).mode == "structured"


def test_broken_output_is_repaired_and_says_how() -> None:
    r = validate_result("weather", "{'temp': '21', sunny: True,}", schemas=SCHEMAS)
    assert r.ok and r.mode == "repaired" and r.value == {"temp": 21, "sunny": True}
    assert {"json.single_quotes", "json.trailing_comma", "schema.coerce_number"} <= set(r.repairs)


def test_valid_json_with_the_wrong_types_is_coerced() -> None:
    r = validate_result("mcp_tool", '["1", 2]', schemas=SCHEMAS)
    assert r.ok and r.mode == "repaired" and r.value == [1, 2]


def test_output_that_cannot_be_made_valid_passes_on_as_raw_text() -> None:
    r = validate_result("weather", '{"humidity": 3}', schemas=SCHEMAS)
    assert not r.ok and r.mode == "raw_text" and r.value == '{"humidity": 3}'
    assert r.errors[0].code == "schema_violation" and "'temp' is a required" in r.errors[0].message


def test_non_json_output_is_raw_text() -> None:
    r = validate_result("mcp_tool", "Error: upstream said no", schemas=SCHEMAS)
    assert not r.ok and r.mode == "raw_text" and r.value == "Error: upstream said no"


def test_no_schema_means_raw_text_and_ok() -> None:
    assert validate_result("no_schema", "anything", schemas=SCHEMAS).to_dict() == {
        "ok": True, "mode": "raw_text", "value": "anything", "repairs": [], "errors": []}
    r = validate_result("unknown", {"a": 1}, schemas=SCHEMAS)
    assert r.ok and r.value == '{"a":1}'


def test_schemas_given_directly_and_invalid_ones_are_refused() -> None:
    s = ResultSchemas({"t": {"type": "string"}})
    assert validate_result("t", '"x"', schemas=s).mode == "structured"
    with pytest.raises(InvalidToolsError, match="output schema of 't'"):
        ResultSchemas({"t": {"type": 12}})
    with pytest.raises(InvalidToolsError):
        ResultSchemas({"t": "not a schema"})


json_values = st.recursive(
    st.none() | st.booleans() | st.integers(-10**6, 10**6) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                 max_size=4),
    max_leaves=20)


@given(st.one_of(st.text(max_size=200), json_values))
def test_never_raises_and_always_encodes(output) -> None:
    for tool in ("weather", "mcp_tool", "no_schema"):
        r = validate_result(tool, output, schemas=SCHEMAS)
        orjson.dumps(r.to_dict())
        assert r.mode in ("structured", "repaired", "raw_text")
        assert r.ok == (not r.errors)
        if r.mode == "raw_text":
            assert isinstance(r.value, str)


def test_validate_result_op_through_the_pool_counts_tool_and_mode() -> None:
    from prometheus_client import CollectorRegistry
    from toolcodec.pool import Pool

    registry = CollectorRegistry()
    with Pool("process", workers=1, timeout_ms=5000, registry=registry) as pool:
        outs = [pool.submit("validate_result", {"tool": "weather", "output": out, "tools": TOOLS})
                for out in ('{"temp": 1}', "{'temp': '2',}", "nope", '{"temp": 3}')]
        bad = pool.submit("validate_result", {"tool": "weather"})
    assert [o["result"]["mode"] for o in outs] == ["structured", "repaired", "raw_text",
                                                   "structured"]
    assert outs[0]["result"]["tool"] == "weather" and bad["error"]["code"] == "bad_request"
    count = registry.get_sample_value
    assert count("toolcodec_tool_results_total", {"tool": "weather", "mode": "structured"}) == 2
    assert count("toolcodec_tool_results_total", {"tool": "weather", "mode": "raw_text"}) == 1
