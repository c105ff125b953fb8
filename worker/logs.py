"""Log lines of ``toolcodec serve`` and ``toolcodec worker``: one line per event, JSON or text.

``configure(fmt)`` (``--log-format json|text``) installs one handler on stderr for the root
logger. A JSON line is an object with ``time`` (UTC, ISO 8601 with milliseconds and ``Z``),
``level``, ``logger``, then the event's fields (``event``, ...) or a ``message``, then what is
known of the request being served: ``request_id``, ``trace_id``, ``model``, ``preset``::

    {"time": "2026-01-05T10:00:00.123Z", "level": "warning", "logger": "toolcodec.jobs",
     "event": "job", "side": "caller", "job_id": "tc-…-7", ..., "request_id": "9f…"}

A text line carries the same: ``TIME LEVEL LOGGER {fields as JSON}``. A line is always one line:
an exception is written as its type and message (``"exception": "ValueError: …"``), never as a
multi-line traceback; uncaught exceptions (also in threads and in forked lane processes,
which inherit the hook) go through the same path.

Structured events are logged with :func:`event`; the request context is set by the HTTP
service (``toolcodec.pool.service.access``) in context variables, which the formatters read.
"""

from __future__ import annotations

import logging
import os
import sys
import threading
import time
from contextvars import ContextVar
from typing import Any

import orjson

FORMATS = ("json", "text")
REQUEST_ID: ContextVar[str | None] = ContextVar("toolcodec_request_id", default=None)
TRACE_ID: ContextVar[str | None] = ContextVar("toolcodec_trace_id", default=None)
MODEL: ContextVar[str | None] = ContextVar("toolcodec_model", default=None)
PRESET: ContextVar[str | None] = ContextVar("toolcodec_preset", default=None)
# The ids of the queued jobs a request submitted (RQ backend), most recent last: what joins a
# caller's lines to the worker's lines of the same job.
_JOB_IDS: ContextVar[list[str] | None] = ContextVar("toolcodec_job_ids", default=None)
MAX_JOB_IDS = 64  # per request, in its access line
_CONTEXT = (("request_id", REQUEST_ID), ("trace_id", TRACE_ID), ("model", MODEL),
            ("preset", PRESET))
_LEVELS = {"WARNING": "warning", "ERROR": "error", "INFO": "info", "DEBUG": "debug",
           "CRITICAL": "critical"}


def event(logger: logging.Logger, level: int, name: str, **fields: Any) -> None:
    """Log the event ``name`` with ``fields`` (JSON data) as one line."""
    if logger.isEnabledFor(level):
        line = {"event": name, **fields}
        # The message is the fields as JSON too, for handlers that are not ours (a library
        # user's logging config, pytest's caplog).
        logger.log(level, "%s", orjson.dumps(line, default=str).decode(),
                   extra={"toolcodec_fields": line})


def note_job_id(job_id: str) -> None:
    """Record that the request being served submitted the queued job ``job_id``."""
    ids = _JOB_IDS.get()
    if ids is not None and len(ids) < MAX_JOB_IDS:
        ids.append(job_id)


class JobIds:
    """Collects the ids :func:`note_job_id` records inside its ``with`` block (in this task
    and the threads it hands work to) in ``ids``, also adding them to an enclosing
    collection. A class, not a generator: it is entered for every request."""

    __slots__ = ("ids", "_token", "_outer")

    def __init__(self) -> None:
        self.ids: list[str] = []

    def __enter__(self) -> list[str]:
        self._outer = _JOB_IDS.get()
        self._token = _JOB_IDS.set(self.ids)
        return self.ids

    def __exit__(self, *exc: object) -> None:
        _JOB_IDS.reset(self._token)
        outer = self._outer
        if outer is not None:
            outer.extend(self.ids[:MAX_JOB_IDS - len(outer)])


def job_ids() -> JobIds:
    """``with job_ids() as ids``: the ids of the jobs submitted inside the block."""
    return JobIds()


def fields_of(record: logging.LogRecord) -> dict[str, Any]:
    """The line's content after time, level and logger: the event's fields or the message,
    the request context, and an exception as one ``"Type: message"`` string."""
    fields = getattr(record, "toolcodec_fields", None)
    line: dict[str, Any] = dict(fields) if fields else {"message": record.getMessage()}
    for key, var in _CONTEXT:
        value = var.get()
        if value is not None and key not in line:
            line[key] = value
    if record.exc_info and record.exc_info[1] is not None:
        line["exception"] = one_line(record.exc_info[1])
    return line


def one_line(exc: BaseException) -> str:
    """``Type: message`` on one line."""
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def utc(created: float) -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S", time.gmtime(created)) + \
        f".{int(created % 1 * 1000):03d}Z"


class JsonFormatter(logging.Formatter):
    """One JSON object per line (see the module docstring)."""

    def format(self, record: logging.LogRecord) -> str:
        line = {"time": utc(record.created),
                "level": _LEVELS.get(record.levelname, record.levelname.lower()),
                "logger": record.name, **fields_of(record)}
        return orjson.dumps(line, default=str).decode()


class TextFormatter(logging.Formatter):
    """``TIME LEVEL LOGGER message``, one line; an event's message is its fields (with the
    request context) as JSON."""

    def format(self, record: logging.LogRecord) -> str:
        line = fields_of(record)
        if "message" in line and len(line) == 1:
            text = line["message"]
        elif getattr(record, "toolcodec_fields", None):
            text = orjson.dumps(line, default=str).decode()
        else:
            message = line.pop("message")
            text = f"{message} {orjson.dumps(line, default=str).decode()}"
        return f"{utc(record.created)} {record.levelname} {record.name} " + \
            " ".join(text.splitlines())


def configure(fmt: str = "text", level: int = logging.WARNING) -> logging.Handler:
    """Send every log line to stderr in ``fmt`` (``json`` or ``text``); toolcodec's own
    loggers at INFO (lifecycle events, access lines), the rest at ``level``. Replaces the
    root logger's handlers; uncaught exceptions are logged as one line too."""
    if fmt not in FORMATS:
        raise ValueError(f"log format must be one of {FORMATS}, got {fmt!r}")
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(JsonFormatter() if fmt == "json" else TextFormatter())
    root = logging.getLogger()
    for old in list(root.handlers):
        root.removeHandler(old)
    root.addHandler(handler)
    root.setLevel(level)
    logging.getLogger("toolcodec").setLevel(logging.INFO)
    sys.excepthook = _uncaught
    threading.excepthook = _uncaught_in_thread
    return handler


_crash_log = logging.getLogger("toolcodec.crash")


def _uncaught(kind: type[BaseException], exc: BaseException, tb: Any) -> None:
    if issubclass(kind, KeyboardInterrupt):
        sys.__excepthook__(kind, exc, tb)
        return
    event(_crash_log, logging.ERROR, "uncaught_exception", exception=one_line(exc))


def _uncaught_in_thread(args: threading.ExceptHookArgs) -> None:
    if args.exc_value is None or isinstance(args.exc_value, SystemExit):
        return
    name = args.thread.name if args.thread is not None else None
    event(_crash_log, logging.ERROR, "uncaught_exception", thread=name,
          exception=one_line(args.exc_value))


ENV_MAX_PER_S = "TOOLCODEC_LOG_MAX_PER_S"


class LinesPerSecond:
    """At most ``max_per_s`` lines a second (``TOOLCODEC_LOG_MAX_PER_S``, default 50), so that an
    overload does not become a logging outage; :meth:`admit` says how many were left out."""

    def __init__(self, max_per_s: float | None = None) -> None:
        if max_per_s is None:
            try:
                max_per_s = float(os.environ.get(ENV_MAX_PER_S, 50.0))
            except ValueError:
                max_per_s = 50.0
            max_per_s = max_per_s if max_per_s >= 0 else 50.0
        self.max_per_s = max_per_s
        self._lock = threading.Lock()
        self._second = self._written = self._suppressed = 0

    def admit(self) -> int | None:
        """None when this second's lines are used up, else how many were left out before."""
        now = int(time.monotonic())
        with self._lock:
            if now != self._second:
                self._second, self._written = now, 0
            if self._written >= self.max_per_s:
                self._suppressed += 1
                return None
            self._written += 1
            suppressed, self._suppressed = self._suppressed, 0
            return suppressed
