"""``pythonic.unescaped_quote``: a quote inside a ``'…'``/``"…"`` string that the containers
open around it cannot follow is the string's text (``sed -n '1,5p' f`` inside a single-quoted
command). Well-formed call lists read as before, with no repair."""

from __future__ import annotations

import ast

import pytest
from hypothesis import given
from hypothesis import strategies as st
from toolcodec.decoding.codec import ToolCallCodec
from toolcodec.formats.pythonic import UNESCAPED_QUOTE, read

CODEC = ToolCallCodec([{"name": "bash", "parameters": {"type": "object"}}])

# The two vLLM outputs (tests/tool_parsers of vLLM): the second holds a real line break and
# Python's unknown escape \, (kept as the two characters backslash, comma).
SED = "sed -n '360,450p' /testbed/sympy/matrices/common.py"
PY = "cd /testbed && python3 -c \"from sympy import latex\nprint(latex(3*x, mul_symbol='\\,'))\""
VLLM_BODIES = [f"[bash(command='{SED}')]", f"[bash(command='{PY}')]"]


def _decode(body: str):
    return CODEC.decode(f"<|tool_call_start|>{body}<|tool_call_end|>")


def test_the_vllm_outputs_read_as_their_commands():
    assert "\n" in PY and "='\\,'" in PY  # a real newline; backslash then comma
    for body, command in zip(VLLM_BODIES, [SED, PY], strict=True):
        found = read(body)
        assert found.calls == [("bash", {"command": command})], body
        assert UNESCAPED_QUOTE in found.repairs and not found.errors
        result = _decode(body)
        assert result.ok and len(result.calls) == 1
        assert (result.calls[0].name, result.calls[0].arguments) == ("bash", {"command": command})
        assert UNESCAPED_QUOTE in result.calls[0].repairs


@pytest.mark.parametrize("command", [
    SED, PY, "echo it's", "grep -E 'a|b' f",
    "git commit -m 'fix bug'",  # a quote right before the closing one
    "awk -F',' '{print $1}' f",  # a comma that no keyword argument follows
    "cd 'x'; ls",  # ';' only ends the whole call list
    "echo $(cat 'x'); y",  # ')' that is not the call's end
    "python3 -c 'print(1)' > out.txt",  # an operator, but no literal after it
    "echo 'a:b' c", "ls 'a' 'b'",
])
def test_an_unescaped_quote_in_a_command_is_text(command):
    body = f"[bash(command='{command}')]"
    found = read(body)
    assert found.calls == [("bash", {"command": command})] and UNESCAPED_QUOTE in found.repairs
    result = _decode(body)
    assert result.ok and [(c.name, c.arguments) for c in result.calls] == found.calls
    assert UNESCAPED_QUOTE in result.calls[0].repairs


@pytest.mark.parametrize(("body", "calls"), [
    ('[bash(command="echo "hi" there")]', [("bash", {"command": 'echo "hi" there'})]),
    ("bash(command='echo 'x'')", [("bash", {"command": "echo 'x'"})]),  # a bare call
    ("[edit(path='a.py', old='print('x')', new='print('y')')]",
     [("edit", {"path": "a.py", "old": "print('x')", "new": "print('y')"})]),
    ("[f(d={'k': 'it's', 'it's': 'v'})]", [("f", {"d": {"k": "it's", "it's": "v"}})]),
    ("[f(l=['it's', 'b'], t=('o'k',))]", [("f", {"l": ["it's", "b"], "t": ["o'k"]})]),
    ("[f(a='it's'), g(b='x')]", [("f", {"a": "it's"}), ("g", {"b": "x"})]),
])
def test_quotes_end_strings_only_where_the_open_containers_go_on(body, calls):
    found = read(body)
    assert found.calls == calls and UNESCAPED_QUOTE in found.repairs


def test_a_cut_text_is_completed_after_a_repaired_string():
    found = read("[f(a='it's'")
    assert found.calls == [("f", {"a": "it's"})]
    assert {UNESCAPED_QUOTE, "pythonic.close_brackets"} <= set(found.repairs)


@pytest.mark.parametrize("body", [
    "[bash(command='x'+'y')]", "[bash(command='x' * 3)]", "[bash(command='x' + y)]",
    "[bash(command='a' 'b)]",  # cut inside a string
    "[bash(command='it's)]",  # no quote can end the string
    "[bash(command='echo 'x' > 'f'')]",  # an operator then a literal: an expression
])
def test_expressions_and_unclosed_strings_are_still_refused(body):
    found = read(body)
    assert found.errors and not found.calls
    assert isinstance(found.errors[0].details["position"], int)


def test_a_prose_call_with_an_unescaped_quote_is_not_a_call():
    # without a marker only literal Python counts: a repaired reading is not enough
    assert CODEC.decode(f"Run [bash(command='{SED}')]").calls == []


@pytest.mark.parametrize("body", [
    "[f(a='it\\'s', b=\"say \\\"hi\\\"\")]", "[f(a='x' 'y', b=r'\\d')]",
    "[f(a=\"it's\", b='say \"hi\"')]", "[f(a='''it's''', b={'k': ['v', ('w',)]})]",
    "[f(a=', b=', c=')]')]", "f(a='1,5p')\ng(b=\"x\")",
])
def test_well_formed_call_lists_read_as_python_reads_them(body):
    found = read(body)
    assert UNESCAPED_QUOTE not in found.repairs and not found.errors
    calls = ast.parse(body.strip(), mode="exec").body
    expected = []
    for statement in calls:
        nodes = statement.value.elts if isinstance(statement.value, ast.List) else [
            statement.value]
        expected += [(n.func.id, {k.arg: _plain(ast.literal_eval(k.value)) for k in n.keywords})
                     for n in nodes]
    assert found.calls == expected


def _plain(value):  # tuples read as lists (JSON has no tuples)
    if isinstance(value, tuple | list):
        return [_plain(v) for v in value]
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    return value


# -- properties ---------------------------------------------------------------------------------

_TRICKY = st.text(alphabet="ab'\",)(]}{[=:; \n\\x", max_size=12)
_VALUES = st.one_of(_TRICKY, st.text(max_size=8))
_KEYS = st.from_regex(r"[a-z_][a-z0-9_]{0,6}", fullmatch=True)


@given(st.lists(st.dictionaries(_KEYS, _VALUES, max_size=3), min_size=1, max_size=3))
def test_lists_written_with_repr_read_back_with_no_repair(calls):
    body = "[" + ", ".join(
        "bash(" + ", ".join(f"{k}={v!r}" for k, v in args.items()) + ")" for args in calls) + "]"
    found = read(body)
    assert found.calls == [("bash", args) for args in calls] and not found.errors
    assert UNESCAPED_QUOTE not in found.repairs


# Text around the inner quotes: anything but a quote or a backslash (an escape), so every inner
# quote below is followed by a letter, which no Python structure can follow a string with.
_SEGMENT = st.text(alphabet=st.characters(blacklist_characters="'\"\\",
                                          blacklist_categories=("Cs",)), max_size=8)


@given(st.sampled_from("'\""), st.lists(st.tuples(_SEGMENT, st.sampled_from("sxTZ")),
                                         min_size=1, max_size=5), _SEGMENT,
       st.booleans())
def test_unescaped_quotes_followed_by_text_are_text(quote, pieces, tail, more):
    value = "".join(text + quote + letter for text, letter in pieces) + tail
    rest = ", n=1" if more else ""
    found = read(f"[bash(command={quote}{value}{quote}{rest})]")
    assert found.calls == [("bash", {"command": value} | ({"n": 1} if more else {}))]
    assert UNESCAPED_QUOTE in found.repairs


@given(st.text())
def test_read_never_raises_on_any_text(text):
    found = read(text)
    assert all(isinstance(e.details["position"], int) for e in found.errors)
    assert not (found.calls and found.errors)


_VALID_BODIES = st.lists(st.dictionaries(_KEYS, st.one_of(
    _TRICKY, st.integers(), st.lists(_TRICKY, max_size=2),
    st.dictionaries(_TRICKY, _TRICKY, max_size=2)), max_size=3), min_size=1, max_size=2).map(
    lambda calls: "[" + ", ".join("f(" + ", ".join(f"{k}={v!r}" for k, v in a.items()) + ")"
                                  for a in calls) + "]")


@given(st.one_of(_VALID_BODIES, st.sampled_from(VLLM_BODIES)))
def test_read_never_raises_on_any_prefix_of_a_call_list(body):
    for cut in range(len(body) + 1):
        found = read(body[:cut])  # "[" alone is an empty list, completed: neither is required
        assert all(isinstance(e.details["position"], int) for e in found.errors)
        assert not (found.calls and found.errors)


def test_adversarial_quote_runs_are_read_to_an_answer():
    # not timed (benchmarks time the readers); each must return, and read what is there
    runs = "' " * 50000
    assert read("'" * 100000).errors
    assert read("f(a='" + "'a" * 50000).errors  # never closed: each quote has text after it
    found = read("f(a='" + runs)  # the last quote has only blanks after it: closed, then cut
    assert found.calls == [("f", {"a": "' " * 49999})]
    assert "pythonic.close_brackets" in found.repairs
    words = "a' " * 50000
    assert read("[f(a='" + words + "')]").calls == [("f", {"a": words})]
    assert read("[f(a='" + runs + "')]").calls  # '' ' ' … ' ': strings written side by side
    assert read("[f(a='" + "a'" * 50000 + ")]").calls == [("f", {"a": "a'" * 49999 + "a"})]
    for body in ("[f(a='" + "')" * 50000 + "]", "[f(a='" + "'))" * 50000 + "]",
                 "[f(a='" + "', b=" * 20000 + "1)]", "[f(a='" + "'" + " " * 100000 + ")]",
                 "[f(a={'" + "': '" * 30000 + "'})]"):
        found = read(body)
        assert found.calls or found.errors
