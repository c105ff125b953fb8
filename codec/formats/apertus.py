"""Apertus (swiss-ai): ``<|tools_prefix|>[{"NAME": {…}}, {"NAME": {…}}]<|tools_suffix|>``.

The body is a JSON list of one-key objects: the key is the tool's name, its value the call's
arguments (one such object without the list is read too). Each arguments object ends where its
brackets balance outside strings and is handed to the codec as JSON text, which it repairs: in
a list cut at the end of the output, the calls before the cut are whole and the cut one is
completed by that repair (and says so). Errors are ``invalid_json`` with ``position`` in the
body.
"""

from __future__ import annotations

import re

import orjson
from toolcodec.formats import FormatRead
from toolcodec.formats.mistral import json_end
from toolcodec.results.errors import INVALID_JSON, CodecError

_BLANK = re.compile(r"[ \t\r\n]*")
_KEY = re.compile(r'"((?:[^"\\]|\\.)*)"[ \t\r\n]*:[ \t\r\n]*')


def read(body: str, *, closed: bool = True) -> FormatRead:
    """Read the calls of one ``<|tools_prefix|>`` block."""
    pos = _BLANK.match(body).end()
    listed = body.startswith("[", pos)
    if listed:
        pos = _BLANK.match(body, pos + 1).end()
    calls: list[tuple[str, str]] = []
    while pos < len(body):
        if listed and body[pos] == "]":
            pos = _BLANK.match(body, pos + 1).end()
            if pos < len(body):
                return _fail("text after the list of calls", pos, body)
            break
        if calls and not listed:
            return _fail("text after the call", pos, body)
        if body[pos] != "{":
            return _fail('expected {"NAME": {…}}', pos, body)
        call = _call(body, pos)
        if isinstance(call, FormatRead):
            return call
        name, arguments, pos = call
        calls.append((name, arguments))
        if body.startswith(",", pos) and listed:
            pos = _BLANK.match(body, pos + 1).end()
        elif listed and pos < len(body) and body[pos] != "]":
            return _fail("expected , or ] after a call", pos, body)
    if not calls:
        return _fail("no call in the block", 0, body)
    return FormatRead(calls=calls)


def _call(body: str, start: int) -> tuple[str, str, int] | FormatRead:
    """One ``{"NAME": {…}}`` at ``start``: the name, the arguments' text and where it ends."""
    key = _KEY.match(body, _BLANK.match(body, start + 1).end())
    if key is None:
        return _fail('expected "NAME": after {', start, body)
    try:
        name = orjson.loads(f'"{key.group(1)}"')
    except orjson.JSONDecodeError:
        return _fail("the tool's name is not a valid JSON string", key.start(), body)
    if not body.startswith("{", key.end()):
        what = "are cut off" if key.end() >= len(body) else "are not a JSON object"
        return _fail(f"the arguments of {name!r} {what}", key.end(), body)
    end = json_end(body, key.end())
    arguments = body[key.end():end]
    pos = _BLANK.match(body, end).end()
    if pos < len(body):
        if body[pos] != "}":
            what = ("an object holds more than one call" if body[pos] == ","
                    else f"expected }} after the arguments of {name!r}")
            return _fail(what, pos, body)
        pos = _BLANK.match(body, pos + 1).end()
    return name, arguments, pos


def _fail(what: str, position: int, body: str) -> FormatRead:
    near = body[max(0, position - 20):position + 20]
    return FormatRead(errors=[CodecError(INVALID_JSON, f"Apertus call: {what}; near {near!r}",
                                         {"position": position})])
