"""The decoding engine: one left-to-right pass shared by ``decode`` and the stream decoder.

``decode(text)`` is ``feed(text)`` then ``finish()``; the stream decoder calls ``feed`` once
per chunk. Every decision is taken from a bounded window past the current position, or at
``finish``, never by looking arbitrarily far ahead, so the answer does not depend on how the
text was cut into chunks (stream ≡ batch, property-tested).

What the engine reads, in order:

- *openers* (``toolcodec.scanning.openers``, compiled from the formats' declarations: one
  pattern per set of formats, the tool names looked up in sets; an opener cut by a chunk boundary is
  held, never leaked, the ``regex`` module's partial matching telling where one may be):
  ``<think>``, ``<tool_call>``, ``<tool>``, ``<function=``, ``<TOOL_NAME …>``, the special
  tokens of the marker formats (``toolcodec.formats.table``), a JSON value whose first key
  looks like a call, ``[KNOWN_TOOL(`` (Python calls), and a code fence;
- an envelope opener (except ``<function=``) starts a block only when the first character
  after it (past at most ``BODY_WS`` blanks) is ``<``, ``{`` or ``[`` (for ``<tool_call>``, also
  a code fence around JSON), or the text ends there:
  ``use <get_weather> to check`` names the syntax and stays text;
- a block ends by its kind's end rule (``toolcodec.formats.block_kinds``, each rule in its
  format's module; a marker format's ``MarkerFormat`` declares its own), or at the end of the
  text (``closed=False``); its text is decoded once, when it ends;
- JSON (or a Python call list) in prose: a candidate's extent is found by bracket and string
  matching, and it is a call only if it parses as strict JSON (or literal Python), has a call
  shape, names known tools and validates.
  Such a call is *pending* until the end: it counts only when the output held no envelope (and,
  for a message, no native calls). While one is pending, the text after it waits too, so that
  content stays in order.

The engine knows no family: what a format's block looks like comes from its declarations
(``toolcodec.formats.registry``). Reasoning blocks are read by ``ReasoningReader``
(``toolcodec.decoding.reasoning_reader``), prose and calls in prose by ``ProseReader``
(``toolcodec.decoding.prose_reader``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Protocol

import regex  # partial matching: an opener cut at the end of a chunk
from toolcodec.decoding.assembly import Assembly
from toolcodec.decoding.prose_reader import MAX_CANDIDATES, ProseReader
from toolcodec.decoding.reasoning_reader import ReasoningReader
from toolcodec.formats.block_kinds import BLOCK_KINDS, OPENER_KINDS
from toolcodec.formats.open_block import OpenBlock
from toolcodec.formats.reasoning import BY_OPENER
from toolcodec.repair.normalize import replace_surrogates, replace_surrogates_in
from toolcodec.results.errors import PAYLOAD_TOO_LARGE, CodecError, truncated
from toolcodec.results.limits import Limits
from toolcodec.results.result import clean_call
from toolcodec.scanning.envelopes import FORMAT_OF_TAG, Block
from toolcodec.scanning.openers import BODY_WS, Openers

_CUT = "before this call was closed"  # what a truncated error says of a cut block
# Repairs that complete what the end of a text cut: a call that needed one was cut itself.
_COMPLETED = frozenset({"json.unclosed", "json.unclosed_string", "json.dangling_key_dropped",
                       "json.cut_value_dropped", "xml.balance_tags", "xml.cut_tag_dropped"})
HEAD_WINDOW = 160  # characters that decide whether a body that starts with a word is a call
_BARE_NAME = re.compile(r"<?([^ \t\r\n:]+)")
# A code fence holding JSON, right after <tool_call>: the envelope's body (json.code_fence).
_FENCED_JSON = regex.compile(r"```[ \t]{0,8}[A-Za-z0-9_+.\-]{0,16}[ \t]{0,8}\r?\n"
                             r"[ \t\r\n]{0,64}[\[{]")


class BlockReady(Exception):  # noqa: N818 - a signal to the pool-backed stream, not an error
    """A block has ended and must be decoded before the engine reads on."""

    def __init__(self, block: Block, index: int) -> None:
        super().__init__(block.fmt)
        self.block, self.index = block, index


class Codec(Protocol):
    """What the engine uses of the codec that drives it (a ``ToolCallCodec``)."""

    limits: Limits
    max_calls: int
    registry: Any
    _openers: Openers

    def _block_calls(self, text: str, block: Block) -> tuple[list[Any], list[CodecError]]: ...

    def apply_block(self, asm: Assembly, index: int, block: Block, calls: list[Any],
                    errors: list[CodecError]) -> None: ...

    def _check_pairs(self, pairs: list[Any]) -> tuple[bool, list[Any]]: ...


@dataclass
class Engine(ReasoningReader, ProseReader):
    """Feeds text through the decoding rules; collects events and the result's parts."""

    codec: Codec
    asm: Assembly
    events: list[dict[str, Any]] = field(default_factory=list)
    native: bool = False  # the message also has native calls (pending JSON never counts)
    text: str = ""
    pos: int = 0
    envelopes: int = 0
    rest_from: int | None = None  # too many envelopes, or past max_chars: the rest is content
    known_shape: bool = False
    tries: int = 0
    depth: int = 0
    current: OpenBlock | None = None
    held: list[Any] | None = None  # events waiting behind a pending JSON call
    id_prefix: str = ""
    calls_emitted: int = 0
    native_events: list[dict[str, Any]] = field(default_factory=list)
    defer_blocks: bool = False  # raise BlockReady instead of decoding in this process
    # Why the generation stopped, as the model server said (set by ``finish``): with
    # "length", a block the end of the text cut off is never completed into a call.
    finish_reason: str | None = None
    cut_rest: Block | None = None  # the cut part of a section whose first calls are decoding
    loud: Any = None  # where markup may begin in prose (``ProseReader._quiet``), when known

    # -- feeding ------------------------------------------------------------------------------

    def feed(self, chunk: str, *, last: bool = False) -> None:
        """Take the next chunk. With *last* (``finish`` follows at once), nothing is read
        until ``finish``: a search that allows for more text costs twice a final one."""
        if not chunk:
            return
        if self.rest_from is not None:
            self._append(chunk)
            self._content(len(self.text) - len(chunk), len(self.text))
            return
        text = self.text
        if len(chunk) <= self.codec.limits.max_chars - len(text):
            # _append's in-place concatenation, inline: this runs for every chunk of a stream
            self.asm.text = self.text = ""
            text += chunk
            self.text = text
            if last:
                return
            cur = self.current
            if cur is None:
                quiet = self._quiet(len(text) - len(chunk))
            elif cur.kind == "think":
                quiet = self._think_quiet(cur)
            else:
                quiet = self._cannot_end(chunk)
            if not quiet:
                self._advance(final=False)
            return
        room = self.codec.limits.max_chars - len(text)
        self._append(chunk[:room])
        self._advance(final=True)
        self._resolve(final=True)
        self._append(chunk[room:])
        self._too_large(len(self.text) - len(chunk) + room)

    def finish(self, finish_reason: str | None = None) -> None:
        self.finish_reason = finish_reason
        self.asm.text = self.text
        if self.rest_from is None:
            self._advance(final=True)
            self._resolve(final=True)
        else:
            start = self.rest_from
            self.asm.add_markup(Block("rest", start, len(self.text), start, len(self.text),
                                      False), [])
        self.asm.text = self.text

    def _append(self, chunk: str) -> None:
        self.asm.text = ""  # (set again before use) no second reference, so += stays in place
        text, self.text = self.text, ""
        text += chunk  # in place while this is the only reference: linear over a stream
        self.text = text

    def _cannot_end(self, chunk: str) -> bool:
        """Whether *chunk* certainly leaves the open block open (the common case inside a long
        block: then there is nothing to decide, and nothing is scanned; reasoning's text is
        sent as reading it would send it)."""
        cur = self.current
        if cur is None:
            return False
        if cur.kind == "think":
            return self._think_quiet(cur)  # reasoning is streamed as it comes
        if cur.kind in ("json", "pycall"):
            return not any(c in chunk for c in '"\'\\{}[]')
        if cur.kind == "fence":
            return "`" not in chunk
        return BLOCK_KINDS[cur.kind].quiet(cur, chunk)

    def result(self) -> Any:
        """The ``DecodeResult`` of a text output, after ``finish``."""
        if self.envelopes and self.known_shape:
            self.asm.repairs.append("gate.mixed_formats")
        return self.asm.finish("xml" if self.envelopes else "json")

    # -- the main loop ------------------------------------------------------------------------

    def _advance(self, final: bool) -> None:
        self.asm.text = self.text
        while self.rest_from is None:
            step = self._in_free(final) if self.current is None else self._in_open(final)
            if not step:
                return

    def _in_free(self, final: bool) -> bool:
        m = self.codec._openers.find(self.text, self.pos, not final,
                                     self.tries >= MAX_CANDIDATES)
        if m is None or m.partial:
            stop = len(self.text) if m is None else m.start()
            self._free_text(self.pos, stop, final, at_end=True)
            return False
        start, kind = m.start(), m.lastgroup
        if kind in ("json", "fence", "pycall"):
            return self._candidate(m, final)
        if kind in ("marker", "start_marker"):
            return self._marker(m, final)
        if kind in ("reason_token", "reason_tag"):
            row = BY_OPENER[m.group() if kind == "reason_token" else f"<{m.group(kind)}>"]
            return self._open_block(OpenBlock("think", start, m.end(), m.end(), row.openers[0]),
                                    final)
        if kind == "framing":
            self._free_text(self.pos, start, final, at_end=False)
            self.asm.add_tokens(start, m.end())
            self.pos = m.end()
            return True
        if kind == "bare":
            name = _BARE_NAME.match(m.group()).group(1)
            body = m.start() + m.group().rindex("<")
            return self._open_block(OpenBlock("bare_tag", start, body, body, name), final)
        fmt = FORMAT_OF_TAG[m.group("fixed")] if kind == "fixed" else OPENER_KINDS[kind]
        rules = BLOCK_KINDS[fmt]
        if rules.checks_body:
            follows = self._body_check(m.end(), final, head=rules.word_head,
                                       empty=rules.self_closing and m.group().endswith("/>"),
                                       fence=rules.fenced_json)
            if follows is None:
                self._free_text(self.pos, start, final, at_end=False)
                return False
            if not follows:
                self._free_text(self.pos, m.end(), final, at_end=False)  # named, not called
                return True
        body = start if rules.body_at_opener else m.end()
        tag = m.group(kind) if rules.self_closing else None
        return self._open_block(OpenBlock(fmt, start, body, body, tag), final)

    def _open_block(self, cur: OpenBlock, final: bool) -> bool:
        self._free_text(self.pos, cur.start, final, at_end=False)
        if cur.kind != "think":
            if self.envelopes >= self.codec.max_calls:
                self._too_many(cur.start)
                return False
            self.envelopes += 1
            self._resolve(final=False)
        self.current = cur
        self.pos = cur.start
        return True

    def _marker(self, m: Any, final: bool) -> bool:
        token = m.group(m.lastgroup)
        fmt = self.codec._openers.markers[token]
        if fmt.needs_body:
            follows = self._body_check(m.end(), final, json_only=True,
                                       head=None if isinstance(fmt.needs_body, str)
                                       else fmt.needs_body)
            if follows is None:
                self._free_text(self.pos, m.start(), final, at_end=False)
                return False
            if not follows:
                self._free_text(self.pos, m.end(), final, at_end=False)
                return True
        body = m.start() if fmt.keep_opener else m.end()
        return self._open_block(OpenBlock("marker", m.start(), body, m.end(), token), final)

    def _body_check(self, at: int, final: bool, *, head: Any = None, json_only: bool = False,
                    empty: bool = False, fence: bool = False) -> bool | None:
        """Whether what follows an opener can be a call's body (None: not known yet).

        The first character past at most ``BODY_WS`` blanks must be ``<``, ``{`` or ``[`` (only
        ``{`` or ``[`` with ``json_only``), or the text must end there; a body that starts with
        a word counts when ``head`` (a GLM name after ``<tool_call>``, a YAML ``key:`` in a tool
        tag) matches within ``HEAD_WINDOW`` characters."""
        if empty:
            return True  # <NAME/>: a complete call with no arguments
        window = self.text[at:at + BODY_WS + 1]
        stripped = window.lstrip()
        if not stripped:
            if len(window) > BODY_WS:
                return False
            return final or None if at + len(window) == len(self.text) else False
        if stripped[0] in ("{[" if json_only else "<{["):
            return True
        if fence and stripped[0] == "`":  # ```json⏎{…} inside <tool_call> (json.code_fence)
            fence_at = at + len(window) - len(stripped)
            m = _FENCED_JSON.match(self.text, fence_at, partial=not final)
            return None if m is not None and m.partial else m is not None
        if head is None or not (stripped[0].isalnum() or stripped[0] in "_<"):
            return False
        head_at = at + len(window) - len(stripped)
        ahead = self.text[head_at:head_at + HEAD_WINDOW]
        if head.match(ahead):
            return True
        cut = len(ahead) < HEAD_WINDOW and head_at + len(ahead) == len(self.text)
        return None if cut and not final else False

    # -- open blocks ----------------------------------------------------------------------------

    def _in_open(self, final: bool) -> bool:
        cur = self.current
        if cur.kind == "think":
            return self._think(cur, final)
        if cur.kind in ("json", "pycall"):
            return self._json_extent(cur, final)
        if cur.kind == "fence":
            return self._fence(cur, final)
        rules = BLOCK_KINDS[cur.kind]
        end = rules.end(self.text, cur, final, self.codec)
        if end is None:
            return False
        block_end, body_end, closed = end
        block = Block(cur.kind, cur.start, block_end, cur.body_start, body_end, closed, cur.tag)
        self.current = None
        self.pos = block_end
        self.tries = self.depth = 0
        if rules.empty_is_framing and closed and not self.text[cur.body_start:body_end].strip():
            self.asm.add_tokens(cur.start, block_end)  # an empty section: framing, no call
            self.envelopes -= 1
            return True
        if (final and self.finish_reason == "length"
                and rules.cut(self.text, cur, block, self.codec)):
            self._cut_block(block, rules)
        else:
            self._decode_block(block)
        return True

    def _cut_block(self, block: Block, rules: Any) -> None:
        """A block the output was cut off in: no call from it, but the calls of a section
        that ended before the cut (its format's per-call end tokens) are read on their own;
        ``apply_block`` keeps them only if none needed completing."""
        split = rules.calls_end(self.text, block, self.codec) if rules.calls_end else None
        if split is None:
            self.apply_block(block, self.envelopes - 1, [], [truncated(_CUT)])
            return
        self.cut_rest = Block(block.fmt, split, block.end, split, block.end, False, block.tag)
        self._decode_block(Block(block.fmt, block.start, split, block.body_start, split, False,
                                 block.tag))

    def _decode_block(self, block: Block) -> None:
        if self.defer_blocks:  # the caller decodes it elsewhere, then calls apply_block
            raise BlockReady(block, self.envelopes - 1)
        calls, errors = self.codec._block_calls(self.asm.text, block)
        self.apply_block(block, self.envelopes - 1, calls, errors)

    def apply_block(self, block: Block, index: int, calls: list[Any],
                    errors: list[CodecError]) -> None:
        """Record a decoded block and emit its events (for the complete calls of a cut
        section, then the cut rest as a ``truncated`` error)."""
        rest, self.cut_rest = self.cut_rest, None
        if rest is not None and rest.start == block.end:
            if errors or any(_COMPLETED & set(call.repairs) for call in calls):
                whole = Block(block.fmt, block.start, rest.end, block.body_start, rest.end,
                              False, block.tag)
                self._record(whole, index, [], [truncated(_CUT)])
                return
            self._record(block, index, calls, [])
            self._record(rest, index, [], [truncated(_CUT)])
            return
        self._record(block, index, calls, errors)

    def _record(self, block: Block, index: int, calls: list[Any],
                errors: list[CodecError]) -> None:
        self.asm.text = self.text
        past = BLOCK_KINDS[block.fmt].past_body_repair if block.fmt in BLOCK_KINDS else ""
        if past and block.end > block.body_end:  # e.g. a stray </tool_call> after the call
            for call in calls:
                if past not in call.repairs:
                    call.repairs.append(past)
        calls_before, errors_before = len(self.asm.calls), len(self.asm.errors)
        self.codec.apply_block(self.asm, index, block, calls, errors)
        for error in self.asm.errors[errors_before:]:
            self._error_event(error)
        if len(self.asm.calls) > calls_before:
            for call in self.asm.calls[calls_before:]:
                self._emit(self._call_event(call))
        else:
            self._content(block.start, block.end)

    def _content(self, begin: int, end: int) -> None:
        if end > begin:
            self._emit({"type": "content", "text": _clean(self.text[begin:end])})

    def _emit(self, event: dict[str, Any]) -> None:
        if self.held is not None:
            self.held.append(event)
        else:
            self.events.append(event)

    def _call_event(self, call: Any) -> dict[str, Any]:
        clean_call(call)
        index = self.calls_emitted
        self.calls_emitted += 1
        return {"type": "tool_call", "index": index, "id": f"call_{self.id_prefix}{index}",
                "name": call.name, "arguments": call.arguments, "repairs": list(call.repairs),
                "format": call.format}

    # -- limits -------------------------------------------------------------------------------

    def _too_many(self, start: int) -> None:
        limit = self.codec.max_calls
        error = CodecError(PAYLOAD_TOO_LARGE, f"more than {limit} tool-call envelopes; at most "
                           f"{limit} are decoded and the rest is kept as content",
                           {"limit": limit, "position": start})
        self._resolve(final=False)
        self.asm.text = self.text
        self.asm.errors.append(error)
        self._error_event(error)
        self.rest_from = start
        self._content(start, len(self.text))

    def _too_large(self, start: int) -> None:
        limit = self.codec.limits.max_chars
        error = CodecError(PAYLOAD_TOO_LARGE, f"the output is longer than {limit} characters; "
                           f"the text from offset {limit} on is kept as content, not decoded",
                           {"limit": limit, "position": start})
        self.asm.errors.append(error)
        self._error_event(error)
        self.rest_from = start
        self._content(start, len(self.text))

    def _error_event(self, error: CodecError) -> None:
        self._emit({"type": "error", "error": replace_surrogates_in(error.to_dict())[0]})


def _clean(text: str) -> str:
    return replace_surrogates(text)[0]
