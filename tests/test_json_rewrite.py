"""The repair fast path (``toolcodec.repair.json_rewrite``) answers only what the full reader would.

Whenever the rewrite answers, the reader given the same text must agree: the same value, types
included, and the same repair ids in the same order. Texts are JSON values written with the
common damage (Python literals, single quotes, trailing commas, unquoted keys), then sometimes
cut or spliced with fragments that the rewrite must decline or read exactly as the reader.
"""

from __future__ import annotations

import json
import re

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from toolcodec.repair.heuristics import same_value
from toolcodec.repair.json_rewrite import rewrite_repair
from toolcodec.repair.jsonrepair import _read, repair_json
from toolcodec.results.limits import DEFAULT_LIMITS

_IDENT = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
FRAGMENTS = ["'", '"', ",", ", ", "]", "}", "[", "{", ":", "True", "None", "false", " ", "\n",
             "x", "1", "-", ".", "e", "\\", "\\u003a", "# c\n", "// c\n", "a:", "'a':", "..."]


def scalar_text(value: object, draw) -> str:
    if value is True or value is False or value is None:
        text = json.dumps(value)
        return {"true": "True", "false": "False", "null": "None"}[text] if draw(st.booleans()) \
            else text
    if isinstance(value, str) and not set(value) & set("'\"\\") and draw(st.booleans()):
        return f"'{value}'" if all(ord(c) >= 0x20 for c in value) else json.dumps(value)
    return json.dumps(value)


def damaged(value: object, draw) -> str:
    """``value`` written as JSON with random common damage."""
    if isinstance(value, dict):
        parts = []
        for k, v in value.items():
            key = k if _IDENT.fullmatch(k) and draw(st.booleans()) else scalar_text(k, draw)
            parts.append(f"{key}: {damaged(v, draw)}")
        comma = "," if parts and draw(st.booleans()) else ""
        return "{" + ", ".join(parts) + comma + "}"
    if isinstance(value, list):
        parts = [damaged(v, draw) for v in value]
        comma = "," if parts and draw(st.booleans()) else ""
        return "[" + ", ".join(parts) + comma + "]"
    return scalar_text(value, draw)


keys = st.one_of(st.from_regex(_IDENT, fullmatch=True).filter(lambda k: len(k) < 8),
                 st.text(max_size=5), st.sampled_from(["True", "None", "null", "e", "a:b"]))
scalars = st.one_of(st.none(), st.booleans(), st.integers(-(2**70), 2**70),
                    st.floats(allow_nan=False, allow_infinity=False),
                    st.text(max_size=6), st.sampled_from(["it's", 'say "x"', "a: b", "True"]))
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4)
                      | st.dictionaries(keys, inner, max_size=4), max_leaves=12)
containers = st.one_of(st.lists(values, max_size=4), st.dictionaries(keys, values, max_size=4))


def agree(text: str) -> bool:
    """Check the rewrite against the reader on ``text``; whether the rewrite answered."""
    quick = rewrite_repair(text)
    if quick is None:
        return False
    full = _read(text, DEFAULT_LIMITS)
    assert full.ok, (text, quick, full.errors)
    assert same_value(quick[0], full.value), (text, quick[0], full.value)
    assert quick[1] == full.repairs, (text, quick[1], full.repairs)
    return True


@settings(max_examples=300)
@given(containers, st.data())
@example({"a": True, "b": [None, "x"]}, None)
def test_the_rewrite_agrees_with_the_reader(value, data):
    draw = data.draw if data is not None else (lambda s: True)
    agree(damaged(value, draw))


@settings(max_examples=300)
@given(containers, st.data())
def test_the_rewrite_agrees_with_the_reader_on_spliced_text(value, data):
    text = damaged(value, data.draw)
    for _ in range(data.draw(st.integers(1, 3))):
        at = data.draw(st.integers(0, len(text)))
        text = text[:at] + data.draw(st.sampled_from(FRAGMENTS)) + text[at:]
    agree(text)


@pytest.mark.parametrize("text, value, repairs", [
    ("{'a': True, b: [1, None,],}", {"a": True, "b": [1, None]},
     ["json.single_quotes", "json.python_literal", "json.unquoted_key", "json.trailing_comma"]),
    ("{'a': 'x', 'b': {'c': false}}", {"a": "x", "b": {"c": False}}, ["json.single_quotes"]),
    ('{"a": "x:y", b: 1}', {"a": "x:y", "b": 1}, ["json.unquoted_key"]),
])
def test_common_damage_is_rewritten(text, value, repairs):
    assert rewrite_repair(text) == (value, repairs)
    assert agree(text)
    res = repair_json(text)
    assert res.ok and res.value == value and res.repairs == repairs


@pytest.mark.parametrize("text", [
    '{"a": 1, "a": 2,}',  # a key twice: the reader refuses it
    '{"a": "\\u003a", b: 1}',  # an escaped colon would blur the key count
    "{a: 1",  # cut
    "['it's']",  # a quote inside a single-quoted string
    "{'a': 1} // c",  # a comment
    "Here: {a: 1}",  # prose
    '{"a": 1}',  # no damage: strict parsing's
    "{None: 1}",  # a Python word as a key
])
def test_everything_else_is_declined(text):
    assert rewrite_repair(text) is None
