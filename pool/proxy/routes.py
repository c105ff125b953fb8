"""The proxy's HTTP routes: ``POST /v1/chat/completions`` (a bare ASGI endpoint, see
``endpoint``), ``POST /v1/messages`` and ``/v1/responses`` (translated to the chat route, see
``translated``), ``GET /v1/models``, and ``POST /v1/completions``, ``/v1/embeddings``,
``/v1/moderations`` relayed unchanged (Starlette)."""

from __future__ import annotations

from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route
from toolcodec.pool.proxy import messages, responses
from toolcodec.pool.proxy.chat import PASSED_THROUGH, ChatProxy
from toolcodec.pool.proxy.endpoint import ChatEndpoint, request_body
from toolcodec.pool.proxy.translated import Shape, TranslatedEndpoint

_JSON = "application/json"
CHAT_PATH = "/v1/chat/completions"
MESSAGES = Shape(messages.to_chat, messages.answer, messages.error, messages.stream,
                 messages.headers)
RESPONSES = Shape(responses.to_chat, responses.answer, responses.error, responses.stream)
# Decoded here (translated to the chat route), not relayed.
TRANSLATED = {"/v1/messages": MESSAGES, "/v1/responses": RESPONSES}


def proxy_routes(proxy: ChatProxy, max_body: int) -> list[Route]:
    """Routes serving *proxy*; request bodies over *max_body* bytes get 413. The chat and
    the translated endpoints are also called directly by the app (``chat_endpoint``)."""

    async def models(request: Request) -> Response:
        status, content, kind = await proxy.models_list(dict(request.headers))
        return Response(content, status, media_type=kind)

    async def passthrough(request: Request) -> Response:
        raw, error = await request_body(request.receive,
                                        request.headers.get("content-length"), max_body)
        if error is not None:
            return _json(*error)
        path = request.url.path.removeprefix("/v1")
        status, headers, out = await proxy.passthrough("POST", path, raw, dict(request.headers))
        if isinstance(out, dict):
            return _json(status, out, headers)
        return StreamingResponse(out, status, media_type=headers.get("content-type", _JSON))

    relayed = [p for p in PASSED_THROUGH if f"/v1{p}" not in TRANSLATED]
    return [Route(CHAT_PATH, ChatEndpoint(proxy, max_body), methods=["POST"]),
            *(Route(path, TranslatedEndpoint(proxy, max_body, shape), methods=["POST"])
              for path, shape in TRANSLATED.items()),
            Route("/v1/models", models, methods=["GET"]),
            *(Route(f"/v1{path}", passthrough, methods=["POST"]) for path in relayed)]


def chat_endpoint(routes: list[Route]) -> dict[str, Any]:
    """``{path: ASGI app}`` for the app to call before routing (``build_app``'s ``direct``)."""
    return {r.path: r.endpoint for r in routes
            if isinstance(r.endpoint, ChatEndpoint | TranslatedEndpoint)}


def _json(status: int, body: Any, headers: dict[str, str] | None = None) -> Response:
    return Response(orjson.dumps(body), status, headers=headers, media_type=_JSON)
