"""The default XML heuristics, one by one."""

from __future__ import annotations

import re

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from toolcodec.repair.heuristics import HeuristicContext
from toolcodec.repair.xml_heuristics import (
    BalanceTags,
    DedupeTags,
    EscapeAmpersand,
    EscapeLt,
    NormalizeCloseTag,
    SchemaCoerce,
    balance_tags,
    escape_bare_ampersands,
    escape_stray_lt,
)
from toolcodec.results.errors import INVALID_XML, CodecError
from toolcodec.scanning.xmlscan import NAME_PATTERN, ScanOptions, reference_length, scan, starts_tag
from toolcodec.schema.tools import ToolRegistry

FAILED = [CodecError(INVALID_XML, "parse failed")]
FUNCTION_OPTS = ScanOptions(
    raw_text=frozenset({"parameter"}),
    structural=frozenset({"parameter", "function", "tool_call"}),
)


def ctx(raw="", *, errors=(), parsed=None, schema=None, meta=None) -> HeuristicContext:
    return HeuristicContext(
        tool_name="t", schema=schema, raw=raw, parsed=parsed, errors=list(errors),
        meta=dict(meta or {}),
    )


def run_raw(heuristic, raw, **kw) -> str | None:
    c = ctx(raw, **kw)
    if not heuristic.applies(c):
        return None
    return heuristic.run(c).raw


# -- xml.normalize_close_tag --------------------------------------------------------------


@pytest.mark.parametrize(
    ("before", "after"),
    [
        ("<city>Paris</ city >", "<city>Paris</city>"),
        ("<step>a</\n  step>", "<step>a</step>"),
        ("<f><city>Paris</city", "<f><city>Paris</city>"),
        ("<f><city>Paris</city  \n", "<f><city>Paris</city>"),
        # names no open tag uses are text, not markup: left alone
        ("<p>a </ b > c</p>", "<p>a </ b > c</p>"),
        ("<p><![CDATA[</ p >]]></p>", "<p><![CDATA[</ p >]]></p>"),
        ("<p>x</p >", "<p>x</p >"),  # already XML
    ],
)
def test_normalize_close_tag(before, after):
    assert run_raw(NormalizeCloseTag(), before) == after


def test_normalize_close_tag_needs_a_close_tag():
    assert run_raw(NormalizeCloseTag(), "<a>x") is None


# -- xml.escape_lt ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("before", "after"),
    [
        ("<p>a < b</p>", "<p>a &lt; b</p>"),
        ("<p>x<3</p>", "<p>x&lt;3</p>"),
        ("<p>a <= b</p>", "<p>a &lt;= b</p>"),
        ("<p>< 5</p>", "<p>&lt; 5</p>"),
        ("<p><![CDATA[a < b]]></p>", "<p><![CDATA[a < b]]></p>"),
        ("<p><q/></p>", "<p><q/></p>"),
    ],
)
def test_escape_lt(before, after):
    assert run_raw(EscapeLt(), before) == after


# -- xml.escape_ampersand -----------------------------------------------------------------


@pytest.mark.parametrize(
    ("before", "after"),
    [
        ("<p>a && b</p>", "<p>a &amp;&amp; b</p>"),
        ("<u>?a=1&b=2&c=3</u>", "<u>?a=1&amp;b=2&amp;c=3</u>"),
        ("<p>&amp; &lt; &gt; &quot; &apos; &#60; &#x3C; &#1234;</p>",
         "<p>&amp; &lt; &gt; &quot; &apos; &#60; &#x3C; &#1234;</p>"),
        ("<p>&nbsp; &copy</p>", "<p>&amp;nbsp; &amp;copy</p>"),
        ("<p><![CDATA[a && b]]> & </p>", "<p><![CDATA[a && b]]> &amp; </p>"),
        ('<p t="a&b">&</p>', '<p t="a&amp;b">&amp;</p>'),
        ("<function=a&b>&</function>", "<function=a&b>&amp;</function>"),
    ],
)
def test_escape_ampersand(before, after):
    assert run_raw(EscapeAmpersand(), before, errors=FAILED) == after


def test_escape_ampersand_only_after_a_failed_parse():
    assert run_raw(EscapeAmpersand(), "<p>a && b</p>") is None


XML_BITS = st.sampled_from(
    ["<", "</", ">", "&", "&amp;", "&lt;", "&#60;", "&#x3C;", "&nbsp;", "<p>", "</p>",
     "<parameter=", "<parameter=x>", "</parameter>", "<![CDATA[", "]]>", "a", " ", "=", ";",
     '"', "<p t=\"", "#"]
)


@settings(max_examples=300)
@given(st.lists(XML_BITS, max_size=25).map("".join))
def test_escape_ampersand_never_changes_text_that_already_parses(text):
    for opts in (ScanOptions(), FUNCTION_OPTS):
        if scan(text, opts).ok:
            assert escape_bare_ampersands(text) == text


@settings(max_examples=200)
@given(st.text(alphabet="ab&;#x<>p/ ", max_size=30))
def test_escaped_text_has_no_bare_ampersand(text):
    fixed = escape_bare_ampersands(text)
    assert escape_bare_ampersands(fixed) == fixed  # idempotent: nothing bare is left


# -- xml.balance_tags ---------------------------------------------------------------------


@pytest.mark.parametrize(
    ("before", "after", "opts"),
    [
        # an unclosed parameter closes at the next sibling's open tag
        ("<function=f><parameter=a>1<parameter=b>2</parameter></function>",
         "<function=f><parameter=a>1</parameter><parameter=b>2</parameter></function>",
         FUNCTION_OPTS),
        # ... or at its parent's close
        ("<a><b>x</a>", "<a><b>x</b></a>", ScanOptions()),
        # missing final close tags at the end, in order
        ("<tool_call><function=f><parameter=a>1",
         "<tool_call><function=f><parameter=a>1</parameter></function></tool_call>",
         FUNCTION_OPTS),
        ("<function=f><parameter=a>1</parameter></func",
         "<function=f><parameter=a>1</parameter></function>", FUNCTION_OPTS),
        ("<function=f><parameter=a>1</parameter><",
         "<function=f><parameter=a>1</parameter></function>", FUNCTION_OPTS),
        # a close tag that closes nothing is dropped
        ("<a>x</b></a>", "<a>x</a>", ScanOptions()),
        # cannot be mended: unchanged
        ("<a>x & y</a>", "<a>x & y</a>", ScanOptions()),
    ],
)
def test_balance_tags(before, after, opts):
    assert balance_tags(before, opts) == after
    got = run_raw(BalanceTags(), before, errors=FAILED, meta={"scan_options": opts})
    assert got == after


def test_balance_tags_only_adds_text():
    src = "<a><b><c>1<d>2"
    fixed = balance_tags(src, ScanOptions())
    assert fixed.startswith(src) and fixed == src + "</d></c></b></a>"
    assert scan(fixed).ok


def test_balance_tags_only_after_a_failed_parse():
    assert run_raw(BalanceTags(), "<a>x") is None


# -- xml.dedupe_tags ----------------------------------------------------------------------

SCHEMA = {
    "type": "object",
    "properties": {
        "description": {"type": "string"},
        "count": {"type": ["integer", "null"]},
        "tags": {"type": "array", "items": {"type": "string"}},
        "opts": {"type": "object"},
    },
}


def test_dedupe_refuses_different_values_for_a_scalar():
    parsed = {"description": ["First", "Second"], "tags": ["a", "b"]}
    c = ctx(parsed=parsed, schema=SCHEMA, meta={"xml_repeated": ["description", "tags"]})
    h = DedupeTags()
    assert h.applies(c)
    assert h.run(c) is None and c.parsed is None
    assert parsed["description"] == ["First", "Second"]  # input not mutated
    assert "'description' is given 2 times" in c.errors[0].message


def test_dedupe_reads_identical_repeats_of_a_scalar_as_one_value():
    parsed = {"count": ["3", "3"], "tags": ["a", "b"]}
    c = ctx(parsed=parsed, schema=SCHEMA, meta={"xml_repeated": ["count", "tags"]})
    assert DedupeTags().run(c).parsed == {"count": "3", "tags": ["a", "b"]}


def test_dedupe_keeps_lists_without_schema():
    parsed = {"x": ["1", "2"]}
    c = ctx(parsed=parsed, schema=None, meta={"xml_repeated": ["x"]})
    assert DedupeTags().run(c).parsed == parsed and "warnings" not in c.meta


def test_dedupe_needs_repeats():
    assert not DedupeTags().applies(ctx(parsed={"a": ["1", "2"]}, schema=SCHEMA))


# -- schema.coerce ------------------------------------------------------------------------


def test_schema_coerce_reports_coerce_ids_not_its_own():
    registry = ToolRegistry.from_tools([{"name": "t", "parameters": SCHEMA}])
    spec = registry.get("t")
    c = ctx(parsed={"count": "3", "tags": "solo"}, schema=SCHEMA, meta={"tool_spec": spec})
    h = SchemaCoerce()
    assert h.applies(c)
    result = h.run(c)
    assert result.parsed == {"count": 3, "tags": ["solo"]}
    assert "schema.coerce" not in result.repairs
    assert "schema.wrap_array" in result.repairs  # a real repair is still named
    assert "schema.coerce_integer" not in result.repairs  # "3" -> 3 is XML's meaning


def test_schema_coerce_needs_a_tool():
    assert not SchemaCoerce().applies(ctx(parsed={"a": "1"}))


# -- the one-pass forms agree with the plain definitions -----------------------------------

PIECES = st.sampled_from(
    ["<", "</", "</ ", "<a", "<a>", "<a ", "<a/", "<a=", "<ab =", "<0>", "<0 >", "<3", "<=", "< a",
     "<!--", "<![CDATA[", "]]>", "&", "&amp;", "&lt;", "&#60;", "&#x3C;", "&#xZ;", "&nbsp;", "&amp",
     "x", " ", "\n", "é", ".", "-", ":", "/", ">", "=", ";", "#"]
)
TEXTS = st.lists(PIECES | st.text(max_size=2), max_size=30).map("".join)


def escape_lt_one_by_one(text: str) -> str:
    return "".join(
        "&lt;" if c == "<" and not starts_tag(text, i) else c for i, c in enumerate(text)
    )


@settings(max_examples=300)
@given(TEXTS)
def test_escape_stray_lt_escapes_exactly_what_starts_no_tag(text):
    assert escape_stray_lt(text) == escape_lt_one_by_one(text)


def escape_amp_one_by_one(text: str) -> str:
    """Bare "&" -> "&amp;", skipping CDATA and <name=VALUE> tags, one character at a time."""
    keep = re.compile(
        r"<!\[CDATA\[.*?(?:\]\]>|\Z)|<" + NAME_PATTERN + r"[ \t\r\n]*=[^<>]*>", re.DOTALL
    )
    out, i = [], 0
    while i < len(text):
        kept = keep.match(text, i)
        if kept:
            out.append(kept.group(0))
            i = kept.end()
            continue
        bare = text[i] == "&" and not reference_length(text, i)
        out.append("&amp;" if bare else text[i])
        i += 1
    return "".join(out)


@settings(max_examples=300)
@given(TEXTS)
def test_escape_bare_ampersands_matches_the_definition(text):
    assert escape_bare_ampersands(text) == escape_amp_one_by_one(text)


def test_balance_tags_closes_any_number_of_open_elements():
    n = 1_000  # one pass: no cap on how many elements get closed
    src = "<function=f>" + "".join(f"<parameter=p{i}>{i} < {i + 1}" for i in range(n))
    fixed = balance_tags(src, FUNCTION_OPTS)
    assert fixed.count("</parameter>") == n and scan(fixed, FUNCTION_OPTS).ok


def test_balance_tags_leaves_its_scan_for_the_reparse_only_when_nothing_changed():
    good = ctx("<a>x</a>", errors=FAILED, meta={"scan_options": ScanOptions()})
    assert BalanceTags().run(good).raw == good.raw
    text, options, result = good.meta["scanned"]
    assert (text, options, result.ok) == (good.raw, good.meta["scan_options"], True)
    mended = ctx("<a>x", errors=FAILED, meta={"scan_options": ScanOptions()})
    assert BalanceTags().run(mended).raw == "<a>x</a>" and "scanned" not in mended.meta


# -- xml.unwrap_scalar ------------------------------------------------------------------------

_ALARM = [{"name": "set_alarm", "parameters": {"type": "object", "properties": {
    "volume": {"type": "number"}, "on": {"type": "boolean"}, "label": {"type": "string"}}}}]


@pytest.mark.parametrize("text, expected", [
    ("<tool_call>\n<function=set_alarm>\n<parameter=volume>\n<value>0.8</value>\n</parameter>\n"
     "</function>\n</tool_call>", {"volume": 0.8}),
    ("<set_alarm><volume>\n  <item> 42 </item>\n</volume><on><v>true</v></on></set_alarm>",
     {"volume": 42, "on": True}),
])
def test_a_scalar_wrapped_in_one_element_is_unwrapped(text, expected):
    from toolcodec import decode

    result = decode(text, tools=_ALARM)
    assert result.ok and result.calls[0].arguments == expected
    assert "xml.unwrap_scalar" in result.calls[0].repairs


@pytest.mark.parametrize("text", [
    "<set_alarm><label><b>x</b></label></set_alarm>",  # a string keeps its markup
    "<set_alarm><volume><a>4</b></volume></set_alarm>",  # not one element
    "<set_alarm><volume><a>4</a><a>5</a></volume></set_alarm>",
])
def test_only_one_element_around_a_wanted_scalar_is_unwrapped(text):
    from toolcodec import decode

    result = decode(text, tools=_ALARM)
    assert all("xml.unwrap_scalar" not in c.repairs for c in result.calls)
    if result.calls:
        assert result.calls[0].arguments == {"label": "<b>x</b>"}
