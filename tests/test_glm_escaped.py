"""GLM bodies that a server escaped once more: ``\\n`` written as two characters between the
parts (``glm.escaped_layout``), and JSON values with ``\\"`` for every quote
(``schema.decode_escaped_json``, only where the schema wants an array or an object)."""

from __future__ import annotations

import random

import orjson
import pytest
from hypothesis import given
from hypothesis import strategies as st
from toolcodec.decoding.codec import ToolCallCodec
from toolcodec.formats import glm
from toolcodec.results.limits import Limits

from tests.test_stream import check, chunkings

TOOLS = [{"name": "todo_write", "parameters": {"type": "object", "properties": {
    "todos": {"type": "array"}, "note": {"type": "string"}, "meta": {"type": "object"}},
    "required": ["todos"]}}]
CODEC = ToolCallCodec(TOOLS)
SGLANG_TOOL = [{"name": "todo_write", "parameters": {"type": "object", "properties": {
    "todos": {"type": "array"}}, "required": ["todos"]}}]
BS = "\\"
Q = BS + '"'  # \" as the escaped output writes a quote
LAYOUT, DECODED = "glm.escaped_layout", "schema.decode_escaped_json"


def every_chunking(text: str) -> list[list[str]]:
    """Whole, chunks of 1, 2, 3 and 7 characters, and random cuts of 1-7."""
    fixed = [[text[i:i + n] for i in range(0, len(text), n)] for n in (2, 3, 7)]
    return chunkings(text, random.Random(len(text))) + fixed


def decoded(text: str, c: ToolCallCodec = CODEC) -> dict:
    """The batch result, after checking that every chunking streams to the same result."""
    for parts in every_chunking(text):
        check(c, text, parts)
    return c.decode(text).to_dict()


def escaped(value: object) -> str:
    """``value`` as JSON, escaped once more (the body of a JSON string holding it)."""
    return orjson.dumps(orjson.dumps(value).decode()).decode()[1:-1]


# The SGLang cases (test_array_argument_with_escaped_json, Glm4Moe and Glm47Moe), as the model
# output has them: every \n, \" and \\ below is those characters.
_PATH = f"Check file at C:{BS * 4}Users{BS * 4}test.txt"
_PRINT = f"Print {BS * 4}n to see newline"
SGLANG = [
    (f"<tool_call>todo_write{BS}n<arg_key>todos</arg_key>{BS}n<arg_value>[{{{Q}id{Q}: {Q}1{Q}, "
     f"{Q}task{Q}: {Q}Check for hard-coded issues in the backend code{Q}, {Q}status{Q}: "
     f"{Q}in_progress{Q}}}, {{{Q}id{Q}: {Q}2{Q}, {Q}task{Q}: {Q}x{Q}, {Q}status{Q}: "
     f"{Q}pending{Q}}}]</arg_value>\n</tool_call>",
     [{"id": "1", "task": "Check for hard-coded issues in the backend code",
       "status": "in_progress"}, {"id": "2", "task": "x", "status": "pending"}], True),
    (f"<tool_call>todo_write{BS}n<arg_key>todos</arg_key>{BS}n<arg_value>[{{{Q}id{Q}: {Q}1{Q}, "
     f"{Q}task{Q}: {Q}{_PATH}{Q}, {Q}status{Q}: {Q}pending{Q}}}]</arg_value></tool_call>",
     [{"id": "1", "task": "Check file at C:\\Users\\test.txt", "status": "pending"}], True),
    (f"<tool_call>todo_write{BS}n<arg_key>todos</arg_key>{BS}n<arg_value>[{{{Q}id{Q}: {Q}1{Q}, "
     f"{Q}task{Q}: {Q}{_PRINT}{Q},{Q}status{Q}: {Q}pending{Q}}}]</arg_value></tool_call>",
     [{"id": "1", "task": "Print \\n to see newline", "status": "pending"}], True),
    (f"<tool_call>todo_write<arg_key>todos</arg_key><arg_value>[{{{Q}id{Q}: {Q}1{Q}, "
     f"{Q}task{Q}: {Q}{_PATH}{Q}, {Q}status{Q}: {Q}pending{Q}}}]</arg_value></tool_call>",
     [{"id": "1", "task": "Check file at C:\\Users\\test.txt", "status": "pending"}], False),
]


@pytest.mark.parametrize(("text", "todos", "layout"), SGLANG)
def test_the_sglang_cases_decode(text, todos, layout):
    assert "\n<arg" not in text and '"' not in text.replace(Q, "")  # escaped as the peer has it
    result = decoded(text, ToolCallCodec(SGLANG_TOOL))
    assert result["ok"] and len(result["calls"]) == 1
    call = result["calls"][0]
    assert call["name"] == "todo_write" and call["arguments"] == {"todos": todos}
    assert DECODED in call["repairs"]
    assert (LAYOUT in call["repairs"]) == layout
    assert result["content"] == ""


def test_the_escaped_layout_is_recognised_as_glm():
    body = f"todo_write{BS}n<arg_key>todos</arg_key>{BS}n<arg_value>[]</arg_value>"
    assert glm.looks_like_body(body) and glm.TEXT_HEAD.match(body + "</tool_call>")
    assert glm.TEXT_HEAD.match(f"todo_write{BS}r{BS}n{BS}t<arg_key>")
    assert glm.TEXT_HEAD.match(f"get_time{BS}t</tool_call>")
    assert not glm.looks_like_body(f"todo_write{BS}x<arg_key>")
    read = glm.read(body)
    assert read.calls == [("todo_write", {"todos": "[]"})] and read.repairs == [LAYOUT]
    assert glm.read(body.replace(f"{BS}n", "\n")).repairs == []


TODOS = [{"id": "1", "task": f"Check C:{BS}Users{BS}x.txt", "status": "pending"},
         {"id": "2", "task": f"Print {BS}n and a \"quote\"", "status": "done"}]


@pytest.mark.parametrize("sep", [f"{BS}n", f"{BS}r{BS}n", f"{BS}n{BS}t", "\n", ""])
def test_an_escaped_json_value_for_an_array_is_read(sep):
    text = (f"<tool_call>todo_write{sep}<arg_key>todos</arg_key>{sep}<arg_value>"
            f"{escaped(TODOS)}</arg_value>{sep}</tool_call>")
    result = decoded(text)
    assert result["ok"] and result["calls"][0]["arguments"] == {"todos": TODOS}
    repairs = result["calls"][0]["repairs"]
    assert DECODED in repairs
    assert (LAYOUT in repairs) == (BS in sep)


def test_an_escaped_json_value_for_an_object_is_read():
    meta = {"cmd": "echo \"hi\"", "path": f"C:{BS}tmp"}
    text = (f"<tool_call>todo_write\n<arg_key>todos</arg_key>\n<arg_value>[]</arg_value>\n"
            f"<arg_key>meta</arg_key>\n<arg_value>{escaped(meta)}</arg_value>\n</tool_call>")
    result = decoded(text)
    assert result["ok"] and result["calls"][0]["arguments"] == {"todos": [], "meta": meta}
    assert result["calls"][0]["repairs"] == [DECODED]


def test_a_string_parameter_keeps_escaped_text_as_written():
    value = f"[{{{Q}a{Q}: 1}}]"  # [{\"a\": 1}]
    text = (f"<tool_call>todo_write\n<arg_key>todos</arg_key>\n<arg_value>[]</arg_value>\n"
            f"<arg_key>note</arg_key>\n<arg_value>{value}</arg_value>\n</tool_call>")
    result = decoded(text)
    assert result["calls"][0]["arguments"] == {"todos": [], "note": value}
    assert result["calls"][0]["repairs"] == []


def test_plain_glm_bodies_are_unchanged():
    text = ("<tool_call>todo_write\n<arg_key>todos</arg_key>\n<arg_value>[{\"id\": \"1\", "
            "\"task\": \"say \\\"hi\\\"\"}]</arg_value>\n<arg_key>note</arg_key>\n<arg_value>"
            "a\\nb</arg_value>\n</tool_call>")
    result = decoded(text)
    assert result["ok"] and result["calls"][0]["arguments"] == {
        "todos": [{"id": "1", "task": "say \"hi\""}], "note": "a\\nb"}
    assert result["calls"][0]["repairs"] == []


def test_a_literal_backslash_n_inside_a_key_or_value_is_text():
    text = (f"<tool_call>todo_write{BS}n<arg_key>note</arg_key><arg_value>{BS}na{BS}nb{BS}n"
            f"</arg_value><arg_key>todos</arg_key><arg_value>[]</arg_value></tool_call>")
    assert decoded(text)["calls"][0]["arguments"] == {"note": f"{BS}na{BS}nb{BS}n", "todos": []}
    read = glm.read(f"f{BS}n<arg_key>{BS}nk</arg_key><arg_value>v</arg_value>")
    assert read.calls == [("f", {f"{BS}nk": "v"})]


def test_a_json_string_argument_escaped_once_more_is_read():
    # a native JSON call whose array argument is a string holding escaped JSON
    text = orjson.dumps({"name": "todo_write", "arguments": {"todos": escaped(TODOS)}}).decode()
    result = CODEC.decode(text).to_dict()
    assert result["ok"] and result["calls"][0]["arguments"] == {"todos": TODOS}
    assert result["calls"][0]["repairs"] == [DECODED, "schema.decode_json_string"]


@pytest.mark.parametrize("value", [
    f"[{Q}a{Q}, {Q}b{Q}",  # unescaped, cut off: not strict JSON
    f"[{Q}a{Q}, 'b']",  # unescaped, not strict JSON either
    f"[{Q}a{Q}, {BS}x]",  # not a JSON string body (bad escape)
    f"[{Q}a{Q}, \"b\"]",  # a raw quote
])
def test_escaped_text_that_is_not_escaped_json_is_not_read_as_it(value):
    text = (f"<tool_call>todo_write\n<arg_key>todos</arg_key>\n<arg_value>{value}</arg_value>\n"
            "</tool_call>")
    result = CODEC.decode(text)
    assert not result.ok and [e.code for e in result.errors] == ["schema_violation"]


def test_escaped_json_of_the_wrong_kind_is_not_read():
    value = f"{{{Q}a{Q}: 1}}"  # an object, where the schema wants an array
    text = (f"<tool_call>todo_write\n<arg_key>todos</arg_key>\n<arg_value>{value}</arg_value>\n"
            "</tool_call>")
    result = decoded(text)
    assert result["calls"][0]["arguments"] == {"todos": [value]}
    assert result["calls"][0]["repairs"] == ["schema.wrap_array"]


def test_escaped_json_keeps_to_the_depth_limit():
    def text(depth: int) -> str:
        value = escaped(orjson.loads("[" * depth + '"a"' + "]" * depth))
        return (f"<tool_call>todo_write{BS}n<arg_key>todos</arg_key>{BS}n<arg_value>{value}"
                "</arg_value></tool_call>")

    c = ToolCallCodec(TOOLS, limits=Limits(max_depth=8))
    assert c.decode(text(8)).ok
    deep = c.decode(text(9))  # as the same value unescaped: refused, left a string
    assert not deep.ok and [e.code for e in deep.errors] == ["schema_violation"]


_TEXT = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=8)
_TRICKY = st.text(alphabet=st.sampled_from(['"', "\\", "\n", "\t", "/", "a", " ", "é", "<"]),
                  max_size=8)
_TODOS = st.lists(st.dictionaries(st.sampled_from(["id", "task", "x"]), _TEXT | _TRICKY),
                  max_size=3)
_META = st.dictionaries(st.text("abc", min_size=1, max_size=3), _TEXT | _TRICKY, max_size=3)
_SEPS = st.sampled_from([f"{BS}n", f"{BS}n{BS}n", f"{BS}r{BS}n", f" {BS}t"])


def _body(todos: list, meta: dict, sep: str, write=escaped) -> str:
    return (f"<tool_call>todo_write{sep}<arg_key>todos</arg_key>{sep}<arg_value>"
            f"{write(todos)}</arg_value>{sep}<arg_key>meta</arg_key>{sep}<arg_value>"
            f"{write(meta)}</arg_value>{sep}</tool_call>")


@given(_TODOS, _META, _SEPS | st.sampled_from(["\n", " ", ""]))
def test_generated_escaped_values_read_back(todos, meta, sep):
    text = _body(todos, meta, sep)
    result = CODEC.decode(text)
    assert result.ok and result.calls[0].arguments == {"todos": todos, "meta": meta}
    expected = {DECODED} if Q in text else set()  # no quote to escape: plain JSON as it is
    assert set(result.calls[0].repairs) - {LAYOUT} == expected
    assert (LAYOUT in result.calls[0].repairs) == (BS in sep)


@given(_TODOS, _META, _SEPS)
def test_an_escaped_layout_reads_as_real_newlines(todos, meta, sep):
    def plain(value):
        return orjson.dumps(value).decode()

    if "</arg_value>" in plain(todos) + plain(meta):
        return  # cannot be written in GLM at all
    escaped_layout = CODEC.decode(_body(todos, meta, sep, plain))
    real = CODEC.decode(_body(todos, meta, "\n", plain))
    assert real.ok and real.calls[0].repairs == []
    assert escaped_layout.ok and escaped_layout.calls[0].arguments == real.calls[0].arguments
    assert escaped_layout.calls[0].repairs == [LAYOUT]


@given(st.text(alphabet=st.sampled_from(list('"\\\n\t/a {}[]:,é')), max_size=40))
def test_string_parameters_are_never_changed(note):
    for value in (note, escaped(note), escaped([note]), escaped({"a": [note]})):
        text = (f"<tool_call>todo_write{BS}n<arg_key>todos</arg_key><arg_value>[]</arg_value>"
                f"<arg_key>note</arg_key><arg_value>{value}</arg_value></tool_call>")
        result = CODEC.decode(text)
        assert result.ok and result.calls[0].arguments["note"] == value
