"""toolcodec's LiteLLM callback in a real LiteLLM proxy, driven by the real ``openai`` client.

LiteLLM (``litellm[proxy]``) lives in a virtualenv of its own, built once and cached outside
the clone by ``tests/envs/litellm_env.py`` (a failed build fails these tests with pip's
reason; it never skips them). Its proxy runs as a subprocess on a free port, configured with
``callbacks: toolcodec.integrations.litellm.handler``, in front of the STAND-IN for a model
server (``tests/upstream_standin.py``, run by this interpreter): no model runs here, so the
stand-in replays recorded outputs over real HTTP and SSE. What the client must get is what
the library decodes from the same recorded output (service == library).
"""

from __future__ import annotations

import json
import os
import secrets
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest
import toolcodec

from tests.envs.cache import EnvBuildError
from tests.envs.litellm_env import litellm_env
from tests.redis_server import free_port
from tests.upstream_standin import CASES, MODEL, TOOLS

CONFIG = """\
model_list:
  - model_name: {model}
    litellm_params:
      model: openai/{model}
      api_base: {upstream}/v1
      api_key: sk-standin
litellm_settings:
  callbacks: toolcodec.integrations.litellm.handler
general_settings:
  master_key: {master_key}
"""
MASTER_KEY = "sk-" + secrets.token_hex(16)  # the proxy refuses to start without one
# Raw markup in the text, broken native calls, reasoning, two calls, prose, a cut answer.
DECODED = ["hermes_broken", "qwen_xml", "tool_tag", "two_calls", "native_broken",
           "cut_at_length", "prose"]


class LiteLLMProxy:
    """``litellm --config FILE --port P`` from the LiteLLM environment."""

    def __init__(self, env_path: Path, config: Path, log: Path) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = log
        # The cost map ships with the package: no fetch from the network at start-up.
        env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True",
               "LITELLM_TELEMETRY": "False", "PYTHONUNBUFFERED": "1"}
        with open(log, "wb") as out:
            self.proc = subprocess.Popen(
                [str(env_path / "bin" / "litellm"), "--config", str(config), "--host",
                 "127.0.0.1", "--port", str(self.port), "--num_workers", "1"],
                env=env, stdout=out, stderr=subprocess.STDOUT, cwd=config.parent)

    def wait_ready(self, timeout: float = 300.0) -> None:
        end = time.monotonic() + timeout  # a bound for a hung start, not a timing check
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                raise RuntimeError(f"the LiteLLM proxy exited ({self.proc.returncode}):\n"
                                   f"{self.log.read_text()[-4000:]}")
            try:
                if httpx.get(self.url + "/health/liveliness", timeout=2).status_code == 200:
                    return
            except httpx.HTTPError:
                pass
            time.sleep(0.2)
        raise RuntimeError(f"the LiteLLM proxy did not come up:\n{self.log.read_text()[-4000:]}")

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


@pytest.fixture(scope="module")
def litellm_path() -> Path:
    try:
        return litellm_env().path
    except EnvBuildError as exc:
        pytest.fail(f"the LiteLLM environment could not be built: {exc}", pytrace=False)


@pytest.fixture(scope="module")
def proxy(litellm_path, upstream, tmp_path_factory) -> Iterator[LiteLLMProxy]:
    folder = tmp_path_factory.mktemp("litellm")
    config = folder / "config.yaml"
    config.write_text(CONFIG.format(model=MODEL, upstream=upstream.url, master_key=MASTER_KEY))
    server = LiteLLMProxy(litellm_path, config, folder / "proxy.log")
    try:
        server.wait_ready()
        yield server
    finally:
        server.stop()


def client(proxy: LiteLLMProxy) -> openai.OpenAI:
    return openai.OpenAI(base_url=proxy.url + "/v1", api_key=MASTER_KEY, max_retries=0)


def ask(case: str) -> list[dict[str, str]]:
    return [{"role": "user", "content": f"case:{case}"}]


def library(case: str) -> dict[str, Any]:
    """What ``toolcodec.decode`` answers for the recorded output (the expectation)."""
    row = CASES[case]
    message = {"role": "assistant", "content": row.get("content")}
    for key in ("tool_calls", "reasoning_content"):
        if row.get(key):
            message[key] = row[key]
    return toolcodec.decode(message, tools=TOOLS, finish_reason=row.get("finish_reason")
                            ).to_dict()


def finish_of(case: str, expected: dict[str, Any]) -> str:
    if CASES[case].get("finish_reason") == "length":
        return "length"
    return "tool_calls" if expected["calls"] else "stop"


def streamed(proxy: LiteLLMProxy, case: str, **kwargs: Any) -> dict[str, Any]:
    content, reasoning, calls, finish, last = "", "", {}, None, None
    for chunk in client(proxy).chat.completions.create(model=MODEL, messages=ask(case),
                                                       stream=True, **kwargs):
        if not chunk.choices:
            continue
        last = chunk
        delta = chunk.choices[0].delta
        content += delta.content or ""
        reasoning += (delta.model_extra or {}).get("reasoning_content") or ""
        for call in delta.tool_calls or []:
            slot = calls.setdefault(call.index, {"id": call.id, "name": "", "arguments": ""})
            slot["name"] += call.function.name or ""
            slot["arguments"] += call.function.arguments or ""
        finish = chunk.choices[0].finish_reason or finish
    return {"content": content, "reasoning": reasoning, "finish": finish, "last": last,
            "calls": [{"name": c["name"], "arguments": json.loads(c["arguments"])}
                      for _, c in sorted(calls.items())]}


@pytest.mark.parametrize("case", DECODED)
def test_a_whole_answer_comes_back_decoded(proxy, case):
    expected = library(case)
    answer = client(proxy).chat.completions.create(model=MODEL, messages=ask(case),
                                                   tools=TOOLS)
    message = answer.choices[0].message
    got = [{"name": c.function.name, "arguments": json.loads(c.function.arguments)}
           for c in message.tool_calls or []]
    assert got == [{"name": c["name"], "arguments": c["arguments"]}
                   for c in expected["calls"]]
    assert (message.content or "") == expected["content"]
    assert answer.choices[0].finish_reason == finish_of(case, expected)
    if expected["reasoning"]:
        assert message.model_extra["reasoning_content"] == expected["reasoning"]


@pytest.mark.parametrize("case", DECODED)
def test_a_streamed_answer_comes_back_decoded(proxy, case):
    expected = library(case)
    got = streamed(proxy, case, tools=TOOLS)
    assert got["calls"] == [{"name": c["name"], "arguments": c["arguments"]}
                            for c in expected["calls"]]
    assert got["content"].strip() == expected["content"]
    assert got["finish"] == finish_of(case, expected)
    if expected["reasoning"]:
        assert got["reasoning"] == expected["reasoning"]


def test_raw_markup_is_a_call_only_with_tools(proxy):
    # Without the request's tools nothing is decoded: the proxy relays the text as it came.
    answer = client(proxy).chat.completions.create(model=MODEL, messages=ask("hermes_broken"))
    assert answer.choices[0].message.tool_calls is None
    assert answer.choices[0].message.content == CASES["hermes_broken"]["content"]


def test_what_could_not_be_decoded_is_said(proxy):
    raw = client(proxy).chat.completions.with_raw_response.create(
        model=MODEL, messages=ask("unknown_tool"), tools=TOOLS)
    answer = raw.parse()
    assert answer.choices[0].message.tool_calls is None
    assert answer.choices[0].message.content == library("unknown_tool")["content"]
    assert "unknown_tool" in raw.headers["x-toolcodec-errors"].split(",")
    got = streamed(proxy, "unknown_tool", tools=TOOLS)
    assert got["calls"] == [] and got["content"].strip() == library("unknown_tool")["content"]
    assert "unknown_tool" in got["last"].model_extra["toolcodec"]["errors"]


def test_a_native_call_that_cannot_be_repaired_goes_on_as_the_model_sent_it(proxy):
    sent = CASES["native_unrepairable"]["tool_calls"][0]["function"]
    raw = client(proxy).chat.completions.with_raw_response.create(
        model=MODEL, messages=ask("native_unrepairable"), tools=TOOLS)
    (call,) = raw.parse().choices[0].message.tool_calls
    assert (call.function.name, call.function.arguments) == (sent["name"], sent["arguments"])
    assert "schema_violation" in raw.headers["x-toolcodec-errors"].split(",")
    got = streamed(proxy, "native_unrepairable", tools=TOOLS)
    assert got["calls"] == [{"name": sent["name"], "arguments": json.loads(sent["arguments"])}]
