"""Normal jobs among faulty ones: how many still answer ``ok`` on each backend, in one run.

    python tests/benchmarks/bench_faults.py [--jobs N] [--threads 16] [--fault-rate 0.1]

Both backends get two lanes (the process pool: two worker processes; RQ: one
``toolcodec worker --concurrency 2`` on its own redis-server). Caller threads submit a 1 KB
``decode`` with a 50 ms budget; a ``--fault-rate`` share of the submissions are instead
``_sleep`` or ``_spin`` for a second or ``_crash`` (fault injection on). Prints, per backend,
the share of normal jobs answered ``ok``, the statuses of all calls, and the RQ figure as a
ratio of the process pool's (target: >= 0.9, i.e. RQ near the embedded pool).
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import threading
from collections import Counter
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
os.environ["TOOLCODEC_FAULT_INJECTION"] = "1"  # inherited by the pool's worker processes

from toolcodec.pool.process import ProcessBackend  # noqa: E402
from toolcodec.pool.rq_backend import RQBackend  # noqa: E402

from tests.benchmarks.bench_pool_rq import PAYLOAD  # noqa: E402
from tests.benchmarks.timing import drive  # noqa: E402
from tests.redis_server import RedisServer, WorkerProcessGroup  # noqa: E402

FAULTS = [("_sleep", {"seconds": 1}), ("_spin", {"seconds": 1}), ("_crash", {})]
BUDGET_MS = 50


def run_mix(backend, threads: int, per_thread: int, rate: float, seed: int) -> dict:
    """Drive the mix; returns the normal jobs' statuses and every call's."""
    normal: Counter[str] = Counter()
    lock = threading.Lock()
    rngs = threading.local()

    def call() -> str:
        rng = getattr(rngs, "rng", None)
        if rng is None:
            rng = rngs.rng = random.Random(f"{seed}-{threading.get_ident()}")
        if rng.random() < rate:
            op, payload = rng.choice(FAULTS)
            return "fault:" + backend.submit(op, payload, timeout_ms=BUDGET_MS)["status"]
        status = backend.submit("decode", PAYLOAD, timeout_ms=BUDGET_MS)["status"]
        with lock:
            normal[status] += 1
        return status

    load = drive(call, threads, per_thread)
    done = sum(normal.values())
    return {"ok_share": normal["ok"] / done if done else 0.0, "normal": dict(normal),
            "all": load.statuses, "rate": load.rate}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--threads", type=int, default=16)
    parser.add_argument("--jobs", type=int, default=3000, help="calls in all, per backend")
    parser.add_argument("--fault-rate", type=float, default=0.1)
    parser.add_argument("--seed", type=int, default=7)
    args = parser.parse_args()
    per_thread = max(1, args.jobs // args.threads)

    results = {}
    pool = ProcessBackend(workers=2, timeout_ms=BUDGET_MS)
    try:
        run_mix(pool, 2, 20, 0.0, args.seed)  # warm both workers
        results["process pool"] = run_mix(pool, args.threads, per_thread, args.fault_rate,
                                          args.seed)
    finally:
        pool.close()

    server = RedisServer()
    server.start()
    group = WorkerProcessGroup(server.url, "bench-faults", concurrency=2)
    try:
        group.start()
        rq = RQBackend(redis_url=server.url, queue="bench-faults", timeout_ms=BUDGET_MS)
        try:
            run_mix(rq, 2, 20, 0.0, args.seed)
            results["RQ backend"] = run_mix(rq, args.threads, per_thread, args.fault_rate,
                                            args.seed)
            left = server.client().llen("rq:queue:bench-faults:intermediate")
        finally:
            rq.close()
    finally:
        group.stop()
        server.close()

    print(f"{args.threads} threads, 2 lanes, {args.fault_rate:.0%} faults "
          f"(_sleep/_spin 1 s, _crash), {BUDGET_MS} ms budget")
    print(f"{'backend':14} {'normal ok':>9} {'calls/s':>8}  normal jobs / all calls")
    for name, r in results.items():
        print(f"{name:14} {r['ok_share']:9.1%} {r['rate']:8.0f}  {r['normal']} / {r['all']}")
    ratio = results["RQ backend"]["ok_share"] / max(results["process pool"]["ok_share"], 1e-9)
    print(f"ids left in the intermediate list after the run: {left}")
    print(f"target: RQ normal-ok share >= 0.9x the process pool's: {ratio:.2f}x "
          f"-> {'met' if ratio >= 0.9 else 'MISSED'}")


if __name__ == "__main__":
    main()
