"""The timer of a relayed stream (``toolcodec.pool.proxy.stream``): its heartbeat and deadline.

The relay reads upstream's body and writes the client's in one task. While upstream sends
nothing, a ``: keep-alive`` comment must still go out every ``heartbeat`` seconds, and the
request's deadline must cut a trickling upstream. :class:`Ticker` is one timer for both, moved
only when it fires, in place of a timeout scope around each wait (a timer set and cancelled per
delta): when it fires it pokes the upstream response (``Response.poke``), whose waiting
``next_part`` then returns ``None`` to the relay.
"""

from __future__ import annotations

import asyncio
from collections.abc import Callable


class Ticker:
    """Calls ``poke`` when nothing has come from upstream for ``heartbeat`` seconds (the
    relay then sends a keep-alive) and once the deadline has passed; ``last`` is when
    upstream's latest chunks were handed on (the relay sets it)."""

    __slots__ = ("loop", "poke", "heartbeat", "until", "last", "_timer")

    def __init__(self, loop: asyncio.AbstractEventLoop, poke: Callable[[], None],
                 heartbeat: float, until: float) -> None:
        self.loop, self.poke, self.heartbeat, self.until = loop, poke, heartbeat, until
        self.last = loop.time()
        self._timer: asyncio.TimerHandle | None = loop.call_at(self._due(), self._tick)

    def _due(self) -> float:
        return min(self.last + self.heartbeat, self.until)

    def _tick(self) -> None:
        now = self.loop.time()
        if now >= self._due():
            self.poke()
            self.last = now  # the next heartbeat is one period from this one
            if now >= self.until:
                self._timer = None
                return
        self._timer = self.loop.call_at(self._due(), self._tick)

    def stop(self) -> None:
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
