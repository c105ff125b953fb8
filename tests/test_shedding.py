"""Capacity, not silence: a job that cannot start within its budget is shed, said as such.

Real worker processes throughout; the fault-injection ops make workers busy (``_sleep``) or
leave a trace if they ever run (``_crash`` kills its worker, which the restart counter and
the pids show).
"""

from __future__ import annotations

import asyncio
import threading
import time

import orjson
import pytest
from prometheus_client import CollectorRegistry
from toolcodec.pool import Pool
from toolcodec.pool.admission import RunTimes
from toolcodec.worker.deadlines import SHED

from tests.test_pool_process import wait_until

SLOW = 60.0


@pytest.fixture(autouse=True)
def _fault_ops(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TOOLCODEC_FAULT_INJECTION", "1")


@pytest.fixture
def pool():
    registry = CollectorRegistry()
    # No spares: these tests fill both workers to make callers wait, and a job running long
    # while others wait would be set aside for a spare (tests/test_pool_invariants.py).
    with Pool(workers=2, timeout_ms=2000, registry=registry, spares=0) as p:
        p.registry = registry
        yield p


def _jobs(registry: CollectorRegistry, op: str, outcome: str) -> float:
    value = registry.get_sample_value("toolcodec_jobs_total",
                                      {"op": op, "backend": "process", "outcome": outcome})
    return value or 0.0


def _block_workers(pool: Pool, seconds: float) -> list[threading.Thread]:
    busy = [threading.Thread(target=pool.submit, args=("_sleep", {"seconds": seconds}),
                             kwargs={"timeout_ms": seconds * 1000 + 2000}) for _ in range(2)]
    for t in busy:
        t.start()
    assert wait_until(lambda: pool.impl.counts()["idle"] == 0)
    return busy


def test_a_job_that_cannot_start_is_shed_never_run_and_counted_as_rejected(pool: Pool) -> None:
    pids = list(pool.impl.pids)
    busy = _block_workers(pool, 0.5)
    out = pool.submit("_crash", {}, timeout_ms=50)  # would kill its worker, had it run
    for t in busy:
        t.join()
    assert out["status"] == "rejected" and out["result"] is None
    error = out["error"]
    assert error["code"] == "rejected" and error["reason"] == SHED
    assert error["message"].startswith("job shed: it could not start within its budget")
    assert set(error) == {"code", "message", "reason", "budget_ms", "waited_ms", "reserve_ms"}
    assert error["waited_ms"] >= error["budget_ms"] - error["reserve_ms"]
    assert _jobs(pool.registry, "_crash", "rejected") == 1
    assert _jobs(pool.registry, "_crash", "worker_lost") == 0
    assert pool.submit("_sleep", {"seconds": 0})["status"] == "ok"
    assert list(pool.impl.pids) == pids  # no worker ran the crash
    restarts = pool.registry.get_sample_value("toolcodec_worker_restarts_total",
                                              {"backend": "process", "reason": "crash"})
    assert not restarts


def test_a_full_line_is_rejected_with_its_own_reason() -> None:
    registry = CollectorRegistry()
    with Pool(workers=1, timeout_ms=2000, queue_size=0, registry=registry) as p:
        t = threading.Thread(target=p.submit, args=("_sleep", {"seconds": 0.3}))
        t.start()
        assert wait_until(lambda: p.impl.counts()["idle"] == 0)
        out = p.submit("_sleep", {"seconds": 0})
        t.join()
    assert out["status"] == "rejected" and out["error"]["reason"] == "queue_full"


def test_a_budget_spent_before_the_call_is_shed_at_once(pool: Pool) -> None:
    # the request waited its whole budget before reaching the pool (an HTTP server's queue)
    arrived = time.monotonic() - 0.2
    out = pool.impl.submit("_crash", {}, timeout_ms=100, arrived=arrived)
    assert out["status"] == "rejected" and out["error"]["reason"] == SHED
    assert out["elapsed_ms"] >= 200  # counted from the arrival, as the client saw it
    out = asyncio.run(pool.impl.asubmit("_crash", {}, timeout_ms=100, arrived=arrived))
    assert out["status"] == "rejected" and out["error"]["reason"] == SHED
    assert pool.submit("_sleep", {"seconds": 0})["status"] == "ok"


def test_an_arrival_time_leaves_the_rest_of_the_budget(pool: Pool) -> None:
    arrived = time.monotonic() - 0.05
    out = pool.impl.submit("_sleep", {"seconds": 0}, timeout_ms=2000, arrived=arrived)
    assert out["status"] == "ok" and out["elapsed_ms"] >= 50


def test_a_job_still_running_at_its_deadline_is_a_timeout(pool: Pool) -> None:
    out = pool.submit("_sleep", {"seconds": SLOW}, timeout_ms=100)
    assert out["status"] == "timeout" and out["error"]["code"] == "timeout"


def test_async_callers_over_capacity_get_answers_or_sheds_never_timeouts(pool: Pool) -> None:
    async def main() -> list[dict]:
        return await asyncio.gather(*(pool.asubmit("_sleep", {"seconds": 0.02},
                                                   timeout_ms=60) for _ in range(40)))

    outs = asyncio.run(main())
    statuses = {o["status"] for o in outs}
    assert statuses <= {"ok", "rejected"}, statuses
    assert "ok" in statuses and "rejected" in statuses  # 40 x 20 ms on 2 workers in 60 ms
    assert all(o["error"]["reason"] == SHED for o in outs if o["status"] == "rejected")


def test_run_times_keep_a_high_quantile_within_the_budget() -> None:
    times = RunTimes(floor=0.001, share=0.5)
    assert times.reserve("decode", 0.05) == 0.001  # nothing seen yet: the floor
    for run in [0.002, 0.004] * 50:
        times.observe("decode", run)
    reserve = times.reserve("decode", 0.05)
    assert 0.004 <= reserve <= 0.02  # above the runs seen, not far above
    assert times.reserve("decode", 0.004) == 0.002  # at most half the budget
    assert times.reserve("repair", 0.05) == 0.001  # per op
    for _ in range(200):
        times.observe("decode", 0.0001)
    assert times.reserve("decode", 0.05) < 0.002  # it follows the runs down


def test_shedding_eases_an_estimate_raised_by_an_outlier() -> None:
    times = RunTimes(floor=0.001, share=0.5)
    times.observe("decode", 0.030)  # a tool set compiled on first use
    assert times.reserve("decode", 0.05) == 0.025
    for _ in range(100):  # the jobs shed meanwhile never run, so they cannot teach it
        times.shed("decode")
    assert times.reserve("decode", 0.05) < 0.003


def test_the_service_counts_a_requests_budget_from_its_arrival(pool: Pool) -> None:
    """A request that spends its budget before its handler runs (here: its body arrives
    after the budget, counted from the moment the app was called) is shed, not run."""
    from toolcodec.pool.service.app import ARRIVED, Service, build_app

    async def ready() -> None:
        return None

    service = Service(pool, timeout_ms=50, max_body=4096, registry=pool.registry,
                      ready=ready)
    app = build_app(service)
    scope = {"type": "http", "method": "POST", "path": "/v1/_crash", "raw_path": b"/v1/_crash",
             "query_string": b"", "root_path": "", "scheme": "http", "server": ("t", 80),
             "headers": [(b"content-type", b"application/json"), (b"content-length", b"2")]}
    sent: list[dict] = []

    async def receive() -> dict:
        while time.monotonic() < scope[ARRIVED] + 0.05:  # the condition: budget spent
            await asyncio.sleep(0.001)
        return {"type": "http.request", "body": b"{}", "more_body": False}

    async def send(message: dict) -> None:
        sent.append(message)

    pids = list(pool.impl.pids)
    asyncio.run(app(scope, receive, send))
    assert sent[0]["status"] == 429
    envelope = orjson.loads(sent[1]["body"])
    assert envelope["status"] == "rejected" and envelope["error"]["reason"] == SHED
    assert envelope["elapsed_ms"] >= 50
    assert pool.submit("_sleep", {"seconds": 0})["status"] == "ok"
    assert list(pool.impl.pids) == pids  # the crash never ran


def test_cancelling_a_caller_whose_job_a_releaser_started_frees_the_worker_once(
        pool: Pool) -> None:
    """A waiting event-loop caller's job is started on a freed worker; the caller is then
    cancelled. The worker comes back once: never lost, never twice."""
    busy = _block_workers(pool, 0.3)

    async def main() -> None:
        task = asyncio.create_task(pool.asubmit("_sleep", {"seconds": 0.2}))
        await until(lambda: pool.impl.counts()["waiting"] == 1)
        await until(lambda: pool.impl.counts()["waiting"] == 0)  # handed over and started
        task.cancel()
        try:
            out = await task
        except asyncio.CancelledError:
            return
        # Python 3.11's wait_for may let a completion that raced the cancellation win
        assert out["status"] in ("ok", "rejected")

    asyncio.run(main())
    for t in busy:
        t.join()
    assert wait_until(lambda: pool.impl.counts()["idle"] == 2)
    outs = [pool.submit("_sleep", {"seconds": 0.01}) for _ in range(4)]
    assert [o["status"] for o in outs] == ["ok"] * 4
    counts = pool.impl.counts()
    assert counts["idle"] == 2 and counts["busy"] == 0 and counts["starting"] == 0


async def until(predicate, timeout: float = 30.0) -> None:
    end = time.monotonic() + timeout
    while not predicate():
        assert time.monotonic() < end, "condition not reached"
        await asyncio.sleep(0.001)
