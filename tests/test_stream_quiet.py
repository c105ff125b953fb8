"""A stream's quiet prose (a delta that cannot begin markup, released without the opener
search: ``ProseReader._quiet``) gives what reading it gives, at every cut: the heads of
openers made of letters (a registered family's, ``functools``), a bare call's line, end
tokens, prose JSON and Python calls, with chunk edges falling inside each."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from toolcodec import ToolCallCodec
from toolcodec.formats import registry
from toolcodec.formats.registry import Family, FormatRead, MarkerFormat, register

from tests.test_stream import check

TOOLS = [{"name": "get_weather", "parameters": {"type": "object", "properties": {
    "city": {"type": "string"}}}}]
CODEC = ToolCallCodec(TOOLS)

TEXTS = [
    "The weather of the day is fine for a walk, of course.",
    "Call it with functools [{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}]",
    "functools",
    "A plain function call, and then<|role_sep|> more.",
    "Checking now.\n  get_weather\n<city>Oslo</city>\nDone.",
    "Checking now.\n  get_weather and more words",
    "Done, see you.<|im_end|>",
    "Done, see you.</s>",
    'Use {"name": "get_weather", "arguments": {"city": "Oslo"}} to call it.',
    "Python: [get_weather(city='Oslo')]",
    "Sure. <tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n"
    "</tool_call> and after it, prose of five words.",
    "Letters then a ```fence```, (parentheses) and \\backslashes\\ with 'quotes'.",
]


@pytest.mark.parametrize("text", TEXTS)
def test_quiet_prose_reads_as_the_batch_at_every_cut(text):
    for cut in range(len(text) + 1):
        check(CODEC, text, [text[:cut], text[cut:]])
    for size in (1, 3, 7):
        check(CODEC, text, [text[i:i + size] for i in range(0, len(text), size)])


def _read(body: str, *, closed: bool) -> FormatRead:
    found = FormatRead()
    name, _, arguments = body.strip().partition(" ")
    found.calls.append((name, arguments or "{}"))
    return found


@pytest.fixture
def letters_family():
    register(Family("plainword", markers=[MarkerFormat(
        "plainword", ("CALLTOOL",), ("ENDTOOL",), body=_read)]))
    yield
    registry.unregister("plainword")


def test_an_opener_made_of_letters_is_never_released_as_quiet_prose(letters_family):
    codec = ToolCallCodec(TOOLS)
    # no bracket, quote or line break anywhere: only the openers' own search sees the call
    # (the opener further from the end than any opener's length: only a search finds it)
    text = ("I will CALLTOOL get_weather ENDTOOL now, " + "and a long stretch of words " * 4
            + "CALLTOO and CALL.")
    assert [(c.name, c.format) for c in codec.decode(text).calls] == [("get_weather",
                                                                       "plainword")]
    for cut in range(len(text) + 1):
        check(codec, text, [text[:cut], text[cut:]])
    for size in (1, 2, 5):
        check(codec, text, [text[i:i + size] for i in range(0, len(text), size)])


_WORDS = st.sampled_from([
    "a", " ", "of", "for ", "f", "fun", "functools", "function call", "<|role_sep|>", "\n",
    "  ", "get_weather", "<city>", "Oslo", "</city>", "<|im_end|>", "</s>", "{", "}", "[", "]",
    '"name"', ": ", '"get_weather"', '"arguments"', "(", ")", "'", "é", "\u3000", "`"])


@settings(max_examples=300)
@given(st.lists(_WORDS, max_size=30).map("".join), st.lists(st.integers(1, 6), min_size=1))
def test_generated_prose_reads_as_the_batch(text, sizes):
    parts, at, i = [], 0, 0
    while at < len(text):
        size = sizes[i % len(sizes)]
        parts.append(text[at:at + size])
        at, i = at + size, i + 1
    check(CODEC, text, parts)


# Quiet prose is found by one search for the characters markup may begin with (the break
# characters, those the openers start with, those a call marker starts with): each kind of
# them on its own, where no other kind covers it.
_HERMES_JSON = ToolCallCodec(TOOLS, formats=("hermes", "json"))  # no opener starts with "f"
_NAMED_IN = ToolCallCodec([{"name": "météo", "parameters": {"type": "object", "properties": {
    "city": {"type": "string"}}}}])  # a name the shared patterns cannot read: compiled in


@pytest.mark.parametrize(("codec", "text"), [
    (_HERMES_JSON, 'Call it, functools [{"name": "get_weather", "arguments": {"city": "Oslo"}}]'),
    (_HERMES_JSON, "The word is functools"),
    (_HERMES_JSON, "A stretch of words of fun and more funct"),
    (_NAMED_IN, "Checking now.\n  météo\n<city>Oslo</city>\nDone."),
    (_NAMED_IN, "Checking now.\n  météo and more words\n<city>Oslo</city>"),
    (_NAMED_IN, "Checking now, met with météo.\nmétéo\n<city>Oslo</city>"),
    (CODEC, "Checking now.\n  get_weather\n<city>Oslo</city>\nDone."),
    (CODEC, "Checking now.\n\t get_weather \n<city>Oslo</city>"),
    (CODEC, "Checking now.\nget_weather\n<city>Oslo</city>"),
    (CODEC, "Checking now. \n get_weather\n<city>Oslo</city>"),
])
def test_each_kind_of_loud_character_stops_quiet_prose(codec, text):
    for cut in range(len(text) + 1):
        check(codec, text, [text[:cut], text[cut:]])
    for size in (1, 2, 3, 5):
        for skip in range(size):  # every alignment of the chunks
            parts = [text[:skip]] + [text[i:i + size] for i in range(skip, len(text), size)]
            check(codec, text, [p for p in parts if p])


# Reasoning deltas that no closer can start in are sent without the closer search
# (``ReasoningReader._think_quiet``): the closer (of ``<``, ``[`` or letters), a call written
# while thinking, a call on a line of its own in reasoning the prompt opened, an answer
# channel, each at every cut. (Every row's call openers start with a closer's first
# character today, so only that guard is seen to fail here; the others are for a row where
# they would not.)
_CALL = '<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>'
_PREFILLED = ToolCallCodec(TOOLS, starts_in_reasoning=True)


@pytest.mark.parametrize(("codec", "text"), [
    (CODEC, "<think>Plan: check the weather, then answer.</think>Sure.\n" + _CALL),
    (CODEC, "<think>First a draft:\n" + _CALL + "\nno, later.</think>Done."),
    (CODEC, "<think>A closer cut: </thin and on </think > then </think>after"),
    (CODEC, "<think>Never closed, a long line of thought with no end"),
    (_PREFILLED, "The user wants the weather; calling it.\n" + _CALL),
    (_PREFILLED, "Drafting:\n" + _CALL + "\n</think>Then the answer."),
    (_PREFILLED, "Thinking about it.</think>\n" + _CALL),
    (ToolCallCodec(TOOLS, formats=("granite",)),  # a closer made of letters
     "Here is my thought process: How is Oslo? Hmm, Here is my response: It is sunny."),
    (ToolCallCodec(TOOLS, formats=("mistral",)), "[THINK]Oslo, then [/THIN [/THINK]Sunny."),
    (ToolCallCodec(TOOLS, formats=("harmony",)),
     "<|channel|>analysis<|message|>Think of Oslo.<|end|><|start|>assistant<|channel|>final"
     "<|message|>It is sunny.<|return|>"),
])
def test_quiet_reasoning_reads_as_the_batch_at_every_cut(codec, text):
    for cut in range(len(text) + 1):
        check(codec, text, [text[:cut], text[cut:]])
    for size in (1, 2, 3, 5):
        for skip in range(size):
            parts = [text[:skip]] + [text[i:i + size] for i in range(skip, len(text), size)]
            check(codec, text, [p for p in parts if p])
