"""Recovery strategies, auto-close, unknown and stray tags, CDATA and escapes."""

from __future__ import annotations

import pytest
from toolcodec.kindaxml import parse


def segs(result):
    return [(s.text, [a.tag for a in s.annotations]) for s in result.segments]


# -- retro_line ---------------------------------------------------------------------------


def test_retro_line_at_end_of_document():
    r = parse("Some claim here <cite id=2>")
    assert segs(r) == [("Some claim here ", ["cite"])]
    assert r.annotations[0].recovery == ("unclosed_at_end", "unclosed_retro_line")


def test_retro_line_starts_at_the_last_newline():
    r = parse("First line.\nSecond claim <cite id=1>")
    assert segs(r) == [("First line.\n", []), ("Second claim ", ["cite"])]


def test_retro_line_starts_after_the_previous_recognised_tag():
    r = parse("one <cite id=1> two <cite id=2>")
    assert segs(r) == [("one ", ["cite"]), (" two ", ["cite"])]
    assert [a.attrs["id"] for a in r.annotations] == ["1", "2"]
    r2 = parse("<note>a</note> and b <cite id=3>.")
    assert segs(r2) == [("a", ["note"]), (" and b ", ["cite"]), (".", [])]


def test_retro_line_at_line_start_gives_a_marker():
    r = parse("Claim.\n<cite id=1>")
    assert r.annotations == []
    assert [(m.tag, m.pos) for m in r.markers] == [("cite", 7)]


def test_trim_keeps_meaningful_punctuation():
    r = parse("- Revenue grew 5%. <cite id=3>", trim_punctuation=True)
    assert segs(r) == [("- ", []), ("Revenue grew 5%", ["cite"]), (". ", [])]


def test_trim_can_empty_a_span_into_a_marker():
    r = parse("... <cite id=1>", trim_punctuation=True)
    assert r.annotations == [] and [m.pos for m in r.markers] == [4]


# -- forward strategies ----------------------------------------------------------------


def test_note_defaults_to_forward_until_tag():
    r = parse("<note>Heads up <cite id=1> rest")
    # note runs to the next tag; the cite then cites the same text retroactively
    assert segs(r) == [("Heads up ", ["note", "cite"]), (" rest", [])]
    assert r.annotations[0].recovery == ("autoclosed", "unclosed_forward_until_tag")


def test_forward_until_tag_stops_at_newline():
    r = parse("<note>line one\nline two")
    assert segs(r) == [("line one", ["note"]), ("\nline two", [])]


def test_forward_until_newline_runs_past_tags():
    r = parse(
        "<x>alpha <cite id=1>beta\ngamma",
        recognized_tags={"x", "cite"},
        per_tag_recovery_strategy={"x": "forward_until_newline"},
    )
    assert segs(r) == [("alpha ", ["x", "cite"]), ("beta", ["x"]), ("\ngamma", [])]


def test_label_defaults_to_forward_next_token():
    r = parse("<label>Important: do it")
    assert segs(r) == [("Important:", ["label"]), (" do it", [])]
    r2 = parse("<label>   \nnext")
    assert r2.annotations == [] and r2.markers[0].recovery[-1] == "unclosed_forward_next_token"


def test_noop_strategy_leaves_only_a_marker():
    r = parse("a <cite id=1>b", per_tag_recovery_strategy={"cite": "noop"})
    assert segs(r) == [("a b", [])]
    assert r.markers[0].recovery == ("unclosed_at_end", "unclosed_noop")


def test_star_sets_the_strategy_of_unnamed_tags():
    r = parse("<todo>fix it", per_tag_recovery_strategy={"*": "forward_until_newline"})
    assert segs(r) == [("fix it", ["todo"])]
    # named defaults survive a "*" override
    r2 = parse("x <note>y", per_tag_recovery_strategy={"*": "noop"})
    assert segs(r2) == [("x ", []), ("y", ["note"])]


# -- self-closing ----------------------------------------------------------------------


def test_self_closing_is_a_marker_by_default():
    r = parse("See here<cite id=4/> and on.")
    assert r.text == "See here and on."
    assert [(m.tag, m.pos, m.attrs) for m in r.markers] == [("cite", 8, {"id": "4"})]
    assert r.markers[0].recovery == ()


def test_self_closing_strategies():
    text = "Claim<cite id=1/> next word\nline"
    r = parse(text, self_closing_strategy={"cite": "retro_line"})
    assert segs(r) == [("Claim", ["cite"]), (" next word\nline", [])]
    r = parse(text, self_closing_strategy={"cite": "forward_next_token"})
    assert segs(r) == [("Claim ", []), ("next", ["cite"]), (" word\nline", [])]
    r = parse(text, self_closing_strategy={"cite": "forward_until_newline"})
    assert segs(r) == [("Claim", []), (" next word", ["cite"]), ("\nline", [])]
    r = parse("a<todo/>b c<note>d</note>", self_closing_strategy={"todo": "forward_until_tag"})
    assert segs(r) == [("a", []), ("b c", ["todo"]), ("d", ["note"])]


def test_self_closing_closes_the_open_tag():
    r = parse("<note>text<cite id=1/>more")
    assert segs(r) == [("text", ["note"]), ("more", [])]


# -- auto-close, unknown and stray tags ------------------------------------------------


def test_autoclose_on_unknown_tags_is_configurable():
    text = "<note>bold <b>x</b> end</note>"
    assert segs(parse(text)) == [("bold ", ["note"]), ("<b>x</b> end", [])]
    r = parse(text, autoclose_on_any_tag=False)
    assert segs(r) == [("bold <b>x</b> end", ["note"])]
    assert r.annotations[0].recovery == ()


def test_strip_mode_removes_unknown_markup_and_still_autocloses():
    r = parse("<note>bold <b>x</b> end", unknown_mode="strip")
    assert segs(r) == [("bold ", ["note"]), ("x end", [])]


def test_treat_as_text_never_autocloses():
    r = parse('<note>a <b x="1>c</note>', unknown_mode="treat_as_text")
    assert segs(r) == [('a <b x="1>c', ["note"])]


def test_mismatched_end_tag_autocloses_then_is_stray():
    r = parse("Claim <cite id=1>x</note> y")
    assert segs(r) == [("Claim ", ["cite"]), ("x y", [])]
    assert [x.reason for x in r.recoveries] == ["autoclosed", "stray_end_tag_dropped"]


def test_case_sensitivity():
    assert segs(parse("<CITE id=1>x</Cite>")) == [("<CITE id=1>x</Cite>", [])]
    r = parse("<CITE id=1>x</Cite>", case_sensitive_tags=False)
    assert segs(r) == [("x", ["cite"])]


def test_every_tag_recognised_with_none():
    r = parse("<anything k=v>x</anything><z/>", recognized_tags=None)
    assert segs(r) == [("x", ["anything"])]
    assert [m.tag for m in r.markers] == ["z"]


def test_unknown_end_tag_follows_unknown_mode():
    assert parse("a</b>c").text == "a</b>c"
    assert parse("a</b>c", unknown_mode="strip").text == "ac"


# -- literal text -----------------------------------------------------------------------


def test_unterminated_cdata_runs_to_end():
    r = parse("<note><![CDATA[a < b <cite> c")
    assert segs(r) == [("a < b <cite> c", ["note"])]
    assert [x.reason for x in r.recoveries][0] == "cdata_unterminated"


def test_cdata_does_not_close_an_open_tag():
    r = parse("<cite id=1>see <![CDATA[<x>]]> here</cite>")
    assert segs(r) == [("see <x> here", ["cite"])]


def test_backslash_escapes_are_opt_in():
    text = r"a \<cite id=1\> b"
    r = parse(text, backslash_escapes=True)
    assert segs(r) == [("a <cite id=1> b", [])]
    off = parse(text)
    assert off.text == "a \\ b"  # without escapes the tag is real: "\<cite id=1\>" -> "\"
    assert parse(r"path C:\dir \n", backslash_escapes=True).text == r"path C:\dir \n"


def test_tags_do_not_span_lines_or_contain_lt():
    assert parse("x <cite id='1\n'> y").text == "x <cite id='1\n'> y"
    r = parse('<cite title="a<b">t</cite>')
    assert r.text == '<cite title="a<b">t'  # "<cite title=..." is text, "<b ...>" passes


# -- offsets ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "We shipped last week <cite id=1> <note>Details...</note>",
        "<note>Heads up <cite id=1> rest\n<label>x y",
        "a<todo/>b",
    ],
)
def test_annotation_offsets_match_segments(text):
    r = parse(text)
    for ann in r.annotations:
        covered = "".join(s.text for s in r.segments if ann in s.annotations)
        assert covered == r.text[ann.start : ann.end]
        assert r.text.startswith(covered, ann.start)
        assert text[ann.source[0] : ann.source[1]].startswith("<" + ann.tag)


def test_text_passthrough_tags_escapes_and_cdata_tile_the_output_in_order():
    # Every way input reaches the output in one document: text, unrecognised tags kept
    # as text (the first one after <cite> closes it), a stray end tag kept, an escape and
    # a CDATA block. Input offsets: <cite> at 5, <y> at 12, </cite> at 16.
    doc = r"a<x>b<cite>c<y>d</cite>e\<f><![CDATA[<g>]]>h</z>"
    r = parse(doc, backslash_escapes=True, stray_end_tag_policy="passthrough")
    assert r.text == "a<x>bc<y>d</cite>e<f><g>h</z>"
    [cite] = r.annotations
    assert (cite.tag, cite.start, cite.end, cite.source) == ("cite", 0, 5, (5, 11))
    assert cite.recovery == ("autoclosed", "unclosed_retro_line")
    assert [(x.reason, x.position, x.tag) for x in r.recoveries] == [
        ("autoclosed", 5, "cite"),
        ("stray_end_tag_kept", 16, "cite"),
    ]


def test_stripped_tags_close_the_open_tag_and_leave_no_text():
    r = parse("a<x>b<cite>c<y>d", unknown_mode="strip")
    assert r.text == "abcd"
    [cite] = r.annotations
    assert (cite.start, cite.end) == (0, 2)
    assert [(x.reason, x.position) for x in r.recoveries] == [
        ("unknown_tag_stripped", 1),
        ("autoclosed", 5),
        ("unknown_tag_stripped", 12),
    ]
