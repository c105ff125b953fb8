"""The short way for a valid answer: prose, and ``<tool_call>`` blocks or tool tags that hold a
valid call, or one JSON call in prose.

Most answers are plain prose, or prose and ``<tool_call>`` blocks holding Hermes JSON
(``{"name": …, "arguments": {…}}``) or Qwen3-Coder's
``<function=NAME><parameter=P>text</parameter></function>`` with plain values, or a tool's own
tag (``<NAME><P>text</P></NAME>``), whose arguments match the schema; reasoning models put a
``<think>`` block first. Others write the call as JSON in prose (``Calling now {"name": …}``),
which counts as a call when no block follows it. For those the engine's general reading
(openers, end rules, events) costs several times the reading of the calls themselves.
``decode_valid`` finds those shapes with ``str.find`` and reads each call as the engine's block
reader would: strict JSON with one ``orjson.loads`` and one compiled validation, other JSON
bodies (repaired, a list of calls, arguments as a string) with the block reader's own JSON
reading, XML calls with their short way (``toolcodec.decoding.valid_xml``), JSON in prose as
the engine's prose reader decides it (one whole strict value of call shape, every call known
and valid). It gives up (``None``) at the first thing it does not know for sure: anything in
the prose or the reasoning that could begin markup, a block whose end the engine could place
elsewhere, a body of another shape, a call that does not validate, a limit reached. The general
reading then decodes the text from the start, so its answer is the reference: for every text
this one answers, the answer is the same, spans included (property-tested against the engine in
tests/test_valid_path.py).
"""

from __future__ import annotations

import re
from typing import Any

import orjson
from toolcodec.decoding.assembly import Assembly
from toolcodec.decoding.prose_reader import PROSE_JSON_FORMAT, marker_before, whole_value_end
from toolcodec.decoding.textjson import call_pairs
from toolcodec.decoding.valid_xml import read_valid_call
from toolcodec.formats.builtin import FORMAT_ID, without_think_close
from toolcodec.formats.hermes import ends_json_body
from toolcodec.formats.table import END_OF_GENERATION
from toolcodec.repair.normalize import strip_bidi
from toolcodec.repair.xmlcall import split_functions
from toolcodec.results.result import Call, DecodeResult, unique_ids
from toolcodec.scanning.bracket_depth import bracket_depth
from toolcodec.scanning.envelopes import Block
from toolcodec.scanning.openers import BODY_WS

_OPEN = "<tool_call>"
_CLOSE = "</tool_call>"
# Prose holding none of these cannot begin any built-in markup (every opener, reasoning
# token and end-of-generation token has one); a registered family's opener is still looked
# for with the openers' own prefilter. Prose holding one is searched as the engine searches.
_MARKUP_CHAR = re.compile(r"[<>\[\]{}`]")
# In a body, text the end rule reads specially (a closer inside a JSON string).
_BODY_SPECIAL = "tool_call"
_FORMAT = "hermes"
_THINK, _THINK_CLOSE = "<think>", "</think>"  # the reasoning block (formats.reasoning)
_FUNCTION = "<function="  # the head of a Qwen3-Coder body
_FUNCTION_FORMAT = FORMAT_ID["function"]
_TAG_FORMAT = FORMAT_ID["tool_tag"]  # <NAME><P>…</P></NAME> in prose


def decode_valid(codec: Any, text: str) -> DecodeResult | None:
    """The ``DecodeResult`` of *text* if it is prose with valid calls of the shapes above
    (the engine's answer, reached without it); None when the general reading must decide."""
    if codec._prefill or len(text) > codec.limits.max_chars:
        return None
    formats = codec.formats
    hermes = formats is None or _FORMAT in formats
    qwen = (formats is None or _FUNCTION_FORMAT in formats) and codec.blocks.short_xml
    tags = (formats is None or _TAG_FORMAT in formats) and codec.blocks.short_xml
    if not (hermes or qwen or tags):
        return None
    patterns = codec._openers.patterns
    if codec._bare_tool_call:
        return None
    asm = Assembly(text)
    pos = blocks = count = 0
    if text.startswith(_THINK):  # reasoning first, as reasoning models write
        close = text.find(_THINK_CLOSE, len(_THINK))
        # its closer is the first "<" (a call drafted while thinking: the engine's)
        if close < 0 or text.find("<", len(_THINK), close) >= 0:
            return None
        pos = close + len(_THINK_CLOSE)
        asm.add_reasoning(Block("think", 0, pos, len(_THINK), close, True))
    elif patterns.at_start(text):
        return None
    first = patterns.get(False)[1]
    in_prose = False  # a call was read from JSON in prose: nothing else may open after it
    while True:
        start = text.find(_OPEN, pos)
        if in_prose and start >= 0:
            return None  # a block turns the JSON before it into prose (the engine's gate)
        stop = len(text) if start < 0 else start
        if _MARKUP_CHAR.search(text, pos, stop) is None:
            hint = first.search(text, pos)  # a registered family's opener of letters
            if hint is not None and hint.start() < stop:
                return None
        else:  # the engine's own search: prose with `<`, `{`, … that opens nothing (and
            # does not end with end-of-generation tokens, which the engine keeps apart)
            m = codec._openers.find(text, pos, False)
            if m is not None and m.start() < stop:
                if in_prose:
                    return None
                if m.lastgroup == "json" and not blocks:
                    found = _prose_json(codec, text, pos, m.start())
                    if found is None:
                        return None
                    begin, pos, calls = found
                    asm.add_calls(begin, pos, calls)
                    in_prose = True
                    continue
                read = _tool_tag(codec, text, m) if tags and m.lastgroup == "tag" else None
                if read is None:
                    return None
                end, calls = read
                blocks, count = blocks + 1, count + len(calls)
                if blocks > codec.max_calls:
                    return None
                asm.add_calls(m.start(), end, calls)
                pos = end
                continue
            if start < 0 and text.rstrip().endswith(END_OF_GENERATION):
                return None
        if start < 0:
            break
        blocks += 1
        if blocks > codec.max_calls:
            return None
        body_start = start + len(_OPEN)
        close = text.find(_CLOSE, body_start)
        if close < 0:
            return None
        calls = _block_calls(codec, text, body_start, close, hermes, qwen)
        if calls is None:
            return None
        count += len(calls)
        if count > codec.max_calls:
            return None
        pos = close + len(_CLOSE)
        asm.add_calls(start, pos, calls)
    return asm.finish("xml" if blocks else "json")


def _block_calls(codec: Any, text: str, start: int, end: int, hermes: bool,
                 qwen: bool) -> list[Call] | None:
    """The calls of a block body that is strict JSON or a plain Qwen3-Coder call, naming
    known tools with valid arguments, or None."""
    body = text[start:end]
    head = body.lstrip()
    if len(body) - len(head) > BODY_WS:
        return None
    if _BODY_SPECIAL in body:
        return None
    if strip_bidi(body)[1]:  # the engine strips them and names it (text.bidi_removed)
        return None
    if head[:1] in ("{", "["):
        return _json_calls(codec, body) if hermes else None
    if qwen and head.startswith(_FUNCTION):
        return _function_calls(codec, body)
    return None


def _tool_tag(codec: Any, text: str, m: Any) -> tuple[int, list[Call]] | None:
    """Where the tool tag the openers found at ``m`` ends, and its call, when it is
    ``<NAME><P>text</P>…</NAME>`` as the XML call's short way reads it; else None."""
    name = m.group("tag")
    if not text.startswith("<", m.end()):
        return None  # blanks before the body: the engine's (and attributes: read_valid_call)
    closer = f"</{name}>"
    close = text.find(closer, m.end())
    if close < 0:
        return None
    end = close + len(closer)
    part = text[m.start():end]
    if strip_bidi(part)[1]:
        return None
    read = read_valid_call(part, _TAG_FORMAT, name, codec.blocks.registry, codec.limits)
    if read is None:
        return None
    return end, [Call(read[0], read[1], unique_ids(read[2]), format=_TAG_FORMAT)]


def _prose_json(codec: Any, text: str, pos: int, start: int
                ) -> tuple[int, int, list[Call]] | None:
    """The span and calls of the JSON candidate at *start*, the first opener of prose read
    from *pos*, when it is one whole strict value of call shape whose every call names a
    known tool and validates, as the engine decides it (``ProseReader._decide``); else None
    (inside bracketed prose, not JSON, not a call, a call that does not validate)."""
    lead = marker_before(text, pos, start)
    begin = start if lead is None else lead
    if bracket_depth(text, pos, begin, 0):
        return None  # JSON inside bracketed prose is prose
    end = whole_value_end(text, start)
    if end is None:
        return None
    try:
        pairs = call_pairs(orjson.loads(text[start:end]))
    except orjson.JSONDecodeError:
        return None
    if not pairs:
        return None
    ok, calls = codec._check_pairs(pairs)  # every tool known, every call valid
    if not ok:
        return None
    for call in calls:
        call.format = PROSE_JSON_FORMAT
    return begin, end, calls


def _json_calls(codec: Any, body: str) -> list[Call] | None:
    """The calls of a JSON body: strict ``{"name": …, "arguments": {…}}`` read here, anything
    else (repairs, a list of calls, arguments as a string) by the block reader's own JSON
    reading, as the engine reads a block that ends at this closer."""
    refusal = None
    try:
        shape = _call_shape(orjson.loads(body))
    except orjson.JSONDecodeError as exc:
        # kept without its traceback, which would hold this frame (and, once it returns,
        # every caller's) in a cycle until the garbage collector ran
        shape, refusal = None, exc.with_traceback(None)
    if shape is not None:  # the block reader would validate it the same way
        name, arguments = shape
        result = codec.validate(name, arguments)
        if not result.ok:
            return None
        return [Call(name, result.arguments, unique_ids(result.repairs), format=_FORMAT)]
    if not ends_json_body(body):  # the engine reads this closer as a string's text
        return None
    payload, closed_think = without_think_close(body)
    # the body's own refusal, not parsed again (the payload without a closer is another)
    calls, errors = codec.blocks.json_calls(payload, closed_think,
                                            refusal if payload is body else None)
    if errors or not calls:
        return None
    for call in calls:
        call.format = _FORMAT
    return calls


def _function_calls(codec: Any, body: str) -> list[Call] | None:
    """One call per ``<function=…>`` of the body, each read by the XML call's short way."""
    calls = []
    for part in split_functions(body):
        read = read_valid_call(part, "function", None, codec.blocks.registry, codec.limits)
        if read is None:
            return None
        calls.append(Call(read[0], read[1], unique_ids(read[2]), format=_FUNCTION_FORMAT))
    return calls


def _call_shape(value: Any) -> tuple[str, dict[str, Any]] | None:
    """(name, arguments) of ``{"name": …, "arguments": {…}}``, the one shape read here (a
    list of calls, other keys, arguments as a JSON string: the general reading)."""
    if not isinstance(value, dict) or len(value) != 2:
        return None
    name, arguments = value.get("name"), value.get("arguments")
    if not isinstance(name, str) or not isinstance(arguments, dict):
        return None
    return name, arguments


def names_tool_call(parameters: dict[str, Any]) -> bool:
    """Whether a tool has a parameter named ``tool_call`` (then ``<tool_call>`` after a tool's
    name on its own line may open a bare call, which this does not read)."""
    return any("tool_call" in params for params in parameters.values())
