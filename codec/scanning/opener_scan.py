"""Find the next block opener: a prefilter in front of the openers' pattern, and tool names
looked up in sets instead of compiled into the pattern.

The openers' pattern is one alternation of a few dozen branches; the ``regex`` engine tries
every branch at every ``<``, ``[`` or ``{`` of the text (about 0.4 µs each), so 40 KB of ``[``
cost tens of milliseconds. `prefilter_source` writes the literal heads of the openers (their
tokens, ``<think``, ``<NAME`` of each tool, ...) as one prefix tree, beside the JSON opener and
``[NAME(``; one scan of it skips what no opener can start with, and `find_opener` tries the
full pattern only where the prefilter matched (the prefilter matches wherever the pattern
does).

Tool names: the openers that name a tool (``<NAME …>``, ``[NAME(``, ``NAME`` alone on its
line before one of its parameters' tags) are written with any name in the name's place
(`any_name_openers`), so the patterns are the same for every tool set with the same formats,
compiled once and shared: a new tool set compiles nothing. A match of one of them is an
opener only if its name is one of the set's (`ToolNames`: set lookups). That answers what
the pattern with the set's names compiled in would: a name of ``[A-Za-z0-9_.-]`` ends where
a run of those characters does, since none of them may follow a name in those openers, so a
run that is no tool's name is no opener, and no other opener starts where it does. Other
names (or longer than ``NAME_MAX``) cannot be read that way: such a tool set compiles its
names into its own patterns (``toolcodec.scanning.openers.compile_openers``).

With more text to come (a stream), `find` answers the first place where an opener matches
whole or is cut by the end of the text: what completes a cut one may come, and then it is
the first opener, whatever it holds (``<get_weather note=[TOOL_CALLS]``, where ``regex``,
searching with ``partial=True``, would answer the whole one inside it).
``tests/test_worst_case_inputs.py`` holds `find` to trying the pattern with the names in it
at every place in turn, on generated texts cut anywhere.

Cost: the shared prefilter is an ``re`` pattern whose every branch starts with a literal
character, which ``re`` skips along the text to (about twice as fast as ``regex`` at each
``<``, ``[`` or ``{``); a run of text that only looks like a tool-name opener (``<a>``,
``[a(``, a word alone on its line before a tag) costs one search and one set lookup per
match; each place is tried a bounded number of times (a search resumes one character past
a match whose name is no tool's, never before it); a cut opener is looked for only within
the longest opener's reach of the end (`Patterns.cut`, `ToolNames.find_cut`).
``tests/benchmarks/bench_worst_case.py`` times runs of each, and
``tests/test_worst_case_inputs.py`` counts the searches they make.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from functools import cached_property, lru_cache
from typing import Any

import regex
from toolcodec.scanning.regex_trie import trie_pattern

_WS = r"[ \t\r\n]{0,16}"
NAME_MAX = 128  # the longest tool name the shared patterns read
_CHARS = r"A-Za-z0-9_.\-"  # what a name the shared patterns read is made of
_NAME = rf"[{_CHARS}]{{1,{NAME_MAX}}}+"
_PARAM = rf"[{_CHARS}]{{1,64}}+"  # a bare call's parameter (the engine's _PARAM_NAME: 64)
# ``regex``'s \s, spelled out: ``re``'s also has \x1c-\x1f, and both engines read these
SPACE = r"\t\n\x0b\x0c\r \x85\xa0\u1680\u2000-\u200a\u2028\u2029\u202f\u205f\u3000"
PLAIN_NAME = re.compile(rf"[{_CHARS}]{{1,{NAME_MAX}}}")
PLAIN_PARAM = re.compile(rf"[{_CHARS}]{{1,64}}")
_RUN = re.compile(rf"[{_CHARS}]{{0,{NAME_MAX + 1}}}")  # a name, or longer than any
_NAME_CHARS = frozenset("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-")
_CALL_HEAD = re.compile(r"\[" + _WS)
_BLANKS = re.compile(r"[ \t]{0,17}")
# What may follow where a cut tool-name opener starts, to the end of the text (or more).
_CALL_TAIL = re.compile(rf"\[{_WS}[{_CHARS}]{{0,{NAME_MAX}}}[ \t]{{0,4}}")
_TAG_TAIL = re.compile(rf"<(?:[{_CHARS}]{{1,{NAME_MAX}}}(?:[{SPACE}>/][^<>]{{0,64}})?)?")


def any_name_openers(body_ws: int) -> dict[str, str]:
    """The tool-name openers with any name in the name's place, as the engine's pattern has
    them: ``<NAME …>`` (``tag``), ``[NAME(`` (``pycall``) and, at a line's start, ``NAME`` (or
    ``<NAME``, ``NAME:``) then, past a line break and at most *body_ws* blanks, a parameter's
    tag (``bare``). For the ``re`` prefilter, each starting with a literal character:
    ``pycall_head`` (its name's group is the last), and ``bare_head``, from the line break
    before it (a line's start found where a line break is, not at every letter; a bare call
    on the line the search starts in is looked for apart, ``ToolNames.line_start``)."""
    bare = (rf"(?P<bare><?(?P<bare_name>{_NAME})[ \t]{{0,8}}:?[ \t]{{0,8}}\r?\n"
            rf"[ \t\r\n]{{0,{body_ws}}}<(?P<bare_param>{_PARAM})[ \t]{{0,8}}/?>)")
    call = rf"\[{_WS}(?P<call_name>{_NAME})[ \t]{{0,4}}\("
    return {
        "tag": rf"<(?P<tag>{_NAME})(?=[{SPACE}>/])[^<>]{{0,64}}>",
        "pycall": f"(?P<pycall>{call})",
        "bare": rf"(?<=(?:^|\n)[ \t]{{0,16}}){bare}",
        "pycall_head": call,
        "bare_head": rf"\n[ \t]{{0,16}}{bare}",
        "bare_at": bare,
    }


def unnamed(source: str) -> str:
    """A pattern's source with its named groups made plain groups."""
    return regex.sub(r"\(\?P<\w+>", "(?:", source)


def prefilter_source(literals: Iterable[str], json_opener: str, call_names: Iterable[str],
                     bare_names: Iterable[str], heads: Iterable[str] = ()) -> str:
    """Where an opener may start: one of the *literals* (marker tokens, ``<think``,
    ``<function=``, ``<NAME`` of each tool, ...), the *json_opener* pattern (JSON and code
    fences), ``[NAME(`` for one of *call_names* (a Python call), or one of *bare_names* (or
    ``<`` and one) starting a line, or one of the patterns *heads* (openers read only where
    the text starts: they are cheap, anchored there).
    Each is implied by the opener it stands for."""
    alts = [trie_pattern(literals), json_opener, *heads]
    call_names, bare_names = list(call_names), list(bare_names)
    if call_names:
        alts.append(r"\[" + _WS + "(?:" + trie_pattern(call_names) + r")[ \t]{0,4}\(")
    if bare_names:
        alts.append(r"(?<=(?:^|\n)[ \t]{0,16})<?(?:" + trie_pattern(bare_names) + ")")
    return "|".join(f"(?:{a})" for a in alts)


def find_opener(pattern: Any, first: Any, text: str, pos: int) -> Any:
    """``pattern.search(text, pos)``, trying *pattern* only where *first* (its prefilter,
    `prefilter_source`) matches."""
    while True:
        hint = first.search(text, pos)
        if hint is None:
            return None
        m = pattern.match(text, hint.start())
        if m is not None:
            return m
        pos = hint.start() + 1


class Patterns:
    """An alternation of openers and its prefilter, for all the openers and for those
    without the prose candidates (the JSON and fence openers, ``[NAME(``); each pair is
    compiled when first used (the ``regex`` parser is Python: a few milliseconds).

    *window*: an opener cut by the end of the text starts less than this far from it
    (`cut`). With *any_name*, the tool-name openers read any name and the prefilter is an
    ``re`` pattern for whole openers, every branch starting with a literal character (one of
    *firsts* for the others) and the tool-name ones last (``ToolNames.find_whole``); the
    start marker is not in it: *start* is its head, where the text starts (empty: the
    openers have none)."""

    __slots__ = ("sources", "any_name", "start", "window", "firsts", "heads", "_compiled",
                 "_start", "_firsts")

    def __init__(self, every: tuple[str, str], blocks: tuple[str, str], *, window: int,
                 firsts: str, any_name: bool = False, start: str = "",
                 heads: frozenset[str] | None = None) -> None:
        self.sources = (every, blocks)  # (pattern, prefilter) sources
        self.any_name, self.start, self.window = any_name, start, window
        self.firsts = frozenset(firsts)
        # The first two characters of what the prefilter's branches match (one, for a
        # branch of one literal character or one that starts with a class): no whole or cut
        # match starts past the text's start where none is, unless at its last character.
        self.heads = self.firsts if heads is None else heads
        self._compiled: list[tuple[Any, Any] | None] = [None, None]
        self._start: Any = None
        self._firsts = re.compile(f"[{re.escape(''.join(sorted(self.firsts)))}]")

    def get(self, blocks_only: bool = False) -> tuple[Any, Any]:
        """(pattern, prefilter); with *blocks_only*, without the prose candidates. Two
        threads may both compile a pair; either serves."""
        pair = self._compiled[blocks_only]
        if pair is None:
            source, first = self.sources[blocks_only]
            pair = (regex.compile(source), (re if self.any_name else regex).compile(first))
            self._compiled[blocks_only] = pair
        return pair

    def at_start(self, text: str) -> bool:
        """Whether the start marker's head is where the text starts."""
        if not self.start:
            return False
        if self._start is None:
            self._start = re.compile(self.start)
        return self._start.match(text) is not None

    def cut(self, text: str, pos: int, stop: int, blocks_only: bool = False) -> Any:
        """Where an opener cut by the end of the text starts, at or past *pos* and before
        *stop*, when no whole one starts before *stop* (None: none, or only an empty one
        where the text ends, which reads as none): the prefilter searched with
        ``partial=True``, within *window* of the end (or from where the text starts, for the
        start marker), and the pattern tried where it matches, in the order ``regex`` finds
        them (a whole head first, as in `find_opener`); nothing where none of *firsts* is."""
        end = len(text)
        stop = min(stop, end)
        if pos == 0 and self.start:
            at = 0
        else:
            at = max(pos, end - self.window)
            if at >= stop or self._firsts.search(text, at, stop) is None:
                return None
        pattern, first = self.get(blocks_only)
        hint = first.search(text, at, partial=True)
        while hint is not None and hint.start() < stop:
            m = pattern.match(text, hint.start(), partial=True)
            if m is not None:  # cut: a whole one here would have been found first
                return m
            hint = first.search(text, hint.start() + 1, partial=True)
        return None

    def cut_before(self, text: str, pos: int, stop: int, blocks_only: bool = False) -> Any:
        """An opener cut by the end of the text that starts at or past *pos* and before
        *stop*, tried at each place where one of *firsts* is (``cut`` answers in ``regex``'s
        order, a whole head first: a cut opener whose text holds another's whole head, as
        `]<]minimax[>[<tool` holds `<tool`, starts before that head)."""
        pattern = self.get(blocks_only)[0]
        for m in self._firsts.finditer(text, max(pos, len(text) - self.window), stop):
            cut = pattern.match(text, m.start(), partial=True)
            if cut is not None and cut.partial:
                return cut
        return None


@lru_cache(maxsize=4)
def _one_named(body_ws: int) -> dict[str, Any]:
    """Each tool-name opener alone, as the engine's pattern has it."""
    return {k: regex.compile(v) for k, v in any_name_openers(body_ws).items()
            if k in ("tag", "pycall", "bare")}


@lru_cache(maxsize=4)
def _bare_tail(body_ws: int) -> Any:
    """What may follow where a cut bare call starts, to the end of the text (``re``)."""
    return re.compile(rf"<?(?:[{_CHARS}]{{1,{NAME_MAX}}}(?:[ \t]{{0,8}}:?[ \t]{{0,8}}\r?"
                      rf"(?:\n[ \t\r\n]{{0,{body_ws}}}(?:<[{_CHARS}]{{0,64}}[ \t]{{0,8}}/?)?)?)?)?")


@lru_cache(maxsize=16)
def _named_tail(tags: bool, calls: bool, bare: bool, body_ws: int) -> Any:
    """Where a tool-name opener cut by the end of the text may start (``re``): what may
    follow its first character runs to the end of the text; a bare call from the line
    break before it (one on the first line is looked for apart)."""
    alts = ([_TAG_TAIL.pattern] * tags + [_CALL_TAIL.pattern] * calls
            + [rf"\n[ \t]{{0,16}}(?=[<{_CHARS}])" + _bare_tail(body_ws).pattern] * bare)
    return re.compile("(?:" + "|".join(alts) + r")\Z" if alts else "(?!)")


@lru_cache(maxsize=4)
def _bare_at(body_ws: int) -> Any:
    """A bare call where it starts (``re``; where a line starts is for the caller to say)."""
    return re.compile(any_name_openers(body_ws)["bare_at"])


@dataclass(frozen=True)
class ToolNames:
    """The names a tool set's openers accept where the shared patterns read any name."""

    tags: frozenset[str]  # <NAME …> (empty: tool tags are not read)
    calls: frozenset[str]  # [NAME( (empty: Python calls are not read)
    bare: dict[str, frozenset[str]]  # NAME then a parameter's tag: tool -> its parameters
    body_ws: int  # blanks a bare call allows between its name's line and its first tag
    longest: int  # an opener cut by the end of the text is shorter than this

    def accepts(self, m: Any) -> bool:
        """Whether the whole match *m* of the shared pattern is an opener of this set."""
        kind = m.lastgroup
        if kind == "tag":
            return m.group("tag") in self.tags
        if kind == "pycall":
            return m.group("call_name") in self.calls
        if kind == "bare":
            params = self.bare.get(m.group("bare_name"))
            return params is not None and m.group("bare_param") in params
        return True

    def line_start(self, text: str, pos: int) -> int:
        """Where a bare call may start on the line *pos* is in, at or past *pos*: past at
        most 16 blanks from the line's start (-1: it may not)."""
        if not self.bare or (pos and text[pos - 1] not in " \t\n"):
            return -1
        if pos > 1 and text[pos - 1] != "\n" and text[pos - 2] not in " \t\n":
            return -1  # a blank after a word (most deltas of prose start so): not blanks alone
        low = max(0, pos - 17)
        at = text.rfind("\n", low, pos) + 1
        if at == 0 and low > 0:
            return -1
        q = _BLANKS.match(text, at).end()
        if q < pos or q - at > 16 or q >= len(text):
            return -1
        return q if text[q] == "<" or text[q] in _NAME_CHARS else -1

    def find_whole(self, patterns: Patterns, text: str, pos: int, blocks_only: bool,
                   line: int, shared: Patterns | None = None) -> Any:
        """The first whole opener of *patterns* at or past *pos* whose name, if it has one,
        is this set's (None: none); *line*: `line_start` at *pos*. With *shared* (*patterns*
        without the tool-name openers), one of those cut by the end of the text, where its
        head is whole, if that comes first."""
        pattern, first = patterns.get(blocks_only)
        one, firsts, search = self._one, patterns.firsts, first.search
        tags, calls, bare_params = self.tags, self.calls, self.bare.get
        cut = None if shared is None else shared.get(blocks_only)[0]
        # Where the prefilter does not look: the start marker, where the text starts, and a
        # bare call of the set on the line pos is in (its line break is before pos).
        early = [0] if pos == 0 and patterns.at_start(text) else []
        if line >= 0 and line not in early:
            bare = self._bare_at.match(text, line)
            params = None if bare is None else self.bare.get(bare.group("bare_name"))
            if params is not None and bare.group("bare_param") in params:
                early.append(line)
        at = pos
        while True:
            hint = search(text, at)
            start = len(text) + 1 if hint is None else hint.start()
            if early and early[0] <= start:
                p = early.pop(0)
                m = cut.match(text, p, partial=True) if cut is not None and p == 0 else None
                if m is None:
                    m = pattern.match(text, p)
                if m is not None and self.accepts(m):
                    return m
                at = max(at, p + 1)
                continue
            if hint is None:
                return None
            kind = hint.lastgroup
            # The prefilter tries every other opener's head first: a tag or a Python call
            # found by it is the one opener starting here.
            if kind == "tag":
                if hint.group("tag") in tags:
                    return one["tag"].match(text, start)
            elif kind == "call_name":
                if hint.group("call_name") in calls:
                    return one["pycall"].match(text, start)
            elif kind == "bare":  # found from its line break
                start = hint.start("bare")
                name, param = hint.group("bare_name", "bare_param")
                params = bare_params(name)
                # Another opener may start here only if the prefilter finds its head here.
                if (params is not None and param in params) or (
                        text[start] in firsts and (head := first.match(text, start)) is not None
                        and head.lastgroup is None):
                    m = pattern.match(text, start)
                    if m is not None and self.accepts(m):
                        return m
            else:  # another opener's head
                m = None if cut is None else cut.match(text, start, partial=True)
                if m is None:
                    m = pattern.match(text, start)
                if m is not None and self.accepts(m):
                    return m
            at = start + 1  # no opener of this set starts here: resume one character on

    def find_cut(self, text: str, pos: int, stop: int, calls: bool, line: int) -> Any:
        """The first tool-name opener of this set cut by the end of the text that starts at
        or past *pos* and before *stop* (None: none), its name one of the set's or, cut
        too, the start of one; with *calls*, ``[NAME(`` too. One ``re`` search for what may
        begin one and run to the end of the text (a tag holds no ``<``, a Python call no
        ``[``, a bare call starts a line), then its name, spare a ``regex`` match most of
        the time. *line*: `line_start` at *pos*."""
        end = len(text)
        at = pos if pos > end - self.longest else end - self.longest
        if at >= stop:
            return None
        one = self._one
        tail = self._tails[calls]
        if at > pos:
            line = self.line_start(text, at)  # a bare call on the line at is in
        if 0 <= line < stop and self._tails[2].fullmatch(text, line) is not None:
            m = self._bare_cut(text, line, one["bare"])
            if m is not None:
                return m
        while True:
            t = tail.search(text, at)
            if t is None:
                return None
            k = t.start()
            if text[k] == "\n":  # a bare call, past the blanks after the line break
                k = _BLANKS.match(text, k + 1).end()
                if k >= stop:
                    return None
                m = self._bare_cut(text, k, one["bare"])
            elif k >= stop:
                return None
            elif text[k] == "<":
                m = self._cut_opener(text, k, k + 1, self.tags, ("tag",), one["tag"])
            else:
                m = self._cut_opener(text, k, _CALL_HEAD.match(text, k).end(), self.calls,
                                     ("call",), one["pycall"])
            if m is not None:
                return m
            at = t.start() + 1

    def _cut_opener(self, text: str, at: int, name_at: int, names: frozenset[str], key: Any,
                    pattern: Any) -> Any:
        """A tag or Python call of this set cut by the end of the text, starting at *at*,
        its name at *name_at* (None)."""
        name_end = _RUN.match(text, name_at).end()
        if not self._named(text[name_at:name_end], name_end == len(text), names, key):
            return None
        m = pattern.match(text, at, partial=True)
        return m if m is not None and m.partial else None

    def _bare_cut(self, text: str, at: int, bare: Any) -> Any:
        """A bare call of this set cut by the end of the text, starting at *at* (None)."""
        end = len(text)
        start = at + text.startswith("<", at)
        name_end = _RUN.match(text, start).end()
        name = text[start:name_end]
        if name_end == end:
            if not self._named(name, True, self.bare, ("bare",)):
                return None
        else:
            params = self.bare.get(name)
            if params is None:
                return None
            tag = text.find("<", name_end)
            if tag >= 0:
                param_end = _RUN.match(text, tag + 1).end()
                param = text[tag + 1:param_end]
                if not self._named(param, param_end == end, params, ("param", name)):
                    return None
        m = bare.match(text, at, partial=True)
        return m if m is not None and m.partial else None

    @cached_property
    def _one(self) -> dict[str, Any]:
        return _one_named(self.body_ws)

    @cached_property
    def _bare_at(self) -> Any:
        return _bare_at(self.body_ws)

    @cached_property
    def _tails(self) -> tuple[Any, Any, Any]:
        """`_named_tail` without ``[NAME(``, and with it if this set reads it; `_bare_tail`."""
        tags, bare, ws = bool(self.tags), bool(self.bare), self.body_ws
        return (_named_tail(tags, False, bare, ws), _named_tail(tags, bool(self.calls), bare, ws),
                _bare_tail(ws))

    def _named(self, name: str, cut: bool, names: Any, key: Any) -> bool:
        """Whether *name* is one of *names*, or, *cut* by the end of the text, begins one
        (*key*: which names, for the prefixes kept)."""
        if not cut:
            return name in names
        prefixes = self._prefixes.get(key)
        if prefixes is None:
            prefixes = self._prefixes[key] = frozenset(
                n[:i] for n in names for i in range(len(n) + 1))
        return name in prefixes

    @cached_property
    def _prefixes(self) -> dict[Any, frozenset[str]]:
        """Every prefix of each set of names (the empty one and the names included)."""
        return {}


def find(patterns: Patterns, names: ToolNames | None, shared: Patterns | None, text: str,
         pos: int, partial: bool, blocks_only: bool = False) -> Any:
    """The first opener of a tool set at or past *pos*: where *patterns* read any tool name,
    *names* says which are the set's (None: *patterns* name the set's tools themselves);
    *shared* is *patterns* without the tool-name openers.

    Without *partial*, ``pattern.search(text, pos)`` for the pattern with the set's names in
    it. With *partial*, the first place where one matches whole or is cut by the end of the
    text (the text that completes it may come: then it is the first opener, whatever it
    holds, as in ``<get_weather note=[TOOL_CALLS]``; ``regex`` would answer the whole one
    after it), the whole one first at one place."""
    if names is None:
        m = find_opener(*patterns.get(blocks_only), text, pos)
        return patterns.cut(text, pos, len(text) + 1 if m is None else m.start(),
                            blocks_only) or m if partial else m
    line = names.line_start(text, pos)
    m = names.find_whole(patterns, text, pos, blocks_only, line, shared if partial else None)
    if not partial:
        return m
    if m is not None and m.partial and m.start() > pos:
        # a cut opener whose own text holds that one's whole head starts before it
        m = shared.cut_before(text, pos, m.start(), blocks_only) or m
    # What find_whole found cut has a whole head: no cut one whose head is cut comes before
    # it, nor before a whole one (it would hold that one's head).
    cut = shared.cut(text, pos, len(text) + 1, blocks_only) if m is None else None
    first = m or cut
    named = names.find_cut(text, pos, len(text) + 1 if first is None else first.start(),
                           not blocks_only, line)
    return named or first
