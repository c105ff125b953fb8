"""Edges of the formats: Seed-OSS reasoning blocks, a reasoning close tag left inside an
envelope, and schemas wrapped the way the AI SDK serialises them."""

from __future__ import annotations

import pytest
from toolcodec.decoding.codec import ToolCallCodec
from toolcodec.formats.table import END_OF_GENERATION

from tests.test_bare_calls import calls, decoded


def test_a_call_inside_seed_think_is_reasoning():
    call = "<seed:tool_call><function=get_weather><parameter=city>{}</parameter></function>" \
           "</seed:tool_call>"
    text = f"<seed:think>I would write {call.format('X')}.</seed:think>{call.format('Oslo')}"
    result = decoded(text)
    assert calls(result) == [("get_weather", {"city": "Oslo"})]
    assert result["reasoning"] == f"I would write {call.format('X')}."
    assert result["content"] == ""


def test_the_ai_sdk_schema_wrapper_is_unwrapped():
    wrapped = ToolCallCodec([{"name": "calc", "parameters": {"jsonSchema": {
        "type": "object", "properties": {"x": {"type": "number"}}}}}])
    result = wrapped.decode("<calc><x>3.5</x></calc>")
    assert [(c.name, c.arguments) for c in result.calls] == [("calc", {"x": 3.5})]
    # a property really named jsonSchema is not a wrapper
    plain = ToolCallCodec([{"name": "f", "parameters": {"type": "object", "properties": {
        "jsonSchema": {"type": "string"}}}}])
    assert plain.decode('<f><jsonSchema>s</jsonSchema></f>').calls[0].arguments == {
        "jsonSchema": "s"}


def test_a_think_close_left_inside_an_envelope_is_dropped_and_said():
    body = '{"name": "read_file", "arguments": {"path": "a</think>"}}'
    result = decoded(f"<tool_call>{body}</think></tool_call>")
    assert calls(result) == [("read_file", {"path": "a</think>"})]  # inside a string: data
    assert result["calls"][0]["repairs"] == ["format.think_close_dropped"]
    result = decoded(f"<tool_call>{body} trailing</think></tool_call>")
    assert result["calls"] == [] and not result["ok"]  # other text is still refused


def test_yaml_lines_inside_an_opening_tag_left_open():
    result = decoded("<get_weather\ncity: Oslo\ndays: 2\n/> Done.")
    assert calls(result) == [("get_weather", {"city": "Oslo", "days": 2})]
    assert result["calls"][0]["format"] == "yaml_tag"
    assert result["calls"][0]["repairs"] == ["xml.bare_tool_name"]
    assert result["content"] == "Done."


def test_the_call_token_kimi_shares_with_respelled_deepseek_reads_by_its_body():
    kimi = ('Sure.<|tool_call_begin|>functions.read_file:0<|tool_call_argument_begin|>'
            '{"path": "a"}<|tool_call_end|>')
    result = decoded(kimi + "<|tool_calls_section_end|> Done.")
    assert calls(result) == [("read_file", {"path": "a"})]
    assert result["calls"][0]["format"] == "kimi_k2" and result["content"] == "Sure. Done."
    assert decoded(kimi)["calls"][0]["repairs"] == ["format.missing_end"]
    deepseek = '<|tool_call_begin|>read_file<|tool_sep|>{"path": "a"}<|tool_call_end|>'
    assert decoded(deepseek + "<|tool_calls_end|>")["calls"][0]["format"] == "deepseek"


@pytest.mark.parametrize("text, content", [
    ("Hello there.<|eot_id|>", "Hello there."),
    ("Hi<|im_end|>\n<|endoftext|>\n", "Hi"),
    ('<tool_call>{"name": "read_file", "arguments": {"path": "a"}}</tool_call><|im_end|>', ""),
    ("x<|im_end|>y<|im_end|>", "x<|im_end|>y"),  # only tokens that close the output
    ("a <|eot_id|> b", "a <|eot_id|> b"),
])
def test_end_of_generation_tokens_that_close_the_output_are_not_content(text, content):
    result = decoded(text)
    assert result["content"] == content
    assert ("text.end_token_dropped" in result["repairs"]) == (not text.endswith(" b"))


@pytest.mark.parametrize("token", sorted(END_OF_GENERATION))
def test_each_end_token_after_brackets_that_start_none_is_dropped_streamed_or_not(token):
    # '<' and '[' that start no token come first; the token is cut after its first character
    text = f"a < b [c] <x [/y <b>{token}\n"
    assert decoded(text)["content"] == "a < b [c] <x [/y <b>"
    cut = text.index(token) + 1
    stream = ToolCallCodec(None).stream()
    released = [e["text"] for part in (text[:cut], text[cut:]) for e in stream.feed(part)
                if e["type"] == "content"]
    released += [e["text"] for e in stream.close() if e["type"] == "content"]
    assert "".join(released).strip() == "a < b [c] <x [/y <b>"
    assert stream.result().content == "a < b [c] <x [/y <b>"


GPT_OSS_CALL = ("<|start|>assistant<|channel|>commentary to=functions.read_file <|constrain|>json"
                '<|message|>{"path": "a"}<|call|>')


@pytest.mark.parametrize("text, content, reasoning, n_calls", [
    ("<|channel|>analysis<|message|>Need the file.<|end|>" + GPT_OSS_CALL, "", "Need the file.",
     1),
    ("<|channel|>analysis<|message|>Easy.<|end|><|start|>assistant<|channel|>final<|message|>"
     "It is 4.<|return|>", "It is 4.", "Easy.", 0),
    ("<|channel|>commentary<|message|>Let me look.<|end|>" + GPT_OSS_CALL, "Let me look.", None,
     1),
    # a call written in the analysis channel's text is the model thinking about one
    ("<|channel|>analysis<|message|>I could send " + GPT_OSS_CALL + "<|end|>", "", None, 0),
])
def test_gpt_oss_channels(text, content, reasoning, n_calls):
    result = decoded(text)
    assert result["content"] == content and len(result["calls"]) == n_calls
    if reasoning is not None:
        assert result["reasoning"] == reasoning
    assert all(c["format"] == "harmony" for c in result["calls"])


def test_a_qwen_call_tag_that_lost_its_lt_is_read_and_said():
    text = ("<tool_call>function=read_file>\n<parameter=path>\na.py\n</parameter>\n</function>\n"
            "</tool_call> ok")
    result = decoded(text)
    assert calls(result) == [("read_file", {"path": "a.py"})] and result["content"] == "ok"
    assert result["calls"][0]["repairs"] == ["xml.missing_lt"]
    assert result["calls"][0]["format"] == "qwen_xml"
    # in prose, "function=x>" after <tool_call> is still read only as that shape
    assert decoded("<tool_call>function = yes</tool_call>")["calls"] == []


@pytest.mark.parametrize("text, reasoning", [
    ("<|inner_prefix|>Check first.<|inner_suffix|>Done.", "Check first."),  # Apertus
    ("<|channel>thought\nCheck first.<channel|>Done.", "Check first."),  # Gemma 4
])
def test_reasoning_between_special_tokens(text, reasoning):
    result = decoded(text)
    assert result["reasoning"] == reasoning and result["content"] == "Done."
