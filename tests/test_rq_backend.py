"""The Redis/RQ backend against a real redis-server and real ``toolcodec worker`` processes."""

from __future__ import annotations

import asyncio
import os
import signal
import threading
import time
import urllib.request
from collections import Counter

import pytest
from prometheus_client import CollectorRegistry
from prometheus_client.parser import text_string_to_metric_families
from toolcodec.pool.rq_backend import RQBackend
from toolcodec.worker import rq_protocol as proto
from toolcodec.worker.metrics import Metrics

from tests.redis_server import RedisServer

pytestmark = pytest.mark.redis

GRACE_MS = 40  # generous: two shared cores, other test suites running alongside
SLOW = 5.0  # seconds a stuck job would run if nothing killed it


@pytest.fixture
def backend(redis_server: RedisServer, queue_name: str):
    b = RQBackend(redis_url=redis_server.url, queue=queue_name, timeout_ms=2000)
    yield b
    b.close()


def scrape(port: int) -> dict[tuple[str, tuple], float]:
    """Worker-side metric samples keyed by (name, sorted labels)."""
    text = urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode()
    out = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            out[(s.name, tuple(sorted(s.labels.items())))] = s.value
    return out


def worker_count(port: int, op: str, outcome: str) -> float:
    labels = (("backend", "rq"), ("op", op), ("outcome", outcome))
    return scrape(port).get(("toolcodec_worker_jobs_total", labels), 0.0)


def restarts(port: int, reason: str) -> float:
    labels = (("backend", "rq"), ("reason", reason))
    return scrape(port).get(("toolcodec_worker_restarts_total", labels), 0.0)


def wait_for(predicate, timeout: float = 5.0) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.02)
    return predicate()


def test_ok_envelope_shape(start_rq_worker, backend) -> None:
    start_rq_worker()
    out = backend.submit("_sleep", {"seconds": 0.001})
    assert out["status"] == "ok", out
    assert out["result"] == {"slept": 0.001}
    assert out["error"] is None
    assert out["backend"] == "rq" and out["op"] == "_sleep"
    assert 0 < out["elapsed_ms"] < 2000


def test_bad_request_comes_back_from_the_worker(start_rq_worker, backend) -> None:
    start_rq_worker()
    out = backend.submit("no_such_op", {})
    assert out["status"] == "error"
    assert out["error"]["code"] == "bad_request"
    assert "no_such_op" in out["error"]["message"]


def test_unserialisable_payload_is_bad_request_without_redis_traffic(backend) -> None:
    out = backend.submit("repair", {"text": object()})
    assert out["status"] == "error" and out["error"]["code"] == "bad_request"
    assert backend.queue_depth() == 0


@pytest.mark.parametrize("op", ["_sleep", "_spin"])
@pytest.mark.parametrize("budget_ms", [30, 50])
def test_stuck_job_times_out_on_the_callers_clock_and_is_killed(
    start_rq_worker, backend, op, budget_ms
) -> None:
    group = start_rq_worker(concurrency=1, metrics=True)
    assert backend.submit("_sleep", {"seconds": 0})["status"] == "ok"  # warm
    out = backend.submit(op, {"seconds": SLOW}, timeout_ms=budget_ms)
    assert out["status"] == "timeout", out
    assert out["error"]["code"] == "timeout"
    assert budget_ms <= out["elapsed_ms"] < budget_ms + GRACE_MS
    # One lane only: an answer well before SLOW proves the stuck child was killed.
    t0 = time.monotonic()
    after = backend.submit("_sleep", {"seconds": 0})
    assert after["status"] == "ok", after
    assert time.monotonic() - t0 < 1.0
    assert wait_for(lambda: restarts(group.metrics_port, "timeout") == 1)
    assert worker_count(group.metrics_port, op, "timeout") == 1


def test_crash_is_worker_lost_and_the_worker_recovers(start_rq_worker, backend) -> None:
    group = start_rq_worker(concurrency=1, metrics=True)
    out = backend.submit("_crash", {})
    assert out["status"] == "worker_lost", out
    assert out["error"]["code"] == "worker_lost"
    for _ in range(5):
        assert backend.submit("_sleep", {"seconds": 0})["status"] == "ok"
    assert wait_for(lambda: restarts(group.metrics_port, "crash") == 1)
    assert worker_count(group.metrics_port, "_crash", "worker_lost") == 1


def test_job_expired_in_the_queue_is_not_run_but_counted(
    start_rq_worker, backend, redis_server, queue_name
) -> None:
    """A job whose caller could not take it back (e.g. the caller died) is not run late."""
    group = start_rq_worker(concurrency=1, metrics=True, launch=False)
    backend._withdrawer.stop()  # as if the caller went away before it could withdraw
    out = backend.submit("_crash", {}, timeout_ms=30)
    assert out["status"] == "timeout"
    assert backend.queue_depth() == 1
    group.start()
    assert wait_for(lambda: worker_count(group.metrics_port, "_crash", "timeout") == 1)
    # Had it run, the child would have died: no crash, no restart, nothing lost.
    assert restarts(group.metrics_port, "crash") == 0
    assert worker_count(group.metrics_port, "_crash", "worker_lost") == 0
    client = redis_server.client()
    assert client.llen(proto.queue_key(queue_name)) == 0
    assert client.llen(proto.intermediate_key(queue_name)) == 0
    client.close()


def test_a_timed_out_job_is_taken_back_out_of_the_queue(
    start_rq_worker, backend, redis_server, queue_name
) -> None:
    """Jobs queued behind a stuck lane must not cost the lanes anything once dead."""
    group = start_rq_worker(concurrency=1, metrics=True, launch=False)
    outs = [backend.submit("_crash", {}, timeout_ms=30) for _ in range(3)]
    assert [o["status"] for o in outs] == ["timeout"] * 3
    client = redis_server.client()
    assert wait_for(lambda: backend.queue_depth() == 0)
    assert not any(client.exists(proto.job_key(o["error"]["job_id"])) for o in outs)
    group.start()
    assert backend.submit("_sleep", {"seconds": 0})["status"] == "ok"
    # The withdrawn jobs never reached the worker: not run, not even seen.
    assert worker_count(group.metrics_port, "_crash", "timeout") == 0
    assert restarts(group.metrics_port, "crash") == 0
    client.close()


def test_ids_a_killed_worker_left_in_the_intermediate_list_are_removed(
    start_rq_worker, backend, redis_server, queue_name
) -> None:
    first = start_rq_worker(concurrency=1)
    client = redis_server.client()
    key = proto.intermediate_key(queue_name)
    caller = threading.Thread(target=lambda: backend.submit("_sleep", {"seconds": SLOW},
                                                            timeout_ms=300))
    caller.start()
    assert wait_for(lambda: client.llen(key) == 1)
    os.killpg(first.proc.pid, signal.SIGKILL)  # no chance to answer or clean up
    caller.join()
    assert client.llen(key) == 1  # RQ leaves it there, with no TTL
    assert client.ttl(key) == -1
    start_rq_worker(concurrency=1)
    assert wait_for(lambda: client.llen(key) == 0, timeout=20)
    assert backend.submit("_sleep", {"seconds": 0})["status"] == "ok"
    client.close()


def test_a_hung_redis_does_not_hold_callers_past_their_budget(
    start_rq_worker, own_redis_server, queue_name
) -> None:
    start_rq_worker(concurrency=1, server=own_redis_server)
    b = RQBackend(redis_url=own_redis_server.url, queue=queue_name, timeout_ms=3000)
    try:
        assert b.submit("_sleep", {"seconds": 0})["status"] == "ok"
        own_redis_server.proc.send_signal(signal.SIGSTOP)  # alive, accepting, never answering
        try:
            outs = [b.submit("_sleep", {"seconds": 0}, timeout_ms=200) for _ in range(3)]
        finally:
            own_redis_server.proc.send_signal(signal.SIGCONT)
        for out in outs:
            assert out["status"] in ("timeout", "error"), out
            assert out["status"] == "timeout" or out["error"]["code"] == "backend_unavailable"
            # The client's own socket timeout and retries would take seconds here.
            assert out["elapsed_ms"] < 200 + 800, out
        assert wait_for(lambda: b.submit("_sleep", {"seconds": 0}, timeout_ms=1000)["status"]
                        == "ok", timeout=15)
    finally:
        b.close()


def test_a_stopped_redis_costs_callers_no_more_than_their_budget(
    start_rq_worker, own_redis_server, queue_name
) -> None:
    """Redis stopped by SIGSTOP for two seconds (it accepts connections, never answers):
    every caller, on a live connection or on one it must open and shake hands on, gets its
    envelope within its 50 ms budget plus the grace, from threads and from an event loop."""
    start_rq_worker(concurrency=1, server=own_redis_server)
    b = RQBackend(redis_url=own_redis_server.url, queue=queue_name, timeout_ms=50)
    try:
        assert b.submit("_sleep", {"seconds": 0}, timeout_ms=2000)["status"] == "ok"
        own_redis_server.proc.send_signal(signal.SIGSTOP)
        stopped = time.monotonic()
        try:
            outs = [b.submit("_sleep", {"seconds": 0}) for _ in range(4)]
            threads = [threading.Thread(target=lambda: outs.append(
                b.submit("_sleep", {"seconds": 0}))) for _ in range(4)]
            for t in threads:
                t.start()
            for t in threads:
                t.join()

            async def from_a_loop() -> list[dict]:
                return await asyncio.gather(*(asyncio.to_thread(
                    b.submit, "_sleep", {"seconds": 0}) for _ in range(4)))

            outs += asyncio.run(from_a_loop())
            assert time.monotonic() - stopped < 2.0  # all of it while Redis was stopped
        finally:
            own_redis_server.proc.send_signal(signal.SIGCONT)
        assert len(outs) == 12
        for out in outs:
            assert out["status"] == "timeout" or out["error"]["code"] == "backend_unavailable"
            assert out["elapsed_ms"] < 50 + GRACE_MS, out
        assert wait_for(lambda: b.submit("_sleep", {"seconds": 0}, timeout_ms=1000)["status"]
                        == "ok", timeout=15)
    finally:
        b.close()


def test_full_queue_rejects_at_once(redis_server, queue_name) -> None:
    metrics = Metrics(CollectorRegistry())
    b = RQBackend(redis_url=redis_server.url, queue=queue_name, max_queue=3, metrics=metrics)
    fillers = [threading.Thread(target=b.submit, args=("_sleep", {"seconds": 0}),
                                kwargs={"timeout_ms": 1500}) for _ in range(3)]
    try:
        for t in fillers:  # no worker: they stay queued while their callers wait
            t.start()
        assert wait_for(lambda: b.queue_depth() == 3)
        out = b.submit("_sleep", {"seconds": 0}, timeout_ms=1000)
        assert out["status"] == "rejected"
        assert out["error"]["code"] == "rejected" and out["error"]["queue_depth"] == 3
        assert out["elapsed_ms"] < 100
        assert b.queue_depth() == 3
        assert metrics.registry.get_sample_value(
            "toolcodec_queue_depth", {"backend": "rq"}) == 3
    finally:
        for t in fillers:
            t.join()
        b.close()


def test_keys_carry_ttls(start_rq_worker, redis_server, queue_name) -> None:
    client = redis_server.client()
    b = RQBackend(redis_url=redis_server.url, queue=queue_name, timeout_ms=20)
    try:
        b._withdrawer.stop()  # the timed-out job stays queued, as if its caller had died
        b.submit("_sleep", {"seconds": 0})  # queued, no worker yet
        (job_id,) = [x.decode() for x in client.lrange(proto.queue_key(queue_name), 0, -1)]
        assert 0 < client.pttl(proto.job_key(job_id)) <= 20 + proto.JOB_GRACE_MS
        # A caller that stops listening: its replies must expire on their own.
        b._listener.stop()
        start_rq_worker()
        assert wait_for(lambda: client.exists(proto.reply_key(b.client_id)) == 1)
        assert 0 < client.pttl(proto.reply_key(b.client_id)) <= proto.REPLY_TTL_MS
        assert client.exists(proto.job_key(job_id)) == 0  # done jobs are deleted
    finally:
        b.close()
        client.close()


def test_many_threads_get_no_spurious_timeouts(start_rq_worker, backend) -> None:
    start_rq_worker(concurrency=2)
    results: list[dict] = []
    lock = threading.Lock()

    def client() -> None:
        for _ in range(15):
            out = backend.submit("_sleep", {"seconds": 0}, timeout_ms=2000)
            with lock:
                results.append(out)

    threads = [threading.Thread(target=client) for _ in range(32)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert Counter(r["status"] for r in results) == {"ok": 32 * 15}


def test_asyncio_callers_share_the_loop(start_rq_worker, redis_server, queue_name) -> None:
    from toolcodec.pool import api
    start_rq_worker(concurrency=2)

    async def main() -> list[dict]:
        with api.Pool(backend="rq", redis_url=redis_server.url, queue=queue_name,
                      timeout_ms=2000) as pool:
            return await asyncio.gather(
                *(pool.asubmit("_sleep", {"seconds": 0.01}) for _ in range(20))
            )

    outs = asyncio.run(main())
    assert [o["status"] for o in outs] == ["ok"] * 20
    assert all(o["backend"] == "rq" for o in outs)


def test_redis_restart_mid_run(start_rq_worker, own_redis_server, queue_name) -> None:
    start_rq_worker(concurrency=1, server=own_redis_server)
    b = RQBackend(redis_url=own_redis_server.url, queue=queue_name, timeout_ms=3000)
    try:
        assert b.submit("_sleep", {"seconds": 0})["status"] == "ok"
        in_flight: list[dict] = []
        t = threading.Thread(target=lambda: in_flight.append(b.submit("_sleep", {"seconds": 1})))
        t.start()
        time.sleep(0.2)
        own_redis_server.stop()
        t.join()
        # The waiting caller is told at once, not at the end of its 3 s budget.
        assert in_flight[0]["error"]["code"] == "backend_unavailable", in_flight
        assert in_flight[0]["elapsed_ms"] < 1500
        down = b.submit("_sleep", {"seconds": 0})
        assert down["status"] == "error" and down["error"]["code"] == "backend_unavailable"
        assert down["elapsed_ms"] < 1000
        assert "Redis" in down["error"]["message"]
        own_redis_server.start()
        assert wait_for(lambda: b.submit("_sleep", {"seconds": 0}, timeout_ms=500)["status"]
                        == "ok", timeout=15)
    finally:
        b.close()


def test_password_url(start_rq_worker, queue_name) -> None:
    server = RedisServer(extra_args=("--requirepass", "pw-123"))
    server.start()
    try:
        start_rq_worker(server=server)
        b = RQBackend(redis_url=server.url, queue=queue_name)
        assert b.submit("_sleep", {"seconds": 0}, timeout_ms=2000)["status"] == "ok"
        b.close()
        wrong = RQBackend(redis_url=server.url.replace("pw-123", "nope"), queue=queue_name)
        out = wrong.submit("_sleep", {"seconds": 0})
        assert out["error"]["code"] == "backend_unavailable"
        assert out["elapsed_ms"] < 1000
        wrong.close(timeout=0.1)
    finally:
        server.close()


def test_metric_counts_equal_outcomes(start_rq_worker, backend, monkeypatch) -> None:
    # Fault-injection ops are counted under their name only where the operator enabled them:
    # on the workers (the fixture's environment) and, here, on the caller too.
    monkeypatch.setenv("TOOLCODEC_FAULT_INJECTION", "1")
    group = start_rq_worker(concurrency=1, metrics=True)
    backend.metrics = caller = Metrics(CollectorRegistry())
    plan = [("_sleep", {"seconds": 0}, 2000)] * 6 + [
        ("_sleep", {"seconds": SLOW}, 30), ("_crash", {}, 2000), ("nope", {}, 2000),
    ]
    outs = [backend.submit(op, payload, timeout_ms=ms) for op, payload, ms in plan]
    seen = Counter((o["op"], o["status"]) for o in outs)
    assert seen == {("_sleep", "ok"): 6, ("_sleep", "timeout"): 1,
                    ("_crash", "worker_lost"): 1, ("nope", "error"): 1}
    expected = {("_sleep", "success"): 6, ("_sleep", "timeout"): 1,
                ("_crash", "worker_lost"): 1, ("unknown", "failure"): 1}
    for (op, outcome), n in expected.items():
        labels = {"op": op, "backend": "rq", "outcome": outcome}
        assert caller.registry.get_sample_value("toolcodec_jobs_total", labels) == n
        assert wait_for(lambda op=op, outcome=outcome, n=n:
                        worker_count(group.metrics_port, op, outcome) == n)
    total = caller.registry.get_sample_value(
        "toolcodec_job_duration_seconds_count", {"op": "_sleep", "backend": "rq"})
    assert total == 7


def refused(port: int, reason: str) -> float:
    return scrape(port).get(("toolcodec_rq_jobs_refused_total", (("reason", reason),)), 0.0)


def test_a_redis_writer_cannot_run_code_in_a_worker(
    start_rq_worker, redis_server, queue_name, backend, tmp_path
) -> None:
    """Jobs that are not toolcodec jobs are refused unrun, removed, counted and logged."""
    from rq import Queue

    group = start_rq_worker(metrics=True)
    conn = redis_server.client()
    json_queue = Queue(queue_name, connection=conn, serializer=proto.SERIALIZER)
    pickle_queue = Queue(queue_name, connection=conn)  # RQ's default: pickle
    marks = [tmp_path / f"mark-{i}" for i in range(4)]
    jobs = [
        json_queue.enqueue("os.system", f"touch {marks[0]}"),
        json_queue.enqueue("tests.rq_marker.touch", str(marks[1])),
        pickle_queue.enqueue("tests.rq_marker.touch", str(marks[2])),
        # our function, but not sent by a toolcodec caller (no reply list):
        json_queue.enqueue(proto.RUN_JOB, {"id": "x", "op": "_crash", "payload": {},
                                           "deadline": time.time() + 60}),
        # our function with a reply list outside toolcodec's key space:
        json_queue.enqueue(proto.RUN_JOB, {"id": "y", "op": "repair", "payload": {"text": "1"},
                                           "deadline": time.time() + 60},
                           meta={proto.META_REPLY_TO: "some:other:key"}),
    ]
    port = group.metrics_port
    expected = {"foreign_function": 2, "undecodable": 1, "no_reply_to": 2}
    assert wait_for(lambda: all(refused(port, r) == n for r, n in expected.items()), 15)
    assert not any(m.exists() for m in marks)
    assert conn.llen(proto.intermediate_key(queue_name)) == 0
    assert not any(conn.exists(proto.job_key(j.id)) for j in jobs)
    assert not conn.exists("some:other:key")
    # The lane is unharmed: toolcodec jobs still run.
    assert backend.submit("repair", {"text": "[1,"})["status"] == "ok"
    assert restarts(port, "crash") == 0
    conn.close()


def test_a_url_that_answers_another_protocol_is_backend_unavailable(queue_name) -> None:
    import socket

    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)
    stop = threading.Event()

    def http_server() -> None:  # answers every connection like a web server would
        listener.settimeout(0.2)
        while not stop.is_set():
            try:
                conn, _ = listener.accept()
            except TimeoutError:
                continue
            with conn:
                conn.recv(65536)
                conn.sendall(b"HTTP/1.1 400 Bad Request\r\nContent-Length: 0\r\n\r\n")

    thread = threading.Thread(target=http_server, daemon=True)
    thread.start()
    port = listener.getsockname()[1]
    b = RQBackend(redis_url=f"redis://127.0.0.1:{port}/0", queue=queue_name, timeout_ms=1000)
    try:
        for _ in range(3):
            out = b.submit("repair", {"text": "1"})
            assert out["status"] == "error" and out["error"]["code"] == "backend_unavailable"
        assert b._listener.is_alive()  # the reply thread survived the garbage answers
    finally:
        b.close()
        stop.set()
        thread.join(5)
        listener.close()


def test_callers_queue_depth_is_read_when_scraped(redis_server, queue_name) -> None:
    registry = CollectorRegistry()
    b = RQBackend(redis_url=redis_server.url, queue=queue_name, timeout_ms=100,
                  metrics=Metrics(registry))
    depth = lambda: registry.get_sample_value("toolcodec_queue_depth", {"backend": "rq"})  # noqa: E731
    try:
        b._withdrawer.stop()  # timed-out jobs stay queued, as if their callers had died
        for _ in range(3):  # no worker: the jobs stay queued (and time out for the caller)
            assert b.submit("repair", {"text": "1"})["status"] == "timeout"
        assert depth() == 3
        redis_server.client().delete(proto.queue_key(queue_name))
        assert depth() == 0  # not the last value seen at enqueue
    finally:
        b.close()


def test_the_worker_endpoint_describes_what_the_worker_measured(backend, start_rq_worker) -> None:
    group = start_rq_worker(metrics=True)
    assert backend.submit("repair", {"text": "[1,"})["status"] == "ok"
    assert wait_for(lambda: worker_count(group.metrics_port, "repair", "success") == 1)
    text = urllib.request.urlopen(f"http://127.0.0.1:{group.metrics_port}/metrics",
                                  timeout=5).read().decode()
    helps = {line.split(" ")[2]: line.split(" ", 3)[3] for line in text.splitlines()
             if line.startswith("# HELP ")}
    from toolcodec.worker.metrics import HELP, WORKER_HELP, name_of

    for name, doc in WORKER_HELP.items():
        assert helps[name_of(name, "worker")] == doc, name
        assert helps[name_of(name, "worker")] != HELP[name][0]  # not the caller's text
    assert "this worker" in helps["toolcodec_worker_jobs_total"].lower()


# -- Redis going away: one log line per change of state, lanes back off (issue #25 item 7) ---

def _one_outage_logged(group, attempts) -> str:
    """Wait until the lanes retried many times against ``attempts``; return the log."""
    assert wait_for(lambda: attempts.connections >= 12, timeout=30), group.log()
    log = group.log()
    assert log.count("Redis unavailable") == 1, log
    assert "Traceback" not in log and "quitting" not in log, log
    return log


def _recovers(group, server, queue: str) -> None:
    group.wait_ready()
    with RQBackend(redis_url=server.url, queue=queue, timeout_ms=5000) as b:
        assert b.submit("repair", {"text": "[1,"})["status"] == "ok"
    assert wait_for(lambda: "Redis answers again" in group.log())
    log = group.log()
    assert log.count("Redis unavailable") == 1 and log.count("Redis answers again") == 1, log


def test_redis_going_away_is_logged_once_not_per_attempt(
    own_redis_server, queue_name, tmp_path
) -> None:
    from tests.redis_server import DroppingListener, WorkerProcessGroup

    group = WorkerProcessGroup(own_redis_server.url, queue_name, concurrency=2,
                               log_path=tmp_path / "worker.log")
    group.start()
    try:
        own_redis_server.stop()
        attempts = DroppingListener(own_redis_server.port)
        try:
            _one_outage_logged(group, attempts)
        finally:
            attempts.close()
        own_redis_server.start()
        _recovers(group, own_redis_server, queue_name)
    finally:
        group.stop()


def test_redis_down_when_the_worker_starts_is_logged_once(
    own_redis_server, queue_name, tmp_path
) -> None:
    """The lanes cannot even register: each attempt used to log, ten a second per lane."""
    from tests.redis_server import DroppingListener, WorkerProcessGroup

    own_redis_server.stop()
    attempts = DroppingListener(own_redis_server.port)
    group = WorkerProcessGroup(own_redis_server.url, queue_name, concurrency=2,
                               log_path=tmp_path / "worker.log")
    try:
        group.start(wait=False)
        try:
            _one_outage_logged(group, attempts)
        finally:
            attempts.close()
        own_redis_server.start()
        _recovers(group, own_redis_server, queue_name)
    finally:
        group.stop()


def test_reconnect_delays_double_up_to_the_cap_and_restart_after_success() -> None:
    from toolcodec.worker.redis_link import Backoff

    backoff = Backoff(first=0.02, cap=1.0)
    ceilings = [0.02, 0.04, 0.08, 0.16, 0.32, 0.64, 1.0, 1.0]
    for ceiling in ceilings:
        assert ceiling / 2 <= backoff.next() <= ceiling
    backoff.reset()
    assert 0.01 <= backoff.next() <= 0.02


# -- the least-privilege ACL users of docs/rq.md ----------------------------------------------

def _documented_acl_users(drop: str = "") -> list[list[str]]:
    from tests.redis_server import REPO_ROOT

    text = (REPO_ROOT / "docs" / "rq.md").read_text()
    block = text.split("<!-- acl-users -->")[1].split("<!-- /acl-users -->")[0]
    lines = [line.strip() for line in block.splitlines() if line.strip().startswith("ACL ")]
    assert len(lines) == 2, block
    out = []
    for line in lines:
        words = line.replace("WORKER_PASSWORD", "wpw").replace("CALLER_PASSWORD", "cpw").split()
        out.append([w for w in words if w != drop])
    return out


def _acl_setup(server, drop: str = ""):
    """Create the documented users; returns an admin connection (the default user then needs
    a password, so this open connection is the only admin one)."""
    admin = server.client()
    for words in _documented_acl_users(drop):
        admin.execute_command(*words)
    admin.execute_command("ACL", "SETUSER", "default", "resetpass", ">admin-password")
    return admin


def _acl_log(admin) -> list[dict]:
    """Redis' ACL LOG entries (RESP2 answers each as a flat list of pairs)."""
    return [dict(zip(e[::2], e[1::2], strict=True)) if isinstance(e, list) else e
            for e in admin.execute_command("ACL", "LOG")]


def _acl_denials(admin) -> list[tuple[bytes, bytes]]:
    return [(e[b"username"], e[b"object"]) for e in _acl_log(admin)]


def test_the_documented_least_privilege_users_are_enough(own_redis_server, tmp_path) -> None:
    """The worker and the caller run with the ACL users of docs/rq.md and nothing is denied;
    the caller's user cannot suspend workers, publish commands or plant registry entries."""
    import redis

    from tests.redis_server import WorkerProcessGroup

    admin = _acl_setup(own_redis_server)
    base = f"127.0.0.1:{own_redis_server.port}/0"
    group = WorkerProcessGroup(f"redis://toolcodec-worker:wpw@{base}", "toolcodec",
                               concurrency=2, log_path=tmp_path / "worker.log")
    group.start()
    try:
        # A leftover of a killed worker, to be found by the lanes' periodic check.
        admin.rpush(proto.intermediate_key("toolcodec"), "gone-job")
        with RQBackend(redis_url=f"redis://toolcodec-caller:cpw@{base}", queue="toolcodec",
                       timeout_ms=5000) as caller:
            assert caller.submit("repair", {"text": "[1,"})["status"] == "ok"
            assert caller.submit("_sleep", {"seconds": 2}, timeout_ms=20)["status"] == "timeout"
            assert caller.submit("repair", {"text": "{"})["status"] == "ok"
        assert wait_for(lambda: admin.llen(proto.intermediate_key("toolcodec")) == 0, 30)
        as_caller = redis.Redis.from_url(f"redis://toolcodec-caller:cpw@{base}")
        from toolcodec.worker.heartbeat import live_lanes

        assert wait_for(lambda: sum(live_lanes(as_caller, "toolcodec").values()) == 2), \
            (_acl_log(admin), group.log())  # what serve's readiness reads
        for attempt in (lambda: as_caller.set("rq:suspended", 1),
                        lambda: as_caller.publish("rq:pubsub:any", "{}"),
                        lambda: as_caller.zadd("rq:wip:toolcodec", {"x": 1})):
            with pytest.raises(redis.exceptions.NoPermissionError):
                attempt()
        as_caller.close()
    finally:
        group.stop()
    denied = _acl_denials(admin)
    # Only the three attempts above were refused, nothing the worker or the caller needed.
    assert sorted(denied) == [(b"toolcodec-caller", b"publish"), (b"toolcodec-caller", b"set"),
                              (b"toolcodec-caller", b"zadd")], (denied, group.log())
    assert "Redis unavailable" not in group.log()


def test_a_command_redis_refuses_is_logged_once_not_spun_on(own_redis_server, tmp_path) -> None:
    """A worker user without BLMOVE: each dequeue is refused. The lane backs off and logs once
    instead of taking each refusal for an unreadable job (thousands of lines a second)."""
    from tests.redis_server import WorkerProcessGroup

    admin = _acl_setup(own_redis_server, drop="+blmove")
    group = WorkerProcessGroup(f"redis://toolcodec-worker:wpw@127.0.0.1:{own_redis_server.port}/0",
                               "toolcodec", concurrency=1, log_path=tmp_path / "worker.log")
    group.start()
    try:
        def refusals() -> int:
            return sum(int(e[b"count"]) for e in _acl_log(admin) if e[b"object"] == b"blmove")

        assert wait_for(lambda: refusals() >= 6, 30), group.log()
        log = group.log()
        assert log.count("Redis unavailable") == 1, log[-2000:]
        assert "refused job" not in log
    finally:
        group.stop()


def test_map_sends_every_job_and_keeps_the_order(start_rq_worker, redis_server,
                                                 queue_name) -> None:
    from toolcodec.pool import api
    start_rq_worker(concurrency=2)
    with api.Pool(backend="rq", redis_url=redis_server.url, queue=queue_name,
                  timeout_ms=5000) as pool:
        outs = pool.map("repair", [{"text": f"[{i}, "} for i in range(30)] + [{"text": object()}])
    assert [o["status"] for o in outs] == ["ok"] * 30 + ["error"]
    assert [o["result"]["value"] for o in outs[:30]] == [[i] for i in range(30)]
    assert outs[30]["error"]["code"] == "bad_request"


def test_a_caller_user_of_the_older_acl_still_gets_its_replies(
        own_redis_server, start_rq_worker) -> None:
    """A deployment whose caller user predates BLMPOP and LPOP in docs/rq.md: the listener
    falls back to BLPOP, one reply per round trip, instead of failing every call."""
    admin = own_redis_server.client()
    for words in _documented_acl_users():
        admin.execute_command(*[w for w in words if w not in ("+blmpop", "+lpop")])
    start_rq_worker(concurrency=1, server=own_redis_server, queue="toolcodec")
    url = f"redis://toolcodec-caller:cpw@127.0.0.1:{own_redis_server.port}/0"
    with RQBackend(redis_url=url, queue="toolcodec", timeout_ms=5000) as caller:
        outs = [caller.submit("repair", {"text": "[1,"}) for _ in range(3)]
    assert [o["status"] for o in outs] == ["ok"] * 3, outs
    denied = {obj for user, obj in _acl_denials(admin) if user == b"toolcodec-caller"}
    assert b"blmpop" in denied  # the fallback was taken, not skipped
    admin.close()
