"""``ToolCallCodec``: the ordered gate from model output to trusted tool calls.

``decode`` takes one path, in this order, and ``DecodeResult.path`` names it:

1. ``native`` — a message dict with tool calls: those calls are decoded (after any calls
   found in the message's content, which is decoded as text too).
2. ``xml`` — tool-call envelopes in the text, each decoded on its own. One that fails (bad
   JSON/XML, unknown tool, schema violation, or a list with any bad element) yields no call:
   it is reported with its ``block`` index and ``raw`` text, and its text stays in ``content``
   as a ``markup`` span.
3. ``json`` — only when no envelope was found: strict JSON calls in prose.
4. ``none`` — no calls.

The text is read by ``toolcodec.decoding.engine`` in one left-to-right pass that decides
everything from a bounded window (or at the end), so that the streaming decoder
(``toolcodec.decoding.stream``), which feeds the same engine chunk by chunk, answers exactly
what ``decode`` answers.

Repair ids added here: ``xml.balance_tags`` (an envelope's close tag was missing or cut off),
``text.bidi_removed`` (bidi controls stripped from a call's payload, never from content or
reasoning) and ``gate.mixed_formats`` (the output mixed formats — envelopes and JSON call
shapes naming known tools, or native calls and calls in the content).

Content rule: ``content`` is the concatenation of the ``text`` and ``markup`` spans in order,
then stripped. ``reasoning`` is the stripped text of each ``<think>`` block, joined with a
blank line (``None`` when there was none); a message's ``reasoning_content`` comes first.
For a message dict, ``spans`` index its content string.

At most ``MAX_CALLS`` envelopes are decoded from one output; the rest stays content with one
``payload_too_large`` error, so a looping model cannot make decoding expensive.

Truncated JSON inside an envelope or a native ``arguments`` string is repaired like any other
(``json.unclosed``, and ``json.unclosed_string`` when a string itself was cut, so callers who act
on paths or commands can refuse such calls); the schema still rejects missing required
arguments. One repair is refused there (``invalid_json``): ``json.surrounding_text``, because
prose next to the JSON inside the envelope would be dropped.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from collections.abc import Iterable
from functools import cached_property
from typing import Any

import orjson
from toolcodec.decoding import native
from toolcodec.decoding.assembly import Assembly
from toolcodec.decoding.engine import Engine
from toolcodec.decoding.stream import StreamDecoder
from toolcodec.decoding.unread_markup import said
from toolcodec.formats import (
    FormatRead,
    XmlBody,
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
from toolcodec.formats import registry as families
from toolcodec.formats.open_block import OpenBlock
from toolcodec.formats.reasoning import prefill_opener
from toolcodec.formats.table import MARKER_FORMATS, format_ids, strip_end_tokens
from toolcodec.repair.jsonrepair import repair_json
from toolcodec.repair.normalize import BIDI_CONTROLS, strip_bidi
from toolcodec.repair.xml_heuristics import default_pipeline
from toolcodec.repair.xmlcall import decode_xml_call, split_functions
from toolcodec.results.errors import (
    BAD_REQUEST,
    INTERNAL_ERROR,
    INVALID_JSON,
    PAYLOAD_TOO_LARGE,
    UNKNOWN_TOOL,
    CodecError,
    truncated,
)
from toolcodec.results.limits import DEFAULT_LIMITS, Limits
from toolcodec.results.result import (
    Call,
    DecodeResult,
    Span,
    ValidationResult,
    encodable_result,
    unique_ids,
)
from toolcodec.scanning import envelopes
from toolcodec.scanning.envelopes import Block
from toolcodec.scanning.openers import compile_openers
from toolcodec.schema.tools import ToolRegistry
from toolcodec.schema.validation import validate_call

UNCLOSED = "json.unclosed"  # repair_json closed what the end of the text left open
RAW_LIMIT = 200  # characters of undecodable markup quoted in an error's ``raw``
# Calls decoded from one output at most: bounds the work a hostile or looping output can
# cause. Envelopes past the limit stay in content, with one ``payload_too_large`` error.
MAX_CALLS = 128
_TOOL_CALL_CLOSE = "</tool_call>"
_SEPARATORS = re.compile(r"[\s,;]*")
_BLANKS = re.compile(r"\s*")
MERGED_SPLIT = "json.merged_calls_split"
_LINE_COL = re.compile(r"\(line \d+, column \d+\)")
_JSON_START = re.compile(r"\s*(?:\{|\[\s*\{|\[\s*\])")
# Inside <tool_call>: a tool's name on its own line, then a tag that is not GLM's <arg_key>.
_BARE_HEAD = re.compile(r"([A-Za-z_][\w.\-]{0,127})[ \t]*:?[ \t]*\r?\n\s*<(?!arg_key>|/)")
BARE_TOOL_NAME = "xml.bare_tool_name"
THINK_CLOSE_DROPPED = "format.think_close_dropped"
# `<tool_call>function=NAME>…`: Qwen's call tag lost its "<".
_LOST_LT = re.compile(r"(?:function|call|invoke|tool)=[\w.\-]+>")
MISSING_LT = "xml.missing_lt"
NORMALIZE_CLOSE_TAG = "xml.normalize_close_tag"
# `<get_weather⏎city: Oslo⏎/>`: an opening tag left open around YAML lines, closed by "/>".
_LEFT_OPEN_TAG = re.compile(r"<[^\s<>/]+[ \t]*\r?\n([^<>]*?)/>[ \t\r\n]*\Z")
_HARMONY_CHANNEL = re.compile(r"<\|channel\|>[a-z]*")
# `<function=NAME>` then a JSON object: Functionary v3.1 / Llama 3.1, not Qwen's parameters.
_FUNCTION_JSON = re.compile(r"<function=([\w.\-]{1,128})>[ \t\r\n]*(?=\{)")
# The public format id of a block decoded by the built-in readers.
_FORMAT_ID = {"json": "hermes", "function": "qwen_xml", "function_json": "functionary",
              "tool_tag": "tool_tag",
              "bare_tag": "tool_tag", "function_lt": "qwen_xml",
              "tool_element": "tool_element", "glm": "glm", "yaml_tag": "yaml_tag"}
# JSON repairs that are fine in general but not for a call we are asked to trust.
_REFUSED_REPAIRS = {
    "json.surrounding_text": "the call's JSON has other text around it inside the envelope; "
                             "dropping that text could change what was meant",
}


class ToolCallCodec:
    """Decode model output into validated tool calls for one set of tools.

    :param tools: OpenAI-style tool definitions (``{"type": "function", "function": {...}}``)
        or bare ``{"name", "parameters"}`` dicts. Invalid definitions raise
        ``InvalidToolsError`` here, once; decoding itself never raises.
    :param heuristics: extra XML heuristics, merged into the pipeline by phase.
    :param pipeline: a full ``Pipeline`` replacing the default one.
    :param nfkc_strings: NFKC-normalise string arguments (``text.nfkc``).
    :param limits: size and depth bounds (a ``Limits`` or a dict of its fields); text past
        ``max_chars`` is kept as content with a ``payload_too_large`` error.
    :param starts_in_reasoning: the output begins inside reasoning (chat templates of
        reasoning models open it in the prompt): everything up to the first closer of that
        family's reasoning is reasoning. ``True`` means ``<think>``; a family's reasoning id
        (``"mistral"``, ``"gemma4"``, ``"kimi_k3"``, … in ``toolcodec.formats.reasoning``) or
        its opener (``"[THINK]"``) names another. Without it a stray closer is ordinary text,
        so that prose is never held back waiting to learn whether it was reasoning.
    :param formats: the format ids to read (``toolcodec.formats.table.format_ids()``; default all
        of them, detected by their markers). Text in another format stays content. An unknown
        id raises ``ValueError``.
    """

    def __init__(self, tools: list[dict[str, Any]] | None, *, heuristics: Iterable[Any] = (),
                 pipeline: Any = None, nfkc_strings: bool = False,
                 limits: Limits | dict[str, int] = DEFAULT_LIMITS,
                 starts_in_reasoning: bool | str = False,
                 formats: Iterable[str] | None = None) -> None:
        families.load_entry_points()  # installed families, once per process
        self.registry = ToolRegistry.from_tools(tools)
        # Options may arrive as JSON (a job payload): accept {"max_chars": ...} for limits.
        self.limits = Limits(**limits) if isinstance(limits, dict) else limits
        self.nfkc_strings = nfkc_strings
        self._heuristics = tuple(heuristics)
        self._pipeline_arg = pipeline
        self._pipeline: Any = None
        self.starts_in_reasoning = starts_in_reasoning
        self._prefill = prefill_opener(starts_in_reasoning)
        self.max_calls = MAX_CALLS
        self.formats = _formats(formats)
        self._openers = compile_openers(self.registry.names(), self.formats,
                                        _parameter_names(self.registry))

    @cached_property
    def _inner_openers(self) -> Any:
        # Read only when a <tool_call> body starts with markup: compiled then, not per tool set.
        return envelopes.compile_openers(self.registry.names())

    @property
    def pipeline(self) -> Any:
        """The XML heuristic pipeline (built on first use so ``import toolcodec`` stays cheap)."""
        if self._pipeline is None:
            base = self._pipeline_arg or default_pipeline()
            self._pipeline = base.with_added(self._heuristics) if self._heuristics else base
        return self._pipeline

    def decode(self, data: str | dict[str, Any], *,
               finish_reason: str | None = None) -> DecodeResult:
        """Decode a complete model output (str) or an OpenAI assistant message (dict).

        ``finish_reason`` is why the generation stopped, as the model server said. With
        ``"length"`` (cut off by ``max_tokens``) a call the end of the output cut before it
        closed yields no call but a ``truncated`` error, its text kept in ``content``; calls
        that closed before it are kept. Any other value (or None) changes nothing: a cut call
        is then completed and named (``json.unclosed``, ``xml.balance_tags``, …), see
        docs/truncation.md.

        Never raises: malformed input comes back with ``ok=False`` and structured errors.
        """
        try:
            if isinstance(data, str):
                return encodable_result(said(self._decode_text(data, finish_reason),
                                             finish_reason))
            if isinstance(data, dict):
                return encodable_result(said(self._decode_message(data, finish_reason),
                                             finish_reason))
            error = CodecError(BAD_REQUEST, "decode() takes a str (model output) or a dict "
                               f"(assistant message), not {type(data).__name__}",
                               {"got": type(data).__name__})
            return DecodeResult(ok=False, errors=[error])
        except (KeyboardInterrupt, SystemExit, GeneratorExit):
            raise
        except BaseException as exc:  # noqa: BLE001 - a bug (or a PanicException) must not
            # reach the caller
            text = data if isinstance(data, str) else ""
            error = CodecError(INTERNAL_ERROR, f"decoder failed: {type(exc).__name__}: {exc}")
            return encodable_result(DecodeResult(
                ok=False, content=text.strip(), errors=[error],
                spans=[Span("text", 0, len(text))] if text else []))

    def stream(self, *, id_prefix: str | None = None) -> Any:
        """A ``codec.StreamDecoder`` for one streamed output, with this codec's tools and
        options (see ``toolcodec.decoding.stream``)."""
        return StreamDecoder(self, id_prefix=id_prefix)

    def validate(self, name: str, arguments: Any) -> ValidationResult:
        """Validate (and, where the schema allows, coerce) one call's arguments."""
        return self._validate(name, arguments)

    def _validate(self, name: str, arguments: Any, *,
                  text_values: bool = False) -> ValidationResult:
        return validate_call(self.registry, name, arguments, nfkc_strings=self.nfkc_strings,
                             limits=self.limits, text_values=text_values)

    # -- text -----------------------------------------------------------------------------

    def _decode_text(self, text: str, finish_reason: str | None = None) -> DecodeResult:
        eng = self.engine()
        eng.feed(text, last=True)
        eng.finish(finish_reason)
        return eng.result()

    def engine(self, *, native: bool = False, id_prefix: str = "") -> Any:
        """A fresh decoding engine (``toolcodec.decoding.engine``) for one output."""
        eng = Engine(self, Assembly(""), native=native, id_prefix=id_prefix)
        if self._prefill:  # the chat template opened the reasoning in the prompt
            eng.current = OpenBlock("think", 0, 0, 0, self._prefill)
        return eng

    def _decode_block(self, asm: Assembly, index: int, block: Block) -> None:
        self.apply_block(asm, index, block, *self._block_calls(asm.text, block))

    def apply_block(self, asm: Assembly, index: int, block: Block, calls: list[Call],
                    errors: list[CodecError]) -> None:
        """Record a decoded block: its calls, or its text as markup with its errors."""
        if calls and not errors:
            asm.add_calls(block.start, block.end, calls)
            return
        raw = asm.text[block.start:block.end]
        details = {"block": index, "position": block.start, "raw": _truncate(raw)}
        asm.add_markup(block, [_in_block(e, index, block, details, asm.text) for e in errors])

    def block_calls(self, text: str, fmt: str, tag: str | None, closed: bool,
                    body: tuple[int, int]) -> tuple[list[Call], list[CodecError]]:
        """Decode one block given on its own (``text`` is the block, ``body`` its bounds in
        it): what a worker does for the pool-backed stream."""
        return self._block_calls(text, Block(fmt, 0, len(text), body[0], body[1], closed, tag))

    def _block_calls(self, text: str, block: Block) -> tuple[list[Call], list[CodecError]]:
        payload = text[block.body_start:block.body_end]
        base: list[str] = []
        marker = self._openers.markers.get(block.tag) if block.fmt == "marker" else None
        if block.fmt == "tool_call" and block.closed \
                and text[block.body_end:block.end] != _TOOL_CALL_CLOSE:
            base.append(NORMALIZE_CLOSE_TAG)  # `</ tool_call >`
        if not block.closed:
            base.append("format.missing_end" if marker else "xml.balance_tags")
            if block.fmt == "tool_call":
                cut = envelopes.trailing_partial_close(payload, _TOOL_CALL_CLOSE)
                payload = payload[:len(payload) - cut]
        if block.fmt == "tool_element":
            payload = text[block.start:block.end]  # the decoder wants the <tool> tags
        offset = (block.start if block.fmt == "tool_element" else block.body_start) - block.start
        original = payload
        payload, changed = _strip_bidi(payload)
        if changed:
            base.append("text.bidi_removed")
        calls, errors, fmt_id = self._read_block(block, marker, payload, base)
        for call in calls:
            call.format = fmt_id
        return calls, _relocate(errors, offset, original if changed else None)

    def _read_block(self, block: Block, marker: Any, payload: str,
                    base: list[str]) -> tuple[list[Call], list[CodecError], str]:
        if marker is not None:
            marker = _kimi_if_kimi(marker, payload)
            if self.formats is not None and marker.id not in self.formats:
                return [], [_left_out(marker.id)], marker.id
            fmt_id, (calls, errors) = marker.id, self._marker_calls(marker, payload, block, base)
        else:
            fmt, tag = self._payload_format(block, payload)
            fmt_id = _FORMAT_ID.get(fmt, fmt)
            if self.formats is not None and fmt_id not in self.formats:
                return [], [_left_out(fmt_id)], fmt_id
            if fmt == "json":
                payload, closed_think = _without_think_close(payload)
                calls, errors = self._json_calls(payload, base + closed_think)
            elif fmt == "bare_tag":
                calls, errors = self._bare_call(payload, tag, base)
            elif fmt == "function_lt":  # `function=NAME>`: the "<" was lost
                at = len(payload) - len(payload.lstrip())
                calls, errors = self._xml_call(f"{payload[:at]}<{payload[at:]}", "function",
                                               None, base + [MISSING_LT])
                errors = _relocate(errors, -1, None)
            elif fmt == "function_json":
                calls, errors = self._function_json_call(payload, base)
            elif fmt in ("glm", "yaml_tag"):
                calls, errors = self._read_calls(_read_format(fmt, payload, block, tag,
                                                              self.limits), base, payload)
            else:
                calls, errors = self._xml_call(payload, fmt, tag, base)
        return calls, errors, fmt_id

    def _bare_call(self, payload: str, name: str,
                   base: list[str]) -> tuple[list[Call], list[CodecError]]:
        """A call written as the tool's name on a line of its own, then its parameters'
        elements (``xml.bare_tool_name``): read as ``<NAME>…</NAME>``."""
        start = payload.find("<")
        body = payload[start:].rstrip()
        closer = f"</{name}>"
        if body.endswith(closer):
            body = body[:-len(closer)]
        opener = f"<{name}>"
        calls, errors = self._xml_call(f"{opener}{body}{closer}", "tool_tag", name,
                                       base + [BARE_TOOL_NAME])
        return calls, _relocate(errors, start - len(opener), None)

    def _function_json_call(self, payload: str,
                            base: list[str]) -> tuple[list[Call], list[CodecError]]:
        """``<function=NAME>{…}</function>`` (Functionary v3.1, Llama 3.1): the arguments
        are JSON, read like an envelope's."""
        m = _FUNCTION_JSON.match(payload)
        name, start = m.group(1), m.end()
        end = payload.rfind("</function>")
        args_text = payload[start:end if end >= start else len(payload)]
        if self.registry.get(name) is None:
            return [], [CodecError(UNKNOWN_TOOL, f"unknown tool {name!r}", {"tool": name})]
        value, repairs, errors = self._parse_json(args_text)
        if errors:
            return [], _relocate(errors, start, None)
        if not isinstance(value, dict):
            return [], [CodecError(INVALID_JSON, "the call's arguments are not a JSON object",
                                   {"position": start})]
        result = self.validate(name, value)
        if not result.ok:
            return [], list(result.errors)
        return [Call(name, result.arguments, unique_ids(base + repairs + result.repairs))], []

    def _marker_calls(self, marker: Any, payload: str, block: Block,
                      base: list[str]) -> tuple[list[Call], list[CodecError]]:
        payload = strip_end_tokens(payload)  # only ever shortens the end: offsets hold
        body = marker.body
        if callable(body):  # a registered family's reader
            return self._read_calls(_run_reader(marker, payload, block.closed), base, payload)
        if body == "tool_calls":  # Hunyuan A13B's JSON list, or HY3's <tool_call> elements
            body = "json" if _JSON_START.match(payload) else "hunyuan"
        if body in ("json_or_pythonic", "mistral") and _JSON_START.match(payload):
            body = "json"  # a JSON call or list of calls
        elif body == "json_or_pythonic":
            body = "pythonic"
        if body == "json":
            return self._json_values(payload, base)
        if body == "qwen_xml":
            return self._xml_call(payload, "function", None, base)
        found = _read_format(body, payload, block, None, self.limits)
        if marker.name_suffix:  # Llama 3.1's built-in tools: brave_search.call(query=…)
            found.calls = [(self._without_suffix(name, marker.name_suffix), args)
                           for name, args in found.calls]
        return self._read_calls(found, base, payload)

    def _without_suffix(self, name: str, suffix: str) -> str:
        """*name* without *suffix*, when only that names a known tool."""
        if (isinstance(name, str) and name.endswith(suffix) and self.registry.get(name) is None
                and self.registry.get(name[:-len(suffix)]) is not None):
            return name[:-len(suffix)]
        return name

    def _json_values(self, payload: str, base: list[str]) -> tuple[list[Call], list[CodecError]]:
        """One JSON call, a list of them, or several values in a row (``{…};{…}``, as Llama
        writes parallel calls), each read like an envelope's JSON."""
        values, pos = [], _SEPARATORS.match(payload).end()
        while pos < len(payload) and payload[pos] in "{[" and len(values) <= MAX_CALLS:
            end = mistral.json_end(payload, pos)
            values.append((pos, payload[pos:end]))
            pos = _SEPARATORS.match(payload, end).end()
        if len(values) < 2 or pos < len(payload):
            return self._json_calls(payload, base)
        calls: list[Call] = []
        errors: list[CodecError] = []
        for at, value in values:
            got, found = self._json_calls(value, base)
            calls += got
            errors += _relocate(found, at, None)
        return calls, errors

    def _read_calls(self, found: Any, base: list[str],
                    payload: str) -> tuple[list[Call], list[CodecError]]:
        """Check and validate what a format reader found (``toolcodec.formats``) in ``payload``."""
        if found.errors:
            return [], list(found.errors)
        if len(found.calls) > MAX_CALLS:
            return [], [_too_many(len(found.calls), "calls in one envelope")]
        if not found.calls:
            return [], [CodecError(INVALID_JSON, "the block holds no tool call")]
        calls: list[Call] = []
        errors: list[CodecError] = []
        for name, args in found.calls:
            if isinstance(args, XmlBody):  # elements the XML decoder reads by the schema
                got, bad = self._xml_call(args.text, "tool_tag", name, base + found.repairs)
                calls += got
                errors += [_unplaced(e) for e in bad]
                continue
            repairs: list[str] = []
            text_values = found.text_values and not isinstance(args, str)
            if self.registry.get(name) is None:
                errors.append(CodecError(UNKNOWN_TOOL, f"unknown tool {name!r}", {"tool": name}))
                continue
            if isinstance(args, str):
                where = payload.find(args) if args else -1
                args, repairs, parse_errors = self._parse_json(args)
                if parse_errors:
                    errors.extend(_relocate(parse_errors, where, None) if where >= 0 else
                                  [_unplaced(e) for e in parse_errors])
                    continue
            result = self._validate(name, args, text_values=text_values)
            if result.ok:
                calls.append(Call(name, result.arguments,
                                  unique_ids(base + found.repairs + repairs + result.repairs)))
            else:
                errors.extend(result.errors)
        return calls, errors

    def _payload_format(self, block: Block, payload: str) -> tuple[str, str | None]:
        if block.fmt == "tool_tag" and self._yaml_body(payload):
            return "yaml_tag", block.tag
        if block.fmt == "function" and _FUNCTION_JSON.match(payload):
            return "function_json", None  # Functionary v3.1 / Llama 3.1: JSON arguments
        if block.fmt != "tool_call":
            return block.fmt, block.tag
        head = payload.lstrip()
        if _LOST_LT.match(head):
            return "function_lt", None
        bare = _BARE_HEAD.match(head)
        if bare and self.registry.get(bare.group(1)) is not None:
            return "bare_tag", bare.group(1)  # <tool_call>NAME, then its parameters' tags
        if head[:1].isalpha() or head[:1] == "_":  # GLM: the tool's name, then its arguments
            return ("glm" if glm.looks_like_body(head) else "json"), None
        if not head.startswith("<"):
            return "json", None
        inner = envelopes.scan(head, self._inner_openers)
        if inner and inner[0].start == 0 and inner[0].fmt in ("tool_tag", "tool_element"):
            return inner[0].fmt, inner[0].tag
        # Markup that is not a known tool tag: the Qwen3 ``<function=…>`` family, whose
        # decoder reports precisely what is wrong with it (a JSON error would mislead).
        return "function", None

    @staticmethod
    def _yaml_body(payload: str) -> bool:
        """A tool tag whose body starts as ``key: value`` lines, not with a tag."""
        body = _tag_body(payload)
        if body.lstrip()[:1] in ("<", ""):
            return False
        return yamlbody.looks_like_mapping(body)

    def _json_calls(self, payload: str, base: list[str]) -> tuple[list[Call], list[CodecError]]:
        value, repairs, errors = self._parse_json(payload)
        if errors:
            return [], errors
        pairs = _envelope_pairs(value)
        if pairs is not None and len(pairs) > MAX_CALLS:
            return [], [_too_many(len(pairs), "calls in one envelope")]
        if pairs is None:
            return [], [CodecError(INVALID_JSON, 'the JSON is not a tool call: expected '
                                   '{"name": ..., "arguments": {...}} or a list of those')]
        calls: list[Call] = []
        errors = []
        for name, args in pairs:
            merged = self._merged_calls(name, args, base + repairs) \
                if isinstance(args, str) else []
            if merged:
                calls += merged
                continue
            result = self.validate(name, args)
            if result.ok:
                calls.append(Call(name, result.arguments,
                                  unique_ids(base + repairs + result.repairs)))
            else:
                errors.extend(result.errors)
        return calls, errors

    def _parse_json(self, payload: str) -> tuple[Any, list[str], list[CodecError]]:
        try:
            return orjson.loads(payload), [], []  # the well-formed case, at C speed
        except orjson.JSONDecodeError:
            pass
        res = repair_json(payload, limits=self.limits)
        if not res.ok:
            return None, [], list(res.errors) or [
                CodecError(INVALID_JSON, "the call's JSON is not valid")]
        for repair, why in _REFUSED_REPAIRS.items():
            if repair in res.repairs:
                return None, [], [CodecError(INVALID_JSON, why, {"repair": repair})]
        return res.value, list(res.repairs), []

    def _xml_call(self, payload: str, fmt: str, tag: str | None,
                  base: list[str]) -> tuple[list[Call], list[CodecError]]:
        parts = split_functions(payload) if fmt == "function" else [payload]
        if len(parts) > MAX_CALLS:
            return [], [_too_many(len(parts), "calls in one envelope")]
        calls, errors = [], []
        at = 0
        for part in parts:
            res = decode_xml_call(part, fmt, registry=self.registry, pipeline=self.pipeline,
                                  tag_name=tag, limits=self.limits)
            at, part_at = at + len(part), at
            if res.errors:
                errors.extend(_relocate(res.errors, part_at, None))
            elif not res.name or self.registry.get(res.name) is None:
                errors.append(CodecError(UNKNOWN_TOOL, f"unknown tool {res.name!r}",
                                         {"tool": res.name}))
            else:
                calls.append(Call(res.name, res.arguments, unique_ids(base + list(res.repairs))))
        return calls, errors

    # -- JSON in text ---------------------------------------------------------------------

    def _check_pairs(self, pairs: list[tuple[str, Any]]) -> tuple[bool, list[Call]]:
        if len(pairs) > MAX_CALLS:
            return False, []
        calls = []
        for name, args in pairs:
            spec = self.registry.get(name)
            if spec is None:
                return False, []
            if args is None:  # {"name": NAME}: a call only of a tool without parameters
                if _declares_parameters(spec):
                    return False, []
                args = {}
            payload_changed = False
            if isinstance(args, str):
                args, payload_changed = _strip_bidi(args)
            result = self.validate(name, args)
            if not result.ok:
                return False, []
            repairs = ["text.bidi_removed"] if payload_changed else []
            calls.append(Call(name, result.arguments, unique_ids(repairs + result.repairs)))
        return True, calls

    # -- messages -------------------------------------------------------------------------

    def _decode_message(self, message: dict[str, Any],
                        finish_reason: str | None = None) -> DecodeResult:
        msg = native.read_message(message)
        eng = self.engine(native=msg.has_calls)
        if msg.reasoning and msg.reasoning.strip():  # split off upstream: content is no
            # reasoning the prompt opened (toolcodec.decoding.stream does the same)
            eng.current = None
        eng.feed(msg.content, last=True)
        eng.finish(finish_reason)
        return self.message_result(eng, msg)

    def message_result(self, eng: Any, msg: native.NativeMessage) -> DecodeResult:
        """The result of a message: its content's result, then its native calls.

        Calls found in the content come first (a stream cannot take back a call it has
        already sent), then the native calls; when both kinds of markup appear,
        ``gate.mixed_formats`` says so.
        """
        if not msg.has_calls:
            result = eng.result()
        else:
            asm = eng.asm
            last = len(msg.calls) - 1
            for i, nc in enumerate(msg.calls):
                # the output was cut off: the last call's arguments may be cut short
                calls, errors = self._native_call(nc, cut=eng.finish_reason == "length"
                                                  and i == last)
                for call in calls:
                    asm.calls.append(call)
                    asm.repairs.extend(call.repairs)
                    eng.native_events.append(eng._call_event(call))
                asm.errors.extend(errors)
            if eng.envelopes or eng.known_shape:
                asm.repairs.append("gate.mixed_formats")
            result = asm.finish("native")
            result.path = "native"
        if msg.reasoning is not None:
            parts = [msg.reasoning.strip(), result.reasoning or ""]
            result.reasoning = "\n\n".join(p for p in parts if p)
        result.errors = msg.errors + result.errors
        result.ok = not result.errors
        return result

    def _native_call(self, nc: native.NativeCall, *,
                     cut: bool = False) -> tuple[list[Call], list[CodecError]]:
        args, base, errors = nc.arguments, [], []
        if isinstance(args, str):  # the usual case: OpenAI sends arguments as JSON text
            args, changed = _strip_bidi(args)
            base = ["text.bidi_removed"] if changed else []
            merged = self._merged_calls(nc.name, args, base, "native")
            if merged:
                return merged, []
            args, repairs, errors = self._parse_json(args)
            base += repairs
            if cut and UNCLOSED in repairs:  # arguments the end of the output cut short
                errors = [truncated("inside this call's arguments")]
        result = None if errors else self.validate(nc.name, args)
        if result is None or not result.ok:
            raw = nc.arguments if isinstance(nc.arguments, str) else _dump(nc.arguments)
            details = {"call_index": nc.index, "tool": nc.name, "raw": _truncate(raw)}
            found = errors if result is None else result.errors
            return [], [_with_details(e, details) for e in found]
        return [Call(nc.name, result.arguments, unique_ids(base + result.repairs),
                     format="native")], []

    def _merged_calls(self, name: str, args: str, base: list[str],
                      fmt: str = "") -> list[Call]:
        """Arguments that are two or more JSON objects in a row (``{"path": "a"}{"path":
        "b"}``: a client merged the argument texts of parallel calls of one tool): one call
        per object, when every object is valid JSON and validates (``json.merged_calls_split``);
        else none."""
        values = _merged_objects(args)
        if values is None:
            return []
        calls = []
        for value in values:
            result = self.validate(name, value)
            if not result.ok:
                return []
            calls.append(Call(name, result.arguments,
                              unique_ids(base + [MERGED_SPLIT] + result.repairs), format=fmt))
        return calls


# -- helpers ------------------------------------------------------------------------------


def _envelope_pairs(value: Any) -> list[tuple[str, Any]] | None:
    """Call pairs in an envelope body; unlike prose JSON, ``arguments`` may be omitted."""
    items = value if isinstance(value, list) else [value]
    pairs = []
    for item in items:
        if isinstance(item, dict) and "name" not in item and isinstance(item.get("function"),
                                                                         dict):
            item = item["function"]
        # Cohere writes {"tool_call_id", "tool_name", "parameters"}
        name = item.get("name", item.get("tool_name")) if isinstance(item, dict) else None
        if not isinstance(name, str):
            return None
        # Inkling writes its arguments as "args"
        args = item.get("arguments", item.get("parameters", item.get("args", {})))
        pairs.append((name, {} if args is None else args))
    return pairs or None


def _merged_objects(text: str) -> list[dict[str, Any]] | None:
    """Two or more JSON objects in a row, blanks between, each valid JSON (else None)."""
    values: list[dict[str, Any]] = []
    pos = _BLANKS.match(text).end()
    while pos < len(text) and text[pos] == "{" and len(values) <= MAX_CALLS:
        end = mistral.json_end(text, pos)
        try:
            value = orjson.loads(text[pos:end])
        except orjson.JSONDecodeError:
            return None
        if not isinstance(value, dict):
            return None
        values.append(value)
        pos = _BLANKS.match(text, end).end()
    return values if len(values) >= 2 and pos == len(text) else None


def _left_out(fmt_id: str) -> CodecError:
    return CodecError(BAD_REQUEST, f"the block is in the {fmt_id!r} format, which the formats "
                      "option leaves out", {"format": fmt_id})


def _kimi_if_kimi(marker: Any, payload: str) -> Any:
    """``<|tool_call_begin|>`` is Kimi-K2's token and also DeepSeek's re-spelled by a server;
    a body with Kimi's argument token is Kimi's."""
    if marker.id == "deepseek" and "<|tool_call_argument_begin|>" in payload:
        return next(f for f in MARKER_FORMATS if f.id == "kimi_k2" and f.keep_opener)
    return marker


def _without_think_close(payload: str) -> tuple[str, list[str]]:
    """A JSON body followed by ``</think>`` (the model closed its reasoning late, inside the
    envelope): the tag is markup, never argument data, and is dropped
    (``format.think_close_dropped``). Only shortens the end: offsets hold."""
    stripped = payload.rstrip()
    if stripped.endswith("</think>") and stripped[:-8].rstrip().endswith(("}", "]")):
        return stripped[:-8], [THINK_CLOSE_DROPPED]
    return payload, []


def _declares_parameters(spec: Any) -> bool:
    """Whether a tool's schema declares any parameter (or requires any)."""
    schema = spec.schema if isinstance(spec.schema, dict) else {}
    return bool(schema.get("properties") or schema.get("required"))


def _parameter_names(registry: Any) -> dict[str, list[str]]:
    """Each tool's declared parameter names (for the bare-call opener)."""
    out = {}
    for spec in registry:
        props = spec.schema.get("properties") if isinstance(spec.schema, dict) else None
        if isinstance(props, dict):
            out[spec.name] = list(props)
    return out


def _formats(formats: Iterable[str] | None) -> frozenset[str] | None:
    if formats is None:
        return None
    chosen = frozenset([formats] if isinstance(formats, str) else formats)
    known = format_ids()
    unknown = sorted(chosen - set(known))
    if unknown:
        raise ValueError(f"unknown format(s) {unknown}; expected some of {list(known)}")
    return chosen


def _tag_body(payload: str) -> str:
    """The text between a tool tag's opening tag and its closing tag (if any); for a tag left
    open around ``key: value`` lines and closed by ``/>``, those lines."""
    start, end = _tag_body_span(payload)
    return payload[start:end]


def _tag_body_span(payload: str) -> tuple[int, int]:
    left_open = _LEFT_OPEN_TAG.match(payload)
    if left_open:
        return left_open.span(1)
    start = payload.find(">") + 1
    close = payload.rfind("</", start)
    return start, (close if close >= 0 and payload.endswith(">") else len(payload))


def _read_format(reader: str, payload: str, block: Block, tag: str | None,
                 limits: Limits) -> Any:
    """Run the ``toolcodec.formats`` reader named ``reader`` on a block's body."""
    closed = block.closed
    if reader == "pythonic":
        return pythonic.read(payload, limits=limits)
    if reader == "yaml_tag":
        start, end = _tag_body_span(payload)
        found = yamlbody.read(payload[start:end], name=tag or "", closed=closed)
        found.errors = _relocate(found.errors, start, None)  # past the tag
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


# The body readers of ``toolcodec.formats`` by the name a ``MarkerFormat.body`` gives.
_READERS: dict[str, Any] = {
    "glm": glm.read, "kimi": kimi.read, "deepseek": deepseek.read, "dsml": deepseek.read_dsml,
    "mistral": mistral.read, "invoke": invoke.read, "apertus": apertus.read, "gemma": gemma.read,
    "step3": step3.read, "minicpm": minicpm.read, "kimi_k3": kimi_k3.read,
    "hunyuan": hunyuan.read, "minimax_m3": minimax_m3.read, "functionary": functionary.read,
    "solar_open": solar_open.read, "ifm": ifm.read,
    "gcml": gcml.read, "atem": atem.read}


def _run_reader(marker: Any, payload: str, closed: bool) -> Any:
    """A registered family's reader on a block's body; its failure is the block's error."""
    try:
        found = marker.body(payload, closed=closed)
    except Exception as exc:  # noqa: BLE001 - a reader's bug is reported, never raised
        found = FormatRead(errors=[CodecError(
            INTERNAL_ERROR, f"the {marker.id!r} reader failed: {type(exc).__name__}: {exc}")])
    if not isinstance(found, FormatRead):
        found = FormatRead(errors=[CodecError(
            INTERNAL_ERROR, f"the {marker.id!r} reader returned {type(found).__name__}, "
            "not a FormatRead")])
    return found


def _strip_bidi(text: str) -> tuple[str, bool]:
    return strip_bidi(text)


def _too_many(count: int, what: str, *, at_least: bool = False) -> CodecError:
    amount = f"more than {MAX_CALLS}" if at_least else str(count)
    return CodecError(PAYLOAD_TOO_LARGE, f"{amount} {what}; at most {MAX_CALLS} are decoded "
                      "and the rest is kept as content", {"limit": MAX_CALLS})


def _in_block(error: CodecError, index: int, block: Block, details: dict[str, Any],
              text: str) -> CodecError:
    """The error of a block in the caller's coordinates: ``position`` is an offset into the
    whole input and the message's ``(line, column)`` count from its start (a reader counts
    from the start of what it was given)."""
    message = f"tool-call block {index} ({block.fmt}) at offset {block.start}: {error.message}"
    where = error.details.get("position")
    details = dict(details)
    if isinstance(where, int) and 0 <= where <= block.end - block.start:
        details["position"] = at = block.start + where
        line = text.count("\n", 0, at) + 1
        column = at - (text.rfind("\n", 0, at) + 1) + 1
        message = _LINE_COL.sub(f"(line {line}, column {column})", message, count=1)
    return CodecError(error.code, message, {**error.details, **details})


def _relocate(errors: list[CodecError], offset: int, original: str | None) -> list[CodecError]:
    """Errors whose ``position`` counts from a payload, counted from ``offset`` before it
    instead (through the payload's ``original`` text when bidi controls were removed)."""
    out = []
    for error in errors:
        where = error.details.get("position")
        if isinstance(where, int):
            if original is not None:
                where = _before_stripping(original, where)
            error = CodecError(error.code, error.message,
                               {**error.details, "position": offset + where})
        out.append(error)
    return out


def _before_stripping(original: str, position: int) -> int:
    """The offset in ``original`` of the character at ``position`` once bidi controls were
    removed from it."""
    kept = 0
    for i, ch in enumerate(original):
        if ch not in BIDI_CONTROLS:
            if kept == position:
                return i
            kept += 1
    return len(original)


def _unplaced(error: CodecError) -> CodecError:
    """An error whose position cannot be placed in the input: say so rather than mislead."""
    details = {k: v for k, v in error.details.items() if k != "position"}
    return CodecError(error.code, _LINE_COL.sub("(in the call's arguments)", error.message,
                                                count=1), details)


def _with_details(error: CodecError, details: dict[str, Any]) -> CodecError:
    index = details.get("call_index")
    return CodecError(error.code, f"tool_calls[{index}]: {error.message}",
                      {**error.details, **details})


def _truncate(raw: str) -> str:
    return raw if len(raw) <= RAW_LIMIT else raw[:RAW_LIMIT] + "…"


def _dump(value: Any) -> str:
    try:
        return orjson.dumps(value).decode()
    except TypeError:
        return repr(value)


# -- module-level convenience ---------------------------------------------------------------

_CACHE_SIZE = 16
_cache: OrderedDict[Any, ToolCallCodec] = OrderedDict()
_cache_lock = threading.Lock()


def _clear_cache() -> None:
    with _cache_lock:
        _cache.clear()


families.on_change(_clear_cache)  # codecs built before a family was registered do not read it


def codec_for(tools: list[dict[str, Any]] | None, **options: Any) -> ToolCallCodec:
    """A ``ToolCallCodec`` for these tools and options, shared through a small LRU cache.

    The key is a canonical (sorted-keys) JSON dump of the tools, so equal tool lists share
    compiled validators. Options that cannot be hashed bypass the cache.
    """
    key = _cache_key(tools, options)
    if key is None:
        return ToolCallCodec(tools, **options)
    with _cache_lock:
        found = _cache.get(key)
        if found is not None:
            _cache.move_to_end(key)
            return found
    made = ToolCallCodec(tools, **options)
    with _cache_lock:
        _cache[key] = made
        while len(_cache) > _CACHE_SIZE:
            _cache.popitem(last=False)
    return made


def cached_codec(tools: list[dict[str, Any]] | None, **options: Any) -> ToolCallCodec | None:
    """The codec ``codec_for`` would return from its cache, or None if it would build one."""
    key = _cache_key(tools, options)
    if key is None:
        return None
    with _cache_lock:
        return _cache.get(key)


def _cache_key(tools: Any, options: dict[str, Any]) -> tuple[bytes, tuple] | None:
    """The cache's key for ``tools`` and ``options``; None if they cannot be hashed."""
    try:
        key = (orjson.dumps(tools, option=orjson.OPT_SORT_KEYS), tuple(sorted(options.items())))
        hash(key)
    except TypeError:  # orjson.JSONEncodeError is a TypeError too
        return None
    return key


def decode(text: str | dict[str, Any], tools: list[dict[str, Any]] | None = None, *,
           heuristics: Iterable[Any] = (), pipeline: Any = None, nfkc_strings: bool = False,
           limits: Limits | dict[str, int] = DEFAULT_LIMITS, starts_in_reasoning: bool = False,
           formats: Iterable[str] | None = None,
           finish_reason: str | None = None) -> DecodeResult:
    """Decode with a cached codec for ``tools``; see ``ToolCallCodec.decode``.

    The keyword options are ``ToolCallCodec``'s, with the same meaning and defaults;
    ``finish_reason`` is the model server's (``"length"``: a call the output cut off is no call).
    """
    options = _given(heuristics=heuristics, pipeline=pipeline, nfkc_strings=nfkc_strings,
                     limits=limits, starts_in_reasoning=starts_in_reasoning, formats=formats)
    return codec_for(tools, **options).decode(text, finish_reason=finish_reason)


def validate(name: str, arguments: Any, tools: list[dict[str, Any]] | None = None, *,
             nfkc_strings: bool = False,
             limits: Limits | dict[str, int] = DEFAULT_LIMITS) -> ValidationResult:
    """Validate one call with a cached codec for ``tools``; see ``ToolCallCodec.validate``.

    ``nfkc_strings`` and ``limits`` are ``ToolCallCodec``'s options (the others do not touch
    validation).
    """
    options = _given(nfkc_strings=nfkc_strings, limits=limits)
    return codec_for(tools, **options).validate(name, arguments)


_DEFAULTS: dict[str, Any] = {"heuristics": (), "pipeline": None, "nfkc_strings": False,
                             "limits": DEFAULT_LIMITS, "starts_in_reasoning": False,
                             "formats": None}


def _given(**options: Any) -> dict[str, Any]:
    """The options that differ from the defaults, so equal settings share one cached codec."""
    return {k: v for k, v in options.items() if v is not _DEFAULTS[k] and v != _DEFAULTS[k]}
