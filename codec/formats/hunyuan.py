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
"""

from __future__ import annotations

import re

from toolcodec.formats import FormatRead, glm
from toolcodec.results.errors import INVALID_XML, CodecError

_BLANKS = re.compile(r"[ \t\r\n]*")
_CALL = re.compile(r"[ \t\r\n]*<tool_call>(.*?)(?:</tool_call>|\Z)", re.S)
_SEP = "<tool_sep>"
# A body of this shape (the engine asks, before the block has ended): the name, then HY3's
# <tool_sep>, or HY4's first <arg_key> or the call's end
HEAD = re.compile(r"[ \t\r\n]*<tool_call>[ \t\r\n]*[A-Za-z_][\w.\-]{0,127}[ \t]*"
                  r"(?:<tool_sep>|[ \t\r\n]{0,16}<arg_key>|[ \t\r\n]{0,16}</tool_call>)")


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
