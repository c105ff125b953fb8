"""Property tests: never raises, deterministic, no text lost, offsets in range.

The text oracle below removes tag syntax with one regular expression written from the spec,
independently of the parser's hand-written scanner.
"""

from __future__ import annotations

import json
import re

from hypothesis import given, settings
from hypothesis import strategies as st
from toolcodec.kindaxml import KindaXMLConfig, parse
from toolcodec.repair.normalize import replace_surrogates

FRAGMENTS = [
    "<",
    "</",
    "/>",
    ">",
    "'",
    '"',
    "=",
    " ",
    "\n",
    "\\",
    "<![CDATA[",
    "]]>",
    "\\<",
    "\\>",
    "cite",
    "note",
    "label",
    "Cite",
    "b",
    "id",
    "x=1",
    "<cite id=1>",
    "</cite>",
    "<note>",
    "</note>",
    "<b>",
    "<br/>",
    "<label/>",
    "<cite id='2",
    ".",
    ",",
    "word",
    "é",
    "😀",
    "\ud800",
    "\udfff",
]
# Few, structural characters: dense in near-tags, open quotes and lines breaking tags.
DENSE = ["<", "/", ">", "\n", "c", "b", "'", '"', "=", " ", "<![CDATA[", "]]>", "\\", "."]
# Near-tags: a "<", an optional "/", a name, a body that may break the tag, an ending.
tagish = st.builds(
    "".join,
    st.tuples(
        st.sampled_from(["<", "</", "<!", "< "]),
        st.sampled_from(["cite", "note", "b", "Cite", "x:y", "1"]),
        st.lists(
            st.sampled_from([" ", "id=1", "'", '"', "=", "\n", "<", "/", "a b"]), max_size=4
        ).map("".join),
        st.sampled_from([">", "/>", " />", ""]),
    ),
)
documents = st.one_of(
    st.lists(st.one_of(st.sampled_from(FRAGMENTS), st.text(max_size=4), tagish), max_size=30),
    st.lists(st.sampled_from(DENSE), max_size=60),
).map("".join)

configs = st.fixed_dictionaries(
    {},
    optional={
        "recognized_tags": st.one_of(st.none(), st.sets(st.sampled_from(["cite", "note", "b"]))),
        "unknown_mode": st.sampled_from(["passthrough", "strip", "treat_as_text"]),
        "autoclose_on_any_tag": st.booleans(),
        "trim_punctuation": st.booleans(),
        "case_sensitive_tags": st.booleans(),
        "duplicate_attribute_policy": st.sampled_from(["last_wins", "first_wins", "keep_list"]),
        "backslash_escapes": st.booleans(),
        "per_tag_recovery_strategy": st.dictionaries(
            st.sampled_from(["*", "cite", "note", "b"]),
            st.sampled_from(
                [
                    "retro_line",
                    "forward_until_tag",
                    "forward_until_newline",
                    "forward_next_token",
                    "noop",
                ]
            ),
        ),
        "self_closing_strategy": st.dictionaries(
            st.sampled_from(["*", "cite", "b"]),
            st.sampled_from(
                [
                    "marker",
                    "retro_line",
                    "forward_until_tag",
                    "forward_until_newline",
                    "forward_next_token",
                ]
            ),
        ),
    },
)

_MARKUP = (
    r"<!\[CDATA\[(?P<cdata>.*?)(?:\]\]>|\Z)"  # CDATA, possibly unterminated
    r"|<(?P<end>/?)(?P<name>[A-Za-z][A-Za-z0-9_\-:.]*)[^<>\n]*>"  # a tag on one line
)
ORACLE = re.compile(_MARKUP, re.DOTALL)
ORACLE_ESCAPES = re.compile(_MARKUP + r"|\\(?P<esc>[<>])", re.DOTALL)


def without_tag_syntax(text: str, cfg: KindaXMLConfig) -> str:
    """The input with CDATA delimiters, escapes and the removed tags' syntax taken out."""
    recognized = cfg.recognized_tags
    fold = (lambda s: s) if cfg.case_sensitive_tags else str.lower
    if recognized is not None:
        recognized = {fold(n) for n in recognized}

    def replace(m: re.Match) -> str:
        if m.group("cdata") is not None:
            return m.group("cdata")
        if m.lastgroup == "esc":
            return m.group("esc")
        known = recognized is None or fold(m.group("name")) in recognized
        # recognised tags are removed (stray closers too: the policy here is "drop");
        # unknown tags are removed only in strip mode.
        return "" if known or cfg.unknown_mode == "strip" else m.group(0)

    pattern = ORACLE_ESCAPES if cfg.backslash_escapes else ORACLE
    return pattern.sub(replace, text)


def check_invariants(text: str, cfg: KindaXMLConfig) -> None:
    result = parse(text, config=cfg)
    data = result.to_dict()
    json.dumps(data, ensure_ascii=False)  # serialisable, lone surrogates included
    assert parse(text, config=cfg).to_dict() == data  # deterministic

    text = replace_surrogates(text)[0]  # documented: U+FFFD stands for each lone surrogate
    assert result.text == without_tag_syntax(text, cfg)
    assert "".join(s.text for s in result.segments) == result.text
    assert all(s.text for s in result.segments)
    n = len(result.text)
    for marker in result.markers:
        assert 0 <= marker.pos <= n
    for ann in result.annotations:
        assert 0 <= ann.start < ann.end <= n
    ids = [a.id for a in result.annotations] + [m.id for m in result.markers]
    assert sorted(ids) == list(range(len(ids)))  # every recognised tag is reported once
    offset = 0
    for seg in result.segments:  # each segment lists exactly the spans covering it
        covering = [a.id for a in result.annotations if a.start <= offset < a.end]
        assert [a.id for a in seg.annotations] == covering
        offset += len(seg.text)
    # data above was read before the lists were built; built, they give the same data
    assert result.to_dict() == data


@settings(max_examples=200)
@given(documents, configs)
def test_invariants_hold_for_any_document_and_config(text, options):
    check_invariants(text, KindaXMLConfig(**options))


@settings(max_examples=200)
@given(st.text(max_size=60))
def test_arbitrary_unicode_with_default_config(text):
    check_invariants(text, KindaXMLConfig())


@settings(max_examples=100)
@given(documents)
def test_the_tag_count_matches_the_oracle(text):
    # with every name recognised, each start or self-closing tag yields one annotation or
    # marker; end tags yield none
    result = parse(text, recognized_tags=None)
    starts = sum(
        1 for m in ORACLE.finditer(text) if m.group("name") is not None and not m.group("end")
    )
    assert len(result.annotations) + len(result.markers) == starts
