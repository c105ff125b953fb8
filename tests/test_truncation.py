"""Truncation is not intent: with ``finish_reason="length"`` a call the output was cut off in
yields no call but a ``truncated`` error, its text stays in ``content``, and calls that closed
before it are kept — in batch, in every chunking of the stream, for native calls, in jobs and
over HTTP. Without a finish reason (or with any other) a cut call is completed and named, as
before (docs/truncation.md).

The outputs are the examples of every format in ``tests/test_formats_decode.py`` (each written
the way its family's chat template renders a call) cut at every character, and the cut outputs
quoted in issue #27 and in public bug reports (named where they are used).
"""

from __future__ import annotations

import asyncio
import json
import random

import httpx
import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry
from toolcodec.decoding.codec import ToolCallCodec
from toolcodec.pool import Pool
from toolcodec.results.errors import ALL_CODES, TRUNCATED
from toolcodec.worker.jobs import run_job

from tests.benchmarks import peers_toolcall_report as peer_report
from tests.serve_process import ServeProcess
from tests.test_formats_decode import EXAMPLES
from tests.test_stream import PIECES, chunkings

TOOLS = [
    {"name": "get_weather", "parameters": {"type": "object", "properties": {
        "city": {"type": "string"}, "days": {"type": "integer"}}, "required": ["city"]}},
    {"name": "search", "parameters": {"type": "object", "properties": {
        "q": {"type": "string"}}, "required": ["q"]}},
    {"name": "run_shell", "parameters": {"type": "object", "properties": {
        "command": {"type": "string"}}, "required": ["command"]}},
    {"name": "create_file", "parameters": {"type": "object", "properties": {
        "path": {"type": "string"}, "content": {"type": "string"}}, "required": ["path"]}},
]
CODEC = ToolCallCodec(TOOLS)
PEER_CASES = {case["id"]: case for case in peer_report.load_cases()}
DS_BAR, DS_SP = "\uff5c", "\u2581"


def _ds(token: str) -> str:
    return "<" + DS_BAR + token.replace("_", DS_SP) + DS_BAR + ">"


def _calls(result) -> list[tuple[str, dict]]:
    return [(c.name, c.arguments) for c in result.calls]


def _stream(parts: list, finish_reason: str | None) -> tuple[list[dict], dict]:
    s = CODEC.stream(id_prefix="t")
    events = []
    for part in parts:
        events += s.feed(part)
    events += s.close(finish_reason=finish_reason)
    return events, s.result().to_dict()


def _check_stream(text: str, parts: list, finish_reason: str | None) -> None:
    whole = CODEC.decode(text, finish_reason=finish_reason).to_dict()
    events, got = _stream(parts, finish_reason)
    assert got == whole
    assert [(e["name"], e["arguments"]) for e in events if e["type"] == "tool_call"] == [
        (c["name"], c["arguments"]) for c in whole["calls"]]
    assert "".join(e["text"] for e in events if e["type"] == "content").strip() == \
        whole["content"]


# -- the outputs ------------------------------------------------------------------------

# (where it comes from, the output as the model was cut off, the call it must not become)
CUT = [
    ("issue #27: Hermes JSON cut inside a string",
     '<tool_call>{"name": "get_weather", "arguments": {"city": "San Fr', "get_weather"),
    ("issue #27: Qwen3-Coder XML parameter cut mid-value (rm -rf /tmp/build)",
     "<tool_call>\n<function=run_shell>\n<parameter=command>\nrm -rf /", "run_shell"),
    ("issue #27: Qwen3-Coder XML, the value complete, </function> never came",
     "<tool_call>\n<function=run_shell>\n<parameter=command>\nrm -rf /tmp/build\n</parameter>\n",
     "run_shell"),
    ("issue #27: FunctionGemma call without its end token",
     "<start_function_call>call:get_weather{city:<escape>Paris<escape>}", "get_weather"),
    ("Gemma 4 call without <tool_call|>", '<|tool_call>call:search{q:<|"|>cats', "search"),
    ("Mistral [TOOL_CALLS] (no end token): the value never ended",
     '[TOOL_CALLS]get_weather[ARGS]{"city": "Os', "get_weather"),
    ("Llama 3.1 <|python_tag|> (no end token): the value never ended",
     '<|python_tag|>{"name": "run_shell", "parameters": {"command": "rm -rf /', "run_shell"),
    ("DeepSeek-V3 section cut inside the JSON fence",
     _ds("tool_calls_begin") + _ds("tool_call_begin") + "function" + _ds("tool_sep")
     + 'run_shell\n```json\n{"command": "rm -rf /', "run_shell"),
    ("Kimi-K2 section cut inside the arguments",
     "<|tool_calls_section_begin|><|tool_call_begin|>functions.run_shell:0"
     '<|tool_call_argument_begin|>{"command": "rm -rf /', "run_shell"),
    ("gpt-oss commentary message without <|call|>",
     "<|channel|>commentary to=functions.run_shell <|constrain|>json<|message|>"
     '{"command": "rm -rf /tmp/build"}', "run_shell"),
    ("a tool tag without its close tag", "<get_weather><city>Paris</city>", "get_weather"),
    ("a bare call (name, then its parameters' tags) at the very end",
     "get_weather\n<city>Paris</city>\n", "get_weather"),
    ("MiniMax invoke cut", '<minimax:tool_call><invoke name="run_shell"><parameter '
     'name="command">rm -rf /', "run_shell"),
]


@pytest.mark.parametrize("origin, text, tool", CUT, ids=[c[0] for c in CUT])
def test_a_cut_call_yields_no_call_with_length(origin, text, tool) -> None:
    r = CODEC.decode(text, finish_reason="length")
    assert r.calls == [] and not r.ok
    assert [e.code for e in r.errors] == [TRUNCATED]
    assert r.errors[0].details["position"] == 0 and r.errors[0].details["block"] == 0
    assert r.content == text.strip()  # the text is kept, as the model wrote it
    for parts in chunkings(text, random.Random(len(text))):
        _check_stream(text, parts, "length")


@pytest.mark.parametrize("origin, text, tool", CUT, ids=[c[0] for c in CUT])
@pytest.mark.parametrize("reason", [None, "stop", "tool_calls", "content_filter"])
def test_without_length_a_cut_call_is_completed_and_named(origin, text, tool, reason) -> None:
    r = CODEC.decode(text, finish_reason=reason)
    assert r.to_dict() == CODEC.decode(text).to_dict()
    assert all(e.code != TRUNCATED for e in r.errors)
    for call in r.calls:  # completed from a cut output, and named so (docs/truncation.md)
        assert call.name == tool and call.repairs


# Engine test vectors of cut outputs (tests/data/peers): vLLM's own tests expect no call for
# the first two; SGLang and the ai-sdk middleware complete the others, as toolcodec does without
# a finish reason. With "length", only calls whose block closed before the cut remain.
PEER_CUTS = {
    "vllm-minicpm_xml-0078": [],  # test_incomplete_missing_function_end
    "vllm-glm4_moe-0127": [],  # test_extract_tool_calls_incomplete_tool_call
    "sgl-qwen_xml-0018": [],  # TestQwen3CoderDetector: <parameter=location>London, cut
    "mw-qwen_xml-0224": [],  # <function=book_flight><parameter=__proto__
    "mw-qwen_xml-0239": [],  # </parameter><tool_call, cut
    "mw-qwen_xml-0240": [("alpha", {"x": "1"})],  # closed before the cut <tool_call>
    "mw-hermes-0080": [],  # 'truncated JSON array'
    "mw-hermes-0083": [],  # a complete array, the envelope's close cut to </
    "vllm-minimax-0144": [],  # tool_call_incomplete_tag
}


@pytest.mark.parametrize("case_id", sorted(PEER_CUTS))
def test_engine_vectors_of_cut_outputs(case_id) -> None:
    case = PEER_CASES[case_id]
    c = ToolCallCodec(peer_report.tools_for(case))
    r = c.decode(case["input"], finish_reason="length")
    assert _calls(r) == PEER_CUTS[case_id]
    assert r.errors[-1].code == TRUNCATED
    text = case["input"]
    for parts in chunkings(text, random.Random(len(text)))[1:3]:
        s = c.stream(id_prefix="t")
        for part in parts:
            s.feed(part)
        s.close(finish_reason="length")
        assert s.result().to_dict() == r.to_dict()


def test_rm_rf_is_never_a_call_with_length() -> None:
    """issue #27: a cut `rm -rf /tmp/build` must not become `rm -rf /`."""
    text = "<tool_call>\n<function=run_shell>\n<parameter=command>\nrm -rf /"
    assert CODEC.decode(text).calls[0].arguments == {"command": "rm -rf /"}  # the danger
    assert CODEC.decode(text, finish_reason="length").calls == []


def test_complete_calls_before_the_cut_are_kept() -> None:
    done = '<tool_call>{"name": "search", "arguments": {"q": "cats"}}</tool_call>\n'
    cut = '<tool_call>{"name": "get_weather", "arguments": {"city": "San Fr'
    text = "Two calls.\n" + done + cut
    r = CODEC.decode(text, finish_reason="length")
    assert _calls(r) == [("search", {"q": "cats"})]
    assert r.content == "Two calls.\n\n" + cut
    (error,) = r.errors
    assert error.code == TRUNCATED and error.details["block"] == 1
    assert error.details["position"] == text.index(cut) and error.details["raw"] == cut
    for parts in chunkings(text, random.Random(7)):
        _check_stream(text, parts, "length")


def _deepseek_section(*calls: str) -> str:
    return _ds("tool_calls_begin") + "".join(
        _ds("tool_call_begin") + c + (_ds("tool_call_end") if i < len(calls) - 1 else "")
        for i, c in enumerate(calls))


KIMI_CUT = ("<|tool_calls_section_begin|><|tool_call_begin|>functions.search:0"
            '<|tool_call_argument_begin|>{"q": "cats"}<|tool_call_end|>'
            "<|tool_call_begin|>functions.run_shell:1<|tool_call_argument_begin|>"
            '{"command": "rm -rf /')


@pytest.mark.parametrize("text, cut_at", [
    (_deepseek_section("search" + _ds("tool_sep") + '{"q": "cats"}',
                       "run_shell" + _ds("tool_sep") + '{"command": "rm -rf /'),
     _ds("tool_call_begin") + "run_shell"),
    (_deepseek_section("function" + _ds("tool_sep") + 'search\n```json\n{"q": "cats"}\n```',
                       "function" + _ds("tool_sep") + "run_shell\n```json\n{"),
     _ds("tool_call_begin") + "function" + _ds("tool_sep") + "run_shell"),
    (KIMI_CUT, "<|tool_call_begin|>functions.run_shell"),
], ids=["deepseek-v31", "deepseek-v3", "kimi-k2"])
def test_calls_a_cut_section_ended_before_the_cut_are_kept(text, cut_at) -> None:
    """DeepSeek and Kimi-K2 write parallel calls in one section, each ended by its own token:
    those ended before the cut are complete; the cut one is truncated."""
    r = CODEC.decode(text, finish_reason="length")
    assert _calls(r) == [("search", {"q": "cats"})] and not r.ok
    (error,) = r.errors
    assert error.code == TRUNCATED and error.details["position"] == text.index(cut_at)
    assert r.content == text[text.index(cut_at):]
    for parts in chunkings(text, random.Random(3)):
        _check_stream(text, parts, "length")


def test_a_section_whose_token_sits_in_a_cut_string_is_truncated_whole() -> None:
    """A per-call end token spelled inside the cut call's string is no end: the part before
    it needed completing, so nothing of the section is kept."""
    text = KIMI_CUT.replace('"rm -rf /', '"echo <|tool_call_end|> rm -rf /')
    r = CODEC.decode(text, finish_reason="length")
    assert r.calls == [] and [e.code for e in r.errors] == [TRUNCATED]
    assert r.content == text
    for parts in chunkings(text, random.Random(4)):
        _check_stream(text, parts, "length")


def test_a_block_missing_its_closer_before_another_block_is_not_truncation() -> None:
    """Only the block the end of the output cut off is truncated: a <tool_call> ended by the
    next <tool_call> was not cut by max_tokens, and is repaired as without a finish reason."""
    text = ('<tool_call>{"name": "search", "arguments": {"q": "a"}}\n'
            '<tool_call>{"name": "search", "arguments": {"q": "b"}}</tool_call>')
    assert CODEC.decode(text, finish_reason="length").to_dict() == CODEC.decode(text).to_dict()


def test_json_and_python_calls_in_prose_cut_off_are_prose() -> None:
    for text in ['Calling {"name": "search", "arguments": {"q": "ca',
                 "[get_weather(city='Oslo'), search(q=\"ca"]:
        r = CODEC.decode(text, finish_reason="length")
        assert r.calls == [] and r.errors == [] and r.content == text


def test_nothing_changes_for_complete_outputs_with_length() -> None:
    """A model that closed its last call exactly at max_tokens made complete calls."""
    for fmt, text, _expected in EXAMPLES:
        r = CODEC.decode(text, finish_reason="length")
        assert r.to_dict() == CODEC.decode(text).to_dict(), fmt


def test_every_cut_of_every_format_yields_only_calls_the_model_finished() -> None:
    """Cut each format's example at every character: with "length", the calls are a prefix
    of the whole output's calls, argument for argument (never a call completed from a cut),
    every character is content, a call's or end tokens', and the stream answers the same."""
    rng = random.Random(27)
    for fmt, text, _expected in EXAMPLES:
        full = _calls(CODEC.decode(text))
        for cut in range(len(text) + 1):
            prefix = text[:cut]
            r = CODEC.decode(prefix, finish_reason="length")
            got = _calls(r)
            assert got == full[:len(got)], (fmt, prefix)
            assert all(e.code == TRUNCATED for e in r.errors), (fmt, prefix, r.errors)
            kinds = {s.kind for s in r.spans}
            assert kinds <= {"text", "markup", "call", "end", "tokens"}, (fmt, prefix)
            _check_stream(prefix, chunkings(prefix, rng)[2], "length")


# -- native calls --------------------------------------------------------------------------------


def _message(*arguments: str) -> dict:
    return {"role": "assistant", "content": None, "tool_calls": [
        {"id": f"call_{i}", "type": "function",
         "function": {"name": "create_file", "arguments": args}}
        for i, args in enumerate(arguments)]}


def test_a_native_call_cut_in_its_arguments_is_truncated() -> None:
    """LibreChat-AI/agents#280: a Bedrock stream cut at max_tokens left
    `{"path": "skills/clickhouse-demo/SKILL.md"` (unterminated, `content` never started),
    which partial-JSON parsing turned into a valid call without its content."""
    cut = '{"path": "skills/clickhouse-demo/SKILL.md"'
    message = _message('{"path": "a.md", "content": "x"}', cut)
    before = CODEC.decode(message)
    assert [c.arguments for c in before.calls][-1] == {"path": "skills/clickhouse-demo/SKILL.md"}
    r = CODEC.decode(message, finish_reason="length")
    assert [c.arguments for c in r.calls] == [{"path": "a.md", "content": "x"}]
    (error,) = r.errors
    assert error.code == TRUNCATED and error.details["call_index"] == 1
    assert error.details["raw"] == cut


def test_only_the_last_native_call_can_be_cut() -> None:
    message = _message('{"path": "a.md", "content": "x"', '{"path": "b.md"}')
    r = CODEC.decode(message, finish_reason="length")
    assert [c.arguments["path"] for c in r.calls] == ["a.md", "b.md"]


def test_openai_chunks_carry_the_finish_reason_to_the_stream() -> None:
    """vllm-project/vllm#58228: the stop reason is in the last chunk's finish_reason."""
    text = ('<tool_call>{"name": "search", "arguments": {"q": "cats"}}</tool_call>'
            '<tool_call>{"name": "run_shell", "arguments": {"command": "rm -rf /')
    pieces = [text[i:i + 9] for i in range(0, len(text), 9)]
    chunks = [{"choices": [{"index": 0, "delta": {"content": p}, "finish_reason": None}]}
              for p in pieces]
    chunks.append({"choices": [{"index": 0, "delta": {}, "finish_reason": "length"}]})
    s = CODEC.stream(id_prefix="t")
    events = [e for c in chunks for e in s.feed(c)] + s.close()
    expected = CODEC.decode({"role": "assistant", "content": text}, finish_reason="length")
    assert s.result().to_dict() == expected.to_dict()
    assert [e["name"] for e in events if e["type"] == "tool_call"] == ["search"]
    assert [e["error"]["code"] for e in events if e["type"] == "error"] == [TRUNCATED]
    # close()'s own argument wins over what the chunks said
    s = CODEC.stream(id_prefix="t")
    for c in chunks:
        s.feed(c)
    s.close(finish_reason="stop")
    assert [c.name for c in s.result().calls] == ["search", "run_shell"]


@given(st.lists(st.sampled_from(PIECES), max_size=30), st.randoms(use_true_random=False))
@settings(max_examples=200, database=None)
def test_stream_equals_batch_with_length_on_generated_outputs(pieces, rng) -> None:
    text = "".join(pieces)
    for parts in chunkings(text, rng)[1:]:
        _check_stream(text, parts, "length")


def test_truncated_is_a_stable_error_code() -> None:
    assert TRUNCATED == "truncated" and TRUNCATED in ALL_CODES


# -- jobs, the pool's stream, HTTP -----------------------------------------------------------

TEXT = ('<tool_call>{"name": "search", "arguments": {"q": "cats"}}</tool_call>'
        '<tool_call>{"name": "get_weather", "arguments": {"city": "San Fr')


def _job(payload: dict) -> dict:
    return run_job({"id": "1", "op": "decode", "payload": {"tools": TOOLS, **payload}})


def test_decode_job_takes_finish_reason() -> None:
    out = _job({"text": TEXT, "finish_reason": "length"})
    assert out["status"] == "ok"
    assert out["result"] == CODEC.decode(TEXT, finish_reason="length").to_dict()
    assert [e["code"] for e in out["result"]["errors"]] == [TRUNCATED]
    assert len(_job({"text": TEXT, "finish_reason": None})["result"]["calls"]) == 2
    message = {"role": "assistant", "content": TEXT}
    assert _job({"message": message, "finish_reason": "length"})["result"]["calls"] == \
        out["result"]["calls"]


def test_decode_job_refuses_a_finish_reason_that_is_not_a_string() -> None:
    out = _job({"text": TEXT, "finish_reason": 3})
    assert out["status"] == "error" and out["error"]["code"] == "bad_request"
    assert out["error"]["field"] == "payload.finish_reason"


def test_pool_stream_close_takes_finish_reason() -> None:
    async def main(pool) -> tuple[list[dict], dict]:
        s = pool.stream(TOOLS, id_prefix="p")
        events = []
        for i in range(0, len(TEXT), 11):
            events += await s.feed(TEXT[i:i + 11])
        events += await s.close(finish_reason="length")
        return events, s.result().to_dict()

    with Pool("process", workers=1, timeout_ms=5000, registry=CollectorRegistry()) as pool:
        events, result = asyncio.run(main(pool))
    assert result == CODEC.decode(TEXT, finish_reason="length").to_dict()
    assert [e["name"] for e in events if e["type"] == "tool_call"] == ["search"]


def test_post_v1_decode_takes_finish_reason() -> None:
    server = ServeProcess("--workers", "1", "--timeout-ms", "5000").start()
    try:
        body = {"text": TEXT, "tools": TOOLS, "finish_reason": "length"}
        response = httpx.post(server.url + "/v1/decode", content=orjson.dumps(body),
                              headers={"content-type": "application/json"}, timeout=30)
    finally:
        server.stop()
    assert response.status_code == 200
    result = response.json()["result"]
    assert result == CODEC.decode(TEXT, finish_reason="length").to_dict()
    assert [e["code"] for e in result["errors"]] == [TRUNCATED]


# -- the proxy ----------------------------------------------------------------------------------


def test_proxy_passes_the_upstream_finish_reason_to_the_decoder() -> None:
    """With finish_reason "length" (whole and streamed answers alike) the proxy sends the
    calls that closed, not the cut one, and keeps "length": dynamo PR #13791 and
    vllm-project/vllm#58228 — a client must be able to tell a cut turn from a finished one."""
    from tests.test_proxy import streamed, whole
    from tests.upstream_standin import CASES, Standin

    upstream = Standin().start()
    proxy = ServeProcess("--upstream", upstream.url, "--workers", "1",
                         "--timeout-ms", "5000").start()
    try:
        answer, _ = whole(proxy, "cut_at_length")
        choice = answer.choices[0]
        assert choice.finish_reason == "length"
        assert [t.function.name for t in choice.message.tool_calls] == ["search_files"]
        # the cut call's markup is not shown to the user (the decode result keeps it)
        assert choice.message.content == "Two calls."
        assert "<tool_call>" in CASES["cut_at_length"]["content"].split("</tool_call>\n")[1]
        content, calls, _reasoning, finish, _ids = streamed(proxy, "cut_at_length")
        assert finish == "length" and [c[1] for c in calls] == ["search_files"]
        assert content.strip() == choice.message.content

        answer, _ = whole(proxy, "native_cut_at_length")
        choice = answer.choices[0]
        assert choice.finish_reason == "length"
        assert [json.loads(t.function.arguments) for t in choice.message.tool_calls] == [
            {"query": "cats"}]  # the cut call is not passed on, repaired or as written
        _content, calls, _reasoning, finish, _ids = streamed(proxy, "native_cut_at_length")
        assert finish == "length" and [c[2] for c in calls] == [{"query": "cats"}]
    finally:
        proxy.stop()
        upstream.stop()


def test_feedback_asks_for_the_cut_call_again() -> None:
    from toolcodec.results.feedback import build_feedback

    fb = build_feedback(CODEC.decode(TEXT, finish_reason="length"))
    assert fb.retryable and fb.codes == [TRUNCATED]
    assert "token limit" in fb.text and "not run" in fb.text
