"""The caller's side of the Redis/RQ backend: enqueue an RQ job, wait for its reply.

One round trip enqueues: a Lua script checks the queue length (back-pressure), writes the
job hash that :meth:`rq.job.Job.to_dict` produced, sets its TTL and pushes the id on RQ's
queue list. Replies come back on a per-process list that one listener thread BLPOPs; it
hands each reply to the waiting thread through a :class:`threading.Event`, so callers never
poll and the deadline is kept on the caller's own clock (Redis timeouts overshoot).
See ``docs/rq.md`` for the measurements behind these choices.
"""

from __future__ import annotations

import itertools
import math
import queue
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import redis
from redis.backoff import NoBackoff
from redis.retry import Retry
from rq.job import Job, JobStatus
from rq.utils import now
from toolcodec.errors import BACKEND_UNAVAILABLE, BAD_REQUEST, REJECTED, TIMEOUT
from toolcodec.pool.door import check_budget
from toolcodec.worker import rq_protocol as proto
from toolcodec.worker.envelope import complete
from toolcodec.worker.envelope import error_envelope as _error
from toolcodec.worker.logs import note_job_id

# KEYS: queue list, job hash, RQ's set of queues.
# ARGV: max queue length, job TTL (ms), job id, queue key, then the hash's field/value pairs.
_ENQUEUE_LUA = """
local depth = redis.call('LLEN', KEYS[1])
if depth >= tonumber(ARGV[1]) then return {0, depth} end
redis.call('HSET', KEYS[2], unpack(ARGV, 5))
redis.call('PEXPIRE', KEYS[2], ARGV[2])
redis.call('SADD', KEYS[3], ARGV[4])
return {1, redis.call('RPUSH', KEYS[1], ARGV[3])}
"""

# KEYS: queue list, then the job hashes of ARGV's ids. A hash is deleted only when its id was
# still queued: a lane that already took the job reads the hash after its BLMOVE.
_WITHDRAW_LUA = """
local removed = 0
for i, id in ipairs(ARGV) do
  if redis.call('LREM', KEYS[1], 1, id) > 0 then
    redis.call('DEL', KEYS[i + 1])
    removed = removed + 1
  end
end
return removed
"""

_budget = threading.local()  # .deadline: the calling thread's end of budget (time.monotonic())


class _BudgetBound:
    """Mixed into the caller's connection class: a connection made on a caller's path
    connects and shakes hands within what is left of that caller's budget, with no retry.

    Otherwise a Redis that accepts connections but does not answer (stopped, swapping) holds
    the caller for the client's socket timeout, once per retry: 500 ms on a 50 ms budget.
    """

    socket_connect_timeout: float | None
    socket_timeout: float | None
    _sock: Any

    def connect(self) -> None:
        deadline = getattr(_budget, "deadline", None)
        if deadline is None or self._sock is not None:
            super().connect()  # type: ignore[misc]
            return
        left = deadline - time.monotonic()
        if left <= 0:
            raise redis.exceptions.TimeoutError("the budget ran out before connecting")
        saved = self.socket_connect_timeout, self.socket_timeout
        self.socket_connect_timeout = min(saved[0] or left, left)
        self.socket_timeout = min(saved[1] or left, left)
        try:
            self.connect_check_health(check_health=False, retry_socket_connect=False)
        finally:
            self.socket_connect_timeout, self.socket_timeout = saved
            if self._sock is not None:
                self._sock.settimeout(saved[1])


def _budget_bound_client(url: str, connect_timeout: float) -> redis.Redis:
    """A client whose connections, made on a caller's thread, keep to its budget."""
    pool = redis.ConnectionPool.from_url(
        url, socket_connect_timeout=connect_timeout, socket_timeout=connect_timeout,
        retry=Retry(NoBackoff(), 0), driver_info=None)
    base = pool.connection_class
    pool.connection_class = type(f"BudgetBound{base.__name__}", (_BudgetBound, base), {})
    return redis.Redis(connection_pool=pool)


# Any Redis error — unreachable, timed out, or a server that answers another protocol
# (an HTTP server or a proxy on that port: InvalidResponse) — means the backend is unavailable.
_REDIS_ERRORS = (redis.exceptions.RedisError,)
_STOP = b"\x00stop"


@dataclass(slots=True)
class _Waiter:
    """One thread waiting for one job's reply."""

    deadline: float  # time.monotonic()
    op: str
    event: threading.Event = field(default_factory=threading.Event)
    envelope: dict[str, Any] | None = None


class RQBackend:
    """Submit codec jobs to RQ workers (``toolcodec worker``) through Redis.

    :param redis_url: any URL :meth:`redis.Redis.from_url` takes, passwords and ``rediss://``
        (TLS) included.
    :param queue: RQ queue name the workers listen on.
    :param timeout_ms: default budget per call; it covers enqueue, queueing and the reply.
    :param metrics: a :class:`toolcodec.worker.metrics.Metrics`; outcomes are counted as the caller
        saw them, with ``backend="rq"``.
    :param max_queue: jobs waiting in Redis beyond which ``submit`` answers ``rejected``.
    :param connect_timeout: seconds before an unreachable Redis is reported.
    """

    backend = "rq"  # the metrics' ``backend`` label and the envelopes' "backend"

    def __init__(
        self,
        *,
        redis_url: str,
        queue: str = "toolcodec",
        timeout_ms: float = 50,
        metrics: Any = None,
        max_queue: int = 1000,
        connect_timeout: float = 0.5,
    ) -> None:
        self.queue = queue
        self.timeout_ms = float(timeout_ms)
        self.metrics = metrics
        self.max_queue = int(max_queue)
        self.client_id = uuid.uuid4().hex
        self._reply_key = proto.reply_key(self.client_id)
        self._keys = (proto.queue_key(queue), "rq:queues")
        # No client-info handshake on (re)connect: after a timeout the next call reconnects,
        # and a reply it waited for there would not be bounded by the caller's deadline.
        self._redis = _budget_bound_client(redis_url, connect_timeout)
        self._enqueue_sha = self._redis.register_script(_ENQUEUE_LUA).sha
        self._waiters: dict[str, _Waiter] = {}
        self._lock = threading.Lock()
        self._closed = False
        self._ids = itertools.count()
        self._listener = _ReplyListener(redis_url, connect_timeout, self._reply_key,
                                        self._deliver, self._fail_all)
        self._listener.start()
        self._withdrawer = _Withdrawer(self._redis, self._keys[0], self.client_id)
        self._withdrawer.start()
        if metrics is not None:  # read at scrape time: never a stale number
            metrics.queue_depth.labels(backend=self.backend).set_function(self._depth_now)

    def _depth_now(self) -> float:
        if self._closed:
            return 0.0
        try:
            return float(self._redis.llen(self._keys[0]))
        except _REDIS_ERRORS:
            return math.nan  # unknown, and shown as such, rather than an old value

    # -- public API ------------------------------------------------------------------------

    def submit(self, op: str, payload: dict, *, timeout_ms: float | None = None,
               arrived: float | None = None) -> dict[str, Any]:
        """Run ``op`` on ``payload`` in a worker and return the job envelope (README).

        Never raises on a bad payload or an unreachable Redis: the envelope says what
        happened. The caller is blocked at most ``timeout_ms`` plus scheduling noise,
        counted from ``arrived`` (a ``time.monotonic()``) when the request waited before.
        """
        start = time.monotonic() if arrived is None else min(arrived, time.monotonic())
        budget, why = check_budget(timeout_ms, self.timeout_ms)
        env = (_error(op, "error", BAD_REQUEST, why, field="timeout_ms") if budget is None
               else self._submit(op, payload, start, budget))
        env = complete(env, op, self.backend, start)
        if self.metrics is not None:
            self.metrics.observe(op, self.backend, env)
        return env

    def queue_depth(self) -> int:
        """Jobs waiting in Redis for a worker (raises ``redis`` errors if unreachable)."""
        return int(self._redis.llen(self._keys[0]))

    def close(self, timeout: float = 5.0) -> None:
        """Refuse new calls, let calls in flight finish (each ends by its deadline), stop."""
        self._closed = True
        end = time.monotonic() + timeout
        while self._waiters and time.monotonic() < end:
            time.sleep(0.005)
        self._listener.stop()
        self._withdrawer.stop()
        self._redis.close()

    def __enter__(self) -> RQBackend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- submit steps ----------------------------------------------------------------------

    def _submit(self, op: str, payload: dict, start: float, budget: float) -> dict[str, Any]:
        if self._closed:
            return _error(op, "rejected", REJECTED, "the RQ backend is closed; create a new Pool")
        job_id = f"tc-{self.client_id[:12]}-{next(self._ids)}"
        note_job_id(job_id)  # the caller's log lines name it, as the worker's do
        try:
            fields = self._job_fields(job_id, op, payload, budget)
        except (TypeError, ValueError) as exc:
            return _error(op, "error", BAD_REQUEST, f"payload is not JSON data: {exc}")
        waiter = _Waiter(deadline=start + budget, op=op)
        with self._lock:
            self._waiters[job_id] = waiter
        try:
            accepted, depth = self._run_enqueue(
                [self._keys[0], proto.job_key(job_id), self._keys[1]],
                [self.max_queue, _job_ttl_ms(budget), job_id, self._keys[0], *fields],
                waiter.deadline,
            )
        except _REDIS_ERRORS as exc:
            self._forget(job_id)
            self._withdrawer.withdraw(job_id)  # a slow Redis may have queued it after all
            return _unavailable(op, f"could not enqueue on Redis: {exc}")
        if not accepted:
            self._forget(job_id)
            return _error(
                op, "rejected", REJECTED,
                f"queue {self.queue!r} holds {depth} jobs (limit {self.max_queue}); try later",
                queue_depth=int(depth),
            )
        return self._wait(job_id, op, waiter)

    def _run_enqueue(self, keys: list[str], args: list[Any], deadline: float) -> list[int]:
        """Run the enqueue script, waiting for Redis no later than ``deadline``.

        One command on one pooled connection, read with the caller's remaining budget as its
        timeout (the client's socket timeout would hold a caller past it when Redis hangs),
        and without the client's retries, which would do the same.
        """
        pool = self._redis.connection_pool
        _budget.deadline = deadline
        try:
            conn = pool.get_connection()  # a new connection connects within the budget
        finally:
            _budget.deadline = None
        try:
            try:
                return self._command(conn, deadline, "EVALSHA", self._enqueue_sha, *keys, *args,
                                     nkeys=len(keys))
            except redis.exceptions.NoScriptError:  # a restarted Redis forgot the script
                return self._command(conn, deadline, "EVAL", _ENQUEUE_LUA, *keys, *args,
                                     nkeys=len(keys))
        finally:
            pool.release(conn)

    @staticmethod
    def _command(conn: Any, deadline: float, name: str, script: str, *rest: Any,
                 nkeys: int) -> Any:
        remaining = deadline - time.monotonic()
        if remaining > 0 and conn._sock is not None:  # a full send buffer waits this long
            conn._sock.settimeout(remaining)
        try:
            conn.send_command(name, script, nkeys, *rest)
        finally:
            if conn._sock is not None:
                conn._sock.settimeout(conn.socket_timeout)
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            conn.disconnect()  # the reply would arrive on the next caller's read
            raise redis.exceptions.TimeoutError("the budget ran out while enqueueing")
        return conn.read_response(timeout=remaining)

    def _job_fields(self, job_id: str, op: str, payload: dict, budget: float) -> list[Any]:
        job = {"id": job_id, "op": op, "payload": payload, "deadline": time.time() + budget}
        rq_job = Job.create(
            proto.RUN_JOB, args=(job,), id=job_id, connection=self._redis,
            serializer=proto.SERIALIZER, origin=self.queue, description=f"toolcodec {op}",
            # RQ's own limits are whole seconds; the worker enforces the real budget.
            timeout=max(1, math.ceil(budget)), result_ttl=0, ttl=_job_ttl_ms(budget) // 1000,
            meta={proto.META_REPLY_TO: self._reply_key},
        )
        rq_job._status = JobStatus.QUEUED
        rq_job.enqueued_at = now()
        fields = {**rq_job.to_dict(), proto.DEADLINE_FIELD: repr(job["deadline"])}
        return [x for kv in fields.items() for x in kv]

    def _wait(self, job_id: str, op: str, waiter: _Waiter) -> dict[str, Any]:
        remaining = waiter.deadline - time.monotonic()
        if remaining > 0 and waiter.event.wait(remaining) and waiter.envelope is not None:
            return dict(waiter.envelope)
        self._forget(job_id)
        if waiter.envelope is not None:  # the reply raced the deadline and won
            return dict(waiter.envelope)
        self._withdrawer.withdraw(job_id)
        return _error(op, "timeout", TIMEOUT, f"no reply within the budget (job {job_id})",
                      job_id=job_id)

    def _forget(self, job_id: str) -> None:
        with self._lock:
            self._waiters.pop(job_id, None)

    # -- called by the listener ------------------------------------------------------------

    def _deliver(self, job_id: str, envelope: dict[str, Any]) -> None:
        with self._lock:
            waiter = self._waiters.pop(job_id, None)
        if waiter is not None:  # else the caller already gave up at its deadline
            waiter.envelope = envelope
            waiter.event.set()

    def _fail_all(self, message: str) -> None:
        with self._lock:
            waiters, self._waiters = self._waiters, {}
        for waiter in waiters.values():
            waiter.envelope = _unavailable(waiter.op, message)
            waiter.event.set()


class _ReplyListener(threading.Thread):
    """BLPOPs one reply list and hands each reply to ``deliver(job_id, envelope)``.

    On a lost connection it calls ``fail_all(message)`` at once (the jobs in flight are not
    coming back from a restarted Redis) and reconnects with a short backoff.
    """

    BLOCK_SECONDS = 1

    def __init__(self, redis_url: str, connect_timeout: float, reply_key: str,
                 deliver: Callable[[str, dict], None], fail_all: Callable[[str], None]) -> None:
        super().__init__(name=f"toolcodec-rq-replies-{reply_key[-32:-24]}", daemon=True)
        self._key = reply_key
        self._deliver = deliver
        self._fail_all = fail_all
        self._stop_event = threading.Event()
        self._redis = redis.Redis.from_url(
            redis_url, socket_connect_timeout=connect_timeout,
            socket_timeout=self.BLOCK_SECONDS + connect_timeout + 1,
        )

    def stop(self) -> None:
        self._stop_event.set()
        try:  # wakes the BLPOP now rather than at its timeout
            with redis.Redis(connection_pool=self._redis.connection_pool) as wake:
                wake.lpush(self._key, _STOP)
        except _REDIS_ERRORS:
            pass
        self.join(timeout=self.BLOCK_SECONDS + 1)
        self._redis.close()

    def run(self) -> None:
        backoff = 0.01
        while not self._stop_event.is_set():
            try:
                popped = self._redis.blpop([self._key], timeout=self.BLOCK_SECONDS)
            except (*_REDIS_ERRORS, OSError, ValueError) as exc:  # the thread must survive all
                self._fail_all(f"lost the connection to Redis while waiting: {exc}")
                self._stop_event.wait(backoff)
                backoff = min(backoff * 2, 0.5)
                continue
            backoff = 0.01
            if popped is None or popped[1] == _STOP:
                continue
            reply = proto.decode_reply(popped[1])
            if reply is not None:
                self._deliver(*reply)


class _Withdrawer(threading.Thread):
    """Takes timed-out jobs back out of the queue, off the callers' threads.

    A job still queued at its deadline would otherwise cost a lane a dequeue and a reply for
    nothing; behind a stuck lane that is how timeouts spread to the jobs queued after it.
    A job a lane already took is left alone: its late reply is dropped by the listener.
    """

    def __init__(self, client: redis.Redis, queue_key: str, client_id: str) -> None:
        super().__init__(name=f"toolcodec-rq-withdraw-{client_id[:8]}", daemon=True)
        self._script = client.register_script(_WITHDRAW_LUA)
        self._queue_key = queue_key
        self._ids: queue.SimpleQueue[str | None] = queue.SimpleQueue()

    def withdraw(self, job_id: str) -> None:
        self._ids.put(job_id)

    def stop(self) -> None:
        self._ids.put(None)
        self.join(timeout=2)

    def run(self) -> None:
        while True:
            batch = [self._ids.get()]
            while len(batch) < 100 and not self._ids.empty():
                batch.append(self._ids.get())
            ids = [i for i in batch if i is not None]
            if ids:
                self._remove(ids)
            if None in batch:
                return

    def _remove(self, ids: list[str]) -> None:
        try:
            self._script(keys=[self._queue_key, *map(proto.job_key, ids)], args=ids)
        except _REDIS_ERRORS:
            pass  # the job hashes expire; a lane reports a late job as a timeout


def _job_ttl_ms(budget: float) -> int:
    return int(budget * 1000) + proto.JOB_GRACE_MS


def _unavailable(op: str, message: str) -> dict[str, Any]:
    return _error(op, "error", BACKEND_UNAVAILABLE, f"Redis is unreachable: {message}")
