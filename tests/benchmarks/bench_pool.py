"""Round trips through the process backend against a direct call and ProcessPoolExecutor.

    python tests/benchmarks/bench_pool.py [--quick] [--workers N]

All figures come from one run on this machine: a 1 KB ``decode`` job called directly, through
``concurrent.futures.ProcessPoolExecutor`` and through ``Pool(backend="process")`` (same
number of workers), from 1 and from 16 client threads; then the caller's wait on a 50 ms
budget when the job sleeps 1 s, and the time from that timeout until every worker is idle
again (the stuck one killed and re-forked). Targets are printed beside the figures.
"""

from __future__ import annotations

import argparse
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

from pool import Pool  # noqa: E402
from tests.benchmarks.timing import drive  # noqa: E402
from worker.jobs import run_job, warm  # noqa: E402

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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer calls (a smoke run)")
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 2)
    args = parser.parse_args()
    calls = 300 if args.quick else 2000
    tries = 5 if args.quick else 20
    warm()  # both pools fork after the codec is loaded
    results: dict[tuple[str, int], dict] = {}

    print(f"1 KB decode, {args.workers} workers, {os.cpu_count()} CPUs")
    for threads in THREADS:
        per = max(calls // threads, 20)
        r = measure(lambda: run_job(job())["status"], threads, per)
        results["direct", threads] = r
        row("direct call", threads, r)

        ctx = multiprocessing.get_context("fork")
        with ProcessPoolExecutor(args.workers, mp_context=ctx) as ex:
            r = measure(lambda ex=ex: ex.submit(run_job, job()).result()["status"], threads, per)
        results["ppe", threads] = r
        row("ProcessPoolExecutor", threads, r)

        with Pool(workers=args.workers, timeout_ms=50, registry=CollectorRegistry()) as pool:
            r = measure(lambda pool=pool: pool.submit("decode", PAYLOAD)["status"], threads, per)
        results["pool", threads] = r
        row("Pool(process) 50 ms", threads, r)

    with Pool(workers=args.workers, timeout_ms=50, registry=CollectorRegistry()) as pool:
        waits, recover = deadline_figures(pool, tries)

    print("\ntargets (process backend vs ProcessPoolExecutor, same run)")
    for threads in THREADS:
        pool_r, ppe_r = results["pool", threads], results["ppe", threads]
        p50 = pool_r["p50_us"] / ppe_r["p50_us"]
        tput = pool_r["jobs_s"] / ppe_r["jobs_s"]
        print(f"  {threads:>2} thr: p50 ratio {p50:5.2f}x (target <= 0.6x) "
              f"{'ok' if p50 <= 0.6 else 'MISSED'}; throughput ratio {tput:5.2f}x "
              f"(target >= 1.5x) {'ok' if tput >= 1.5 else 'MISSED'}")  # fmt: skip
    med, worst = statistics.median(waits), max(waits)
    print(f"  caller's wait on 50 ms budget, {tries} tries: median {med:.1f} ms (target <= 55) "
          f"{'ok' if med <= 55 else 'MISSED'}; worst {worst:.1f} ms (target <= 65) "
          f"{'ok' if worst <= 65 else 'MISSED'}")  # fmt: skip
    med_r, worst_r = statistics.median(recover), max(recover)
    print(f"  timeout -> all {args.workers} workers idle: median {med_r:.1f} ms, worst "
          f"{worst_r:.1f} ms (target < 20) {'ok' if worst_r < 20 else 'MISSED'}")  # fmt: skip


if __name__ == "__main__":
    main()
