"""The process backend: long-lived worker processes, one dispatcher thread, hard deadlines.

A caller encodes its job, posts a :class:`~toolcodec.pool.dispatcher.Ticket` to the pool's
dispatcher and waits for it to be settled: ``submit`` on a lock, ``asubmit`` on a future of
its event loop. The dispatcher (``toolcodec.pool.dispatcher``) is the one owner of the
workers: it sends jobs, reads answers without ever blocking, kills a worker whose job is
still running at its deadline and puts a spare started beforehand in its place.

The invariants (docs/pool.md, "Invariants"):

* every call returns by its deadline plus :data:`CALLER_GRACE_S`, whatever a job does: the
  dispatcher answers at the deadline, and a caller that has heard nothing by then (the
  dispatcher stalled or died) stops waiting and answers ``timeout`` itself. The deadline
  moves only by the time the job's codec build took (at most ``BUILD_CAP_S``): building a
  tool set is not parsing, and :meth:`ProcessBackend.prepare` takes it off the path;
* a dispatcher thread that died is noticed by the next call or health check, which starts
  a new one with fresh workers (``toolcodec_worker_restarts_total{reason="dispatcher"}``);
* no lock is shared between callers and workers' state; a ticket is settled once.
"""

from __future__ import annotations

import asyncio
import atexit
import itertools
import logging
import os
import threading
import time
import weakref
from collections import OrderedDict
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor

import orjson
from toolcodec.pool.admission import RunTimes
from toolcodec.pool.dispatcher import PREPARED_KEEP, SELECTORS, Dispatcher, Ticket
from toolcodec.pool.door import MAX_TIMEOUT_MS
from toolcodec.results.errors import BAD_REQUEST, REJECTED, TIMEOUT
from toolcodec.results.limits import Limits
from toolcodec.worker.child import RUN_JOB_HANDLER, WorkerProcess
from toolcodec.worker.deadlines import CLOSED, shed_envelope
from toolcodec.worker.envelope import complete, error_envelope
from toolcodec.worker.jobs import warm
from toolcodec.worker.limits import ENV as LIMIT_ENV
from toolcodec.worker.metrics import Metrics

BACKEND = "process"
DEFAULT_QUEUE_SIZE = 1024
# Processes started beside the workers. A worker killed at a deadline, or whose job is set
# aside as a likely runaway, gives its slot to a spare at once; two keep the line moving
# when two runaways overlap (measured: tests/benchmarks/bench_deadline.py).
DEFAULT_SPARES = 2
# How long past its deadline a caller waits for the dispatcher before answering on its own:
# the dispatcher answers at the deadline; this covers its thread being scheduled late.
CALLER_GRACE_S = 0.025

log = logging.getLogger("toolcodec.pool")

# Pools still open when the interpreter exits are closed first: multiprocessing's own exit
# hook terminates the workers, and a dispatcher still running would replace them with new
# processes that it then waits for forever. atexit runs hooks last-registered first.
_OPEN: weakref.WeakSet[ProcessBackend] = weakref.WeakSet()


@atexit.register
def _close_open_pools() -> None:
    for backend in list(_OPEN):
        backend.close(timeout=0.0)


class ProcessBackend:
    """A pool of ``workers`` processes with hard per-job deadlines.

    ``timeout_ms`` is the default budget of a call, counted from the moment ``submit`` is
    called (or from ``arrived``, when the caller's request waited before that), waiting for a
    free worker included. A job starts only while the budget still holds its expected run
    time (:class:`RunTimes`); one that cannot start by then is shed (``rejected``, reason
    ``shed``). ``queue_size`` bounds how many callers may wait for a worker; beyond it a call
    is answered ``rejected`` (reason ``queue_full``) at once. ``spares`` processes are kept
    started beside the workers, so a worker killed at a deadline is replaced at once.
    ``limits`` are the operator's ceilings for the workers (by default their environment's).
    ``selector`` picks the ``selectors`` class the dispatcher waits with (``"default"``: the
    platform's best; ``"poll"``, ``"select"``…). Budgets and payloads are checked by ``Pool``
    before they get here.
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
        spares: int = DEFAULT_SPARES,
        selector: str = "default",
    ) -> None:
        self.workers = workers if workers is not None else (os.cpu_count() or 1)
        if self.workers < 1:
            raise ValueError(f"workers must be at least 1, got {self.workers}")
        if not timeout_ms > 0:
            raise ValueError(f"timeout_ms must be positive, got {timeout_ms}")
        if queue_size < 0:
            raise ValueError(f"queue_size must be 0 or more, got {queue_size}")
        if spares < 0:
            raise ValueError(f"spares must be 0 or more, got {spares}")
        if selector not in SELECTORS:
            raise ValueError(f"selector must be one of {sorted(SELECTORS)}, got {selector!r}")
        self.timeout_ms = float(timeout_ms)
        self.queue_size = queue_size
        self.spares = spares
        self.selector = selector
        self.metrics = metrics
        self.run_times = RunTimes()
        self.heals = 0  # dispatchers started again after one died
        self.unanswered = 0  # calls whose caller answered timeout itself (no word in time)
        self._next_warning = 0.0
        self._ids = itertools.count(1)
        self._id_prefix = f"{os.getpid()}-{id(self):x}-"
        self._closed = False
        self._heal_lock = threading.Lock()  # taken only to replace a dead dispatcher
        self._prepared: OrderedDict[bytes, None] = OrderedDict()  # tool sets asked for lately
        self._executor: ThreadPoolExecutor | None = None
        self._handler, self._start_method = handler, start_method
        self._env = {} if limits is None else {
            LIMIT_ENV[name]: str(getattr(limits, name)) for name in LIMIT_ENV}
        if handler == RUN_JOB_HANDLER and start_method == "fork":
            warm()
        self._dispatcher = self._start_dispatcher()
        self._untrack = metrics.track(BACKEND, self.counts) if metrics else None
        _OPEN.add(self)

    # -- calls -------------------------------------------------------------------------

    def submit(self, op: str, payload: dict, *, timeout_ms: float | None = None,
               arrived: float | None = None) -> dict:
        """Run one job; returns the envelope by the deadline plus a small grace.

        ``arrived`` (a ``time.monotonic()``) is when the budget started, if before this call.
        """
        ticket = self._ticket(op, payload, timeout_ms, arrived)
        if isinstance(ticket, dict):
            return ticket
        lock = threading.Lock()
        lock.acquire()
        ticket.notify = lock.release
        dispatcher = self._post(ticket)
        while ticket.out is None:
            left = ticket.deadline + CALLER_GRACE_S - time.monotonic()
            if left > 0 and lock.acquire(timeout=left):
                break
            if ticket.deadline + CALLER_GRACE_S <= time.monotonic() and ticket.out is None:
                return self._finish(op, ticket, self._unanswered(ticket, dispatcher))
        return self._finish(op, ticket, ticket.out)

    async def asubmit(self, op: str, payload: dict, *, timeout_ms: float | None = None,
                      arrived: float | None = None) -> dict:
        """Like :meth:`submit`, without blocking the event loop (no thread per call).

        Cancelling the call stops waiting for it; a job already running on a worker runs on
        (to its answer or its deadline) and its answer is dropped.
        """
        ticket = self._ticket(op, payload, timeout_ms, arrived)
        if isinstance(ticket, dict):
            return ticket
        loop = asyncio.get_running_loop()
        answered = loop.create_future()

        def notify() -> None:  # on the dispatcher's thread
            try:
                loop.call_soon_threadsafe(_resolve, answered)
            except RuntimeError:  # the loop has closed: nobody waits
                pass

        ticket.notify = notify
        dispatcher = self._post(ticket)
        try:
            while ticket.out is None:
                left = ticket.deadline + CALLER_GRACE_S - time.monotonic()
                if left > 0:
                    try:
                        await asyncio.wait_for(asyncio.shield(answered), left)
                        break
                    except TimeoutError:
                        pass
                if ticket.deadline + CALLER_GRACE_S <= time.monotonic() and ticket.out is None:
                    return self._finish(op, ticket, self._unanswered(ticket, dispatcher))
        except BaseException:  # cancelled: the dispatcher drops the job if it has not sent it
            ticket.abandoned = True
            dispatcher.post("forget", ticket)
            raise
        return self._finish(op, ticket, ticket.out)

    def prepare(self, tools: list | None, options: dict | None = None, *,
                key: bytes | None = None) -> bool:
        """Have every worker build the codec for ``tools`` and ``options`` when it is idle,
        so that decode jobs with them spend their budget parsing. Returns at once; False if
        they are not JSON data (nothing to prepare). Repeating it is cheap. ``key``: their
        canonical JSON (``orjson.OPT_SORT_KEYS``), when the caller holds it."""
        payload = {"tools": tools} if options is None else {"tools": tools, "options": options}
        if key is None:
            try:
                key = orjson.dumps(payload, option=orjson.OPT_SORT_KEYS)
            except TypeError:
                return False
        try:  # callers on several threads may race here: at worst one asks twice
            if key in self._prepared:  # asked for lately: the dispatcher has it (a proxy
                self._prepared.move_to_end(key)  # asks on every request)
                return True
            self._prepared[key] = None
            if len(self._prepared) > PREPARED_KEEP:
                self._prepared.popitem(last=False)
        except KeyError:
            pass
        data = orjson.dumps({"id": f"{self._id_prefix}prepare", "op": "prepare",
                             "payload": payload, "deadline": None})
        if not self._closed:
            self._live_dispatcher().post("prepare", key, data)
        return True

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
        """Workers ``idle``, ``busy`` (running a job), ``starting``; callers ``waiting``."""
        return self._dispatcher.counts

    def live_workers(self) -> int:
        """Workers running or ready to run a job; 0 while the dispatcher is down (a check
        that finds it dead starts a new one)."""
        if not self._closed and not self._live_dispatcher().is_alive():
            return 0
        counts = self._dispatcher.counts
        return counts["idle"] + counts["busy"]

    def health(self) -> dict[str, object]:
        """The pool's threads: whether each runs, how often the dispatcher was replaced, how
        many of its turns failed (each logged) and how many callers answered ``timeout``
        themselves because it said nothing by their deadline plus the grace."""
        dispatcher = self._dispatcher
        return {"dispatcher": dispatcher.is_alive(), "spawner": dispatcher.spawner.is_alive(),
                "heals": self.heals, "turn_errors": dispatcher.errors,
                "unanswered": self.unanswered}

    @property
    def pids(self) -> list[int | None]:
        """The worker processes' ids, slot by slot (None: being replaced)."""
        return self._dispatcher.pids()

    # -- the call's parts --------------------------------------------------------------

    def _ticket(self, op: str, payload: dict, timeout_ms: float | None,
                arrived: float | None) -> Ticket | dict:
        """The call's ticket, or its envelope when it is answered without a worker."""
        now = time.monotonic()
        start = now if arrived is None else min(arrived, now)
        budget = min(self.timeout_ms if timeout_ms is None else float(timeout_ms),
                     MAX_TIMEOUT_MS) / 1000.0
        deadline = start + budget
        if self._closed:
            return self._finish(op, None, error_envelope(
                op, "rejected", REJECTED, "job not accepted: the pool is closed",
                reason=CLOSED), start)
        job = {"id": f"{self._id_prefix}{next(self._ids)}", "op": op, "payload": payload,
               "deadline": time.time() + (deadline - now)}
        try:
            data = orjson.dumps(job)
        except TypeError as exc:
            return self._finish(op, None, error_envelope(
                op, "error", BAD_REQUEST, f"payload is not JSON data: {exc}"), start)
        ticket = Ticket(op, data, start, deadline, self.run_times)
        if now >= (start_by := ticket.start_by()):  # its budget was spent before the call
            self.run_times.shed(op)
            return self._finish(op, ticket, shed_envelope(op, ticket.budget, now - start,
                                                          deadline - start_by))
        return ticket

    def _post(self, ticket: Ticket) -> Dispatcher:
        dispatcher = self._live_dispatcher()
        dispatcher.post("call", ticket)
        return dispatcher

    def _finish(self, op: str, ticket: Ticket | None, out: dict,
                start: float | None = None) -> dict:
        envelope = complete(out, op, BACKEND, ticket.start if ticket is not None else start)
        if self.metrics is not None:
            self.metrics.observe(op, BACKEND, envelope)
        return envelope

    def _unanswered(self, ticket: Ticket, dispatcher: Dispatcher) -> dict:
        """The caller's own answer when the dispatcher said nothing by the deadline."""
        ticket.abandoned = True
        alive = dispatcher.is_alive()
        if not alive:
            self._live_dispatcher()  # starts a new one for the next calls
        why = "the pool's dispatcher was busy" if alive else "the pool's dispatcher had died"
        self.unanswered += 1
        now = time.monotonic()
        if now >= self._next_warning:  # at most one line a second: overload is no log flood
            self._next_warning = now + 1.0
            log.warning("toolcodec: a %s job got no answer by its deadline (%s); %d so far",
                        ticket.op, why, self.unanswered)
        ms = ticket.budget * 1000.0
        return error_envelope(ticket.op, "timeout", TIMEOUT,
                              f"no answer within {ms:g} ms ({why}; the caller stopped waiting)")

    # -- the dispatcher ----------------------------------------------------------------

    def _new_process(self) -> WorkerProcess:
        proc = WorkerProcess(handler=self._handler, start_method=self._start_method,
                             env=self._env, notices=True)
        proc.start()
        return proc

    def _start_dispatcher(self) -> Dispatcher:
        procs = [self._new_process() for _ in range(self.workers + self.spares)]
        restarted = (lambda reason: self.metrics.restarted(BACKEND, reason)) \
            if self.metrics is not None else (lambda reason: None)
        dispatcher = Dispatcher(procs[:self.workers], procs[self.workers:],
                                make=self._new_process, run_times=self.run_times,
                                queue_size=self.queue_size, restarted=restarted,
                                selector=self.selector)
        dispatcher.start()
        return dispatcher

    def _live_dispatcher(self) -> Dispatcher:
        """The dispatcher, started again if its thread has died (it is the one owner of the
        workers: a new one starts with new workers, and the old ones are killed)."""
        dispatcher = self._dispatcher
        if dispatcher.is_alive() or self._closed:
            return dispatcher
        with self._heal_lock:
            if self._dispatcher is dispatcher and not self._closed:
                log.error("toolcodec: the pool's dispatcher thread had died; starting a new one")
                self._dispatcher = self._start_dispatcher()
                self._prepared.clear()  # the new dispatcher has prepared nothing
                self.heals += 1
                if self.metrics is not None:
                    self.metrics.restarted(BACKEND, "dispatcher")
        return self._dispatcher

    # -- shutdown ----------------------------------------------------------------------

    def close(self, timeout: float = 5.0) -> None:
        """Admit no new calls, let in-flight ones finish for up to ``timeout`` s, stop workers."""
        if self._closed:
            return
        self._closed = True
        dispatcher = self._dispatcher
        dispatcher.post("close", time.monotonic() + timeout)
        dispatcher.join(timeout + 3.0)
        if self._executor is not None:
            self._executor.shutdown(wait=False, cancel_futures=True)
        if self._untrack is not None:
            self._untrack()


def _resolve(future: asyncio.Future) -> None:
    if not future.done():
        future.set_result(True)
