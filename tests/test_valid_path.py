"""The valid answer's short way (``toolcodec.decoding.valid_path``) answers what the engine answers.

For every text it takes, its result (content, calls, repairs, errors, spans) is the general
reading's; texts near its edges (markup in prose, closers and value tags inside strings,
blanks past the body window, bidi controls, invalid or unknown calls) are generated on
purpose, and the common valid shapes must be taken, not only declined.
"""

from __future__ import annotations

import orjson
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from toolcodec.decoding import native
from toolcodec.decoding.codec import ToolCallCodec
from toolcodec.decoding.unread_markup import said
from toolcodec.decoding.valid_path import decode_valid
from toolcodec.repair.xml_heuristics import default_pipeline
from toolcodec.results.result import encodable_result

TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object",
        "properties": {"city": {"type": "string"},
                       "unit": {"type": "string", "enum": ["c", "f"]},
                       "days": {"type": "integer", "minimum": 1}},
        "required": ["city"], "additionalProperties": False}}},
    {"type": "function", "function": {"name": "send_mail", "parameters": {
        "type": "object",
        "properties": {"to": {"type": "string"}, "body": {"type": "string"},
                       "urgent": {"type": "boolean"},
                       "meta": {"type": "object"}},
        "required": ["to"]}}},
    {"type": "function", "function": {"name": "now", "parameters": {"type": "object"}}},
    {"type": "function", "function": {"name": "anything", "parameters": True}},
]
CODECS = {
    "default": ToolCallCodec(TOOLS),
    "hermes only": ToolCallCodec(TOOLS, formats=["hermes"]),
    "qwen_xml only": ToolCallCodec(TOOLS, formats=["qwen_xml"]),
    "starts in reasoning": ToolCallCodec(TOOLS, starts_in_reasoning=True),
    "small limits": ToolCallCodec(TOOLS, limits={"max_chars": 120}),
}


def engine_answer(codec: ToolCallCodec, text: str, finish_reason: str | None) -> dict:
    result = encodable_result(said(codec._decode_text(text, finish_reason), finish_reason))
    return _whole(result)


def _whole(result) -> dict:
    return {**result.to_dict(), "spans": [(s.kind, s.start, s.end) for s in result.spans],
            "call_spans": [c.span for c in result.calls]}


def check(codec: ToolCallCodec, text: str, finish_reason: str | None = None) -> bool:
    """Whether the short way took *text*; if it did, its answer is the engine's."""
    short = decode_valid(codec, text)
    if short is None:
        return False
    mine = _whole(encodable_result(said(short, finish_reason)))
    assert mine == engine_answer(codec, text, finish_reason)
    assert _whole(codec.decode(text, finish_reason=finish_reason)) == mine
    return True


def call_json(name: str, arguments: dict) -> str:
    return orjson.dumps({"name": name, "arguments": arguments}).decode()


def block(name: str, arguments: dict, before: str = "\n", after: str = "\n") -> str:
    return f"<tool_call>{before}{call_json(name, arguments)}{after}</tool_call>"


def qwen_block(name: str, params: list[tuple[str, str]], before: str = "\n",
               after: str = "\n") -> str:
    body = "\n".join(f"<parameter={p}>\n{v}\n</parameter>" for p, v in params)
    return f"<tool_call>{before}<function={name}>\n{body}\n</function>{after}</tool_call>"


TAKEN = [
    block("get_weather", {"city": "Paris"}),
    "I'll check.\n" + block("get_weather", {"city": "Paris", "unit": "c"}) + "\n",
    block("get_weather", {"city": "Oslo"}) + "\n" + block("send_mail", {"to": "a@b.c"}),
    "  " + block("now", {}, before="", after="") + "  done",
    block("send_mail", {"to": "x", "body": "<b>bold</b> & \"quoted\" \\ back"}),
    block("send_mail", {"to": "x", "body": "שלום ✓ \u00e9"}),
    block("get_weather", {"city": 3}),  # coerced to "3", named schema.coerce_string
    "Just an answer, no call at all.\nSecond line.",
    "Markdown: **bold**, [a link](https://x.test), `code`, {braces}, a < b & c > d.\n"
    + block("get_weather", {"city": "Rome"}) + "\n| a | b |\n|---|---|",
    "<b>HTML</b> in prose and a list:\n- [ ] task\n- [x] done",
    # value tags in JSON strings are text (the end rule once read the first closer as a Qwen
    # value's text, up to the </parameter> of the next call: both calls were lost)
    block("send_mail", {"to": "x", "body": "<parameter=x>"}) + block("send_mail", {
        "to": "</parameter>"}),
    "",
    "   ",
    # Qwen3-Coder bodies: a bare "&" is escaped and named (xml.escape_ampersand), text
    # values coerced as the schema says
    qwen_block("get_weather", [("city", "Paris"), ("days", "2")]),
    "Searching.\n" + qwen_block("send_mail", [("to", "a@b.c"), ("body", "cats && dogs")]),
    qwen_block("get_weather", [("city", "A")]) + block("now", {}) + "done",
    "<tool_call><function=now>\n</function>\n<function=get_weather>\n<parameter=city>\nP"
    "\n</parameter>\n</function></tool_call>",
    # reasoning first
    "<think>The user wants files.</think>Searching now.\n" + qwen_block(
        "send_mail", [("to", "x"), ("body", "cats && dogs")]),
    "<think>\nPlan: check the weather.\n</think>\n\n" + block("get_weather", {"city": "P"}),
    "<think></think>Just prose.",
    "<think>hm</think>" + block("get_weather", {"city": "P"}),
    # a tool's own tag in prose
    "Sure: <get_weather><city>Oslo</city><days>2</days></get_weather>",
    "<send_mail><to>a@b.c</to>\n<body>R&D & co</body></send_mail> sent. <now></now>",
    "<think>x</think><now></now>" + qwen_block("now", []),
    "<get_forecast><city>P</city></get_forecast> " + block("now", {}),  # no tool's: prose
    # JSON bodies the block reader repairs or reads in another shape, ending at their closer
    '<tool_call>{"name": "now", "arguments": "{}"}</tool_call>',
    '<tool_call>{"name": "now", "parameters": {}}</tool_call>',
    '<tool_call>{"name": "now", "arguments": {},}</tool_call>',
    '<tool_call>[{"name": "now", "arguments": {}}]</tool_call>',
    "Let me check.\n<tool_call>\n{'name': 'get_weather', 'arguments': {'city': 'Paris', "
    "'days': '3',}}\n</tool_call>",
    '<tool_call>{"name": "now", "arguments": {}}\n</think></tool_call>',
    "<think>  </think>",
    # JSON in prose that validates: a call at the end of an output with no block
    'Calling now {"name": "get_weather", "arguments": {"city": "Lima"}}',
    '{"name": "get_weather", "arguments": {"city": "Lima", "days": "2"}} done.',
    'functools [{"name": "now", "arguments": {}}, {"name": "get_weather", "arguments": '
    '{"city": "P"}}]',
    '<think>plan</think>\n{"type": "function", "function": {"name": "now", "parameters": {}}}',
    'Use {"name": "get_weather", "arguments": "{\\"city\\": \\"P\\"}"} & be <quick>.',
]


@pytest.mark.parametrize("text", TAKEN)
def test_the_common_valid_shapes_take_the_short_way_with_the_engines_answer(text):
    assert check(CODECS["default"], text), "the short way declined a valid answer"
    tags = any(f"</{name}>" in text for name in ("get_weather", "send_mail", "now"))
    hermes = check(CODECS["hermes only"], text)  # a format left out: the engine's to say
    if "<function=" not in text and not tags:
        assert hermes
    if "<function=" in text and "{" not in text and not tags:
        assert check(CODECS["qwen_xml only"], text)


DECLINED = {
    "JSON call in prose": 'Use {"name": "now", "arguments": {}} here.\n'
    + block("get_weather", {"city": "P"}),
    "an end token": block("get_weather", {"city": "P"}) + "<|im_end|>",
    "unknown tool": block("get_forecast", {"city": "P"}),
    "invalid arguments": block("get_weather", {"unit": "c"}),
    "below a minimum": block("get_weather", {"city": "P", "days": 0}),
    "extra key": block("get_weather", {"city": "P", "zip": "1"}),
    "unclosed": '<tool_call>{"name": "now", "arguments": {}}',
    "closer in a string": block("send_mail", {"to": "x", "body": "a </tool_call> b"}),
    "unbalanced quotes": "<tool_call>{'name': 'now', 'arguments': {'a': 'say \"hi'}}"
    "</tool_call>",
    "one call of two unknown": '<tool_call>[{"name": "now", "arguments": {}}, '
    '{"name": "nope", "arguments": {}}]</tool_call>',
    "a repair refused": '<tool_call>Sure: {"name": "now", "arguments": {}}</tool_call>',
    "blanks past the window": block("now", {}, before=" " * 70),
    "bidi control": block("send_mail", {"to": "x\u202e"}),
    "spaced closer": '<tool_call>{"name": "now", "arguments": {}}</ tool_call >',
    "a reference in a value": qwen_block("get_weather", [("city", "A &amp; B")]),
    "a tag in a value": qwen_block("send_mail", [("to", "x"), ("body", "<b>hi</b>")]),
    "an invalid value": qwen_block("get_weather", [("city", "P"), ("days", "0")]),
    "an unknown function": qwen_block("get_forecast", [("city", "P")]),
    "a call spelled <invoke=…>": "<tool_call><invoke=now></invoke></tool_call>",
    "a call drafted while thinking": "<think>maybe " + block("now", {}) + "</think>done",
    "reasoning never closed": "<think>still thinking",
    "reasoning not first": " <think>a</think>" + block("now", {}),
    "a tag with attributes": '<get_weather id="1"><city>P</city></get_weather>',
    "blanks before a tag's body": "<get_weather> <city>P</city></get_weather>",
    "a tag never closed": "<get_weather><city>P</city>",
    "a tag's value with markup": "<send_mail><to>x</to><body><b>hi</b></body></send_mail>",
    "a tag's invalid call": "<get_weather><city>P</city><days>0</days></get_weather>",
    "a tag's bidi control": "<send_mail><to>\u202e</to></send_mail>",
    "JSON in prose, then a tool's tag": '{"name": "now", "arguments": {}} and <now></now>',
    "JSON in prose, then a marker": '{"name": "now", "arguments": {}} [TOOL_CALLS]',
    "JSON in bracketed prose": '(see [this: {"name": "now", "arguments": {}}])',
    "JSON in prose naming an unknown tool": '{"name": "nope", "arguments": {}}',
    "JSON in prose that does not validate": '{"name": "get_weather", "arguments": {}}',
    "JSON in prose that only JSON reads": '{"name": "now", "arguments": {"n": NaN}}',
}


@pytest.mark.parametrize("name", list(DECLINED))
def test_what_it_cannot_be_sure_of_goes_to_the_engine(name):
    assert decode_valid(CODECS["default"], DECLINED[name]) is None


@pytest.mark.parametrize("name", ["qwen_xml only", "starts in reasoning"])
def test_options_that_change_the_reading_decline(name):
    assert decode_valid(CODECS[name], block("now", {})) is None


def test_a_pipeline_of_ones_own_reads_every_xml_call_the_long_way():
    codec = ToolCallCodec(TOOLS, pipeline=default_pipeline())
    assert decode_valid(codec, qwen_block("now", [])) is None
    assert decode_valid(codec, "<now></now>") is None
    assert check(codec, block("now", {}))


def test_a_tag_read_only_as_yaml_is_the_engines():
    codec = ToolCallCodec(TOOLS, formats=["yaml_tag"])
    text = "<get_weather><city>P</city></get_weather>"
    assert decode_valid(codec, text) is None
    assert codec.decode(text).errors  # a format left out, said by the engine


def test_a_text_past_max_chars_declines():
    assert decode_valid(CODECS["small limits"], block("send_mail", {"to": "x" * 200})) is None


# -- generated texts near the edges ----------------------------------------------------------

_PROSE_CHARS = st.sampled_from(list("ab yz\n\t.,:;'\"()!?-_=|*#\\/") + [
    "<", ">", "[", "]", "{", "}", "`", "é", "\u202e", "\ud800", "ש", "\u3000", "\x85"])
_PLAIN = st.text(st.sampled_from(list("ab yz\n\t.,:;'\"()!?-_=|*#\\/é") + ["ש", "\u3000"]),
                 max_size=12)
prose = _PLAIN | _PLAIN | st.lists(_PROSE_CHARS, max_size=12).map("".join) | st.sampled_from([
    "functools", "function call", "<think>", "</think>", "<|im_end|>", "[TOOL_CALLS]",
    "{\"name\": \"now\", \"arguments\": {}}", "```json\n", "\nget_weather\n", "Here is"])
_STRINGS = st.text(max_size=8) | st.sampled_from([
    "</tool_call>", "<tool_call>", "<parameter=city>", "</parameter>", "<arg_value>",
    "\\", "\"", "c", "f", "Paris", "\u202e", "</think>"])
_VALUES = st.recursive(st.none() | st.booleans() | st.integers(-3, 5) | _STRINGS,
                       lambda inner: st.lists(inner, max_size=2)
                       | st.dictionaries(_STRINGS, inner, max_size=2), max_leaves=4)
# Mostly the tool's own parameters (valid calls, or near them), sometimes anything.
ARGUMENTS = {
    "get_weather": st.fixed_dictionaries(
        {"city": _STRINGS}, optional={"unit": st.sampled_from(["c", "f", "k"]),
                                      "days": st.integers(-1, 9) | st.just("2")}),
    "send_mail": st.fixed_dictionaries(
        {"to": _STRINGS}, optional={"body": _STRINGS, "urgent": st.booleans() | st.just("true"),
                                    "meta": _VALUES}),
    "now": st.just({}) | st.dictionaries(_STRINGS, _VALUES, max_size=2),
    "nope": st.just({}),
}
blanks = st.sampled_from(["", "\n", " ", "\n\n", " " * 64, " " * 65, "\u3000", "\t\r\n"])


@st.composite
def blocks(draw) -> str:
    name = draw(st.sampled_from(["get_weather", "send_mail", "now", "nope"]))
    payload = {"name": name, "arguments": draw(ARGUMENTS[name] | ARGUMENTS["now"])}
    shape = draw(st.sampled_from(["call", "call", "call", "extra", "no args", "string args"]))
    if shape == "extra":
        payload["id"] = "x"
    elif shape == "no args":
        del payload["arguments"]
    elif shape == "string args":
        payload["arguments"] = orjson.dumps(payload["arguments"]).decode()
    body = orjson.dumps(payload).decode()
    if draw(st.integers(0, 3)) == 0 and len(body) > 2:  # damage it
        cut = draw(st.integers(1, len(body) - 1))
        body = body[:cut] + draw(st.sampled_from(["", ",", "'", "True", " ", '"', "\\", "}",
                                                  "\n</think>"])) + body[cut + 1:]
    if draw(st.integers(0, 3)) == 0:  # a Qwen3-Coder body
        values = st.sampled_from(["P", "2", "0", "true", "a && b", "&lt;", "<b>", "", "c",
                                  "\u202e", "</tool_call>", "null", '{"k": 1}'])
        params = draw(st.lists(st.tuples(
            st.sampled_from(["city", "unit", "days", "to", "body", "urgent", "meta", "zip"]),
            values), max_size=3))
        body = draw(st.sampled_from(["<function={}>", "<function={}>", "<call={}>"])).format(
            name) + "".join(f"{draw(blanks)}<parameter={p}>{draw(blanks)}{v}{draw(blanks)}"
                            "</parameter>" for p, v in params) + draw(blanks) + draw(
            st.sampled_from(["</function>", "</function>", ""]))
    closer = draw(st.sampled_from(["</tool_call>"] * 6 + ["</ tool_call>", ""]))
    return f"<tool_call>{draw(blanks)}{body}{draw(blanks)}{closer}"


_THOUGHT = st.sampled_from(["", "<think>", "<think>", "<think>\n", "</think>", "<think></think>"]
                          ) | st.builds(lambda a, b: f"<think>{a}</think>{b}", prose | _STRINGS,
                                        blanks)
_TAG_VALUES = st.sampled_from(["P", "2", "0", "c", "k", "true", "a && b", "&lt;", "<b>", "",
                               " ", "\u202e", "</tool_call>", "null", '{"k": 1}', "\n x \n"])


@st.composite
def tool_tags(draw) -> str:
    """A tool's own tag in prose: ``<NAME><P>text</P>…</NAME>``, near its edges."""
    name = draw(st.sampled_from(["get_weather", "send_mail", "now", "anything", "nope"]))
    params = draw(st.lists(st.tuples(st.sampled_from(
        ["city", "unit", "days", "to", "body", "urgent", "meta", "zip", name]), _TAG_VALUES),
        max_size=3))
    head = draw(st.sampled_from(["<{}>", "<{}>", "<{}>", "<{} >", '<{} a="1">', "<{}/>"]))
    inner = "".join(f"{draw(st.sampled_from(['', '', chr(10), ' ']))}<{p}>{v}</{p}>"
                    for p, v in params)
    tail = draw(st.sampled_from(["</{}>", "</{}>", "</{}>", "", "</{} >"]))
    return head.format(name) + draw(st.sampled_from(["", "", "\n", " " * 70])) + inner + (
        tail.format(name))


@st.composite
def prose_json(draw) -> str:
    """JSON in prose, near its edges: a call or not, valid or not, led by a call marker."""
    name = draw(st.sampled_from(["get_weather", "send_mail", "now", "nope"]))
    call = {"name": name, "arguments": draw(ARGUMENTS[name] | ARGUMENTS["now"])}
    shape = draw(st.sampled_from(["call", "call", "list", "no args", "string args", "function",
                                  "tool_calls", "other"]))
    value: object = call
    if shape == "list":
        value = [call, {"name": "now", "arguments": {}}]
    elif shape == "no args":
        value = {"name": name}
    elif shape == "string args":
        value = {**call, "arguments": orjson.dumps(call["arguments"]).decode()}
    elif shape == "function":
        value = {"type": "function", "function": call}
    elif shape == "tool_calls":
        value = {"tool_calls": [call]}
    elif shape == "other":
        value = {"answer": call}
    body = orjson.dumps(value).decode()
    if draw(st.integers(0, 4)) == 0 and len(body) > 2:  # damage it, or make it JSON's own
        cut = draw(st.integers(1, len(body) - 1))
        body = body[:cut] + draw(st.sampled_from(["", ",", "'", "NaN", " ", '"', "}", "{"])
                                 ) + body[cut + 1:]
    lead = draw(st.sampled_from(["", "", "functools", "functools ", "[", "{", "(", "] "]))
    return lead + body


texts = st.tuples(_THOUGHT, st.lists(prose | blocks() | tool_tags() | prose_json(),
                                     max_size=5).map("".join)).map("".join)


@settings(max_examples=300)
@given(st.lists(st.tuples(_PLAIN, blanks, _STRINGS, blanks), min_size=1, max_size=3), _PLAIN)
def test_valid_calls_between_any_blanks_and_plain_prose(parts, tail):
    text = "".join(f"{p}<tool_call>{b}{call_json('get_weather', {'city': c})}{a}</tool_call>"
                   for p, b, c, a in parts) + tail
    wide = any(len(b) - len(b.lstrip()) > 64 for _, b, _, _ in parts)
    special = any("tool_call" in c for _, _, c, _ in parts)
    json_blanks = all(not (b + a).strip(" \t\r\n") for _, b, _, a in parts)
    taken = check(CODECS["default"], text)
    if json_blanks and not wide and not special and "\u202e" not in "".join(
            c for _, _, c, _ in parts):
        assert taken, "the short way declined a valid answer"


@settings(max_examples=600)
@given(texts, st.sampled_from(list(CODECS)), st.sampled_from([None, "stop", "length"]))
def test_whatever_it_answers_is_the_engines_answer(text, codec, finish_reason):
    check(CODECS[codec], text, finish_reason)


@settings(max_examples=400)
@given(_THOUGHT, prose, prose_json(), prose, st.sampled_from(["", "", "<|im_end|>", "\n" * 2]))
def test_json_in_prose_answers_as_the_engine_does(thought, before, value, after, end):
    check(CODECS["default"], thought + before + value + after + end)


@settings(max_examples=200)
@given(_PLAIN, st.text(st.sampled_from("ab yzé\"\\<"), min_size=1, max_size=8),
       st.integers(1, 9), _PLAIN)
def test_a_valid_call_in_plain_prose_takes_the_short_way(before, city, days, after):
    text = before + call_json("get_weather", {"city": city, "days": days}) + after
    assert check(CODECS["default"], text), "the short way declined JSON in prose that is a call"


@settings(max_examples=300)
@given(st.lists(st.tuples(prose, blocks()), min_size=1, max_size=3))
def test_prose_and_calls_interleaved(parts):
    text = "".join(p + b for p, b in parts)
    check(CODECS["default"], text)


@settings(max_examples=300)
@given(texts, st.sampled_from([None, "", "  thought  "]), st.sampled_from([None, "length"]))
def test_a_message_without_native_calls_answers_as_the_engine_does(text, reasoning,
                                                                    finish_reason):
    codec = CODECS["default"]
    message = {"role": "assistant", "content": text}
    if reasoning is not None:
        message["reasoning_content"] = reasoning
    engine = codec._engine_message(native.read_message(message), finish_reason)
    expected = _whole(encodable_result(said(engine, finish_reason)))
    assert _whole(codec.decode(message, finish_reason=finish_reason)) == expected


@pytest.mark.parametrize("text", TAKEN)
def test_messages_take_the_short_way_too(text, monkeypatch):
    codec = CODECS["default"]
    message = {"role": "assistant", "content": text, "reasoning_content": "why"}
    expected = _whole(encodable_result(said(
        codec._engine_message(native.read_message(message)))))
    monkeypatch.setattr(codec, "_engine_message", None)  # the engine is not reached
    assert _whole(codec.decode(message)) == expected
