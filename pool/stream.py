"""``Pool.stream()``: the streaming decoder for an event loop, blocks decoded in workers.

The stream itself runs in the caller (scanning is cheap); decoding a completed block can be
slow for a huge block, so each one is sent to a worker as a ``decode_block`` job under the
pool's budget. While it runs the event loop stays free. If the job does not come back in
time (or fails), the block's text is released as content with that error — a ``timeout``
error event, then the text — and the stream goes on: the chat keeps flowing. Decoded blocks
are counted like any job (``op="decode_block"``).

With every block decoded, the events and ``result()`` are those of ``codec.StreamDecoder``
(and so of ``decode``) for every format the codec reads: a block goes to the worker with its
kind and its opener (a tool's name or a marker format's token), which is all a worker needs to
decode it as ``decode`` would. Options are ``ToolCallCodec``'s, or a family ``preset``
(``toolcodec.pool.proxy.settings.PRESETS``).
"""

from __future__ import annotations

from typing import Any

from toolcodec.decoding.codec import codec_for
from toolcodec.decoding.engine import BlockReady
from toolcodec.decoding.stream import StreamDecoder
from toolcodec.pool.proxy.settings import job_options
from toolcodec.results.errors import CodecError
from toolcodec.results.result import Call, DecodeResult
from toolcodec.worker.limits import job_limits, operator_limits

Event = dict[str, Any]


class PoolStream:
    """An async stream decoder bound to a ``Pool``; see the module docstring."""

    def __init__(self, pool: Any, tools: list[dict] | None, *, timeout_ms: float | None = None,
                 id_prefix: str | None = None, block_options: dict[str, Any] | None = None,
                 **options: Any) -> None:
        self.pool, self.tools = pool, tools or []
        # The worker gets the options as JSON; this side reads with the same codec options,
        # limits clamped to the operator's as the workers clamp them.
        self.options = job_options(options)
        self.timeout_ms = timeout_ms
        self._extra = dict(block_options or {})  # e.g. the fault-injection delay, in tests
        local = {**self.options, "limits": job_limits(self.options.get("limits"),
                                                      operator_limits())}
        if "formats" in local:
            local["formats"] = tuple(local["formats"])
        self._stream = StreamDecoder(codec_for(tools, **local), id_prefix=id_prefix)
        # Blocks no worker decoded (timeout, rejected, worker_lost, error): the job's status
        # and error, so that a caller can tell "no capacity" from "the model erred".
        self.undecoded: list[dict[str, Any]] = []
        self._stream._engine.defer_blocks = True
        self._ready: Any = None  # the codec block jobs run with inline (Pool.ready), once found

    async def feed(self, chunk: str | dict[str, Any]) -> list[Event]:
        """Take the next piece of the output; never raises."""
        try:  # most pieces complete no block: no step closure, no inner coroutine
            return self._stream.feed(chunk)
        except BlockReady as ready:
            return await self._blocks(ready, [], final=False)

    async def close(self, finish_reason: str | None = None) -> list[Event]:
        """End of the stream: everything held back is released. ``finish_reason`` as in
        ``StreamDecoder.close`` (a block the output cut off is decided here, never sent to
        a worker)."""
        return await self._run(lambda: self._stream.close(finish_reason), final=True)

    def result(self) -> DecodeResult:
        return self._stream.result()

    def assembled_message(self) -> dict[str, Any]:
        return self._stream.assembled_message()

    async def _run(self, step: Any, *, final: bool) -> list[Event]:
        try:
            return step()
        except BlockReady as ready:
            return await self._blocks(ready, [], final=final)

    async def _blocks(self, ready: BlockReady, events: list[Event], *, final: bool
                      ) -> list[Event]:
        """Decode the block the step stopped at, and each next one, until the step ends."""
        engine = self._stream._engine
        step = self._resume(engine, final)
        while True:
            await self._decode(engine, ready)
            events += self._stream._drain()
            try:
                events += step()
                return events
            except BlockReady as again:
                ready = again

    def _resume(self, engine: Any, final: bool) -> Any:
        if final:
            return self._stream.close

        def read_on() -> list[Event]:
            engine._advance(final=False)
            return self._stream._drain()
        return read_on

    async def _decode(self, engine: Any, ready: BlockReady) -> None:
        block = ready.block
        text = engine.text[block.start:block.end]
        payload = {"text": text, "fmt": block.fmt, "tag": block.tag, "closed": block.closed,
                   "body": [block.body_start - block.start, block.body_end - block.start],
                   "tools": self.tools, "options": self.options, **self._extra}
        if self._ready is None:  # found once a stream: a job need not look it up again
            self._ready = self.pool.ready(self.tools, self.options)
        envelope = await self.pool.asubmit("decode_block", payload, timeout_ms=self.timeout_ms,
                                           codec=self._ready)
        result = envelope.get("result") if envelope.get("status") == "ok" else None
        if result is None:
            error = envelope.get("error") or {"code": envelope.get("status"), "message": ""}
            self.undecoded.append({"status": envelope.get("status"), **error})
            details = {k: v for k, v in error.items() if k not in ("code", "message")}
            calls, errors = [], [CodecError(error["code"], error["message"], details)]
        else:
            calls = [Call(c["name"], c["arguments"], list(c["repairs"]), format=c.get("format", ""))
                     for c in result["calls"]]
            errors = [CodecError(e["code"], e["message"],
                                 {k: v for k, v in e.items() if k not in ("code", "message")})
                      for e in result["errors"]]
        engine.apply_block(block, ready.index, calls, errors)
