"""Generated worst cases: a long run of one character class followed by a run of another,
through every entry point. Every input of n characters must cost O(n); the budget asserted
(50 ms of this process's CPU time per KB) is far above what linear code needs and far below
what the quadratic cases took (8 000 digits then one letter: 2.2 s). CPU time, not wall time:
other work on a busy machine must not make this test fail."""

from __future__ import annotations

import time

import pytest
import toolcodec as codec
from toolcodec import kindaxml

CLASSES = ["9", "a", " ", '"', "'", "\\", "{", "}", "[", "]", ",", ":", "<", ">", "&", "-", ".",
           "/", "*", "é", "\u200f", "\n", "<a>", "</a>", "<tool_call>", '{"a":', '"a",', "1,",
           "[1,", "e", "0x", "#", "=", "(", "`", "<!--", "<![CDATA[", "```json\n", "<think>"]
RUN = 4096  # characters per run: the quadratic cases needed a few thousand to show
BUDGET_S_PER_KB = 0.05
TOOLS = [{"name": "f", "parameters": {"type": "object", "properties": {
    "a": {"type": "string"}, "n": {"type": "integer"}}}}]
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
            start = time.process_time()
            entry(text)
            took = time.process_time() - start
            if took > budget:
                slow.append(f"{name}: {first!r}×{RUN} + {second!r}×{RUN} took {took:.2f} s")
    assert not slow, "\n".join(slow)


# -- the openers' scan: the prefilter changes the cost, never the answer --------------------

import random  # noqa: E402

import regex  # noqa: E402
from toolcodec.bracket_depth import bracket_depth  # noqa: E402
from toolcodec.engine import compile_openers  # noqa: E402
from toolcodec.formats.table import MARKER_FORMATS  # noqa: E402
from toolcodec.opener_scan import find_opener  # noqa: E402
from toolcodec.regex_trie import trie_pattern  # noqa: E402

_TOKENS = sorted({t for f in MARKER_FORMATS for t in f.openers + f.closers})
_PIECES = _TOKENS + [
    "<", "[", "{", "`", "```", "```json\n", "\n", " ", "  ", "f", "get", "get_weather", "g",
    "<think>", "<seed:think>", "<tool_call>", "<tool>", "<function=", "<function=f>", '"',
    '"name"', '"arguments"', ":", "(", "[f(", "[get_weather (", "<f>", "<f ", "<f/>", "<a>",
    "<|end|>", "<|start|>assistant", "<|channel|>", "analysis", "commentary to=f",
    "<|message|>", "<|inner_prefix|>", "<|channel>thought", "<city>", "x", "é", "\t", ":\n",
]
_OPENER_SETS = [
    (["f", "get_weather"], None, {"f": ["a", "city"], "get_weather": ["city"]}),
    (["get_weather", "g"], frozenset({"pythonic", "tool_tag", "json"}), {"g": ["city"]}),
    ([], None, {}),
    (["f"], frozenset({"hermes", "harmony", "kimi_k2", "mistral"}), {"f": ["x"]}),
    (["f"], frozenset({"tool_tag"}), {"f": ["city"]}),
]


def test_find_opener_answers_what_the_full_pattern_search_does() -> None:
    rng = random.Random(11)
    for names, formats, parameters in _OPENER_SETS:
        openers = compile_openers(names, formats, parameters)
        for _ in range(1500):
            text = "".join(rng.choice(_PIECES) for _ in range(rng.randint(0, 12)))
            pos = rng.randint(0, len(text))
            for partial in (False, True):
                for pattern, first in ((openers.pattern, openers.first), openers.blocks_only):
                    want = pattern.search(text, pos, partial=partial)
                    got = find_opener(pattern, first, text, pos, partial)
                    assert (None if want is None else (want.span(), want.lastgroup,
                                                       want.partial)) \
                        == (None if got is None else (got.span(), got.lastgroup, got.partial)), (
                            names, formats, text, pos, partial)
                blocks = openers.blocks_only[0].search(text, pos, partial=partial)
                assert blocks is None or blocks.lastgroup not in ("json", "fence", "pycall")


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
    from toolcodec.engine import MAX_CANDIDATES

    fences = "```json\n{}\n" * (MAX_CANDIDATES + 5)
    calls = '["f"(a="x")] [f(a="x")] <f><a>y</a></f> {"name": "f", "arguments": {"a": "z"}}'
    result = CODEC.decode(fences + calls)
    assert [(c.name, c.arguments) for c in result.calls] == [("f", {"a": "y"})]
    assert result.content.startswith("```json") and '{"name": "f"' in result.content


def test_a_tool_tag_ends_where_walking_its_tags_one_at_a_time_ends_it() -> None:
    from toolcodec.engine import _Open, _tag_pattern

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
    engine = CODEC.engine()
    for _ in range(4000):
        text = "<f>" + "".join(rng.choice(pieces) for _ in range(rng.randint(0, 14)))
        engine.text = text
        cur = _Open("tool_tag", 0, 0, 0, "f")
        assert engine._tool_tag_end(cur, True) == walked(text), text
