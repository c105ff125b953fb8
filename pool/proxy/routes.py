"""The proxy's HTTP routes (Starlette): ``POST /v1/chat/completions``, ``GET /v1/models``, and
``POST /v1/completions``, ``/v1/responses``, ``/v1/embeddings``, ``/v1/moderations`` relayed
unchanged."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route
from toolcodec.pool.proxy.chat import PASSED_THROUGH, UNDECODED_HEADER, ChatProxy

_JSON = "application/json"


def proxy_routes(proxy: ChatProxy, max_body: int) -> list[Route]:
    """Routes serving *proxy*; request bodies over *max_body* bytes get 413."""

    async def completions(request: Request) -> Response:
        raw, error = await _read_body(request, max_body)
        if error is not None:
            return error
        body, error = _chat_request(raw)
        if error is not None:
            return error
        headers = dict(request.headers)
        if body.get("stream"):
            status, out, extra = await proxy.stream(body, headers)
            if status != 200:
                return _json(status, out, extra)
            return await _sse_response(out)
        status, answer, extra = await proxy.complete(body, headers)
        return _json(status, answer, extra)

    async def models(request: Request) -> Response:
        status, content, kind = await proxy.models_list(dict(request.headers))
        return Response(content, status, media_type=kind)

    async def passthrough(request: Request) -> Response:
        raw, error = await _read_body(request, max_body)
        if error is not None:
            return error
        path = request.url.path.removeprefix("/v1")
        status, headers, out = await proxy.passthrough("POST", path, raw, dict(request.headers))
        if isinstance(out, dict):
            return _json(status, out, headers)
        return StreamingResponse(out, status, media_type=headers.get("content-type", _JSON))

    return [Route("/v1/chat/completions", completions, methods=["POST"]),
            Route("/v1/models", models, methods=["GET"]),
            *(Route(f"/v1{path}", passthrough, methods=["POST"]) for path in PASSED_THROUGH)]


async def _sse_response(relay: Any) -> Response:
    """The stream's response, its headers sent with the first bytes: a block the decoder had
    no capacity for before then is named in ``x-toolcodec-undecoded``."""
    stream = aiter(relay)
    first = await anext(stream)
    headers = {"cache-control": "no-cache"}
    undecoded = relay.undecoded
    if undecoded:
        headers[UNDECODED_HEADER] = str(undecoded[0].get("code") or undecoded[0].get("status"))

    async def body() -> AsyncIterator[bytes]:
        yield first
        async for part in stream:
            yield part
    return StreamingResponse(body(), media_type="text/event-stream", headers=headers)


async def _read_body(request: Request, max_body: int) -> tuple[bytes, Response | None]:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > max_body:
        return b"", _error(413, "payload_too_large",
                           f"request body of {declared} bytes is over the limit of {max_body}")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > max_body:
            return b"", _error(413, "payload_too_large",
                               f"request body is over the limit of {max_body} bytes")
        chunks.append(chunk)
    return b"".join(chunks), None


def _chat_request(raw: bytes) -> tuple[Any, Response | None]:
    try:
        body = orjson.loads(raw)
    except orjson.JSONDecodeError as exc:
        return None, _error(400, "bad_request", f"request body is not JSON: {exc}")
    if not isinstance(body, dict):
        return None, _error(400, "bad_request", "request body must be a JSON object")
    if not isinstance(body.get("messages"), list):
        return None, _error(400, "bad_request", "'messages' must be a list")
    tools = body.get("tools")
    if tools is not None and not isinstance(tools, list):
        return None, _error(400, "bad_request", "'tools' must be a list")
    return body, None


def _error(status: int, code: str, message: str) -> Response:
    body = {"error": {"message": message, "type": "invalid_request_error", "code": code}}
    return _json(status, body)


def _json(status: int, body: Any, headers: dict[str, str] | None = None) -> Response:
    return Response(orjson.dumps(body), status, headers=headers, media_type=_JSON)
