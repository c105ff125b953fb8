"""``pythonic.unescaped_quote``: a quote inside a ``'…'`` string that Python's structure cannot
follow is the string's text (``sed -n '1,5p' f`` inside a single-quoted command)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from codec.formats.pythonic import UNESCAPED_QUOTE, read
from codec.toolcodec import ToolCallCodec

CODEC = ToolCallCodec([{"name": "bash", "parameters": {"type": "object"}}])
SED = "sed -n '360,450p' /testbed/sympy/matrices/common.py"
PY = "cd /testbed && python3 -c \"from sympy import latex\nprint(latex(3*x, mul_symbol='\\,'))\""


@pytest.mark.parametrize("command", [SED, PY, "echo it's", "grep -E 'a|b' f"])
def test_an_unescaped_quote_in_a_command_is_text(command):
    body = f"[bash(command='{command}')]"
    found = read(body)
    assert found.calls == [("bash", {"command": command})] and UNESCAPED_QUOTE in found.repairs
    result = CODEC.decode(f"<|tool_call_start|>{body}<|tool_call_end|>")
    assert result.ok and [(c.name, c.arguments) for c in result.calls] == found.calls
    assert UNESCAPED_QUOTE in result.calls[0].repairs


@pytest.mark.parametrize("body", [
    "[bash(command='x'+'y')]", "[bash(command='x' * 3)]", "[bash(command='x' + y)]",
    "[bash(command='a' 'b)]",
])
def test_expressions_and_cut_strings_are_still_refused(body):
    found = read(body)
    assert found.errors and not found.calls


def test_a_prose_call_with_an_unescaped_quote_is_not_a_call():
    # without a marker only literal Python counts: a repaired reading is not enough
    assert CODEC.decode(f"Run [bash(command='{SED}')]").calls == []


_ARG = st.text(alphabet="ab'\",)(= \n\\", max_size=12)


@given(st.dictionaries(st.sampled_from(["a", "b", "cmd"]), _ARG, max_size=3))
def test_well_formed_lists_read_as_written(args):
    body = "[bash(" + ", ".join(f"{k}={v!r}" for k, v in args.items()) + ")]"
    found = read(body)
    assert found.calls == [("bash", args)] and UNESCAPED_QUOTE not in found.repairs


@given(st.lists(st.text(alphabet="abc -/1", min_size=1, max_size=6), min_size=2, max_size=5))
def test_quotes_followed_by_text_read_as_text(words):
    # every inner quote is followed by a letter, digit, blank or '/': not Python's structure
    value = "'".join(w if w[0].isalnum() else "x" + w for w in words)
    found = read(f"[bash(command='{value}', n=1)]")
    assert found.calls == [("bash", {"command": value, "n": 1})]
    assert UNESCAPED_QUOTE in found.repairs


@given(st.text(max_size=40), st.integers(min_value=0, max_value=80))
def test_read_never_raises(text, cut):
    read(text)
    read(f"[bash(command='{SED}', n=[1, 'a', {{'k': None}}])]"[:cut])


def test_adversarial_quote_runs_are_read_to_an_answer():
    for body in ("'" * 5000, "[bash(a='" + "' " * 5000 + ")]", "[f(a='" + "a'" * 5000 + ")]",
                 "[f(a='" + "')" * 5000 + "]"):
        found = read(body)
        assert found.calls or found.errors
