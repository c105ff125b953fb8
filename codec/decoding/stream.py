"""``StreamDecoder``: tool calls out of a token stream, never stalling, identical to batch.

>>> s = toolcodec.ToolCallCodec(tools=TOOLS).stream()
>>> events = []
>>> for chunk in chunks:                 # str pieces, or OpenAI chat.completion.chunk dicts
...     events += s.feed(chunk)
>>> events += s.close()
>>> s.result()                          # == toolcodec.decode(whole output)

Events, in stream order:

- ``{"type": "content", "text"}`` — text that is certainly not tool-call markup, released by
  the ``feed`` that makes it certain;
- ``{"type": "reasoning", "text"}`` — text inside ``<think>…</think>`` (or
  ``reasoning_content`` deltas);
- ``{"type": "tool_call", "index", "id", "name", "arguments", "repairs"}`` — a call, once it
  is decoded and validated; ``id`` is ``call_<prefix><index>`` with a random prefix per stream
  (or the ``id_prefix`` given);
- ``{"type": "error", "error": {"code", "message", …}}`` — a block that failed; its text
  follows as content, as ``decode`` keeps it in ``content``.

Invariants (property-tested): for every chunking, ``result().to_dict()`` equals ``decode()``
of the whole output; the ``tool_call`` events are ``result.calls`` in order; the joined
``content`` texts, stripped, are ``result.content``. Text outside an open block is held back
only while it could still begin markup (at most the longest opener); after a JSON call in
prose (which only the end of the output can confirm) the text that follows waits for the end
too. The work is linear in the output whatever the chunk size: the engine never re-scans what
it has read, and each block's text is decoded once, when it ends.

``feed`` also takes an OpenAI ``chat.completion.chunk`` dict, or its ``choices[0].delta``:
``content`` goes through the text decoder, ``reasoning_content`` (or ``reasoning``) to
reasoning, and ``tool_calls`` fragments are gathered by ``index`` and decoded at ``close``
(repaired like native arguments), after any calls found in the text. The result is then
``decode`` of the assembled assistant message (``assembled_message()``). A malformed chunk
gives an ``error`` event with ``bad_request``; ``feed`` never raises.

``close(finish_reason=...)`` says why the generation stopped; a chunk's
``choices[0].finish_reason`` is read by ``feed`` itself (``close``'s argument, when given,
wins). With ``"length"`` a block the end of the output cut off yields a ``truncated`` error
instead of a call, exactly as ``decode(text, finish_reason="length")`` does.
"""

from __future__ import annotations

from typing import Any

from toolcodec.decoding import native
from toolcodec.decoding.engine import BlockReady
from toolcodec.decoding.unread_markup import said
from toolcodec.results.errors import BAD_REQUEST, INTERNAL_ERROR, CodecError
from toolcodec.results.ids import random_hex
from toolcodec.results.result import DecodeResult, Span, encodable_result

Event = dict[str, Any]
_MISSING = object()  # a key a chunk lacks
_NOT_TEXT = object()  # a delta's content that is neither a string nor null


class StreamDecoder:
    """Decode one streamed model output; see the module docstring. Not thread-safe."""

    def __init__(self, codec: Any, *, id_prefix: str | None = None) -> None:
        self.codec = codec
        self.id_prefix = random_hex(4) + "_" if id_prefix is None else id_prefix
        self._engine = codec.engine(id_prefix=self.id_prefix)
        self._natives: dict[int, dict[str, Any]] = {}
        self._reasoning: list[str] | None = None
        self._messages = False  # fed OpenAI chunks: the result is a message's
        self._failed: CodecError | None = None
        self._raw: list[str] = []  # the text after an internal failure, kept as content
        self._result: DecodeResult | None = None
        self._finish_reason: str | None = None  # from a chunk's choices[0].finish_reason

    # -- feeding --------------------------------------------------------------------------------

    def feed(self, chunk: str | dict[str, Any]) -> list[Event]:
        """Take the next piece of the output; return what it made certain. Never raises."""
        if self._result is not None:
            return [_bad("feed() after close(): the stream has ended")]
        if isinstance(chunk, str):
            return self._text(chunk)
        if isinstance(chunk, dict):
            return self._chunk(chunk)
        return [_bad(f"a stream chunk must be a str or a chat.completion.chunk dict, "
                     f"not {type(chunk).__name__}")]

    def close(self, finish_reason: str | None = None) -> list[Event]:
        """End of the stream: release everything held back, decode what is still open.

        ``finish_reason`` (else the last one a fed chunk carried): see ``decode``."""
        if self._result is not None:
            return []
        if finish_reason is not None:
            self._finish_reason = finish_reason
        if self._failed is not None:
            return self._close_failed()
        try:
            return self._close()
        except BlockReady:
            raise
        except Exception as exc:  # noqa: BLE001 - a bug must not reach the chat
            self._fail(exc)
            return self._close_failed()

    def result(self) -> DecodeResult:
        """The ``DecodeResult`` of the whole output; closes the stream if still open."""
        if self._result is None:
            self.close()
        assert self._result is not None
        return self._result

    def assembled_message(self) -> dict[str, Any]:
        """The assistant message the OpenAI chunks fed so far add up to."""
        message: dict[str, Any] = {"role": "assistant", "content": self._engine.text or None}
        if self._reasoning is not None:
            message["reasoning_content"] = "".join(self._reasoning)
        if self._natives:
            message["tool_calls"] = [
                {"id": n["id"], "type": "function",
                 "function": {"name": "".join(n["name"]), "arguments": "".join(n["arguments"])}}
                for _, n in sorted(self._natives.items())]
        return message

    # -- text -----------------------------------------------------------------------------------

    def _text(self, chunk: str) -> list[Event]:
        if self._failed is not None:
            self._raw.append(chunk)
            return [{"type": "content", "text": chunk}] if chunk else []
        engine = self._engine
        try:
            engine.feed(chunk)
        except BlockReady:
            raise  # the pool-backed stream decodes the block in a worker and reads on
        except Exception as exc:  # noqa: BLE001 - report, keep the text, keep streaming
            events = self._drain() + self._fail(exc)
            held = self._engine.text[self._engine.pos:]
            return events + ([{"type": "content", "text": held}] if held else [])
        events = engine.events  # _drain, inline: this runs for every delta
        if not events:
            return []
        engine.events = []
        return events

    def _drain(self) -> list[Event]:
        engine = self._engine
        events = engine.events
        if not events:  # most chunks of a long block: nothing to hand over, nothing to swap
            return []
        engine.events = []
        return events

    # -- OpenAI chunks ----------------------------------------------------------------------------

    def _chunk(self, chunk: dict[str, Any]) -> list[Event]:
        if "choices" in chunk:
            reason = _finish_reason_of(chunk)
            delta, problem = _delta_of(chunk)
        else:  # a choice (``{"index", "delta", "finish_reason"}``, as a proxy hands them on)
            # or a delta: its fields read here, one lookup each (this runs for every delta)
            delta, problem, reason = chunk.get("delta", _MISSING), None, None
            if delta is _MISSING:
                delta = chunk
            else:
                reason = chunk.get("finish_reason")
            if delta is not None and type(delta) is not dict and not isinstance(delta, dict):
                problem = "chunk delta must be an object"
        if reason is not None and isinstance(reason, str):
            self._finish_reason = reason
        if problem is not None:
            return [_bad(problem)]
        if delta is None:
            return []  # e.g. a usage-only chunk
        self._messages = True
        get = delta.get
        content = get("content")
        if content is not None and type(content) is not str and not isinstance(content, str):
            content = _NOT_TEXT
        if len(delta) == 1 and content is not None and content is not _NOT_TEXT:
            return self._text(content)  # the common delta: content alone
        events: list[Event] = []
        reasoning = get("reasoning_content", get("reasoning"))
        if reasoning is not None:
            if not isinstance(reasoning, str):
                return [_bad("delta.reasoning_content must be a string")]
            if self._reasoning is None:
                self._reasoning = []
            self._reasoning.append(reasoning)
            if reasoning:
                events.append({"type": "reasoning", "text": reasoning})
            if reasoning.strip() and not self._engine.text:
                self._engine.current = None  # split off upstream: no prefill, as in decode
        calls = get("tool_calls")
        if calls is not None:
            events += self._gather(calls)
        if content is _NOT_TEXT:
            return events + [_bad("delta.content must be a string or null")]
        if not content:
            if self._failed is not None:
                return events
            drained = self._drain()
            return events + drained if drained else events
        text = self._text(content)
        return events + text if events else text

    def _gather(self, fragments: Any) -> list[Event]:
        if not isinstance(fragments, list):
            return [_bad("delta.tool_calls must be a list")]
        events = []
        for fragment in fragments:
            problem = _fragment_problem(fragment)
            if problem is not None:
                events.append(_bad(problem))
                continue
            slot = self._natives.setdefault(fragment["index"], {
                "id": fragment.get("id") or f"call_{fragment['index']}", "name": [],
                "arguments": []})
            fn = fragment.get("function") or {}
            if fragment.get("id"):
                slot["id"] = fragment["id"]
            if fn.get("name"):
                slot["name"].append(fn["name"])
            if fn.get("arguments"):
                slot["arguments"].append(fn["arguments"])
        return events

    # -- the end --------------------------------------------------------------------------------

    def _close(self) -> list[Event]:
        eng = self._engine
        if self._messages:
            message = self.assembled_message()
            msg = native.read_message(message)
            eng.native = msg.has_calls
            eng.finish(self._finish_reason)
            result = self.codec.message_result(eng, msg)
        else:
            eng.finish(self._finish_reason)
            result = eng.result()
        self._result = encodable_result(said(result, self._finish_reason))  # as decode() does
        events = self._drain() + eng.native_events
        eng.native_events = []
        return events

    def _fail(self, exc: Exception) -> list[Event]:
        self._failed = CodecError(INTERNAL_ERROR, f"stream decoder failed: "
                                  f"{type(exc).__name__}: {exc}")
        return [{"type": "error", "error": self._failed.to_dict()}]

    def _close_failed(self) -> list[Event]:
        text = self._engine.text + "".join(self._raw)
        self._result = DecodeResult(ok=False, content=text.strip(), errors=[self._failed],
                                    spans=[Span("text", 0, len(text))] if text else [])
        return []


def _delta_of(chunk: dict[str, Any]) -> tuple[dict[str, Any] | None, str | None]:
    """The delta of a chunk dict (or the dict itself when it is a delta), or a problem."""
    if "choices" in chunk:
        choices = chunk["choices"]
        if not isinstance(choices, list):
            return None, "chunk 'choices' must be a list"
        if not choices:
            return None, None
        first = choices[0]
        if not isinstance(first, dict):
            return None, "chunk choices[0] must be an object"
        delta = first.get("delta", {})
    else:
        delta = chunk.get("delta", chunk)
    if delta is None:
        return None, None
    if not isinstance(delta, dict):
        return None, "chunk delta must be an object"
    return delta, None


def _finish_reason_of(chunk: dict[str, Any]) -> str | None:
    """A chunk's ``choices[0].finish_reason``, if it carries one."""
    choices = chunk.get("choices")
    if "choices" in chunk:
        first = choices[0] if isinstance(choices, list) and choices else None
        reason = first.get("finish_reason") if isinstance(first, dict) else None
    else:  # a choice given on its own
        reason = chunk.get("finish_reason") if "delta" in chunk else None
    return reason if isinstance(reason, str) else None


def _fragment_problem(fragment: Any) -> str | None:
    if not isinstance(fragment, dict):
        return "each delta.tool_calls entry must be an object"
    index = fragment.get("index")
    if isinstance(index, bool) or not isinstance(index, int) or not 0 <= index < 1024:
        return "delta.tool_calls[].index must be an integer from 0 to 1023"
    fn = fragment.get("function")
    if fn is not None and not isinstance(fn, dict):
        return "delta.tool_calls[].function must be an object"
    for key in ("name", "arguments"):
        if fn and fn.get(key) is not None and not isinstance(fn.get(key), str):
            return f"delta.tool_calls[].function.{key} must be a string"
    if fragment.get("id") is not None and not isinstance(fragment.get("id"), str):
        return "delta.tool_calls[].id must be a string"
    return None


def _bad(message: str) -> Event:
    return {"type": "error", "error": CodecError(BAD_REQUEST, message).to_dict()}
