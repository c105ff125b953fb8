"""Find the next block opener without trying the whole openers' pattern at every bracket.

The openers' pattern is one alternation of a few dozen branches; the ``regex`` engine tries
every branch at every ``<``, ``[`` or ``{`` of the text (about 0.4 µs each), so 40 KB of ``[``
cost tens of milliseconds. `prefilter` compiles the literal heads of the openers (their
tokens, ``<think``, ``<NAME`` of each tool, ...) as one prefix tree, beside the JSON opener and
``[NAME``; one scan of it skips what no opener can start with, and `find_opener` tries the
full pattern only where the prefilter matched. The prefilter matches wherever the pattern
does (fully or, at the end of the text, partially), so `find_opener` answers exactly what
``pattern.search`` does (``tests/test_worst_case_inputs.py`` holds it to that).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import regex
from toolcodec.regex_trie import trie_pattern

_WS = r"[ \t\r\n]{0,16}"
_JSON_KEYS = ("name", "function", "tool_calls", "type", "arguments", "parameters")


def prefilter(literals: Iterable[str], json_opener: str, call_names: Iterable[str],
              bare_names: Iterable[str], heads: Iterable[str] = ()) -> Any:
    """Where an opener may start: one of the *literals* (marker tokens, ``<think``,
    ``<function=``, ``<NAME`` of each tool, ...), the *json_opener* pattern (JSON and code
    fences), ``[NAME(`` for one of *call_names* (a Python call), or one of *bare_names* (or
    ``<`` and one) starting a line, or one of the patterns *heads* (openers read only where
    the text starts: they are cheap, anchored there).
    Each is implied by the opener it stands for; searched with ``partial=True`` it also
    matches wherever an opener is cut by the end of the text."""
    alts = [trie_pattern(literals), json_opener, *heads]
    call_names, bare_names = list(call_names), list(bare_names)
    if call_names:
        alts.append(r"\[" + _WS + "(?:" + trie_pattern(call_names) + r")[ \t]{0,4}\(")
    if bare_names:
        alts.append(r"(?<=(?:^|\n)[ \t]{0,16})<?(?:" + trie_pattern(bare_names) + ")")
    return regex.compile("|".join(f"(?:{a})" for a in alts))


def find_opener(pattern: Any, first: Any, text: str, pos: int, partial: bool) -> Any:
    """``pattern.search(text, pos, partial=partial)``, trying *pattern* only where *first*
    (its `prefilter`) matches."""
    while True:
        hint = first.search(text, pos, partial=partial)
        if hint is None:
            return None
        m = pattern.match(text, hint.start(), partial=partial)
        if m is not None:
            return m
        pos = hint.start() + 1

