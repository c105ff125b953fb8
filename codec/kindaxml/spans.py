"""Choose the span an unclosed (or self-closing) tag annotates: the strategies of spec §6.5.

Spans are resolved after the whole output text is known, because the forward strategies
look ahead. Tags are resolved in document order, so their offsets never decrease; the
look-ups below remember their last answer and stay linear over a whole document instead of
rescanning the same whitespace or line for every tag.
"""

from __future__ import annotations

import re

_BLANK = re.compile(r"[^\S\n]*")  # whitespace other than a newline
_TOKEN = re.compile(r"\S*")


class Lookahead:
    """Monotone look-ups in ``text``: each query offset must be >= the previous one."""

    def __init__(self, text: str) -> None:
        self.text = text
        self._newline_at = -1  # first newline at or after the previous query
        self._blank_end = -1  # end of the blank run that began at the previous query
        self._token: tuple[int, int] = (-1, -1)

    def next_newline(self, pos: int) -> int:
        """Offset of the first newline at or after ``pos``, or ``len(text)``."""
        if self._newline_at < pos:
            found = self.text.find("\n", pos)
            self._newline_at = len(self.text) if found < 0 else found
        return self._newline_at

    def next_token(self, pos: int) -> tuple[int, int]:
        """The next run of non-space characters on the line of ``pos``, as ``(start, end)``.

        Leading spaces and tabs are skipped, a newline is not: a tag at the end of a line
        annotates nothing rather than reaching into the next line.
        """
        if self._blank_end < pos:
            self._blank_end = _BLANK.match(self.text, pos).end()
        start = self._blank_end
        if self._token[0] != start:
            self._token = (start, _TOKEN.match(self.text, start).end())
        return self._token


def resolve(
    strategy: str, look: Lookahead, pos: int, close: int | None, retro_start: int
) -> tuple[int, int]:
    """Return the ``[start, end)`` span that ``strategy`` gives a tag at output offset ``pos``.

    ``close`` is where the next tag started (None if none came), ``retro_start`` where the
    current line began or the previous recognised tag ended, whichever is later.
    """
    if strategy == "retro_line":
        return retro_start, pos
    if strategy == "forward_until_tag":
        limit = len(look.text) if close is None else close
        return pos, min(limit, look.next_newline(pos))
    if strategy == "forward_until_newline":
        return pos, look.next_newline(pos)
    if strategy == "forward_next_token":
        return look.next_token(pos)
    return pos, pos  # noop / marker


def trim(text: str, start: int, end: int) -> tuple[int, int]:
    """Shrink ``[start, end)`` past leading and trailing whitespace and punctuation."""
    while start < end and _trimmable(text[start]):
        start += 1
    while end > start and _trimmable(text[end - 1]):
        end -= 1
    return start, end


# Sentence punctuation and dashes only: brackets, quotes, "%" and the like carry meaning
# ("5%", "(see above)") and are kept.
_TRIM_PUNCTUATION = frozenset(
    ".,;:!?\u2026-\u2013\u2014\u00b7\u3002\uff0c\uff1b\uff1a\uff01\uff1f\u3001"
)


def _trimmable(char: str) -> bool:
    return char.isspace() or char in _TRIM_PUNCTUATION
