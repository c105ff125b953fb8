"""``toolcodec bench capacity``: the highest rate at which p99 stays under the SLO.

Per target: a warm-up (discarded), the closed-loop ceiling, then open-loop steps at
fractions of that ceiling from 0.1× to 1.2×; while the highest step still passes, steps 1.5×
higher (up to :data:`MAX_EXTRA_STEPS`), because a closed loop with few callers can underrate a
target (an HTTP server far from its limit); then a bisection between the highest passing and
the lowest failing step. A step passes when its p99 ≤ ``slo_ms`` and its timeout ratio ≤
``max_timeout_ratio`` (jobs left unanswered count as timeouts). The answer, ``rate_at_slo``,
is the highest passing offered rate; ``bracketed`` says a failing rate above it was measured
(if not, the capacity is above the highest rate tried). Each step also reports its goodput:
jobs answered ``ok`` within the SLO per second, which a step with many timeouts does not have.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from toolcodec.pool.bench.corpus import CorpusItem
from toolcodec.pool.bench.load import RateResult, closed_loop, open_loop
from toolcodec.pool.bench.targets import Target

SWEEP = (0.1, 0.3, 0.5, 0.7, 0.85, 1.0, 1.2)
EXTEND = 1.5  # the next rate tried while the highest one still passes
MAX_EXTRA_STEPS = 6  # 1.2 × 1.5^6 ≈ 14 × the closed-loop ceiling


@dataclass(slots=True)
class Settings:
    slo_ms: float = 50.0
    max_timeout_ratio: float = 0.001
    duration: float = 20.0
    warmup: float = 1.0
    concurrency: int = 32  # closed-loop callers
    bisect_steps: int = 2
    seed: int = 1
    cores: int = 1  # what the per-core figure divides by


@dataclass(slots=True)
class TargetReport:
    target: str
    ceiling: RateResult
    steps: list[RateResult] = field(default_factory=list)
    passed: dict[int, bool] = field(default_factory=dict)  # id(step) -> verdict

    def verdict(self, step: RateResult, settings: Settings) -> bool:
        return (step.latency_ms["p99"] <= settings.slo_ms
                and step.timeout_ratio <= settings.max_timeout_ratio)

    def answer(self, settings: Settings) -> dict[str, Any]:
        ordered = sorted(self.steps, key=lambda s: s.offered_rate)
        ok = [s for s in ordered if self.verdict(s, settings)]
        best = ok[-1] if ok else None
        above = [s for s in ordered if best is not None and s.offered_rate > best.offered_rate
                 and not self.verdict(s, settings)]
        rate = round(best.offered_rate, 2) if best else 0.0
        return {"rate_at_slo": rate,
                "achieved_at_slo": round(best.achieved_rate, 2) if best else 0.0,
                "goodput_at_slo": round(best.goodput_rate, 2) if best else 0.0,
                "timeout_ratio_at_slo": best.timeout_ratio if best else None,
                "cores": settings.cores,
                "rate_at_slo_per_core": round(rate / max(1, settings.cores), 2),
                "p99_at_slo_ms": best.latency_ms["p99"] if best else None,
                "bracketed": bool(above) or (best is None and bool(ordered)),
                "first_failing_rate": round(above[0].offered_rate, 2) if above else None}

    def to_dict(self, settings: Settings) -> dict[str, Any]:
        steps = sorted(self.steps, key=lambda s: s.offered_rate)
        return {"target": self.target, "ceiling": self.ceiling.to_dict(),
                **self.answer(settings),
                "steps": [{**s.to_dict(), "passed": self.verdict(s, settings)} for s in steps]}


async def measure(target: Target, items: Sequence[CorpusItem], settings: Settings,
                  progress: Callable[[str, float], None] | None = None) -> TargetReport:
    """Run the whole search on one target."""
    note = progress or (lambda _what, _fraction: None)
    note(f"{target.name}: warm-up", 0.0)
    await closed_loop(target, items, concurrency=settings.concurrency, duration=settings.warmup)
    note(f"{target.name}: closed-loop ceiling", 0.05)
    ceiling = await closed_loop(target, items, concurrency=settings.concurrency,
                                duration=settings.duration, slo_ms=settings.slo_ms)
    report = TargetReport(target.name, ceiling)
    top = max(ceiling.achieved_rate, 1.0)
    rates = [f * top for f in SWEEP]
    total = len(rates) + settings.bisect_steps
    for n, rate in enumerate(rates):
        note(f"{target.name}: open loop at {rate:.0f}/s", 0.1 + 0.9 * n / total)
        report.steps.append(await _step(target, items, rate, settings, n))
    for n in range(MAX_EXTRA_STEPS):  # bracket the limit: go on while the top step passes
        if not report.verdict(report.steps[-1], settings):
            break
        rate = report.steps[-1].offered_rate * EXTEND
        note(f"{target.name}: open loop at {rate:.0f}/s (above the ceiling)",
             0.1 + 0.9 * (len(rates) - 1) / total)
        report.steps.append(await _step(target, items, rate, settings, 50 + n))
    for n in range(settings.bisect_steps):
        low, high = _bracket(report, settings)
        if low is None or high is None or high - low < max(1.0, 0.02 * top):
            break
        rate = (low + high) / 2
        note(f"{target.name}: bisect at {rate:.0f}/s", 0.1 + 0.9 * (len(rates) + n) / total)
        report.steps.append(await _step(target, items, rate, settings, 100 + n))
    note(f"{target.name}: done", 1.0)
    return report


async def _step(target: Target, items: Sequence[CorpusItem], rate: float, settings: Settings,
                n: int) -> RateResult:
    return await open_loop(target, items, rate=rate, duration=settings.duration,
                           seed=settings.seed * 1000 + n, slo_ms=settings.slo_ms)


def _bracket(report: TargetReport, settings: Settings) -> tuple[float | None, float | None]:
    """The highest passing rate and the lowest failing rate above it."""
    ordered = sorted(report.steps, key=lambda s: s.offered_rate)
    passing = [s.offered_rate for s in ordered if report.verdict(s, settings)]
    if not passing:
        return None, None
    failing = [s.offered_rate for s in ordered
               if s.offered_rate > passing[-1] and not report.verdict(s, settings)]
    return passing[-1], (failing[0] if failing else None)
