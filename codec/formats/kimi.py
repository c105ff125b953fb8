"""Kimi-K2: ``<|tool_call_begin|>functions.NAME:0<|tool_call_argument_begin|>{…}<|tool_call_end|>``.

The body (inside ``<|tool_calls_section_begin|>``…``<|tool_calls_section_end|>``, or a run of
calls whose section token was lost) is a sequence of calls, blanks allowed around every token.
The ``functions.`` prefix and the ``:INDEX`` suffix may be missing. The arguments are JSON text,
repaired by the codec; the last call's ``<|tool_call_end|>`` may be missing when the output
ends. Errors are ``invalid_json`` with ``position`` in the body.
"""

from __future__ import annotations

import re

from toolcodec.formats import FormatRead, quoted
from toolcodec.results.errors import INVALID_JSON, CodecError

CALL_BEGIN = "<|tool_call_begin|>"
CALL_END = "<|tool_call_end|>"
NOISE_DROPPED = "kimi.noise_dropped"
_HEADER = re.compile(r"[ \t\r\n]*(?:functions\.)?([A-Za-z_][\w.\-]*?)(?::\d+)?[ \t\r\n]*"
                     r"<\|tool_call_argument_begin\|>")
_BLANK = re.compile(r"[ \t\r\n]*")
_QUOTES = ('"',)


def read(body: str, *, closed: bool = True) -> FormatRead:
    """Read the calls of one Kimi-K2 tool-call section. Text before or between calls (outside
    them) is dropped and said (``kimi.noise_dropped``); a token inside a JSON string is
    text."""
    calls, repairs, pos = [], [], _BLANK.match(body).end()
    while pos < len(body):
        if not body.startswith(CALL_BEGIN, pos):
            nxt = body.find(CALL_BEGIN, pos)
            if nxt < 0:
                return _fail(f"expected {CALL_BEGIN}, found {body[pos:pos + 20]!r}", pos, body)
            repairs, pos = [NOISE_DROPPED], nxt
        header = _HEADER.match(body, pos + len(CALL_BEGIN))
        if header is None:
            return _fail("expected functions.NAME:INDEX then <|tool_call_argument_begin|>",
                         pos, body)
        end = quoted.find(body, (CALL_END, CALL_BEGIN), _QUOTES, header.end())
        if end is not None and end.group() == CALL_BEGIN:
            return _fail(f"a call is not ended by {CALL_END} before the next one", pos, body)
        stop = len(body) if end is None else end.start()
        calls.append((header.group(1), body[header.end():stop].strip()))
        pos = _BLANK.match(body, len(body) if end is None else end.end()).end()
    if not calls:
        return _fail("no call in the section", 0, body)
    return FormatRead(calls=calls, repairs=repairs)


def _fail(what: str, position: int, body: str) -> FormatRead:
    near = body[max(0, position - 20):position + 20]
    return FormatRead(errors=[CodecError(INVALID_JSON, f"Kimi-K2 call: {what}; near {near!r}",
                                         {"position": position})])
