"""Relay an upstream SSE stream through the streaming decoder (see ``toolcodec.pool.proxy.chat``).

Every upstream chunk is fed, choice by choice (``n > 1`` streams are decoded per choice
``index``), to that choice's ``PoolStream`` as it arrives; what a decoder releases goes to the
client at once, as ``chat.completion.chunk`` deltas (``toolcodec.openai_chunks.ChunkWriter``)
that keep the upstream's ``id``, ``model``, ``created`` and ``system_fingerprint``, and carry
the ``logprobs`` of the upstream chunks that produced them. A reader task takes the upstream
lines, so that while nothing can be sent (a tool-call block is pending, upstream is slow) a
``: keep-alive`` SSE comment goes out every ``heartbeat`` seconds, and the request's overall
deadline cuts a trickling upstream.

The stream always ends with ``data: [DONE]``: when upstream fails mid-way (or the deadline
passes), what the decoders still hold is released, then an error chunk is sent. Blocks the
decoder had no capacity for are released as content and named in the final chunk's
``toolcodec.undecoded`` (and in the ``x-toolcodec-undecoded`` header when known before the
first byte).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import orjson
from toolcodec.openai_chunks import ChunkWriter
from toolcodec.pool.proxy.http_client import HTTPError, Response
from toolcodec.pool.proxy.message import call_id, unrepaired_natives
from toolcodec.pool.proxy.upstream import UpstreamError, sse_data

DONE = b"data: [DONE]\n\n"
HEARTBEAT = b": keep-alive\n\n"
_END = object()  # the reader's last item
# After upstream's [DONE] the end of its body is due at once: waited for this long (in the
# background) so that the connection can be reused rather than closed.
_DONE_LINGER = 1.0


def _sse(body: dict[str, Any]) -> bytes:
    return b"data: " + orjson.dumps(body) + b"\n\n"


class _Choice:
    """One choice of the stream: its decoder, its chunk writer, what upstream said of it."""

    def __init__(self, index: int, decoder: Any, head: dict[str, Any], response_id: str) -> None:
        self.index, self.decoder = index, decoder
        self.writer = ChunkWriter(head["id"], head["model"], head["created"], choice=index,
                                  call_id=lambda _e, n: call_id(f"{response_id}:{index}", n))
        self.finish: str | None = None
        self.logprobs: list[Any] = []  # upstream logprobs not yet sent with a chunk

    def take_logprobs(self) -> dict[str, Any] | None:
        if not self.logprobs:
            return None
        content = [item for lp in self.logprobs for item in (lp.get("content") or [])]
        self.logprobs = []
        return {"content": content, "refusal": None}


class Relay:
    """The client's SSE bytes for one upstream stream; iterate it once."""

    def __init__(self, proxy: Any, response: Response, prepared: Any, report: bool,
                 until: float) -> None:
        self.proxy, self.response, self.prepared = proxy, response, prepared
        self.report, self.until = report, until
        self.head: dict[str, Any] = {"id": "", "model": "", "created": int(time.time())}
        self.fingerprint: Any = None
        self.usage: Any = None
        self.choices: dict[int, _Choice] = {}
        self.failure: tuple[str, str] | None = None  # (code, message)
        self.started = False  # a byte went to the client
        self.raw = False  # no decoder could be made: the rest is relayed as it comes

    @property
    def undecoded(self) -> list[dict[str, Any]]:
        return [u for c in self.choices.values() for u in c.decoder.undecoded]

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self._run()

    async def _run(self) -> AsyncIterator[bytes]:
        config = self.proxy.config
        queue: asyncio.Queue[Any] = asyncio.Queue(maxsize=64)
        reader = asyncio.create_task(self._read(queue, config.max_upstream_body))
        loop = asyncio.get_running_loop()
        ended = False  # upstream's stream ended as it should
        sent = False  # bytes went to the client
        try:
            while True:
                left = self.until - loop.time()
                if left <= 0:
                    self.failure = ("upstream_deadline", f"the request's overall deadline of "
                                    f"{config.deadline:g} s passed; the stream was cut")
                    break
                if queue.empty():
                    try:  # a timeout scope, not wait_for: no task per chunk
                        async with asyncio.timeout(min(config.heartbeat, left)):
                            item = await queue.get()
                    except TimeoutError:
                        if loop.time() < self.until:
                            yield HEARTBEAT
                        continue
                else:
                    item = queue.get_nowait()
                # The chunks that have arrived meanwhile go out together: one write, not one
                # per chunk (upstreams send a few characters per chunk). The stream's first
                # bytes go at once, alone: the client's time to first token is not the batch's.
                out: list[bytes] = []
                while True:
                    if item is _END:
                        ended = True
                        break
                    if isinstance(item, tuple):  # the reader failed: (code, message)
                        self.failure = item
                        break
                    out += await self._chunk(item)
                    if queue.empty() or (out and not sent):
                        break
                    item = queue.get_nowait()
                if out:
                    sent = True
                    yield b"".join(out)
                if ended or self.failure is not None:
                    break
        finally:
            reader.cancel()
            await self.response.aclose(linger=_DONE_LINGER if ended else 0.0)
        for out in await self._close():
            yield out
        yield DONE

    async def _read(self, queue: asyncio.Queue[Any], limit: int) -> None:
        try:
            async for data in sse_data(self.response, limit):
                if not data:
                    continue
                if data == "[DONE]":
                    break
                try:
                    chunk = orjson.loads(data)
                except orjson.JSONDecodeError:
                    await queue.put(("upstream_bad_chunk",
                                     "the model server sent a chunk that is not JSON"))
                    return
                if isinstance(chunk, dict):
                    await queue.put(chunk)
        except HTTPError as exc:
            await queue.put(("upstream_stream_broken",
                             f"the model server's stream broke off ({type(exc).__name__})"))
            return
        except UpstreamError as exc:
            await queue.put((exc.code, str(exc)))
            return
        await queue.put(_END)

    # -- chunks -----------------------------------------------------------------------------

    async def _chunk(self, chunk: dict[str, Any]) -> list[bytes]:
        if not self.prepared.decode or self.raw:  # tool_choice "none": relayed as written
            self.started = True
            return [_sse(chunk)]
        self._learn(chunk)
        out: list[bytes] = []
        choices = chunk.get("choices")
        if not isinstance(choices, list):
            return out
        for choice in choices:
            if not isinstance(choice, dict):
                continue
            index = choice.get("index", 0)
            state = self._choice(index if isinstance(index, int) else 0)
            if state is None:  # no decoder (checked before upstream, so never in practice)
                self.raw = True
                return out + [_sse(chunk)]
            if isinstance(choice.get("logprobs"), dict):
                state.logprobs.append(choice["logprobs"])
            state.finish = choice.get("finish_reason") or state.finish
            out += self._out(state, await state.decoder.feed(choice))
        return out

    def _learn(self, chunk: dict[str, Any]) -> None:
        for key in ("id", "model"):
            if chunk.get(key):
                self.head[key] = str(chunk[key])
        if isinstance(chunk.get("created"), int):
            self.head["created"] = chunk["created"]
        if chunk.get("system_fingerprint") is not None:
            self.fingerprint = chunk["system_fingerprint"]
        if chunk.get("usage") is not None:
            self.usage = chunk["usage"]

    def _choice(self, index: int) -> _Choice | None:
        state = self.choices.get(index)
        if state is None and 0 <= index < 128:
            decoder = self.proxy.decoder_for(self.prepared)
            if decoder is None:
                return None
            state = self.choices[index] = _Choice(index, decoder, self.head, self.head["id"])
        return state

    def _out(self, state: _Choice, events: list[dict[str, Any]]) -> list[bytes]:
        out = []
        for event in events:
            chunk = state.writer.chunk(event)
            if chunk is not None:
                out.append(self._dress(state, chunk))
        return out

    def _dress(self, state: _Choice, chunk: dict[str, Any]) -> bytes:
        """The upstream's head, fingerprint and pending logprobs on one of our chunks."""
        chunk.update(id=self.head["id"], model=self.head["model"], created=self.head["created"])
        if self.fingerprint is not None:
            chunk["system_fingerprint"] = self.fingerprint
        logprobs = state.take_logprobs()
        if logprobs is not None:
            chunk["choices"][0]["logprobs"] = logprobs
        self.started = True
        return _sse(chunk)

    # -- the end ----------------------------------------------------------------------------

    async def _close(self) -> list[bytes]:
        out: list[bytes] = []
        finals: list[tuple[_Choice, dict[str, Any]]] = []
        if self.prepared.decode and not self.choices:
            self._choice(0)  # upstream sent no choice: the client still gets a final chunk
        for index in sorted(self.choices):
            state = self.choices[index]
            # The upstream's finish_reason for this choice: "length" makes a cut block no call.
            out += self._out(state, await state.decoder.close(state.finish))
            result = state.decoder.result().to_dict()
            for native in unrepaired_natives(result, state.decoder.assembled_message()
                                             .get("tool_calls")):
                out.append(self._dress(state, state.writer.raw_call(native)))
            self._count(state, result)
            finals.append((state, result))
        if self.failure is not None:
            code, message = self.failure
            out.append(_sse({"error": {"message": message, "type": "upstream_error",
                                       "code": code}}))
        for n, (state, result) in enumerate(finals):
            extra: dict[str, Any] = {}
            if n == len(finals) - 1 and self.usage is not None:
                extra["usage"] = self.usage
            field: dict[str, Any] = {}
            if state.decoder.undecoded:
                field["undecoded"] = state.decoder.undecoded
            if self.report:
                field.update({"status": "ok", **result})
            if field:
                extra["toolcodec"] = field
            out.append(self._dress(state, state.writer.final(state.finish, **extra)))
        return out

    def _count(self, state: _Choice, result: dict[str, Any]) -> None:
        metrics = self.proxy.metrics
        for undecoded in state.decoder.undecoded:
            metrics.count_undecoded(True, undecoded.get("status"))
        if self.failure is not None:
            outcome = "upstream_error"
        elif state.decoder.undecoded:
            outcome = "undecoded"
        elif result["errors"]:
            outcome = "model_error"
        else:
            outcome = "repaired" if result["repairs"] or result["calls"] else "unchanged"
        metrics.count(True, outcome, result)
