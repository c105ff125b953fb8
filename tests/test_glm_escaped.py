"""GLM bodies that a server escaped once more: ``\\n`` written as two characters between the
parts (``glm.escaped_layout``), and JSON values with ``\\"`` for every quote
(``schema.decode_escaped_json``, only where the schema wants an array or an object)."""

from __future__ import annotations

import random

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st

from codec.toolcodec import ToolCallCodec
from tests.test_stream import check, chunkings

TOOLS = [{"name": "todo_write", "parameters": {"type": "object", "properties": {
    "todos": {"type": "array"}, "note": {"type": "string"}, "meta": {"type": "object"}},
    "required": ["todos"]}}]
CODEC = ToolCallCodec(TOOLS)
BS = "\\"


def decoded(text: str) -> dict:
    for parts in chunkings(text, random.Random(len(text))):
        check(CODEC, text, parts)
    return CODEC.decode(text).to_dict()


def escaped(value: object) -> str:
    """``value`` as JSON, escaped once more (the body of a JSON string holding it)."""
    return orjson.dumps(orjson.dumps(value).decode()).decode()[1:-1]


TODOS = [{"id": "1", "task": f"Check C:{BS}Users{BS}x.txt", "status": "pending"},
         {"id": "2", "task": f"Print {BS}n and a \"quote\"", "status": "done"}]


@pytest.mark.parametrize("sep", [f"{BS}n", "\n", ""])
def test_an_escaped_json_value_for_an_array_is_read(sep):
    text = (f"<tool_call>todo_write{sep}<arg_key>todos</arg_key>{sep}<arg_value>"
            f"{escaped(TODOS)}</arg_value>{sep}</tool_call>")
    result = decoded(text)
    assert result["ok"] and result["calls"][0]["arguments"] == {"todos": TODOS}
    repairs = result["calls"][0]["repairs"]
    assert "schema.decode_escaped_json" in repairs
    assert ("glm.escaped_layout" in repairs) == (sep == f"{BS}n")


def test_a_string_parameter_keeps_escaped_text_as_written():
    value = escaped([{"a": 1}])
    text = (f"<tool_call>todo_write\n<arg_key>todos</arg_key>\n<arg_value>[]</arg_value>\n"
            f"<arg_key>note</arg_key>\n<arg_value>{value}</arg_value>\n</tool_call>")
    result = decoded(text)
    assert result["calls"][0]["arguments"] == {"todos": [], "note": value}
    assert result["calls"][0]["repairs"] == []


def test_plain_glm_bodies_are_unchanged():
    text = ("<tool_call>todo_write\n<arg_key>todos</arg_key>\n<arg_value>[{\"id\": \"1\"}]"
            "</arg_value>\n</tool_call>")
    result = decoded(text)
    assert result["calls"][0]["arguments"] == {"todos": [{"id": "1"}]}
    assert result["calls"][0]["repairs"] == []


def test_a_literal_backslash_n_inside_a_value_is_the_value():
    text = (f"<tool_call>todo_write{BS}n<arg_key>note</arg_key><arg_value>a{BS}nb</arg_value>"
            f"<arg_key>todos</arg_key><arg_value>[]</arg_value></tool_call>")
    assert decoded(text)["calls"][0]["arguments"] == {"note": f"a{BS}nb", "todos": []}


_TEXT = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=8)


@given(st.lists(st.dictionaries(st.sampled_from(["id", "task", "x"]), _TEXT), max_size=3),
       st.dictionaries(st.text("abc", min_size=1, max_size=3), _TEXT, max_size=3),
       st.sampled_from([f"{BS}n", "\n", f"{BS}n{BS}n", " "]))
def test_generated_escaped_values_read_back(todos, meta, sep):
    def body(sep: str) -> str:
        return (f"<tool_call>todo_write{sep}<arg_key>todos</arg_key>{sep}<arg_value>"
                f"{escaped(todos)}</arg_value>{sep}<arg_key>meta</arg_key>{sep}<arg_value>"
                f"{escaped(meta)}</arg_value>{sep}</tool_call>")

    result = CODEC.decode(body(sep))
    assert result.ok and result.calls[0].arguments == {"todos": todos, "meta": meta}
    assert CODEC.decode(body("\n")).calls[0].arguments == result.calls[0].arguments
