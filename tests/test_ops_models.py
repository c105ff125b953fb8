"""Which model regressed: the proxy's series carry a bounded ``model`` and a ``format`` label.

``toolcodec serve --upstream`` in front of the upstream STAND-IN (recorded outputs over real
HTTP), with a model config of one entry; the label is that entry for its model, ``other`` for
any other model name (a client cannot grow the label set), and the access line names the
model and its preset.
"""

from __future__ import annotations

import os
import subprocess

import httpx
import toolcodec
from prometheus_client.parser import text_string_to_metric_families
from toolcodec.pool.model_labels import format_label, model_label
from toolcodec.pool.proxy.settings import ModelSettings

from tests.serve_process import REPO_ROOT, ServeProcess
from tests.test_ops_logs import lines, ready, wait_for
from tests.upstream_standin import TOOLS


def samples(url: str, name: str) -> dict[tuple, float]:
    text = httpx.get(url + "/metrics", timeout=10).text
    return {tuple(sorted(s.labels.items())): s.value
            for f in text_string_to_metric_families(text) for s in f.samples
            if s.name == name}


def test_labels_are_the_config_entry_the_default_preset_or_other() -> None:
    settings = ModelSettings.build(model_presets=["qwen3-*=qwen3", "exact=glm45"])
    assert model_label(settings, "qwen3-32b") == "qwen3-*"
    assert model_label(settings, "exact") == "exact"
    assert model_label(settings, "something-a-client-made-up") == "other"
    assert model_label(settings, None) == "other"
    assert model_label(ModelSettings.build(preset="qwen3"), "x") == "preset:qwen3"
    assert format_label({"calls": [{"format": "hermes"}]}) == "hermes"
    assert format_label({"calls": []}) == "none" and format_label(None) == "none"


def test_the_proxys_series_and_access_line_name_the_model(tmp_path, upstream) -> None:
    log = tmp_path / "serve.log"
    srv = ServeProcess("--upstream", upstream.url, "--workers", "1", "--timeout-ms", "5000",
                       "--model-preset", "tuned-*=qwen3", "--log-format", "json",
                       "--access-log")
    with log.open("wb") as out:
        proc = subprocess.Popen(srv.cmd, stdout=subprocess.DEVNULL, stderr=out, cwd=REPO_ROOT,
                                env=dict(os.environ))
    try:
        assert wait_for(lambda: ready(srv.url)), log.read_text()
        for model in ("tuned-7b", "made-up-1", "made-up-2"):
            answer = httpx.post(srv.url + "/v1/chat/completions", timeout=30, json={
                "model": model, "tools": TOOLS,
                "messages": [{"role": "user", "content": "case:hermes_broken"}]})
            assert answer.status_code == 200, answer.text
        with httpx.stream("POST", srv.url + "/v1/chat/completions", timeout=30, json={
                "model": "tuned-7b", "tools": TOOLS, "stream": True,
                "messages": [{"role": "user", "content": "case:hermes_broken"}]}) as stream:
            assert stream.status_code == 200 and list(stream.iter_lines())
        got = samples(srv.url, "toolcodec_proxy_requests_total")
        streamed = {k: v for k, v in got.items() if ("stream", "true") in k and v}
        assert [dict(k)["model"] for k in streamed] == ["tuned-*"], got
        key = (("format", "hermes"), ("model", "tuned-*"), ("outcome", "repaired"),
               ("stream", "false"))
        assert got[key] == 1.0, got
        others = {k: v for k, v in got.items() if ("model", "other") in k and v}
        assert list(others.values()) == [2.0], got  # two made-up names, one label value
        build = samples(srv.url, "toolcodec_build_info")
        assert [dict(k)["version"] for k in build] == [toolcodec.__version__]

        def access() -> list[dict]:
            return [g for g in lines(log) if g.get("event") == "access"
                    and g.get("path") == "/v1/chat/completions"]
        first = wait_for(lambda: access()[:1])
        assert first[0]["model"] == "tuned-7b" and first[0]["preset"] == "qwen3", first
    finally:
        proc.kill()
        proc.wait(30)
