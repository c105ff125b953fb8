"""Each request's ids, and its access line, for ``toolcodec serve``.

Every HTTP request gets a ``request_id``: the client's ``X-Request-Id`` when it sends a usable
one (1 to 128 visible ASCII characters), else a new random one, which is then added to the
request's headers too (so the proxy forwards it upstream). The answer echoes it in
``X-Request-Id``. A W3C ``traceparent`` gives the ``trace_id``. Both are in context variables
(:mod:`toolcodec.worker.logs`) for every log line written while the request is served, and the
ids of the queued jobs it submitted are collected, so its lines join the worker's.

With ``access_log`` on, one ``access`` event per request on the ``toolcodec.access`` logger
(INFO): method, path, status, duration_ms, request_id, trace_id, model and preset when known,
and the job ids.
"""

from __future__ import annotations

import logging
import re
import time
from typing import Any

from toolcodec.results.ids import random_hex
from toolcodec.worker.logs import MODEL, PRESET, REQUEST_ID, TRACE_ID, JobIds, event

log = logging.getLogger("toolcodec.access")
_USABLE_ID = re.compile(rb"[\x21-\x7e]{1,128}")
_TRACEPARENT = re.compile(rb"[0-9a-f]{2}-([0-9a-f]{32})-[0-9a-f]{16}-[0-9a-f]{2}")


def request_ids(app: Any, access_log: bool = False) -> Any:
    """*app* with request ids, trace ids and job ids in context, ``X-Request-Id`` echoed, and
    (``access_log``) one access line per request."""
    async def with_ids(scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        start = time.perf_counter()
        scope, rid, tokens = enter(scope)
        status = [0]
        echo = (b"x-request-id", rid.encode())

        async def sending(message: dict) -> None:
            if message["type"] == "http.response.start":
                status[0] = message["status"]
                headers = [(k, v) for k, v in message.get("headers", ())
                           if k.lower() != b"x-request-id"]
                message = {**message, "headers": [*headers, echo]}
            await send(message)

        ids = JobIds()
        try:
            with ids:
                await app(scope, receive, sending)
        finally:
            if access_log:
                access_line(scope, status[0], start, ids.ids)
            leave(tokens)
    return with_ids


def enter(scope: dict) -> tuple[dict, str, tuple[Any, ...]]:
    """The request's id (the client's usable ``X-Request-Id``, else a new one, then added to
    the headers of the scope answered) and trace id put in context: (scope, request id, the
    tokens :func:`leave` resets)."""
    named = dict(scope["headers"])  # in C; a repeated header: its last value, as read before
    given, trace = named.get(b"x-request-id"), named.get(b"traceparent")
    if given is not None and _USABLE_ID.fullmatch(given):
        rid = given.decode("ascii")
    else:
        rid = random_hex(16)
        headers = scope["headers"] if given is None else [  # an unusable one is replaced
            (k, v) for k, v in scope["headers"] if k != b"x-request-id"]
        scope = {**scope, "headers": [*headers, (b"x-request-id", rid.encode())]}
    match = _TRACEPARENT.fullmatch(trace.strip().lower()) if trace else None
    tokens = (REQUEST_ID.set(rid), TRACE_ID.set(match.group(1).decode() if match else None),
              MODEL.set(None), PRESET.set(None))
    return scope, rid, tokens


def leave(tokens: tuple[Any, ...]) -> None:
    """The context as it was before :func:`enter` (its variables reset in reverse order)."""
    PRESET.reset(tokens[3])
    MODEL.reset(tokens[2])
    TRACE_ID.reset(tokens[1])
    REQUEST_ID.reset(tokens[0])


def access_line(scope: dict, status: int, start: float, ids: list[str]) -> None:
    """The request's ``access`` event; *start* is its ``time.perf_counter()``."""
    fields: dict[str, Any] = {
        "method": scope["method"], "path": scope["path"], "status": status,
        "duration_ms": round((time.perf_counter() - start) * 1000.0, 3)}
    if ids:
        fields["job_ids"] = ids
    event(log, logging.INFO, "access", **fields)
