"""Decoder options per model: presets, config files (TOML and YAML), flags, the request's own
``"toolcodec"`` field, and the same options reaching ``POST /v1/decode`` and ``Pool.stream``."""

from __future__ import annotations

import asyncio
import json

import httpx
import openai
import pytest
from prometheus_client import CollectorRegistry
from toolcodec.decoding.codec import ToolCallCodec
from toolcodec.formats.table import format_ids
from toolcodec.pool import Pool
from toolcodec.pool.model_labels import model_label, preset_of
from toolcodec.pool.proxy.request import prepare
from toolcodec.pool.proxy.settings import PRESETS, ModelSettings, SettingsError, job_options

from tests.serve_process import ServeProcess
from tests.upstream_standin import CASES

TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}}]
THINKING = "The user wants Oslo.\n</think>\n\n<tool_call>\n" \
           '{"name": "get_weather", "arguments": {"city": "Oslo"}}\n</tool_call>'
TOML = """
[defaults]
preset = "qwen3"

[models."Qwen/Qwen3-*-Thinking-2507"]
preset = "qwen3-thinking"

[models."my-model"]
formats = ["hermes"]
starts_in_reasoning = true
limits = {max_depth = 16}
"""
YAML = """
defaults:
  preset: qwen3
models:
  Qwen/Qwen3-*-Thinking-2507:
    preset: qwen3-thinking
  my-model:
    formats: [hermes]
    starts_in_reasoning: true
    limits: {max_depth: 16}
"""


@pytest.mark.parametrize("preset", sorted(PRESETS))
def test_every_preset_names_formats_the_codec_reads(preset) -> None:
    options = PRESETS[preset]
    assert set(options["formats"]) <= set(format_ids())  # call and answer formats
    ToolCallCodec(TOOLS, **{**options, "formats": tuple(options["formats"])})


@pytest.mark.parametrize("suffix, text", [(".toml", TOML), (".yaml", YAML)])
def test_a_config_file_maps_names_and_patterns_to_options(tmp_path, suffix, text) -> None:
    path = tmp_path / f"models{suffix}"
    path.write_text(text)
    models = ModelSettings.load(str(path))
    assert models.for_model("Qwen/Qwen3-30B-A3B-Thinking-2507") == PRESETS["qwen3-thinking"]
    assert models.for_model("my-model") == {**PRESETS["qwen3"], "formats": ["hermes"],
                                            "starts_in_reasoning": True,
                                            "limits": {"max_depth": 16}}
    assert models.for_model("something-else") == PRESETS["qwen3"]
    assert models.for_model(None) == PRESETS["qwen3"]


def test_exact_names_before_patterns_and_flags_before_the_file(tmp_path) -> None:
    path = tmp_path / "m.toml"
    path.write_text('[models."deepseek-*"]\npreset = "deepseek-v3"\n'
                    '[models."deepseek-r1"]\npreset = "deepseek-r1"\n')
    models = ModelSettings.build(file=str(path), model_presets=["deepseek-*=mistral"],
                                 model_options=['deepseek-r1={"nfkc_strings": true}'])
    assert models.for_model("deepseek-r1") == {**PRESETS["deepseek-r1"], "nfkc_strings": True}
    assert models.for_model("deepseek-v3.1") == PRESETS["mistral"]


def test_a_request_override_wins_and_is_checked() -> None:
    models = ModelSettings.build(preset="deepseek-r1")
    assert models.resolve("m", {"starts_in_reasoning": False}) == {
        **PRESETS["deepseek-r1"], "starts_in_reasoning": False}
    assert models.resolve("m", {"preset": "glm45"}) == {**PRESETS["deepseek-r1"],
                                                        **PRESETS["glm45"]}
    for bad in ({"formats": ["nope"]}, {"unknown": 1}, {"starts_in_reasoning": "yes"},
                {"preset": "nope"}, {"limits": {"max_chars": 0}}, ["hermes"]):
        with pytest.raises(SettingsError):
            models.resolve("m", bad)


def test_what_is_kept_per_model_is_what_it_works_out(tmp_path) -> None:
    """``seen`` answers ``for_model``, the metric label and the preset for each name (kept
    per name, a bounded number of names), and starts over when the settings change."""
    path = tmp_path / "m.toml"
    path.write_text(TOML)
    models = ModelSettings.build(file=str(path), model_options=['exact={"nfkc_strings": true}'])
    names = ["Qwen/Qwen3-30B-A3B-Thinking-2507", "my-model", "exact", "other", None, 7]
    for _ in range(2):  # worked out, then kept
        for name in names:
            options, label, preset = models.seen(name)
            assert options == models.for_model(name)
            assert label == model_label(models, name)
            assert preset == preset_of(models, name, None)
            assert models.resolve(name) == options and models.resolve(name) is not options
    for i in range(600):  # clients may name any model: the names kept stay bounded
        assert models.seen(f"client-{i}")[1] == "preset:qwen3"
    assert len(models._seen) <= 256
    models.defaults = {"preset": "glm45"}  # changed settings are read again
    assert models.seen("other") == (PRESETS["glm45"], "preset:glm45", "glm45")
    models.models = [("other", {"preset": "mistral"})]
    assert models.seen("other") == ({**PRESETS["glm45"], **PRESETS["mistral"]}, "other",
                                    "mistral")


def test_the_override_field_never_goes_upstream_and_the_body_is_kept() -> None:
    models = ModelSettings.build(preset="qwen3")
    body = {"model": "m", "messages": [], "toolcodec": {"preset": "glm45"}}
    prepared = prepare(body, models)
    assert "toolcodec" not in prepared.upstream and "toolcodec" in body
    assert prepared.options == {**PRESETS["qwen3"], **PRESETS["glm45"]}
    plain = {"model": "m", "messages": []}
    assert prepare(plain, models).upstream == {"model": "m", "messages": []}


@pytest.mark.parametrize("text, problem", [
    ('[models."a"]\nformats = "hermes"\n', "formats must be list"),
    ('[models."a"]\npreset = "qwen4"\n', "unknown preset"),
    ("[other]\n", "'defaults' and 'models' only"),
    ("not toml [", "not TOML"),
])
def test_a_bad_config_file_is_refused_with_the_reason(tmp_path, text, problem) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(SettingsError, match=problem):
        ModelSettings.load(str(path))


def test_a_bad_config_stops_serve_with_the_reason(tmp_path) -> None:
    path = tmp_path / "bad.toml"
    path.write_text('[models."a"]\npreset = "qwen4"\n')
    with pytest.raises(RuntimeError, match="unknown preset"):
        ServeProcess("--upstream", "http://127.0.0.1:9", "--proxy-config", str(path)).start()


def test_pool_stream_takes_a_preset(tmp_path) -> None:
    async def run(pool: Pool, **options) -> dict:
        stream = pool.stream(TOOLS, id_prefix="", **options)
        for i in range(0, len(THINKING), 5):
            await stream.feed(THINKING[i:i + 5])
        await stream.close()
        return stream.result().to_dict()

    with Pool("process", workers=1, timeout_ms=5000, registry=CollectorRegistry()) as pool:
        got = asyncio.run(run(pool, preset="qwen3-thinking"))
    codec = ToolCallCodec(TOOLS, formats=("hermes", "qwen_xml"), starts_in_reasoning=True)
    assert got == codec.decode(THINKING).to_dict()
    assert got["reasoning"] == "The user wants Oslo." and got["calls"]
    assert job_options({"preset": "qwen3-thinking"}) == {
        "formats": ["hermes", "qwen_xml"], "starts_in_reasoning": True}
    with pytest.raises(SettingsError, match="unknown preset"):  # a ValueError, with the names
        job_options({"preset": "qwen4"})


# -- over HTTP ---------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def server(upstream, tmp_path_factory):
    path = tmp_path_factory.mktemp("cfg") / "models.yaml"
    path.write_text(YAML)
    srv = ServeProcess("--upstream", upstream.url, "--proxy-config", str(path),
                       "--model-preset", "r1-*=deepseek-r1", "--model-options",
                       'plain={"formats": ["hermes", "qwen_xml"]}', "--workers", "1",
                       "--timeout-ms", "5000").start()
    yield srv
    srv.stop()


def test_decode_endpoint_takes_a_model_or_a_preset(server) -> None:
    for extra in ({"model": "Qwen/Qwen3-4B-Thinking-2507"},
                  {"options": {"preset": "qwen3-thinking"}}):
        response = httpx.post(server.url + "/v1/decode", json={"text": THINKING, "tools": TOOLS,
                                                               **extra})
        assert response.json()["result"]["reasoning"] == "The user wants Oslo.", extra
    response = httpx.post(server.url + "/v1/decode", json={
        "text": THINKING, "tools": TOOLS, "options": {"preset": "nope"}})
    assert response.status_code == 400 and "unknown preset" in response.json()["error"]["message"]


def test_the_proxy_decodes_with_the_models_options(server) -> None:
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="k", max_retries=0)
    messages = [{"role": "user", "content": "case:fmt_qwen3_thinking"}]
    for stream in (False, True):
        for model, reasoning in (("Qwen/Qwen3-4B-Thinking-2507", "The user wants Oslo."),
                                 ("plain", None)):
            got = _answer(client, model, messages, stream)
            assert got["reasoning"] == reasoning, (model, stream)
            assert got["calls"] == [("get_weather", {"city": "Oslo"})]


def test_a_request_override_applies_and_never_goes_upstream(server, upstream) -> None:
    client = openai.OpenAI(base_url=server.url + "/v1", api_key="k", max_retries=0)
    messages = [{"role": "user", "content": "case:fmt_qwen3_thinking"}]
    for stream in (False, True):
        got = _answer(client, "plain", messages, stream,
                      extra_body={"toolcodec": {"starts_in_reasoning": True}})
        assert got["reasoning"] == "The user wants Oslo."
        assert "toolcodec" not in httpx.get(upstream.url + "/_last").json()["body"]
        got = _answer(client, "plain", messages, stream,
                      extra_body={"toolcodec": {"formats": ["qwen_xml"]}})
        assert got["calls"] == []  # a Hermes call with Hermes switched off stays text
    with pytest.raises(openai.BadRequestError, match="unknown option"):
        client.chat.completions.create(model="plain", messages=messages, tools=TOOLS,
                                       extra_body={"toolcodec": {"format": ["hermes"]}})


def test_a_body_without_the_override_goes_upstream_as_its_bytes(server, upstream) -> None:
    """Written as no encoder writes it (spaces, escapes, a float's digits, a key repeated):
    the model server gets those bytes, whole and streamed; with the override field the body
    is the request read and the field taken out."""
    for stream in ("false", "true"):
        raw = ('{ "model" : "plain",\n "messages": [{"role": "system", "content": '
               '"\\u00e9\\/"}, {"role": "user", "content": "case:fmt_hermes"}], '
               '"temperature": 0.70, "top_p": 1e0, '
               f'"stream": {stream}, "tools": {json.dumps(TOOLS)}, "seed": 1, "seed": 2 }}')
        response = httpx.post(server.url + "/v1/chat/completions", content=raw.encode(),
                              headers={"content-type": "application/json"})
        assert response.status_code == 200, response.text
        assert httpx.get(upstream.url + "/_last").json()["raw"] == raw
        overridden = raw[:-1] + ', "toolcodec": {"formats": ["hermes"]}}'
        response = httpx.post(server.url + "/v1/chat/completions",
                              content=overridden.encode(),
                              headers={"content-type": "application/json"})
        assert response.status_code == 200, response.text
        last = httpx.get(upstream.url + "/_last").json()
        assert last["raw"] != overridden and "toolcodec" not in last["body"]
        assert last["body"] == {k: v for k, v in json.loads(overridden).items()
                                if k != "toolcodec"}


def _answer(client, model, messages, stream, **kwargs) -> dict:
    if not stream:
        message = client.chat.completions.create(model=model, messages=messages, tools=TOOLS,
                                                 **kwargs).choices[0].message
        return {"reasoning": message.model_extra.get("reasoning_content"),
                "calls": [(t.function.name, json.loads(t.function.arguments))
                          for t in message.tool_calls or []]}
    reasoning, calls = "", []
    for chunk in client.chat.completions.create(model=model, messages=messages, tools=TOOLS,
                                                stream=True, **kwargs):
        for choice in chunk.choices:
            reasoning += (choice.delta.model_extra or {}).get("reasoning_content") or ""
            calls += [(t.function.name, json.loads(t.function.arguments))
                      for t in choice.delta.tool_calls or []]
    return {"reasoning": reasoning.strip() or None, "calls": calls}


def test_the_recorded_row_used_here_is_a_thinking_output() -> None:
    assert CASES["fmt_qwen3_thinking"]["content"] == THINKING
