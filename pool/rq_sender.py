"""The enqueue thread of the Redis backend: every caller's job goes to Redis through it.

Callers (threads and event loops alike) append their :class:`~toolcodec.pool.rq_calls.Call`
and wait on their own clock; this thread takes whatever has gathered, and sends it as one
pipeline of enqueue scripts on its own connection: one write and one read for a whole batch,
so the round trips per job fall as the load rises, and no caller ever touches a socket (a
stalled Redis holds this thread, never a caller past its deadline).

The script refuses a job when the queue is full (``queue_full``) or when the jobs ahead of
it would take longer than its budget allows (``shed``: depth x the lanes' mean cycle / lanes
> what the budget leaves to wait), so the traffic that fits still gets through.
"""

from __future__ import annotations

import collections
import hashlib
import logging
import threading
import time
from collections.abc import Callable
from typing import Any

import redis
from toolcodec.pool.rq_calls import QUEUED, SENT, Call, LaneTimes, RedisHealth

log = logging.getLogger("toolcodec.pool")

# KEYS: queue list, job hash, RQ's set of queues, the queue's set of workers.
# ARGV: max queue length, job TTL (ms), job id, queue key, seconds the job may wait
# for a lane, a lane's mean cycle in seconds (0: unknown), then the hash's field/value pairs.
# Returns {1, depth after the push} (queued), {0, depth} (queue full) or {2, depth, lanes}.
ENQUEUE_LUA = """
local depth = redis.call('LLEN', KEYS[1])
if depth >= tonumber(ARGV[1]) then return {0, depth} end
local cycle = tonumber(ARGV[6])
if cycle > 0 and depth > 0 then
  local lanes = redis.call('SCARD', KEYS[4])
  if lanes > 0 and depth * cycle > lanes * tonumber(ARGV[5]) then return {2, depth, lanes} end
end
redis.call('HSET', KEYS[2], unpack(ARGV, 7))
redis.call('PEXPIRE', KEYS[2], ARGV[2])
redis.call('SADD', KEYS[3], ARGV[4])
return {1, redis.call('RPUSH', KEYS[1], ARGV[3])}
"""
NKEYS = 4
ENQUEUE_SHA = hashlib.sha1(ENQUEUE_LUA.encode()).hexdigest()
MAX_BATCH = 256  # jobs in one pipeline: bounds one write and the reply it waits for

# What the enqueue thread reports for each call it settled.
Outcome = tuple[str, Any]  # ("queued", depth) | ("full", depth) | ("shed", (depth, lanes))
#                            | ("late", reserve) | ("unavailable", message)


class Sender(threading.Thread):
    """Pipelines the calls :meth:`put` receives to Redis, ``MAX_BATCH`` at a time.

    :param pool: the connection pool it takes its one connection from.
    :param lock: the backend's lock; every state change of a call is made under it.
    :param settle: ``settle(call, outcome)``, called under no lock, once per call it sent
        or refused.
    """

    def __init__(self, pool: redis.ConnectionPool, lock: threading.Lock,
                 settle: Callable[[Call, Outcome], None], times: LaneTimes,
                 health: RedisHealth, name: str) -> None:
        super().__init__(name=name, daemon=True)
        self._pool = pool
        self._lock = lock
        self._ready = threading.Condition(lock)
        self._pending: collections.deque[Call] = collections.deque()
        self._settle = settle
        self._times = times
        self._health = health
        self._stopping = False
        self._conn: Any = None
        self._loaded = False  # whether the script is loaded on the connected server

    def put(self, call: Call) -> None:
        """Queue ``call`` for the next batch."""
        with self._lock:
            self._pending.append(call)
            if len(self._pending) == 1:
                self._ready.notify()

    def put_many(self, calls: list[Call]) -> None:
        with self._lock:
            self._pending.extend(calls)
            self._ready.notify()

    def stop(self, timeout: float = 2.0) -> None:
        with self._lock:
            self._stopping = True
            self._ready.notify()
        self.join(timeout)
        if self._conn is not None:
            self._pool.release(self._conn)

    def run(self) -> None:
        while True:
            batch = self._take()
            if batch is None:
                return
            if not batch:
                continue
            try:
                self._send(batch)
            except Exception as exc:  # noqa: BLE001 - this thread must outlive any bug
                log.exception("toolcodec RQ enqueue thread: a batch failed")
                message = f"the enqueue thread failed: {type(exc).__name__}: {exc}"
                for call in batch:  # those not queued yet; one answered already ignores it
                    if call.state == SENT:
                        self._settle(call, ("unavailable", message))

    def _take(self) -> list[Call] | None:
        """The next batch, each call marked SENT; ``None`` once stopped and drained."""
        with self._lock:
            while not self._pending and not self._stopping:
                self._ready.wait()
            if not self._pending:
                return None
            batch: list[Call] = []
            pending = self._pending
            while pending and len(batch) < MAX_BATCH:
                call = pending.popleft()
                if call.state == QUEUED:  # else the caller gave up before it was sent
                    call.state = SENT
                    batch.append(call)
            return batch

    def _send(self, batch: list[Call]) -> None:
        now = time.monotonic()
        times, commands, sent = self._times, [], []
        for call in batch:
            left = call.deadline - now
            reserve = times.reserve(call.deadline - call.start)
            if left <= reserve:  # it could not finish even if a lane took it at once
                self._settle(call, ("late", reserve))
                continue
            # ARGV[5], ARGV[6]: the seconds it may wait for a lane, a lane's mean cycle.
            commands += (call.head, resp(left - reserve, times.mean), call.tail)
            sent.append(call)
        if not sent:
            return
        health = self._health
        health.waiting_since = time.monotonic()
        done = 0
        try:
            conn = self._connection()
            conn.send_packed_command([b"".join(commands)], check_health=False)
            sent_at = time.monotonic()
            for call in sent:
                call.sent_at = sent_at
            first = True
            for call in sent:
                try:
                    reply = conn.read_response()
                except redis.exceptions.NoScriptError:  # flushed: load it, send this again
                    self._loaded = False
                    reply = None
                except redis.exceptions.ResponseError as exc:  # Redis refused this one
                    reply = exc
                health.last_answer = time.monotonic()
                if first:
                    times.observe_rtt(health.last_answer - sent_at)
                    first = False
                done += 1
                if reply is None:
                    self._again(call)
                else:
                    self._settle(call, _outcome(reply))
        except (redis.exceptions.RedisError, OSError, ValueError) as exc:
            if self._conn is not None:
                self._conn.disconnect()
            message = f"could not enqueue on Redis: {type(exc).__name__}: {exc}"
            for call in sent[done:]:
                self._settle(call, ("unavailable", message))
        finally:
            health.waiting_since = None

    def _again(self, call: Call) -> None:
        """Send ``call`` again with the next batch, unless its caller gave up."""
        with self._lock:
            if call.state == SENT and not call.over:
                call.state = QUEUED
                self._pending.appendleft(call)

    def _connection(self) -> Any:
        """The enqueue connection, connected, with the script loaded on this server."""
        if self._conn is None:
            self._conn = self._pool.get_connection()
            self._loaded = False
        elif self._conn._sock is None:
            self._conn.connect()
            self._loaded = False  # maybe a restarted Redis, which forgot the script
        if not self._loaded:
            self._conn.send_command("SCRIPT", "LOAD", ENQUEUE_LUA, check_health=False)
            self._conn.read_response()
            self._loaded = True
        return self._conn


def resp(*args: bytes | str | int | float) -> bytes:
    """``args`` as RESP bulk strings, without the array header (see :func:`command`).

    redis-py's own packer costs about 100 µs for an enqueue's thirty arguments; this is a
    tenth of that. Numbers are written as ``repr`` writes them, as redis-py does.
    """
    out = []
    for arg in args:
        if isinstance(arg, bytes):
            data = arg
        elif isinstance(arg, str):
            data = arg.encode()
        elif isinstance(arg, int | float) and not isinstance(arg, bool):
            data = repr(arg).encode()
        else:
            raise TypeError(f"cannot send {type(arg).__name__} to Redis")
        out.append(b"$%d\r\n%s\r\n" % (len(data), data))
    return b"".join(out)


def enqueue_command(keys: tuple[str, ...], argv: list[Any], fields: list[Any]
                    ) -> tuple[bytes, bytes]:
    """The enqueue script's EVALSHA in RESP, split where the two arguments the enqueue
    thread fills in at send time (wait allowed, lane cycle) go: ``(head, tail)``."""
    count = 3 + len(keys) + len(argv) + 2 + len(fields)
    head = b"*%d\r\n" % count + resp("EVALSHA", ENQUEUE_SHA, len(keys), *keys, *argv)
    return head, resp(*fields)


def _outcome(reply: Any) -> Outcome:
    if isinstance(reply, Exception):
        return "unavailable", f"Redis refused the job: {reply}"
    if not isinstance(reply, list) or not reply:
        return "unavailable", f"Redis answered the enqueue script with {reply!r:.80}"
    kind, depth = int(reply[0]), int(reply[1])
    if kind == 1:
        return "queued", depth
    if kind == 2:
        return "shed", (depth, int(reply[2]))
    return "full", depth

