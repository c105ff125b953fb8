"""The caller's side of the Redis/RQ backend: enqueue an RQ job, wait for its reply.

A caller never talks to Redis itself. Its job (a :class:`~toolcodec.pool.rq_calls.Call`)
goes to the enqueue thread (:mod:`toolcodec.pool.rq_sender`), which pipelines the jobs that
gathered into one write: a Lua script per job checks the queue (full, or too deep for the
job's budget: ``rejected``), writes the job hash that :meth:`rq.job.Job.to_dict` produced,
sets its TTL and pushes the id on RQ's queue list. Replies come back on a per-process list
that one listener thread pops in batches; it wakes the waiting thread (an
:class:`threading.Event`) or event loop (a future), so callers never poll, no thread is
spent per job, and every deadline is kept on the caller's own clock.

What a caller whose budget ran out answers: ``timeout`` once its job was queued;
``rejected`` (reason ``shed``) while Redis kept answering, i.e. overload;
``backend_unavailable`` only when Redis answered nothing since the job was sent (or, for a
job not yet sent, since the caller arrived while Redis was being waited on). See
``docs/rq.md`` and ``docs/pool.md``.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import math
import queue
import threading
import time
import uuid
from collections.abc import Callable, Iterable
from typing import Any

import redis
from rq.job import Job, JobStatus
from rq.utils import now, utcformat
from toolcodec.pool.door import check_budget
from toolcodec.pool.rq_calls import (
    ACCEPTED,
    CANCELLED,
    QUEUED,
    SENT,
    Call,
    LaneTimes,
    RedisHealth,
)
from toolcodec.pool.rq_sender import Outcome, Sender, enqueue_command
from toolcodec.results.errors import BACKEND_UNAVAILABLE, BAD_REQUEST, REJECTED, TIMEOUT
from toolcodec.worker import rq_protocol as proto
from toolcodec.worker.deadlines import CLOSED, QUEUE_FULL, shed_envelope
from toolcodec.worker.envelope import complete
from toolcodec.worker.envelope import error_envelope as _error
from toolcodec.worker.logs import note_job_id

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

log = logging.getLogger("toolcodec.pool")

# Any Redis error — unreachable, timed out, or a server that answers another protocol
# (an HTTP server or a proxy on that port: InvalidResponse) — means the backend is unavailable.
_REDIS_ERRORS = (redis.exceptions.RedisError,)
_STOP = b"\x00stop"


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
        self._keys = (proto.queue_key(queue), "rq:queues", proto.workers_key(queue))
        # No retries and no client-info handshake: a command that fails is reported, and a
        # stalled Redis holds the enqueue thread for at most connect_timeout per attempt.
        self._redis = redis.Redis.from_url(
            redis_url, socket_connect_timeout=connect_timeout, socket_timeout=connect_timeout,
            retry=redis.retry.Retry(redis.backoff.NoBackoff(), 0), driver_info=None)
        self._waiters: dict[str, Call] = {}
        self._lock = threading.Lock()
        self._closed = False
        self._ids = itertools.count()
        self._templates: dict[tuple[str, float], list[Any]] = {}  # see _job_fields
        self.times = LaneTimes()
        self.health = RedisHealth()
        self._sender = Sender(self._redis.connection_pool, self._lock, self._settle,
                              self.times, self.health,
                              name=f"toolcodec-rq-enqueue-{self.client_id[:8]}")
        self._sender.start()
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
        call = self._prepare(op, payload, timeout_ms, start, None)
        if isinstance(call, Call):
            self._sender.put(call)
            call.wait()
            env = self._conclude(call)
        else:
            env = call
        return self._complete(env, op, start)

    async def asubmit(self, op: str, payload: dict, *, timeout_ms: float | None = None,
                      arrived: float | None = None) -> dict[str, Any]:
        """Like :meth:`submit`, awaitable: no thread is taken while the job is out (the
        enqueue thread sends it, the listener wakes this loop with its reply)."""
        start = time.monotonic() if arrived is None else min(arrived, time.monotonic())
        call = self._prepare(op, payload, timeout_ms, start, asyncio.get_running_loop())
        if isinstance(call, Call):
            self._sender.put(call)
            try:
                await call.await_()
            finally:  # also when the awaiting task is cancelled: the job is taken back
                env = self._conclude(call)
        else:
            env = call
        return self._complete(env, op, start)

    def map(self, op: str, payloads: Iterable[dict], *,
            timeout_ms: float | None = None) -> list[dict[str, Any]]:
        """Run one job per payload at once, all sent together; envelopes in order."""
        start = time.monotonic()
        prepared = [self._prepare(op, p, timeout_ms, start, None) for p in payloads]
        self._sender.put_many([c for c in prepared if isinstance(c, Call)])
        out = []
        for call in prepared:
            if isinstance(call, Call):
                call.wait()
                call = self._conclude(call)
            out.append(self._complete(call, op, start))
        return out

    def queue_depth(self) -> int:
        """Jobs waiting in Redis for a worker (raises ``redis`` errors if unreachable)."""
        return int(self._redis.llen(self._keys[0]))

    def close(self, timeout: float = 5.0) -> None:
        """Refuse new calls, let calls in flight finish (each ends by its deadline), stop."""
        self._closed = True
        end = time.monotonic() + timeout
        while self._waiters and time.monotonic() < end:
            time.sleep(0.005)
        self._sender.stop()
        self._listener.stop()
        self._withdrawer.stop()
        self._redis.close()

    def __enter__(self) -> RQBackend:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- a call's steps --------------------------------------------------------------------

    def _complete(self, env: dict[str, Any], op: str, start: float) -> dict[str, Any]:
        env = complete(env, op, self.backend, start)
        if self.metrics is not None:
            self.metrics.observe(op, self.backend, env)
        return env

    def _prepare(self, op: str, payload: dict, timeout_ms: float | None, start: float,
                 loop: asyncio.AbstractEventLoop | None) -> Call | dict[str, Any]:
        """A call ready for the enqueue thread, or the envelope that answers it at once."""
        budget, why = check_budget(timeout_ms, self.timeout_ms)
        if budget is None:
            return _error(op, "error", BAD_REQUEST, why, field="timeout_ms")
        if self._closed:
            return _error(op, "rejected", REJECTED,
                          "the RQ backend is closed; create a new Pool", reason=CLOSED)
        deadline = start + budget
        left = deadline - time.monotonic()
        reserve = self.times.reserve(budget)
        if left <= reserve:  # e.g. the request's body arrived after most of its budget
            return shed_envelope(op, budget, budget - left, reserve)
        job_id = f"tc-{self.client_id[:12]}-{next(self._ids)}"
        note_job_id(job_id)  # the caller's log lines name it, as the worker's do
        try:
            fields = self._job_fields(job_id, op, payload, budget, left)
        except (TypeError, ValueError) as exc:
            return _error(op, "error", BAD_REQUEST, f"payload is not JSON data: {exc}")
        try:
            head, tail = enqueue_command(
                (self._keys[0], proto.job_key(job_id), self._keys[1], self._keys[2]),
                [self.max_queue, _job_ttl_ms(budget), job_id, self._keys[0]], fields)
        except TypeError as exc:
            return _error(op, "error", BAD_REQUEST, f"payload is not JSON data: {exc}")
        call = Call(job_id, op, start, deadline, head, tail, loop)
        with self._lock:
            self._waiters[job_id] = call
        return call

    def _job_fields(self, job_id: str, op: str, payload: dict, budget: float,
                    left: float) -> list[Any]:
        """The RQ job hash's fields, as :meth:`rq.job.Job.to_dict` writes them.

        ``Job.create`` and ``to_dict`` cost about 60 µs a job; their output depends on the
        job only through the fields replaced here, so each (op, budget) is made once by RQ
        and reused. ``data`` is stored uncompressed, which RQ reads as it is.
        """
        deadline = time.time() + left
        job = {"id": job_id, "op": op, "payload": payload, "deadline": deadline}
        data = proto.SERIALIZER.dumps((proto.RUN_JOB, None, (job,), {}))
        stamp = utcformat(now())
        template = self._templates.get((op, budget))
        if template is None:
            template = self._template(op, budget)
        return [*template, "created_at", stamp, "enqueued_at", stamp, "data", data,
                proto.DEADLINE_FIELD, repr(deadline)]

    def _template(self, op: str, budget: float) -> list[Any]:
        rq_job = Job.create(
            proto.RUN_JOB, args=({},), connection=self._redis,
            serializer=proto.SERIALIZER, origin=self.queue, description=f"toolcodec {op}",
            # RQ's own limits are whole seconds; the worker enforces the real budget.
            timeout=max(1, math.ceil(budget)), result_ttl=0, ttl=_job_ttl_ms(budget) // 1000,
            meta={proto.META_REPLY_TO: self._reply_key},
        )
        rq_job._status = JobStatus.QUEUED
        rq_job.enqueued_at = now()
        replaced = ("created_at", "enqueued_at", "data", proto.DEADLINE_FIELD)
        fields = [x for kv in rq_job.to_dict().items() if kv[0] not in replaced for x in kv]
        if len(self._templates) >= 64:  # budgets vary per request: keep the cache small
            self._templates.clear()
        self._templates[(op, budget)] = fields
        return fields

    def _conclude(self, call: Call) -> dict[str, Any]:
        """What the caller answers once woken or at its deadline (see the module)."""
        with self._lock:
            call.over = True
            self._waiters.pop(call.job_id, None)
            env, state = call.envelope, call.state
            if env is None and state == QUEUED:
                call.state = CANCELLED  # the enqueue thread will not send it
        if env is not None:
            return dict(env)
        budget = call.deadline - call.start
        if state == ACCEPTED:
            self._withdrawer.withdraw(call.job_id)
            return _error(call.op, "timeout", TIMEOUT,
                          f"no reply within the budget (job {call.job_id})", job_id=call.job_id)
        if state == SENT:
            self._withdrawer.withdraw(call.job_id)  # Redis may have queued it after all
        if self.health.silent_since(call.sent_at or call.start):
            return _unavailable(call.op, f"no answer from Redis within the budget of "
                                         f"{budget * 1000:g} ms")
        return shed_envelope(call.op, budget, time.monotonic() - call.start,
                             self.times.reserve(budget), stage="enqueue")

    # -- called by the enqueue thread and the listener -------------------------------------

    def _settle(self, call: Call, outcome: Outcome) -> None:
        kind, value = outcome
        if kind == "queued":
            with self._lock:
                if call.state == SENT:
                    call.state = ACCEPTED
                    call.queue_depth = value
            return
        if kind == "unavailable":
            self._withdrawer.withdraw(call.job_id)
            env = _unavailable(call.op, value)
        elif kind == "full":
            env = _error(call.op, "rejected", REJECTED,
                         f"queue {self.queue!r} holds {value} jobs (limit {self.max_queue}); "
                         "try later", queue_depth=int(value), reason=QUEUE_FULL)
        else:
            budget = call.deadline - call.start
            waited = time.monotonic() - call.start
            reserve = self.times.reserve(budget)
            details = {} if kind == "late" else {
                "queue_depth": value[0], "lanes": value[1],
                "expected_wait_ms": round(value[0] * self.times.mean / value[1] * 1000, 3)}
            env = shed_envelope(call.op, budget, waited, reserve, **details)
        self._finish(call, env)

    def _finish(self, call: Call, env: dict[str, Any]) -> None:
        with self._lock:
            if call.over or call.envelope is not None:
                return
            call.envelope = env
            self._waiters.pop(call.job_id, None)
        call.wake()

    def _deliver(self, job_id: str, envelope: dict[str, Any], lane_s: float | None) -> None:
        if lane_s is not None and envelope.get("status") in ("ok", "error"):
            # A killed job's cycle is its budget: one runaway would inflate the estimate
            # and shed healthy jobs for the next few dozen.
            self.times.observe(lane_s)
        with self._lock:
            call = self._waiters.pop(job_id, None)
            if call is None or call.over or call.envelope is not None:
                return  # the caller already answered at its deadline
            call.envelope = envelope
        call.wake()

    def _fail_all(self, message: str) -> None:
        with self._lock:
            calls = list(self._waiters.values())
        for call in calls:
            self._finish(call, _unavailable(call.op, message))


class _ReplyListener(threading.Thread):
    """Pops one reply list and hands each reply to ``deliver(job_id, envelope, lane_s)``:
    up to :attr:`DRAIN` at a time, in one blocking round trip.

    On a lost connection it calls ``fail_all(message)`` at once (the jobs in flight are not
    coming back from a restarted Redis) and reconnects with a short backoff.
    """

    BLOCK_SECONDS = 1
    DRAIN = 256

    def __init__(self, redis_url: str, connect_timeout: float, reply_key: str,
                 deliver: Callable[[str, dict, float | None], None],
                 fail_all: Callable[[str], None]) -> None:
        super().__init__(name=f"toolcodec-rq-replies-{reply_key[-32:-24]}", daemon=True)
        self._key = reply_key
        self._deliver = deliver
        self._fail_all = fail_all
        self._stop_event = threading.Event()
        self._blmpop = self._lpop = True  # until the server refuses them
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

    def _pop(self) -> list[bytes]:
        """The replies waiting, up to DRAIN, after at most BLOCK_SECONDS; one round trip
        (BLMPOP, Redis 7). A server without it, or an ACL that does not allow it (the
        caller's user of older deployments), gets BLPOP and, if allowed, an LPOP of what
        gathered."""
        if self._blmpop:
            try:
                popped = self._redis.blmpop(self.BLOCK_SECONDS, 1, self._key,
                                            direction="LEFT", count=self.DRAIN)
                return [] if popped is None else popped[1]
            except redis.exceptions.ResponseError as exc:  # unknown command, or NOPERM
                log.warning("toolcodec RQ caller: BLMPOP refused (%s); reading replies with "
                            "BLPOP instead", exc)
                self._blmpop = False
        popped = self._redis.blpop([self._key], timeout=self.BLOCK_SECONDS)
        if popped is None:
            return []
        if not self._lpop:
            return [popped[1]]
        try:
            return [popped[1], *(self._redis.lpop(self._key, self.DRAIN - 1) or [])]
        except redis.exceptions.ResponseError as exc:
            log.warning("toolcodec RQ caller: LPOP refused (%s); one reply per round trip",
                        exc)
            self._lpop = False
            return [popped[1]]

    def run(self) -> None:
        backoff = 0.01
        while not self._stop_event.is_set():
            try:
                raws = self._pop()
            except (*_REDIS_ERRORS, OSError, ValueError) as exc:  # the thread must survive all
                self._fail_all(f"lost the connection to Redis while waiting: {exc}")
                self._stop_event.wait(backoff)
                backoff = min(backoff * 2, 0.5)
                continue
            backoff = 0.01
            for raw in raws:
                reply = None if raw == _STOP else proto.decode_reply(raw)
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
