"""Attacks by a Redis writer on a real ``toolcodec worker`` (issue #25, items 1 and 2).

Each test plants data the way an attacker with write access to Redis would (RQ's own API or
plain commands) in a real redis-server, runs a real worker process, waits for a condition
that shows the worker has processed the planted data, and then checks that nothing named in
it was imported, called or requested, and that the worker still serves.
"""

from __future__ import annotations

import socket
import threading
import time
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import redis
from rq.callbacks import Callback
from rq.command import send_command, send_kill_horse_command, send_shutdown_command
from rq.job import Job, JobStatus
from rq.webhook import Webhook
from toolcodec.pool.rq_backend import RQBackend
from toolcodec.worker import rq_protocol as proto

from tests.redis_server import RedisServer, WorkerProcessGroup
from tests.rq_import_marker import MARKER_DIR_ENV

pytestmark = pytest.mark.redis

MARKER = "tests.rq_import_marker.callback"


def wait_for(predicate: Callable[[], object], timeout: float = 20.0) -> bool:
    """Poll a condition; the bound only stops a broken run from hanging."""
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.02)
    return bool(predicate())


@pytest.fixture
def markers(tmp_path: Path) -> Path:
    where = tmp_path / "markers"
    where.mkdir()
    return where


@pytest.fixture
def worker(redis_server: RedisServer, queue_name: str, markers: Path,
           tmp_path: Path) -> Iterator[Callable[..., WorkerProcessGroup]]:
    """``worker(*args, concurrency=1, cli=False)`` starts a worker that could import the
    marker module; ``cli`` starts it as ``toolcodec worker``."""
    started: list[WorkerProcessGroup] = []

    def start(*args: str, concurrency: int = 1, cli: bool = False) -> WorkerProcessGroup:
        group = WorkerProcessGroup(redis_server.url, queue_name, concurrency=concurrency,
                                   env={MARKER_DIR_ENV: str(markers)}, args=args,
                                   log_path=tmp_path / f"worker-{len(started)}.log", cli=cli)
        started.append(group)
        group.start()
        return group

    yield start
    for group in started:
        group.stop()


@pytest.fixture
def conn(redis_server: RedisServer) -> Iterator[redis.Redis]:
    client = redis_server.client()
    yield client
    client.close()


def plant_abandoned_job(conn: redis.Redis, queue: str, **job_options: object) -> str:
    """A job hash in status ``started`` whose entry in the queue's WIP registry has expired.

    This is what RQ's ``StartedJobRegistry.cleanup`` treats as a job whose worker died: it
    loads the hash, runs its failure callback, sends its webhooks, files it as failed and
    enqueues its dependents.
    """
    job = Job.create(MARKER, connection=conn, serializer=proto.SERIALIZER, origin=queue,
                     **job_options)
    job.set_status(JobStatus.STARTED, pipeline=None)
    job.save()
    conn.zadd(f"rq:wip:{queue}", {f"{job.id}:{uuid.uuid4().hex}": time.time() - 3600})
    return job.id


def assert_nothing_ran(markers: Path) -> None:
    assert sorted(p.name for p in markers.iterdir()) == []


def serves(redis_server: RedisServer, queue: str) -> bool:
    with RQBackend(redis_url=redis_server.url, queue=queue, timeout_ms=5000) as backend:
        return backend.submit("repair", {"text": "[1,"})["status"] == "ok"


# -- item 1: nothing read from Redis is resolved to a module or function ----------------------

@pytest.mark.parametrize("callback", ["on_failure", "on_success", "on_stopped"])
def test_clean_up_never_imports_a_callback_planted_in_the_wip_registry(
    worker, conn, redis_server, queue_name, markers, callback
) -> None:
    """RQ's registry clean-up imported the failure callback of an 'abandoned' job."""
    wip = f"rq:wip:{queue_name}"
    plant_abandoned_job(conn, queue_name, **{callback: Callback(MARKER)})
    group = worker(cli=True)  # started as `toolcodec worker`
    # The worker's clean-up runs at start; it has dealt with the entry once it is gone.
    assert wait_for(lambda: conn.zcard(wip) == 0), group.log()
    assert serves(redis_server, queue_name)
    assert_nothing_ran(markers)
    assert group.proc is not None and group.proc.poll() is None


def test_clean_up_sends_no_webhook_planted_in_the_wip_registry(
    worker, conn, redis_server, queue_name
) -> None:
    """RQ's clean-up would make the worker request any URL a Redis writer names."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(8)
    listener.settimeout(0.05)
    url = f"http://127.0.0.1:{listener.getsockname()[1]}/hook"
    requests: list[bytes] = []
    stop = threading.Event()

    def accept() -> None:
        while not stop.is_set():
            try:
                client, _ = listener.accept()
            except TimeoutError:
                continue
            with client:
                requests.append(client.recv(4096))
                client.sendall(b"HTTP/1.1 204 No Content\r\nContent-Length: 0\r\n\r\n")

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    try:
        wip = f"rq:wip:{queue_name}"
        plant_abandoned_job(conn, queue_name, webhooks=[Webhook(url, "failed", method="POST"),
                                                        Webhook(url, "finished")])
        group = worker()
        assert wait_for(lambda: conn.zcard(wip) == 0), group.log()
        # A toolcodec job runs after the clean-up on the same lane: had the clean-up sent the
        # webhook, the request would have reached the listener before this answer.
        assert serves(redis_server, queue_name)
        assert requests == []
    finally:
        stop.set()
        thread.join()
        listener.close()


def test_planted_maintenance_registries_are_not_acted_on(
    worker, conn, redis_server, queue_name, markers
) -> None:
    """Ready-registry recovery and dependents would enqueue jobs a Redis writer chose."""
    other = f"{queue_name}-other"
    foreign = Job.create(MARKER, connection=conn, serializer=proto.SERIALIZER, origin=other,
                         on_failure=Callback(MARKER))
    foreign.set_status(JobStatus.DEFERRED, pipeline=None)
    foreign.save()
    conn.zadd(f"rq:ready:{queue_name}", {foreign.id: time.time() - 3600})
    # The abandoned job names the foreign one as its dependent.
    parent = plant_abandoned_job(conn, queue_name)
    conn.sadd(Job.dependents_key_for(parent), foreign.id)
    group = worker()
    assert wait_for(lambda: conn.zcard(f"rq:wip:{queue_name}") == 0), group.log()
    assert serves(redis_server, queue_name)
    assert conn.llen(proto.queue_key(other)) == 0
    assert not conn.sismember("rq:queues", proto.queue_key(other))
    assert_nothing_ran(markers)


def test_a_toolcodec_job_carrying_callbacks_runs_without_them(
    worker, conn, redis_server, queue_name, markers
) -> None:
    """Our own function, enqueued with every callback RQ knows: the callbacks never run."""
    from rq import Queue

    worker()
    reply_to = proto.reply_key(uuid.uuid4().hex)
    task = {"id": "cb", "op": "repair", "payload": {"text": "[1,"},
            "deadline": time.time() + 60}
    job = Queue(queue_name, connection=conn, serializer=proto.SERIALIZER).enqueue(
        proto.RUN_JOB, task, meta={proto.META_REPLY_TO: reply_to},
        on_success=Callback(MARKER), on_failure=Callback(MARKER),
        on_stopped=Callback(MARKER))
    reply = conn.blpop([reply_to], timeout=20)
    assert reply is not None
    decoded = proto.decode_reply(reply[1])
    assert decoded is not None and decoded[0] == job.id and decoded[1]["status"] == "ok"
    assert_nothing_ran(markers)


# -- item 2: commands published on Redis ------------------------------------------------------

def worker_names(conn: redis.Redis, queue: str) -> list[str]:
    prefix = "rq:worker:"
    return sorted(k.decode()[len(prefix):] for k in conn.smembers(proto.workers_key(queue)))


def test_a_redis_writer_cannot_shut_workers_down(worker, conn, redis_server, queue_name) -> None:
    """By default no lane listens to RQ's command channel: shutdown reaches nobody."""
    group = worker(concurrency=2)
    names = worker_names(conn, queue_name)
    assert len(names) == 2
    for name in names:
        # PUBLISH answers how many subscribers received the message.
        assert conn.publish(f"rq:pubsub:{name}", '{"command": "shutdown"}') == 0
        send_shutdown_command(conn, name)
        send_kill_horse_command(conn, name)
        send_command(conn, name, "stop-job", job_id="x")
    assert serves(redis_server, queue_name)
    assert group.proc is not None and group.proc.poll() is None
    assert worker_names(conn, queue_name) == names


def test_the_shutdown_command_works_when_the_operator_enables_it(
    worker, conn, queue_name
) -> None:
    group = worker("--allow-redis-shutdown", concurrency=2, cli=True)
    name = worker_names(conn, queue_name)[0]
    # Only the shutdown command is obeyed; the lane listens as soon as it registered, but
    # registration comes first, so wait for its subscription.
    assert wait_for(lambda: conn.pubsub_numsub(f"rq:pubsub:{name}")[0][1] == 1)
    send_kill_horse_command(conn, name)
    send_command(conn, name, "stop-job", job_id="x")
    send_shutdown_command(conn, name)
    assert group.proc is not None
    assert group.proc.wait(timeout=30) == 0
    assert "shutdown command" in group.log()


def test_jobs_the_worker_loads_resolve_no_name_even_in_rqs_own_clean_up(
    conn, queue_name, markers, monkeypatch
) -> None:
    """Defence in depth: should any RQ code path still load a planted job with the worker's
    job class, it finds no callback to import, no webhook to request, no function to call."""
    import sys

    from rq.registry import StartedJobRegistry
    from toolcodec.worker.rq_worker import ForeignName, ToolcodecJob

    monkeypatch.setenv(MARKER_DIR_ENV, str(markers))
    monkeypatch.delitem(sys.modules, "tests.rq_import_marker", raising=False)
    job_id = plant_abandoned_job(
        conn, queue_name, on_success=Callback(MARKER), on_failure=Callback(MARKER),
        on_stopped=Callback(MARKER), webhooks=[Webhook("http://127.0.0.1:9/x", "failed")])
    job = ToolcodecJob.fetch(job_id, connection=conn, serializer=proto.SERIALIZER)
    assert (job.success_callback, job.failure_callback, job.stopped_callback) == (None,) * 3
    assert job.webhooks == []
    with pytest.raises(ForeignName):
        job.func  # noqa: B018 - the property is what resolves the name
    StartedJobRegistry(queue_name, connection=conn, job_class=ToolcodecJob,
                       serializer=proto.SERIALIZER).cleanup()
    assert conn.zcard(f"rq:wip:{queue_name}") == 0  # RQ's clean-up did process the entry
    assert "tests.rq_import_marker" not in sys.modules
    assert_nothing_ran(markers)


def test_registry_keys_of_another_type_do_not_stop_the_lanes(
    worker, conn, redis_server, queue_name
) -> None:
    """A Redis writer turns the registries into strings: maintenance fails (WRONGTYPE) at
    every lane start; it used to end the lane's loop before its first dequeue, every time."""
    for key in proto.registry_keys(queue_name):
        conn.set(key, "not a sorted set")
    group = worker(concurrency=2)
    assert serves(redis_server, queue_name), group.log()
    assert "registry maintenance of queue" in group.log()
    assert "quitting" not in group.log()
