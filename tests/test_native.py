"""The native path: OpenAI assistant messages with ``tool_calls`` / ``function_call``."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st
from toolcodec import errors
from toolcodec.decoding.blocks import _merged_objects
from toolcodec.decoding.codec import ToolCallCodec
from toolcodec.decoding.native import read_message
from toolcodec.decoding.unread_markup import said
from toolcodec.results.result import encodable_result

from tests.test_decode import TOOLS, calls, codes, hermes


@pytest.fixture(scope="module")
def tc() -> ToolCallCodec:
    return ToolCallCodec(TOOLS)


def message(*fns, content=None, **extra):
    tool_calls = [{"id": f"call_{i}", "type": "function", "function": fn}
                  for i, fn in enumerate(fns)]
    return {"role": "assistant", "content": content, "tool_calls": tool_calls, **extra}


def test_native_calls_win(tc):
    msg = message({"name": "get_weather", "arguments": '{"city": "Oslo"}'},
                  {"name": "set_alarm", "arguments": {"hour": 6, "enabled": False}},
                  content="On it.")
    r = tc.decode(msg)
    assert r.ok and r.path == "native"
    assert calls(r) == [("get_weather", {"city": "Oslo"}),
                        ("set_alarm", {"hour": 6, "enabled": False})]
    assert r.content == "On it." and r.repairs == []
    assert all(c.span is None for c in r.calls)


def test_malformed_argument_string_is_repaired(tc):
    r = tc.decode(message({"name": "get_weather", "arguments": "{'city': 'Oslo',}"}))
    assert r.ok and calls(r) == [("get_weather", {"city": "Oslo"})]
    assert "json.single_quotes" in r.calls[0].repairs
    assert r.calls[0].repairs == [x for x in r.repairs if x in r.calls[0].repairs]


def test_empty_arguments_mean_no_arguments(tc):
    tools = [{"name": "ping", "parameters": {"type": "object"}}]
    r = ToolCallCodec(tools).decode(message({"name": "ping", "arguments": ""}))
    assert r.ok and calls(r) == [("ping", {})]


def test_bad_native_call_reported_good_kept(tc):
    msg = message({"name": "get_weather", "arguments": '{"city": "Oslo"}'},
                  {"name": "set_alarm", "arguments": '{"hour": 7, "enabled": "yes"}'},
                  {"name": "launch", "arguments": "{}"})
    r = tc.decode(msg)
    assert not r.ok and r.path == "native"
    assert calls(r) == [("get_weather", {"city": "Oslo"})]
    assert codes(r)[0] == errors.SCHEMA_VIOLATION and codes(r)[-1] == errors.UNKNOWN_TOOL
    first = r.errors[0].to_dict()
    assert first["call_index"] == 1 and first["raw"] == '{"hour": 7, "enabled": "yes"}'


def test_legacy_function_call(tc):
    r = tc.decode({"role": "assistant", "content": None,
                   "function_call": {"name": "get_weather", "arguments": '{"city": "Rome"}'}})
    assert r.ok and r.path == "native" and calls(r) == [("get_weather", {"city": "Rome"})]


def test_reasoning_content_and_think_in_content(tc):
    msg = message({"name": "get_weather", "arguments": {"city": "Oslo"}},
                  content="<think>inline</think>Weather next.", reasoning_content="separate")
    r = tc.decode(msg)
    assert r.reasoning == "separate\n\ninline" and r.content == "Weather next."


def test_list_content_text_parts(tc):
    msg = message({"name": "get_weather", "arguments": {"city": "Oslo"}},
                  content=[{"type": "text", "text": "a"}, {"type": "image_url", "image_url": {}},
                           {"type": "text", "text": "b"}])
    assert tc.decode(msg).content == "a\nb"


def test_message_without_calls_decodes_content(tc):
    r = tc.decode({"role": "assistant", "content": "Sure " + hermes("get_weather", {"city": "B"}),
                   "tool_calls": []})
    assert r.ok and r.path == "xml" and calls(r) == [("get_weather", {"city": "B"})]
    assert r.content == "Sure"


def test_native_with_envelope_in_content_flags_mixed(tc):
    msg = message({"name": "get_weather", "arguments": {"city": "A"}},
                  content=hermes("get_weather", {"city": "B"}))
    r = tc.decode(msg)
    # Both are taken, the content's first: a stream cannot take back a call it has sent.
    assert calls(r) == [("get_weather", {"city": "B"}), ("get_weather", {"city": "A"})]
    assert "gate.mixed_formats" in r.repairs and r.path == "native"
    assert r.content == ""


def test_bidi_stripped_from_native_argument_string(tc):
    r = tc.decode(message({"name": "send_message",
                           "arguments": '{"message": "\u05e9\u200f\u05dc"}'}))
    assert r.ok and r.calls[0].arguments == {"message": "\u05e9\u05dc"}
    assert "text.bidi_removed" in r.calls[0].repairs


@pytest.mark.parametrize("msg", [
    {"tool_calls": "get_weather"},
    {"tool_calls": [{"function": "get_weather"}]},
    {"tool_calls": [{"function": {"name": 3, "arguments": "{}"}}]},
    {"tool_calls": [{"function": {"name": "get_weather", "arguments": 5}}]},
    {"content": 12},
    {"content": "hi", "reasoning_content": ["x"]},
])
def test_malformed_messages_are_bad_request(tc, msg):
    r = tc.decode(msg)
    assert not r.ok and errors.BAD_REQUEST in codes(r)
    assert orjson.dumps(r.to_dict())


def test_read_message_parts():
    m = read_message({"content": [{"type": "text", "text": "x"}], "reasoning": "r",
                      "tool_calls": [{"function": {"name": "f", "arguments": None}}]})
    assert m.content == "x" and m.reasoning == "r" and m.has_calls
    assert [(c.index, c.name, c.arguments) for c in m.calls] == [(0, "f", {})]


def test_native_with_json_call_in_content_flags_mixed(tc):
    msg = message({"name": "get_weather", "arguments": {"city": "A"}},
                  content='{"name": "get_weather", "arguments": {"city": "B"}}')
    r = tc.decode(msg)
    assert calls(r) == [("get_weather", {"city": "A"})] and "gate.mixed_formats" in r.repairs


# -- the short ways: native calls without content, arguments that are one JSON text ----------

_ARGUMENTS = ['{"city": "Oslo"}', '{"city": "Oslo", "unit": "celsius"}', '{"city": 5}',
              '{"hour": "6", "enabled": "false"}', '{"hour": 6}', '{"city": "Oslo"',
              "{'city': 'Oslo'}", '{"city": "Oslo",}', '{"city": "Oslo"}{"city": "Bern"}',
              '{"hour": 6} {"hour": 7}', '[1, 2]', '"Oslo"', "", "null", "{}",
              '{"city": "\u202eOslo"}', {"city": "Oslo"}, {"hour": 7}, None,
              {"city": "Os\ud800lo"}, '{"city": "Os\\ud800lo"}']  # a lone surrogate


def _engine_read(codec: ToolCallCodec, message: dict, finish_reason: str | None) -> dict:
    """What decode answered before native calls alone skipped the engine: the content (none)
    fed and finished, then the message's result."""
    msg = read_message(message)
    eng = codec.engine(native=msg.has_calls)
    if msg.reasoning and msg.reasoning.strip():
        eng.current = None
    eng.feed(msg.content, last=True)
    eng.finish(finish_reason)
    return encodable_result(said(codec.message_result(eng, msg), finish_reason)).to_dict()


@given(calls=st.lists(st.tuples(st.sampled_from(["get_weather", "set_alarm", "nope"]),
                                st.sampled_from(_ARGUMENTS)), min_size=1, max_size=3),
       content=st.sampled_from([None, "", []]),
       reasoning=st.sampled_from([None, "", "Thinking."]),
       finish_reason=st.sampled_from([None, "stop", "tool_calls", "length"]),
       prefill=st.booleans())
def test_native_calls_alone_decode_as_the_engine_reads_them(calls, content, reasoning,
                                                            finish_reason, prefill) -> None:
    codec = ToolCallCodec(TOOLS, starts_in_reasoning=prefill)
    msg = message(*({"name": n, "arguments": a} for n, a in calls), content=content,
                  **({"reasoning_content": reasoning} if reasoning is not None else {}))
    assert codec.decode(msg, finish_reason=finish_reason).to_dict() == \
        _engine_read(codec, msg, finish_reason)


@given(st.recursive(st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1)
                    | st.floats(allow_nan=False, allow_infinity=False) | st.text(max_size=5),
                    lambda inner: st.lists(inner, max_size=3)
                    | st.dictionaries(st.text(max_size=4), inner, max_size=3), max_leaves=8),
       st.sampled_from(["", " ", "\n"]))
def test_one_json_text_is_never_objects_merged_in_a_row(value, blank) -> None:
    # Native arguments that parse as one JSON text skip the merged-objects reading: it must
    # have found nothing in them.
    text = blank + orjson.dumps(value).decode() + blank
    assert _merged_objects(text) is None
