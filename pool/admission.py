"""A bounded, first-come-first-served hand-off of idle workers to waiting callers.

A released worker goes straight to the caller that has waited longest, never back into a
shared queue that any thread may grab first: with ``queue.Queue`` a late arrival can barge
ahead of an earlier waiter, and under 16 threads some callers starved into timeouts. Waiters
are woken by a callback, so threads (``threading.Event.set``) and asyncio
(``loop.call_soon_threadsafe``) share the same queue. A waiter may leave its job with its
place in line, so that whoever releases a worker can start that job before waking the
waiter (the worker does not sit idle while a thread wakes up).
"""

from __future__ import annotations

import threading
from collections import deque
from collections.abc import Callable
from typing import Any, Generic, TypeVar

T = TypeVar("T")


class QueueFull(Exception):
    """Every worker is busy and the waiting line is at its bound."""


class Closed(Exception):
    """The hand-off no longer admits callers."""


class Waiter(Generic[T]):
    """A caller in line; ``item`` is set (under the lock) when a worker is handed over.

    ``job`` is what the caller wants run; ``started`` is set by the releaser once it has
    handed ``job`` to the item itself, before calling ``notify``.
    """

    __slots__ = ("item", "notify", "job", "started")

    def __init__(self, notify: Callable[[], None], job: Any = None) -> None:
        self.item: T | None = None
        self.notify = notify
        self.job = job
        self.started = False


class HandOff(Generic[T]):
    """Idle items (workers) and a FIFO line of waiters at most ``max_waiting`` long.

    ``on_idle(delta)`` and ``on_waiting(delta)`` are called under the lock whenever the
    number of idle items or of waiters changes, so gauges built on them stay exact.
    """

    def __init__(
        self,
        max_waiting: int,
        *,
        on_idle: Callable[[int], None] | None = None,
        on_waiting: Callable[[int], None] | None = None,
    ) -> None:
        self.max_waiting = max_waiting
        self.closed = False
        self._lock = threading.Lock()
        self._idle: deque[T] = deque()
        self._waiters: deque[Waiter[T]] = deque()
        self._on_idle = on_idle or _ignore
        self._on_waiting = on_waiting or _ignore

    @property
    def waiting(self) -> int:
        """How many callers are in line."""
        return len(self._waiters)

    def take_or_wait(
        self, notify: Callable[[], None], job: Any = None
    ) -> tuple[T | None, Waiter[T] | None]:
        """Take an idle item now, or join the line; ``notify`` runs when one is handed over.

        Raises :class:`QueueFull` when the line is at its bound, :class:`Closed` after
        :meth:`close`.
        """
        with self._lock:
            if self.closed:
                raise Closed("the pool is closed")
            if self._idle and not self._waiters:
                self._on_idle(-1)
                return self._idle.popleft(), None
            if len(self._waiters) >= self.max_waiting:
                raise QueueFull(f"{len(self._waiters)} callers already waiting")
            waiter: Waiter[T] = Waiter(notify, job)
            self._waiters.append(waiter)
            self._on_waiting(1)
            return None, waiter

    def leave(self, waiter: Waiter[T]) -> T | None:
        """Stop waiting; returns the item if one was handed over meanwhile.

        Then the caller owns it, but must still wait for ``notify``: the releaser may be
        starting the waiter's job on it.
        """
        with self._lock:
            if waiter.item is None:
                try:
                    self._waiters.remove(waiter)
                    self._on_waiting(-1)
                except ValueError:
                    pass
            return waiter.item

    def release(self, item: T) -> Waiter[T] | None:
        """Hand ``item`` to the longest waiter and return it, or park it idle (None).

        The caller must then call the waiter's ``notify`` (after starting its job, if it
        does that).
        """
        with self._lock:
            if not self._waiters:
                self._idle.append(item)
                self._on_idle(1)
                return None
            waiter = self._waiters.popleft()
            self._on_waiting(-1)
            waiter.item = item
            return waiter

    def close(self) -> None:
        """Admit no new callers; those in line are still served."""
        with self._lock:
            self.closed = True


def _ignore(delta: int) -> None:
    pass
