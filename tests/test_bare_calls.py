"""Calls written without an opening tag: a tool's name alone on its line (or an opening tag
left open), then its parameters' tags (``xml.bare_tool_name``). Each through ``decode`` and,
for every chunking, the stream."""

from __future__ import annotations

import random

import pytest
from hypothesis import given
from hypothesis import strategies as st
from toolcodec.decoding.codec import ToolCallCodec

from tests.test_stream import check, chunkings

TOOLS = [
    {"name": "get_weather", "parameters": {"type": "object", "properties": {
        "city": {"type": "string"}, "days": {"type": "integer"}}}},
    {"name": "read_file", "parameters": {"type": "object", "properties": {
        "path": {"type": "string"}}, "required": ["path"]}},
    {"name": "write_file", "parameters": {"type": "object", "properties": {
        "path": {"type": "string"}, "read_file": {"type": "string"}}}},
]
CODEC = ToolCallCodec(TOOLS)
BARE = "xml.bare_tool_name"


def decoded(text: str) -> dict:
    result = CODEC.decode(text)
    rng = random.Random(len(text))
    for parts in chunkings(text, rng):
        check(CODEC, text, parts)
    return result.to_dict()


def calls(result: dict) -> list[tuple[str, dict]]:
    return [(c["name"], c["arguments"]) for c in result["calls"]]


@pytest.mark.parametrize("text, expected, content", [
    ("get_weather\n<city>Oslo</city>", [("get_weather", {"city": "Oslo"})], ""),
    ("get_weather:\n  <city>Oslo</city>\n  <days>2</days>", [
        ("get_weather", {"city": "Oslo", "days": 2})], ""),
    ("Let me check.\nget_weather\n<city>Oslo</city>\nDone.",
     [("get_weather", {"city": "Oslo"})], "Let me check.\n\nDone."),
    ("get_weather\n<city>Oslo</city>\n</get_weather> ok", [("get_weather", {"city": "Oslo"})],
     "ok"),
    # another tool's tag starts that tool's call ...
    ("get_weather\n<city>Oslo</city>\n<read_file><path>a</path></read_file>",
     [("get_weather", {"city": "Oslo"}), ("read_file", {"path": "a"})], ""),
    # ... unless it is also a parameter of the bare call's tool
    ("write_file\n<path>b</path>\n<read_file>a</read_file>\n</write_file>",
     [("write_file", {"path": "b", "read_file": "a"})], ""),
    ("read_file\n<path>a</path>\nwrite_file\n<path>b</path>\n</write_file>",
     [("read_file", {"path": "a"}), ("write_file", {"path": "b"})], ""),
    # an opening tag left open, closed by "/>" after the parameters
    ("<get_weather\n  <city>Oslo</city>\n  <days>2</days>\n/>",
     [("get_weather", {"city": "Oslo", "days": 2})], ""),
    # inside <tool_call>, where GLM would want <arg_key>
    ("<tool_call>read_file\n<path>a.py</path>\n</read_file>\n</tool_call>",
     [("read_file", {"path": "a.py"})], ""),
])
def test_a_bare_call_is_read_as_its_tool_tag(text, expected, content):
    result = decoded(text)
    assert result["ok"] and calls(result) == expected
    assert result["content"] == content
    assert BARE in result["calls"][0]["repairs"]
    assert all(c["format"] == "tool_tag" for c in result["calls"])


@pytest.mark.parametrize("text", [
    "get_weather\n<b>bold</b>",  # not one of the tool's parameters
    "call get_weather\n<city>Oslo</city>",  # the name is not alone on its line
    "get_weather <city>Oslo</city>",  # no line break after the name
    "unknown_tool\n<city>Oslo</city>",
    "<think>get_weather\n<city>Oslo</city></think>",  # reasoning about a call
])
def test_text_that_only_resembles_a_bare_call_stays_content(text):
    result = decoded(text)
    assert result["calls"] == [] and result["errors"] == []


def test_a_cut_bare_call_is_completed_and_said():
    result = decoded("get_weather\n<city>Oslo")
    assert calls(result) == [("get_weather", {"city": "Oslo"})]
    assert result["calls"][0]["repairs"] == ["xml.balance_tags", BARE]


def test_a_bare_call_that_breaks_its_schema_is_an_error_and_stays_content():
    text = "read_file\n<path>a</path>\n<path>b</path>"
    result = decoded(text)
    assert not result["ok"] and result["calls"] == [] and result["content"] == text


# Values whose edges are not layout (a line break next to a tag is layout, as in any XML call).
_VALUES = st.tuples(st.text("abcXY-_.1", min_size=1, max_size=4),
                    st.text("ab 7\n", max_size=4)).map(lambda t: t[0] + t[1] + t[0])


@given(st.dictionaries(st.sampled_from(["city", "days"]), _VALUES, min_size=1),
       st.sampled_from(["", ":"]), st.sampled_from(["\n", "\n  ", "\r\n"]),
       st.booleans(), st.text("ab .\n", max_size=6))
def test_generated_bare_calls_read_back(args, colon, gap, closed, after):
    body = gap.join(f"<{k}>{v}</{k}>" for k, v in args.items())
    text = f"get_weather{colon}\n{body}" + ("\n</get_weather>" if closed else "")
    text += f"\n.{after}"
    result = decoded(text)
    want = {k: (int(v) if k == "days" and v.strip().isdigit() else v) for k, v in args.items()}
    if "days" in args and not args["days"].strip().isdigit():
        assert result["calls"] == [] and not result["ok"]  # "days" must be an integer
        return
    assert calls(result) == [("get_weather", want)]
    assert result["content"] == f".{after}".strip()


@given(st.integers(min_value=0, max_value=200))
def test_truncation_at_every_position_never_raises(cut):
    text = ("Sure.\nwrite_file:\n<path>a.txt</path>\n<read_file>b</read_file>\n"
            "</write_file>\nget_weather\n<city>Oslo</city>")[:cut]
    decoded(text)
