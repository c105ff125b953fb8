"""Per-character cost of the worst constructs: long runs of one markup character or tag.

Run: ``python tests/benchmarks/bench_worst_case.py [--size N] [--repeat R]``. For each
construct (``[``, ``{``, ``<``, ``<a>``, ``<|``, ``[{``, a tool's own tag, a tool's name where
an opener would start without the rest of the opener, ...) it times
``decode``, ``kindaxml.parse(...).to_dict()`` and ``repair_json`` on a run of it ``N``
characters long (default 40 000) and on one four times longer, and prints µs per character
at both sizes and the ratio large/small (about 4 when linear). The baseline, measured in the
same run, is ``decode`` of plain prose of the same length: each row also gives its cost as
a multiple of that.

Judged: the worst cost per character of each entry point must stay under 0.3 µs (issue #25:
40 KB of ``[``, ``{`` or ``<`` cost ``decode`` more than 50 ms, 1.4 µs per character; runs of
``<a>`` cost KindaXML 0.55 µs and runs of ``"`` cost ``repair_json`` 0.38) and every ratio
under 5. Exits 1 otherwise. KindaXML runs with its default configuration, so ``<a>``, ``<f>``
and the like are unrecognised tags (kept as text); runs of recognised tags, where each tag
auto-closes the one before and adds a marker and a recovery to the output, are printed after
the table for information, their ratios judged but not their cost per character.

CPU time (``time.process_time``), best of ``R`` runs: on a shared machine wall time would
mostly measure the neighbours.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import toolcodec as codec  # noqa: E402
from toolcodec import kindaxml  # noqa: E402

from tests.benchmarks.timing import best  # noqa: E402

TARGET_US_PER_CHAR = 0.3
TARGET_RATIO = 5.0
CONSTRUCTS = ["[", "{", "<", "[]", "[{", "{}", "<a>", "</a>", "<a", "<|", "`", "```json\n",
              "[f", '{"a":', "[1,", "<f>", "<tool_call>", "<!--", "<![CDATA[", "<think>",
              '"', "'", "\\", "\n",
              # what looks like a tool-name opener (the tools are f and get_weather): a name
              # without its "(" or ">", a prefix of one, one at a line's start, a tag or call
              # or bare call whose name is no tool's (or whose parameter is not the tool's)
              "<f", "[get_weather", "<get_weather", "[get_weathe(", "f\n", "get_weather:\n",
              "[a(", "<a b>", "g\n<a>\n", "f\n<x>\n", "<f x=[a(", "<f\n"]
RECOGNISED = ["<cite>", "</cite>", "<cite/>", "<note>x", '<cite id="1">']  # KindaXML only
TOOLS = [{"name": "f", "parameters": {"type": "object", "properties": {
    "a": {"type": "string"}, "n": {"type": "integer"}}}},
    {"name": "get_weather", "parameters": {"type": "object", "properties": {
        "city": {"type": "string"}}}}]


def cpu_best(fn: Callable[[], object], runs: int) -> float:
    return best(fn, runs, clock=time.process_time)


def run_of(construct: str, size: int) -> str:
    return construct * max(1, size // len(construct))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--size", type=int, default=40_000)
    parser.add_argument("--repeat", type=int, default=3)
    args = parser.parse_args(argv)
    c = codec.ToolCallCodec(TOOLS)
    entries: dict[str, Callable[[str], object]] = {
        "decode": c.decode,
        "kindaxml": lambda t: kindaxml.parse(t).to_dict(),
        "repair_json": codec.repair_json,
    }
    sizes = (args.size, 4 * args.size)
    prose = [cpu_best(lambda t=t: c.decode(t), args.repeat) * 1e6 / len(t)
             for t in (run_of("word ", n) for n in sizes)]
    print(f"baseline: decode of prose {prose[0]:.3f} / {prose[1]:.3f} µs per character "
          f"({sizes[0]} / {sizes[1]} characters; CPU time, best of {args.repeat})")
    print(f"{'construct':>14} " + " ".join(f"{name + ' µs/ch':>20} {'×4':>5}"
                                           for name in entries) + "  decode/prose")
    worst: dict[str, tuple[str, float]] = {name: ("", 0.0) for name in entries}
    bad: list[str] = []
    for construct in CONSTRUCTS:
        cells = []
        for name, entry in entries.items():
            texts = [run_of(construct, n) for n in sizes]
            costs = [cpu_best(lambda t=t, e=entry: e(t), args.repeat) * 1e6 / len(t)
                     for t in texts]
            ratio = costs[1] / max(costs[0], 1e-9)
            cells.append(f"{costs[0]:>9.3f} {costs[1]:>9.3f}  {ratio:>5.1f}")
            if costs[1] > worst[name][1]:
                worst[name] = (construct, costs[1])
            if costs[1] > 0.05 and ratio > TARGET_RATIO:  # tiny costs: timer noise
                bad.append(f"{name} on {construct!r}: ×{ratio:.1f} for 4× the input")
        decode_cost = float(cells[0].split()[1])
        print(f"{construct!r:>14} " + " ".join(cells) + f"  {decode_cost / prose[1]:>8.1f}x")
    print("kindaxml on runs of recognised tags (for information):")
    for construct in RECOGNISED:
        texts = [run_of(construct, n) for n in sizes]
        costs = [cpu_best(lambda t=t: kindaxml.parse(t).to_dict(), args.repeat) * 1e6 / len(t)
                 for t in texts]
        ratio = costs[1] / max(costs[0], 1e-9)
        print(f"{construct!r:>14} {costs[0]:>9.3f} {costs[1]:>9.3f}  {ratio:>5.1f}")
        if ratio > TARGET_RATIO:
            bad.append(f"kindaxml on {construct!r}: ×{ratio:.1f} for 4× the input")
    for name, (construct, cost) in worst.items():
        print(f"worst {name}: {construct!r} at {cost:.3f} µs per character "
              f"(target < {TARGET_US_PER_CHAR})")
        if cost >= TARGET_US_PER_CHAR:
            bad.append(f"{name} on {construct!r}: {cost:.3f} µs per character")
    for line in bad:
        print("OVER TARGET:", line)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
