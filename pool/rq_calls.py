"""One caller's job on the Redis backend, from the call to its answer, and what the caller
knows of Redis and of the lanes when its budget runs out.

A :class:`Call` is shared by three threads: the caller (or its event loop), the enqueue
thread (:mod:`toolcodec.pool.rq_sender`) and the reply listener. Every change of its
``state`` or ``envelope`` is made under the backend's one lock, so the caller that reaches
its deadline sees one consistent state and decides alone what to answer.
"""

from __future__ import annotations

import asyncio
import threading
import time
from dataclasses import dataclass, field
from typing import Any

# A call's states, in order; CANCELLED: the caller gave up before the enqueue thread sent it.
QUEUED, SENT, ACCEPTED, CANCELLED = range(4)


def _resolve(future: asyncio.Future) -> None:
    if not future.done():
        future.set_result(None)


@dataclass(slots=True, eq=False)
class Call:
    """One job in flight: what it is, when its budget ends and how to wake its caller.

    ``loop`` is the caller's event loop for :meth:`RQBackend.asubmit`, ``None`` for a thread.
    """

    job_id: str
    op: str
    start: float  # time.monotonic() the budget counts from
    deadline: float  # time.monotonic()
    # The enqueue command in RESP, packed by the caller around the two arguments the
    # enqueue thread adds when it sends the job (see rq_sender.ENQUEUE_LUA).
    head: bytes
    tail: bytes
    loop: asyncio.AbstractEventLoop | None = None
    state: int = QUEUED
    sent_at: float = 0.0
    envelope: dict[str, Any] | None = None
    over: bool = False  # the caller has answered; nothing may change the call any more
    event: threading.Event | None = None
    future: asyncio.Future | None = None
    queue_depth: int = 0  # the queue's depth when the job was accepted

    def __post_init__(self) -> None:
        if self.loop is None:
            self.event = threading.Event()
        else:
            self.future = self.loop.create_future()

    def wake(self) -> None:
        """Wake the caller; from any thread, at most once per call (under no lock)."""
        if self.event is not None:
            self.event.set()
            return
        assert self.loop is not None and self.future is not None
        try:
            self.loop.call_soon_threadsafe(_resolve, self.future)
        except RuntimeError:  # the caller's loop is closed: nobody is waiting
            pass

    def wait(self) -> None:
        """Block the calling thread until woken or until the deadline."""
        assert self.event is not None
        remaining = self.deadline - time.monotonic()
        if remaining > 0:
            self.event.wait(remaining)

    async def await_(self) -> None:
        """Await until woken or until the deadline."""
        assert self.future is not None
        remaining = self.deadline - time.monotonic()
        if remaining <= 0 or self.future.done():
            return
        try:
            async with asyncio.timeout(remaining):
                await asyncio.shield(self.future)
        except TimeoutError:
            pass


@dataclass(slots=True)
class RedisHealth:
    """When Redis last answered the enqueue thread, and since when it has been waited on.

    A budget that runs out while Redis is still answering is overload (``shed``); one that
    runs out while the enqueue thread waits on a Redis that has said nothing since the job
    was sent (or, for a job not sent yet, since its caller arrived) is an unavailable Redis.
    """

    last_answer: float = 0.0  # time.monotonic() of the last reply read from Redis
    waiting_since: float | None = None  # when the enqueue thread started waiting, if it is

    def silent_since(self, moment: float) -> bool:
        """Whether Redis, waited on now, has answered nothing since ``moment``."""
        return self.waiting_since is not None and self.last_answer < moment


@dataclass(slots=True)
class LaneTimes:
    """A running estimate of one lane's cycle per job (dequeue, run, reply) from the lanes'
    replies, and of the enqueue round trip: what a job needs left of its budget to start.

    The run is kept at a high quantile (weighted mean plus four weighted mean deviations,
    capped at half the budget, as the process backend keeps its run-time reserve); the queue
    wait is the depth times the mean cycle over the number of lanes, checked by the enqueue
    script against the queue Redis holds at that moment.
    """

    ALPHA = 0.05
    floor: float = 0.0005
    share: float = 0.5
    mean: float = 0.0  # 0: nothing observed yet, no queue-wait shedding
    dev: float = 0.0
    rtt: float = 0.0
    lock: threading.Lock = field(default_factory=threading.Lock)

    def observe(self, seconds: float) -> None:
        """Count one lane cycle (from a reply's ``lane_ms``)."""
        if not seconds >= 0:  # also refuses NaN
            return
        with self.lock:
            if self.mean == 0.0:
                self.mean, self.dev = seconds, seconds / 2
                return
            self.dev += self.ALPHA * (abs(seconds - self.mean) - self.dev)
            self.mean += self.ALPHA * (seconds - self.mean)

    def observe_rtt(self, seconds: float) -> None:
        """Count one enqueue round trip."""
        self.rtt = seconds if self.rtt == 0.0 else self.rtt + self.ALPHA * (seconds - self.rtt)

    def reserve(self, budget: float) -> float:
        """Seconds a job needs once it starts: its run, at a high quantile, and the reply."""
        run = max(self.mean + 4 * self.dev, self.floor)
        return min(run + 2 * self.rtt, self.share * budget)
