"""Attribute forms and recovery (spec §5) and configuration validation (spec §12)."""

from __future__ import annotations

import pytest
from toolcodec.kindaxml import KindaXMLConfig, parse
from toolcodec.kindaxml.attrs import parse_attrs
from toolcodec.kindaxml.config import DEFAULT_RECOGNIZED_TAGS


def test_every_attribute_form():
    attrs, recoveries = parse_attrs(""" a="1 2" b='x"y' c=3 d e = "5" f= six g ='7'""")
    assert attrs == {"a": "1 2", "b": 'x"y', "c": "3", "d": True, "e": "5", "f": "six", "g": "7"}
    assert recoveries == []


def test_attributes_reach_the_annotation():
    r = parse("""<cite id = "1" page=4 draft src='a b'>x</cite>""")
    assert r.annotations[0].attrs == {"id": "1", "page": "4", "draft": True, "src": "a b"}


@pytest.mark.parametrize(
    ("body", "attrs", "reason"),
    [
        (" id='1, 2", {"id": "1, 2"}, "quote_closed_at_tag_end"),
        (' a="x y z b=2', {"a": "x y z b=2"}, "quote_closed_at_tag_end"),
        (" a=", {"a": ""}, "attribute_missing_value"),
        (' ="x" b', {"b": True}, "attribute_missing_name"),
        (" 'lone' b=1", {"b": "1"}, "attribute_missing_name"),
    ],
)
def test_attribute_recovery(body, attrs, reason):
    got, recoveries = parse_attrs(body)
    assert got == attrs and recoveries == [reason]


def test_open_quote_in_self_closing_tag_ends_before_slash():
    r = parse('x<cite id="7/>y')
    assert r.text == "xy"
    assert r.markers[0].attrs == {"id": "7"}
    assert r.markers[0].recovery == ("quote_closed_at_tag_end",)


def test_unquoted_value_stops_before_self_closing_slash():
    r = parse("<cite id=7/>")
    assert r.markers[0].attrs == {"id": "7"}


@pytest.mark.parametrize(
    ("policy", "expected"),
    [("last_wins", "3"), ("first_wins", "1"), ("keep_list", ["1", "2", "3"])],
)
def test_duplicate_attribute_policies(policy, expected):
    r = parse("<cite id=1 id=2 id=3 p=x>t</cite>", duplicate_attribute_policy=policy)
    ann = r.annotations[0]
    assert ann.attrs == {"id": expected, "p": "x"}
    assert ann.recovery == ("duplicate_attribute",)
    assert [x.reason for x in r.recoveries] == ["duplicate_attribute"]


# -- configuration -----------------------------------------------------------------------


def test_defaults():
    cfg = KindaXMLConfig()
    assert cfg.recognized_tags == DEFAULT_RECOGNIZED_TAGS
    assert cfg.unknown_mode == "passthrough"
    assert cfg.autoclose_on_any_tag is True
    assert cfg.trim_punctuation is False and cfg.case_sensitive_tags is True
    assert cfg.stray_end_tag_policy == "drop"
    assert cfg.duplicate_attribute_policy == "last_wins"
    assert cfg.recovery_strategy("cite") == "retro_line"
    assert cfg.recovery_strategy("note") == "forward_until_tag"
    assert cfg.recovery_strategy("label") == "forward_next_token"
    assert cfg.self_closing("cite") == "marker"


def test_config_object_and_keyword_overrides_agree():
    text = "x <Cite id=1>y <weird/> z"
    cfg = KindaXMLConfig(recognized_tags=["Cite"], unknown_mode="strip")
    by_object = parse(text, config=cfg).to_dict()
    by_keywords = parse(text, recognized_tags={"Cite"}, unknown_mode="strip").to_dict()
    assert by_object == by_keywords
    overridden = parse(text, config=cfg, unknown_mode="passthrough")
    assert "<weird/>" in overridden.text and "<weird/>" not in by_object["text"]


@pytest.mark.parametrize(
    ("options", "error", "fragment"),
    [
        ({"recognised_tags": {"cite"}}, TypeError, "recognised_tags"),
        ({"unknown_mode": "keep"}, ValueError, "unknown_mode"),
        ({"stray_end_tag_policy": "raise"}, ValueError, "stray_end_tag_policy"),
        ({"duplicate_attribute_policy": "last"}, ValueError, "duplicate_attribute_policy"),
        ({"recognized_tags": "cite,note"}, TypeError, "recognized_tags"),
        ({"recognized_tags": {"1cite"}}, ValueError, "1cite"),
        ({"per_tag_recovery_strategy": {"cite": "backwards"}}, ValueError, "backwards"),
        ({"per_tag_recovery_strategy": ["cite"]}, TypeError, "mapping"),
        ({"self_closing_strategy": {"cite": "noop"}}, ValueError, "self_closing_strategy"),
        ({"trim_punctuation": "yes"}, TypeError, "trim_punctuation"),
    ],
)
def test_bad_config_raises_with_a_clear_message(options, error, fragment):
    with pytest.raises(error, match=fragment):
        parse("text", **options)


def test_config_must_be_a_config_and_text_a_str():
    with pytest.raises(TypeError, match="KindaXMLConfig"):
        parse("x", config={"unknown_mode": "strip"})
    with pytest.raises(TypeError, match="str"):
        parse(b"<cite>x</cite>")


def test_config_is_immutable_and_copies_caller_tables():
    table = {"cite": "noop"}
    cfg = KindaXMLConfig(per_tag_recovery_strategy=table)
    table["cite"] = "retro_line"
    assert cfg.recovery_strategy("cite") == "noop"
    with pytest.raises(AttributeError):
        cfg.unknown_mode = "strip"
