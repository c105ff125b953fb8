"""How a marker format's block ends (``toolcodec.formats.table.MarkerFormat``): at one of its end
tokens outside the body's strings, or, for an open-ended format (no end token), where its last
value's brackets balance and no further call follows.

After a value of an open-ended format another call may follow (a value, ``;``/``,``, or
Mistral's ``NAME[ARGS]{…}``), or an end-of-generation token that belongs to the block.
"""

from __future__ import annotations

import re
from typing import Any

import regex  # partial matching: a token cut at the end of a chunk
from toolcodec.formats import quoted
from toolcodec.formats.open_block import OpenBlock
from toolcodec.formats.table import END_OF_GENERATION, MarkerFormat
from toolcodec.scanning.envelopes import Block

_MORE_CALLS = regex.compile(r"[ \t\r\n,;]*(?:[\[{]|[A-Za-z_][\w.\-]{0,63}[ \t]*"
                            r"(?:\[CALL_ID\][ \t]*[\w\-]{0,64}[ \t]*)?(?:\[ARGS\])?[ \t]*[\[{])")
# Mistral's tokens between a call's name and its value: not a value's brackets.
_MISTRAL_TOKEN = regex.compile(r"\[(?:ARGS|CALL_ID)\]")
_END_TOKEN = regex.compile(r"[ \t\r\n]*(?:" + "|".join(
    regex.escape(t) for t in sorted(END_OF_GENERATION, key=len, reverse=True)) + ")")
_STRING_STOP = {'"': re.compile(r'["\\]'), "'": re.compile(r"['\\]")}
_PY_STRUCT = re.compile(r'["\'{}\[\]]')


def end_pattern(fmt: MarkerFormat) -> Any:
    """What ends a block of ``fmt``: a closer, or (``next_opener_ends``) its next opener."""
    ends = fmt.closers + (fmt.openers if fmt.next_opener_ends else ())
    return re.compile("|".join(re.escape(t) for t in sorted(ends, key=len, reverse=True))
                      or r"(?!)")


def marker_end(text: str, cur: OpenBlock, final: bool,
               codec: Any) -> tuple[int, int, bool] | None:
    """The end rule of a marker block (``cur.tag`` is its opener token)."""
    fmt = codec._openers.markers[cur.tag]
    if fmt.end is not None:  # the family's own end rule
        return fmt.end(text, cur, final, codec)
    if fmt.quotes and not fmt.open_ended:
        return _quoted_end(text, cur, fmt, final)
    ends = codec._openers.ends[cur.tag]
    m = ends.search(text, cur.scan)
    if fmt.open_ended:  # no end token: the block ends where its last call's value does
        if cur.vscan < 0:
            cur.vscan = cur.scan
        while True:
            end = _values_end(text, cur, len(text) if m is None else m.start(), final)
            if end == -1:
                return None
            if end is not None:
                return end, end, True
            if m is None or not (fmt.quotes and cur.quote):
                break
            # the token sits inside a value's string: text, not the next call
            cur.scan = m.end()
            m = ends.search(text, cur.scan)
        cur.cut = final and m is None
    if m is not None:
        closer = m.group() in fmt.closers
        return (m.end() if closer else m.start()), m.start(), True
    if final:
        return len(text), len(text), fmt.open_ended
    longest = max(map(len, fmt.closers + fmt.openers))
    cur.scan = max(cur.scan, len(text) - longest + 1)
    return None


def marker_cut(text: str, cur: OpenBlock, block: Block, codec: Any) -> bool:
    """Whether the end of the text came before the block's end (open-ended: inside its
    values)."""
    if codec._openers.markers[cur.tag].open_ended:
        return cur.cut
    return not block.closed and block.end == len(text)


def calls_end(text: str, block: Block, codec: Any) -> int | None:
    """Just past the last per-call end token (``MarkerFormat.call_ends``) of a cut section:
    the calls before it are complete (None: none)."""
    fmt = codec._openers.markers.get(block.tag)
    if fmt is None or not fmt.call_ends:
        return None
    found = [(at, token) for token in fmt.call_ends
             if (at := text.rfind(token, block.body_start, block.end)) >= 0]
    if not found:
        return None
    at, token = max(found)
    return at + len(token)


def _quoted_end(text: str, cur: OpenBlock, fmt: MarkerFormat,
                final: bool) -> tuple[int, int, bool] | None:
    """The first end token outside the body's strings (``MarkerFormat.quotes``): a value that
    holds the format's own markers stays the value's text. A string still open at the end of
    the output was a stray quote: the first end token after it counts."""
    ends = fmt.closers + (fmt.openers if fmt.next_opener_ends else ())
    pattern = quoted.scanner(ends, fmt.quotes)
    while True:
        if cur.quote:
            at = quoted.string_end(text, cur.quote, cur.scan)
            if at < 0 and final:
                m = quoted.scanner(ends, ()).search(text, cur.vscan)
                cur.quote = ""
                if m is None:
                    return len(text), len(text), False
                closer = m.group() in fmt.closers
                return (m.end() if closer else m.start()), m.start(), True
            if at < 0:  # the string goes on past the text so far
                cur.scan = max(cur.scan, len(text) - len(cur.quote) + 1)
                return None
            cur.quote, cur.scan = "", at
        m = pattern.search(text, cur.scan)
        if m is None:
            if final:
                return len(text), len(text), False
            longest = max(map(len, ends + fmt.quotes))
            cur.scan = max(cur.scan, len(text) - longest + 1)
            return None
        if m.group() in fmt.quotes and m.group() not in ends:
            cur.quote, cur.scan, cur.vscan = m.group(), m.end(), m.end()
            continue
        closer = m.group() in fmt.closers
        return (m.end() if closer else m.start()), m.start(), True


def _values_end(text: str, cur: OpenBlock, stop: int, final: bool) -> int | None:
    """Scan brackets and strings up to ``stop``: where the values end and no other call
    follows (-1: not known yet; None: not before ``stop``)."""
    i = cur.vscan
    if cur.value_ended:  # decided once more text (or the end) has come
        cur.value_ended = False
        after = _after_values(text, i, final)
        if after is not None:
            cur.value_ended = after == -1
            return after
    while True:
        m = (_STRING_STOP[cur.quote] if cur.quote else _PY_STRUCT).search(text, i, stop)
        if m is None:
            cur.vscan = stop
            return None
        ch, i = m.group(), m.end()
        if cur.quote:
            if ch != "\\":
                cur.quote = ""
            elif i >= stop and not final and stop == len(text):
                cur.vscan = m.start()
                return -1
            else:
                i += 1
            continue
        if ch in "\"'":
            cur.quote = ch
        elif ch == "[" and cur.depth == 0 and (token := _MISTRAL_TOKEN.match(
                text, m.start(), stop, partial=not final and stop == len(text))):
            if token.partial:  # `[AR` at the end of the text so far: wait for the rest
                cur.vscan = m.start()
                return -1
            i = token.end()  # [ARGS], [CALL_ID] are between values, not a value
        elif ch in "{[":
            cur.depth += 1
        else:
            cur.depth -= 1
            if cur.depth <= 0:
                cur.depth = 0
                after = _after_values(text, i, final)
                if after is not None:
                    cur.vscan, cur.value_ended = i, after == -1
                    return after


def _after_values(text: str, at: int, final: bool) -> int | None:
    """At the end of a value: None when another call follows, -1 when that is not known yet,
    else where the block ends (past an end-of-generation token)."""
    window = text[at:at + 96]
    for pattern in (_END_TOKEN, _MORE_CALLS):
        m = pattern.match(window, partial=not final)
        if m is not None and m.partial and at + len(window) == len(text):
            return -1
        if m is not None and not m.partial:
            return at + m.end() if pattern is _END_TOKEN else None
    return at
