"""One structured log line for every answer the proxy could not decode or flagged.

The line is an event on the ``toolcodec.proxy`` logger (level WARNING), written as every
event is (``toolcodec.worker.logs.event``: the request's context added, one JSON object in
either log format), and its fields also ride on the record (``record.toolcodec_fields``) for
a handler that formats them itself::

    {"event": "proxy_answer", "request_id": "…", "model": "m", "stream": true,
     "reason": "upstream_stream_broken", "codes": ["truncated"], "unrecognised": []}

``reason`` is why the answer is logged: a capacity failure (``timeout``, ``rejected``,
``worker_lost``, …), an upstream failure mid-stream (``upstream_stream_broken``, …),
``truncated`` (cut by the length limit, seen in ``usage``), or ``unrecognised`` (markup not
read, an undeclared tool, a forced tool choice not met; named in ``unrecognised``). No
content is ever written. At most ``TOOLCODEC_LOG_MAX_PER_S`` lines (default 50) are written
per second; the next line says how many were left out (``suppressed``).
"""

from __future__ import annotations

import logging
from typing import Any

from toolcodec.results.ids import random_hex
from toolcodec.worker.logs import LinesPerSecond, event

log = logging.getLogger("toolcodec.proxy")


def request_id(headers: dict[str, str]) -> str:
    """The client's ``X-Request-Id``, else a new one."""
    given = headers.get("x-request-id")
    return given[:128] if given else random_hex(16)


class AnswerLog:
    """Writes the lines; one per proxy."""

    def __init__(self, max_per_s: float | None = None) -> None:
        self._lines = LinesPerSecond(max_per_s)

    def answer(self, *, request_id: str, model: Any, stream: bool, reason: str,
               codes: list[str] | tuple[str, ...] = (),
               unrecognised: list[str] | tuple[str, ...] = ()) -> dict[str, Any] | None:
        """Log one answer; returns the fields written (None when over the rate)."""
        suppressed = self._lines.admit()
        if suppressed is None:
            return None
        line: dict[str, Any] = {
            "request_id": request_id,
            "model": model if isinstance(model, str) else None, "stream": stream,
            "reason": reason, "codes": list(dict.fromkeys(codes)),
            "unrecognised": list(unrecognised)}
        if suppressed:
            line["suppressed"] = suppressed
        event(log, logging.WARNING, "proxy_answer", **line)
        return {"event": "proxy_answer", **line}
