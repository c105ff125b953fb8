"""Families added through the one family interface, each with outputs built from the model's
official chat template or an engine's parser tests (named by origin), through ``decode`` and
the stream (the same answer at every cut); and the decoder's format-level corruptions, each
from the real shape that showed it."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from toolcodec import ToolCallCodec
from toolcodec.formats.presets import PRESETS

from tests.test_stream import check

TOOLS = [
    {"name": "special_function", "parameters": {"type": "object", "properties": {
        "arg1": {"type": "integer"}}, "required": ["arg1"]}},
    {"name": "get_weather", "parameters": {"type": "object", "properties": {
        "city": {"type": "string"}, "date": {"type": "string"}, "unit": {"type": "string"}},
        "required": ["city"]}},
    {"name": "get_current_date", "parameters": {"type": "object", "properties": {}}},
    {"name": "lookup", "parameters": {"type": "object", "properties": {
        "query": {"type": "string"}}, "required": ["query"]}},
    {"name": "foo", "parameters": {"type": "object", "properties": {
        "query": {"type": "string"}}}},
    {"name": "bar", "parameters": {"type": "object", "properties": {"x": {"type": "integer"}}}},
    {"name": "read_file", "parameters": {"type": "object", "properties": {
        "path": {"type": "string"}}, "required": ["path"]}},
    {"name": "create_order", "parameters": {"type": "object", "properties": {
        "user_id": {"type": "integer"}, "urgent": {"type": "boolean"}, "note": {"type": "string"},
        "shipping": {"type": "object", "properties": {
            "city": {"type": "string"}, "zip": {"type": "integer"}}},
        "items": {"type": "array", "items": {"type": "object", "properties": {
            "sku": {"type": "string"}, "qty": {"type": "integer"}}}},
        "metadata": {"type": "object", "additionalProperties": {"type": "string"}}}}},
]
NS = "]<]minimax[>["  # MiniMax-M3's tag prefix
HY3, HY4 = ":opensource", ":6124c78e"  # Hunyuan checkpoints' token suffixes
CODEC = ToolCallCodec(TOOLS)

# (origin, format id, output, calls, content, reasoning)
CASES = [
    ("llama.cpp tests/test-chat.cpp, meetkai-functionary-medium-v3.1.jinja", "functionary",
     '<function=special_function>{"arg1": 1}</function>',
     [("special_function", {"arg1": 1})], "", None),
    ("llama.cpp tests/test-chat.cpp, functionary v3.1: two calls, end of message token",
     "functionary",
     'Sure.<function=special_function>{"arg1": 1}</function>'
     '<function=get_current_date>{}</function><|eom_id|>',
     [("special_function", {"arg1": 1}), ("get_current_date", {})], "Sure.", None),
    ("llama.cpp tests/test-chat.cpp, meetkai-functionary-medium-v3.2.jinja", "functionary_v32",
     '>>>special_function\n{"arg1": 1}', [("special_function", {"arg1": 1})], "", None),
    ("llama.cpp tests/test-tool-call.cpp, functionary v3 (trailing layout)", "functionary_v32",
     '>>>special_function\n{"arg1": 1}\n ', [("special_function", {"arg1": 1})], "", None),
    ("llama.cpp tests/test-chat.cpp, functionary v3.2: text channel, then a call",
     "functionary_v32", '>>>all\nLet me check.>>>special_function\n{"arg1": 1}',
     [("special_function", {"arg1": 1})], "Let me check.", None),
    ("vLLM tests/tool_parsers/test_solar_open2_tool_parser.py: multiple_tool_calls",
     "solar_open",
     "I'll check both.<|tool_call:start|>get_weather\n<|tool_arg:start|>city<|tool_arg:value|>"
     "Seoul<|tool_arg:end|>\n<|tool_call:end|>\n<|tool_call:start|>get_weather\n"
     "<|tool_arg:start|>city<|tool_arg:value|>Tokyo<|tool_arg:end|>\n<|tool_call:end|>",
     [("get_weather", {"city": "Seoul"}), ("get_weather", {"city": "Tokyo"})],
     "I'll check both.", None),
    ("vLLM tests/tool_parsers/test_solar_open2_tool_parser.py: reasoning_tags_with_tool_calls "
     "(the think tokens are reasoning here)", "solar_open",
     "<|think:start|>I should use a tool<|think:end|>Sure, let me help.<|tool_call:start|>"
     "get_weather\n<|tool_arg:start|>city<|tool_arg:value|>Seoul<|tool_arg:end|>\n"
     "<|tool_call:end|>",
     [("get_weather", {"city": "Seoul"})], "Sure, let me help.", "I should use a tool"),
    ("vLLM tests/tool_parsers/test_solar_open2_tool_parser.py: no_arguments", "solar_open",
     "<|tool_call:start|>get_current_date\n<|tool_call:end|>", [("get_current_date", {})], "",
     None),
    ("vLLM tests/tool_parsers/test_k2_horizon_tool_parser.py: xml_default_multiple_calls",
     "k2_horizon",
     "Before <ifm|tool_calls><ifm|tool_call>lookup<ifm|arg_key>query</ifm|arg_key>"
     "<ifm|arg_value>123</ifm|arg_value></ifm|tool_call>\n<ifm|tool_call>get_current_date"
     "</ifm|tool_call></ifm|tool_calls> after.",
     [("lookup", {"query": "123"}), ("get_current_date", {})], "Before  after.", None),
    ("vLLM tests/tool_parsers/test_k2_horizon_tool_parser.py: xml_typed", "k2_horizon",
     "<ifm|tool_calls><ifm|tool_call>get_weather<ifm|arg_key>city</ifm|arg_key>"
     "<ifm|arg_type>string</ifm|arg_type><ifm|arg_value>Oslo</ifm|arg_value></ifm|tool_call>"
     "</ifm|tool_calls>", [("get_weather", {"city": "Oslo"})], "", None),
    ("vLLM tests/tool_parsers/test_k2_horizon_tool_parser.py: json format", "k2_horizon",
     '<ifm|tool_calls><ifm|tool_call>{"name": "lookup", "arguments": {"query": "x"}}'
     "</ifm|tool_call></ifm|tool_calls>", [("lookup", {"query": "x"})], "", None),
    ("vLLM tests/tool_parsers/test_gigachat35_tool_parser.py: surrounding_text_output",
     "gigachat35",
     'I will check.<｜GCML｜tool_calls><｜GCML｜invoke name="get_weather"><｜GCML｜parameter '
     'name="city" string="true">Tokyo</｜GCML｜parameter></｜GCML｜invoke></｜GCML｜tool_calls>',
     [("get_weather", {"city": "Tokyo"})], "I will check.", None),
    ("vLLM tests/tool_parsers/test_gigachat35_tool_parser.py: parallel, string=\"false\" JSON",
     "gigachat35",
     '<｜GCML｜tool_calls><｜GCML｜invoke name="get_weather"><｜GCML｜parameter name="city" '
     'string="true">Tokyo</｜GCML｜parameter></｜GCML｜invoke><｜GCML｜invoke name="create_order">'
     '<｜GCML｜parameter name="shipping" string="false">{"city": "Oslo", "zip": 150}'
     "</｜GCML｜parameter></｜GCML｜invoke></｜GCML｜tool_calls>",
     [("get_weather", {"city": "Tokyo"}), ("create_order", {"shipping": {"city": "Oslo",
                                                                         "zip": 150}})],
     "", None),
    ("vLLM's Inkling parser (format in its docstring): typed content blocks", "inkling",
     "<|message_model|><|content_thinking|>Check the weather.<|end_message|>"
     "<|message_model|><|content_text|>Let me look.<|end_message|><|message_model|>"
     '<|content_invoke_tool_json|>{"name":"get_weather","args":{"city":"SF"}}<|end_message|>'
     "<|content_model_end_sampling|>",
     [("get_weather", {"city": "SF"})], "Let me look.", "Check the weather."),
    ("Muse Glimmer chat template's ATEM call block (as mlx-vlm's atem parser tests it)",
     "muse_glimmer",
     '<atem:function_calls>\n<atem:invoke name="get_weather">\n<atem:parameter name="city">'
     'Berlin</atem:parameter>\n<atem:parameter name="date">2026-03-30</atem:parameter>\n'
     "</atem:invoke>\n</atem:function_calls>",
     [("get_weather", {"city": "Berlin", "date": "2026-03-30"})], "", None),
    ("vLLM tests/tool_parsers/test_nemotron_nano_v2_tool_parser.py: from_nemotron_array",
     "nemotron",
     'Let me check that.<TOOLCALL>[{"name": "get_weather", '
     '"arguments": {"city": "Tokyo", "unit": "celsius"}}]</TOOLCALL>',
     [("get_weather", {"city": "Tokyo", "unit": "celsius"})], "Let me check that.", None),
    ("vLLM tests/tool_parsers/test_nemotron_nano_v2_tool_parser.py: wraps_single_object",
     "nemotron", '<TOOLCALL>{"name": "lookup", "arguments": {"query": "vllm"}}</TOOLCALL>',
     [("lookup", {"query": "vllm"})], "", None),
    ("vLLM tests/tool_parsers/test_nemotron_nano_v2_tool_parser.py: keeps_think_block",
     "nemotron",
     '<think>\nI need the weather for Tokyo.\n</think>\n'
     '<TOOLCALL>[{"name": "get_weather", "arguments": {"city": "Tokyo"}}]</TOOLCALL>',
     [("get_weather", {"city": "Tokyo"})], "", "I need the weather for Tokyo."),
    ("vLLM tests/tool_parsers/test_cohere_command_tool_parser.py: cmd4-multiple_tool_calls",
     "cohere",
     '<|START_THINKING|>first I think about foo<|END_THINKING|><|START_ACTION|>\n[\n'
     '    {"tool_call_id": "0", "tool_name": "foo", "parameters": {"query": "query1"}},\n'
     '    {"tool_call_id": "1", "tool_name": "bar", "parameters": {"x": 42}}\n]\n'
     '<|END_ACTION|>',
     [("foo", {"query": "query1"}), ("bar", {"x": 42})], "", "first I think about foo"),
    ("vLLM tests/tool_parsers/test_cohere_command_tool_parser.py: cmd3-single_tool_call",
     "cohere",
     '<|START_THINKING|> i will call foo with query1<|END_THINKING|><|START_ACTION|>\n[\n'
     '    {"tool_call_id": "0", "tool_name": "foo", "parameters": {"query": "query1"}}\n]\n'
     '<|END_ACTION|>',
     [("foo", {"query": "query1"})], "", "i will call foo with query1"),
    ("vLLM tests/tool_parsers/test_hy_v3_tool_parser.py: test_multiple", "tool_calls",
     "<tool_calls>\n<tool_call>get_weather<tool_sep>\n<arg_key>city</arg_key>\n"
     "<arg_value>Beijing</arg_value>\n<arg_key>date</arg_key>\n<arg_value>2026-03-30"
     "</arg_value>\n</tool_call>\n<tool_call>get_weather<tool_sep>\n<arg_key>city</arg_key>\n"
     "<arg_value>Hangzhou</arg_value>\n<arg_key>date</arg_key>\n<arg_value>2026-03-30"
     "</arg_value>\n</tool_call>\n</tool_calls>",
     [("get_weather", {"city": "Beijing", "date": "2026-03-30"}),
      ("get_weather", {"city": "Hangzhou", "date": "2026-03-30"})], "", None),
    ("vLLM tests/tool_parsers/test_hy_v4_tool_parser.py: values_typed_from_schema "
     "(unsuffixed tokens)", "tool_calls",
     "sure!<tool_calls><tool_call>get_weather<arg_key>city</arg_key><arg_value>Beijing"
     "</arg_value><arg_key>date</arg_key><arg_value>2026-03-30</arg_value></tool_call>"
     "</tool_calls>", [("get_weather", {"city": "Beijing", "date": "2026-03-30"})], "sure!",
     None),
    ("vLLM tests/tool_parsers/test_hy_v4_tool_parser.py: multiple_calls_keep_their_order",
     "tool_calls",
     "<tool_calls><tool_call>get_weather<arg_key>city</arg_key><arg_value>A</arg_value>"
     "</tool_call><tool_call>get_current_date</tool_call></tool_calls>",
     [("get_weather", {"city": "A"}), ("get_current_date", {})], "", None),
    ("vLLM tests/tool_parsers/test_hy_v3_tool_parser.py: test_zero_arg_inline", "tool_calls",
     "<tool_calls><tool_call>get_current_date<tool_sep></tool_call></tool_calls>",
     [("get_current_date", {})], "", None),
    ("vLLM tests/tool_parsers/test_minimax_m3_tool_parser.py: nested_tool_call", "minimax_m3",
     f"I will create it.\n{NS}<tool_call>\n{NS}<invoke name=\"create_order\">"
     f"{NS}<user_id>42{NS}</user_id>{NS}<urgent>true{NS}</urgent>"
     f"{NS}<note>Please leave at front desk.{NS}</note>{NS}<shipping>{NS}<city>Singapore"
     f"{NS}</city>{NS}<zip>018956{NS}</zip>{NS}</shipping>{NS}<items>{NS}<item>{NS}<sku>"
     f"book-001{NS}</sku>{NS}<qty>2{NS}</qty>{NS}</item>{NS}<item>{NS}<sku>pen-007{NS}</sku>"
     f"{NS}<qty>5{NS}</qty>{NS}</item>{NS}</items>{NS}<metadata>{NS}<source>mobile"
     f"{NS}</source>{NS}<campaign>may-launch{NS}</campaign>{NS}</metadata>{NS}</invoke>\n"
     f"{NS}</tool_call>",
     [("create_order", {"user_id": 42, "urgent": True, "note": "Please leave at front desk.",
                        "shipping": {"city": "Singapore", "zip": 18956},
                        "items": [{"sku": "book-001", "qty": 2}, {"sku": "pen-007", "qty": 5}],
                        "metadata": {"source": "mobile", "campaign": "may-launch"}})],
     "I will create it.", None),
    ("vLLM tests/tool_parsers/test_minimax_m3_tool_parser.py: multiple_tool_calls", "minimax_m3",
     f"{NS}<tool_call>\n{NS}<invoke name=\"create_order\">{NS}<user_id>1{NS}</user_id>"
     f"{NS}</invoke>\n{NS}<invoke name=\"create_order\">{NS}<user_id>2{NS}</user_id>"
     f"{NS}</invoke>\n{NS}</tool_call>",
     [("create_order", {"user_id": 1}), ("create_order", {"user_id": 2})], "", None),
    ("vLLM tests/tool_parsers/test_hy_v3_tool_parser.py: test_content_before", "tool_calls",
     "Checking.<tool_calls>\n<tool_call>get_current_date<tool_sep>\n</tool_call>\n"
     "</tool_calls>", [("get_current_date", {})], "Checking.", None),
    # Suffixed tokens: Hy3's official ":opensource", HY4's per-checkpoint suffix
    ("vLLM tests/tool_parsers/test_hy_v4_tool_parser.py: values_typed_from_schema "
     "(SUFFIX = \":opensource\")", "tool_calls",
     f"sure!<tool_calls{HY3}><tool_call{HY3}>get_weather<arg_key{HY3}>city</arg_key{HY3}>"
     f"<arg_value{HY3}>Beijing</arg_value{HY3}><arg_key{HY3}>date</arg_key{HY3}>"
     f"<arg_value{HY3}>2026-03-30</arg_value{HY3}></tool_call{HY3}></tool_calls{HY3}>",
     [("get_weather", {"city": "Beijing", "date": "2026-03-30"})], "sure!", None),
    ("Hy3's official chat template envelope (as MLX's Hy3 official-markers tests pin it: "
     "<tool_sep:opensource>, layout line breaks)", "tool_calls",
     f"Checking the forecast now. <tool_calls{HY3}>\n<tool_call{HY3}>get_weather"
     f"<tool_sep{HY3}>\n<arg_key{HY3}>city</arg_key{HY3}><arg_value{HY3}>Tokyo"
     f"</arg_value{HY3}>\n</tool_call{HY3}>\n</tool_calls{HY3}>",
     [("get_weather", {"city": "Tokyo"})], "Checking the forecast now.", None),
    ("Hy4-preview's chat template, a tool turn as its GGUF's template renders it (checkpoint "
     "suffix :6124c78e)", "tool_calls",
     f"<tool_calls{HY4}><tool_call{HY4}>read_file<arg_key{HY4}>path</arg_key{HY4}>"
     f"<arg_value{HY4}>x.c</arg_value{HY4}></tool_call{HY4}></tool_calls{HY4}>",
     [("read_file", {"path": "x.c"})], "", None),
    ("vLLM tests/tool_parsers/test_hy_v4_tool_parser.py: multiple_calls_keep_their_order "
     "(suffix :6124c78e, from Hy4-preview)", "tool_calls",
     f"<tool_calls{HY4}><tool_call{HY4}>get_weather<arg_key{HY4}>city</arg_key{HY4}>"
     f"<arg_value{HY4}>A</arg_value{HY4}></tool_call{HY4}><tool_call{HY4}>get_current_date"
     f"</tool_call{HY4}></tool_calls{HY4}>",
     [("get_weather", {"city": "A"}), ("get_current_date", {})], "", None),
]


def _calls(result) -> list[tuple[str, dict]]:
    return [(c.name, c.arguments) for c in result.calls]


@pytest.mark.parametrize("origin, fmt, text, calls, content, reasoning", CASES,
                         ids=[f"{c[1]}-{i}" for i, c in enumerate(CASES)])
def test_family_decodes_whole_and_streamed_at_every_cut(origin, fmt, text, calls, content,
                                                        reasoning) -> None:
    r = CODEC.decode(text)
    assert r.ok, r.errors
    assert _calls(r) == calls
    assert {c.format for c in r.calls} == {fmt}
    assert (r.content, r.reasoning) == (content, reasoning)
    for cut in range(len(text) + 1):
        check(CODEC, text, [text[:cut], text[cut:]])
    check(CODEC, text, list(text))
    only = ToolCallCodec(TOOLS, formats=[fmt]).decode(text)
    assert _calls(only) == calls  # the family's own format is enough


def test_cohere_citations_and_response_channel() -> None:
    """vLLM tests/tool_parsers/test_cohere_command_tool_parser.py: cmd4-citations (the
    citation markup is kept as written: dropping it would drop the caller's text)."""
    text = ("<|START_THINKING|>This is a rainbow<|END_THINKING|>\n"
            "<|START_RESPONSE|>foo bar<|END_RESPONSE|>")
    r = CODEC.decode(text)
    assert (r.calls, r.content, r.reasoning) == ([], "foo bar", "This is a rainbow")
    for cut in range(len(text) + 1):
        check(CODEC, text, [text[:cut], text[cut:]])


def test_functionary_text_only_and_interleaved_calls() -> None:
    """llama.cpp tests/test-chat.cpp (v3.2 text channel) and tests/test-tool-call.cpp (v3.1
    calls between the words of the content)."""
    text = ">>>all\nHello, world!\nWhat's up?"
    assert CODEC.decode(text).to_dict()["content"] == "Hello, world!\nWhat's up?"
    tools = [{"name": name, "parameters": {"type": "object", "properties": {
        arg: {"type": "integer"}}}} for name, arg in (("foo", "arg1"), ("bar", "arg2"))]
    codec = ToolCallCodec(tools)
    text = ('Hell<function=foo>{"arg1": 1}</function>o, world<function=bar>{"arg2": 2}'
            "</function>!")
    r = codec.decode(text)
    assert _calls(r) == [("foo", {"arg1": 1}), ("bar", {"arg2": 2})]
    assert r.content == "Hello, world!"
    for cut in range(len(text) + 1):
        check(codec, text, [text[:cut], text[cut:]])
    # a Python prompt is prose
    repl = '>>> x = {"a": 1}\n>>> print(x)'
    assert CODEC.decode(repl).to_dict()["content"] == repl


def test_functionary_needs_a_known_tool_and_an_object() -> None:
    r = CODEC.decode('<function=nope>{"a": 1}</function>')
    assert not r.calls and r.errors[0].code == "unknown_tool"
    r = CODEC.decode('<function=special_function>{"arg1": "one"}</function>')
    assert not r.calls and r.errors[0].code == "schema_violation"
    # Qwen3-Coder's parameters after <function=…> are read as before
    r = CODEC.decode("<function=special_function><parameter=arg1>3</parameter></function>")
    assert _calls(r) == [("special_function", {"arg1": 3})] and r.calls[0].format == "qwen_xml"


def test_a_hunyuan_word_in_prose_stays_prose() -> None:
    text = "Wrap them in <tool_calls> tags, then stop."
    assert CODEC.decode(text).to_dict()["content"] == text


@pytest.mark.parametrize("name, formats", [
    ("hermes", ["hermes"]), ("qwen3_coder", ["hermes", "qwen_xml"]),
    ("llama3_json", ["llama", "json"]), ("deepseek_v3", ["deepseek"]),
    ("kimi_k2", ["kimi_k2"]), ("glm45", ["glm"]), ("minimax_m2", ["minimax"]),
    ("seed_oss", ["seed_oss"]), ("openai", ["harmony"]), ("hy_v3", ["tool_calls"]),
    ("cohere_command4", ["cohere"]), ("nemotron_nano_v2", ["nemotron"]),
    ("hy_v4", ["tool_calls"]), ("ernie45", ["hermes", "ernie45"]),
    ("muse_glimmer", ["muse_glimmer"]),
])
def test_vllm_parser_names_are_presets(name, formats) -> None:
    assert PRESETS[name]["formats"] == formats
    ToolCallCodec(TOOLS, **PRESETS[name])  # every format id it names exists


def test_every_preset_builds_a_codec() -> None:
    for name, options in PRESETS.items():
        assert ToolCallCodec(TOOLS, **options).formats, name


# -- corruptions ----------------------------------------------------------------------------


def test_gpt_oss_channel_text_inside_arguments_is_kept() -> None:
    """The channel pattern blanked `<|channel|>WORD` anywhere in the payload: the arguments'
    text lost it. It belongs to the header only."""
    text = ('<|channel|>commentary to=functions.read_file <|constrain|>json<|message|>'
            '{"path": "notes<|channel|>final.txt"}<|call|>')
    r = CODEC.decode(text)
    assert _calls(r) == [("read_file", {"path": "notes<|channel|>final.txt"})]
    for cut in range(len(text) + 1):
        check(CODEC, text, [text[:cut], text[cut:]])


def test_glm_value_closed_by_the_blocks_closer() -> None:
    """GLM-4.5 output whose last </arg_value> is missing before </tool_call>: read like Qwen
    XML reads a parameter closed by </function> (xml.balance_tags), not refused."""
    text = ("<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Beijing</arg_value>\n"
            "<arg_key>date</arg_key>\n<arg_value>2026-03-30\n</tool_call>")
    r = CODEC.decode(text)
    assert _calls(r) == [("get_weather", {"city": "Beijing", "date": "2026-03-30"})]
    assert "xml.balance_tags" in r.calls[0].repairs
    # a value that another key follows is not guessed; a cut one stays a cut one
    bad = "<tool_call>get_weather\n<arg_key>city</arg_key>\n<arg_value>Beijing\n" \
          "<arg_key>date</arg_key>\n<arg_value>x\n</tool_call>"
    assert CODEC.decode(bad).calls == []
    cut = text[:-len("</tool_call>")]
    assert CODEC.decode(cut).calls == []
    assert CODEC.decode(cut, finish_reason="length").errors[0].code == "truncated"


@pytest.mark.parametrize("text, calls", [
    # DeepSeek V3.2 DSML (vLLM test_deepseekv32_tool_parser.py shape), cut in the second call
    ("<｜DSML｜function_calls>\n<｜DSML｜invoke name=\"get_weather\">\n"
     "<｜DSML｜parameter name=\"city\" string=\"true\">Oslo</｜DSML｜parameter>\n"
     "</｜DSML｜invoke>\n<｜DSML｜invoke name=\"get_weather\">\n"
     "<｜DSML｜parameter name=\"city\" string=\"true\">Ber",
     [("get_weather", {"city": "Oslo"})]),
    # MiniMax-M3 (vLLM test_minimax_m3_tool_parser.py: error_recovery_keeps_committed_call)
    (f"plain {NS}<tool_call>\n{NS}<invoke name=\"create_order\">{NS}<user_id>1"
     f"{NS}</user_id>{NS}</invoke>\n{NS}<invoke name=\"create_order\">{NS}<user_id>2",
     [("create_order", {"user_id": 1})]),
    # MiniMax-M2 (vLLM test_minimax_m2_tool_parser.py shape), cut in the second call
    ("<minimax:tool_call>\n<invoke name=\"get_weather\">\n<parameter name=\"city\">Oslo"
     "</parameter>\n</invoke>\n<invoke name=\"get_weather\">\n<parameter name=\"city\">Ber",
     [("get_weather", {"city": "Oslo"})]),
])
def test_a_cut_section_keeps_its_complete_first_call(text, calls) -> None:
    r = CODEC.decode(text, finish_reason="length")
    assert _calls(r) == calls
    assert [e.code for e in r.errors] == ["truncated"]
    for cut in (len(text) // 3, len(text) // 2, len(text) - 5):
        s = CODEC.stream(id_prefix="t")
        s.feed(text[:cut])
        s.feed(text[cut:])
        s.close(finish_reason="length")
        assert s.result().to_dict() == r.to_dict()


def test_an_orphan_kimi_k3_think_closer_never_reaches_content() -> None:
    """The prompt opened the think section and the caller did not say so: the closer is a
    control token, never content (with starts_in_reasoning="kimi_k3", or the kimi-k3
    preset, the text before it is reasoning)."""
    text = "Let me think.<|close|>think<|sep|>It is sunny."
    r = CODEC.decode(text)
    assert r.content == "Let me think.It is sunny." and "<|" not in r.content
    with_prefill = ToolCallCodec(TOOLS, **PRESETS["kimi-k3"]).decode(text)
    assert (with_prefill.reasoning, with_prefill.content) == ("Let me think.", "It is sunny.")
    for cut in range(len(text) + 1):
        check(CODEC, text, [text[:cut], text[cut:]])


def test_llama_cpp_generic_tool_call_in_prose() -> None:
    """llama.cpp's generic format (common/chat.cpp, templates it does not recognise): the
    model answers {"tool_call": {"name", "arguments"}}."""
    text = '{"tool_call": {"name": "special_function", "arguments": {"arg1": 1}}}'
    r = CODEC.decode(text)
    assert _calls(r) == [("special_function", {"arg1": 1})] and r.content == ""
    for cut in range(len(text) + 1):
        check(CODEC, text, [text[:cut], text[cut:]])


def test_a_known_zero_argument_tool_written_without_arguments() -> None:
    """agno #3826: {"name": "get_current_date"} with no "arguments" for a tool that takes
    none is its call; for a tool with parameters it stays a description."""
    text = 'Sure: {"name": "get_current_date"}'
    r = CODEC.decode(text)
    assert _calls(r) == [("get_current_date", {})] and r.content == "Sure:"
    for cut in range(len(text) + 1):
        check(CODEC, text, [text[:cut], text[cut:]])
    described = 'The tool {"name": "lookup"} searches.'
    assert CODEC.decode(described).to_dict()["content"] == described
    assert CODEC.decode(described).repairs == []


MERGED = '{"path":"a.rs"}{"path":"b.rs"}'


def test_merged_arguments_of_a_native_call_are_two_calls() -> None:
    """LiteLLM #33678 / #7621: a client merged the argument texts of two parallel calls of
    one tool into one call; each object is valid JSON and validates: two calls."""
    message = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "read_file",
                                                       "arguments": MERGED}}]}
    r = CODEC.decode(message)
    assert _calls(r) == [("read_file", {"path": "a.rs"}), ("read_file", {"path": "b.rs"})]
    assert all("json.merged_calls_split" in c.repairs for c in r.calls) and r.ok


def test_merged_arguments_inside_an_envelope_are_two_calls() -> None:
    text = ('<tool_call>{"name": "read_file", "arguments": '
            '"{\\"path\\":\\"a.rs\\"}{\\"path\\":\\"b.rs\\"}"}</tool_call>')
    r = CODEC.decode(text)
    assert _calls(r) == [("read_file", {"path": "a.rs"}), ("read_file", {"path": "b.rs"})]
    for cut in range(0, len(text) + 1, 3):
        check(CODEC, text, [text[:cut], text[cut:]])


@settings(max_examples=200)
@given(st.lists(st.text(st.sampled_from("ab.rs \"\\{}[]"), max_size=6), min_size=2,
                max_size=4),
       st.lists(st.sampled_from(["", " ", "\n", "\t\r\n", "\u3000", "\x85", "\u2028"]),
                min_size=5, max_size=5))
def test_objects_in_a_row_are_split_whatever_the_blanks_between(paths, blanks) -> None:
    arguments = "".join(blanks[i] + orjson.dumps({"path": p}).decode()
                        for i, p in enumerate(paths)) + blanks[-1]
    message = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "read_file",
                                                       "arguments": arguments}}]}
    r = CODEC.decode(message)
    assert _calls(r) == [("read_file", {"path": p}) for p in paths]
    assert all("json.merged_calls_split" in c.repairs for c in r.calls) and r.ok


@pytest.mark.parametrize("arguments", [
    '{"path":"a.rs"}{"nope":1}',  # the second does not validate
    '{"path":"a.rs"}{"path":"b.rs"',  # the second is not valid JSON
    '{"path":"a.rs"} and {"path":"b.rs"}',  # words between
])
def test_merged_arguments_are_split_only_when_each_is_a_valid_call(arguments) -> None:
    message = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "c1", "type": "function", "function": {"name": "read_file",
                                                       "arguments": arguments}}]}
    r = CODEC.decode(message)
    assert len(r.calls) <= 1 and "json.merged_calls_split" not in r.repairs


@pytest.mark.parametrize("wrapped", [True, False])
def test_qwen3_xml_call_tag_text_inside_a_value_is_text(wrapped) -> None:
    """docs/formats.md: marker text in values is text. A Qwen3-Coder value that names the
    syntax (`<function=x>`) was split off as a second call."""
    call = ("<function=read_file>\n<parameter=path>\nUse <function=x> to call x.md\n"
            "</parameter>\n</function>")
    text = f"<tool_call>\n{call}\n</tool_call>" if wrapped else call
    r = CODEC.decode(text)
    assert _calls(r) == [("read_file", {"path": "Use <function=x> to call x.md"})], r.errors
    for cut in range(0, len(text) + 1, 2):
        check(CODEC, text, [text[:cut], text[cut:]])
    # two calls in one envelope are still two calls
    two = f"<tool_call>\n{call}\n{call.replace('x.md', 'y.md')}\n</tool_call>"
    assert len(CODEC.decode(two).calls) == 2


def test_apriel_reasoning_the_prompt_opened_then_calls() -> None:
    """Apriel 1.5/1.6 Thinker: its chat template ends the prompt with "Here are my reasoning
    steps:\\n"; "[BEGIN FINAL RESPONSE]" ends the reasoning, then <tool_calls>[…] or the
    answer up to "[END FINAL RESPONSE]" (both markers framing)."""
    apriel = ToolCallCodec(TOOLS, **PRESETS["apriel"])
    text = ("The user wants the weather. I should call the tool.\n[BEGIN FINAL RESPONSE]\n"
            '<tool_calls>[{"name": "get_weather", "arguments": {"city": "Oslo"}}]</tool_calls>')
    r = apriel.decode(text)
    assert _calls(r) == [("get_weather", {"city": "Oslo"})]
    assert (r.reasoning, r.content) == ("The user wants the weather. I should call the tool.", "")
    answer = "1. Paris is the capital.\n[BEGIN FINAL RESPONSE]\nParis.\n[END FINAL RESPONSE]<|end|>"
    r = apriel.decode(answer)
    assert (r.reasoning, r.content, r.calls) == ("1. Paris is the capital.", "Paris.", [])
    for t in (text, answer):
        for cut in range(len(t) + 1):
            check(apriel, t, [t[:cut], t[cut:]])
    # without the preset the header is words: nothing moves to reasoning
    header = "Here are my reasoning steps:\nfirst, think.\n[BEGIN FINAL RESPONSE]\nDone."
    assert CODEC.decode(header).reasoning is None


def test_solar_open_value_closed_by_the_calls_end_and_cut_call() -> None:
    """vLLM tests/tool_parsers/test_solar_open2_tool_parser.py: a dropped <|tool_arg:end|>
    does not swallow the next call; an unterminated block is no call, kept as content."""
    text = ("<|tool_call:start|>read_file\n<|tool_arg:start|>path<|tool_arg:value|>oops"
            "<|tool_call:end|><|tool_call:start|>get_weather\n<|tool_arg:start|>city"
            "<|tool_arg:value|>Seoul<|tool_arg:end|>\n<|tool_call:end|>")
    r = CODEC.decode(text)
    assert _calls(r) == [("read_file", {"path": "oops"}), ("get_weather", {"city": "Seoul"})]
    assert r.calls[0].repairs == ["xml.balance_tags"]
    cut = "Let me check.<|tool_call:start|>lookup\n<|tool_arg:start|>query<|tool_arg:value|>Seo"
    r = CODEC.decode(cut)
    assert r.calls == [] and r.content == cut and not r.ok
    assert CODEC.decode(cut, finish_reason="length").errors[0].code == "truncated"


def test_llama_31_built_in_tools() -> None:
    """Meta's Llama 3.1 prompt format, built-in tools (as llama.cpp's Llama 3.x handler reads
    them): `<|python_tag|>brave_search.call(query=…)<|eom_id|>` calls the `brave_search` tool
    the caller declared."""
    tools = [{"name": "brave_search", "parameters": {"type": "object", "properties": {
        "query": {"type": "string"}}, "required": ["query"]}}]
    codec = ToolCallCodec(tools)
    text = ('<|python_tag|>brave_search.call(query="current weather in Menlo Park, California")'
            "<|eom_id|>")
    r = codec.decode(text)
    assert _calls(r) == [("brave_search", {"query": "current weather in Menlo Park, California"})]
    assert r.calls[0].format == "llama" and r.content == ""
    for cut in range(len(text) + 1):
        check(codec, text, [text[:cut], text[cut:]])


@pytest.mark.parametrize("text, calls, content", [
    ('<tool_call>\n{"name": "get_weather", "arguments": {"city": "Beijing"}}\n</tool_call>\n',
     [("get_weather", {"city": "Beijing"})], ""),
    ('I need to call a tool.\n</think>\n\n<tool_call>\n{"name": "get_weather", "arguments": '
     '{"city": "Beijing"}}\n</tool_call>\n', [("get_weather", {"city": "Beijing"})],
     "I need to call a tool.\n</think>"),
])
def test_ernie_45_calls(text, calls, content) -> None:
    """vLLM tests/tool_parsers/test_ernie45_moe_tool_parser.py: ERNIE 4.5 writes Hermes
    calls (a stray </think> stays text unless the prompt opened the reasoning)."""
    r = CODEC.decode(text)
    assert (_calls(r), r.content) == (calls, content)
    assert ToolCallCodec(TOOLS, **PRESETS["ernie45"]).decode(text).to_dict()["calls"]


def test_granite_thought_process_is_reasoning_only_when_granite_is_named() -> None:
    """IBM Granite 3.2: its chat template asks for "Here is my thought process:" then "Here
    is my response:" (vLLM's GraniteReasoningParser reads the same phrases). They are
    ordinary words, which other models and people write: read only with formats=["granite"]
    (the granite preset), else the text stays content."""
    text = ("Here is my thought process:\nThe user wants the weather.\nHere is my response:\n"
            '<|tool_call|>[{"name": "get_weather", "arguments": {"city": "Oslo"}}]')
    granite = ToolCallCodec(TOOLS, **PRESETS["granite"])
    r = granite.decode(text)
    assert (r.reasoning, r.content) == ("The user wants the weather.", "")
    assert _calls(r) == [("get_weather", {"city": "Oslo"})]
    for cut in range(len(text) + 1):
        check(granite, text, [text[:cut], text[cut:]])
    prose = "Here is my thought process:\n1. read the file\nHere is my response: done."
    assert CODEC.decode(prose).to_dict()["content"] == prose


def test_hunyuan_suffixed_tokens_mixed_with_plain_ones_are_refused() -> None:
    """Which tokens are markup is not written when a block mixes spellings: said, not
    guessed; a value closed by its call's end keeps the token as the model wrote it."""
    text = (f"<tool_calls{HY4}><tool_call{HY4}>get_weather<arg_key{HY4}>city</arg_key{HY4}>"
            f"<arg_value{HY4}>Tok</arg_value></tool_call{HY4}></tool_calls{HY4}>")
    r = CODEC.decode(text)
    assert r.calls == [] and r.errors[0].code == "invalid_xml" and r.content == text
    assert text[r.errors[0].details["position"]:].startswith("</arg_value>")
    kept = text.replace("</arg_value>", f"</arg_key{HY4}>")
    r = CODEC.decode(kept)
    assert _calls(r) == [("get_weather", {"city": f"Tok</arg_key{HY4}>"})]
    # a summary line that names tools is prose
    prose = "<tool_calls: read_file, write_file> were called"
    assert CODEC.decode(prose).to_dict()["content"] == prose


@pytest.mark.parametrize("preset, text, calls, content, reasoning", [
    # vLLM tests/reasoning/test_hunyuan_reasoning_parser.py: simple_reasoning
    ("hunyuan", "<think>\nThis is a reasoning section\n</think>\n<answer>\nThis is the rest\n"
     "</answer>", [], "This is the rest", "This is a reasoning section"),
    # SGLang's Hunyuan detector: the calls inside the answer
    ("hunyuan", '<think>\nweather?\n</think>\n<answer>\nLet me check.<tool_calls>[{"name": '
     '"get_weather", "arguments": {"city": "Paris"}}]</tool_calls>\n</answer>',
     [("get_weather", {"city": "Paris"})], "Let me check.", "weather?"),
    # MLX's Hy3 official-markers tests: the high-effort prompt opened <think:opensource>
    ("hy3-thinking", f"planning the answer</think{HY3}>The answer is 4.", [], "The answer is 4.",
     "planning the answer"),
    # vLLM's ERNIE 4.5 reasoning parser (its docstring's format), the Thinking model
    ("ernie-4.5-thinking", "abc\n</think>\n\n<response>\ndef\n</response>\n", [], "def", "abc"),
    # vLLM tests/tool_parsers/test_ernie45_moe_tool_parser.py: tool_call_with_content_before
    ("ernie-4.5-thinking", 'I need to call a tool.\n</think>\n\n<tool_call>\n{"name": '
     '"get_weather", "arguments": {"city": "Beijing"}}\n</tool_call>\n',
     [("get_weather", {"city": "Beijing"})], "", "I need to call a tool."),
    # the answer, then a call beside it: the answer is content as written
    ("ernie-4.5", '<response>\nUse <tool_call> tags.\n</response>\n<tool_call>\n{"name": '
     '"get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>',
     [("get_weather", {"city": "Oslo"})], "Use <tool_call> tags.", None),
    # Muse Glimmer (vLLM reasoning/muse_glimmer_utils.py's messages; the prompt ends with
    # <|start|>assistant): reasoning to=self, answer to=user
    ("muse-glimmer", " to=self<|message|>Easy.<|eom|><|start|>assistant to=user<|message|>"
     "It is sunny.<|eot|>", [], "It is sunny.", "Easy."),
    # a public Muse-Glimmer-30B tool-parser test vector: the call message to=functions
    ("muse-glimmer", ' to=self<|message|>Need the weather.<|eom|><|start|>assistant '
     'to=functions<|message|><atem:function_calls><atem:invoke name="get_weather">'
     '<atem:parameter name="city">Paris</atem:parameter></atem:invoke></atem:function_calls>'
     "<|eom|>", [("get_weather", {"city": "Paris"})], "", "Need the weather."),
    ("muse-glimmer", 'to=functions<|message|><atem:function_calls><atem:invoke name="lookup">'
     '<atem:parameter name="query">x</atem:parameter></atem:invoke></atem:function_calls>'
     "<|eot|>", [("lookup", {"query": "x"})], "", None),
])
def test_answer_wrappers_and_headers_with_the_familys_preset(preset, text, calls, content,
                                                            reasoning) -> None:
    codec = ToolCallCodec(TOOLS, **PRESETS[preset])
    r = codec.decode(text)
    assert r.ok, r.errors
    assert (_calls(r), r.content, r.reasoning) == (calls, content, reasoning)
    for cut in range(len(text) + 1):
        check(codec, text, [text[:cut], text[cut:]])


@pytest.mark.parametrize("text", [
    "Put the final answer in <answer></answer> tags.",
    "The API returns <response>ok</response> on success.",
])
def test_answer_wrappers_are_text_unless_the_family_is_named(text) -> None:
    assert CODEC.decode(text).to_dict()["content"] == text
    assert ToolCallCodec(TOOLS, formats=["hermes"]).decode(text).to_dict()["content"] == text


def test_muse_headers_with_every_format_on_are_harmonys_and_said() -> None:
    """`<|start|>assistant to=` opens gpt-oss's recipient header when harmony is read: Muse
    Glimmer's framed headers are read with its preset (formats=["muse_glimmer"]); with every
    format on, the block is harmony's, and what it cannot read is said, never dropped; the
    first header, ordinary letters (`to=self`), is not read unless the family is named."""
    text = " to=self<|message|>Easy.<|eom|><|start|>assistant to=user<|message|>Sunny.<|eot|>"
    r = CODEC.decode(text)
    assert not r.ok and r.reasoning is None and "Sunny." in r.content
    assert r.content.startswith("to=self<|message|>Easy.")
    for cut in range(len(text) + 1):
        check(CODEC, text, [text[:cut], text[cut:]])
