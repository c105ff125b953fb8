"""The process backend through ``Pool``: real worker processes, real deadlines, no mocks.

No test here bounds a wall-clock time from above except to show that a caller did not wait
for a job that runs for a minute; punctuality is measured by tests/benchmarks/bench_pool.py.
"""

from __future__ import annotations

import asyncio
import math
import os
import threading
import time
from pathlib import Path

import pytest
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry
from toolcodec.pool import Pool
from toolcodec.worker.jobs import FAULT_ENV

SLOW = 60  # seconds a stuck job would run; far beyond any budget below
LONG_MS = 20_000  # a budget no job here needs, however busy the machine
OUTCOME = {"ok": "success", "error": "failure", "timeout": "timeout",
           "rejected": "rejected", "worker_lost": "worker_lost"}  # fmt: skip


@pytest.fixture
def registry() -> CollectorRegistry:
    return CollectorRegistry()


@pytest.fixture
def faults(monkeypatch: pytest.MonkeyPatch) -> None:
    # Workers are forked (and re-forked) from this process, so the flag must stay set for
    # the pool's lifetime; monkeypatch restores it after the test.
    monkeypatch.setenv(FAULT_ENV, "1")


@pytest.fixture
def pool(faults: None, registry: CollectorRegistry):
    # No spares: these tests fill both workers to make callers wait, and a job running long
    # while others wait would be set aside for a spare (tests/test_pool_invariants.py).
    with Pool(workers=2, timeout_ms=LONG_MS, registry=registry, spares=0) as p:
        yield p


def timed(fn, *args, **kwargs) -> tuple[dict, float]:
    start = time.monotonic()
    out = fn(*args, **kwargs)
    return out, (time.monotonic() - start) * 1000


def wait_until(predicate, timeout: float = 30.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.002)
    return predicate()


def assert_healthy(p: Pool) -> None:
    """Every worker answers again: as many concurrent jobs as workers all succeed."""
    n = p.impl.workers
    outs = p.map("_sleep", [{"seconds": 0.02}] * n, timeout_ms=LONG_MS)
    assert [o["status"] for o in outs] == ["ok"] * n, outs


def test_submit_returns_the_design_envelope(pool: Pool) -> None:
    out = pool.submit("_sleep", {"seconds": 0})
    assert list(out) == ["status", "op", "backend", "result", "error", "elapsed_ms"]
    assert out["status"] == "ok" and out["backend"] == "process" and out["op"] == "_sleep"
    assert out["result"] == {"slept": 0.0} and out["error"] is None
    assert out["elapsed_ms"] > 0


@pytest.mark.parametrize("budget_ms", [30, 50])
@pytest.mark.parametrize("op", ["_sleep", "_spin"])
def test_timeout_returns_on_time_and_pool_recovers(pool: Pool, op: str, budget_ms: int) -> None:
    pids = set(pool.impl.pids)
    out, wall_ms = timed(pool.submit, op, {"seconds": SLOW}, timeout_ms=budget_ms)
    assert out["status"] == "timeout" and out["error"]["code"] == "timeout"
    assert f"{budget_ms} ms" in out["error"]["message"]
    assert out["elapsed_ms"] >= budget_ms and wall_ms >= budget_ms  # the budget, all of it
    assert wall_ms < SLOW * 1000 / 2  # and not the stuck job's minute
    # the stuck worker was killed and replaced, off the caller's path
    assert wait_until(lambda: set(pool.impl.pids) != pids)
    assert pool.submit("_sleep", {"seconds": 0})["status"] == "ok"
    assert_healthy(pool)


def test_waiting_for_a_worker_counts_against_the_budget(pool: Pool) -> None:
    # both workers stuck until their 2 s budgets end; a third caller's 50 ms runs out queued:
    # its job is shed once the budget no longer holds its run, and is never run
    busy = [threading.Thread(target=pool.submit, args=("_sleep", {"seconds": SLOW}),
                             kwargs={"timeout_ms": 2000}) for _ in range(2)]  # fmt: skip
    for t in busy:
        t.start()
    assert wait_until(lambda: pool.impl.counts()["idle"] == 0)
    out, wall_ms = timed(pool.submit, "_sleep", {"seconds": 0}, timeout_ms=50)
    for t in busy:
        t.join()
    error = out["error"]
    assert out["status"] == "rejected" and error["code"] == "rejected"
    assert error["reason"] == "shed" and "could not start within its budget" in error["message"]
    assert error["budget_ms"] == 50 and 0 < error["reserve_ms"] <= 25
    assert wall_ms >= 50 - error["reserve_ms"] and error["waited_ms"] <= wall_ms


def test_crash_gives_worker_lost_and_a_healthy_pool(pool: Pool) -> None:
    pids = set(pool.impl.pids)
    out = pool.submit("_crash", {})
    assert out["status"] == "worker_lost" and out["error"]["code"] == "worker_lost"
    assert "signal 9" in out["error"]["message"]
    assert wait_until(lambda: len(set(pool.impl.pids) - pids) == 1)
    assert_healthy(pool)


def test_crash_loses_no_other_job(pool: Pool) -> None:
    results: list[dict] = []
    lock = threading.Lock()

    def run(op: str, payload: dict) -> None:
        out = pool.submit(op, payload)
        with lock:
            results.append(out)

    threads = [threading.Thread(target=run, args=("_sleep", {"seconds": 0.01})) for _ in range(10)]
    threads.insert(3, threading.Thread(target=run, args=("_crash", {})))
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    statuses = sorted(o["status"] for o in results)
    assert statuses == ["ok"] * 10 + ["worker_lost"]


def test_worker_killed_while_idle_does_not_cost_a_job(pool: Pool) -> None:
    victim = pool.impl.pids[0]
    os.kill(victim, 9)
    # the dispatcher watches idle workers too: the dead one is found and replaced by the
    # spare before any job is sent to it (one sent while it was still dying would be lost
    # with it, which is worker_lost, not this case)
    assert wait_until(lambda: victim not in pool.impl.pids)
    outs = [pool.submit("_sleep", {"seconds": 0}) for _ in range(4)]
    assert [o["status"] for o in outs] == ["ok"] * 4


def test_rejects_at_once_when_the_queue_is_full(faults: None, registry: CollectorRegistry) -> None:
    # no spares: a long job would be set aside for one, and the line would never fill
    with Pool(workers=1, timeout_ms=LONG_MS, queue_size=1, registry=registry, spares=0) as p:
        first = threading.Thread(target=p.submit, args=("_sleep", {"seconds": 0.3}))
        first.start()
        assert wait_until(lambda: p.impl.counts()["busy"] == 1)
        outs: list[dict] = []
        second = threading.Thread(target=lambda: outs.append(p.submit("_sleep", {"seconds": 0})))
        second.start()
        assert wait_until(lambda: p.impl.counts()["waiting"] == 1)
        out = p.submit("_sleep", {"seconds": 0})
        assert out["status"] == "rejected" and out["error"]["code"] == "rejected"
        assert "queue full" in out["error"]["message"]
        first.join()
        second.join()
        assert outs[0]["status"] == "ok"  # the queued caller was served, not dropped


def test_bad_payloads_are_bad_request(pool: Pool) -> None:
    cases = [("frobnicate", {}), ("_sleep", {}), ("repair", {"text": 5}), ("repair", {"x": {1}})]
    for op, payload in cases:
        out = pool.submit(op, payload)
        assert out["status"] == "error" and out["error"]["code"] == "bad_request", out
        assert out["error"]["message"]


def test_fault_ops_need_the_flag_in_the_worker_environment(
    monkeypatch: pytest.MonkeyPatch, registry: CollectorRegistry
) -> None:
    monkeypatch.delenv(FAULT_ENV, raising=False)
    with Pool(workers=1, timeout_ms=LONG_MS, registry=registry) as p:
        out = p.submit("_crash", {})
    assert out["status"] == "error" and FAULT_ENV in out["error"]["message"]


def test_codec_exception_is_internal_error(faults: None, registry: CollectorRegistry) -> None:
    with Pool(workers=1, timeout_ms=LONG_MS, registry=registry,
              handler="tests.test_child:raising_handler") as p:  # fmt: skip
        out = p.submit("decode", {"boom": True})
        assert out["status"] == "error" and out["error"]["code"] == "internal_error"
        assert out["error"]["job_id"] in out["error"]["message"]
        assert p.submit("decode", {"x": 1})["result"] == {"echo": {"x": 1}}


def test_real_codec_ops_run_in_workers(pool: Pool) -> None:
    import toolcodec as codec

    text = "{'city': 'Paris',}"
    out = pool.submit("repair", {"text": text})
    assert out["status"] == "ok"
    assert out["result"] == codec.repair_json(text).to_dict()


def test_map_keeps_order(pool: Pool) -> None:
    seconds = [0.05, 0.04, 0.03, 0.02, 0.01, 0.0]
    outs = pool.map("_sleep", [{"seconds": s} for s in seconds])
    assert [o["result"]["slept"] for o in outs] == seconds
    assert pool.map("_sleep", []) == []


def test_map_runs_its_jobs_at_the_same_time(registry: CollectorRegistry, tmp_path: Path) -> None:
    # each job waits until its partner has started: both "met" only if they ran together
    with Pool(workers=2, timeout_ms=60_000, registry=registry,
              handler="tests.test_child:rendezvous_handler") as p:
        outs = p.map("decode", [{"dir": str(tmp_path), "me": "a", "other": "b"},
                                {"dir": str(tmp_path), "me": "b", "other": "a"}])
    assert [o["result"] for o in outs] == [{"met": True}, {"met": True}]


def test_32_threads_at_once_without_spurious_timeouts(pool: Pool) -> None:
    barrier = threading.Barrier(32)
    outs: list[dict] = []
    lock = threading.Lock()

    def client() -> None:
        barrier.wait()
        mine = [pool.submit("_spin", {"seconds": 0.0005}) for _ in range(10)]
        with lock:
            outs.extend(mine)

    threads = [threading.Thread(target=client) for _ in range(32)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert len(outs) == 320
    assert {o["status"] for o in outs} == {"ok"}


async def until(predicate, timeout: float = 30.0) -> bool:
    """``wait_until`` for a coroutine: the event loop keeps running while it waits."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        await asyncio.sleep(0.001)
    return predicate()


def test_asubmit_keeps_the_event_loop_free(pool: Pool) -> None:
    async def main() -> tuple[list[dict], int, dict]:
        ticks = 0
        stop = asyncio.Event()

        async def ticker() -> None:
            nonlocal ticks
            while not stop.is_set():
                await asyncio.sleep(0.001)
                ticks += 1

        tick = asyncio.create_task(ticker())
        jobs = [asyncio.ensure_future(pool.asubmit("_sleep", {"seconds": 0.2}))
                for _ in range(4)]
        # a call that blocked the loop would let the ticker run only between jobs
        done, _ = await asyncio.wait(jobs, return_when=asyncio.FIRST_COMPLETED)
        ticks_before_first = ticks
        outs = await asyncio.gather(*jobs)
        late = await pool.asubmit("_sleep", {"seconds": SLOW}, timeout_ms=50)
        stop.set()
        await tick
        return outs, ticks_before_first, late

    outs, ticks_before_first, late = asyncio.run(main())
    assert [o["status"] for o in outs] == ["ok"] * 4
    assert ticks_before_first >= 3
    assert late["status"] == "timeout" and late["elapsed_ms"] >= 50
    assert_healthy(pool)


def test_asubmit_cancelled_mid_job_frees_the_worker(pool: Pool) -> None:
    async def main() -> dict:
        task = asyncio.create_task(pool.asubmit("_sleep", {"seconds": SLOW}))
        assert await until(lambda: pool.impl.counts()["busy"] == 1)
        task.cancel()
        with pytest.raises(asyncio.CancelledError):
            await task
        return await pool.asubmit("_sleep", {"seconds": 0})

    assert asyncio.run(main())["status"] == "ok"
    assert_healthy(pool)


def test_asubmit_cancelled_while_queued_leaves_the_line(
    faults: None, registry: CollectorRegistry
) -> None:
    # no spares: the held job would be set aside for one and the queued job would start
    with Pool(workers=1, timeout_ms=LONG_MS, registry=registry, spares=0) as p:

        async def main() -> dict:
            hold = asyncio.create_task(p.asubmit("_sleep", {"seconds": 2}))
            assert await until(lambda: p.impl.counts()["busy"] == 1)
            queued = asyncio.create_task(p.asubmit("_sleep", {"seconds": 0}))
            assert await until(lambda: p.impl.counts()["waiting"] == 1)
            queued.cancel()
            with pytest.raises(asyncio.CancelledError):
                await queued
            # the dispatcher takes it out of the line at once (not when its turn comes)
            assert await until(lambda: p.impl.counts()["waiting"] == 0)
            assert not hold.done()
            assert (await hold)["status"] == "ok"
            return await p.asubmit("_sleep", {"seconds": 0})

        assert asyncio.run(main())["status"] == "ok"
        assert registry.get_sample_value("toolcodec_queue_depth", {"backend": "process"}) == 0


def expected_outcome(out: dict) -> str:
    if out["status"] == "ok":
        return "failure" if out["result"].get("ok") is False else "success"
    return {"error": "failure"}.get(out["status"], out["status"])


def test_metric_counts_equal_the_outcomes(faults: None, registry: CollectorRegistry) -> None:
    def sample(name: str, **labels: str) -> float:
        return registry.get_sample_value(name, labels) or 0.0

    with Pool(workers=2, timeout_ms=LONG_MS, queue_size=0, registry=registry) as p:
        outs = [p.submit("_sleep", {"seconds": 0}) for _ in range(5)]
        outs += [p.submit("_sleep", {"seconds": SLOW}, timeout_ms=50) for _ in range(2)]
        # queue_size=0 rejects while no worker is idle, so let the replacements start
        assert wait_until(lambda: p.impl.counts()["idle"] == 2)
        outs += [p.submit("_crash", {})]
        assert wait_until(lambda: p.impl.counts()["idle"] == 2)
        outs += [p.submit("nope", {})]
        outs += [p.submit("repair", {"text": "[1, 2,"})]
        outs += [p.submit("validate", {"name": "f", "arguments": {}, "tools": []})]
        # queue_size=0: with both workers busy the next caller is rejected
        busy = [threading.Thread(target=lambda: outs.append(p.submit(
            "_sleep", {"seconds": 1}))) for _ in range(2)]  # fmt: skip
        for t in busy:
            t.start()
        assert wait_until(lambda: p.impl.counts()["idle"] == 0)
        outs.append(p.submit("_sleep", {"seconds": 0}))
        for t in busy:
            t.join()
        assert wait_until(lambda: p.impl.counts()["idle"] == 2)

        want: dict[tuple[str, str], int] = {}
        for o in outs:  # an op the workers do not know is counted as op="unknown"
            o["op"] = "unknown" if o["op"] == "nope" else o["op"]
            key = (o["op"], expected_outcome(o))
            want[key] = want.get(key, 0) + 1
        assert {outcome for _, outcome in want} == {

            "success", "failure", "timeout", "worker_lost", "rejected"
        }  # fmt: skip
        for op in {o["op"] for o in outs}:
            for outcome in OUTCOME.values():
                got = sample("toolcodec_jobs_total", op=op, backend="process", outcome=outcome)
                assert got == want.get((op, outcome), 0), (op, outcome)
            count = sample("toolcodec_job_duration_seconds_count", op=op, backend="process")
            assert count == sum(1 for o in outs if o["op"] == op)
        restarts = "toolcodec_worker_restarts_total"
        killed = sum(1 for o in outs if "overran" in (o["error"] or {}).get("message", ""))
        assert killed == 2
        assert sample(restarts, backend="process", reason="timeout") == killed
        assert sample(restarts, backend="process", reason="crash") == 1
        assert sample("toolcodec_workers", backend="process", state="idle") == 2
        assert sample("toolcodec_workers", backend="process", state="busy") == 0
        assert sample("toolcodec_workers", backend="process", state="starting") == 0
        assert sample("toolcodec_queue_depth", backend="process") == 0
    assert sample("toolcodec_workers", backend="process", state="idle") == 0  # closed


def test_close_drains_in_flight_work_then_rejects(
    faults: None, registry: CollectorRegistry
) -> None:
    p = Pool(workers=2, timeout_ms=LONG_MS, registry=registry)
    outs: list[dict] = []
    t = threading.Thread(target=lambda: outs.append(p.submit("_sleep", {"seconds": 0.2})))
    t.start()
    assert wait_until(lambda: p.impl.counts()["busy"] == 1)
    pids = p.impl.pids
    p.close(timeout=30)
    t.join()
    assert outs[0]["status"] == "ok"  # drained, not cut off
    assert p.submit("_sleep", {"seconds": 0})["status"] == "rejected"
    for pid in pids:
        with pytest.raises(ProcessLookupError):
            os.kill(pid, 0)


def test_close_is_bounded_by_its_timeout(faults: None, registry: CollectorRegistry) -> None:
    p = Pool(workers=1, timeout_ms=LONG_MS, registry=registry)
    outs: list[dict] = []
    t = threading.Thread(target=lambda: outs.append(p.submit("_sleep", {"seconds": SLOW})))
    t.start()
    assert wait_until(lambda: p.impl.counts()["busy"] == 1)
    _, wall_ms = timed(p.close, timeout=0.2)
    t.join(30)
    assert wall_ms < SLOW * 1000 / 2  # it did not wait for the job's minute
    assert outs[0]["status"] == "worker_lost"  # stopped, and told so


def test_constructor_checks_its_arguments(registry: CollectorRegistry) -> None:
    with pytest.raises(ValueError, match="backend"):
        Pool(backend="threads", registry=registry)
    with pytest.raises(ValueError, match="workers"):
        Pool(workers=0, registry=registry)


def test_workers_default_to_the_cpu_count(registry: CollectorRegistry) -> None:
    with Pool(registry=registry) as p:
        assert p.impl.workers == (os.cpu_count() or 1)


def test_unknown_backend_options_are_a_type_error(registry: CollectorRegistry) -> None:
    with pytest.raises(TypeError, match="no_such_option"):
        Pool(workers=1, registry=registry, no_such_option=1)


_ANY = st.one_of(
    st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=10),
    st.binary(max_size=5), st.just(2**70), st.just(object()), st.sets(st.integers(), max_size=2),
)
_ANY_PAYLOAD = _ANY | st.recursive(
    _ANY, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(
        st.text(max_size=5) | st.integers(), inner, max_size=3), max_leaves=8)
_TIMEOUTS = st.one_of(
    st.none(), st.booleans(), st.text(max_size=3), st.just([50]),
    st.floats(), st.integers(min_value=-(2**70), max_value=2**70),
    st.sampled_from([0, -1, 2**31, 2**63, 1e-300, math.nan, math.inf, -math.inf]),
)


@pytest.fixture(scope="module")
def small_pool():
    with Pool(workers=1, timeout_ms=LONG_MS, registry=CollectorRegistry(),
              max_payload_chars=10_000) as p:
        yield p


@given(op=st.sampled_from(["decode", "repair", "validate", "kindaxml"]) | _ANY,
       payload=_ANY_PAYLOAD, timeout_ms=_TIMEOUTS)
def test_submit_asubmit_and_map_never_raise(small_pool: Pool, op, payload, timeout_ms) -> None:
    outs = [small_pool.submit(op, payload, timeout_ms=timeout_ms),
            asyncio.run(small_pool.asubmit(op, payload, timeout_ms=timeout_ms)),
            *small_pool.map(op, [payload], timeout_ms=timeout_ms)]
    for out in outs:
        assert list(out) == ["status", "op", "backend", "result", "error", "elapsed_ms"]
        # a budget too short to start in is shed (rejected), one that ends mid-run a timeout
        assert out["status"] in ("ok", "error", "timeout", "rejected")
        assert isinstance(out["op"], str)


def test_map_of_something_that_is_not_iterable_is_bad_request(small_pool: Pool) -> None:
    def broken():
        yield {"text": "1"}
        raise RuntimeError("the source failed")

    for payloads in (5, None, broken()):
        [out] = small_pool.map("repair", payloads)
        assert out["status"] == "error" and out["error"]["code"] == "bad_request"
        assert out["error"]["field"] == "payloads"


def test_a_circular_payload_is_refused_not_walked_forever(small_pool: Pool) -> None:
    loop: dict = {"text": "x"}
    loop["self"] = loop
    out = small_pool.submit("repair", loop)
    assert out["status"] == "error" and out["error"]["code"] in ("payload_too_large", "bad_request")


def test_the_operators_limits_given_to_the_pool_bind_every_job(
    registry: CollectorRegistry,
) -> None:
    deep = "[" * 10 + "]" * 10
    with Pool(workers=1, timeout_ms=LONG_MS, registry=registry,
              limits={"max_depth": 4, "max_chars": 500}) as p:
        for options in ({}, {"limits": {"max_depth": 10**9, "max_chars": 10**12}}):
            out = p.submit("repair", {"text": deep, "options": options})
            assert out["result"]["errors"][0]["code"] == "nesting_too_deep", options
            out = p.submit("decode", {"text": "x" * 600, "options": options})
            assert out["result"]["errors"][0]["code"] == "payload_too_large", options
        lowered = p.submit("repair", {"text": "[[1]]", "options": {"limits": {"max_depth": 1}}})
        assert lowered["result"]["errors"][0]["code"] == "nesting_too_deep"
        assert p.submit("repair", {"text": "[[[1]]]"})["result"]["ok"]
        assert p.max_payload_chars == 500 + 1_000_000  # the door follows the ceiling


@pytest.mark.parametrize("limits", [{"max_chars": 0}, {"max_depth": 10**6}, {"depth": 3},
                                    {"max_chars": True}, {"max_chars": "9"}, [4]], ids=repr)
def test_bad_pool_limits_are_refused_at_construction(registry: CollectorRegistry,
                                                     limits) -> None:
    with pytest.raises(ValueError):
        Pool(workers=1, registry=registry, limits=limits)


def test_rq_limits_belong_to_the_rq_workers(registry: CollectorRegistry) -> None:
    with pytest.raises(ValueError, match="--max-chars"):
        Pool("rq", registry=registry, limits={"max_chars": 10}, redis_url="redis://localhost:1")
