"""The Redis backend under random faults, from many threads and asyncio callers at once.

Invariants checked on every call (fixed seed, bounded by a job count, not a clock):
- every caller returns by its budget plus :data:`GRACE_MS`, whatever a job does (runs
  away on the CPU, sleeps, kills its process) and whatever Redis does (stopped mid-run);
- every answer is a complete envelope with a known status;
- healthy jobs beside 1 % runaway inputs are answered ok at least 97 % of the time;
- once the faults stop, the backend answers ok again.

Real redis-server and ``toolcodec worker`` processes with ``TOOLCODEC_FAULT_INJECTION=1``.
"""

from __future__ import annotations

import asyncio
import random
import signal
import threading
from collections import Counter
from collections.abc import Callable

import pytest
from toolcodec.pool.rq_backend import RQBackend
from toolcodec.worker.envelope import STATUSES

from tests.redis_server import RedisServer

pytestmark = pytest.mark.redis

SEED = 33
# The small constant a caller may overrun its budget by on a busy two-core machine (thread
# wake-ups behind other runnable threads); the design's own overrun is a lock and a wake-up.
GRACE_MS = 150
HEALTHY = [("repair", {"text": "[1, 2,"}), ("repair", {"text": "{'a': 1}"}),
           ("_sleep", {"seconds": 0.001})]


def plan(rng: random.Random, n: int, faults: list[tuple[float, str, dict]],
         budgets: tuple[int, ...]) -> list[tuple[str, dict, int, bool]]:
    """``n`` jobs ``(op, payload, budget_ms, healthy)``; each fault ``(share, op, payload)``
    is drawn with its share, the rest are healthy."""
    jobs = []
    for _ in range(n):
        draw, budget = rng.random(), rng.choice(budgets)
        for share, op, payload in faults:
            if draw < share:
                jobs.append((op, payload, budget, False))
                break
            draw -= share
        else:
            op, payload = rng.choice(HEALTHY)
            jobs.append((op, payload, budget, True))
    return jobs


def run_callers(backend: RQBackend, jobs: list[tuple[str, dict, int, bool]], threads: int,
                tasks: int, on_done: Callable[[int], None] = lambda n: None
                ) -> list[tuple[tuple[str, dict, int, bool], dict]]:
    """Share ``jobs`` among ``threads`` threads calling ``submit`` and ``tasks`` asyncio
    tasks calling ``asubmit`` on one event loop, all at once; ``on_done(count)`` after each."""
    results: list[tuple[tuple[str, dict, int, bool], dict]] = []
    lock = threading.Lock()
    lanes = threads + tasks
    shares = [jobs[i::lanes] for i in range(lanes)]

    def record(job: tuple[str, dict, int, bool], out: dict) -> None:
        with lock:
            results.append((job, out))
            count = len(results)
        on_done(count)

    def thread_caller(mine: list) -> None:
        for job in mine:
            record(job, backend.submit(job[0], job[1], timeout_ms=job[2]))

    async def task_caller(mine: list) -> None:
        for job in mine:
            record(job, await backend.asubmit(job[0], job[1], timeout_ms=job[2]))

    async def loop_callers() -> None:
        await asyncio.gather(*(task_caller(m) for m in shares[threads:]))

    workers = [threading.Thread(target=thread_caller, args=(m,)) for m in shares[:threads]]
    workers.append(threading.Thread(target=asyncio.run, args=(loop_callers(),)))
    for t in workers:
        t.start()
    for t in workers:
        t.join()
    assert len(results) == len(jobs)
    return results


def check_deadlines(results: list[tuple[tuple[str, dict, int, bool], dict]]) -> None:
    late = [(job[0], job[2], out["elapsed_ms"], out["status"]) for job, out in results
            if out["elapsed_ms"] > job[2] + GRACE_MS]
    assert not late, late[:10]
    for _job, out in results:
        assert out["status"] in STATUSES, out
        assert set(out) == {"status", "op", "backend", "result", "error", "elapsed_ms"}


def test_healthy_jobs_keep_97_percent_ok_beside_1_percent_runaways(
        start_rq_worker, redis_server: RedisServer, queue_name: str) -> None:
    start_rq_worker(concurrency=2)
    rng = random.Random(SEED)
    jobs = plan(rng, 800, [(0.01, "_spin", {"seconds": 2.0})], budgets=(100,))
    with RQBackend(redis_url=redis_server.url, queue=queue_name, timeout_ms=100) as b:
        for _ in range(10):  # the lanes' cycle is known before the load starts
            assert b.submit("repair", {"text": "[1,"}, timeout_ms=5000)["status"] == "ok"
        results = run_callers(b, jobs, threads=4, tasks=4)
    check_deadlines(results)
    healthy = Counter(out["status"] for job, out in results if job[3])
    runaway = Counter(out["status"] for job, out in results if not job[3])
    assert sum(runaway.values()) >= 4, runaway  # the seed draws some runaways
    assert set(runaway) <= {"timeout", "rejected"}, runaway
    share = healthy["ok"] / sum(healthy.values())
    assert share >= 0.97, (healthy, runaway)


def test_random_faults_never_hold_a_caller_past_its_budget(
        start_rq_worker, own_redis_server: RedisServer, queue_name: str) -> None:
    start_rq_worker(concurrency=2, server=own_redis_server)
    rng = random.Random(SEED + 1)
    faults = [(0.04, "_spin", {"seconds": 2.0}), (0.03, "_sleep", {"seconds": 2.0}),
              (0.02, "_crash", {})]
    jobs = plan(rng, 600, faults, budgets=(30, 50, 100, 250))
    # Redis is stopped (alive, accepting, never answering) twice, at seeded points of the run.
    stops = sorted(rng.sample(range(100, 500), 2))
    stopped = threading.Event()
    proc = own_redis_server.proc
    assert proc is not None

    def on_done(count: int) -> None:
        if count in stops:
            proc.send_signal(signal.SIGSTOP)
            stopped.set()
            # Resumed by a timer thread: the fault lasts while other callers keep calling.
            threading.Timer(0.3, proc.send_signal, args=(signal.SIGCONT,)).start()

    with RQBackend(redis_url=own_redis_server.url, queue=queue_name, timeout_ms=50) as b:
        for _ in range(5):
            assert b.submit("repair", {"text": "[1,"}, timeout_ms=5000)["status"] == "ok"
        try:
            results = run_callers(b, jobs, threads=8, tasks=8, on_done=on_done)
        finally:
            proc.send_signal(signal.SIGCONT)
        assert stopped.is_set()
        check_deadlines(results)
        statuses = Counter(out["status"] for _job, out in results)
        codes = Counter((out["error"] or {}).get("code") for _job, out in results)
        assert statuses["ok"] > 0 and statuses["timeout"] > 0, statuses
        assert codes["backend_unavailable"] > 0, codes  # the stops were seen as such
        # Healed: once the faults stop, every lane answers again.
        outs = [b.submit("repair", {"text": "[1,"}, timeout_ms=3000) for _ in range(10)]
        assert [o["status"] for o in outs] == ["ok"] * 10, outs
