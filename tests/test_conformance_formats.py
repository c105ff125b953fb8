"""Each family's current format, read in batch and in every chunking. The texts follow the
official sources named above each test (chat templates rendered, engine parser tests, bug
reports)."""

from __future__ import annotations

import random

from hypothesis import given, settings
from hypothesis import strategies as st
from toolcodec.decoding.codec import ToolCallCodec

from tests.test_stream import check, chunkings

TOOLS = [
    {"name": "get_weather", "parameters": {"type": "object", "properties": {
        "location": {"type": "string"}, "days": {"type": "integer"}}, "required": ["location"]}},
    {"name": "write_file", "parameters": {"type": "object", "properties": {
        "path": {"type": "string"}, "content": {"type": "string"}}, "required": ["path"]}},
    {"name": "list_files", "parameters": {"type": "object", "properties": {}}},
]
BAR = "\uff5c"


def read(text: str, prefill: bool | str = False) -> dict:
    """The batch result, after checking that every chunking of the stream gives the same."""
    c = ToolCallCodec(TOOLS, starts_in_reasoning=prefill)
    for parts in chunkings(text, random.Random(len(text))):
        check(c, text, parts)
    return c.decode(text).to_dict()


def calls(result: dict) -> list[tuple[str, dict]]:
    return [(c["name"], c["arguments"]) for c in result["calls"]]


def dsml(block: str, *invokes: str, bar: str = BAR) -> str:
    return (f"<{bar}DSML{bar}{block}>\n" + "".join(invokes)
            + f"</{bar}DSML{bar}{block}>")


def invoke(name: str, *params: tuple[str, str, str], bar: str = BAR) -> str:
    inner = "".join(f'<{bar}DSML{bar}parameter name="{k}" string="{s}">{v}'
                    f"</{bar}DSML{bar}parameter>\n" for k, v, s in params)
    return f'<{bar}DSML{bar}invoke name="{name}">\n{inner}</{bar}DSML{bar}invoke>\n'


# DeepSeek V3.2 (encoding_dsv32: <｜DSML｜function_calls>; vLLM's deepseekv32 parser tests),
# V4 (<｜DSML｜tool_calls>, as engines' marker tables list it), and the " calls" spelling and
# self-closing invoke reported from V4.1 outputs.
def test_dsml_in_every_block_spelling():
    weather = invoke("get_weather", ("location", "Seoul", "true"), ("days", "3", "false"))
    for block in ("function_calls", "tool_calls", " calls"):
        result = read("Checking." + dsml(block, weather))
        assert calls(result) == [("get_weather", {"location": "Seoul", "days": 3})], block
        assert result["content"] == "Checking." and result["calls"][0]["format"] == (
            "deepseek_dsml")


def test_dsml_self_closing_invoke_and_ascii_bars():
    text = dsml("tool_calls", f'<{BAR}DSML{BAR}invoke name="list_files"/>\n',
                invoke("get_weather", ("location", "Oslo", "true")))
    assert calls(read(text)) == [("list_files", {}), ("get_weather", {"location": "Oslo"})]
    ascii_text = dsml("function_calls", invoke("get_weather", ("location", "Oslo", "true"),
                                               bar="|"), bar="|")
    assert calls(read(ascii_text)) == [("get_weather", {"location": "Oslo"})]


def test_dsml_string_false_is_json_and_string_true_is_text():
    text = dsml("tool_calls", invoke("write_file", ("path", "a.json", "true"),
                                     ("content", '{"k": [1, 2]}', "true")))
    assert calls(read(text)) == [("write_file", {"path": "a.json", "content": '{"k": [1, 2]}'})]


# gpt-oss (OpenAI harmony format docs: the recipient may sit in the role header; vLLM's
# openai_tool_parser tests): the prompt ends with <|start|>assistant, the output goes on with
# " to=functions.NAME<|channel|>commentary <|constrain|>json<|message|>{…}<|call|>".
def test_harmony_recipient_in_the_role_header_right_after_the_prompt():
    text = (' to=functions.get_weather<|channel|>commentary <|constrain|>json<|message|>'
            '{"location": "Tokyo"}<|call|>')
    result = read(text)
    assert calls(result) == [("get_weather", {"location": "Tokyo"})]
    assert result["content"] == "" and result["calls"][0]["format"] == "harmony"
    # later in the output the header starts again with <|start|>assistant
    later = ("<|channel|>analysis<|message|>Need weather.<|end|><|start|>assistant"
             ' to=functions.get_weather<|channel|>commentary json<|message|>{"location": "Oslo"}'
             "<|call|>")
    result = read(later)
    assert calls(result) == [("get_weather", {"location": "Oslo"})]
    assert result["reasoning"] == "Need weather."


def test_harmony_recipient_words_in_prose_are_prose():
    text = "Send it to=functions.get_weather<|channel|>commentary<|message|>{}"
    assert read(text)["calls"] == []


def test_harmony_final_channel_is_content_even_when_it_looks_like_a_call():
    call = '{"name": "get_weather", "arguments": {"location": "Oslo"}}'
    text = ("<|channel|>analysis<|message|>Show the format.<|end|><|start|>assistant"
            f"<|channel|>final<|message|>Call it like {call}<|return|>")
    result = read(text)
    assert result["calls"] == [] and result["content"] == f"Call it like {call}"


KIMI_CALL = ("<|tool_call_begin|>functions.write_file:0<|tool_call_argument_begin|>{args}"
             "<|tool_call_end|>")


def kimi(*args: str, between: str = "") -> str:
    return ("<|tool_calls_section_begin|>" + between.join(KIMI_CALL.replace("{args}", a)
                                                          for a in args)
            + "<|tool_calls_section_end|>")


# Kimi-K2 (vLLM's kimi_k2 parser tests; llama.cpp #17376: the singular section token)
def test_kimi_markers_inside_a_json_string_are_text():
    for token in ("<|tool_call_end|>", "<|tool_calls_section_end|>", "<|tool_call_begin|>"):
        args = '{"path": "a.md", "content": "stop at ' + token + ' please"}'
        result = read("Writing." + kimi(args))
        assert calls(result) == [("write_file", {"path": "a.md",
                                                 "content": f"stop at {token} please"})], token
        assert result["content"] == "Writing."


def test_kimi_noise_between_calls_is_dropped_and_said():
    result = read(kimi('{"path": "a"}', '{"path": "b"}', between="\n, then\n"))
    assert calls(result) == [("write_file", {"path": "a"}), ("write_file", {"path": "b"})]
    assert "kimi.noise_dropped" in result["repairs"]
    before = kimi('{"path": "a"}').replace("<|tool_calls_section_begin|>",
                                           "<|tool_calls_section_begin|>Calling:\n")
    result = read(before)
    assert calls(result) == [("write_file", {"path": "a"})]
    assert result["calls"][0]["repairs"] == ["kimi.noise_dropped"]
    # a section of noise only is refused and kept
    assert read("<|tool_calls_section_begin|>nothing<|tool_calls_section_end|>")["calls"] == []


def test_kimi_empty_section_and_singular_section_token():
    result = read("Nothing to call.<|tool_calls_section_begin|>\n<|tool_calls_section_end|>")
    assert (result["calls"], result["content"], result["errors"]) == (
        [], "Nothing to call.", [])
    singular = kimi('{"path": "a"}').replace("tool_calls_section", "tool_call_section")
    assert calls(read(singular)) == [("write_file", {"path": "a"})]


# DeepSeek V3.1 (vLLM's deepseekv31 parser tests) with its own tokens inside a string
def test_deepseek_tokens_inside_a_json_string_are_text():
    value = ("end with <\uff5ctool\u2581call\u2581end\uff5c> or "
             "<\uff5ctool\u2581calls\u2581end\uff5c>")
    text = ("<\uff5ctool\u2581calls\u2581begin\uff5c><\uff5ctool\u2581call\u2581begin\uff5c>"
            "write_file<\uff5ctool\u2581sep\uff5c>"
            + '{"path": "n.md", "content": "' + value + '"}'
            + "<\uff5ctool\u2581call\u2581end\uff5c><\uff5ctool\u2581calls\u2581end\uff5c>")
    assert calls(read(text)) == [("write_file", {"path": "n.md", "content": value})]


# Gemma 4 chat template (call:NAME{…} between <|tool_call> and <tool_call|>, strings in <|"|>)
def test_gemma_tokens_inside_a_quoted_string_are_text():
    q = '<|"|>'
    text = (f"<|tool_call>call:write_file{{path:{q}g.md{q},content:{q}ends with <tool_call|> "
            f"and <|tool_call>{q}}}<tool_call|>After.")
    result = read(text)
    assert calls(result) == [("write_file", {"path": "g.md",
                                             "content": "ends with <tool_call|> and <|tool_call>"})]
    assert result["content"] == "After."


def test_gemma_unquoted_keys_with_spaces():
    q = '<|"|>'
    result = read(f"<|tool_call>call:write_file{{path:{q}a{q}, file mode:{q}w{q}}}<tool_call|>")
    assert calls(result) == [("write_file", {"path": "a", "file mode": "w"})]


def test_a_stray_quote_still_ends_at_the_first_end_token():
    text = ('<|tool_calls_section_begin|><|tool_call_begin|>functions.write_file:0'
            '<|tool_call_argument_begin|>{"path": "a}<|tool_call_end|><|tool_calls_section_end|>'
            "Done.")
    result = read(text)
    assert calls(result) == [("write_file", {"path": "a"})] and result["content"] == "Done."
    assert "json.unclosed_string" in result["calls"][0]["repairs"]


def k3_call(name: str, *args: tuple[str, str, str], index: int = 0) -> str:
    inner = "".join(f'<|open|>argument key="{k}" type="{t}"<|sep|>{v}<|close|>argument<|sep|>'
                    for k, t, v in args)
    return f'<|open|>call tool="{name}" index="{index}"<|sep|>{inner}<|close|>call<|sep|>'


# Kimi K3 (the template's open_tag/close_tag grammar as llama.cpp's kimi-k3 chat format and
# SGLang's kimi_k3 parser read it): the prompt opens the think section
def test_kimi_k3_typed_calls_with_its_framing():
    text = ("I need Paris.<|close|>think<|sep|><|open|>response<|sep|>Checking.<|close|>response"
            "<|sep|><|open|>tools<|sep|>"
            + k3_call("get_weather", ("location", "string", 'Paris, "FR"'),
                      ("days", "integer", "3"))
            + k3_call("list_files", index=1)
            + "<|close|>tools<|sep|><|close|>message<|sep|><|end_of_msg|>")
    result = read(text, "kimi_k3")
    assert calls(result) == [("get_weather", {"location": 'Paris, "FR"', "days": 3}),
                             ("list_files", {})]
    assert (result["content"], result["reasoning"]) == ("Checking.", "I need Paris.")
    assert {c["format"] for c in result["calls"]} == {"kimi_k3"}


def test_kimi_k3_string_argument_keeps_json_looking_text_and_attributes_unescape():
    text = ('<|open|>tools<|sep|><|open|>call tool="write_file" index="0"<|sep|>'
            '<|open|>argument key="path" type="string"<|sep|>a&amp;b.md<|close|>argument<|sep|>'
            '<|open|>argument key="content" type="string"<|sep|>{"x": 1}<|close|>argument<|sep|>'
            "<|close|>call<|sep|><|close|>tools<|sep|>")
    assert calls(read(text)) == [("write_file", {"path": "a&amp;b.md", "content": '{"x": 1}'})]
    quoted_name = text.replace('tool="write_file"', 'tool="functions.write_file"')
    assert calls(read(quoted_name))[0][0] == "write_file"


def test_kimi_k3_cut_after_a_complete_argument_keeps_the_call_and_says_so():
    text = ("<|open|>tools<|sep|>" + k3_call("get_weather", ("location", "string", "Oslo"))
            .removesuffix("<|close|>call<|sep|>"))
    result = read(text)
    assert calls(result) == [("get_weather", {"location": "Oslo"})]
    assert "format.missing_end" in result["calls"][0]["repairs"]


# Qwen3-Coder (vLLM qwen3coder parser; bug reports of outputs that start at <function=…> and
# still close the lost wrapper)
def test_qwen_bare_function_then_a_stray_wrapper_close():
    text = ("<function=get_weather>\n<parameter=location>\nOslo\n</parameter>\n</function>\n"
            "</tool_call>\nDone.")
    result = read(text)
    assert calls(result) == [("get_weather", {"location": "Oslo"})]
    assert result["content"] == "Done."
    assert result["calls"][0]["repairs"] == ["xml.stray_close_dropped"]
    # a </tool_call> further on, after prose, is prose
    later = text.replace("</function>\n", "</function>\nok ")
    assert read(later)["content"] == "ok </tool_call>\nDone."


def qwen(name: str, **params: str) -> str:
    inner = "".join(f"<parameter={k}>\n{v}\n</parameter>\n" for k, v in params.items())
    return f"<tool_call>\n<function={name}>\n{inner}</function>\n</tool_call>"


# Qwen3-Coder template layout: a value's structural closer is `\n</parameter>\n` followed by
# the next parameter or </function>; agents that write docs put the markers in values
def test_qwen_value_holding_its_own_markers():
    for value in ("Close each value with </parameter> and open the next with <parameter=path>.",
                  "Example:\n<parameter=path>\nx\n</parameter>\nend",
                  "a </parameter>b</parameter> c"):
        result = read(qwen("write_file", path="F.md", content=value) + "\nDone.")
        assert calls(result) == [("write_file", {"path": "F.md", "content": value})], value
        assert result["content"] == "Done."


def test_qwen_unclosed_parameter_still_closes_at_the_next_one():
    text = ("<tool_call>\n<function=get_weather>\n<parameter=location>\nOslo\n"
            "<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>")
    result = read(text)
    assert calls(result) == [("get_weather", {"location": "Oslo", "days": 3})]
    assert result["calls"][0]["repairs"] == ["xml.balance_tags"]


# GLM-4.5 / 4.6 template (vLLM glm4_moe parser tests): a value about the format
def test_glm_value_holding_tool_call_tags():
    for value in ("wrap calls in <tool_call> tags", "end with </tool_call> always",
                  "<tool_call>x</tool_call>"):
        text = (f"<tool_call>write_file\n<arg_key>path</arg_key>\n<arg_value>t.md</arg_value>\n"
                f"<arg_key>content</arg_key>\n<arg_value>{value}</arg_value>\n</tool_call>Done.")
        result = read(text)
        assert calls(result) == [("write_file", {"path": "t.md", "content": value})], value
        assert result["content"] == "Done."


def test_glm_value_never_closed_ends_at_the_next_call():
    text = ("<tool_call>write_file\n<arg_key>path</arg_key>\n<arg_value>t.md\n"
            "<tool_call>list_files\n</tool_call>")
    result = read(text)
    assert ("list_files", {}) in calls(result)


# Mistral tokenizer v11+ ([TOOL_CALLS]NAME[ARGS]{…}; vLLM mistral tool parser tests)
def test_mistral_value_holding_its_own_marker():
    value = "prefix [TOOL_CALLS] then get_weather[ARGS]{}"
    text = ('[TOOL_CALLS]write_file[ARGS]{"path": "m.md", "content": "' + value + '"}'
            '[TOOL_CALLS]get_weather[ARGS]{"location": "Oslo"}')
    result = read(text)
    assert calls(result) == [("write_file", {"path": "m.md", "content": value}),
                             ("get_weather", {"location": "Oslo"})]
    assert result["content"] == ""


def test_mistral_call_id_and_reasoning():
    text = ('[THINK]Two cities.[/THINK][TOOL_CALLS]get_weather[CALL_ID]a1b2c3d4e[ARGS]'
            '{"location": "Paris"}[TOOL_CALLS]get_weather[CALL_ID]z9y8x7w6v[ARGS]'
            '{"location": "Oslo", "days": 3}')
    result = read(text)
    assert calls(result) == [("get_weather", {"location": "Paris"}),
                             ("get_weather", {"location": "Oslo", "days": 3})]
    assert result["reasoning"] == "Two cities."


def test_qwen_value_holding_tool_call_tags():
    value = "wrap calls in <tool_call> and </tool_call> tags"
    result = read(qwen("write_file", path="T.md", content=value) + "\nDone.")
    assert calls(result) == [("write_file", {"path": "T.md", "content": value})]
    assert result["content"] == "Done."


# Pieces of the formats above, for generated outputs: markers inside and outside strings and
# values, reasoning openers and closers of every row, framing.
PIECES = [
    "Sure. ", "\n", " ", '"', "\\", "{", "}", "[", "]", ",", ":", "ok", '"x"', '{"path": "a"}',
    "[THINK]", "[/THINK]", "<think>", "</think>", "<|channel>thought", "<channel|>",
    "<|open|>think<|sep|>", "<|close|>think<|sep|>", "<|open|>response<|sep|>",
    "<|close|>response<|sep|>", "<|close|>message<|sep|>", "<|end_of_msg|>",
    "<|open|>tools<|sep|>", "<|close|>tools<|sep|>", k3_call("list_files"),
    k3_call("get_weather", ("location", "string", "Oslo")), "<|open|>argument", '"<|sep|>',
    dsml("tool_calls", invoke("get_weather", ("location", "Oslo", "true"))),
    f"<{BAR}DSML{BAR} calls>", f"</{BAR}DSML{BAR} calls>", f'<{BAR}DSML{BAR}invoke name="x"/>',
    " to=functions.get_weather", "<|channel|>commentary", " <|constrain|>json", "<|message|>",
    "<|call|>", "<|channel|>final<|message|>", "<|channel|>analysis<|message|>", "<|end|>",
    "<|start|>assistant", "<|return|>",
    "<|tool_calls_section_begin|>", "<|tool_calls_section_end|>", "<|tool_call_begin|>",
    "functions.write_file:0<|tool_call_argument_begin|>", "<|tool_call_end|>",
    "<|tool_call>", "<tool_call|>", "call:list_files{", '<|"|>', "call:write_file{path:",
    "[TOOL_CALLS]", "write_file[ARGS]", "[CALL_ID]ab12", "<tool_call>", "</tool_call>",
    "<function=write_file>", "<parameter=path>", "\na.md\n", "</parameter>", "</function>",
    "write_file\n", "<arg_key>path</arg_key>", "<arg_value>", "</arg_value>",
]


@given(st.lists(st.sampled_from(PIECES), max_size=30),
       st.sampled_from([False, True, "mistral", "gemma4", "kimi_k3", "harmony"]),
       st.randoms(use_true_random=False))
@settings(max_examples=300, deadline=None)
def test_stream_equals_batch_on_generated_outputs(pieces, prefill, rng):
    text = "".join(pieces)
    c = ToolCallCodec(TOOLS, starts_in_reasoning=prefill)
    for parts in chunkings(text, rng)[1:]:
        check(c, text, parts)


def test_escaped_quotes_in_a_json_string_keep_the_string_open():
    for content in ('say \\" <|tool_call_end|> then', 'ends with a backslash \\\\'):
        args = '{"path": "a", "content": "' + content + '"}'
        result = read(kimi(args) + "After.")
        expected = content.replace('\\"', '"').replace("\\\\", "\\")
        assert calls(result) == [("write_file", {"path": "a", "content": expected})], content
        assert result["content"] == "After."
