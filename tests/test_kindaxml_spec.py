"""Every example of spec §9 and §10, with the exact segments the recovery rules imply."""

from __future__ import annotations

import json

from toolcodec.kindaxml import parse


def segs(result):
    """Segments as (text, [(tag, attrs), ...]) for compact comparison."""
    return [(s.text, [(a.tag, a.attrs) for a in s.annotations]) for s in result.segments]


def reasons(result):
    return [r.reason for r in result.recoveries]


def test_9_1_properly_closed():
    r = parse('We shipped <cite id="1">last week</cite>.')
    assert segs(r) == [
        ("We shipped ", []),
        ("last week", [("cite", {"id": "1"})]),
        (".", []),
    ]
    assert r.annotations[0].recovery == ()
    assert r.markers == [] and r.recoveries == []


def test_9_2_unclosed_autoclosed_by_next_tag_applies_retroactively():
    r = parse("We shipped last week <cite id=1> <note>Details...</note>")
    assert segs(r) == [
        ("We shipped last week ", [("cite", {"id": "1"})]),
        (" ", []),
        ("Details...", [("note", {})]),
    ]
    cite = r.annotations[0]
    assert cite.recovery == ("autoclosed", "unclosed_retro_line")
    assert r.annotations[1].recovery == ()  # the note closed properly


def test_9_2_with_trimming():
    r = parse("We shipped last week <cite id=1> <note>Details...</note>", trim_punctuation=True)
    assert segs(r) == [
        ("We shipped last week", [("cite", {"id": "1"})]),
        ("  ", []),
        ("Details...", [("note", {})]),  # explicit spans are never trimmed
    ]


def test_9_3_broken_quote_closes_at_tag_end():
    r = parse("<cite id='1, 2>Evidence</cite>")
    assert segs(r) == [("Evidence", [("cite", {"id": "1, 2"})])]
    assert r.annotations[0].recovery == ("quote_closed_at_tag_end",)
    assert reasons(r) == ["quote_closed_at_tag_end"]


def test_9_4_unknown_tag_passthrough():
    r = parse("Hello <weird x=1>world</weird>", unknown_mode="passthrough")
    assert segs(r) == [("Hello <weird x=1>world</weird>", [])]


def test_9_4_unknown_tag_strip_and_treat_as_text():
    stripped = parse("Hello <weird x=1>world</weird>", unknown_mode="strip")
    assert segs(stripped) == [("Hello world", [])]
    assert reasons(stripped) == ["unknown_tag_stripped", "unknown_tag_stripped"]
    as_text = parse("Hello <weird x=1>world</weird>", unknown_mode="treat_as_text")
    assert segs(as_text) == [("Hello <weird x=1>world</weird>", [])]
    assert as_text.recoveries == []


def test_9_5_cdata_is_literal():
    r = parse("<note><![CDATA[Use < and > freely here]]></note>")
    assert segs(r) == [("Use < and > freely here", [("note", {})])]
    assert r.annotations[0].recovery == ()


def test_10_1_nested_intent_flattens():
    r = parse("<A>outer <B>inner</B> more</A>", recognized_tags={"A", "B"})
    assert segs(r) == [("outer ", []), ("inner", [("B", {})]), (" more", [])]
    # <A> is closed before <B>; retro_line finds no text before it, so it is a marker.
    [marker] = r.markers
    assert (marker.tag, marker.pos) == ("A", 0)
    assert marker.recovery == ("autoclosed", "unclosed_retro_line")
    assert reasons(r) == ["autoclosed", "stray_end_tag_dropped"]
    assert r.recoveries[1].tag == "A" and r.recoveries[1].position == 26


def test_10_1_with_forward_strategy_a_annotates_its_leading_text():
    r = parse(
        "<A>outer <B>inner</B> more</A>",
        recognized_tags={"A", "B"},
        per_tag_recovery_strategy={"A": "forward_until_tag"},
    )
    assert segs(r) == [("outer ", [("A", {})]), ("inner", [("B", {})]), (" more", [])]


def test_10_2_attribute_edge_weirdness():
    r = parse('<tag a="x y z b=2>', recognized_tags={"tag"})
    [marker] = r.markers
    assert marker.attrs == {"a": "x y z b=2"}
    assert marker.recovery[0] == "quote_closed_at_tag_end"
    assert r.text == ""


def test_10_3_literal_less_than_without_cdata():
    # "<" not followed by a name, or a "tag" that never reaches ">" on its line, is text.
    r = parse("if a < b and c <d then\n<cite id=1> done")
    assert r.text == "if a < b and c <d then\n done"
    # A name right after "<" does start a tag: it is unknown here, so passed through.
    r2 = parse("List<String> items <note>x</note>")
    assert segs(r2) == [("List<String> items ", []), ("x", [("note", {})])]


def test_10_4_stray_closers_dropped_by_default_and_kept_on_request():
    r = parse("Done.</cite> Next")
    assert segs(r) == [("Done. Next", [])]
    assert reasons(r) == ["stray_end_tag_dropped"]
    kept = parse("Done.</cite> Next", stray_end_tag_policy="passthrough")
    assert segs(kept) == [("Done.</cite> Next", [])]
    assert reasons(kept) == ["stray_end_tag_kept"]


def test_results_are_json_data():
    r = parse("We shipped last week <cite id=1> <note>Details...</note><br/>")
    data = r.to_dict()
    assert json.loads(json.dumps(data)) == data
    assert set(data) == {"text", "segments", "annotations", "markers", "recoveries"}
    assert data["segments"][0] == {
        "text": "We shipped last week ",
        "annotations": [
            {
                "id": 0,
                "tag": "cite",
                "attrs": {"id": "1"},
                "recovery": ["autoclosed", "unclosed_retro_line"],
            }
        ],
    }
    assert data["annotations"][0]["start"] == 0 and data["annotations"][0]["end"] == 21
