"""Small decode jobs run in the calling process (``Pool(inline_max_chars=N)``): the same
envelope a worker sends, under the pool's ceilings, counted under ``backend="inline"``, and
never for a job that is too big, of another op, or whose tools' codec is not built here yet.
"""

from __future__ import annotations

import asyncio
import copy
import time

import orjson
import pytest
from prometheus_client import CollectorRegistry
from toolcodec.decoding.codec import ToolCallCodec
from toolcodec.pool import Pool, api
from toolcodec.pool.inline import Inline
from toolcodec.pool.proxy.settings import job_options
from toolcodec.worker.inline import build_here, ready_here, run_built, run_here

from tests.test_equivalence import IDS, MODELS, ROWS, TOOLS, check_events, expected, model_of
from tests.test_equivalence import pool_stream as run_pool_stream

CALL = '<tool_call>{"name": "get_weather", "arguments": {"city": "Oslo", "days": "3"}}</tool_call>'


def inline_ready(pool: Pool, op: str, payload: dict, timeout_s: float = 30.0) -> dict:
    """Submit until the job runs inline (its codec built on a first sight), and return
    that envelope; fails if it never does."""
    end = time.monotonic() + timeout_s
    while True:
        out = pool.submit(op, payload)
        if out["backend"] == "inline" or time.monotonic() > end:
            assert out["backend"] == "inline", out
            return out
        while not ready_here(payload, pool._inline.ceiling) and time.monotonic() < end:
            time.sleep(0.01)


RUN_HERE_PAYLOADS = {
    "a call": {"text": CALL, "tools": TOOLS},
    "a message": {"message": {"role": "assistant", "content": CALL}, "tools": TOOLS,
                  "finish_reason": "length"},
    "tools null": {"text": CALL, "tools": None},
    "no tools": {"text": CALL},
    "options": {"text": CALL, "tools": TOOLS, "options": {"nfkc_strings": True}},
    "unknown field": {"text": CALL, "tools": TOOLS, "tool": "x"},
    "text and message": {"text": CALL, "message": {"content": CALL}, "tools": TOOLS},
    "bad finish_reason": {"text": CALL, "tools": TOOLS, "finish_reason": 5},
}


@pytest.mark.parametrize("payload", RUN_HERE_PAYLOADS.values(), ids=RUN_HERE_PAYLOADS)
def test_a_job_given_the_codec_found_for_it_answers_as_one_that_looks_it_up(payload) -> None:
    # The given codec keeps the tools out of the encoded job and skips the second lookup.
    build_here(payload)
    codec = ready_here(payload)
    assert codec is not None
    job = {"id": "t-1", "op": "decode", "payload": payload, "deadline": time.time() + 60}
    assert run_here(job, None, codec) == run_here(job)


def _built(job: dict, codec, read_only: bool = False) -> dict:
    return run_built(job["op"], job["id"], job["payload"], job["deadline"], codec, read_only)


@pytest.mark.parametrize("payload", RUN_HERE_PAYLOADS.values(), ids=RUN_HERE_PAYLOADS)
def test_a_job_of_json_data_run_as_it_is_answers_as_its_encoding_does(payload) -> None:
    # json_data: the job is not encoded (its payload is its own encoding decoded); the
    # envelope is the one that went through the bytes, and the payload is left as it was.
    build_here(payload)
    codec = ready_here(payload)
    job = {"id": "t-1", "op": "decode", "payload": payload, "deadline": time.time() + 60}
    before = copy.deepcopy(payload)
    here = run_here(job, None, codec, json_data=True)
    assert here == run_here(job, None, codec)
    # run_built: the inline jobs' way for a job the pool made, its codec handed to the op
    assert _built(job, codec) == here
    # read_only: not decoded from its bytes, but encoded it is the same, byte for byte
    assert orjson.dumps(_built(job, codec, read_only=True)) == orjson.dumps(here)
    assert payload == before
    late = {**job, "deadline": time.time() - 1}  # picked up after its deadline: not run
    assert _built(late, codec)["status"] == "timeout"
    assert _built(late, codec)["error"]["code"] == run_here(late, None, codec)["error"]["code"]


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_a_recorded_answer_run_as_json_data_answers_as_its_encoding_does(row) -> None:
    payload = {"message": {"role": "assistant", "content": row["content"]}, "tools": TOOLS,
               "options": job_options(MODELS.for_model(model_of(row)))}
    build_here(payload)
    codec = ready_here(payload)
    job = {"id": "t-1", "op": "decode", "payload": payload, "deadline": time.time() + 60}
    here = run_here(job, None, codec, json_data=True)
    assert here == run_here(job, None, codec)
    assert here["result"] == expected(row)
    assert _built(job, codec) == here
    assert orjson.dumps(_built(job, codec, read_only=True)) == orjson.dumps(here)


class _Unencodable:
    """A codec whose result cannot be encoded, as JSON or otherwise."""

    def decode(self, source, finish_reason=None):
        return self

    def to_dict(self) -> dict:
        return {"calls": [object()]}


def test_a_result_that_cannot_be_encoded_is_the_same_internal_error_run_as_it_is() -> None:
    payload = {"text": CALL, "tools": TOOLS}
    job = {"id": "t-9", "op": "decode", "payload": payload, "deadline": time.time() + 60}
    here = run_here(job, None, _Unencodable(), json_data=True)
    assert here == run_here(job, None, _Unencodable())
    assert here["error"]["code"] == "internal_error" and "t-9" in here["error"]["message"]
    assert run_built("decode", "t-9", payload, job["deadline"], _Unencodable()) == here
    assert run_built("decode", "t-9", payload, job["deadline"], _Unencodable(),
                     read_only=True) == here


class _Loose:
    """A codec whose result holds what JSON's bytes do not keep: a tuple, NaN, a subclass."""

    class Count(int):
        pass

    def decode(self, source, finish_reason=None):
        return self

    def to_dict(self) -> dict:
        return {"ok": True, "calls": [{"name": "x", "arguments": {
            "pair": (1, 2), "nan": float("nan"), "n": self.Count(3)}}]}


def test_a_read_only_envelope_encodes_as_the_one_through_its_bytes() -> None:
    payload = {"text": CALL, "tools": TOOLS}
    deadline = time.time() + 60
    through = run_built("decode", "t-4", payload, deadline, _Loose())
    kept = run_built("decode", "t-4", payload, deadline, _Loose(), read_only=True)
    assert through["result"]["calls"][0]["arguments"] == {"pair": [1, 2], "nan": None, "n": 3}
    assert kept["result"]["calls"][0]["arguments"]["pair"] == (1, 2)  # as made: not decoded
    assert orjson.dumps(kept) == orjson.dumps(through)


class _Slow:
    """A codec whose decode outlasts the job's deadline."""

    def decode(self, source, finish_reason=None):
        time.sleep(0.05)
        return ToolCallCodec(TOOLS).decode(source, finish_reason=finish_reason)


def test_a_job_made_by_its_caller_that_ran_past_its_deadline_is_not_used() -> None:
    job = {"id": "t-3", "op": "decode", "payload": {"text": CALL, "tools": TOOLS},
           "deadline": time.time() + 0.01}
    built = _built(job, _Slow())
    assert built["status"] == "timeout" and "past its deadline" in built["error"]["message"]
    assert built["error"]["code"] == run_here(job, None, _Slow())["error"]["code"]


@pytest.fixture(scope="module")
def pools():
    registry = CollectorRegistry()
    with Pool("process", workers=1, timeout_ms=5000, registry=registry,
              inline_max_chars=100_000) as inline, \
            Pool("process", workers=1, timeout_ms=5000, registry=CollectorRegistry()) as plain:
        yield inline, plain, registry


def jobs_counted(registry: CollectorRegistry, op: str, backend: str) -> float:
    return sum(registry.get_sample_value("toolcodec_jobs_total",
                                         {"op": op, "backend": backend, "outcome": o}) or 0.0
               for o in ("success", "failure", "timeout", "rejected", "worker_lost"))


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_a_decode_run_inline_is_the_workers_answer(pools, row) -> None:
    inline, plain, _ = pools
    payload = {"text": row["content"], "tools": TOOLS,
               "options": job_options(MODELS.for_model(model_of(row)))}
    here = inline_ready(inline, "decode", payload)
    there = plain.submit("decode", payload)
    assert there["backend"] == "process"
    assert here["status"] == there["status"] == "ok"
    assert here["result"] == there["result"] == expected(row)


def test_pool_stream_blocks_run_inline_and_decode_as_decode(pools) -> None:
    inline, _, registry = pools
    before = jobs_counted(registry, "decode_block", "inline")
    for row in ROWS:
        for seed in ("first", "again"):  # a first sight builds the codec, then it is used
            result, events = run_pool_stream(inline, row, f"{row['name']}:{seed}")
            assert result == expected(row), row["name"]
            check_events(events, result)
    assert jobs_counted(registry, "decode_block", "inline") > before


def test_what_is_not_taken_goes_to_a_worker(pools) -> None:
    inline, _, _ = pools
    small = {"text": CALL, "tools": TOOLS}
    assert inline_ready(inline, "decode", small)["result"]["calls"][0]["arguments"] == \
        {"city": "Oslo", "days": 3}
    big = {"text": CALL + " " * 100_000, "tools": TOOLS}  # over inline_max_chars
    assert inline.submit("decode", big)["backend"] == "process"
    assert inline.submit("repair", {"text": "{'a': 1,}"})["backend"] == "process"
    block = {"text": CALL, "fmt": "tool_call", "tag": "tool_call", "body": [11, len(CALL) - 12],
             "tools": TOOLS}
    assert inline_ready(inline, "decode_block", block)["result"]["ok"]
    slow = {**block, "_sleep_s": 0.0}  # a fault-injection field stands for a slow worker
    assert inline.submit("decode_block", slow)["backend"] == "process"
    # the same tools with other options are another codec: its first sight is a worker's
    other = {"text": CALL, "tools": TOOLS, "options": {"formats": ["hermes"]}}
    assert not ready_here(other, inline._inline.ceiling)
    assert inline.submit("decode", other)["backend"] == "process"


def test_ready_answers_the_codec_built_here_and_a_job_given_it_answers_the_same(pools) -> None:
    inline, plain, _ = pools
    options = {"formats": ["hermes", "qwen_xml"]}  # a tool set and options not seen before
    tools = [*TOOLS, {"type": "function", "function": {"name": "ready_probe", "parameters": {
        "type": "object", "properties": {"n": {"type": "integer"}}}}}]
    assert inline.ready(tools, options) is None  # nothing built, and ready builds nothing
    assert plain.ready(tools, options) is None  # a pool without inline jobs has none
    assert inline.prepare(tools, options)
    end = time.monotonic() + 30
    while (codec := inline.ready(tools, options)) is None and time.monotonic() < end:
        time.sleep(0.01)  # the builder thread builds it
    assert codec is not None
    payload = {"message": {"role": "assistant", "content": CALL}, "tools": tools,
               "options": options}
    given = inline.submit("decode", payload, codec=codec)
    looked_up = inline.submit("decode", payload)
    there = plain.submit("decode", payload)
    assert given["backend"] == looked_up["backend"] == "inline"
    assert given["result"] == looked_up["result"] == there["result"]
    assert asyncio.run(inline.asubmit("decode", payload, codec=codec))["result"] == \
        there["result"]
    parsed = inline.submit("decode", payload, codec=codec, json_data=True)  # the proxy's way
    assert parsed["backend"] == "inline" and parsed["result"] == there["result"]
    kept = asyncio.run(inline.asubmit("decode", payload, codec=codec, json_data=True,
                                      read_only=True))
    assert kept["backend"] == "inline"
    assert orjson.dumps(kept["result"]) == orjson.dumps(there["result"])
    # too big to run here: a worker's envelope, read_only or not
    assert inline.submit("decode", {**payload, "message": {"role": "assistant", "content": (
        CALL + " " * 100_000)}}, codec=codec, json_data=True, read_only=True)["backend"] \
        == "process"
    assert inline.prepare(tools, options, built_here=True)  # only the workers are asked
    asked = list(inline.impl._prepared)
    # given the codec, the workers are asked with the same key, kept per codec, not encoded
    assert inline.prepare(tools, options, codec=codec)
    assert inline.prepare(tools, options, codec=codec)
    assert list(inline.impl._prepared) == asked
    # a job too big to run here goes to a worker, codec given or not
    big = {**payload, "message": {"role": "assistant", "content": CALL + " " * 100_000}}
    assert inline.submit("decode", big, codec=codec)["backend"] == "process"


# Jobs given their codec and JSON data (the proxy's decode) pass the door and the inline
# checks in one step; every one of these must be answered as the general way answers it.
GIVEN_CASES = {
    "plain": ("decode", {}, None),
    "budget given": ("decode", {}, 4000.0),
    "budget int": ("decode", {}, 4000),
    "budget zero": ("decode", {}, 0),
    "budget negative": ("decode", {}, -5),
    "budget nan": ("decode", {}, float("nan")),
    "budget bool": ("decode", {}, True),
    "budget text": ("decode", {}, "50"),
    "budget over an hour": ("decode", {}, 1e12),
    "finish_reason": ("decode", {"finish_reason": "length"}, None),
    "unknown field": ("decode", {"tool": "x"}, None),
    "fault field": ("decode", {"_sleep_s": 0.0}, None),
    "text and message": ("decode", {"text": CALL}, None),
    "too big to run here": ("decode", {"message": {"role": "assistant",
                                                    "content": CALL + " " * 100_000}}, None),
    "over the payload bound": ("decode", {"message": {"role": "assistant",
                                                       "content": "x" * 2_100_000}}, None),
    "tools empty": ("decode", {"tools": []}, None),
    "another op": ("validate", {"name": "get_weather", "arguments": {"city": "Oslo"}}, None),
    "an op not a string": (["decode"], {}, None),
}


@pytest.mark.parametrize("case", GIVEN_CASES.values(), ids=GIVEN_CASES)
def test_a_job_given_its_codec_and_json_data_is_answered_as_any_other(pools, case) -> None:
    inline, _, _ = pools
    op, change, timeout_ms = case
    message = {"role": "assistant", "content": CALL}
    inline_ready(inline, "decode", {"message": message, "tools": TOOLS})
    payload = {"message": message, "tools": TOOLS, **change}
    codec = inline.ready(TOOLS)
    assert codec is not None

    def seen(out: dict) -> tuple:
        return out["status"], out["backend"], orjson.dumps(out["result"]), out["error"]

    given = inline.submit(op, payload, codec=codec, json_data=True, timeout_ms=timeout_ms)
    general = inline.submit(op, copy.deepcopy(payload), codec=codec, timeout_ms=timeout_ms)
    assert seen(given) == seen(general)
    awaited = asyncio.run(inline.asubmit(op, payload, codec=codec, json_data=True,
                                         read_only=True, timeout_ms=timeout_ms))
    assert seen(awaited) == seen(general)


def test_a_job_given_its_codec_within_the_inline_bound_but_over_the_payload_bound() -> None:
    # small enough to run here, too big for the pool with its tools: refused either way
    with Pool("process", workers=1, timeout_ms=5000, registry=CollectorRegistry(),
              inline_max_chars=5000, max_payload_chars=3000) as pool:
        message = {"role": "assistant", "content": CALL}
        inline_ready(pool, "decode", {"message": message, "tools": TOOLS})
        codec = pool.ready(TOOLS)
        big = {"message": {"role": "assistant", "content": CALL + " " * 2900}, "tools": TOOLS}
        general = pool.submit("decode", big, codec=codec)
        given = pool.submit("decode", big, codec=codec, json_data=True, read_only=True)
        assert general["error"]["code"] == "payload_too_large"
        assert given == {**general, "elapsed_ms": given["elapsed_ms"]}


def test_the_workers_are_asked_for_a_codecs_tool_set_at_most_every_so_often(
        pools, monkeypatch) -> None:
    inline, _, _ = pools
    inline_ready(inline, "decode", {"message": {"role": "assistant", "content": CALL},
                                    "tools": TOOLS})
    codec = inline.ready(TOOLS)
    asked = []
    native = inline.impl.prepare
    monkeypatch.setattr(inline.impl, "prepare",
                        lambda *a, **k: asked.append(k.get("key")) or native(*a, **k))
    inline._prepare_keys.clear()
    monkeypatch.setattr(api, "PREPARE_AGAIN_S", -1.0)  # already passed when it is kept
    assert inline.prepare(TOOLS, codec=codec)
    assert inline.prepare(TOOLS, codec=codec)  # the interval passed: asked again, same key
    assert len(asked) == 2 and asked[0] == asked[1] and asked[0] in inline.impl._prepared
    monkeypatch.setattr(api, "PREPARE_AGAIN_S", 3600.0)
    assert inline.prepare(TOOLS, codec=codec)  # asked, and not again for an hour
    assert inline.prepare(TOOLS, codec=codec)  # within the interval: the last answer
    assert asked[2:] == [asked[0]]
    assert inline.prepare(TOOLS) and asked[3:] == [None]  # without the codec: every time


def test_ready_keeps_the_codec_by_the_payloads_json(monkeypatch) -> None:
    runner = Inline(200, None)
    tools = [*TOOLS, {"type": "function", "function": {"name": "kept_probe", "parameters": {
        "type": "object"}}}]  # a tool set no other test builds
    payload = {"tools": tools, "options": {"formats": ["hermes"]}}
    assert runner.ready(payload) is None  # not built: nothing kept
    build_here(payload)
    codec = runner.ready(payload)
    assert codec is ready_here(payload) is not None
    looked_up = []
    monkeypatch.setattr("toolcodec.pool.inline.ready_here",
                        lambda *args: looked_up.append(args) or ready_here(*args))
    assert runner.ready(copy.deepcopy(payload)) is codec  # the same JSON: kept
    assert looked_up == []
    other = {"tools": tools, "options": {"formats": ["qwen_xml"]}}
    build_here(other)
    assert runner.ready(other) is ready_here(other) is not codec  # other JSON: looked up
    assert len(looked_up) == 1


def test_the_tools_do_not_count_toward_the_size() -> None:
    runner = Inline(200, None)
    many = [{"type": "function", "function": {"name": f"tool_{i}", "description": "x" * 50,
                                              "parameters": {"type": "object"}}}
            for i in range(50)]
    assert runner._small({"text": "x" * 150, "tools": many})
    assert not runner._small({"text": "x" * 250, "tools": []})
    assert not runner._small({"message": {"role": "assistant", "content": "x" * 250}})


def test_inline_jobs_apply_the_pools_ceilings() -> None:
    deep = '<tool_call>{"name": "get_weather", "arguments": {"city": "Oslo", "days": 3, ' \
           '"x": [[[[[[1]]]]]]}}</tool_call>'
    payload = {"text": deep, "tools": TOOLS}
    with Pool("process", workers=1, timeout_ms=5000, registry=CollectorRegistry(),
              limits={"max_depth": 4}, inline_max_chars=10_000) as pool, \
            Pool("process", workers=1, timeout_ms=5000, registry=CollectorRegistry(),
                 limits={"max_depth": 4}) as plain:
        here = inline_ready(pool, "decode", payload)
        worker = plain.submit("decode", payload)
    assert worker["backend"] == "process"
    assert here["result"] == worker["result"]
    assert [e["code"] for e in here["result"]["errors"]] == ["nesting_too_deep"]


def test_inline_jobs_are_counted_under_their_own_backend(pools) -> None:
    inline, _, registry = pools
    payload = {"text": CALL + " counted", "tools": TOOLS}
    inline_ready(inline, "decode", payload)
    before = jobs_counted(registry, "decode", "inline")
    assert inline.submit("decode", payload)["backend"] == "inline"
    assert jobs_counted(registry, "decode", "inline") == before + 1
    assert registry.get_sample_value("toolcodec_job_duration_seconds_count",
                                     {"op": "decode", "backend": "inline"}) >= 1


def test_a_job_whose_budget_was_spent_before_it_came_is_shed(pools) -> None:
    inline, _, _ = pools
    payload = {"text": CALL, "tools": TOOLS}
    inline_ready(inline, "decode", payload)
    out = asyncio.run(inline.asubmit("decode", payload, timeout_ms=50,
                                     arrived=time.monotonic() - 1.0))
    assert out["backend"] == "inline" and out["status"] == "rejected"
    assert out["error"]["code"] == "rejected" and out["error"]["reason"] == "shed"


def test_a_budget_smaller_than_the_run_is_shed_not_overrun(pools) -> None:
    # a worker's job could start and be killed at the deadline; an inline one cannot be
    # stopped, so it starts only if its expected run fits
    inline, _, _ = pools
    payload = {"text": CALL, "tools": TOOLS}
    inline_ready(inline, "decode", payload)
    out = inline.submit("decode", payload, timeout_ms=0.001)
    assert out["backend"] == "inline" and out["status"] == "rejected", out
    assert out["error"]["reason"] == "shed" and out["error"]["reserve_ms"] >= 0.1
    assert inline.submit("decode", payload)["status"] == "ok"  # the pool's budget fits it


def test_a_payload_that_is_not_json_is_refused_as_a_worker_refuses_it(pools) -> None:
    inline, plain, _ = pools
    payload = {"text": CALL, "tools": TOOLS}
    inline_ready(inline, "decode", payload)
    odd = {**payload, "finish_reason": {1, 2}}  # a set: not JSON data
    here, there = inline.submit("decode", odd), plain.submit("decode", odd)
    assert here["backend"] == "inline"
    assert here["status"] == there["status"] == "error"
    assert here["error"] == there["error"]
    assert here["error"]["code"] == "bad_request"


def test_a_closed_pool_runs_nothing_inline() -> None:
    payload = {"text": CALL, "tools": TOOLS}
    pool = Pool("process", workers=1, timeout_ms=5000, registry=CollectorRegistry(),
                inline_max_chars=10_000)
    inline_ready(pool, "decode", payload)
    pool.close()
    out = pool.submit("decode", payload)
    assert out["backend"] == "process" and out["status"] == "rejected"


def test_inline_max_chars_must_be_positive_when_given() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        Inline(0, None)
