"""Mistral's named calls after ``[TOOL_CALLS]``: ``NAME[ARGS]{…}``, ``NAME[CALL_ID]id[ARGS]{…}``
(Magistral, Devstral) and ``NAME{…}``, one or several in a row.

The JSON list form (``[TOOL_CALLS][{"name": …, "arguments": …}]``) is JSON and goes through the
codec's JSON path; this reads the named forms. Each call's JSON ends where its brackets balance
(strings skipped), so several calls may follow each other with no separator. The JSON is handed
to the codec as text (it repairs it, so a call cut off at the end of the output is completed and
says so). Errors are ``invalid_json`` with ``position`` in the body.
"""

from __future__ import annotations

import re

from toolcodec.formats import FormatRead
from toolcodec.results.errors import INVALID_JSON, CodecError

_HEAD = re.compile(r"[ \t\r\n]*([A-Za-z_][\w.\-]*)[ \t]*(?:\[CALL_ID\][ \t]*[\w\-]*[ \t]*)?"
                   r"(?:\[ARGS\])?[ \t\r\n]*(?=[{\[])")
_STRUCT = re.compile(r'["{}\[\]\\]')
_BLANK = re.compile(r"[ \t\r\n,;]*")


def read(body: str, *, closed: bool = True) -> FormatRead:
    """Read the named calls that follow one ``[TOOL_CALLS]``."""
    calls, pos = [], 0
    while True:
        pos = _BLANK.match(body, pos).end()
        if pos >= len(body):
            break
        head = _HEAD.match(body, pos)
        if head is None:
            return _fail("expected NAME[ARGS]{…} or NAME{…}", pos, body)
        end = json_end(body, head.end())
        calls.append((head.group(1), body[head.end():end]))
        pos = end
    if not calls:
        return _fail("no call after [TOOL_CALLS]", 0, body)
    return FormatRead(calls=calls)


def json_end(text: str, start: int) -> int:
    """Where the JSON value at ``start`` ends: its brackets balance outside strings (or the
    text ends first)."""
    depth, in_string, pos = 0, False, start
    while (m := _STRUCT.search(text, pos)) is not None:
        ch, pos = m.group(), m.end()
        if ch == "\\":
            pos += in_string
        elif ch == '"':
            in_string = not in_string
        elif in_string:
            continue
        elif ch in "{[":
            depth += 1
        else:
            depth -= 1
            if depth <= 0:
                return pos
    return len(text)


def _fail(what: str, position: int, body: str) -> FormatRead:
    near = body[max(0, position - 20):position + 20]
    return FormatRead(errors=[CodecError(INVALID_JSON, f"Mistral call: {what}; near {near!r}",
                                         {"position": position})])
