"""The engine's reading of reasoning blocks and answer channels (``toolcodec.formats.reasoning``
rows): their text is sent as it comes, and a block ends at its row's closer, or, in reasoning
the prompt opened, at a call written on a line of its own that no closer follows.

A mixin of ``toolcodec.decoding.engine.Engine``: it reads and writes the engine's state.
"""

from __future__ import annotations

from typing import Any

from toolcodec.formats.open_block import OpenBlock
from toolcodec.formats.reasoning import BY_OPENER
from toolcodec.repair.normalize import replace_surrogates
from toolcodec.scanning.envelopes import Block
from toolcodec.scanning.openers import BODY_WS


class ReasoningReader:
    """Reasoning blocks, for ``Engine``."""

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

    def _think_quiet(self, cur: OpenBlock) -> bool:
        """Send the new reasoning as ``_think`` would, without its searches, when no closer
        can start where the search for one resumes (most deltas of a reasoning block). False:
        it must be read (a closer's first character, a call candidate, a call opener that
        may end prompt-opened reasoning, or a block not read yet)."""
        row = cur.row
        if row is None or cur.lead is not None or cur.closer_at >= cur.scan or (
                row.call_openers and cur.body_start == cur.start):
            return False
        text, scan = self.text, cur.scan
        for first in row.closer_firsts:
            if text.find(first, scan) >= 0:
                return False
        cur.closer_at, cur.closer = -1, ""  # what the search would have found: none
        upto = cur.scan = max(scan, cur.body_start, len(text) - row.longest + 1)
        start = max(cur.body_start, cur.reasoned)
        if upto > start:  # _reasoning, inline: this runs for every delta of the block
            piece = text[start:upto]
            event = {"type": "reasoning" if row.kind == "reasoning" else "content",
                     "text": piece if piece.isascii() else replace_surrogates(piece)[0]}
            (self.events if self.held is None else self.held).append(event)
            cur.reasoned = upto
        return True

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
                        "text": replace_surrogates(self.text[start:upto])[0]})
            cur.reasoned = upto


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
