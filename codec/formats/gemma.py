"""FunctionGemma and Gemma 4: ``call:NAME{key:VALUE,…}`` between the family's call tokens.

FunctionGemma writes ``<start_function_call>call:NAME{…}<end_function_call>`` and quotes strings
with ``<escape>``; Gemma 4 writes ``<|tool_call>call:NAME{…}<tool_call|>`` and quotes them with
``<|"|>``. A body quotes with whichever of the two tokens comes first in it. Keys are bare
(words with blanks between them allowed) or quoted; a value is a quoted string (kept as
written: there are no escapes), ``{…}``, ``[…]`` or a bare JSON literal (a number, ``true``,
``false``, ``null``); other bare text is read as a string (``gemma.bare_string``). A body cut
at the end keeps its call when it ends after a complete argument. Errors are
``invalid_json`` with ``position`` in the body.
"""

from __future__ import annotations

import re
from typing import Any

import orjson
from toolcodec.formats import FormatRead
from toolcodec.results.errors import INVALID_JSON, NESTING_TOO_DEEP, CodecError
from toolcodec.results.limits import DEFAULT_LIMITS

QUOTES = ("<escape>", '<|"|>')  # FunctionGemma's, Gemma 4's
BARE_STRING = "gemma.bare_string"
_BLANK = re.compile(r"[ \t\r\n]*")
_HEAD = re.compile(r"call[ \t]*:[ \t]*([A-Za-z_][\w.\-]*)[ \t\r\n]*\{")
# A bare key may hold blanks between its words (Gemma 4 writes `{city name:…}` for such a
# property); it ends at ':'.
_BARE_KEY = re.compile(r"[^\s:,{}\[\]<>]+(?:[ \t]+[^\s:,{}\[\]<>]+)*")
_BARE = re.compile(r"[^,{}\[\]<]*")
_LITERAL = re.compile(r"true|false|null|-?(?:0|[1-9]\d*)(?:\.\d+)?(?:[eE][+-]?\d+)?")
_CUT = " (the output may have been cut off)"


def read(body: str, *, closed: bool = True) -> FormatRead:
    """Read the ``call:NAME{…}`` calls of one block."""
    reader = _Reader(body, closed)
    calls: list[tuple[str, Any]] = []
    pos = _BLANK.match(body).end()
    try:
        while pos < len(body):
            head = _HEAD.match(body, pos)
            if head is None:
                raise _Stop("expected call:NAME{", pos)
            arguments, pos = reader.members(head.end(), 0)
            calls.append((head.group(1), arguments))
            pos = _BLANK.match(body, pos).end()
    except _Stop as stop:
        return _fail(stop.message, stop.position, body, stop.code)
    if not calls:
        return _fail("no call in the block", 0, body)
    return FormatRead(calls=calls, repairs=[BARE_STRING] if reader.bare else [])


def quote_of(body: str) -> str:
    """The string quote token a body uses: the first of ``QUOTES`` found in it."""
    first = min(((i, q) for q in QUOTES if (i := body.find(q)) >= 0), default=(0, QUOTES[0]))
    return first[1]


class _Stop(Exception):  # noqa: N818 - control flow inside the reader
    def __init__(self, message: str, position: int, code: str = INVALID_JSON) -> None:
        super().__init__(message)
        self.message, self.position, self.code = message, position, code


class _Reader:
    """One pass over a body; every method takes a position and returns (value, end)."""

    def __init__(self, body: str, closed: bool) -> None:
        self.body, self.closed, self.quote = body, closed, quote_of(body)
        self.bare = False  # a bare value was read as a string

    def blank(self, pos: int) -> int:
        return _BLANK.match(self.body, pos).end()

    def members(self, pos: int, depth: int) -> tuple[dict[str, Any], int]:
        """The members of an object whose ``{`` ends before ``pos``, to past its ``}``."""
        body, result = self.body, {}
        pos = self.blank(pos)
        while True:
            if pos >= len(body):
                if depth == 0 and not self.closed:
                    return result, pos  # cut after a complete argument
                raise _Stop("the arguments are not closed by }" + _CUT * (not self.closed), pos)
            if body[pos] == "}":
                return result, pos + 1
            key_at = pos
            key, pos = self.key(pos)
            pos = self.blank(pos)
            if not body.startswith(":", pos):
                raise _Stop(f"expected : after the key {key!r}", pos)
            value, pos = self.value(self.blank(pos + 1), depth)
            if key in result:
                raise _Stop(f"the key {key!r} is given twice", key_at)
            result[key] = value
            pos = self.blank(pos)
            if body.startswith(",", pos):
                pos = self.blank(pos + 1)
            elif pos < len(body) and body[pos] != "}":
                raise _Stop("expected , or } after a value", pos)

    def items(self, pos: int, depth: int) -> tuple[list[Any], int]:
        """The items of a list whose ``[`` ends before ``pos``, to past its ``]``."""
        body, result = self.body, []
        pos = self.blank(pos)
        while True:
            if pos >= len(body):
                raise _Stop("a list is not closed by ]" + _CUT, pos)
            if body[pos] == "]":
                return result, pos + 1
            value, pos = self.value(pos, depth)
            result.append(value)
            pos = self.blank(pos)
            if body.startswith(",", pos):
                pos = self.blank(pos + 1)
            elif pos < len(body) and body[pos] != "]":
                raise _Stop("expected , or ] after a value", pos)

    def key(self, pos: int) -> tuple[str, int]:
        if self.body.startswith(self.quote, pos):
            return self.string(pos)
        m = _BARE_KEY.match(self.body, pos)
        if m is None:
            raise _Stop("expected a key", pos)
        return m.group(), m.end()

    def value(self, pos: int, depth: int) -> tuple[Any, int]:
        body = self.body
        if pos >= len(body):
            raise _Stop("the text ends where a value should be" + _CUT, pos)
        if body.startswith(self.quote, pos):
            return self.string(pos)
        if body[pos] in "{[":
            if depth >= DEFAULT_LIMITS.max_depth:
                raise _Stop(f"values nest more than {DEFAULT_LIMITS.max_depth} levels deep",
                            pos, NESTING_TOO_DEEP)
            if body[pos] == "{":
                return self.members(pos + 1, depth + 1)
            return self.items(pos + 1, depth + 1)
        m = _BARE.match(body, pos)
        text = m.group().strip()
        if not text:
            raise _Stop("expected a value", pos)
        if m.end() >= len(body) and not self.closed:
            raise _Stop("the text ends inside a value" + _CUT, pos)
        if _LITERAL.fullmatch(text):
            try:
                return orjson.loads(text), m.end()
            except orjson.JSONDecodeError:  # a number no float holds: kept as written
                pass
        self.bare = True
        return text, m.end()

    def string(self, pos: int) -> tuple[str, int]:
        start = pos + len(self.quote)
        end = self.body.find(self.quote, start)
        if end < 0:
            raise _Stop(f"a string is never closed by {self.quote}" + _CUT, pos)
        return self.body[start:end], end + len(self.quote)


def _fail(what: str, position: int, body: str, code: str = INVALID_JSON) -> FormatRead:
    near = body[max(0, position - 20):position + 20]
    return FormatRead(errors=[CodecError(code, f"Gemma call: {what}; near {near!r}",
                                         {"position": position})])
