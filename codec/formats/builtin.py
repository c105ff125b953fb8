"""Which reader a block of a built-in format gets, told from its opener and the head of its body.

A ``<tool_call>`` envelope holds Hermes JSON, Qwen3's ``<function=…>`` markup, a tool tag, a
GLM body, a bare tool name on a line of its own…; a marker format's ``body`` names its reader,
or a choice between two told by the body (JSON or Python calls). This module makes those
choices and runs the text readers of ``toolcodec.formats``; checking the names and arguments a
reader found is the block reader's job (``toolcodec.decoding.blocks``).
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

from toolcodec.formats import (
    FormatRead,
    apertus,
    atem,
    deepseek,
    functionary,
    gcml,
    gemma,
    glm,
    harmony,
    hunyuan,
    ifm,
    invoke,
    kimi,
    kimi_k3,
    minicpm,
    minimax_m3,
    mistral,
    pythonic,
    solar_open,
    step3,
    yamlbody,
)
from toolcodec.formats.table import MARKER_FORMATS, MarkerFormat
from toolcodec.results.errors import CodecError
from toolcodec.results.limits import Limits
from toolcodec.scanning import envelopes
from toolcodec.scanning.envelopes import Block

BARE_TOOL_NAME = "xml.bare_tool_name"
THINK_CLOSE_DROPPED = "format.think_close_dropped"
MISSING_LT = "xml.missing_lt"
_JSON_START = re.compile(r"\s*(?:\{|\[\s*\{|\[\s*\])")
# Inside <tool_call>: a tool's name on its own line, then a tag that is not GLM's <arg_key>.
_BARE_HEAD = re.compile(r"([A-Za-z_][\w.\-]{0,127})[ \t]*:?[ \t]*\r?\n\s*<(?!arg_key>|/)")
# `<tool_call>function=NAME>…`: Qwen's call tag lost its "<".
_LOST_LT = re.compile(r"(?:function|call|invoke|tool)=[\w.\-]+>")
# `<get_weather⏎city: Oslo⏎/>`: an opening tag left open around YAML lines, closed by "/>".
_LEFT_OPEN_TAG = re.compile(r"<[^\s<>/]+[ \t]*\r?\n([^<>]*?)/>[ \t\r\n]*\Z")
_HARMONY_CHANNEL = re.compile(r"<\|channel\|>[a-z]*")
# `<function=NAME>` then a JSON object: Functionary v3.1 / Llama 3.1, not Qwen's parameters.
FUNCTION_JSON = re.compile(r"<function=([\w.\-]{1,128})>[ \t\r\n]*(?=\{)")
# The public format id of a block read by a built-in body reader.
FORMAT_ID = {"json": "hermes", "function": "qwen_xml", "function_json": "functionary",
             "tool_tag": "tool_tag", "bare_tag": "tool_tag", "function_lt": "qwen_xml",
             "tool_element": "tool_element", "glm": "glm", "yaml_tag": "yaml_tag"}
# JSON values in a row, as Llama writes parallel calls (``{…};{…}``).
json_end = mistral.json_end


def marker_for_body(marker: MarkerFormat, payload: str) -> MarkerFormat:
    """``<|tool_call_begin|>`` is Kimi-K2's token and also DeepSeek's re-spelled by a server;
    a body with Kimi's argument token is Kimi's."""
    if marker.id == "deepseek" and "<|tool_call_argument_begin|>" in payload:
        return next(f for f in MARKER_FORMATS if f.id == "kimi_k2" and f.keep_opener)
    return marker


def marker_reader(body: str, payload: str) -> str:
    """The reader of a marker format's body: its ``body``, or the one the body's head picks
    (``json`` for a JSON call or list of calls)."""
    if body == "tool_calls":  # Hunyuan A13B's JSON list, or HY3's <tool_call> elements
        return "json" if _JSON_START.match(payload) else "hunyuan"
    if body in ("json_or_pythonic", "mistral") and _JSON_START.match(payload):
        return "json"
    if body == "json_or_pythonic":
        return "pythonic"
    return body


def payload_format(block: Block, payload: str, known: Callable[[str], bool],
                   inner_openers: Callable[[], Any]) -> tuple[str, str | None]:
    """The reader of a tag block's body and the tag it reads, from the head of the body.

    ``known`` says whether a name is a tool's; ``inner_openers`` gives the tool-tag openers
    (compiled on first use: only a ``<tool_call>`` body that starts with markup needs them).
    """
    if block.fmt == "tool_tag" and yaml_body(payload):
        return "yaml_tag", block.tag
    if block.fmt == "function" and FUNCTION_JSON.match(payload):
        return "function_json", None  # Functionary v3.1 / Llama 3.1: JSON arguments
    if block.fmt != "tool_call":
        return block.fmt, block.tag
    head = payload.lstrip()
    if _LOST_LT.match(head):
        return "function_lt", None
    bare = _BARE_HEAD.match(head)
    if bare and known(bare.group(1)):
        return "bare_tag", bare.group(1)  # <tool_call>NAME, then its parameters' tags
    if head[:1].isalpha() or head[:1] == "_":  # GLM: the tool's name, then its arguments
        return ("glm" if glm.looks_like_body(head) else "json"), None
    if not head.startswith("<"):
        return "json", None
    inner = envelopes.scan(head, inner_openers())
    if inner and inner[0].start == 0 and inner[0].fmt in ("tool_tag", "tool_element"):
        return inner[0].fmt, inner[0].tag
    # Markup that is not a known tool tag: the Qwen3 ``<function=…>`` family, whose
    # decoder reports precisely what is wrong with it (a JSON error would mislead).
    return "function", None


def yaml_body(payload: str) -> bool:
    """A tool tag whose body starts as ``key: value`` lines, not with a tag."""
    start, end = _tag_body_span(payload)
    body = payload[start:end]
    if body.lstrip()[:1] in ("<", ""):
        return False
    return yamlbody.looks_like_mapping(body)


def without_think_close(payload: str) -> tuple[str, list[str]]:
    """A JSON body followed by ``</think>`` (the model closed its reasoning late, inside the
    envelope): the tag is markup, never argument data, and is dropped
    (``format.think_close_dropped``). Only shortens the end: offsets hold."""
    stripped = payload.rstrip()
    if stripped.endswith("</think>") and stripped[:-8].rstrip().endswith(("}", "]")):
        return stripped[:-8], [THINK_CLOSE_DROPPED]
    return payload, []


def _tag_body_span(payload: str) -> tuple[int, int]:
    """Where the text between a tool tag's opening tag and its closing tag (if any) lies; for
    a tag left open around ``key: value`` lines and closed by ``/>``, those lines."""
    left_open = _LEFT_OPEN_TAG.match(payload)
    if left_open:
        return left_open.span(1)
    start = payload.find(">") + 1
    close = payload.rfind("</", start)
    return start, (close if close >= 0 and payload.endswith(">") else len(payload))


def read_format(reader: str, payload: str, block: Block, tag: str | None,
                limits: Limits) -> FormatRead:
    """Run the ``toolcodec.formats`` reader named ``reader`` on a block's body."""
    closed = block.closed
    if reader == "pythonic":
        return pythonic.read(payload, limits=limits)
    if reader == "yaml_tag":
        start, end = _tag_body_span(payload)
        found = yamlbody.read(payload[start:end], name=tag or "", closed=closed)
        found.errors = [_shifted(e, start) for e in found.errors]  # past the tag
        if _LEFT_OPEN_TAG.match(payload):
            found.repairs.append(BARE_TOOL_NAME)
        return found
    if reader == "harmony":
        # a channel token in the header says nothing here; blanks keep the offsets. Only the
        # header: `<|channel|>x` inside the arguments is the arguments' text
        head = payload.find("<|message|>")
        head = len(payload) if head < 0 else head
        blank = _HARMONY_CHANNEL.sub(lambda m: " " * len(m.group()), payload[:head])
        return harmony.read(blank + payload[head:], closed=closed)
    return _READERS[reader](payload, closed=closed)


def _shifted(error: CodecError, offset: int) -> CodecError:
    where = error.details.get("position")
    if not isinstance(where, int):
        return error
    return CodecError(error.code, error.message, {**error.details, "position": offset + where})


# The body readers of ``toolcodec.formats`` by the name a ``MarkerFormat.body`` gives.
_READERS: dict[str, Any] = {
    "glm": glm.read, "kimi": kimi.read, "deepseek": deepseek.read, "dsml": deepseek.read_dsml,
    "mistral": mistral.read, "invoke": invoke.read, "apertus": apertus.read, "gemma": gemma.read,
    "step3": step3.read, "minicpm": minicpm.read, "kimi_k3": kimi_k3.read,
    "hunyuan": hunyuan.read, "minimax_m3": minimax_m3.read, "functionary": functionary.read,
    "solar_open": solar_open.read, "ifm": ifm.read,
    "gcml": gcml.read, "atem": atem.read}
