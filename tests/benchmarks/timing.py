"""Timing helpers shared by the benchmark scripts (not a benchmark itself)."""

from __future__ import annotations

import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass


def best(fn: Callable[[], object], runs: int,
         clock: Callable[[], float] = time.perf_counter) -> float:
    """The fastest of ``runs`` timed calls of ``fn``, in seconds of ``clock`` (wall time by
    default; ``time.process_time`` for CPU time on a shared machine)."""
    times = []
    for _ in range(runs):
        t0 = clock()
        fn()
        times.append(clock() - t0)
    return min(times)


@dataclass
class Load:
    """What :func:`drive` saw: every call's latency (seconds, sorted), the wall time taken
    and how many calls ended in each status."""

    latencies: list[float]
    wall: float
    statuses: dict[str, int]

    def percentile(self, q: float) -> float:
        return self.latencies[min(len(self.latencies) - 1, int(q * len(self.latencies)))]

    @property
    def rate(self) -> float:
        return len(self.latencies) / self.wall


def drive(call: Callable[[], str], threads: int, per_thread: int) -> Load:
    """Run ``call()`` ``per_thread`` times in each of ``threads`` threads, started together;
    ``call`` returns the status of what it did."""
    latencies: list[float] = []
    statuses: Counter[str] = Counter()
    lock = threading.Lock()
    go = threading.Barrier(threads + 1)

    def client() -> None:
        mine, seen = [], Counter()
        go.wait()
        for _ in range(per_thread):
            t0 = time.perf_counter()
            seen[call()] += 1
            mine.append(time.perf_counter() - t0)
        with lock:
            latencies.extend(mine)
            statuses.update(seen)

    pool = [threading.Thread(target=client) for _ in range(threads)]
    for t in pool:
        t.start()
    go.wait()
    start = time.perf_counter()
    for t in pool:
        t.join()
    wall = time.perf_counter() - start
    return Load(sorted(latencies), wall, dict(statuses))
