"""GLM-4.5/4.6/4.7: ``<tool_call>NAME<arg_key>K</arg_key><arg_value>V</arg_value></tool_call>``.

The body (between ``<tool_call>`` and ``</tool_call>``) is the tool's name, then key/value
pairs, with any blanks between the parts (``\\n``, ``\\r`` and ``\\t`` written as two
characters count as blanks there, never inside a key or a value: ``glm.escaped_layout``, some
servers escape the whole output once more). Values are raw text, kept exactly as written (no
entity decoding: the model writes ``&`` and ``<`` as they are); the codec converts them to the
types the schema wants. Errors are ``invalid_xml`` with ``position`` in the body.
"""

from __future__ import annotations

import re

from toolcodec.formats import FormatRead
from toolcodec.results.errors import INVALID_XML, CodecError

# Blanks between the parts; also written as the two characters ``\n`` (``\r``, ``\t``) by a
# server that escaped the whole output once more (``glm.escaped_layout``).
_BLANK = re.compile(r"(?:[ \t\r\n]|\\[nrt])*")
_NAME = re.compile(r"(?:[ \t\r\n]|\\[nrt])*([A-Za-z_][\w.\-]*)")
ESCAPED_LAYOUT = "glm.escaped_layout"
_KEY = re.compile(r"<arg_key>(.*?)</arg_key>", re.S)
# A GLM body starts with the tool's name, then <arg_key>, a line break or the body's end (a
# line break or blank may be written escaped, as above). The engine asks before the block has
# ended, so there the end is the closer; it looks at most HEAD_WINDOW characters ahead.
_HEAD = (r"[ \t\r\n]*[A-Za-z_][\w.\-]{0,127}"
         r"(?:(?:[ \t\r\n]|\\[nrt]){0,16}<arg_key>|[ \t]*(?:\r?\n|(?:\\r)?\\n)"
         r"|(?:[ \t\r\n]|\\[nrt])*(?:END))")
BODY_HEAD = re.compile(_HEAD.replace("END", r"\Z"))
TEXT_HEAD = re.compile(_HEAD.replace("END", "</tool_call>"))
_VALUE_OPEN = "<arg_value>"
_VALUE_CLOSE = "</arg_value>"
VALUE_CLOSE_ADDED = "xml.balance_tags"  # the last value's </arg_value>, before </tool_call>


def looks_like_body(body: str) -> bool:
    """Whether a ``<tool_call>`` body is GLM-shaped (decided within ``HEAD_WINDOW``)."""
    return BODY_HEAD.match(body) is not None


def read(body: str, *, closed: bool = True) -> FormatRead:
    """Read one GLM call from the body of its ``<tool_call>`` block."""
    m = _NAME.match(body)
    if m is None:
        return _fail("expected the tool's name", 0, body)
    name, pos = m.group(1), m.end()
    escaped = "\\" in body[:pos]
    arguments: dict[str, str] = {}
    while True:
        blank = _BLANK.match(body, pos)
        escaped = escaped or "\\" in blank.group()
        pos = blank.end()
        if pos == len(body):
            return FormatRead(calls=[(name, arguments)], text_values=True,
                              repairs=[ESCAPED_LAYOUT] if escaped else [])
        key = _KEY.match(body, pos)
        if key is None:
            what = ("a value with no <arg_key> before it" if body.startswith(_VALUE_OPEN, pos)
                    else f"expected <arg_key>, found {body[pos:pos + 12]!r}")
            return _fail(what, pos, body)
        blank = _BLANK.match(body, key.end())
        escaped = escaped or "\\" in blank.group()
        pos = blank.end()
        if not body.startswith(_VALUE_OPEN, pos):
            return _fail(f"the key {key.group(1)!r} has no <arg_value>", pos, body)
        close = body.find(_VALUE_CLOSE, pos)
        if key.group(1) in arguments:
            return _fail(f"the key {key.group(1)!r} is given twice", key.start(), body)
        if close < 0:
            # The block's own closer ended the last value (the model skipped </arg_value>),
            # as a Qwen parameter may end at </function>: its text is the value, the layout
            # before the closer aside. Not when the output was cut, nor before another key.
            rest = body[pos + len(_VALUE_OPEN):]
            if not closed or "<arg_key>" in rest or _VALUE_OPEN in rest:
                return _fail(f"the value of {key.group(1)!r} is never closed by </arg_value> "
                             "(the output may have been cut off)", pos, body)
            arguments[key.group(1)] = rest.rstrip("\r\n")
            return FormatRead(calls=[(name, arguments)], text_values=True,
                              repairs=[ESCAPED_LAYOUT, VALUE_CLOSE_ADDED] if escaped
                              else [VALUE_CLOSE_ADDED])
        arguments[key.group(1)] = body[pos + len(_VALUE_OPEN):close]
        pos = close + len(_VALUE_CLOSE)


def _fail(what: str, position: int, body: str) -> FormatRead:
    near = body[max(0, position - 20):position + 20]
    return FormatRead(errors=[CodecError(INVALID_XML, f"GLM call: {what}; near {near!r}",
                                         {"position": position})])
