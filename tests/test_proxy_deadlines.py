"""``toolcodec.pool.proxy.deadlines``: whole answers' deadlines on one timer behave as
``asyncio.timeout`` does, under any interleaving, without a timer per request."""

from __future__ import annotations

import asyncio
import random
import threading

import pytest
import uvloop
from toolcodec.pool.proxy.deadlines import Deadlines

FOREVER = 3600.0
LOOPS = {"asyncio": None, "uvloop": uvloop.new_event_loop}  # toolcodec serve runs on uvloop


def run(main, loop: str):
    with asyncio.Runner(loop_factory=LOOPS[loop]) as runner:
        return runner.run(main)


async def _outcome(scope, body) -> str:
    try:
        async with scope:
            return await body()
    except TimeoutError:
        return "timeout"
    except asyncio.CancelledError:
        return "cancelled"


async def _done() -> str:
    await asyncio.sleep(0)
    return "done"


async def _never() -> str:
    await asyncio.sleep(FOREVER)
    return "done"


async def _swallows() -> str:  # catches its cancellation and answers anyway
    try:
        await asyncio.sleep(FOREVER)
    except asyncio.CancelledError:
        return "swallowed"
    return "done"


async def _cancelled_too() -> str:  # cancelled from outside as the deadline comes
    task = asyncio.current_task()
    asyncio.get_running_loop().call_soon(task.cancel)
    await asyncio.sleep(FOREVER)
    return "done"


@pytest.mark.parametrize("loop", LOOPS)
@pytest.mark.parametrize("body", [_done, _never, _swallows, _cancelled_too])
@pytest.mark.parametrize("seconds", [0.0, 0.02])
def test_a_scope_ends_as_asyncio_timeout_ends(body, seconds, loop) -> None:
    async def both() -> tuple[str, str]:
        theirs = await asyncio.create_task(_outcome(asyncio.timeout(seconds), body))
        ours = await asyncio.create_task(_outcome(Deadlines().scope(seconds), body))
        return theirs, ours

    theirs, ours = run(both(), loop)
    assert ours == theirs


def test_a_cancellation_from_outside_is_not_taken_for_the_deadline() -> None:
    async def main() -> str:
        task = asyncio.create_task(_outcome(Deadlines().scope(FOREVER), _never))
        await asyncio.sleep(0.01)
        task.cancel()
        return await task

    assert asyncio.run(main()) == "cancelled"


def test_an_outer_timeout_is_the_outer_one_s() -> None:
    async def main() -> tuple[bool, bool]:
        inner = Deadlines().scope(FOREVER)
        with pytest.raises(TimeoutError):
            async with asyncio.timeout(0.01):
                async with inner:
                    await asyncio.sleep(FOREVER)
        return inner.expired, asyncio.current_task().cancelling() == 0

    assert asyncio.run(main()) == (False, True)


@pytest.mark.parametrize("loop", LOOPS)
def test_many_scopes_interleaved_each_end_by_its_own_deadline(loop) -> None:
    # Scopes entered in any order of their deadlines (later ones first too), some ending at
    # once and some never: each never-ending one times out, no finished one is touched, and
    # the tasks are left with no cancellation pending.
    rnd = random.Random(1)

    async def main() -> list[tuple[str, str, int]]:
        deadlines = Deadlines()

        async def one(seconds: float, forever: bool) -> tuple[str, str, int]:
            await asyncio.sleep(rnd.random() / 100)
            got = await _outcome(deadlines.scope(seconds), _never if forever else _done)
            return got, "timeout" if forever else "done", asyncio.current_task().cancelling()

        specs = [(rnd.choice([0.01, 0.05, 0.2, 0.03, 0.002]), rnd.random() < 0.5)
                 for _ in range(300)]
        async with asyncio.timeout(120):  # a guard against a hang only: never reached
            results = await asyncio.gather(*(one(s, f) for s, f in specs))
        assert not deadlines._open
        return results

    for got, want, pending in run(main(), loop):
        assert (got, pending) == (want, 0)


def test_one_timer_serves_requests_one_after_another() -> None:
    # The point of the owner: a timer is armed for the earliest open deadline, not one per
    # scope (asyncio.timeout arms one per scope).
    async def main() -> tuple[int, int]:
        loop = asyncio.get_running_loop()
        armed = [0]
        call_at = loop.call_at

        def counting(*args, **kwargs):
            armed[0] += 1
            return call_at(*args, **kwargs)

        loop.call_at = counting
        deadlines = Deadlines()
        for _ in range(50):
            assert await _outcome(deadlines.scope(FOREVER), _done) == "done"
        ours = armed[0]
        armed[0] = 0
        for _ in range(50):
            assert await _outcome(asyncio.timeout(FOREVER), _done) == "done"
        return ours, armed[0]

    ours, theirs = asyncio.run(main())
    assert ours == 1 and theirs == 50


def test_scopes_on_another_loop_keep_their_deadlines() -> None:
    # The owner follows its loop once its scopes there have ended; a scope entered from
    # another loop meanwhile is an asyncio.timeout of its own.
    deadlines = Deadlines()
    assert asyncio.run(_outcome(deadlines.scope(0.01), _never)) == "timeout"
    assert asyncio.run(_outcome(deadlines.scope(0.01), _never)) == "timeout"

    started = threading.Event()
    other: list[str] = []

    async def holding() -> str:  # its own deadline, kept by its own loop
        return await _outcome(_Started(deadlines.scope(2.0), started), _never)

    thread = threading.Thread(target=lambda: other.append(asyncio.run(holding())))
    thread.start()
    assert started.wait(60)
    assert asyncio.run(_outcome(deadlines.scope(0.01), _never)) == "timeout"
    assert asyncio.run(_outcome(deadlines.scope(FOREVER), _done)) == "done"
    thread.join(60)
    assert other == ["timeout"]


class _Started:
    """A scope that says when it has been entered."""

    def __init__(self, scope, started: threading.Event) -> None:
        self.scope, self.started = scope, started

    async def __aenter__(self):
        await self.scope.__aenter__()
        self.started.set()

    async def __aexit__(self, *exc):
        return await self.scope.__aexit__(*exc)
