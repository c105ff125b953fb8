"""JSON calls in prose: call shapes (``toolcodec.decoding.textjson``), how the engine finds them."""

from __future__ import annotations

from dataclasses import dataclass

import pytest
from toolcodec.decoding.codec import ToolCallCodec
from toolcodec.decoding.engine import MAX_CANDIDATES
from toolcodec.decoding.textjson import call_pairs

from tests.test_decode import TOOLS, calls


@dataclass
class Hit:
    start: int
    end: int
    calls: list[str]


def scan(text, *names):
    """The JSON calls ``decode`` takes from *text* with tools *names*, one hit per span."""
    codec = ToolCallCodec([{"name": n, "parameters": {"type": "object"}} for n in names])
    hits: list[Hit] = []
    for call in codec.decode(text).calls:
        if hits and (hits[-1].start, hits[-1].end) == call.span:
            hits[-1].calls.append(call.name)
        else:
            hits.append(Hit(*call.span, [call.name]))
    return hits


@pytest.mark.parametrize("value, pairs", [
    ({"name": "f", "arguments": {"a": 1}}, [("f", {"a": 1})]),
    ({"name": "f", "parameters": {}}, [("f", {})]),
    ({"name": "f", "arguments": '{"a": 1}'}, [("f", '{"a": 1}')]),
    ({"type": "function", "function": {"name": "f", "arguments": {}}}, [("f", {})]),
    ({"tool_calls": [{"function": {"name": "f", "arguments": {}}},
                     {"name": "g", "arguments": {}}]}, [("f", {}), ("g", {})]),
    ([{"name": "f", "arguments": {}}, {"name": "g", "arguments": {}}], [("f", {}), ("g", {})]),
    # llama.cpp's generic format
    ({"tool_call": {"name": "f", "arguments": {"a": 1}}}, [("f", {"a": 1})]),
    # no arguments written: a call only of a tool without parameters (the codec decides)
    ({"name": "f"}, [("f", None)]),
])
def test_call_shapes(value, pairs):
    assert call_pairs(value) == pairs


@pytest.mark.parametrize("value", [
    {"name": "f", "description": "x"},  # no arguments: a description, not a call
    {"name": 3, "arguments": {}},
    {"name": "f", "arguments": [1]},
    [],
    [{"name": "f", "arguments": {}}, 5],
    {"tool_calls": []},
    "f",
    {"tool_calls": [{"name": "f", "arguments": {}}], "extra": 1},
])
def test_not_call_shapes(value):
    assert call_pairs(value) is None


def test_hit_span_covers_value_and_marker():
    text = 'Intro. <|python_tag|>{"name": "f", "parameters": {}} bye'
    (hit,) = scan(text, "f")
    assert text[hit.start:hit.end] == '<|python_tag|>{"name": "f", "parameters": {}}'
    assert hit.calls == ["f"]


def test_fence_span_covers_fences():
    text = 'x\n```json\n[{"name": "f", "arguments": {}}]\n```\ny'
    (hit,) = scan(text, "f")
    assert text[hit.start:hit.end] == '```json\n[{"name": "f", "arguments": {}}]\n```'


def test_several_values_in_order():
    text = '{"name": "f", "arguments": {}};{"name": "g", "arguments": {}}'
    assert [h.calls for h in scan(text, "f", "g")] == [["f"], ["g"]]


def test_value_nested_in_other_brackets_is_not_a_call():
    assert scan('cfg = {"example": {"name": "f", "arguments": {}}}', "f") == []
    assert scan('list: [1, {"name": "f", "arguments": {}}]', "f") == []
    assert scan('{"name": "f", "parameters": {{"name": "f", "parameters": {}}', "f") == []
    # balanced prose brackets before a call do not count
    assert len(scan('See [1] and {x}. {"name": "f", "arguments": {}}', "f")) == 1


def test_unknown_and_truncated_rejected():
    assert scan('{"name": "zzz", "arguments": {}}', "f") == []
    assert scan('{"name": "f", "arguments": {"a": "cut', "f") == []


def test_json_in_reasoning_is_not_scanned():
    text = '<think>{"name": "f", "arguments": {}}</think> {"name": "f", "arguments": {}}'
    assert [(h.start, h.end) for h in scan(text, "f")] == [(46, len(text))]


def test_candidate_cap_bounds_work():
    # Many call-looking values that are not calls: only MAX_CANDIDATES are tried.
    junk = '{"name": "f", "arguments": [1]} ' * (MAX_CANDIDATES + 5)
    good = '{"name": "f", "arguments": {}}'
    assert scan(good + junk, "f") != []
    assert scan(junk + good, "f") == []


def test_json_path_through_codec_with_schema_coercion():
    r = ToolCallCodec(TOOLS).decode(
        'Setting it: {"name": "set_alarm", "arguments": {"hour": "7", "enabled": true}}')
    assert r.ok and r.path == "json"
    assert calls(r) == [("set_alarm", {"hour": 7, "enabled": True})]
    assert "schema.coerce_integer" in r.repairs
