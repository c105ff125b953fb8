"""The state of the block (or prose candidate) the engine is reading, shared by the end rules.

An *end rule* (``EndRule``) is how one kind of block ends: given the text so far, the open
block and whether the text is final, it answers ``(block_end, body_end, closed)``, or None
when that is not known yet (more text may come). It keeps its progress in the ``OpenBlock``
so that the next call resumes where this one stopped: the work is linear in the output
whatever the chunk size. An end rule is pure: it reads the text and the codec's openers.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any


@dataclass(slots=True)
class OpenBlock:
    """The block or candidate being read."""

    kind: str  # the block kind (``toolcodec.formats.block_kinds``), or think|json|fence|pycall
    start: int
    body_start: int
    scan: int  # where the search for the end resumes
    tag: str | None = None
    lead: int | None = None  # start of a call marker before a JSON candidate (think: of a call)
    json_aware: bool = False
    depth: int = 0
    quote: str = ""  # json, pycall: the quote of the string the scan is in
    reasoned: int = 0  # think: body text already sent as reasoning events
    vscan: int = -1  # open-ended marker: where the scan of its values resumes
    value_ended: bool = False  # open-ended marker: vscan is just past a complete value
    element: str = ""  # bare call: the parameter element being read
    cut: bool = False  # open-ended marker: the end of the text came inside its values
    values_open: int = 0  # tool_call: GLM / Qwen value tags open before ``counted``
    counted: int = -1
    call_body: bool = False  # think: the call candidate at ``lead`` has a body
    call_scan: int = 0  # think: where the search for the candidate's closer resumes
    row: Any = None  # think: its row of the reasoning table
    closer_at: int = -1  # think: where its first closer at or past ``scan`` is (-1: not known)
    closer: str = ""
    sscan: int = -1  # tool_call: where the scan inside the open string at ``scan`` resumes


# (text, open block, final, codec) -> (block_end, body_end, closed), or None: not known yet
EndRule = Callable[[str, OpenBlock, bool, Any], "tuple[int, int, bool] | None"]


def find_closer(text: str, cur: OpenBlock, final: bool,
                closer: str) -> tuple[int, int, bool] | None:
    """The block ends at the first ``closer``; a block whose body starts at its opener (the
    opener is part of the body) keeps the closer in its body too."""
    close = text.find(closer, cur.scan)
    if close >= 0:
        end = close + len(closer)
        return end, (end if cur.body_start == cur.start else close), True
    if final:
        return len(text), len(text), False
    cur.scan = max(cur.body_start, len(text) - len(closer) + 1)  # a closer the chunk cut
    return None


def quiet_until_gt(cur: OpenBlock, chunk: str) -> bool:
    """Whether *chunk* certainly leaves a block open whose every closer ends with ``>``."""
    return ">" not in chunk and not cur.json_aware
