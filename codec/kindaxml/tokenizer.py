"""Split a KindaXML document into text, tag and CDATA tokens in one left-to-right pass.

A tag is ``<`` (or ``</``) and a name, running to the first ``>``. If a ``<`` or a newline
comes before that ``>``, the ``<`` was not a tag and stays text: this bounds every tag to
one line, so a stray ``<`` or an unclosed quote can never swallow the rest of the document
(spec §6.1). A quote inside a tag therefore never hides a ``>``; an open quote simply ends
where the tag does. Each character is examined a bounded number of times, so the pass is
linear in the length of the input.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass

from toolcodec.kindaxml.config import TAG_NAME

TEXT = "text"
START = "start"
END = "end"
CDATA = "cdata"

CDATA_OPEN = "<![CDATA["
CDATA_CLOSE = "]]>"

_SPECIAL = re.compile(r"<")
_SPECIAL_WITH_ESCAPES = re.compile(r"[<\\]")
_TAG_STOP = re.compile(r"[<>\n]")


@dataclass(slots=True)
class Token:
    """One piece of the input. ``start``/``end`` locate its raw form in the source.

    ``text`` is the literal text of a text or CDATA token (for CDATA, without the
    delimiters). Tags carry ``name`` and the ``[body_start, body_end)`` range of their
    attribute text; ``self_closing`` marks ``<name .../>``. ``terminated`` is False for a
    CDATA block that ran to the end of the document.
    """

    kind: str
    start: int
    end: int
    text: str = ""
    name: str = ""
    body_start: int = 0
    body_end: int = 0
    self_closing: bool = False
    terminated: bool = True


def tokenize(source: str, backslash_escapes: bool = False) -> Iterator[Token]:
    """Yield the tokens of ``source`` in order; their raw forms tile the whole input."""
    special = _SPECIAL_WITH_ESCAPES if backslash_escapes else _SPECIAL
    pos = text_start = 0
    while (m := special.search(source, pos)) is not None:
        i = m.start()
        if source[i] == "\\":
            if source[i + 1 : i + 2] in ("<", ">"):
                if i > text_start:
                    yield Token(TEXT, text_start, i, source[text_start:i])
                yield Token(TEXT, i, i + 2, source[i + 1])
                pos = text_start = i + 2
            else:
                pos = i + 1
            continue
        token = scan_markup(source, i)
        if token is None:  # a literal "<": keep it in the current text run
            pos = i + 1
            continue
        if i > text_start:
            yield Token(TEXT, text_start, i, source[text_start:i])
        yield token
        pos = text_start = token.end
    if text_start < len(source):
        yield Token(TEXT, text_start, len(source), source[text_start:])


def scan_markup(source: str, i: int) -> Token | None:
    """Read the CDATA block or tag starting at ``source[i] == "<"``, or None if it is text."""
    if source.startswith(CDATA_OPEN, i):
        body = i + len(CDATA_OPEN)
        close = source.find(CDATA_CLOSE, body)
        if close < 0:  # spec §7.2: an unterminated block runs to the end of the document
            return Token(CDATA, i, len(source), source[body:], terminated=False)
        return Token(CDATA, i, close + len(CDATA_CLOSE), source[body:close])
    closing = source.startswith("</", i)
    name = TAG_NAME.match(source, i + 2 if closing else i + 1)
    if name is None:
        return None
    stop = _TAG_STOP.search(source, name.end())
    if stop is None or source[stop.start()] != ">":
        return None
    gt = stop.start()
    body_start, body_end = name.end(), gt
    self_closing = False
    if not closing:
        last = source[body_start:gt].rstrip()
        if last.endswith("/"):
            self_closing = True
            body_end = body_start + len(last) - 1
    return Token(
        END if closing else START,
        i,
        gt + 1,
        name=name.group(),
        body_start=body_start,
        body_end=body_end,
        self_closing=self_closing,
    )
