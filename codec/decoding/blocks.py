"""Read one block's body into checked calls: the format's reader, then the tool set's schemas.

The engine finds where a block starts and ends; ``BlockReader.block_calls`` reads what it
holds. The reader is the block's own (a marker format's, a registered family's) or the one the
head of a ``<tool_call>`` body picks (``toolcodec.formats.builtin``); every call it finds must
name a known tool and validate, and errors are placed in the block's coordinates.

Repairs added here: ``xml.balance_tags`` / ``format.missing_end`` (the block's end was missing
or cut off), ``xml.normalize_close_tag`` (``</ tool_call >``), ``text.bidi_removed`` (bidi
controls stripped from a call's payload) and ``json.merged_calls_split`` (one call's arguments
were two JSON objects in a row: two calls).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from typing import Any

import orjson
from toolcodec.decoding.valid_xml import read_valid_call
from toolcodec.formats import FormatRead, XmlBody
from toolcodec.formats.builtin import (
    BARE_TOOL_NAME,
    FORMAT_ID,
    FUNCTION_JSON,
    MISSING_LT,
    json_end,
    marker_for_body,
    marker_reader,
    payload_format,
    read_format,
    without_think_close,
)
from toolcodec.formats.table import strip_end_tokens
from toolcodec.repair.jsonrepair import repair_refused
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
)
from toolcodec.results.limits import Limits
from toolcodec.results.result import Call, ValidationResult, unique_ids
from toolcodec.scanning import envelopes
from toolcodec.scanning.envelopes import Block
from toolcodec.scanning.openers import Openers
from toolcodec.schema.tools import ToolRegistry
from toolcodec.schema.validation import validate_call

# Calls decoded from one output at most: bounds the work a hostile or looping output can
# cause. Envelopes past the limit stay in content, with one ``payload_too_large`` error.
MAX_CALLS = 128
UNCLOSED = "json.unclosed"  # repair_json closed what the end of the text left open
MERGED_SPLIT = "json.merged_calls_split"
NORMALIZE_CLOSE_TAG = "xml.normalize_close_tag"
_TOOL_CALL_CLOSE = "</tool_call>"
_SEPARATORS = re.compile(r"[\s,;]*")
_BLANKS = re.compile(r"\s*")
# Where a second object follows one (what objects in a row hold, and one object does not).
_NEXT_OBJECT = re.compile(r"\}\s*\{")
_LINE_COL = re.compile(r"\(line \d+, column \d+\)")
# JSON repairs that are fine in general but not for a call we are asked to trust.
_REFUSED_REPAIRS = {
    "json.surrounding_text": "the call's JSON has other text around it inside the envelope; "
                             "dropping that text could change what was meant",
}


class BlockReader:
    """Reads blocks for one tool set, with the codec's options (see ``ToolCallCodec``)."""

    def __init__(self, registry: ToolRegistry, openers: Openers, *, limits: Limits,
                 nfkc_strings: bool, formats: frozenset[str] | None,
                 heuristics: Iterable[Any] = (), pipeline: Any = None) -> None:
        self.registry = registry
        self.openers = openers
        self.limits = limits
        self.nfkc_strings = nfkc_strings
        self.formats = formats
        self._heuristics = tuple(heuristics)
        self._pipeline_arg = pipeline
        self._pipeline: Any = None
        self._inner: Any = None
        # Only the default pipeline's reading is known ahead (toolcodec.decoding.valid_xml).
        self.short_xml = pipeline is None and not self._heuristics

    @property
    def pipeline(self) -> Any:
        """The XML heuristic pipeline (built on first use so ``import toolcodec`` stays cheap)."""
        if self._pipeline is None:
            base = self._pipeline_arg or default_pipeline()
            self._pipeline = base.with_added(self._heuristics) if self._heuristics else base
        return self._pipeline

    def _inner_openers(self) -> Any:
        # Read only when a <tool_call> body starts with markup: compiled then, not per tool set.
        if self._inner is None:
            self._inner = envelopes.compile_openers(self.registry.names())
        return self._inner

    def validate(self, name: str, arguments: Any, *,
                 text_values: bool = False) -> ValidationResult:
        return validate_call(self.registry, name, arguments, nfkc_strings=self.nfkc_strings,
                             limits=self.limits, text_values=text_values)

    def known(self, name: str) -> bool:
        return self.registry.get(name) is not None

    # -- a block --------------------------------------------------------------------------

    def block_calls(self, text: str, block: Block) -> tuple[list[Call], list[CodecError]]:
        """The calls of ``block`` in ``text``, or the errors that make it no call."""
        payload = text[block.body_start:block.body_end]
        base: list[str] = []
        marker = self.openers.markers.get(block.tag) if block.fmt == "marker" else None
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
        payload, changed = strip_bidi(payload)
        if changed:
            base.append("text.bidi_removed")
        calls, errors, fmt_id = self._read_block(block, marker, payload, base)
        for call in calls:
            call.format = fmt_id
        return calls, relocate(errors, offset, original if changed else None)

    def _read_block(self, block: Block, marker: Any, payload: str,
                    base: list[str]) -> tuple[list[Call], list[CodecError], str]:
        if marker is not None:
            marker = marker_for_body(marker, payload)
            if self.formats is not None and marker.id not in self.formats:
                return [], [_left_out(marker.id)], marker.id
            return (*self._marker_calls(marker, payload, block, base), marker.id)
        fmt, tag = payload_format(block, payload, self.known, self._inner_openers)
        fmt_id = FORMAT_ID.get(fmt, fmt)
        if self.formats is not None and fmt_id not in self.formats:
            return [], [_left_out(fmt_id)], fmt_id
        if fmt == "json":
            payload, closed_think = without_think_close(payload)
            calls, errors = self.json_calls(payload, base + closed_think)
        elif fmt == "bare_tag":
            calls, errors = self._bare_call(payload, tag, base)
        elif fmt == "function_lt":  # `function=NAME>`: the "<" was lost
            at = len(payload) - len(payload.lstrip())
            calls, errors = self._xml_call(f"{payload[:at]}<{payload[at:]}", "function",
                                           None, base + [MISSING_LT])
            errors = relocate(errors, -1, None)
        elif fmt == "function_json":
            calls, errors = self._function_json_call(payload, base)
        elif fmt in ("glm", "yaml_tag"):
            calls, errors = self._read_calls(read_format(fmt, payload, block, tag, self.limits),
                                             base, payload)
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
        return calls, relocate(errors, start - len(opener), None)

    def _function_json_call(self, payload: str,
                            base: list[str]) -> tuple[list[Call], list[CodecError]]:
        """``<function=NAME>{…}</function>``: the arguments are JSON, read like an
        envelope's."""
        m = FUNCTION_JSON.match(payload)
        name, start = m.group(1), m.end()
        end = payload.rfind("</function>")
        args_text = payload[start:end if end >= start else len(payload)]
        if not self.known(name):
            return [], [CodecError(UNKNOWN_TOOL, f"unknown tool {name!r}", {"tool": name})]
        value, repairs, errors = self.parse_json(args_text)
        if errors:
            return [], relocate(errors, start, None)
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
        if callable(marker.body):  # a registered family's reader
            return self._read_calls(_run_reader(marker, payload, block.closed), base, payload)
        body = marker_reader(marker.body, payload)
        if body == "json":
            return self._json_values(payload, base)
        if body == "qwen_xml":
            return self._xml_call(payload, "function", None, base)
        found = read_format(body, payload, block, None, self.limits)
        if marker.name_suffix:  # a tool's name written with a suffix: `NAME.call(…)`
            found.calls = [(self._without_suffix(name, marker.name_suffix), args)
                           for name, args in found.calls]
        return self._read_calls(found, base, payload)

    def _without_suffix(self, name: str, suffix: str) -> str:
        """*name* without *suffix*, when only that names a known tool."""
        if (isinstance(name, str) and name.endswith(suffix) and not self.known(name)
                and self.known(name[:-len(suffix)])):
            return name[:-len(suffix)]
        return name

    def _json_values(self, payload: str, base: list[str]) -> tuple[list[Call], list[CodecError]]:
        """One JSON call, a list of them, or several values in a row (``{…};{…}``), each
        read like an envelope's JSON."""
        values, pos = [], _SEPARATORS.match(payload).end()
        while pos < len(payload) and payload[pos] in "{[" and len(values) <= MAX_CALLS:
            end = json_end(payload, pos)
            values.append((pos, payload[pos:end]))
            pos = _SEPARATORS.match(payload, end).end()
        if len(values) < 2 or pos < len(payload):
            return self.json_calls(payload, base)
        calls: list[Call] = []
        errors: list[CodecError] = []
        for at, value in values:
            got, found = self.json_calls(value, base)
            calls += got
            errors += relocate(found, at, None)
        return calls, errors

    def _read_calls(self, found: Any, base: list[str],
                    payload: str) -> tuple[list[Call], list[CodecError]]:
        """Check and validate what a format reader found (``toolcodec.formats``) in ``payload``."""
        if found.errors:
            return [], list(found.errors)
        if len(found.calls) > MAX_CALLS:
            return [], [too_many(len(found.calls), "calls in one envelope")]
        if not found.calls:
            return [], [CodecError(INVALID_JSON, "the block holds no tool call")]
        calls: list[Call] = []
        errors: list[CodecError] = []
        for name, args in found.calls:
            if isinstance(args, XmlBody):  # elements the XML decoder reads by the schema
                got, bad = self._xml_call(args.text, "tool_tag", name, base + found.repairs)
                calls += got
                errors += [unplaced(e) for e in bad]
                continue
            repairs: list[str] = []
            text_values = found.text_values and not isinstance(args, str)
            if not self.known(name):
                errors.append(CodecError(UNKNOWN_TOOL, f"unknown tool {name!r}", {"tool": name}))
                continue
            if isinstance(args, str):
                where = payload.find(args) if args else -1
                args, repairs, parse_errors = self.parse_json(args)
                if parse_errors:
                    errors.extend(relocate(parse_errors, where, None) if where >= 0 else
                                  [unplaced(e) for e in parse_errors])
                    continue
            result = self.validate(name, args, text_values=text_values)
            if result.ok:
                calls.append(Call(name, result.arguments,
                                  unique_ids(base + found.repairs + repairs + result.repairs)))
            else:
                errors.extend(result.errors)
        return calls, errors

    def json_calls(self, payload: str, base: list[str], refusal: Exception | None = None
                   ) -> tuple[list[Call], list[CodecError]]:
        """The calls of a JSON envelope body: one call or a list of them (*refusal*: as
        ``parse_json`` takes it)."""
        value, repairs, errors = self.parse_json(payload, refusal)
        if errors:
            return [], errors
        pairs = _envelope_pairs(value)
        if pairs is not None and len(pairs) > MAX_CALLS:
            return [], [too_many(len(pairs), "calls in one envelope")]
        if pairs is None:
            return [], [CodecError(INVALID_JSON, 'the JSON is not a tool call: expected '
                                   '{"name": ..., "arguments": {...}} or a list of those')]
        calls: list[Call] = []
        errors = []
        for name, args in pairs:
            merged = self.merged_calls(name, args, base + repairs) \
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

    def parse_json(self, payload: str, refusal: Exception | None = None
                   ) -> tuple[Any, list[str], list[CodecError]]:
        """A call's JSON: as it is when valid, else repaired (some repairs refused).
        *refusal*: what ``orjson.loads(payload)`` raised, when the caller has just tried it."""
        if refusal is None:
            try:
                return orjson.loads(payload), [], []  # the well-formed case, at C speed
            except orjson.JSONDecodeError as exc:
                refusal = exc.with_traceback(None)  # no cycle through this frame
        res = repair_refused(payload, refusal, limits=self.limits)
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
            return [], [too_many(len(parts), "calls in one envelope")]
        calls, errors = [], []
        at = 0
        for part in parts:
            read = read_valid_call(part, fmt, tag, self.registry, self.limits) \
                if self.short_xml else None
            if read is not None:
                at += len(part)
                calls.append(Call(read[0], read[1], unique_ids(base + read[2])))
                continue
            res = decode_xml_call(part, fmt, registry=self.registry, pipeline=self.pipeline,
                                  tag_name=tag, limits=self.limits)
            at, part_at = at + len(part), at
            if res.errors:
                errors.extend(relocate(res.errors, part_at, None))
            elif not res.name or not self.known(res.name):
                errors.append(CodecError(UNKNOWN_TOOL, f"unknown tool {res.name!r}",
                                         {"tool": res.name}))
            else:
                calls.append(Call(res.name, res.arguments, unique_ids(base + list(res.repairs))))
        return calls, errors

    # -- calls found elsewhere ------------------------------------------------------------

    def merged_calls(self, name: str, args: str, base: list[str], fmt: str = "") -> list[Call]:
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

    def prose_calls(self, pairs: list[tuple[str, Any]]) -> tuple[bool, list[Call]]:
        """JSON call shapes found in prose: calls only when every one names a known tool and
        validates."""
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
                args, payload_changed = strip_bidi(args)
            result = self.validate(name, args)
            if not result.ok:
                return False, []
            repairs = ["text.bidi_removed"] if payload_changed else []
            calls.append(Call(name, result.arguments, unique_ids(repairs + result.repairs)))
        return True, calls


# -- helpers ------------------------------------------------------------------------------


def _envelope_pairs(value: Any) -> list[tuple[str, Any]] | None:
    """Call pairs in an envelope body; unlike prose JSON, ``arguments`` may be omitted."""
    items = value if isinstance(value, list) else [value]
    pairs = []
    for item in items:
        if isinstance(item, dict) and "name" not in item and isinstance(item.get("function"),
                                                                         dict):
            item = item["function"]
        # {"tool_call_id", "tool_name", "parameters"} is a call too
        name = item.get("name", item.get("tool_name")) if isinstance(item, dict) else None
        if not isinstance(name, str):
            return None
        # arguments are also written as "parameters" or "args"
        args = item.get("arguments", item.get("parameters", item.get("args", {})))
        pairs.append((name, {} if args is None else args))
    return pairs or None


def _merged_objects(text: str) -> list[dict[str, Any]] | None:
    """Two or more JSON objects in a row, blanks between, each valid JSON (else None)."""
    if _NEXT_OBJECT.search(text) is None:  # one object, cut or broken: not scanned
        return None
    values: list[dict[str, Any]] = []
    pos = _BLANKS.match(text).end()
    while pos < len(text) and text[pos] == "{" and len(values) <= MAX_CALLS:
        end = json_end(text, pos)
        if not values and _BLANKS.match(text, end).end() == len(text):
            return None  # one object, not objects in a row (not parsed again)
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


def _declares_parameters(spec: Any) -> bool:
    """Whether a tool's schema declares any parameter (or requires any)."""
    schema = spec.schema if isinstance(spec.schema, dict) else {}
    return bool(schema.get("properties") or schema.get("required"))


def _run_reader(marker: Any, payload: str, closed: bool) -> FormatRead:
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


def too_many(count: int, what: str, *, at_least: bool = False) -> CodecError:
    amount = f"more than {MAX_CALLS}" if at_least else str(count)
    return CodecError(PAYLOAD_TOO_LARGE, f"{amount} {what}; at most {MAX_CALLS} are decoded "
                      "and the rest is kept as content", {"limit": MAX_CALLS})


def relocate(errors: list[CodecError], offset: int, original: str | None) -> list[CodecError]:
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


def unplaced(error: CodecError) -> CodecError:
    """An error whose position cannot be placed in the input: say so rather than mislead."""
    details = {k: v for k, v in error.details.items() if k != "position"}
    return CodecError(error.code, _LINE_COL.sub("(in the call's arguments)", error.message,
                                                count=1), details)
