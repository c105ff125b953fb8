"""KindaXML parse throughput and linearity: 1 MB vs 100 KB of tag-heavy text.

Run: ``python tests/benchmarks/bench_kindaxml.py``. For each workload it prints MB/s at both
sizes and the time ratio 1 MB / 100 KB; a linear parser gives about 10x, the target is at
most 12x. Exits 1 if any ratio exceeds the target.

Two ratios are printed. ``paused`` times each parse with the cyclic garbage collector paused,
as ``timeit`` does by default: it measures the parser's own work, and is the figure checked
against the target. ``gc on`` keeps the collector running: CPython then runs full
collections each time the number of live container objects grows by a quarter, and a 1 MB
parse (hundreds of thousands of result objects) triggers several that a 100 KB parse in a
small process does not. That cost is linear overall but lands as a step between these two
sizes, so it is reported alongside rather than hidden.
"""

from __future__ import annotations

import gc
import random
import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from codec.kindaxml import KindaXMLConfig, parse  # noqa: E402

TARGET_RATIO = 12.0
SMALL, LARGE = 100_000, 1_000_000

LINES = [
    'We shipped <cite id="{n}">last week</cite>.',
    "Revenue grew {n}% <cite id={n}> <note>Details {n}...</note>",
    "<note>Remember item {n}",
    "<label>Urgent: fix {n} today",
    "Claim {n} <cite id='{n}, 2>Evidence</cite> and more <b>bold</b>",
    "Mark<cite id={n}/> here </cite> stray <weird x={n}>text</weird>",
    "<todo>Code: <![CDATA[if a < b and c > d]]> then {n}</todo>",
    "a < b and {n} > c, plain text without tags at all for a while {n}",
    "<risk level=high level=low>dup {n}</risk> <metric>{n}ms<claim>x",
]


def mixed(size: int) -> str:
    """Seeded, varied tag-heavy text of ``size`` characters (same prefix at every size)."""
    rng = random.Random(7)
    parts: list[str] = []
    total = 0
    while total < size:
        line = rng.choice(LINES).format(n=rng.randrange(1000)) + "\n"
        parts.append(line)
        total += len(line)
    return "".join(parts)[:size]


def one_long_line(unit: str) -> Callable[[int], str]:
    return lambda size: (unit * (size // len(unit) + 1))[:size]


WORKLOADS: list[tuple[str, Callable[[int], str], KindaXMLConfig]] = [
    ("mixed tag-heavy lines", mixed, KindaXMLConfig()),
    ("one line of unclosed cites", one_long_line("claim <cite id=1> "), KindaXMLConfig()),
    (
        "one line, forward strategies",
        one_long_line("<note>a b <label>c d <todo/>e  "),
        KindaXMLConfig(self_closing_strategy={"*": "forward_next_token"}),
    ),
    ("near-tags that never close", one_long_line("<a b='c "), KindaXMLConfig()),
]


def best_time(text: str, config: KindaXMLConfig, repeat: int, collector: bool) -> float:
    best = float("inf")
    for _ in range(repeat):
        gc.collect()  # every run starts from the same heap
        if not collector:
            gc.disable()
        try:
            start = time.perf_counter()
            parse(text, config=config)
            best = min(best, time.perf_counter() - start)
        finally:
            gc.enable()
    return best


def main() -> int:
    print(f"{'workload':30} {'100KB MB/s':>10} {'1MB MB/s':>9} {'paused':>7} {'gc on':>7}")
    worst = 0.0
    for name, make, config in WORKLOADS:
        small, large = make(SMALL), make(LARGE)
        t_small = best_time(small, config, 7, collector=False)
        t_large = best_time(large, config, 3, collector=False)
        on_small = best_time(small, config, 7, collector=True)
        on_large = best_time(large, config, 3, collector=True)
        ratio = t_large / t_small
        worst = max(worst, ratio)
        print(
            f"{name:30} {SMALL / t_small / 1e6:10.2f} {LARGE / t_large / 1e6:9.2f}"
            f" {ratio:6.1f}x {on_large / on_small:6.1f}x"
        )
    verdict = "ok" if worst <= TARGET_RATIO else "TOO SLOW"
    print(f"worst ratio, collector paused: {worst:.1f}x (target <= {TARGET_RATIO:.0f}x): {verdict}")
    return 0 if worst <= TARGET_RATIO else 1


if __name__ == "__main__":
    sys.exit(main())
