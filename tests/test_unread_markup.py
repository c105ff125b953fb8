"""``toolcodec.decoding.unread_markup``: call markup the decoder did not read is said, in ``decode``
and in the stream alike; prose and code that only mention markup are not flagged."""

from __future__ import annotations

import re
import sys

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from toolcodec.decoding.codec import ToolCallCodec
from toolcodec.decoding.unread_markup import KINDS, unread_markup

TOOLS = [{"name": "get_weather", "parameters": {"type": "object", "properties": {
    "city": {"type": "string"}}, "required": ["city"]}}]
CODEC = ToolCallCodec(TOOLS)

# Outputs of families or shapes the decoder does not read (Cohere and Hunyuan: under options
# that leave their formats out, here Mistral's only), and what each is flagged as.
LEFT_OUT = ToolCallCodec(TOOLS, formats=["mistral"])
UNREAD = {
    # Cohere Command A (its chat template's action block)
    "cohere": '<|START_THINKING|>Need Oslo.<|END_THINKING|><|START_ACTION|>[\n  {"tool_call_id":'
              ' "0", "tool_name": "get_weather", "parameters": {"city": "Oslo"}}\n]<|END_ACTION|>',
    # Hunyuan: <tool_calls> with name<tool_sep>arguments
    "hunyuan": '<tool_calls>\n<tool_call>get_weather\n<tool_sep>\n{"city": "Oslo"}\n</tool_call>'
               '\n</tool_calls>',
    # an unknown special-token family
    "special_token": 'Sure.<|tool_invoke|>get_weather {"city": "Oslo"}<|tool_invoke_end|>',
}

PROSE = [
    "Wrap each call in <tool_call> and </tool_call> tags, as the docs say.",
    "Use `<tool_call>{\"name\": \"get_weather\"}</tool_call>` in your prompt.",
    "Example:\n```xml\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {}}\n</tool_call>"
    "\n```\nThat is the shape.",
    "The template has `<|START_ACTION|>` and `<|END_ACTION|>` tokens.",
    "In HTML, write a < b and <b>bold</b>; lists look like [1, 2] and [ARGS] is a word.",
    "A Mistral model writes [TOOL_CALLS] before its calls.",
    "Special tokens such as <|im_start|> and <|endoftext|> frame the chat.",
    "",
]


@pytest.mark.parametrize("what", sorted(UNREAD))
def test_unread_families_are_said_by_decode_and_the_stream(what: str) -> None:
    text = UNREAD[what]
    codec = LEFT_OUT if what in ("cohere", "hunyuan") else CODEC
    result = codec.decode(text).to_dict()
    flagged = [e for e in result["errors"] if e["code"] == "unrecognised_markup"]
    assert [e["markup"] for e in flagged] == [what] and result["ok"] is False
    assert text.startswith(flagged[0]["raw"][:20]) or flagged[0]["raw"] in text
    s = codec.stream(id_prefix="x_")
    for i in range(0, len(text), 3):
        s.feed(text[i:i + 3])
    s.close()
    assert s.result().to_dict() == codec.decode(text).to_dict()


@pytest.mark.parametrize("text", PROSE)
def test_prose_and_code_that_mention_markup_are_not_flagged(text: str) -> None:
    assert unread_markup(text) == []
    codes = [e["code"] for e in CODEC.decode(text).to_dict()["errors"]]
    assert "unrecognised_markup" not in codes


def test_a_family_left_out_by_the_options_is_said() -> None:
    text = 'Checking.\n<tool_call>\n{"name": "get_weather", "arguments": {"city": "Oslo"}}\n' \
           "</tool_call>"
    assert CODEC.decode(text).to_dict()["calls"]  # read when hermes is among the formats
    only_mistral = ToolCallCodec(TOOLS, formats=["mistral"])
    result = only_mistral.decode(text).to_dict()
    assert result["calls"] == []
    assert [e["markup"] for e in result["errors"]] == ["tool_call_tag"]


def test_a_block_the_decoder_read_and_reported_is_not_reported_twice() -> None:
    text = '<tool_call>{"name": "launch_rockets", "arguments": {}}</tool_call>'
    codes = [e["code"] for e in CODEC.decode(text).to_dict()["errors"]]
    assert codes == ["unknown_tool"]


def test_every_kind_is_in_the_bounded_set() -> None:
    texts = [*UNREAD.values(), "[TOOL_CALLS][{\"name\": \"x\"}]", "<function=f>\n<parameter=a>"]
    kinds = {f.what for t in texts for f in unread_markup(t)}
    assert kinds <= set(KINDS) and {"bracket_token", "tool_call_tag"} <= kinds


# Pieces of every pattern's markup (and near misses), joined at random: the one-scan check
# for what markup starts with must pass over no text any of the patterns would flag.
_PIECES = ["<", "[", "]", "|", "｜", ">", "{", "(", "\n", " ", "`", "```", "x", "tool_call",
           "<tool_call>", "<tool_calls>", "<tool_sep>", "<tool_use>", "<tool_code>",
           "<function_calls>", "<function=get_weather>", "<invoke name=\"f\">", "<|", "|>",
           "<｜", "｜>", "START_ACTION", "tool_invoke", "[TOOL_CALLS]", "[TOOL_REQUEST]",
           "[TOOL_CALL]", "[FUNCTION_CALLS]", "[FUNCTION_CALL]", "[ARGS]", "get_weather",
           "Tool_call", "<TOOL_CALL>", "[tool_calls]", " {\"a\": 1}", "[{", "get_weather {",
           "get_weather\n", "f[ARGS]{", "<｜tool▁calls▁begin｜>", "<|tool_invoke|>",
           "<｜START_ACTION｜>"]


@settings(max_examples=400)
@given(st.lists(st.sampled_from(_PIECES), max_size=6).map("".join))
def test_the_quick_check_passes_over_nothing_a_pattern_flags(text: str) -> None:
    with_check = unread_markup(text)
    module = sys.modules[unread_markup.__module__]
    quick = module._ANY
    module._ANY = re.compile("")  # every text goes through the four patterns
    try:
        assert unread_markup(text) == with_check
    finally:
        module._ANY = quick
