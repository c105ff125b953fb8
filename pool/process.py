"""The process backend: long-lived worker processes over pipes, killed at the deadline.

Each caller runs its own round trip: it takes an idle worker from the FIFO worker line,
writes the job to the worker's pipe and waits on that pipe until its absolute deadline. No
dispatcher thread sits between caller and worker, which keeps a round trip in the tens of
microseconds. When the deadline passes the caller answers ``timeout`` at once and leaves the
worker to the supervisor thread, which SIGKILLs and re-forks it (a few milliseconds) and
hands it to the next waiter. SIGKILL from another process is the only stop that also works
while the worker is inside C code.

The round trip is written once, as a generator (:meth:`ProcessBackend._call`) that yields
what it waits for: a :class:`Waiter` (a worker to be handed over) or a :class:`_Slot` (its
answer), each with an absolute deadline. ``submit`` drives it with blocking waits,
``asubmit`` with the event loop's; only the waiting differs.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import queue
import threading
import time
from collections.abc import Callable, Generator, Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import orjson
from toolcodec.errors import BAD_REQUEST, REJECTED, TIMEOUT, WORKER_LOST
from toolcodec.limits import Limits
from toolcodec.pool.admission import Closed, QueueFull, RunTimes, Waiter, WorkerLine
from toolcodec.pool.collector import Collector
from toolcodec.pool.door import MAX_TIMEOUT_MS
from toolcodec.worker.child import RUN_JOB_HANDLER, WorkerDied, WorkerProcess
from toolcodec.worker.deadlines import CLOSED, QUEUE_FULL, shed_envelope
from toolcodec.worker.envelope import complete, error_envelope
from toolcodec.worker.jobs import warm
from toolcodec.worker.limits import ENV as LIMIT_ENV
from toolcodec.worker.metrics import Metrics

BACKEND = "process"
DEFAULT_QUEUE_SIZE = 1024


class _Slot:
    """One worker process and its place in the pool; ``collected`` is set while the
    collector thread, not the caller, gives the worker back."""

    __slots__ = ("proc", "index", "collected")

    def __init__(self, proc: WorkerProcess, index: int) -> None:
        self.proc = proc
        self.index = index
        self.collected = False


class _Answer:
    """An answer the collector reads for an event-loop caller: the envelope, when it
    arrived, the future that tells the caller, and the watch (socket, callback)."""

    __slots__ = ("out", "at", "ready", "fd", "done")

    def __init__(self, ready: asyncio.Future, fd: int) -> None:
        self.out: dict = {}
        self.at = 0.0
        self.ready = ready
        self.fd = fd
        self.done: Callable[[], None] = lambda: None

    def arrived(self) -> None:
        if not self.ready.done():
            self.ready.set_result(True)


# What a round trip waits for, until when (time.monotonic(); None: until it happens).
_Wait = tuple["Waiter[_Slot] | _Slot", float | None]
_Trip = Generator[_Wait, bool, dict]


class _TripTimes:
    """A call's budget as instants (``time.monotonic()``): when it started and ends, and,
    from the op's run times as they are at the moment of asking, the last moment its job
    may be sent to a worker."""

    __slots__ = ("op", "start", "deadline", "run_times")

    def __init__(self, op: str, start: float, deadline: float, run_times: RunTimes) -> None:
        self.op, self.start, self.deadline, self.run_times = op, start, deadline, run_times

    @property
    def budget(self) -> float:
        return self.deadline - self.start

    def start_by(self) -> float:
        return self.deadline - self.run_times.reserve(self.op, self.budget)


class _ThreadSignal:
    """A thread's wake-up for its place in line, reused from call to call.

    A lock held until the releaser notifies: one futex operation each way, where a new
    ``threading.Event`` per call costs a condition variable and about 2 µs.
    """

    __slots__ = ("_lock",)

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._lock.acquire()

    def arm(self) -> Callable[[], None]:
        return self._lock.release

    def wait(self, timeout: float | None) -> bool:
        if timeout is None:
            return self._lock.acquire()
        return self._lock.acquire(timeout=max(timeout, 0.0))

    def after(self, then: Callable[[], None]) -> None:
        """Run ``then`` once the pending notification has arrived."""
        self._lock.acquire()
        then()


class _LoopSignal:
    """The event loop's wake-up for one ``asubmit``; a releaser may notify from any thread."""

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        # set by the releaser that starts this caller's job: the collector's watch on it
        self.answer: _Answer | None = None
        self.on_sent: Callable[[_Slot], None] | None = None
        self.arm()

    def arm(self) -> Callable[[], None]:
        self._woken = self.loop.create_future()
        self._then: Callable[[], None] | None = None
        return self.notify

    def notify(self) -> None:
        try:
            self.loop.call_soon_threadsafe(self._wake)
        except RuntimeError:  # the loop has closed: only a pending settle still matters
            if self._then is not None:
                self._then()

    def _wake(self) -> None:
        if self._then is not None:
            self._then()
        elif not self._woken.done():
            self._woken.set_result(True)

    async def wait(self, timeout: float | None) -> bool:
        try:
            await asyncio.wait_for(asyncio.shield(self._woken), timeout)
            return True
        except TimeoutError:
            return False

    def after(self, then: Callable[[], None]) -> None:
        if self._woken.done():
            then()
        else:
            self._then = then


_local = threading.local()


def _thread_signal() -> _ThreadSignal:
    signal = getattr(_local, "signal", None)
    if signal is None:
        signal = _local.signal = _ThreadSignal()
    return signal


class ProcessBackend:
    """A pool of ``workers`` processes with hard per-job deadlines.

    ``timeout_ms`` is the default budget of a call, counted from the moment ``submit`` is
    called (or from ``arrived``, when the caller's request waited before that), waiting for a
    free worker included. A job starts only while the budget still holds its expected run
    time (:class:`RunTimes`); one that cannot start by then is shed (``rejected``, reason
    ``shed``; ``toolcodec.worker.deadlines``). ``queue_size`` bounds how many callers may
    wait for a worker; beyond it ``submit`` answers ``rejected`` at once. ``limits`` are
    the operator's ceilings for the workers (by default their environment's). Budgets and
    payloads are checked by ``Pool`` before they get here.
    """

    backend = BACKEND

    def __init__(
        self,
        *,
        workers: int | None = None,
        timeout_ms: float = 50,
        queue_size: int = DEFAULT_QUEUE_SIZE,
        metrics: Metrics | None = None,
        handler: str = RUN_JOB_HANDLER,
        start_method: str = "fork",
        limits: Limits | None = None,
    ) -> None:
        self.workers = workers if workers is not None else (os.cpu_count() or 1)
        if self.workers < 1:
            raise ValueError(f"workers must be at least 1, got {self.workers}")
        if not timeout_ms > 0:
            raise ValueError(f"timeout_ms must be positive, got {timeout_ms}")
        if queue_size < 0:
            raise ValueError(f"queue_size must be 0 or more, got {queue_size}")
        self.timeout_ms = float(timeout_ms)
        self.metrics = metrics
        self._line: WorkerLine[_Slot] = WorkerLine(self.workers, queue_size)
        self.run_times = RunTimes()
        self._collector_thread: Collector | None = None
        self._collector_lock = threading.Lock()
        self._ids = itertools.count(1)
        self._id_prefix = f"{os.getpid()}-{id(self):x}-"
        self._stopping = False
        self._executor: ThreadPoolExecutor | None = None
        self._revive_queue: queue.Queue[tuple[_Slot | None, str, float]] = queue.Queue()
        if handler == RUN_JOB_HANDLER and start_method == "fork":
            warm()
        env = {} if limits is None else {
            LIMIT_ENV[name]: str(getattr(limits, name)) for name in LIMIT_ENV}
        self._slots = [
            _Slot(WorkerProcess(handler=handler, start_method=start_method, env=env), i)
            for i in range(self.workers)
        ]
        for slot in self._slots:
            slot.proc.start()
            self._release(slot, back=True)
        self._untrack = metrics.track(BACKEND, self._line.counts) if metrics else None
        self._supervisor = threading.Thread(
            target=self._supervise, name="toolcodec-pool-supervisor", daemon=True
        )
        self._supervisor.start()

    # -- calls -------------------------------------------------------------------------

    def submit(self, op: str, payload: dict, *, timeout_ms: float | None = None,
               arrived: float | None = None) -> dict:
        """Run one job; returns the envelope within the budget (plus a small grace).

        ``arrived`` (a ``time.monotonic()``) is when the budget started, if before this call.
        """
        signal = _thread_signal()
        trip = self._call(op, payload, self._budget(timeout_ms), signal, arrived)
        ready = False
        try:
            target, deadline = next(trip)
            while True:
                timeout = None if deadline is None else deadline - time.monotonic()
                try:
                    if isinstance(target, Waiter):
                        ready = signal.wait(timeout)
                    else:
                        ready = target.proc.poll(timeout)
                except BaseException as exc:  # interrupted: the trip cleans up and re-raises
                    _local.signal = None
                    trip.throw(exc)
                    raise
                target, deadline = trip.send(ready)
        except StopIteration as stop:
            return stop.value

    async def asubmit(self, op: str, payload: dict, *, timeout_ms: float | None = None,
                      arrived: float | None = None) -> dict:
        """Like :meth:`submit`, without blocking the event loop (no thread per call).

        The answer is read, and the worker released, by the collector thread as soon as it
        arrives (``toolcodec.pool.collector``), whenever the loop gets back to this call.
        """
        signal = _LoopSignal(asyncio.get_running_loop())

        def on_sent(slot: _Slot) -> None:  # the releaser started this job: watch it now,
            signal.answer = self._watch(op, slot, signal.loop)  # not when the loop gets here

        signal.on_sent = on_sent
        trip = self._call(op, payload, self._budget(timeout_ms), signal, arrived)
        ready: bool | _Answer = False
        try:
            target, deadline = next(trip)
            while True:
                timeout = None if deadline is None else max(deadline - time.monotonic(), 0.0)
                try:
                    if isinstance(target, Waiter):
                        ready = await signal.wait(timeout)
                    else:
                        ready = await self._collected(op, target, timeout, signal)
                except BaseException as exc:  # cancelled: the trip cleans up and re-raises
                    trip.throw(exc)
                    raise
                target, deadline = trip.send(ready)
        except StopIteration as stop:
            return stop.value

    async def _collected(self, op: str, slot: _Slot, timeout: float | None,
                         signal: _LoopSignal) -> bool | _Answer:
        """Wait for the collector to read the answer: the answer (the worker is released or
        being replaced), or False at the deadline with the worker still this caller's."""
        answer, signal.answer = signal.answer, None
        if answer is None:  # this caller sent the job itself
            answer = self._watch(op, slot, signal.loop)
            if answer is None:
                return True  # the worker is gone: the trip's own read reports it
        collector = self._collector()
        try:
            await asyncio.wait_for(asyncio.shield(answer.ready), timeout)
            return answer
        except TimeoutError:
            pass
        except BaseException:
            if not collector.unwatch(answer.fd, answer.done):
                slot.collected = True  # the collector owns the worker now
            raise
        if collector.unwatch(answer.fd, answer.done):
            return False
        await answer.ready  # the collector is reading it: an instant
        return answer

    def _watch(self, op: str, slot: _Slot, loop: asyncio.AbstractEventLoop) -> _Answer | None:
        """Have the collector read the answer of the job just sent to ``slot`` (None if the
        worker is gone). Any thread: the answer's future is only set through the loop."""
        try:
            fd = slot.proc.fileno()
        except WorkerDied:
            return None
        answer = _Answer(loop.create_future(), fd)

        def done() -> None:  # on the collector thread
            try:
                answer.out = self._collect(op, slot)
            except Exception as exc:  # noqa: BLE001 - an unreadable answer: the worker goes
                self._revive(slot, "crash")
                answer.out = error_envelope(op, "worker_lost", WORKER_LOST,
                                            f"the answer could not be read: {exc}")
            answer.at = time.monotonic()
            try:
                loop.call_soon_threadsafe(answer.arrived)
            except RuntimeError:
                pass  # the loop has closed: nobody waits

        answer.done = done
        self._collector().watch(fd, done)
        return answer

    def _collector(self) -> Collector:
        collector = self._collector_thread
        if collector is None:
            with self._collector_lock:
                collector = self._collector_thread
                if collector is None:
                    collector = Collector()
                    collector.start()
                    self._collector_thread = collector
        return collector

    def map(
        self, op: str, payloads: Iterable[dict], *, timeout_ms: float | None = None
    ) -> list[dict]:
        """Run one job per payload concurrently; envelopes in the payloads' order.

        At most ``workers`` of them are in flight at once, so each gets its full budget
        from the moment it is handed to the pool rather than queueing behind its siblings.
        """
        items = list(payloads)
        if not items:
            return []
        if self._executor is None:
            self._executor = ThreadPoolExecutor(self.workers, thread_name_prefix="toolcodec-map")
        futures = [
            self._executor.submit(self.submit, op, item, timeout_ms=timeout_ms) for item in items
        ]
        return [f.result() for f in futures]

    def counts(self) -> dict[str, int]:
        """Workers ``idle``, ``busy`` (held by a caller), ``starting``; callers ``waiting``."""
        return self._line.counts()

    def live_workers(self) -> int:
        """Workers running or ready to run a job (not being re-forked)."""
        counts = self._line.counts()
        return counts["idle"] + counts["busy"]

    # -- the round trip ----------------------------------------------------------------

    def _call(self, op: str, payload: dict, budget: float, signal: Any,
              arrived: float | None = None) -> _Trip:
        """One call, from encoding the job to the completed envelope."""
        now = time.monotonic()
        start = now if arrived is None else min(arrived, now)
        deadline = start + budget
        data = self._encode(op, payload, deadline - now)
        if isinstance(data, dict):  # not JSON data: answered without a worker
            out = data
        else:
            times = _TripTimes(op, start, deadline, self.run_times)
            out = yield from self._round_trip(op, data, times, signal)
        envelope = complete(out, op, BACKEND, start)
        if self.metrics is not None:
            self.metrics.observe(op, BACKEND, envelope)
        return envelope

    def _round_trip(self, op: str, data: bytes, times: _TripTimes, signal: Any) -> _Trip:
        while True:
            try:
                slot, waiter = self._line.take_or_wait(
                    signal.arm(), (data, times, getattr(signal, "on_sent", None)))
            except (QueueFull, Closed) as exc:
                return self._rejected(op, exc)
            sent_at = 0.0
            if waiter is not None:
                slot, sent_at = yield from self._handed_over(waiter, times.start_by(), signal)
            if slot is None:
                return self._shed(op, times)
            if sent_at:
                break
            sent = self._deliver(slot, data, times.start_by())
            if sent is None:
                return self._shed(op, times)
            if sent:
                sent_at = time.monotonic()
                break  # else the worker had died while idle: the job never left, try again
        try:
            answered = yield slot, times.deadline
        except BaseException:  # the caller went away mid-job: nobody will read the answer
            if slot.collected:
                slot.collected = False  # the collector read it and gave the worker back
            else:
                self._revive(slot, "timeout", _grace(times.deadline - time.monotonic()))
            raise
        if isinstance(answered, _Answer):  # read by the collector, the worker handled
            out, ended = answered.out, answered.at
        # A caller whose own thread or event loop was slow to wake may find the answer
        # already there at its deadline: kept, as the worker sent it (``ok`` only if the job
        # finished by its deadline; ``run_job``).
        elif not answered and not slot.proc.poll(0):
            grace = _grace(times.budget)
            self._revive(slot, "timeout", grace)
            return self._timeout(op, times.budget, f"worker {slot.proc.pid} overran; it is "
                                 f"replaced unless it answers within {grace * 1000:g} ms")
        else:
            out, ended = self._collect(op, slot), time.monotonic()
        if out.get("status") == "ok":
            self.run_times.observe(op, ended - sent_at)
        return out

    def _handed_over(
        self, waiter: Waiter[_Slot], start_by: float, signal: Any
    ) -> Generator[_Wait, bool, tuple[_Slot | None, float]]:
        """Wait in line until ``start_by``: the worker handed over (None if none was) and
        when the releaser started the job on it (0.0 if it did not)."""
        try:
            if not (yield waiter, start_by):
                if self._line.leave(waiter) is None:
                    return None, False
                yield waiter, None  # handed over at the last instant: the releaser is finishing
        except BaseException:  # the caller went away: give back what it was handed
            if self._line.leave(waiter) is not None:
                signal.after(lambda: self._settle(waiter, signal))
            raise
        return waiter.item, waiter.started

    def _settle(self, waiter: Waiter[_Slot], signal: Any) -> None:
        """Give back a worker handed to a caller that has gone away."""
        if waiter.item is None:
            return
        if waiter.started:
            answer = getattr(signal, "answer", None)
            if answer is not None and not self._collector().unwatch(answer.fd, answer.done):
                return  # the collector has read the answer and given the worker back
            self._revive(waiter.item, "timeout", _grace(waiter.job[1].deadline - time.monotonic()))
        else:
            self._release(waiter.item)

    def _release(self, slot: _Slot, *, back: bool = False) -> None:
        """Give a worker to the longest waiter, starting that waiter's job on it, or park it."""
        dropped: list[Waiter[_Slot]] = []
        waiter = self._line.release(slot, back=back, can_start=_can_start, dropped=dropped)
        for late in dropped:  # each finds no worker and answers that its job was shed
            late.notify()
        if waiter is None:
            return
        data, _, on_sent = waiter.job
        try:
            waiter.started = time.monotonic()
            slot.proc.send_encoded(data)
        except WorkerDied:
            waiter.started = 0.0  # the waiter sends itself, finds the worker dead, replaces it
        else:
            if on_sent is not None:
                on_sent(slot)
        waiter.notify()

    def _deliver(self, slot: _Slot, data: bytes, start_by: float) -> bool | None:
        """Send the job: True; False if the worker had died while idle (the job never left);
        None if its time to start passed first (the worker is given back unused)."""
        if time.monotonic() >= start_by:
            self._release(slot)
            return None
        try:
            slot.proc.send_encoded(data)
            return True
        except WorkerDied:
            self._revive(slot, "crash")
            return False

    def _collect(self, op: str, slot: _Slot) -> dict:
        try:
            out = slot.proc.recv()
        except WorkerDied as exc:
            self._revive(slot, "crash")
            return error_envelope(op, "worker_lost", WORKER_LOST, f"{exc}; the job has no result")
        self._release(slot)
        return out

    def _encode(self, op: str, payload: dict, left: float) -> bytes | dict:
        job = {
            "id": f"{self._id_prefix}{next(self._ids)}",
            "op": op,
            "payload": payload,
            "deadline": time.time() + left,
        }
        try:
            return orjson.dumps(job)
        except TypeError as exc:
            return error_envelope(op, "error", BAD_REQUEST, f"payload is not JSON data: {exc}")

    def _budget(self, timeout_ms: float | None) -> float:
        ms = self.timeout_ms if timeout_ms is None else float(timeout_ms)
        return min(ms, MAX_TIMEOUT_MS) / 1000.0  # Pool has checked it; waits need a bound

    @staticmethod
    def _timeout(op: str, budget: float, why: str) -> dict:
        ms = budget * 1000.0
        return error_envelope(op, "timeout", TIMEOUT, f"no answer within {ms:g} ms ({why})")

    def _rejected(self, op: str, exc: Exception) -> dict:
        closed = isinstance(exc, Closed)
        why = "the pool is closed" if closed else f"queue full: {exc}"
        return error_envelope(op, "rejected", REJECTED, f"job not accepted: {why}",
                              reason=CLOSED if closed else QUEUE_FULL)

    def _shed(self, op: str, times: _TripTimes) -> dict:
        self.run_times.shed(op)
        return shed_envelope(op, times.budget, time.monotonic() - times.start,
                             times.deadline - times.start_by())

    # -- supervision -------------------------------------------------------------------

    def _revive(self, slot: _Slot, reason: str, grace: float = 0.0) -> None:
        """Hand a worker that timed out or died to the supervisor (off the caller's path);
        one that timed out may answer within ``grace`` seconds and be kept."""
        self._line.away()
        self._revive_queue.put((slot, reason, grace))

    def _supervise(self) -> None:
        """Replace crashed workers; give a worker whose job overran its budget one more
        budget to answer before killing it (several such workers wait side by side)."""
        overran: dict[_Slot, float] = {}  # worker: until when its late answer is awaited
        while True:
            # while workers are overran, look at their sockets every few ms: one that answers
            # early in its grace is back at work at once, not at the end of the grace
            wait = None if not overran else min(
                max(min(overran.values()) - time.monotonic(), 0), OVERRUN_POLL_S)
            try:
                slot, reason, grace = self._revive_queue.get(timeout=wait)
            except queue.Empty:
                slot = None
                reason, grace = "", 0.0
            else:
                if slot is None:
                    return
            if self._stopping:
                for stuck in [*overran, *([slot] if slot is not None else [])]:
                    stuck.proc.kill()
                overran.clear()
                continue
            if slot is not None and reason == "timeout":
                overran[slot] = time.monotonic() + grace
            elif slot is not None:
                self._respawn(slot, reason)
                self._release(slot, back=True)
            now = time.monotonic()
            for late in list(overran):
                answered = _answered(late.proc)
                if answered or now >= overran[late]:
                    del overran[late]
                    if not answered:
                        self._respawn(late, "timeout")
                    self._release(late, back=True)

    def _respawn(self, slot: _Slot, reason: str) -> None:
        while True:
            try:
                slot.proc.restart()
                break
            except Exception:  # noqa: BLE001 - fork failed (memory, pid limit): retry soon
                if self._stopping:
                    return
                time.sleep(0.05)
        if self.metrics is not None:
            self.metrics.restarted(BACKEND, reason)

    # -- shutdown ----------------------------------------------------------------------

    def close(self, timeout: float = 5.0) -> None:
        """Admit no new calls, let in-flight ones finish for up to ``timeout`` s, stop workers."""
        if self._stopping:
            return
        end = time.monotonic() + timeout
        self._line.close()
        self._line.wait_idle(timeout)
        self._stopping = True
        self._revive_queue.put((None, "", 0.0))
        self._supervisor.join(max(end - time.monotonic(), 1.0))
        for slot in self._slots:
            slot.proc.kill()
        if self._collector_thread is not None:
            self._collector_thread.stop()
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
        if self._untrack is not None:
            self._untrack()

    @property
    def pids(self) -> list[int | None]:
        """The worker processes' ids (for tests and diagnostics)."""
        return [slot.proc.pid for slot in self._slots]


def _can_start(waiter: Waiter[_Slot]) -> bool:
    """Whether a caller in line may still start its job (see ``_TripTimes.start_by``)."""
    return time.monotonic() < waiter.job[1].start_by()


# How long a worker whose job overran is awaited before it is killed: a first-use compile of
# a tool set takes 5 ms on a quiet core and 50+ ms on a loaded one, and killing the worker
# then only has its next job compile (and overrun) again; a stuck job is still stopped soon.
MIN_GRACE_S, MAX_GRACE_S = 0.25, 1.0
OVERRUN_POLL_S = 0.002


def _grace(budget: float) -> float:
    """How long an overrun job may still answer and keep its worker: one more budget,
    within ``MIN_GRACE_S`` and ``MAX_GRACE_S``."""
    return min(max(budget, MIN_GRACE_S), MAX_GRACE_S)


def _answered(proc: WorkerProcess) -> bool:
    """True if the overrun job has finished after all (its answer is dropped), leaving the
    worker usable: a job that overran by a little, often one that compiled a new tool set,
    keeps its worker and what the worker compiled, where a kill would lose both and have
    the next job of that tool set compile (and overrun) again."""
    try:
        if proc.poll(0):
            proc.recv()
            return True
    except WorkerDied:
        pass
    return False
