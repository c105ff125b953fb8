"""Properties of ``decode`` over generated text: it never raises and never loses text."""

from __future__ import annotations

import sys

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st
from toolcodec import errors
from toolcodec.decoding.codec import ToolCallCodec
from toolcodec.decoding.prose_reader import ProseReader
from toolcodec.repair.normalize import replace_surrogates

from tests.test_decode import TOOLS

OPEN_TOOL = {"name": "anything", "parameters": {"type": "object"}}
CODEC = ToolCallCodec([*TOOLS, OPEN_TOOL])
SETTINGS = settings(max_examples=200)

FRAGMENTS = [
    "<tool_call>", "</tool_call>", "</tool_", "<think>", "</think>", "<tool>", "</tool>",
    "<function=get_weather>", "<function=", "</function>", "<parameter=city>", "</parameter>",
    "<get_weather>", "</get_weather>", "<city>", "</city>", "<set_alarm ", "{", "}", "[", "]",
    '"name"', ": ", ",", '"get_weather"', '"arguments"', '{"city": "Oslo"}', "```json\n", "```",
    "'", '"', "\\", "\x00", "\ud800", "\udfff", "\u200f", "שלום", "<|python_tag|>", " ", "\n",
    '{"name": "get_weather", "arguments": {"city": "Oslo"}}', "NaN", "1 + 2", "true", "yes",
]
any_char = st.characters(blacklist_categories=())  # includes lone surrogates and NUL
model_text = st.one_of(
    st.text(any_char, max_size=200),
    st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(any_char, max_size=8)),
             max_size=40).map("".join),
)


def check_spans(text: str, result) -> None:
    spans = result.spans
    assert spans[0].start == 0 if text else spans == []
    pos = 0
    for span in spans:
        assert span.start == pos and span.end > span.start, spans
        pos = span.end
    assert pos == len(text)
    kept = "".join(text[s.start:s.end] for s in spans if s.kind in ("text", "markup"))
    assert result.content == replace_surrogates(kept.strip())[0]
    call_spans = {(s.start, s.end) for s in spans if s.kind == "call"}
    assert {c.span for c in result.calls} <= call_spans
    assert (result.reasoning is not None) == any(s.kind == "reasoning" for s in spans)


@SETTINGS
@given(model_text)
def test_decode_never_raises_and_spans_partition(text):
    result = CODEC.decode(text)
    assert errors.INTERNAL_ERROR not in [e.code for e in result.errors], result.errors
    assert result.ok == (not result.errors)
    check_spans(text, result)
    orjson.dumps(result.to_dict())  # lone surrogates come back as U+FFFD
    for call in result.calls:
        assert is_subsequence(call.repairs, result.repairs)


def is_subsequence(part: list[str], whole: list[str]) -> bool:
    it = iter(whole)
    return all(x in it for x in part)


json_scalar = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**63), 2**63 - 1),
    st.floats(allow_nan=False, allow_infinity=False),
    st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\u200e\u200f"
                          "\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"),
            max_size=20).filter(lambda s: "</tool_call>" not in s),
)
json_value = st.recursive(json_scalar, lambda inner: st.one_of(
    st.lists(inner, max_size=4),
    st.dictionaries(st.text("abcxyz_", min_size=1, max_size=6), inner, max_size=4)),
    max_leaves=20)
arguments = st.dictionaries(st.text("abcdefgh_", min_size=1, max_size=8), json_value,
                            max_size=6)


@SETTINGS
@given(st.lists(arguments, min_size=1, max_size=3), st.booleans())
def test_wellformed_hermes_round_trips_without_repairs(arg_list, pretty):
    option = orjson.OPT_INDENT_2 if pretty else 0
    bodies = [orjson.dumps({"name": "anything", "arguments": a}, option=option).decode()
              for a in arg_list]
    blocks = [f"<tool_call>\n{body}\n</tool_call>" for body in bodies]
    result = CODEC.decode("Calling now.\n" + "\n".join(blocks))
    assert result.ok, result.errors
    assert [(c.name, c.arguments) for c in result.calls] == [("anything", a) for a in arg_list]
    assert result.repairs == [] and all(c.repairs == [] for c in result.calls)
    assert result.content == "Calling now."


def test_one_megabyte_input_completes():
    chunk = ('Some prose { "name": [1, 2, {"a": "<tool_call>'
             + '{"name": "get_weather", "arguments": {"city": "Oslo"}}</tool_call> ` ``` <think>x')
    text = (chunk * (1_000_000 // len(chunk) + 1))[:1_000_000]
    result = CODEC.decode(text)
    assert errors.INTERNAL_ERROR not in [e.code for e in result.errors]
    check_spans(text, result)


def test_one_megabyte_of_braces_completes():
    text = '{"name": ' * 120_000
    result = CODEC.decode(text)
    assert result.calls == [] and result.content == text.strip()


# -- a JSON value in prose: read whole at C speed when the text is final ----------------------

_JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | st.floats(allow_nan=False)
    | st.text(st.sampled_from('ab "\'\\{}[],:\n\u00e9'), max_size=6),
    lambda inner: st.lists(inner, max_size=3)
    | st.dictionaries(st.sampled_from(["name", "arguments", "city", "a", "b\"c"]), inner,
                      max_size=3), max_leaves=10)
_CALL_VALUES = st.builds(lambda name, args: {"name": name, "arguments": args},
                         st.sampled_from(["get_weather", "set_alarm", "nope"]),
                         st.fixed_dictionaries({}, optional={"city": st.text(max_size=4),
                                                             "hour": st.integers(0, 30)}))
_SPOIL = ["", "", ",", "}", "{", "'", '"', "]", "\\", "\n"]  # a value made invalid, or not


class _NoWholeValue:
    def raw_decode(self, text: str, at: int) -> tuple[object, int]:
        raise ValueError("the bracket scan alone")


@given(st.sampled_from(["", "Calling now ", "Sure: ", "x ```\n", "a [b] "]),
       st.one_of(_JSON_VALUES, _CALL_VALUES), st.sampled_from(_SPOIL),
       st.integers(0, 80), st.sampled_from(["", " done.", "\n[1]", " {", "```"]))
def test_a_whole_json_value_in_prose_reads_as_the_bracket_scan_reads_it(
        before: str, value: object, spoil: str, at: int, after: str) -> None:
    body = orjson.dumps(value).decode()
    at = min(at, len(body))
    text = before + body[:at] + spoil + body[at:] + after
    module = sys.modules[ProseReader.__module__]
    whole = module._WHOLE_VALUE
    read = CODEC.decode(text).to_dict()
    module._WHOLE_VALUE = _NoWholeValue()
    try:
        assert CODEC.decode(text).to_dict() == read
    finally:
        module._WHOLE_VALUE = whole
