"""Talking to the model server safely: which headers go, how much is read, what shape is taken.

- Headers: only ``Authorization`` (or the configured key) and ``FORWARDED_HEADERS`` go
  upstream; cookies and everything else the client sent stay here.
- Sizes: a whole answer is read up to ``max_body`` bytes, a stream line by line with each line
  up to ``max_body`` bytes; past that the answer is refused (``upstream_too_large``).
- Shape: an answer whose ``choices`` is not a list of objects with a ``message`` object is a
  502 with a plain message (``bad_upstream``), never an internal error.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from toolcodec.pool.proxy.http_client import (
    BodyTooLarge,
    ConnectError,
    HTTPError,
    PoolTimeout,
    Response,
    TimeoutException,
)
from toolcodec.pool.proxy.settings import ModelSettings

# Headers an OpenAI client may send that a model server may need, and the W3C trace context
# (so a trace goes on through the proxy); nothing else is forwarded.
FORWARDED_HEADERS = frozenset({"authorization", "accept", "user-agent", "openai-organization",
                               "openai-project", "openai-beta", "x-request-id",
                               "traceparent", "tracestate", "baggage"})


class UpstreamError(Exception):
    """The model server could not be used: ``status`` is what the client gets."""

    def __init__(self, status: int, code: str, message: str,
                 headers: dict[str, str] | None = None, own: dict[str, Any] | None = None
                 ) -> None:
        super().__init__(message)
        self.status, self.code, self.headers = status, code, headers or {}
        self.own = own  # the model server's own error body, relayed as it sent it

    def body(self) -> dict[str, Any]:
        if self.own is not None:
            return self.own
        return {"error": {"message": str(self), "type": "upstream_error", "code": self.code}}


class Upstreams:
    """The model server for a request's model: the one its config entry names
    (``ModelSettings.upstream_for``), else the default (``--upstream``). One connection pool
    per server, made by *connect* (base URL -> client)."""

    def __init__(self, default: Any, default_key: str | None, models: ModelSettings,
                 connect: Callable[[str], Any]) -> None:
        self.default, self.default_key, self.models = default, default_key, models
        self.clients = {u.base: None for _, u in models.upstreams}
        for base in self.clients:
            self.clients[base] = connect(base)

    def pick(self, model: Any) -> tuple[Any, str | None]:
        """(the HTTP client, the API key to send: None for the client's own)."""
        upstream = self.models.upstream_for(model)
        if upstream is None:
            return self.default, self.default_key
        return self.clients[upstream.base], upstream.api_key

    async def aclose(self) -> None:
        for client in self.clients.values():
            await client.aclose()


def forwarded(incoming: dict[str, str], api_key: str | None) -> dict[str, str]:
    """The headers sent upstream for a request that came with *incoming*."""
    headers = {low: v for k, v in incoming.items() if (low := k.lower()) in FORWARDED_HEADERS}
    if api_key:
        headers["authorization"] = f"Bearer {api_key}"
    return headers


def failure(exc: HTTPError) -> UpstreamError:
    """The client's answer for a transport failure."""
    if isinstance(exc, PoolTimeout):
        return UpstreamError(503, "upstream_busy", "every connection to the model server is in "
                             "use; try again", {"retry-after": "1"})
    if isinstance(exc, TimeoutException):
        return UpstreamError(504, "upstream_timeout",
                             f"the model server did not answer in time ({type(exc).__name__})")
    if isinstance(exc, ConnectError):
        return UpstreamError(502, "upstream_unavailable",
                             f"cannot connect to the model server: {exc}")
    return UpstreamError(502, "upstream_error", f"the model server failed: {type(exc).__name__}")


def deadline_passed(seconds: float) -> UpstreamError:
    return UpstreamError(504, "upstream_deadline", f"the request's overall deadline of "
                         f"{seconds:g} s passed before the model server finished")


def too_large(limit: int) -> UpstreamError:
    return UpstreamError(502, "upstream_too_large",
                         f"the model server's answer is over the limit of {limit} bytes")


async def read_body(response: Response, limit: int) -> bytes:
    """The whole body, refused past *limit* bytes (``UpstreamError``; the connection is
    closed, not reused)."""
    declared = response.headers.get("content-length", "")
    if declared.isdigit() and int(declared) > limit:
        await response.aclose()
        raise too_large(limit)
    try:
        return await response.read(limit)
    except BodyTooLarge:
        raise too_large(limit) from None


def one_event(part: bytes, limit: int) -> bool:
    """Whether *part* is one line of at most *limit* bytes and the blank line after it: read
    from the start of a line, one event whose line is ``part[:-2]``."""
    return part.find(b"\n") == len(part) - 2 and part.endswith(b"\n\n") \
        and len(part) - 2 <= limit


class SSELines:
    """The ``data:`` payloads of an SSE stream, from the parts of its body as they come:
    :meth:`feed` returns those a part completes (bytes, as they came: ``orjson`` reads them
    without a decoded copy), :meth:`end` the last line if the body ended without its line
    break. Each line at most *limit* bytes (``UpstreamError`` otherwise). Synchronous, not an
    async generator: it runs for every part of a stream, and an async generator's step costs
    more than splitting the part."""

    __slots__ = ("limit", "_pending", "_size")

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._pending: list[bytes] = []  # the line being read, in parts: joined once it ends
        self._size = 0

    def at_line_start(self) -> bool:
        """Whether the next part starts a line (nothing of one is pending)."""
        return not self._size

    def feed(self, part: bytes) -> list[bytes]:
        if not self._size and one_event(part, self.limit):  # most parts of a stream
            return [part[5:].strip()] if part.startswith(b"data:") else []
        if b"\n" not in part:
            self._pending.append(part)
            self._size += len(part)
            if self._size > self.limit:
                raise too_large(self.limit)
            return []
        pending = self._pending
        lines = (b"".join([*pending, part]) if pending else part).split(b"\n")
        last = lines.pop()
        self._pending, self._size = [last], len(last)
        datas = []
        limit = self.limit
        for line in lines:
            if len(line) > limit:
                raise too_large(limit)
            if line.startswith(b"data:"):
                datas.append(line[5:].strip())
        return datas

    def end(self) -> list[bytes]:
        tail = b"".join(self._pending)
        self._pending, self._size = [], 0
        return [tail[5:].strip()] if tail.startswith(b"data:") and len(tail) <= self.limit \
            else []


def shape_problem(answer: Any) -> str | None:
    """What is wrong with a chat completion's shape (None: it can be decoded)."""
    if not isinstance(answer, dict):
        return "the answer is not a JSON object"
    choices = answer.get("choices")
    if not isinstance(choices, list):
        return "'choices' is not a list"
    for i, choice in enumerate(choices):
        if not isinstance(choice, dict) or not isinstance(choice.get("message"), dict):
            return f"choices[{i}] is not an object with a 'message' object"
        message = choice["message"]
        if message.get("content") is not None and not isinstance(message["content"], str):
            return f"choices[{i}].message.content is not a string"
        calls = message.get("tool_calls")
        if calls is not None and not isinstance(calls, list):
            return f"choices[{i}].message.tool_calls is not a list"
    return None
