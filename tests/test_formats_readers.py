"""The body readers of ``toolcodec.formats``: round trips from generated calls, every truncation,
worst-case inputs, and the refusals that keep a guess from becoming a call."""

from __future__ import annotations

import ast
import json

import orjson
import pytest
from hypothesis import assume, given
from hypothesis import strategies as st
from toolcodec.formats import deepseek, glm, harmony, invoke, kimi, mistral, pythonic, yamlbody
from toolcodec.results.limits import Limits

NAMES = st.from_regex(r"[a-z_][a-z0-9_]{0,11}", fullmatch=True)
KEYS = st.from_regex(r"[a-z][a-z0-9_]{0,9}", fullmatch=True).filter(
    lambda k: k not in ("True", "False", "None"))
TEXT = st.text(st.characters(blacklist_categories=("Cs",)), max_size=20)
SCALARS = st.one_of(st.none(), st.booleans(), st.integers(-(2**63), 2**63 - 1),
                    st.floats(allow_nan=False, allow_infinity=False), TEXT)
VALUES = st.recursive(SCALARS, lambda inner: st.one_of(
    st.lists(inner, max_size=4), st.dictionaries(TEXT, inner, max_size=4)), max_leaves=12)
CALLS = st.lists(st.tuples(NAMES, st.dictionaries(KEYS, VALUES, max_size=4)), min_size=1,
                 max_size=3)


def _same(a, b) -> bool:
    return orjson.dumps(a) == orjson.dumps(b)


# -- pythonic ----------------------------------------------------------------------------------


def _py(calls, spaced: bool = False) -> str:
    sep = ",\n  " if spaced else ", "
    body = sep.join(f"{n}({sep.join(f'{k}={v!r}' for k, v in a.items())})" for n, a in calls)
    return f"[{body}{',' if spaced else ''}]"


@given(CALLS, st.booleans())
def test_pythonic_round_trip(calls, spaced):
    found = pythonic.read(_py(calls, spaced))
    assert not found.errors and not found.repairs
    assert _same(found.calls, calls)


@given(VALUES)
def test_pythonic_values_read_as_python_reads_them(value):
    text = repr(value)
    found = pythonic.read(f"f(v={text})")
    assert not found.errors
    oracle = ast.literal_eval(text)  # the test's oracle only; the reader never evaluates
    assert _same(found.calls[0][1]["v"], oracle)


@given(CALLS, st.data())
def test_pythonic_truncation_never_raises_and_never_changes_a_value(calls, data):
    text = _py(calls)
    cut = data.draw(st.integers(0, len(text)))
    found = pythonic.read(text[:cut])
    orjson.dumps([found.calls, [e.to_dict() for e in found.errors]])
    if found.errors:
        return
    full = dict(enumerate(calls))
    if not found.repairs:  # read without completing anything: exactly the full calls
        assert _same(found.calls, calls[:len(found.calls)])
    for i, (name, args) in enumerate(found.calls):  # completed: a prefix, no value changed
        assert name == full[i][0] and set(args) <= set(full[i][1])
        for key, value in args.items():
            if not isinstance(value, dict | list):
                assert _same(value, full[i][1][key])


@pytest.mark.parametrize("text, why", [
    ("[f(x)]", "positional"),
    ("[f(a=x)]", "is a name"),
    ("[f(a=__import__('os').system('id'))]", "is a name"),
    ("[f(a=1+2)]", "expression"),
    ("[f(a=[1][0])]", "expression"),
    ("[f(a=f'{x}')]", "f-strings"),
    ("[f(**kw)]", "unpacks"),
    ("[f(a=1, a=2)]", "twice"),
    ("[f(a={1: 2})]", "must be a string"),
    ("[f(a='x)]", "never closed"),
    ("[f(a=12", "inside a number"),
    ("[f(a=1e999)]", "too large"),
    ("[f(a=1)] and more", "text after"),
])
def test_pythonic_refusals_say_why(text, why):
    found = pythonic.read(text)
    assert not found.calls and why in found.errors[0].message
    assert 0 <= found.errors[0].details["position"] <= len(text)


def test_pythonic_depth_is_bounded():
    found = pythonic.read("f(a=" + "[" * 50 + "]" * 50 + ")", limits=Limits(max_depth=10))
    assert found.errors[0].code == "nesting_too_deep"


@pytest.mark.parametrize("text", ["[" * 100_000, "'" * 100_000, "9" * 100_000,
                                  "f(a=" + '"\\' * 50_000, "[f(a=" + "[" * 100_000,
                                  "f(" + "a=1," * 30_000 + ")", "[" + "f()," * 30_000 + "]"])
def test_pythonic_worst_cases_finish(text):
    found = pythonic.read(text)
    orjson.dumps([found.calls, [e.to_dict() for e in found.errors]])


# -- key/value and token formats ---------------------------------------------------------------

STRS = st.dictionaries(KEYS, st.text(st.characters(blacklist_categories=("Cs",),
                                                   blacklist_characters="<"), max_size=20),
                       max_size=4)


@given(NAMES, STRS, st.sampled_from(["\n", "", "\n    "]))
def test_glm_round_trip(name, args, sep):
    body = name + "".join(f"{sep}<arg_key>{k}</arg_key>{sep}<arg_value>{v}</arg_value>"
                          for k, v in args.items()) + sep
    assert glm.looks_like_body(body)
    found = glm.read(body)
    assert found.calls == [(name, args)] and found.text_values


@given(NAMES, STRS, st.data())
def test_glm_truncation_never_raises(name, args, data):
    body = name + "".join(f"\n<arg_key>{k}</arg_key>\n<arg_value>{v}</arg_value>"
                          for k, v in args.items())
    cut = body[:data.draw(st.integers(0, len(body)))]
    found = glm.read(cut, closed=False)
    for _, got in found.calls:
        assert all(args[k] == v for k, v in got.items())  # never a cut value


@given(st.lists(st.tuples(NAMES, st.dictionaries(KEYS, VALUES, max_size=3)), min_size=1,
                max_size=3), st.booleans())
def test_kimi_round_trip(calls, spaced):
    ws = " " if spaced else ""
    body = "".join(f"{ws}<|tool_call_begin|>{ws}functions.{n}:{i}{ws}"
                   f"<|tool_call_argument_begin|>{ws}{json.dumps(a)}{ws}<|tool_call_end|>"
                   for i, (n, a) in enumerate(calls))
    found = kimi.read(body)
    assert [(n, json.loads(a)) for n, a in found.calls] == calls


DS = "\uff5c", "\u2581"


def _ds(token: str, ascii_: bool = False) -> str:
    return f"<|{token}|>" if ascii_ else "<" + DS[0] + token.replace("_", DS[1]) + DS[0] + ">"


@given(st.lists(st.tuples(NAMES, st.dictionaries(KEYS, VALUES, max_size=3)), min_size=1,
                max_size=3), st.sampled_from(["v3", "v31", "ascii"]))
def test_deepseek_round_trip(calls, style):
    a = style == "ascii"
    parts = []
    for n, args in calls:
        if style == "v3":
            inner = f"function{_ds('tool_sep')}{n}\n```json\n{json.dumps(args)}\n```"
        else:
            inner = f"{n}{_ds('tool_sep', a)}{json.dumps(args)}"
        parts.append(_ds("tool_call_begin", a) + inner + _ds("tool_call_end", a))
    found = deepseek.read("".join(parts))
    assert [(n, json.loads(x)) for n, x in found.calls] == calls


@given(st.lists(st.tuples(NAMES, STRS), min_size=1, max_size=3), st.sampled_from(["", "dsml"]))
def test_invoke_round_trip(calls, prefix):
    p = invoke.DSML if prefix else ""
    body = "".join(f'<{p}invoke name="{n}">' + "".join(
        f'<{p}parameter name="{k}">{v}</{p}parameter>' for k, v in a.items())
        + f"</{p}invoke>\n" for n, a in calls)
    found = deepseek.read_dsml(body) if prefix else invoke.read(body)
    assert [(n, dict(a)) for n, a in found.calls] == calls


@given(st.lists(st.tuples(NAMES, st.dictionaries(KEYS, VALUES, max_size=3)), min_size=1,
                max_size=3), st.sampled_from(["[ARGS]", "", "[CALL_ID]a1b2[ARGS]"]))
def test_mistral_named_round_trip(calls, infix):
    body = "".join(f"{n}{infix}{json.dumps(a)}" for n, a in calls)
    found = mistral.read(body)
    assert [(n, json.loads(x)) for n, x in found.calls] == calls


@given(NAMES, st.dictionaries(KEYS, VALUES, max_size=3),
       st.sampled_from([" <|constrain|>json", " json", ""]))
def test_harmony_round_trip(name, args, header):
    found = harmony.read(f"functions.{name}{header}<|message|>{json.dumps(args)}")
    assert [(n, json.loads(x)) for n, x in found.calls] == [(name, args)]


YAML_TEXT = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9 ./:_-]{0,20}[A-Za-z0-9./_-]", fullmatch=True)


@given(NAMES, st.dictionaries(KEYS, YAML_TEXT, min_size=1, max_size=4),
       st.sampled_from(["", "    "]))
def test_yaml_round_trip(name, args, indent):
    assume(all(": " not in v and not v.endswith(":") and " #" not in v for v in args.values()))
    body = "\n" + "".join(f"{indent}{k}: {v}\n" for k, v in args.items())
    assert yamlbody.looks_like_mapping(body)
    found = yamlbody.read(body, name=name)
    assert found.calls == [(name, args)], found.errors


def test_yaml_quoted_block_and_nested_values():
    body = ('\npath: "C:\\\\tmp\\u00e9"\nnote: \'it\'\'s\'\ntext: |\n  line 1\n  line 2\n'
            "folded: >-\n  a\n  b\ntags:\n  - x\n  - y\nopts:\n  deep: yes\n")
    found = yamlbody.read(body, name="f")
    assert found.calls == [("f", {"path": "C:\\tmp\u00e9", "note": "it's",
                                  "text": "line 1\nline 2\n", "folded": "a b",
                                  "tags": ["x", "y"], "opts": {"deep": "yes"}})]


@pytest.mark.parametrize("body", ["\n- a list\n", "\nkey: [flow, list]\n", "\njust prose\n",
                                  "\na: 1\n   b: 2\n", "\na: 1\na: 2\n", '\na: "open\n'])
def test_yaml_refuses_what_it_would_have_to_guess(body):
    found = yamlbody.read(body, name="f")
    assert not found.calls and found.errors[0].code == "invalid_xml"


@pytest.mark.parametrize("reader", [
    lambda t: glm.read(t), lambda t: kimi.read(t), lambda t: deepseek.read(t),
    lambda t: deepseek.read_dsml(t), lambda t: invoke.read(t), lambda t: mistral.read(t),
    lambda t: harmony.read(t), lambda t: yamlbody.read(t, name="f"),
])
@given(st.lists(st.sampled_from(list('<>|/"{}[]:=\n ab_') + [
    "<arg_key>", "</arg_value>", "<|tool_call_begin|>", "<|message|>", '<invoke name="a">',
    "[ARGS]", "- ", DS[0], DS[1]]), max_size=40).map("".join))
def test_no_reader_raises_on_any_input(reader, text):
    found = reader(text)
    orjson.dumps([found.calls, [e.to_dict() for e in found.errors]])
    for error in found.errors:
        assert 0 <= error.details.get("position", 0) <= len(text)
