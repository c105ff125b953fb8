"""The worker line: idle workers, and a bounded first-come-first-served line of callers.

A released worker goes straight to the caller that has waited longest, never back into a
shared queue that any thread may grab first: with ``queue.Queue`` a late arrival can barge
ahead of an earlier waiter, and under 16 threads some callers starved into timeouts. Waiters
are woken by a callback, so threads and asyncio (``loop.call_soon_threadsafe``) share the same
line. A waiter may leave its job with its place in line, so that whoever releases a worker
can start that job before waking the waiter (the worker does not sit idle while a thread
wakes up).

The line also knows how many workers are away being repaired (killed and re-forked), so it
can say at any moment how many are idle, busy (held by a caller) or starting, and
:meth:`WorkerLine.wait_idle` can wait for the callers in flight to finish.
"""

from __future__ import annotations

import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class QueueFull(Exception):
    """Every worker is busy and the line of waiting callers is at its bound."""


class Closed(Exception):
    """The line no longer admits callers."""


class Waiter(Generic[T]):
    """A caller in line; ``item`` is set (under the lock) when a worker is handed over.

    ``job`` is what the caller wants run; ``started`` is set by the releaser once it has
    handed ``job`` to the item itself, before calling ``notify``: the ``time.monotonic()``
    it was sent at (0.0 while it was not).
    """

    __slots__ = ("item", "notify", "job", "started")

    def __init__(self, notify: Callable[[], None], job: Any = None) -> None:
        self.item: T | None = None
        self.notify = notify
        self.job = job
        self.started = 0.0


class WorkerLine(Generic[T]):
    """``size`` workers, the idle ones, and a FIFO line of at most ``max_waiting`` callers.

    A worker is idle (in the line), busy (taken by a caller) or away (handed to
    :meth:`away` to be repaired, until :meth:`release` brings it back).
    """

    def __init__(self, size: int, max_waiting: int) -> None:
        self.size = size
        self.max_waiting = max_waiting
        self.closed = False
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)  # notified only once closed
        self._idle: deque[T] = deque()
        self._waiters: deque[Waiter[T]] = deque()
        self._away = size  # every worker starts away: it is released once it runs

    def counts(self) -> dict[str, int]:
        """Workers ``idle``, ``busy`` and ``starting`` (away), and callers ``waiting``."""
        with self._lock:
            idle, away = len(self._idle), self._away
            return {"idle": idle, "busy": self.size - idle - away, "starting": away,
                    "waiting": len(self._waiters)}

    def take_or_wait(
        self, notify: Callable[[], None], job: Any = None
    ) -> tuple[T | None, Waiter[T] | None]:
        """Take an idle worker now, or join the line; ``notify`` runs when one is handed over.

        Raises :class:`QueueFull` when the line is at its bound, :class:`Closed` after
        :meth:`close`.
        """
        with self._lock:
            if self.closed:
                raise Closed("the pool is closed")
            if self._idle and not self._waiters:
                return self._idle.popleft(), None
            if len(self._waiters) >= self.max_waiting:
                raise QueueFull(f"{len(self._waiters)} callers already waiting")
            waiter: Waiter[T] = Waiter(notify, job)
            self._waiters.append(waiter)
            return None, waiter

    def leave(self, waiter: Waiter[T]) -> T | None:
        """Stop waiting; returns the worker if one was handed over meanwhile.

        Then the caller owns it, but must still wait for ``notify``: the releaser may be
        starting the waiter's job on it.
        """
        with self._lock:
            if waiter.item is None:
                try:
                    self._waiters.remove(waiter)
                except ValueError:
                    pass
                self._changed_if_closed()
            return waiter.item

    def release(self, item: T, *, back: bool = False,
                can_start: Callable[[Waiter[T]], bool] | None = None,
                dropped: list[Waiter[T]] | None = None) -> Waiter[T] | None:
        """Hand a busy worker (or one coming ``back`` from :meth:`away`) to the longest
        waiter and return that waiter, or park it idle (None).

        With ``can_start``, waiters for whom it is false are taken out of the line without a
        worker (their ``item`` stays None) and appended to ``dropped``: a worker handed to a
        caller that can no longer use it would sit idle until that caller woke up. The
        caller must then call the waiter's ``notify`` (after starting its job, if it does
        that), and the dropped waiters' too.
        """
        with self._lock:
            if back:
                self._away -= 1
            while self._waiters:
                waiter = self._waiters.popleft()
                if can_start is None or can_start(waiter):
                    waiter.item = item
                    return waiter
                if dropped is not None:
                    dropped.append(waiter)
            self._idle.append(item)
            self._changed_if_closed()
            return None

    def away(self) -> None:
        """A busy worker leaves to be repaired; :meth:`release` with ``back`` returns it."""
        with self._lock:
            self._away += 1
            self._changed_if_closed()

    def close(self) -> None:
        """Admit no new callers; those in line are still served."""
        with self._lock:
            self.closed = True

    def wait_idle(self, timeout: float) -> bool:
        """After :meth:`close`: wait until no worker is held and nobody waits; False if
        ``timeout`` seconds pass first."""
        end = time.monotonic() + timeout
        with self._lock:
            while self._waiters or self.size - len(self._idle) - self._away > 0:
                left = end - time.monotonic()
                if left <= 0:
                    return False
                self._changed.wait(left)
            return True

    def _changed_if_closed(self) -> None:
        if self.closed:
            self._changed.notify_all()


class RunTimes:
    """Per op, a running estimate of how long a job runs once started: what a caller keeps
    of its budget for the run when it decides how long it may wait for a worker.

    The estimate is a high quantile, not the mean: an exponentially weighted mean plus four
    times the weighted mean deviation (for a normal spread that is past the 99th percentile),
    never under ``floor`` (the wake-ups and system calls of a round trip) nor over ``share``
    of the budget, so a job may always wait at least the rest. An op's figures are one
    tuple, replaced whole: updates race only with other updates of the same op and at worst
    lose one observation, so they take no lock.
    """

    ALPHA = 0.05  # weight of a new observation: about the last 20-40 jobs count

    def __init__(self, floor: float = 0.001, share: float = 0.5) -> None:
        self.floor, self.share = floor, share
        self._runs: dict[str, tuple[float, float]] = {}  # op: (mean, mean deviation)

    def observe(self, op: str, seconds: float) -> None:
        """Count one job of ``op`` that ran for ``seconds`` (from start to its answer)."""
        known = self._runs.get(op)
        if known is None:
            self._runs[op] = (seconds, seconds / 2)
            return
        mean, dev = known
        self._runs[op] = (mean + self.ALPHA * (seconds - mean),
                          dev + self.ALPHA * (abs(seconds - mean) - dev))

    def shed(self, op: str) -> None:
        """A job of ``op`` was shed: ease the estimate towards the floor. Shed jobs do not
        run, so without this one slow outlier (a tool set compiled on first use) could keep
        the estimate high, and every job shed, with nothing left to observe."""
        known = self._runs.get(op)
        if known is not None:
            mean, dev = known
            self._runs[op] = (mean - self.ALPHA * (mean - self.floor), dev - self.ALPHA * dev)

    def reserve(self, op: str, budget: float) -> float:
        """Seconds of ``budget`` kept for the run of a job of ``op``."""
        known = self._runs.get(op)
        estimate = self.floor if known is None else known[0] + 4 * known[1]
        return min(max(estimate, self.floor), self.share * budget)
