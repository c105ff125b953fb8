"""OpenTelemetry spans (the extra ``toolcodec[otel]``), read with the SDK's in-memory exporter.

The service's app runs in this process on uvicorn (a real socket, port 0) over a real process
pool, so the spans land in this process's exporter; requests are real HTTP with a W3C
``traceparent``.
"""

from __future__ import annotations

import threading

import httpx
import orjson
import pytest
import uvicorn
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from prometheus_client import CollectorRegistry
from toolcodec.pool.api import Pool
from toolcodec.pool.service.app import Service, build_app

TRACE = "0af7651916cd43dd8448eb211c80319c"
PARENT = "b7ad6b7169203331"
TOOLS = [{"name": "get_weather", "parameters": {"type": "object", "properties": {
    "city": {"type": "string"}}}}]
TEXT = '<tool_call>{"name": "get_weather", "arguments": {"city": "Oslo",}}</tool_call>'

EXPORTER = InMemorySpanExporter()


@pytest.fixture(scope="module")
def server():
    provider = TracerProvider()
    provider.add_span_processor(SimpleSpanProcessor(EXPORTER))
    trace.set_tracer_provider(provider)  # once per process: the first provider set stays
    registry = CollectorRegistry()
    pool = Pool("process", workers=1, timeout_ms=5000, registry=registry)

    async def ready() -> None:
        return None

    service = Service(pool, timeout_ms=5000, max_body=1 << 20, registry=registry, ready=ready)
    config = uvicorn.Config(build_app(service), host="127.0.0.1", port=0, log_level="warning",
                            lifespan="off")
    uv = uvicorn.Server(config)
    thread = threading.Thread(target=uv.run, daemon=True)
    thread.start()
    while not uv.started:
        assert thread.is_alive(), "the server failed to start"
        threading.Event().wait(0.01)
    port = uv.servers[0].sockets[0].getsockname()[1]
    yield f"http://127.0.0.1:{port}"
    uv.should_exit = True
    thread.join(30)
    pool.close()


def decode(url: str) -> httpx.Response:
    return httpx.post(url + "/v1/decode", timeout=30, headers={
        "content-type": "application/json", "traceparent": f"00-{TRACE}-{PARENT}-01"},
        content=orjson.dumps({"text": TEXT, "tools": TOOLS, "finish_reason": "stop"}))


def spans_of_trace() -> dict[str, object]:
    return {s.name: s for s in EXPORTER.get_finished_spans()
            if f"{s.context.trace_id:032x}" == TRACE}


def test_a_server_span_per_request_continues_the_callers_trace(server) -> None:
    EXPORTER.clear()
    assert decode(server).status_code == 200
    spans = spans_of_trace()
    span = spans["POST /v1/{op}"]
    assert span.kind == trace.SpanKind.SERVER
    assert f"{span.parent.span_id:016x}" == PARENT  # the caller's span is its parent
    assert span.attributes["http.response.status_code"] == 200
    assert span.attributes["url.path"] == "/v1/decode"


def test_the_decode_span_has_genai_attributes_and_never_the_arguments_by_default(
        server, monkeypatch) -> None:
    EXPORTER.clear()
    assert decode(server).json()["result"]["ok"] is True
    spans = spans_of_trace()
    span = spans["toolcodec.decode"]
    assert span.parent.span_id == spans["POST /v1/{op}"].context.span_id
    attrs = span.attributes
    assert attrs["toolcodec.decode.ok"] is True and attrs["toolcodec.decode.path"] == "xml"
    assert list(attrs["toolcodec.tool_calls.names"]) == ["get_weather"]
    assert list(attrs["gen_ai.response.finish_reasons"]) == ["stop"]
    assert "json.trailing_comma" in attrs["toolcodec.repairs"]
    assert "toolcodec.tool_calls.arguments" not in attrs
    assert not any("Oslo" in str(v) for v in attrs.values())

    monkeypatch.setenv("TOOLCODEC_OTEL_ARGUMENTS", "1")  # the operator asks for them
    EXPORTER.clear()
    decode(server)
    attrs = spans_of_trace()["toolcodec.decode"].attributes
    assert [orjson.loads(a) for a in attrs["toolcodec.tool_calls.arguments"]] == [
        {"city": "Oslo"}]
