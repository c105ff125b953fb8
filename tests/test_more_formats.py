"""Apertus, FunctionGemma, Gemma 4, Step-3 and MiniCPM-5: outputs written the way each family's
chat template renders them, through ``decode`` and the stream (the same answer for every
chunking), unknown tools, cut outputs, and round trips through each reader."""

from __future__ import annotations

import json
import random

import orjson
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from toolcodec import ToolCallCodec
from toolcodec.formats import apertus, gemma, minicpm, step3

from tests.test_stream import check, chunkings

TOOLS = [
    {"name": "get_weather", "parameters": {"type": "object", "properties": {
        "city": {"type": "string"}, "days": {"type": "integer"}}, "required": ["city"]}},
    {"name": "search", "parameters": {"type": "object", "properties": {
        "q": {"type": "string"}, "tags": {"type": "array", "items": {"type": "string"}},
        "exact": {"type": "boolean"}}, "required": ["q"]}},
]
CODEC = ToolCallCodec(TOOLS)
WEATHER = ("get_weather", {"city": "Oslo", "days": 2})
SEARCH = ("search", {"q": "cats & dogs", "tags": ["a", "b"], "exact": True})
B = "\uff5c"  # Step-3's bar


def _step3(*calls: str, head: str = "function") -> str:
    inner = "\n".join(f"<{B}tool_call_begin{B}>{head}{f'<{B}tool_sep{B}>' if head else ''}"
                      f"{c}<{B}tool_call_end{B}>" for c in calls)
    return f"<{B}tool_calls_begin{B}>\n{inner}\n<{B}tool_calls_end{B}>"


_S3_WEATHER = ('<steptml:invoke name="get_weather">\n<steptml:parameter name="city">Oslo'
               '</steptml:parameter>\n<steptml:parameter name="days">2</steptml:parameter>\n'
               "</steptml:invoke>")
_S3_SEARCH = ('<steptml:invoke name="search">\n<steptml:parameter name="q">cats & dogs'
              '</steptml:parameter>\n<steptml:parameter name="tags">["a", "b"]'
              '</steptml:parameter>\n<steptml:parameter name="exact">true</steptml:parameter>\n'
              "</steptml:invoke>")
_MC_WEATHER = ('<function name="get_weather"><param name="city">Oslo</param>'
               '<param name="days">2</param></function>')
_MC_SEARCH = ('<function name="search"><param name="q">cats & dogs</param>'
              '<param name="tags">["a", "b"]</param><param name="exact">true</param></function>')
_FG_WEATHER = "<start_function_call>call:get_weather{city:<escape>Oslo<escape>,days:2}" \
              "<end_function_call>"
_FG_SEARCH = ("<start_function_call>call:search{exact:true,q:<escape>cats & dogs<escape>,"
              "tags:[<escape>a<escape>,<escape>b<escape>]}<end_function_call>")
_G4_WEATHER = '<|tool_call>call:get_weather{city:<|"|>Oslo<|"|>,days:2}<tool_call|>'
_G4_SEARCH = ('<|tool_call>call:search{exact:true,q:<|"|>cats & dogs<|"|>,'
              'tags:[<|"|>a<|"|>,<|"|>b<|"|>]}<tool_call|>')

# (format id, output, expected calls, expected content, expected reasoning)
EXAMPLES = [
    ("apertus", '<|tools_prefix|>[{"get_weather": {"city": "Oslo", "days": 2}}]<|tools_suffix|>',
     [WEATHER], "", None),
    ("apertus", 'I will look.<|tools_prefix|>[{"get_weather": {"city": "Oslo", "days": 2}}, '
                '{"search": {"q": "cats & dogs", "tags": ["a", "b"], "exact": true}}]'
                "<|tools_suffix|>", [WEATHER, SEARCH], "I will look.", None),
    ("functiongemma", _FG_WEATHER, [WEATHER], "", None),
    ("functiongemma", "Let me check. " + _FG_WEATHER + _FG_SEARCH, [WEATHER, SEARCH],
     "Let me check.", None),
    ("gemma4", _G4_WEATHER, [WEATHER], "", None),
    ("gemma4", "Checking both.\n" + _G4_WEATHER + _G4_SEARCH, [WEATHER, SEARCH],
     "Checking both.", None),
    ("step3", _step3(_S3_WEATHER), [WEATHER], "", None),
    ("step3", "Let me help.\n" + _step3(_S3_WEATHER, _S3_SEARCH), [WEATHER, SEARCH],
     "Let me help.", None),
    ("step3", "<think>Two lookups.</think>\n" + _step3(_S3_SEARCH), [SEARCH], "",
     "Two lookups."),
    ("minicpm", _MC_WEATHER, [WEATHER], "", None),
    ("minicpm", "Intro.\n" + _MC_WEATHER + "\n" + _MC_SEARCH + "\n", [WEATHER, SEARCH], "Intro.",
     None),
    ("minicpm", "<think>The user wants the weather.</think>\n" + _MC_WEATHER, [WEATHER], "",
     "The user wants the weather."),
]
IDS = [f"{e[0]}-{i}" for i, e in enumerate(EXAMPLES)]


def _calls(result) -> list[tuple[str, dict]]:
    return [(c.name, c.arguments) for c in result.calls]


@pytest.mark.parametrize("fmt, text, expected, content, reasoning", EXAMPLES, ids=IDS)
def test_each_output_decodes_with_its_format_and_prose(fmt, text, expected, content, reasoning):
    r = CODEC.decode(text)
    assert r.ok, r.errors
    assert _calls(r) == expected
    assert {c.format for c in r.calls} == {fmt}
    assert all(not c.repairs for c in r.calls)
    assert r.content == content
    assert r.reasoning == reasoning


@pytest.mark.parametrize("fmt, text, expected, content, reasoning", EXAMPLES, ids=IDS)
def test_stream_equals_batch_for_every_chunking(fmt, text, expected, content, reasoning):
    for parts in chunkings(text, random.Random(len(text))):
        check(CODEC, text, parts)


@pytest.mark.parametrize("fmt, text", [
    ("apertus", '<|tools_prefix|>[{"launch": {"target": "moon"}}]<|tools_suffix|>'),
    ("functiongemma", "<start_function_call>call:launch{target:<escape>moon<escape>}"
                      "<end_function_call>"),
    ("gemma4", '<|tool_call>call:launch{target:<|"|>moon<|"|>}<tool_call|>'),
    ("step3", _step3('<steptml:invoke name="launch"><steptml:parameter name="target">moon'
                     "</steptml:parameter></steptml:invoke>")),
    ("minicpm", '<function name="launch"><param name="target">moon</param></function>'),
])
def test_an_unknown_tool_is_an_error_and_its_block_stays_content(fmt, text):
    r = CODEC.decode("Going. " + text)
    assert not r.calls and [e.code for e in r.errors] == ["unknown_tool"]
    assert r.content == "Going. " + text
    for parts in chunkings(text, random.Random(3)):
        check(CODEC, text, parts)


@pytest.mark.parametrize("text, expected", [
    ('<|tools_prefix|>[{"get_weather": {"city": "Oslo", "days": 2}}]', [WEATHER]),
    ('<|tools_prefix|>[{"get_weather": {"city": "Oslo", "days": 2}}, ', [WEATHER]),
    ("<start_function_call>call:get_weather{city:<escape>Oslo<escape>,days:2}", [WEATHER]),
    ('<|tool_call>call:get_weather{city:<|"|>Oslo<|"|>,days:2}', [WEATHER]),
    ('<|tool_call>call:get_weather{city:<|"|>Oslo<|"|>,', [("get_weather", {"city": "Oslo"})]),
    (_step3(_S3_WEATHER)[:-len(f"<{B}tool_calls_end{B}>")], [WEATHER]),
    (_step3(_S3_WEATHER).split("\n</steptml:invoke>")[0], [WEATHER]),
    (_MC_WEATHER[:-len("</function>")], [WEATHER]),
])
def test_a_block_cut_after_complete_values_decodes_and_says_so(text, expected):
    r = CODEC.decode(text)
    assert _calls(r) == expected, r.errors
    assert "format.missing_end" in r.repairs
    for parts in chunkings(text, random.Random(5)):
        check(CODEC, text, parts)


@pytest.mark.parametrize("text", [
    "<start_function_call>call:get_weather{city:<escape>Os",  # inside a string
    '<|tool_call>call:get_weather{city:<|"|>Oslo<|"|>,days:2',  # a bare value may be cut
    _step3(_S3_WEATHER).split("2</steptml:parameter>")[0],
    '<function name="get_weather"><param name="city">Os',
])
def test_a_block_cut_inside_a_value_is_an_error_not_a_guess(text):
    r = CODEC.decode(text)
    assert not r.calls and r.errors and r.content == text


@given(st.sampled_from(EXAMPLES), st.integers(min_value=0, max_value=10_000))
def test_truncation_at_every_position_never_raises(example, cut):
    text = example[1]
    r = CODEC.decode(text[:cut % (len(text) + 1)])
    orjson.dumps(r.to_dict())


PIECES = [
    "Sure. ", " ", "\n", "{", "}", "[", "]", '"', ",", ":", "<think>", "</think>",
    "<|tools_prefix|>", "<|tools_suffix|>", '[{"search": {"q": "x"}}]', '{"get_weather": ',
    "<start_function_call>", "<end_function_call>", "call:search{", "q:<escape>x<escape>",
    "<escape>", "<|tool_call>", "<tool_call|>", "<turn|>", 'q:<|"|>y<|"|>', '<|"|>', "days:2",
    f"<{B}tool_calls_begin{B}>", f"<{B}tool_call_begin{B}>", f"function<{B}tool_sep{B}>",
    f"<{B}tool_call_end{B}>", f"<{B}tool_calls_end{B}>", '<steptml:invoke name="search">',
    '<steptml:parameter name="q">x</steptml:parameter>', "</steptml:invoke>",
    '<function name="search">', "<function name='get_weather'>", '<param name="q">x</param>',
    '<param name="city">Oslo</param>', "</function>", "<![CDATA[a<b]]>", "</param>",
]


@given(st.lists(st.sampled_from(PIECES), max_size=30), st.randoms(use_true_random=False))
def test_stream_equals_batch_on_generated_outputs(pieces, rng):
    text = "".join(pieces)
    for parts in chunkings(text, rng):
        check(CODEC, text, parts)


# -- the shapes around the template's -----------------------------------------------------------


def test_apertus_reads_one_object_without_its_list():
    r = CODEC.decode('<|tools_prefix|>{"search": {"q": "x"}}<|tools_suffix|>')
    assert _calls(r) == [("search", {"q": "x"})]


APERTUS_REFUSALS = [
    ('[{"search": {"q": "x"}, "get_weather": {"city": "y"}}]', "more than one call"),
    ('[{"search": "q=x"}]', "not a JSON object"),
    ('[{"search": {"q": "x"}}] and then', "after the list"),
    ("[search(q='x')]", 'expected {"NAME"'),
]


def test_gemma_reads_quoted_keys_and_keeps_strings_as_written():
    found = gemma.read('call:f{<escape>a b<escape>:<escape> x, {y} <escape>,n:-1.5e3,z:null}')
    assert found.calls == [("f", {"a b": " x, {y} ", "n": -1500.0, "z": None})]
    assert not found.repairs


def test_gemma_bare_text_is_a_string_and_says_so():
    r = CODEC.decode("<start_function_call>call:get_weather{city:Oslo,days:2}"
                     "<end_function_call>")
    assert _calls(r) == [WEATHER] and r.calls[0].repairs == [gemma.BARE_STRING]


def test_gemma_a_quoted_number_is_typed_by_the_schema_with_a_repair():
    r = CODEC.decode("<start_function_call>call:get_weather{city:<escape>Oslo<escape>,"
                     "days:<escape>2<escape>}<end_function_call>")
    assert _calls(r) == [WEATHER] and r.calls[0].repairs == ["schema.coerce_integer"]


def test_gemma4_a_turn_end_token_ends_the_call():
    r = CODEC.decode('<|tool_call>call:get_weather{city:<|"|>Oslo<|"|>,days:2}<turn|>')
    assert _calls(r) == [WEATHER] and r.ok and not r.repairs


GEMMA_REFUSALS = [
    ("call:f{a:1,a:2}", "given twice"),
    ("get_weather{a:1}", "expected call:NAME{"),
    ("call:f{a 1}", "expected :"),
    ("call:f{a:[1,2}", "expected , or ]"),
    ("call:f{a:<escape>x}", "never closed"),
    ("call:f{a:1}junk", "expected call:NAME{"),
    ("call:f{a:" + "[" * 200 + "]" * 200 + "}", "nest more than"),
]


def test_step3_reads_calls_without_the_function_head_and_with_a_separator_between():
    # the layout of vLLM's Step-3 tests
    text = (f"<{B}tool_calls_begin{B}><{B}tool_call_begin{B}>{_S3_WEATHER}<{B}tool_call_end{B}>"
            f"<{B}tool_sep{B}><{B}tool_call_begin{B}>{_S3_SEARCH}<{B}tool_call_end{B}>"
            f"<{B}tool_calls_end{B}>")
    r = CODEC.decode(text)
    assert r.ok and _calls(r) == [WEATHER, SEARCH]


def test_step3_a_call_token_without_its_section_token_still_opens_a_block():
    text = f"<{B}tool_call_begin{B}>function<{B}tool_sep{B}>{_S3_WEATHER}<{B}tool_call_end{B}>"
    r = CODEC.decode(text)
    assert _calls(r) == [WEATHER] and {c.format for c in r.calls} == {"step3"}


def test_step3_tokens_are_not_deepseeks():
    deepseek = "<\uff5ctool\u2581calls\u2581begin\uff5c>"
    r = CODEC.decode(_step3(_S3_WEATHER))
    assert deepseek not in _step3(_S3_WEATHER) and r.calls[0].format == "step3"


def test_step3_errors_are_placed_in_the_body():
    body = (f"<{B}tool_call_begin{B}>function<{B}tool_sep{B}>"
            '<steptml:invoke name="f"><steptml:oops/></steptml:invoke>')
    found = step3.read(body)
    assert not found.calls and found.errors[0].code == "invalid_xml"
    assert body[found.errors[0].details["position"]:].startswith("<steptml:oops/>")


def test_minicpm_unwraps_cdata_and_strips_plain_values():
    found = minicpm.read('<function name="f"><param name="a"> <![CDATA[ x<y\n]]> </param>'
                         "<param name='b'>\n 3 \n</param>")
    assert found.calls == [("f", {"a": " x<y\n", "b": "3"})] and found.text_values


MINICPM_REFUSALS = [
    ('<function name="f"><param>x</param>', "expected <param"),
    ('<function name="f"><param name="a">1</param><param name="a">2</param>', "twice"),
    ('<function name="f"><param name="a">1', "never closed"),
    ('<function name=""><param name="a">1</param>', "expected <function"),
    ('<function name="f"><function name="g">', "expected <param"),
]


def test_minicpm_prose_that_shows_the_tag_stays_content():
    text = 'Write <function name="x"> to call x.'
    r = CODEC.decode(text)
    assert not r.calls and r.content == text


def test_qwen_functions_are_still_qwens():
    r = CODEC.decode("<tool_call><function=search><parameter=q>x</parameter></function>"
                     "</tool_call>")
    assert _calls(r) == [("search", {"q": "x"})] and r.calls[0].format == "qwen_xml"


# -- round trips through each reader ------------------------------------------------------------

NAMES = st.from_regex(r"[a-z_][a-z0-9_]{0,11}", fullmatch=True)
KEYS = st.from_regex(r"[a-z][a-z0-9_]{0,9}", fullmatch=True)
TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=20)
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-(2**63), 2**63 - 1),
                    st.floats(allow_nan=False, allow_infinity=False), TEXT)


VALUES = st.recursive(SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(TEXT, inner, max_size=4)), max_leaves=12)


def _same(a, b) -> bool:
    return orjson.dumps(a) == orjson.dumps(b)


@given(st.lists(st.tuples(NAMES, st.dictionaries(KEYS, VALUES, max_size=4)), min_size=1,
                max_size=3), st.booleans())
def test_apertus_round_trip(calls, spaced):
    sep = ",\n " if spaced else ", "
    body = "[" + sep.join(json.dumps({n: a}) for n, a in calls) + "]"
    found = apertus.read(body)
    assert not found.errors
    assert [(n, json.loads(a)) for n, a in found.calls] == calls


def _gemma_value(value, quote: str) -> str:
    if isinstance(value, str):
        return quote + value + quote
    if isinstance(value, dict):
        return "{" + ",".join(f"{k}:{_gemma_value(v, quote)}" for k, v in value.items()) + "}"
    if isinstance(value, list):
        return "[" + ",".join(_gemma_value(v, quote) for v in value) + "]"
    return json.dumps(value)


@given(st.lists(NAMES, min_size=1, max_size=2), st.sampled_from(gemma.QUOTES), st.data())
def test_gemma_round_trip(names, quote, data):
    # strings may hold anything but their own quote token (there are no escapes)
    strings = st.text(st.characters(blacklist_categories=("Cs",)), max_size=20).filter(
        lambda s: quote not in s)
    values = st.recursive(st.one_of(st.none(), st.booleans(), st.integers(-(2**63), 2**63 - 1),
                                    st.floats(allow_nan=False, allow_infinity=False), strings),
                          lambda inner: st.one_of(st.lists(inner, max_size=4),
                                                  st.dictionaries(KEYS, inner, max_size=4)),
                          max_leaves=12)
    calls = [(n, data.draw(st.dictionaries(KEYS, values, max_size=4))) for n in names]
    body = "".join(f"call:{n}{_gemma_value(a, quote)}" for n, a in calls)
    found = gemma.read(body)
    assert not found.errors and not found.repairs
    assert _same(found.calls, calls)


@given(NAMES, st.dictionaries(KEYS, SCALARS, max_size=4), st.sampled_from(gemma.QUOTES),
       st.data())
def test_gemma_cut_bodies_never_raise_and_never_keep_a_cut_value(name, args, quote, data):
    assume(not any(isinstance(v, str) and any(q in v for q in gemma.QUOTES)
                   for v in args.values()))
    body = f"call:{name}{_gemma_value(args, quote)}"
    found = gemma.read(body[:data.draw(st.integers(0, len(body)))], closed=False)
    for got_name, got in found.calls:
        assert got_name == name and all(_same(got[k], args[k]) for k in got)


PLAIN = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="<"),
                max_size=20).map(str.strip)


@given(st.lists(st.tuples(NAMES, st.dictionaries(KEYS, PLAIN, max_size=4)), min_size=1,
                max_size=3), st.sampled_from(["function", ""]), st.sampled_from(["", "\n"]))
def test_step3_round_trip(calls, head, nl):
    invokes = [f'<steptml:invoke name="{n}">{nl}' + "".join(
        f'<steptml:parameter name="{k}">{v}</steptml:parameter>{nl}' for k, v in a.items())
        + "</steptml:invoke>" for n, a in calls]
    body = _step3(*invokes, head=head)[len(f"<{B}tool_calls_begin{B}>"):
                                        -len(f"<{B}tool_calls_end{B}>")]
    found = step3.read(body)
    assert not found.errors and found.text_values
    assert found.calls == calls


@given(NAMES, st.dictionaries(KEYS, PLAIN, max_size=4), st.data())
def test_step3_cut_bodies_never_raise_and_never_keep_a_cut_value(name, args, data):
    body = _step3(f'<steptml:invoke name="{name}">' + "".join(
        f'<steptml:parameter name="{k}">{v}</steptml:parameter>' for k, v in args.items())
        + "</steptml:invoke>")[len(f"<{B}tool_calls_begin{B}>"):]
    found = step3.read(body[:data.draw(st.integers(0, len(body)))], closed=False)
    for got_name, got in found.calls:
        assert got_name == name and all(args[k] == v for k, v in got.items())


CDATA_TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=20).filter(
    lambda s: "]]>" not in s)


@given(NAMES, st.dictionaries(KEYS, st.one_of(PLAIN.map(lambda v: (v, v)), CDATA_TEXT.map(
    lambda v: (v, f"<![CDATA[{v}]]>"))), max_size=4), st.sampled_from(['"', "'"]))
def test_minicpm_round_trip(name, args, quote):
    body = f"<function name={quote}{name}{quote}>" + "".join(
        f"<param name={quote}{k}{quote}>{written}</param>" for k, (_, written) in args.items())
    found = minicpm.read(body)
    assert not found.errors and found.text_values
    assert found.calls == [(name, {k: v for k, (v, _) in args.items()})]


@given(NAMES, st.dictionaries(KEYS, PLAIN, max_size=4), st.data())
def test_minicpm_cut_bodies_never_raise_and_never_keep_a_cut_value(name, args, data):
    body = f'<function name="{name}">' + "".join(
        f'<param name="{k}">{v}</param>' for k, v in args.items())
    found = minicpm.read(body[:data.draw(st.integers(0, len(body)))], closed=False)
    for got_name, got in found.calls:
        assert got_name == name and all(args[k] == v for k, v in got.items())


@pytest.mark.parametrize("reader", [apertus.read, gemma.read, step3.read, minicpm.read])
@pytest.mark.parametrize("closed", [True, False])
@given(st.lists(st.sampled_from(list('<>|/"{}[]:=,\n ab_') + [
    "<escape>", '<|"|>', "call:", "call:f{", "true", "-1", f"<{B}tool_call_begin{B}>",
    f"<{B}tool_sep{B}>", f"<{B}tool_call_end{B}>", '<steptml:invoke name="a">',
    '<steptml:parameter name="b">', "</steptml:parameter>", "</steptml:invoke>",
    '<function name="a">', '<param name="b">', "</param>", "<![CDATA[", "]]>",
    '{"a": ', '[{"a": {}}']), max_size=40).map("".join))
def test_no_new_reader_raises_on_any_input(reader, closed, text):
    found = reader(text, closed=closed)
    orjson.dumps([found.calls, [e.to_dict() for e in found.errors]])
    for error in found.errors:
        assert 0 <= error.details.get("position", 0) <= len(text)


@pytest.mark.parametrize("read, body, why", [
    (reader.read, body, why) for reader, table in (
        (apertus, APERTUS_REFUSALS), (gemma, GEMMA_REFUSALS), (minicpm, MINICPM_REFUSALS))
    for body, why in table])
def test_refusals_say_why(read, body, why):
    found = read(body)
    assert not found.calls and why in found.errors[0].message
