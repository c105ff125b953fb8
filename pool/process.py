"""The process backend: long-lived worker processes over pipes, killed at the deadline.

Each caller runs its own round trip: it takes an idle worker from the FIFO hand-off, writes
the job to the worker's pipe and waits on that pipe until its absolute deadline. No
dispatcher thread sits between caller and worker, which keeps a round trip in the tens of
microseconds. When the deadline passes the caller answers ``timeout`` at once and leaves the
worker to the supervisor thread, which SIGKILLs and re-forks it (a few milliseconds) and
hands it to the next waiter. SIGKILL from another process is the only stop that also works
while the worker is inside C code.
"""

from __future__ import annotations

import asyncio
import itertools
import os
import queue
import threading
import time
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import orjson

from codec.errors import BAD_REQUEST, REJECTED, TIMEOUT, WORKER_LOST
from pool.admission import Closed, HandOff, QueueFull, Waiter
from worker.child import WorkerDied, WorkerProcess
from worker.jobs import error_envelope, warm
from worker.metrics import Metrics

BACKEND = "process"
DEFAULT_QUEUE_SIZE = 1024


class _Slot:
    """One worker process and its place in the pool."""

    __slots__ = ("proc", "index")

    def __init__(self, proc: WorkerProcess, index: int) -> None:
        self.proc = proc
        self.index = index


class _StateGauges:
    """Exact per-state worker counts and queue depth for this pool, mirrored to metrics.

    Several pools may share one registry, so each adds and removes only its own share
    (``inc``/``dec``), and gives it back on :meth:`retire`.
    """

    def __init__(self, metrics: Metrics | None) -> None:
        self._lock = threading.Lock()
        self.counts = {"idle": 0, "busy": 0, "starting": 0, "waiting": 0}
        self._children: dict[str, Any] = {}
        if metrics is not None:
            for state in ("idle", "busy", "starting"):
                self._children[state] = metrics.workers.labels(BACKEND, state)
            self._children["waiting"] = metrics.queue_depth.labels(BACKEND)

    def move(self, src: str | None, dst: str | None, n: int = 1) -> None:
        with self._lock:
            for state, sign in ((src, -n), (dst, n)):
                if state is None:
                    continue
                self.counts[state] += sign
                child = self._children.get(state)
                if child is not None:
                    child.inc(sign)

    def retire(self) -> None:
        with self._lock:
            for state, n in self.counts.items():
                child = self._children.get(state)
                if child is not None and n:
                    child.dec(n)
                self.counts[state] = 0
            self._children = {}


class ProcessBackend:
    """A pool of ``workers`` processes with hard per-job deadlines.

    ``timeout_ms`` is the default budget of a call, counted from the moment ``submit`` is
    called (waiting for a free worker included). ``queue_size`` bounds how many callers may
    wait for a worker; beyond it ``submit`` answers ``rejected`` at once.
    """

    backend = BACKEND

    def __init__(
        self,
        *,
        workers: int | None = None,
        timeout_ms: float = 50,
        queue_size: int = DEFAULT_QUEUE_SIZE,
        metrics: Metrics | None = None,
        handler: str = "worker.jobs:run_job",
        start_method: str = "fork",
    ) -> None:
        self.workers = workers if workers is not None else (os.cpu_count() or 1)
        if self.workers < 1:
            raise ValueError(f"workers must be at least 1, got {self.workers}")
        if timeout_ms <= 0:
            raise ValueError(f"timeout_ms must be positive, got {timeout_ms}")
        if queue_size < 0:
            raise ValueError(f"queue_size must be 0 or more, got {queue_size}")
        self.timeout_ms = float(timeout_ms)
        self.metrics = metrics
        self._gauges = _StateGauges(metrics)
        self._handoff: HandOff[_Slot] = HandOff(
            queue_size,
            on_idle=lambda d: self._gauges.move("busy", "idle", d),
            on_waiting=lambda d: self._gauges.move(None, "waiting", d),
        )
        self._ids = itertools.count(1)
        self._id_prefix = f"{os.getpid()}-{id(self):x}-"
        self._active = 0
        self._active_cv = threading.Condition()
        self._stopping = False
        self._executor: ThreadPoolExecutor | None = None
        self._revive_queue: queue.SimpleQueue[tuple[_Slot | None, str]] = queue.SimpleQueue()
        if handler == "worker.jobs:run_job" and start_method == "fork":
            warm()
        self._slots = [
            _Slot(WorkerProcess(handler=handler, start_method=start_method), i)
            for i in range(self.workers)
        ]
        for slot in self._slots:
            self._gauges.move(None, "starting")
            slot.proc.start()
            self._gauges.move("starting", "busy")
            self._release(slot)
        self._supervisor = threading.Thread(
            target=self._supervise, name="toolcodec-pool-supervisor", daemon=True
        )
        self._supervisor.start()

    # -- calls -------------------------------------------------------------------------

    def submit(self, op: str, payload: dict, *, timeout_ms: float | None = None) -> dict:
        """Run one job; returns the envelope within the budget (plus a small grace)."""
        start = time.monotonic()
        budget = self._budget(timeout_ms)
        with self._active_cv:
            self._active += 1
        try:
            return self._finish(op, start, self._run(op, payload, start, budget))
        finally:
            self._done()

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

    async def asubmit(self, op: str, payload: dict, *, timeout_ms: float | None = None) -> dict:
        """Like :meth:`submit`, without blocking the event loop (no thread per call)."""
        start = time.monotonic()
        budget = self._budget(timeout_ms)
        with self._active_cv:
            self._active += 1
        try:
            return self._finish(op, start, await self._arun(op, payload, start, budget))
        finally:
            self._done()

    # -- the round trip ----------------------------------------------------------------

    def _run(self, op: str, payload: dict, start: float, budget: float) -> dict:
        deadline = start + budget
        data = self._encode(op, payload, budget)
        if isinstance(data, dict):
            return data
        while True:
            try:
                slot, started = self._acquire(data, deadline)
            except (QueueFull, Closed) as exc:
                return self._rejected(op, exc)
            running = self._start_on(slot, started, data, deadline)
            if running is None:
                return self._timeout(op, budget, "no worker became free")
            if running:
                break
        if not slot.proc.poll(deadline - time.monotonic()):
            self._revive(slot, "timeout")
            return self._timeout(op, budget, f"worker {slot.proc.pid} is being replaced")
        return self._collect(op, slot)

    def _start_on(
        self, slot: _Slot | None, started: bool, data: bytes, deadline: float
    ) -> bool | None:
        """After an acquire: True when the job runs on ``slot``, False to try another worker
        (the one handed over had died while idle), None when the deadline passed first."""
        if slot is None:
            return None
        if started:
            return True
        return self._deliver(slot, data, deadline)

    def _acquire(self, data: bytes, deadline: float) -> tuple[_Slot | None, bool]:
        """A worker for this caller, and whether the releaser already started the job on it."""
        event = threading.Event()
        slot, waiter = self._handoff.take_or_wait(event.set, (data, deadline))
        if waiter is None:
            return slot, False
        if not event.wait(max(deadline - time.monotonic(), 0.0)):
            if self._handoff.leave(waiter) is None:
                return None, False
            event.wait()  # handed over at the last instant: the releaser is finishing
        return waiter.item, waiter.started

    async def _arun(self, op: str, payload: dict, start: float, budget: float) -> dict:
        deadline = start + budget
        data = self._encode(op, payload, budget)
        if isinstance(data, dict):
            return data
        while True:
            try:
                slot, started = await self._aacquire(data, deadline)
            except (QueueFull, Closed) as exc:
                return self._rejected(op, exc)
            running = self._start_on(slot, started, data, deadline)
            if running is None:
                return self._timeout(op, budget, "no worker became free")
            if running:
                break
        try:
            ready = await _readable(slot.proc.fileno(), deadline - time.monotonic())
        except BaseException:  # cancelled mid-job: nobody will read the answer
            self._revive(slot, "timeout")
            raise
        if not ready:
            self._revive(slot, "timeout")
            return self._timeout(op, budget, f"worker {slot.proc.pid} is being replaced")
        return self._collect(op, slot)

    async def _aacquire(self, data: bytes, deadline: float) -> tuple[_Slot | None, bool]:
        loop = asyncio.get_running_loop()
        handed = loop.create_future()
        state = {"woken": False, "abandoned": False}

        def wake() -> None:  # runs in the loop, after the releaser has finished
            state["woken"] = True
            if state["abandoned"]:
                self._settle(waiter)
            elif not handed.done():
                handed.set_result(None)

        slot, waiter = self._handoff.take_or_wait(
            lambda: loop.call_soon_threadsafe(wake), (data, deadline)
        )
        if waiter is None:
            return slot, False

        def abandon() -> None:  # cancelled while holding a worker: give it back
            state["abandoned"] = True
            if state["woken"]:
                self._settle(waiter)  # else wake() does it once the releaser is done

        try:
            await asyncio.wait_for(asyncio.shield(handed), max(deadline - time.monotonic(), 0))
        except TimeoutError:
            if self._handoff.leave(waiter) is None:
                return None, False
            try:
                await asyncio.shield(handed)  # handed over at the last instant
            except BaseException:
                abandon()
                raise
        except BaseException:
            if self._handoff.leave(waiter) is not None:
                abandon()
            raise
        return waiter.item, waiter.started

    def _settle(self, waiter: Waiter[_Slot]) -> None:
        """Give back a worker handed to a caller that has gone away."""
        if waiter.item is None:
            return
        if waiter.started:
            self._revive(waiter.item, "timeout")  # its job runs for nobody: stop it
        else:
            self._release(waiter.item)

    def _release(self, slot: _Slot) -> None:
        """Give a worker to the longest waiter, starting that waiter's job on it, or park it."""
        waiter = self._handoff.release(slot)
        if waiter is None:
            return
        data, deadline = waiter.job
        if time.monotonic() < deadline:
            try:
                slot.proc.send_encoded(data)
                waiter.started = True
            except WorkerDied:
                pass  # the waiter sends itself, finds the worker dead and has it replaced
        waiter.notify()

    def _deliver(self, slot: _Slot, data: bytes, deadline: float) -> bool | None:
        """Send the job: True; False if the worker had died while idle (the job never left);
        None if the deadline passed first (the worker is given back unused)."""
        if time.monotonic() >= deadline:
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

    def _encode(self, op: str, payload: dict, budget: float) -> bytes | dict:
        job = {
            "id": f"{self._id_prefix}{next(self._ids)}",
            "op": op,
            "payload": payload,
            "deadline": time.time() + budget,
        }
        try:
            return orjson.dumps(job)
        except TypeError as exc:
            return error_envelope(op, "error", BAD_REQUEST, f"payload is not JSON data: {exc}")

    def _budget(self, timeout_ms: float | None) -> float:
        ms = self.timeout_ms if timeout_ms is None else float(timeout_ms)
        return max(ms, 0.0) / 1000.0

    def _finish(self, op: str, start: float, out: dict) -> dict:
        envelope = {
            "status": out.get("status"),
            "op": op,
            "backend": BACKEND,
            "result": out.get("result"),
            "error": out.get("error"),
            "elapsed_ms": (time.monotonic() - start) * 1000.0,
        }
        if self.metrics is not None:
            self.metrics.observe(op, BACKEND, envelope)
        return envelope

    def _done(self) -> None:
        with self._active_cv:
            self._active -= 1
            if not self._active:
                self._active_cv.notify_all()

    @staticmethod
    def _timeout(op: str, budget: float, why: str) -> dict:
        ms = budget * 1000.0
        return error_envelope(op, "timeout", TIMEOUT, f"no answer within {ms:g} ms ({why})")

    def _rejected(self, op: str, exc: Exception) -> dict:
        why = "the pool is closed" if isinstance(exc, Closed) else f"queue full: {exc}"
        return error_envelope(op, "rejected", REJECTED, f"job not accepted: {why}")

    # -- supervision -------------------------------------------------------------------

    def _revive(self, slot: _Slot, reason: str) -> None:
        """Hand a worker that timed out or died to the supervisor (off the caller's path)."""
        self._gauges.move("busy", "starting")
        self._revive_queue.put((slot, reason))

    def _supervise(self) -> None:
        while True:
            slot, reason = self._revive_queue.get()
            if slot is None:
                return
            if self._stopping:
                slot.proc.kill()
                self._gauges.move("starting", None)
                continue
            if not (reason == "timeout" and _answered_late(slot.proc)):
                self._respawn(slot, reason)
            self._gauges.move("starting", "busy")
            self._release(slot)

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
        self._handoff.close()
        end = time.monotonic() + timeout
        with self._active_cv:
            while self._active and (left := end - time.monotonic()) > 0:
                self._active_cv.wait(left)
        self._stopping = True
        self._revive_queue.put((None, ""))
        self._supervisor.join(max(end - time.monotonic(), 1.0))
        for slot in self._slots:
            slot.proc.kill()
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
        self._gauges.retire()

    def live_workers(self) -> int:
        """Workers running or ready to run a job (not being re-forked)."""
        counts = self._gauges.counts
        return counts["idle"] + counts["busy"]

    @property
    def pids(self) -> list[int | None]:
        """The worker processes' ids (for tests and diagnostics)."""
        return [slot.proc.pid for slot in self._slots]


def _answered_late(proc: WorkerProcess) -> bool:
    """True if the timed-out job has finished after all, leaving the worker usable."""
    try:
        # A short grace: a job handed over at its deadline usually answers (as a timeout)
        # within a millisecond, and keeping the worker beats a re-fork.
        if proc.poll(0.002):
            proc.recv()
            return True
    except WorkerDied:
        pass
    return False


async def _readable(fd: int, timeout: float) -> bool:
    """Wait until ``fd`` is readable or ``timeout`` seconds pass, inside the event loop."""
    loop = asyncio.get_running_loop()
    ready = loop.create_future()

    def on_ready() -> None:
        if not ready.done():
            ready.set_result(True)

    loop.add_reader(fd, on_ready)
    try:
        return await asyncio.wait_for(ready, max(timeout, 0.0))
    except TimeoutError:
        return False
    finally:
        loop.remove_reader(fd)
