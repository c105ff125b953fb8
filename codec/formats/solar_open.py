"""Solar Open 2: one block per call, the tool's name on the opener's line, then its arguments
as key/value tokens::

    <|tool_call:start|>get_weather
    <|tool_arg:start|>city<|tool_arg:value|>Seoul<|tool_arg:end|>
    <|tool_call:end|>

Values are raw text, typed by the schema. A value whose ``<|tool_arg:end|>`` is missing ends
at the call's end (``xml.balance_tags``); its reasoning is ``<|think:start|>…<|think:end|>``.
"""

from __future__ import annotations

import re

from toolcodec.formats import FormatRead
from toolcodec.results.errors import INVALID_XML, CodecError

OPENER, CLOSER = "<|tool_call:start|>", "<|tool_call:end|>"
_ARG_START, _ARG_VALUE, _ARG_END = "<|tool_arg:start|>", "<|tool_arg:value|>", "<|tool_arg:end|>"
_NAME = re.compile(r"[ \t]*([A-Za-z_][\w.\-]{0,127})[ \t]*(?:\r?\n|\Z|(?=<\|tool_arg:start\|>))")
_BLANKS = re.compile(r"[ \t\r\n]*")
VALUE_CLOSE_ADDED = "xml.balance_tags"


def read(body: str, *, closed: bool = True) -> FormatRead:
    """Read the call of one ``<|tool_call:start|>`` block."""
    m = _NAME.match(body)
    if m is None:
        return _fail("expected the tool's name on the opener's line", 0)
    name, pos = m.group(1), m.end()
    arguments: dict[str, str] = {}
    repairs: list[str] = []
    while True:
        pos = _BLANKS.match(body, pos).end()
        if pos == len(body):
            return FormatRead(calls=[(name, arguments)], text_values=True, repairs=repairs)
        if not body.startswith(_ARG_START, pos):
            return _fail(f"expected {_ARG_START}, found {body[pos:pos + 16]!r}", pos)
        key_at = pos + len(_ARG_START)
        sep = body.find(_ARG_VALUE, key_at)
        if sep < 0 or _ARG_START in body[key_at:sep]:
            return _fail("an argument without <|tool_arg:value|>", pos)
        key = body[key_at:sep].strip()
        if key in arguments:
            return _fail(f"the key {key!r} is given twice", pos)
        value_at = sep + len(_ARG_VALUE)
        end = body.find(_ARG_END, value_at)
        if end < 0 or _ARG_START in body[value_at:end]:
            # the call's end closed the value (the model skipped <|tool_arg:end|>); not when
            # the output was cut, nor before another argument
            if not closed or _ARG_START in body[value_at:]:
                return _fail(f"the value of {key!r} is never closed", value_at)
            arguments[key] = body[value_at:].rstrip("\r\n")
            return FormatRead(calls=[(name, arguments)], text_values=True,
                              repairs=repairs + [VALUE_CLOSE_ADDED])
        arguments[key] = body[value_at:end]
        pos = end + len(_ARG_END)


def _fail(what: str, position: int) -> FormatRead:
    return FormatRead(errors=[CodecError(INVALID_XML, f"Solar Open call: {what}",
                                         {"position": position})])
