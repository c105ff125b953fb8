"""``POST /v1/messages``: Anthropic's Messages API through the proxy, driven by the real
``anthropic`` client over real HTTP, whole and streamed.

Upstream is a STAND-IN for a model server that speaks Chat Completions only
(``tests/upstream_standin.py``, recorded outputs): the proxy translates each Messages request
to a chat completion, decodes the answer as the chat route does, and answers in the Messages
shape. Each test compares with what the chat route answers for the same recorded output.
"""

from __future__ import annotations

import asyncio
import json

import anthropic
import httpx
import openai
import pytest
from toolcodec.pool.proxy import messages

from tests.serve_process import ServeProcess
from tests.upstream_standin import CASES

TOOLS = [
    {"name": "get_weather", "description": "Weather for a city", "input_schema": {
        "type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
        "required": ["city"]}},
    {"name": "search_files", "input_schema": {
        "type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}},
]
CHAT_TOOLS = [{"type": "function", "function": {"name": t["name"],
                                                "parameters": t["input_schema"]}} for t in TOOLS]


@pytest.fixture(scope="module")
def proxy(upstream):
    srv = ServeProcess("--upstream", upstream.url, "--workers", "1", "--timeout-ms", "2000").start()
    yield srv
    srv.stop()


def client(proxy) -> anthropic.Anthropic:
    return anthropic.Anthropic(base_url=proxy.url, api_key="client-key", max_retries=0)


def ask(case: str) -> list[dict]:
    return [{"role": "user", "content": f"case:{case}"}]


def whole(proxy, case: str, **kwargs):
    return client(proxy).messages.create(model="m", max_tokens=512, messages=ask(case),
                                         tools=TOOLS, **kwargs)


def streamed(proxy, case: str):
    """(the stream's final message, the event types in order)."""
    kinds = []
    with client(proxy).messages.stream(model="m", max_tokens=512, messages=ask(case),
                                       tools=TOOLS) as stream:
        for event in stream:
            kinds.append(event.type)
        return stream.get_final_message(), kinds


def chat_answer(proxy, case: str) -> dict:
    answer = openai.OpenAI(base_url=proxy.url + "/v1", api_key="k", max_retries=0
                           ).chat.completions.create(model="m", messages=ask(case),
                                                     tools=CHAT_TOOLS)
    return answer.choices[0].model_dump()


def blocks(message) -> list[dict]:
    return [b.model_dump(exclude_none=True) for b in message.content]


def same_answer(streamed: list[dict], whole: list[dict]) -> bool:
    """The same calls and thinking, in order, and the same text. A stream's blocks come in the
    order written (text after a call is a block after it) and the whitespace around a call is
    sent as it comes; a whole answer's text is one block, trimmed, before the calls (a chat
    message does not say where its calls were): as on the chat route."""
    def text(found: list[dict]) -> str:
        return "".join(b["text"] for b in found if b["type"] == "text").strip()
    return text(streamed) == text(whole) and \
        unnamed(b for b in streamed if b["type"] != "text") == \
        unnamed(b for b in whole if b["type"] != "text")


def unnamed(found) -> list[dict]:
    """The blocks without their ids: each answer names its calls afresh (ids are unique per
    call, never derived from the upstream's), so only what the calls say is compared."""
    return [{k: v for k, v in b.items() if k != "id"} for b in found]


@pytest.mark.parametrize("case", ["hermes_broken", "qwen_xml", "two_calls", "native_broken",
                                  "prose", "unknown_tool", "reasoning_field"])
def test_tool_use_blocks_whole_and_streamed_are_what_the_chat_route_decodes(proxy,
                                                                             case) -> None:
    chat = chat_answer(proxy, case)
    message = whole(proxy, case)
    want_calls = [{"type": "tool_use", "name": c["function"]["name"],
                   "input": json.loads(c["function"]["arguments"])}
                  for c in chat["message"]["tool_calls"] or []]
    got = blocks(message)
    uses = [b for b in got if b["type"] == "tool_use"]
    assert unnamed(uses) == want_calls
    assert len({b["id"] for b in uses}) == len(uses)  # each call its own id
    assert "".join(b["text"] for b in got if b["type"] == "text") == \
        (chat["message"]["content"] or "")
    thinking = [b["thinking"] for b in got if b["type"] == "thinking"]
    assert thinking == ([chat["message"]["reasoning_content"]]
                        if chat["message"].get("reasoning_content") else [])
    assert message.stop_reason == ("tool_use" if want_calls else "end_turn")
    final, kinds = streamed(proxy, case)
    assert same_answer(blocks(final), got)  # stream ≡ whole
    assert final.stop_reason == message.stop_reason
    assert kinds[0] == "message_start" and kinds[-1] == "message_stop"
    assert "message_delta" in kinds


def test_a_broken_hermes_call_becomes_a_tool_use_block_with_an_input_object(proxy,
                                                                            upstream) -> None:
    message = whole(proxy, "hermes_broken", system="Be brief.",
                    tool_choice={"type": "any"})
    assert message.type == "message" and message.role == "assistant"
    text, call = message.content
    assert text.type == "text" and text.text == "Let me check."
    assert call.type == "tool_use" and call.name == "get_weather"
    assert call.input == {"city": "Paris", "days": 3}
    assert message.stop_reason == "tool_use"
    assert message.usage.input_tokens == 10 and message.usage.output_tokens == 20
    sent = httpx.get(upstream.url + "/_last").json()  # upstream saw a chat completion
    body = sent["body"]
    assert body["messages"][0] == {"role": "system", "content": "Be brief."}
    assert body["tools"] == [{"type": "function", "function": {
        "name": "get_weather", "description": "Weather for a city",
        "parameters": TOOLS[0]["input_schema"]}}, CHAT_TOOLS[1]]
    assert body["tool_choice"] == "required" and body["max_tokens"] == 512
    assert sent["authorization"] == "Bearer client-key"  # the x-api-key, as a bearer key


def test_streamed_events_carry_text_and_input_json_deltas(proxy) -> None:
    with httpx.stream("POST", proxy.url + "/v1/messages", json={
            "model": "m", "max_tokens": 100, "messages": ask("hermes_broken"), "tools": TOOLS,
            "stream": True}) as response:
        body = b"".join(response.iter_bytes()).decode()
    events = [(e.split("\n")[0].removeprefix("event: "),
               json.loads(e.split("\n")[1].removeprefix("data: ")))
              for e in body.strip().split("\n\n")]
    kinds = [kind for kind, _ in events]
    assert all(kind == data["type"] for kind, data in events)
    assert kinds == ["message_start", "content_block_start", *["content_block_delta"] * (
        kinds.count("content_block_delta") - 1), "content_block_stop", "content_block_start",
        "content_block_delta", "content_block_stop", "message_delta", "message_stop"]
    deltas = [d["delta"] for k, d in events if k == "content_block_delta"]
    assert "".join(d["text"] for d in deltas if d["type"] == "text_delta") == "Let me check.\n"
    (json_delta,) = [d for d in deltas if d["type"] == "input_json_delta"]
    assert json.loads(json_delta["partial_json"]) == {"city": "Paris", "days": 3}
    assert events[-2][1]["delta"]["stop_reason"] == "tool_use"


def test_a_call_cut_by_max_tokens_is_no_tool_use_and_stop_reason_is_max_tokens(proxy) -> None:
    message = whole(proxy, "cut_at_length")
    calls = [b for b in blocks(message) if b["type"] == "tool_use"]
    assert [(c["name"], c["input"]) for c in calls] == [("search_files", {"query": "cats"})]
    assert message.stop_reason == "max_tokens"
    final, _ = streamed(proxy, "cut_at_length")
    assert same_answer(blocks(final), blocks(message)) and final.stop_reason == "max_tokens"


def test_a_conversation_with_tool_results_goes_upstream_as_chat_messages(proxy,
                                                                         upstream) -> None:
    history = [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": [
            {"type": "text", "text": "Checking."},
            {"type": "tool_use", "id": "toolu_1", "name": "get_weather",
             "input": {"city": "Paris"}}]},
        {"role": "user", "content": [
            {"type": "tool_result", "tool_use_id": "toolu_1",
             "content": [{"type": "text", "text": "sunny"}]},
            {"type": "text", "text": "case:prose"}]},
    ]
    message = client(proxy).messages.create(model="m", max_tokens=64, messages=history,
                                            tools=TOOLS)
    assert message.content[0].text == CASES["prose"]["content"]
    assert message.stop_reason == "end_turn"
    sent = httpx.get(upstream.url + "/_last").json()["body"]["messages"]
    assert sent == [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": "Checking.", "tool_calls": [
            {"id": "toolu_1", "type": "function",
             "function": {"name": "get_weather", "arguments": '{"city":"Paris"}'}}]},
        {"role": "tool", "tool_call_id": "toolu_1", "content": "sunny"},
        {"role": "user", "content": "case:prose"},
    ]


def test_a_forced_tool_and_a_bad_request_are_told_in_the_messages_shape(proxy,
                                                                        upstream) -> None:
    whole(proxy, "hermes_broken", tool_choice={"type": "tool", "name": "get_weather",
                                               "disable_parallel_tool_use": True})
    body = httpx.get(upstream.url + "/_last").json()["body"]
    assert body["tool_choice"] == {"type": "function", "function": {"name": "get_weather"}}
    assert body["parallel_tool_calls"] is False
    with pytest.raises(anthropic.BadRequestError) as info:
        client(proxy).messages.create(model="m", max_tokens=10, messages=ask("prose"),
                                      tools=[{"type": "web_search_20250305",
                                              "name": "web_search"}])
    assert info.value.body["type"] == "error"
    assert info.value.body["error"]["type"] == "invalid_request_error"
    assert "server tools" in info.value.body["error"]["message"]


def test_an_upstream_error_keeps_its_status(proxy) -> None:
    with pytest.raises(anthropic.InternalServerError) as info:
        whole(proxy, "http500")
    assert info.value.status_code == 500
    assert info.value.body["error"]["message"] == "boom"


def test_a_stream_that_broke_off_ends_with_an_error_event_and_no_message_stop(proxy) -> None:
    seen = []
    with pytest.raises(anthropic.APIStatusError) as info:
        with client(proxy).messages.stream(model="m", max_tokens=512,
                                           messages=ask("cut:hermes_broken"),
                                           tools=TOOLS) as stream:
            for event in stream:
                seen.append(event)
    assert "upstream_stream_broken" in str(info.value)
    assert seen and seen[0].type == "message_start"
    assert "message_stop" not in [e.type for e in seen]
    assert not [e for e in seen if e.type == "content_block_start"
                and e.content_block.type == "tool_use"]  # the cut block is no call


def test_a_native_call_without_an_input_object_is_listed_not_made_a_tool_use() -> None:
    chat = {"id": "c1", "choices": [{"index": 0, "finish_reason": "tool_calls", "message": {
        "role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function",
             "function": {"name": "get_weather", "arguments": '{"city": "Oslo"'}}]}}]}
    out, headers = messages.answer(chat, {"model": "m"})
    assert out["content"] == [] and out["stop_reason"] == "end_turn"
    assert out["toolcodec"]["unsent_calls"] == [
        {"id": "call_1", "name": "get_weather", "arguments": '{"city": "Oslo"'}]
    assert headers == {"x-toolcodec-unsent-calls": "1"}


# -- capacity, not silence ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def starved(upstream):
    """A proxy whose decode budget (1 ms) no multi-megabyte job can meet."""
    srv = ServeProcess("--upstream", upstream.url, "--workers", "1", "--timeout-ms", "1").start()
    yield srv
    srv.stop()


def test_an_answer_that_could_not_be_decoded_is_a_503_in_the_messages_shape(starved) -> None:
    with pytest.raises(anthropic.APIStatusError) as info:
        whole(starved, "bigcall:3000000")
    response = info.value.response
    assert response.status_code == 503 and response.headers["retry-after"] == "1"
    code = response.headers["x-toolcodec-undecoded"]
    body = response.json()
    assert body["type"] == "error" and body["error"]["type"] == "overloaded_error"
    assert body["error"]["code"] == code and body["toolcodec"][0]["status"] != "ok"


def test_a_streamed_block_that_could_not_be_decoded_is_named_in_message_delta(starved) -> None:
    with httpx.stream("POST", starved.url + "/v1/messages", json={
            "model": "m", "max_tokens": 100, "messages": ask("bigcall:1000000"),
            "tools": TOOLS, "stream": True}, timeout=120) as response:
        body = b"".join(response.iter_bytes()).decode()
    assert response.headers["x-toolcodec-undecoded"]
    events = [json.loads(e.split("\n")[1].removeprefix("data: "))
              for e in body.strip().split("\n\n") if not e.startswith(":")]
    delta = next(e for e in events if e["type"] == "message_delta")
    assert delta["toolcodec"]["undecoded"][0]["status"] in ("rejected", "timeout")
    assert delta["delta"]["stop_reason"] == "end_turn"
    text = "".join(e["delta"].get("text", "") for e in events
                   if e["type"] == "content_block_delta")
    assert text.startswith("<tool_call>")  # released as text: not lost, not a call
    assert not any(e["type"] == "content_block_start"
                   and e["content_block"]["type"] == "tool_use" for e in events)


def test_the_route_is_counted_under_its_own_name(proxy) -> None:
    whole(proxy, "prose")
    text = httpx.get(proxy.url + "/metrics").text
    assert 'toolcodec_http_requests_total{code="200",route="/v1/messages"}' in text


def test_streamed_usage_comes_with_message_delta() -> None:
    head = {"id": "c1", "object": "chat.completion.chunk", "created": 1, "model": "m"}
    chunks = [{**head, "choices": [{"index": 0, "delta": {"role": "assistant",
                                                          "content": "hi"}}]},
              {**head, "choices": [{"index": 0, "delta": {}, "finish_reason": "length"}],
               "usage": {"prompt_tokens": 7, "completion_tokens": 3, "total_tokens": 10}}]

    async def parts():
        for chunk in chunks:
            yield b"data: " + json.dumps(chunk).encode() + b"\n\n"
        yield b"data: [DONE]\n\n"

    async def collect():
        return b"".join([part async for part in messages.stream(parts(), {"model": "m"})])

    events = [json.loads(e.split("\n")[1].removeprefix("data: "))
              for e in asyncio.run(collect()).decode().strip().split("\n\n")]
    delta = next(e for e in events if e["type"] == "message_delta")
    assert delta["usage"] == {"input_tokens": 7, "output_tokens": 3}
    assert delta["delta"]["stop_reason"] == "max_tokens"
    assert [e["type"] for e in events][-1] == "message_stop"
