"""The chat route's decoded SSE stream, read back as events for the other API shapes.

``/v1/messages`` and ``/v1/responses`` are decoded by the chat route itself (``ChatProxy``):
their streams are the chat route's ``chat.completion.chunk`` stream, read here and written
again in the client's shape. So every route answers what the chat route answers, and the
decoding is done once, in one place.

``ChunkReader.read(part)`` takes the bytes the chat route's ``Relay`` yields (whole SSE
events: ``data: {chunk}``, ``: keep-alive``, ``data: [DONE]``) and returns events for
choice 0, in order:

- ``("reasoning", text)``, ``("text", text)``;
- ``("call", {"id", "name", "arguments"})``: one whole call (a call's fragments are gathered
  until another part of the answer begins, so a client's shape that needs the whole
  arguments gets them);
- ``("error", {"code", "message"})``: the chat route's error chunk (upstream broke off, the
  deadline passed, …);
- ``("heartbeat", None)``.

What the final chunk said is kept: ``finish`` (the chat route's ``finish_reason``), ``usage``,
``toolcodec`` (the report, or the blocks it could not decode), ``id``, ``model``, ``created``.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import orjson

Event = tuple[str, Any]


class ChunkReader:
    """Reads one chat stream (choice 0); see the module docstring."""

    def __init__(self) -> None:
        self.finish: str | None = None
        self.usage: dict[str, Any] | None = None
        self.toolcodec: dict[str, Any] | None = None
        self.id = ""
        self.model = ""
        self.created: int | None = None
        self._call: dict[str, Any] | None = None  # the call being gathered
        self._call_index: Any = None

    def read(self, part: bytes) -> list[Event]:
        """Events of the SSE events in *part* (whole events, as the chat route yields them)."""
        out: list[Event] = []
        for raw in part.split(b"\n\n"):
            if not raw.strip():
                continue
            if raw.startswith(b":"):
                out.append(("heartbeat", None))
                continue
            if not raw.startswith(b"data:"):
                continue
            data = raw[5:].strip()
            if data == b"[DONE]":
                continue
            try:
                chunk = orjson.loads(data)
            except orjson.JSONDecodeError:
                out.append(("error", {"code": "bad_chunk",
                                      "message": "the proxy's chat stream sent a chunk that is "
                                                 "not JSON"}))
                continue
            if isinstance(chunk, dict):
                self._chunk(chunk, out)
        return out

    def end(self) -> list[Event]:
        """What is still gathered (a call), once the stream has ended."""
        out: list[Event] = []
        self._flush(out)
        return out

    def _chunk(self, chunk: dict[str, Any], out: list[Event]) -> None:
        if isinstance(chunk.get("error"), dict):
            self._flush(out)
            error = chunk["error"]
            out.append(("error", {"code": str(error.get("code") or "upstream_error"),
                                  "message": str(error.get("message") or "the stream failed")}))
            return
        self.id = str(chunk.get("id") or self.id)
        self.model = str(chunk.get("model") or self.model)
        if isinstance(chunk.get("created"), int):
            self.created = chunk["created"]
        if isinstance(chunk.get("usage"), dict):
            self.usage = chunk["usage"]
        if isinstance(chunk.get("toolcodec"), dict):
            self.toolcodec = chunk["toolcodec"]
        for choice in chunk.get("choices") or []:
            if not isinstance(choice, dict) or choice.get("index", 0) != 0:
                continue
            delta = choice.get("delta") or {}
            if delta.get("reasoning_content"):
                self._flush(out)
                out.append(("reasoning", delta["reasoning_content"]))
            if delta.get("content"):
                self._flush(out)
                out.append(("text", delta["content"]))
            for call in delta.get("tool_calls") or []:
                self._fragment(call, out)
            if choice.get("finish_reason"):
                self.finish = choice["finish_reason"]

    def _fragment(self, call: Any, out: list[Event]) -> None:
        if not isinstance(call, dict):
            return
        index = call.get("index")
        if self._call is None or index != self._call_index:
            self._flush(out)
            self._call, self._call_index = {"id": "", "name": "", "arguments": ""}, index
        fn = call.get("function") or {}
        if call.get("id"):
            self._call["id"] = call["id"]
        if fn.get("name"):
            self._call["name"] += fn["name"]
        if fn.get("arguments"):
            self._call["arguments"] += fn["arguments"]

    def _flush(self, out: list[Event]) -> None:
        if self._call is not None:
            out.append(("call", self._call))
            self._call = None


def arguments_object(arguments: Any) -> dict[str, Any] | None:
    """A call's arguments (a JSON string) as an object; None when they are not one (a native
    call the decoder could not repair, passed on as the model wrote it)."""
    if not isinstance(arguments, str):
        return None
    try:
        value = orjson.loads(arguments or "{}")
    except orjson.JSONDecodeError:
        return None
    return value if isinstance(value, dict) else None


# What a translated route makes of the chat route's events: its own events (encoded), and
# whether the answer failed (its failure event is among them, and nothing follows).
Events = Callable[[list[Event]], tuple[list[bytes], bool]]


async def relay(parts: AsyncIterator[bytes], reader: ChunkReader, events: Events,
                finish: Callable[[list[bytes]], list[bytes]]) -> AsyncIterator[bytes]:
    """The translated stream: the events of each part of the chat stream as it comes, then,
    unless the answer failed, what *finish* adds to the last events (the closing ones)."""
    async for part in parts:
        out, failed = events(reader.read(part))
        if out:
            yield b"".join(out)
        if failed:
            return
    out, failed = events(reader.end())
    yield b"".join(out if failed else finish(out))
