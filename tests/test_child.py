"""toolcodec.worker.child.WorkerProcess: real child processes fed over a pipe."""

from __future__ import annotations

import os
import selectors
import signal
import time
from pathlib import Path

import pytest
from toolcodec.worker.child import WorkerDied, WorkerProcess
from toolcodec.worker.jobs import FAULT_ENV


# Handlers the tests name by "tests.test_child:<function>"; the child runs them.
def echo_handler(job: dict) -> dict:
    return {"status": "ok", "op": job["op"], "result": {"echo": job["payload"]}, "error": None}


def raising_handler(job: dict) -> dict:
    if job["payload"].get("boom"):
        raise RuntimeError("codec blew up")
    return echo_handler(job)


def unserialisable_handler(job: dict) -> dict:
    return {"status": "ok", "op": job["op"], "result": {"bad": object()}, "error": None}


def rendezvous_handler(job: dict) -> dict:
    """Marks its arrival in ``dir`` and waits (up to 30 s) for its partner ``other`` to
    arrive: ``met`` proves both jobs ran at the same time, without timing anything."""
    where = Path(job["payload"]["dir"])
    (where / job["payload"]["me"]).touch()
    end = time.monotonic() + 30
    while time.monotonic() < end:
        if (where / job["payload"]["other"]).exists():
            return {"status": "ok", "op": job["op"], "result": {"met": True}, "error": None}
        time.sleep(0.001)
    return {"status": "ok", "op": job["op"], "result": {"met": False}, "error": None}


def make_job(op: str, payload: dict, *, job_id: str = "j-1", budget: float = 10.0) -> dict:
    return {"id": job_id, "op": op, "payload": payload, "deadline": time.time() + budget}


@pytest.fixture
def faults(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(FAULT_ENV, "1")  # read in the child, which inherits it at fork


@pytest.fixture
def worker(faults: None):
    w = WorkerProcess()
    w.start()
    yield w
    w.kill()


def roundtrip(w: WorkerProcess, job: dict, timeout: float = 20.0) -> dict:
    w.send(job)
    assert w.poll(timeout), "no answer in time"
    return w.recv()


def test_start_gives_a_live_child_that_answers(worker: WorkerProcess) -> None:
    assert worker.alive and worker.pid and worker.pid != os.getpid()
    env = roundtrip(worker, make_job("_sleep", {"seconds": 0}))
    assert env == {"status": "ok", "op": "_sleep", "result": {"slept": 0.0}, "error": None}
    env = roundtrip(worker, make_job("frobnicate", {}))
    assert env["status"] == "error" and env["error"]["code"] == "bad_request"


def test_poll_is_false_while_the_job_runs(worker: WorkerProcess) -> None:
    worker.send(make_job("_sleep", {"seconds": 0.2}))
    start = time.monotonic()
    assert not worker.poll(0.05)
    assert time.monotonic() - start >= 0.045  # it waited (poll rounds up to whole ms)
    assert worker.poll(10) and worker.recv()["status"] == "ok"


def test_crash_raises_worker_died_then_restart_recovers(worker: WorkerProcess) -> None:
    old = worker.pid
    worker.send(make_job("_crash", {}))
    assert worker.poll(2)
    with pytest.raises(WorkerDied, match="signal 9"):
        worker.recv()
    assert not worker.alive
    worker.restart()
    assert worker.alive and worker.pid != old
    assert roundtrip(worker, make_job("_sleep", {"seconds": 0}))["status"] == "ok"


def test_external_sigkill_is_seen_as_death(worker: WorkerProcess) -> None:
    worker.send(make_job("_sleep", {"seconds": 5}))
    os.kill(worker.pid, signal.SIGKILL)
    assert worker.poll(2)
    with pytest.raises(WorkerDied):
        worker.recv()


def test_kill_is_idempotent_and_send_after_kill_raises(worker: WorkerProcess) -> None:
    pid = worker.pid
    worker.kill()
    worker.kill()
    assert not worker.alive
    with pytest.raises(ProcessLookupError):
        os.kill(pid, 0)  # reaped, not a zombie
    with pytest.raises(WorkerDied):
        worker.send(make_job("_sleep", {"seconds": 0}))


def test_job_past_its_deadline_is_answered_without_running(worker: WorkerProcess) -> None:
    # had the 600 s sleep run, roundtrip's poll would have given up first
    env = roundtrip(worker, make_job("_sleep", {"seconds": 600}, budget=-0.01), timeout=20)
    assert env["status"] == "timeout" and env["error"]["code"] == "timeout"
    assert "not run" in env["error"]["message"]


def test_handler_exception_is_internal_error_with_job_id_and_worker_survives() -> None:
    w = WorkerProcess(handler="tests.test_child:raising_handler")
    w.start()
    try:
        env = roundtrip(w, make_job("decode", {"boom": True}, job_id="job-42"))
        assert env["status"] == "error"
        assert env["error"]["code"] == "internal_error"
        assert env["error"]["job_id"] == "job-42"
        assert "job-42" in env["error"]["message"] and "codec blew up" in env["error"]["message"]
        assert w.alive
        assert roundtrip(w, make_job("decode", {"x": 1}))["result"] == {"echo": {"x": 1}}
    finally:
        w.kill()


def test_unserialisable_result_is_internal_error() -> None:
    w = WorkerProcess(handler="tests.test_child:unserialisable_handler")
    w.start()
    try:
        env = roundtrip(w, make_job("decode", {}))
        assert env["error"]["code"] == "internal_error"
        assert w.alive
    finally:
        w.kill()


def test_bad_handler_reference_fails_fast() -> None:
    with pytest.raises(ValueError, match="package.module:function"):
        WorkerProcess(handler="no_colon_here")
    with pytest.raises(AttributeError):
        WorkerProcess(handler="tests.test_child:missing_function")


def test_fileno_works_with_selectors(worker: WorkerProcess) -> None:
    with selectors.DefaultSelector() as sel:
        sel.register(worker, selectors.EVENT_READ)
        assert sel.select(0.01) == []
        worker.send(make_job("_sleep", {"seconds": 0.01}))
        assert [key.fileobj for key, _ in sel.select(2)] == [worker]
    assert worker.recv()["status"] == "ok"


def test_a_child_holds_no_other_workers_pipe(faults: None) -> None:
    first, second = WorkerProcess(), WorkerProcess()
    first.start()
    second.start()  # forked while `first` exists: must not keep first's pipe open
    try:
        first._live_conn().close()  # the parent lets go: the child must see EOF and exit
        deadline = time.monotonic() + 20
        while first.alive and time.monotonic() < deadline:
            time.sleep(0.01)
        assert not first.alive
        assert roundtrip(second, make_job("_sleep", {"seconds": 0}))["status"] == "ok"
    finally:
        first.kill()
        second.kill()


def test_spawn_start_method_works(faults: None) -> None:
    w = WorkerProcess(start_method="spawn")
    w.start()
    try:
        assert roundtrip(w, make_job("_sleep", {"seconds": 0}), timeout=20)["status"] == "ok"
    finally:
        w.kill()
