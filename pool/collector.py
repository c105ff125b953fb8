"""Answers for event-loop callers, read as soon as they arrive, off the event loop.

An ``asubmit`` caller waits on its event loop. When that loop is busy (a proxy serving a
few hundred connections on one core), a coroutine resumes tens or hundreds of milliseconds
after its worker answered, and until then the worker sits idle with the answer in its socket
while other jobs wait for it: worker capacity fell to what the loop could collect. The
collector is one thread per pool that waits on the sockets of the workers running
event-loop jobs (``epoll``, one-shot), and runs each watch's callback the moment the answer
can be read: the callback reads it and releases the worker (starting the next waiter's job),
then wakes the caller, whose loop picks the answer up whenever it gets to it. Under the GIL
the thread waits at most a switch interval (5 ms) for its turn, not a loop's backlog.

A caller that gives up (deadline, cancellation) takes its watch back with :meth:`unwatch`;
if the collector has already taken it, the callback runs to its end and owns the worker.
"""

from __future__ import annotations

import os
import select
import sys
import threading
from collections.abc import Callable

SWITCH_INTERVAL_S = float(os.environ.get("TOOLCODEC_SWITCH_INTERVAL_S", "0.0005"))
_ARM = select.EPOLLIN | select.EPOLLONESHOT  # hang-ups and errors are always reported


class Collector(threading.Thread):
    """Runs ``callback()`` once ``fd`` is readable, for each :meth:`watch`."""

    def __init__(self) -> None:
        super().__init__(name="toolcodec-pool-collector", daemon=True)
        self._epoll = select.epoll()
        self._lock = threading.Lock()
        self._watches: dict[int, Callable[[], None]] = {}
        self._wake_r, self._wake_w = os.pipe()
        self._epoll.register(self._wake_r, select.EPOLLIN)

    def start(self) -> None:
        # The GIL goes to a waiting thread only every switch interval (5 ms by default), and
        # a busy loop thread would hold it that long each time the collector has an answer:
        # with two workers that alone capped the pool at ~400 jobs/s under a saturated loop.
        if sys.getswitchinterval() > SWITCH_INTERVAL_S:
            sys.setswitchinterval(SWITCH_INTERVAL_S)
        super().start()

    def watch(self, fd: int, callback: Callable[[], None]) -> None:
        """Run ``callback`` on the collector thread once ``fd`` can be read."""
        with self._lock:
            self._watches[fd] = callback
        try:
            self._epoll.register(fd, _ARM)
        except FileExistsError:  # left registered by a watch taken back: arm it again
            self._epoll.modify(fd, _ARM)

    def unwatch(self, fd: int, callback: Callable[[], None]) -> bool:
        """Take a watch back: True if its callback will not run, False if it has started.

        Only this callback's watch: once it has run, its worker may already watch ``fd``
        again for the next caller, whose watch must stay.
        """
        with self._lock:
            taken = self._watches.get(fd) is callback
            if taken:
                del self._watches[fd]
        if taken:
            self._forget(fd)
        return taken

    def stop(self) -> None:
        os.write(self._wake_w, b"x")
        self.join(timeout=2)

    def run(self) -> None:
        try:
            while True:
                for fd, _ in self._epoll.poll():
                    if fd == self._wake_r:
                        return
                    with self._lock:
                        callback = self._watches.pop(fd, None)
                    if callback is None:
                        # taken back (and unregistered) by its caller after this event was
                        # reported: the socket may be watched again for the worker's next
                        # job by now, so it must not be unregistered here
                        continue
                    self._forget(fd)
                    try:
                        callback()
                    except Exception:  # noqa: BLE001 - the callbacks answer their callers
                        pass  # themselves; a bug in one must not stop the thread
        finally:
            for fd in (self._wake_r, self._wake_w):
                os.close(fd)
            self._epoll.close()

    def _forget(self, fd: int) -> None:
        try:
            self._epoll.unregister(fd)
        except (OSError, ValueError):  # already closed (its worker was replaced)
            pass
