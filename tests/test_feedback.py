"""Feedback text for the model: exact, compact, bounded, and shaped as each API accepts."""

from __future__ import annotations

import pydantic
import pytest
import toolcodec as codec
from anthropic.types import TextBlockParam, ToolResultBlockParam
from hypothesis import given, settings
from hypothesis import strategies as st
from openai.types.chat import ChatCompletionMessageParam
from toolcodec import errors as E
from toolcodec.results.feedback import RETRYABLE_CODES, build_feedback

TOOLS = [{"type": "function", "function": {
    "name": "get_weather",
    "parameters": {"type": "object",
                   "properties": {"city": {"type": "string"},
                                  "unit": {"enum": ["celsius", "fahrenheit"]},
                                  "days": {"type": "integer"}},
                   "required": ["city"]}}}]
OPENAI_MESSAGE = pydantic.TypeAdapter(ChatCompletionMessageParam)


def decode(text):
    return codec.decode(text, tools=TOOLS)


def call(args: str, name: str = "get_weather") -> str:
    return f'<tool_call>{{"name": "{name}", "arguments": {args}}}</tool_call>'


def test_unknown_tool_names_the_closest_known_tool() -> None:
    fb = build_feedback(decode(call('{"city": "Oslo"}', name="get_wether")), tools=TOOLS)
    assert fb.retryable and fb.codes == [E.UNKNOWN_TOOL]
    assert 'no tool named "get_wether"' in fb.text
    assert 'Did you mean "get_weather"?' in fb.text


def test_unknown_tool_far_from_any_name_lists_the_tools_without_a_guess() -> None:
    fb = build_feedback(decode(call("{}", name="launch_rockets")), tools=TOOLS)
    assert "Did you mean" not in fb.text
    assert 'Available tools: "get_weather"' in fb.text


def test_enum_violation_names_pointer_found_value_and_allowed_values() -> None:
    fb = build_feedback(decode(call('{"city": "Oslo", "unit": "kelvin"}')), tools=TOOLS)
    assert 'Tool "get_weather", argument /unit' in fb.text
    assert "'kelvin'" in fb.text
    assert 'Allowed values: "celsius", "fahrenheit".' in fb.text


def test_type_violation_says_expected_and_found() -> None:
    fb = build_feedback(decode(call('{"city": "Oslo", "days": "soon"}')), tools=TOOLS)
    assert "argument /days" in fb.text and "'soon'" in fb.text
    assert 'Expected type: "integer".' in fb.text


def test_missing_required_argument() -> None:
    fb = build_feedback(decode(call('{"days": 2}')), tools=TOOLS)
    assert "(the arguments object)" in fb.text and "'city' is a required property" in fb.text


def test_arithmetic_asks_for_the_computed_value() -> None:
    fb = build_feedback(decode(call('{"city": "Oslo", "days": 2+3}')), tools=TOOLS)
    assert fb.codes == [E.ARITHMETIC_EXPRESSION] and fb.retryable
    assert "`2+3`" in fb.text and "send the number" in fb.text


def test_invalid_json_and_invalid_xml_keep_the_decoder_message() -> None:
    fb = build_feedback(decode(call('{"city": "Oslo", "days": [1, 2}')), tools=TOOLS)
    assert fb.codes and all(c in RETRYABLE_CODES for c in fb.codes)
    assert fb.text.startswith("Your last output could not be used.")


def test_repairs_already_made_are_listed_so_the_model_does_not_redo_them() -> None:
    text = call('{"city": "Oslo",}') + call('{"city": "Oslo", "unit": "kelvin"}')
    result = decode(text)
    assert "json.trailing_comma" in result.repairs and not result.ok
    fb = build_feedback(result, tools=TOOLS)
    assert "Already repaired automatically" in fb.text and "json.trailing_comma" in fb.text


def test_our_failures_are_not_retryable() -> None:
    for code in (E.TIMEOUT, E.WORKER_LOST, E.REJECTED, E.INTERNAL_ERROR, E.BAD_REQUEST,
                 E.BACKEND_UNAVAILABLE):
        envelope = {"status": "error", "op": "decode", "backend": "process", "result": None,
                    "error": {"code": code, "message": "x"}, "elapsed_ms": 1.0}
        fb = build_feedback(envelope)
        assert not fb.retryable and fb.codes == [code]


def test_no_errors_gives_empty_feedback() -> None:
    fb = build_feedback(decode(call('{"city": "Oslo"}')), tools=TOOLS)
    assert fb.text == "" and not fb.retryable


@settings(max_examples=40)
@given(st.integers(min_value=1, max_value=100), st.integers(min_value=200, max_value=5000))
def test_text_is_bounded_whatever_the_number_of_errors(n: int, limit: int) -> None:
    calls = "".join(call(f'{{"city": "Oslo", "unit": "u{i}"}}') for i in range(n))
    result = codec.decode(calls, tools=TOOLS).to_dict()
    fb = build_feedback(result, tools=TOOLS, max_chars=limit)
    assert len(fb.text) <= limit
    assert fb.codes == [E.SCHEMA_VIOLATION]


def test_long_values_are_not_echoed_in_full() -> None:
    secret = "x" * 5000
    fb = build_feedback(decode(call(f'{{"city": "Oslo", "unit": "{secret}"}}')), tools=TOOLS)
    assert secret not in fb.text and len(fb.text) < 1000


# -- API shapes -------------------------------------------------------------------------------


def native_message(args: str) -> dict:
    return {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_ok", "type": "function",
         "function": {"name": "get_weather", "arguments": '{"city": "Oslo"}'}},
        {"id": "call_bad", "type": "function",
         "function": {"name": "get_weather", "arguments": args}}]}


def test_openai_answers_every_native_call_id_and_validates_as_a_message() -> None:
    message = native_message('{"days": 1}')
    fb = build_feedback(codec.decode(message, tools=TOOLS), tools=TOOLS)
    out = fb.as_openai(message)
    assert [m["tool_call_id"] for m in out] == ["call_ok", "call_bad"]
    assert out[1]["content"] == fb.text and "'city' is a required property" in fb.text
    assert "Not run" in out[0]["content"]
    for m in out:
        OPENAI_MESSAGE.validate_python(m)


def test_openai_without_native_calls_is_one_user_message() -> None:
    fb = build_feedback(decode(call("{}", name="nope")), tools=TOOLS)
    out = fb.as_openai()
    assert out == [{"role": "user", "content": fb.text}]
    OPENAI_MESSAGE.validate_python(out[0])


def test_anthropic_tool_result_is_marked_as_error() -> None:
    fb = build_feedback(decode(call("{}", name="nope")), tools=TOOLS)
    message = fb.as_anthropic(["toolu_1"])
    assert message["role"] == "user"
    (block,) = message["content"]
    assert block["is_error"] is True and block["tool_use_id"] == "toolu_1"
    pydantic.TypeAdapter(ToolResultBlockParam).validate_python(block)
    text_message = fb.as_anthropic()
    pydantic.TypeAdapter(TextBlockParam).validate_python(text_message["content"][0])


def test_hermes_tool_response_wraps_json_with_the_tool_name() -> None:
    import orjson

    fb = build_feedback(decode(call('{"days": 1}')), tools=TOOLS)
    msg = fb.as_hermes()
    assert msg["role"] == "tool"
    body = msg["content"]
    assert body.startswith("<tool_response>\n") and body.endswith("\n</tool_response>")
    inner = orjson.loads(body[len("<tool_response>\n"):-len("\n</tool_response>")])
    assert inner == {"name": "get_weather", "error": fb.text}


@pytest.mark.parametrize("code", sorted(E.ALL_CODES))
def test_every_error_code_gives_a_non_empty_line(code: str) -> None:
    result = {"ok": False, "errors": [{"code": code, "message": "something went wrong"}],
              "repairs": []}
    fb = build_feedback(result)
    assert fb.text.count("\n- ") == 1 and fb.retryable == (code in RETRYABLE_CODES)
