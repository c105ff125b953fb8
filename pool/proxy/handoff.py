"""How a stream's reader task hands upstream's chunks to the relay (``pool.proxy.stream``).

:class:`Handoff` is a bounded first-in first-out line with one reader and one taker, in place
of ``asyncio.Queue``: a stream passes an item or two per delta, and the queue's put, get and
size checks (each a few Python calls, ``put`` a coroutine) were a tenth of the relay's own
work per delta. :class:`Ticker` is one timer for the stream's heartbeat and deadline, moved
only when it fires, in place of a timeout scope around each wait (a timer set and cancelled
per delta).
"""

from __future__ import annotations

import asyncio
from collections import deque
from typing import Any

TICK = object()  # the ticker's item: a heartbeat is due, or the deadline has passed


class Handoff:
    """At most ``size`` items waiting; ``put`` waits for room, ``get`` for an item. One task
    puts (and the ticker, with :meth:`put_nowait`, past the bound), one task gets."""

    __slots__ = ("items", "size", "_loop", "_getter", "_putter")

    def __init__(self, loop: asyncio.AbstractEventLoop, size: int) -> None:
        self.items: deque[Any] = deque()
        self.size, self._loop = size, loop
        self._getter: asyncio.Future[None] | None = None
        self._putter: asyncio.Future[None] | None = None

    def put_nowait(self, item: Any) -> None:
        self.items.append(item)
        getter = self._getter
        if getter is not None:
            self._getter = None
            if not getter.done():
                getter.set_result(None)

    async def put(self, item: Any) -> None:
        while len(self.items) >= self.size:
            self._putter = self._loop.create_future()
            await self._putter
        self.put_nowait(item)

    async def get(self) -> Any:
        while not self.items:
            self._getter = self._loop.create_future()
            await self._getter
        return self.get_nowait()

    def get_nowait(self) -> Any:
        item = self.items.popleft()  # IndexError when empty, as the caller checked
        putter = self._putter
        if putter is not None:
            self._putter = None
            if not putter.done():
                putter.set_result(None)
        return item

    def empty(self) -> bool:
        return not self.items


class Ticker:
    """Puts :data:`TICK` in the hand-off when nothing has come from upstream for
    ``heartbeat`` seconds (the relay then sends a keep-alive) and once the deadline has
    passed; ``last`` is when upstream's latest chunks were handed on (the reader sets it)."""

    __slots__ = ("loop", "line", "heartbeat", "until", "last", "_timer")

    def __init__(self, loop: asyncio.AbstractEventLoop, line: Handoff, heartbeat: float,
                 until: float) -> None:
        self.loop, self.line, self.heartbeat, self.until = loop, line, heartbeat, until
        self.last = loop.time()
        self._timer: asyncio.TimerHandle | None = loop.call_at(self._due(), self._tick)

    def _due(self) -> float:
        return min(self.last + self.heartbeat, self.until)

    def _tick(self) -> None:
        now = self.loop.time()
        if now >= self._due():
            if self.line.empty():  # else the relay has items to take, and looks again
                self.line.put_nowait(TICK)
            self.last = now  # the next heartbeat is one period from this one
            if now >= self.until:
                self._timer = None
                return
        self._timer = self.loop.call_at(self._due(), self._tick)

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
