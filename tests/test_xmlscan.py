"""The strict XML-ish scanner: trees for good input, precise errors for bad input."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from toolcodec.scanning import xmlscan as xs
from toolcodec.scanning.xmlscan import Element, ScanOptions, Text, line_col, scan, starts_tag

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


@settings(max_examples=200)
@given(st.lists(FRAGMENTS | st.text(max_size=3), max_size=30).map("".join))
def test_scan_never_raises(text):
    for opts in (ScanOptions(), FUNCTION_OPTS):
        r = scan(text, opts)
        assert r.ok or (r.nodes == [] and 0 <= r.error.position <= len(text))


# -- merged text runs (ScanOptions.merge_text) ---------------------------------------------

MERGED = ScanOptions(merge_text=True)
MERGED_FUNCTION = ScanOptions(FUNCTION_OPTS.raw_text, FUNCTION_OPTS.structural, merge_text=True)


def test_merged_run_is_one_text_with_its_plain_ends_marked():
    r = scan("<a>\n x &amp; &#x3C;<![CDATA[<b>]]>y </a>", MERGED)
    (piece,) = only(r.nodes).children
    assert piece.value == "\n x & <<b>y "
    assert (piece.start, piece.literal, piece.layout) == (3, False, False)
    # plain "\n x " before the first reference, plain "y " after the CDATA
    assert (piece.head, piece.tail) == (4, 2)


def test_merged_run_of_references_only_is_literal():
    (piece,) = only(scan("<a>&lt;&gt;</a>", MERGED).nodes).children
    assert (piece.value, piece.literal, piece.head, piece.tail) == ("<>", True, 0, 0)


def test_merged_layout_and_start_of_the_first_content():
    src = "<a>\n  <b/>  &#32;</a>"
    first, _, last = only(scan(src, MERGED).nodes).children
    assert first.layout and first.value == "\n  "
    assert not last.layout and last.value == "   "
    assert last.start == src.index("&#32;")  # the reference, not the layout before it


def test_merged_raw_element_keeps_angle_brackets_and_decodes_in_bulk():
    src = "<function=f><parameter=code>if a<b &amp;&amp; c > d: <div>x</div></parameter></function>"
    param = only(only(scan(src, MERGED_FUNCTION).nodes).children)
    assert [c.value for c in param.children] == ["if a<b && c > d: <div>x</div>"]


def pieces_view(nodes: list) -> list:
    """A tree as nested (name, attrs, value, children) with each text run joined."""
    out: list = []
    for node in nodes:
        if isinstance(node, Text):
            if out and isinstance(out[-1], str):
                out[-1] += node.value
            else:
                out.append(node.value)
        else:
            out.append((node.name, node.attrs, node.value, pieces_view(node.children)))
    return out


def fault(r) -> tuple | None:
    e = r.error
    return None if e is None else (e.kind, e.position, e.message, e.expected, e.open_name)


@settings(max_examples=300)
@given(st.lists(FRAGMENTS | st.text(max_size=3), max_size=30).map("".join))
def test_merged_scan_reads_the_same_as_piece_by_piece(text):
    for opts in (ScanOptions(), FUNCTION_OPTS):
        merged = ScanOptions(opts.raw_text, opts.structural, merge_text=True)
        a, b = scan(text, opts), scan(text, merged)
        assert fault(a) == fault(b)
        assert pieces_view(a.nodes) == pieces_view(b.nodes)


# -- find_missing_closes -------------------------------------------------------------------


def mend_by_rescanning(text: str, opts: ScanOptions) -> str:
    """The plain definition: insert the expected close tag where the scan stops (or drop a
    close tag that closes nothing), scan again."""
    while True:
        err = scan(text, opts).error
        if err is not None and err.kind == xs.STRAY_CLOSE:
            text = text[: err.position] + text[text.index(">", err.position) + 1 :]
            continue
        if err is None or err.expected is None:
            return text
        if err.kind == xs.UNCLOSED:
            text = text[: err.position] + err.expected + text[err.position :]
        elif err.kind == xs.UNTERMINATED_TAG and err.expected.startswith(
            "".join(text[err.position :].split())
        ) and text[err.position :].strip():
            text = text[: err.position] + err.expected
        else:
            return text


@pytest.mark.parametrize(
    ("src", "inserts", "end", "drops"),
    [
        ("<a><b>x</a>", [(7, "</b>")], 11, []),
        ("<a>x", [(4, "</a>")], 4, []),
        ("<a><b>x</", [(7, "</b>"), (9, "</a>")], 7, []),
        ("<a>x</b></a>", [], 12, ["</b>"]),
        ("<a>x</a></a><b/></c>", [], 20, ["</a>", "</c>"]),
        ("<a><b>x</c>", [(11, "</b>"), (11, "</a>")], 11, ["</c>"]),
    ],
)
def test_find_missing_closes(src, inserts, end, drops):
    mends = xs.find_missing_closes(src)
    assert (mends.inserts, mends.end) == (inserts, end)
    assert [src[a:b] for a, b in mends.drops] == drops
    assert mends.apply(src) == mend_by_rescanning(src, ScanOptions())


def test_find_missing_closes_keeps_the_scan_when_nothing_is_missing():
    mends = xs.find_missing_closes("<a>x</a>")
    assert mends.result is not None and pieces_view(mends.result.nodes) == [("a", {}, None, ["x"])]
    assert xs.find_missing_closes("<a>x").result is None


def test_find_missing_closes_closes_thousands_of_raw_elements():
    n = 3_000
    src = "<function=f>" + "".join(f"<parameter=p{i}>v{i} < 1\n" for i in range(n))
    fixed = xs.find_missing_closes(src, FUNCTION_OPTS).apply(src)
    assert fixed.count("</parameter>") == n and fixed.endswith("</parameter></function>")
    assert scan(fixed, FUNCTION_OPTS).ok


@settings(max_examples=300)
@given(st.lists(FRAGMENTS | st.text(max_size=3), max_size=30).map("".join))
def test_one_pass_mends_as_rescanning_does(text):
    for opts in (ScanOptions(), FUNCTION_OPTS):
        assert xs.find_missing_closes(text, opts).apply(text) == mend_by_rescanning(text, opts)
