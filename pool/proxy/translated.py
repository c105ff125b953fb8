"""The endpoint of an API shape translated to the chat route: ``/v1/messages``, ``/v1/responses``.

The request is read (413 over ``--max-body``), translated to a chat completion request by the
shape's ``to_chat`` (a ``TranslationError`` is a 400 in the shape's error body), and given to
the chat route (``ChatProxy.complete`` or ``ChatProxy.stream``), which sends it upstream and
decodes the answer. The decoded answer is translated back (``answer``; ``stream`` for the
SSE events); an error answer keeps its status and headers (``x-toolcodec-undecoded``,
``Retry-After``) with the shape's error body (``error``).
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass
from typing import Any

import orjson
from toolcodec.pool.proxy.chat import ChatProxy
from toolcodec.pool.proxy.endpoint import Receive, Scope, Send, request_body
from toolcodec.pool.proxy.endpoint import _send_stream as send_stream
from toolcodec.pool.service.app import send_json


class TranslationError(ValueError):
    """A request this API shape cannot be translated from: the client's 400."""


@dataclass(frozen=True, slots=True)
class Shape:
    """How one API shape translates to and from the chat route."""

    to_chat: Callable[[dict[str, Any]], dict[str, Any]]
    answer: Callable[[dict[str, Any], dict[str, Any]], tuple[dict[str, Any], dict[str, str]]]
    error: Callable[[int, Any], dict[str, Any]]
    stream: Callable[[AsyncIterator[bytes], dict[str, Any]], AsyncIterator[bytes]]
    headers: Callable[[dict[str, str]], dict[str, str]] = lambda h: h


class _Translated:
    """The shape's SSE bytes over the chat route's ``Relay``; keeps ``undecoded`` readable for
    the header sent with the first bytes."""

    def __init__(self, relay: Any, shape: Shape, request: dict[str, Any]) -> None:
        self.relay, self.shape, self.request = relay, shape, request

    @property
    def undecoded(self) -> list[dict[str, Any]]:
        return self.relay.undecoded

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self._run()

    async def _run(self) -> AsyncIterator[bytes]:
        # Both generators closed here, at once, when the client goes away: the relay's close
        # ends the upstream stream (not left to the garbage collector).
        parts = aiter(self.relay)
        try:
            async with contextlib.aclosing(self.shape.stream(parts, self.request)) as events:
                async for out in events:
                    yield out
        finally:
            await parts.aclose()


class TranslatedEndpoint:
    """An ASGI app answering one translated route with *proxy*'s chat route."""

    def __init__(self, proxy: ChatProxy, max_body: int, shape: Shape) -> None:
        self.proxy, self.max_body, self.shape = proxy, max_body, shape

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = {k.decode("latin-1"): v.decode("latin-1") for k, v in scope["headers"]}
        raw, problem = await request_body(receive, headers.get("content-length"),
                                          self.max_body)
        if problem is not None:
            await send_json(send, problem[0], self.shape.error(*problem))
            return
        try:
            body = orjson.loads(raw)
            if not isinstance(body, dict):
                raise TranslationError("the request body must be a JSON object")
            chat = self.shape.to_chat(body)
        except (orjson.JSONDecodeError, TranslationError) as exc:
            await send_json(send, 400, self.shape.error(400, {"error": {
                "message": str(exc), "code": "bad_request"}}))
            return
        headers = self.shape.headers(headers)
        if chat.get("stream"):
            status, out, extra = await self.proxy.stream(chat, headers)
            if status != 200:
                await send_json(send, status, self.shape.error(status, out), extra)
                return
            await send_stream(_Translated(out, self.shape, body), receive, send)
            return
        status, answer, extra = await self.proxy.complete(chat, headers)
        if status != 200:
            await send_json(send, status, self.shape.error(status, answer), extra)
            return
        out, more = self.shape.answer(answer, body)
        await send_json(send, 200, out, {**extra, **more})
