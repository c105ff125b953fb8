"""K2 Horizon (IFM): ``<ifm|tool_calls>`` around one ``<ifm|tool_call>`` per call, written as
XML-like pairs (the template's default), with types, or as JSON::

    <ifm|tool_calls><ifm|tool_call>lookup<ifm|arg_key>query</ifm|arg_key>
    <ifm|arg_value>123</ifm|arg_value></ifm|tool_call>
    <ifm|tool_call>{"name": "ping", "arguments": {}}</ifm|tool_call></ifm|tool_calls>

Pair values are raw text typed by the schema (a written ``<ifm|arg_type>`` says no more than
the schema does); JSON calls are JSON text the codec repairs and validates.
"""

from __future__ import annotations

import re

import orjson
from toolcodec.formats import FormatRead, glm
from toolcodec.results.errors import INVALID_JSON, INVALID_XML, CodecError

OPENER, CLOSER = "<ifm|tool_calls>", "</ifm|tool_calls>"
_BLANKS = re.compile(r"[ \t\r\n]*")
_CALL = re.compile(r"[ \t\r\n]*<ifm\|tool_call>(.*?)(?:</ifm\|tool_call>|\Z)", re.S)
_TYPE = re.compile(r"<ifm\|arg_type>[^<]{0,64}</ifm\|arg_type>")
_JSON_CALL = re.compile(r"[ \t\r\n]*\{")


def read(body: str, *, closed: bool = True) -> FormatRead:
    """Read the calls of a ``<ifm|tool_calls>`` block."""
    found = FormatRead(text_values=True)
    pos = 0
    while _BLANKS.match(body, pos).end() < len(body):
        m = _CALL.match(body, pos)
        if m is None:
            return _fail(INVALID_XML, f"expected <ifm|tool_call>, found {body[pos:pos + 16]!r}",
                         pos)
        inner, at = m.group(1), m.start(1)
        if _JSON_CALL.match(inner):
            pair = _json_call(inner)
            if pair is None:
                return _fail(INVALID_JSON, 'a JSON call is not {"name", "arguments"}', at)
            found.calls.append(pair)
        else:
            pairs = _TYPE.sub("", inner).replace("<ifm|arg_", "<arg_").replace(
                "</ifm|arg_", "</arg_")
            one = glm.read(pairs, closed=closed or m.group().endswith("</ifm|tool_call>"))
            if one.errors:
                return FormatRead(errors=[CodecError(e.code, e.message.replace("GLM", "IFM"),
                                                     {"position": at}) for e in one.errors])
            found.calls += one.calls
        pos = m.end()
    return found


def _json_call(text: str) -> tuple[str, str] | None:
    try:
        value = orjson.loads(text)
    except orjson.JSONDecodeError:
        return None
    if not isinstance(value, dict) or not isinstance(value.get("name"), str):
        return None
    args = value.get("arguments", {})
    return value["name"], (args if isinstance(args, str) else orjson.dumps(args).decode())


def _fail(code: str, what: str, position: int) -> FormatRead:
    return FormatRead(errors=[CodecError(code, f"K2 Horizon call: {what}",
                                         {"position": position})])
