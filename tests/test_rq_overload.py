"""Overload on the Redis backend is said as overload: ``rejected`` (reason ``shed``), HTTP 429
through ``toolcodec serve --backend rq``, never ``backend_unavailable`` while Redis answers;
and the event loop hands jobs to Redis without a thread per job.

Real redis-server, real ``toolcodec worker`` processes, real HTTP over sockets.
"""

from __future__ import annotations

import asyncio
import os
import socket
import subprocess
import sys
import threading
import time
from collections import Counter
from pathlib import Path

import httpx
import orjson
import pytest
from toolcodec.pool import api
from toolcodec.pool.rq_backend import RQBackend

from tests.redis_server import REPO_ROOT, RedisServer, free_port

pytestmark = pytest.mark.redis


def wait_for(predicate, timeout: float = 10.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.02)
    return predicate()


def warm(backend: RQBackend, seconds: float) -> None:
    """Run jobs until the backend has an estimate of a lane's cycle."""
    for _ in range(5):
        assert backend.submit("_sleep", {"seconds": seconds}, timeout_ms=5000)["status"] == "ok"
    assert backend.times.mean >= seconds


def test_a_budget_spent_before_the_call_is_shed_without_touching_redis(
        redis_server: RedisServer, queue_name: str) -> None:
    """A request whose body arrived after its budget (``arrived`` long ago) is overload,
    not an unreachable Redis; nothing is enqueued."""
    with RQBackend(redis_url=redis_server.url, queue=queue_name, timeout_ms=50) as b:
        out = b.submit("_sleep", {"seconds": 0}, arrived=time.monotonic() - 0.1)
        assert out["status"] == "rejected", out
        assert out["error"]["code"] == "rejected" and out["error"]["reason"] == "shed"
        assert out["elapsed_ms"] >= 100
        assert b.queue_depth() == 0


def test_a_queue_too_deep_for_the_budget_is_shed_and_the_rest_gets_through(
        start_rq_worker, redis_server: RedisServer, queue_name: str) -> None:
    """One lane, 20 ms jobs, 150 ms budgets, 24 callers at once: what cannot start in time is
    shed at the door (with the depth and lanes it saw), the jobs that fit run ok, and no
    caller is told Redis is unreachable."""
    start_rq_worker(concurrency=1)
    with RQBackend(redis_url=redis_server.url, queue=queue_name, timeout_ms=150) as b:
        warm(b, 0.02)
        outs: list[dict] = []
        lock = threading.Lock()
        go = threading.Barrier(24)

        def caller() -> None:
            go.wait()
            out = b.submit("_sleep", {"seconds": 0.02})
            with lock:
                outs.append(out)

        threads = [threading.Thread(target=caller) for _ in range(24)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    statuses = Counter(o["status"] for o in outs)
    assert statuses["ok"] >= 1, statuses
    assert statuses["rejected"] >= 1, statuses
    assert not any(o["status"] == "error" for o in outs), outs
    shed = [o["error"] for o in outs if o["status"] == "rejected"]
    assert all(e["reason"] == "shed" for e in shed), shed
    by_depth = [e for e in shed if "queue_depth" in e]
    assert by_depth and all(e["lanes"] == 1 and e["queue_depth"] >= 1 for e in by_depth), shed
    for o in outs:
        assert o["elapsed_ms"] < 150 + 100, o


def test_asubmit_takes_no_thread_per_job(start_rq_worker, redis_server: RedisServer,
                                         queue_name: str) -> None:
    """200 jobs in flight from one event loop: none goes through the loop's executor, and
    the process does not grow a thread per job."""
    start_rq_worker(concurrency=2)

    async def main() -> tuple[list[dict], int]:
        loop = asyncio.get_running_loop()

        def no_executor(*_args, **_kwargs):
            raise AssertionError("a job was handed to a thread")

        loop.run_in_executor = no_executor  # type: ignore[method-assign]
        with api.Pool(backend="rq", redis_url=redis_server.url, queue=queue_name,
                      timeout_ms=10_000) as pool:
            before = threading.active_count()
            jobs = [asyncio.ensure_future(pool.asubmit("_sleep", {"seconds": 0}))
                    for _ in range(200)]
            await asyncio.sleep(0)
            during = threading.active_count() - before
            return await asyncio.gather(*jobs), during

    outs, grown = asyncio.run(main())
    assert [o["status"] for o in outs] == ["ok"] * 200
    assert grown <= 0


def test_a_cancelled_asubmit_takes_its_job_back(redis_server: RedisServer,
                                                queue_name: str) -> None:
    """A client that goes away (its task cancelled) leaves nothing queued for a lane."""
    with RQBackend(redis_url=redis_server.url, queue=queue_name, timeout_ms=5000) as b:

        async def main() -> None:
            task = asyncio.ensure_future(b.asubmit("_sleep", {"seconds": 0}))
            while b.queue_depth() == 0:
                await asyncio.sleep(0.01)
            task.cancel()
            with pytest.raises(asyncio.CancelledError):
                await task

        asyncio.run(main())
        assert wait_for(lambda: b.queue_depth() == 0)


# -- through `toolcodec serve --backend rq` ------------------------------------------------

class Serve:
    """``toolcodec serve`` in a subprocess, its output to a file (a pipe nobody reads could
    fill up and stall the server under many requests)."""

    def __init__(self, log: Path, *args: str) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {**os.environ, "TOOLCODEC_FAULT_INJECTION": "1"}
        with open(log, "ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "toolcodec.pool.cli", "serve", "--port", str(self.port),
                 *args], env=env, cwd=REPO_ROOT, stdout=out, stderr=subprocess.STDOUT)

    def wait_ready(self) -> None:
        def ready() -> bool:
            assert self.proc.poll() is None, "toolcodec serve exited"
            try:
                return httpx.get(self.url + "/readyz", timeout=1.0).status_code == 200
            except httpx.HTTPError:
                return False
        assert wait_for(ready, timeout=30)

    def stop(self) -> None:
        self.proc.kill()
        self.proc.wait(10)


@pytest.fixture
def rq_serve(start_rq_worker, redis_server: RedisServer, queue_name: str, tmp_path: Path):
    start_rq_worker(concurrency=1)
    srv = Serve(tmp_path / "serve.log", "--backend", "rq", "--redis-url", redis_server.url,
                "--queue", queue_name, "--timeout-ms", "150")
    try:
        srv.wait_ready()
        yield srv
    finally:
        srv.stop()


def test_serve_answers_overload_with_429_not_503(rq_serve: Serve) -> None:
    """More than one lane can do, from many connections at once: 200 or 429 (``shed``),
    never 503 "Redis is unreachable"; the jobs that fit are answered ok."""
    job = {"seconds": 0.02}
    for _ in range(5):
        r = httpx.post(rq_serve.url + "/v1/_sleep", json=job, timeout=5)
        assert r.status_code == 200, r.text

    async def burst() -> list[httpx.Response]:
        limits = httpx.Limits(max_connections=40)
        async with httpx.AsyncClient(limits=limits, timeout=10) as client:
            return await asyncio.gather(*(client.post(rq_serve.url + "/v1/_sleep", json=job)
                                          for _ in range(120)))

    answers = asyncio.run(burst())
    codes = Counter(r.status_code for r in answers)
    assert 503 not in codes, [r.json() for r in answers if r.status_code == 503][:3]
    assert codes[200] >= 1 and codes[429] >= 1, codes
    for r in answers:
        if r.status_code == 429:
            assert r.json()["error"]["reason"] == "shed", r.json()
            assert "retry-after" in r.headers


def test_a_body_sent_late_is_shed_not_backend_unavailable(rq_serve: Serve) -> None:
    """The client sends its headers, then its body 200 ms later (the budget is 150 ms):
    the answer is 429 rejected, never 503 backend_unavailable."""
    body = orjson.dumps({"seconds": 0})
    head = (f"POST /v1/_sleep HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
            f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n").encode()
    with socket.create_connection(("127.0.0.1", rq_serve.port), timeout=10) as sock:
        sock.sendall(head)
        time.sleep(0.2)  # the client's delay under test, not a synchronisation
        sock.sendall(body)
        raw = b""
        while chunk := sock.recv(65536):
            raw += chunk
    status_line, _, rest = raw.partition(b"\r\n")
    envelope = orjson.loads(rest.partition(b"\r\n\r\n")[2])
    assert status_line.split()[1] == b"429", raw
    assert envelope["status"] == "rejected" and envelope["error"]["reason"] == "shed", envelope
