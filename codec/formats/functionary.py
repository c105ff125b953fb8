"""Functionary v3.2: each message starts with ``>>>`` and its recipient; ``all`` is the user
(text), any other recipient a tool, whose message is the call's JSON arguments::

    >>>all
    Let me check.>>>get_weather
    {"city": "Oslo"}

The engine opens a block at ``>>>`` when a name, a line break and ``{`` follow (so a Python
prompt ``>>> x`` stays prose), ends it where the arguments' brackets balance or at the next
``>>>``; ``>>>all`` and its line break are framing. This reads a block's body: the name, then
JSON text the codec repairs and validates.
"""

from __future__ import annotations

import re

from toolcodec.formats import FormatRead
from toolcodec.results.errors import INVALID_JSON, CodecError

OPENER = ">>>"
TEXT_CHANNEL = (">>>all\n", ">>>all\r\n")
HEAD = re.compile(r"[A-Za-z_][\w.\-]{0,127}[ \t]*\r?\n[ \t\r\n]{0,16}\{")
_NAME = re.compile(r"([A-Za-z_][\w.\-]{0,127})[ \t]*\r?\n")


def read(body: str, *, closed: bool = True) -> FormatRead:
    """Read one call: its recipient's name on the first line, then its JSON arguments."""
    m = _NAME.match(body)
    if m is None or not body[m.end():].strip():
        return FormatRead(errors=[CodecError(
            INVALID_JSON, "Functionary call: expected a name, a line break and JSON arguments",
            {"position": 0})])
    return FormatRead(calls=[(m.group(1), body[m.end():].strip())])
