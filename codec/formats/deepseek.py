"""DeepSeek V3, V3.1 and V3.2 tool calls.

V3 and V3.1: inside ``<｜tool▁calls▁begin｜>``…``<｜tool▁calls▁end｜>``, calls
``<｜tool▁call▁begin｜>…<｜tool▁call▁end｜>`` holding either
``function<｜tool▁sep｜>NAME\\n```json\\n{…}\\n```​`` (V3) or ``NAME<｜tool▁sep｜>{…}`` (V3.1).
Tokens are also accepted with an ASCII ``|`` and ``_`` (some servers print them so). The JSON is
handed to the codec as text (it repairs it); errors are ``invalid_json`` with ``position`` in
the body. V3.2's DSML (``<｜DSML｜invoke name=…>``) is read by ``read_dsml``.
"""

from __future__ import annotations

import re

from toolcodec.formats import FormatRead, invoke, quoted
from toolcodec.results.errors import INVALID_JSON, CodecError


def _token(name: str) -> str:
    return "<[|\uff5c]" + name.replace("_", "[_\u2581]") + "[|\uff5c]>"


_CALL_BEGIN = re.compile(_token("tool_call_begin"))
_SEP = re.compile(_token("tool_sep"))
_CALL_TOKENS = tuple(f"<{bar}{name.replace('_', sep)}{bar}>" for bar in ("|", "\uff5c")
                     for name in ("tool_call_begin", "tool_call_end") for sep in ("_", "\u2581"))
_QUOTES = ('"',)
_BLANK = re.compile(r"[ \t\r\n]*")
_FENCE = re.compile(r"\A\s*```[ \t]*(?:json)?[ \t]*\r?\n?(.*?)(?:\r?\n)?[ \t]*```\s*\Z", re.S)


def read(body: str, *, closed: bool = True) -> FormatRead:
    """Read the calls of one DeepSeek V3/V3.1 tool-calls section."""
    calls, pos = [], _BLANK.match(body).end()
    while pos < len(body):
        begin = _CALL_BEGIN.match(body, pos)
        if begin is None:
            return _fail(f"expected <\uff5ctool\u2581call\u2581begin\uff5c>, found "
                         f"{body[pos:pos + 20]!r}", pos, body)
        # a token inside a JSON string is the string's text
        end = quoted.find(body, _CALL_TOKENS, _QUOTES, begin.end())
        if end is not None and _CALL_BEGIN.fullmatch(end.group()):
            return _fail("a call is not ended before the next one begins", pos, body)
        stop = len(body) if end is None else end.start()
        call = _call(body[begin.end():stop])
        if isinstance(call, str):
            return _fail(call, begin.start(), body)
        calls.append(call)
        pos = _BLANK.match(body, stop if end is None else end.end()).end()
    if not calls:
        return _fail("no call in the section", 0, body)
    return FormatRead(calls=calls)


def _call(inner: str) -> tuple[str, str] | str:
    sep = _SEP.search(inner)
    if sep is None:
        return "expected NAME<\uff5ctool\u2581sep\uff5c>ARGUMENTS"
    left, right = inner[:sep.start()].strip(), inner[sep.end():]
    if left == "function" or not left:  # V3: the name follows the separator, on its own line
        name, _, args = right.partition("\n")
        name = name.strip()
    else:
        name, args = left, right
    if not re.fullmatch(r"[A-Za-z_][\w.\-]*", name):
        return f"{name[:40]!r} is not a tool name"
    fenced = _FENCE.match(args)
    return name, (fenced.group(1) if fenced else args).strip()


def read_dsml(body: str, *, closed: bool = True) -> FormatRead:
    """Read the invokes of one DeepSeek V3.2 / V4 DSML block (``<｜DSML｜function_calls>``,
    ``<｜DSML｜tool_calls>``, ``<｜DSML｜ calls>``)."""
    return invoke.read(body, closed=closed, prefix=invoke.DSML_PATTERN)


def _fail(what: str, position: int, body: str) -> FormatRead:
    near = body[max(0, position - 20):position + 20]
    return FormatRead(errors=[CodecError(INVALID_JSON, f"DeepSeek call: {what}; near {near!r}",
                                         {"position": position})])
