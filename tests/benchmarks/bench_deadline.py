"""The deadline under runaway inputs: toolcodec's process pool against ``pebble.ProcessPool``.

An open-loop load of ``--rate`` jobs a second for ``--seconds``, from asyncio callers, on
``--workers`` processes: healthy decodes of a Hermes call, and a share of runaway jobs that
would spin for 30 s (1 % and 10 %). Each contender gets the same schedule, in alternating
rounds. Printed per contender and share, min and median over the rounds: the worst and p99
caller wait (ms), the share of healthy jobs answered ok, and the CPU time of the calling
process per job. pebble's ``timeout=`` counts from when a task starts running, so its callers
also wait in its queue; toolcodec's budget counts from the call, waiting included.

Then: how soon a pool killed at a deadline is back at full strength (``capacity back``),
measured from the timeout's answer to the moment every slot holds a live worker again.

    python tests/benchmarks/bench_deadline.py [--rounds 3] [--rate 200] [--seconds 5]

pebble is optional (``pip install pebble``); without it only toolcodec is measured.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import random
import statistics
import sys
import time

os.environ["TOOLCODEC_FAULT_INJECTION"] = "1"  # before any worker starts

from prometheus_client import CollectorRegistry  # noqa: E402
from toolcodec import decode  # noqa: E402
from toolcodec.pool import Pool  # noqa: E402

TOOLS = [{"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}}}}]
TEXT = ('<tool_call>{"name": "get_weather", "arguments": {"city": "Paris", "days": "3",}}'
        '</tool_call>')
RUNAWAY_S = 30.0


def healthy_job() -> bool:  # pebble's task: the same decode a toolcodec worker runs
    return decode(TEXT, tools=TOOLS).ok


def runaway_job() -> None:
    end = time.perf_counter() + RUNAWAY_S
    while time.perf_counter() < end:
        pass


def schedule(rate: float, seconds: float, share: float, seed: int) -> list[tuple[float, bool]]:
    """(offset in seconds, is_runaway) for each job of the open loop."""
    rng = random.Random(seed)
    n = int(rate * seconds)
    return [(i / rate, rng.random() < share) for i in range(n)]


async def run_load(call, plan: list[tuple[float, bool]]) -> list[tuple[bool, float, bool]]:
    """(runaway, seconds waited, ok) for each job, each started at its offset."""
    start = time.monotonic()

    async def one(offset: float, runaway: bool) -> tuple[bool, float, bool]:
        await asyncio.sleep(max(start + offset - time.monotonic(), 0.0))
        t0 = time.monotonic()
        ok = await call(runaway)
        return runaway, time.monotonic() - t0, ok

    return await asyncio.gather(*(one(offset, runaway) for offset, runaway in plan))


def toolcodec_contender(workers: int, budget_ms: float):
    pool = Pool(workers=workers, timeout_ms=budget_ms, registry=CollectorRegistry())
    payload = {"text": TEXT, "tools": TOOLS}

    async def call(runaway: bool) -> bool:
        if runaway:
            out = await pool.asubmit("_spin", {"seconds": RUNAWAY_S})
        else:
            out = await pool.asubmit("decode", payload)
        return out["status"] == "ok" and bool(out["result"].get("ok", True))

    return call, pool.close


def pebble_contender(workers: int, budget_ms: float):
    from pebble import ProcessPool  # optional: the benchmark's comparison only

    pool = ProcessPool(max_workers=workers)

    async def call(runaway: bool) -> bool:
        future = pool.schedule(runaway_job if runaway else healthy_job, timeout=budget_ms / 1000)
        try:
            return bool(await asyncio.wrap_future(future))
        except Exception:  # noqa: BLE001 - TimeoutError, ProcessExpired: not ok
            return False

    def close() -> None:
        pool.stop()
        pool.join(timeout=5)

    return call, close


def measure(make, args, share: float, seed: int) -> dict[str, float]:
    call, close = make(args.workers, args.budget_ms)
    try:
        asyncio.run(call(False))  # warm: the first decode builds the tool set
        cpu = time.process_time()
        rows = asyncio.run(run_load(call, schedule(args.rate, args.seconds, share, seed)))
        cpu = time.process_time() - cpu
    finally:
        close()
    waits = sorted(w for _, w, _ in rows)
    healthy = [ok for runaway, _, ok in rows if not runaway]
    return {"worst_ms": waits[-1] * 1000, "p99_ms": waits[int(0.99 * (len(waits) - 1))] * 1000,
            "healthy_ok": sum(healthy) / max(len(healthy), 1),
            "cpu_us_per_job": cpu / len(rows) * 1e6}


def capacity_back(workers: int, budget_ms: float, times: int) -> list[float]:
    """Milliseconds from a runaway's timeout answer until every slot is live again."""
    out = []
    with Pool(workers=workers, timeout_ms=budget_ms, registry=CollectorRegistry()) as pool:
        for _ in range(times):
            pool.submit("_spin", {"seconds": RUNAWAY_S})
            t0 = time.monotonic()
            while pool.impl.counts()["idle"] + pool.impl.counts()["busy"] < workers:
                time.sleep(0.0002)
            out.append((time.monotonic() - t0) * 1000)
            while pool.impl.counts()["starting"] or pool.impl.counts()["idle"] < workers:
                time.sleep(0.001)  # the spare is re-made before the next round
            time.sleep(0.05)
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--rate", type=float, default=200.0)
    parser.add_argument("--seconds", type=float, default=5.0)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--budget-ms", type=float, default=50.0)
    args = parser.parse_args()
    contenders = {"toolcodec": toolcodec_contender}
    try:
        import pebble  # noqa: F401 - optional
        contenders["pebble"] = pebble_contender
    except ImportError:
        print("pebble is not installed: measuring toolcodec alone (pip install pebble)")
    print(f"{args.rate:g} jobs/s for {args.seconds:g} s on {args.workers} workers, "
          f"budget {args.budget_ms:g} ms, {args.rounds} rounds alternated; min / median")
    for share in (0.01, 0.10):
        results: dict[str, list[dict[str, float]]] = {name: [] for name in contenders}
        for r in range(args.rounds):
            for name, make in contenders.items():
                results[name].append(measure(make, args, share, seed=r))
        for name, rounds in results.items():
            cells = []
            for key in ("worst_ms", "p99_ms", "healthy_ok", "cpu_us_per_job"):
                values = [row[key] for row in rounds]
                fmt = "{:.1%}" if key == "healthy_ok" else "{:.0f}"
                cells.append(f"{key} {fmt.format(min(values))} / "
                             f"{fmt.format(statistics.median(values))}")
            print(f"  runaway {share:.0%}  {name:9s} " + ", ".join(cells))
    back = capacity_back(args.workers, args.budget_ms, 10)
    print(f"capacity back after a timeout: min {min(back):.2f} ms, median "
          f"{statistics.median(back):.2f} ms, max {max(back):.2f} ms (target 20 ms)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
