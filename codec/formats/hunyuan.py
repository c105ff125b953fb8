"""Hunyuan HY3 (Hy3-preview) and HY4: ``<tool_calls>`` around one ``<tool_call>`` per call,
each the tool's name, ``<tool_sep>`` (HY3 only), then GLM's key/value pairs::

    <tool_calls>
    <tool_call>get_weather<tool_sep>
    <arg_key>city</arg_key>
    <arg_value>Beijing</arg_value>
    </tool_call>
    </tool_calls>

The engine opens the block at ``<tool_calls>`` (the ``tool_calls`` format, whose other body is
Hunyuan A13B's JSON list) and ends it at ``</tool_calls>``; this reads its body. Values are
raw text, typed by the schema, as GLM's (``toolcodec.formats.glm``).

Released checkpoints write every structural token with a suffix after a colon: Hy3 with
``:opensource`` (``<tool_calls:opensource>``, ``<tool_call:opensource>``,
``<tool_sep:opensource>``, ``<arg_key:opensource>``, ``<think:opensource>``…), HY4 with one
of its own per checkpoint (``<tool_calls:6124c78e>``). Such a block opens at
``<tool_calls:`` (``SUFFIXED_OPENER``): the suffix is whatever comes before the token's
``>``, the block ends at ``</tool_calls:SUFFIX>`` (``suffixed_end``), and its body is read
as above with the same suffix on every token (``read_suffixed``). Inside it, a token with
another suffix, or none, is the value's text.
"""

from __future__ import annotations

import re

from toolcodec.formats import FormatRead, glm
from toolcodec.formats.open_block import OpenBlock, find_closer
from toolcodec.results.errors import INVALID_XML, CodecError

_BLANKS = re.compile(r"[ \t\r\n]*")
_CALL = re.compile(r"[ \t\r\n]*<tool_call>(.*?)(?:</tool_call>|\Z)", re.S)
_SEP = "<tool_sep>"
# A body of this shape (the engine asks, before the block has ended): the name, then HY3's
# <tool_sep>, or HY4's first <arg_key> or the call's end
HEAD = re.compile(r"[ \t\r\n]*<tool_call>[ \t\r\n]*[A-Za-z_][\w.\-]{0,127}[ \t]*"
                  r"(?:<tool_sep>|[ \t\r\n]{0,16}<arg_key>|[ \t\r\n]{0,16}</tool_call>)")


SUFFIXED_OPENER = "<tool_calls:"
_SUFFIX = r"[^\s<>|:{}\[\]\"]{1,64}"  # a checkpoint's suffix, after the colon
_SUFFIX_END = re.compile(rf"({_SUFFIX})>")
# What follows "<tool_calls:" for it to open a block: the suffix, then the first call's token
# with the same suffix and a tool's name (read before the block has ended)
SUFFIXED_HEAD = re.compile(rf"({_SUFFIX})>[ \t\r\n]{{0,16}}<tool_call:\1>[ \t\r\n]*"
                           r"[A-Za-z_][\w.\-]{0,127}")
# The tokens a suffixed block's body holds, spelled without their suffix for the reader
_TOKENS = ("tool_call", "tool_sep", "arg_key", "arg_value")
_PLAIN = re.compile("</?(?:" + "|".join(_TOKENS) + ")>")


def suffixed_end(text: str, cur: OpenBlock, final: bool,
                 codec: object = None) -> tuple[int, int, bool] | None:
    """The end rule of a ``<tool_calls:SUFFIX>`` block: ``</tool_calls:SUFFIX>``. (Its opener
    passed the ``SUFFIXED_HEAD`` check, unless a JSON bracket followed it: then no closer is
    known, the block runs to the end and its reader says what it could not read.)"""
    m = _SUFFIX_END.match(text, cur.body_start)
    closer = f"</tool_calls:{m.group(1)}>" if m else "</tool_calls:>"
    return find_closer(text, cur, final, closer)


def read_suffixed(body: str, *, closed: bool = True) -> FormatRead:
    """Read the calls of a ``<tool_calls:SUFFIX>`` block; ``body`` starts with ``SUFFIX>``."""
    m = _SUFFIX_END.match(body)
    if m is None:
        return _fail("expected the token's suffix and '>' after <tool_calls:", 0)
    suffix = m.group(1)
    mixed = _PLAIN.search(body, m.end())
    if mixed is not None:  # then which tokens were markup is not written: not guessed
        return _fail(f"{mixed.group()!r} without the block's suffix {suffix!r}", mixed.start())
    plain, removed = _unsuffixed(body, m.end(), suffix)
    found = read(plain, closed=closed)
    found.errors = [_shifted(e, removed) for e in found.errors]
    # a token kept in a value (a value closed by its call's end) is spelled as written
    spelled = re.compile("<(/?(?:" + "|".join(_TOKENS) + "))>")
    for _, arguments in found.calls:
        for key, value in arguments.items():
            if isinstance(value, str) and "<" in value:
                arguments[key] = spelled.sub(rf"<\1:{re.escape(suffix)}>", value)
    return found


def _unsuffixed(body: str, start: int, suffix: str) -> tuple[str, list[tuple[int, int]]]:
    """``body[start:]`` with each of its tokens' suffix taken out, and where each cut was
    (``(position in the new text, characters removed so far)``), to place errors."""
    spelled = re.compile("<(/?(?:" + "|".join(_TOKENS) + ")):" + re.escape(suffix) + ">")
    parts, removed, at, cut = [], [(0, start)], start, start
    for m in spelled.finditer(body, start):
        parts.append(body[at:m.start()] + f"<{m.group(1)}>")
        cut += len(suffix) + 1
        at = m.end()
        removed.append((sum(map(len, parts)), cut))
    parts.append(body[at:])
    return "".join(parts), removed


def _shifted(error: CodecError, removed: list[tuple[int, int]]) -> CodecError:
    """An error of the unsuffixed body, placed in the suffixed one."""
    where = error.details.get("position")
    if not isinstance(where, int):
        return error
    shift = max(n for at, n in removed if at <= where)
    return CodecError(error.code, error.message, {**error.details, "position": where + shift})


def read(body: str, *, closed: bool = True) -> FormatRead:
    """Read the calls of a ``<tool_calls>`` block written the HY3 way."""
    found = FormatRead(text_values=True)
    pos = 0
    while _BLANKS.match(body, pos).end() < len(body):
        m = _CALL.match(body, pos)
        if m is None:
            return _fail(f"expected <tool_call>, found {body[pos:pos + 12]!r}", pos)
        inner, at = m.group(1), m.start(1)
        sep = inner.find(_SEP)  # HY3 writes it after the name; HY4 does not
        call_closed = closed or m.group().endswith("</tool_call>")
        one = glm.read(inner if sep < 0 else inner[:sep] + "\n" + inner[sep + len(_SEP):],
                       closed=call_closed)
        if one.errors:
            found.errors = [_moved(e, at, sep) for e in one.errors]
            found.calls = []
            return found
        found.calls += one.calls
        found.repairs += [r for r in one.repairs if r not in found.repairs]
        pos = m.end()
    if not found.calls:
        return _fail("the block holds no <tool_call>", 0)
    return found


def _moved(error: CodecError, at: int, sep: int) -> CodecError:
    """An error of the inner GLM read, placed in the block's body (``<tool_sep>``, if any,
    was one character there)."""
    where = error.details.get("position")
    if not isinstance(where, int):
        return error
    where = at + where + (len(_SEP) - 1 if 0 <= sep < where else 0)
    return CodecError(error.code, error.message, {**error.details, "position": where})


def _fail(what: str, position: int) -> FormatRead:
    return FormatRead(errors=[CodecError(INVALID_XML, f"Hunyuan call: {what}",
                                         {"position": position})])
