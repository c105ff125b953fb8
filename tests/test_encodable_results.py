"""Every result is JSON data: ``orjson.dumps(result.to_dict())`` works for any str input.

Python strings may hold lone surrogates (``surrogateescape`` decoding, ``\\uD800`` escapes);
UTF-8 cannot, so the codec replaces them with U+FFFD and says so.
"""

from __future__ import annotations

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st

import codec
from codec.kindaxml import parse as parse_kindaxml

TOOLS = [{"name": "note", "parameters": {"type": "object", "properties": {"text": {}}}}]
SURROGATES = st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF)
FRAGMENTS = st.sampled_from([
    "<tool_call>", "</tool_call>", '{"name": "note", "arguments": {"text": "', '"}}',
    "<think>", "</think>", "<function=note>", "<parameter=text>", "</parameter>",
    "\\ud800", "\\uDC00", "<cite>", "</cite>", "&#xD800;", "'", ",",
])
TEXT = st.lists(st.one_of(st.text(max_size=8), SURROGATES, FRAGMENTS), max_size=24).map("".join)


@settings(max_examples=300)
@given(TEXT)
def test_decode_result_always_encodes(text: str) -> None:
    result = codec.decode(text, tools=TOOLS).to_dict()
    orjson.dumps(result)
    assert not any(e["code"] == "internal_error" for e in result["errors"])


@settings(max_examples=300)
@given(TEXT)
def test_repair_json_result_always_encodes(text: str) -> None:
    orjson.dumps(codec.repair_json(text).to_dict())


@settings(max_examples=200)
@given(TEXT)
def test_kindaxml_result_always_encodes(text: str) -> None:
    orjson.dumps(parse_kindaxml(text).to_dict())


def test_replacement_is_named_and_keeps_offsets() -> None:
    text = 'ok \ud800 <tool_call>{"name": "note", "arguments": {"text": "a\\ud800b"}}</tool_call>'
    result = codec.decode(text, tools=TOOLS)
    assert result.content == "ok \ufffd"
    assert result.calls[0].arguments == {"text": "a\ufffdb"}
    assert "text.surrogate_replaced" in result.calls[0].repairs
    assert "text.surrogate_replaced" in result.to_dict()["repairs"]
    assert sum(s.end - s.start for s in result.spans) == len(text)
    fixed = codec.repair_json('["\\udc00"]')
    assert fixed.value == ["\ufffd"] and fixed.repairs == ["text.surrogate_replaced"]
    marked = parse_kindaxml("x\udc00y")
    assert marked.recoveries[0].reason == "surrogate_replaced"
    assert marked.recoveries[0].position == 1


def test_deep_arguments_never_exhaust_the_stack() -> None:
    tools = [{"name": "g", "parameters": {"type": "object", "properties": {
        "a": {"type": "array", "items": {"type": "array"}}}}}]
    deep = "[" * 500 + "1" + "]" * 500
    for text in (f'<tool_call>{{"name": "g", "arguments": {{"a": {deep}}}}}</tool_call>',
                 f"<tool_call><function=g><parameter=a>{deep}</parameter></function></tool_call>",
                 f"<g><a>{deep}</a></g>"):
        result = codec.decode(text + "\ud800", tools=tools)
        assert result.ok, result.errors
        assert "text.surrogate_replaced" in result.to_dict()["repairs"]
    too_deep: object = "x"
    for _ in range(5000):
        too_deep = [too_deep]
    result = codec.validate("g", {"a": too_deep}, tools=tools)
    assert [e.code for e in result.errors] == ["nesting_too_deep"]
