"""The proxy never hands a client a wrong answer as a right one: the real ``openai`` client
over real HTTP, in front of a STAND-IN model server (``tests/upstream_faults.py``: recorded
outputs, and the ways real servers break) — a stream cut inside a call, a whole JSON answer
to a stream request, a cut hidden behind ``finish_reason: "tool_calls"``, reasoning split off
upstream, markup the decoder does not read, a forced tool choice not met."""

from __future__ import annotations

import json
import uuid

import httpx
import openai
import pytest

from tests.serve_process import ServeProcess
from tests.upstream_faults import TOOLS, FaultStandin, RawUpstream, _case, sse_with_bad_chunking

R1 = "deepseek-ai/DeepSeek-R1-0528"
K3 = "moonshotai/Kimi-K3"


@pytest.fixture(scope="module")
def upstream():
    standin = FaultStandin().start()
    yield standin
    standin.stop()


@pytest.fixture(scope="module")
def proxy(upstream):
    srv = ServeProcess("--upstream", upstream.url, "--workers", "1", "--timeout-ms", "2000",
                       "--model-preset", f"{R1}=deepseek-r1",
                       "--model-preset", f"{K3}=kimi-k3").start()
    yield srv
    srv.stop()


def client(proxy) -> openai.OpenAI:
    return openai.OpenAI(base_url=proxy.url + "/v1", api_key="k", max_retries=0)


def ask(case: str) -> list[dict]:
    return [{"role": "user", "content": f"case:{case}"}]


def sse(proxy, case: str, model: str = "m", **body) -> list[dict]:
    """The proxy's stream as raw SSE events (JSON), through ``[DONE]``, which must end it."""
    with httpx.stream("POST", proxy.url + "/v1/chat/completions", json={
            "model": model, "messages": ask(case), "tools": TOOLS, "stream": True, **body},
            timeout=60) as response:
        assert response.status_code == 200
        lines = [line for line in response.iter_lines() if line.startswith("data:")]
    assert lines[-1] == "data: [DONE]"
    return [json.loads(line[5:]) for line in lines[:-1]]


def deltas(events: list[dict]) -> list[dict]:
    return [c["choices"][0]["delta"] for c in events if c.get("choices")]


def finals(events: list[dict]) -> list[dict]:
    return [c for c in events if c.get("choices") and c["choices"][0].get("finish_reason")]


def client_stream(proxy, case: str, model: str = "m", **body):
    """What the openai client yields before it stops: (content, calls, reasoning, finish,
    the exception it raised or None)."""
    content, calls, reasoning, finish, raised = "", [], "", None, None
    try:
        for chunk in client(proxy).chat.completions.create(
                model=model, messages=ask(case), tools=TOOLS, stream=True, **body):
            if not chunk.choices:
                continue
            delta = chunk.choices[0].delta
            content += delta.content or ""
            reasoning += (delta.model_extra or {}).get("reasoning_content") or ""
            calls += [(t.function.name, json.loads(t.function.arguments))
                      for t in delta.tool_calls or []]
            finish = chunk.choices[0].finish_reason or finish
    except openai.APIError as exc:
        raised = exc
    return content, calls, reasoning, finish, raised


# -- a cut stream is a cut answer ----------------------------------------------------------


@pytest.mark.parametrize(("how", "code"), [("reset", "upstream_stream_broken"),
                                           ("badsse", "upstream_bad_chunk"),
                                           ("eof", "upstream_stream_broken")])
def test_a_stream_broken_inside_a_call_gives_no_call_and_an_error(proxy, how, code) -> None:
    content, calls, _, finish, raised = client_stream(proxy, f"fault:{how}:rm_rf")
    assert calls == [] and isinstance(raised, openai.APIError)  # the client cannot miss it
    assert content == "Cleaning up.\n" and "<tool_call>" not in content
    events = sse(proxy, f"fault:{how}:rm_rf")
    assert not any(d.get("tool_calls") for d in deltas(events))
    assert [e["error"]["code"] for e in events if "error" in e] == [code]
    assert [f["choices"][0]["finish_reason"] for f in finals(events)] == ["length"]
    assert "rm -rf" not in "".join(d.get("content") or "" for d in deltas(events))


def test_bad_chunked_framing_is_a_broken_stream(upstream) -> None:
    raw = RawUpstream(sse_with_bad_chunking(_case("rm_rf"))).start()
    srv = ServeProcess("--upstream", raw.url, "--workers", "1", "--timeout-ms", "2000").start()
    try:
        content, calls, _, _, raised = client_stream(srv, "any")
        assert calls == [] and isinstance(raised, openai.APIError)
        events = sse(srv, "any")
        assert [e["error"]["code"] for e in events if "error" in e] == ["upstream_stream_broken"]
        assert [f["choices"][0]["finish_reason"] for f in finals(events)] == ["length"]
        assert not any(d.get("tool_calls") for d in deltas(events))
    finally:
        srv.stop()
        raw.stop()


def test_a_whole_json_answer_to_a_stream_request_is_relayed_decoded(proxy) -> None:
    whole = client(proxy).chat.completions.create(model="m", messages=ask("hermes_broken"),
                                                  tools=TOOLS)
    want = [(t.function.name, json.loads(t.function.arguments))
            for t in whole.choices[0].message.tool_calls]
    content, calls, _, finish, raised = client_stream(proxy, "fault:json:hermes_broken")
    assert raised is None and calls == want == [("get_weather", {"city": "Paris", "days": 3})]
    assert content.strip() == whole.choices[0].message.content and finish == "tool_calls"


def test_json_that_is_no_chat_completion_to_a_stream_request_is_an_error(proxy) -> None:
    content, calls, _, _, raised = client_stream(proxy, "fault:json:badshape")
    assert isinstance(raised, openai.APIError) and (content, calls) == ("", [])
    events = sse(proxy, "fault:json:badshape")
    assert [e["error"]["code"] for e in events if "error" in e] == ["bad_upstream"]


def _whole_answer_streamed(body: bytes) -> list[dict]:
    """The proxy's stream (``--max-upstream-body 1024``) for an upstream that answers the
    stream request with *body* as a whole JSON answer, its content-length declared."""
    answer = (b"HTTP/1.1 200 OK\r\ncontent-type: application/json\r\n"
              b"content-length: %d\r\n\r\n%s" % (len(body), body))
    raw = RawUpstream(answer).start()
    srv = ServeProcess("--upstream", raw.url, "--workers", "1", "--timeout-ms", "2000",
                       "--max-upstream-body", "1024").start()
    try:
        return sse(srv, "any")
    finally:
        srv.stop()
        raw.stop()


@pytest.mark.parametrize(("body", "code"), [
    (b'{"choices": [{"message": {"content": "cut', "upstream_bad_chunk"),
    (b'{"choices": [{"message": {"content": "' + b"x" * 2000 + b'"}}]}', "upstream_too_large"),
])
def test_a_whole_answer_to_a_stream_request_that_cannot_be_read_is_an_error(body, code) -> None:
    events = _whole_answer_streamed(body)
    assert [e["error"]["code"] for e in events if "error" in e] == [code]
    assert "could not be read as JSON" in [e for e in events if "error" in e][0][
        "error"]["message"]
    assert [f["choices"][0]["finish_reason"] for f in finals(events)] == ["length"]


def test_a_whole_answer_to_a_stream_request_near_the_body_limit_is_read() -> None:
    # Its declared length and its parts are one size, counted once: more than half the
    # limit is no reason to refuse it.
    body = json.dumps({"id": "x", "object": "chat.completion", "created": 1, "model": "m",
                       "choices": [{"index": 0, "finish_reason": "stop", "message": {
                           "role": "assistant", "content": "w" * 700}}]}).encode()
    assert 512 < len(body) <= 1024
    events = _whole_answer_streamed(body)
    assert [e for e in events if "error" in e] == []
    assert "".join(d.get("content") or "" for d in deltas(events)) == "w" * 700
    assert [f["choices"][0]["finish_reason"] for f in finals(events)] == ["stop"]


# -- truncation from usage -----------------------------------------------------------------


def test_a_call_cut_by_max_tokens_behind_finish_reason_tool_calls_is_no_call(proxy) -> None:
    answer = client(proxy).chat.completions.create(
        model="m", messages=ask("fault:usage:rm_rf_cut"), tools=TOOLS, max_tokens=37)
    choice = answer.choices[0]
    assert choice.message.tool_calls is None and choice.finish_reason == "length"
    assert choice.message.content == "Cleaning up."  # the cut markup is not shown
    content, calls, _, finish, raised = client_stream(
        proxy, "fault:usage:rm_rf_cut", max_completion_tokens=37)
    assert (calls, finish, raised) == ([], "length", None)
    assert content.strip() == "Cleaning up."


def test_a_closed_call_at_the_limit_is_kept_and_the_answer_says_length(proxy) -> None:
    answer = client(proxy).chat.completions.create(
        model="m", messages=ask("fault:usage:rm_rf"), tools=TOOLS, max_tokens=50)
    choice = answer.choices[0]
    assert [t.function.name for t in choice.message.tool_calls] == ["run_shell"]
    assert choice.finish_reason == "length"
    answer = client(proxy).chat.completions.create(  # one token under the limit: not cut
        model="m", messages=ask("fault:under:rm_rf"), tools=TOOLS, max_tokens=50)
    assert answer.choices[0].finish_reason == "tool_calls"
    assert answer.usage.completion_tokens == 49


# -- reasoning split off upstream ----------------------------------------------------------


def test_r1_with_split_reasoning_whole_and_streamed_reads_the_call(proxy) -> None:
    answer = client(proxy).chat.completions.create(model=R1, messages=ask("r1_split"),
                                                   tools=TOOLS)
    message = answer.choices[0].message
    assert [(t.function.name, json.loads(t.function.arguments))
            for t in message.tool_calls] == [("search_files", {"query": "cats"})]
    assert message.content == "One moment." and answer.choices[0].finish_reason == "tool_calls"
    assert message.model_extra["reasoning_content"] == "The user wants files about cats."
    content, calls, reasoning, finish, raised = client_stream(proxy, "r1_split", model=R1)
    assert calls == [("search_files", {"query": "cats"})] and finish == "tool_calls"
    assert (content.strip(), reasoning, raised) == (
        "One moment.", "The user wants files about cats.", None)


def test_kimi_k3_skipping_its_think_section_calls_whole_and_streamed(proxy) -> None:
    answer = client(proxy).chat.completions.create(model=K3, messages=ask("k3_direct"),
                                                   tools=TOOLS)
    calls = [(t.function.name, json.loads(t.function.arguments))
             for t in answer.choices[0].message.tool_calls]
    assert calls == [("get_weather", {"city": "Oslo"})]
    assert answer.choices[0].finish_reason == "tool_calls"
    _, streamed, reasoning, finish, raised = client_stream(proxy, "k3_direct", model=K3)
    assert (streamed, reasoning, finish, raised) == (calls, "", "tool_calls", None)


# -- unread markup, undeclared tools, forced tools -----------------------------------------


def metric(proxy, stream: str, what: str) -> float:
    text = httpx.get(proxy.url + "/metrics").text
    for line in text.splitlines():
        if line.startswith(f'toolcodec_proxy_unrecognised_total{{stream="{stream}",'
                           f'what="{what}"}}'):
            return float(line.split()[-1])
    raise AssertionError(f"no toolcodec_proxy_unrecognised_total for {stream}/{what}")


# Cohere and Hunyuan are read by their formats; a request whose options leave them out
# (here a Mistral-only format list) gets them said instead.
MISTRAL_ONLY = {"toolcodec": {"formats": ["mistral"]}}


def openai_kwargs(body: dict) -> dict:
    """The request fields as the openai client takes them (ours ride in ``extra_body``)."""
    extra = {k: v for k, v in body.items() if k == "toolcodec"}
    rest = {k: v for k, v in body.items() if k != "toolcodec"}
    return {**rest, **({"extra_body": extra} if extra else {})}


@pytest.mark.parametrize(("case", "what", "body"), [
    ("cohere", "cohere", MISTRAL_ONLY),
    ("hunyuan", "hunyuan", MISTRAL_ONLY),
    ("unknown_tool", "unknown_tool", {}),
    ("plain_prose", "tool_choice_unmet", {"tool_choice": "required"}),
    ("plain_prose", "tool_choice_unmet",
     {"tool_choice": {"type": "function", "function": {"name": "get_weather"}}}),
])
def test_what_was_not_made_a_call_is_said(proxy, case, what, body) -> None:
    before = metric(proxy, "false", what), metric(proxy, "true", what)
    raw = client(proxy).chat.completions.with_raw_response.create(
        model="m", messages=ask(case), tools=TOOLS, **openai_kwargs(body))
    assert raw.headers["x-toolcodec-unrecognised"] == what
    assert raw.parse().choices[0].message.tool_calls is None
    events = sse(proxy, case, **body)
    assert finals(events)[-1]["toolcodec"]["unrecognised"] == [what]
    assert (metric(proxy, "false", what), metric(proxy, "true", what)) == (
        before[0] + 1, before[1] + 1)


@pytest.mark.parametrize(("case", "body"), [
    ("prose_mentions_tags", {}), ("plain_prose", {}), ("hermes_broken", {}),
    ("hermes_broken", {"tool_choice": "required"}),
    ("hermes_broken", {"tool_choice": {"type": "function", "function": {"name": "get_weather"}}}),
])
def test_prose_code_and_met_choices_are_not_flagged(proxy, case, body) -> None:
    raw = client(proxy).chat.completions.with_raw_response.create(
        model="m", messages=ask(case), tools=TOOLS, **body)
    assert "x-toolcodec-unrecognised" not in raw.headers
    assert "toolcodec" not in finals(sse(proxy, case, **body))[-1]


def test_call_ids_are_unique_per_call(proxy) -> None:
    ids = []
    for _ in range(2):
        answer = client(proxy).chat.completions.create(model="m", messages=ask("two_calls"),
                                                       tools=TOOLS)
        ids += [t.id for t in answer.choices[0].message.tool_calls]
        events = sse(proxy, "two_calls")
        ids += [t["id"] for d in deltas(events) for t in d.get("tool_calls") or []]
    assert len(ids) == 8 and len(set(ids)) == 8


# -- one log line per answer not decoded or flagged ----------------------------------------


def test_flagged_and_broken_answers_are_logged_with_request_id_model_reason(upstream) -> None:
    srv = ServeProcess("--upstream", upstream.url, "--workers", "1",
                       "--timeout-ms", "2000").start()
    rid = [uuid.uuid4().hex for _ in range(4)]
    try:
        plain = client(srv)
        plain.chat.completions.create(model="cohere-model", messages=ask("cohere"), tools=TOOLS,
                                      extra_headers={"x-request-id": rid[0]},
                                      **openai_kwargs(MISTRAL_ONLY))
        client_stream(srv, "fault:reset:rm_rf", extra_headers={"x-request-id": rid[1]})
        plain.chat.completions.create(model="m", messages=ask("fault:usage:rm_rf_cut"),
                                      tools=TOOLS, max_tokens=9,
                                      extra_headers={"x-request-id": rid[2]})
        plain.chat.completions.create(model="m", messages=ask("plain_prose"), tools=TOOLS,
                                      extra_headers={"x-request-id": rid[3]})
    finally:
        srv.terminate()
        out = srv.proc.stdout.read().decode()
    lines = [json.loads(line[line.index("{"):]) for line in out.splitlines()
             if '"proxy_answer"' in line]
    by_id = {line["request_id"]: line for line in lines}
    assert by_id[rid[0]]["model"] == "cohere-model"
    assert (by_id[rid[0]]["reason"], by_id[rid[0]]["unrecognised"]) == ("unrecognised",
                                                                         ["cohere"])
    assert by_id[rid[1]]["reason"] == "upstream_stream_broken" and by_id[rid[1]]["stream"]
    assert by_id[rid[2]]["reason"] == "truncated" and "truncated" in by_id[rid[2]]["codes"]
    assert rid[3] not in by_id  # an answer decoded as it came is not logged
    assert len([line for line in lines if line["request_id"] in rid]) == 3


def test_an_answer_that_could_not_be_decoded_is_logged(upstream) -> None:
    srv = ServeProcess("--upstream", upstream.url, "--workers", "1", "--timeout-ms", "1").start()
    rid = uuid.uuid4().hex
    try:
        with pytest.raises(openai.APIStatusError) as info:
            client(srv).chat.completions.create(
                model="big-model", messages=ask("bigcall:3000000"), tools=TOOLS,
                extra_headers={"x-request-id": rid})
        code = info.value.response.headers["x-toolcodec-undecoded"]
    finally:
        srv.terminate()
        out = srv.proc.stdout.read().decode()
    lines = [json.loads(line[line.index("{"):]) for line in out.splitlines()
             if '"proxy_answer"' in line]
    assert [(x["request_id"], x["model"], x["reason"], x["stream"]) for x in lines] == [
        (rid, "big-model", code, False)]


@pytest.mark.parametrize("case", ["native_ok", "two_calls"])
def test_a_stream_cut_inside_a_call_keeps_only_the_calls_that_closed(proxy, case) -> None:
    """The stand-in's ``cut:`` streams stop half-way (a reset): inside native argument
    fragments, or inside the second of two Hermes calls."""
    events = sse(proxy, f"cut:{case}")
    calls = [(t["function"]["name"], json.loads(t["function"]["arguments"]))
             for d in deltas(events) for t in d.get("tool_calls") or []]
    whole = client(proxy).chat.completions.create(model="m", messages=ask(case), tools=TOOLS)
    made = [(t.function.name, json.loads(t.function.arguments))
            for t in whole.choices[0].message.tool_calls]
    assert calls == made[:len(calls)] and len(calls) < len(made)  # a prefix: closed ones only
    assert [e["error"]["code"] for e in events if "error" in e] == ["upstream_stream_broken"]
    assert [f["choices"][0]["finish_reason"] for f in finals(events)] == ["length"]
    assert "<tool_call>" not in "".join(d.get("content") or "" for d in deltas(events))
