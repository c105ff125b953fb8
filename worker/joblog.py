"""One structured log line per failed or slow job, for ``toolcodec serve`` and RQ workers.

The line is an event on the ``toolcodec.jobs`` logger (level WARNING; its message is the
fields as JSON, and ``--log-format json`` adds time, level and the request's ids), so a log
pipeline can parse it and a person can grep it::

    {"event": "job", "side": "worker", "job_id": "tc-…-7", "op": "decode", "backend": "rq",
     "outcome": "worker_lost", "code": "worker_lost", "result_codes": [], "input_bytes": 5321,
     "elapsed_ms": 12.4, "slow": false, "repairs": []}

"Failed" is any outcome but ``success``; "slow" is an answer that took at least
``TOOLCODEC_LOG_SLOW_MS`` (default 25 ms, half the default budget). The payload is never
written unless the operator sets ``TOOLCODEC_LOG_PAYLOADS=1`` (it may hold user data); then
its first :data:`PAYLOAD_CHARS` characters go in ``"payload"``. At most
``TOOLCODEC_LOG_MAX_PER_S`` lines (default 50) are written per second and process, so an
overload does not become a logging outage; the next line written says how many were left out
(``"suppressed"``).
"""

from __future__ import annotations

import logging
import os
from typing import Any

import orjson
from toolcodec.worker.logs import LinesPerSecond, event
from toolcodec.worker.metrics import outcome_of

log = logging.getLogger("toolcodec.jobs")

ENV_SLOW_MS = "TOOLCODEC_LOG_SLOW_MS"
ENV_PAYLOADS = "TOOLCODEC_LOG_PAYLOADS"
PAYLOAD_CHARS = 4096


def _number(name: str, default: float) -> float:
    try:
        value = float(os.environ.get(name, default))
    except ValueError:
        return default
    return value if value >= 0 else default


class JobLog:
    """Decides which jobs are logged and writes their line; one per process and side."""

    def __init__(self, side: str, *, slow_ms: float | None = None,
                 payloads: bool | None = None, max_per_s: float | None = None) -> None:
        self.side = side
        self.slow_ms = _number(ENV_SLOW_MS, 25.0) if slow_ms is None else slow_ms
        self.payloads = (os.environ.get(ENV_PAYLOADS) == "1") if payloads is None else payloads
        self._lines = LinesPerSecond(max_per_s)

    def wanted(self, envelope: dict[str, Any]) -> bool:
        """Whether this job gets a line: it failed, or it was slow."""
        elapsed = envelope.get("elapsed_ms")
        return outcome_of(envelope) != "success" or (
            isinstance(elapsed, int | float) and elapsed >= self.slow_ms)

    def job(self, op: str, backend: str, envelope: dict[str, Any], payload: Any,
            job_id: str | None = None) -> dict[str, Any] | None:
        """Log ``envelope`` if :meth:`wanted`; returns the fields written (None if not)."""
        if not self.wanted(envelope):
            return None
        suppressed = self._lines.admit()
        if suppressed is None:
            return None
        line = self.fields(op, backend, envelope, payload, job_id)
        if suppressed:
            line["suppressed"] = suppressed
        fields = dict(line)
        del fields["event"]
        event(log, logging.WARNING, "job", **fields)
        return line

    def fields(self, op: str, backend: str, envelope: dict[str, Any], payload: Any,
               job_id: str | None) -> dict[str, Any]:
        error = envelope.get("error") if isinstance(envelope.get("error"), dict) else {}
        result = envelope.get("result") if isinstance(envelope.get("result"), dict) else {}
        codes = sorted({e.get("code") for e in result.get("errors") or ()
                        if isinstance(e, dict) and isinstance(e.get("code"), str)})
        repairs = [r for r in result.get("repairs") or () if isinstance(r, str)]
        elapsed = envelope.get("elapsed_ms")
        line: dict[str, Any] = {
            "event": "job", "side": self.side, "job_id": job_id or error.get("job_id"),
            "op": op, "backend": backend, "outcome": outcome_of(envelope),
            "code": error.get("code") or (codes[0] if codes else None),
            "result_codes": codes, "input_bytes": _size(payload),
            "elapsed_ms": round(elapsed, 3) if isinstance(elapsed, int | float) else None,
            "slow": isinstance(elapsed, int | float) and elapsed >= self.slow_ms,
            "repairs": repairs,
        }
        if self.payloads:
            line["payload"] = _text(payload)[:PAYLOAD_CHARS]
        return line


def _text(payload: Any) -> str:
    try:
        return orjson.dumps(payload).decode()
    except TypeError:
        return repr(payload)


def _size(payload: Any) -> int:
    """The payload's size as JSON bytes (computed only for the jobs that are logged)."""
    if payload is None:
        return 0
    if isinstance(payload, str | bytes):
        return len(payload)
    return len(_text(payload).encode())
