"""The process backend's one owner of worker state: a thread that hands jobs to workers,
reads their answers, keeps every deadline and replaces the workers that overran or died.

Callers never touch a worker. A caller posts a :class:`Ticket` (its job, encoded, and its
times) and waits for it to be settled; everything else happens here, on one thread, in
turns of one loop:

1. wait on a selector (``selectors``: epoll, kqueue, poll or select, whatever the platform
   has) for the workers' sockets and a wake-up pipe, until the next instant something is due;
2. read what each ready worker sent (non-blocking, ``toolcodec.pool.frames``): an answer
   settles its ticket and frees the worker, a notice that the job builds its codec moves its
   deadline (building a tool set is not parsing), an end of file is a crash;
3. take what callers and the spawner posted: new tickets, tool sets to prepare, new
   processes, a request to close;
4. expire: a job still running at its deadline is answered ``timeout`` and its worker is
   killed at once (SIGKILL) and replaced by a spare started beforehand, so a runaway costs
   its own answer and a few milliseconds of one slot, not its neighbours' capacity; a ticket
   that can no longer start in time is shed (``rejected``, reason ``shed``);
5. dispatch: the longest-waiting ticket to the next idle worker; idle workers with nothing
   to do build the tool sets the pool was asked to prepare.

Because one thread owns the workers, the line, the run-time estimates and the spares, no
lock is shared with callers: a ticket is settled exactly once, here, and a caller that gives
up (its own deadline passed, or it was cancelled) only marks it ``abandoned``. Forking and
reaping, which take milliseconds, happen on the spawner thread (:class:`Spawner`), which
hands new processes back through the same inbox.
"""

from __future__ import annotations

import heapq
import itertools
import logging
import os
import queue
import selectors
import signal
import socket
import sys
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from typing import Any

import orjson
from toolcodec.pool.admission import RunTimes
from toolcodec.pool.frames import FrameReader, FrameWriter
from toolcodec.results.errors import REJECTED, TIMEOUT, WORKER_LOST
from toolcodec.worker.child import WorkerDied, WorkerProcess
from toolcodec.worker.deadlines import CLOSED, QUEUE_FULL, shed_envelope
from toolcodec.worker.envelope import error_envelope
from toolcodec.worker.notices import BUILDING, BUILT, FRAME_KEY

log = logging.getLogger("toolcodec.pool")

# The longest a job's codec build may add to its deadline: building is not parsing, but a
# build that never ends is a stuck worker all the same.
BUILD_CAP_S = 1.0
# Tool sets a worker is asked to prepare when idle: the most recent ones, fewer than the
# codec's own cache holds (16) so that preparing never evicts a tool set in use.
PREPARED_KEEP = 8
# A job is set aside (a spare takes its slot) once it has run twice its op's expected run
# time, and at least this long, while others wait.
SUSPECT_AFTER_S = 0.002
MAX_TURN_WAIT_S = 0.5  # the loop looks at its spawner's health at least this often
SWITCH_INTERVAL_S = float(os.environ.get("TOOLCODEC_SWITCH_INTERVAL_S", "0.0005"))

SELECTORS: dict[str, Callable[[], selectors.BaseSelector]] = {
    "default": selectors.DefaultSelector,
    **{name: getattr(selectors, cls) for name, cls in (
        ("epoll", "EpollSelector"), ("kqueue", "KqueueSelector"), ("devpoll", "DevpollSelector"),
        ("poll", "PollSelector"), ("select", "SelectSelector")) if hasattr(selectors, cls)},
}

_READ, _WRITE = selectors.EVENT_READ, selectors.EVENT_WRITE


class Ticket:
    """One call as the dispatcher sees it.

    ``deadline`` (a ``time.monotonic()``) is when the job must have answered; the dispatcher
    moves it later only by the time the job's codec build took (at most ``BUILD_CAP_S``), and
    a waiting caller re-reads it. ``out`` is set exactly once, by the dispatcher, before
    ``notify`` runs; ``abandoned`` is set by a caller that stopped waiting.
    """

    __slots__ = ("op", "data", "start", "deadline", "budget", "notify", "out", "abandoned",
                 "sent_at", "build_at", "parse_left", "_run_times")

    def __init__(self, op: str, data: bytes, start: float, deadline: float,
                 run_times: RunTimes) -> None:
        self.op, self.data, self.start, self.deadline = op, data, start, deadline
        self.budget = deadline - start
        self.notify: Callable[[], None] = _nothing
        self.out: dict | None = None
        self.abandoned = False
        self.sent_at = 0.0
        self.build_at = 0.0
        self.parse_left = 0.0
        self._run_times = run_times

    def start_by(self) -> float:
        """The last instant the job may be sent: its deadline less the run it needs, from
        the op's run times as they are now."""
        return self.deadline - self._run_times.reserve(self.op, self.budget)


def _nothing() -> None:
    pass


class _Worker:
    """A worker process in a slot: its socket, what it was sent, until when it may run."""

    __slots__ = ("proc", "sock", "reader", "writer", "ticket", "until", "prepared", "slot")

    def __init__(self, proc: WorkerProcess, prepared: int) -> None:
        self.proc = proc
        self.sock = proc.connection()
        self.sock.setblocking(False)
        self.reader = FrameReader()
        self.writer: FrameWriter | None = None
        self.ticket: Ticket | None = None
        self.until: float | None = None  # a job (or a prepare) is out; when it must end
        self.prepared = prepared  # how far into the prepare log this worker has built
        self.slot = SPARE  # its slot's index, or ASIDE, SPARE, GONE


# Where a worker is when it holds no slot: running a job set aside (registered with the
# selector, its slot given to a spare), waiting as a spare (not registered), or gone.
ASIDE, SPARE, GONE = -1, -2, -3


class Spawner(threading.Thread):
    """Forks new worker processes and kills and reaps old ones, off the dispatcher's turns.

    ``make`` returns a started ``WorkerProcess``; each is handed to ``deliver``. A fork that
    fails (memory, pid limit) is retried every 50 ms until the pool closes.
    """

    def __init__(self, make: Callable[[], WorkerProcess],
                 deliver: Callable[[WorkerProcess], None]) -> None:
        super().__init__(name="toolcodec-pool-spawner", daemon=True)
        self._make, self._deliver = make, deliver
        self._requests: queue.Queue[tuple[str, WorkerProcess | None, Callable[[], None] | None]] \
            = queue.Queue()
        self._stopping = False

    def spawn(self) -> None:
        self._requests.put(("spawn", None, None))

    def reap(self, proc: WorkerProcess, then: Callable[[], None] | None = None) -> None:
        """Kill (if need be) and reap ``proc``; then call ``then``, if given."""
        self._requests.put(("reap", proc, then))

    def stop(self) -> None:
        self._stopping = True
        self._requests.put(("stop", None, None))

    def run(self) -> None:
        while True:
            what, proc, then = self._requests.get()
            if what == "stop":
                return
            if what == "reap" and proc is not None:
                try:
                    proc.kill()
                except Exception:  # noqa: BLE001 - reaped elsewhere (interpreter exit)
                    pass
                if then is not None:
                    then()
                continue
            while not self._stopping:
                try:
                    made = self._make()
                except Exception:  # noqa: BLE001 - fork failed: try again soon
                    log.warning("toolcodec: starting a worker process failed; retrying",
                                exc_info=True)
                    time.sleep(0.05)
                    continue
                if self._stopping:
                    made.kill()
                else:
                    self._deliver(made)
                break


class Dispatcher(threading.Thread):
    """See the module docstring. ``procs`` fill the slots, ``spares`` wait beside them."""

    def __init__(self, procs: list[WorkerProcess], spares: list[WorkerProcess], *,
                 make: Callable[[], WorkerProcess], run_times: RunTimes, queue_size: int,
                 restarted: Callable[[str], None], selector: str = "default") -> None:
        super().__init__(name="toolcodec-pool-dispatcher", daemon=True)
        if selector not in SELECTORS:
            raise ValueError(f"selector must be one of {sorted(SELECTORS)}, got {selector!r}")
        self.run_times = run_times
        self.queue_size = queue_size
        self._restarted = restarted
        self._make = make
        self._sel = SELECTORS[selector]()
        # A socket pair, not a pipe: a post after the loop has closed it fails on the closed
        # socket object, where a write to a closed pipe's number could hit a reused one.
        self._wake_r, self._wake_w = socket.socketpair()
        self._wake_r.setblocking(False)
        self._wake_w.setblocking(False)
        self._sel.register(self._wake_r, _READ, None)
        self._inbox: deque[tuple[Any, ...]] = deque()
        self._sleeping = True  # waiting in select: a post must wake it
        self._slots: list[_Worker | None] = [None] * len(procs)
        self._spares_wanted = len(spares)
        self._spares: deque[_Worker] = deque(_Worker(p, 0) for p in spares)
        self._aside: list[_Worker] = []  # jobs running long, moved out of their slots
        self._idle: deque[_Worker] = deque()
        self._pending: deque[Ticket] = deque()
        self._expiry: list[tuple[float, int, Ticket]] = []  # (start_by as first known, seq, t)
        self._seq = itertools.count()
        self._waiting = 0
        self._prepare_log: list[bytes] = []  # encoded prepare jobs, in the order asked
        self._prepare_keys: OrderedDict[bytes, int] = OrderedDict()  # key: index in the log
        self._eased: set[str] = set()  # ops whose estimate a shed eased this turn
        self._closing_by: float | None = None
        self._done = False
        self.errors = 0  # exceptions a turn raised (each logged); the loop went on
        self.job_builds = 0  # jobs that had to build their codec first (not prepared)
        self.counts = {"idle": 0, "busy": 0, "starting": len(procs), "waiting": 0}
        for i, proc in enumerate(procs):
            self._fill(i, _Worker(proc, 0))
        self._publish()
        self.spawner = self._new_spawner()

    # -- what callers call (any thread) --------------------------------------------------

    def post(self, *message: Any) -> None:
        """Hand the loop a message: ``("call", ticket)``, ``("prepare", key, data)``,
        ``("spawned", proc)``, ``("close", until)``."""
        self._inbox.append(message)
        if not self._sleeping:  # awake: it takes the inbox before it waits again
            return
        try:
            self._wake_w.send(b"\0")
        except OSError:
            pass  # the pipe is full (the loop will wake) or closed (the loop is gone)

    def prepared_everywhere(self, at_least: int = 0) -> bool:
        """Whether every worker has built every tool set it was asked to prepare (and at
        least ``at_least`` were asked for)."""
        done = len(self._prepare_log)
        return done >= at_least and all(w is not None and w.prepared >= done and w.until is None
                   for w in list(self._slots))

    def pids(self) -> list[int | None]:
        return [None if w is None else w.proc.pid for w in list(self._slots)]

    # -- the loop ------------------------------------------------------------------------

    def run(self) -> None:
        # The GIL passes to a waiting thread only every switch interval (5 ms by default): a
        # busy caller thread or event loop would hold every answer that long.
        if sys.getswitchinterval() > SWITCH_INTERVAL_S:
            sys.setswitchinterval(SWITCH_INTERVAL_S)
        try:
            while not self._done:
                try:
                    self._turn()
                except Exception:  # noqa: BLE001 - one bad turn must not end the pool
                    self.errors += 1
                    log.exception("toolcodec: the pool's dispatcher hit an error; it goes on")
        finally:
            self._shut("the pool is closed" if self._closing_by is not None
                       else "the pool's dispatcher stopped")

    def _turn(self) -> None:
        # Set before the inbox is looked at (in _wait): a post that found the flag clear had
        # appended first, so the loop sees its message; one that finds it set wakes the loop.
        self._sleeping = True
        events = self._sel.select(self._wait())
        self._sleeping = False
        for key, mask in events:
            worker = key.data
            if worker is None:
                _drain(self._wake_r)
                continue
            if mask & _WRITE and worker.writer is not None:
                self._flush(worker)
            if mask & _READ and worker.slot >= ASIDE:
                self._read(worker)
        self._take_inbox()
        now = time.monotonic()
        self._eased.clear()
        self._expire(now)
        self._dispatch(now)
        if self._closing_by is not None:
            self._close_if_due(now)
        if not self.spawner.is_alive() and not self._done:
            log.error("toolcodec: the pool's spawner thread died; starting a new one")
            self.spawner = self._new_spawner()
            for _ in range(self._slots.count(None) + self._spares_wanted - len(self._spares)):
                self.spawner.spawn()
        self._publish()

    def _wait(self) -> float:
        """Seconds until the next deadline or start-by instant (at most MAX_TURN_WAIT_S)."""
        if self._inbox:
            return 0.0
        due = time.monotonic() + MAX_TURN_WAIT_S
        for worker in [*self._slots, *self._aside]:
            if worker is not None and worker.until is not None and worker.until < due:
                due = worker.until
        if self._expiry and self._expiry[0][0] < due:
            due = self._expiry[0][0]
        return max(due - time.monotonic(), 0.0)

    # -- reading and writing -------------------------------------------------------------

    def _read(self, worker: _Worker) -> None:
        frames = worker.reader.read(worker.sock)
        if frames is None:
            self._died(worker)
            return
        for data in frames:
            try:
                out = orjson.loads(data)
            except orjson.JSONDecodeError as exc:
                self._lost(worker, f"the answer could not be read: {exc}")
                return
            if isinstance(out, dict) and FRAME_KEY in out:
                self._noticed(worker, out[FRAME_KEY])
            elif worker.until is not None:
                self._answered(worker, out)

    def _noticed(self, worker: _Worker, event: Any) -> None:
        """A job's codec build started or ended: its parse budget waits for it."""
        ticket, now = worker.ticket, time.monotonic()
        if ticket is None:
            return  # a prepare: its own deadline already allows the build
        if event == BUILDING:
            self.job_builds += 1
            ticket.build_at, ticket.parse_left = now, max(ticket.deadline - now, 0.0)
            ticket.deadline = worker.until = now + BUILD_CAP_S + ticket.parse_left
        elif event == BUILT and ticket.build_at:
            ticket.sent_at += now - ticket.build_at  # the run estimate counts the parse only
            ticket.deadline = worker.until = now + ticket.parse_left
            ticket.build_at = 0.0

    def _answered(self, worker: _Worker, out: dict) -> None:
        ticket = worker.ticket
        worker.ticket = worker.until = worker.writer = None
        if ticket is not None:
            if isinstance(out, dict) and out.get("status") == "ok":
                self.run_times.observe(ticket.op, time.monotonic() - ticket.sent_at)
            _settle(ticket, out)
        if worker.slot == ASIDE:  # its slot went to a spare; it runs at the lowest priority
            self._aside.remove(worker)  # now, so a fresh process takes its place as a spare
            self._sel.unregister(worker.sock)
            self._gone(worker)
            self.spawner.spawn()
            return
        self._idle.append(worker)

    def _flush(self, worker: _Worker) -> None:
        try:
            sent = worker.writer is not None and worker.writer.write(worker.sock)
        except OSError as exc:
            self._lost(worker, f"worker {worker.proc.pid} is gone: {exc}")
            return
        if sent:
            worker.writer = None
            self._sel.modify(worker.sock, _READ, worker)

    def _send(self, worker: _Worker, data: bytes) -> bool:
        """Start sending ``data``; False if the worker turned out dead before taking any."""
        writer = FrameWriter(data)
        try:
            sent = writer.write(worker.sock)
        except OSError:
            return False
        if not sent:
            worker.writer = writer
            self._sel.modify(worker.sock, _READ | _WRITE, worker)
        return True

    # -- the inbox -----------------------------------------------------------------------

    def _take_inbox(self) -> None:
        inbox = self._inbox
        while inbox:
            message = inbox.popleft()
            kind = message[0]
            if kind == "call":
                self._admit(message[1])
            elif kind == "prepare":
                self._prepare(message[1], message[2])
            elif kind == "spawned":
                self._spawned(message[1])
            elif kind == "lost":
                ticket = message[1]
                _settle(ticket, error_envelope(ticket.op, "worker_lost", WORKER_LOST,
                                               message[2]))
            elif kind == "forget":
                self._forget(message[1])
            elif kind == "close":
                self._closing_by = message[1]

    def _admit(self, ticket: Ticket) -> None:
        if self._closing_by is not None:
            _settle(ticket, _not_accepted(ticket, "the pool is closed", CLOSED))
        elif self._waiting >= self.queue_size and not self._idle:
            _settle(ticket, _not_accepted(
                ticket, f"queue full: {self._waiting} callers already waiting", QUEUE_FULL))
        else:
            self._pending.append(ticket)
            self._waiting += 1
            heapq.heappush(self._expiry, (ticket.start_by(), next(self._seq), ticket))

    def _forget(self, ticket: Ticket) -> None:
        """A caller that stopped waiting leaves the line at once (not when its turn comes)."""
        if ticket.sent_at or ticket.out is not None:
            return
        try:
            self._pending.remove(ticket)
        except ValueError:
            return
        self._waiting -= 1

    def _prepare(self, key: bytes, data: bytes) -> None:
        if key in self._prepare_keys and \
                self._prepare_keys[key] >= len(self._prepare_log) - PREPARED_KEEP:
            return  # asked for recently: workers have it or will
        self._prepare_keys[key] = len(self._prepare_log)
        self._prepare_keys.move_to_end(key)
        while len(self._prepare_keys) > PREPARED_KEEP:
            self._prepare_keys.popitem(last=False)
        self._prepare_log.append(data)

    def _spawned(self, proc: WorkerProcess) -> None:
        try:
            worker = _Worker(proc, max(len(self._prepare_log) - PREPARED_KEEP, 0))
        except WorkerDied:
            self.spawner.spawn()
            return
        if self._done or self._closing_by is not None:
            self.spawner.reap(proc)
        elif None in self._slots:
            self._fill(self._slots.index(None), worker)
        else:
            self._spares.append(worker)

    # -- deadlines -----------------------------------------------------------------------

    def _expire(self, now: float) -> None:
        for worker in [*self._slots, *self._aside]:
            if worker is not None and worker.until is not None and worker.until <= now:
                ticket = worker.ticket
                if ticket is not None:
                    ms = ticket.budget * 1000.0
                    _settle(ticket, error_envelope(
                        ticket.op, "timeout", TIMEOUT,
                        f"no answer within {ms:g} ms (worker {worker.proc.pid} overran; "
                        "it was killed and replaced)"))
                self._retire(worker, "timeout")
        expiry = self._expiry
        while expiry and expiry[0][0] <= now:
            _, _, ticket = heapq.heappop(expiry)
            if ticket.out is not None or ticket.sent_at or ticket.abandoned:
                continue
            start_by = ticket.start_by()
            if now < start_by:  # the estimate eased since: look again then
                heapq.heappush(expiry, (start_by, next(self._seq), ticket))
                continue
            self._shed(ticket, now)

    def _shed(self, ticket: Ticket, now: float) -> None:
        if ticket.op not in self._eased:  # once a turn: a burst of sheds is one signal,
            self._eased.add(ticket.op)  # and easing per shed would let the next job start
            self.run_times.shed(ticket.op)  # with less than it needs
        _settle(ticket, shed_envelope(ticket.op, ticket.budget, now - ticket.start,
                                      ticket.deadline - ticket.start_by()))

    # -- dispatch ------------------------------------------------------------------------

    def _dispatch(self, now: float) -> None:
        pending, idle = self._pending, self._idle
        if pending and not idle and self._spares:
            self._set_aside(now)
        while pending and idle:
            ticket = pending.popleft()
            self._waiting -= 1
            if ticket.out is not None or ticket.abandoned:
                continue  # shed, or its caller stopped waiting
            if now >= ticket.start_by():
                self._shed(ticket, now)
                continue
            worker = idle.popleft()
            if not self._send(worker, ticket.data):  # died while idle: the job never left
                pending.appendleft(ticket)
                self._waiting += 1
                self._lost(worker, "")
                continue
            ticket.sent_at = now
            worker.ticket, worker.until = ticket, ticket.deadline
        # Any leftover in the line is already gone (shed or abandoned): drop them
        while pending and (pending[0].out is not None or pending[0].abandoned):
            pending.popleft()
            self._waiting -= 1
        if not pending and idle and self._prepare_log:
            self._prepare_idle(now)

    def _set_aside(self, now: float) -> None:
        """Jobs running far past what their op takes are most likely runaways: each such
        job keeps running (to its answer or its deadline) beside the pool, at the lowest CPU
        priority, and a spare takes its slot, so the line behind it keeps moving and its CPU
        no longer counts against the pool's. Its process is replaced once its job ends."""
        for worker in self._slots:
            if not self._spares:
                return
            ticket = worker.ticket if worker is not None else None
            if ticket is None or ticket.build_at or worker.slot < 0:
                continue
            if now - ticket.sent_at < max(2 * self.run_times.reserve(ticket.op, ticket.budget),
                                          SUSPECT_AFTER_S):
                continue
            slot = worker.slot
            worker.slot = ASIDE
            self._aside.append(worker)
            _lowest_priority(worker.proc)
            self._slots[slot] = None
            self._promote(slot)

    def _prepare_idle(self, now: float) -> None:
        """Idle workers build the tool sets they have not (one each per turn)."""
        log_len = len(self._prepare_log)
        for worker in list(self._idle):
            start = max(worker.prepared, log_len - PREPARED_KEEP)
            if start >= log_len:
                continue
            self._idle.remove(worker)
            worker.prepared = start + 1
            if not self._send(worker, self._prepare_log[start]):
                self._lost(worker, "")
                continue
            worker.until = now + BUILD_CAP_S

    # -- replacing workers ---------------------------------------------------------------

    def _fill(self, slot: int, worker: _Worker) -> None:
        worker.slot = slot
        self._slots[slot] = worker
        self._sel.register(worker.sock, _READ, worker)
        self._idle.append(worker)

    def _died(self, worker: _Worker) -> None:
        """A worker's pipe closed: it died. Its job is answered once the process is reaped,
        which says how it ended (a signal, an exit code); the slot is refilled now."""
        ticket, proc = worker.ticket, worker.proc
        if ticket is None or proc.exit_status() != "pipe closed":
            self._lost(worker, _died_why(proc))
            return
        worker.ticket = None
        self._retire(worker, "crash",
                     then=lambda: self.post("lost", ticket, _died_why(proc)))

    def _lost(self, worker: _Worker, why: str) -> None:
        """A worker died (or its answer was unreadable): its job, if any, is lost."""
        ticket = worker.ticket
        worker.ticket = None
        if ticket is not None:
            _settle(ticket, error_envelope(ticket.op, "worker_lost", WORKER_LOST, why))
        self._retire(worker, "crash")

    def _retire(self, worker: _Worker, reason: str,
                then: Callable[[], None] | None = None) -> None:
        """Take a worker out of its slot (or from aside), kill it now, and put a spare in its
        place; a new process is asked for either way."""
        slot = worker.slot
        if slot in (SPARE, GONE):
            return
        worker.until = None
        if slot == ASIDE:
            self._aside.remove(worker)
        else:
            self._slots[slot] = None
            try:
                self._idle.remove(worker)
            except ValueError:
                pass
        try:
            self._sel.unregister(worker.sock)
        except (KeyError, ValueError, OSError):
            pass
        self._gone(worker, then)
        self._restarted(reason)
        if self._done or self._closing_by is not None:
            return
        self.spawner.spawn()
        if slot >= 0:
            self._promote(slot)

    def _gone(self, worker: _Worker, then: Callable[[], None] | None = None) -> None:
        """Kill the worker now (SIGKILL: a runaway stops at once) and have it reaped."""
        worker.slot = GONE
        _kill_now(worker.proc)
        self.spawner.reap(worker.proc, then)

    def _promote(self, slot: int) -> None:
        """Give an empty slot the first live spare (none: it waits for the spawner)."""
        while self._spares:
            spare = self._spares.popleft()
            if spare.proc.alive:
                self._fill(slot, spare)
                return
            spare.slot = GONE
            self.spawner.reap(spare.proc)
            self.spawner.spawn()

    def _new_spawner(self) -> Spawner:
        spawner = Spawner(self._make, lambda proc: self.post("spawned", proc))
        spawner.start()
        return spawner

    # -- closing -------------------------------------------------------------------------

    def _close_if_due(self, now: float) -> None:
        assert self._closing_by is not None
        running = any(w is not None and w.ticket is not None
                      for w in [*self._slots, *self._aside])
        if (self._waiting or running) and now < self._closing_by:
            return
        self._done = True

    def _shut(self, why: str) -> None:
        """Answer whatever is left, stop every process and the spawner."""
        self._done = True
        for ticket in self._pending:
            _settle(ticket, _not_accepted(ticket, why, CLOSED))
        self._pending.clear()
        self._waiting = 0
        for worker in [*self._slots, *self._aside, *self._spares]:
            if worker is None:
                continue
            if worker.ticket is not None:
                _settle(worker.ticket, error_envelope(
                    worker.ticket.op, "worker_lost", WORKER_LOST,
                    f"{why} before the job answered"))
            worker.proc.kill()
        self._slots = [None] * len(self._slots)
        self._spares.clear()
        self._aside.clear()
        self._idle.clear()
        self.spawner.stop()
        self.spawner.join(2.0)  # it may be forking: what it makes now it kills itself
        while self._inbox:  # a late caller or a late spawn
            message = self._inbox.popleft()
            if message[0] == "call":
                _settle(message[1], _not_accepted(message[1], why, CLOSED))
            elif message[0] == "spawned":
                message[1].kill()
        self._sel.close()
        self._wake_r.close()
        self._wake_w.close()
        self._publish()

    def _publish(self) -> None:
        """The counts other threads read (a new dict each time: read whole, never torn)."""
        idle = len(self._idle)
        live = sum(1 for w in self._slots if w is not None)
        self.counts = {"idle": idle, "busy": live - idle + len(self._aside),
                       "starting": len(self._slots) - live, "waiting": max(self._waiting, 0)}


def _not_accepted(ticket: Ticket, why: str, reason: str) -> dict:
    """The envelope of a job refused before it joined the line (``rejected``, *reason*)."""
    return error_envelope(ticket.op, "rejected", REJECTED, f"job not accepted: {why}",
                          reason=reason)


def _settle(ticket: Ticket, out: dict) -> None:
    """Give a ticket its answer and wake its caller: once, whoever asks twice."""
    if ticket.out is not None:
        return
    ticket.out = out
    try:
        ticket.notify()
    except Exception:  # noqa: BLE001 - a caller's wake-up must not stop the loop
        log.exception("toolcodec: waking a caller failed")


def _died_why(proc: WorkerProcess) -> str:
    return f"worker {proc.pid} died before answering ({proc.exit_status()}); " \
        "the job has no result"


def _lowest_priority(proc: WorkerProcess) -> None:
    """Let a job set aside run only on CPU the pool's workers leave free."""
    if proc.pid is not None and hasattr(os, "setpriority"):
        try:
            os.setpriority(os.PRIO_PROCESS, proc.pid, 19)
        except OSError:
            pass


def _kill_now(proc: WorkerProcess) -> None:
    """SIGKILL at once (the spawner reaps later): a runaway stops burning CPU now."""
    pid = proc.pid
    if pid is not None and proc.alive:
        try:
            os.kill(pid, signal.SIGKILL)
        except OSError:
            pass


def _drain(sock: socket.socket) -> None:
    try:
        while sock.recv(4096):
            pass
    except OSError:  # BlockingIOError: nothing more
        pass

