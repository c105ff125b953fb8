"""Running the proxy: capacity signals, connection pool and deadline, ``n > 1``, ``tool_choice``,
logprobs and fingerprints, forwarded headers, upstream shape and size checks, other OpenAI
routes, heartbeats. Real HTTP throughout; upstream is a STAND-IN for a model server
(``tests/upstream_standin.py``)."""

from __future__ import annotations

import json
import threading

import httpx
import openai
import pytest
import toolcodec as codec
from toolcodec.pool.proxy.upstream import FORWARDED_HEADERS

from tests.serve_process import ServeProcess
from tests.upstream_standin import CASES, TOOLS

# What a decode job that could not decode says, and the reason the proxy counts it under.
UNDECODED = {"rejected": "overload", "timeout": "timeout"}


@pytest.fixture(scope="module")
def proxy(upstream):
    srv = ServeProcess("--upstream", upstream.url, "--workers", "1", "--timeout-ms", "5000",
                       "--heartbeat-s", "0.2", "--max-upstream-body", "65536").start()
    yield srv
    srv.stop()


def ask(case: str) -> list[dict]:
    return [{"role": "user", "content": f"case:{case}"}]


def client(srv, **kwargs) -> openai.OpenAI:
    return openai.OpenAI(base_url=srv.url + "/v1", api_key="k", max_retries=0, **kwargs)


def sse(srv, body: dict, headers: dict | None = None) -> tuple[httpx.Response, list[str]]:
    with httpx.stream("POST", srv.url + "/v1/chat/completions", json={**body, "stream": True},
                      headers=headers, timeout=60) as response:
        lines = [line for line in response.iter_lines() if line]
    return response, lines


def events(lines: list[str]) -> list[dict]:
    return [json.loads(line[5:]) for line in lines if line.startswith("data:")
            and line != "data: [DONE]"]


def metric(srv, name: str, **labels: str) -> float:
    from prometheus_client.parser import text_string_to_metric_families

    text = httpx.get(srv.url + "/metrics").text  # the samples with these labels (and any others)
    return sum(sample.value for family in text_string_to_metric_families(text)
               for sample in family.samples
               if sample.name == name and labels.items() <= sample.labels.items())


# -- capacity, not silence ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def starved(upstream):
    """A proxy whose decode budget (1 ms) no multi-megabyte job can meet."""
    srv = ServeProcess("--upstream", upstream.url, "--workers", "1", "--timeout-ms", "1").start()
    yield srv
    srv.stop()


def test_an_answer_that_could_not_be_decoded_is_a_503_not_a_relay(starved) -> None:
    with pytest.raises(openai.APIStatusError) as info:
        client(starved).chat.completions.create(model="m", messages=ask("bigcall:3000000"),
                                                tools=TOOLS)
    response = info.value.response
    assert response.status_code == 503 and response.headers["retry-after"] == "1"
    # Shed before it could start (rejected) or cut at its deadline (timeout): both say so.
    code = response.headers["x-toolcodec-undecoded"]
    assert code in UNDECODED
    error = response.json()["error"]
    assert error["code"] == code and error["type"] == "toolcodec_unavailable"
    assert metric(starved, "toolcodec_proxy_undecoded_total", stream="false",
                  reason=UNDECODED[code]) >= 1
    assert metric(starved, "toolcodec_proxy_model_errors_total", code=code) == 0


def test_a_streamed_block_that_could_not_be_decoded_is_named_in_the_final_chunk(starved) -> None:
    response, lines = sse(starved, {"model": "m", "messages": ask("bigcall:1000000"),
                                    "tools": TOOLS})
    assert lines[-1] == "data: [DONE]"
    chunks = events(lines)
    final = chunks[-1]
    status = final["toolcodec"]["undecoded"][0]["status"]
    assert status in UNDECODED
    # the block's text is released as content, not lost and not passed off as a call
    text = "".join(c["choices"][0]["delta"].get("content") or "" for c in chunks)
    assert text.startswith("<tool_call>") and final["choices"][0]["finish_reason"] == "stop"
    # an answer that is only a call: the failure is known before the first byte
    assert response.headers["x-toolcodec-undecoded"] in UNDECODED
    assert metric(starved, "toolcodec_proxy_undecoded_total", stream="true",
                  reason=UNDECODED[status]) >= 1
    assert metric(starved, "toolcodec_proxy_model_errors_total", code=status) == 0


# -- connections and the overall deadline ---------------------------------------------------------


def test_no_free_upstream_connection_is_a_503_and_a_trickle_is_cut_at_the_deadline(
        upstream) -> None:
    # The deadline must outlast the wait from the held stream's first byte to the second
    # request's turn for the connection, however busy the machine: it is generous.
    srv = ServeProcess("--upstream", upstream.url, "--workers", "1", "--upstream-connections",
                       "1", "--upstream-pool-timeout-s", "0.2", "--request-deadline-s",
                       "8").start()
    try:
        opened = threading.Event()
        got: dict = {}

        def hold() -> None:  # the one connection, held by a stream that never ends
            with httpx.stream("POST", srv.url + "/v1/chat/completions", json={
                    "model": "m", "messages": ask("trickle"), "stream": True},
                    timeout=60) as response:
                lines = []
                for line in response.iter_lines():
                    opened.set()
                    if line:
                        lines.append(line)
                got["lines"] = lines

        holder = threading.Thread(target=hold)
        holder.start()
        assert opened.wait(30)
        response = httpx.post(srv.url + "/v1/chat/completions", json={
            "model": "m", "messages": ask("prose")}, timeout=30)
        assert response.status_code == 503 and response.headers["retry-after"] == "1"
        assert response.json()["error"]["code"] == "upstream_busy"
        holder.join(60)
        lines = got["lines"]
        assert lines[-1] == "data: [DONE]"
        errors = [e for e in events(lines) if "error" in e]
        assert errors[0]["error"]["code"] == "upstream_deadline"
        # the deadline freed the connection
        response = httpx.post(srv.url + "/v1/chat/completions", json={
            "model": "m", "messages": ask("prose")}, timeout=30)
        assert response.status_code == 200
        response = httpx.post(srv.url + "/v1/chat/completions", json={
            "model": "m", "messages": ask("hang")}, timeout=60)
        assert response.status_code == 504
        assert response.json()["error"]["code"] == "upstream_deadline"
    finally:
        srv.stop()


# -- n > 1, tool_choice, logprobs and fingerprints -----------------------------------------------


def test_n_2_streams_are_decoded_per_choice(proxy) -> None:
    names = ["hermes_broken", "fmt_kimi_k2"]
    content: dict[int, str] = {0: "", 1: ""}
    calls: dict[int, list] = {0: [], 1: []}
    finish: dict[int, str] = {}
    for chunk in client(proxy).chat.completions.create(
            model="m", messages=ask("+".join(names)), tools=TOOLS, n=2, stream=True):
        for choice in chunk.choices:
            content[choice.index] += choice.delta.content or ""
            calls[choice.index] += [(t.function.name, json.loads(t.function.arguments))
                                    for t in choice.delta.tool_calls or []]
            finish[choice.index] = choice.finish_reason or finish.get(choice.index)
    for index, name in enumerate(names):
        want = codec.decode(CASES[name]["content"], tools=TOOLS).to_dict()
        assert calls[index] == [(c["name"], c["arguments"]) for c in want["calls"]]
        assert content[index].strip() == want["content"]
        assert finish[index] == "tool_calls"
    whole = client(proxy).chat.completions.create(model="m", messages=ask("+".join(names)),
                                                  tools=TOOLS, n=2)
    assert [len(c.message.tool_calls) for c in whole.choices] == [1, 2]


def test_tool_choice_none_makes_no_calls_and_a_forced_function_only_that_one(proxy) -> None:
    raw = CASES["two_calls"]["content"]
    answer = client(proxy).chat.completions.create(model="m", messages=ask("two_calls"),
                                                   tools=TOOLS, tool_choice="none")
    assert answer.choices[0].message.tool_calls is None
    assert answer.choices[0].message.content == raw
    text = ""
    for chunk in client(proxy).chat.completions.create(
            model="m", messages=ask("two_calls"), tools=TOOLS, tool_choice="none", stream=True):
        for choice in chunk.choices:
            assert not choice.delta.tool_calls
            text += choice.delta.content or ""
    assert text == raw
    forced = {"type": "function", "function": {"name": "search_files"}}
    answer = client(proxy).chat.completions.create(model="m", messages=ask("two_calls"),
                                                   tools=TOOLS, tool_choice=forced)
    message = answer.choices[0].message
    assert [t.function.name for t in message.tool_calls] == ["search_files"]
    assert "get_weather" in message.content  # the other call stays text, as decode keeps it
    with pytest.raises(openai.BadRequestError):
        client(proxy).chat.completions.create(
            model="m", messages=ask("two_calls"), tools=TOOLS,
            tool_choice={"type": "function", "function": {"name": "nope"}})


def test_streamed_chunks_keep_logprobs_and_the_system_fingerprint(proxy) -> None:
    tokens, text, fingerprints = [], "", set()
    for chunk in client(proxy).chat.completions.create(
            model="m", messages=ask("hermes_broken"), tools=TOOLS, stream=True, logprobs=True):
        fingerprints.add(chunk.system_fingerprint)
        for choice in chunk.choices:
            text += choice.delta.content or ""
            if choice.logprobs is not None:
                tokens += [t.token for t in choice.logprobs.content or []]
    assert fingerprints == {"fp_standin"}
    # every upstream token's logprob arrives, on the chunks its text produced (or the last)
    assert "".join(tokens) == CASES["hermes_broken"]["content"]
    assert text.strip() == "Let me check."


# -- headers, shapes, sizes, routes -------------------------------------------------------------


def test_only_authorization_and_allowed_headers_go_upstream(proxy, upstream) -> None:
    allowed = {name: f"value of {name}" for name in FORWARDED_HEADERS}
    allowed["x-request-id"] = "req-allowed-1"
    allowed["traceparent"] = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    answer = httpx.post(proxy.url + "/v1/chat/completions",
                        json={"model": "m", "messages": ask("prose")},
                        headers={**allowed, "cookie": "session=secret", "x-custom": "1",
                                 "x-stainless-os": "Linux", "x-toolcodec-report": "1"})
    seen = httpx.get(upstream.url + "/_last").json()["headers"]
    assert {name: seen.get(name) for name in allowed} == allowed
    assert not {"cookie", "x-custom", "x-stainless-os", "x-toolcodec-report"} & set(seen)
    assert "toolcodec" in answer.json()  # the report header was read, not forwarded


def test_an_upstream_answer_of_the_wrong_shape_is_a_clean_502(proxy) -> None:
    response = httpx.post(proxy.url + "/v1/chat/completions", json={
        "model": "m", "messages": ask("badshape"), "tools": TOOLS})
    assert response.status_code == 502
    error = response.json()["error"]
    assert error["code"] == "bad_upstream" and "'choices' is not a list" in error["message"]


def test_upstream_bodies_and_sse_lines_are_capped(proxy) -> None:
    response = httpx.post(proxy.url + "/v1/chat/completions", json={
        "model": "m", "messages": ask("big:100000")})
    assert response.status_code == 502
    assert response.json()["error"]["code"] == "upstream_too_large"
    _, lines = sse(proxy, {"model": "m", "messages": ask("bigline:100000")})
    assert lines[-1] == "data: [DONE]"
    assert [e["error"]["code"] for e in events(lines) if "error" in e] == ["upstream_too_large"]


@pytest.mark.parametrize("route", ["completions", "embeddings", "moderations"])
def test_other_openai_routes_pass_through_unchanged(proxy, upstream, route) -> None:
    body = {"model": "m", "input": "hello", "toolcodec": {"kept": "as sent"}}
    response = httpx.post(f"{proxy.url}/v1/{route}", json=body,
                          headers={"authorization": "Bearer c"})
    assert response.status_code == 201
    assert response.json() == {"object": "standin.echo", "path": f"/v1/{route}", "body": body}
    assert httpx.get(upstream.url + "/_last").json()["authorization"] == "Bearer c"


def test_a_streamed_completion_passes_through_as_it_comes(proxy) -> None:
    with httpx.stream("POST", proxy.url + "/v1/completions", json={
            "model": "m", "prompt": "abc", "stream": True}) as response:
        body = b"".join(response.iter_bytes())
    assert response.status_code == 200
    assert response.headers["content-type"].startswith("text/event-stream")
    assert body == b'data: {"text":"a"}\n\ndata: {"text":"b"}\n\ndata: {"text":"c"}\n\n' \
                   b"data: [DONE]\n\n"


def test_heartbeats_keep_a_stream_alive_while_a_block_is_pending(proxy, upstream) -> None:
    upstream.gate.clear()
    lines: list[str] = []
    with httpx.stream("POST", proxy.url + "/v1/chat/completions", json={
            "model": "m", "messages": ask("gated:hermes_broken"), "tools": TOOLS,
            "stream": True}, timeout=60) as response:
        for line in response.iter_lines():
            if line == ": keep-alive" and not upstream.gate.is_set():
                httpx.post(upstream.url + "/_release")  # seen while the block was open
            if line:
                lines.append(line)
    assert ": keep-alive" in lines
    chunks = events(lines)
    calls = [t for c in chunks for ch in c.get("choices", [])
             for t in ch["delta"].get("tool_calls") or []]
    assert [json.loads(t["function"]["arguments"]) for t in calls] == [{"city": "Paris",
                                                                        "days": 3}]
    first_call = next(i for i, line in enumerate(lines) if "tool_calls" in line)
    assert lines.index(": keep-alive") < first_call


def test_streams_whose_upstream_falls_silent_are_cut_at_the_deadline_all_of_them(
        upstream) -> None:
    # Half of each stream arrives, then nothing (the gate stays shut): only the deadline's
    # poke of the relay's read ends them; the heartbeat is set far beyond it.
    # (The deadline outlasts the wait for upstream's first bytes on a busy machine: a stream
    # must have begun for its read to be cut.)
    srv = ServeProcess("--upstream", upstream.url, "--workers", "1", "--request-deadline-s",
                       "4", "--heartbeat-s", "600").start()
    upstream.gate.clear()
    results: list[list[str]] = []

    def one() -> None:
        with httpx.stream("POST", srv.url + "/v1/chat/completions", json={
                "model": "m", "messages": ask("gated:hermes_broken"), "tools": TOOLS,
                "stream": True}, timeout=60) as response:
            results.append([line for line in response.iter_lines() if line])

    try:
        threads = [threading.Thread(target=one) for _ in range(16)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(90)
    finally:
        upstream.gate.set()
        srv.stop()
    assert len(results) == 16
    for lines in results:
        assert lines[-1] == "data: [DONE]" and ": keep-alive" not in lines
        chunks = events(lines)
        assert [c["error"]["code"] for c in chunks if "error" in c] == ["upstream_deadline"]
        assert not any(t for c in chunks for ch in c.get("choices", [])
                       for t in ch["delta"].get("tool_calls") or [])  # the call was cut


def test_tools_the_codec_refuses_are_a_400_before_going_upstream(proxy, upstream) -> None:
    bad = [{"type": "function", "function": {"name": "x", "parameters": {"type": 5}}}]
    httpx.post(proxy.url + "/v1/chat/completions", json={"model": "m", "messages": ask("prose")})
    for stream in (False, True):
        response = httpx.post(proxy.url + "/v1/chat/completions", json={
            "model": "m", "messages": ask("hermes_broken"), "tools": bad, "stream": stream})
        assert response.status_code == 400, stream
        assert response.json()["error"]["type"] == "invalid_request_error"
        assert "tools rejected" in response.json()["error"]["message"]
    assert httpx.get(upstream.url + "/_last").json()["body"]["messages"] == ask("prose")
