"""Load generation: a closed-loop ceiling, and open-loop Poisson load at a fixed rate.

Open loop is what a capacity planner needs: jobs arrive at their own pace whether or not
the system keeps up. Each job has an **intended** send time drawn from a Poisson process
(exponential gaps); its latency is measured from that time, not from when the generator got
round to sending it. A stall therefore shows in the latency of every job that should have
been sent during it — the correction wrk2 makes for "coordinated omission", without which a
stalled system looks fast because the generator stopped sending.
"""

from __future__ import annotations

import asyncio
import math
import random
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from hdrh.histogram import HdrHistogram
from toolcodec.pool.bench.corpus import CorpusItem
from toolcodec.pool.bench.targets import Target

PERCENTILES = (50.0, 90.0, 99.0, 99.9)
_HIGHEST_US = 120_000_000  # 2 minutes: anything slower is recorded as that


@dataclass(slots=True)
class RateResult:
    """What one load step measured."""

    offered_rate: float  # jobs/s asked for (0 for closed loop)
    achieved_rate: float  # jobs/s answered, whatever the answer (timeouts included)
    sent: int
    statuses: dict[str, int]
    latency_ms: dict[str, float]  # p50, p90, p99, p99.9, max
    timeout_ratio: float  # timed out or left unanswered, over sent
    cpu: dict[str, float] = field(default_factory=dict)
    histogram: Any = None  # the HdrHistogram (not serialised)
    goodput_rate: float = 0.0  # jobs/s answered "ok" within the SLO: what was really served

    def to_dict(self) -> dict[str, Any]:
        return {"offered_rate": round(self.offered_rate, 2),
                "achieved_rate": round(self.achieved_rate, 2),
                "goodput_rate": round(self.goodput_rate, 2), "sent": self.sent,
                "statuses": dict(sorted(self.statuses.items())), "latency_ms": self.latency_ms,
                "timeout_ratio": self.timeout_ratio, "cpu": self.cpu}


def new_histogram() -> HdrHistogram:
    return HdrHistogram(1, _HIGHEST_US, 3)  # microseconds, 3 significant digits


def summarise(hist: HdrHistogram) -> dict[str, float]:
    out = {f"p{p:g}": hist.get_value_at_percentile(p) / 1000 for p in PERCENTILES}
    out["max"] = hist.get_max_value() / 1000
    return out


class CpuMeter:
    """Machine-wide CPU busy share (``/proc/stat``) and this process's own CPU seconds."""

    def __init__(self) -> None:
        self._start = (_proc_stat(), time.process_time())

    def read(self) -> dict[str, float]:
        (busy0, total0), own0 = self._start
        busy1, total1 = _proc_stat()
        share = (busy1 - busy0) / (total1 - total0) if total1 > total0 else 0.0
        return {"machine_busy_pct": round(100 * share, 1),
                "generator_cpu_s": round(time.process_time() - own0, 3)}


def _proc_stat() -> tuple[float, float]:
    try:
        with open("/proc/stat", encoding="ascii") as fh:
            fields = [float(x) for x in fh.readline().split()[1:]]
    except OSError:
        return 0.0, 0.0
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0.0)
    return sum(fields) - idle, sum(fields)


def _result(offered: float, elapsed: float, statuses: Counter, hist: HdrHistogram,
            cpu: CpuMeter, good: int) -> RateResult:
    sent = sum(statuses.values())
    done = sent - statuses.get("unfinished", 0)
    late = statuses.get("timeout", 0) + statuses.get("unfinished", 0)
    return RateResult(offered, done / elapsed if elapsed > 0 else 0.0, sent, dict(statuses),
                      summarise(hist), late / sent if sent else 0.0, cpu.read(), hist,
                      good / elapsed if elapsed > 0 else 0.0)


async def closed_loop(target: Target, items: Sequence[CorpusItem], *, concurrency: int,
                      duration: float, slo_ms: float = math.inf) -> RateResult:
    """``concurrency`` callers, each sending its next job as soon as the last one answers."""
    hist, statuses, cpu = new_histogram(), Counter(), CpuMeter()
    good = [0]
    loop = asyncio.get_running_loop()
    end = loop.time() + duration
    start = loop.time()

    async def caller(offset: int) -> None:
        i = offset
        while loop.time() < end:
            item = items[i % len(items)]
            sent = loop.time()
            status = await target.call(item.op, item.payload)
            statuses[status] += 1
            took = loop.time() - sent
            hist.record_value(min(_HIGHEST_US, max(1, int(took * 1e6))))
            good[0] += status == "ok" and took * 1000 <= slo_ms
            i += concurrency

    await asyncio.gather(*(caller(k) for k in range(concurrency)))
    return _result(0.0, loop.time() - start, statuses, hist, cpu, good[0])


async def open_loop(target: Target, items: Sequence[CorpusItem], *, rate: float,
                    duration: float, seed: int = 1, drain: float = 30.0,
                    on_done: Callable[[], None] | None = None,
                    slo_ms: float = math.inf) -> RateResult:
    """Poisson arrivals at ``rate`` jobs/s for ``duration`` s; latency from intended send time.

    Jobs still unanswered ``drain`` seconds after the last intended send are counted as
    ``unfinished`` at the latency they had reached. Goodput counts the jobs answered ``ok``
    within ``slo_ms`` of their intended send time.
    """
    rng = random.Random(seed)
    hist, statuses, cpu = new_histogram(), Counter(), CpuMeter()
    good = [0]
    loop = asyncio.get_running_loop()
    start = loop.time() + 0.01
    pending: dict[asyncio.Task, float] = {}  # task -> intended send time

    async def one(item: CorpusItem, intended: float) -> None:
        status = await target.call(item.op, item.payload)
        statuses[status] += 1
        took = loop.time() - intended
        hist.record_value(min(_HIGHEST_US, max(1, int(took * 1e6))))
        good[0] += status == "ok" and took * 1000 <= slo_ms
        if on_done is not None:
            on_done()

    at, i = 0.0, 0
    while True:
        at += rng.expovariate(rate)
        if at >= duration:
            break
        wait = start + at - loop.time()
        if wait > 0:
            await asyncio.sleep(wait)
        task = loop.create_task(one(items[i % len(items)], start + at))
        pending[task] = start + at
        task.add_done_callback(lambda t: pending.pop(t, None))
        i += 1
    await _drain(pending, start + duration + drain, loop, statuses, hist)
    return _result(rate, loop.time() - start, statuses, hist, cpu, good[0])


async def _drain(pending: dict[asyncio.Task, float], until: float,
                 loop: asyncio.AbstractEventLoop, statuses: Counter, hist: HdrHistogram) -> None:
    if pending:
        await asyncio.wait(list(pending), timeout=max(0.0, until - loop.time()))
    now = loop.time()
    for task, intended in list(pending.items()):
        task.cancel()
        statuses["unfinished"] += 1
        hist.record_value(min(_HIGHEST_US, max(1, int((now - intended) * 1e6))))
