"""The process pool under random faults, from threads and an event loop at once.

For a bounded time, caller threads and asyncio tasks send a seeded random mix of healthy
decodes, decodes with tool sets never seen before, runaway jobs (``_spin``, ``_sleep`` for
30 s), slow jobs, crashes and cancelled calls. Then the invariants are checked on every call:

* each returned by its deadline plus a bound (the build of a new tool set may add up to
  ``BUILD_CAP_S``). The bound here is generous (``SLACK_S``) so that a busy CI machine cannot
  fail it; ``tests/benchmarks/bench_deadline.py`` reports the real worst wait;
* each answer is one the job could get (a runaway: ``timeout``; a healthy job: ``ok``, or a
  shed/timeout under the load the faults make);
* no pool thread died, no turn of the dispatcher failed, and afterwards every worker is back
  and every healthy job is answered.

``TOOLCODEC_STRESS_SEED`` and ``TOOLCODEC_STRESS_S`` explore further (docs/testing.md).
"""

from __future__ import annotations

import asyncio
import os
import random
import threading
import time

import pytest
from prometheus_client import CollectorRegistry
from toolcodec.pool import Pool
from toolcodec.pool.dispatcher import BUILD_CAP_S
from toolcodec.worker.jobs import FAULT_ENV

from tests.test_pool_process import wait_until

SEED = int(os.environ.get("TOOLCODEC_STRESS_SEED", "20261127"))
DURATION_S = float(os.environ.get("TOOLCODEC_STRESS_S", "5"))
BUDGET_MS = 50
SLACK_S = 1.0
THREADS, TASKS = 6, 24
TOOLS = [{"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
    "required": ["city"]}}]
HEALTHY = {"text": '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris", '
                   '"days": "3",}}</tool_call>', "tools": TOOLS}


def pick(rng: random.Random, n: int) -> tuple[str, dict, str]:
    """One job of the mix: (op, payload, kind)."""
    roll = rng.random()
    if roll < 0.80:
        return "decode", HEALTHY, "healthy"
    if roll < 0.84:  # a tool set nobody has seen: its build is not parse time
        tools = [{**TOOLS[0], "name": f"t{n}_{rng.randrange(10**9)}"}]
        return "decode", {"text": "no call here", "tools": tools}, "new_tools"
    if roll < 0.89:
        return "_spin", {"seconds": 30}, "runaway"
    if roll < 0.92:
        return "_sleep", {"seconds": 30}, "runaway"
    if roll < 0.96:
        return "_sleep", {"seconds": rng.choice([0.001, 0.005, 0.02])}, "slow"
    return "_crash", {}, "crash"


ALLOWED = {
    "healthy": {"ok", "timeout", "rejected"},
    "new_tools": {"ok", "timeout", "rejected"},
    "runaway": {"timeout", "rejected"},
    "slow": {"ok", "timeout", "rejected"},
    "crash": {"worker_lost", "rejected", "timeout"},
}


@pytest.mark.filterwarnings("error::pytest.PytestUnhandledThreadExceptionWarning")
def test_every_caller_returns_by_its_deadline_under_random_faults(
        monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(FAULT_ENV, "1")
    records: list[tuple[str, float, dict]] = []  # (kind, seconds the caller waited, envelope)
    lock = threading.Lock()
    end = time.monotonic() + DURATION_S

    def record(kind: str, waited: float, out: dict) -> None:
        with lock:
            records.append((kind, waited, out))

    with Pool(workers=2, timeout_ms=BUDGET_MS, registry=CollectorRegistry()) as pool:
        def thread_caller(i: int) -> None:
            rng = random.Random(SEED * 100 + i)
            n = 0
            while time.monotonic() < end:
                op, payload, kind = pick(rng, n)
                n += 1
                start = time.monotonic()
                out = pool.submit(op, payload)
                record(kind, time.monotonic() - start, out)

        async def task_caller(i: int) -> None:
            rng = random.Random(SEED * 1000 + i)
            n = 0
            while time.monotonic() < end:
                op, payload, kind = pick(rng, n)
                n += 1
                start = time.monotonic()
                if rng.random() < 0.05:  # a client that goes away mid-call
                    try:
                        await asyncio.wait_for(pool.asubmit(op, payload),
                                               rng.choice([0.0, 0.001, 0.01]))
                    except TimeoutError:
                        continue
                out = await pool.asubmit(op, payload)
                record(kind, time.monotonic() - start, out)

        async def loop_callers() -> None:
            await asyncio.gather(*(task_caller(i) for i in range(TASKS)))

        threads = [threading.Thread(target=thread_caller, args=(i,)) for i in range(THREADS)]
        threads.append(threading.Thread(target=lambda: asyncio.run(loop_callers())))
        for t in threads:
            t.start()
        for t in threads:
            t.join()

        assert len(records) > 100, len(records)
        budget = BUDGET_MS / 1000.0
        worst = max(waited - (BUILD_CAP_S if kind == "new_tools" else 0.0)
                    for kind, waited, _ in records)
        assert worst <= budget + SLACK_S, f"a caller waited {worst * 1000:.0f} ms"
        for kind, _, out in records:
            assert out["status"] in ALLOWED[kind], (kind, out)
        healthy = [out for kind, _, out in records if kind == "healthy"]
        assert any(o["status"] == "ok" for o in healthy)
        # a healthy job that did not run was refused as overload, said as such
        assert all(o["error"]["reason"] in ("shed", "queue_full")
                   for o in healthy if o["status"] == "rejected")
        print(f"\n{len(records)} calls, worst wait past the deadline "
              f"{(worst - budget) * 1000:.1f} ms, healthy ok "
              f"{sum(o['status'] == 'ok' for o in healthy) / len(healthy):.1%}")

        health = pool.impl.health()
        assert health["dispatcher"] and health["spawner"]
        assert health["heals"] == 0 and health["turn_errors"] == 0
        # afterwards: every worker back, every healthy job answered
        assert wait_until(lambda: pool.impl.counts()["idle"] == 2)
        outs = [pool.submit("decode", HEALTHY, timeout_ms=5000) for _ in range(40)]
        assert [o["status"] for o in outs] == ["ok"] * 40
        assert outs[0]["result"]["calls"][0]["arguments"] == {"city": "Paris", "days": 3}
