"""Reasoning the prompt opened (a preset's ``starts_in_reasoning``) meets outputs that do not
follow it: a model server that split the reasoning off already (``reasoning_content``, whole
or streamed), and a Kimi K3 model that skips thinking and calls at once. The call is read as
a call, by ``decode`` and the stream alike."""

from __future__ import annotations

import pytest
from toolcodec.decoding.codec import ToolCallCodec

from tests.upstream_standin import CASES, TOOLS

R1 = CASES["fmt_deepseek_r1"]["content"]  # "…reasoning\n</think>\n\nOne moment.<｜tool▁calls…"
K3_CALL = ('<|open|>tools<|sep|><|open|>call tool="get_weather" index="0"<|sep|>'
           '<|open|>argument key="city" type="string"<|sep|>Oslo<|close|>argument<|sep|>'
           "<|close|>call<|sep|><|close|>tools<|sep|><|close|>message<|sep|>")


def _streamed(codec: ToolCallCodec, message: dict, size: int) -> dict:
    s = codec.stream(id_prefix="t_")
    s.feed({"choices": [{"delta": {"role": "assistant", "content": ""}}]})
    reasoning = message.get("reasoning_content") or ""
    for i in range(0, len(reasoning), size):
        s.feed({"choices": [{"delta": {"reasoning_content": reasoning[i:i + size]}}]})
    content = message.get("content") or ""
    for i in range(0, len(content), size):
        s.feed({"choices": [{"delta": {"content": content[i:i + size]}}]})
    s.close()
    return s.result().to_dict()


@pytest.mark.parametrize("size", [1, 3, 8])
def test_reasoning_split_upstream_leaves_the_call_in_content(size: int) -> None:
    codec = ToolCallCodec(TOOLS, formats=["deepseek"], starts_in_reasoning=True)
    reasoning, content = R1.split("</think>")
    message = {"role": "assistant", "reasoning_content": reasoning, "content": content.strip()}
    result = codec.decode(message).to_dict()
    assert [(c["name"], c["arguments"]) for c in result["calls"]] == [
        ("search_files", {"query": "cats"})]
    assert result["content"] == "One moment." and result["reasoning"] == reasoning.strip()
    assert _streamed(codec, message, size) == result


def test_without_split_reasoning_the_prefill_still_applies() -> None:
    codec = ToolCallCodec(TOOLS, formats=["deepseek"], starts_in_reasoning=True)
    for message in ({"role": "assistant", "content": R1},
                    {"role": "assistant", "reasoning_content": "  ", "content": R1}):
        result = codec.decode(message).to_dict()
        assert result["reasoning"] == R1.split("</think>")[0].strip()
        assert [c["name"] for c in result["calls"]] == ["search_files"]
        assert _streamed(codec, message, 4) == result
    only_reasoning = {"role": "assistant", "content": "still thinking about it"}
    assert codec.decode(only_reasoning).to_dict()["reasoning"] == "still thinking about it"


@pytest.mark.parametrize("size", [1, 5, 64])
def test_kimi_k3_skipping_its_think_section_calls_at_once(size: int) -> None:
    codec = ToolCallCodec(TOOLS, formats=["kimi_k3"], starts_in_reasoning="kimi_k3")
    result = codec.decode(K3_CALL).to_dict()
    assert [(c["name"], c["arguments"]) for c in result["calls"]] == [
        ("get_weather", {"city": "Oslo"})]
    assert (result["content"], result["reasoning"] or "", result["errors"]) == ("", "", [])
    s = codec.stream(id_prefix="t_")
    for i in range(0, len(K3_CALL), size):
        s.feed(K3_CALL[i:i + size])
    s.close()
    assert s.result().to_dict() == result
    thought = "Oslo, then.<|close|>think<|sep|>" + K3_CALL  # thinking first: as before
    assert codec.decode(thought).to_dict()["reasoning"] == "Oslo, then."
