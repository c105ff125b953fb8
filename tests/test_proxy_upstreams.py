"""Several upstreams: the proxy config sends some models to their own model server (and key).

Two STAND-INs for model servers (``tests/upstream_standin.py``, recorded outputs over real
HTTP): the default one (``--upstream``) and another that a config entry and a flag name.
Each request must reach the server its model is routed to, and only that one, with that
server's key; the answer is decoded with the model's options as usual.
"""

from __future__ import annotations

import json
from pathlib import Path

import anthropic
import httpx
import openai
import pytest
from toolcodec.pool.proxy.settings import ModelSettings, SettingsError, Upstream

from tests.serve_process import ServeProcess
from tests.upstream_standin import TOOLS, Standin


@pytest.fixture(scope="module")
def other():
    standin = Standin().start()
    yield standin
    standin.stop()


@pytest.fixture(scope="module")
def proxy(upstream, other, tmp_path_factory):
    config = tmp_path_factory.mktemp("cfg") / "models.toml"
    config.write_text(f'''
[models."other-*"]
upstream = "{other.url}/v1"
upstream_key_env = "OTHER_KEY"
preset = "qwen3"

[models."*"]
formats = ["hermes", "qwen_xml"]
''')
    srv = ServeProcess("--upstream", upstream.url, "--upstream-key-env", "DEFAULT_KEY",
                       "--proxy-config", str(config),
                       "--model-upstream", f"flagged={other.url}",
                       "--workers", "1", "--timeout-ms", "2000",
                       env={"OTHER_KEY": "sk-other", "DEFAULT_KEY": "sk-default"}).start()
    yield srv
    srv.stop()


def last(standin: Standin) -> dict | None:
    return httpx.get(standin.url + "/_last").json()


def ask(proxy, model: str, stream: bool = False) -> tuple[str, list]:
    chat = openai.OpenAI(base_url=proxy.url + "/v1", api_key="client", max_retries=0)
    messages = [{"role": "user", "content": "case:hermes_broken"}]
    if not stream:
        message = chat.chat.completions.create(model=model, messages=messages,
                                               tools=TOOLS).choices[0].message
        return message.content, [json.loads(c.function.arguments) for c in message.tool_calls]
    content, calls = "", []
    for chunk in chat.chat.completions.create(model=model, messages=messages, tools=TOOLS,
                                              stream=True):
        if chunk.choices:
            content += chunk.choices[0].delta.content or ""
            calls += [json.loads(t.function.arguments)
                      for t in chunk.choices[0].delta.tool_calls or []]
    return content.strip(), calls


@pytest.mark.parametrize("stream", [False, True])
@pytest.mark.parametrize("model,routed,key", [
    ("m", False, "sk-default"),  # no entry routes it: --upstream
    ("other-7b", True, "sk-other"),  # the config entry's server and key
    ("flagged", True, None),  # --model-upstream: the client's own key goes
])
def test_each_model_reaches_its_own_upstream_with_its_key(proxy, upstream, other, model,
                                                          routed, key, stream) -> None:
    httpx.post(upstream.url + "/v1/chat/completions", json={"messages": [], "model": "reset"})
    httpx.post(other.url + "/v1/chat/completions", json={"messages": [], "model": "reset"})
    content, calls = ask(proxy, model, stream)
    assert content == "Let me check." and calls == [{"city": "Paris", "days": 3}]
    hit, missed = (other, upstream) if routed else (upstream, other)
    assert last(hit)["body"]["model"] == model
    assert last(missed)["body"]["model"] == "reset"
    assert last(hit)["authorization"] == f"Bearer {key or 'client'}"


def test_the_translated_routes_are_routed_too(proxy, other) -> None:
    message = anthropic.Anthropic(base_url=proxy.url, api_key="client", max_retries=0
                                  ).messages.create(
        model="other-1", max_tokens=64, messages=[{"role": "user",
                                                   "content": "case:hermes_broken"}],
        tools=[{"name": t["function"]["name"], "input_schema": t["function"]["parameters"]}
               for t in TOOLS])
    assert [b.input for b in message.content if b.type == "tool_use"] == [
        {"city": "Paris", "days": 3}]
    sent = last(other)
    assert sent["body"]["model"] == "other-1" and sent["authorization"] == "Bearer sk-other"


def test_a_request_cannot_choose_its_upstream(proxy, upstream) -> None:
    response = httpx.post(proxy.url + "/v1/chat/completions", json={
        "model": "m", "messages": [{"role": "user", "content": "case:prose"}],
        "toolcodec": {"upstream": "http://127.0.0.1:1/v1"}})
    assert response.status_code == 400
    assert "unknown option 'upstream'" in response.json()["error"]["message"]


# -- the settings ---------------------------------------------------------------------------------


def write(tmp_path: Path, text: str) -> str:
    path = tmp_path / "models.toml"
    path.write_text(text)
    return str(path)


def test_upstreams_match_exact_names_before_patterns_and_keep_options_apart(
        tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("K", "secret")
    settings = ModelSettings.load(write(tmp_path, '''
[models."a-*"]
upstream = "http://one:8000"
[models."a-exact"]
upstream = "https://two/v1"
upstream_key_env = "K"
preset = "glm45"
[models."*"]
preset = "qwen3"
'''))
    assert settings.upstream_for("a-x") == Upstream("http://one:8000")
    assert settings.upstream_for("a-x").base == "http://one:8000/v1"
    assert settings.upstream_for("a-exact") == Upstream("https://two/v1", "secret")
    assert settings.upstream_for("b") is None and settings.upstream_for(None) is None
    # a route-only entry does not shadow the options of a later pattern
    assert settings.for_model("a-x")["formats"] == ["hermes", "qwen_xml"]
    assert settings.for_model("a-exact") == {"formats": ["glm"]}
    assert "secret" not in repr(settings.upstreams) and "secret" not in str(settings.describe())


@pytest.mark.parametrize("entry,message", [
    ('upstream = "ftp://x"', "must be an http:// or https:// URL"),
    ('upstream_key_env = "K"', "needs an upstream URL"),
    ('upstream = "http://x"\nupstream_key_env = "NOT_SET_ANYWHERE"', "is not set"),
])
def test_a_bad_upstream_entry_stops_serve_with_the_reason(tmp_path, entry, message) -> None:
    with pytest.raises(SettingsError, match=message):
        ModelSettings.load(write(tmp_path, f'[models."m"]\n{entry}\n'))


def test_the_flag_takes_precedence_over_the_file(tmp_path) -> None:
    settings = ModelSettings.build(file=write(tmp_path, '[models."m"]\nupstream = "http://f"\n'),
                                   model_upstreams=["m=http://flag"])
    assert settings.upstream_for("m") == Upstream("http://flag")
    with pytest.raises(SettingsError, match="PATTERN=VALUE"):
        ModelSettings.build(model_upstreams=["no-url"])
