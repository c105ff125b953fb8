"""``toolcodec demo-upstream``: the shipped STAND-IN model server (recorded outputs, no model),
run as a user runs it, and the proxy in front of it."""

from __future__ import annotations

import json
import signal
import socket
import subprocess
import sys

import httpx
import openai
import pytest
from toolcodec.pool.proxy.demo_upstream import DEFAULT, recorded_outputs

from tests.demo_process import DemoProcess
from tests.serve_process import ServeProcess

TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
    "required": ["city"]}}},
    {"type": "function", "function": {"name": "search_files", "parameters": {
        "type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}}}]
OUTPUTS = recorded_outputs()


@pytest.fixture(scope="module")
def demo():
    server = DemoProcess().start()
    yield server
    server.stop()


@pytest.fixture(scope="module")
def proxy(demo):
    srv = ServeProcess("--upstream", demo.url + "/v1", "--workers", "1",
                       "--timeout-ms", "2000").start()
    yield srv
    srv.stop()


def chat(base: str, **body) -> dict:
    response = httpx.post(base + "/v1/chat/completions", json={"model": "x", **body})
    assert response.status_code == 200, response.text
    return response.json()


def sse(base: str, **body) -> list[dict]:
    with httpx.stream("POST", base + "/v1/chat/completions",
                      json={"model": "x", "stream": True, **body}) as response:
        lines = [line for line in response.iter_lines() if line.startswith("data: ")]
    assert lines[-1] == "data: [DONE]"
    return [json.loads(line[6:]) for line in lines[:-1]]


def test_every_recording_names_its_origin() -> None:
    assert DEFAULT in OUTPUTS and len(OUTPUTS) >= 8
    for row in OUTPUTS.values():
        assert row["origin"].strip() and (row.get("content") or row.get("tool_calls"))


@pytest.mark.parametrize("name", list(OUTPUTS))
def test_a_recording_is_served_whole_and_streamed_as_recorded(demo, name) -> None:
    row = OUTPUTS[name]
    answer = chat(demo.url, messages=[{"role": "user", "content": f"case:{name}"}])
    message = answer["choices"][0]["message"]
    assert message["content"] == row.get("content")
    assert message.get("tool_calls") == row.get("tool_calls")
    finish = answer["choices"][0]["finish_reason"]
    assert finish == row.get("finish_reason", "tool_calls" if row.get("tool_calls") else "stop")
    chunks = sse(demo.url, messages=[{"role": "user", "content": f"case:{name}"}],
                 stream_options={"include_usage": True})
    deltas = [c["choices"][0]["delta"] for c in chunks if c["choices"]]
    assert "".join(d.get("content") or "" for d in deltas) == (row.get("content") or "")
    arguments = "".join(t["function"].get("arguments") or ""
                        for d in deltas for t in d.get("tool_calls") or [])
    assert arguments == "".join(c["function"]["arguments"] for c in row.get("tool_calls") or [])
    assert [c["choices"][0]["finish_reason"] for c in chunks if c["choices"]][-1] == finish
    assert chunks[-1]["usage"] == answer["usage"]


def test_the_model_name_or_the_default_chooses_when_no_case_is_named(demo) -> None:
    by_model = next(r for r in OUTPUTS.values() if r.get("model") and r["name"] != DEFAULT)
    answer = chat(demo.url, model=by_model["model"],
                  messages=[{"role": "user", "content": "hi"}])
    assert answer["choices"][0]["message"]["content"] == by_model.get("content")
    answer = chat(demo.url, messages=[{"role": "user", "content": "Weather in Paris?"}])
    assert answer["choices"][0]["message"]["content"] == OUTPUTS[DEFAULT]["content"]
    models = httpx.get(demo.url + "/v1/models").json()["data"]
    assert by_model["model"] in [m["id"] for m in models]
    assert httpx.post(demo.url + "/v1/chat/completions", json={
        "messages": [{"role": "user", "content": "case:nope"}]}).status_code == 404


def test_the_proxy_in_front_of_it_repairs_the_default_answer(proxy) -> None:
    client = openai.OpenAI(base_url=proxy.url + "/v1", api_key="k", max_retries=0)
    answer = client.chat.completions.create(
        model="Qwen/Qwen3-8B", messages=[{"role": "user", "content": "Weather in Paris?"}],
        tools=TOOLS)
    message = answer.choices[0].message
    assert message.content == "Let me check."
    assert [json.loads(c.function.arguments) for c in message.tool_calls] == [
        {"city": "Paris", "days": 3}]


def test_list_and_a_bad_default() -> None:
    cli = [sys.executable, "-m", "toolcodec.pool.cli", "demo-upstream"]
    listed = subprocess.run([*cli, "--list"], capture_output=True, text=True, check=True)
    assert [json.loads(line)["name"] for line in listed.stdout.splitlines()] == list(OUTPUTS)
    bad = subprocess.run([*cli, "--default", "nope"], capture_output=True, text=True)
    assert bad.returncode == 2 and "no recorded output 'nope'" in bad.stderr


def test_a_busy_port_is_an_error_not_a_silent_exit() -> None:
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        run = subprocess.run([sys.executable, "-m", "toolcodec.pool.cli", "demo-upstream",
                              "--port", str(busy.getsockname()[1])], capture_output=True,
                             text=True, timeout=120)
    assert run.returncode != 0 and "address already in use" in run.stderr.lower()


def test_stopped_by_sigterm_it_exits_0() -> None:
    server = DemoProcess().start()  # the README's blocks end with "kill; wait"
    server.proc.send_signal(signal.SIGTERM)
    assert server.proc.wait(60) == 0
