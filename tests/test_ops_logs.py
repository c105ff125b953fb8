"""Logs that follow a request: JSON lines, request and trace ids, job ids on both sides.

Unit checks of the formatters (``toolcodec.worker.logs``), then real processes: ``toolcodec
serve --log-format json --access-log`` in front of a ``toolcodec worker --log-format json`` on
a real Redis, and a proxy in front of the upstream STAND-IN (recorded outputs over real HTTP),
which shows what reaches the model server.
"""

from __future__ import annotations

import logging
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import orjson
import pytest
from toolcodec.pool.service.access import enter, leave
from toolcodec.worker import logs

from tests.serve_process import REPO_ROOT, ServeProcess

TRACE = "0af7651916cd43dd8448eb211c80319c"
TRACEPARENT = f"00-{TRACE}-b7ad6b7169203331-01"


def record(msg: str = "x", exc: BaseException | None = None, **fields) -> logging.LogRecord:
    rec = logging.LogRecord("toolcodec.test", logging.WARNING, __file__, 1, msg, (),
                            (type(exc), exc, None) if exc else None)
    if fields:
        rec.toolcodec_fields = fields
    return rec


def test_a_json_line_has_utc_time_level_logger_fields_and_the_request_context() -> None:
    token = logs.REQUEST_ID.set("req-1")
    try:
        line = orjson.loads(logs.JsonFormatter().format(record(event="job", job_id="tc-1")))
    finally:
        logs.REQUEST_ID.reset(token)
    assert line["time"].endswith("Z") and line["time"][10] == "T"
    assert time.strptime(line["time"][:19], "%Y-%m-%dT%H:%M:%S")
    assert (line["level"], line["logger"]) == ("warning", "toolcodec.test")
    assert (line["event"], line["job_id"], line["request_id"]) == ("job", "tc-1", "req-1")
    assert "trace_id" not in line  # not known: not written


def test_an_exception_is_one_line_with_its_type() -> None:
    try:
        raise ValueError("bad\nthing\n  here")
    except ValueError as exc:
        for formatter in (logs.JsonFormatter(), logs.TextFormatter()):
            text = formatter.format(record("failed", exc))
            assert "\n" not in text and "ValueError: bad thing here" in text
            assert "Traceback" not in text


def test_an_uncaught_exception_in_a_process_is_logged_as_one_json_line() -> None:
    code = ("from toolcodec.worker import logs; logs.configure('json'); "
            "raise KeyError('multi\\nline')")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         cwd=REPO_ROOT)
    assert out.returncode == 1
    (line,) = out.stderr.splitlines()
    got = orjson.loads(line)
    assert got["event"] == "uncaught_exception" and got["level"] == "error"
    assert got["exception"].startswith("KeyError:")


def started(cmd: list[str], log: Path, env: dict[str, str]) -> subprocess.Popen:
    with log.open("wb") as out:
        return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=out, cwd=REPO_ROOT,
                                env={**os.environ, **env}, start_new_session=True)


def lines(log: Path) -> list[dict]:
    text = log.read_text()
    return [orjson.loads(line) for line in text.splitlines() if line.strip()]


def wait_for(predicate, timeout: float = 60.0):
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        got = predicate()
        if got:
            return got
        time.sleep(0.05)
    return predicate()


def ready(url: str, path: str = "/readyz") -> bool:
    try:
        return httpx.get(url + path, timeout=2).status_code == 200
    except httpx.HTTPError:
        return False


@pytest.mark.redis
def test_one_request_is_followed_from_the_access_line_to_the_workers_job_line(
        tmp_path, redis_server, queue_name) -> None:
    every_job = {"TOOLCODEC_LOG_SLOW_MS": "0",  # log every job on both sides, not only slow
                 "TOOLCODEC_FAULT_INJECTION": "1"}
    worker_log, serve_log = tmp_path / "worker.log", tmp_path / "serve.log"
    worker = started([sys.executable, "-m", "toolcodec.pool.cli", "worker", "--redis-url",
                      redis_server.url, "--queue", queue_name, "--concurrency", "1",
                      "--log-format", "json"], worker_log, every_job)
    srv = ServeProcess("--backend", "rq", "--redis-url", redis_server.url, "--queue",
                       queue_name, "--timeout-ms", "5000", "--log-format", "json",
                       "--access-log")
    serve = started(srv.cmd, serve_log, every_job)
    try:
        assert wait_for(lambda: ready(srv.url)), serve_log.read_text()
        answer = httpx.post(srv.url + "/v1/repair", content=orjson.dumps({"text": "[1,"}),
                            headers={"content-type": "application/json",
                                     "x-request-id": "req-42", "traceparent": TRACEPARENT},
                            timeout=30)
        assert answer.status_code == 200 and answer.headers["x-request-id"] == "req-42"

        def access() -> list[dict]:
            return [g for g in lines(serve_log) if g.get("event") == "access"
                    and g.get("request_id") == "req-42"]
        (line,) = wait_for(access)
        assert line["trace_id"] == TRACE and line["status"] == 200
        assert (line["method"], line["path"], line["level"]) == ("POST", "/v1/repair", "info")
        (job_id,) = line["job_ids"]
        (caller,) = [g for g in lines(serve_log) if g.get("event") == "job"]
        assert (caller["side"], caller["job_id"], caller["request_id"]) == (
            "caller", job_id, "req-42")
        assert caller["trace_id"] == TRACE

        def worker_line() -> list[dict]:
            return [g for g in lines(worker_log) if g.get("job_id") == job_id]
        (done,) = wait_for(worker_line)
        assert done["side"] == "worker" and done["event"] == "job"

        generated = httpx.get(srv.url + "/healthz", timeout=10).headers["x-request-id"]
        assert len(generated) == 32 and int(generated, 16) >= 0
        # a lane that dies and one killed at its deadline leave one-line events, no traceback
        for op, body in (("_crash", {}), ("_sleep", {"seconds": 30, "timeout_ms": 200})):
            httpx.post(srv.url + f"/v1/{op}", content=orjson.dumps(body), timeout=30,
                       headers={"content-type": "application/json"})
        assert wait_for(lambda: {g.get("reason") for g in lines(worker_log)
                                 if g.get("event") == "worker_restarted"} >= {"crash",
                                                                               "timeout"})
    finally:
        serve.send_signal(signal.SIGINT)
        assert serve.wait(60) == 0
        os.killpg(worker.pid, signal.SIGTERM)
        worker.wait(60)
    got = lines(serve_log)  # every line of both processes is one JSON object
    events = [g.get("event") for g in got]
    assert {"start", "drain", "exit"} <= set(events), events
    assert events.index("start") < events.index("drain") < events.index("exit")
    assert all(g["time"].endswith("Z") and "level" in g for g in got + lines(worker_log))


def test_a_lane_killed_and_re_forked_is_logged(tmp_path) -> None:
    log = tmp_path / "serve.log"
    srv = ServeProcess("--workers", "1", "--log-format", "json")
    serve = started(srv.cmd, log, {"TOOLCODEC_FAULT_INJECTION": "1"})
    try:
        assert wait_for(lambda: ready(srv.url)), log.read_text()
        answer = httpx.post(srv.url + "/v1/_crash", content=b"{}", timeout=30,
                            headers={"content-type": "application/json"})
        assert answer.json()["status"] == "worker_lost"

        def restarted() -> list[dict]:
            return [g for g in lines(log) if g.get("event") == "worker_restarted"]
        (line,) = wait_for(restarted)
        assert (line["backend"], line["reason"], line["level"]) == ("process", "crash",
                                                                     "warning")
    finally:
        serve.kill()
        serve.wait(30)


def test_the_proxy_forwards_the_request_and_trace_headers_upstream(upstream) -> None:
    srv = ServeProcess("--upstream", upstream.url, "--workers", "1").start()
    try:
        sent = {"traceparent": TRACEPARENT, "tracestate": "vendor=1", "baggage": "user=7"}
        answer = httpx.post(srv.url + "/v1/chat/completions", timeout=30, headers=sent, json={
            "model": "m", "messages": [{"role": "user", "content": "hello"}]})
        assert answer.status_code == 200
        seen = httpx.get(upstream.url + "/_last", timeout=10).json()["headers"]
        assert {k: seen.get(k) for k in sent} == sent
        # no X-Request-Id from the client: the generated one is echoed and sent upstream
        assert seen["x-request-id"] == answer.headers["x-request-id"]
    finally:
        srv.stop()


@pytest.mark.redis
def test_a_proxied_answer_is_followed_to_the_rq_workers_job_line(
        tmp_path, redis_server, queue_name, upstream) -> None:
    every_job = {"TOOLCODEC_LOG_SLOW_MS": "0"}
    worker_log, serve_log = tmp_path / "worker.log", tmp_path / "serve.log"
    worker = started([sys.executable, "-m", "toolcodec.pool.cli", "worker", "--redis-url",
                      redis_server.url, "--queue", queue_name, "--concurrency", "1",
                      "--log-format", "json"], worker_log, every_job)
    srv = ServeProcess("--backend", "rq", "--redis-url", redis_server.url, "--queue",
                       queue_name, "--timeout-ms", "5000", "--upstream", upstream.url,
                       "--log-format", "json", "--access-log")
    serve = started(srv.cmd, serve_log, every_job)
    try:
        assert wait_for(lambda: ready(srv.url)), serve_log.read_text()
        answer = httpx.post(srv.url + "/v1/chat/completions", timeout=30, headers={
            "x-request-id": "chat-7", "traceparent": TRACEPARENT}, json={
            "model": "m", "messages": [{"role": "user", "content": "case:hermes_broken"}],
            "tools": [{"type": "function", "function": {"name": "get_weather", "parameters": {
                "type": "object", "properties": {"city": {"type": "string"}}}}}]})
        assert answer.status_code == 200 and answer.headers["x-request-id"] == "chat-7"
        (line,) = wait_for(lambda: [g for g in lines(serve_log) if g.get("event") == "access"
                                    and g.get("request_id") == "chat-7"])
        assert line["model"] == "m" and line["trace_id"] == TRACE
        (job_id,) = line["job_ids"]
        (done,) = wait_for(lambda: [g for g in lines(worker_log) if g.get("job_id") == job_id])
        assert (done["side"], done["op"]) == ("worker", "decode")
        seen = httpx.get(upstream.url + "/_last", timeout=10).json()["headers"]
        assert seen["x-request-id"] == "chat-7" and seen["traceparent"] == TRACEPARENT
    finally:
        serve.kill()
        serve.wait(30)
        os.killpg(worker.pid, signal.SIGTERM)
        worker.wait(60)


def test_a_requests_ids_come_from_its_last_id_and_trace_headers() -> None:
    trace = "00-" + "ab" * 16 + "-" + "cd" * 8 + "-01"
    headers = [(b"x-request-id", b"first"), (b"traceparent", trace.encode()),
               (b"content-type", b"application/json"), (b"x-request-id", b"second")]
    scope, rid, tokens = enter({"type": "http", "headers": headers})
    try:
        # a repeated header counts by its last value; a usable id is kept, not added again
        assert rid == "second" and scope["headers"] == headers
        assert logs.REQUEST_ID.get() == "second" and logs.TRACE_ID.get() == "ab" * 16
    finally:
        leave(tokens)
    unusable = [(b"x-request-id", b"two words"), (b"x-request-id", b"")]
    scope, rid, tokens = enter({"type": "http", "headers": unusable})
    leave(tokens)
    assert len(rid) == 32 and scope["headers"] == [(b"x-request-id", rid.encode())]
    assert logs.REQUEST_ID.get() is None  # the context as it was
