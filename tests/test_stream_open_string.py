"""An open JSON string inside an open ``<tool_call>`` is read on where it stopped (no re-scan
per chunk), and what the stream answers stays what ``decode`` answers, whatever cuts the
string: an escape split across chunks, a backslash before a line break, a closer inside it.
The cost itself is checked by ``tests/benchmarks/bench_stream_linear.py``."""

from __future__ import annotations

import pytest
from toolcodec.decoding.codec import ToolCallCodec

TOOLS = [{"name": "a", "parameters": {"type": "object", "properties": {}}},
         {"name": "get_weather", "parameters": {"type": "object", "properties": {
             "city": {"type": "string"}}, "required": ["city"]}}]
CODEC = ToolCallCodec(TOOLS)

TEXTS = [
    '<tool_call>{"a": "x</tool_call> then prose, and more prose.',
    '<tool_call>{"name": "get_weather", "arguments": {"city": "O\\"s</tool_call>lo"}}'
    "</tool_call> after",
    '<tool_call>{"name": "get_weather", "arguments": {"city": "a\\\\"}}</tool_call> done',
    '<tool_call>{"name": "get_weather", "arguments": {"city": "a\\\nb</tool_call>"}}'
    "</tool_call> tail",
    '<tool_call>{"name": "get_weather", "arguments": {"city": "never closes',
    'Text <tool_call>{"name": "get_weather", "arguments": {"city": "Oslo"}}</tool_call> '
    '<tool_call>{"a": "open</tool_call> and "quotes" later',
]


def _stream(text: str, cuts: list[int], finish: str | None) -> dict:
    s = CODEC.stream(id_prefix="t_")
    last = 0
    for cut in [*cuts, len(text)]:
        s.feed(text[last:cut])
        last = cut
    s.close(finish)
    return s.result().to_dict()


@pytest.mark.parametrize("finish", [None, "length"])
@pytest.mark.parametrize("text", TEXTS)
def test_every_two_cut_chunking_answers_what_decode_answers(text: str, finish) -> None:
    want = CODEC.decode(text, finish_reason=finish).to_dict()
    for i in range(len(text) + 1):
        for j in range(i, len(text) + 1, 3):
            assert _stream(text, [i, j], finish) == want, (i, j)


@pytest.mark.parametrize("text", TEXTS)
def test_character_by_character_answers_what_decode_answers(text: str) -> None:
    assert _stream(text, list(range(1, len(text))), None) == CODEC.decode(text).to_dict()
