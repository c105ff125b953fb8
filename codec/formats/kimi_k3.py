"""Kimi K3: typed arguments in tagged sections.

Every section is ``<|open|>NAME attr="v"…<|sep|>`` … ``<|close|>NAME<|sep|>``. The calls sit in
``<|open|>tools<|sep|>`` … ``<|close|>tools<|sep|>`` (the engine hands over what is between)::

    <|open|>call tool="NAME" index="0"<|sep|>
      <|open|>argument key="K" type="string"<|sep|>text<|close|>argument<|sep|>
      <|open|>argument key="N" type="integer"<|sep|>3<|close|>argument<|sep|>
    <|close|>call<|sep|>

A ``string`` argument is its text as written; any other type is JSON (text that does not parse
is kept as text, and the schema decides). Attribute values may be quoted or bare, with XML's
entities (``&quot;``, ``&amp;``, …). The reasoning and answer sections around the calls
(``think``, ``response``, ``message``) are rows of ``toolcodec.formats.reasoning``. Errors are
``invalid_xml`` with ``position`` in the body.
"""

from __future__ import annotations

import html
import re
from typing import Any

import orjson
from toolcodec.formats import FormatRead
from toolcodec.results.errors import INVALID_XML, CodecError

OPEN, SEP, CLOSE = "<|open|>", "<|sep|>", "<|close|>"
_BLANK = re.compile(r"[ \t\r\n]*")
_ATTR = re.compile(r"[ \t]+([A-Za-z_][\w\-]*)[ \t]*=[ \t]*(?:\"([^\"]*)\"|'([^']*)'|([^\s\"'<]+))")
_NAME = re.compile(r"[A-Za-z_][\w\-]*")
_CUT = " (the output may have been cut off)"


def read(body: str, *, closed: bool = True) -> FormatRead:
    """Read the calls of one ``tools`` section."""
    calls: list[tuple[str, Any]] = []
    pos = _BLANK.match(body).end()
    while pos < len(body):
        tag = _open_tag(body, pos)
        if isinstance(tag, str) or tag[0] != "call":
            return _fail(tag if isinstance(tag, str) else
                         f"expected {OPEN}call tool=\"…\"{SEP}, found {body[pos:pos + 30]!r}",
                         pos, body)
        _, attrs, pos = tag
        name = attrs.get("tool", "")
        if not _NAME.fullmatch(name.removeprefix("functions.")):
            return _fail(f"the call names no tool ({name[:40]!r})", pos, body)
        arguments: dict[str, Any] = {}
        while True:
            pos = _BLANK.match(body, pos).end()
            if body.startswith(f"{CLOSE}call{SEP}", pos):
                pos += len(f"{CLOSE}call{SEP}")
                break
            if pos >= len(body):
                if closed:
                    return _fail(f"the call {name!r} is never closed" + _CUT, pos, body)
                break  # cut at the end of the output after a complete argument
            arg = _open_tag(body, pos)
            if isinstance(arg, str) or arg[0] != "argument" or "key" not in arg[1]:
                return _fail(arg if isinstance(arg, str) else
                             f"expected {OPEN}argument key=\"…\"{SEP} or {CLOSE}call{SEP}",
                             pos, body)
            _, a, start = arg
            end = body.find(f"{CLOSE}argument{SEP}", start)
            if end < 0:
                return _fail(f"the argument {a['key']!r} is never closed" + _CUT, pos, body)
            if a["key"] in arguments:
                return _fail(f"the argument {a['key']!r} is given twice", pos, body)
            arguments[a["key"]] = _value(body[start:end], a.get("type", "string"))
            pos = end + len(f"{CLOSE}argument{SEP}")
        calls.append((name.removeprefix("functions."), arguments))
        pos = _BLANK.match(body, pos).end()
    if not calls:
        return _fail("no call in the tools section", 0, body)
    return FormatRead(calls=calls, text_values=True)


def _open_tag(body: str, pos: int) -> tuple[str, dict[str, str], int] | str:
    """``<|open|>NAME attrs<|sep|>`` at ``pos``: its name, attributes and end."""
    if not body.startswith(OPEN, pos):
        return f"expected {OPEN}, found {body[pos:pos + 30]!r}"
    name = _NAME.match(body, pos + len(OPEN))
    if name is None:
        return f"expected a section name after {OPEN}"
    attrs, at = {}, name.end()
    while (m := _ATTR.match(body, at)) is not None:
        value = next(v for v in m.group(2, 3, 4) if v is not None)
        attrs[m.group(1)] = html.unescape(value)
        at = m.end()
    at = _BLANK.match(body, at).end()
    if not body.startswith(SEP, at):
        return f"the {name.group()!r} tag is not ended by {SEP}" + _CUT * (at >= len(body))
    return name.group(), attrs, at + len(SEP)


def _value(text: str, kind: str) -> Any:
    if kind == "string":
        return text
    try:
        return orjson.loads(text)
    except orjson.JSONDecodeError:
        return text


def _fail(what: str, position: int, body: str) -> FormatRead:
    near = body[max(0, position - 20):position + 20]
    return FormatRead(errors=[CodecError(INVALID_XML, f"Kimi K3 call: {what}; near {near!r}",
                                         {"position": position})])
