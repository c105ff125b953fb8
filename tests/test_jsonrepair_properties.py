"""Property tests for toolcodec.repair.jsonrepair: valid JSON round-trips, nothing raises."""

from __future__ import annotations

import json
import re

import orjson
from hypothesis import given, settings
from hypothesis import strategies as st
from toolcodec.repair.jsonrepair import repair_json, repair_json_prefix, repair_refused
from toolcodec.results.errors import ALL_CODES, INTERNAL_ERROR

# 64-bit integers: beyond that range orjson (and so repair_json) reads integers as floats.
scalars = (
    st.none()
    | st.booleans()
    | st.integers(min_value=-(2**63), max_value=2**64 - 1)
    | st.floats(allow_nan=False, allow_infinity=False)
    | st.text()
)
json_values = st.recursive(
    scalars,
    lambda children: st.lists(children, max_size=5)
    | st.dictionaries(st.text(max_size=8), children, max_size=5),
    max_leaves=25,
)
dump_options = st.sampled_from(
    [{}, {"indent": 2}, {"ensure_ascii": False}, {"indent": 1, "ensure_ascii": False},
     {"separators": (",", ":")}]
)
any_text = st.text(
    alphabet=st.characters(min_codepoint=0, max_codepoint=0x10FFFF, exclude_categories=()),
    max_size=60,
) | st.text(alphabet='{}[]():,"\'\\/*+-.0123456789eEtrufalsn \n\t\x00\ud800“”，｛', max_size=60)


def _clean(res) -> bool:
    """A result is either a value, or a failure with stable error codes (never a crash)."""
    if res.ok:
        return res.errors == []
    return res.value is None and res.errors and all(
        e.code in ALL_CODES and e.code != INTERNAL_ERROR and "position" in e.details
        for e in res.errors
    )


@settings(max_examples=200)
@given(json_values, dump_options)
def test_valid_json_round_trips_untouched(value, options) -> None:
    text = json.dumps(value, **options)
    res = repair_json(text)
    assert res.ok and res.repairs == []
    assert res.value == value


@settings(max_examples=200)
@given(json_values, dump_options)
def test_prefix_reads_valid_json_exactly(value, options) -> None:
    text = json.dumps(value, **options)
    res, end = repair_json_prefix("  " + text + " trailing prose", 0)
    assert res.ok and res.repairs == [] and res.value == value
    assert end == 2 + len(text)


@settings(max_examples=200)
@given(any_text)
def test_never_raises_on_any_text(text) -> None:
    res = repair_json(text)
    assert _clean(res)
    prefix, end = repair_json_prefix(text, 0)
    assert _clean(prefix) and 0 <= end <= len(text)


@settings(max_examples=200)
@given(json_values.filter(lambda v: isinstance(v, (list, dict))), dump_options, st.data())
def test_truncation_is_closed_or_cleanly_refused(value, options, data) -> None:
    text = json.dumps(value, **options)
    cut = data.draw(st.integers(min_value=1, max_value=len(text) - 1))
    res = repair_json(text[:cut])
    assert _clean(res)
    assert res.ok, res.errors
    assert "json.unclosed" in res.repairs


def _add_trailing_commas(text: str) -> str:
    # after every value that closes a non-empty container; strings are dumped by json, so a
    # `]` or `}` inside them is never preceded by a structural position we could misread:
    # apply only to texts whose strings contain no brackets
    return re.sub(r"(?<=[^\[{\s])(\s*)([\]}])", r",\1\2", text)


@settings(max_examples=200)
@given(json_values.filter(lambda v: isinstance(v, (list, dict)) and v), dump_options)
def test_trailing_commas_are_repaired_back(value, options) -> None:
    text = json.dumps(value, **options)
    if any(ch in s for s in _strings(value) for ch in "[]{}"):
        return  # a bracket inside a string would get a comma too: not a trailing comma
    damaged = _add_trailing_commas(text)
    res = repair_json(damaged)
    assert res.ok, res.errors
    assert res.value == value
    assert res.repairs == ["json.trailing_comma"]


def _strings(value) -> list[str]:
    out, todo = [], [value]
    while todo:
        v = todo.pop()
        if isinstance(v, str):
            out.append(v)
        elif isinstance(v, list):
            todo.extend(v)
        elif isinstance(v, dict):
            out.extend(v)
            todo.extend(v.values())
    return out


_KEY = st.from_regex(r"[a-z][a-z0-9_]{0,8}", fullmatch=True)
_SCALAR = st.one_of(st.integers(-10**6, 10**6), st.booleans(), st.none(),
                    st.from_regex(r"[A-Za-z0-9 .,:/_-]{0,12}", fullmatch=True))


def _damage(obj: dict, kind: str) -> str:
    items = [(json.dumps(k), json.dumps(v)) for k, v in obj.items()]
    if kind == "trailing_comma":
        return "{" + ", ".join(f"{k}: {v}" for k, v in items) + ",}"
    if kind == "comment":
        return "{" + ", // note\n".join(f"{k}: {v}" for k, v in items) + "}"
    if kind == "unquoted_keys":
        return "{" + ", ".join(f"{k[1:-1]}: {v}" for k, v in items) + "}"
    if kind == "single_quoted_keys":
        return "{" + ", ".join(f"'{k[1:-1]}': {v}" for k, v in items) + "}"
    return "{" + ", ".join(f"{k}: {v}" for k, v in items)  # missing final closer


@given(st.dictionaries(_KEY, _SCALAR, min_size=1, max_size=6),
       st.sampled_from(["trailing_comma", "comment", "unquoted_keys", "single_quoted_keys",
                        "missing_closer"]))
def test_repairs_never_drop_a_key_or_value_a_strict_reading_keeps(obj, kind) -> None:
    res = repair_json(_damage(obj, kind))
    assert res.ok, res.errors
    assert res.value == obj


# Strings and keys without quotes, backslashes or control characters, so that swapping the
# quote character is the only damage; identifiers for the bare keys.
_plain_text = st.text(alphabet=st.characters(blacklist_characters="\"'\\",
                                             blacklist_categories=("Cc", "Cs")), max_size=8)
_identifiers = st.from_regex(r"[A-Za-z_][A-Za-z0-9_]{0,6}", fullmatch=True)
_plain_values = st.recursive(
    st.none() | st.booleans() | st.integers(-(2**63), 2**63 - 1) | _plain_text,
    lambda children: st.lists(children, max_size=4)
    | st.dictionaries(_plain_text, children, max_size=4),
    max_leaves=20,
)


@given(_plain_values, dump_options)
def test_single_quoted_documents_read_as_their_double_quoted_twins(value, options) -> None:
    """The hot path for single quotes and the general path agree with a strict reading."""
    text = json.dumps(value, **options).replace('"', "'")
    res = repair_json(text)
    assert res.ok, res.errors
    assert res.value == value
    assert ("json.single_quotes" in res.repairs) == ("'" in text)


@given(st.dictionaries(_identifiers, _plain_values, min_size=1, max_size=5), dump_options)
def test_bare_identifier_keys_read_as_quoted_ones(value, options) -> None:
    text = json.dumps(value, **options)
    for key in value:
        text = text.replace(f'"{key}":', f"{key}:")
    res = repair_json(text)
    assert res.ok, res.errors
    assert res.value == value
    assert "json.unquoted_key" in res.repairs


def _pythonic(value, sep: str) -> str:
    """``value`` written with every list as a Python tuple (`(1,)` for one item)."""
    if isinstance(value, list):
        items = [_pythonic(v, sep) for v in value]
        return "(" + sep.join(items) + ("," if len(items) == 1 else "") + ")"
    if isinstance(value, dict):
        return "{" + sep.join(f"{json.dumps(k)}: {_pythonic(v, sep)}"
                              for k, v in value.items()) + "}"
    return json.dumps(value)


def _holds_list(value) -> bool:
    if isinstance(value, list):
        return True
    return isinstance(value, dict) and any(map(_holds_list, value.values()))


@given(_plain_values.filter(lambda v: isinstance(v, (list, dict))), st.sampled_from([", ", ","]))
def test_tuples_read_as_the_arrays_they_hold(value, sep) -> None:
    text = _pythonic(value, sep)
    res = repair_json(text)
    assert res.ok, (text, res.errors)
    assert res.value == value
    assert ("json.tuple_as_list" in res.repairs) == _holds_list(value)


@given(st.lists(_plain_text, min_size=1, max_size=6, unique=True), st.sampled_from(["'", '"']))
def test_python_sets_of_strings_read_as_arrays(items, quote) -> None:
    text = "{" + ", ".join(quote + s + quote for s in items) + "}"
    res = repair_json(text)
    assert res.ok, (text, res.errors)
    assert res.value == items
    assert "json.set_as_list" in res.repairs


# Damaged JSON of the kinds models write, and JSON with lone surrogates (orjson refuses them,
# the json module reads them).
damaged = st.one_of(
    any_text,
    json_values.map(lambda v: json.dumps(v).replace('"', "'")),
    json_values.map(lambda v: re.sub(r"([\]}])$", r",\1", json.dumps(v))),  # trailing comma
    st.builds(lambda v, cut: json.dumps(v)[:cut], json_values, st.integers(0, 40)),
    st.just('{"a": "\\ud800"}'), st.just('["\\udfff", 1]'),
)


@settings(max_examples=300)
@given(damaged)
def test_a_refused_text_repairs_as_repair_json_repairs_it(text) -> None:
    """``repair_refused`` with the error orjson gave for the text answers what
    ``repair_json`` answers (which parses it again)."""
    try:
        orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        assert repair_refused(text, exc).to_dict() == repair_json(text).to_dict()


def test_a_lone_surrogate_refused_by_orjson_is_still_read() -> None:
    text = '{"a": "\\ud800"}'
    try:
        orjson.loads(text)
    except orjson.JSONDecodeError as exc:
        res = repair_refused(text, exc)
    assert res.to_dict() == {"ok": True, "value": {"a": "\ufffd"},
                             "repairs": ["text.surrogate_replaced"], "errors": []}
