"""validate_call and check_arguments: the whole path from raw arguments to a verdict."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from toolcodec.results.errors import CodecError
from toolcodec.results.result import RepairResult
from toolcodec.schema import validation
from toolcodec.schema.tools import ToolRegistry
from toolcodec.schema.validation import check_arguments, validate_call

WEATHER = {
    "type": "function",
    "function": {
        "name": "get_weather",
        "parameters": {
            "type": "object",
            "properties": {
                "city": {"type": "string"},
                "days": {"type": "integer", "minimum": 1},
                "units": {"enum": ["metric", "imperial"]},
                "tags": {"type": "array", "items": {"type": "string"}},
            },
            "required": ["city"],
            "additionalProperties": False,
        },
    },
}
REGISTRY = ToolRegistry.from_tools([WEATHER] + [{"name": f"tool_{i}"} for i in range(15)])
SPEC = REGISTRY.get("get_weather")


def codes(result) -> list[str]:
    return [e.code for e in result.errors]


def test_valid_call_is_ok_and_untouched():
    args = {"city": "Oslo", "days": 3}
    result = validate_call(REGISTRY, "get_weather", args)
    assert result.ok and result.arguments is args
    assert result.repairs == [] and result.errors == []


def test_unknown_tool_lists_known_names_truncated():
    result = validate_call(REGISTRY, "get_wether", {"city": "x"})
    assert not result.ok and codes(result) == ["unknown_tool"]
    message = result.errors[0].message
    assert "'get_wether'" in message and "'get_weather'" in message
    assert "and 6 more" in message  # 16 tools, 10 listed
    assert result.errors[0].details == {"tool": "get_wether"}


def test_unknown_tool_with_empty_registry():
    result = validate_call(ToolRegistry.from_tools(None), "x", {})
    assert "no tools are registered" in result.errors[0].message


def test_non_string_name_is_an_unknown_tool_not_a_crash():
    assert codes(validate_call(REGISTRY, None, {})) == ["unknown_tool"]


@pytest.mark.parametrize("empty", [None, "", "   "])
def test_missing_arguments_mean_an_empty_object(empty):
    result = validate_call(REGISTRY, "tool_0", empty)
    assert result.ok and result.arguments == {} and result.repairs == []


@pytest.mark.parametrize(("raw", "kind"), [([1], "an array"), (5, "a number"), (True, "a boolean")])
def test_non_object_arguments_are_a_schema_violation(raw, kind):
    result = validate_call(REGISTRY, "get_weather", raw)
    assert codes(result) == ["schema_violation"]
    assert kind in result.errors[0].message
    assert result.arguments == raw


def test_json_string_arguments_are_decoded():
    result = validate_call(REGISTRY, "get_weather", '{"city": "Oslo", "days": "2"}')
    assert result.ok and result.arguments == {"city": "Oslo", "days": 2}
    assert result.repairs == ["schema.decode_json_string", "schema.coerce_integer"]


def test_json_string_holding_an_array_is_a_schema_violation():
    result = validate_call(REGISTRY, "get_weather", "[1, 2]")
    assert codes(result) == ["schema_violation"]


def fake_repairer(monkeypatch, result: RepairResult) -> list[str]:
    """Make validation use a stand-in ``repair_json`` returning *result*; returns the texts seen."""
    seen: list[str] = []

    def repair_json(text, **_kwargs):
        seen.append(text)
        return result

    monkeypatch.setattr(validation, "repair_json", repair_json)
    return seen


def test_repairer_repairs_are_reported_before_the_decode(monkeypatch):
    seen = fake_repairer(
        monkeypatch, RepairResult(True, {"city": "Rome"}, ["json.trailing_comma"], [])
    )
    result = validate_call(REGISTRY, "get_weather", '{"city": "Rome",}')
    assert seen == ['{"city": "Rome",}']
    assert result.ok and result.arguments == {"city": "Rome"}
    assert result.repairs == ["json.trailing_comma", "schema.decode_json_string"]


def test_repairer_errors_are_passed_on(monkeypatch):
    error = CodecError("invalid_json", "unexpected '}' at position 3", {"position": 3})
    fake_repairer(monkeypatch, RepairResult(False, None, [], [error]))
    result = validate_call(REGISTRY, "get_weather", "{1}")
    assert not result.ok and result.errors == [error]
    assert result.arguments == "{1}"


def test_truncated_arguments_are_repaired_and_the_cut_is_named():
    result = validate_call(REGISTRY, "get_weather", '{"city": "/etc/pas')
    assert result.ok and result.arguments == {"city": "/etc/pas"}
    assert result.repairs == [
        "json.unclosed", "json.unclosed_string", "schema.decode_json_string"]
    closers_only = validate_call(REGISTRY, "get_weather", '{"city": "Oslo", "days": 2')
    assert closers_only.ok and closers_only.arguments == {"city": "Oslo", "days": 2}
    assert "json.unclosed_string" not in closers_only.repairs


def test_real_repairer_when_present():
    jsonrepair = pytest.importorskip("toolcodec.repair.jsonrepair")
    assert jsonrepair.repair_json('{"a": 1,}').ok
    result = validate_call(REGISTRY, "get_weather", "{'city': 'Oslo', 'days': '3',}")
    assert result.ok and result.arguments == {"city": "Oslo", "days": 3}
    assert result.repairs[-2:] == ["schema.decode_json_string", "schema.coerce_integer"]


def test_normalise_then_coerce_then_check():
    args = {"ci\u200fty": "Oslo\u202e", "ｄａｙｓ": "２", "units": "METRIC"}
    result = validate_call(REGISTRY, "get_weather", args)
    assert result.ok, result.errors
    assert result.arguments == {"city": "Oslo", "days": 2, "units": "metric"}
    assert result.repairs == [
        "text.bidi_removed",
        "text.nfkc",
        "schema.coerce_integer",
        "schema.coerce_enum",
    ]


def test_nfkc_strings_option_reaches_normalisation():
    off = validate_call(REGISTRY, "get_weather", {"city": "Ｏｓｌｏ"})
    on = validate_call(REGISTRY, "get_weather", {"city": "Ｏｓｌｏ"}, nfkc_strings=True)
    assert off.arguments == {"city": "Ｏｓｌｏ"} and off.repairs == []
    assert on.arguments == {"city": "Oslo"} and on.repairs == ["text.nfkc"]


def test_text_values_option_reaches_coercion():
    result = validate_call(REGISTRY, "get_weather", {"city": "Oslo", "days": "4"}, text_values=True)
    assert result.ok and result.arguments["days"] == 4 and result.repairs == []


def test_invalid_result_still_carries_the_coerced_arguments():
    result = validate_call(REGISTRY, "get_weather", {"city": "Oslo", "days": "0", "extra": 1})
    assert not result.ok
    assert result.arguments == {"city": "Oslo", "days": 0, "extra": 1}
    assert result.repairs == ["schema.coerce_integer"]
    assert [e.details["path"] for e in result.errors] == ["", "/days"]


def test_refused_boolean_is_reported_not_guessed():
    spec = ToolRegistry.from_tools(
        [{"name": "f", "parameters": {"type": "object", "properties": {"on": {"type": "boolean"}}}}]
    )
    result = validate_call(spec, "f", {"on": "yes"})
    assert not result.ok and result.arguments == {"on": "yes"}
    assert result.errors[0].to_dict() == {
        "code": "schema_violation",
        "message": "/on: 'yes' is not of type 'boolean'",
        "path": "/on",
        "tool": "f",
        "validator": "type",
        "arguments": {"on": "yes"},  # issue #27 item 7: what the model tried
    }


# --- check_arguments ------------------------------------------------------------------------


def test_check_arguments_one_error_per_problem_sorted_by_path():
    errors = check_arguments(SPEC, {"tags": ["a", 2, 3], "days": "many"})
    assert [e.code for e in errors] == ["schema_violation"] * 4
    assert [e.details["path"] for e in errors] == ["", "/days", "/tags/1", "/tags/2"]
    assert errors[1].message == "/days: 'many' is not of type 'integer'"
    assert errors[0].details["validator"] == "required"
    assert all(e.details["tool"] == "get_weather" for e in errors)


def test_check_arguments_valid_gives_no_errors():
    assert check_arguments(SPEC, {"city": "x"}) == []


def test_check_arguments_truncates_huge_values():
    errors = check_arguments(SPEC, {"city": "x", "days": "y" * 10_000})
    assert len(errors) == 1
    assert len(errors[0].message) < 200
    assert errors[0].message.endswith("is not of type 'integer'")


def test_check_arguments_caps_the_number_of_errors():
    errors = check_arguments(SPEC, {"city": "x", "tags": list(range(500))})
    assert len(errors) == 51
    assert "450 more" in errors[-1].message


def test_json_pointer_escapes_slash_and_tilde():
    spec = ToolRegistry.from_tools(
        [
            {
                "name": "f",
                "parameters": {"type": "object", "additionalProperties": {"type": "integer"}},
            }
        ]
    ).get("f")
    errors = check_arguments(spec, {"a/b~c": "x"})
    assert errors[0].details["path"] == "/a~1b~0c"


def test_deep_nesting_is_reported_not_raised():
    deep: object = "x"
    for _ in range(5000):
        deep = [deep]
    result = validate_call(REGISTRY, "tool_0", {"a": deep})
    assert not result.ok and codes(result) == ["nesting_too_deep"]


# --- property: results are always plain JSON data ------------------------------------------

json_values = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**60), 2**60)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text(max_size=10),
    lambda c: st.lists(c, max_size=3) | st.dictionaries(st.text(max_size=6), c, max_size=3),
    max_leaves=12,
)


@settings(max_examples=200)
@given(
    st.sampled_from(["get_weather", "tool_3", "nope"]),
    st.one_of(
        json_values,
        st.dictionaries(st.sampled_from(["city", "days", "units", "tags"]), json_values),
    ),
)
def test_validate_call_never_raises_and_is_json(name, args):
    result = validate_call(REGISTRY, name, args)
    data = orjson.loads(orjson.dumps(result.to_dict()))
    assert data["ok"] == (data["errors"] == [])
    assert all(
        e["code"] in {"unknown_tool", "schema_violation", "invalid_json"} for e in data["errors"]
    )
