"""Valid JSON is never changed: arguments that parse keep their values, whatever carried them.

Any JSON value ``json.loads`` accepts, dumped as a call's arguments and decoded (inside Hermes
markup, as a native OpenAI tool call, and through ``repair_json`` alone), comes back equal and
with no repair, under a schema that accepts any object. The regressions below are the real
shapes that were once rewritten.
"""

from __future__ import annotations

import json
import unicodedata

import pytest
from hypothesis import example, given, settings
from hypothesis import strategies as st
from toolcodec.decoding.codec import ToolCallCodec
from toolcodec.repair.heuristics import same_value
from toolcodec.repair.jsonrepair import repair_json

OPEN_TOOLS = [{"type": "function", "function": {"name": "f", "parameters": {"type": "object"}}}]
STRING_TOOLS = [{"type": "function", "function": {"name": "f", "parameters": {
    "type": "object", "properties": {"content": {"type": "string"},
                                     "items": {"type": "array", "items": {"type": "string"}}}}}}]
BIDI = "\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"


def _nfkc_key(key: str) -> bool:
    return unicodedata.is_normalized("NFKC", key)


# Two documented normalisations still apply to valid JSON, so the generated text avoids what
# they change: bidi controls are removed from a call's payload (a hidden direction mark in a
# file name is an attack, docs/decode.md), and keys are NFKC-folded (docs/repairs-schema.md).
chars = st.characters(blacklist_categories=("Cs",), blacklist_characters=BIDI)
strings = st.text(chars, max_size=20)
keys = st.text(chars, max_size=8).filter(_nfkc_key)
scalars = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**63), 2**63 - 1),
    st.floats(allow_nan=False, allow_infinity=False), strings,
    st.sampled_from(["**Warning**", "*args*", "# not a comment", "True", "None", "'", '""',
                     "<tool_call>", "```json", "\\", "1 + 2", "a // b", "{", "]"]),
)
values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4)
                      | st.dictionaries(keys, inner, max_size=4), max_leaves=20)
arguments = st.dictionaries(keys, values, max_size=6)

OPEN = ToolCallCodec(OPEN_TOOLS)


def _kept(result, args: dict) -> None:
    assert result.ok, result.errors
    assert len(result.calls) == 1
    call = result.calls[0]
    assert same_value(call.arguments, args), (call.arguments, args)
    assert call.repairs == [] and result.repairs == []


def _hermes(args: dict, *, ensure_ascii: bool = False) -> str:
    call = json.dumps({"name": "f", "arguments": args}, ensure_ascii=ensure_ascii)
    return f"<tool_call>\n{call}\n</tool_call>"


def _native(args: dict) -> dict:
    return {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_1", "type": "function",
         "function": {"name": "f", "arguments": json.dumps(args)}}]}


@settings(max_examples=150)
@given(arguments, st.booleans())
@example({"content": "**Warning**"}, False)
@example({"content": "*args*", "n": [1.5, -0.0, None, True]}, True)
def test_valid_arguments_keep_their_values(args, ensure_ascii):
    text = json.dumps(args, ensure_ascii=ensure_ascii)
    assert same_value(json.loads(text), args)  # the generated value round-trips as JSON
    repaired = repair_json(text)
    assert repaired.ok and repaired.repairs == [] and same_value(repaired.value, args)
    _kept(OPEN.decode(_native(args)), args)
    _kept(OPEN.decode(_hermes(args, ensure_ascii=ensure_ascii)), args)


@pytest.mark.parametrize("args", [
    {"content": "**Warning**"},
    {"content": "*args*"},
    {"content": "*args*", "items": ["**bold**", "*x*"]},
])
def test_emphasis_in_valid_strings_is_kept(args):
    # from a real answer: a Markdown warning in a message body lost its asterisks
    codec = ToolCallCodec(STRING_TOOLS)
    _kept(codec.decode(_hermes(args)), args)
    _kept(codec.decode(_native(args)), args)


def test_a_tag_inside_a_string_after_an_escaped_backslash_stays_text():
    args = {"x": ["\\", "<tool_call>"]}
    _kept(OPEN.decode(_hermes(args)), args)
