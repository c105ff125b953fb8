"""Decoding one XML tool call, in each of the three formats."""

from __future__ import annotations

import orjson
import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from toolcodec.repair.heuristics import Pipeline
from toolcodec.repair.xml_heuristics import default_pipeline
from toolcodec.repair.xmlcall import _join_text, _split_scan, decode_xml_call, split_functions
from toolcodec.results.errors import (
    INVALID_XML,
    NESTING_TOO_DEEP,
    PAYLOAD_TOO_LARGE,
    SCHEMA_VIOLATION,
    UNKNOWN_TOOL,
)
from toolcodec.results.limits import Limits
from toolcodec.scanning.xmlscan import ScanOptions, scan
from toolcodec.schema.tools import ToolRegistry

PIPELINE = default_pipeline()
REGISTRY = ToolRegistry.from_tools(
    [
        {"name": "get_weather", "parameters": {"type": "object", "properties": {
            "city": {"type": "string"}, "days": {"type": "integer"}}, "required": ["city"]}},
        {"name": "write_file", "parameters": {"type": "object", "properties": {
            "path": {"type": "string"}, "content": {"type": "string"}}}},
        {"name": "shell", "parameters": {"type": "object", "properties": {
            "command": {"type": "string"}, "description": {"type": "string"},
            "tags": {"type": "array", "items": {"type": "string"}},
            "point": {"type": "array", "items": {"type": "number"}},
            "opts": {"type": "object", "properties": {"depth": {"type": "integer"}}}}}},
    ]
)


def decode(raw, fmt="function", tag=None, registry=REGISTRY, **kw):
    return decode_xml_call(raw, fmt, registry=registry, pipeline=PIPELINE, tag_name=tag, **kw)


# -- "function" ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "raw",
    [
        "<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n"
        "<parameter=days>\n3\n</parameter>\n</function>\n</tool_call>",
        "<function=get_weather><parameter=city>Paris</parameter><parameter=days>3</parameter>"
        "</function>",
        '<function name="get_weather"><parameter name="city">Paris</parameter>'
        '<parameter name=" days ">3</parameter></function>',
    ],
)
def test_function_format_variants(raw):
    r = decode(raw)
    assert (r.name, r.arguments, r.repairs, r.errors) == (
        "get_weather", {"city": "Paris", "days": 3}, [], []
    )


@pytest.mark.parametrize(
    ("body", "value"),
    [
        ("\nParis\n", "Paris"),
        ("Paris", "Paris"),
        ("\n\nParis\n\n", "\nParis\n"),  # only one newline each side is layout
        ("  \n  Paris\n    ", "  Paris"),  # the tag lines' own blanks are layout too
        ("  Paris  ", "  Paris  "),
        ("\r\nParis\r\n", "Paris"),
        ("&#10;Paris&#10;", "\nParis\n"),  # references are never trimmed
        ("<![CDATA[\nParis\n]]>", "\nParis\n"),  # nor is CDATA
        ("\n<![CDATA[a<b&c]]>\n", "a<b&c"),
        ("x &amp; y &lt;z&gt; &quot;&apos; &#60;&#x3C;", "x & y <z> \"' <<"),
        ("if a<b and c > d: <div>x</div>", "if a<b and c > d: <div>x</div>"),
    ],
)
def test_function_values_whitespace_cdata_and_references(body, value):
    r = decode(f"<function=write_file><parameter=content>{body}</parameter></function>")
    assert r.errors == [] and r.arguments == {"content": value}


def test_function_repairs_are_named():
    r = decode("<function=shell><parameter=command>a && b < c</parameter></function>")
    assert r.arguments == {"command": "a && b < c"}
    assert r.repairs == ["xml.escape_lt", "xml.escape_ampersand"]


def test_function_truncated_call_is_balanced():
    r = decode("<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</para")
    assert r.arguments == {"city": "Paris"} and r.repairs == ["xml.balance_tags"]


def test_function_unclosed_parameter_closes_at_next_parameter():
    r = decode("<function=get_weather><parameter=city>Paris<parameter=days>3</parameter>"
               "</function>")
    assert r.arguments == {"city": "Paris", "days": 3} and r.repairs == ["xml.balance_tags"]


def test_repeated_parameter_collects_for_an_array_and_refuses_two_scalars():
    r = decode(
        "<function=shell><parameter=tags>a</parameter><parameter=tags>b</parameter>"
        "<parameter=command>ls</parameter><parameter=command>pwd</parameter></function>"
    )
    assert r.arguments is None and [e.code for e in r.errors] == ["invalid_xml"]
    assert "'command' is given 2 times" in r.errors[0].message
    assert r.errors[0].details["parameter"] == "command"
    same = decode("<function=shell><parameter=tags>a</parameter><parameter=tags>b</parameter>"
                  "<parameter=command>ls</parameter><parameter=command>ls</parameter></function>")
    assert same.arguments == {"tags": ["a", "b"], "command": "ls"}
    assert same.repairs == ["xml.dedupe_tags"]


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        ("<function=get_weather>stray<parameter=city>P</parameter></function>", "text outside"),
        ("<function><parameter=city>P</parameter></function>", "no name"),
        ("<function=get_weather><parameter>P</parameter></function>", "no name"),
        ("<tool_call><function=a></function><function=b></function></tool_call>", "second"),
        ("<call></call>", "expected <function=NAME>"),
        ("<function=get_weather><parameter>not a name</parameter>x</function>", "no name"),
        ("nothing here", "text outside the call"),
        ("", "no element"),
    ],
)
def test_function_structure_errors(raw, fragment):
    r = decode(raw)
    assert r.arguments is None
    (err,) = r.errors
    assert err.code == INVALID_XML and fragment in err.message
    assert isinstance(err.details["position"], int)


def test_unparseable_reports_position_kind_and_expectation():
    raw = "<function=get_weather><parameter=city>P</parameter></wrong></function>"
    r = decode_xml_call(raw, "function", registry=REGISTRY, pipeline=Pipeline())
    (err,) = r.errors
    assert err.code == INVALID_XML and err.details["kind"] == "stray_close"
    assert err.details["position"] == raw.index("</wrong>")
    assert "</wrong> closes no open element" in err.message
    r = decode(raw)  # the default pipeline drops the close tag: it holds no data
    assert r.arguments == {"city": "P"} and "xml.stray_close_dropped" in r.repairs
    r = decode("<get_weather><city>x</get_weather", "tool_tag", "get_weather", limits=Limits())
    assert r.arguments == {"city": "x"}  # a cut-off final close tag is completed


def test_expected_close_tag_is_reported():
    raw = "<function=get_weather><parameter=city>P</parameter><parameter=x"
    r = decode_xml_call(raw, "function", registry=REGISTRY, pipeline=Pipeline())
    (err,) = r.errors
    assert err.code == INVALID_XML and err.details["kind"] == "unterminated_tag"


@pytest.mark.parametrize(
    "raw",
    [
        "<function=get_weather><parameter=city>P</parameter><parameter=days",
        "<tool_call><function=get_weather><parameter=city>P</parameter><parameter=days ",
        "<function=get_weather><parameter=city>P</parameter><tool_call",
    ],
)
def test_an_opening_tag_cut_by_the_end_is_dropped(raw):
    r = decode(raw)
    assert r.errors == [] and r.arguments == {"city": "P"}
    assert "xml.cut_tag_dropped" in r.repairs


def test_a_cut_tag_that_is_not_structural_stays_in_the_value():
    r = decode("<function=get_weather><parameter=city>if x <a")
    assert "xml.cut_tag_dropped" not in r.repairs
    r = decode("<function=get_weather><parameter=city>Paris</parameter><param")
    assert r.arguments == {"city": "Paris"} and "xml.cut_tag_dropped" in r.repairs


def test_a_cut_opening_tag_inside_cdata_is_text():
    r = decode("<function=get_weather><parameter=city><![CDATA[P <days")
    assert "xml.cut_tag_dropped" not in r.repairs


@pytest.mark.parametrize("tag", ["call", "invoke", "tool"])
def test_other_spellings_of_function(tag):
    r = decode(f"<tool_call><{tag}=get_weather><parameter=city>P</parameter></{tag}></tool_call>")
    assert r.errors == [] and r.name == "get_weather" and r.arguments == {"city": "P"}
    assert r.repairs == ["xml.function_alias"]


def test_an_alias_tag_is_text_inside_a_function_value():
    r = decode("<function=get_weather><parameter=city>use </tool> here</parameter></function>")
    assert r.errors == [] and r.arguments == {"city": "use </tool> here"}


def test_parameter_name_then_value():
    r = decode("<tool_call>\n<function=get_weather>\n<parameter>city</parameter>\nParis\n"
               "<parameter>days</parameter>\n3\n</function>\n</tool_call>")
    assert r.errors == [] and r.arguments == {"city": "Paris", "days": 3}
    assert "xml.parameter_name_then_value" in r.repairs


def test_unknown_tool_keeps_name_and_arguments():
    r = decode("<function=launch><parameter=target>moon</parameter></function>")
    assert r.name == "launch" and r.arguments == {"target": "moon"}
    assert [e.code for e in r.errors] == [UNKNOWN_TOOL]


def test_no_registry_means_no_name_check_and_no_schema():
    r = decode("<function=launch><parameter=n>3</parameter></function>", registry=None)
    assert (r.name, r.arguments, r.errors) == ("launch", {"n": "3"}, [])


def test_schema_violation():
    r = decode("<function=get_weather><parameter=days>soon</parameter></function>")
    assert r.arguments is not None
    codes = {e.code for e in r.errors}
    assert codes == {SCHEMA_VIOLATION}


def test_limits():
    r = decode("<function=x></function>", limits=Limits(max_chars=5))
    assert [e.code for e in r.errors] == [PAYLOAD_TOO_LARGE] and r.arguments is None
    deep = "<shell><opts>" + "<a>" * 40 + "</a>" * 40 + "</opts></shell>"
    r = decode(deep, "tool_tag", "shell", limits=Limits(max_depth=10))
    assert [e.code for e in r.errors] == [NESTING_TOO_DEEP]


def test_unknown_format_is_a_programming_error():
    with pytest.raises(ValueError, match="unknown XML call format"):
        decode("<a/>", "yaml")


# -- "tool_tag" ---------------------------------------------------------------------------


def test_tool_tag_basic_and_self_closing():
    r = decode("<get_weather><city>Paris</city><days>3</days></get_weather>", "tool_tag",
               "get_weather")
    assert (r.arguments, r.repairs, r.errors) == ({"city": "Paris", "days": 3}, [], [])
    r = decode("<write_file/>", "tool_tag", "write_file")
    assert r.arguments == {} and r.errors == []


def test_tool_tag_nested_objects_arrays_and_raw_strings():
    raw = """<shell>
  <opts>
    <depth>2</depth>
  </opts>
  <tags>
    <item>a</item>
    <item>b</item>
  </tags>
  <point><0>1.5</0><1>2</1></point>
  <command>echo "<b>hi</b>" && exit</command>
</shell>"""
    r = decode(raw, "tool_tag", "shell")
    assert r.errors == []
    assert r.arguments == {
        "opts": {"depth": 2}, "tags": ["a", "b"], "point": [1.5, 2],
        "command": 'echo "<b>hi</b>" && exit',
    }
    assert r.repairs == ["xml.escape_ampersand"]


def test_tool_tag_string_may_hold_markup_named_like_a_sibling():
    raw = ("<write_file><path>a.xml</path><content><path>x</path> and more</content>"
           "</write_file>")
    r = decode(raw, "tool_tag", "write_file")
    assert r.arguments == {"path": "a.xml", "content": "<path>x</path> and more"}


def test_tool_tag_unclosed_parameter():
    r = decode("<get_weather><city>Paris<days>3</days></get_weather>", "tool_tag", "get_weather")
    assert r.arguments == {"city": "Paris", "days": 3} and r.repairs == ["xml.balance_tags"]


def test_tool_tag_wrong_root_and_mixed_content():
    r = decode("<other><city>x</city></other>", "tool_tag", "get_weather")
    assert r.errors[0].code == INVALID_XML and "expected <get_weather>" in r.errors[0].message
    r = decode("<shell><opts>hi <depth>1</depth></opts></shell>", "tool_tag", "shell")
    assert "mixes text and elements" in r.errors[0].message


def test_tool_tag_attributes_are_reported():
    r = decode('<write_file><path mode="w">a</path></write_file>', "tool_tag", "write_file")
    assert r.arguments == {"path": "a"}
    assert r.warnings == ["ignored attributes of <path>: mode='w'"]


# -- "tool_element" -----------------------------------------------------------------------


def test_tool_element():
    raw = """<tool>
<server_name>local</server_name>
<tool_name>shell</tool_name>
<arguments>
  <command>func.*&&.*return</command>
  <tags>src</tags>
</arguments>
<note>ignored</note>
</tool>"""
    r = decode(raw, "tool_element")
    assert r.name == "shell" and r.server_name == "local"
    assert r.arguments == {"command": "func.*&&.*return", "tags": ["src"]}
    assert r.repairs == ["xml.escape_ampersand", "schema.wrap_array"]
    assert r.warnings == ["ignored unknown element <note> inside <tool>"]
    assert r.errors == []


@pytest.mark.parametrize(
    ("raw", "fragment"),
    [
        ("<tool><arguments/></tool>", "no <tool_name>"),
        ("<tool><tool_name> </tool_name></tool>", "empty"),
        ("<tool><tool_name>a</tool_name><tool_name>b</tool_name></tool>", "twice"),
        ("<call><tool_name>a</tool_name></call>", "expected <tool>"),
    ],
)
def test_tool_element_errors(raw, fragment):
    r = decode(raw, "tool_element")
    assert r.arguments is None and fragment in r.errors[0].message


# -- properties ---------------------------------------------------------------------------

FRAGMENTS = st.sampled_from(
    ["<", "</", ">", "&", "&amp;", "<parameter=", "<parameter=city>", "</parameter>",
     "<function=get_weather>", "</function>", "<tool_call>", "</tool_call>", "<![CDATA[", "]]>",
     "<get_weather>", "</get_weather>", "<city>", "</city>", "<tool>", "<tool_name>shell",
     "</tool_name>", "<arguments>", "<opts>", "<0>", "=", "\n", " ", "x", "3", '"']
)


@settings(max_examples=300)
@given(st.lists(FRAGMENTS | st.text(max_size=4), max_size=30).map("".join),
       st.sampled_from([("function", None), ("tool_tag", "get_weather"), ("tool_tag", "shell"),
                        ("tool_element", None)]))
def test_decode_never_raises(raw, fmt_tag):
    fmt, tag = fmt_tag
    r = decode(raw, fmt, tag)
    assert (r.arguments is None) == any(e.code in (INVALID_XML, NESTING_TOO_DEEP)
                                         for e in r.errors)
    orjson.dumps([r.arguments, r.repairs, [e.to_dict() for e in r.errors], r.warnings])


def escape(value: str) -> str:
    return (value.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
            .replace("\r", "&#13;"))


NAMES = st.from_regex(r"[a-z][a-z0-9_]{0,8}", fullmatch=True).filter(
    lambda n: n not in {"tool", "tool_name", "server_name", "arguments", "parameter", "function",
                        "tool_call", "probe"}
)
ARGS = st.dictionaries(NAMES, st.text(), max_size=5)


def registry_for(args: dict) -> ToolRegistry:
    props = {k: {"type": "string"} for k in args}
    return ToolRegistry.from_tools([{"name": "probe", "parameters": {
        "type": "object", "properties": props}}])


def body(value: str, cdata: bool) -> str:
    if cdata and "]]>" not in value:
        return f"<![CDATA[{value}]]>"
    return f"\n{escape(value)}\n"


@settings(max_examples=200)
@given(ARGS, st.booleans(), st.booleans())
def test_function_round_trip(args, cdata, wrapper):
    params = "".join(f"<parameter={k}>{body(v, cdata)}</parameter>\n" for k, v in args.items())
    raw = f"<function=probe>\n{params}</function>"
    if wrapper:
        raw = f"<tool_call>\n{raw}\n</tool_call>"
    r = decode(raw, registry=registry_for(args))
    assert (r.name, r.arguments, r.repairs, r.errors) == ("probe", args, [], [])


@settings(max_examples=200)
@given(ARGS, st.booleans(), st.sampled_from(["tool_tag", "tool_element"]))
def test_tag_formats_round_trip(args, cdata, fmt):
    params = "".join(f"  <{k}>{body(v, cdata)}</{k}>\n" for k, v in args.items())
    if fmt == "tool_tag":
        raw = f"<probe>\n{params}</probe>"
    else:
        raw = f"<tool><tool_name>probe</tool_name><arguments>\n{params}</arguments></tool>"
    r = decode(raw, fmt, "probe" if fmt == "tool_tag" else None, registry=registry_for(args))
    assert (r.name, r.arguments, r.repairs, r.errors) == ("probe", args, [], [])


# -- large and deep input ------------------------------------------------------------------


def test_deep_nesting_with_a_raised_limit_needs_no_recursion():
    depth = 100_000
    raw = "<t><p>" + "<a>" * depth + "x" + "</a>" * depth + "</p></t>"
    r = decode(raw, "tool_tag", "t", registry=None, limits=Limits(max_depth=depth + 10))
    assert (r.name, r.errors) == ("t", [])
    value, levels = r.arguments["p"], 0
    while isinstance(value, dict):  # walk down: comparing whole values would recurse
        assert list(value) == ["a"]
        value, levels = value["a"], levels + 1
    assert (levels, value) == (depth, "x")


def test_deep_arrays_with_a_raised_limit():
    depth = 20_000
    raw = "<t><p>" + "<item>" * depth + "x" + "</item>" * depth + "</p></t>"
    registry = ToolRegistry.from_tools([{"name": "t", "parameters": {
        "type": "object", "properties": {"p": {"type": "array", "items": {"type": "array"}}}}}])
    # Without post-parse heuristics: comparing values before and after them recurses.
    pipeline = PIPELINE.replacing({"post-parse": []})
    r = decode_xml_call(raw, "tool_tag", registry=registry, pipeline=pipeline, tag_name="t",
                        limits=Limits(max_depth=depth + 10))
    assert r.errors == []
    value = r.arguments["p"]
    assert isinstance(value, list) and isinstance(value[0], list)  # the schema's two levels
    assert isinstance(value[0][0], dict) and "item" in value[0][0]  # then objects


def test_large_value_needing_repairs_decodes_whole():
    line = "if (i<10 && a <= b) && x < y: func.*&&.*return\n"
    value = line * 3_000
    raw = (f"<tool_call>\n<function=write_file>\n<parameter=content>\n{value}</parameter>\n"
           "<parameter=path>a.py</parameter>\n</function>\n</tool_call>")
    r = decode(raw)
    assert r.arguments == {"content": value[:-1], "path": "a.py"}
    assert (r.repairs, r.errors) == (["xml.escape_lt", "xml.escape_ampersand"], [])


def test_thousands_of_unclosed_parameters_are_all_closed():
    n = 2_000
    raw = "<function=f>" + "".join(f"<parameter=p{i}>{i} < {i + 1}\n" for i in range(n))
    r = decode(raw, registry=None)
    assert r.errors == [] and "xml.balance_tags" in r.repairs
    assert r.arguments == {f"p{i}": f"{i} < {i + 1}" for i in range(n)}


# -- merged text reads as the pieces did ---------------------------------------------------

BODY_PIECES = st.sampled_from(
    [" ", "  ", "\t", "\n", "\r", "\r\n", "x", "a b", "&amp;", "&lt;", "&#10;", "&#32;",
     "<![CDATA[]]>", "<![CDATA[ ]]>", "<![CDATA[\n]]>", "<![CDATA[c]]>", "<", "<b"]
)


@settings(max_examples=300)
@given(st.lists(BODY_PIECES, max_size=12).map("".join), st.booleans())
# An empty CDATA holds nothing but still splits the text: only the edge pieces are trimmed.
@example("x\n<![CDATA[]]>  ", False)
@example("\r<![CDATA[]]>\n", True)
@example("  <![CDATA[]]>\nx", False)
@example("<![CDATA[]]>\na", True)
def test_merged_text_trims_like_the_pieces(body, raw_text):
    src = f"<p>{body}</p>"
    names = frozenset({"p"}) if raw_text else frozenset()
    pieces = scan(src, ScanOptions(names, names))
    merged = scan(src, ScanOptions(names, names, merge_text=True))
    assert (pieces.error is None) == (merged.error is None)
    if pieces.ok:
        want, got = pieces.nodes[0].children, merged.nodes[0].children
        assert _join_text(got) == _join_text(want)
        content = [t.start for t in want if not t.layout]
        assert [t.start for t in got if not t.layout] == content[:1]


def test_attributes_of_the_tool_tag_are_its_parameters():
    from toolcodec import decode as decode_text

    tools = [{"name": "get_weather", "parameters": {"type": "object", "properties": {
        "city": {"type": "string"}, "days": {"type": "integer"}}}}]
    result = decode_text('<get_weather city="Paris" days="3"/>', tools=tools)
    assert result.ok and result.calls[0].arguments == {"city": "Paris", "days": 3}
    assert result.calls[0].repairs == ["xml.attributes_as_parameters"]
    mixed = decode_text('<get_weather city="Paris"><days>2</days></get_weather>', tools=tools)
    assert mixed.calls[0].arguments == {"days": 2, "city": "Paris"}
    twice = decode_text('<get_weather city="Paris"><city>Oslo</city></get_weather>', tools=tools)
    assert twice.calls == [] and twice.errors[0].code == "invalid_xml"  # never a guess


# -- split_functions: several calls in one block -------------------------------------------

_SPLIT_PIECES = st.sampled_from([
    "<function=a>", "<function=b>", "<call=c>", "<invoke=d>", "<tool=e>", "<tool_call>",
    "</function>", "</call>", "<parameter=p>", "<parameter p>", "</parameter>", "</parameter >",
    "<![CDATA[", "]]>", "text", "\n", " ", "<", "=", "function=", "<functions>"])


@settings(max_examples=400)
@given(st.lists(_SPLIT_PIECES, max_size=14).map("".join))
def test_split_functions_short_way_is_the_scans_answer(payload):
    # the short way (at most one opener) answers what the pass over the tokens answers
    parts = split_functions(payload)
    assert parts == _split_scan(payload)
    assert "".join(parts) == payload
