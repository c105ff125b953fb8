"""OpenAI chunks fed to a stream decoder in each of their shapes read alike: a whole
``chat.completion.chunk`` (``{"choices": [choice]}``), one choice (``{"index", "delta",
"finish_reason"}``, as a proxy hands them on) and a bare delta. A choice and a delta are read
without the whole chunk's helpers (``StreamDecoder._chunk``), so each shape is held to the
whole chunk's reading: the same events and result, malformed fields included, and the
assembled message is ``decode``'s."""

from __future__ import annotations

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st
from toolcodec import ToolCallCodec

TOOLS = [{"name": "get_weather", "parameters": {"type": "object", "properties": {
    "city": {"type": "string"}}}}]
CODEC = ToolCallCodec(TOOLS)

_TEXT = st.sampled_from(["", "Hi ", "<tool_call>", '{"name": "get_weather", ',
                         '"arguments": {"city": "Oslo"}}', "</tool_call>", "<think>", "</think>",
                         "so", " ", "\n", "functools"])
_FRAGMENT = st.one_of(
    st.fixed_dictionaries({"index": st.sampled_from([0, 1]), "id": st.sampled_from(["c1", "c2"]),
                           "function": st.fixed_dictionaries({"name": st.just("get_weather"),
                                                              "arguments": st.just("")})}),
    st.fixed_dictionaries({"index": st.sampled_from([0, 1]), "function": st.fixed_dictionaries(
        {"arguments": st.sampled_from(['{"ci', 'ty": "Oslo"}', ""])})}),
    st.sampled_from([5, {"index": "x"}, {"index": 0, "function": 3}]))  # malformed
_VALUE = {
    "content": st.one_of(st.none(), _TEXT, st.just(3)),
    "reasoning_content": st.one_of(st.none(), _TEXT, st.just(["x"])),
    "reasoning": st.one_of(st.none(), _TEXT),
    "role": st.just("assistant"),
    "tool_calls": st.one_of(st.none(), st.lists(_FRAGMENT, max_size=2), st.just("x")),
}
_DELTA = st.one_of(
    st.lists(st.sampled_from(sorted(_VALUE)), max_size=4, unique=True).flatmap(
        lambda keys: st.fixed_dictionaries({k: _VALUE[k] for k in keys})),
    st.builds(lambda t: {"content": t}, _TEXT),  # content alone, the common delta
    st.sampled_from([None, 7, "text"]))  # no delta, malformed ones
_REASON = st.sampled_from([None, None, None, "stop", "length", 3])


def _run(chunks: list, finish: str | None = None) -> tuple[list, bytes, bytes]:
    s = CODEC.stream(id_prefix="x_")
    events = []
    for chunk in chunks:
        events += s.feed(chunk)
    events += s.close(finish)
    return (events, orjson.dumps(s.result().to_dict()),
            orjson.dumps(s.assembled_message()))


@settings(max_examples=400)
@given(st.lists(st.tuples(_DELTA, _REASON), max_size=12))
def test_a_choice_and_a_delta_read_as_the_whole_chunk(deltas):
    whole = [{"id": "c", "choices": [{"index": 0, "delta": d, "finish_reason": r}]}
             for d, r in deltas]
    choices = [{"index": 0, "delta": d, "finish_reason": r, "logprobs": None} for d, r in deltas]
    expected = _run(whole)
    assert _run(choices) == expected
    dicts = [d for d, _ in deltas if isinstance(d, dict)]
    if len(dicts) == len(deltas) and all(
            not isinstance(r, str) for _, r in deltas):  # a delta carries no finish_reason
        assert _run(dicts) == expected


def test_malformed_fields_are_said_in_every_shape():
    for delta, problem in (({"content": 3}, "delta.content must be a string or null"),
                           ({"reasoning_content": ["x"]}, "delta.reasoning_content"),
                           ({"tool_calls": "x"}, "delta.tool_calls must be a list")):
        for chunk in ({"choices": [{"delta": delta}]}, {"delta": delta}, delta):
            events = _run([chunk])[0]
            assert [e["error"]["code"] for e in events if e["type"] == "error"] == [
                "bad_request"], chunk
            assert problem in events[0]["error"]["message"]
    events = _run([{"index": 0, "delta": 7}])[0]
    assert events[0]["error"]["message"] == "chunk delta must be an object"


def test_content_deltas_stream_as_decode_reads_the_message():
    text = 'Sure.\n<tool_call>{"name": "get_weather", "arguments": {"city": "Oslo"}}</tool_call>'
    choices = [{"index": 0, "delta": {"content": text[i:i + 3]}, "finish_reason": None}
               for i in range(0, len(text), 3)]
    choices.append({"index": 0, "delta": {}, "finish_reason": "stop"})
    events, result, _ = _run(choices)
    assert orjson.loads(result) == CODEC.decode(
        {"role": "assistant", "content": text}).to_dict()
    assert [e["name"] for e in events if e["type"] == "tool_call"] == ["get_weather"]


def _joined(deltas: list, *keys: str) -> str | None:
    """What the deltas' first present key of *keys* adds up to (None: none had one)."""
    parts = []
    for d in deltas:
        value = next((d[k] for k in keys if k in d), None)
        if value is not None:
            parts.append(value)
    return "".join(parts) if parts else None


_PLAIN = st.sampled_from(["", "Hi ", "so", " ", "\n", "{", "<tool_call>"])  # no <think>


@settings(max_examples=300)
@given(st.lists(st.fixed_dictionaries({}, optional={
    "content": st.one_of(st.none(), _PLAIN), "reasoning_content": st.one_of(st.none(), _TEXT),
    "role": st.just("assistant")}), max_size=10))
def test_the_message_is_what_the_deltas_add_up_to(deltas):
    for shape in (lambda d: d, lambda d: {"index": 0, "delta": d, "finish_reason": None}):
        events, _, message = _run([shape(d) for d in deltas])
        message = orjson.loads(message)
        assert (message["content"] or "") == (_joined(deltas, "content") or "")
        assert message.get("reasoning_content") == _joined(deltas, "reasoning_content")
        assert "".join(e["text"] for e in events if e["type"] == "reasoning") == (
            _joined(deltas, "reasoning_content") or "")
