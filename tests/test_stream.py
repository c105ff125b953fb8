"""The streaming decoder: identical to batch for every chunking, nothing lost, prose never waits.

The corpus is every input of the peers' tool-parser suites (with their own recorded chunkings
where they have them) plus generated outputs built from the pieces that make decoding hard:
openers and closers of every format, JSON calls, fences, markers, brackets and quotes.
"""

from __future__ import annotations

import json
import random

import orjson
import pytest
import toolcodec as codec
from hypothesis import given, settings
from hypothesis import strategies as st
from toolcodec.decoding.codec import ToolCallCodec
from toolcodec.formats.table import MARKER_FORMATS
from toolcodec.results.result import encodable_result
from toolcodec.scanning.openers import compile_openers

from tests.peers import peer_file

TOOLS = [
    {"name": "get_weather", "parameters": {"type": "object", "properties": {
        "city": {"type": "string"}, "days": {"type": "integer"}}, "required": ["city"]}},
    {"name": "search", "parameters": {"type": "object", "properties": {
        "q": {"type": "string"}}}},
]
CODEC = ToolCallCodec(TOOLS)
PEER_CASES = [json.loads(line) for line in peer_file("toolcall_cases.jsonl").open()]

PIECES = [
    "Sure. ", "ok", " ", "\n", "a < b", "x & y", "{", "}", "[", "]", '"', "\\", "'", ":", ",",
    "<b>", "</i>", "<tool_call>", "</tool_call>", "<think>", "</think>", "<tool>", "</tool>",
    "<get_weather>", "</get_weather>", "<city>Oslo</city>", "<days>3</days>", "<function=search>",
    "<parameter=q>cats</parameter>", "</function>", "<search/>", "<![CDATA[<x>]]>",
    '{"name": "get_weather", "arguments": {"city": "Paris"}}', '{"name": "search", ',
    '"arguments": {"q": "x"}}', '{"name": "nope", "arguments": {}}', "```json\n", "```",
    "[TOOL_CALLS]", "<|python_tag|>", '{"city": "Rome", "days": 2,}', "\u200f", "\ud800",
    # marker formats (toolcodec.formats.table) and the bodies they hold
    "<|tool_calls_section_begin|>", "<|tool_calls_section_end|>", "<|tool_call_begin|>",
    "functions.search:0", "<|tool_call_argument_begin|>", "<|tool_call_end|>",
    "<\uff5ctool\u2581calls\u2581begin\uff5c>", "<\uff5ctool\u2581call\u2581begin\uff5c>",
    "search<\uff5ctool\u2581sep\uff5c>", "<\uff5ctool\u2581call\u2581end\uff5c>",
    "<\uff5ctool\u2581calls\u2581end\uff5c>", "get_weather\n<arg_key>city</arg_key>",
    "<arg_value>Oslo</arg_value>", "[get_weather(city='Oslo', days=2)]", "[search(q=\"(\")",
    "<|tool_call_start|>", "<|tool_call_end|>", "<|channel|>commentary to=functions.search",
    "<|message|>", "<|call|>", "<|tool_call|>", "<tool_calls>", "</tool_calls>", "</s>",
    '<invoke name="search">', '<parameter name="q">x</parameter>', "</invoke>",
    "<minimax:tool_call>", "</minimax:tool_call>", "\ncity: Oslo\n",
    # bare calls (a tool's name alone on its line, then its parameters' tags) and Seed-OSS
    "get_weather\n", "search:\n", "\n<q>x</q>", "</search>", "  ", "<seed:think>",
    "</seed:think>",
    # end-of-generation tokens, gpt-oss channels
    "<|im_end|>", "<|eot_id|>", "<|end|>", "<|channel|>analysis<|message|>",
    "<|start|>assistant", "<|channel|>final<|message|>", "<|return|>", "function=search>",
]


def chunkings(text: str, rng: random.Random) -> list[list[str]]:
    """Whole; one character at a time; and random cuts of 1-7 characters."""
    cuts = [[text], list(text)]
    for _ in range(3):
        parts, i = [], 0
        while i < len(text):
            n = rng.randint(1, 7)
            parts.append(text[i:i + n])
            i += n
        cuts.append(parts)
    return cuts


def stream(c: ToolCallCodec, parts: list) -> tuple[list[dict], dict]:
    s = c.stream(id_prefix="t")
    events = []
    for part in parts:
        events += s.feed(part)
    events += s.close()
    return events, s.result().to_dict()


def check(c: ToolCallCodec, text: str, parts: list) -> None:
    whole = c.decode(text)
    events, got = stream(c, parts)
    assert got == whole.to_dict()
    calls = [{"name": e["name"], "arguments": e["arguments"], "repairs": e["repairs"],
              "format": e["format"]} for e in events if e["type"] == "tool_call"]
    assert calls == got["calls"]
    assert [e["index"] for e in events if e["type"] == "tool_call"] == list(range(len(calls)))
    content = "".join(e["text"] for e in events if e["type"] == "content")
    assert content.strip() == got["content"]
    # Nothing lost: the content events are exactly the text and markup spans, in order.
    kept = "".join(text[s.start:s.end] for s in whole.spans if s.kind in ("text", "markup"))
    assert content == encodable_result(codec.DecodeResult(True, content=kept)).content
    orjson.dumps(events)


@given(st.lists(st.sampled_from(PIECES), max_size=40), st.randoms(use_true_random=False))
@settings(max_examples=300)
def test_stream_equals_batch_on_generated_outputs(pieces: list[str], rng) -> None:
    text = "".join(pieces)
    for parts in chunkings(text, rng):
        check(CODEC, text, parts)


@pytest.mark.parametrize("reasoning", [False, True])
@given(st.lists(st.sampled_from(PIECES), max_size=25), st.randoms(use_true_random=False))
@settings(max_examples=100)
def test_stream_equals_batch_starting_in_reasoning(reasoning: bool, pieces, rng) -> None:
    c = ToolCallCodec(TOOLS, starts_in_reasoning=reasoning)
    text = "".join(pieces)
    for parts in chunkings(text, rng)[2:]:
        check(c, text, parts)


def test_stream_equals_batch_on_every_peer_case() -> None:
    rng = random.Random(7)
    codecs: dict[str, ToolCallCodec] = {}
    for case in PEER_CASES:
        key = orjson.dumps(case.get("tools")).decode()
        if key not in codecs:
            codecs[key] = ToolCallCodec(case.get("tools"))
        c = codecs[key]
        text = case["input"]
        cuts = chunkings(text, rng)
        if case.get("chunks") and "".join(case["chunks"]) == text:
            cuts.append(case["chunks"])
        for parts in cuts:
            check(c, text, parts)


def test_every_opener_split_at_every_position() -> None:
    """Each opener the engine knows (the built-in ones, and every token of the marker
    formats' table), cut at every character."""
    marker_tokens = [t for f in MARKER_FORMATS for t in f.openers + f.closers]
    openers = ["<tool_call>", "<think>", "<tool>", "<function=search>", "<get_weather>",
               '{"name": ', '[{"name": ', "```json\n", "</tool_call>", "</think>",
               "[get_weather("] + marker_tokens
    assert all(compile_openers(["get_weather"]).find(o, 0, False) or o.startswith("</")
               or o in marker_tokens for o in openers)
    for opener in openers:
        text = f"pre {opener}<city>x</city>{{\"q\": 1}}</get_weather></tool_call> post"
        for cut in range(1, len(text)):
            check(CODEC, text, [text[:cut], text[cut:]])


def test_several_calls_and_think_in_one_chunk() -> None:
    text = ('<think>plan</think><tool_call>{"name": "search", "arguments": {"q": "a"}}'
            '</tool_call><tool_call>{"name": "search", "arguments": {"q": "b"}}</tool_call>tail')
    events, got = stream(CODEC, [text])
    kinds = [e["type"] for e in events]
    assert kinds == ["reasoning", "tool_call", "tool_call", "content"]
    assert [e["arguments"]["q"] for e in events if e["type"] == "tool_call"] == ["a", "b"]


def test_prose_never_waits() -> None:
    prose = "Compare a < b & c > d, {x} [y] <b>bold</b> and <i>it</i>. " * 50
    s = CODEC.stream()
    fed = released = 0
    for i in range(0, len(prose), 3):
        chunk = prose[i:i + 3]
        fed += len(chunk)
        released += sum(len(e["text"]) for e in s.feed(chunk) if e["type"] == "content")
        assert fed - released <= 80  # at most the longest opener is ever held back
    s.close()


def test_a_call_is_sent_when_its_envelope_closes_not_at_the_end() -> None:
    s = CODEC.stream()
    first = s.feed('Hi <tool_call>{"name": "search", "arguments": {"q": "a"}}</tool_call>')
    assert [e["type"] for e in first] == ["content", "tool_call"]
    assert s.feed(" more prose")[0] == {"type": "content", "text": " more prose"}


def test_end_mid_marker_loses_nothing() -> None:
    for text in ["Hello <tool_ca", "Hello <think>still", 'Hello {"name": "sea',
                 "Hello [TOOL_CA", '<tool_call>{"name": "search", "arguments": {"q": "x"']:
        check(CODEC, text, list(text))
        events, got = stream(CODEC, list(text))
        seen = "".join(e.get("text", "") for e in events) + "".join(
            json.dumps(e["arguments"]) for e in events if e["type"] == "tool_call")
        assert seen  # the held text came out at close


def test_error_event_precedes_the_blocks_text() -> None:
    text = 'a <tool_call>{"name": "nope", "arguments": {}}</tool_call> b'
    events, got = stream(CODEC, list(text))
    i = next(i for i, e in enumerate(events) if e["type"] == "error")
    assert events[i]["error"]["code"] == "unknown_tool"
    assert events[i + 1] == {"type": "content", "text": text[2:-2]}


def test_feed_never_raises_and_reports_bad_chunks() -> None:
    s = CODEC.stream()
    for bad in (None, 5, [1], {"choices": "x"}, {"choices": [1]}, {"delta": 3},
                {"delta": {"content": 5}}, {"delta": {"tool_calls": "x"}},
                {"delta": {"tool_calls": [{"index": -1}]}},
                {"delta": {"tool_calls": [{"index": 0, "function": {"name": 1}}]}}):
        events = s.feed(bad)
        assert events and events[-1]["type"] == "error"
        assert events[-1]["error"]["code"] == "bad_request"
    s.close()
    assert s.feed("late")[0]["error"]["code"] == "bad_request"


# -- OpenAI chunks in ---------------------------------------------------------------------------


def chunk(delta: dict, finish=None) -> dict:
    return {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m",
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}


def test_openai_chunks_with_native_tool_call_fragments() -> None:
    parts = [chunk({"role": "assistant", "content": ""}),
             chunk({"reasoning_content": "think"}),
             chunk({"content": "Checking."}),
             chunk({"tool_calls": [{"index": 0, "id": "call_a", "type": "function",
                                    "function": {"name": "get_weather", "arguments": ""}}]}),
             chunk({"tool_calls": [{"index": 0, "function": {"arguments": '{"city": "Os'}}]}),
             chunk({"tool_calls": [{"index": 0, "function": {"arguments": 'lo", "days": 2'}}]}),
             chunk({}, "tool_calls"), {"choices": [], "usage": {"total_tokens": 3}}]
    s = CODEC.stream(id_prefix="t")
    events = [e for p in parts for e in s.feed(p)] + s.close()
    assert [e["type"] for e in events] == ["reasoning", "content", "tool_call"]
    got = s.result().to_dict()
    assert got == CODEC.decode(s.assembled_message()).to_dict()
    assert got["path"] == "native" and got["reasoning"] == "think"
    assert got["calls"] == [{"name": "get_weather", "arguments": {"city": "Oslo", "days": 2},
                             "repairs": ["json.unclosed"], "format": "native"}]


@given(st.lists(st.sampled_from(PIECES), max_size=20), st.randoms(use_true_random=False))
@settings(max_examples=100)
def test_content_deltas_equal_batch_of_the_assembled_message(pieces, rng) -> None:
    text = "".join(pieces)
    for parts in chunkings(text, rng)[2:]:
        s = CODEC.stream(id_prefix="t")
        events = [e for p in parts for e in s.feed(chunk({"content": p}))] + s.close()
        got = s.result().to_dict()
        assert got == CODEC.decode(s.assembled_message()).to_dict()
        assert [e["name"] for e in events if e["type"] == "tool_call"] == [
            c["name"] for c in got["calls"]]


# -- OpenAI chunks out --------------------------------------------------------------------------


def test_events_become_openai_chunks_an_openai_client_accepts() -> None:
    from openai.types.chat import ChatCompletionChunk
    from toolcodec.decoding.openai_chunks import ChunkWriter

    text = ('<think>plan</think>Sure <tool_call>{"name": "search", "arguments": {"q": "x"}}'
            '</tool_call> and <tool_call>{"name": "nope", "arguments": {}}</tool_call>.')
    events, result = stream(CODEC, list(text))
    out = ChunkWriter(id="chatcmpl-1", model="m", created=5)
    chunks = [c for c in (out.chunk(e) for e in events) if c is not None] + [out.final("stop")]
    parsed = [ChatCompletionChunk.model_validate(c) for c in chunks]
    assert parsed[0].choices[0].delta.role == "assistant"
    content = "".join(c.choices[0].delta.content or "" for c in parsed)
    assert content.strip() == result["content"]
    calls = [t for c in parsed for t in (c.choices[0].delta.tool_calls or [])]
    assert [(t.index, t.function.name, orjson.loads(t.function.arguments)) for t in calls] == [
        (0, "search", {"q": "x"})]
    assert calls[0].id == next(e["id"] for e in events if e["type"] == "tool_call")
    assert parsed[-1].choices[0].finish_reason == "tool_calls"
    assert {c.id for c in parsed} == {"chatcmpl-1"} and {c.model for c in parsed} == {"m"}


def test_final_reason_without_calls_keeps_the_upstream_reason() -> None:
    from toolcodec.decoding.openai_chunks import ChunkWriter

    assert ChunkWriter("a", "m", 1).final("length")["choices"][0]["finish_reason"] == "length"
    assert ChunkWriter("a", "m", 1).final("tool_calls")["choices"][0]["finish_reason"] == "stop"
