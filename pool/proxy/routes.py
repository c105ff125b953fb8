"""The proxy's HTTP routes (Starlette): ``POST /v1/chat/completions``, ``GET /v1/models``."""

from __future__ import annotations

from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route
from toolcodec.pool.proxy.chat import ChatProxy

_JSON = "application/json"


def proxy_routes(proxy: ChatProxy, max_body: int) -> list[Route]:
    """Routes serving *proxy*; request bodies over *max_body* bytes get 413."""

    async def completions(request: Request) -> Response:
        body, error = await _read_json(request, max_body)
        if error is not None:
            return error
        headers = dict(request.headers)
        if body.get("stream"):
            status, out = await proxy.stream(body, headers)
            if status == 200:
                return StreamingResponse(out, media_type="text/event-stream",
                                         headers={"cache-control": "no-cache"})
            return _json(status, out)
        status, answer, extra = await proxy.complete(body, headers)
        return _json(status, answer, extra)

    async def models(request: Request) -> Response:
        status, content, kind = await proxy.models(dict(request.headers))
        return Response(content, status, media_type=kind)

    return [Route("/v1/chat/completions", completions, methods=["POST"]),
            Route("/v1/models", models, methods=["GET"])]


async def _read_json(request: Request, max_body: int) -> tuple[Any, Response | None]:
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > max_body:
        return None, _error(413, "payload_too_large",
                            f"request body of {declared} bytes is over the limit of {max_body}")
    chunks, size = [], 0
    async for chunk in request.stream():
        size += len(chunk)
        if size > max_body:
            return None, _error(413, "payload_too_large",
                                f"request body is over the limit of {max_body} bytes")
        chunks.append(chunk)
    try:
        body = orjson.loads(b"".join(chunks))
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
