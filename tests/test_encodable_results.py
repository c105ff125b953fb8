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


class Panic(BaseException):
    """Stands for ``pyo3_runtime.PanicException``: a BaseException, not an Exception."""


class PanicsOnCompare(str):
    """A string argument whose comparison panics (jsonschema compares it with an enum)."""

    def __eq__(self, other: object) -> bool:
        raise Panic("explicit panic")

    __hash__ = str.__hash__


ENUM_TOOLS = [{"name": "pick", "parameters": {"type": "object", "properties": {
    "x": {"enum": ["a", {"b": 1}]}}}}]


def test_a_panic_inside_validate_is_an_internal_error() -> None:
    result = codec.validate("pick", {"x": PanicsOnCompare("c")}, tools=ENUM_TOOLS)
    assert [e.code for e in result.errors] == ["internal_error"]
    assert result.errors[0].details["exception"] == "Panic"
    orjson.dumps(result.to_dict())


class PanickingHeuristic:
    id = "custom.panics"
    phase = "pre-parse"

    def applies(self, ctx: object) -> bool:
        raise Panic("explicit panic")

    def run(self, ctx: object) -> None:  # pragma: no cover - applies() never says yes
        raise AssertionError


def test_a_panic_inside_decode_is_an_internal_error() -> None:
    c = codec.ToolCallCodec(TOOLS, heuristics=[PanickingHeuristic()])
    result = c.decode("<note><text>hi</text></note>")
    assert [e.code for e in result.errors] == ["internal_error"]
    orjson.dumps(result.to_dict())


def test_a_panic_inside_a_job_is_an_internal_error_and_interrupts_still_propagate() -> None:
    from toolcodec.worker.jobs import run_job

    job = {"id": "j1", "op": "validate", "payload": {
        "name": "pick", "arguments": {"x": PanicsOnCompare("c")}, "tools": ENUM_TOOLS}}
    out = run_job(job)
    assert out["status"] == "ok" and out["result"]["errors"][0]["code"] == "internal_error"

    class Interrupting(str):
        def __eq__(self, other: object) -> bool:
            raise KeyboardInterrupt

        __hash__ = str.__hash__

    import pytest

    with pytest.raises(KeyboardInterrupt):
        codec.validate("pick", {"x": Interrupting("c")}, tools=ENUM_TOOLS)


def test_python_integers_past_64_bits_and_surrogates_encode_from_validate() -> None:
    result = codec.validate("note", {"n": 2**70, "m": -(2**64), "huge": 10**400,
                                     "u": 2**64 - 1, "s": "a\ud800", "\udc00k": [2**65]},
                            tools=INT_TOOLS)
    out = orjson.loads(orjson.dumps(result.to_dict()))
    assert out["arguments"] == {"n": float(2**70), "m": float(-(2**64)), "huge": None,
                                "u": 2**64 - 1, "s": "a\ufffd", "\ufffdk": [float(2**65)]}
    assert set(out["repairs"]) >= {"json.big_integer", "json.nonfinite_number",
                                   "text.surrogate_replaced"}
    # the schema then judges the float: 2**70 is no integer for the codec
    bad = codec.validate("note", {"n": 2**70}, tools=INT_TOOLS)
    assert not bad.ok and bad.errors[0].details["path"] == "/n"


def test_native_message_arguments_past_64_bits_encode() -> None:
    message = {"role": "assistant", "tool_calls": [{"type": "function", "function": {
        "name": "note", "arguments": {"xs": [2**80, 1], "text": "\udfff"}}}]}
    encoded = orjson.loads(orjson.dumps(codec.decode(message, tools=INT_TOOLS).to_dict()))
    assert encoded["errors"][0]["path"] == "/xs/0"  # a float is not an integer item
    encoded = orjson.loads(orjson.dumps(codec.decode(message, tools=TOOLS).to_dict()))
    assert encoded["calls"][0]["arguments"] == {"xs": [float(2**80), 1], "text": "\ufffd"}
    assert {"json.big_integer", "text.surrogate_replaced"} <= set(encoded["repairs"])


def test_values_json_cannot_carry_are_named_and_the_result_still_encodes() -> None:
    result = codec.validate("note", {"text": b"raw", 7: "seven", "s": {1, 2}}, tools=TOOLS)
    assert not result.ok
    assert sorted((e.details["path"], e.message.split(": ", 1)[1]) for e in result.errors) == [
        ("", "a Python int key is not a JSON value"),
        ("/s", "a Python set is not a JSON value"),
        ("/text", "a Python bytes is not a JSON value")]
    encoded = orjson.loads(orjson.dumps(result.to_dict()))
    assert encoded["arguments"]["text"] == "b'raw'" and encoded["arguments"]["7"] == "seven"


def test_an_unknown_tool_named_with_a_surrogate_encodes() -> None:
    result = codec.validate("no\ud800pe", {}, tools=TOOLS)
    assert [e.code for e in result.errors] == ["unknown_tool"]
    orjson.dumps(result.to_dict())


# What a result may carry before it is made encodable: surrogates anywhere, integers past
# 64 bits, non-string keys, tuples, nesting deeper than orjson writes.
RAW_TEXT = st.lists(st.one_of(st.text(max_size=6), SURROGATES), max_size=4).map("".join)
RAW_VALUE = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**70), 2**70) | st.floats(allow_nan=False)
    | RAW_TEXT,
    lambda inner: st.lists(inner, max_size=3) | st.tuples(inner)
    | st.dictionaries(RAW_TEXT | st.integers(0, 3), inner, max_size=3),
    max_leaves=12)


def _nested(depth: int) -> list:
    value: list = []
    for _ in range(depth):
        value = [value]
    return value


DEEP = st.integers(250, 300).map(_nested)  # past what orjson writes


@settings(max_examples=300)
@given(RAW_TEXT, st.none() | RAW_TEXT,
       st.lists(st.dictionaries(RAW_TEXT, RAW_VALUE | DEEP, max_size=3), max_size=2),
       st.lists(st.tuples(RAW_TEXT, st.dictionaries(st.sampled_from(["raw", "tool", "n"]),
                                                    RAW_TEXT | st.integers(0, 9),
                                                    max_size=2)), max_size=2))
def test_the_quick_check_answers_as_the_part_by_part_work(content, reasoning, arguments,
                                                          errors) -> None:
    """encodable_result returns a result untouched only when the part-by-part work would
    have left it so; else it does that work."""
    from toolcodec.results.errors import CodecError
    from toolcodec.results.result import Call, DecodeResult, _made_encodable, encodable_result

    def made() -> DecodeResult:
        return DecodeResult(ok=not errors, path="xml", content=content, reasoning=reasoning,
                            calls=[Call("note", dict(a), ["r"]) for a in arguments],
                            repairs=["r"],
                            errors=[CodecError("unknown_tool", m, dict(d)) for m, d in errors])

    quick, slow = encodable_result(made()), _made_encodable(made())
    assert quick.to_dict() == slow.to_dict()
    assert (quick.content, quick.reasoning) == (slow.content, slow.reasoning)
    assert [c.repairs for c in quick.calls] == [c.repairs for c in slow.calls]
