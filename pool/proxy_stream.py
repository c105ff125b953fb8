"""Relay an upstream SSE stream through the streaming decoder (see ``pool.proxy``).

Every upstream chunk is fed to the decoder as it arrives; what the decoder releases goes to
the client at once as OpenAI ``chat.completion.chunk`` deltas that keep the upstream's
``id``, ``model`` and ``created``. The stream always ends with ``data: [DONE]``: when upstream
fails mid-way, what the decoder still holds is released, then an error chunk is sent.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import orjson

from pool.proxy import call_id, now

DONE = b"data: [DONE]\n\n"


class _Chunks:
    """Builds the client's chunks; remembers what the upstream said about the stream."""

    def __init__(self) -> None:
        self.meta: dict[str, Any] = {"id": "", "object": "chat.completion.chunk",
                                     "created": now(), "model": ""}
        self.role_sent = False
        self.calls = 0
        self.finish: str | None = None
        self.usage: Any = None

    def learn(self, chunk: dict[str, Any]) -> None:
        for key in ("id", "created", "model", "system_fingerprint"):
            if chunk.get(key) is not None:
                self.meta[key] = chunk[key]
        if chunk.get("usage") is not None:
            self.usage = chunk["usage"]
        choices = chunk.get("choices")
        if isinstance(choices, list) and choices and isinstance(choices[0], dict):
            if choices[0].get("finish_reason"):
                self.finish = choices[0]["finish_reason"]

    def delta(self, delta: dict[str, Any], finish: str | None = None) -> bytes:
        if not self.role_sent:
            delta = {"role": "assistant", **delta}
            self.role_sent = True
        body = {**self.meta, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
        return b"data: " + orjson.dumps(body) + b"\n\n"

    def for_event(self, event: dict[str, Any]) -> bytes | None:
        kind = event.get("type")
        if kind == "content" and event.get("text"):
            return self.delta({"content": event["text"]})
        if kind == "reasoning" and event.get("text"):
            return self.delta({"reasoning_content": event["text"]})
        if kind == "tool_call":
            index = self.calls
            self.calls += 1
            return self.delta({"tool_calls": [{
                "index": index, "id": call_id(f"{self.meta['id']}:0", index),
                "type": "function", "function": {
                    "name": event["name"],
                    "arguments": orjson.dumps(event["arguments"]).decode()}}]})
        return None  # errors: the block's text follows as content

    def final(self, report: dict[str, Any] | None) -> bytes:
        finish = "tool_calls" if self.calls else (
            "stop" if self.finish in (None, "tool_calls") else self.finish)
        body: dict[str, Any] = {**self.meta, "choices": [
            {"index": 0, "delta": {}, "finish_reason": finish}]}
        if self.usage is not None:
            body["usage"] = self.usage
        if report is not None:
            body["toolcodec"] = report
        return b"data: " + orjson.dumps(body) + b"\n\n"


def sse_data(line: str) -> str | None:
    """The payload of an SSE ``data:`` line, or None for other lines."""
    if not line.startswith("data:"):
        return None
    return line[5:].strip()


async def relay(response: httpx.Response, proxy: Any, body: dict[str, Any],
                report: bool) -> AsyncIterator[bytes]:
    chunks = _Chunks()
    decoder = proxy.decoder_for(body.get("tools") or [])
    failure: str | None = None
    try:
        async for line in response.aiter_lines():
            data = sse_data(line)
            if data is None or not data:
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
                yield f"data: {data}\n\n".encode()
                continue
            chunks.learn(chunk)
            for out in _released(decoder, chunks, decoder.feed(chunk) if decoder else []):
                yield out
    except httpx.HTTPError as exc:
        failure = f"the model server's stream broke off ({type(exc).__name__})"
    finally:
        await response.aclose()
    if decoder is not None:
        for out in _released(decoder, chunks, decoder.close()):
            yield out
    result = decoder.result().to_dict() if decoder else None
    proxy.metrics.count(True, _outcome(result, failure), result)
    if failure is not None:
        error = {"message": failure, "type": "upstream_error", "code": "upstream_stream_broken"}
        yield b"data: " + orjson.dumps({"error": error}) + b"\n\n"
    if decoder is not None:
        yield chunks.final(_summary(result) if report else None)
    yield DONE


def _released(decoder: Any, chunks: _Chunks, events: list[dict[str, Any]]) -> list[bytes]:
    out = []
    for event in events:
        data = chunks.for_event(event)
        if data is not None:
            out.append(data)
    return out


def _outcome(result: dict[str, Any] | None, failure: str | None) -> str:
    if failure is not None:
        return "upstream_error"
    if result is None:
        return "unchanged"
    if result["errors"]:
        return "model_error"
    return "repaired" if result["repairs"] or result["calls"] else "unchanged"


def _summary(result: dict[str, Any] | None) -> dict[str, Any] | None:
    if result is None:
        return None
    return {"path": result["path"], "repairs": result["repairs"], "errors": result["errors"]}
