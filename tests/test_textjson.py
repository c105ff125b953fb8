"""The strict JSON-in-text scanner (``codec.textjson``)."""

from __future__ import annotations

import pytest

from codec.limits import DEFAULT_LIMITS
from codec.textjson import MAX_CANDIDATES, call_pairs, find_json_calls
from codec.toolcodec import ToolCallCodec
from tests.test_decode import TOOLS, calls


def known_names(*names):
    def check(pairs):
        ok = all(n in names for n, _ in pairs)
        return ok, [n for n, _ in pairs] if ok else []
    return check


def scan(text, *names):
    return find_json_calls(text, [(0, len(text))], check=known_names(*names),
                           limits=DEFAULT_LIMITS)


@pytest.mark.parametrize("value, pairs", [
    ({"name": "f", "arguments": {"a": 1}}, [("f", {"a": 1})]),
    ({"name": "f", "parameters": {}}, [("f", {})]),
    ({"name": "f", "arguments": '{"a": 1}'}, [("f", '{"a": 1}')]),
    ({"type": "function", "function": {"name": "f", "arguments": {}}}, [("f", {})]),
    ({"tool_calls": [{"function": {"name": "f", "arguments": {}}},
                     {"name": "g", "arguments": {}}]}, [("f", {}), ("g", {})]),
    ([{"name": "f", "arguments": {}}, {"name": "g", "arguments": {}}], [("f", {}), ("g", {})]),
])
def test_call_shapes(value, pairs):
    assert call_pairs(value) == pairs


@pytest.mark.parametrize("value", [
    {"name": "f"},  # no arguments: a description, not a call
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


def test_only_regions_are_scanned():
    text = '{"name": "f", "arguments": {}} | {"name": "f", "arguments": {}}'
    hits = find_json_calls(text, [(30, len(text))], check=known_names("f"),
                           limits=DEFAULT_LIMITS)
    assert [(h.start, h.end) for h in hits] == [(33, len(text))]


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
