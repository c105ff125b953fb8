"""The retry loop: feed the errors back, stop at the limit, never retry our own failures."""

from __future__ import annotations

import asyncio

import pytest
from prometheus_client import CollectorRegistry
from toolcodec import errors as E
from toolcodec.pool.retry import RetryPolicy, adecode_with_retry, decode_with_retry

TOOLS = [{"name": "add", "parameters": {
    "type": "object", "properties": {"a": {"type": "integer"}, "b": {"type": "integer"}},
    "required": ["a", "b"]}}]
GOOD = '<tool_call>{"name": "add", "arguments": {"a": 1, "b": 2}}</tool_call>'
BAD_ARITH = '<tool_call>{"name": "add", "arguments": {"a": 1+1, "b": 2}}</tool_call>'
BAD_TOOL = '<tool_call>{"name": "ad", "arguments": {"a": 1, "b": 2}}</tool_call>'


class Model:
    """A generate function that answers from a script and records what it was sent."""

    def __init__(self, *outputs):
        self.outputs = list(outputs)
        self.seen: list[list[dict]] = []

    def __call__(self, messages):
        self.seen.append(messages)
        return self.outputs[len(self.seen) - 1]


def count(registry: CollectorRegistry, outcome: str) -> float:
    return registry.get_sample_value("toolcodec_retries_total", {"outcome": outcome}) or 0.0


START = [{"role": "user", "content": "add 1 and 1 and 2"}]


def test_fails_twice_then_succeeds() -> None:
    reg = CollectorRegistry()
    model = Model(BAD_ARITH, BAD_TOOL, GOOD)
    run = decode_with_retry(model, START, tools=TOOLS, policy=RetryPolicy(2), registry=reg)
    assert run.outcome == "recovered" and run.result["ok"]
    assert [a.result["ok"] for a in run.attempts] == [False, False, True]
    # The second call saw the first answer and the feedback naming the arithmetic.
    second = model.seen[1]
    assert second[:1] == START and second[1] == {"role": "assistant", "content": BAD_ARITH}
    assert second[2]["role"] == "user" and "`1+1`" in second[2]["content"]
    third = model.seen[2]
    assert 'Did you mean "add"?' in third[-1]["content"]
    assert START == [{"role": "user", "content": "add 1 and 1 and 2"}]  # caller's list untouched
    assert count(reg, "recovered") == 1


def test_exhausts_after_max_retries() -> None:
    reg = CollectorRegistry()
    model = Model(BAD_ARITH, BAD_ARITH, BAD_ARITH, GOOD)
    run = decode_with_retry(model, START, tools=TOOLS, policy=RetryPolicy(2), registry=reg)
    assert run.outcome == "exhausted" and len(run.attempts) == 3 and not run.result["ok"]
    assert all(a.feedback is not None for a in run.attempts)
    assert count(reg, "exhausted") == 1 and count(reg, "recovered") == 0


def test_first_try_ok_is_not_a_retry() -> None:
    reg = CollectorRegistry()
    run = decode_with_retry(Model(GOOD), START, tools=TOOLS, registry=reg)
    assert run.outcome == "ok" and len(run.attempts) == 1
    assert sum(count(reg, o) for o in ("recovered", "exhausted", "not_retryable")) == 0


def test_a_job_that_did_not_run_is_not_retried() -> None:
    class TimingOutPool:
        def submit(self, op, payload):
            assert op == "decode" and payload["text"] == BAD_ARITH
            return {"status": "timeout", "op": op, "backend": "process", "result": None,
                    "error": {"code": E.TIMEOUT, "message": "no answer within 50 ms"},
                    "elapsed_ms": 50.0}

    reg = CollectorRegistry()
    model = Model(BAD_ARITH, GOOD)
    run = decode_with_retry(model, START, tools=TOOLS, pool=TimingOutPool(), registry=reg)
    assert run.outcome == "not_retryable" and len(model.seen) == 1
    assert run.result["errors"][0]["code"] == E.TIMEOUT
    assert count(reg, "not_retryable") == 1


def test_codes_outside_the_policy_are_not_retried() -> None:
    policy = RetryPolicy(2, retryable_codes=frozenset({E.INVALID_JSON}))
    run = decode_with_retry(Model(BAD_TOOL, GOOD), START, tools=TOOLS, policy=policy,
                            registry=CollectorRegistry())
    assert run.outcome == "not_retryable" and len(run.attempts) == 1


def test_disabled_policy_decodes_once() -> None:
    run = decode_with_retry(Model(BAD_TOOL, GOOD), START, tools=TOOLS,
                            policy=RetryPolicy(enabled=False), registry=CollectorRegistry())
    assert run.outcome == "disabled" and len(run.attempts) == 1


def test_native_message_feedback_answers_the_call_id() -> None:
    bad = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_7", "type": "function", "function": {"name": "add", "arguments": '{"a": 1}'}}]}
    good = {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_8", "type": "function",
         "function": {"name": "add", "arguments": '{"a": 1, "b": 2}'}}]}
    model = Model(bad, good)
    run = decode_with_retry(model, START, tools=TOOLS, registry=CollectorRegistry())
    assert run.outcome == "recovered"
    assert model.seen[1][1] is bad or model.seen[1][1] == bad
    assert model.seen[1][2]["role"] == "tool" and model.seen[1][2]["tool_call_id"] == "call_7"


@pytest.mark.parametrize("style", ["anthropic", "hermes", "text"])
def test_other_styles_append_one_feedback_message(style: str) -> None:
    model = Model(BAD_TOOL, GOOD)
    run = decode_with_retry(model, START, tools=TOOLS, style=style, registry=CollectorRegistry())
    assert run.outcome == "recovered" and len(model.seen[1]) == 3


def test_async_driver_with_a_real_pool() -> None:
    from toolcodec.pool import Pool

    calls = 0

    async def generate(messages):
        nonlocal calls
        calls += 1
        await asyncio.sleep(0)
        return BAD_ARITH if calls == 1 else GOOD

    async def main():
        with Pool(backend="process", workers=1, timeout_ms=5000) as pool:
            return await adecode_with_retry(generate, START, tools=TOOLS, pool=pool,
                                            registry=CollectorRegistry())

    run = asyncio.run(main())
    assert run.outcome == "recovered" and calls == 2
    assert run.result["calls"] == [{"name": "add", "arguments": {"a": 1, "b": 2}, "repairs": [],
                                   "format": "hermes"}]


def test_policy_from_environment() -> None:
    assert RetryPolicy.from_env({}) == RetryPolicy(2, True)
    assert RetryPolicy.from_env({"TOOLCODEC_RETRY_MAX": "5"}).max_retries == 5
    assert not RetryPolicy.from_env({"TOOLCODEC_RETRY_ENABLED": "false"}).enabled
    for env in ({"TOOLCODEC_RETRY_MAX": "x"}, {"TOOLCODEC_RETRY_MAX": "-1"},
                {"TOOLCODEC_RETRY_MAX": "1000"}, {"TOOLCODEC_RETRY_ENABLED": "maybe"}):
        with pytest.raises(ValueError):
            RetryPolicy.from_env(env)
