"""MiniCPM-5: ``<function name="NAME"><param name="K">V</param>…</function>``, in prose.

The format has no wrapper token: a block opens at ``<function name="`` (or ``'``) and ends at
``</function>``, so its body is one call, opening tag included and closer left out. Values are
the text between the tags without the blanks around it (a ``<![CDATA[…]]>`` section is unwrapped
and kept exactly), typed by the schema. A body cut at the end keeps its call when it ends after
a complete parameter. Errors are ``invalid_xml`` with ``position`` in the body.
"""

from __future__ import annotations

import re

from toolcodec.formats import FormatRead
from toolcodec.results.errors import INVALID_XML, CodecError

_BLANK = re.compile(r"[ \t\r\n]*")
_OPEN = re.compile(r"<function\s+name\s*=\s*([\"'])([^\"'<>]*)\1\s*>")
# <param name="K"> (also <parameter name="K">, as Qwen writes it), closed by its own tag
_PARAM = re.compile(r"<(param|parameter)\s+name\s*=\s*([\"'])([^\"'<>]*)\2\s*>")
_CDATA, _CDATA_END = "<![CDATA[", "]]>"
_CUT = " (the output may have been cut off)"


def read(body: str, *, closed: bool = True) -> FormatRead:
    """Read the one call of a ``<function name=…>`` block."""
    m = _OPEN.match(body, _BLANK.match(body).end())
    if m is None or not m.group(2).strip():
        return _fail('expected <function name="NAME">', 0, body)
    name, arguments = m.group(2).strip(), {}
    pos = _BLANK.match(body, m.end()).end()
    while pos < len(body):
        p = _PARAM.match(body, pos)
        if p is None:
            return _fail('expected <param name="…"> or </function>', pos, body)
        key = p.group(3).strip()
        if not key:
            return _fail("a parameter has no name", pos, body)
        value = _value(body, p.end(), f"</{p.group(1)}>")
        if isinstance(value, str):
            return _fail(f"the parameter {key!r} {value}", pos, body)
        if key in arguments:
            return _fail(f"the parameter {key!r} is given twice", pos, body)
        arguments[key] = value[0]
        pos = _BLANK.match(body, value[1]).end()
    return FormatRead(calls=[(name, arguments)], text_values=True)


def _value(body: str, start: int, end_tag: str) -> tuple[str, int] | str:
    """The value that starts at ``start`` and the end of its ``end_tag``, or what is wrong."""
    at = _BLANK.match(body, start).end()
    if body.startswith(_CDATA, at):
        end = body.find(_CDATA_END, at + len(_CDATA))
        close = _BLANK.match(body, end + len(_CDATA_END)).end() if end >= 0 else -1
        if end >= 0 and body.startswith(end_tag, close):
            return body[at + len(_CDATA):end], close + len(end_tag)
        if end < 0:
            return "has a CDATA section never closed by ]]>" + _CUT
    close = body.find(end_tag, start)
    if close < 0:
        return f"is never closed by {end_tag}" + _CUT
    return body[start:close].strip(), close + len(end_tag)


def _fail(what: str, position: int, body: str) -> FormatRead:
    near = body[max(0, position - 20):position + 20]
    return FormatRead(errors=[CodecError(INVALID_XML, f"MiniCPM call: {what}; near {near!r}",
                                         {"position": position})])
