"""MiniMax-M3: every tag of a call written with the prefix ``]<]minimax[>[``::

    ]<]minimax[>[<tool_call>
    ]<]minimax[>[<invoke name="create_order">]<]minimax[>[<user_id>42]<]minimax[>[</user_id>
    ]<]minimax[>[<shipping>]<]minimax[>[<city>Singapore]<]minimax[>[</city>…
    ]<]minimax[>[</invoke>
    ]<]minimax[>[</tool_call>

Parameters are elements named after them, nested for objects and arrays. Without the prefixes
an invocation is a tool-name element, which the codec's XML decoder reads against the tool's
schema (``XmlBody``); text between invocations is layout.
"""

from __future__ import annotations

import re

from toolcodec.formats import FormatRead, XmlBody
from toolcodec.results.errors import INVALID_XML, CodecError

PREFIX = "]<]minimax[>["
_BLANKS = re.compile(r"[ \t\r\n]*")
_INVOKE = re.compile(r"[ \t\r\n]*<invoke name=\"([^\"<>]{1,128})\"[ \t]*>(.*?)(?:</invoke>|\Z)",
                     re.S)


def read(body: str, *, closed: bool = True) -> FormatRead:
    """Read the invocations of a MiniMax-M3 ``<tool_call>`` block."""
    text = body.replace(PREFIX, "")
    found = FormatRead()
    pos = 0
    while _BLANKS.match(text, pos).end() < len(text):
        m = _INVOKE.match(text, pos)
        if m is None:
            near = text[pos:pos + 24]
            return FormatRead(errors=[CodecError(
                INVALID_XML, f"MiniMax-M3 call: expected <invoke name=…>, found {near!r}")])
        name, inner = m.group(1).strip(), m.group(2)
        found.calls.append((name, XmlBody(f"<{name}>{inner}</{name}>")))
        pos = m.end()
    return found
