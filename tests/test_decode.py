"""The ordered gate of ``ToolCallCodec.decode`` on text: envelopes, reasoning, content."""

from __future__ import annotations

import orjson
import pytest
import toolcodec as codec
from toolcodec import errors
from toolcodec.decoding.codec import ToolCallCodec

TOOLS = [
    {
        "type": "function",
        "function": {
            "name": "get_weather",
            "description": "Current weather for a city.",
            "parameters": {
                "type": "object",
                "properties": {
                    "city": {"type": "string"},
                    "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                },
                "required": ["city"],
                "additionalProperties": False,
            },
        },
    },
    {
        "type": "function",
        "function": {
            "name": "set_alarm",
            "parameters": {
                "type": "object",
                "properties": {"hour": {"type": "integer"}, "enabled": {"type": "boolean"}},
                "required": ["hour", "enabled"],
            },
        },
    },
    {"name": "send_message", "parameters": {
        "type": "object", "properties": {"message": {"type": "string"}},
        "required": ["message"]}},
]


@pytest.fixture(scope="module")
def tc() -> ToolCallCodec:
    return ToolCallCodec(TOOLS)


def hermes(name: str, args: dict) -> str:
    body = orjson.dumps({"name": name, "arguments": args}).decode()
    return f"<tool_call>{body}</tool_call>"


def codes(result) -> list[str]:
    return [e.code for e in result.errors]


def calls(result) -> list[tuple[str, dict]]:
    return [(c.name, c.arguments) for c in result.calls]


# -- none / plain text ----------------------------------------------------------------------


def test_plain_text_is_content(tc):
    r = tc.decode("  Just an answer.\n")
    assert r.ok and r.path == "none" and r.calls == []
    assert r.content == "Just an answer." and r.reasoning is None


def test_result_is_plain_json(tc):
    r = tc.decode("<think>hm</think>" + hermes("get_weather", {"city": "Oslo"}))
    assert orjson.loads(orjson.dumps(r.to_dict())) == r.to_dict()


# -- hermes / qwen JSON envelopes -----------------------------------------------------------


def test_hermes_single_call(tc):
    r = tc.decode(hermes("get_weather", {"city": "Paris", "unit": "celsius"}))
    assert r.ok and r.path == "xml"
    assert calls(r) == [("get_weather", {"city": "Paris", "unit": "celsius"})]
    assert r.content == "" and r.repairs == [] and r.calls[0].repairs == []


def test_parallel_calls_and_text_kept_in_order(tc):
    text = ("Checking both.\n" + hermes("get_weather", {"city": "Rome"}) + "\nand\n"
            + hermes("set_alarm", {"hour": 7, "enabled": True}) + "\nDone.")
    r = tc.decode(text)
    assert r.ok
    assert calls(r) == [("get_weather", {"city": "Rome"}),
                        ("set_alarm", {"hour": 7, "enabled": True})]
    assert r.content == "Checking both.\n\nand\n\nDone."


def test_parameters_key_accepted_for_arguments(tc):
    r = tc.decode('<tool_call>{"name": "get_weather", "parameters": {"city": "Lima"}}'
                  "</tool_call>")
    assert r.ok and calls(r) == [("get_weather", {"city": "Lima"})]


def test_list_body_gives_parallel_calls(tc):
    body = orjson.dumps([{"name": "get_weather", "arguments": {"city": "A"}},
                         {"name": "get_weather", "arguments": {"city": "B"}}]).decode()
    r = tc.decode(f"<tool_call>\n{body}\n</tool_call>")
    assert r.ok and [c.arguments["city"] for c in r.calls] == ["A", "B"]


def test_arguments_as_json_string_are_decoded(tc):
    r = tc.decode('<tool_call>{"name": "get_weather", "arguments": "{\\"city\\": \\"Kyiv\\"}"}'
                  "</tool_call>")
    assert r.ok and calls(r) == [("get_weather", {"city": "Kyiv"})]
    assert "schema.decode_json_string" in r.calls[0].repairs


def test_malformed_json_body_repaired_and_named(tc):
    r = tc.decode("<tool_call>{'name': 'get_weather', 'arguments': {'city': 'Bern',}}"
                  "</tool_call>")
    assert r.ok and calls(r) == [("get_weather", {"city": "Bern"})]
    assert "json.single_quotes" in r.calls[0].repairs
    assert "json.trailing_comma" in r.calls[0].repairs
    # every call repair is in the result's repairs, in order
    assert [x for x in r.repairs if x in r.calls[0].repairs] == r.calls[0].repairs


def test_missing_final_close_tag_runs_to_end(tc):
    r = tc.decode('Sure.\n<tool_call>{"name": "get_weather", "arguments": {"city": "Nice"}}\n')
    assert r.ok and calls(r) == [("get_weather", {"city": "Nice"})]
    assert r.content == "Sure."
    assert "xml.balance_tags" in r.calls[0].repairs


def test_truncated_close_tag_at_end(tc):
    r = tc.decode('<tool_call>{"name": "get_weather", "arguments": {"city": "Nice"}}\n</tool_')
    assert r.ok and calls(r) == [("get_weather", {"city": "Nice"})] and r.content == ""


def test_truncated_json_in_envelope_is_repaired_and_named(tc):
    r = tc.decode('<tool_call>{"name": "get_weather", "arguments": {"city": "Nice"}')
    assert r.ok and calls(r) == [("get_weather", {"city": "Nice"})]
    assert "json.unclosed" in r.repairs and "json.unclosed_string" not in r.repairs
    cut = tc.decode('<tool_call>{"name": "send_message", "arguments": {"message": "hello wor')
    assert cut.ok and calls(cut) == [("send_message", {"message": "hello wor"})]
    assert cut.calls[0].repairs == ["xml.balance_tags", "json.unclosed", "json.unclosed_string"]


def test_truncated_call_missing_required_argument_is_refused(tc):
    text = '<tool_call>{"name": "get_weather", "arguments": {"city":'
    r = tc.decode(text)
    assert not r.ok and r.calls == []
    assert codes(r) == [errors.SCHEMA_VIOLATION]
    assert r.content == text


# -- failures: reported, text kept ------------------------------------------------------------


def test_bad_block_among_good_ones(tc):
    bad = '<tool_call>{"name": "get_weather", "arguments": {"days": 2 * 3}}</tool_call>'
    text = hermes("get_weather", {"city": "Oslo"}) + "\n" + bad + "\n" + hermes(
        "send_message", {"message": "hi"})
    r = tc.decode(text)
    assert not r.ok and r.path == "xml"
    assert calls(r) == [("get_weather", {"city": "Oslo"}), ("send_message", {"message": "hi"})]
    assert codes(r) == [errors.ARITHMETIC_EXPRESSION]
    err = r.errors[0].to_dict()
    assert err["block"] == 1 and err["raw"] == bad
    assert err["position"] == text.index("2 * 3")  # where the expression is, in the input
    assert f"at offset {text.index(bad)}" in err["message"]
    assert "block 1" in err["message"]
    assert r.content == bad


def test_unknown_tool_reported_not_dropped(tc):
    text = "Let me try.\n" + hermes("delete_everything", {"path": "/"})
    r = tc.decode(text)
    assert not r.ok and r.calls == []
    assert codes(r) == [errors.UNKNOWN_TOOL]
    assert "delete_everything" in r.errors[0].message
    assert r.content == text.strip()


def test_yes_for_boolean_is_schema_violation(tc):
    text = hermes("set_alarm", {"hour": 7, "enabled": "yes"})
    r = tc.decode(text)
    assert not r.ok and r.calls == []
    assert errors.SCHEMA_VIOLATION in codes(r)
    assert r.content == text  # the call's text stays visible


def test_arithmetic_is_refused(tc):
    r = tc.decode('<tool_call>{"name": "set_alarm", "arguments": {"hour": 6 + 1, '
                  '"enabled": true}}</tool_call>')
    assert not r.ok and r.calls == []
    assert errors.ARITHMETIC_EXPRESSION in codes(r)


def test_envelope_body_that_is_not_a_call(tc):
    r = tc.decode("<tool_call>[1, 2, 3]</tool_call>")
    assert not r.ok and codes(r) == [errors.INVALID_JSON]
    assert "not a tool call" in r.errors[0].message


def test_list_with_one_bad_element_fails_whole_block(tc):
    body = orjson.dumps([{"name": "get_weather", "arguments": {"city": "A"}},
                         {"name": "nope", "arguments": {}}]).decode()
    r = tc.decode(f"<tool_call>{body}</tool_call>")
    assert not r.ok and r.calls == [] and codes(r) == [errors.UNKNOWN_TOOL]


def test_unclosed_envelope_stops_at_next_opener(tc):
    text = ('<tool_call>{"name": "nope", "arguments": {}}\n'
            + hermes("get_weather", {"city": "Oslo"}))
    r = tc.decode(text)
    assert calls(r) == [("get_weather", {"city": "Oslo"})]
    assert codes(r) == [errors.UNKNOWN_TOOL]
    assert r.content == '<tool_call>{"name": "nope", "arguments": {}}'


# -- reasoning ------------------------------------------------------------------------------


def test_think_moves_to_reasoning(tc):
    r = tc.decode("<think>\nThe user wants weather.\n</think>\n"
                  + hermes("get_weather", {"city": "Oslo"}))
    assert r.reasoning == "The user wants weather." and r.content == ""
    assert r.ok and len(r.calls) == 1


def test_unclosed_think_runs_to_end(tc):
    r = tc.decode("Hi <think>still thinking about " + hermes("get_weather", {"city": "X"}))
    assert r.content == "Hi" and r.calls == [] and r.ok
    assert r.reasoning.startswith("still thinking about <tool_call>")


def test_stray_close_think_is_text_unless_the_output_starts_in_reasoning(tc):
    r = tc.decode("I should check.\n</think>\n\nIt is sunny.")
    assert r.reasoning is None and r.content == "I should check.\n</think>\n\nIt is sunny."
    tc = ToolCallCodec(TOOLS, starts_in_reasoning=True)
    r = tc.decode("I should check.\n</think>\n\nIt is sunny.")
    assert r.reasoning == "I should check." and r.content == "It is sunny."


def test_orphan_close_think_after_a_block_is_text(tc):
    r = tc.decode("<think>a</think>b</think>c")
    assert r.reasoning == "a" and r.content == "b</think>c"


# -- qwen3 <function=…>, tool-name tags, <tool> -------------------------------------------


def test_qwen3_function_body(tc):
    r = tc.decode("<tool_call>\n<function=get_weather>\n<parameter=city>\nParis\n</parameter>\n"
                  "</function>\n</tool_call>")
    assert r.ok, r.errors
    assert calls(r) == [("get_weather", {"city": "Paris"})]


def test_bare_function_without_wrapper(tc):
    r = tc.decode("Ok: <function=set_alarm><parameter=hour>7</parameter>"
                  "<parameter=enabled>true</parameter></function> then")
    assert r.ok, r.errors
    assert calls(r) == [("set_alarm", {"hour": 7, "enabled": True})]
    assert r.content == "Ok:  then"


def test_tool_name_tag(tc):
    r = tc.decode("Sure.\n<get_weather><city>Paris</city></get_weather>")
    assert r.ok, r.errors
    assert calls(r) == [("get_weather", {"city": "Paris"})] and r.content == "Sure."


def test_unknown_tag_is_just_text(tc):
    r = tc.decode("<b>bold</b> and <tool_callx>")
    assert r.ok and r.path == "none" and r.content == "<b>bold</b> and <tool_callx>"


def test_tool_tag_inside_envelope_is_not_a_second_call(tc):
    r = tc.decode('<tool_call>{"name": "send_message", "arguments": {"message": '
                  '"<get_weather><city>X</city></get_weather>"}}</tool_call>')
    assert r.ok and len(r.calls) == 1
    assert r.calls[0].arguments["message"] == "<get_weather><city>X</city></get_weather>"


def test_tool_element(tc):
    r = tc.decode("<tool><tool_name>get_weather</tool_name><arguments><city>Oslo</city>"
                  "</arguments></tool>")
    assert r.ok, r.errors
    assert calls(r) == [("get_weather", {"city": "Oslo"})]
    assert r.repairs == []  # well-formed: nothing to balance


def test_unclosed_tool_element_is_balanced_and_named(tc):
    r = tc.decode("<tool><tool_name>get_weather</tool_name><arguments><city>Oslo</city>")
    assert r.ok and calls(r) == [("get_weather", {"city": "Oslo"})]
    assert r.repairs == ["xml.balance_tags"]


# -- JSON in text -----------------------------------------------------------------------------


def test_json_call_in_text(tc):
    r = tc.decode('Calling: {"name": "get_weather", "arguments": {"city": "Oslo"}} now')
    assert r.ok and r.path == "json"
    assert calls(r) == [("get_weather", {"city": "Oslo"})] and r.content == "Calling:  now"


def test_fenced_json_call(tc):
    r = tc.decode('Here:\n```json\n{"name": "get_weather", "parameters": {"city": "Oslo"}}\n```')
    assert r.ok and r.path == "json" and r.content == "Here:"
    assert calls(r) == [("get_weather", {"city": "Oslo"})]


@pytest.mark.parametrize("shown", [
    'Use it like {"name": "my_tool", "arguments": {"x": 1}} in your code.',  # unknown tool
    'The schema is {"name": "get_weather", "description": "weather"}.',  # not a call shape
    'For example {"name": "get_weather", "arguments": {"town": "Oslo"}}.',  # fails schema
    'Example: {"name": "get_weather", "arguments": {"city": "Os',  # cut off
    'A config {"example": {"name": "get_weather", "arguments": {"city": "X"}}}',  # nested
])
def test_shown_json_stays_content_without_error(tc, shown):
    r = tc.decode(shown)
    assert r.ok and r.path == "none" and r.calls == [] and r.errors == []
    assert r.content == shown.strip()


def test_mixed_xml_and_json_xml_wins(tc):
    text = ('{"name": "get_weather", "arguments": {"city": "Json"}}\n'
            + hermes("get_weather", {"city": "Xml"}))
    r = tc.decode(text)
    assert r.path == "xml" and calls(r) == [("get_weather", {"city": "Xml"})]
    assert "gate.mixed_formats" in r.repairs
    assert r.content.startswith('{"name": "get_weather"')


def test_no_mixed_flag_for_plain_envelopes(tc):
    r = tc.decode(hermes("get_weather", {"city": "Xml"}) + ' {"unit": "celsius"}')
    assert "gate.mixed_formats" not in r.repairs


# -- payload-only normalisation ---------------------------------------------------------------


def test_bidi_removed_from_hebrew_payload_but_kept_in_content(tc):
    rlm = "\u200f"
    text = (f"שלום{rlm} עולם\n<tool_call>{{\"name\": \"send_message\", \"arguments\": "
            f"{{\"message\": \"שלום{rlm} עולם\"}}}}</tool_call>")
    r = tc.decode(text)
    assert r.ok, r.errors
    assert r.calls[0].arguments == {"message": "שלום עולם"}
    assert "text.bidi_removed" in r.calls[0].repairs and "text.bidi_removed" in r.repairs
    assert r.content == f"שלום{rlm} עולם"


def test_bidi_kept_in_reasoning(tc):
    r = tc.decode("<think>א\u200fב</think>ok")
    assert r.reasoning == "א\u200fב"


# -- limits and bad input -------------------------------------------------------------------


def test_payload_too_large_keeps_text():
    small = ToolCallCodec(TOOLS, limits=codec.Limits(max_chars=10))
    r = small.decode("x" * 11)
    assert not r.ok and codes(r) == [errors.PAYLOAD_TOO_LARGE] and r.content == "x" * 11


@pytest.mark.parametrize("bad", [None, 42, ["list"], b"bytes"])
def test_non_str_non_dict_is_bad_request(tc, bad):
    r = tc.decode(bad)
    assert not r.ok and codes(r) == [errors.BAD_REQUEST]


def test_invalid_tools_raise_at_construction():
    with pytest.raises(codec.InvalidToolsError):
        ToolCallCodec([{"name": ""}])


# -- module-level functions ------------------------------------------------------------------


def test_module_decode_and_validate_share_a_cached_codec():
    from toolcodec.decoding.codec import codec_for

    a = codec_for(TOOLS)
    b = codec_for(orjson.loads(orjson.dumps(TOOLS)))  # equal but distinct objects
    assert a is b
    assert codec_for(TOOLS, nfkc_strings=True) is not a
    r = codec.decode(hermes("get_weather", {"city": "Oslo"}), tools=TOOLS)
    assert r.ok and calls(r) == [("get_weather", {"city": "Oslo"})]
    v = codec.validate("set_alarm", {"hour": "7", "enabled": True}, tools=TOOLS)
    assert v.to_dict()["arguments"] == {"hour": 7, "enabled": True}


def test_public_exports():
    for name in ("ToolCallCodec", "decode", "validate", "repair_json", "DecodeResult", "Call",
                 "RepairResult", "ValidationResult", "CodecError", "Limits", "Heuristic",
                 "HeuristicContext", "HeuristicResult", "Pipeline", "InvalidToolsError"):
        assert getattr(codec, name) is not None, name
    assert codec.errors.SCHEMA_VIOLATION == "schema_violation"
    assert codec.repair_json('{"a": 1,}').to_dict()["value"] == {"a": 1}


def test_import_codec_is_cheap():
    import subprocess
    import sys

    code = "import sys, codec; print('jsonschema' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         check=True)
    assert out.stdout.strip() == "False"


def test_several_functions_in_one_envelope(tc):
    text = ("<tool_call>\n<function=get_weather><parameter=city>A</parameter></function>\n"
            "<function=send_message><parameter=message>hi</parameter></function>\n"
            "</tool_call>")
    r = tc.decode(text)
    assert r.ok, r.errors
    assert calls(r) == [("get_weather", {"city": "A"}), ("send_message", {"message": "hi"})]
    assert r.calls[0].span == r.calls[1].span == (0, len(text))


def test_prose_inside_envelope_is_refused_not_dropped(tc):
    text = ('<tool_call>{"name": "get_weather", "arguments": {"city": "Oslo"}} but maybe Rome'
            "</tool_call>")
    r = tc.decode(text)
    assert not r.ok and r.calls == [] and codes(r) == [errors.INVALID_JSON]
    assert r.errors[0].details["repair"] == "json.surrounding_text"
    assert r.content == text


def test_markup_body_gets_an_xml_error(tc):
    r = tc.decode("<tool_call><function>get_weather</function></tool_call>")
    assert not r.ok and codes(r) == [errors.INVALID_XML]


def test_known_tool_tag_inside_tool_call_wrapper(tc):
    r = tc.decode("<tool_call><get_weather><city>Oslo</city></get_weather></tool_call>")
    assert r.ok, r.errors
    assert calls(r) == [("get_weather", {"city": "Oslo"})]


class UpperCity:
    """A user heuristic: post-parse, upper-cases the city argument."""

    id = "custom.upper_city"
    phase = "post-parse"

    def applies(self, ctx):
        return isinstance(ctx.parsed, dict) and isinstance(ctx.parsed.get("city"), str)

    def run(self, ctx):
        return codec.HeuristicResult(parsed={**ctx.parsed, "city": ctx.parsed["city"].upper()})


def test_user_heuristics_reach_the_xml_decoder():
    tc = ToolCallCodec(TOOLS, heuristics=[UpperCity()])
    r = tc.decode("<get_weather><city>Oslo</city></get_weather>")
    assert r.ok, r.errors
    assert calls(r) == [("get_weather", {"city": "OSLO"})]
    assert "custom.upper_city" in r.calls[0].repairs
    # the default codec is unaffected
    plain = ToolCallCodec(TOOLS).decode("<get_weather><city>Oslo</city></get_weather>")
    assert calls(plain) == [("get_weather", {"city": "Oslo"})]


def test_envelopes_past_the_call_limit_stay_content(tc):
    from toolcodec.decoding.codec import MAX_CALLS

    one = hermes("get_weather", {"city": "Oslo"})
    text = "\n".join([one] * (MAX_CALLS + 3))
    r = tc.decode(text)
    assert len(r.calls) == MAX_CALLS
    assert codes(r) == [errors.PAYLOAD_TOO_LARGE]
    assert r.content == "\n".join([one] * 3)  # the undecoded rest, kept


def test_list_body_past_the_call_limit_is_refused(tc):
    from toolcodec.decoding.codec import MAX_CALLS

    body = orjson.dumps([{"name": "get_weather", "arguments": {"city": "A"}}]
                        * (MAX_CALLS + 1)).decode()
    r = tc.decode(f"<tool_call>{body}</tool_call>")
    assert r.calls == [] and codes(r) == [errors.PAYLOAD_TOO_LARGE]


def test_failed_envelope_json_does_not_count_as_mixed(tc):
    r = tc.decode(hermes("get_weather", {"city": "A"})
                  + hermes("set_alarm", {"hour": 1, "enabled": "yes"}))
    assert len(r.calls) == 1 and codes(r) == [errors.SCHEMA_VIOLATION]
    assert "gate.mixed_formats" not in r.repairs


@pytest.mark.parametrize("message", [
    "use </tool_call> to end", "nested <tool_call> opener", 'quoted \\"</tool_call>\\" too'])
def test_envelope_tags_inside_json_strings(tc, message):
    body = orjson.dumps({"name": "send_message", "arguments": {"message": message}}).decode()
    text = f"<tool_call>{body}</tool_call> after"
    r = tc.decode(text)
    assert r.ok, r.errors
    assert calls(r) == [("send_message", {"message": message})] and r.content == "after"


def test_limits_given_as_json_fields():
    small = ToolCallCodec(TOOLS, limits={"max_chars": 5})
    assert codes(small.decode("123456")) == [errors.PAYLOAD_TOO_LARGE]
    with pytest.raises(TypeError):
        ToolCallCodec(TOOLS, limits={"max_bytes": 5})


def test_tool_name_mentioned_in_prose_is_not_a_call(tc):
    text = "You can use the <get_weather> tool to check the weather. Anything else?"
    r = tc.decode(text)
    assert r.ok and r.path == "none" and r.calls == [] and r.content == text


def test_unclosed_tool_tag_followed_by_a_parameter_is_a_cut_off_call(tc):
    r = tc.decode("Sure: <get_weather>\n<city>Paris</city>")
    assert r.ok and calls(r) == [("get_weather", {"city": "Paris"})]
    assert "xml.balance_tags" in r.repairs and r.content == "Sure:"


def test_envelope_syntax_named_in_prose_is_not_a_call(tc):
    for text in ("I will emit a <tool_call> block next.", "The <tool> element holds a call."):
        r = tc.decode(text)
        assert r.ok and r.path == "none" and r.content == text


def test_output_cut_right_after_an_opener_is_reported(tc):
    r = tc.decode("ok <tool_call>")
    assert not r.ok and r.calls == [] and r.content == "ok <tool_call>"


def test_arguments_before_the_name_still_make_a_call():
    tc = ToolCallCodec([{"name": "add", "parameters": {"type": "object", "properties": {
        "a": {"type": "integer"}}}}])
    r = tc.decode('[TOOL_CALLS] [{"arguments": {"a": 1}, "name": "add"}]')
    assert r.ok and r.path == "xml" and [(c.name, c.arguments) for c in r.calls] == [
        ("add", {"a": 1})]
    assert r.calls[0].format == "mistral"
    assert r.content == ""  # the marker belongs to the call


# -- error positions are the caller's ----------------------------------------------------------

_ANY = [{"name": "f", "parameters": {"type": "object"}}]


def _line_col(text: str, at: int) -> tuple[int, int]:
    return text.count("\n", 0, at) + 1, at - (text.rfind("\n", 0, at) + 1) + 1


@pytest.mark.parametrize("text, found", [
    ('line1\nline2\n<tool_call>\n{"name": "f",\n "arguments": {"a": 1 + 2}}\n</tool_call>',
     "1 + 2"),
    ("intro\n\n<tool_call>\n<function=f>\n<parameter=a>1</parameter>\n"
     "<parameter=b><![CDATA[x</parameter>\n</function></tool_call>", "<![CDATA[x"),
    ("a\n<tool_call><function=g>\n<parameter=a>1</parameter></function>\n<function=f>\n"
     "<parameter=b><![CDATA[x</parameter>\n</function></tool_call>", "<![CDATA[x"),
    # bidi controls removed before parsing must not shift the reported place
    ('x\u200f\u200f\n<tool_call>{"name": "f", "arguments": \u202b{"a": 2 * 3}}</tool_call>',
     "2 * 3"),
])
def test_error_positions_count_from_the_start_of_the_input(text, found):
    r = codec.decode(text, tools=_ANY + [{"name": "g", "parameters": {"type": "object"}}])
    assert r.errors
    error = r.errors[-1]
    at = error.details["position"]
    assert text[at:].startswith(found)
    line, column = _line_col(text, at)
    assert f"(line {line}, column {column})" in error.message
    # the stream, fed one character at a time, places it identically
    tc = ToolCallCodec(_ANY + [{"name": "g", "parameters": {"type": "object"}}])
    dec = tc.stream()
    for ch in text:
        dec.feed(ch)
    dec.close()
    assert [e.to_dict() for e in dec.result().errors] == [e.to_dict() for e in r.errors]


# -- XML calls that used to come back wrong --------------------------------------------------

_XML_TOOLS = [
    {"name": "get_location", "parameters": {"type": "object"}},
    {"name": "get_weather", "parameters": {"type": "object", "properties": {
        "location": {"type": "string"}}}},
    {"name": "s", "parameters": {"type": "object", "properties": {"s": {"type": "integer"}}}},
    {"name": "alpha", "parameters": {"type": "object", "properties": {
        "query": {"type": "string"}}}},
    {"name": "beta", "parameters": {"type": "object"}},
    {"name": "empty", "parameters": {"type": "object", "properties": {
        "arr": {"type": "array", "items": {"type": "number"}}, "obj": {"type": "object"}}}},
    {"name": "write_file", "parameters": {"type": "object", "properties": {
        "file_path": {"type": "string"}, "contents": {"type": "string"}}}},
    {"name": "w2", "parameters": {"type": "object", "properties": {"city": {"type": "string"}},
                                  "additionalProperties": True}},
]


@pytest.mark.parametrize("text, expected, content", [
    ("<get_location/>", [("get_location", {})], ""),
    ("Hi <get_location/> there", [("get_location", {})], "Hi  there"),
    ("<get_location/><get_weather><location>Seoul</location></get_weather>",
     [("get_location", {}), ("get_weather", {"location": "Seoul"})], ""),
    ("<get_location   /><get_location/>", [("get_location", {})] * 2, ""),
    ("<s><s>10</s></s>", [("s", {"s": 10})], ""),
    ("<tool_call><function=alpha><parameter=query><![CDATA[How to use <function=beta> and "
     "<parameter=x> tags]]></parameter></function></tool_call>",
     [("alpha", {"query": "How to use <function=beta> and <parameter=x> tags"})], ""),
    ("<empty><arr></arr></empty>", [("empty", {"arr": []})], ""),
    ("<empty><arr>   </arr><obj>{}</obj></empty>", [("empty", {"arr": [], "obj": {}})], ""),
    ('<w2><param name="city">Paris</param></w2>', [("w2", {"city": "Paris"})], ""),
    ('<w2><parameter name="city">Paris</parameter></w2>', [("w2", {"city": "Paris"})], ""),
    ('<w2><arg name="city">Paris</arg></w2>', [("w2", {"city": "Paris"})], ""),
    ("<write_file><file_path>a</file_path><file_path>a</file_path></write_file>",
     [("write_file", {"file_path": "a"})], ""),
])
def test_xml_calls_read_right(text, expected, content):
    r = codec.decode(text, tools=_XML_TOOLS)
    assert r.ok, r.errors
    assert [(c.name, c.arguments) for c in r.calls] == expected
    assert r.content == content


@pytest.mark.parametrize("text, parameter", [
    ("<get_weather><location>Seoul<location></get_weather>", "location"),
    ("<write_file><file_path>a</file_path><file_path>b</file_path></write_file>", "file_path"),
])
def test_xml_values_that_would_be_lost_or_chosen_are_refused(text, parameter):
    r = codec.decode(text, tools=_XML_TOOLS)
    assert not r.calls and [e.code for e in r.errors] == ["invalid_xml"]
    assert r.errors[0].details["parameter"] == parameter
    assert r.content == text
