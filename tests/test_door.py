"""What the pool refuses before a job leaves the caller, and the operator's limit ceilings."""

from __future__ import annotations

import asyncio
import math
import time

import pytest
from hypothesis import given
from hypothesis import strategies as st
from prometheus_client import CollectorRegistry
from toolcodec.decoding.codec import codec_for
from toolcodec.pool import Pool
from toolcodec.pool.door import (
    MAX_TIMEOUT_MS,
    check_budget,
    payload_size,
    rest_size,
    within,
    within_given,
)
from toolcodec.pool.inline import Inline
from toolcodec.results.limits import DEFAULT_LIMITS, Limits
from toolcodec.worker.jobs import run_job
from toolcodec.worker.limits import LimitsError, job_limits, operator_limits


@pytest.fixture(scope="module")
def pool():
    with Pool("process", workers=1, timeout_ms=5000, registry=CollectorRegistry(),
              max_payload_chars=100_000) as p:
        yield p


BAD_TIMEOUTS = [0, -1, -0.5, math.nan, math.inf, -math.inf, True, "50", [50], {}]


@pytest.mark.parametrize("timeout", BAD_TIMEOUTS, ids=repr)
def test_bad_budgets_are_bad_request_and_never_raise(pool, timeout) -> None:
    for out in (pool.submit("repair", {"text": "1"}, timeout_ms=timeout),
                asyncio.run(pool.asubmit("repair", {"text": "1"}, timeout_ms=timeout)),
                pool.map("repair", [{"text": "1"}], timeout_ms=timeout)[0]):
        assert out["status"] == "error" and out["error"]["code"] == "bad_request"
        assert out["error"]["field"] == "timeout_ms" and out["backend"] == "process"


def test_budgets_beyond_what_the_platform_waits_are_clamped(pool) -> None:
    for timeout in (2**31, 2**63, 1e300):
        assert pool.submit("repair", {"text": "[1,"}, timeout_ms=timeout)["status"] == "ok"
    assert check_budget(2**31, 50) == (MAX_TIMEOUT_MS / 1000, None)
    assert check_budget(None, 50) == (0.05, None)


def test_oversized_payload_is_refused_before_it_is_sent(pool, monkeypatch) -> None:
    def never(*args, **kwargs):
        raise AssertionError("an oversized payload reached the encoder")

    monkeypatch.setattr(pool.impl, "_ticket", never)
    big = "x" * 150_000
    for out in (pool.submit("decode", {"text": big}),
                asyncio.run(pool.asubmit("repair", {"text": big})),
                pool.map("repair", [{"text": big}])[0]):
        assert out["status"] == "error" and out["error"]["code"] == "payload_too_large"
        assert out["error"]["limit"] == 100_000
    # many small strings count as much as one big one
    many = {"text": "1", "tools": [{"name": "t"}] * 60_000}
    assert pool.submit("decode", many)["error"]["code"] == "payload_too_large"


@given(st.recursive(st.text(max_size=30) | st.integers(),
                    lambda inner: st.lists(inner, max_size=5) | st.dictionaries(
                        st.text(max_size=5), inner, max_size=5), max_leaves=30))
def test_payload_size_counts_every_string_character(value) -> None:
    def full(v):
        if isinstance(v, str):
            return len(v)
        if isinstance(v, dict):
            return len(v) + sum(len(k) + full(x) for k, x in v.items())
        if isinstance(v, list):
            return len(v) + sum(full(x) for x in v)
        return 1

    assert payload_size(value, 10**9) == full(value)
    assert payload_size(value, 3) >= min(full(value), 4)


@given(st.recursive(st.text(max_size=30) | st.integers() | st.floats(allow_nan=False)
                    | st.booleans() | st.none(),
                    lambda inner: st.lists(inner, max_size=8) | st.tuples(inner, inner)
                    | st.dictionaries(st.text(max_size=5), inner, max_size=8), max_leaves=200),
       st.integers(0, 3000))
def test_within_answers_as_the_full_count_does(value, max_chars) -> None:
    # many values take the encoding's shortcut, few the count: both must agree with it
    assert within(value, max_chars) == (payload_size(value, 10**9) <= max_chars)


@given(st.dictionaries(st.text(max_size=5), st.recursive(
    st.text(max_size=30) | st.integers(), lambda inner: st.lists(inner, max_size=6)
    | st.dictionaries(st.text(max_size=5), inner, max_size=6), max_leaves=60), max_size=5),
       st.lists(st.dictionaries(st.text(max_size=8), st.text(max_size=40), max_size=4),
                min_size=1, max_size=6), st.integers(0, 2000))
def test_within_given_the_tools_size_answers_as_the_full_count_does(rest, tools,
                                                                     max_chars) -> None:
    # the size a pool keeps per codec for its tools stands for counting them again
    payload = {**rest, "tools": tools}
    assert within_given(payload, max_chars, payload_size(tools, 10**9)) == \
        (payload_size(payload, 10**9) <= max_chars)


@given(st.dictionaries(st.text(max_size=5), st.recursive(
    st.text(max_size=30) | st.integers(), lambda inner: st.lists(inner, max_size=6)
    | st.dictionaries(st.text(max_size=5), inner, max_size=6), max_leaves=60), max_size=5),
       st.lists(st.dictionaries(st.text(max_size=8), st.text(max_size=40), max_size=4),
                min_size=1, max_size=6), st.integers(0, 2000), st.integers(1, 400))
def test_rest_size_is_the_inline_check_s_count_within_the_limit(rest, tools, max_chars,
                                                                 inline_chars) -> None:
    # counted once at the door, the rest is what the inline size check counts on its own
    payload = {**rest, "tools": tools}
    counted = rest_size(payload, max_chars, payload_size(tools, 10**9))
    assert (counted is not None) == within_given(payload, max_chars,
                                                 payload_size(tools, 10**9))
    if counted is not None:
        assert counted == sum(len(k) + 1 + payload_size(v, 10**9) for k, v in rest.items()
                              if k != "tools")
        assert (counted <= inline_chars) == Inline(inline_chars, None)._small(payload)
    # asked only whether it is within the inline bound, the door may answer with a bound
    # of the count (its JSON's length): the same answers to both questions
    bound = rest_size(payload, max_chars, payload_size(tools, 10**9), settles=inline_chars)
    assert (bound is None) == (counted is None)
    if bound is not None:
        assert bound >= counted and (bound <= inline_chars) == (counted <= inline_chars)


def test_a_job_given_its_codec_is_refused_by_size_as_any(pool) -> None:
    # the tools' size is then counted once per codec: at the limit exactly, and one over
    tools = [{"name": "t", "parameters": {"type": "object", "description": "d" * 300}}]
    codec = codec_for(tools)
    at_limit = 100_000 - (len("text") + len("tools") + 2 + payload_size(tools, 10**9))
    for _ in range(2):  # the size counted, then the size kept
        over = pool.submit("validate", {"text": "x" * (at_limit + 1), "tools": tools},
                           codec=codec)
        assert over["error"]["code"] == "payload_too_large"
        fits = pool.submit("validate", {"text": "x" * at_limit, "tools": tools}, codec=codec)
        assert fits["error"]["code"] != "payload_too_large"  # the worker's refusal: no name


def test_within_counts_what_json_cannot_carry() -> None:
    odd = [{"k": b"x" * 10}] * 100  # bytes: not JSON data, so no shortcut
    assert within(odd, 10**6) and not within(odd, 150)
    assert not within({1: "x" * 50, "a": list(range(100))}, 120)  # a key that is no string


def test_unknown_op_is_counted_as_unknown(pool) -> None:
    out = pool.submit("no_such_op_1234", {})
    assert out["error"]["code"] == "bad_request"
    reg = pool.metrics.registry
    assert reg.get_sample_value("toolcodec_jobs_total", {
        "op": "unknown", "backend": "process", "outcome": "failure"}) >= 1
    assert reg.get_sample_value("toolcodec_jobs_total", {
        "op": "no_such_op_1234", "backend": "process", "outcome": "failure"}) is None


def test_pool_refuses_a_bad_default_budget() -> None:
    with pytest.raises(ValueError, match="timeout_ms"):
        Pool("process", workers=1, timeout_ms=0)


# -- the operator's ceilings ------------------------------------------------------------------


def job(op, payload):
    return {"id": "j", "op": op, "payload": payload, "deadline": time.time() + 30}


def test_a_payload_cannot_raise_the_limits() -> None:
    deep = "[" * 600 + "]" * 600
    huge = {"limits": {"max_chars": 10**12, "max_depth": 10**9}}
    out = run_job(job("repair", {"text": deep, "options": huge}))
    assert out["result"]["errors"][0]["code"] == "nesting_too_deep"
    lowered = run_job(job("repair", {"text": "[1, 2]", "options": {"limits": {"max_chars": 3}}}))
    assert lowered["result"]["errors"][0]["code"] == "payload_too_large"
    out = run_job(job("decode", {"text": "x" * 20, "options": {"limits": {"max_chars": 10}}}))
    assert out["result"]["errors"][0]["code"] == "payload_too_large"


@pytest.mark.parametrize("limits", [{"max_chars": -1}, {"max_depth": 0}, {"max_chars": True},
                                    {"max_chars": "9"}, {"bogus": 1}, "x", [1]], ids=repr)
def test_malformed_limits_are_bad_request(limits) -> None:
    out = run_job(job("decode", {"text": "hi", "options": {"limits": limits}}))
    assert out["status"] == "error" and out["error"]["code"] == "bad_request"
    assert out["error"]["field"] == "payload.options.limits"


def test_ceilings_come_from_the_environment() -> None:
    assert operator_limits({}) == DEFAULT_LIMITS
    got = operator_limits({"TOOLCODEC_MAX_CHARS": "1000", "TOOLCODEC_MAX_DEPTH": "10"})
    assert got == Limits(max_chars=1000, max_depth=10)
    assert job_limits({"max_chars": 10**9}, got) == Limits(1000, 10)
    assert job_limits({"max_depth": 5}, got) == Limits(1000, 5)
    for bad in ("0", "-5", "ten", "1.5"):
        with pytest.raises(LimitsError, match="TOOLCODEC_MAX_CHARS"):
            operator_limits({"TOOLCODEC_MAX_CHARS": bad})


def test_map_answers_refused_items_in_place(pool) -> None:
    outs = pool.map("repair", [{"text": "[1,"}, {"text": "x" * 150_000}, {"text": "2"}])
    assert [o["status"] for o in outs] == ["ok", "error", "ok"]
    assert outs[0]["result"]["value"] == [1] and outs[2]["result"]["value"] == 2
