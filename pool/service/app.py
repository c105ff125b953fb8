"""The HTTP front door: a Starlette app over a ``Pool`` (``toolcodec serve``).

``POST /v1/{op}`` takes the job payload as a JSON object (plus an optional ``timeout_ms``
that may only lower the server's) and answers the job envelope, with an HTTP status that
mirrors it; ``POST /v1/batch`` takes ``{"jobs": [{"op", "payload"}, ...]}`` (or the bare list)
and answers ``{"results": [envelope, ...]}`` in order. ``GET /metrics`` (Prometheus text),
``/healthz`` (the process lives) and ``/readyz`` (workers up, Redis answering, not draining).
Handlers are async and hand jobs to ``Pool.asubmit``: no thread per request.
"""

from __future__ import annotations

import asyncio
import math
import os
import time
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route
from toolcodec.pool.service.access import access_line, enter, leave, request_ids
from toolcodec.pool.service.http_metrics import HttpMetrics, route_of
from toolcodec.pool.service.tracing import decode_span, traced
from toolcodec.results.errors import BAD_REQUEST, INTERNAL_ERROR, PAYLOAD_TOO_LARGE
from toolcodec.worker.envelope import error_envelope
from toolcodec.worker.faults import FAULT_OPS
from toolcodec.worker.joblog import JobLog
from toolcodec.worker.jobs import FAULT_ENV, PUBLIC_OPS
from toolcodec.worker.logs import MODEL, PRESET, JobIds, job_ids

ARRIVED = "toolcodec.arrived"  # ASGI scope key: time.monotonic() when the request arrived
MAX_BATCH = 256  # jobs in one /v1/batch request
_STATUS = {"ok": 200, "timeout": 504, "rejected": 429, "worker_lost": 503}
_ERROR_STATUS = {BAD_REQUEST: 400, PAYLOAD_TOO_LARGE: 413, "backend_unavailable": 503,
                 INTERNAL_ERROR: 500}
_JSON_TYPES = ("application/json", "application/*+json")


class Service:
    """What the routes share: the pool, limits, readiness and metrics."""

    def __init__(self, pool: Any, *, timeout_ms: float, max_body: int,
                 registry: CollectorRegistry, ready: Callable[[], Awaitable[str | None]],
                 models: Any = None) -> None:
        self.pool, self.timeout_ms, self.max_body = pool, timeout_ms, max_body
        self.models = models  # decoder options per model (toolcodec.pool.proxy.settings)
        self.registry = registry
        self.metrics = HttpMetrics(registry)
        self.ready = ready
        self.draining = False
        self.access_log = False  # one line per request (toolcodec.pool.service.access)
        self.upstream: str | None = None  # the proxy's model server, when there is one
        self.joblog = JobLog("caller")
        # The callers' ops (decode_block is the streaming pool's own, never HTTP's); the
        # fault-injection ops only where the operator enabled them, and never listed.
        self.ops = frozenset(PUBLIC_OPS) | (frozenset(FAULT_OPS)
                                            if os.environ.get(FAULT_ENV) == "1" else frozenset())

    # -- jobs -----------------------------------------------------------------------------------

    async def op(self, request: Request) -> Response:
        start = time.perf_counter()
        op = request.path_params["op"]
        if request.method != "POST":  # GET /v1/models without --upstream: no such resource
            if op in self.ops:
                return self.answer(self.local(op, (BAD_REQUEST, f"/v1/{op} takes POST"), start),
                                   status=405, headers={"allow": "POST"})
            return self.answer(self.local(op, (BAD_REQUEST, f"no resource at /v1/{op}"), start),
                               status=404)
        body, refusal = await self.body_or_refusal(request, op, start, self.read_object)
        if refusal is not None:
            return refusal
        return self.answer(await self.run(op, body, start, request.scope.get(ARRIVED)))

    async def prepare(self, request: Request) -> Response:
        """``POST /v1/prepare`` ``{"tools", "options"?, "model"?}``: build the decoder for a
        tool set on every worker now, so that the decodes that use it spend their budget
        parsing (docs/http.md). Answers at once: ``{"prepared": true}``."""
        start = time.perf_counter()
        body, refusal = await self.body_or_refusal(request, "prepare", start, self.read_object)
        if refusal is not None:
            return refusal
        problem = self.prepare_problem(body)
        if problem is not None:
            return self.answer(self.local("prepare", (BAD_REQUEST, problem), start))
        return _json(200, {"prepared": self.pool.prepare(body["tools"], body.get("options"))})

    def prepare_problem(self, body: dict[str, Any]) -> str | None:
        """What is wrong with a prepare body (None: nothing); a ``model`` is resolved into
        its configured ``options`` as a decode's is."""
        if not isinstance(body.get("tools"), list):
            return "prepare needs 'tools' (a list of tool definitions)"
        if not isinstance(body.get("options", {}), dict):
            return "prepare: 'options' must be an object"
        unknown = sorted(set(body) - {"tools", "options", "model"})
        if unknown:
            return f"prepare: unknown field(s) {unknown}"
        return self.model_options(body)

    async def batch(self, request: Request) -> Response:
        start = time.perf_counter()
        body, refusal = await self.body_or_refusal(request, "batch", start, self.read_json)
        if refusal is not None:
            return refusal
        jobs = body.get("jobs") if isinstance(body, dict) else body
        if not isinstance(jobs, list) or not 0 < len(jobs) <= MAX_BATCH:
            return self.answer(self.local("batch", (BAD_REQUEST, "the body must be "
                               f"{{\"jobs\": [...]}} with 1 to {MAX_BATCH} jobs"), start))
        arrived = request.scope.get(ARRIVED)
        outs = await asyncio.gather(*(self.run_item(job, arrived) for job in jobs))
        return _json(200, {"results": outs})

    async def run_item(self, job: Any, arrived: float | None = None) -> dict[str, Any]:
        start = time.perf_counter()
        if not isinstance(job, dict) or not isinstance(job.get("op"), str) \
                or not isinstance(job.get("payload"), dict):
            return self.local("batch", (BAD_REQUEST, 'each job must be {"op": str, '
                              '"payload": object}'), start)
        return await self.run(job["op"], dict(job["payload"]), start, arrived)

    async def run(self, op: str, payload: dict[str, Any], start: float,
                  arrived: float | None = None) -> dict[str, Any]:
        if op not in self.ops:
            return self.local(op, (BAD_REQUEST, f"unknown op {op!r}; expected one of "
                              f"{', '.join(PUBLIC_OPS)}"), start)
        timeout, problem = self.job_timeout(payload.pop("timeout_ms", None))
        if problem is None and op == "decode":
            problem = self.model_options(payload)
        if problem is not None:
            return self.local(op, (BAD_REQUEST, problem), start)
        with job_ids() as ids:  # the queued job's id (rq), which the worker's line names too
            if op == "decode":
                with decode_span(MODEL.get()) as span:
                    envelope = await self.pool.asubmit(op, payload, timeout_ms=timeout,
                                                       arrived=arrived)
                    span.results([envelope.get("result")], [payload.get("finish_reason")])
            else:
                envelope = await self.pool.asubmit(op, payload, timeout_ms=timeout,
                                                   arrived=arrived)
        self.joblog.job(op, self.pool.backend, envelope, payload, job_id=ids[-1] if ids else None)
        return envelope

    def model_options(self, payload: dict[str, Any]) -> str | None:
        """A decode's ``model`` (its configured options) and ``options.preset``, resolved
        into the payload's ``options`` as the proxy resolves them; a problem, or None."""
        from toolcodec.pool.proxy.settings import ModelSettings, SettingsError, job_options

        options = payload.get("options")
        if "model" not in payload and not (isinstance(options, dict) and "preset" in options):
            return None
        models = self.models or ModelSettings()
        MODEL.set(payload.get("model") if isinstance(payload.get("model"), str) else None)
        if isinstance(options, dict) and isinstance(options.get("preset"), str):
            PRESET.set(options["preset"])
        try:
            payload["options"] = job_options(models.resolve(payload.pop("model", None), options,
                                                            "options"))
        except SettingsError as exc:
            return str(exc)
        return None

    def job_timeout(self, asked: Any) -> tuple[float, str | None]:
        if asked is None:
            return self.timeout_ms, None
        if isinstance(asked, bool) or not isinstance(asked, int | float) \
                or not math.isfinite(asked) or asked <= 0:
            return 0.0, "timeout_ms must be a positive number of milliseconds"
        return min(float(asked), self.timeout_ms), None  # a caller may only lower it

    def local(self, op: str, problem: tuple[str, str], start: float) -> dict[str, Any]:
        """An envelope answered by the server itself (its real op and the time it took),
        counted like any job."""
        code, message = problem
        elapsed_ms = (time.perf_counter() - start) * 1000.0
        envelope = {**error_envelope(op, "error", code, message), "backend": self.pool.backend,
                    "elapsed_ms": elapsed_ms}
        # Label values stay a closed set: what is not an op of this server is "unknown".
        known = op if op in self.ops else "unknown"
        self.pool.metrics.observe(known, self.pool.backend, envelope)
        self.joblog.job(known, self.pool.backend, envelope, None)
        return envelope

    def answer(self, envelope: dict[str, Any], *, status: int | None = None,
               headers: dict[str, str] | None = None) -> Response:
        if status is None:
            status = _STATUS.get(envelope.get("status"), 500)
            if envelope.get("status") == "error":
                status = _ERROR_STATUS.get((envelope.get("error") or {}).get("code"), 400)
        if status == 429:
            headers = {**(headers or {}), "retry-after": "1"}
        return _json(status, envelope, headers)

    # -- bodies ---------------------------------------------------------------------------------

    async def body_or_refusal(self, request: Request, op: str, start: float, read: Any
                              ) -> tuple[Any, Response | None]:
        """The request's body read by *read*, or the answer that refuses it (a bad content
        type, a body too large or not JSON), as every route that takes a body answers it."""
        try:
            body, refused = await read(request)
        except HTTPException as exc:
            return None, self.answer(self.local(op, (BAD_REQUEST, f"{exc.status_code}: "
                                                     f"{exc.detail}"), start),
                                     status=exc.status_code)
        if refused is not None:
            return None, self.answer(self.local(op, refused, start))
        return body, None

    async def read_object(self, request: Request) -> tuple[Any, tuple[str, str] | None]:
        body, refused = await self.read_json(request)
        if refused is None and not isinstance(body, dict):
            return None, (BAD_REQUEST, "the body must be a JSON object (the job's payload)")
        return body, refused

    async def read_json(self, request: Request) -> tuple[Any, tuple[str, str] | None]:
        kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
        if kind != "application/json" and not kind.endswith("+json"):
            raise HTTPException(415, f"content-type must be application/json, got {kind!r}")
        declared = request.headers.get("content-length", "")
        if declared.isdigit() and int(declared) > self.max_body:
            return None, (PAYLOAD_TOO_LARGE, f"the body has {declared} bytes; the limit is "
                          f"{self.max_body} (--max-body)")
        parts, size = [], 0
        async for part in request.stream():
            size += len(part)
            if size > self.max_body:
                return None, (PAYLOAD_TOO_LARGE, f"the body is over the limit of "
                              f"{self.max_body} bytes (--max-body)")
            parts.append(part)
        try:
            return orjson.loads(b"".join(parts)), None
        except orjson.JSONDecodeError as exc:
            return None, (BAD_REQUEST, f"the body is not JSON: {exc}")

    # -- health ---------------------------------------------------------------------------------

    async def healthz(self, request: Request) -> Response:
        return _json(200, {"status": "alive"})

    async def readyz(self, request: Request) -> Response:
        why = "draining: the server is shutting down" if self.draining else await self.ready()
        if why is not None:
            return _json(503, {"status": "not_ready", "reason": why})
        return _json(200, {"status": "ready"})

    async def metrics_page(self, request: Request) -> Response:
        return Response(generate_latest(self.registry), media_type=CONTENT_TYPE_LATEST)


def build_app(service: Service, extra_routes: list[Route] | None = None,
              direct: dict[str, Any] | None = None) -> Any:
    """The ASGI app: Starlette, with *extra_routes* (the proxy's) matched first; a POST to
    a path of *direct* goes straight to its ASGI app (the proxy's hot path), skipping the
    framework's routing and middleware; the metrics and the arrival stamp cover both."""
    routes = [
        *(extra_routes or []),
        Route("/v1/batch", service.batch, methods=["POST"]),
        Route("/v1/prepare", service.prepare, methods=["POST"]),
        Route("/v1/{op}", service.op, methods=["GET", "HEAD", "POST", "PUT", "PATCH", "DELETE"]),
        Route("/metrics", service.metrics_page, methods=["GET"]),
        Route("/healthz", service.healthz, methods=["GET"]),
        Route("/readyz", service.readyz, methods=["GET"]),
    ]

    async def http_error(request: Request, exc: Exception) -> Response:
        status = getattr(exc, "status_code", 500)
        detail = getattr(exc, "detail", "") or "error"
        envelope = {**error_envelope("", "error", BAD_REQUEST, f"{status}: {detail}"),
                    "backend": service.pool.backend, "elapsed_ms": 0.0}
        return _json(status, envelope, getattr(exc, "headers", None))

    async def crashed(request: Request, exc: Exception) -> Response:
        return _json(500, _crash(service, exc))

    app = Starlette(routes=routes, exception_handlers={HTTPException: http_error,
                                                       Exception: crashed})
    app = request_ids(_closing_when_draining(service.metrics.wrap(app), service),
                      service.access_log)
    if not direct:
        return _stamped(traced(app))
    front = _direct(direct, app, service)
    with_span = traced(front)
    # Without a tracer provider, the front layer stamps the arrival itself: one layer less.
    return _direct(direct, app, service, stamp=True) if with_span is front \
        else _stamped(with_span)


def _direct(paths: dict[str, Any], app: Any, service: Service, stamp: bool = False) -> Any:
    """POSTs to *paths* straight to their apps, the rest to *app* (the framework with its
    middleware). A direct request gets what that middleware gives, in one layer and one
    wrapper of ``send`` (each layer was an ASGI call and a ``send`` wrapper per request):
    its ids in context and ``X-Request-Id`` echoed, its access line, its HTTP metrics,
    ``Connection: close`` while the server drains; a handler that fails before answering gets
    the same 500 envelope as the framework's handler gives. ``stamp``: note the arrival of
    every request here (``_stamped``)."""
    routes = {path: (handler, route_of(path)) for path, handler in paths.items()}
    metrics, access_log = service.metrics, service.access_log

    async def dispatch(scope: dict, receive: Any, send: Any) -> None:
        if stamp:
            scope[ARRIVED] = time.monotonic()
        found = routes.get(scope["path"]) if scope["type"] == "http" \
            and scope["method"] == "POST" else None
        if found is None:
            await app(scope, receive, send)
            return
        handler, route = found
        start = time.perf_counter()
        scope, rid, tokens = enter(scope)
        echo = (b"x-request-id", rid.encode())
        status = 0  # none sent yet

        async def sending(message: dict) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = message["status"]
                # as the layers did it: the draining close first, then the id's echo
                if service.draining:
                    headers = [(k, v) for k, v in message.get("headers", ())
                               if (low := k.lower()) != b"connection" and low != b"x-request-id"]
                    headers += ((b"connection", b"close"), echo)
                else:
                    headers = [(k, v) for k, v in message.get("headers", ())
                               if k.lower() != b"x-request-id"]
                    headers.append(echo)
                message = {**message, "headers": headers}
            await send(message)

        ids = JobIds()
        try:
            with ids:
                try:
                    await handler(scope, receive, sending)
                except Exception as exc:
                    if status:
                        raise  # the answer is half sent: the server closes the connection
                    await send_json(sending, 500, _crash(service, exc))
        finally:
            metrics.count(route, status or 500, time.perf_counter() - start)
            if access_log:
                access_line(scope, status, start, ids.ids)
            leave(tokens)
    return dispatch


def asgi_headers(headers: dict[str, str] | None) -> list[tuple[bytes, bytes]]:
    """*headers* as an ASGI response start lists them."""
    return [(k.lower().encode("latin-1"), str(v).encode("latin-1"))
            for k, v in (headers or {}).items()]


async def send_json(send: Any, status: int, body: Any,
                    headers: dict[str, str] | None = None) -> None:
    """Answer *body* as JSON through a bare ASGI *send* (no framework response object)."""
    content = orjson.dumps(body)
    await send({"type": "http.response.start", "status": status, "headers": [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(content)).encode()), *asgi_headers(headers)]})
    await send({"type": "http.response.body", "body": content})


def _crash(service: Service, exc: Exception) -> dict[str, Any]:
    """The 500 envelope of a handler that failed."""
    return {**error_envelope("", "error", INTERNAL_ERROR, f"the server failed: "
                             f"{type(exc).__name__}: {exc}"),
            "backend": service.pool.backend, "elapsed_ms": 0.0}


def _stamped(app: Any) -> Any:
    """Note when each request reached the app, first thing: a job's budget counts from
    then, so the time a request waited behind others on a busy loop is not free."""
    async def stamped(scope: dict, receive: Any, send: Any) -> None:
        scope[ARRIVED] = time.monotonic()
        await app(scope, receive, send)
    return stamped


def _closing_when_draining(app: Any, service: Service) -> Any:
    """While the server drains, every answer says ``Connection: close`` and its connection is
    closed after it: a client learns from the answer itself to open a new connection (to
    another replica), instead of reusing one that the server is about to close under it."""
    async def closing(scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return

        async def sending(message: dict) -> None:
            if message["type"] == "http.response.start" and service.draining:
                headers = [(k, v) for k, v in message.get("headers", ())
                           if k.lower() != b"connection"]
                message = {**message, "headers": [*headers, (b"connection", b"close")]}
            await send(message)
        await app(scope, receive, sending)
    return closing


def _json(status: int, body: Any, headers: dict[str, str] | None = None) -> Response:
    return Response(orjson.dumps(body), status, headers=headers, media_type="application/json")
