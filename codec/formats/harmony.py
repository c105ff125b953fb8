"""gpt-oss (harmony): ``<|channel|>commentary to=functions.NAME … <|message|>{…}<|call|>``.

The engine hands over the text from just after ``to=`` up to ``<|call|>`` (or the end): the
recipient ``functions.NAME``, optional header words (``<|constrain|>json``, ``json``, ``code``),
``<|message|>``, then the JSON arguments, which the codec repairs. Errors are ``invalid_json``
with ``position`` in the body.
"""

from __future__ import annotations

import re

from toolcodec.formats import FormatRead
from toolcodec.results.errors import INVALID_JSON, CodecError

_RECIPIENT = re.compile(r"[ \t]*(?:functions\.)?([A-Za-z_][\w.\-]*)")
MESSAGE = "<|message|>"
_HEADER_MAX = 200  # header words between the recipient and <|message|>


def read(body: str, *, closed: bool = True) -> FormatRead:
    """Read the one call of a harmony ``commentary`` message."""
    m = _RECIPIENT.match(body)
    if m is None:
        return _fail("expected the recipient functions.NAME", 0, body)
    at = body.find(MESSAGE, m.end(), m.end() + _HEADER_MAX + len(MESSAGE))
    if at < 0:
        return _fail(f"no {MESSAGE} after the recipient", m.end(), body)
    return FormatRead(calls=[(m.group(1), body[at + len(MESSAGE):].strip())])


def _fail(what: str, position: int, body: str) -> FormatRead:
    near = body[max(0, position - 20):position + 20]
    return FormatRead(errors=[CodecError(INVALID_JSON, f"harmony call: {what}; near {near!r}",
                                         {"position": position})])
