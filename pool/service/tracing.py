"""OpenTelemetry spans for ``toolcodec serve``, with the optional extra ``toolcodec[otel]``.

Without ``opentelemetry-api`` installed, nothing here does anything. With it, and a tracer
provider configured before serve starts (the OpenTelemetry SDK in the process, e.g. serve run
under ``opentelemetry-instrument``), serve makes:

- a **server span** per HTTP request, named ``METHOD ROUTE`` (the route template, a closed set),
  child of the caller's W3C ``traceparent`` (and ``tracestate``/``baggage``), with
  ``http.request.method``, ``url.path``, ``http.route``, ``http.response.status_code``; 5xx
  answers set the span's status to error;
- a **``toolcodec.decode`` span** around each decode (``POST /v1/decode``, and the proxy's
  whole answers), with the GenAI semantic-convention attributes that fit:
  ``gen_ai.request.model``, ``gen_ai.response.finish_reasons``, and toolcodec's own:
  ``toolcodec.decode.ok``, ``toolcodec.decode.path``, ``toolcodec.tool_calls.count``,
  ``toolcodec.tool_calls.names``, ``toolcodec.repairs``, ``toolcodec.error_codes``. The calls'
  arguments (user data) are recorded only when ``TOOLCODEC_OTEL_ARGUMENTS=1``, as
  ``toolcodec.tool_calls.arguments`` (a JSON string per call).
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import AbstractContextManager, contextmanager
from typing import Any

import orjson
from toolcodec.pool.service.http_metrics import route_of

try:  # the optional extra toolcodec[otel]
    from opentelemetry import propagate, trace
    from opentelemetry.environment_variables import OTEL_PYTHON_TRACER_PROVIDER
    from opentelemetry.trace import SpanKind, Status, StatusCode
except ImportError:  # pragma: no cover - exercised where the extra is not installed
    trace = None

ENV_ARGUMENTS = "TOOLCODEC_OTEL_ARGUMENTS"
TRACER = "toolcodec"


def enabled() -> bool:
    """Whether the OpenTelemetry API is installed (spans are no-ops without a provider)."""
    return trace is not None


def traced(app: Any) -> Any:
    """*app* with a server span per HTTP request; unchanged without the extra, or when no
    tracer provider was set before the app was built (the hot path stays free of it)."""
    if trace is None or isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider):
        return app

    async def with_span(scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        carrier = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        parent = propagate.extract(carrier)
        route = route_of(scope["path"])
        tracer = trace.get_tracer(TRACER)
        with tracer.start_as_current_span(
                f"{scope['method']} {route}", context=parent, kind=SpanKind.SERVER,
                attributes={"http.request.method": scope["method"], "url.path": scope["path"],
                            "http.route": route}) as span:
            async def sending(message: dict) -> None:
                if message["type"] == "http.response.start":
                    status = message["status"]
                    span.set_attribute("http.response.status_code", status)
                    if status >= 500:
                        span.set_status(Status(StatusCode.ERROR))
                await send(message)
            await app(scope, receive, sending)
    return with_span


class DecodeSpan:
    """What a decode span records; :meth:`results` is given the decode results."""

    def __init__(self, span: Any) -> None:
        self.span = span

    def results(self, results: list[dict[str, Any] | None],
                finish_reasons: list[Any] | None = None) -> None:
        if self.span is None or not self.span.is_recording():  # sampled out: nothing to say
            return
        got = [r for r in results if isinstance(r, dict)]
        calls = [c for r in got for c in r.get("calls") or () if isinstance(c, dict)]
        attributes: dict[str, Any] = {
            "toolcodec.decode.ok": all(r.get("ok", False) for r in got) and bool(got),
            "toolcodec.tool_calls.count": len(calls),
            "toolcodec.tool_calls.names": [str(c.get("name")) for c in calls],
            "toolcodec.repairs": sorted({x for r in got for x in r.get("repairs") or ()
                                         if isinstance(x, str)}),
            "toolcodec.error_codes": sorted({e.get("code") for r in got
                                             for e in r.get("errors") or ()
                                             if isinstance(e, dict)
                                             and isinstance(e.get("code"), str)}),
        }
        paths = [r["path"] for r in got if isinstance(r.get("path"), str)]
        if paths:
            attributes["toolcodec.decode.path"] = paths[0]
        reasons = [str(f) for f in finish_reasons or () if f is not None]
        if reasons:
            attributes["gen_ai.response.finish_reasons"] = reasons
        if os.environ.get(ENV_ARGUMENTS) == "1":  # user data: only when the operator asks
            attributes["toolcodec.tool_calls.arguments"] = [
                orjson.dumps(c.get("arguments"), default=str).decode() for c in calls]
        self.span.set_attributes(attributes)


class _Unsampled:
    """The context of a decode nobody traces: no span, no generator to step through."""

    def __enter__(self) -> DecodeSpan:
        return _NO_SPAN

    def __exit__(self, *exc: object) -> None:
        return None


_NO_SPAN = DecodeSpan(None)
_UNTRACED = _Unsampled()


def decode_span(model: Any = None) -> AbstractContextManager[DecodeSpan]:
    """A ``toolcodec.decode`` span (a child of the current one) around a decode; none while
    no tracer provider is set (its spans would record nothing: a proxy answer's decode then
    pays neither the tracer's context switch nor the attributes)."""
    if trace is None or not _provider_set():
        return _UNTRACED
    return _decode_span(model)


_MISSING = object()
# A provider the environment names is configured before the process starts (it is loaded on
# first use); read once, not on every decode as ``get_tracer_provider`` reads it while none
# is set (about 1.5 µs a call).
_PROVIDER_IN_ENV = trace is not None and OTEL_PYTHON_TRACER_PROVIDER in os.environ


def _provider_set() -> bool:
    """Whether a tracer provider is set; checked per call, since code may set one after
    start (the API's global says it, when the API has one)."""
    if getattr(trace, "_TRACER_PROVIDER", _MISSING) is None and not _PROVIDER_IN_ENV:
        return False
    return not isinstance(trace.get_tracer_provider(), trace.ProxyTracerProvider)


@contextmanager
def _decode_span(model: Any) -> Iterator[DecodeSpan]:
    tracer = trace.get_tracer(TRACER)
    attributes = {"gen_ai.request.model": model} if isinstance(model, str) else {}
    with tracer.start_as_current_span("toolcodec.decode", kind=SpanKind.INTERNAL,
                                      attributes=attributes) as span:
        yield DecodeSpan(span)
