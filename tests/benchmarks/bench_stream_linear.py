"""Streaming decoder: linear in the output even inside open blocks and open strings.

For each case an output of 8 K and of 32 K characters is streamed in 4-character deltas
(as a model server sends them) and decoded once whole; the contenders are alternated over
several rounds and timed in CPU time. Printed per case: the cost per character at 32 K
against 8 K (target ≤ 1.5×: linear) and the 32 K stream against one batch ``decode`` of
the same text (target ≤ 30×), min and median over the rounds.

The cases are the worst the decoder meets: a ``<tool_call>`` whose JSON string swallows the
closer and never ends, followed by prose; an argument string that never closes in an open
call, in several families; prose after a cut call. Exit status 1 when a target is missed.

Run: ``python tests/benchmarks/bench_stream_linear.py [--rounds N]``
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from toolcodec.decoding.codec import ToolCallCodec  # noqa: E402

TOOLS = [{"name": "a", "parameters": {"type": "object", "properties": {}}},
         {"name": "get_weather", "parameters": {"type": "object", "properties": {
             "city": {"type": "string"}}, "required": ["city"]}}]
CODEC = ToolCallCodec(TOOLS)
PROSE = "Some prose follows here. "
WORDS = "x y z "

# name -> (the head, the filler repeated to the size): worst cases per state of the reader.
CASES: dict[str, tuple[str, str]] = {
    "closer_in_open_string_then_prose": ('<tool_call>{"a": "x</tool_call>', PROSE),
    "hermes_unclosed_string": ('<tool_call>{"name": "get_weather", "arguments": {"city": "',
                               WORDS),
    "hermes_unclosed_escapes": ('<tool_call>{"name": "get_weather", "arguments": {"city": "',
                                'a\\"b\\\\ '),
    "qwen_xml_unclosed_value": ("<tool_call>\n<function=get_weather>\n<parameter=city>\n",
                                WORDS),
    "mistral_unclosed_string": ('[TOOL_CALLS]get_weather[ARGS]{"city": "', WORDS),
    "kimi_unclosed_string": ('<|tool_calls_section_begin|><|tool_call_begin|>'
                             'functions.get_weather:0<|tool_call_argument_begin|>{"city": "',
                             WORDS),
    "json_in_prose_unclosed": ('Calling: {"name": "get_weather", "arguments": {"city": "',
                               WORDS),
    "think_open_then_prose": ("<think>", PROSE),
}
# Batch reads these with one regex pass (a fraction of a millisecond for 32 K), so the
# stream's cost against it is the per-delta floor (a couple of microseconds per delta),
# not a re-scan: only their growth is checked.
GROWTH_ONLY = {"think_open_then_prose"}


def text_of(case: str, size: int) -> str:
    head, filler = CASES[case]
    return head + filler * ((size - len(head)) // len(filler) + 1)


def streamed(text: str) -> Callable[[], object]:
    def run() -> object:
        s = CODEC.stream()
        for i in range(0, len(text), 4):
            s.feed(text[i:i + 4])
        s.close()
        return s.result()
    return run


def batch(text: str) -> Callable[[], object]:
    return lambda: CODEC.decode(text)


def cpu(fn: Callable[[], object]) -> float:
    t0 = time.process_time()
    fn()
    return time.process_time() - t0


def measure(case: str, rounds: int) -> dict[str, list[float]]:
    small, large = text_of(case, 8_000), text_of(case, 32_000)
    contenders = {"stream8": streamed(small), "stream32": streamed(large),
                  "batch32": batch(large)}
    times: dict[str, list[float]] = {name: [] for name in contenders}
    for fn in contenders.values():  # warm-up: caches, regex compilation
        fn()
    for r in range(rounds):  # alternated, each round in a rotated order
        names = list(contenders)
        names = names[r % len(names):] + names[:r % len(names)]
        for name in names:
            times[name].append(cpu(contenders[name]))
    return times


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    missed = False
    print(f"{'case':36} {'per char 32K/8K':>17} {'stream/batch':>14}  (min / median)")
    for case in CASES:
        t = measure(case, args.rounds)
        growth = [min(t["stream32"]) / 4 / max(min(t["stream8"]), 1e-6),
                  statistics.median(t["stream32"]) / 4
                  / max(statistics.median(t["stream8"]), 1e-6)]
        cost = [min(t["stream32"]) / max(min(t["batch32"]), 1e-6),
                statistics.median(t["stream32"]) / max(statistics.median(t["batch32"]), 1e-6)]
        ok = growth[0] <= 1.5 and (cost[0] <= 30 or case in GROWTH_ONLY)
        missed |= not ok
        print(f"{case:36} {growth[0]:7.2f} / {growth[1]:5.2f}  {cost[0]:6.1f} / {cost[1]:5.1f}"
              f"  {'ok' if ok else 'MISSED'}{' (growth only)' if case in GROWTH_ONLY else ''}")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())
