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
from toolcodec.formats import FormatRead
from toolcodec.results.errors import INVALID_XML, CodecError

_BLANK = re.compile(r"[ \t\r\n]*")
# DeepSeek's DSML prefix: fullwidth bars as the model writes them, ASCII bars as some servers
# print them, and the blank after the bar seen in V4 outputs (<｜DSML｜ invoke …>).
DSML = "\uff5cDSML\uff5c"
DSML_PATTERN = r"[|\uff5c]DSML[|\uff5c] ?"


@lru_cache(maxsize=4)
def _patterns(prefix: str) -> tuple[re.Pattern[str], ...]:
    invoke = re.compile(rf"<{prefix}invoke\s+name\s*=\s*[\"']?([^\"'\s>/]+)[\"']?\s*(/?)>")
    param = re.compile(rf"<{prefix}parameter\s+name\s*=\s*[\"']?([^\"'\s>]+)[\"']?"
                       r"(?:\s+string\s*=\s*[\"']?(true|false)[\"']?)?\s*>")
    return invoke, param, re.compile(rf"</{prefix}invoke>"), re.compile(rf"</{prefix}parameter>")


def read(body: str, *, closed: bool = True, prefix: str = "") -> FormatRead:
    """Read the invokes of one block; ``prefix`` (a regex) is written before every tag name.
    A self-closing invoke (``<invoke name="x"/>``) is a call without arguments."""
    invoke, param, invoke_end, param_end = _patterns(prefix)
    shown = "｜DSML｜" if prefix else ""
    calls: list[tuple[str, Any]] = []
    pos = _BLANK.match(body).end()
    while pos < len(body):
        m = invoke.match(body, pos)
        if m is None:
            return _fail(f'expected <{shown}invoke name="…">, found {body[pos:pos + 20]!r}',
                         pos, body)
        arguments: dict[str, Any] = {}
        pos = _BLANK.match(body, m.end()).end()
        while not m.group(2) and (end_tag := invoke_end.match(body, pos)) is None:
            if pos >= len(body):
                return _fail(f"{m.group(1)!r} is never closed by </{shown}invoke>", m.start(),
                             body)
            p = param.match(body, pos)
            if p is None:
                return _fail(f"expected <{shown}parameter name=\"…\"> or </{shown}invoke>",
                             pos, body)
            end = param_end.search(body, p.end())
            if end is None:
                return _fail(f"the parameter {p.group(1)!r} is never closed by "
                             f"</{shown}parameter> (the output may have been cut off)",
                             p.start(), body)
            if p.group(1) in arguments:
                return _fail(f"the parameter {p.group(1)!r} is given twice", p.start(), body)
            arguments[p.group(1)] = _value(body[p.end():end.start()], p.group(2))
            pos = _BLANK.match(body, end.end()).end()
        calls.append((m.group(1), arguments))
        if not m.group(2):
            pos = _BLANK.match(body, end_tag.end()).end()
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
