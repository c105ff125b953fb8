"""The repairing proxy, driven by the real ``openai`` client over real HTTP.

Upstream is a STAND-IN for a model server (``tests/upstream_standin.py``): no model runs here,
so it replays recorded outputs over real HTTP and SSE, including broken ones, a stream cut
mid-call, an upstream that answers 500 and one that never answers.
"""

from __future__ import annotations

import json

import httpx
import openai
import pytest

from tests.serve_process import ServeProcess
from tests.upstream_standin import CASES, TOOLS


@pytest.fixture(scope="module")
def proxy(upstream):
    env = {"STANDIN_KEY": "sk-upstream-secret"}
    srv = ServeProcess("--upstream", upstream.url, "--upstream-key-env", "STANDIN_KEY",
                       "--workers", "1", "--timeout-ms", "2000", env=env).start()
    yield srv
    srv.stop()


def client(proxy, **kwargs) -> openai.OpenAI:
    return openai.OpenAI(base_url=proxy.url + "/v1", api_key="client-key", max_retries=0,
                         **kwargs)


def ask(case: str) -> list[dict]:
    return [{"role": "user", "content": f"case:{case}"}]


def whole(proxy, case: str):
    raw = client(proxy).chat.completions.with_raw_response.create(
        model="m", messages=ask(case), tools=TOOLS)
    return raw.parse(), raw.headers


def streamed(proxy, case: str):
    content, calls, reasoning, finish, ids = "", {}, "", None, set()
    for chunk in client(proxy).chat.completions.create(model="m", messages=ask(case),
                                                       tools=TOOLS, stream=True):
        ids.add((chunk.id, chunk.model, chunk.created))
        if not chunk.choices:
            continue
        delta = chunk.choices[0].delta
        content += delta.content or ""
        reasoning += getattr(delta, "reasoning_content", None) or ""
        for t in delta.tool_calls or []:
            calls[t.index] = (t.id, t.function.name, json.loads(t.function.arguments))
        finish = chunk.choices[0].finish_reason or finish
    return content, [calls[i] for i in sorted(calls)], reasoning, finish, ids


def test_broken_hermes_call_becomes_proper_tool_calls(proxy) -> None:
    answer, headers = whole(proxy, "hermes_broken")
    choice = answer.choices[0]
    assert choice.finish_reason == "tool_calls" and choice.message.content == "Let me check."
    (call,) = choice.message.tool_calls
    assert call.type == "function" and call.id.startswith("call_")
    assert call.function.name == "get_weather"
    assert json.loads(call.function.arguments) == {"city": "Paris", "days": 3}
    assert set(headers["x-toolcodec-repairs"].split(",")) >= {
        "json.single_quotes", "json.trailing_comma", "schema.coerce_integer"}


def test_think_goes_to_reasoning_content(proxy) -> None:
    answer, _ = whole(proxy, "qwen_xml")
    message = answer.choices[0].message
    assert message.model_extra["reasoning_content"] == "The user wants files."
    assert json.loads(message.tool_calls[0].function.arguments) == {"query": "cats && dogs"}


def test_broken_native_arguments_are_repaired(proxy) -> None:
    answer, headers = whole(proxy, "native_broken")
    call = answer.choices[0].message.tool_calls[0]
    assert json.loads(call.function.arguments) == {"city": "Oslo", "days": 2}
    assert "json.unclosed" in headers["x-toolcodec-repairs"]


def test_unrepairable_output_is_left_as_the_model_wrote_it(proxy) -> None:
    answer, headers = whole(proxy, "unknown_tool")
    assert answer.choices[0].message.tool_calls is None
    assert answer.choices[0].message.content == CASES["unknown_tool"]["content"]
    answer, _ = whole(proxy, "native_unrepairable")
    assert answer.choices[0].message.tool_calls[0].function.arguments == '{"days": 2}'
    metrics = httpx.get(proxy.url + "/metrics").text
    assert 'toolcodec_proxy_model_errors_total{code="unknown_tool",format="none",model="other"}' \
        in metrics


@pytest.mark.parametrize("case", [c for c in CASES])
def test_streaming_and_whole_answers_carry_the_same_calls_and_content(proxy, case) -> None:
    answer, _ = whole(proxy, case)
    message = answer.choices[0].message
    content, calls, reasoning, finish, heads = streamed(proxy, case)
    whole_calls = [(t.id, t.function.name, json.loads(t.function.arguments))
                   for t in message.tool_calls or []]
    assert [c[1:] for c in calls] == [c[1:] for c in whole_calls]
    # Ids of the calls the proxy made: unique per call, not derived from upstream's answer id
    # (a native call passed on as the model wrote it keeps its own).
    passed_on = {c["id"] for c in CASES[case].get("tool_calls") or []}
    ids = [c[0] for c in calls + whole_calls if c[0] not in passed_on]
    assert len(set(ids)) == len(ids) and all(i.startswith("call_") for i in ids)
    assert content.strip() == (message.content or "")
    assert finish == answer.choices[0].finish_reason
    assert heads == {(f"chatcmpl-{case}", "standin-model", 1_700_000_000)}  # upstream's own


def test_stream_cut_mid_call_ends_with_an_error_chunk_and_done(proxy) -> None:
    with httpx.stream("POST", proxy.url + "/v1/chat/completions", json={
            "model": "m", "messages": ask("cut:hermes_broken"), "tools": TOOLS, "stream": True},
            timeout=30) as response:
        lines = [line for line in response.iter_lines() if line.startswith("data:")]
    assert lines[-1] == "data: [DONE]"
    events = [json.loads(line[5:]) for line in lines[:-1]]
    errors = [e for e in events if "error" in e]
    assert errors and errors[0]["error"]["code"] == "upstream_stream_broken"
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in events
                   if "choices" in c)
    assert text.startswith("Let me check.")  # what arrived before the cut is not lost


def test_upstream_failures_map_to_statuses(proxy, upstream) -> None:
    with pytest.raises(openai.InternalServerError) as info:
        client(proxy).chat.completions.create(model="m", messages=ask("http500"))
    assert info.value.status_code == 500
    with pytest.raises(openai.BadRequestError):
        client(proxy).chat.completions.create(model="m", messages=ask("http400"))


def test_upstream_unreachable_is_502() -> None:
    from tests.redis_server import free_port

    srv = ServeProcess("--upstream", f"http://127.0.0.1:{free_port()}", "--workers", "1").start()
    try:
        response = httpx.post(srv.url + "/v1/chat/completions", json={
            "model": "m", "messages": ask("prose")}, timeout=30)
        assert response.status_code == 502
        assert response.json()["error"]["code"] == "upstream_unavailable"
    finally:
        srv.stop()


def test_upstream_key_is_sent_upstream_and_models_pass_through(proxy, upstream) -> None:
    models = client(proxy).models.list()
    assert [m.id for m in models.data] == ["standin-model"]
    whole(proxy, "prose")
    assert httpx.get(upstream.url + "/_last").json()["authorization"] == \
        "Bearer sk-upstream-secret"


def test_bodies_are_bounded_and_checked(proxy) -> None:
    response = httpx.post(proxy.url + "/v1/chat/completions", content=b"x" * (11 << 20),
                          headers={"content-type": "application/json"}, timeout=30)
    assert response.status_code == 413
    response = httpx.post(proxy.url + "/v1/chat/completions", json={"messages": "x"})
    assert response.status_code == 400


def test_tools_as_prompt(upstream) -> None:
    srv = ServeProcess("--upstream", upstream.url, "--tools-as-prompt", "--workers", "1").start()
    try:
        answer = client(srv).chat.completions.create(model="m", messages=ask("hermes_broken"),
                                                     tools=TOOLS)
        assert answer.choices[0].message.tool_calls[0].function.name == "get_weather"
        sent = httpx.get(upstream.url + "/_last").json()["body"]
        assert "tools" not in sent and sent["messages"][0]["role"] == "system"
        assert "get_weather" in sent["messages"][0]["content"]
    finally:
        srv.stop()


def test_an_upstream_that_hangs_is_504_within_the_upstream_timeout(upstream) -> None:
    srv = ServeProcess("--upstream", upstream.url, "--upstream-timeout-s", "1", "--workers",
                       "1").start()
    try:
        response = httpx.post(srv.url + "/v1/chat/completions", json={
            "model": "m", "messages": ask("hang")}, timeout=60)
        assert response.status_code == 504
        assert response.json()["error"]["code"] == "upstream_timeout"
        with httpx.stream("POST", srv.url + "/v1/chat/completions", json={
                "model": "m", "messages": ask("hang"), "stream": True}, timeout=60) as r:
            assert r.status_code == 504
    finally:
        srv.stop()
