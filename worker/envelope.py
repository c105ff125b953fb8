"""The job envelope: what every job answers, whichever backend ran it.

A worker answers ``{"status", "op", "result", "error"}``; the caller's side completes it with
``backend`` and ``elapsed_ms`` (:func:`complete`), so every call returns the same six keys in
the same order. ``status`` is one of :data:`STATUSES`; ``error`` is a ``CodecError`` dict.
"""

from __future__ import annotations

import time
from typing import Any

from toolcodec.results.errors import INTERNAL_ERROR, CodecError

STATUSES = ("ok", "error", "timeout", "rejected", "worker_lost")


class BadRequest(Exception):
    """The job or its payload is malformed; the message says which field and why."""

    def __init__(self, message: str, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


def envelope(
    op: str, status: str, result: dict | None = None, error: dict | None = None
) -> dict[str, Any]:
    """The worker-side envelope (the caller adds ``backend`` and ``elapsed_ms``)."""
    return {"status": status, "op": op, "result": result, "error": error}


def error_envelope(op: str, status: str, code: str, message: str, **details: Any) -> dict:
    """An envelope whose ``error`` is a :class:`CodecError` dict."""
    return envelope(op, status, error=CodecError(code, message, details).to_dict())


def internal_error(job: Any, exc: BaseException) -> dict[str, Any]:
    """The envelope for an unexpected exception while running ``job``."""
    job_id = job.get("id") if isinstance(job, dict) else None
    op = job.get("op") if isinstance(job, dict) and isinstance(job.get("op"), str) else ""
    kind = type(exc).__name__
    return error_envelope(
        op,
        "error",
        INTERNAL_ERROR,
        f"job {job_id!r} ({op or 'no op'}) failed inside the worker: {kind}: {exc}",
        job_id=job_id,
        exception=kind,
    )


def complete(out: dict, op: str, backend: str, start: float,
             end: float | None = None) -> dict[str, Any]:
    """The caller's envelope: the worker's ``out`` plus ``backend`` and ``elapsed_ms``
    counted from ``start`` to ``end`` (``time.monotonic()`` values; ``end`` now if not
    given). ``op`` is the op the caller asked for."""
    return {
        "status": out.get("status"),
        "op": op,
        "backend": backend,
        "result": out.get("result"),
        "error": out.get("error"),
        "elapsed_ms": ((time.monotonic() if end is None else end) - start) * 1000.0,
    }
