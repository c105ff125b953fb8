"""The strict XML-ish scanner: trees for good input, precise errors for bad input."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from codec import xmlscan as xs
from codec.xmlscan import Element, ScanOptions, Text, line_col, scan, starts_tag

FUNCTION_OPTS = ScanOptions(
    raw_text=frozenset({"parameter"}), structural=frozenset({"parameter", "function"})
)


def only(nodes: list) -> Element:
    elements = [n for n in nodes if isinstance(n, Element)]
    assert len(elements) == 1
    return elements[0]


def text_of(el: Element) -> str:
    return "".join(c.value for c in el.children if isinstance(c, Text))


def test_nested_elements_attributes_and_self_closing():
    r = scan('<a x="1" y=\'two\'><b>hi</b><c/><b >yo</b ></a>')
    assert r.ok
    a = only(r.nodes)
    assert (a.name, a.attrs) == ("a", {"x": "1", "y": "two"})
    assert [e.name for e in a.elements()] == ["b", "c", "b"]
    assert [text_of(e) for e in a.elements()] == ["hi", "", "yo"]


@pytest.mark.parametrize(
    ("src", "value"),
    [("<function=get_weather>", "get_weather"), ('<function = "f" >', "f"), ("<p='x y'>", "x y")],
)
def test_shorthand_value(src, value):
    r = scan(src + "</" + src[1:].split("=")[0].strip() + ">")
    assert r.ok, r.error
    assert only(r.nodes).value == value


def test_references_and_cdata_are_literal_pieces():
    r = scan("<a>x &amp; &lt;&gt;&quot;&apos;&#60;&#x3C;<![CDATA[<b>&amp;]]>y</a>")
    a = only(r.nodes)
    assert text_of(a) == "x & <>\"'<<<b>&amp;y"
    literal = [c.value for c in a.children if c.literal]
    assert literal == ["&", "<", ">", '"', "'", "<", "<", "<b>&amp;"]


def test_attribute_references_decode():
    assert only(scan('<a t="&lt;&#x41;&amp;"/>').nodes).attrs == {"t": "<A&"}


def test_raw_text_element_keeps_angle_brackets_literal():
    src = "<function=f><parameter=code>if a<b and c > d: <div>x</div></parameter></function>"
    r = scan(src, FUNCTION_OPTS)
    assert r.ok, r.error
    param = only(only(r.nodes).children)
    assert text_of(param) == "if a<b and c > d: <div>x</div>"


def test_raw_text_element_stops_at_structural_tag():
    src = "<function=f><parameter=a>1<parameter=b>2</parameter></function>"
    err = scan(src, FUNCTION_OPTS).error
    assert err.kind == xs.UNCLOSED
    assert err.position == src.index("<parameter=b>")
    assert err.expected == "</parameter>" and err.open_name == "parameter"
    assert "parameter=a" in err.message


def test_raw_text_element_unclosed_at_end():
    src = "<function=f><parameter=a>1 < 2"
    err = scan(src, FUNCTION_OPTS).error
    assert (err.kind, err.position, err.expected) == (xs.UNCLOSED, len(src), "</parameter>")


@pytest.mark.parametrize(
    ("src", "kind", "position", "expected"),
    [
        ("<a><b>x</a>", xs.UNCLOSED, 7, "</b>"),
        ("<a>x", xs.UNCLOSED, 4, "</a>"),
        ("<a>x</b></a>", xs.STRAY_CLOSE, 4, None),
        ("<a>1 < 2</a>", xs.STRAY_LT, 5, None),
        ("<a>x<3</a>", xs.STRAY_LT, 4, None),
        ("<a>x</ a></a>", xs.BAD_TAG, 4, "</a>"),
        ("<a b=c></a>", xs.BAD_TAG, 3, None),
        ("<a>x</a", xs.UNTERMINATED_TAG, 4, "</a>"),
        ("<a>x<", xs.UNTERMINATED_TAG, 4, "</a>"),
        ("<a x='1'", xs.UNTERMINATED_TAG, 0, None),
        ("<f=x", xs.UNTERMINATED_TAG, 0, None),
        ("<a><![CDATA[x</a>", xs.UNTERMINATED_CDATA, 3, None),
        ("<a>x & y</a>", xs.BARE_AMPERSAND, 5, None),
        ("<a>&nbsp;</a>", xs.UNKNOWN_ENTITY, 3, None),
        ("<a>&#0;</a>", xs.BAD_CHAR_REF, 3, None),
        ("<a>&#xD800;</a>", xs.BAD_CHAR_REF, 3, None),
        ('<a t="&"/>', xs.BARE_AMPERSAND, 6, None),
    ],
)
def test_faults_are_reported_with_kind_and_position(src, kind, position, expected):
    r = scan(src)
    assert not r.ok and r.nodes == []
    assert (r.error.kind, r.error.position, r.error.expected) == (kind, position, expected)
    line, col = line_col(src, position)
    assert f"line {line}, column {col}" in r.error.message


def test_depth_limit():
    deep = "<a>" * 6 + "</a>" * 6
    assert scan(deep, ScanOptions(max_depth=6)).ok
    err = scan(deep, ScanOptions(max_depth=5)).error
    assert (err.kind, err.position) == (xs.TOO_DEEP, 15)


def test_deep_nesting_needs_no_stack():
    n = 50_000
    r = scan("<a>" * n + "</a>" * n, ScanOptions(max_depth=n))
    assert r.ok


def test_line_col():
    assert line_col("ab\ncd", 4) == (2, 2)
    assert line_col("abc", 0) == (1, 1)


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("<a>", True),
        ("</a>", True),
        ("</ a >", True),
        ("<a/>", True),
        ("<function=x>", True),
        ("<![CDATA[", True),
        ("<", True),  # cut off: truncated markup, not text
        ("</", True),
        ("< a", False),
        ("<3", False),
        ("<=", False),
        ("<a+b>", False),
        ("<!-- c -->", False),
    ],
)
def test_starts_tag(text, expected):
    assert starts_tag(text, 0) is expected


FRAGMENTS = st.sampled_from(
    ["<", "</", ">", "&", "&amp;", "&#x3C;", "<a>", "</a>", "<parameter=", "<![CDATA[", "]]>",
     "=", '"', "x", " ", "\n", "<function=f>", "</parameter>", "/>", "&#0;", "é"]
)


@settings(max_examples=200, deadline=None)
@given(st.lists(FRAGMENTS | st.text(max_size=3), max_size=30).map("".join))
def test_scan_never_raises(text):
    for opts in (ScanOptions(), FUNCTION_OPTS):
        r = scan(text, opts)
        assert r.ok or (r.nodes == [] and 0 <= r.error.position <= len(text))
