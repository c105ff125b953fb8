"""The longest an inline job can hold its caller: decode jobs of ``--inline-max-chars``
characters, the worst we know, run as the pool runs them inline.

Run: ``python tests/benchmarks/bench_inline.py [--chars N] [--repeat R]``. A job that runs in
the calling process (``toolcodec.pool.inline``) cannot be stopped, so what bounds it is its
size: this times ``toolcodec.worker.inline.run_here`` (the bytes a worker receives, the job,
the bytes it answers) on texts of ``N`` characters (default 1024, ``toolcodec serve``'s
default) made of the worst constructs of ``bench_worst_case.py`` and of dense runs of calls
(every one decoded, coerced and validated: the most work per character a real output asks),
with the proxy benchmark's tool set. The baseline, measured in the same run, is the same job
on prose of the same length; each row gives its cost as a multiple of that.

Judged: the worst job must take under ``TARGET_MS`` (5 ms) of CPU. Exits 1 otherwise.
CPU time (``time.process_time``), best of ``R`` runs.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from toolcodec.worker.inline import ready_here, run_here  # noqa: E402

from tests.benchmarks.bench_proxy import TOOL_SETS  # noqa: E402
from tests.benchmarks.bench_worst_case import CONSTRUCTS  # noqa: E402
from tests.benchmarks.timing import best  # noqa: E402

TARGET_MS = 5.0
TOOLS = TOOL_SETS[-1]  # the largest of the proxy benchmark's sets
# Runs of calls, each repeated to the size: every call is read, coerced and checked.
CALLS = {
    "hermes calls": '<tool_call>{"name": "get_weather", "arguments": {"city": "Oslo", '
                    '"days": "3",}}</tool_call>\n',
    "qwen xml calls": "<tool_call>\n<function=search_files>\n<parameter=query>\na && b\n"
                      "</parameter>\n<parameter=limit>\n5\n</parameter>\n</function>\n"
                      "</tool_call>\n",
    "tool tags": "<get_weather><city>Oslo</city><days>3</days></get_weather>\n",
    "pythonic list": '[get_weather(city="Oslo", days=3), search_files(query="x")]\n',
    "bad calls": '<tool_call>{"name": "get_weather", "arguments": {"city": 5, "days": "x", '
                 '"unit": "kelvin"}}</tool_call>\n',
    "unknown tools": '<tool_call>{"name": "nope", "arguments": {"a": 1}}</tool_call>\n',
}


def text_of(unit: str, chars: int) -> str:
    return (unit * (chars // len(unit) + 1))[:chars] if len(unit) < chars else unit[:chars]


def job(text: str) -> dict:
    return {"id": "bench", "op": "decode", "deadline": time.time() + 3600,
            "payload": {"text": text, "tools": TOOLS}}


def cost_ms(text: str, repeat: int) -> float:
    j = job(text)
    run_here(j)  # the codec is built, as it is before a job runs inline
    codec = ready_here(j["payload"])  # and found when the job is taken, as the pool does
    return best(lambda: run_here(j, None, codec), repeat, clock=time.process_time) * 1000


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--chars", type=int, default=1024)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    prose = cost_ms(text_of("word ", args.chars), args.repeat)
    print(f"baseline: an inline decode of {args.chars} characters of prose takes "
          f"{prose:.3f} ms (CPU, best of {args.repeat})")
    rows = [(name, text_of(unit, args.chars)) for name, unit in CALLS.items()]
    rows += [(repr(c), text_of(c, args.chars)) for c in CONSTRUCTS]
    worst = ("", 0.0)
    for name, text in rows:
        ms = cost_ms(text, args.repeat)
        print(f"{name:>18} {ms:8.3f} ms  {ms / prose:6.1f}x prose")
        if ms > worst[1]:
            worst = (name, ms)
    print(f"worst: {worst[0]} at {worst[1]:.3f} ms for {args.chars} characters "
          f"(target < {TARGET_MS} ms)")
    return 0 if worst[1] < TARGET_MS else 1


if __name__ == "__main__":
    sys.exit(main())
