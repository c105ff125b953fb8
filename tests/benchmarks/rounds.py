"""CPU time of contenders alternated in one process, for figures that hold on a busy machine.

Each round runs every contender once, in turn, for a batch of calls sized so that a batch takes
a few milliseconds of CPU; what another process does to the machine then hits all contenders
alike. Times are CPU seconds of this process (``time.process_time``), per call.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from dataclasses import dataclass


@dataclass
class Figures:
    """Per-call CPU seconds of one contender, over the rounds."""

    name: str
    samples: list[float]

    @property
    def min(self) -> float:
        return min(self.samples)

    @property
    def median(self) -> float:
        return statistics.median(self.samples)


def _batch_size(fn: Callable[[], object], target: float) -> int:
    fn()  # warm up: caches, lazy imports
    n = 1
    while True:
        start = time.process_time()
        for _ in range(n):
            fn()
        spent = time.process_time() - start
        if spent >= target or n >= 1 << 20:
            return max(1, int(n * target / spent)) if spent > 0 else n
        n *= 2


def alternate(contenders: dict[str, Callable[[], object]], rounds: int = 7,
              batch_seconds: float = 0.02) -> dict[str, Figures]:
    """Run each contender ``rounds`` times in turn, a batch of about ``batch_seconds`` of CPU
    each; return per-call CPU seconds (min and median over the rounds) by name."""
    sizes = {name: _batch_size(fn, batch_seconds) for name, fn in contenders.items()}
    out = {name: Figures(name, []) for name in contenders}
    for _ in range(rounds):
        for name, fn in contenders.items():
            n = sizes[name]
            start = time.process_time()
            for _ in range(n):
                fn()
            out[name].samples.append((time.process_time() - start) / n)
    return out


def show(figures: dict[str, Figures], unit: float = 1e-6, label: str = "us") -> None:
    """Print min and median per call of each contender."""
    width = max(len(n) for n in figures)
    for f in figures.values():
        print(f"  {f.name:<{width}}  min {f.min / unit:10.1f} {label}  "
              f"median {f.median / unit:10.1f} {label}")


def ratio(figures: dict[str, Figures], ours: str, base: str) -> tuple[float, float]:
    """``ours / base`` by min and by median."""
    return figures[ours].min / figures[base].min, figures[ours].median / figures[base].median
