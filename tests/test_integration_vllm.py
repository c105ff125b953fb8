"""toolcodec's vLLM tool parser inside the real ``vllm`` package (0.33, its parsers on the CPU).

vLLM lives in a virtualenv of its own, built once and cached outside the clone by
``tests/envs/vllm_env.py`` (a failed build fails these tests with pip's reason; it never
skips them). ``tests/envs/vllm_driver.py`` runs in that environment and drives the parsers
the way vLLM's chat server does: ``ToolParserManager.get_tool_parser(name)`` for a whole
answer, the composed ``Parser.parse_delta`` one token at a time for a stream. The outputs are
real ones from the conformance collection (``tests/data/conformance``), each naming its
origin, and their expected calls and content come from there too.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest
import toolcodec
from toolcodec.pool.proxy.settings import PRESETS

from tests.envs.cache import EnvBuildError
from tests.envs.vllm_env import vllm_env

HERE = Path(__file__).resolve().parent
DRIVER = HERE / "envs" / "vllm_driver.py"
CONFORMANCE = HERE / "data" / "conformance"
PLUGIN_FILE = HERE.parent / "integrations" / "vllm_plugin.py"


def conformance(family: str, case_id: str) -> dict[str, Any]:
    for line in (CONFORMANCE / f"{family}.jsonl").read_text().splitlines():
        case = json.loads(line)
        if case["id"] == case_id:
            return case
    raise LookupError(case_id)


# Real outputs, whole and well formed: Qwen3 (Hermes JSON), Qwen3-Coder (XML), DeepSeek V3.
REAL = {case["id"]: case for case in (
    conformance("qwen3_hermes", "qwen3_hermes-001"),  # rendered by the Qwen3 chat template
    conformance("qwen3_xml", "qwen3_xml-vllm-qwen_xml-0106"),  # vLLM v0.33.0's own test vector
    conformance("deepseek", "deepseek-001"),  # rendered by the DeepSeek-V3 chat template
    conformance("deepseek", "deepseek-vllm-deepseek_v31-0002"),  # vLLM v0.33.0 test vector
)}
HERMES = REAL["qwen3_hermes-001"]
# qwen3_hermes-001 as models often write it: a trailing comma after the last argument.
TRAILING_COMMA = {**HERMES, "id": "trailing-comma",
                  "text": HERMES["text"].replace('"Paris"}}', '"Paris",}}')}
# qwen3_hermes-001 cut by max_completion_tokens inside its arguments.
CUT = {**HERMES, "id": "cut", "text": HERMES["text"][:HERMES["text"].index('"Paris"') + 4],
       "max_completion_tokens": "all"}
NONE_CHOICE = {**HERMES, "id": "tool-choice-none", "tool_choice": "none"}
# Qwen3 reasoning then a call, with vLLM's qwen3 reasoning parser in front.
THOUGHT = {**conformance("qwen3_hermes", "qwen3_hermes-003"), "reasoning_parser": "qwen3"}
# Qwen3 reasoning with a call drafted inside it, then the real call; no reasoning parser.
DRAFTED = conformance("qwen3_hermes", "qwen3_hermes-010")
CASES = [*REAL.values(), TRAILING_COMMA, CUT, NONE_CHOICE, THOUGHT, DRAFTED]
PARSERS = ["toolcodec", "hermes", "toolcodec-qwen3", "toolcodec-deepseek-v3"]


def run_driver(python: Path, job: dict[str, Any], env: dict[str, str] | None = None
               ) -> dict[str, Any]:
    keys = ("id", "text", "tools", "tool_choice", "max_completion_tokens", "reasoning_parser")
    job = {**job, "cases": [{k: case[k] for k in keys if k in case} for case in job["cases"]]}
    done = subprocess.run([str(python), str(DRIVER)], input=json.dumps(job), text=True,
                          capture_output=True, env={**os.environ, **(env or {})}, cwd=HERE)
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout)


@pytest.fixture(scope="module")
def vllm_python() -> Path:
    try:
        return vllm_env().python
    except EnvBuildError as exc:
        pytest.fail(f"the vLLM environment could not be built: {exc}", pytrace=False)


@pytest.fixture(scope="module")
def answers(vllm_python: Path) -> dict[str, Any]:
    """Every parser on every case, the parsers found through vLLM's plugin entry points."""
    return run_driver(vllm_python, {"mode": "entry_point", "parsers": PARSERS, "cases": CASES})


def calls(case: dict[str, Any]) -> list[dict[str, Any]]:
    return [{"name": c["name"], "arguments": c["arguments"]} for c in case["expected"]["calls"]]


def test_the_entry_point_registers_toolcodec_and_a_parser_per_preset(answers):
    registered = set(answers["registered"])
    assert {"toolcodec", *(f"toolcodec-{p}" for p in PRESETS)} <= registered
    assert "hermes" in registered  # vLLM's own parsers are all still there


@pytest.mark.parametrize("case_id", list(REAL))
def test_a_real_output_is_decoded_whole(answers, case_id):
    case = REAL[case_id]
    whole = answers["cases"][case_id]["toolcodec"]["whole"]
    assert whole["tools_called"] is True
    assert whole["calls"] == calls(case)
    assert whole["content"] == (case["expected"]["content"] or None)


@pytest.mark.parametrize("case_id", list(REAL))
def test_a_real_output_is_decoded_streamed_token_by_token(answers, case_id):
    case = REAL[case_id]
    stream = answers["cases"][case_id]["toolcodec"]["stream"]
    assert stream["text_roundtrip"] and stream["tokens"] > 10  # really delta by delta
    assert stream["calls"] == calls(case)
    assert stream["content"].strip() == case["expected"]["content"]
    # the library answers the same for the whole text (service == library)
    assert toolcodec.decode(case["text"], tools=case["tools"]).content == stream[
        "content"].strip()


def test_a_trailing_comma_that_vllms_hermes_parser_drops_is_a_call(answers):
    got = answers["cases"]["trailing-comma"]
    assert got["hermes"]["whole"]["tools_called"] is False  # vLLM's own parser drops it
    assert got["hermes"]["whole"]["calls"] == []
    # its stream sends no call a tool could run (0.33 sends one whose arguments are not JSON)
    assert not any(isinstance(c["arguments"], dict) for c in got["hermes"]["stream"]["calls"])
    for mode in ("whole", "stream"):
        assert got["toolcodec"][mode]["calls"] == calls(HERMES), mode
    assert got["toolcodec"]["whole"]["content"] == HERMES["expected"]["content"]
    assert got["toolcodec"]["stream"]["content"].strip() == HERMES["expected"]["content"]


def test_a_call_cut_by_max_tokens_is_no_call_and_its_text_stays(answers):
    expected = toolcodec.decode(CUT["text"], tools=CUT["tools"], finish_reason="length")
    assert expected.calls == [] and '"Pa' in expected.content
    got = answers["cases"]["cut"]["toolcodec"]
    assert got["whole"]["tools_called"] is False and got["whole"]["calls"] == []
    assert got["whole"]["content"] == expected.content
    assert got["stream"]["calls"] == []
    assert got["stream"]["content"].strip() == expected.content


def test_tool_choice_none_passes_the_text_through(answers):
    got = answers["cases"]["tool-choice-none"]["toolcodec"]
    assert got["whole"]["calls"] == [] and got["whole"]["content"] == HERMES["text"]
    assert got["stream"]["calls"] == [] and got["stream"]["content"] == HERMES["text"]


def test_a_preset_parser_reads_only_its_family(answers):
    hermes = answers["cases"]["qwen3_hermes-001"]
    assert hermes["toolcodec-qwen3"]["whole"]["calls"] == calls(HERMES)
    other = hermes["toolcodec-deepseek-v3"]  # not its family: the text stays content
    assert other["whole"]["calls"] == [] and other["stream"]["calls"] == []
    assert other["whole"]["content"] == HERMES["text"]
    deepseek = answers["cases"]["deepseek-001"]["toolcodec-deepseek-v3"]
    assert deepseek["stream"]["calls"] == calls(REAL["deepseek-001"])


def test_behind_vllms_reasoning_parser_the_calls_follow_the_reasoning(answers):
    got = answers["cases"][THOUGHT["id"]]["toolcodec"]
    for mode in ("composed", "stream"):  # vLLM's Parser: its reasoning parser, then ours
        assert got[mode]["calls"] == calls(THOUGHT), mode
        assert got[mode]["reasoning"].strip() == THOUGHT["expected"]["reasoning"], mode
    assert (got["composed"]["content"] or "") == THOUGHT["expected"]["content"]


def test_without_a_reasoning_parser_a_call_drafted_in_the_reasoning_is_no_call(answers):
    got = answers["cases"][DRAFTED["id"]]["toolcodec"]
    assert got["whole"]["calls"] == got["stream"]["calls"] == calls(DRAFTED)
    # the reasoning stays: in a whole answer as written, in a stream as reasoning deltas
    thought = DRAFTED["text"][:DRAFTED["text"].index("</think>") + len("</think>")]
    assert got["whole"]["content"] == thought
    assert got["stream"]["reasoning"].strip() == DRAFTED["expected"]["reasoning"]


def test_the_plugin_file_registers_the_parsers_without_entry_points(vllm_python):
    # VLLM_PLUGINS="" lets no entry point load: without the file, no toolcodec parser...
    bare = run_driver(vllm_python, {"mode": "plugin_path", "plugin_path": "/nonexistent.py",
                                    "parsers": [], "cases": []}, env={"VLLM_PLUGINS": ""})
    assert "hermes" in bare["registered"]
    assert not [name for name in bare["registered"] if name.startswith("toolcodec")]
    # ... and with it (--tool-parser-plugin PATH), all of them.
    got = run_driver(vllm_python, {"mode": "plugin_path", "plugin_path": str(PLUGIN_FILE),
                                   "parsers": ["toolcodec"], "cases": [TRAILING_COMMA]},
                     env={"VLLM_PLUGINS": ""})
    assert "toolcodec" in got["registered"]
    assert got["cases"]["trailing-comma"]["toolcodec"]["whole"]["calls"] == calls(HERMES)
