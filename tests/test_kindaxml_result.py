"""The result object: lists built on first read, shared records, and a small heap footprint."""

from __future__ import annotations

import gc

import pytest
from toolcodec.kindaxml import Annotation, ParseResult, Recovery, Segment, parse

DOC = "We shipped <cite id=1> <note>Details</note> <cite id=2/> end <b>x</b>\n<cite>"


def test_each_list_is_built_once_and_then_kept():
    r = parse(DOC)
    for name in ("segments", "annotations", "markers", "recoveries"):
        assert getattr(r, name) is getattr(r, name)


def test_to_dict_is_the_same_before_and_after_the_lists_are_read():
    lazy = parse(DOC).to_dict()
    r = parse(DOC)
    read = (r.segments, r.annotations, r.markers, r.recoveries)
    assert all(read)
    assert r.to_dict() == lazy
    assert [s.to_dict() for s in r.segments] == lazy["segments"]
    assert [a.to_dict() for a in r.annotations] == lazy["annotations"]
    assert [m.to_dict() for m in r.markers] == lazy["markers"]
    assert [x.to_dict() for x in r.recoveries] == lazy["recoveries"]


def test_segments_share_the_annotation_records():
    r = parse(DOC)
    in_segments = {id(a) for s in r.segments for a in s.annotations}
    assert in_segments == {id(a) for a in r.annotations}


def test_changes_to_a_read_list_show_in_to_dict():
    r = parse(DOC)
    r.recoveries.insert(0, Recovery("custom", 0, "added by the caller"))
    r.markers.clear()
    data = r.to_dict()
    assert data["recoveries"][0] == {"reason": "custom", "position": 0,
                                     "message": "added by the caller"}
    assert data["markers"] == []
    assert data["annotations"] == parse(DOC).to_dict()["annotations"]


def test_each_parse_gets_its_own_attribute_dicts():
    first, second = parse(DOC), parse(DOC)
    first.annotations[0].attrs["id"] = "changed"
    assert second.annotations[0].attrs == {"id": "1"}
    assert first.to_dict()["annotations"][0]["attrs"] == {"id": "changed"}


def test_a_hand_built_result_holds_what_it_was_given():
    ann = Annotation(0, "cite", {}, 0, 2, (2, 8))
    r = ParseResult("ab", [Segment("ab", (ann,))], [ann], [], [])
    assert r.segments[0].annotations == (ann,) and r.annotations == [ann]
    assert r.to_dict()["annotations"] == [ann.to_dict()]
    assert r == ParseResult("ab", [Segment("ab", (ann,))], [ann], [], [])
    assert r != ParseResult("ab", [Segment("ab")], [], [], [])


def test_equality_repr_and_hashing_follow_the_fields():
    assert parse(DOC) == parse(DOC)
    assert parse(DOC) != parse(DOC + "!")
    text = repr(parse("a <cite>"))
    assert text.startswith("ParseResult(text='a ', segments=[Segment(text='a ',")
    assert "recoveries=[Recovery(reason='unclosed_at_end'" in text
    with pytest.raises(TypeError):
        hash(parse(DOC))


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"self_closing_strategy": {"*": "forward_next_token"}},
        {"per_tag_recovery_strategy": {"*": "forward_until_newline"}},
    ],
)
def test_a_parse_keeps_no_object_per_tag_for_the_collector(options):
    # Objects the collector tracks and that live as long as the result make CPython run
    # full collections while a large document is parsed; the parse keeps its per-tag data
    # in arrays, strings and untracked tuples instead (records are built when read).
    text = "claim <cite id=1> <note>a b <label>c d <todo/>e " * 3000
    gc.collect()
    before = len(gc.get_objects())
    result = parse(text, **options)
    gc.collect()
    held = len(gc.get_objects()) - before
    assert held < 100, held
    assert len(result.annotations) + len(result.markers) == 12000


def test_to_dict_of_many_unclosed_tags_sets_off_no_collection() -> None:
    """Every collection during ``to_dict`` walked the whole growing output again: 1 MB of
    unclosed tags took 2.5x the time per doubling. Counted, not timed."""
    import gc

    from toolcodec.kindaxml import parse

    result = parse("<note>a word\n" * 20_000)
    runs: list[int] = []

    def count(phase: str, info: dict) -> None:
        if phase == "start":
            runs.append(info["generation"])

    gc.callbacks.append(count)
    try:
        out = result.to_dict()
    finally:
        gc.callbacks.remove(count)
    assert len(out["annotations"]) == 20_000
    assert runs in ([], [0])  # at most the one young collection once it is on again
    assert gc.isenabled()
