"""Generated worst cases: a long run of one character class followed by a run of another,
through every entry point. Every input of n characters must cost O(n); the budget asserted
(50 ms of this process's CPU time per KB) is far above what linear code needs and far below
what the quadratic cases took (8 000 digits then one letter: 2.2 s). CPU time, not wall time:
other work on a busy machine must not make this test fail."""

from __future__ import annotations

import time

import pytest
import toolcodec as codec
from toolcodec import kindaxml

CLASSES = ["9", "a", " ", '"', "'", "\\", "{", "}", "[", "]", ",", ":", "<", ">", "&", "-", ".",
           "/", "*", "é", "\u200f", "\n", "<a>", "</a>", "<tool_call>", '{"a":', '"a",', "1,",
           "[1,", "e", "0x", "#", "=", "(", "`", "<!--", "<![CDATA[", "```json\n", "<think>"]
RUN = 4096  # characters per run: the quadratic cases needed a few thousand to show
BUDGET_S_PER_KB = 0.05
TOOLS = [{"name": "f", "parameters": {"type": "object", "properties": {
    "a": {"type": "string"}, "n": {"type": "integer"}}}}]
CODEC = codec.ToolCallCodec(TOOLS)


def run(cls: str) -> str:
    return cls * max(1, RUN // len(cls))


ENTRIES = {
    "repair_json": codec.repair_json,
    "decode in an envelope": lambda t: CODEC.decode(
        '<tool_call>{"name": "f", "arguments": {"a": ' + t + "}}</tool_call>"),
    "decode as prose": CODEC.decode,
    "decode an XML parameter": lambda t: CODEC.decode("<f><a>" + t + "</a></f>"),
    "validate": lambda t: CODEC.validate("f", t),
    "kindaxml": kindaxml.parse,
    "stream": lambda t: streamed(t),
}


def streamed(text: str) -> None:
    s = CODEC.stream()
    for i in range(0, len(text), 16):
        s.feed(text[i:i + 16])
    s.close()


@pytest.mark.parametrize("first", CLASSES, ids=repr)
def test_runs_of_each_class_followed_by_each_other_class_are_linear(first: str) -> None:
    slow = []
    for second in CLASSES:
        text = run(first) + run(second)
        budget = BUDGET_S_PER_KB * len(text) / 1024
        for name, entry in ENTRIES.items():
            start = time.process_time()
            entry(text)
            took = time.process_time() - start
            if took > budget:
                slow.append(f"{name}: {first!r}×{RUN} + {second!r}×{RUN} took {took:.2f} s")
    assert not slow, "\n".join(slow)
