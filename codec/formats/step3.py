"""StepFun Step-3: inside ``<｜tool_calls_begin｜>``…``<｜tool_calls_end｜>`` (bars U+FF5C,
ASCII underscores), calls ``<｜tool_call_begin｜>function<｜tool_sep｜>INVOKE<｜tool_call_end｜>``
where INVOKE is ``<steptml:invoke name="NAME">…</steptml:invoke>`` holding
``<steptml:parameter name="K">V</steptml:parameter>`` elements.

Blanks are allowed between the parts; the ``function<｜tool_sep｜>`` head may be missing, and a
``<｜tool_sep｜>`` between two calls is skipped. The invokes are read by
``toolcodec.formats.invoke``;
values are raw text without the blanks around it, typed by the schema. When the output ends in
the last call right after a complete parameter, that call's invoke ends there. Errors are
``invalid_xml`` with ``position`` in the body.
"""

from __future__ import annotations

import re
from typing import Any

from toolcodec.formats import FormatRead, invoke
from toolcodec.results.errors import INVALID_XML, CodecError

BAR = "\uff5c"
CALL_BEGIN = f"<{BAR}tool_call_begin{BAR}>"
CALL_END = f"<{BAR}tool_call_end{BAR}>"
SEP = f"<{BAR}tool_sep{BAR}>"
PREFIX = "steptml:"
_BLANK = re.compile(r"[ \t\r\n]*")
_HEAD = re.compile(rf"[ \t\r\n]*(?:function[ \t\r\n]*)?{re.escape(SEP)}[ \t\r\n]*")
_INVOKE_OPEN = re.compile(rf"<{PREFIX}invoke\s+name\s*=\s*[\"']?[^\"'\s>]+[\"']?\s*>")
_PARAM_END = f"</{PREFIX}parameter>"
_INVOKE_END = f"</{PREFIX}invoke>"


def read(body: str, *, closed: bool = True) -> FormatRead:
    """Read the calls of one Step-3 tool-calls section (or of calls whose section token was
    lost)."""
    calls: list[tuple[str, Any]] = []
    pos = _BLANK.match(body).end()
    while pos < len(body):
        if not body.startswith(CALL_BEGIN, pos):
            return _fail(f"expected {CALL_BEGIN}, found {body[pos:pos + 20]!r}", pos, body)
        start = pos + len(CALL_BEGIN)
        end = body.find(CALL_END, start)
        stop = len(body) if end < 0 else end
        if body.find(CALL_BEGIN, start, stop) >= 0:
            return _fail("a call is not ended before the next one begins", pos, body)
        head = _HEAD.match(body, start, stop)
        inner = head.end() if head else start
        segment = body[inner:stop]
        if end < 0 and not closed:
            segment = _end_cut_invoke(segment)
        found = invoke.read(segment, closed=closed, prefix=PREFIX)
        if found.errors:
            return FormatRead(errors=[_moved(e, inner, len(body)) for e in found.errors])
        calls += [(name, {k: v.strip() if isinstance(v, str) else v for k, v in args.items()})
                  for name, args in found.calls]
        pos = _BLANK.match(body, stop + (len(CALL_END) if end >= 0 else 0)).end()
        if body.startswith(SEP, pos):
            pos = _BLANK.match(body, pos + len(SEP)).end()
    if not calls:
        return _fail("no call in the section", 0, body)
    return FormatRead(calls=calls, text_values=True)


def _end_cut_invoke(segment: str) -> str:
    """The last call's text, its invoke ended when the output stopped right after a complete
    parameter (or the invoke's opening tag)."""
    tail = segment.rstrip()
    if tail.endswith(_INVOKE_END):
        return segment
    opening = tail.rfind(f"<{PREFIX}invoke")
    if tail.endswith(_PARAM_END) or (opening >= 0 and _INVOKE_OPEN.fullmatch(tail, opening)):
        return segment + _INVOKE_END
    return segment


def _moved(error: CodecError, offset: int, size: int) -> CodecError:
    """An invoke error, its position counted in the body (never past its end)."""
    where = error.details.get("position")
    details = dict(error.details)
    if isinstance(where, int):
        details["position"] = min(offset + where, size)
    return CodecError(error.code, error.message.replace("invoke call:", "Step-3 call:", 1),
                      details)


def _fail(what: str, position: int, body: str) -> FormatRead:
    near = body[max(0, position - 20):position + 20]
    return FormatRead(errors=[CodecError(INVALID_XML, f"Step-3 call: {what}; near {near!r}",
                                         {"position": position})])
