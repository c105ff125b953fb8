"""toolcodec.worker.jobs.run_job: the job -> envelope contract shared by both backends."""

from __future__ import annotations

import time

import orjson
import pytest
import toolcodec as codec
from hypothesis import given, settings
from hypothesis import strategies as st
from toolcodec.decoding.codec import codec_for
from toolcodec.results.errors import ALL_CODES
from toolcodec.worker import jobs
from toolcodec.worker.faults import FAULT_OPS
from toolcodec.worker.jobs import FAULT_ENV, run_job

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Weather for a city",
            "parameters": {
                "type": "object",
                "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
                "required": ["city"],
            },
        },
    }
]

def job(op: str, payload: object, *, deadline: float | None = None, **extra: object) -> dict:
    out = {"id": "job-1", "op": op, "payload": payload, "deadline": deadline or time.time() + 10}
    out.update(extra)
    return out


def assert_envelope(env: dict) -> None:
    assert set(env) == {"status", "op", "result", "error"}
    assert env["status"] in {"ok", "error", "timeout"}
    if env["status"] == "ok":
        assert env["error"] is None and isinstance(env["result"], dict)
    else:
        assert env["result"] is None
        assert env["error"]["code"] in ALL_CODES and env["error"]["message"]
    orjson.dumps(env)  # plain JSON data


@pytest.fixture
def faults_on(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(FAULT_ENV, "1")


def bad(op: object, payload: object, **extra: object) -> dict:
    return {"id": "a", "op": op, "payload": payload, "deadline": 1e12, **extra}


@pytest.mark.parametrize(
    ("bad_job", "field"),
    [
        ({"op": "repair", "payload": {"text": "{}"}, "deadline": 1e12}, "id"),
        (bad("repair", {"text": "{}"}, id=7), "id"),
        ({"id": "a", "payload": {"text": "{}"}, "deadline": 1e12}, "op"),
        (bad("repair", ["x"]), "payload"),
        (bad("repair", {"text": "{}"}, deadline="soon"), "deadline"),
        (bad("repair", {"text": "{}"}, deadline=True), "deadline"),
        (bad("frobnicate", {}), "op"),
        (bad("repair", {}), "payload.text"),
        (bad("repair", {"text": 3}), "payload.text"),
        (bad("decode", {"text": 3}), "payload.text"),
        (bad("decode", {"message": "x"}), "payload.message"),
        (bad("decode", {"text": "x", "tools": {}}), "payload.tools"),
        (bad("decode", {"text": "x", "tools": [{"x": 1}]}), "payload.tools"),
        (bad("decode", {"text": "x", "tools": [{"name": "f"}, {"name": "f"}]}), "payload.tools"),
        (bad("decode", {"text": "x", "options": {"heuristics": ["x"]}}), "payload.options"),
        (bad("decode", {"text": "x", "options": {"nfkc_strings": 1}}),
         "payload.options.nfkc_strings"),
        (bad("decode", {"text": "x", "options": []}), "payload.options"),
        (bad("validate", {"name": "f", "tools": TOOLS}), "payload.arguments"),
        (bad("validate", {"name": "f", "arguments": {}}), "payload.tools"),
        (bad("validate", {"arguments": {}, "tools": TOOLS}), "payload.name"),
        (bad("kindaxml", {"text": None}), "payload.text"),
    ],
)
def test_bad_job_is_bad_request_naming_the_field(bad_job: dict, field: str) -> None:
    env = run_job(bad_job)
    assert_envelope(env)
    assert env["status"] == "error"
    assert env["error"]["code"] == "bad_request"
    assert env["error"]["field"] == field
    assert field.split(".")[-1].split("[")[0] in env["error"]["message"]


def test_decode_needs_exactly_one_source() -> None:
    for payload in ({}, {"text": "a", "message": {"role": "assistant"}}):
        env = run_job(job("decode", payload))
        assert env["error"]["code"] == "bad_request"
        assert "exactly one" in env["error"]["message"]


def test_non_dict_job_is_bad_request() -> None:
    for bad in (None, [], "job", 3):
        env = run_job(bad)  # type: ignore[arg-type]
        assert_envelope(env)
        assert env["error"]["code"] == "bad_request"


def test_fault_ops_are_refused_without_the_environment_flag(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.delenv(FAULT_ENV, raising=False)
    for op in FAULT_OPS:
        env = run_job(job(op, {"seconds": 0}))
        assert env["status"] == "error"
        assert env["error"]["code"] == "bad_request"
        assert FAULT_ENV in env["error"]["message"]


def test_fault_sleep_and_spin_run_when_enabled(faults_on: None) -> None:
    start = time.perf_counter()
    env = run_job(job("_sleep", {"seconds": 0.02}))
    assert env["status"] == "ok" and env["result"]["slept"] == 0.02
    env = run_job(job("_spin", {"seconds": 0.02}))
    assert env["status"] == "ok" and env["result"]["loops"] > 0
    assert time.perf_counter() - start >= 0.04


@pytest.mark.parametrize("seconds", [-1, "1", None, True, 1e9])
def test_fault_seconds_must_be_a_sane_number(faults_on: None, seconds: object) -> None:
    env = run_job(job("_sleep", {"seconds": seconds}))
    assert env["error"]["code"] == "bad_request"
    assert env["error"]["field"] == "payload.seconds"


def test_job_past_its_deadline_is_not_run(faults_on: None) -> None:
    start = time.perf_counter()
    env = run_job(job("_sleep", {"seconds": 5}, deadline=time.time() - 0.25))
    assert time.perf_counter() - start < 4  # the 5 s sleep never ran (generous: busy machine)
    assert env["status"] == "timeout"
    assert env["error"]["code"] == "timeout"
    assert env["error"]["job_id"] == "job-1"
    assert "after its deadline" in env["error"]["message"]


def test_job_that_finished_past_its_deadline_is_a_timeout_not_an_answer(faults_on: None) -> None:
    # It started in time (0.05 s left) and slept 0.2 s: whoever reads its answer, and however
    # late, reads that it came too late.
    env = run_job(job("_sleep", {"seconds": 0.2}, deadline=time.time() + 0.05))
    assert_envelope(env)
    assert env["status"] == "timeout" and env["error"]["code"] == "timeout"
    assert env["error"]["job_id"] == "job-1" and "past its deadline" in env["error"]["message"]
    assert env["result"] is None


def test_internal_error_names_the_job() -> None:
    env = jobs.internal_error(job("decode", {}), ZeroDivisionError("division by zero"))
    assert_envelope(env)
    assert env["status"] == "error" and env["error"]["code"] == "internal_error"
    assert env["error"]["job_id"] == "job-1"
    assert "job-1" in env["error"]["message"] and "ZeroDivisionError" in env["error"]["message"]


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: (
        st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner, max_size=4)
    ),
    max_leaves=12,
)
_ops = st.sampled_from(["decode", "repair", "validate", "kindaxml", "nope"]) | st.text(max_size=8)


@settings(max_examples=200)
@given(
    op=_ops.filter(lambda o: o not in FAULT_OPS),
    payload=st.dictionaries(
        st.sampled_from(["text", "message", "tools", "options", "name", "arguments", "config"]),
        _json,
        max_size=4,
    )
    | _json,
    job_id=st.text(max_size=5) | st.integers(),
)
def test_run_job_always_answers_with_an_envelope(op: str, payload: object, job_id: object) -> None:
    env = run_job({"id": job_id, "op": op, "payload": payload, "deadline": time.time() + 5})
    assert_envelope(env)
    if not isinstance(job_id, str) or not isinstance(payload, dict):
        assert env["error"]["code"] == "bad_request"


def test_decode_matches_the_codec_called_directly() -> None:
    text = '<tool_call>{"name": "get_weather", "arguments": {"city": "Paris"}}</tool_call>'
    env = run_job(job("decode", {"text": text, "tools": TOOLS}))
    assert env["status"] == "ok"
    assert env["result"] == codec.ToolCallCodec(tools=TOOLS).decode(text).to_dict()


def test_repair_and_validate_match_the_codec() -> None:
    env = run_job(job("repair", {"text": "{'a': 1,}"}))
    assert env["result"] == codec.repair_json("{'a': 1,}").to_dict()
    args = {"city": "Oslo", "days": "3"}
    env = run_job(job("validate", {"name": "get_weather", "arguments": args, "tools": TOOLS}))
    assert env["status"] == "ok"
    assert env["result"] == codec.validate("get_weather", args, tools=TOOLS).to_dict()


def test_jobs_share_the_codecs_cache_per_canonical_tool_set() -> None:
    reordered = [{"function": dict(reversed(TOOLS[0]["function"].items())), "type": "function"}]
    text = '<tool_call>{"name": "get_weather", "arguments": {"city": "Oslo"}}</tool_call>'
    first = run_job(job("decode", {"text": text, "tools": TOOLS}))
    again = run_job(job("decode", {"text": text, "tools": reordered}))
    assert first == again and first["result"]["calls"][0]["name"] == "get_weather"
    limits = jobs._ceiling()  # a job always passes the operator's limits (or lower ones)
    assert codec_for(reordered, limits=limits) is codec_for(TOOLS, limits=limits)


def test_tool_definitions_are_checked_by_the_codec() -> None:
    bad_schema = [{"name": "f", "parameters": {"type": "object", "properties": 3}}]
    for tools in (bad_schema, [{"name": ""}], [{"name": "f"}, {"function": {"name": "f"}}]):
        env = run_job(job("validate", {"name": "f", "arguments": {}, "tools": tools}))
        assert env["status"] == "error" and env["error"]["code"] == "bad_request", tools
        assert env["error"]["field"] == "payload.tools"
        assert "tools[" in env["error"]["message"]


def test_codec_options_are_json_values_only() -> None:
    text = "<tool_call>{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}</tool_call>"
    ok = run_job(job("decode", {"text": text, "tools": TOOLS,
                                "options": {"nfkc_strings": True, "starts_in_reasoning": False}}))
    assert ok["status"] == "ok" and ok["result"]["ok"]
    for options in ({"pipeline": "os:system"}, {"heuristics": []}, {"starts_in_reasoning": "y"}):
        env = run_job(job("decode", {"text": text, "tools": TOOLS, "options": options}))
        assert env["status"] == "error" and env["error"]["code"] == "bad_request", options
        assert env["error"]["field"].startswith("payload.options")


def test_kindaxml_matches_the_parser_and_checks_its_config() -> None:
    from toolcodec import kindaxml

    text = "<note>see <b>this</note>"
    config = {"case_sensitive_tags": True}
    env = run_job(job("kindaxml", {"text": text, "config": config}))
    assert env["status"] == "ok"
    assert env["result"] == kindaxml.parse(text, **config).to_dict()
    env = run_job(job("kindaxml", {"text": text, "config": {"no_such_option": 1}}))
    assert env["error"]["code"] == "bad_request"
    assert env["error"]["field"] == "payload.config"
    assert "no_such_option" in env["error"]["message"]
    env = run_job(job("kindaxml", {"text": text, "config": {"unknown_mode": "bogus"}}))
    assert env["status"] == "error" and env["error"]["code"] == "bad_request"
    assert "unknown_mode" in env["error"]["message"]


def test_formats_option_restricts_and_unknown_ids_are_bad_requests() -> None:
    tools = [{"name": "search", "parameters": {"type": "object"}}]
    text = '[TOOL_CALLS]search{"q": "x"}'
    env = run_job(job("decode", {"text": text, "tools": tools}))
    assert [c["format"] for c in env["result"]["calls"]] == ["mistral"]
    env = run_job(job("decode", {"text": text, "tools": tools,
                                 "options": {"formats": ["hermes"]}}))
    assert env["result"]["calls"] == [] and env["result"]["content"] == text
    env = run_job(job("decode", {"text": text, "tools": tools,
                                 "options": {"formats": ["klingon"]}}))
    assert env["error"]["code"] == "bad_request"
    assert env["error"]["field"] == "payload.options.formats"
    env = run_job(job("decode", {"text": text, "tools": tools, "options": {"formats": "hermes"}}))
    assert env["error"]["code"] == "bad_request"
