"""Relay an upstream SSE stream through the streaming decoder (see ``toolcodec.pool.proxy.chat``).

Every upstream chunk is fed to a ``StreamDecoder`` as it arrives (content deltas through the
text decoder, native ``tool_calls`` fragments gathered); what it releases goes to the client
at once, as ``chat.completion.chunk`` deltas (``toolcodec.openai_chunks.ChunkWriter``) that keep
the upstream's ``id``, ``model`` and ``created``. The stream always ends with
``data: [DONE]``: when upstream fails mid-way, what the decoder still holds is released, then
an error chunk is sent.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator
from typing import Any

import httpx
import orjson
from toolcodec.openai_chunks import ChunkWriter
from toolcodec.pool.proxy.message import call_id, unrepaired_natives

DONE = b"data: [DONE]\n\n"


class _Upstream:
    """What the upstream said about the stream, besides the deltas."""

    def __init__(self) -> None:
        self.id, self.model, self.created = "", "", int(time.time())
        self.finish: str | None = None
        self.usage: Any = None

    def learn(self, chunk: dict[str, Any]) -> None:
        self.id = str(chunk.get("id") or self.id)
        self.model = str(chunk.get("model") or self.model)
        if isinstance(chunk.get("created"), int):
            self.created = chunk["created"]
        if chunk.get("usage") is not None:
            self.usage = chunk["usage"]
        choices = chunk.get("choices")
        if isinstance(choices, list) and choices and isinstance(choices[0], dict):
            self.finish = choices[0].get("finish_reason") or self.finish


def _sse(body: dict[str, Any]) -> bytes:
    return b"data: " + orjson.dumps(body) + b"\n\n"


async def relay(response: httpx.Response, proxy: Any, body: dict[str, Any],
                report: bool) -> AsyncIterator[bytes]:
    """The client's SSE bytes for one upstream stream."""
    decoder = proxy.decoder_for(body.get("tools") or [])
    upstream = _Upstream()
    writer: ChunkWriter | None = None
    failure: str | None = None
    try:
        async for line in response.aiter_lines():
            data = line[5:].strip() if line.startswith("data:") else None
            if not data:
                continue
            if data == "[DONE]":
                break
            try:
                chunk = orjson.loads(data)
            except orjson.JSONDecodeError:
                failure = "the model server sent a chunk that is not JSON"
                break
            if not isinstance(chunk, dict):
                continue
            if decoder is None:  # no usable tools: nothing to decode, relay as it came
                yield _sse(chunk)
                continue
            upstream.learn(chunk)
            if writer is None:
                writer = ChunkWriter(upstream.id, upstream.model, upstream.created,
                                     call_id=lambda _e, n: call_id(f"{upstream.id}:0", n))
            for out in _chunks(writer, await decoder.feed(chunk)):
                yield out
    except httpx.HTTPError as exc:
        failure = f"the model server's stream broke off ({type(exc).__name__})"
    finally:
        await response.aclose()
    if decoder is not None:
        writer = writer or ChunkWriter(upstream.id, upstream.model, upstream.created)
        for out in _chunks(writer, await decoder.close()):
            yield out
        result = decoder.result().to_dict()
        for out in _unrepaired(writer, result, decoder.assembled_message()):
            yield out
        proxy.metrics.count(True, _outcome(result, failure), result)
    if failure is not None:
        error = {"message": failure, "type": "upstream_error", "code": "upstream_stream_broken"}
        yield _sse({"error": error})
    if decoder is not None:
        extra: dict[str, Any] = {} if upstream.usage is None else {"usage": upstream.usage}
        if report:
            extra["toolcodec"] = {k: result[k] for k in ("path", "repairs", "errors")}
        yield _sse(writer.final(upstream.finish, **extra))
    yield DONE


def _unrepaired(writer: ChunkWriter, result: dict[str, Any],
                message: dict[str, Any]) -> list[bytes]:
    """Native calls decoding refused, passed on as the model wrote them (as whole answers do)."""
    out = []
    for native in unrepaired_natives(result, message.get("tool_calls")):
        out.append(_sse(writer.raw_call(native)))
    return out


def _chunks(writer: ChunkWriter, events: list[dict[str, Any]]) -> list[bytes]:
    return [_sse(c) for c in (writer.chunk(e) for e in events) if c is not None]


def _outcome(result: dict[str, Any], failure: str | None) -> str:
    if failure is not None:
        return "upstream_error"
    if result["errors"]:
        return "model_error"
    return "repaired" if result["repairs"] or result["calls"] else "unchanged"
