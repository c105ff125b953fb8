"""Schema regexes run in linear time (RE2); patterns RE2 cannot run make the tools invalid."""

from __future__ import annotations

import re
import threading

import pytest
import toolcodec as codec
from hypothesis import given
from hypothesis import strategies as st
from toolcodec.schema import patterns as schema_regex
from toolcodec.schema.tools import InvalidToolsError, ToolRegistry

EVIL = "^(a+)+$"


def finishes(fn, seconds: float = 60.0):
    """Run *fn* in a thread; fail (instead of hanging) if it does not finish. A backtracking
    engine needs hours on these inputs; RE2 needs microseconds, so the bound is generous."""
    out: list = []
    thread = threading.Thread(target=lambda: out.append(fn()), daemon=True)
    thread.start()
    thread.join(seconds)
    assert out, f"did not finish within {seconds} s"
    return out[0]


def tools(parameters):
    return [{"name": "t", "parameters": parameters}]


def call(arguments: str) -> str:
    return f'<tool_call>{{"name": "t", "arguments": {arguments}}}</tool_call>'


@pytest.mark.parametrize("n", [26, 40, 5000])
def test_pattern_properties_key_from_the_model_is_linear(n: int) -> None:
    t = tools({"type": "object", "patternProperties": {EVIL: False}})
    r = finishes(lambda: codec.decode(call(f'{{"{"a" * n}!": 1}}'), tools=t))
    assert r.ok  # the key does not match the pattern, so the false subschema does not apply
    r = finishes(lambda: codec.decode(call(f'{{"{"a" * n}": 1}}'), tools=t))
    assert not r.ok and r.errors[0].code == "schema_violation"


@pytest.mark.parametrize("where", ["pattern", "propertyNames", "additionalProperties"])
def test_every_regex_keyword_is_linear(where: str) -> None:
    schemas = {
        "pattern": {"type": "object", "properties": {"s": {"type": "string", "pattern": EVIL}}},
        "propertyNames": {"type": "object", "propertyNames": {"pattern": EVIL}},
        "additionalProperties": {"type": "object", "patternProperties": {EVIL: {}},
                                 "additionalProperties": False},
    }
    key, value = ("s", "a" * 40 + "!") if where == "pattern" else ("a" * 40 + "!", 1)
    r = finishes(lambda: codec.decode(call(f'{{"{key}": "{value}"}}'), tools=tools(
        schemas[where])))
    assert not r.ok and r.errors[0].code == "schema_violation"


@pytest.mark.parametrize("pattern", [r"(a)\1", "(?=x)", "(?<!y)z", r"\k<n>"])
def test_patterns_re2_cannot_run_make_the_tool_set_invalid(pattern: str) -> None:
    for schema in ({"type": "object", "properties": {"s": {"pattern": pattern}}},
                   {"type": "object", "patternProperties": {pattern: {}}}):
        with pytest.raises(InvalidToolsError, match="cannot be run safely|invalid parameter"):
            ToolRegistry.from_tools(tools(schema))


def test_unevaluated_properties_beside_pattern_properties_is_refused() -> None:
    schema = {"type": "object", "patternProperties": {"^x": {}}, "unevaluatedProperties": False}
    with pytest.raises(InvalidToolsError, match="unevaluatedProperties"):
        ToolRegistry.from_tools(tools(schema))


SIMPLE = st.sampled_from(["^a", "b$", "[0-9]+", "^[a-z_]+$", "x|y", "^.{2,4}$", "é"])


@given(SIMPLE, st.text(max_size=12))
def test_re2_agrees_with_re_on_common_patterns(pattern: str, text: str) -> None:
    assert schema_regex.search(pattern, text) == bool(re.search(pattern, text))


def test_boolean_parameter_schemas_are_accepted() -> None:
    c = codec.ToolCallCodec([{"name": "any", "parameters": True},
                             {"name": "never", "parameters": False},
                             {"name": "other"}])
    r = c.decode(call('{"x": 1}').replace('"t"', '"any"') + call("{}").replace('"t"', '"other"'))
    assert r.ok and [x.name for x in r.calls] == ["any", "other"]
    r = c.decode(call('{"x": 1}').replace('"t"', '"never"'))
    assert not r.ok and r.errors[0].code == "schema_violation" and r.errors[0].details["tool"] == \
        "never"


def test_nested_boolean_subschemas_coerce() -> None:
    schema = {"type": "object", "properties": {"n": {"type": "integer"}, "free": True,
                                               "none": False}}
    r = codec.decode(call('{"n": "5", "free": [1]}'), tools=tools(schema))
    assert r.ok and r.calls[0].arguments == {"n": 5, "free": [1]}
    r = codec.decode(call('{"none": 1}'), tools=tools(schema))
    assert not r.ok
