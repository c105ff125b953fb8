"""Payload normalisation: bidi controls removed, keys NFKC-folded, nothing else touched."""

from __future__ import annotations

import unicodedata

from hypothesis import given, settings
from hypothesis import strategies as st
from toolcodec.repair import normalize
from toolcodec.repair.normalize import (
    BIDI_CONTROLS,
    _replace_surrogates_walk,
    normalize_payload,
    replace_surrogates_in,
    strip_bidi,
)
from toolcodec.schema.budget import count_values

LISTED = (
    ["\u200e", "\u200f"]
    + [chr(c) for c in range(0x202A, 0x202F)]
    + [chr(c) for c in range(0x2066, 0x206A)]
)


def test_bidi_controls_are_exactly_the_listed_code_points():
    assert set(LISTED) == BIDI_CONTROLS
    assert len(BIDI_CONTROLS) == 11


def test_strip_bidi_removes_controls_and_reports():
    assert strip_bidi("a\u202eb\u2066c\u200f") == ("abc", True)


def test_strip_bidi_keeps_same_object_when_clean():
    text = "שלום, world \u200d"  # ZWJ is not a bidi control
    out, changed = strip_bidi(text)
    assert out is text and not changed


def test_keys_lose_bidi_and_get_nfkc():
    value = {"ｃｉｔｙ": "Oslo", "da\u200eys": 3}
    out, repairs = normalize_payload(value)
    assert out == {"city": "Oslo", "days": 3}
    assert list(out) == ["city", "days"]  # order kept
    assert repairs == ["text.nfkc", "text.bidi_removed"]


def test_string_values_lose_bidi_but_keep_compatibility_forms_by_default():
    out, repairs = normalize_payload({"name": "ＡＢＣ\u202e.txt"})
    assert out == {"name": "ＡＢＣ.txt"}
    assert repairs == ["text.bidi_removed"]


def test_string_values_nfkc_when_asked():
    out, repairs = normalize_payload({"name": "ＡＢＣ"}, nfkc_strings=True)
    assert out == {"name": "ABC"}
    assert repairs == ["text.nfkc"]


def test_nested_containers_are_walked_and_input_not_mutated():
    value = {"a": [{"b\u200f": ["x\u2067y", 1, None, True, 2.5]}]}
    out, repairs = normalize_payload(value)
    assert out == {"a": [{"b": ["xy", 1, None, True, 2.5]}]}
    assert value == {"a": [{"b\u200f": ["x\u2067y", 1, None, True, 2.5]}]}
    assert repairs == ["text.bidi_removed"]


def test_unchanged_payload_is_returned_as_is():
    value = {"city": "Zürich", "list": ["a", {"k": "ｖ"}], "n": 1}
    out, repairs = normalize_payload(value)
    assert out is value and repairs == []


def test_unchanged_siblings_are_shared_not_copied():
    inner = {"deep": ["x"]}
    value = {"keep": inner, "fix": "a\u200eb"}
    out, _ = normalize_payload(value)
    assert out is not value and out["keep"] is inner


def test_key_collision_keeps_both_values():
    value = {"a\u200e": 1, "a": 2}
    out, repairs = normalize_payload(value)
    assert out == value and repairs == []
    value = {"ｘ": 1, "x\u200e": 2}
    out, repairs = normalize_payload(value)
    assert out == {"x": 1, "x\u200e": 2}
    assert repairs == ["text.nfkc"]


def test_non_container_values_pass_through():
    for value in (None, 5, 2.5, True, b"\xe2\x80\x8e"):
        out, repairs = normalize_payload(value)
        assert out is value and repairs == []
    out, repairs = normalize_payload("\u200eabc")
    assert (out, repairs) == ("abc", ["text.bidi_removed"])


# --- properties ---------------------------------------------------------------------------

text_with_controls = st.text(
    alphabet=st.one_of(st.characters(codec="utf-8"), st.sampled_from(LISTED)), max_size=30
)
json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | text_with_controls,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(text_with_controls, children, max_size=4)
    ),
    max_leaves=20,
)


@settings(max_examples=200)
@given(text_with_controls)
def test_strip_bidi_removes_exactly_the_listed_code_points(text):
    out, changed = strip_bidi(text)
    assert out == "".join(ch for ch in text if ch not in BIDI_CONTROLS)
    assert changed == (out != text)


@settings(max_examples=200)
@given(json_values, st.booleans())
def test_normalize_is_idempotent(value, nfkc_strings):
    once, _ = normalize_payload(value, nfkc_strings=nfkc_strings)
    twice, repairs = normalize_payload(once, nfkc_strings=nfkc_strings)
    assert twice is once and repairs == []


def _clean(value) -> bool:
    """True if no key has bidi controls or non-NFKC text and no string has bidi controls."""
    if isinstance(value, str):
        return not any(ch in BIDI_CONTROLS for ch in value)
    if isinstance(value, list):
        return all(_clean(v) for v in value)
    if isinstance(value, dict):
        return all(
            _clean(k) and unicodedata.is_normalized("NFKC", k) and _clean(v)
            for k, v in value.items()
        )
    return True


@settings(max_examples=200)
@given(json_values)
def test_clean_values_are_never_changed(value):
    if _clean(value):
        out, repairs = normalize_payload(value)
        assert out is value and repairs == []


@settings(max_examples=200)
@given(json_values)
def test_normalized_output_is_clean_unless_a_collision_kept_a_key(value):
    out, repairs = normalize_payload(value)
    assert set(repairs) <= {"text.bidi_removed", "text.nfkc"}
    # bidi controls never survive in string values, whatever happens to keys
    stack = [out]
    while stack:
        item = stack.pop()
        if isinstance(item, str):
            assert not any(ch in BIDI_CONTROLS for ch in item)
        elif isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, dict):
            stack.extend(item.values())


def _shape(value):
    """The structure of a value with every string erased: what normalising must preserve."""
    if isinstance(value, list):
        return [_shape(v) for v in value]
    if isinstance(value, dict):
        return sorted(repr(_shape(v)) for v in value.values())
    return "str" if isinstance(value, str) else value


@settings(max_examples=200)
@given(json_values, st.booleans())
def test_no_key_or_value_is_ever_lost(value, nfkc_strings):
    out, _ = normalize_payload(value, nfkc_strings=nfkc_strings)
    assert _shape(out) == _shape(value)


flat_scalars = (st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False)
                | text_with_controls)


@settings(max_examples=300)
@given(st.dictionaries(text_with_controls | st.text(max_size=6), flat_scalars, max_size=6),
       st.booleans())
def test_a_flat_object_is_answered_as_the_full_walk_answers_it(value, nfkc_strings):
    # Inside another object the full walk runs; a flat ASCII object skips it.
    alone = normalize_payload(value, nfkc_strings=nfkc_strings)
    inside, repairs = normalize_payload({"k": value}, nfkc_strings=nfkc_strings)
    assert alone == (inside["k"], repairs)
    if alone[0] == value:
        assert alone[0] is value


text_with_surrogates = st.text(
    alphabet=st.one_of(st.characters(codec="utf-8"),
                       st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF)), max_size=12)
values_with_surrogates = st.recursive(
    st.none() | st.booleans() | st.integers(min_value=-2**70, max_value=2**70)
    | st.floats(allow_nan=False) | text_with_surrogates,
    lambda children: (st.lists(children, max_size=4)
                      | st.dictionaries(text_with_surrogates, children, max_size=4)),
    max_leaves=20,
)


@settings(max_examples=300)
@given(values_with_surrogates)
def test_surrogates_are_replaced_as_the_full_walk_replaces_them(value):
    # The encoder's check answers "none here" for what it can encode; the walk does the rest.
    got = replace_surrogates_in(value)
    assert got == _replace_surrogates_walk(value)
    if not got[1]:
        assert got[0] is value


def _flat_ascii_by_loop(value: dict) -> bool:
    """_flat_ascii's meaning, spelt out."""
    return all(isinstance(k, str) and k.isascii() for k in value) and all(
        (v.isascii() if isinstance(v, str) else not isinstance(v, dict | list))
        for v in value.values())


class _Key(str):
    pass


_FLAT_VALUES = st.one_of(st.text(max_size=4), st.sampled_from(["é", "\u200f", "a\u202eb"]),
                         st.integers(), st.floats(allow_nan=True), st.booleans(), st.none(),
                         st.sampled_from([[1], {"a": 1}, (1,), _Key("é")]))
_FLAT_KEYS = st.one_of(st.text(max_size=3), st.sampled_from(["é", _Key("k"), 1]))


@given(st.dictionaries(_FLAT_KEYS, _FLAT_VALUES, max_size=4))
def test_flat_ascii_and_the_value_count_are_the_loops_answers(value) -> None:
    assert normalize._flat_ascii(value) == _flat_ascii_by_loop(value)
    assert count_values(value) == _values_by_recursion(value)


def _values_by_recursion(value: object) -> int:
    """count_values' meaning, spelt out: itself and what its containers hold."""
    parts = value.values() if isinstance(value, dict) else value \
        if isinstance(value, list | tuple) else ()
    return 1 + sum(map(_values_by_recursion, parts))
