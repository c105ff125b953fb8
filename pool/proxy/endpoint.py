"""``POST /v1/chat/completions`` as a bare ASGI endpoint: the proxy's hot path.

Every chat completion a backend sends goes through here, so it speaks ASGI directly instead
of through the framework's request, response and middleware objects (which cost more of the
proxy's loop than the decode itself). The same object is the framework's route for the path,
so other methods get the framework's 405; the app also calls it directly, first
(``toolcodec.pool.service.app.build_app``).

Answers: the proxy's JSON (``ChatProxy.complete``) or its SSE stream (``ChatProxy.stream``);
413 for a body over ``--max-body``, 400 for a body that is not a chat request. A stream is
cut, and its upstream closed, when the client goes away.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
from toolcodec.pool.proxy.chat import REPORT_HEADER, UNDECODED_HEADER, ChatProxy, invalid_request
from toolcodec.pool.proxy.upstream import FORWARDED_HEADERS
from toolcodec.pool.service.app import asgi_headers, send_json

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[dict[str, Any]], Awaitable[None]]

# The request headers the chat route reads: what goes upstream, the report switch and the
# body's declared size. A client sends a dozen or more; the others are never decoded.
_READ_HEADERS = frozenset(name.encode("latin-1") for name in (
    *FORWARDED_HEADERS, REPORT_HEADER, "content-length"))
_SSE_TYPE = [(b"content-type", b"text/event-stream; charset=utf-8"),
             (b"cache-control", b"no-cache")]


class ChatEndpoint:
    """An ASGI app answering ``POST /v1/chat/completions`` with *proxy*; request bodies over
    *max_body* bytes get 413."""

    def __init__(self, proxy: ChatProxy, max_body: int) -> None:
        self.proxy, self.max_body = proxy, max_body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        headers = read_headers(scope["headers"])
        raw, problem = await request_body(receive, headers.get("content-length"),
                                          self.max_body)
        if problem is not None:
            await send_json(send, *problem)
            return
        body, problem = _chat_request(raw)
        if problem is not None:
            await send_json(send, *problem)
            return
        if body.get("stream"):
            status, out, extra = await self.proxy.stream(body, headers, raw)
            if status != 200:
                await send_json(send, status, out, extra)
                return
            await _send_stream(out, receive, send)
            return
        status, answer, extra = await self.proxy.complete(body, headers, raw)
        await send_json(send, status, answer, extra)


def read_headers(raw: list[tuple[bytes, bytes]]) -> dict[str, str]:
    """The headers the chat route reads, decoded, from an ASGI scope's (whose names are lower
    case); a repeated one: its last value."""
    named = dict(raw)  # in C
    return {name.decode("latin-1"): named[name].decode("latin-1")
            for name in named.keys() & _READ_HEADERS}


async def request_body(receive: Receive, declared: str | None, max_body: int
                       ) -> tuple[bytes, tuple[int, dict[str, Any]] | None]:
    if declared is not None and declared.isdigit() and int(declared) > max_body:
        return b"", _error(413, "payload_too_large",
                           f"request body of {declared} bytes is over the limit of {max_body}")
    parts, size = [], 0
    while True:
        message = await receive()
        if message["type"] != "http.request":  # the client went away before the body ended
            return b"", _error(400, "bad_request", "the request body ended early")
        part = message.get("body", b"")
        size += len(part)
        if size > max_body:
            return b"", _error(413, "payload_too_large",
                               f"request body is over the limit of {max_body} bytes")
        parts.append(part)
        if not message.get("more_body", False):
            return b"".join(parts), None


def _chat_request(raw: bytes) -> tuple[Any, tuple[int, dict[str, Any]] | None]:
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


def _error(status: int, code: str, message: str) -> tuple[int, dict[str, Any]]:
    return status, invalid_request(message, code)


async def _send_stream(relay: Any, receive: Receive, send: Send) -> None:
    """Relay's SSE bytes to the client. The headers go with the first bytes, so that a block
    the decoder had no capacity for before then is named in ``x-toolcodec-undecoded``; the
    relay is cancelled (closing its upstream) if the client disconnects."""
    task = asyncio.current_task()
    assert task is not None

    async def watch() -> None:
        while (await receive())["type"] != "http.disconnect":
            pass
        task.cancel()

    watcher = asyncio.create_task(watch())
    parts = aiter(relay)
    try:
        first = await anext(parts)
        extra = {}
        undecoded = relay.undecoded
        if undecoded:
            extra[UNDECODED_HEADER] = str(undecoded[0].get("code") or undecoded[0].get("status"))
        await send({"type": "http.response.start", "status": 200,
                    "headers": [*_SSE_TYPE, *asgi_headers(extra)]})
        # A relay that says which bytes are its last (``last``) has them leave with the end
        # of the body: one write, not two.
        more = not getattr(relay, "last", False)
        await send({"type": "http.response.body", "body": first, "more_body": more})
        while more:
            try:
                part = await anext(parts)
            except StopAsyncIteration:
                await send({"type": "http.response.body", "body": b""})
                break
            more = not getattr(relay, "last", False)
            await send({"type": "http.response.body", "body": part, "more_body": more})
    except asyncio.CancelledError:
        if not watcher.done():  # cancelled from outside, not by the client going away
            raise
        task.uncancel()
    finally:
        watcher.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await watcher
        await parts.aclose()
