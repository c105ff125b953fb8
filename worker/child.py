"""A long-lived worker process that runs jobs sent over a socket pair.

The parent sends a job dict, the child answers with the handler's envelope. Both travel as
orjson bytes behind a 4-byte length: jobs and envelopes are JSON data by contract, orjson
is as fast as pickle for them, and a bare socket with a registered ``poll`` object costs
less per round trip than ``multiprocessing.Connection`` (whose ``poll`` builds a selector
on every call; see ``docs/pool.md``). The child never raises on a bad job: it answers
``bad_request`` or ``internal_error``. Only death ends it, which the parent sees as
:class:`WorkerDied`.
"""

from __future__ import annotations

import gc
import importlib
import math
import multiprocessing
import os
import select
import signal
import socket
import struct
import threading
import time
import weakref
from collections.abc import Callable
from typing import Any

import orjson
from toolcodec.results.errors import BAD_REQUEST
from toolcodec.worker.envelope import error_envelope, internal_error
from toolcodec.worker.notices import FRAME_KEY, NOTICE

Handler = Callable[[dict], dict]

# Forks happen one at a time so that no child inherits another child's pipe end while the
# parent still holds it: a stray copy would hide that child's death (no EOF).
_FORK_LOCK = threading.Lock()
# Parent ends of live workers; a new child closes its copies so that each child's only link
# is its own pipe (and it sees EOF when the parent goes away).
_PARENT_ENDS: weakref.WeakSet[socket.socket] = weakref.WeakSet()
_HEADER = struct.Struct("!I")
_CHUNK = 1 << 16
_READY = select.POLLIN | select.POLLHUP | select.POLLERR


MAX_POLL_S = 3600.0  # longer waits are cut: the deadline is re-checked by the caller


class WorkerDied(Exception):
    """The worker process is gone (killed, crashed or exited); its job has no answer."""


def resolve_handler(ref: str) -> Handler:
    """Import ``"package.module:function"`` and return the function."""
    module_name, _, attr = ref.partition(":")
    if not module_name or not attr:
        raise ValueError(f"handler must look like 'package.module:function', got {ref!r}")
    return getattr(importlib.import_module(module_name), attr)


# The handler every toolcodec worker runs unless told otherwise (tests pass their own).
RUN_JOB_HANDLER = "toolcodec.worker.jobs:run_job"


class WorkerProcess:
    """One child process fed jobs over a pipe; see the module docstring.

    ``handler`` names the function run for each job. With ``start_method="fork"`` (the
    default, ~10 ms to start) it is imported in the parent and the child inherits it; with
    ``"spawn"`` or ``"forkserver"`` the child imports it. ``env`` is added to the child's
    environment before its first job (the pool passes the operator's limits this way).
    With ``notices``, a job may send interim frames before its answer: dicts holding
    ``toolcodec.worker.notices.FRAME_KEY`` (a codec build starting and ending), which only a
    reader that expects them (the process backend's dispatcher) may ask for.
    """

    def __init__(self, *, handler: str = RUN_JOB_HANDLER, start_method: str = "fork",
                 env: dict[str, str] | None = None, notices: bool = False) -> None:
        self.handler = handler
        self.start_method = start_method
        self.env = dict(env or {})  # set in the child's environment before it serves
        self.notices = notices
        self.pid: int | None = None
        self.exitcode: int | None = None  # how the last child ended, once it is reaped
        self._ctx = multiprocessing.get_context(start_method)
        self._process: Any = None
        self._conn: socket.socket | None = None
        self._poller: Any = None
        # Fail fast in the parent on a bad handler rather than in every child.
        self._resolved = resolve_handler(handler) if start_method == "fork" else None

    def start(self) -> None:
        """Start the child process; sets :attr:`pid`."""
        if self._process is not None:
            raise RuntimeError("worker already started; use restart()")
        target = self._resolved if self._resolved is not None else self.handler
        with _FORK_LOCK:
            parent, child = socket.socketpair()
            # A spawned child inherits no descriptors; a forked one closes its copies.
            stray = [*_PARENT_ENDS, parent] if self.start_method == "fork" else []
            process = self._ctx.Process(
                target=_serve, args=(child, target, stray, self.env, self.notices), daemon=True,
                name="toolcodec-worker",
            )
            process.start()
            child.close()
            _PARENT_ENDS.add(parent)
        self._poller = select.poll()
        self._poller.register(parent, _READY)
        self._process, self._conn, self.pid = process, parent, process.pid

    def send(self, job: dict) -> None:
        """Send one job; raises :class:`WorkerDied` if the child is gone (job not delivered)."""
        self.send_encoded(orjson.dumps(job))

    def send_encoded(self, data: bytes) -> None:
        """Send a job already encoded with ``orjson.dumps`` (lets a caller check it first)."""
        conn = self._live_conn()
        try:
            conn.sendall(_HEADER.pack(len(data)) + data)
        except OSError as exc:
            raise WorkerDied(f"worker {self.pid} is gone: {exc}") from exc

    def poll(self, timeout: float) -> bool:
        """Wait up to ``timeout`` seconds; True when a result (or the child's death) is ready."""
        if self._conn is None:
            return True  # recv() will report the death
        # poll() counts whole milliseconds in a C int: round up so as never to return early,
        # and cap what a job from a foreign producer could ask for (a lane must never die).
        if not timeout > 0:  # also NaN
            timeout = 0.0
        return bool(self._poller.poll(math.ceil(min(timeout, MAX_POLL_S) * 1000)))

    def recv(self) -> dict:
        """Return the next envelope; raises :class:`WorkerDied` if the child died first."""
        conn = self._live_conn()
        try:
            data = _recv_frame(conn)
        except (EOFError, OSError) as exc:
            raise WorkerDied(f"worker {self.pid} died before answering ({self._exit()})") from exc
        return orjson.loads(data)

    def kill(self) -> None:
        """SIGKILL the child and reap it; safe to call more than once."""
        process, conn = self._process, self._conn
        self._process = self._conn = self._poller = None
        if conn is not None:
            with _FORK_LOCK:  # start() iterates the set while forking
                _PARENT_ENDS.discard(conn)
            conn.close()
        if process is not None:
            if process.exitcode is None:
                try:
                    process.kill()
                except OSError:
                    pass  # already reaped
            process.join()
            self.exitcode = process.exitcode
            process.close()

    def restart(self) -> None:
        """Kill the child if needed and start a fresh one."""
        self.kill()
        self.start()

    @property
    def alive(self) -> bool:
        """Whether the child process is running."""
        return self._process is not None and self._process.is_alive()

    def fileno(self) -> int:
        """The parent's pipe end, readable when a result arrives or the child dies."""
        return self._live_conn().fileno()

    def connection(self) -> socket.socket:
        """The parent's end of the pipe, for a reader that frames it itself (non-blocking);
        raises :class:`WorkerDied` if the child is not running."""
        if self._conn is None:
            raise WorkerDied("worker is not running")
        return self._conn

    def _live_conn(self) -> socket.socket:
        if self._conn is None:
            raise WorkerDied("worker is not running")
        if not os.get_blocking(self._conn.fileno()):
            # An event loop's add_reader may switch the descriptor to non-blocking behind the
            # socket object's back (uvloop: libuv's uv_poll_init does); a frame bigger than
            # the socket buffer then fails half-way with EAGAIN, read as the worker's death.
            self._conn.setblocking(True)
        return self._conn

    def exit_status(self, wait: float = 0.0) -> str:
        """How the child ended, waiting at most ``wait`` seconds for it to be reaped: "killed
        by signal N", "exit code N", or "pipe closed" if it is not reaped by then. A child
        whose end of the pipe has closed is reaped within microseconds: a millisecond is
        plenty, and never a stall."""
        process = self._process
        code = self.exitcode if process is None else None
        if process is None and code is None:
            return "not running"
        end = time.monotonic() + wait
        while process is not None and (code := process.exitcode) is None \
                and time.monotonic() < end:  # WNOHANG
            time.sleep(0.0001)
        if code is None:
            return "pipe closed"
        return f"killed by signal {-code}" if code < 0 else f"exit code {code}"

    def _exit(self) -> str:
        process = self._process
        if process is None:
            return "not running"
        process.join(0.05)  # a dead child is reaped at once; a live one is not waited for
        code = process.exitcode
        if code is None:
            return "pipe closed"
        return f"killed by signal {-code}" if code < 0 else f"exit code {code}"

    def __repr__(self) -> str:
        return f"WorkerProcess(pid={self.pid}, alive={self.alive}, handler={self.handler!r})"


def _serve(conn: socket.socket, target: Handler | str, stray: list[socket.socket],
           env: dict[str, str], notices: bool = False) -> None:
    """The child's loop: read a job, run it, answer; exit on EOF."""
    for other in stray:
        other.close()  # via the object, so that it never closes a reused descriptor later
    os.environ.update(env)
    # Ctrl-C is the parent's business; it stops children by closing the pipe or killing.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    # What the child inherited (or imported) is left out of its collections: a full one
    # writes to every object it visits, so a forked child would copy each page it shares
    # with the parent (~4 000 pages, +20 ms in the job that triggers it, often the first).
    gc.freeze()
    handler = resolve_handler(target) if isinstance(target, str) else target
    if notices:
        def notice(event: str) -> None:
            frame = orjson.dumps({FRAME_KEY: event})
            conn.sendall(_HEADER.pack(len(frame)) + frame)

        NOTICE.set(notice)
    while True:
        try:
            data = _recv_frame(conn)
        except (EOFError, OSError):
            return
        out = answer(handler, data)
        conn.sendall(_HEADER.pack(len(out)) + out)


def answer(handler: Handler, data: bytes) -> bytes:
    """The encoded envelope a worker sends back for the encoded job ``data``."""
    try:
        job = orjson.loads(data)
    except orjson.JSONDecodeError as exc:
        out = error_envelope("", "error", BAD_REQUEST, f"job is not valid JSON: {exc}")
        return orjson.dumps(out)
    try:
        return orjson.dumps(handler(job))
    except Exception as exc:  # a handler bug or an unserialisable result: answer, stay alive
        return orjson.dumps(internal_error(job, exc))


def _recv_frame(sock: socket.socket) -> bytes:
    """Read one length-prefixed message; EOFError if the peer closed first.

    One request/answer is in flight per worker, so a read never runs into the next message.
    """
    buf = sock.recv(_CHUNK)
    while len(buf) < _HEADER.size:
        more = sock.recv(_CHUNK)
        if not more:
            raise EOFError("connection closed")
        buf += more
    (size,) = _HEADER.unpack_from(buf)
    end = _HEADER.size + size
    if len(buf) < end:
        parts = [buf]
        have = len(buf)
        while have < end:
            more = sock.recv(max(end - have, _CHUNK))
            if not more:
                raise EOFError("connection closed mid-message")
            parts.append(more)
            have += len(more)
        buf = b"".join(parts)
    return buf[_HEADER.size : end]
