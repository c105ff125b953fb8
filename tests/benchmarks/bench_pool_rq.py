"""Round trips through plain RQ and through toolcodec's RQ backend, measured in one run.

    python tests/benchmarks/bench_pool_rq.py [--quick] [--rounds N] [--baseline COMMIT]

Starts its own redis-server. Four parts:

1. Throughput at 16 caller threads, ``toolcodec worker --concurrency 2`` (two lanes), a 1 KB
   ``decode`` job: the RQ backend as it is now against the previous implementation
   (``pool/rq_backend.py`` at ``--baseline``, loaded from git), alternated over ``--rounds``
   rounds; jobs/s (min and median) and CPU time per job in the caller's process, the worker's
   process tree and redis-server, read from ``/proc`` (Linux); ``queued``: the median depth
   of the queue meanwhile (14 of 16 jobs waiting means the lanes, not the callers, set the
   rate).
2. One event loop, 48 ``Pool.asubmit`` calls in flight, 12 lanes running 100 ms jobs (the lanes
   can answer 120/s): the native ``asubmit`` against the previous backend, which ``Pool`` ran
   in asyncio's default thread pool.
3. Overload: one lane of 10 ms jobs, 32 asyncio callers with 50 ms budgets: ok answers per
   second (goodput) and what the rest were told, now and before.
4. Plain RQ as its documentation shows it (``Queue.enqueue`` then
   ``Job.latest_result(timeout=...)``) with two worker processes, for the latency targets.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import threading
import time
import types
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import redis  # noqa: E402
from rq import Queue  # noqa: E402
from toolcodec.pool.api import Pool  # noqa: E402
from toolcodec.pool.rq_backend import RQBackend  # noqa: E402
from toolcodec.worker import rq_protocol  # noqa: E402

from tests.benchmarks.timing import drive  # noqa: E402
from tests.redis_server import RedisServer, WorkerProcessGroup  # noqa: E402

# The last commit before the enqueue thread: one round trip per job on the caller's thread.
BASELINE = "83c711f"
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
_TICK = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """User + system CPU of ``pid`` and all its descendants (live ones), from /proc."""
    total, todo = 0.0, [pid]
    while todo:
        p = todo.pop()
        try:
            fields = Path(f"/proc/{p}/stat").read_text().rsplit(")", 1)[1].split()
            total += (int(fields[11]) + int(fields[12])) / _TICK
            for task in os.listdir(f"/proc/{p}/task"):
                todo += map(int, Path(f"/proc/{p}/task/{task}/children").read_text().split())
        except (OSError, ValueError):
            pass
    return total


def load_baseline(commit: str) -> type | None:
    """``RQBackend`` as it was at ``commit``, or None when git cannot show it.

    Its replies are read through a protocol module that drops the lane time newer workers
    add, so both contenders run against the same worker.
    """
    try:
        src = subprocess.run(["git", "show", f"{commit}:pool/rq_backend.py"], cwd=ROOT,
                             capture_output=True, check=True).stdout
    except (OSError, subprocess.CalledProcessError):
        return None
    name = "toolcodec.pool.rq_backend_baseline"
    module = types.ModuleType(name)
    sys.modules[name] = module  # dataclasses look their module up
    exec(compile(src, f"pool/rq_backend.py@{commit}", "exec"), module.__dict__)
    shim = types.SimpleNamespace(**vars(rq_protocol))

    def decode_reply(raw: bytes):
        reply = rq_protocol.decode_reply(raw)
        return None if reply is None else reply[:2]

    shim.decode_reply = decode_reply
    module.proto = shim
    return module.RQBackend


def throughput(backend, threads: int, per_thread: int, worker_pid: int, redis_pid: int,
               url: str, queue: str) -> dict:
    """16-thread jobs/s and CPU per job (µs) in the caller, the worker tree and Redis."""
    def call() -> str:
        return backend.submit("decode", PAYLOAD)["status"]

    # The queue's depth, sampled while the load runs: full means the lanes are the bound.
    depths: list[int] = []
    done = threading.Event()
    probe = redis.Redis.from_url(url)

    def sample() -> None:
        while not done.wait(0.005):
            depths.append(int(probe.llen(rq_protocol.queue_key(queue))))

    sampler = threading.Thread(target=sample)
    sampler.start()
    w0, r0, c0 = cpu_seconds(worker_pid), cpu_seconds(redis_pid), time.process_time()
    load = drive(call, threads, per_thread)
    w1, r1, c1 = cpu_seconds(worker_pid), cpu_seconds(redis_pid), time.process_time()
    done.set()
    sampler.join()
    probe.close()
    n = threads * per_thread
    return {"rate": load.rate, "p50": load.percentile(0.5) * 1e3,
            "depth": statistics.median(depths) if depths else 0.0,
            "p99": load.percentile(0.99) * 1e3, "statuses": load.statuses,
            "caller_us": (c1 - c0) / n * 1e6, "worker_us": (w1 - w0) / n * 1e6,
            "redis_us": (r1 - r0) / n * 1e6}


def bench_throughput(url: str, rounds: int, per_thread: int, before_cls: type | None) -> dict:
    group = WorkerProcessGroup(url, "bench-toolcodec", concurrency=2,
                               env={"TOOLCODEC_FAULT_INJECTION": "0"})
    group.start()
    assert group.proc is not None
    server_pid = int(redis.Redis.from_url(url).info("server")["process_id"])
    contenders = {"now": RQBackend}
    if before_cls is not None:
        contenders["before"] = before_cls
    backends = {k: cls(redis_url=url, queue="bench-toolcodec", timeout_ms=5000)
                for k, cls in contenders.items()}
    rows: dict[str, list[dict]] = {k: [] for k in backends}
    try:
        for b in backends.values():
            drive(lambda b=b: b.submit("decode", PAYLOAD)["status"], 1, 50)  # warm
        for _ in range(rounds):
            for name, b in backends.items():  # alternated, so drift hits both alike
                rows[name].append(throughput(b, 16, per_thread, group.proc.pid, server_pid,
                                             url, "bench-toolcodec"))
        single = {name: drive(lambda b=b: b.submit("decode", PAYLOAD)["status"], 1,
                              per_thread * 4).percentile(0.5) * 1e3
                  for name, b in backends.items()}
    finally:
        for b in backends.values():
            b.close()
        group.stop()
    return {"rows": rows, "single_p50": single}


def bench_event_loop(url: str, before_cls: type | None, jobs: int) -> dict[str, float]:
    """Answers/s from one event loop, 48 asubmit calls in flight, 12 lanes of 100 ms jobs."""
    group = WorkerProcessGroup(url, "bench-loop", concurrency=12)
    group.start()
    out = {}
    try:
        contenders = {"now": RQBackend} | ({"before": before_cls} if before_cls else {})
        for name, cls in contenders.items():
            with Pool(backend="rq", redis_url=url, queue="bench-loop", timeout_ms=5000) as pool:
                if name == "before":  # as the previous backend ran: no native asubmit
                    pool._impl.close()
                    pool._impl = cls(redis_url=url, queue="bench-loop", timeout_ms=5000)

                async def run(pool: Pool = pool) -> float:
                    left = jobs
                    t0 = time.perf_counter()

                    async def caller() -> None:
                        nonlocal left
                        while left > 0:
                            left -= 1
                            await pool.asubmit("_sleep", {"seconds": 0.1})

                    await asyncio.gather(*(caller() for _ in range(48)))
                    return jobs / (time.perf_counter() - t0)

                out[name] = asyncio.run(run())
    finally:
        group.stop()
    return out


def bench_overload(url: str, before_cls: type | None, jobs: int) -> dict[str, dict]:
    """Goodput under overload: one lane of 10 ms jobs (at most 100/s), 32 asyncio callers
    with 50 ms budgets, each pausing 10 ms after an answer that is not ok (a client honouring
    a short Retry-After). Returns, per backend, ok answers/s and the count of each answer."""
    group = WorkerProcessGroup(url, "bench-overload", concurrency=1)
    group.start()
    out = {}
    try:
        contenders = {"now": RQBackend} | ({"before": before_cls} if before_cls else {})
        for name, cls in contenders.items():
            with Pool(backend="rq", redis_url=url, queue="bench-overload",
                      timeout_ms=50) as pool:
                if name == "before":
                    pool._impl.close()
                    pool._impl = cls(redis_url=url, queue="bench-overload", timeout_ms=50)
                for _ in range(10):  # the lane's time is known before the load starts
                    pool.submit("_sleep", {"seconds": 0.01}, timeout_ms=5000)

                async def run(pool: Pool = pool) -> dict:
                    left, seen = jobs, {}
                    t0 = time.perf_counter()

                    async def caller() -> None:
                        nonlocal left
                        while left > 0:
                            left -= 1
                            env = await pool.asubmit("_sleep", {"seconds": 0.01})
                            key = env["status"] if env["status"] != "error" else \
                                env["error"]["code"]
                            seen[key] = seen.get(key, 0) + 1
                            if env["status"] != "ok":
                                await asyncio.sleep(0.01)

                    await asyncio.gather(*(caller() for _ in range(32)))
                    wall = time.perf_counter() - t0
                    return {"goodput": seen.get("ok", 0) / wall, "answers": seen}

                out[name] = asyncio.run(run())
    finally:
        group.stop()
    return out


def start_plain(kind: str, url: str, queue: str, n: int = 2) -> list[subprocess.Popen]:
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    procs = [subprocess.Popen([sys.executable, "-c", PLAIN_WORKER, kind, url, queue], env=env,
                              cwd=ROOT) for _ in range(n)]
    client = redis.Redis.from_url(url)
    while client.scard(f"rq:workers:{queue}") < n:
        time.sleep(0.05)
    client.close()
    return procs


def bench_plain(kind: str, url: str, calls: int) -> float:
    """p50 (ms) of one caller through plain RQ with two workers of ``kind``."""
    name = f"bench-plain-{kind}"
    procs = start_plain(kind, url, name)
    conn = redis.Redis.from_url(url)
    queue = Queue(name, connection=conn)

    def call() -> str:
        job = {"id": "bench", "op": "decode", "payload": PAYLOAD, "deadline": time.time() + 5}
        rq_job = queue.enqueue("toolcodec.worker.jobs.run_job", job)
        result = rq_job.latest_result(timeout=5)
        return result.return_value["status"] if result and result.return_value else "lost"

    try:
        drive(call, 1, 5)  # warm imports in the workers
        return drive(call, 1, calls).percentile(0.5) * 1e3
    finally:
        for p in procs:
            p.kill()
            p.wait()
        conn.close()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--quick", action="store_true", help="fewer jobs per measurement")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--baseline", default=BASELINE, help="commit of the previous backend")
    args = parser.parse_args()
    scale = 0.3 if args.quick else 1.0
    before_cls = load_baseline(args.baseline)
    if before_cls is None:
        print(f"(no baseline: git cannot show pool/rq_backend.py at {args.baseline})")

    server = RedisServer()
    server.start()
    try:
        tp = bench_throughput(server.url, args.rounds, max(10, int(100 * scale)), before_cls)
        loop = bench_event_loop(server.url, before_cls, max(60, int(300 * scale)))
        overload = bench_overload(server.url, before_cls, max(200, int(1000 * scale)))
        plain = {kind: bench_plain(kind, server.url, max(10, int(n * scale)))
                 for kind, n in (("default", 40), ("simple", 200))}
    finally:
        server.close()

    print(f"1 KB decode, toolcodec worker --concurrency 2, 16 caller threads, "
          f"{args.rounds} rounds alternated (CPU per job in µs)")
    print(f"{'backend':8} {'jobs/s min':>10} {'median':>8} {'p50 ms':>7} {'p99 ms':>7} "
          f"{'caller':>7} {'worker':>7} {'redis':>6} {'queued':>6}  statuses")
    for name, rows in tp["rows"].items():
        rates = [r["rate"] for r in rows]

        def m(key: str, rows: list[dict] = rows) -> float:
            return statistics.median(r[key] for r in rows)

        statuses: dict[str, int] = {}
        for r in rows:
            for k, v in r["statuses"].items():
                statuses[k] = statuses.get(k, 0) + v
        print(f"{name:8} {min(rates):10.0f} {statistics.median(rates):8.0f} {m('p50'):7.2f} "
              f"{m('p99'):7.2f} {m('caller_us'):7.0f} {m('worker_us'):7.0f} "
              f"{m('redis_us'):6.0f} {m('depth'):6.0f}  {statuses}")
    now_rate = statistics.median(r["rate"] for r in tp["rows"]["now"])
    if "before" in tp["rows"]:
        before_rate = statistics.median(r["rate"] for r in tp["rows"]["before"])
        print(f"jobs/s now / before (medians): {now_rate / before_rate:.2f}x")
    print(f"target: >= 1000 jobs/s at 16 threads: {now_rate:.0f} "
          f"-> {'met' if now_rate >= 1000 else 'MISSED'}")
    print()
    print("one event loop, 48 asubmit in flight, 12 lanes of 100 ms jobs (lanes: 120/s)")
    for name, rate in loop.items():
        print(f"  {name:8} {rate:6.1f} answers/s")
    print()
    print("overload: 1 lane of 10 ms jobs (<= 100/s), 32 asyncio callers, 50 ms budgets")
    for name, r in overload.items():
        print(f"  {name:8} goodput {r['goodput']:6.1f} ok/s  answers {r['answers']}")
    print()
    p50 = tp["single_p50"]["now"]
    print(f"1 caller p50: now {p50:.2f} ms"
          + (f", before {tp['single_p50']['before']:.2f} ms" if "before" in tp["single_p50"]
             else "")
          + f"; plain RQ SimpleWorker {plain['simple']:.2f} ms, default Worker "
            f"{plain['default']:.2f} ms")
    print(f"target: RQ backend p50 <= SimpleWorker p50 -> "
          f"{'met' if p50 <= plain['simple'] else 'MISSED'}")
    ratio = plain["default"] / p50
    print(f"target: >= 5x lower p50 than the default Worker: {ratio:.1f}x "
          f"-> {'met' if ratio >= 5 else 'MISSED'}")


if __name__ == "__main__":
    main()
