"""The decoding engine: one left-to-right pass shared by ``decode`` and the stream decoder.

``decode(text)`` is ``feed(text)`` then ``finish()``; the stream decoder calls ``feed`` once
per chunk. Every decision is taken from a bounded window past the current position, or at
``finish``, never by looking arbitrarily far ahead, so the answer does not depend on how the
text was cut into chunks (stream ≡ batch, property-tested).

What the engine reads, in order:

- *openers* (``toolcodec.openers``, compiled from the formats' declarations: one pattern per
  set of formats, the tool names looked up in sets; an opener cut by a chunk boundary is
  held, never leaked, the ``regex`` module's partial matching telling where one may be):
  ``<think>``, ``<tool_call>``,
  ``<tool>``, ``<function=``, ``<TOOL_NAME …>``, the special tokens of the marker formats
  (``toolcodec.formats.table``), a JSON value whose first key looks like a call,
  ``[KNOWN_TOOL(`` (Python calls), and a code fence;
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
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, Protocol

import orjson
import regex  # partial matching: an opener cut at the end of a chunk
from toolcodec.assembly import Assembly
from toolcodec.bracket_depth import bracket_depth
from toolcodec.envelopes import FORMAT_OF_TAG, Block
from toolcodec.errors import PAYLOAD_TOO_LARGE, CodecError, truncated
from toolcodec.formats.block_kinds import BLOCK_KINDS, OPENER_KINDS
from toolcodec.formats.open_block import OpenBlock
from toolcodec.formats.reasoning import BY_OPENER
from toolcodec.formats.table import END_OF_GENERATION
from toolcodec.limits import Limits
from toolcodec.normalize import replace_surrogates, replace_surrogates_in
from toolcodec.openers import BODY_WS, Openers
from toolcodec.result import clean_call
from toolcodec.textjson import call_pairs

_CUT = "before this call was closed"  # what a truncated error says of a cut block
# Repairs that complete what the end of a text cut: a call that needed one was cut itself.
_COMPLETED = frozenset({"json.unclosed", "json.unclosed_string", "json.dangling_key_dropped",
                       "json.cut_value_dropped", "xml.balance_tags", "xml.cut_tag_dropped"})
_END_RUN_WINDOW = 96
# Where an end-of-generation token may start: its first two characters, or its first at the
# end of what is looked at (a token the next chunk may complete).
_TOKEN_START = re.compile("|".join(sorted({re.escape(t[:2]) for t in END_OF_GENERATION}))
                          + "|[" + "".join(sorted({re.escape(t[0]) for t in END_OF_GENERATION}))
                          + r"]\Z")
_END_RUN = regex.compile(r"(?:" + "|".join(
    regex.escape(t) for t in sorted(END_OF_GENERATION, key=len, reverse=True))
    + r")(?:[ \t\r\n]{0,8}(?:" + "|".join(
    regex.escape(t) for t in sorted(END_OF_GENERATION, key=len, reverse=True))
    + r")){0,3}[ \t\r\n]{0,16}")
HEAD_WINDOW = 160  # characters that decide whether a body that starts with a word is a call
MAX_CANDIDATES = 32  # JSON candidates tried per stretch of prose between blocks
CALL_MARKERS = ("functools",)  # a word before JSON in prose that says "this is a call"
_MARKER_WS = 64
_BARE_NAME = re.compile(r"<?([^ \t\r\n:]+)")
# Reasoning blocks, answer channels and framing tokens come from one table
# (``toolcodec.formats.reasoning``, extended by registered families): a call written inside
# reasoning is the model thinking about a call, not making it.
# A code fence holding JSON, right after <tool_call>: the envelope's body (json.code_fence).
_FENCED_JSON = regex.compile(r"```[ \t]{0,8}[A-Za-z0-9_+.\-]{0,16}[ \t]{0,8}\r?\n"
                             r"[ \t\r\n]{0,64}[\[{]")
_JSON_STRUCT = re.compile(r'["{}\[\]]')
_STRING_STOP = {'"': re.compile(r'["\\]'), "'": re.compile(r"['\\]")}
_PY_STRUCT = re.compile(r'["\'{}\[\]]')




def _line_call(text: str, start: int, stop: int, openers: tuple[str, ...],
               first: int) -> tuple[int, int] | None:
    """The first of ``openers`` in ``text[start:stop]`` on a line of its own (past at most 16
    blanks after a line break, or after ``first``, where the text starts): where its line
    break is, and where the opener ends."""
    best = None
    for opener in openers:
        i = text.find(opener, start, stop)
        while i >= 0:
            j = i
            while j > first and i - j < 16 and text[j - 1] in " \t":
                j -= 1
            if j == first or text[j - 1] == "\n":
                at = max(start, j - (j > first))
                if best is None or at < best[0]:
                    best = (at, i + len(opener))
                break
            i = text.find(opener, i + 1, stop)
    return best


def _line_call_tail(text: str, start: int, openers: tuple[str, ...], first: int) -> int | None:
    """Where a line that may still become one of ``openers`` on its own starts, at the end
    of ``text`` (its line break, or ``first``)."""
    low = max(start, len(text) - max(map(len, openers)) - 17)
    line = text.rfind("\n", low)
    at = line if line >= 0 else (first if first >= low else -1)
    if at < 0:
        return None
    rest = text[at + (line >= 0):]
    head = rest.lstrip(" \t")
    if len(rest) - len(head) <= 16 and any(o.startswith(head) for o in openers):
        return at
    return None




class BlockReady(Exception):  # noqa: N818 - a signal to the pool-backed stream, not an error
    """A block has ended and must be decoded before the engine reads on."""

    def __init__(self, block: Block, index: int) -> None:
        super().__init__(block.fmt)
        self.block, self.index = block, index


@dataclass(slots=True)
class _Pending:
    """A JSON call in prose, waiting for the end of the output to be confirmed."""

    start: int
    end: int
    calls: list[Any]


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
class Engine:
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
            if not last and not self._cannot_end(chunk):
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
        block: then there is nothing to decide, and nothing is scanned)."""
        cur = self.current
        if cur is None or cur.kind == "think":
            return False  # prose is released at once; reasoning is streamed as it comes
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
        if head is None or not (stripped[0].isalpha() or stripped[0] in "_<"):
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

    def _think(self, cur: OpenBlock, final: bool) -> bool:
        """Reasoning (or an answer channel) up to its row's closer, sent as it comes. In
        reasoning the prompt opened, a call on a line of its own that no closer follows ends
        it (``ReasoningFormat.calls_end_prefill``)."""
        row = cur.row or BY_OPENER[cur.tag or "<think>"]
        cur.row = row
        text = self.text
        while cur.lead is not None:  # a call candidate inside prompt-opened reasoning
            real = self._call_in_reasoning(cur, row, final)
            if real is None:
                return False
            if real:
                return self._end_reasoning(cur, row, cur.lead, cur.lead, False)
            cur.lead = None  # drafted while thinking: reasoning goes on past it
        close, closer = cur.closer_at, cur.closer
        if close < cur.scan:  # not searched from here yet (found once, it stays found)
            close, closer = -1, ""
            for token in row.closers:
                at = text.find(token, cur.scan)
                if at >= 0 and (close < 0 or at < close):
                    close, closer = at, token
            cur.closer_at, cur.closer = close, closer
        hold = None
        if (row.call_openers and cur.body_start == cur.start
                and (text.find("<", cur.scan) >= 0 or text.find("\n", cur.scan) >= 0)):
            openers = row.call_openers
            found = _line_call(text, cur.scan, len(text) if close < 0 else close, openers,
                               cur.body_start)
            if found is not None:
                self._reasoning(cur, row.kind, found[0])
                cur.lead, cur.vscan = found
                return True
            if close < 0 and not final:
                hold = _line_call_tail(text, cur.scan, openers, cur.body_start)
        if close < 0 and not final:
            cur.scan = max(cur.scan, cur.body_start, len(text) - row.longest + 1)
            if hold is not None:
                cur.scan = min(cur.scan, hold)  # perhaps a call's opener: wait
            self._reasoning(cur, row.kind, cur.scan)
            return False
        if close < 0:
            return self._end_reasoning(cur, row, len(text), len(text), False)
        return self._end_reasoning(cur, row, close + len(closer), close, True)

    def _end_reasoning(self, cur: OpenBlock, row: Any, end: int, body_end: int,
                       closed: bool) -> bool:
        self._reasoning(cur, row.kind, body_end)
        if row.kind == "reasoning":
            self.asm.add_reasoning(Block("think", cur.start, end, cur.body_start, body_end,
                                         closed))
        else:  # an answer channel: its text is content, its tokens framing
            self.asm.add_tokens(cur.start, cur.body_start)
            if closed:
                self.asm.add_tokens(body_end, end)
        self.current = None
        self.pos = end
        self.tries = self.depth = 0
        return True

    def _call_in_reasoning(self, cur: OpenBlock, row: Any, final: bool) -> bool | None:
        """Whether the call opener at ``cur.lead`` makes a call (None: not known yet): a body
        follows it, and its closer is not followed by the reasoning's closer (within
        ``BODY_WS`` blanks: then the model drafted the call while thinking)."""
        text, opener_end = self.text, cur.vscan
        closer = next(c for o, c in row.calls_end_prefill
                      if text.startswith(o, opener_end - len(o)))
        if not cur.call_body:  # the body's start not checked yet
            follows = self._body_check(opener_end, final)
            if follows is None:
                return None
            if not follows:
                cur.scan = opener_end
                return False
            cur.call_body, cur.call_scan = True, opener_end
        at = text.find(closer, cur.call_scan)
        if at < 0:
            if final:
                return True  # cut inside the call: a call all the same
            cur.call_scan = max(opener_end, len(text) - len(closer) + 1)
            return None
        after = at + len(closer)
        window = text[after:after + BODY_WS + 16]
        stripped = window.lstrip()
        if len(window) - len(stripped) <= BODY_WS and stripped.startswith(row.closers):
            cur.call_body, cur.scan = False, after
            return False
        if not final and after + len(window) == len(text) and (
                not stripped or any(c.startswith(stripped) for c in row.closers)):
            return None
        cur.call_body = False
        return True

    def _reasoning(self, cur: OpenBlock, kind: str, upto: int) -> None:
        start = max(cur.body_start, cur.reasoned)
        if upto > start:
            self._emit({"type": "reasoning" if kind == "reasoning" else "content",
                        "text": _clean(self.text[start:upto])})
            cur.reasoned = upto

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

    # -- JSON in prose ------------------------------------------------------------------------

    def _candidate(self, m: Any, final: bool) -> bool:
        start = m.start()
        lead = self._marker_before(self.pos, start)
        self._free_text(self.pos, start if lead is None else lead, final, at_end=False)
        if self.depth > 0 or self.tries >= MAX_CANDIDATES:  # inside bracketed prose
            self._free_text(self.pos, start + 1, final, at_end=False)
            return True
        self.tries += 1
        kind = m.lastgroup
        body = m.end() if kind == "fence" else start
        self.current = OpenBlock(kind, start, body, body, lead=lead)
        self.pos = start if lead is None else lead
        return True

    def _json_extent(self, cur: OpenBlock, final: bool) -> bool:
        """Find where a JSON value (or a pythonic call list) ends: brackets outside strings."""
        text, i = self.text, cur.scan
        struct = _PY_STRUCT if cur.kind == "pycall" else _JSON_STRUCT
        while True:
            m = (_STRING_STOP[cur.quote] if cur.quote else struct).search(text, i)
            if m is None or (cur.quote and m.group() == "\\" and m.end() >= len(text)):
                if final:
                    return self._not_a_candidate(cur, final)
                cur.scan = len(text) if m is None else m.start()
                return False
            ch, i = m.group(), m.end()
            if cur.quote:
                if ch == "\\":
                    i += 1
                else:
                    cur.quote = ""
                continue
            if ch in "\"'":
                cur.quote = ch
            elif ch in "{[":
                cur.depth += 1
            else:
                cur.depth -= 1
                if cur.depth <= 0:
                    return self._decide(cur, text[cur.start:i], i, final)

    def _fence(self, cur: OpenBlock, final: bool) -> bool:
        close = self.text.find("```", cur.scan)
        if close < 0:
            if final:  # an unclosed fence is prose: read on after its opener line
                self._free_text(cur.lead if cur.lead is not None else cur.start, cur.body_start,
                                final, at_end=False)
                self.current = None
                self.pos = cur.body_start
                return True
            cur.scan = max(cur.body_start, len(self.text) - 2)
            return False
        return self._decide(cur, self.text[cur.body_start:close], close + 3, final)

    def _decide(self, cur: OpenBlock, source: str, end: int, final: bool) -> bool:
        pairs = self._pairs_of(cur.kind, source)
        if pairs is False:
            return self._not_a_candidate(cur, final)
        self.current = None
        begin = cur.start if cur.lead is None else cur.lead
        if pairs and all(self.codec.registry.get(name) is not None for name, _ in pairs):
            ok, calls = self.codec._check_pairs(pairs)
            # {"name": NAME} of a tool with parameters describes it: not a call's shape
            self.known_shape = self.known_shape or ok or all(a is not None for _, a in pairs)
            if ok:
                fmt = "pythonic" if cur.kind == "pycall" else "json"
                for call in calls:
                    call.format = fmt
                self.pos = end
                self._hold(_Pending(begin, end, calls))
                return True
        if cur.kind in ("fence", "pycall"):
            return self._not_a_candidate(cur, final)
        self._content(begin, end)  # a parsed value is skipped whole: its brackets do not count
        self.pos = end
        return True

    def _pairs_of(self, kind: str, source: str) -> list[tuple[str, Any]] | None | bool:
        """The call pairs of a candidate (None: not call-shaped; False: does not parse)."""
        if kind == "pycall":
            from toolcodec.formats.pythonic import read

            found = read(source, limits=self.codec.limits)
            return False if found.errors or found.repairs else found.calls
        try:
            return call_pairs(orjson.loads(source))
        except orjson.JSONDecodeError:
            return False

    def _not_a_candidate(self, cur: OpenBlock, final: bool) -> bool:
        """Read on from just past the candidate's opening (inner candidates may follow)."""
        self.current = None
        begin = cur.start if cur.lead is None else cur.lead
        self.pos = begin
        self._free_text(begin, cur.body_start if cur.kind == "fence" else cur.start + 1, final,
                        at_end=False)
        return True

    def _marker_before(self, begin: int, start: int) -> int | None:
        head = self.text[max(begin, start - 80):start]
        stripped = head.rstrip()
        if len(head) - len(stripped) > _MARKER_WS:
            return None
        for marker in CALL_MARKERS:
            if stripped.endswith(marker):
                return start - (len(head) - len(stripped)) - len(marker)
        return None

    def _hold(self, pending: _Pending) -> None:
        if self.held is None:
            self.held = []
        self.held.append(pending)

    def _resolve(self, final: bool) -> None:
        """Settle pending JSON calls: calls at the end of an output with no envelope (and no
        native calls); content as soon as an envelope appears."""
        if self.held is None:
            return
        self.asm.text = self.text
        accept = final and self.envelopes == 0 and not self.native
        held, self.held = self.held, None
        for item in held:
            if not isinstance(item, _Pending):
                self._emit(item)
            elif accept:
                self.asm.add_calls(item.start, item.end, item.calls)
                for call in item.calls:
                    self._emit(self._call_event(call))
            else:
                self._content(item.start, item.end)

    # -- prose --------------------------------------------------------------------------------

    def _free_text(self, begin: int, end: int, final: bool, *, at_end: bool) -> None:
        """Release prose ``[begin, end)``; at the end of the available text, keep back what
        could still be the start of a call marker, or end-of-generation tokens that close the
        output (at the end, those are recorded apart from the content)."""
        if at_end:
            tokens = self._end_tokens(begin, end, final)
            if tokens < end and final:
                self._free_text(begin, tokens, final, at_end=False)
                self.asm.add_end_tokens(tokens, end)
                self.pos = end
                return
            end = tokens
        if at_end and not final:
            end = self._keep_marker_tail(begin, end)
        if end <= begin:
            self.pos = max(self.pos, begin)
            return
        self.depth = bracket_depth(self.text, begin, end, self.depth)
        self._content(begin, end)
        self.pos = end

    def _end_tokens(self, begin: int, end: int, final: bool) -> int:
        """Where a run of end-of-generation tokens (and blanks) that ends the text starts, if
        it starts before ``end`` (else ``end``; before the final chunk, a run that could still
        become one).
        Looks at most ``_END_RUN_WINDOW`` characters back."""
        start = max(begin, end - _END_RUN_WINDOW)
        for m in _TOKEN_START.finditer(self.text, start, end):
            run = _END_RUN.fullmatch(self.text, m.start(), partial=not final)
            if run is not None:
                return m.start()
        return end

    def _keep_marker_tail(self, begin: int, end: int) -> int:
        tail = self.text[max(begin, end - 80):end]
        stripped = tail.rstrip()
        if len(tail) - len(stripped) <= _MARKER_WS:
            for marker in CALL_MARKERS:
                if stripped.endswith(marker):
                    return end - (len(tail) - len(stripped)) - len(marker)
        if end == len(self.text):
            for marker in CALL_MARKERS:
                for k in range(len(marker) - 1, 0, -1):
                    if tail.endswith(marker[:k]):
                        return end - k
        return end

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
