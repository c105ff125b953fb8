"""One timer for every whole answer's deadline, not one per request.

``asyncio.timeout`` arms a timer of the event loop for each request: a handle made,
scheduled and cancelled, the task and the loop looked up (about 23 k instructions, near a
thirtieth of a whole answer's work in the serving process). The proxy's whole answers all
have the same deadline and nearly all end long before it, so :class:`Deadlines` keeps the
open scopes in a set and one timer, armed at the earliest deadline among them. When it
fires, every scope whose deadline has come is cancelled exactly as ``asyncio.timeout``
cancels its own (its task is cancelled; leaving the scope raises ``TimeoutError`` unless
another cancellation came meanwhile), and the timer is armed at the earliest deadline left.
A scope that ends only leaves the set; the timer, armed for an earlier scope, is moved only
when it fires: about once per deadline, whatever the traffic.

A scope entered from another event loop than the open ones' is an ``asyncio.timeout`` of its
own; the owner moves to a new loop once its scopes there have all ended.
"""

from __future__ import annotations

import asyncio
import math
from typing import Any


class Deadlines:
    """The deadlines of the scopes :meth:`scope` makes, on one timer (see the module)."""

    __slots__ = ("_open", "_loop", "_timer", "_at")

    def __init__(self) -> None:
        self._open: set[_Scope] = set()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._timer: asyncio.Handle | None = None
        self._at = math.inf  # when the timer fires

    def scope(self, seconds: float) -> _Scope:
        """``async with deadlines.scope(s):`` — ``asyncio.timeout(s)`` on the shared timer."""
        return _Scope(self, seconds)

    def _arm(self, loop: asyncio.AbstractEventLoop, when: float) -> None:
        if self._timer is not None:
            self._timer.cancel()
        # a deadline already passed: at the next turn, as asyncio.timeout has it
        self._timer = loop.call_soon(self._fire, loop) if when <= loop.time() \
            else loop.call_at(when, self._fire, loop)
        self._at = when

    def _fire(self, loop: asyncio.AbstractEventLoop) -> None:
        due, self._timer, self._at = self._at, None, math.inf
        soonest = math.inf
        for scope in list(self._open):
            if scope.when <= due:  # the loop ran the timer: its time has come
                self._open.discard(scope)
                scope.expired = True
                scope.task.cancel()
            elif scope.when < soonest:
                soonest = scope.when
        if soonest < math.inf:
            self._arm(loop, soonest)


class _Scope:
    __slots__ = ("owner", "seconds", "task", "when", "cancelling", "expired", "alone")

    def __init__(self, owner: Deadlines, seconds: float) -> None:
        self.owner, self.seconds = owner, seconds
        self.expired = False
        self.alone: Any = None  # an asyncio.timeout, for a scope on another loop

    async def __aenter__(self) -> _Scope:
        task = asyncio.current_task()
        if task is None:
            raise RuntimeError("a deadline scope must be entered inside a task")
        loop, owner = task.get_loop(), self.owner
        if owner._loop is not loop:
            if owner._open:  # the open scopes' loop keeps the timer
                self.alone = asyncio.timeout(self.seconds)
                await self.alone.__aenter__()
                return self
            if owner._timer is not None:
                owner._timer.cancel()
            owner._loop, owner._timer, owner._at = loop, None, math.inf
        self.task, self.when = task, loop.time() + self.seconds
        self.cancelling = task.cancelling()
        owner._open.add(self)
        if self.when < owner._at:
            owner._arm(loop, self.when)
        return self

    async def __aexit__(self, exc_type: Any, exc: Any, tb: Any) -> None:
        if self.alone is not None:
            return await self.alone.__aexit__(exc_type, exc, tb)
        self.owner._open.discard(self)
        if self.expired and self.task.uncancel() <= self.cancelling \
                and exc_type is asyncio.CancelledError:
            raise TimeoutError from exc  # this scope's cancellation, none since: handled here
        return None
