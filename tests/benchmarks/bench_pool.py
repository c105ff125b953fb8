"""Round trips through the process backend against a direct call and ProcessPoolExecutor.

    python tests/benchmarks/bench_pool.py [--quick] [--workers N]

All figures come from one run on this machine: a 1 KB ``decode`` job called directly, through
``concurrent.futures.ProcessPoolExecutor`` and through ``Pool(backend="process")`` (same
number of workers), from 1, 8 and 16 client threads, the executor and the pool alternating
for ``--rounds`` rounds (the shared machine's load drifts; the ratios printed are the
medians); then the caller's wait on a 50 ms budget when the job sleeps 1 s, the time from
that timeout until every worker is idle again (the stuck one killed and re-forked), and the
event loop's worst pause while ``asubmit`` calls run. Targets are printed beside the
figures.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import sys
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
os.environ["TOOLCODEC_FAULT_INJECTION"] = "1"  # for the _sleep job; inherited by workers

import multiprocessing  # noqa: E402

from prometheus_client import CollectorRegistry  # noqa: E402
from toolcodec.pool import Pool  # noqa: E402
from toolcodec.worker.jobs import run_job, warm  # noqa: E402

from tests.benchmarks.timing import drive  # noqa: E402

TEXT = (
    "Let me check the weather for you.\n<tool_call>\n"
    '{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius", "note": "'
    + "x" * 820
    + '"}}\n</tool_call>'
)
PROPERTIES = {"city": {"type": "string"}, "unit": {"type": "string"}, "note": {"type": "string"}}
TOOLS = [{"name": "get_weather", "parameters": {"type": "object", "properties": PROPERTIES}}]
PAYLOAD = {"text": TEXT, "tools": TOOLS}
THREADS = (1, 8, 16)


def job() -> dict:
    return {"id": "bench", "op": "decode", "payload": PAYLOAD, "deadline": time.time() + 10}


def measure(call: Callable[[], str], threads: int, per_thread: int) -> dict:
    """Run ``call`` from ``threads`` threads; latency percentiles, jobs/s and statuses."""
    for _ in range(20):
        call()  # warm caches and code paths
    load = drive(call, threads, per_thread)
    return {
        "p50_us": load.percentile(0.5) * 1e6,
        "p99_us": load.percentile(0.99) * 1e6,
        "jobs_s": load.rate,
        "statuses": load.statuses,
    }


def row(name: str, threads: int, r: dict) -> None:
    print(f"{name:<22} {threads:>3} thr  p50 {r['p50_us']:8.1f} us  p99 {r['p99_us']:8.1f} us"
          f"  {r['jobs_s']:9.0f} jobs/s  {r['statuses']}")  # fmt: skip


def deadline_figures(pool: Pool, tries: int) -> tuple[list[float], list[float]]:
    """Caller's wait on a 50 ms budget (job sleeps 1 s), and timeout -> all workers idle."""
    waits, recover = [], []
    backend = pool.impl
    for _ in range(tries):
        t0 = time.perf_counter()
        out = pool.submit("_sleep", {"seconds": 1}, timeout_ms=50)
        t1 = time.perf_counter()
        assert out["status"] == "timeout", out
        waits.append((t1 - t0) * 1000)
        while backend.counts()["idle"] < backend.workers:
            time.sleep(0.0002)
        recover.append((time.perf_counter() - t1) * 1000)
        # check the capacity is real: every worker takes a job at once
        outs = pool.map("_sleep", [{"seconds": 0.005}] * backend.workers, timeout_ms=1000)
        assert all(o["status"] == "ok" for o in outs), outs
    return waits, recover


def loop_gap(pool: Pool) -> float:
    """The event loop's worst pause (ms) while 4 asubmit calls of 100 ms each run."""

    async def main() -> float:
        gaps: list[float] = []
        stop = asyncio.Event()

        async def ticker() -> None:
            last = time.perf_counter()
            while not stop.is_set():
                await asyncio.sleep(0.005)
                now = time.perf_counter()
                gaps.append(now - last - 0.005)
                last = now

        tick = asyncio.create_task(ticker())
        await asyncio.gather(*(pool.asubmit("_sleep", {"seconds": 0.1}, timeout_ms=1000)
                               for _ in range(4)))
        stop.set()
        await tick
        return max(gaps) * 1000

    return asyncio.run(main())


def compare(threads: int, per: int, workers: int, rounds: int) -> tuple[dict, dict, list]:
    """Alternate ProcessPoolExecutor and the pool ``rounds`` times (the machine's load
    drifts); the last round's figures and every round's (p50 ratio, throughput ratio)."""
    ratios = []
    ctx = multiprocessing.get_context("fork")
    for _ in range(rounds):
        with ProcessPoolExecutor(workers, mp_context=ctx) as ex:
            ppe = measure(lambda ex=ex: ex.submit(run_job, job()).result()["status"], threads, per)
        with Pool(workers=workers, timeout_ms=1000, registry=CollectorRegistry()) as pool:
            mine = measure(lambda pool=pool: pool.submit("decode", PAYLOAD)["status"], threads,
                           per)
        ratios.append((mine["p50_us"] / ppe["p50_us"], mine["jobs_s"] / ppe["jobs_s"]))
    return ppe, mine, ratios


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer calls (a smoke run)")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 2)
    parser.add_argument("--rounds", type=int, default=3, help="alternations per thread count")
    args = parser.parse_args()
    calls = 400 if args.quick else 3000
    tries = 5 if args.quick else 20
    warm()  # both pools fork after the codec is loaded

    print(f"1 KB decode, {args.workers} workers, {os.cpu_count()} CPUs")
    summary = []
    for threads in THREADS:
        per = max(calls // threads, 20)
        row("direct call", threads, measure(lambda: run_job(job())["status"], threads, per))
        ppe, mine, ratios = compare(threads, per, args.workers, args.rounds)
        row("ProcessPoolExecutor", threads, ppe)
        row("Pool(process)", threads, mine)
        summary.append((threads, ratios))

    with Pool(workers=args.workers, timeout_ms=50, registry=CollectorRegistry()) as pool:
        waits, recover = deadline_figures(pool, tries)
        gap = loop_gap(pool)

    print(f"\ntargets (process backend vs ProcessPoolExecutor, median of {args.rounds} "
          "alternating rounds in this run)")
    for threads, ratios in summary:
        p50 = statistics.median(r[0] for r in ratios)
        tput = statistics.median(r[1] for r in ratios)
        each = ", ".join(f"{r[1]:.2f}" for r in ratios)
        print(f"  {threads:>2} thr: p50 ratio {p50:5.2f}x (target <= 0.6x) "
              f"{'ok' if p50 <= 0.6 else 'MISSED'}; throughput ratio {tput:5.2f}x "
              f"(target >= 1.5x) {'ok' if tput >= 1.5 else 'MISSED'} [rounds: {each}]")
    med, worst = statistics.median(waits), max(waits)
    print(f"  caller's wait on 50 ms budget, {tries} tries: median {med:.1f} ms (target <= 55) "
          f"{'ok' if med <= 55 else 'MISSED'}; worst {worst:.1f} ms (target <= 65) "
          f"{'ok' if worst <= 65 else 'MISSED'}")  # fmt: skip
    med_r, worst_r = statistics.median(recover), max(recover)
    print(f"  timeout -> all {args.workers} workers idle: median {med_r:.1f} ms, worst "
          f"{worst_r:.1f} ms (target < 20) {'ok' if worst_r < 20 else 'MISSED'}")  # fmt: skip
    print(f"  event loop's worst pause during 4 x 100 ms asubmit: {gap:.1f} ms "
          f"(target < 50) {'ok' if gap < 50 else 'MISSED'}")


if __name__ == "__main__":
    main()
