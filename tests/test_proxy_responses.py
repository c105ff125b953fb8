"""``POST /v1/responses``: OpenAI's Responses API through the proxy, driven by the real
``openai`` client over real HTTP, whole and streamed.

Upstream is a STAND-IN for a model server that speaks Chat Completions only
(``tests/upstream_standin.py``, recorded outputs): the proxy translates each Responses
request to a chat completion, decodes the answer as the chat route does, and answers in the
Responses shape. Each test compares with what the chat route answers for the same output.
"""

from __future__ import annotations

import json

import httpx
import openai
import pytest

from tests.serve_process import ServeProcess
from tests.upstream_standin import CASES

TOOLS = [
    {"type": "function", "name": "get_weather", "description": "Weather for a city",
     "parameters": {"type": "object", "properties": {
         "city": {"type": "string"}, "days": {"type": "integer"}}, "required": ["city"]}},
    {"type": "function", "name": "search_files", "parameters": {
        "type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}},
]
CHAT_TOOLS = [{"type": "function", "function": {"name": t["name"],
                                                "parameters": t["parameters"]}} for t in TOOLS]


@pytest.fixture(scope="module")
def proxy(upstream):
    srv = ServeProcess("--upstream", upstream.url, "--workers", "1", "--timeout-ms", "2000").start()
    yield srv
    srv.stop()


def client(proxy) -> openai.OpenAI:
    return openai.OpenAI(base_url=proxy.url + "/v1", api_key="client-key", max_retries=0)


def whole(proxy, case: str, **kwargs):
    return client(proxy).responses.create(model="m", input=f"case:{case}", tools=TOOLS,
                                          **kwargs)


def streamed(proxy, case: str):
    """(the stream's final response, the event types in order)."""
    kinds = []
    with client(proxy).responses.stream(model="m", input=f"case:{case}", tools=TOOLS) as stream:
        for event in stream:
            kinds.append(event.type)
        return stream.get_final_response(), kinds


def chat_answer(proxy, case: str) -> dict:
    answer = client(proxy).chat.completions.create(
        model="m", messages=[{"role": "user", "content": f"case:{case}"}], tools=CHAT_TOOLS)
    return answer.choices[0].model_dump()


def items(response) -> list[dict]:
    out = []
    for item in response.output:
        entry = item.model_dump(exclude_none=True)
        if entry["type"] == "message":
            entry["content"] = [{**p, "text": p["text"].strip()} for p in entry["content"]]
        out.append(entry)
    return out


def same_answer(streamed: list[dict], whole: list[dict]) -> bool:
    """The same calls and reasoning, in order, and the same text. A stream's items come in the
    order written and keep the whitespace around a call; a whole answer's text is one message
    item, trimmed, before the calls (a chat message does not say where its calls were)."""
    def text(found: list[dict]) -> str:
        return "".join(p["text"] for i in found if i["type"] == "message"
                       for p in i["content"]).strip()

    def others(found: list[dict]) -> list[dict]:
        # without ids: each answer names its items and calls afresh (unique per call)
        return [{k: v for k, v in i.items() if k not in ("id", "call_id")}
                for i in found if i["type"] != "message"]
    return text(streamed) == text(whole) and others(streamed) == others(whole)


@pytest.mark.parametrize("case", ["hermes_broken", "qwen_xml", "two_calls", "native_broken",
                                  "prose", "unknown_tool", "reasoning_field"])
def test_function_call_items_whole_and_streamed_are_what_the_chat_route_decodes(proxy,
                                                                                 case) -> None:
    chat = chat_answer(proxy, case)
    response = whole(proxy, case)
    assert response.status == "completed" and response.object == "response"
    got = items(response)
    calls = [(i["name"], json.loads(i["arguments"])) for i in got if i["type"] == "function_call"]
    assert calls == [(c["function"]["name"], json.loads(c["function"]["arguments"]))
                     for c in chat["message"]["tool_calls"] or []]
    ids = [i["call_id"] for i in got if i["type"] == "function_call"]
    assert len(set(ids)) == len(ids)  # each call its own id
    assert response.output_text.strip() == (chat["message"]["content"] or "")
    reasoning = [i["content"][0]["text"] for i in got if i["type"] == "reasoning"]
    assert reasoning == ([chat["message"]["reasoning_content"]]
                         if chat["message"].get("reasoning_content") else [])
    final, kinds = streamed(proxy, case)
    assert same_answer(items(final), got)  # stream ≡ whole
    assert final.status == "completed"
    assert kinds[:2] == ["response.created", "response.in_progress"]
    assert kinds[-1] == "response.completed"
    if calls:
        assert "response.function_call_arguments.delta" in kinds
        assert "response.function_call_arguments.done" in kinds


def test_a_broken_hermes_call_becomes_a_function_call_item(proxy, upstream) -> None:
    response = whole(proxy, "hermes_broken", instructions="Be brief.", max_output_tokens=300,
                     tool_choice={"type": "function", "name": "get_weather"})
    message, call = response.output
    assert message.type == "message" and message.content[0].text == "Let me check."
    assert call.type == "function_call" and call.name == "get_weather"
    assert json.loads(call.arguments) == {"city": "Paris", "days": 3}
    assert response.usage.input_tokens == 10 and response.usage.output_tokens == 20
    body = httpx.get(upstream.url + "/_last").json()["body"]  # a chat completion went up
    assert body["messages"] == [{"role": "system", "content": "Be brief."},
                                {"role": "user", "content": "case:hermes_broken"}]
    assert body["tools"] == [{"type": "function", "function": {
        "name": "get_weather", "description": "Weather for a city",
        "parameters": TOOLS[0]["parameters"]}}, CHAT_TOOLS[1]]
    assert body["tool_choice"] == {"type": "function", "function": {"name": "get_weather"}}
    assert body["max_tokens"] == 300


def test_length_is_incomplete_and_the_cut_call_is_no_function_call(proxy) -> None:
    response = whole(proxy, "cut_at_length")
    assert response.status == "incomplete"
    assert response.incomplete_details.reason == "max_output_tokens"
    calls = [(i.name, json.loads(i.arguments)) for i in response.output
             if i.type == "function_call"]
    assert calls == [("search_files", {"query": "cats"})]
    kinds = []
    with client(proxy).responses.create(model="m", input="case:cut_at_length", tools=TOOLS,
                                        stream=True) as stream:
        events = list(stream)
        kinds = [e.type for e in events]
    assert kinds[-1] == "response.incomplete"
    assert events[-1].response.incomplete_details.reason == "max_output_tokens"
    assert [(i.name, json.loads(i.arguments)) for i in events[-1].response.output
            if i.type == "function_call"] == calls


def test_a_conversation_with_function_call_outputs_goes_upstream_as_chat_messages(
        proxy, upstream) -> None:
    history = [
        {"role": "user", "content": "Weather in Paris?"},
        {"type": "function_call", "call_id": "call_1", "name": "get_weather",
         "arguments": '{"city": "Paris"}'},
        {"type": "function_call_output", "call_id": "call_1", "output": "sunny"},
        {"role": "user", "content": [{"type": "input_text", "text": "case:prose"}]},
    ]
    response = client(proxy).responses.create(model="m", input=history, tools=TOOLS)
    assert response.output_text == CASES["prose"]["content"]
    sent = httpx.get(upstream.url + "/_last").json()["body"]["messages"]
    assert sent == [
        {"role": "user", "content": "Weather in Paris?"},
        {"role": "assistant", "content": None, "tool_calls": [
            {"id": "call_1", "type": "function",
             "function": {"name": "get_weather", "arguments": '{"city": "Paris"}'}}]},
        {"role": "tool", "tool_call_id": "call_1", "content": "sunny"},
        {"role": "user", "content": "case:prose"},
    ]


def test_what_needs_state_or_built_in_tools_is_a_400(proxy) -> None:
    with pytest.raises(openai.BadRequestError) as info:
        client(proxy).responses.create(model="m", input="hi", tools=[{"type": "web_search"}])
    assert "only function tools" in info.value.body["message"]
    with pytest.raises(openai.BadRequestError) as info:
        client(proxy).responses.create(model="m", input="hi", previous_response_id="resp_1")
    assert "previous_response_id" in info.value.body["message"]


def test_a_stream_that_broke_off_ends_with_response_failed(proxy) -> None:
    with client(proxy).responses.create(model="m", input="case:cut:hermes_broken",
                                        tools=TOOLS, stream=True) as stream:
        events = list(stream)
    assert events[-1].type == "response.failed"
    assert events[-1].response.error.code == "upstream_stream_broken"
    assert not [e for e in events if e.type == "response.output_item.added"
                and e.item.type == "function_call"]  # the cut block is no call


# -- capacity, not silence ------------------------------------------------------------------------


@pytest.fixture(scope="module")
def starved(upstream):
    """A proxy whose decode budget (1 ms) no multi-megabyte job can meet."""
    srv = ServeProcess("--upstream", upstream.url, "--workers", "1", "--timeout-ms", "1").start()
    yield srv
    srv.stop()


def test_an_answer_that_could_not_be_decoded_is_a_503(starved) -> None:
    with pytest.raises(openai.APIStatusError) as info:
        whole(starved, "bigcall:3000000")
    response = info.value.response
    assert response.status_code == 503 and response.headers["retry-after"] == "1"
    code = response.headers["x-toolcodec-undecoded"]
    body = response.json()
    assert body["error"]["code"] == code and body["error"]["type"] == "toolcodec_unavailable"


def test_a_streamed_block_that_could_not_be_decoded_is_named_in_the_last_event(starved) -> None:
    with client(starved).responses.create(model="m", input="case:bigcall:1000000",
                                          tools=TOOLS, stream=True) as stream:
        events = list(stream)
    final = events[-1]
    assert final.type == "response.completed"
    undecoded = final.response.model_extra["toolcodec"]["undecoded"]
    assert undecoded[0]["status"] in ("rejected", "timeout")
    assert [i.type for i in final.response.output] == ["message"]  # released as text
    assert final.response.output[0].content[0].text.startswith("<tool_call>")
