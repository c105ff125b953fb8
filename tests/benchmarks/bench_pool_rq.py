"""Round trips through plain RQ and through toolcodec's RQ backend, measured in one run.

    python tests/benchmarks/bench_pool_rq.py [--quick]

Starts its own redis-server, then for each system two worker processes (plain RQ) or one
``toolcodec worker --concurrency 2`` (two lanes, two children), and times a 1 KB ``decode``
job from 1 and from 16 client threads. Plain RQ is used as its documentation shows:
``Queue.enqueue`` then ``Job.latest_result(timeout=...)`` (a blocking read of the result
stream, the stock user's best option). Prints p50/p99 per call, jobs/s, and the targets.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import redis  # noqa: E402
from rq import Queue  # noqa: E402
from toolcodec.pool.rq_backend import RQBackend  # noqa: E402

from tests.benchmarks.timing import drive  # noqa: E402
from tests.redis_server import RedisServer, WorkerProcessGroup  # noqa: E402

TEXT = (
    "Let me check the weather for you.\n<tool_call>\n"
    '{"name": "get_weather", "arguments": {"city": "Paris", "unit": "celsius", "note": "'
    + "x" * 820
    + '"}}\n</tool_call>'
)
TOOLS = [{"name": "get_weather", "parameters": {"type": "object", "properties": {
    "city": {"type": "string"}, "unit": {"type": "string"}, "note": {"type": "string"}}}}]
PAYLOAD = {"text": TEXT, "tools": TOOLS}

PLAIN_WORKER = """
import sys, redis
from rq import Queue, SimpleWorker, Worker
cls = {"simple": SimpleWorker, "default": Worker}[sys.argv[1]]
conn = redis.Redis.from_url(sys.argv[2])
cls([Queue(sys.argv[3], connection=conn)], connection=conn).work(logging_level="WARNING")
"""





def drive_ms(call, threads: int, per_thread: int) -> dict:
    """Run ``call()`` ``per_thread`` times in each of ``threads`` threads (figures in ms)."""
    load = drive(call, threads, per_thread)
    return {"p50": load.percentile(0.5) * 1e3, "p99": load.percentile(0.99) * 1e3,
            "rate": load.rate, "statuses": load.statuses}


def start_plain(kind: str, url: str, queue: str, n: int = 2) -> list[subprocess.Popen]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [subprocess.Popen([sys.executable, "-c", PLAIN_WORKER, kind, url, queue], env=env,
                              cwd=ROOT) for _ in range(n)]
    client = redis.Redis.from_url(url)
    while client.scard(f"rq:workers:{queue}") < n:
        time.sleep(0.05)
    client.close()
    return procs


def stop_plain(procs: list[subprocess.Popen]) -> None:
    for p in procs:
        p.kill()
        p.wait()


def plain_call(queue: Queue):
    def call() -> str:
        job = {"id": "bench", "op": "decode", "payload": PAYLOAD, "deadline": time.time() + 5}
        rq_job = queue.enqueue("toolcodec.worker.jobs.run_job", job)
        result = rq_job.latest_result(timeout=5)
        return result.return_value["status"] if result and result.return_value else "lost"
    return call


def bench_plain(kind: str, url: str, counts: dict) -> dict[int, dict]:
    name = f"bench-plain-{kind}"
    procs = start_plain(kind, url, name)
    conn = redis.Redis.from_url(url)
    queue = Queue(name, connection=conn)
    try:
        drive_ms(plain_call(queue), 1, 5)  # warm imports in the workers
        return {t: drive_ms(plain_call(queue), t, n) for t, n in counts.items()}
    finally:
        stop_plain(procs)
        conn.close()


def bench_ours(url: str, counts: dict) -> dict[int, dict]:
    group = WorkerProcessGroup(url, "bench-toolcodec", concurrency=2,
                               env={"TOOLCODEC_FAULT_INJECTION": "0"})
    group.start()
    backend = RQBackend(redis_url=url, queue="bench-toolcodec", timeout_ms=5000)

    def call() -> str:
        return backend.submit("decode", PAYLOAD)["status"]

    try:
        drive_ms(call, 1, 50)
        return {t: drive_ms(call, t, n) for t, n in counts.items()}
    finally:
        backend.close()
        group.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer jobs per measurement")
    args = parser.parse_args()
    scale = 0.3 if args.quick else 1.0

    def counts(one: int, per: int) -> dict[int, int]:
        return {1: max(10, int(one * scale)), 16: max(2, int(per * scale))}

    server = RedisServer()
    server.start()
    try:
        rows = {
            "plain RQ Worker (fork per job)": bench_plain("default", server.url, counts(60, 8)),
            "plain RQ SimpleWorker": bench_plain("simple", server.url, counts(300, 25)),
            "toolcodec RQ backend": bench_ours(server.url, counts(1000, 150)),
        }
    finally:
        server.close()

    print(f"1 KB decode round trip, 2 workers, redis-server {server.port} "
          f"(p50/p99 in ms per call)")
    print(f"{'system':34} {'threads':>7} {'p50':>8} {'p99':>8} {'jobs/s':>9}  statuses")
    for name, by_threads in rows.items():
        for t, r in by_threads.items():
            print(f"{name:34} {t:>7} {r['p50']:8.2f} {r['p99']:8.2f} {r['rate']:9.0f}  "
                  f"{r['statuses']}")
    ours, simple = rows["toolcodec RQ backend"], rows["plain RQ SimpleWorker"]
    default = rows["plain RQ Worker (fork per job)"]
    p50 = ours[1]["p50"]
    print()
    print(f"target: RQ backend p50 <= SimpleWorker p50: {p50:.2f} vs {simple[1]['p50']:.2f} ms "
          f"-> {'met' if p50 <= simple[1]['p50'] else 'MISSED'}")
    ratio = default[1]["p50"] / p50
    print(f"target: >= 5x lower p50 than the default Worker: {ratio:.1f}x "
          f"-> {'met' if ratio >= 5 else 'MISSED'}")
    rate = ours[16]["rate"]
    print(f"target: >= 1000 jobs/s with 2 workers, 16 threads: {rate:.0f} "
          f"-> {'met' if rate >= 1000 else 'MISSED'}")


if __name__ == "__main__":
    main()
