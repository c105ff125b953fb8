"""The well-formed XML call's short way (``toolcodec.decoding.valid_xml``) reads what the
heuristic pipeline reads.

For every call it takes, the name, the arguments and the repair ids are those of
``decode_xml_call`` with the default pipeline; calls near its edges (references and bare
``&``, ``<`` in values, blank values, layout that is not ASCII, repeated, unknown or
attribute-named parameters, other spellings of the call's tag, values the schema coerces or
refuses) are generated on purpose, and the common shapes must be taken, not only declined.
Whole decodes are held to a codec that reads every XML call the long way (a pipeline given
explicitly turns the short way off).
"""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from toolcodec.decoding.codec import ToolCallCodec
from toolcodec.decoding.valid_xml import read_valid_call
from toolcodec.repair.xml_heuristics import default_pipeline
from toolcodec.repair.xmlcall import decode_xml_call
from toolcodec.results.limits import DEFAULT_LIMITS, Limits
from toolcodec.schema.tools import ToolRegistry

TOOLS = [
    {"type": "function", "function": {"name": "search_files", "parameters": {
        "type": "object",
        "properties": {"query": {"type": "string"}, "limit": {"type": "integer", "minimum": 1},
                       "exact": {"type": "boolean"}, "paths": {"type": "array",
                                                               "items": {"type": "string"}},
                       "ratio": {"type": "number"}, "x-y.z": {"type": "string"}},
        "required": ["query"], "additionalProperties": False}}},
    {"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string", "minLength": 1},
                       "unit": {"type": "string", "enum": ["c", "f"]},
                       "days": {"type": "integer"}, "meta": {"type": "object"},
                       "param": {"type": "string"}},
        "required": ["city"]}}},
    {"type": "function", "function": {"name": "now", "parameters": {"type": "object"}}},
    {"type": "function", "function": {"name": "anything", "parameters": True}},
]
REGISTRY = ToolRegistry.from_tools(TOOLS)
PIPELINE = default_pipeline()
NAMES = ["search_files", "get_weather", "now", "anything", "unknown_tool", "get_weather2"]
PARAMS = ["query", "limit", "exact", "paths", "ratio", "x-y.z", "city", "unit", "days", "meta",
          "param", "other", "parameter", "search_files"]
PIECES = ["a", "Oslo", "1", "3", "-2", "1.5", "true", "null", "c", " ", "  ", "\n", "\r", "\r\n",
          "\t", "\u00a0", "\u2003", "é", "✓", "\u202e", '"', "'", ">", "]]>", ";", "#", "&",
          "&&", " & ", "R&D", "&x", "&amp;", "&lt;", "&gt;", "&quot;", "&apos;", "&#10;",
          "&#x41;", "&#0;", "&nbsp;", "&#12345678;", "<", "a < b", "<b>", "</b>", "<br/>",
          "</parameter>", "<parameter=x>", "<![CDATA[x]]>", "<!-- c -->", "\x0b", "[1]", "{}",
          '["a"]', "</function>", "<city>"]
LAYOUT = ["", "\n", " ", "\r\n", "\t", "\n\n", "\u00a0", " x "]


def reference(part: str, fmt: str, tag: str | None,
              limits: Limits = DEFAULT_LIMITS) -> tuple | None:
    """The pipeline's reading of a call that is one, as the block reader keeps it."""
    res = decode_xml_call(part, fmt, registry=REGISTRY, pipeline=PIPELINE, tag_name=tag,
                          limits=limits)
    if res.errors or not res.name or REGISTRY.get(res.name) is None:
        return None
    return res.name, res.arguments, res.repairs


def check(part: str, fmt: str, tag: str | None = None, limits: Limits = DEFAULT_LIMITS) -> bool:
    """Whether the short way took *part*; if it did, its reading is the pipeline's."""
    short = read_valid_call(part, fmt, tag, REGISTRY, limits)
    if short is None:
        return False
    name, arguments, repairs = short
    expected = reference(part, fmt, tag, limits)
    assert expected is not None, f"the short way read {part!r}, the pipeline refused it"
    assert (name, arguments, repairs) == expected
    # the same types too (1 is not True, 1.0 is not 1 for a client)
    assert [type(v) for v in arguments.values()] == [type(v) for v in expected[1].values()]
    return True


def function_part(name: str, params: list[tuple[str, str]], lead: str = "\n",
                  between: str = "\n", tail: str = "\n") -> str:
    body = between.join(f"<parameter={p}>\n{v}\n</parameter>" for p, v in params)
    return f"{lead}<function={name}>{between}{body}{between}</function>{tail}"


def tag_part(name: str, params: list[tuple[str, str]], between: str = "") -> str:
    body = between.join(f"<{p}>{v}</{p}>" for p, v in params)
    return f"<{name}>{between}{body}{between}</{name}>"


TAKEN = [
    (function_part("search_files", [("query", "cats && dogs")]), "function", None),
    (function_part("search_files", [("query", "logs"), ("limit", "5"), ("exact", "true")]),
     "function", None),
    (function_part("search_files", [("query", "a > b; R&D &nbsp;"), ("ratio", "0.5")],
                   lead="", between="", tail=""), "function", None),
    (function_part("get_weather", [("city", "São Paulo"), ("days", "2"), ("unit", "c")],
                   between="\r\n"), "function", None),
    (function_part("now", []), "function", None),
    (function_part("get_weather", [("city", "Oslo"), ("meta", '{"k": 1}')]), "function", None),
    (tag_part("get_weather", [("city", "Oslo"), ("days", "2")]), "tool_tag", "get_weather"),
    (tag_part("get_weather", [("city", "Oslo & Bergen")], between="\n"), "tool_tag",
     "get_weather"),
    (tag_part("search_files", [("query", "x"), ("paths", '["a", "b"]')]), "tool_tag",
     "search_files"),
    (tag_part("anything", []), "tool_tag", "anything"),
    (function_part("anything", [("a", "1")]), "function", None),
]


@pytest.mark.parametrize(("part", "fmt", "tag"), TAKEN)
def test_the_common_shapes_take_the_short_way_with_the_pipelines_reading(part, fmt, tag):
    assert check(part, fmt, tag), f"not taken: {part!r}"


DECLINED = [
    # a reference the scanner decodes, a "<" in a value, CDATA
    (function_part("search_files", [("query", "a &amp; b")]), "function", None),
    (function_part("search_files", [("query", "line&#10;")]), "function", None),
    (function_part("search_files", [("query", "a < b")]), "function", None),
    (function_part("search_files", [("query", "<![CDATA[x]]>")]), "function", None),
    # other spellings, unknown or repeated parameters, text outside a parameter
    ('<function name="now"></function>', "function", None),
    ("<call=now></call>", "function", None),
    (function_part("search_files", [("query", "a"), ("query", "a")]), "function", None),
    ("<function=now>text</function>", "function", None),
    (function_part("search_files", [("query", "a")], tail="\n</function>"), "function", None),
    (tag_part("get_weather", [("city", "Oslo"), ("other", "x")]), "tool_tag", "get_weather"),
    (tag_part("get_weather", [("param", "Oslo")]), "tool_tag", "get_weather"),
    (tag_part("get_weather", [("city", "  ")]), "tool_tag", "get_weather"),
    ('<get_weather city="Oslo"></get_weather>', "tool_tag", "get_weather"),
    # a call the pipeline refuses
    (function_part("unknown_tool", [("query", "a")]), "function", None),
    (function_part("search_files", [("limit", "5")]), "function", None),
    (function_part("search_files", [("query", "a"), ("limit", "0")]), "function", None),
    (function_part("get_weather", [("city", "")]), "function", None),
]


@pytest.mark.parametrize(("part", "fmt", "tag"), DECLINED)
def test_what_it_cannot_be_sure_of_goes_to_the_pipeline(part, fmt, tag):
    assert read_valid_call(part, fmt, tag, REGISTRY, DEFAULT_LIMITS) is None


def test_limits_decline():
    part = function_part("search_files", [("query", "cats && dogs")])
    assert check(part, "function")
    assert read_valid_call(part, "function", None, REGISTRY,
                           Limits(max_chars=len(part) - 1)) is None
    assert read_valid_call(part, "function", None, REGISTRY, Limits(max_depth=1)) is None


values = st.lists(st.sampled_from(PIECES), max_size=5).map("".join)
params = st.lists(st.tuples(st.sampled_from(PARAMS), values), max_size=4)
layout = st.sampled_from(LAYOUT)


@st.composite
def function_parts(draw) -> str:
    name = draw(st.sampled_from(NAMES))
    head = draw(st.sampled_from(["<function={}>", "<function={}>", "<function = {}>",
                                 '<function="{}">', "<call={}>", '<function name="{}">',
                                 "<function={}"])).format(name)
    out = [draw(layout), head]
    for pname, value in draw(params):
        out.append(draw(layout))
        out.append(draw(st.sampled_from(["<parameter={}>", "<parameter={}>", "<parameter= {}>",
                                         '<parameter name="{}">', "<{}>"])).format(pname))
        out.append(value)
        out.append(draw(st.sampled_from(["</parameter>", "</parameter>", "</parameter >",
                                         "</ parameter>", f"</{pname}>", ""])))
    out.append(draw(layout))
    out.append(draw(st.sampled_from(["</function>", "</function>", "</call>", "</function",
                                     "", "</function></tool_call>"])))
    out.append(draw(layout))
    return "".join(out)


@st.composite
def tag_parts(draw) -> tuple[str, str]:
    tag = draw(st.sampled_from(NAMES))
    out = [draw(st.sampled_from(["<{}>", "<{}>", "<{} >", '<{} a="1">'])).format(tag)]
    for pname, value in draw(params):
        out.append(draw(layout))
        out.append(draw(st.sampled_from(["<{}>", "<{}>", "<{} >", '<{} name="q">'])).format(
            pname))
        out.append(value)
        out.append(draw(st.sampled_from(["</{}>", "</{}>", "</{} >", "", "</x>"])).format(pname))
    out.append(draw(layout))
    out.append(draw(st.sampled_from(["</{}>", "</{}>", "</{}", "", "</{}>x"])).format(tag))
    return "".join(out), tag


@settings(max_examples=1500)
@given(function_parts())
def test_whatever_it_reads_of_a_function_call_is_the_pipelines_reading(part):
    check(part, "function")


@settings(max_examples=1500)
@given(tag_parts())
def test_whatever_it_reads_of_a_tool_tag_is_the_pipelines_reading(drawn):
    part, tag = drawn
    check(part, "tool_tag", tag)


@settings(max_examples=300)
@given(st.lists(st.tuples(st.sampled_from(["search_files", "get_weather"]),
                          st.lists(st.tuples(st.sampled_from(PARAMS[:10]),
                                             st.sampled_from(["Oslo", "1", "a && b", "true",
                                                              "c", "x\ny"])), max_size=3)),
                min_size=1, max_size=3))
def test_valid_calls_are_taken_as_often_as_the_pipeline_takes_them(calls):
    """Calls of plain values that the pipeline reads: the short way reads every one."""
    for name, pairs in calls:
        unique = list(dict(pairs).items())
        part = function_part(name, unique)
        if reference(part, "function", None) is not None:
            assert check(part, "function")
        part = tag_part(name, unique)
        if reference(part, "tool_tag", name) is not None and all(
                p in REGISTRY.get(name).schema["properties"] for p, _ in unique):
            assert check(part, "tool_tag", name)


def test_a_tool_whose_schema_is_true_reads_its_tag_the_long_way():
    """``"parameters": true`` has no properties to read a tag's elements by."""
    part = tag_part("anything", [("a", "1")])
    assert read_valid_call(part, "tool_tag", "anything", REGISTRY, DEFAULT_LIMITS) is None
    assert reference(part, "tool_tag", "anything") == ("anything", {"a": "1"}, [])
    assert whole(SHORT.decode(part)) == whole(LONG.decode(part))
    assert SHORT.decode(part).calls


SHORT = ToolCallCodec(TOOLS)
LONG = ToolCallCodec(TOOLS, pipeline=default_pipeline())


def whole(result) -> dict:
    return {**result.to_dict(), "spans": [(s.kind, s.start, s.end) for s in result.spans],
            "call_spans": [c.span for c in result.calls]}


@settings(max_examples=400)
@given(st.lists(st.one_of(
    function_parts().map(lambda p: f"<tool_call>{p}</tool_call>"),
    tag_parts().map(lambda d: d[0]),
    st.sampled_from(["Sure. ", "\n", "done", "<tool_call>", "</tool_call>", " & "])),
    min_size=1, max_size=4).map("".join))
def test_a_decode_reads_as_the_long_way_reads(text):
    assert whole(SHORT.decode(text)) == whole(LONG.decode(text))
    assert whole(SHORT.decode(text, finish_reason="length")) == whole(
        LONG.decode(text, finish_reason="length"))


def test_the_stream_reads_as_the_long_way_reads():
    text = ("Searching.\n<tool_call>\n" + function_part("search_files", [("query", "a && b"),
                                                                       ("limit", "2")])
            + "</tool_call> and " + tag_part("get_weather", [("city", "Oslo")]))
    expected = whole(LONG.decode(text))
    assert expected["calls"] and len(expected["calls"]) == 2
    for size in (1, 3, 7, len(text)):
        stream = SHORT.stream()
        for i in range(0, len(text), size):
            stream.feed(text[i:i + size])
        assert whole(stream.result()) == expected
