"""``Pool.stream()``: blocks decoded in workers, the same answer as the in-caller stream,
and a block that times out released as content while the stream goes on."""

from __future__ import annotations

import asyncio
import random
import time

import pytest
import toolcodec as codec
from prometheus_client import CollectorRegistry
from toolcodec.pool import Pool
from toolcodec.pool.inline import Inline

TOOLS = [{"name": "search", "parameters": {"type": "object", "properties": {
    "q": {"type": "string"}}, "required": ["q"]}}]
TEXT = ('<think>plan</think>Let me look. <tool_call>{"name": "search", "arguments": '
        '{"q": "cats",}}</tool_call> and <search><q>dogs</q></search> then '
        '<tool_call>{"name": "nope", "arguments": {}}</tool_call> done.')


@pytest.fixture(scope="module")
def pool():
    with Pool("process", workers=2, timeout_ms=5000, registry=CollectorRegistry()) as p:
        yield p


def run(stream, parts) -> list[dict]:
    async def main():
        events = []
        for part in parts:
            events += await stream.feed(part)
        return events + await stream.close()
    return asyncio.run(main())


@pytest.mark.parametrize("seed", range(5))
def test_pool_stream_equals_decode_for_any_chunking(pool, seed) -> None:
    rng = random.Random(seed)
    parts, i = [], 0
    while i < len(TEXT):
        n = rng.randint(1, 9)
        parts.append(TEXT[i:i + n])
        i += n
    s = pool.stream(TOOLS, id_prefix="p")
    events = run(s, parts)
    expected = codec.decode(TEXT, tools=TOOLS).to_dict()
    assert s.result().to_dict() == expected
    assert [e["arguments"] for e in events if e["type"] == "tool_call"] == [
        c["arguments"] for c in expected["calls"]]
    assert "".join(e["text"] for e in events if e["type"] == "content").strip() == \
        expected["content"]
    jobs = pool.metrics.registry.get_sample_value(
        "toolcodec_jobs_total", {"op": "decode_block", "backend": "process",
                                 "outcome": "success"})
    assert jobs and jobs >= 2  # the blocks were decoded by workers, and counted


def test_a_slow_block_times_out_and_the_stream_goes_on(monkeypatch) -> None:
    monkeypatch.setenv("TOOLCODEC_FAULT_INJECTION", "1")  # workers inherit it
    with Pool("process", workers=1, timeout_ms=5000, registry=CollectorRegistry()) as p:
        s = p.stream(TOOLS, timeout_ms=100, block_options={"_sleep_s": 2})
        block = '<tool_call>{"name": "search", "arguments": {"q": "x"}}</tool_call>'
        events = run(s, ["before ", block, " after"])
    errors = [e for e in events if e["type"] == "error"]
    assert errors and errors[0]["error"]["code"] == "timeout"
    text = "".join(e["text"] for e in events if e["type"] == "content")
    assert text == "before " + block + " after"  # nothing lost, the chat kept flowing
    result = s.result()
    assert not result.ok and result.calls == [] and result.errors[0].code == "timeout"
    assert [u["status"] for u in s.undecoded] == ["timeout"]  # no capacity, not a model error


def test_the_block_job_decodes_marker_blocks_and_refuses_a_tag_that_opens_none() -> None:
    from toolcodec.worker.jobs import run_job

    block = '[TOOL_CALLS]search[ARGS]{"q": "cats"}'
    job = {"id": "j", "op": "decode_block", "payload": {
        "text": block, "fmt": "marker", "tag": "[TOOL_CALLS]", "closed": True,
        "body": [len("[TOOL_CALLS]"), len(block)], "tools": TOOLS}}
    out = run_job(job)
    assert out["status"] == "ok" and out["result"]["calls"][0]["arguments"] == {"q": "cats"}
    assert out["result"]["calls"][0]["format"] == "mistral"
    job["payload"]["tag"] = "<not_a_marker>"
    out = run_job(job)
    assert out["status"] == "error" and out["error"]["code"] == "bad_request"
    assert out["error"]["field"] == "payload.tag"


def test_a_marker_block_through_the_pool_equals_decode(pool) -> None:
    text = 'Sure.<|python_tag|>{"name": "search", "parameters": {"q": "cats"}}<|eom_id|>'
    s = pool.stream(TOOLS, id_prefix="p")
    events = run(s, [text[i:i + 2] for i in range(0, len(text), 2)])
    assert s.result().to_dict() == codec.decode(text, tools=TOOLS).to_dict()
    assert [e["arguments"] for e in events if e["type"] == "tool_call"] == [{"q": "cats"}]
    assert s.undecoded == []


def test_a_streams_blocks_run_inline_with_the_codec_found_once(monkeypatch) -> None:
    """With inline jobs, a stream's blocks run here with the codec Pool.ready found for the
    stream's tools (looked up once, not by each job's checks), and answer as decode does."""
    given: list[tuple[str, bool]] = []
    takes = Inline.takes

    def spy(self, op, payload, codec=None, size=None):
        given.append((op, codec is not None))
        return takes(self, op, payload, codec, size)

    monkeypatch.setattr(Inline, "takes", spy)
    with Pool("process", workers=1, timeout_ms=5000, inline_max_chars=100_000,
              registry=CollectorRegistry()) as p:
        first = p.stream(TOOLS)
        run(first, [TEXT])  # its first sight has the codec built here, for next time
        deadline = time.monotonic() + 120  # a condition, waited for; not a timing bound
        while p.ready(TOOLS, first.options) is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert p.ready(TOOLS, first.options) is not None
        given.clear()
        s = p.stream(TOOLS)
        run(s, [TEXT])
        assert s.result().to_dict() == codec.decode(TEXT, tools=TOOLS).to_dict()
        assert given == [("decode_block", True)] * 3  # three blocks, each with the codec
        jobs = p.metrics.registry.get_sample_value(
            "toolcodec_jobs_total", {"op": "decode_block", "backend": "inline",
                                     "outcome": "success"})
        assert jobs and jobs >= 3
