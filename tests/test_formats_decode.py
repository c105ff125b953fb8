"""Every model family's format through ``decode`` and the stream: detected by its markers (or, for
marker-less Python calls, by a known tool's name), with provenance, repairs and errors like the
older formats, and the same answer for every chunking."""

from __future__ import annotations

import random

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st
from toolcodec.decoding.codec import ToolCallCodec
from toolcodec.formats.table import ALL_FORMATS, MARKER_FORMATS

from tests.test_stream import check, chunkings

TOOLS = [
    {"name": "get_weather", "parameters": {"type": "object", "properties": {
        "city": {"type": "string"}, "days": {"type": "integer"}}, "required": ["city"]}},
    {"name": "search", "parameters": {"type": "object", "properties": {
        "q": {"type": "string"}}, "required": ["q"]}},
]
CODEC = ToolCallCodec(TOOLS)
WEATHER = ("get_weather", {"city": "Oslo", "days": 2})
SEARCH = ("search", {"q": "cats & dogs"})
DS = "\uff5c", "\u2581"


def _ds(token: str) -> str:
    return "<" + DS[0] + token.replace("_", DS[1]) + DS[0] + ">"


# One output per format: (format id, text, expected calls). Bodies are written the way each
# family's chat template renders them.
EXAMPLES = [
    ("hermes", '<tool_call>{"name": "get_weather", "arguments": {"city": "Oslo", "days": 2}}'
               "</tool_call>", [WEATHER]),
    ("qwen_xml", "<tool_call><function=search><parameter=q>cats & dogs</parameter></function>"
                 "</tool_call>", [SEARCH]),
    ("glm", "Checking.<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Oslo"
            "</arg_value>\n<arg_key>days</arg_key>\n<arg_value>2</arg_value>\n</tool_call>",
     [WEATHER]),
    ("tool_tag", "<get_weather><city>Oslo</city><days>2</days></get_weather>", [WEATHER]),
    ("tool_element", "<tool><tool_name>search</tool_name><arguments><q>cats &amp; dogs</q>"
                     "</arguments></tool>", [SEARCH]),
    ("seed_oss", "<seed:tool_call><function=get_weather><parameter=city>Oslo</parameter>"
                 "<parameter=days>2</parameter></function></seed:tool_call>", [WEATHER]),
    ("yaml_tag", "<get_weather>\ncity: Oslo\ndays: 2\n</get_weather>", [WEATHER]),
    ("json", 'Calling {"name": "search", "arguments": {"q": "cats & dogs"}}', [SEARCH]),
    ("pythonic", "[get_weather(city='Oslo', days=2), search(q=\"cats & dogs\")]",
     [WEATHER, SEARCH]),
    ("kimi_k2", "Sure.<|tool_calls_section_begin|><|tool_call_begin|>functions.get_weather:0"
                '<|tool_call_argument_begin|>{"city": "Oslo", "days": 2}<|tool_call_end|>'
                "<|tool_call_begin|>functions.search:1<|tool_call_argument_begin|>"
                '{"q": "cats & dogs"}<|tool_call_end|><|tool_calls_section_end|>',
     [WEATHER, SEARCH]),
    ("deepseek", _ds("tool_calls_begin") + _ds("tool_call_begin") + "function"
     + _ds("tool_sep") + 'get_weather\n```json\n{"city": "Oslo", "days": 2}\n```'
     + _ds("tool_call_end") + _ds("tool_calls_end"), [WEATHER]),
    ("deepseek", "ok" + _ds("tool_calls_begin") + _ds("tool_call_begin") + "search"
     + _ds("tool_sep") + '{"q": "cats & dogs"}' + _ds("tool_call_end")
     + _ds("tool_calls_end"), [SEARCH]),
    ("deepseek_dsml", f"<{DS[0]}DSML{DS[0]}function_calls>\n<{DS[0]}DSML{DS[0]}invoke "
     f'name="search">\n<{DS[0]}DSML{DS[0]}parameter name="q" string="true">cats & dogs'
     f"</{DS[0]}DSML{DS[0]}parameter>\n</{DS[0]}DSML{DS[0]}invoke>\n"
     f"</{DS[0]}DSML{DS[0]}function_calls>", [SEARCH]),
    ("mistral", '[TOOL_CALLS][{"name": "search", "arguments": {"q": "cats & dogs"}}]',
     [SEARCH]),
    ("mistral", '[TOOL_CALLS]get_weather[ARGS]{"city": "Oslo", "days": 2}', [WEATHER]),
    ("mistral", '[TOOL_CALLS]search{"q": "cats & dogs"}</s>', [SEARCH]),
    ("harmony", "<|channel|>commentary to=functions.search <|constrain|>json<|message|>"
                '{"q": "cats & dogs"}<|call|>', [SEARCH]),
    ("minimax", '<minimax:tool_call><invoke name="get_weather"><parameter name="city">Oslo'
                '</parameter><parameter name="days">2</parameter></invoke></minimax:tool_call>',
     [WEATHER]),
    ("dots", '<dots_function_call><invoke name="search"><parameter name="q">cats & dogs'
             "</parameter></invoke></dots_function_call>", [SEARCH]),
    ("lfm2", "<|tool_call_start|>[search(q='cats & dogs')]<|tool_call_end|>", [SEARCH]),
    ("olmo", "<function_calls>get_weather(city='Oslo', days=2)\nsearch(q='cats & dogs')"
             "</function_calls>", [WEATHER, SEARCH]),
    ("llama", "<|python_start|>[search(q='cats & dogs')]<|python_end|>", [SEARCH]),
    ("llama", '<|python_tag|>{"name": "search", "parameters": {"q": "cats & dogs"}}<|eom_id|>',
     [SEARCH]),
    ("granite", '<|tool_call|>[{"name": "search", "arguments": {"q": "cats & dogs"}}]',
     [SEARCH]),
    ("granite_fc", '<function_call> {"name": "search", "arguments": {"q": "cats & dogs"}}',
     [SEARCH]),
    ("internlm", '<|action_start|><|plugin|>{"name": "search", "parameters": '
                 '{"q": "cats & dogs"}}<|action_end|>', [SEARCH]),
    ("tool_calls", '<tool_calls>[{"name": "search", "arguments": {"q": "cats & dogs"}}]'
                   "</tool_calls>", [SEARCH]),
    ("tool_calls", "<tool_calls>\n<tool_call>search<tool_sep>\n<arg_key>q</arg_key>\n"
                   "<arg_value>cats & dogs</arg_value>\n</tool_call>\n</tool_calls>", [SEARCH]),
    ("nemotron", '<TOOLCALL>[{"name": "search", "arguments": {"q": "cats & dogs"}}]</TOOLCALL>',
     [SEARCH]),
    ("cohere", '<|START_ACTION|>\n[\n    {"tool_call_id": "0", "tool_name": "search", '
               '"parameters": {"q": "cats & dogs"}}\n]\n<|END_ACTION|>', [SEARCH]),
    ("functionary", '<function=get_weather>{"city": "Oslo", "days": 2}</function>', [WEATHER]),
    ("functionary_v32", '>>>all\nChecking.>>>get_weather\n{"city": "Oslo", "days": 2}', [WEATHER]),
    ("solar_open", "<|tool_call:start|>search\n<|tool_arg:start|>q<|tool_arg:value|>cats & dogs"
                   "<|tool_arg:end|>\n<|tool_call:end|>", [SEARCH]),
    ("k2_horizon", "<ifm|tool_calls><ifm|tool_call>search<ifm|arg_key>q</ifm|arg_key>"
                   "<ifm|arg_value>cats & dogs</ifm|arg_value></ifm|tool_call></ifm|tool_calls>",
     [SEARCH]),
    ("gigachat35", '<｜GCML｜tool_calls><｜GCML｜invoke name="search"><｜GCML｜parameter name="q" '
                   'string="true">cats & dogs</｜GCML｜parameter></｜GCML｜invoke>'
                   "</｜GCML｜tool_calls>", [SEARCH]),
    ("inkling", '<|message_model|><|content_invoke_tool_json|>{"name": "search", "args": '
                '{"q": "cats & dogs"}}<|end_message|>', [SEARCH]),
    ("muse_glimmer", '<atem:function_calls>\n<atem:invoke name="search">\n<atem:parameter name="q">'
                     "cats & dogs</atem:parameter>\n</atem:invoke>\n</atem:function_calls>",
     [SEARCH]),
    ("minimax_m3", ']<]minimax[>[<tool_call>\n]<]minimax[>[<invoke name="search">]<]minimax[>[<q>'
                   'cats & dogs]<]minimax[>[</q>]<]minimax[>[</invoke>\n]<]minimax[>[</tool_call>',
     [SEARCH]),
    ("longcat", '<longcat_tool_call>{"name": "search", "arguments": {"q": "cats & dogs"}}'
                "</longcat_tool_call>", [SEARCH]),
    ("gigachat", 'function call<|role_sep|>\n{"name": "search", "arguments": '
                 '{"q": "cats & dogs"}}', [SEARCH]),
    ("apertus", '<|tools_prefix|>[{"get_weather": {"city": "Oslo", "days": 2}}, '
                '{"search": {"q": "cats & dogs"}}]<|tools_suffix|>', [WEATHER, SEARCH]),
    ("functiongemma", "<start_function_call>call:get_weather{city:<escape>Oslo<escape>,days:2}"
                      "<end_function_call>", [WEATHER]),
    ("gemma4", '<|tool_call>call:search{q:<|"|>cats & dogs<|"|>}<tool_call|>', [SEARCH]),
    ("step3", f"<{DS[0]}tool_calls_begin{DS[0]}>\n<{DS[0]}tool_call_begin{DS[0]}>function"
              f'<{DS[0]}tool_sep{DS[0]}><steptml:invoke name="search">\n<steptml:parameter '
              'name="q">cats & dogs</steptml:parameter>\n</steptml:invoke>'
              f"<{DS[0]}tool_call_end{DS[0]}>\n<{DS[0]}tool_calls_end{DS[0]}>", [SEARCH]),
    ("minicpm", '<function name="get_weather"><param name="city">Oslo</param>'
                '<param name="days">2</param></function>', [WEATHER]),
    ("kimi_k3", '<|open|>tools<|sep|><|open|>call tool="get_weather" index="0"<|sep|>'
                '<|open|>argument key="city" type="string"<|sep|>Oslo<|close|>argument<|sep|>'
                '<|open|>argument key="days" type="integer"<|sep|>2<|close|>argument<|sep|>'
                "<|close|>call<|sep|><|close|>tools<|sep|>", [WEATHER]),
]


def _calls(result) -> list[tuple[str, dict]]:
    return [(c.name, c.arguments) for c in result.calls]


@pytest.mark.parametrize("fmt, text, expected", EXAMPLES,
                         ids=[f"{e[0]}-{i}" for i, e in enumerate(EXAMPLES)])
def test_each_format_is_detected_and_named(fmt, text, expected):
    r = CODEC.decode(text)
    assert r.ok, r.errors
    assert _calls(r) == expected
    assert {c.format for c in r.calls} == {fmt}
    assert "format" in r.to_dict()["calls"][0]
    rng = random.Random(len(text))
    for parts in chunkings(text, rng):
        check(CODEC, text, parts)


def test_every_format_has_an_example():
    assert {e[0] for e in EXAMPLES} == set(ALL_FORMATS)


@pytest.mark.parametrize("fmt, text, expected", EXAMPLES,
                         ids=[f"{e[0]}-{i}" for i, e in enumerate(EXAMPLES)])
def test_restricting_formats_leaves_the_others_as_content(fmt, text, expected):
    others = [f for f in ALL_FORMATS if f != fmt]
    r = ToolCallCodec(TOOLS, formats=others).decode(text)
    assert fmt not in {c.format for c in r.calls}
    only = ToolCallCodec(TOOLS, formats=[fmt]).decode(text)
    assert _calls(only) == expected


def test_an_unknown_format_id_is_refused():
    with pytest.raises(ValueError, match="unknown format"):
        ToolCallCodec(TOOLS, formats=["hermes", "klingon"])


@pytest.mark.parametrize("text, expected", [
    ("In Python you'd write get_weather(city='Paris') to do that.", []),
    ("[unknown_tool(city='Paris')]", []),
    ("Example: [get_weather(city=PARIS)]", []),  # a variable, not a value: never evaluated
    ("Example: [get_weather(city=__import__('os'))]", []),
    ("Use [get_weather(city='Paris')] now.", [("get_weather", {"city": "Paris"})]),
])
def test_python_calls_in_prose_need_a_known_tool_and_literal_values(text, expected):
    r = CODEC.decode(text)
    assert _calls(r) == expected
    if not expected:
        assert r.content == text


def test_pythonic_in_prose_yields_to_an_envelope():
    text = ("[get_weather(city='Rome')] is how it looks; the call: "
            '<tool_call>{"name": "search", "arguments": {"q": "x"}}</tool_call>')
    r = CODEC.decode(text)
    assert _calls(r) == [("search", {"q": "x"})]
    assert "get_weather(city='Rome')" in r.content


def _closed_examples():
    for fmt, text, expected in EXAMPLES:
        spec = next((f for f in MARKER_FORMATS if f.id == fmt and not f.open_ended
                     and any(text.endswith(c) for c in f.closers)), None)
        if spec is not None:
            closer = next(c for c in spec.closers if text.endswith(c))
            yield pytest.param(text[:-len(closer)], expected, id=fmt)


@pytest.mark.parametrize("cut, expected", list(_closed_examples()))
def test_a_missing_end_token_is_repaired_and_said(cut, expected):
    r = CODEC.decode(cut)
    assert _calls(r) == expected
    assert "format.missing_end" in r.repairs


def test_the_missing_end_cases_cover_the_closed_formats():
    assert len(list(_closed_examples())) >= 8


@pytest.mark.parametrize("eos", ["</s>", "<|im_end|>", "<|eot_id|>", "<|endoftext|>"])
def test_a_trailing_end_of_generation_token_is_not_part_of_the_call(eos):
    for text in ('[TOOL_CALLS][{"name": "search", "arguments": {"q": "x"}}]',
                 '<|tool_call|>[{"name": "search", "arguments": {"q": "x"}}]',
                 "<|tool_call_start|>[search(q='x')]"):
        r = CODEC.decode(text + eos)
        assert _calls(r) == [("search", {"q": "x"})], text


def test_tokens_glued_to_prose_still_open_a_block():
    text = ("I'll look.<|tool_calls_section_begin|><|tool_call_begin|>functions.search:0"
            '<|tool_call_argument_begin|>{"q": "x"}<|tool_call_end|><|tool_calls_section_end|>'
            "Done.")
    r = CODEC.decode(text)
    assert _calls(r) == [("search", {"q": "x"})]
    assert r.content == "I'll look.Done."


def test_a_call_to_an_unknown_tool_in_a_marker_format_is_an_error_and_stays_content():
    text = '[TOOL_CALLS]launch{"target": "moon"}'
    r = CODEC.decode(text)
    assert not r.calls and [e.code for e in r.errors] == ["unknown_tool"]
    assert r.content == text


def test_marker_names_in_prose_are_prose():
    for text in ("Wrap JSON in <tool_calls> tags.", "The <function_call> element is legacy."):
        r = CODEC.decode(text)
        assert r.ok and not r.calls and r.content == text


@given(st.sampled_from(EXAMPLES), st.integers(min_value=0, max_value=10_000))
def test_truncation_at_every_position_never_raises(example, cut):
    _, text, _ = example
    r = CODEC.decode(text[:cut % (len(text) + 1)])
    orjson.dumps(r.to_dict())
