"""The process pool's invariants, each shown on real worker processes (docs/pool.md,
"Invariants"): building a tool set is not parsing, a dead dispatcher is replaced, the pool
runs on every ``selectors`` class, and a runaway job costs its own answer only.

The random-fault stress test is tests/test_pool_stress.py.
"""

from __future__ import annotations

import asyncio
import subprocess
import sys
import threading

import httpx
import pytest
from prometheus_client import CollectorRegistry
from toolcodec.pool import Pool
from toolcodec.pool.dispatcher import SELECTORS
from toolcodec.worker.jobs import FAULT_ENV

from tests.serve_process import ServeProcess
from tests.test_pool_process import wait_until

SLOW = 60.0  # seconds a stuck job would run
LONG_MS = 20_000


@pytest.fixture
def faults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(FAULT_ENV, "1")


def slow_tools(tag: str, n: int = 100) -> list[dict]:
    """A tool set whose build takes tens of milliseconds even on a quiet core: each schema
    uses keywords outside the subset known valid by one walk, so jsonschema checks it."""
    return [{"name": f"{tag}_{i}", "parameters": {
        "type": "object", "$defs": {"n": {"type": "integer"}},
        "properties": {"a": {"type": "string", "not": {"const": "x"}},
                       "n": {"$ref": "#/$defs/n"}}}} for i in range(n)]


def call_text(name: str) -> str:
    return f'<tool_call>{{"name": "{name}", "arguments": {{"a": "y", "n": "3"}}}}</tool_call>'


def test_building_a_new_tool_set_is_not_charged_to_the_parse_budget() -> None:
    """A 100-tool set takes longer to build than the whole 20 ms budget; the decode still
    answers: the build moved the deadline, and the run estimate counts the parse only."""
    tools = slow_tools("cold")
    with Pool(workers=1, timeout_ms=20, registry=CollectorRegistry(), spares=0) as pool:
        out = pool.submit("decode", {"text": call_text("cold_7"), "tools": tools})
        assert out["status"] == "ok", out
        assert out["result"]["calls"][0]["arguments"] == {"a": "y", "n": 3}
        assert pool.impl._dispatcher.job_builds == 1
        again = pool.submit("decode", {"text": call_text("cold_8"), "tools": tools},
                            timeout_ms=LONG_MS)
        assert again["status"] == "ok" and pool.impl._dispatcher.job_builds == 1  # built once
        # the estimate saw two parses (milliseconds), not the build (tens or hundreds)
        assert pool.impl.run_times.reserve("decode", 10.0) < 0.05


def test_prepared_tool_sets_are_built_before_any_job_needs_them() -> None:
    tools = slow_tools("warm")
    with Pool(workers=2, timeout_ms=LONG_MS, registry=CollectorRegistry()) as pool:
        assert pool.prepare(tools)
        dispatcher = pool.impl._dispatcher
        # the prepare reaches the dispatcher's log, then each worker builds it
        assert wait_until(lambda: dispatcher.prepared_everywhere(1))
        outs = [pool.submit("decode", {"text": call_text(f"warm_{i}"), "tools": tools})
                for i in range(4)]
        assert [o["status"] for o in outs] == ["ok"] * 4
        assert dispatcher.job_builds == 0  # no decode had to build it
        assert not pool.prepare([{"name": "f", "parameters": {"type": "object"}}],
                                {"x": object()})  # not JSON data: nothing to prepare


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_a_dispatcher_that_dies_is_replaced_and_counted(monkeypatch: pytest.MonkeyPatch) -> None:
    registry = CollectorRegistry()
    with Pool(workers=1, timeout_ms=LONG_MS, registry=registry) as pool:
        assert pool.submit("repair", {"text": "[1,"})["status"] == "ok"
        first = pool.impl._dispatcher
        old_pids = set(pool.impl.pids)

        def die() -> None:
            raise SystemExit("a bug no turn survives")  # not an Exception: the thread ends

        monkeypatch.setattr(first, "_turn", die)
        first.post("wake")
        first.join(10)
        assert not first.is_alive()
        assert pool.impl.live_workers() == 0 or pool.impl._dispatcher is not first  # said
        out = pool.submit("repair", {"text": "[1,"})
        assert out["status"] == "ok" and out["result"]["value"] == [1]
        assert pool.impl._dispatcher is not first and pool.impl.heals == 1
        assert not old_pids & set(pool.impl.pids)  # the dead one's workers were stopped
        assert pool.impl.health()["dispatcher"] is True
        assert registry.get_sample_value("toolcodec_worker_restarts_total",
                                         {"backend": "process", "reason": "dispatcher"}) == 1


@pytest.mark.filterwarnings("ignore::pytest.PytestUnhandledThreadExceptionWarning")
def test_a_spawner_that_dies_is_replaced(faults: None, monkeypatch: pytest.MonkeyPatch) -> None:
    with Pool(workers=1, timeout_ms=LONG_MS, registry=CollectorRegistry(), spares=0) as pool:
        dispatcher = pool.impl._dispatcher
        spawner = dispatcher.spawner

        def die() -> None:
            raise SystemExit("the spawner's bug")

        monkeypatch.setattr(spawner, "_make", die)
        out = pool.submit("_crash", {})  # its worker must be re-forked: the spawner dies
        assert out["status"] == "worker_lost"
        assert wait_until(lambda: dispatcher.spawner is not spawner)
        assert wait_until(lambda: pool.impl.counts()["idle"] == 1)
        assert pool.submit("repair", {"text": "[2,"})["result"]["value"] == [2]


def test_a_job_still_running_at_its_deadline_is_replaced_by_a_spare_at_once(
        faults: None) -> None:
    """An overrun costs its own answer: the worker is killed at the deadline (the runaway
    burns no more CPU) and a spare started beforehand takes its slot."""
    registry = CollectorRegistry()
    with Pool(workers=2, timeout_ms=LONG_MS, registry=registry) as pool:
        pids = list(pool.impl.pids)
        out = pool.submit("_spin", {"seconds": SLOW}, timeout_ms=100)
        assert out["status"] == "timeout" and "killed and replaced" in out["error"]["message"]
        # (how soon: tests/benchmarks/bench_deadline.py, "capacity back", a few microseconds)
        assert wait_until(lambda: pool.impl.counts()["idle"] == 2)
        changed = [a != b for a, b in zip(pool.impl.pids, pids, strict=True)]
        assert changed.count(True) == 1
        assert registry.get_sample_value("toolcodec_worker_restarts_total",
                                         {"backend": "process", "reason": "timeout"}) == 1


def test_a_long_job_is_set_aside_and_the_line_moves_on(faults: None) -> None:
    """Two jobs that run for seconds hold both workers; the jobs behind them are not shed:
    the long ones are set aside (at the lowest priority) and the spares serve the line."""
    with Pool(workers=2, timeout_ms=LONG_MS, registry=CollectorRegistry()) as pool:
        long = [threading.Thread(target=pool.submit, args=("_sleep", {"seconds": 3}))
                for _ in range(2)]
        for t in long:
            t.start()
        assert wait_until(lambda: pool.impl.counts()["idle"] == 0)
        outs = [pool.submit("repair", {"text": "[1,"}, timeout_ms=2000) for _ in range(5)]
        assert [o["status"] for o in outs] == ["ok"] * 5
        for t in long:
            t.join()
        assert wait_until(lambda: pool.impl.counts()["idle"] == 2)


@pytest.mark.parametrize("selector", sorted(set(SELECTORS) - {"default"}))
def test_the_pool_runs_on_every_selector_the_platform_has(faults: None, selector: str) -> None:
    """macOS has no epoll: the dispatcher waits with whatever ``selectors`` offers."""
    with Pool(workers=2, timeout_ms=LONG_MS, registry=CollectorRegistry(),
              selector=selector) as pool:
        assert pool.submit("repair", {"text": "{'a': 1,}"})["result"]["value"] == {"a": 1}
        assert pool.submit("_spin", {"seconds": SLOW}, timeout_ms=100)["status"] == "timeout"
        assert pool.submit("_crash", {})["status"] == "worker_lost"
        big = "[" + ",".join(["1"] * 400_000) + "]"  # a frame far larger than a socket buffer
        out = pool.submit("repair", {"text": big})
        assert out["status"] == "ok" and len(out["result"]["value"]) == 400_000

        async def many() -> list[dict]:
            return await asyncio.gather(*(pool.asubmit("repair", {"text": f"[{i},"})
                                          for i in range(20)))

        outs = asyncio.run(many())
        assert [o["result"]["value"] for o in outs] == [[i] for i in range(20)]


def test_a_bad_selector_name_is_refused() -> None:
    with pytest.raises(ValueError, match="selector"):
        Pool(workers=1, registry=CollectorRegistry(), selector="nope")


def test_bursts_of_runaway_jobs_leave_a_pool_that_answers(faults: None) -> None:
    """25 bursts in a row of jobs that would spin for a minute, each on every worker and
    more: each is killed at its deadline, a spare takes its slot, and the pool answers
    every healthy job afterwards."""
    with Pool(workers=2, timeout_ms=50, registry=CollectorRegistry()) as pool:
        def runaway(outs: list[dict]) -> None:
            outs.append(pool.submit("_spin", {"seconds": SLOW}))

        for _ in range(25):
            outs: list[dict] = []
            threads = [threading.Thread(target=runaway, args=(outs,)) for _ in range(4)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()
            assert {o["status"] for o in outs} <= {"timeout", "rejected"}
            assert wait_until(lambda: pool.impl.counts()["idle"] == 2)
            healthy = [pool.submit("repair", {"text": "[1,"}, timeout_ms=LONG_MS)
                       for _ in range(4)]
            assert [o["status"] for o in healthy] == ["ok"] * 4
        health = pool.impl.health()
        assert health["dispatcher"] and health["spawner"] and health["turn_errors"] == 0


def test_a_fresh_servers_first_answer_with_a_new_tool_set_is_decoded_beside_a_busy_core() -> None:
    """The first request with a new tool set, on a server whose machine has a core burnt by
    another process, is decoded within its 50 ms budget: building the tool set (here far
    longer than the budget: a hundred schemas that jsonschema checks) is not charged to it.
    Charged, it was answered 504 timeout every time."""
    tools = slow_tools("first")
    text = call_text("first_5")
    burner = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    server = ServeProcess("--workers", "2", "--timeout-ms", "50")
    try:
        server.start()
        response = httpx.post(server.url + "/v1/decode", json={"text": text, "tools": tools},
                              timeout=30)
        envelope = response.json()
        assert response.status_code == 200, envelope
        assert envelope["result"]["calls"][0]["arguments"] == {"a": "y", "n": 3}
    finally:
        server.stop()
        burner.kill()
        burner.wait()
