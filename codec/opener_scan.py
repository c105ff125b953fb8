"""Find the next block opener without trying the whole openers' pattern at every bracket.

The openers' pattern is one alternation of a few dozen branches; the ``regex`` engine tries
every branch at every ``<``, ``[`` or ``{`` of the text (about 0.4 µs each), so 40 KB of ``[``
cost tens of milliseconds. `prefilter` compiles the literal heads of the openers (their
tokens, ``<think``, ``<NAME`` of each tool, ...) as one prefix tree, beside the JSON opener and
``[NAME``; one scan of it skips what no opener can start with, and `find_opener` tries the
full pattern only where the prefilter matched. The prefilter matches wherever the pattern
does (fully or, at the end of the text, partially), so `find_opener` answers exactly what
``pattern.search`` does (``tests/test_worst_case_inputs.py`` holds it to that).

The openers are compiled in two parts (``toolcodec.engine.Openers``): one shared by every tool
set, one with the tool names. `OpenerSearch` searches both and answers what the search of
their alternation, shared part first, answers.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

import regex
from toolcodec.regex_trie import trie_pattern

_WS = r"[ \t\r\n]{0,16}"
_JSON_KEYS = ("name", "function", "tool_calls", "type", "arguments", "parameters")


def prefilter(literals: Iterable[str], json_opener: str, call_names: Iterable[str],
              bare_names: Iterable[str], heads: Iterable[str] = ()) -> Any:
    """`prefilter_source`, compiled."""
    return regex.compile(prefilter_source(literals, json_opener, call_names, bare_names, heads))


def prefilter_source(literals: Iterable[str], json_opener: str, call_names: Iterable[str],
                     bare_names: Iterable[str], heads: Iterable[str] = ()) -> str:
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
    return "|".join(f"(?:{a})" for a in alts)


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



def names_prefilter_source(names: str, tags: bool, calls: bool, bare: bool) -> str:
    """Where a tool-name opener may start, for the names' pattern *names*: ``<NAME`` with
    *tags*, ``[NAME`` with *calls*, and with *bare* ``NAME`` or ``<NAME`` starting a line.
    The names' pattern appears once (a second and third copy cost more to compile than the
    hints they spare)."""
    heads = ["<"] * tags + [r"\[" + _WS] * calls + [r"(?<=(?:^|\n)[ \t]{0,16})<?"] * bare
    if not heads:
        return "(?!)"
    return "(?:" + "|".join(heads) + ")(?:" + names + ")"


class LazyPattern:
    """A ``regex`` pattern compiled when first used: the tool-name openers of a new tool set
    cost milliseconds to compile (the ``regex`` parser is Python), and most outputs never
    show a tool name where one of them could start, so their prefilter never calls for them.
    Two threads may both compile it; either result serves."""

    __slots__ = ("_source", "_compiled", "match", "search")

    def __init__(self, source: str | Callable[[], str]) -> None:
        self._source = source  # or a function that writes it, called when it is compiled
        self._compiled: Any = None
        # The compiled pattern's own methods once compiled: no call in between after that.
        self.match: Callable[..., Any] = lambda *a, **k: self.compiled.match(*a, **k)
        self.search: Callable[..., Any] = lambda *a, **k: self.compiled.search(*a, **k)

    @property
    def source(self) -> str:
        return self._source if isinstance(self._source, str) else self._source()

    @property
    def compiled(self) -> Any:
        if self._compiled is None:
            compiled = regex.compile(self.source)
            self.match, self.search = compiled.match, compiled.search
            self._compiled = compiled
        return self._compiled


class Alternatives:
    """Patterns matched at one position as the alternation of their sources is: the first
    full match, else a partial one (``regex`` prefers a later alternative's full match to an
    earlier one's partial match). A pattern is tried only when those before it found no full
    match, so one that is costly to compile is compiled only when it may answer."""

    __slots__ = ("patterns",)

    def __init__(self, *patterns: Any) -> None:
        self.patterns = tuple(p for p in patterns if p is not None)

    def match(self, text: str, pos: int, partial: bool = False) -> Any:
        cut = None
        for pattern in self.patterns:
            m = pattern.match(text, pos, partial=partial)
            # Where the text ends no opener matches in full (none is empty): the first
            # partial match is the answer.
            if m is not None and (not m.partial or pos >= len(text)):
                return m
            cut = cut or m
        return cut


class OpenerSearch:
    """The search of two patterns as if they were one alternation, *shared* first.

    ``regex`` searching with ``partial=True`` prefers a full match anywhere to a partial one,
    and among full matches the leftmost (at one position, the first alternative); so does
    `find`, from each part's own answer. The named part's answer is kept: it holds for every
    later search of the same text, in the same mode, from a position up to where it matched,
    so a text with many shared openers and no named one is scanned for names once, not once
    per opener. One search serves one text that only grows (an engine's), and keeps its
    length and where the answer starts, not the text or the match: a second reference to
    the text would make each append copy it."""

    __slots__ = ("_named",)

    def __init__(self) -> None:
        # (named, length of the text, partial, searched from, where its answer starts or
        # -1 for none)
        self._named: tuple[Any, int, bool, int, int] | None = None

    def find(self, shared: tuple[Any, Any], named: tuple[Any, Any] | None, text: str,
             pos: int, partial: bool) -> Any:
        """The first opener at or past *pos*: *shared* is (pattern, prefilter), *named*
        (pattern, prefilter, where its openers may start: see `_may_open`)."""
        a = find_opener(shared[0], shared[1], text, pos, partial)
        if named is None or (a is not None and not a.partial and a.start() == pos) \
                or (a is not None and not _may_open(
                    named[2], text, pos, len(text) if a.partial else a.start())):
            # Nothing starts before pos and the shared part wins a tie; or no tool-name
            # opener can start before the shared one (a named answer could then only be an
            # empty partial match where the text ends, at or after it).
            return a
        b = self._named_search(named, text, pos, partial, a is not None)
        if a is None or b is None:
            return b if a is None else a
        if a.partial != b.partial:
            return b if a.partial else a
        return b if b.start() < a.start() else a

    def _named_search(self, named: tuple[Any, Any, Any], text: str, pos: int, partial: bool,
                      shared_found: bool) -> Any:
        """The named part's answer; None for one where the text ends when the shared part
        found one (an empty partial match there, which the shared answer wins against)."""
        end, kept = len(text), self._named
        if kept is not None and kept[0] is named and kept[1:3] == (end, partial) \
                and kept[3] <= pos and (kept[4] < 0 or pos <= kept[4]):
            if kept[4] < 0 or (shared_found and kept[4] == end):
                return None
            pos = kept[4]  # the answer starts there: found again at once
        # find_opener's loop, stopping short of matching where the text ends when that
        # answer cannot be taken (a stream's chunk ends there each time).
        pattern, first, start, m = named[0], named[1], -1, None
        at = pos
        while True:
            hint = first.search(text, at, partial=partial)
            if hint is None:
                break
            if shared_found and hint.start() == end:
                start = end  # the answer starts there, if there is one
                break
            m = pattern.match(text, hint.start(), partial=partial)
            if m is not None:
                start = m.start()
                break
            at = hint.start() + 1
        self._named = (named, end, partial, pos, start)
        return m


def _may_open(heads: tuple[str, bool], text: str, pos: int, stop: int) -> bool:
    """Whether a tool-name opener may start in ``text[pos:stop]``: *heads* are the characters
    one may start with (``<``, ``[``), and whether one may start a line (a bare call: past
    at most 16 blanks after a line break or where the text starts). A few ``str.find``
    cost less than the named openers' search, which a stream otherwise runs per chunk."""
    chars, line = heads
    for c in chars:
        if text.find(c, pos, stop) >= 0:
            return True
    return line and (pos <= 16 or text.find("\n", pos - 17, stop) >= 0)
