"""The engine's reading of prose: text released as soon as it cannot begin a call's markup,
end-of-generation tokens that close the output, and calls written in prose (strict JSON, a
code fence around it, ``[KNOWN_TOOL(…)]``), which count only at the end, when the output
held no block.

A mixin of ``toolcodec.decoding.engine.Engine``: it reads and writes the engine's state.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import orjson
import regex  # partial matching: an end-of-generation token cut at the end of a chunk
from toolcodec.decoding.textjson import call_pairs
from toolcodec.formats import pythonic
from toolcodec.formats.open_block import OpenBlock
from toolcodec.formats.table import END_OF_GENERATION
from toolcodec.repair.normalize import replace_surrogates
from toolcodec.scanning.bracket_depth import bracket_depth

PROSE_JSON_FORMAT = "json"  # the format of a call written as JSON in prose
MAX_CANDIDATES = 32  # JSON candidates tried per stretch of prose between blocks
CALL_MARKERS = ("functools",)  # a word before JSON in prose that says "this is a call"
# Every proper head of a call marker: what the end of a chunk may hold of one.
_MARKER_HEADS = tuple({m[:k] for m in CALL_MARKERS for k in range(1, len(m))})
_MARKER_WS = 64
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
# Prose holding none of these holds no built-in opener, end-of-generation token, bracket or
# line break (where a bare call starts): see ``_quiet``.
_BREAK_CHARS = frozenset("<>[]{}`\r\n") | {t[0] for t in END_OF_GENERATION}


def _heads_pattern(heads: frozenset[str]) -> re.Pattern[str]:
    """Where one of *heads* (texts of one or two characters) is, or the first character of
    a two-character one ends the text: where a text with those heads may begin, whole or
    cut by the text's end."""
    singles = {h for h in heads if len(h) == 1}
    pairs = sorted({h for h in heads if len(h) == 2 and h[0] not in singles})
    alts = [re.escape(h) for h in pairs]
    if pairs:
        alts.append("[" + re.escape("".join(sorted({h[0] for h in pairs}))) + r"]\Z")
    if singles:
        alts.insert(0, "[" + re.escape("".join(sorted(singles))) + "]")
    return re.compile("|".join(alts) or "(?!)")


_MARKER_HEADS2 = frozenset(m[:2] for m in CALL_MARKERS)
_QUIET_BREAK = _heads_pattern(_BREAK_CHARS)
_MARKER_LOUD = _heads_pattern(_MARKER_HEADS2)  # where a call marker may end a text
_JSON_STRUCT = re.compile(r'["{}\[\]]')
# A whole JSON value where a candidate starts ends where its brackets close: read at C speed
# when the text is final (the stream's step-by-step scan stays linear over chunks).
_WHOLE_VALUE = json.JSONDecoder()
_STRING_STOP = {'"': re.compile(r'["\\]'), "'": re.compile(r"['\\]")}
_PY_STRUCT = re.compile(r'["\'{}\[\]]')


@lru_cache(maxsize=64)
def _loud_heads(heads: frozenset[str]) -> re.Pattern[str]:
    return _heads_pattern(_BREAK_CHARS | _MARKER_HEADS2 | heads)


def _loud(openers: Any) -> re.Pattern[str]:
    """Where markup may begin for *openers*: a quiet break character, or the first two
    characters of an opener (a tool's name, when the names are in the patterns) or of a call
    marker, or the first one at the text's end. Prose past the text's start without one
    holds no opener, whole or cut at its end (their prefilters' every branch starts with
    one: ``Patterns.heads``), no end token and no call marker."""
    shared = openers.shared
    return _loud_heads(openers.patterns.heads | (shared.heads if shared is not None
                                                 else frozenset()))


def marker_before(text: str, begin: int, start: int) -> int | None:
    """Where a call marker (``functools``, blanks after it) ends ``text[begin:start]`` and so
    leads the JSON candidate at *start*, if one does."""
    head = text[max(begin, start - 80):start]
    stripped = head.rstrip()
    if len(head) - len(stripped) > _MARKER_WS:
        return None
    for marker in CALL_MARKERS:
        if stripped.endswith(marker):
            return start - (len(head) - len(stripped)) - len(marker)
    return None


def whole_value_end(text: str, start: int) -> int | None:
    """Where the one whole JSON value at *start* of a final text ends (read at C speed), or
    None when there is none."""
    try:
        return _WHOLE_VALUE.raw_decode(text, start)[1]
    except (ValueError, RecursionError):
        return None


@dataclass(slots=True)
class _Pending:
    """A JSON call in prose, waiting for the end of the output to be confirmed."""

    start: int
    end: int
    calls: list[Any]


class ProseReader:
    """Prose and calls in prose, for ``Engine``."""

    def _quiet(self, begin: int) -> bool:
        """Release the prose not yet released, ``text[pos:]`` (the new ``text[begin:]`` and
        what was held before it), at once if nothing in it can begin markup: what reading
        it would release (most deltas of a stream), without the reading's searches. False:
        it must be read."""
        text, pos = self.text, self.pos
        if self.held is not None:
            return False
        openers = self.codec._openers
        loud = self.loud
        if loud is None:
            loud = self.loud = _loud(openers)
        if pos and loud.search(text, pos) is None:
            # No head of an opener, an end token or a call marker, whole or cut (so the
            # reading's searches from pos would find nothing): only a bare call's line is left.
            names = openers.names
            if names is not None and names.line_start(text, pos) >= 0:
                return False
            piece = text[pos:]
            self.events.append({"type": "content", "text": piece if piece.isascii()
                                else replace_surrogates(piece)[0]})
            self.pos = len(text)
            return True
        if pos != begin or _QUIET_BREAK.search(text, begin):
            return False  # what was held is read with the new text
        names, patterns = openers.names, openers.patterns
        if names is not None and names.line_start(text, begin) >= 0:
            return False  # a bare call may start on this line
        blocks_only = self.tries >= MAX_CANDIDATES
        if patterns.get(blocks_only)[1].search(text, begin) is not None:
            return False  # an opener's head (a registered family's may be letters only)
        cut = (patterns if names is None else openers.shared).cut
        if cut(text, begin, len(text) + 1, blocks_only) is not None:
            return False  # the end may be the head of an opener the next chunk completes
        if self._keep_marker_tail(begin, len(text)) != len(text):
            return False
        self._content(begin, len(text))
        self.pos = len(text)
        return True

    def _candidate(self, m: Any, final: bool) -> bool:
        start = m.start()
        lead = marker_before(self.text, self.pos, start)
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
        if final and cur.kind == "json" and i == cur.start:
            end = whole_value_end(text, i)
            if end is not None:  # else not one whole value: the scan decides
                return self._decide(cur, text[cur.start:end], end, final)
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
                fmt = "pythonic" if cur.kind == "pycall" else PROSE_JSON_FORMAT
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
            found = pythonic.read(source, limits=self.codec.limits)
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
        if _MARKER_LOUD.search(self.text, max(begin, end - 80), end) is None:
            return end  # what is kept back below starts with a marker's head (or its first
            # character, at the end)
        tail = self.text[max(begin, end - 80):end]
        stripped = tail.rstrip()
        if len(tail) - len(stripped) <= _MARKER_WS:
            for marker in CALL_MARKERS:
                if stripped.endswith(marker):
                    return end - (len(tail) - len(stripped)) - len(marker)
        if end == len(self.text) and tail.endswith(_MARKER_HEADS):  # one C call, mostly False
            for marker in CALL_MARKERS:
                for k in range(len(marker) - 1, 0, -1):
                    if tail.endswith(marker[:k]):
                        return end - k
        return end
