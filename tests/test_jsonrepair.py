"""Unit tests for toolcodec.repair.jsonrepair: cases per repair id and per error code."""

from __future__ import annotations

import orjson
import pytest
from toolcodec.repair.jsonrepair import repair_json, repair_json_prefix
from toolcodec.results.limits import Limits

# (input, expected value, exact repairs in order of first use)
REPAIRS = [
    # fast path: valid JSON is untouched
    ('{"a": [1, 2.5, "x", true, null]}', {"a": [1, 2.5, "x", True, None]}, []),
    # a lone surrogate escape is valid JSON text but cannot be UTF-8: replaced, and named
    ('"\\ud800"', "\ufffd", ["text.surrogate_replaced"]),
    # past 64 bits an integer reads as a float, as orjson reads it (results must serialise)
    ("123456789012345678901234567890", 1.2345678901234568e29, []),
    ("[18446744073709551615, 1e2]", [18446744073709551615, 100.0], []),
    ("[18446744073709551616,]", [1.8446744073709552e19], ["json.trailing_comma"]),
    # fences and prose
    ('```json\n{"a": 1}\n```', {"a": 1}, ["json.code_fence"]),
    ('```\n[1, 2]\n```', [1, 2], ["json.code_fence"]),
    ('Sure! Here it is:\n```json\n{"a": 1}\n```\nDone.', {"a": 1},
     ["json.surrounding_text", "json.code_fence"]),
    ('Here you go: {"a": 1}', {"a": 1}, ["json.surrounding_text"]),
    ('{"a": 1} Hope this helps!', {"a": 1}, ["json.surrounding_text"]),
    # commas
    ('{"a": 1,}', {"a": 1}, ["json.trailing_comma"]),
    ("[1, 2, 3,]", [1, 2, 3], ["json.trailing_comma"]),
    ('{"a": [1,], "b": {"c": 2,},}', {"a": [1], "b": {"c": 2}}, ["json.trailing_comma"]),
    ("[1,,2]", [1, 2], ["json.extra_comma"]),
    ('{,"a": 1}', {"a": 1}, ["json.extra_comma"]),
    ('{"a": 1 "b": 2}', {"a": 1, "b": 2}, ["json.missing_comma"]),
    ('["a" "b"]', ["a", "b"], ["json.missing_comma"]),
    ("[1 2]", [1, 2], ["json.missing_comma"]),
    ('{"a": 1\n"b": 2}', {"a": 1, "b": 2}, ["json.missing_comma"]),
    ("[{}{}]", [{}, {}], ["json.missing_comma"]),
    # quotes
    ("{'a': 'b'}", {"a": "b"}, ["json.single_quotes"]),
    ("{'text': \"it's\"}", {"text": "it's"}, ["json.single_quotes"]),
    ("{'a': 'it\\'s'}", {"a": "it's"}, ["json.single_quotes"]),
    ('{“a”: “b”}', {"a": "b"}, ["json.smart_quotes"]),
    ("{‘a’: ‘b’}", {"a": "b"}, ["json.smart_quotes"]),
    ('{"a": "say "hi" now"}', {"a": 'say "hi" now'}, ["json.unescaped_quote"]),
    ('{"a": "New York, "b": 2}', {"a": "New York", "b": 2}, ["json.missing_quote"]),
    # keys and values without quotes
    ("{a: 1}", {"a": 1}, ["json.unquoted_key"]),
    ("{first name: 1}", {"first name": 1}, ["json.unquoted_key"]),
    ('{"a": hello world}', {"a": "hello world"}, ["json.unquoted_value"]),
    ('{"a": שלום עולם, "b": 1}', {"a": "שלום עולם", "b": 1}, ["json.unquoted_value"]),
    ('{"a": مرحبا بالعالم}', {"a": "مرحبا بالعالم"}, ["json.unquoted_value"]),
    ('{"a": 東京タワー}', {"a": "東京タワー"}, ["json.unquoted_value"]),
    ('{"a": one two  \n}', {"a": "one two"}, ["json.unquoted_value"]),
    ('{"d": 2024-01-05}', {"d": "2024-01-05"}, ["json.unquoted_value"]),
    ('{"d": 01/05/2024}', {"d": "01/05/2024"}, ["json.unquoted_value"]),
    ('{"t": text/plain}', {"t": "text/plain"}, ["json.unquoted_value"]),
    ('{"u": https://x.org/a}', {"u": "https://x.org/a"}, ["json.unquoted_value"]),
    ('{"code": 0789}', {"code": "0789"}, ["json.unquoted_value"]),
    ('{"a": abc", "b": 1}', {"a": "abc", "b": 1}, ["json.unquoted_value"]),
    ("hello", "hello", ["json.unquoted_value"]),
    # literals
    ('{"a": True, "b": False, "c": None}', {"a": True, "b": False, "c": None},
     ["json.python_literal"]),
    ('{"a": TRUE, "b": Null}', {"a": True, "b": None}, ["json.literal_case"]),
    ('{"a": undefined}', {"a": None}, ["json.undefined"]),
    ('{"a": NaN, "b": Infinity, "c": -Infinity}', {"a": None, "b": None, "c": None},
     ["json.nonfinite_number"]),
    ('{"a": 1e400, "b": 1}', {"a": None, "b": 1}, ["json.nonfinite_number"]),
    # numbers
    ('{"a": .5}', {"a": 0.5}, ["json.number_format"]),
    ('{"a": +1}', {"a": 1}, ["json.number_format"]),
    ('{"a": 2.}', {"a": 2.0}, ["json.number_format"]),
    ('{"a": 1_000_000}', {"a": 1000000}, ["json.number_format"]),
    ('{"a": 0x1F}', {"a": 31}, ["json.hex_number"]),
    ('{"a": 1e-5, "b": -3}', {"a": 1e-5, "b": -3}, []),
    # comments
    ('{"a": 1 // note\n}', {"a": 1}, ["json.comment"]),
    ('{/* c */ "a": /* d */ 1}', {"a": 1}, ["json.comment"]),
    ('{"a": x /* y */}', {"a": "x"}, ["json.unquoted_value", "json.comment"]),
    ('{"a": "http://x // y"}', {"a": "http://x // y"}, []),
    # `#` comments (Python/YAML style) after a value, between members, after a string
    ('{"a": 1, # the count\n "b": 2}', {"a": 1, "b": 2}, ["json.comment"]),
    ('{"a": 1 # c\n}', {"a": 1}, ["json.comment"]),
    ('{"a": "x" # c\n, "b": "y" ## d\n}', {"a": "x", "b": "y"}, ["json.comment"]),
    ("{a: True, # note\n b: None}", {"a": True, "b": None},
     ["json.unquoted_key", "json.python_literal", "json.comment"]),
    # ... but `#` with no blank after it is text: a colour, an issue number
    ('{"c": #fff}', {"c": "#fff"}, ["json.unquoted_value"]),
    ('{"t": Issue #42}', {"t": "Issue #42"}, ["json.unquoted_value"]),
    ('{"a": "x # y", "b": 1}', {"a": "x # y", "b": 1}, []),
    # inside strings
    ('{"a": "line1\nline2"}', {"a": "line1\nline2"}, ["json.raw_newline"]),
    ('{"a": "tab\there"}', {"a": "tab\there"}, ["json.raw_newline"]),
    ('{"p": "C:\\Users\\x"}', {"p": "C:\\Users\\x"}, ["json.invalid_escape"]),
    ('{"a": "it\\\'s"}', {"a": "it's"}, ["json.invalid_escape"]),
    # truncation and structure
    ('{"a": [1, 2', {"a": [1, 2]}, ["json.unclosed"]),
    ('{"a": "hel', {"a": "hel"}, ["json.unclosed", "json.unclosed_string"]),
    ('{"a": "b}', {"a": "b"}, ["json.unclosed", "json.unclosed_string"]),
    ('{"a": 1, "b":', {"a": 1}, ["json.dangling_key_dropped", "json.unclosed"]),
    ('{"a": 1, "b', {"a": 1},
     ["json.unclosed", "json.unclosed_string", "json.dangling_key_dropped"]),
    ('["x\\u26', ["x"], ["json.unclosed", "json.unclosed_string"]),
    ('{"a": }', {"a": None}, ["json.missing_value"]),
    ('{"a": 1, "b"}', {"a": 1, "b": None}, ["json.missing_value"]),
    # Python syntax: tuples, grouping parentheses, sets
    ("(1, 2)", [1, 2], ["json.tuple_as_list"]),
    ('{"coords": (1, (2, 3)), "ok": true}', {"coords": [1, [2, 3]], "ok": True},
     ["json.tuple_as_list"]),
    ('{"empty": (), "one": ("x",)}', {"empty": [], "one": ["x"]}, ["json.tuple_as_list"]),
    ('Here is the tuple:\n```json\n(1, 2)\n```', [1, 2],
     ["json.surrounding_text", "json.code_fence", "json.tuple_as_list"]),
    ("(1)", 1, ["json.parentheses_dropped"]),
    ('{"s": ( "x" )}', {"s": "x"}, ["json.parentheses_dropped"]),
    ("{'a', 'b'}", ["a", "b"], ["json.single_quotes", "json.set_as_list"]),
    ('{"a"}', ["a"], ["json.set_as_list"]),
    ('{"key:"value"}', {"key": "value"}, ["json.missing_quote"]),
    ('{"key: "value", "b": 1}', {"key": "value", "b": 1}, ["json.missing_quote"]),
    ('{"a" 1}', {"a": 1}, ["json.missing_colon"]),
    ('[{"a": 1]', [{"a": 1}], ["json.mismatched_bracket"]),
    ('{"a": 1]', {"a": 1}, ["json.mismatched_bracket"]),
    ('{"a": 1}}', {"a": 1}, ["json.extra_closing_bracket"]),
    ('[{"k": "v"}},{"k": "w"}]', [{"k": "v"}, {"k": "w"}], ["json.stray_closer"]),
    ('{"k1": ["v1", "v2"}, "k2": ["x"]}', {"k1": ["v1", "v2"], "k2": ["x"]},
     ["json.mismatched_bracket"]),
    ("{n:1// c\n}", {"n": 1}, ["json.unquoted_key", "json.comment"]),
    ('{"a":1, // c\r"b":2}', {"a": 1, "b": 2}, ["json.comment"]),
    ("[1, -", [1], ["json.cut_value_dropped", "json.unclosed"]),
    ("[1, 2, ...]", [1, 2], ["json.ellipsis"]),
    ('{"a": 1, ...}', {"a": 1}, ["json.ellipsis"]),
    # text normalisation outside strings
    ('\u200f{"a": \u200e1}', {"a": 1}, ["text.bidi_removed"]),
    ('{"a": "\u200fx"}\u2066', {"a": "\u200fx"}, ["text.bidi_removed"]),
    ('｛"a"：1，"b"：［2］｝', {"a": 1, "b": [2]}, ["text.nfkc"]),
    ('{"a": "｛x｝"', {"a": "｛x｝"}, ["json.unclosed"]),
    ('{"a":\u00a01}', {"a": 1}, ["text.unicode_whitespace"]),
]


@pytest.mark.parametrize(("text", "value", "repairs"), REPAIRS)
def test_repairs(text: str, value: object, repairs: list[str]) -> None:
    res = repair_json(text)
    assert res.errors == []
    assert res.ok is True
    assert res.value == value
    assert type(res.value) is type(value)
    assert res.repairs == repairs
    orjson.dumps(res.to_dict())  # plain JSON data


@pytest.mark.parametrize(
    ("text", "expression"),
    [
        ('{"amount": 100 * 3}', "100 * 3"),
        ('{"a": price * 2}', "price * 2"),
        ('{"a": 2 + 3}', "2 + 3"),
        ('{"a": (1+2)}', "(1+2)"),
        ('{"a": (1 + 2) * 3}', "(1 + 2) * 3"),
        ("[(2, 3), (4*5)]", "(4*5)"),
        ('{"a": 5 - 3}', "5 - 3"),
        ('{"a": 1/3}', "1/3"),
        ('{"a": x*2}', "x*2"),
        ('{"a": "x" + "y"}', '"x" + "y"}'),
        ('"hello" + " world"', '"hello" + " world"'),
        ("[1, 2 * 4]", "2 * 4"),
        ("{\"a\": 'x' +\n 'y'}", "'x' +"),
    ],
)
def test_arithmetic_is_refused(text: str, expression: str) -> None:
    res = repair_json(text)
    assert res.ok is False and res.value is None
    [err] = res.errors
    assert err.code == "arithmetic_expression"
    assert err.details["expression"] == expression
    assert err.details["position"] == text.index(expression)
    assert f"`{expression}`" in err.message and "line 1, column" in err.message


def test_arithmetic_message_names_expression_and_place() -> None:
    err = repair_json('{\n  "amount": 100 * 3\n}').errors[0]
    assert err.details == {"position": 14, "expression": "100 * 3"}
    assert "`100 * 3`" in err.message and "line 2, column 13" in err.message


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ('{"a": -5, "b": 1e-5, "c": -2.5E+3}', {"a": -5, "b": 1e-5, "c": -2500.0}),
        ('{"a": "2 * 3 = 6"}', {"a": "2 * 3 = 6"}),
        ('{"a": 1, // 2 * 3\n "b": 2,}', {"a": 1, "b": 2}),
        ('{"a": 1 /* x * y */,}', {"a": 1}),
        ('{"a": 10-20,}', {"a": "10-20"}),
        ('{"a": 50%,}', {"a": "50%"}),
        ('{"a": 3/4 cup,}', {"a": "3/4 cup"}),
    ],
)
def test_not_arithmetic(text: str, value: object) -> None:
    res = repair_json(text)
    assert res.ok, res.errors
    assert res.value == value


@pytest.mark.parametrize(
    ("text", "position", "fragment"),
    [
        ("", 0, "blanks"),
        ("   ", 3, "blanks"),
        ('{"a": [1]: 2}', 9, "expected ',' or '}'"),
        ("[1, [2] : 3]", 8, "expected ',' or ']'"),
        ('{[1]: 2}', 1, "expected a key"),
        ("]", 0, "expected a JSON value"),
        ('{"a", "b": 1}', 9, "set of strings"),
    ],
)
def test_invalid_json(text: str, position: int, fragment: str) -> None:
    res = repair_json(text)
    assert res.ok is False and res.value is None
    [err] = res.errors
    assert err.code == "invalid_json"
    assert err.details["position"] == position
    assert fragment in err.message and "column" in err.message


def test_payload_too_large() -> None:
    res = repair_json("[" + "1," * 60 + "1]", limits=Limits(max_chars=100))
    assert res.ok is False
    assert res.errors[0].code == "payload_too_large"
    assert res.errors[0].details["position"] == 0
    prefix_res, end = repair_json_prefix("x" * 101, 0, limits=Limits(max_chars=100))
    assert prefix_res.errors[0].code == "payload_too_large" and end == 0


@pytest.mark.parametrize("text", ["[" * 100_000 + "]" * 100_000, "[" * 100_000, '{"a":' * 100_000])
def test_deep_nesting_is_reported_not_raised(text: str) -> None:
    res = repair_json(text)
    assert res.ok is False
    assert res.errors[0].code == "nesting_too_deep"
    assert res.errors[0].details["position"] == 128 * (5 if text.startswith("{") else 1)


def test_deep_nesting_parses_with_raised_limit() -> None:
    depth = 100_000
    res = repair_json("[" * depth + "]" * depth, limits=Limits(max_depth=depth))
    assert res.ok and res.repairs == []
    res = repair_json("[" * depth + "1", limits=Limits(max_depth=depth))
    assert res.ok and res.repairs == ["json.unclosed"]
    inner = res.value
    for _ in range(depth - 1):
        inner = inner[0]
    assert inner == [1]


def test_valid_json_beyond_depth_limit_is_refused() -> None:
    text = "[" * 20 + "]" * 20
    assert repair_json(text, limits=Limits(max_depth=20)).ok
    res = repair_json(text, limits=Limits(max_depth=19))
    assert res.errors[0].code == "nesting_too_deep"


@pytest.mark.parametrize(
    "text", ["\x00", "\ud800{", '{"a\x00": "\udfff"', "\\", "```", "{'", "[{]"]
)
def test_odd_input_never_raises(text: str) -> None:
    res = repair_json(text)
    assert res.ok == (not res.errors)
    assert all(e.code != "internal_error" for e in res.errors)


def test_non_str_input_is_reported() -> None:
    res = repair_json(b"{}")  # type: ignore[arg-type]
    assert res.ok is False and res.errors[0].code == "invalid_json"


def test_deterministic() -> None:
    text = "Here: ```json\n{a: 'b', c: [1, 2,, 3,], d: True // x\n"
    assert repair_json(text).to_dict() == repair_json(text).to_dict()


# -- repair_json_prefix ------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "pos", "value", "end", "repairs"),
    [
        ('xx {"a": 1} yy', 3, {"a": 1}, 11, []),
        ('xx  {"a": 1} yy', 2, {"a": 1}, 12, []),
        ('say {"a": 1,} and {"b": 2}', 4, {"a": 1}, 13, ["json.trailing_comma"]),
        ("[1, 2] [3]", 0, [1, 2], 6, []),
        ('"abc" tail', 0, "abc", 5, []),
        ("42, 43", 0, 42, 2, []),
        ('{"a": [1, 2', 0, {"a": [1, 2]}, 11, ["json.unclosed"]),
        ("{'a': 1} ```", 0, {"a": 1}, 8, ["json.single_quotes"]),
        ('{"a": NaN}', 0, {"a": None}, 10, ["json.nonfinite_number"]),
    ],
)
def test_prefix(text: str, pos: int, value: object, end: int, repairs: list[str]) -> None:
    res, stop = repair_json_prefix(text, pos)
    assert res.ok, res.errors
    assert (res.value, stop, res.repairs) == (value, end, repairs)


def test_prefix_does_not_strip_prose_or_fences() -> None:
    res, stop = repair_json_prefix('```json\n{"a": 1}\n```', 0)
    assert not res.ok or res.value != {"a": 1}
    res, stop = repair_json_prefix('Note: {"a": 1}', 0)
    assert res.value != {"a": 1}


def test_prefix_failure_returns_start() -> None:
    res, stop = repair_json_prefix('xx {"a": 2 * 3}', 3)
    assert res.ok is False and stop == 3
    assert res.errors[0].code == "arithmetic_expression"
    assert res.errors[0].details["position"] == 9


# -- what would lose or invent data is refused, never returned with ok: true -----------------

@pytest.mark.parametrize("text, why", [
    ('{"a": 1}\n{"b": 2}', "lose data"),
    ('{"key": "value"}, "key2": "value2"}', "lose data"),
    ('[{"i":1{"i":2}]', "appears twice"),
    ('"The TV has a 24" screen"', "lose data"),
    ('{"content":"value with ,"fake": inside"}', "do not pair up"),
    ('callback_123("foo");', "function call"),
    ('{"_id":ObjectId("123")}', "function call"),
    ('{"name": "f", "arguments": {invalid json}}', "not a key"),
    ("[- ", "not a value"),
    ("-", "not a value"),
    (".", "not a value"),
    # issue #27: an answer in words is no value (it was read as a string, or its first word)
    ("Sorry, I cannot help with that.", "prose"),
    ("hello world", "prose"),
    ("No, that is not possible.", "prose"),
    ("a,b", "prose"),
    # a stray word before a key, doubled or adjacent quotes: reading on would invent members
    ('{"a": 1, junk "b": 2, "c": 3}', "no ':' between"),
    ('{"a": true, COMMENT "b": 1}', "no ':' between"),
    ('{""a"": 1}', "no ':' between"),
    ('{"a""b": 1}', "no ':' between"),
    ('{"a": 1, "b" "c"}', "no ':' between"),
    ('{"a": "x" junk "b": 2}', "holds what reads as a key"),
])
def test_data_losing_readings_are_refused(text, why):
    res = repair_json(text)
    assert not res.ok and res.value is None
    assert why in res.errors[0].message
    assert 0 <= res.errors[0].details["position"] <= len(text)


@pytest.mark.parametrize("quote", ['"', "'"])
@pytest.mark.parametrize("k", [2, 3, 7])
def test_a_run_of_inner_quotes_is_text_up_to_the_one_that_closes(quote, k):
    # A run of quotes is stepped over at once; each quote in it is still judged as alone.
    inner = quote * k
    for text, value in [
        (f"{quote}a{inner}b{quote}", f"a{inner}b"),
        (f"[{quote}a{inner}b{quote}]", [f"a{inner}b"]),
        (f'{{"k": {quote}a{inner}b{quote}}}', {"k": f"a{inner}b"}),
        (f"{quote}a{inner}", f"a{inner[:-1]}"),  # the last quote of the run closes
        (f"[{quote}a{inner}]", [f"a{inner[:-1]}"]),
    ]:
        res = repair_json(text)
        assert res.ok and res.value == value, text
        assert "json.unescaped_quote" in res.repairs, text
