"""One structured log line per failed or slow job (issue #26, item 5).

Unit checks of :class:`toolcodec.worker.joblog.JobLog`, then the real processes: a crash and a
timeout in ``toolcodec serve`` and in an RQ worker leave a line each in their logs, with the
job's id (RQ), op, outcome, code, size and elapsed time, and without the payload.
"""

from __future__ import annotations

import json
import logging
import os
import signal
import subprocess
import sys

import httpx
import orjson
import pytest
from toolcodec.pool import Pool
from toolcodec.worker.joblog import JobLog

from tests.redis_server import REPO_ROOT
from tests.serve_process import ServeProcess

SECRET = "do-not-log-me"


def env(status: str, result: dict | None = None, elapsed_ms: float = 1.0, **error) -> dict:
    return {"status": status, "op": "decode", "backend": "process", "result": result,
            "error": error or None, "elapsed_ms": elapsed_ms}


def lines(caplog) -> list[dict]:
    return [json.loads(r.getMessage()) for r in caplog.records if r.name == "toolcodec.jobs"]


def test_fast_successes_are_not_logged_failures_and_slow_jobs_are(caplog) -> None:
    caplog.set_level(logging.WARNING, "toolcodec.jobs")
    jl = JobLog("caller", slow_ms=25, payloads=False, max_per_s=1000)
    jl.job("decode", "process", env("ok", {"ok": True}), {"text": SECRET})
    jl.job("decode", "process", env("ok", {"ok": True, "repairs": ["json.x"]}, 30.0),
           {"text": SECRET})
    jl.job("decode", "process", env("ok", {"ok": False, "repairs": [], "errors": [
        {"code": "unknown_tool", "message": "m"}, {"code": "schema_violation", "message": "m"}]}),
        {"text": SECRET})
    jl.job("decode", "rq", env("timeout", code="timeout", job_id="tc-1"), {"text": SECRET},
           job_id="tc-1")
    slow, failed, timed_out = lines(caplog)
    assert slow["slow"] is True and slow["outcome"] == "success" and slow["repairs"] == ["json.x"]
    assert failed["outcome"] == "failure" and failed["code"] == "schema_violation"
    assert failed["result_codes"] == ["schema_violation", "unknown_tool"]
    assert timed_out == {**timed_out, "job_id": "tc-1", "op": "decode", "backend": "rq",
                         "outcome": "timeout", "code": "timeout", "slow": False}
    assert timed_out["input_bytes"] == len(orjson.dumps({"text": SECRET}))
    assert SECRET not in caplog.text


def test_the_payload_is_logged_only_when_the_operator_asks(caplog) -> None:
    caplog.set_level(logging.WARNING, "toolcodec.jobs")
    JobLog("caller", payloads=True).job("repair", "process", env("worker_lost"),
                                        {"text": SECRET})
    (line,) = lines(caplog)
    assert SECRET in line["payload"]


def test_lines_per_second_are_capped_and_the_gap_is_reported(caplog) -> None:
    caplog.set_level(logging.WARNING, "toolcodec.jobs")
    jl = JobLog("caller", max_per_s=3)
    written = [jl.job("decode", "process", env("timeout"), None) for _ in range(10)]
    assert sum(w is not None for w in written) <= 6  # 3 a second, over at most two seconds
    jl._lines._second = -1  # a new second begins (the counter is per whole monotonic second)
    line = jl.job("decode", "process", env("timeout"), None)
    assert line is not None and line["suppressed"] == 10 - sum(w is not None for w in written)


def job_lines(text: str) -> list[dict]:
    out = []
    for raw in text.splitlines():
        if "toolcodec.jobs " in raw:
            out.append(json.loads(raw.split("toolcodec.jobs ", 1)[1]))
    return out


def test_serve_logs_a_crash_and_a_timeout_without_the_payload() -> None:
    serve = ServeProcess("--workers", "1", "--timeout-ms", "2000",
                         env={"TOOLCODEC_FAULT_INJECTION": "1"}).start()
    try:
        def post(op: str, body: dict) -> None:
            httpx.post(f"{serve.url}/v1/{op}", content=orjson.dumps(body), timeout=30,
                       headers={"content-type": "application/json"})

        post("_crash", {"note": SECRET})
        post("_sleep", {"seconds": 1, "timeout_ms": 50, "note": SECRET})
        post("repair", {"text": "[1, 2]"})  # a fast success: no line
    finally:
        serve.proc.send_signal(signal.SIGTERM)
        out = serve.proc.communicate(timeout=60)[0].decode()
    got = job_lines(out)
    assert [(g["op"], g["outcome"]) for g in got if g["outcome"] != "success"] == [
        ("_crash", "worker_lost"), ("_sleep", "timeout")], out
    # a success is logged only when slow (on a busy machine the repair after the overrun may be)
    assert all(g["slow"] for g in got if g["outcome"] == "success"), out
    assert all(g["side"] == "caller" and g["input_bytes"] > len(SECRET) for g in got)
    assert SECRET not in out


@pytest.mark.redis
def test_an_rq_worker_logs_the_job_it_lost_with_its_id(redis_server, queue_name) -> None:
    environ = {**os.environ, "TOOLCODEC_FAULT_INJECTION": "1"}
    proc = subprocess.Popen([sys.executable, "-m", "toolcodec.worker.rq_worker", "--redis-url",
                             redis_server.url, "--queue", queue_name, "--concurrency", "1"],
                            env=environ, cwd=REPO_ROOT, stderr=subprocess.PIPE,
                            start_new_session=True)
    try:
        with Pool("rq", redis_url=redis_server.url, queue=queue_name, timeout_ms=20000) as pool:
            crashed = pool.submit("_crash", {"note": SECRET})
            assert crashed["status"] == "worker_lost", crashed
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        err = proc.communicate(timeout=60)[1].decode()
    (line,) = job_lines(err)
    assert line["side"] == "worker" and line["outcome"] == "worker_lost"
    assert line["job_id"].startswith("tc-") and line["code"] == "worker_lost"
    assert SECRET not in err
