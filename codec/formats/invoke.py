"""The ``<invoke name="NAME"><parameter name="K">V</parameter>…</invoke>`` family.

MiniMax-M2 (inside ``<minimax:tool_call>``), dots.llm (inside ``<dots_function_call>``) and,
with the ``｜DSML｜`` prefix on every tag, DeepSeek V3.2. A body holds one or more invokes;
parameter values are raw text (the codec converts them to the schema's types), except that
DSML's ``string="false"`` marks a JSON value. Errors are ``invalid_xml`` with ``position`` in
the body.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

import orjson
from toolcodec.errors import INVALID_XML, CodecError
from toolcodec.formats import FormatRead

_BLANK = re.compile(r"[ \t\r\n]*")
DSML = "\uff5cDSML\uff5c"


@lru_cache(maxsize=4)
def _patterns(prefix: str) -> tuple[re.Pattern[str], re.Pattern[str], str, str]:
    p = re.escape(prefix)
    invoke = re.compile(rf"<{p}invoke\s+name\s*=\s*[\"']?([^\"'\s>]+)[\"']?\s*>")
    param = re.compile(rf"<{p}parameter\s+name\s*=\s*[\"']?([^\"'\s>]+)[\"']?"
                       r"(?:\s+string\s*=\s*[\"']?(true|false)[\"']?)?\s*>")
    return invoke, param, f"</{prefix}invoke>", f"</{prefix}parameter>"


def read(body: str, *, closed: bool = True, prefix: str = "") -> FormatRead:
    """Read the invokes of one block; ``prefix`` is written before every tag name."""
    invoke, param, invoke_end, param_end = _patterns(prefix)
    calls: list[tuple[str, Any]] = []
    pos = _BLANK.match(body).end()
    while pos < len(body):
        m = invoke.match(body, pos)
        if m is None:
            return _fail(f'expected <{prefix}invoke name="…">, found {body[pos:pos + 20]!r}',
                         pos, body)
        arguments: dict[str, Any] = {}
        pos = _BLANK.match(body, m.end()).end()
        while not body.startswith(invoke_end, pos):
            if pos >= len(body):
                return _fail(f"{m.group(1)!r} is never closed by {invoke_end}", m.start(), body)
            p = param.match(body, pos)
            if p is None:
                return _fail(f"expected <{prefix}parameter name=\"…\"> or {invoke_end}", pos,
                             body)
            end = body.find(param_end, p.end())
            if end < 0:
                return _fail(f"the parameter {p.group(1)!r} is never closed by {param_end} "
                             "(the output may have been cut off)", p.start(), body)
            if p.group(1) in arguments:
                return _fail(f"the parameter {p.group(1)!r} is given twice", p.start(), body)
            arguments[p.group(1)] = _value(body[p.end():end], p.group(2))
            pos = _BLANK.match(body, end + len(param_end)).end()
        calls.append((m.group(1), arguments))
        pos = _BLANK.match(body, pos + len(invoke_end)).end()
    if not calls:
        return _fail("no invoke in the block", 0, body)
    return FormatRead(calls=calls, text_values=True)


def _value(text: str, string: str | None) -> Any:
    if string == "false":  # DSML: the value is JSON
        try:
            return orjson.loads(text)
        except orjson.JSONDecodeError:
            return text
    return text


def _fail(what: str, position: int, body: str) -> FormatRead:
    near = body[max(0, position - 20):position + 20]
    return FormatRead(errors=[CodecError(INVALID_XML, f"invoke call: {what}; near {near!r}",
                                         {"position": position})])
