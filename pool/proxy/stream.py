"""Relay an upstream SSE stream through the streaming decoder (see ``toolcodec.pool.proxy.chat``).

Every upstream chunk is fed, choice by choice (``n > 1`` streams are decoded per choice ``index``),
to that choice's ``PoolStream`` as it arrives; what a decoder releases goes to the client at once,
as ``chat.completion.chunk`` deltas (``toolcodec.decoding.openai_chunks.ChunkWriter``) that keep the
upstream's ``id``, ``model``, ``created`` and ``system_fingerprint``, and carry the ``logprobs`` of
the upstream chunks that produced them. Content deltas of choice 0 that differ from the chunk
before only in their text are read from their bytes alone (``chunk_frame``), and those read
before a write are fed to the decoder as one text. Upstream is read in the task that writes to
the client; while nothing can be sent (a tool-call block is pending, upstream is slow) a timer
(``toolcodec.pool.proxy.ticker``) has a ``: keep-alive`` SSE comment go out every ``heartbeat``
seconds, and the request's overall deadline cuts a trickling upstream.

The stream always ends with ``data: [DONE]``, in one write with the final chunks (``last``
says the bytes yielded are the stream's last, so that the end of the body joins them). When
upstream fails mid-way (or the deadline passes), what the decoders still hold is released,
then an error chunk is sent. Blocks the decoder had no capacity for are released as content
and named in the final chunk's ``toolcodec.undecoded`` (and in the ``x-toolcodec-undecoded``
header when known before the first byte).

A broken stream (reset, bad framing, a chunk that is not JSON, a body that ends before the
stream does) is a cut answer: the decoders are closed with ``length``, so a block that had
not closed is no call, and its markup is not sent as content. A whole JSON answer to the
stream request is relayed as the stream it stands for (``whole_as_chunks``), decoded.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import AsyncIterator
from typing import Any

import orjson
from toolcodec.decoding.openai_chunks import ChunkWriter
from toolcodec.pool.proxy.chunk_frame import ContentFrame
from toolcodec.pool.proxy.flags import check_forced, cut_by_usage, unrecognised
from toolcodec.pool.proxy.http_client import HTTPError, Response
from toolcodec.pool.proxy.message import call_id, unrepaired_natives
from toolcodec.pool.proxy.ticker import Ticker
from toolcodec.pool.proxy.upstream import SSELines, UpstreamError, shape_problem
from toolcodec.results.errors import TRUNCATED
from toolcodec.results.ids import random_hex

DONE = b"data: [DONE]\n\n"
HEARTBEAT = b": keep-alive\n\n"
# After upstream's [DONE] the end of its body is due at once: waited for this long (in the
# background) so that the connection can be reused rather than closed.
_DONE_LINGER = 1.0
_UNUSED_FRAMES = 8  # see _SSEBody


def _sse(body: dict[str, Any]) -> bytes:
    return b"data: " + orjson.dumps(body) + b"\n\n"


class _Choice:
    """One choice of the stream: its decoder, its chunk writer, what upstream said of it."""

    def __init__(self, index: int, decoder: Any, head: dict[str, Any], nonce: str) -> None:
        self.index, self.decoder = index, decoder
        self.writer = ChunkWriter(head["id"], head["model"], head["created"], choice=index,
                                  call_id=lambda _e, n: call_id(f"{nonce}:{index}", n))
        self.finish: str | None = None
        self.logprobs: list[Any] = []  # upstream logprobs not yet sent with a chunk
        self.hide: str | None = None  # the start of a cut call's markup, not sent as content
        # A content chunk's bytes around its text, for the head they were made with:
        # (head, before, after), see ``Relay._content``.
        self.frame: tuple[tuple[Any, ...], bytes, bytes] | None = None

    def take_logprobs(self) -> dict[str, Any] | None:
        if not self.logprobs:
            return None
        content = [item for lp in self.logprobs for item in (lp.get("content") or [])]
        self.logprobs = []
        return {"content": content, "refusal": None}


class Relay:
    """The client's SSE bytes for one upstream stream; iterate it once."""

    def __init__(self, proxy: Any, response: Response, prepared: Any, report: bool,
                 until: float, seen: Any) -> None:
        self.proxy, self.response, self.prepared = proxy, response, prepared
        self.report, self.until, self.seen = report, until, seen
        self.nonce = random_hex(8)  # call ids unique per request
        self.head: dict[str, Any] = {"id": "", "model": "", "created": int(time.time())}
        self.fingerprint: Any = None
        self.usage: Any = None
        self.choices: dict[int, _Choice] = {}
        self.failure: tuple[str, str] | None = None  # (code, message)
        self.started = False  # a byte went to the client
        self.last = False  # the bytes just yielded are the stream's last
        self.raw = False  # no decoder could be made: the rest is relayed as it comes
        self.body: _SSEBody | _WholeBody | None = None

    @property
    def undecoded(self) -> list[dict[str, Any]]:
        return [u for c in self.choices.values() for u in c.decoder.undecoded]

    def __aiter__(self) -> AsyncIterator[bytes]:
        return self._run()

    async def _run(self) -> AsyncIterator[bytes]:
        config = self.proxy.config
        loop = asyncio.get_running_loop()
        response = self.response
        kind = response.headers.get("content-type", "").split(";")[0].strip().lower()
        body = _WholeBody(response, config.max_upstream_body) if kind == "application/json" \
            else _SSEBody(config.max_upstream_body)
        self.body = body
        # Upstream is read here, in the task that writes to the client: no second task to
        # hand each delta to. While upstream is slow the ticker pokes the read (``None``):
        # a heartbeat, or the deadline.
        ticker = Ticker(loop, response.poke, config.heartbeat, self.until)
        ended = False  # upstream's stream ended as it should
        sent = False  # bytes went to the client
        last: list[bytes] = []  # the stream's last bytes, sent with its end
        try:
            while not ended and self.failure is None:
                if loop.time() >= self.until:
                    self.failure = ("upstream_deadline", f"the request's overall deadline of "
                                    f"{config.deadline:g} s passed; the stream was cut")
                    break
                # The chunks that have arrived meanwhile (the parts read without waiting) go
                # out together: one write, not one per chunk (upstreams send a few characters
                # per chunk), and choice 0's texts read by their frame one content delta. The
                # stream's first bytes go at once, alone: the client's time to first token is
                # not the batch's.
                out: list[bytes] = []
                texts: list[str] = []  # choice 0's, not yet fed to its decoder
                part: bytes | None = b""
                turned = False  # the loop has turned once for this write
                while True:
                    try:
                        part = await response.next_part()
                        if part is None:  # poked: nothing for a heartbeat, or the deadline
                            break
                        chunks, self.failure, ended = body.chunks(part)
                    except HTTPError as exc:
                        self.failure = body.broken(exc)
                        break
                    except UpstreamError as exc:
                        self.failure = (exc.code, str(exc))
                        break
                    if chunks:
                        ticker.last = loop.time()
                    for chunk in chunks:
                        if type(chunk) is str:
                            texts.append(chunk)
                            continue
                        if texts:  # in the order they came
                            out += await self._texts(texts)
                            texts = []
                        out += await self._chunk(chunk)
                        if out and not sent:
                            sent = True
                            yield b"".join(out)
                            out = []
                    if texts and not sent:
                        out += await self._texts(texts)
                        texts = []
                        if out:
                            sent = True
                            yield b"".join(out)
                            out = []
                    if ended or self.failure is not None:
                        break
                    if not response.arrived():
                        # One turn of the loop before the write: what arrives meanwhile joins
                        # it (a write costs the serving process about ten times the turn).
                        if not (out or texts) or turned:
                            break
                        turned = True
                        await asyncio.sleep(0)
                        if not response.arrived():
                            break
                if texts:
                    out += await self._texts(texts)
                if out and (ended or self.failure is not None):
                    last = out  # goes with the end of the stream, in one write
                elif out:
                    sent = True
                    yield b"".join(out)
                if part is None and loop.time() < self.until:
                    yield HEARTBEAT
        finally:
            ticker.stop()
            await response.aclose(linger=_DONE_LINGER if ended else 0.0)
        last += await self._close()
        last.append(DONE)
        self.last = True
        yield b"".join(last)

    # -- chunks -----------------------------------------------------------------------------

    async def _texts(self, texts: list[str]) -> list[bytes]:
        """Choice 0's texts read by their frame (see ``_SSEBody``), fed as one."""
        state = self.choices[0]  # made by the chunk the frame was learned from
        return self._out(state, await state.decoder.feed(
            texts[0] if len(texts) == 1 else "".join(texts)))

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
                if isinstance(self.body, _SSEBody):
                    self.body.frames, self.body.frame = False, None
                return out + [_sse(chunk)]
            if isinstance(choice.get("logprobs"), dict):
                state.logprobs.append(choice["logprobs"])
            state.finish = choice.get("finish_reason") or state.finish
            out += self._out(state, await state.decoder.feed(choice))
        return out

    def _learn(self, chunk: dict[str, Any]) -> None:
        get, head = chunk.get, self.head  # every chunk: each key looked up once
        for key in ("id", "model"):
            value = get(key)
            if value:
                head[key] = value if type(value) is str else str(value)
        created = get("created")
        if isinstance(created, int):
            head["created"] = created
        fingerprint = get("system_fingerprint")
        if fingerprint is not None:
            self.fingerprint = fingerprint
        usage = get("usage")
        if usage is not None:
            self.usage = usage

    def _choice(self, index: int) -> _Choice | None:
        state = self.choices.get(index)
        if state is None and 0 <= index < 128:
            decoder = self.proxy.decoder_for(self.prepared)
            if decoder is None:
                return None
            state = self.choices[index] = _Choice(index, decoder, self.head, self.nonce)
            if index == 0 and isinstance(self.body, _SSEBody):
                self.body.frames = True  # choice 0's text deltas can come as text alone
        return state

    def _out(self, state: _Choice, events: list[dict[str, Any]]) -> list[bytes]:
        out = []
        writer = state.writer
        for event in events:
            kind = event.get("type")
            if kind == "content":
                if state.hide is not None:
                    hide, state.hide = state.hide, None
                    if event.get("text", "").startswith(hide):  # the cut call's own markup
                        continue
                text = event.get("text")
                if text and writer.role_sent and not state.logprobs:  # most chunks of a stream
                    out.append(self._content(state, text))
                    continue
            elif kind == "error" and event["error"].get("code") == TRUNCATED:
                raw = event["error"].get("raw")
                state.hide = raw.removesuffix("…") if isinstance(raw, str) else None
            chunk = writer.chunk(event)
            if chunk is not None:
                out.append(self._dress(state, chunk))
        return out

    def _content(self, state: _Choice, text: str) -> bytes:
        """``_dress(state, state.writer.chunk(content event))`` for a chunk after the first,
        without logprobs: the same bytes, made from the text alone. The bytes around it are
        made once for the upstream's head (and again if it changes), by encoding such a chunk
        with an empty text: JSON escapes every quote inside a string, so its empty content is
        found where it is and nowhere else."""
        head = self.head
        key = (head["id"], head["model"], head["created"], self.fingerprint)
        frame = state.frame
        if frame is None or frame[0] != key:
            chunk = state.writer.chunk({"type": "content", "text": "x"})
            assert chunk is not None
            chunk["choices"][0]["delta"]["content"] = ""
            before, _, after = self._dress(state, chunk).partition(b'"delta":{"content":""}')
            frame = state.frame = (key, before + b'"delta":{"content":', b"}" + after)
        self.started = True
        return frame[1] + orjson.dumps(text) + frame[2]

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
        # A broken stream is a cut answer; so is one whose usage reached max_tokens.
        cut = self.failure is not None or cut_by_usage(self.usage, self.prepared.max_tokens,
                                                       len(self.choices))
        whats: list[str] = []
        for index in sorted(self.choices):
            state = self.choices[index]
            if cut and state.finish != "length":
                self.seen.truncated = self.failure is None
                state.finish = "length"
            # The upstream's finish_reason for this choice: "length" makes a cut block no call.
            out += self._out(state, await state.decoder.close(state.finish))
            result = state.decoder.result().to_dict()
            check_forced(result, self.prepared.forced)
            whats += [w for w in unrecognised(result) if w not in whats]
            self.seen.codes += [e.get("code") for e in result.get("errors") or ()]
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
            said = unrecognised(result)
            if said:
                field["unrecognised"] = said
            if self.report:
                field.update({"status": "ok", **result})
            if field:
                extra["toolcodec"] = field
            out.append(self._dress(state, state.writer.final(state.finish, **extra)))
        self._said(whats)
        return out

    def _said(self, whats: list[str]) -> None:
        metrics, proxy = self.proxy.metrics, self.proxy
        metrics.count_unrecognised(True, whats)
        undecoded = self.undecoded
        reason = (self.failure[0] if self.failure is not None
                  else str(undecoded[0].get("code") or undecoded[0].get("status"))
                  if undecoded else None)
        proxy.said(self.seen, True, whats, reason=reason)

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


def _loads(data: bytes) -> Any:
    """An SSE line's JSON; bytes that are not UTF-8 are read with U+FFFD in their place."""
    try:
        return orjson.loads(data)
    except orjson.JSONDecodeError:
        return orjson.loads(data.decode("utf-8", "replace"))


def _finishes(chunk: dict[str, Any]) -> bool:
    """Whether *chunk* ends a choice (has a finish_reason); a loop, not ``any()`` over a
    generator: it runs for every chunk."""
    choices = chunk.get("choices")
    if isinstance(choices, list):
        for c in choices:
            if isinstance(c, dict) and c.get("finish_reason"):
                return True
    return False


class _SSEBody:
    """An SSE body's chunks, part by part as it arrives. With *frames*, a content delta that
    differs from the chunk before only in its text comes as that text alone (a ``str``: the
    text of choice 0; see ``toolcodec.pool.proxy.chunk_frame``): the relay turns *frames* on
    once choice 0 has a decoder."""

    __slots__ = ("lines", "finished", "frames", "frame", "used", "unused")

    def __init__(self, limit: int) -> None:
        self.lines = SSELines(limit)
        self.finished = False  # a chunk had a finish_reason
        self.frames = False
        self.frame: ContentFrame | None = None  # that of the last chunk parsed
        # Frames learned and dropped before they read a line (choices interleaved, n > 1):
        # after _UNUSED_FRAMES of them none is learned, as learning costs more than a parse.
        self.used, self.unused = False, 0

    def chunks(self, part: bytes
               ) -> tuple[list[dict[str, Any] | str], tuple[str, str] | None, bool]:
        """(the chunks *part* completes, the failure it shows, whether the stream ended as it
        should); ``b""`` is the body's end. ``UpstreamError`` for a line over the limit."""
        frame = self.frame
        if frame is not None and part and self.lines.at_line_start():
            text = frame.event_text(part, self.lines.limit)  # most parts: one text delta
            if text is not None:
                self.used = True
                return [text], None, False
        out: list[dict[str, Any] | str] = []
        for data in self.lines.feed(part) if part else self.lines.end():
            if not data:
                continue
            if frame is not None:
                text = frame.text(data)
                if text is not None:
                    out.append(text)
                    self.used = True
                    continue
            if data == b"[DONE]":
                return out, None, True
            try:
                chunk = _loads(data)
            except orjson.JSONDecodeError:
                return out, ("upstream_bad_chunk",
                             "the model server sent a chunk that is not JSON"), False
            if isinstance(chunk, dict):
                self.finished = self.finished or _finishes(chunk)
                out.append(chunk)
                if self.frames:  # the next chunk is read against this one's
                    frame = self._learn(data, chunk)
        if part:
            return out, None, False
        if self.finished:
            return out, None, True
        # the body ended cleanly, but the stream had not: neither [DONE] nor a finish_reason
        return out, ("upstream_stream_broken", "the model server's stream ended without a "
                     "finish_reason or [DONE]"), False

    def _learn(self, data: bytes, chunk: dict[str, Any]) -> ContentFrame | None:
        if self.frame is not None and not self.used:
            self.unused += 1
            if self.unused >= _UNUSED_FRAMES:
                self.frames = False
        self.used = False
        self.frame = ContentFrame.learn(data, chunk) if self.frames else None
        return self.frame

    @staticmethod
    def broken(exc: HTTPError) -> tuple[str, str]:
        return ("upstream_stream_broken",
                f"the model server's stream broke off ({type(exc).__name__})")


class _WholeBody:
    """A whole JSON answer to a stream request: relayed as the stream it stands for (decoded
    like any), or an error if it is no chat completion."""

    __slots__ = ("limit", "parts", "size", "declared")

    def __init__(self, response: Response, limit: int) -> None:
        self.limit, self.parts, self.size = limit, [], 0  # size: the bytes read
        declared = response.headers.get("content-length", "")
        self.declared = int(declared) if declared.isdigit() else 0  # over the limit: refused

    def chunks(self, part: bytes) -> tuple[list[dict[str, Any]], tuple[str, str] | None, bool]:
        if part:
            self.parts.append(part)
            self.size += len(part)
        if self._too_large():
            return [], self._unread(UpstreamError.__name__), False
        if part:
            return [], None, False
        try:
            answer = orjson.loads(b"".join(self.parts))
        except orjson.JSONDecodeError as exc:
            return [], self._unread(type(exc).__name__), False
        problem = shape_problem(answer)
        if problem is not None:
            return [], ("bad_upstream", "the model server answered the stream request with "
                        f"JSON that is not a chat completion: {problem}"), False
        return whole_as_chunks(answer), None, True

    def broken(self, exc: HTTPError) -> tuple[str, str]:
        return self._unread(type(exc).__name__)

    def _too_large(self) -> bool:
        return max(self.size, self.declared) > self.limit

    def _unread(self, why: str) -> tuple[str, str]:
        code = "upstream_too_large" if self._too_large() else "upstream_bad_chunk"
        return code, ("the model server answered the stream request with a body that could "
                      f"not be read as JSON ({why})")


def whole_as_chunks(answer: dict[str, Any]) -> list[dict[str, Any]]:
    """A whole chat completion as the chunks of its stream: per choice one delta with all of
    its message, then its finish_reason; ``usage`` on the last."""
    head = {k: answer[k] for k in ("id", "model", "created", "system_fingerprint")
            if k in answer}
    chunks = []
    for n, choice in enumerate(answer["choices"]):
        index = choice.get("index", n)
        message = choice.get("message") or {}
        delta = {"role": "assistant", "content": message.get("content") or ""}
        for key in ("reasoning_content", "reasoning"):
            if isinstance(message.get(key), str):
                delta[key] = message[key]
                break
        calls = message.get("tool_calls")
        if isinstance(calls, list) and calls:
            delta["tool_calls"] = [{**c, "index": i} for i, c in enumerate(calls)
                                   if isinstance(c, dict)]
        chunks.append({**head, "object": "chat.completion.chunk",
                       "choices": [{"index": index, "delta": delta, "finish_reason": None}]})
        chunks.append({**head, "object": "chat.completion.chunk",
                       "choices": [{"index": index, "delta": {},
                                    "finish_reason": choice.get("finish_reason") or "stop"}]})
    if chunks and answer.get("usage") is not None:
        chunks[-1]["usage"] = answer["usage"]
    return chunks
