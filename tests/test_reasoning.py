"""Reasoning read per family from one table (``toolcodec.formats.reasoning``), in batch and in
every chunking; ``starts_in_reasoning`` names the family's opener."""

from __future__ import annotations

import random

import pytest
from toolcodec.decoding.codec import ToolCallCodec
from toolcodec.formats.reasoning import REASONING_FORMATS, prefill_opener

from tests.test_stream import check, chunkings

TOOLS = [{"name": "get_weather", "parameters": {"type": "object", "properties": {
    "city": {"type": "string"}}, "required": ["city"]}}]
CALL = '<tool_call>{"name": "get_weather", "arguments": {"city": "Oslo"}}</tool_call>'


def decoded(text: str, prefill: bool | str = False) -> dict:
    return ToolCallCodec(TOOLS, starts_in_reasoning=prefill).decode(text).to_dict()


def every_chunking(text: str, prefill: bool | str = False) -> None:
    c = ToolCallCodec(TOOLS, starts_in_reasoning=prefill)
    for parts in chunkings(text, random.Random(len(text))):
        check(c, text, parts)


# (text, option, reasoning, content, calls): origin in the comment of each row
CASES = [
    # Magistral (mistral-common tokenizer v13; vLLM's mistral reasoning parser tests)
    ("[THINK]Check the city.[/THINK]It is sunny.", False, "Check the city.", "It is sunny.", 0),
    ("[THINK]Check.[/THINK][TOOL_CALLS]get_weather[ARGS]{\"city\": \"Oslo\"}", False, "Check.",
     "", 1),
    ("Check the city.[/THINK]It is sunny.", "mistral", "Check the city.", "It is sunny.", 0),
    ("Check the city.[/THINK]It is sunny.", "[THINK]", "Check the city.", "It is sunny.", 0),
    ("[THINK]cut off while thinking", False, "cut off while thinking", "", 0),  # length limit
    # a call written while thinking is not made
    ("[THINK]maybe " + CALL + "[/THINK]No call.", False, "maybe " + CALL, "No call.", 0),
    # Gemma 4 chat template: <|channel>thought … <channel|>
    ("<|channel>thought\nNeed it.<channel|>Sure.", False, "Need it.", "Sure.", 0),
    ("Need it.<channel|>Sure.", "gemma4", "Need it.", "Sure.", 0),
    # Kimi K3 (llama.cpp kimi-k3 chat format): the prompt opens the think section
    ("Need it.<|close|>think<|sep|><|open|>response<|sep|>Sure.<|close|>response<|sep|>"
     "<|close|>message<|sep|>", "kimi_k3", "Need it.", "Sure.", 0),
    # Qwen3 / DeepSeek-R1 templates: the prompt opens <think>
    ("Need it.</think>Sure.", True, "Need it.", "Sure.", 0),
    ("<think>Need it.</think>" + CALL, False, "Need it.", "", 1),
    # gpt-oss (OpenAI harmony): analysis is reasoning, final is content even when call-shaped
    ("<|channel|>analysis<|message|>Easy.<|end|><|start|>assistant<|channel|>final<|message|>"
     '{"name": "get_weather", "arguments": {"city": "Oslo"}}<|return|>', False, "Easy.",
     '{"name": "get_weather", "arguments": {"city": "Oslo"}}', 0),
]


@pytest.mark.parametrize("text, prefill, reasoning, content, n_calls", CASES)
def test_reasoning_per_family(text, prefill, reasoning, content, n_calls):
    result = decoded(text, prefill)
    assert (result["reasoning"], result["content"], len(result["calls"])) == (
        reasoning, content, n_calls)
    every_chunking(text, prefill)


def test_without_the_option_a_stray_closer_is_text():
    assert decoded("Check.[/THINK]Sure.")["content"] == "Check.[/THINK]Sure."


def test_every_reasoning_row_names_an_opener_the_option_takes():
    for row in REASONING_FORMATS:
        if row.kind == "reasoning":
            assert prefill_opener(row.id) == row.openers[0]
            text = "thinking" + row.closers[0] + "answer"
            result = decoded(text, row.id)
            assert (result["reasoning"], result["content"]) == ("thinking", "answer")


@pytest.mark.parametrize("bad", ["[/THINK]", "nope", 3, "harmony_final"])
def test_an_unknown_prefill_is_refused_when_the_codec_is_built(bad):
    with pytest.raises(ValueError, match="starts_in_reasoning"):
        ToolCallCodec(TOOLS, starts_in_reasoning=bad)


def test_a_job_names_the_family_of_its_reasoning_prefill():
    from toolcodec.worker.jobs import run_job

    job = {"id": "j1", "op": "decode", "payload": {
        "tools": TOOLS, "text": "Check.[/THINK]Sure.",
        "options": {"starts_in_reasoning": "mistral"}}}
    result = run_job(job)["result"]
    assert (result["reasoning"], result["content"]) == ("Check.", "Sure.")
    bad = run_job({**job, "payload": {**job["payload"], "options": {
        "starts_in_reasoning": "[/THINK]"}}})
    assert bad["error"]["field"] == "payload.options.starts_in_reasoning"


QWEN_CALL = ("<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n"
             "</function>\n</tool_call>")


@pytest.mark.parametrize("text, reasoning, content, n_calls", [
    # llama.cpp #23678 / #24202: Qwen3.5 calls without closing the prompt's <think>
    ("Paris weather, then answer.\n\n" + QWEN_CALL, "Paris weather, then answer.", "", 1),
    (QWEN_CALL, "", "", 1),
    # a call drafted while thinking, then the closer: reasoning, and the real call after it
    ("Draft:\n" + QWEN_CALL + "\n</think>\n\n" + QWEN_CALL, "Draft:\n" + QWEN_CALL, "", 1),
    # named mid-line, or without a body: prose of the reasoning
    ("I will use <tool_call> soon.</think>Done.", "I will use <tool_call> soon.", "Done.", 0),
    ("Maybe\n<tool_call> is the tag.</think>Done.", "Maybe\n<tool_call> is the tag.", "Done.",
     0),
    # cut inside the call: a call all the same (the codec says it was cut)
    ("Go.\n<tool_call>\n<function=get_weather>\n<parameter=city>\nParis", "Go.", "", 1),
])
def test_a_call_ends_prompt_opened_reasoning_unless_drafted(text, reasoning, content,
                                                            n_calls):
    result = decoded(text, True)
    assert (result["reasoning"], result["content"], len(result["calls"])) == (
        reasoning, content, n_calls)
    every_chunking(text, True)


def test_a_call_inside_a_think_the_model_opened_stays_reasoning():
    result = decoded("<think>Plan:\n" + QWEN_CALL + "\nmore</think>Done.")
    assert result["calls"] == [] and result["content"] == "Done."


def test_rows_of_a_call_format_are_read_only_with_that_format():
    text = "<|channel|>analysis<|message|>Easy.<|end|><|channel|>final<|message|>4<|return|>"
    assert ToolCallCodec(TOOLS, formats=["harmony"]).decode(text).reasoning == "Easy."
    other = ToolCallCodec(TOOLS, formats=["hermes"]).decode(text)
    assert other.reasoning is None and "<|channel|>analysis" in other.content
    prose = "Magistral writes [THINK] before its reasoning."
    assert ToolCallCodec(TOOLS, formats=["hermes"]).decode(prose).content == prose
    # the prompt's prefill names its family whatever the formats read
    only = ToolCallCodec(TOOLS, formats=["hermes"], starts_in_reasoning="mistral")
    assert only.decode("a[/THINK]b").reasoning == "a"


def test_every_reasoning_and_framing_token_split_at_every_position():
    from toolcodec.formats.reasoning import FRAMING

    tokens = [t for f in REASONING_FORMATS for t in f.openers + f.closers] + list(FRAMING)
    for token in tokens:
        text = f"pre {token}inside\n{CALL}\n{token} post"
        for prefill in (False, True):
            c = ToolCallCodec(TOOLS, starts_in_reasoning=prefill)
            for cut in range(1, len(text)):
                check(c, text, [text[:cut], text[cut:]])
