"""Generated worst cases: a long run of one character class followed by a run of another,
through every entry point. Every input of n characters must cost O(n); the budget asserted
(50 ms of this process's CPU time per KB) is far above what linear code needs and far below
what the quadratic cases took (8 000 digits then one letter: 2.2 s). CPU time, not wall time:
other work on a busy machine must not make this test fail; and the garbage collector is off
while an entry is timed: a full collection of what a whole test session keeps alive cost
0.4 s once, inside one of them.

The openers' search is held tighter, by counting rather than timing: for runs of what
looks like an opener (``[NAME``, ``<NAME``, a name at a line's start, a tag or call whose
name is no tool's), its ``regex``/``re`` calls and the characters they cover stay within a
few per character of input, at every size, in one text and streamed."""

from __future__ import annotations

import gc
import re
import time

import pytest
import regex
import toolcodec as codec
from toolcodec import kindaxml

CLASSES = ["9", "a", " ", '"', "'", "\\", "{", "}", "[", "]", ",", ":", "<", ">", "&", "-", ".",
           "/", "*", "é", "\u200f", "\n", "<a>", "</a>", "<tool_call>", '{"a":', '"a",', "1,",
           "[1,", "e", "0x", "#", "=", "(", "`", "<!--", "<![CDATA[", "```json\n", "<think>",
           # what looks like a tool-name opener: a tool's name, or another's, where one starts
           "[f", "<f", "[get_weather", "f\n", "[a(", "<a b>", "g\n<a>\n", "<f x=[a("]
RUN = 4096  # characters per run: the quadratic cases needed a few thousand to show
BUDGET_S_PER_KB = 0.05
TOOLS = [{"name": "f", "parameters": {"type": "object", "properties": {
    "a": {"type": "string"}, "n": {"type": "integer"}}}},
    {"name": "get_weather", "parameters": {"type": "object", "properties": {
        "city": {"type": "string"}}}}]
CODEC = codec.ToolCallCodec(TOOLS)


def run(cls: str) -> str:
    return cls * max(1, RUN // len(cls))


ENTRIES = {
    "repair_json": codec.repair_json,
    "decode in an envelope": lambda t: CODEC.decode(
        '<tool_call>{"name": "f", "arguments": {"a": ' + t + "}}</tool_call>"),
    "decode as prose": CODEC.decode,
    "decode an XML parameter": lambda t: CODEC.decode("<f><a>" + t + "</a></f>"),
    "validate": lambda t: CODEC.validate("f", t),
    "kindaxml": kindaxml.parse,
    "stream": lambda t: streamed(t),
}


def streamed(text: str) -> None:
    s = CODEC.stream()
    for i in range(0, len(text), 16):
        s.feed(text[i:i + 16])
    s.close()


@pytest.mark.parametrize("first", CLASSES, ids=repr)
def test_runs_of_each_class_followed_by_each_other_class_are_linear(first: str) -> None:
    slow = []
    for second in CLASSES:
        text = run(first) + run(second)
        budget = BUDGET_S_PER_KB * len(text) / 1024
        for name, entry in ENTRIES.items():
            gc.disable()
            try:
                start = time.process_time()
                entry(text)
                took = time.process_time() - start
            finally:
                gc.enable()
            if took > budget:
                slow.append(f"{name}: {first!r}×{RUN} + {second!r}×{RUN} took {took:.2f} s")
    assert not slow, "\n".join(slow)


# -- the openers' search: each character read a bounded number of times ---------------------

# Runs of what the openers' search stops at, or looks at twice: no tool's call among them.
OPENER_RUNS = ["[", "{", "<", "`", "\n", "[{", "<|", "<a>", "<a", "[f", "<f", "[get_weather",
               "<get_weather", "[get_weathe", "<get_weathe", "[get_weather_(", "[a(", "<a b>",
               "<a\n", "f\n", "f:\n", "get_weather\n", "<get_weather\n", "g\n<a>\n",
               "f\n<x>\n", "<f x=[a(", "<tool_call>", "[f (", "<f ", "```json\n", "<think"]
# Per character of input, at most: searches and matches, and the characters they cover (a
# stream in 16-character chunks looks again at what the last chunk may have cut).
CALLS_PER_CHAR = {"decode": 0.6, "stream": 1.5}
COVERED_PER_CHAR = {"decode": 3, "stream": 8}


class _Counted:
    """A compiled pattern whose searches and matches are counted, with the characters each
    one covered (from where it started to the end of its match, or of the text)."""

    def __init__(self, pattern: Any, counts: list[int]) -> None:
        self._pattern, self._counts = pattern, counts
        self.pattern = pattern.pattern

    def search(self, text: str, pos: int = 0, *args: Any, **kwargs: Any) -> Any:
        m = self._pattern.search(text, pos, *args, **kwargs)
        self._count(pos, len(text) if m is None else m.end())
        return m

    def match(self, text: str, pos: int = 0, *args: Any, **kwargs: Any) -> Any:
        m = self._pattern.match(text, pos, *args, **kwargs)
        self._count(pos, pos + 1 if m is None else m.end())
        return m

    def fullmatch(self, text: str, pos: int = 0, *args: Any, **kwargs: Any) -> Any:
        m = self._pattern.fullmatch(text, pos, *args, **kwargs)
        self._count(pos, pos + 1 if m is None else m.end())
        return m

    def finditer(self, text: str, pos: int = 0, endpos: int | None = None) -> Any:
        end = len(text) if endpos is None else endpos
        self._count(pos, end)
        for m in self._pattern.finditer(text, pos, end):
            self._count(m.start(), m.start() + 1)
            yield m

    def _count(self, start: int, end: int) -> None:
        self._counts[0] += 1
        self._counts[1] += max(1, end - start)


@pytest.fixture
def counted(monkeypatch: pytest.MonkeyPatch) -> tuple[list[int], Any]:
    """[calls, characters covered] of every pattern the openers' search uses, from now on,
    and a codec whose openers use them (its tool names' patterns are looked up anew)."""
    from toolcodec.scanning import opener_scan

    counts = [0, 0]
    for name, value in vars(opener_scan).items():
        if isinstance(value, (re.Pattern, regex.Pattern)):
            monkeypatch.setattr(opener_scan, name, _Counted(value, counts))
    get = opener_scan.Patterns.get
    monkeypatch.setattr(opener_scan.Patterns, "get", lambda self, blocks_only=False: tuple(
        _Counted(p, counts) for p in get(self, blocks_only)))
    for name in ("_one_named", "_named_tail", "_bare_tail", "_bare_at"):
        made = getattr(opener_scan, name)
        monkeypatch.setattr(opener_scan, name, lambda *a, made=made: _wrapped(made(*a), counts))
    return counts, codec.ToolCallCodec(TOOLS)


def _wrapped(made: Any, counts: list[int]) -> Any:
    if isinstance(made, dict):
        return {k: _Counted(p, counts) for k, p in made.items()}
    return _Counted(made, counts)


@pytest.mark.parametrize("construct", OPENER_RUNS, ids=repr)
def test_the_openers_search_reads_each_character_a_bounded_number_of_times(
        construct: str, counted: tuple[list[int], Any]) -> None:
    """What the attempt that split the openers did to runs of ``[NAME`` (its search for tool
    names ran again at every ``[`` and name: one call per character) would fail here."""
    counts, c = counted
    for size in (RUN, 4 * RUN):
        text = construct * (size // len(construct))
        for how in ("decode", "stream"):
            counts[:] = [0, 0]
            if how == "decode":
                c.decode(text)
            else:
                s = c.stream()
                for i in range(0, len(text), 16):
                    s.feed(text[i:i + 16])
                s.close()
            calls, covered = counts
            assert calls <= CALLS_PER_CHAR[how] * len(text), (how, size, calls)
            assert covered <= COVERED_PER_CHAR[how] * len(text), (how, size, covered)


# -- the openers' scan: the prefilter changes the cost, never the answer --------------------

import random  # noqa: E402
from typing import Any  # noqa: E402

from toolcodec.formats.table import MARKER_FORMATS  # noqa: E402
from toolcodec.scanning.bracket_depth import bracket_depth  # noqa: E402
from toolcodec.scanning.opener_scan import find_opener  # noqa: E402
from toolcodec.scanning.openers import compile_openers  # noqa: E402
from toolcodec.scanning.regex_trie import trie_pattern  # noqa: E402

_TOKENS = sorted({t for f in MARKER_FORMATS for t in f.openers + f.closers})
_PIECES = _TOKENS + [
    "<", "[", "{", "`", "```", "```json\n", "\n", " ", "  ", "f", "get", "get_weather", "g",
    "<think>", "<seed:think>", "<tool_call>", "<tool>", "<function=", "<function=f>", '"',
    '"name"', '"arguments"', ":", "(", "[f(", "[get_weather (", "<f>", "<f ", "<f/>", "<a>",
    "<|end|>", "<|start|>assistant", "<|channel|>", "analysis", "commentary to=f",
    "<|message|>", "<|inner_prefix|>", "<|channel>thought", "<city>", "x", "é", "\t", ":\n",
    # what looks like a tool-name opener but names no tool, or is cut short
    "[a(", "<a b>", "[get(", "<get>", "<get_weatherx>", "[f_(", "get_weather.v2", "-",
    "<f x=[a(", "a\n<city>", "g\n<a>", "f:\n  <x>", "<g\n", "\n<", "<f\n<a/>", "[ f",
    "<dots_function_call>", "<function name=\"", "[TOOL_CALLS]",
]
_OPENER_SETS = [
    (["f", "get_weather"], None, {"f": ["a", "city"], "get_weather": ["city"]}),
    (["get_weather", "g"], frozenset({"pythonic", "tool_tag", "json"}), {"g": ["city"]}),
    ([], None, {}),
    (["f"], frozenset({"hermes", "harmony", "kimi_k2", "mistral"}), {"f": ["x"]}),
    (["f"], frozenset({"tool_tag"}), {"f": ["city"]}),
    (["get", "get_weather", "get_weather.v2", "f-x"], None, {"get": ["a", "a-b", "9"]}),
    (["tool_call", "think", "a"], frozenset({"tool_tag", "pythonic", "hermes", "minimax"}),
     {"a": ["city"], "think": ["x"]}),
    (["f", "get weather"], None, {"f": ["a"]}),  # a name with a blank: compiled in
]


def _answer(m: Any) -> Any:
    """What the engine reads of a match: where it is, which opener, its name (a cut
    opener: only where it starts; an empty one where the text ends: none)."""
    if m is None or (m.partial and m.start() == len(m.string)):
        return None
    if m.partial:
        return m.start(), True
    return m.span(), m.lastgroup, m.group(m.lastgroup), False


def _first_opener(pattern: Any, text: str, pos: int, partial: bool) -> Any:
    """What the engine's search must answer, by trying *pattern* at every place in turn:
    the first where it matches whole or (with *partial*) is cut by the end of the text."""
    for at in range(pos, len(text) + 1):
        m = pattern.match(text, at, partial=partial)
        if m is not None:
            return m
    return None


def _prefiltered(pattern: Any, first: Any, text: str, pos: int, partial: bool) -> Any:
    """The search as it was before tool names were shared: the prefilter searched with
    *partial* (``regex`` answers a whole match anywhere before a cut one), the pattern
    tried where it matched."""
    while True:
        hint = first.search(text, pos, partial=partial)
        if hint is None:
            return None
        m = pattern.match(text, hint.start(), partial=partial)
        if m is not None:
            return m
        pos = hint.start() + 1


def test_the_openers_search_answers_what_trying_every_place_does() -> None:
    """The search (a prefilter; the tool names looked up in sets, the patterns shared per
    set of formats; a name they cannot read compiled in) answers what trying the pattern
    with the names compiled in at every place does: for all the openers and without the
    prose candidates, in a whole text (``pattern.search``) and in one cut anywhere, where a
    cut opener comes first if it starts first (``regex`` would answer a whole one after
    it: ``<f x=[a(`` at the end)."""
    rng = random.Random(11)
    for names, formats, parameters in _OPENER_SETS:
        openers = compile_openers(names, formats, parameters)
        own = compile_openers(names, formats, parameters, shared=False)
        assert own.names is None
        assert (openers.names is None) == (not names or " " in "".join(names))
        for _ in range(1500):
            text = "".join(rng.choice(_PIECES) for _ in range(rng.randint(0, 12)))
            text = text[:rng.randint(0, len(text))] if rng.random() < 0.5 else text
            pos = rng.randint(0, len(text))
            for partial in (False, True):
                for blocks_only in (False, True):
                    pattern, first = own.patterns.get(blocks_only)
                    want = _answer(_first_opener(pattern, text, pos, partial))
                    if not partial:
                        assert _answer(pattern.search(text, pos)) == want
                        assert _answer(find_opener(pattern, first, text, pos)) == want
                    # Names compiled in: regex's own order where several are cut (a whole
                    # head first: the search before the names were shared), never past
                    # where the place-by-place answer holds back from.
                    old = _prefiltered(pattern, first, text, pos, partial)
                    assert _answer(own.find(text, pos, partial, blocks_only)) == _answer(old)
                    assert want is None or old is None or (
                        want[0] if want[-1] else want[0][0]) <= old.start(), (names, text, pos)
                    got = openers.find(text, pos, partial, blocks_only)
                    assert _answer(got) == (want if openers.names else _answer(old)), (
                        names, formats, text, pos, partial)
                    if blocks_only and want is not None and not want[-1]:
                        assert want[1] not in ("json", "fence", "pycall")


def test_a_cut_opener_is_found_however_far_back_it_starts() -> None:
    """Long cut openers (a bare call's head with its blanks, a tag's attributes, the start
    marker past its blanks), and whole openers inside cut ones."""
    parameters = {"get_weather": ["city_name"], "f": ["a"], "function": ["a"]}
    openers = compile_openers(["get_weather", "f", "function"], None, parameters)
    own = compile_openers(["get_weather", "f", "function"], None, parameters, shared=False)
    texts = ["x\n get_weather :\t\n" + " \n" * 30 + "<city_na",
             "<get_weather " + "a" * 63, "[" + " " * 16 + "get_weath",
             " \n" * 32 + "to=functions", "pre <f x=[a( [f " + "y" * 40,
             "<" + "f" * 130, "[" + "g" * 129, "<f x=[TOOL_CALLS]", "<f x={\"name\": 1",
             "<|message_sep|>\n\nfunction call<|ro", "x\nfunction\n  <a",
             "<|message_sep|>\n\nfunction\n<a"]
    for text in texts:
        for pos in (0, 1, len(text) // 2):
            want = _first_opener(own.patterns.get()[0], text, pos, True)
            assert _answer(openers.find(text, pos, True)) == _answer(want), (text, pos)
            assert want is None or len(text) - want.start() < openers.names.longest


def test_a_new_tool_set_compiles_nothing() -> None:
    """Tool sets with plain names share the openers compiled for their formats; a name
    that the shared patterns cannot read has its own."""
    one = compile_openers(["f"], frozenset({"hermes", "tool_tag"}), {"f": ["a"]})
    two = compile_openers(["g", "h.v2"], frozenset({"tool_tag", "hermes"}), {"g": ["b"]})
    assert one.patterns is two.patterns and one.names != two.names
    assert compile_openers(["f"], frozenset({"hermes"})).patterns is not one.patterns
    odd = compile_openers(["f", "a b"], frozenset({"hermes", "tool_tag"}))
    assert odd.names is None and odd.patterns is not one.patterns
    assert compile_openers(["x" * 200], frozenset({"tool_tag"})).names is None


def test_the_blanks_spelled_out_for_re_are_regex_blanks() -> None:
    """The shared patterns are read by ``re`` and ``regex`` both: what follows a tag's name
    is one class of blanks for both."""
    import sys

    from toolcodec.scanning.opener_scan import SPACE

    every = "".join(chr(i) for i in range(sys.maxunicode + 1) if not 0xD800 <= i <= 0xDFFF)
    assert regex.findall(r"\s", every) == re.findall(f"[{SPACE}]", every)


def test_a_prefix_tree_matches_what_the_flat_alternation_matches() -> None:
    rng = random.Random(5)
    words = _TOKENS + ["a", "ab", "abc", "b", "<", "<|", "<f"]
    flat = regex.compile("|".join(regex.escape(w) for w in sorted(words, key=len,
                                                                     reverse=True)))
    tree = regex.compile(trie_pattern(words))
    for _ in range(3000):
        text = "".join(rng.choice(words + ["x", "|", "a"]) for _ in range(rng.randint(0, 6)))
        for partial in (False, True):
            assert [m.span() for m in flat.finditer(text, partial=partial)] == \
                [m.span() for m in tree.finditer(text, partial=partial)], text
    assert regex.fullmatch(trie_pattern([]), "") is None


def test_bracket_depth_is_the_clamped_walk() -> None:
    rng = random.Random(3)
    for _ in range(5000):
        text = "".join(rng.choice("{}[]ab") for _ in range(rng.randint(0, 30)))
        begin = rng.randint(0, len(text))
        end = rng.randint(begin, len(text))
        depth = start = rng.randint(0, 4)
        for ch in text[begin:end]:
            depth = depth + 1 if ch in "{[" else max(0, depth - 1) if ch in "}]" else depth
        assert bracket_depth(text, begin, end, start) == depth, (text, begin, end, start)


def test_past_the_candidate_limit_prose_json_is_text_and_blocks_still_open() -> None:
    from toolcodec.decoding.engine import MAX_CANDIDATES

    fences = "```json\n{}\n" * (MAX_CANDIDATES + 5)
    calls = '["f"(a="x")] [f(a="x")] <f><a>y</a></f> {"name": "f", "arguments": {"a": "z"}}'
    result = CODEC.decode(fences + calls)
    assert [(c.name, c.arguments) for c in result.calls] == [("f", {"a": "y"})]
    assert result.content.startswith("```json") and '{"name": "f"' in result.content


def test_a_tool_tag_ends_where_walking_its_tags_one_at_a_time_ends_it() -> None:
    from toolcodec.formats.open_block import OpenBlock
    from toolcodec.formats.tool_tag import tag_pattern as _tag_pattern
    from toolcodec.formats.tool_tag import tool_tag_end

    def walked(text: str) -> tuple[int, int, bool]:
        depth, scan = 1, _tag_pattern("f").match(text, 0).end()
        for m in _tag_pattern("f").finditer(text, scan):
            if m.group("close"):
                depth -= 1
                if depth == 0:
                    return m.end(), m.end(), True
            elif not m.group().endswith("/>"):
                depth += 1
        return len(text), len(text), False

    rng = random.Random(9)
    pieces = ["<f>", "</f>", "<f/>", "<f x='1'/>", "</ f >", "< f>", "<f\n>", "<fx>", "</fx>",
              "<f a=>b>", "x", " ", "<", ">", "/", "<f", "</f", "\n"]
    for _ in range(4000):
        text = "<f>" + "".join(rng.choice(pieces) for _ in range(rng.randint(0, 14)))
        cur = OpenBlock("tool_tag", 0, 0, 0, "f")
        assert tool_tag_end(text, cur, True) == walked(text), text
