"""Payloads at the limits over real HTTP, on the server's default event loop (uvloop).

A job bigger than a socket buffer used to lose its worker under uvloop (``503 worker_lost`` from
about 400 KB): libuv switches a descriptor it polls to non-blocking, and the pool's blocking
frame reads and writes then stopped half-way. The limits here are the codec's ``max_chars``
and the server's ``--max-body``.
"""

from __future__ import annotations

import importlib.util

import httpx
import openai
import pytest
from toolcodec.results.limits import DEFAULT_LIMITS

from tests.serve_process import ServeProcess

TOOLS = [{"type": "function", "function": {"name": "write_file", "parameters": {
    "type": "object", "properties": {"path": {"type": "string"}, "text": {"type": "string"}},
    "required": ["path", "text"]}}}]
MAX_BODY = 8_500_000  # above the codec's max_chars, under the pool's max_payload_chars


@pytest.fixture(scope="module")
def server(upstream):
    assert importlib.util.find_spec("uvloop") is not None  # the loop this is about
    srv = ServeProcess("--upstream", upstream.url, "--workers", "1", "--timeout-ms", "30000",
                       "--max-body", str(MAX_BODY)).start()
    yield srv
    srv.stop()


def call_text(size: int) -> str:
    """A Hermes call of exactly *size* characters."""
    head, tail = '<tool_call>{"name": "write_file", "arguments": {"path": "a", "text": "', \
        '"}}</tool_call>'
    return head + "x" * (size - len(head) - len(tail)) + tail


@pytest.mark.parametrize("size", [400_000, DEFAULT_LIMITS.max_chars])
def test_decode_up_to_the_codecs_limit(server, size) -> None:
    text = call_text(size)
    response = httpx.post(server.url + "/v1/decode", json={"text": text, "tools": TOOLS},
                          timeout=120)
    assert response.status_code == 200, response.text[:300]
    (call,) = response.json()["result"]["calls"]
    assert len(call["arguments"]["text"]) == size - len(call_text(0))
    # the worker survived: the next job runs on it
    again = httpx.post(server.url + "/v1/decode", json={"text": "hi", "tools": TOOLS})
    assert again.json()["status"] == "ok"


def test_a_body_at_the_servers_limit_is_taken_and_one_byte_more_is_not(server) -> None:
    empty = len(b'{"text": "", "tools": []}')
    body = b'{"text": "' + b"y" * (MAX_BODY - empty) + b'", "tools": []}'
    assert len(body) == MAX_BODY
    response = httpx.post(server.url + "/v1/decode", content=body,
                          headers={"content-type": "application/json"}, timeout=120)
    assert response.status_code == 200 and response.json()["status"] == "ok"
    # past max_chars the codec reports it: an answer, not a lost worker
    assert response.json()["result"]["errors"][0]["code"] == "payload_too_large"
    over = body[:-1] + b' }'
    response = httpx.post(server.url + "/v1/decode", content=over,
                          headers={"content-type": "application/json"}, timeout=120)
    assert response.status_code == 413


def test_a_large_answer_through_the_proxy(server) -> None:
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="k", max_retries=0,
                           timeout=120)
    answer = client.chat.completions.create(
        model="m", messages=[{"role": "user", "content": "case:big:7000000"}], tools=TOOLS)
    assert len(answer.choices[0].message.content) == len(("word " * 1_400_000).strip())
    text = ""
    for chunk in client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": "case:big:200000"}], tools=TOOLS,
            stream=True):
        text += "".join(c.delta.content or "" for c in chunk.choices)
    assert text.strip() == ("word " * 40_000).strip()
