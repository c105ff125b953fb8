"""Regressions found in our own held-out corpus (issue #27 items 5, 6 and 7), kept fixed: each
in batch and, where it is a decode, in every chunking of the stream (stream ≡ batch)."""

from __future__ import annotations

import json
import random

import pytest
import toolcodec as codec
from hypothesis import given, settings
from hypothesis import strategies as st
from toolcodec.decoding.codec import ToolCallCodec
from toolcodec.formats import deepseek

from tests.test_stream import check, chunkings

TOOLS = [
    {"name": "get_weather", "parameters": {"type": "object", "properties": {
        "city": {"type": "string"}, "unit": {"type": ["string", "null"]},
        "days": {"type": "integer", "maximum": 7}}, "required": ["city"]}},
    {"name": "calc", "parameters": {"type": "object", "properties": {"n": {"type": "integer"}}}},
    {"name": "run_shell", "parameters": {"type": "object", "properties": {
        "command": {"type": "string"}}, "required": ["command"]}},
    {"name": "f", "parameters": {"type": "object", "properties": {"a": {"type": "string"}}}},
    {"name": "set_alarm", "parameters": {"type": "object", "properties": {
        "time": {"type": "string"}, "label": {"type": ["string", "null"]},
        "note": {"anyOf": [{"type": "integer"}, {"type": "null"}]},
        "title": {"type": "string"}}, "required": ["time"]}},
]
CODEC = ToolCallCodec(TOOLS)
DS_BAR, DS_SP = "\uff5c", "\u2581"


def _ds(token: str) -> str:
    return "<" + DS_BAR + token.replace("_", DS_SP) + DS_BAR + ">"


def _every_chunking(text: str) -> None:
    for parts in chunkings(text, random.Random(len(text))):
        check(CODEC, text, parts)


def _qwen(name: str, **params: str) -> str:
    """A call as Qwen3-Coder's chat template renders it."""
    body = "".join(f"<parameter={k}>\n{v}\n</parameter>\n" for k, v in params.items())
    return f"<tool_call>\n<function={name}>\n{body}</function>\n</tool_call>"


# -- item 5: literals by schema ----------------------------------------------------------------


def test_qwen_xml_null_text_is_null_where_the_schema_admits_null() -> None:
    text = _qwen("set_alarm", time="07:30", label="null", note="null", title="null")
    r = CODEC.decode(text)
    assert r.ok and r.calls[0].arguments == {"time": "07:30", "label": None, "note": None,
                                             "title": "null"}  # a plain string keeps it
    _every_chunking(text)


def test_null_inside_a_json_value_stays_what_json_says() -> None:
    text = '<tool_call>{"name": "set_alarm", "arguments": {"time": "7", "label": "null"}}' \
           "</tool_call>"
    assert CODEC.decode(text).calls[0].arguments["label"] == "null"  # a JSON string is a string


# -- item 6: arithmetic ------------------------------------------------------------------------


@pytest.mark.parametrize("text", ['{"n": 2 ** 8}', '{"n": 2**8}', "[1, 10 ** 3]"])
def test_python_power_is_refused_as_arithmetic(text) -> None:
    r = codec.repair_json(text)
    assert not r.ok and r.errors[0].code == "arithmetic_expression"
    assert "**" in r.errors[0].details["expression"]


def test_markdown_bold_is_not_arithmetic() -> None:
    assert codec.repair_json('{"a": **x**}').value == {"a": "**x**"}
    assert codec.repair_json('["**bold**"]').value == ["**bold**"]


def test_arithmetic_inside_a_tool_call_is_refused() -> None:
    text = '<tool_call>{"name": "calc", "arguments": {"n": 2 ** 8}}</tool_call>'
    r = CODEC.decode(text)
    assert r.calls == [] and [e.code for e in r.errors] == ["arithmetic_expression"]
    assert r.content == text
    _every_chunking(text)


@pytest.mark.parametrize("text", [
    "<tool_call>\n<function=calc>\n<parameter=n>\n2 ** 8\n</parameter>\n</function>\n</tool_call>",
    '<tool_call>{"name": "calc", "arguments": {"n": "100 * 3"}}</tool_call>',
    "<calc><n>(1+2)*3</n></calc>",
])
def test_arithmetic_text_where_a_number_is_expected_is_refused_as_arithmetic(text) -> None:
    r = CODEC.decode(text)
    assert r.calls == [] and [e.code for e in r.errors] == ["arithmetic_expression"]
    assert r.errors[0].details["path"] == "/n" and r.errors[0].details["expression"]
    _every_chunking(text)


def test_text_that_is_no_arithmetic_stays_a_schema_violation() -> None:
    for value in ("2024-01-05", "abc", "10-20"):
        r = CODEC.decode(f"<calc><n>{value}</n></calc>")
        assert [e.code for e in r.errors] == ["schema_violation"], value


# -- item 6: blanks inside close tags ----------------------------------------------------------


@pytest.mark.parametrize("text", [
    "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</ parameter >\n</function>"
    "\n</ tool_call >",
    '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</ tool_call >',
    '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call >',
    '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</\ttool_call>',
])
def test_close_tags_with_blanks_are_read(text) -> None:
    r = CODEC.decode(text)
    assert r.ok and r.calls[0].arguments == {"city": "Paris"} and r.content == ""
    assert "xml.normalize_close_tag" in r.calls[0].repairs
    _every_chunking(text)


def test_a_close_tag_with_blanks_inside_a_json_string_is_text() -> None:
    text = '<tool_call>{"name": "run_shell", "arguments": {"command": "echo \\"</ tool_call >'
    text += '"}}</tool_call>'
    r = CODEC.decode(text)
    assert r.ok and r.calls[0].arguments == {"command": 'echo "</ tool_call >'}
    _every_chunking(text)


# -- item 6: a fenced JSON block inside <tool_call> --------------------------------------------


@pytest.mark.parametrize("fence", ["```json", "```", "``` json"])
def test_a_fenced_json_block_inside_tool_call_is_an_envelope_call(fence) -> None:
    text = (f'Checking.\n<tool_call>\n{fence}\n{{"name": "get_weather", "arguments": '
            '{"city": "Paris"}}\n```\n</tool_call>')
    r = CODEC.decode(text)
    assert r.ok and r.path == "xml" and r.content == "Checking."
    assert r.calls[0].arguments == {"city": "Paris"} and r.calls[0].format == "hermes"
    assert r.calls[0].repairs == ["json.code_fence"]
    _every_chunking(text)


def test_a_fenced_xml_call_inside_tool_call_is_still_read() -> None:
    """Only a fence around JSON is the envelope's body; Qwen XML in a fence is read as before."""
    text = ("<tool_call>\n```xml\n<function=get_weather>\n<parameter=city>\nParis\n"
            "</parameter>\n</function>\n```\n</tool_call>")
    assert _calls_of(CODEC.decode(text)) == [("get_weather", {"city": "Paris"})]
    _every_chunking(text)


def _calls_of(result) -> list[tuple[str, dict]]:
    return [(c.name, c.arguments) for c in result.calls]


def test_tool_call_followed_by_backticks_in_prose_is_still_prose() -> None:
    text = "Use the <tool_call> tag, not ``quotes``."
    r = CODEC.decode(text)
    assert r.calls == [] and r.errors == [] and r.content == text
    _every_chunking(text)


# -- item 6: a pythonic \u escape --------------------------------------------------------------


@pytest.mark.parametrize("text, value", [
    ("[f(a='\\ug')]", "\\ug"),
    ("[f(a='\\x4')]", "\\x4"),
    ("[f(a='\\U0001F600')]", "\U0001F600"),
    ("[f(a='caf\\u00e9')]", "café"),
])
def test_pythonic_u_escapes_never_fail(text, value) -> None:
    r = CODEC.decode(text)
    assert r.ok and r.calls[0].arguments == {"a": value}
    _every_chunking(text)


# -- item 6: DeepSeek's token, in ASCII, inside a JSON string ----------------------------------


@pytest.mark.parametrize("token", ["<|tool_call_begin|>", "<|tool_call_end|>",
                                   "<|tool_calls_begin|>", "<|tool▁call▁begin|>"])
def test_deepseek_call_whose_string_holds_a_token_spelling(token) -> None:
    args = {"command": f"echo '{token}'"}
    for inner in (f"function{_ds('tool_sep')}run_shell\n```json\n{json.dumps(args)}\n```",
                  f"run_shell{_ds('tool_sep')}{json.dumps(args)}"):
        text = (_ds("tool_calls_begin") + _ds("tool_call_begin") + inner + _ds("tool_call_end")
                + _ds("tool_calls_end"))
        r = CODEC.decode(text)
        assert r.ok and r.calls[0].arguments == args, r.errors
        _every_chunking(text)


def test_deepseek_unclosed_string_still_ends_at_the_token() -> None:
    body = (_ds("tool_call_begin") + 'run_shell' + _ds("tool_sep") + '{"command": "ls'
            + _ds("tool_call_end"))
    found = deepseek.read(body)
    assert found.calls == [("run_shell", '{"command": "ls')]


@given(st.text(st.sampled_from('ab "\\<|>_▁｜tool_call_begin'), max_size=40))
@settings(max_examples=200, database=None)
def test_deepseek_reads_any_string_argument(value) -> None:
    """Any string argument, tokens spelled in it or not, round-trips (what Hypothesis found)."""
    args = json.dumps({"command": value})
    body = _ds("tool_call_begin") + "run_shell" + _ds("tool_sep") + args + _ds("tool_call_end")
    found = deepseek.read(body)
    assert not found.errors and [json.loads(a) for _, a in found.calls] == [{"command": value}]


# -- item 6: prose is not JSON -----------------------------------------------------------------


@pytest.mark.parametrize("text", ["Sorry, I cannot help with that.", "I cannot do that",
                                  "a,b", "hello world"])
def test_prose_with_no_json_is_not_a_value(text) -> None:
    r = codec.repair_json(text)
    assert not r.ok and r.value is None and r.errors[0].code == "invalid_json"
    assert "prose" in r.errors[0].message


@pytest.mark.parametrize("text, value", [
    ("abc", "abc"), ("ES2020", "ES2020"), ("https://example.com/a", "https://example.com/a"),
    ('Sure: {"a": 1}', {"a": 1}), ("42 is the answer", 42), ("null trailing prose", None),
])
def test_a_token_or_json_with_prose_around_it_is_still_read(text, value) -> None:
    r = codec.repair_json(text)
    assert r.ok and r.value == value


# -- item 7: a refused call's error carries its arguments --------------------------------------


def test_schema_violation_carries_the_arguments_as_read() -> None:
    text = '<tool_call>{"name": "get_weather", "arguments": {"days": "30"}}</tool_call>'
    r = CODEC.decode(text)
    first, second = r.to_dict()["errors"]
    assert first["code"] == second["code"] == "schema_violation"
    assert first["arguments"] == {"days": 30}  # as read and coerced, before it was refused
    assert "arguments" not in second  # once per call: the result stays linear
    _every_chunking(text)


def test_schema_violation_carries_the_arguments_in_every_path() -> None:
    qwen = _qwen("get_weather", days="30")
    native = {"role": "assistant", "content": None, "tool_calls": [{
        "id": "c0", "type": "function",
        "function": {"name": "get_weather", "arguments": '{"days": 30}'}}]}
    for source in (qwen, native):
        errors = CODEC.decode(source).to_dict()["errors"]
        assert errors[0]["arguments"] == {"days": 30}, source
    checked = codec.validate("get_weather", {"city": "Oslo", "days": 9}, tools=TOOLS)
    assert checked.to_dict()["errors"][0]["arguments"] == {"city": "Oslo", "days": 9}
    not_object = codec.validate("get_weather", [1, 2], tools=TOOLS).to_dict()["errors"][0]
    assert not_object["arguments"] == [1, 2]


def test_a_tool_s_text_output_is_its_string_value() -> None:
    """Prose is no JSON value, but a tool whose output schema is a string returns text: the
    whole text is the value (it was cut at its first comma)."""
    from toolcodec.results.toolresults import ResultSchemas, validate_result

    schemas = ResultSchemas({"t": {"type": "string"}, "o": {"type": "object"}})
    text = "The weather is sunny, 20 C."
    checked = validate_result("t", text, schemas=schemas)
    assert checked.ok and checked.value == text and checked.repairs == ["json.unquoted_value"]
    refused = validate_result("o", text, schemas=schemas)
    assert not refused.ok and refused.errors[0].code == "invalid_json"
