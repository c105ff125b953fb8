"""Find a format's structural token outside the strings of its body.

A value may hold the format's own markers (``"stop at <|tool_call_end|> please"`` in a Kimi
JSON string, ``<tool_call|>`` inside Gemma's ``<|"|>…<|"|>``); the token that ends a call or a
block is the first one outside every string. ``"`` strings are JSON's (``\\`` escapes the next
character); any other quote token has no escapes and ends at its next occurrence.
"""

from __future__ import annotations

import re
from functools import lru_cache


@lru_cache(maxsize=64)
def scanner(tokens: tuple[str, ...], quotes: tuple[str, ...]) -> re.Pattern[str]:
    """One pattern for the tokens sought and the quotes that open strings."""
    alts = sorted(set(tokens) | set(quotes), key=len, reverse=True)
    return re.compile("|".join(re.escape(t) for t in alts))


def string_end(text: str, quote: str, pos: int) -> int:
    """Where the string opened by ``quote`` before ``pos`` ends (just past its closing quote),
    or -1 when the text ends first. A JSON ``"`` preceded by an odd run of backslashes is
    escaped (the run is counted backwards, so a search may resume anywhere inside the
    string)."""
    if quote != '"':
        at = text.find(quote, pos)
        return -1 if at < 0 else at + len(quote)
    while (at := text.find('"', pos)) >= 0:
        run = at
        while run > 0 and text[run - 1] == "\\":
            run -= 1
        if (at - run) % 2 == 0:
            return at + 1
        pos = at + 1
    return -1


def find(text: str, tokens: tuple[str, ...], quotes: tuple[str, ...], start: int = 0,
         end: int | None = None) -> re.Match[str] | None:
    """The first of ``tokens`` in ``text[start:end]`` outside strings (None: there is none).
    A string that never closes was not a string (a quote lost its escape): the first token
    after its quote counts."""
    pattern, end = scanner(tokens, quotes), len(text) if end is None else end
    pos = start
    while (m := pattern.search(text, pos, end)) is not None:
        if m.group() not in quotes or m.group() in tokens:
            return m
        pos = string_end(text, m.group(), m.end())
        if pos < 0:
            return scanner(tokens, ()).search(text, m.end(), end)
    return None
