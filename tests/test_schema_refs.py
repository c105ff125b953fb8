"""Schema references are checked when the codec is built; validation cost stays linear.

The first schemas below are the ones from the issue: a root ``$ref: "#"`` beside the keywords
(every check recursed until the stack ran out and came back as a misleading
``nesting_too_deep``) and a ``$ref`` to a definition that does not exist (accepted, then raised
out of ``validate``).
"""

from __future__ import annotations

import sys

import orjson
import pytest
import toolcodec as codec
from toolcodec.schema.budget import count_values
from toolcodec.schema.refs import MAX_KEYWORDS_PER_VALUE
from toolcodec.schema.tools import InvalidToolsError
from toolcodec.worker.jobs import run_job


def tool(schema: object, name: str = "f") -> list[dict]:
    return [{"type": "function", "function": {"name": name, "parameters": schema}}]


SELF_REF = {"type": "object", "properties": {"b": {"type": "boolean"}}, "required": ["b"],
            "$ref": "#"}
MISSING = {"type": "object", "properties": {"b": {"$ref": "#/$defs/missing"}}}


def rejected(schema: object) -> str:
    with pytest.raises(InvalidToolsError) as info:
        codec.ToolCallCodec(tool(schema, "lookup"))
    message = str(info.value)
    assert "'lookup'" in message  # the tool is named
    return message


def test_a_schema_that_refers_to_itself_at_the_root_is_refused() -> None:
    message = rejected(SELF_REF)
    assert "'$ref' at '/'" in message and "without descending" in message


def test_the_refusal_does_not_depend_on_the_recursion_limit() -> None:
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(100_000)
    try:
        assert "without descending" in rejected(SELF_REF)
    finally:
        sys.setrecursionlimit(old)


def test_an_unresolvable_ref_is_refused_with_its_pointer() -> None:
    message = rejected(MISSING)
    assert "'$ref' at '/properties/b'" in message and "'#/$defs/missing'" in message
    assert "does not resolve" in message


@pytest.mark.parametrize("ref", ["#/$defs/a/nothing", "#no_such_anchor",
                                 "http://example.com/elsewhere.json", "other.json#/x",
                                 "#/\ud800"])
def test_every_kind_of_dangling_ref_is_refused(ref: str) -> None:
    schema = {"type": "object", "$defs": {"a": {"type": "string"}},
              "properties": {"x": {"items": {"$ref": ref}}}}
    assert "'$ref' at '/properties/x/items'" in rejected(schema)


def test_a_ref_must_point_at_a_schema() -> None:
    schema = {"type": "object", "required": ["a"], "properties": {"a": {"$ref": "#/required"}}}
    assert "not at a schema" in rejected(schema)


def test_a_loop_through_definitions_on_the_same_value_is_refused() -> None:
    schema = {"type": "object", "$defs": {
        "a": {"allOf": [{"$ref": "#/$defs/b"}]},
        "b": {"anyOf": [{"type": "string"}, {"not": {"$ref": "#/$defs/a"}}]},
    }, "properties": {"x": {"$ref": "#/$defs/a"}}}
    message = rejected(schema)
    assert "without descending" in message and "/$defs/" in message


def test_an_anchor_loop_is_refused_and_draft_07_definitions_too() -> None:
    anchored = {"type": "object", "$defs": {"a": {"$anchor": "top", "$ref": "#top"}}}
    assert "without descending" in rejected(anchored)
    draft7 = {"$schema": "http://json-schema.org/draft-07/schema#", "type": "object",
              "definitions": {"a": {"$ref": "#/definitions/b"}, "b": {"$ref": "#/definitions/a"}}}
    assert "without descending" in rejected(draft7)


def test_shared_definitions_that_fan_out_past_the_bound_are_refused() -> None:
    defs = {f"d{i}": {"allOf": [{"$ref": f"#/$defs/d{i + 1}"}] * 2} for i in range(20)}
    defs["d20"] = {"type": "string"}
    schema = {"type": "object", "$defs": defs, "properties": {"x": {"$ref": "#/$defs/d0"}}}
    assert f"more than {MAX_KEYWORDS_PER_VALUE} keywords" in rejected(schema)


def test_the_worker_answers_bad_request_naming_the_tool_and_pointer() -> None:
    for schema, pointer in ((SELF_REF, "'/'"), (MISSING, "'/properties/b'")):
        out = run_job({"id": "j", "op": "validate", "payload": {
            "name": "lookup", "arguments": {"b": True}, "tools": tool(schema, "lookup")}})
        assert out["error"]["code"] == "bad_request", out
        assert "'lookup'" in out["error"]["message"] and pointer in out["error"]["message"]


TREE = {"type": "object", "required": ["name"], "properties": {
    "name": {"type": "string"}, "children": {"type": "array", "items": {"$ref": "#"}}}}


def nested_tree(depth: int, width: int) -> dict:
    node: dict = {"name": "leaf"}
    for level in range(depth):
        node = {"name": f"n{level}", "children": [node] + [{"name": "x"}] * width}
    return node


def test_recursion_that_descends_is_accepted_and_checked() -> None:
    c = codec.ToolCallCodec(tool(TREE))
    assert c.validate("f", nested_tree(50, 3)).ok
    bad = nested_tree(50, 3)
    del bad["children"][0]["children"][0]["name"]
    result = c.validate("f", bad)
    assert [(e.details["path"], e.details["validator"]) for e in result.errors] == [
        ("/children/0/children/0", "required")]


def test_anchors_dynamic_refs_and_the_meta_schema_resolve() -> None:
    schema = {"type": "object", "$dynamicAnchor": "node", "properties": {
        "kids": {"type": "array", "items": {"$dynamicRef": "#node"}},
        "label": {"$ref": "#label"},
        "spec": {"$ref": "https://json-schema.org/draft/2020-12/schema"}},
        "$defs": {"l": {"$anchor": "label", "type": "string"}}}
    c = codec.ToolCallCodec(tool(schema))
    assert c.validate("f", {"kids": [{"label": "a"}], "spec": {"type": "string"}}).ok
    assert not c.validate("f", {"kids": [{"label": 3}]}).ok
    assert not c.validate("f", {"spec": {"type": 12}}).ok


def test_a_subschema_id_changes_the_base_of_its_refs() -> None:
    schema = {"type": "object", "properties": {"a": {
        "$id": "https://example.com/item.json", "$defs": {"n": {"type": "integer"}},
        "properties": {"n": {"$ref": "#/$defs/n"}}}}}
    c = codec.ToolCallCodec(tool(schema))
    assert c.validate("f", {"a": {"n": 1}}).ok
    assert not c.validate("f", {"a": {"n": "one"}}).ok


# anyOf of two arrays whose items refer back: a value that fails costs 2^depth keywords.
BRANCHING = {"type": "object", "properties": {"a": {"$ref": "#/$defs/t"}}, "$defs": {"t": {
    "anyOf": [{"type": "array", "items": {"$ref": "#/$defs/t"}},
              {"type": "array", "maxItems": 5, "items": {"$ref": "#/$defs/t"}}]}}}


def test_a_branching_recursive_schema_spends_a_budget_linear_in_the_arguments() -> None:
    c = codec.ToolCallCodec(tool(BRANCHING))
    value: object = 1
    for _ in range(100):
        value = [value]
    result = c.validate("f", {"a": value})
    assert not result.ok
    assert [e.details.get("validator") for e in result.errors] == ["cost_limit"]
    orjson.dumps(result.to_dict())
    ok: object = []
    for _ in range(100):
        ok = [ok]
    assert c.validate("f", {"a": ok}).ok  # a valid value spends little: no cost_limit


def test_decode_reports_the_spent_budget_as_a_schema_violation() -> None:
    value = "[" * 60 + "1" + "]" * 60
    text = '<tool_call>{"name": "f", "arguments": {"a": ' + value + "}}</tool_call>"
    result = codec.decode(text, tools=tool(BRANCHING))
    assert [e.code for e in result.errors] == ["schema_violation"]
    assert result.errors[0].details["validator"] == "cost_limit"


def test_count_values_counts_every_container_and_scalar() -> None:
    assert count_values({"a": [1, 2, {"b": None}], "c": "x"}) == 7
    assert count_values(3) == 1
