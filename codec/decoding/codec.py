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

A block's body is read by ``toolcodec.decoding.blocks`` (the format's reader, then the tool
set's schemas). Repair ids added on the way: ``xml.balance_tags`` (an envelope's close tag was
missing or cut off), ``text.bidi_removed`` (bidi controls stripped from a call's payload, never
from content or reasoning) and ``gate.mixed_formats`` (the output mixed formats — envelopes and
JSON call shapes naming known tools, or native calls and calls in the content).

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
from toolcodec.decoding import native, valid_path
from toolcodec.decoding.assembly import Assembly
from toolcodec.decoding.blocks import MAX_CALLS, UNCLOSED, BlockReader
from toolcodec.decoding.engine import Engine
from toolcodec.decoding.stream import StreamDecoder
from toolcodec.decoding.unread_markup import said
from toolcodec.formats import registry as families
from toolcodec.formats.open_block import OpenBlock
from toolcodec.formats.reasoning import prefill_opener
from toolcodec.formats.table import format_ids
from toolcodec.repair.normalize import strip_bidi
from toolcodec.results.errors import BAD_REQUEST, INTERNAL_ERROR, CodecError, truncated
from toolcodec.results.limits import DEFAULT_LIMITS, Limits
from toolcodec.results.result import (
    Call,
    DecodeResult,
    Span,
    ValidationResult,
    encodable_result,
    unique_ids,
)
from toolcodec.scanning.envelopes import Block
from toolcodec.scanning.openers import compile_openers
from toolcodec.schema.tools import ToolRegistry

RAW_LIMIT = 200  # characters of undecodable markup quoted in an error's ``raw``
_LINE_COL = re.compile(r"\(line \d+, column \d+\)")


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
        (the rows of ``toolcodec.formats.reasoning``) or its opener names another. Without it
        a stray closer is ordinary text, so that prose is never held back waiting to learn
        whether it was reasoning.
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
        self.starts_in_reasoning = starts_in_reasoning
        self._prefill = prefill_opener(starts_in_reasoning)
        self.max_calls = MAX_CALLS
        self.formats = _formats(formats)
        self._openers = compile_openers(self.registry.names(), self.formats,
                                        _parameter_names(self.registry))
        self.blocks = BlockReader(self.registry, self._openers, limits=self.limits,
                                  nfkc_strings=nfkc_strings, formats=self.formats,
                                  heuristics=heuristics, pipeline=pipeline)

    @cached_property
    def _bare_tool_call(self) -> bool:
        return valid_path.names_tool_call(self._openers.parameters)

    @property
    def pipeline(self) -> Any:
        """The XML heuristic pipeline (built on first use so ``import toolcodec`` stays cheap)."""
        return self.blocks.pipeline

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
                result = valid_path.decode_valid(self, data) or self._decode_text(
                    data, finish_reason)
                return encodable_result(said(result, finish_reason))
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
        return self.blocks.validate(name, arguments)

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
        return self.blocks.block_calls(text, block)

    # -- JSON in text ---------------------------------------------------------------------

    def _check_pairs(self, pairs: list[tuple[str, Any]]) -> tuple[bool, list[Call]]:
        return self.blocks.prose_calls(pairs)

    # -- messages -------------------------------------------------------------------------

    def _decode_message(self, message: dict[str, Any],
                        finish_reason: str | None = None) -> DecodeResult:
        msg = native.read_message(message)
        if not msg.has_calls:
            short = valid_path.decode_valid(self, msg.content)
            if short is not None:
                return _with_message_parts(short, msg)
        elif not msg.content and (not self._prefill or msg.reasoning and msg.reasoning.strip()):
            # native calls alone: no text to read, nothing open, so no engine to read it
            return _with_message_parts(
                self._native_result(Assembly(""), msg, finish_reason, None), msg)
        return self._engine_message(msg, finish_reason)

    def _engine_message(self, msg: native.NativeMessage,
                        finish_reason: str | None = None) -> DecodeResult:
        eng = self.engine(native=msg.has_calls)
        if msg.reasoning and msg.reasoning.strip():  # split off upstream: content is no
            # reasoning the prompt opened (toolcodec.decoding.stream does the same)
            eng.current = None
        if msg.content or eng.current is not None:
            eng.feed(msg.content, last=True)
            eng.finish(finish_reason)
        else:  # no text, nothing open: nothing to read
            eng.finish_reason = finish_reason
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
            result = self._native_result(eng.asm, msg, eng.finish_reason, eng)
        return _with_message_parts(result, msg)

    def _native_result(self, asm: Assembly, msg: native.NativeMessage,
                       finish_reason: str | None, eng: Any) -> DecodeResult:
        """*asm* (what the content gave, if anything) with the message's native calls, each
        as *eng* (the content's engine, when there is one) sends it as an event."""
        last = len(msg.calls) - 1
        for i, nc in enumerate(msg.calls):
            # the output was cut off: the last call's arguments may be cut short
            calls, errors = self._native_call(nc, cut=finish_reason == "length" and i == last)
            for call in calls:
                asm.calls.append(call)
                asm.repairs.extend(call.repairs)
                if eng is not None:
                    eng.native_events.append(eng._call_event(call))
            asm.errors.extend(errors)
        if eng is not None and (eng.envelopes or eng.known_shape):
            asm.repairs.append("gate.mixed_formats")
        result = asm.finish("native")
        result.path = "native"
        return result

    def _native_call(self, nc: native.NativeCall, *,
                     cut: bool = False) -> tuple[list[Call], list[CodecError]]:
        args, base, errors = nc.arguments, [], []
        if isinstance(args, str):  # the usual case: OpenAI sends arguments as JSON text
            args, changed = strip_bidi(args)
            base = ["text.bidi_removed"] if changed else []
            try:  # one JSON text, the usual case: not objects merged in a row, nothing cut
                args = orjson.loads(args)
            except orjson.JSONDecodeError as refusal:
                merged = self.blocks.merged_calls(nc.name, args, base, "native")
                if merged:
                    return merged, []
                args, repairs, errors = self.blocks.parse_json(args, refusal)
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


# -- helpers ------------------------------------------------------------------------------


def _with_message_parts(result: DecodeResult, msg: native.NativeMessage) -> DecodeResult:
    """A content's result with what the message said apart: its reasoning, its errors."""
    if msg.reasoning is not None:
        parts = [msg.reasoning.strip(), result.reasoning or ""]
        result.reasoning = "\n\n".join(p for p in parts if p)
    result.errors = msg.errors + result.errors
    result.ok = not result.errors
    return result


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
