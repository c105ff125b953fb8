"""Every result is JSON data: ``orjson.dumps(result.to_dict())`` works for any str input.

Python strings may hold lone surrogates (``surrogateescape`` decoding, ``\\uD800`` escapes);
UTF-8 cannot, so the codec replaces them with U+FFFD and says so.
"""

from __future__ import annotations

import orjson
import toolcodec as codec
from hypothesis import given, settings
from hypothesis import strategies as st
from toolcodec.kindaxml import parse as parse_kindaxml

TOOLS = [{"name": "note", "parameters": {"type": "object", "properties": {"text": {}}}}]
SURROGATES = st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF)
FRAGMENTS = st.sampled_from([
    "<tool_call>", "</tool_call>", '{"name": "note", "arguments": {"text": "', '"}}',
    "<think>", "</think>", "<function=note>", "<parameter=text>", "</parameter>",
    "\\ud800", "\\uDC00", "<cite>", "</cite>", "&#xD800;", "'", ",",
])
NUMBERS = st.sampled_from([
    "99999999999999999999", "-99999999999999999999", "0x99999999999999999",
    "-0x8000000000000001", "0xFFFFFFFFFFFFFFFFF", "1.8446744073709552e+19", "1e400", "…", "...",
    "18446744073709551616", "-9223372036854775809",
])
NESTING = st.integers(min_value=0, max_value=300).map(lambda n: "[" * n + "]" * n)
TEXT = st.lists(st.one_of(st.text(max_size=8), SURROGATES, FRAGMENTS, NUMBERS, NESTING),
                max_size=24).map("".join)
INT_TOOLS = [{"name": "note", "parameters": {"type": "object", "properties": {
    "n": {"type": "integer"}, "xs": {"type": "array", "items": {"type": "integer"}}}}}]


@settings(max_examples=300)
@given(st.lists(NUMBERS | st.sampled_from(['"1e30"', '"123"', "2.0", "[", "]", ","]),
                max_size=6).map(lambda parts: " ".join(parts)))
def test_numbers_of_every_width_encode(numbers: str) -> None:
    for text in (numbers, f"[{numbers}]", '{"n": ' + numbers + "}"):
        orjson.dumps(codec.repair_json(text).to_dict())
        call = f'<tool_call>{{"name": "note", "arguments": {{"n": {numbers}, "xs": [{numbers}]}}}}'
        orjson.dumps(codec.decode(call + "</tool_call>", tools=INT_TOOLS).to_dict())
        orjson.dumps(codec.decode(call.replace(": ", ': "', 1), tools=INT_TOOLS).to_dict())


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
        result = codec.decode(text + "\ud800", tools=tools, limits=codec.Limits(max_depth=600))
        assert result.ok, result.errors
        assert "text.surrogate_replaced" in result.to_dict()["repairs"]
    too_deep: object = "x"
    for _ in range(5000):
        too_deep = [too_deep]
    result = codec.validate("g", {"a": too_deep}, tools=tools)
    assert [e.code for e in result.errors] == ["nesting_too_deep"]
