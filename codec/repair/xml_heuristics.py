"""The default heuristics for XML tool calls (documented in ``docs/repairs-xml.md``).

Text heuristics never touch the inside of ``<![CDATA[…]]>``: what stands there is literal.
Each one is a small class with an ``id`` and a ``phase``; ``default_heuristics()`` lists them in
the order the default pipeline runs them.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from typing import Any

import orjson
from toolcodec.repair.heuristics import HeuristicContext, HeuristicResult, Phase, Pipeline
from toolcodec.results.errors import INVALID_XML, CodecError
from toolcodec.results.limits import DEFAULT_LIMITS
from toolcodec.scanning.xmlscan import (
    BARE_AMP_PATTERN,
    NAME_PATTERN,
    ScanOptions,
    find_missing_closes,
)

_CDATA_RE = re.compile(r"<!\[CDATA\[.*?(?:\]\]>|\Z)", re.DOTALL)
_NAME = NAME_PATTERN
_OPENED_RE = re.compile(r"<(" + _NAME + r")")
_SLOPPY_CLOSE_RE = re.compile(r"</[ \t\r\n]+(" + _NAME + r")[ \t\r\n]*>")
_CUT_CLOSE_RE = re.compile(r"</[ \t\r\n]*(" + _NAME + r")[ \t\r\n]*\Z")
# An opening tag cut by the end of the text: `<parameter=cabin`, `<city unit="c`, `<tool_call`.
_CUT_OPEN_RE = re.compile(r"<(" + _NAME + r")(?:[ \t\r\n]*=[^<>]*|[ \t\r\n][^<>]*)?\Z")
# Where a bare "&" stays as written: CDATA and shorthand tags (<name=VALUE> holds literal text).
_AMP_KEEP_RE = re.compile(
    r"<!\[CDATA\[.*?(?:\]\]>|\Z)|<" + _NAME + r"[ \t\r\n]*=[^<>]*>", re.DOTALL
)
_BARE_AMP_RE = re.compile(BARE_AMP_PATTERN)
# A "<" that starts no tag, CDATA or cut-off markup: the regex form of xmlscan.starts_tag
# (a name must end at a space, ">", "/", "=" or the end of the text).
_STRAY_LT_RE = re.compile(
    r"<(?!!\[CDATA\[|(?:/[ \t\r\n]*)?(?:\Z|" + _NAME + r"(?:\Z|[ \t\r\n>/=])))"
)


def _outside(text: str, keep: re.Pattern[str], fix: Callable[[str], str]) -> str:
    """Apply ``fix`` to every stretch of ``text`` outside the matches of ``keep`` (one pass;
    text without such matches is fixed whole, without copying)."""
    out, pos = [], 0
    for m in keep.finditer(text):
        out.append(fix(text[pos : m.start()]))
        out.append(m.group(0))
        pos = m.end()
    if not out:
        return fix(text)
    out.append(fix(text[pos:]))
    return "".join(out)


def _outside_cdata(text: str, fix: Callable[[str], str]) -> str:
    """Apply ``fix`` to every stretch of ``text`` outside CDATA sections."""
    return _outside(text, _CDATA_RE, fix)


class NormalizeCloseTag:
    """``</ city >`` → ``</city>``; a ``</city`` cut off at the very end → ``</city>``.

    Only names that some open tag in the text uses are touched, so that text such as
    ``a </ b`` inside a value stays as written."""

    id = "xml.normalize_close_tag"
    phase: Phase = "pre-parse"

    def applies(self, ctx: HeuristicContext) -> bool:
        return "</" in ctx.raw

    def run(self, ctx: HeuristicContext) -> HeuristicResult | None:
        opened = set(_OPENED_RE.findall(ctx.raw))

        def fix_sloppy(m: re.Match[str]) -> str:
            return f"</{m.group(1)}>" if m.group(1) in opened else m.group(0)

        text = _outside_cdata(ctx.raw, lambda s: _SLOPPY_CLOSE_RE.sub(fix_sloppy, s))
        cut = _CUT_CLOSE_RE.search(text)
        if cut and cut.group(1) in opened and not _ends_in_cdata(text, cut.start()):
            text = text[: cut.start()] + f"</{cut.group(1)}>"
        return HeuristicResult(raw=text)


def _ends_in_cdata(text: str, pos: int) -> bool:
    """Whether ``pos`` (near the end of ``text``) lies inside a CDATA section; only the last
    section that starts before ``pos`` can hold it."""
    sections = list(_CDATA_RE.finditer(text, 0, pos + 1))
    return bool(sections) and sections[-1].start() < pos < sections[-1].end()


class EscapeLt:
    """A ``<`` that starts no tag (``a < b``, ``x<3``, ``<=``) is text → ``&lt;``."""

    id = "xml.escape_lt"
    phase: Phase = "pre-parse"

    def applies(self, ctx: HeuristicContext) -> bool:
        return "<" in ctx.raw

    def run(self, ctx: HeuristicContext) -> HeuristicResult | None:
        return HeuristicResult(raw=_outside_cdata(ctx.raw, escape_stray_lt))


def escape_stray_lt(text: str) -> str:
    """Replace each ``<`` of ``text`` that starts no tag by ``&lt;`` (ignores CDATA)."""
    return _STRAY_LT_RE.sub("&lt;", text) if "<" in text else text


class EscapeAmpersand:
    """After a failed parse: a bare ``&`` → ``&amp;``. The five XML entities and numeric
    references stay; other named references (``&nbsp;``) are not XML and become text."""

    id = "xml.escape_ampersand"
    phase: Phase = "fallback-reparse"

    def applies(self, ctx: HeuristicContext) -> bool:
        return bool(ctx.errors) and "&" in ctx.raw

    def run(self, ctx: HeuristicContext) -> HeuristicResult | None:
        return HeuristicResult(raw=escape_bare_ampersands(ctx.raw))


def escape_bare_ampersands(text: str) -> str:
    """Escape every bare ``&`` of ``text`` outside CDATA and ``<name=VALUE>`` tags."""
    if "&" not in text:
        return text
    return _outside(text, _AMP_KEEP_RE, lambda s: _BARE_AMP_RE.sub("&amp;", s))


class BalanceTags:
    """After a failed parse: close what was left open. An unclosed element is closed where
    its parent closes or, for raw-text parameters, where the next structural tag opens; the
    elements still open at the end are closed there, completing a cut-off close tag
    (``</para`` → ``</parameter>``). A close tag that closes nothing open is dropped
    (``xml.stray_close_dropped``): it holds no data. No other text is removed."""

    id = "xml.balance_tags"
    phase: Phase = "fallback-reparse"

    def applies(self, ctx: HeuristicContext) -> bool:
        return bool(ctx.errors)

    def run(self, ctx: HeuristicContext) -> HeuristicResult | None:
        options = ctx.meta.get("scan_options") or ScanOptions()
        mends = find_missing_closes(ctx.raw, options)
        if mends.result is not None:
            # The text scans as it is: leave the tree for the re-parse, which would only
            # scan the same text again (xmlcall checks that text and options are the same).
            ctx.meta["scanned"] = (ctx.raw, options, mends.result)
        ids = (["xml.balance_tags"] if mends.inserts or mends.end < len(ctx.raw) else []) + (
            [STRAY_CLOSE_DROPPED] if mends.drops else [])
        return HeuristicResult(raw=mends.apply(ctx.raw), repairs=tuple(ids) or None)


# A close tag that closes no open element (``<a>1</a></a>``), dropped while balancing.
STRAY_CLOSE_DROPPED = "xml.stray_close_dropped"


class DropCutTag:
    """After a failed parse: a structural opening tag (a parameter's, the call's own) cut off
    by the end of the output (``<parameter=x`` with no ``>``) is dropped; the element it began
    never had content. The text-level twin of ``json.dangling_key_dropped``; the call keeps
    what was complete before it."""

    id = "xml.cut_tag_dropped"
    phase: Phase = "fallback-reparse"

    def applies(self, ctx: HeuristicContext) -> bool:
        return bool(ctx.errors) and "<" in ctx.raw[-_CUT_TAG_WINDOW:]

    def run(self, ctx: HeuristicContext) -> HeuristicResult | None:
        raw = ctx.raw
        start = max(0, len(raw) - _CUT_TAG_WINDOW)  # a bounded look back: tags are short
        m = _CUT_OPEN_RE.match(raw, raw.rfind("<", start))
        if m is None or _ends_in_cdata(raw, m.start()):
            return None
        # only a structural tag (a parameter, the call's own tag), perhaps cut inside its
        # name: `if x <a` at the end of a value is the value's text, cut there
        options = ctx.meta.get("scan_options") or ScanOptions()
        name = m.group(1)
        if m.end(1) < len(raw):
            structural = name in options.structural
        else:
            structural = any(tag.startswith(name) for tag in options.structural)
        return HeuristicResult(raw=raw[: m.start()]) if structural else None


_CUT_TAG_WINDOW = 512


def balance_tags(text: str, options: ScanOptions) -> str:
    """Insert the close tags ``text`` lacks, as far as that lets it scan (one linear pass,
    however many elements are left open)."""
    return find_missing_closes(text, options).apply(text)


class DedupeTags:
    """A parameter given several times. The parser collects repeats into a list: that is the
    format's way to write an array, so it stays when the schema wants an array (or says
    nothing). When the schema wants one value, identical repeats are read as that value; repeats
    that differ are refused (``invalid_xml``): for a path or a command, choosing one would be a
    guess. That also catches a value lost to a missing slash (``<city>Oslo<city>``)."""

    id = "xml.dedupe_tags"
    phase: Phase = "post-parse"

    def applies(self, ctx: HeuristicContext) -> bool:
        return bool(ctx.meta.get("xml_repeated")) and isinstance(ctx.parsed, dict)

    def run(self, ctx: HeuristicContext) -> HeuristicResult | None:
        args = dict(ctx.parsed)  # type: ignore[call-overload]
        for name in ctx.meta["xml_repeated"]:
            values = args.get(name)
            if not isinstance(values, list) or not _wants_single(_property(ctx.schema, name)):
                continue
            if any(v != values[0] for v in values[1:]):
                ctx.errors.append(CodecError(INVALID_XML, (
                    f"{ctx.tool_name!r} call: the parameter {name!r} is given {len(values)} "
                    f"times with different values {_preview(values)}; the schema wants one "
                    "value, and choosing one would be a guess"), {"tool": ctx.tool_name,
                                                                  "parameter": name}))
                ctx.parsed = None
                return None
            args[name] = values[0]
        return HeuristicResult(parsed=args)


def _property(schema: dict | None, name: str) -> dict | None:
    props = schema.get("properties") if isinstance(schema, dict) else None
    prop = props.get(name) if isinstance(props, dict) else None
    return prop if isinstance(prop, dict) else None


def _wants_single(prop: dict | None) -> bool:
    kinds = _kinds(prop)
    return bool(kinds) and "array" not in kinds


def _preview(values: list[Any], limit: int = 200) -> str:
    shown = orjson.dumps(values).decode()
    return shown if len(shown) <= limit else shown[: limit - 1] + "…"


class UnwrapScalar:
    """A number, integer or boolean parameter whose text is one element around a plain value
    (``<parameter=volume><value>0.8</value></parameter>``, ``<data><item>42</item></data>``)
    is read as that value. Only when the schema wants such a scalar: a string parameter keeps
    its markup as written."""

    id = "xml.unwrap_scalar"
    phase: Phase = "post-parse"

    def applies(self, ctx: HeuristicContext) -> bool:
        return isinstance(ctx.parsed, dict) and any(
            isinstance(v, str) and "<" in v for v in ctx.parsed.values())

    def run(self, ctx: HeuristicContext) -> HeuristicResult | None:
        args = dict(ctx.parsed)  # type: ignore[call-overload]
        for name, value in args.items():
            if not isinstance(value, str) or len(value) > _WRAPPED_LIMIT:
                continue
            m = _WRAPPED_SCALAR_RE.fullmatch(value)
            kinds = _kinds(_property(ctx.schema, name))
            if m and m.group(1) == m.group(3) and kinds and kinds <= _UNWRAPPED_KINDS:
                args[name] = m.group(2)
        return HeuristicResult(parsed=args)


_WRAPPED_LIMIT = 512  # an element around a number or a boolean is short
_WRAPPED_SCALAR_RE = re.compile(r"\s*<(" + _NAME + r")[ \t]*>\s*([^<>\s]+)\s*</(" + _NAME
                                + r")[ \t]*>\s*")
_UNWRAPPED_KINDS = frozenset({"number", "integer", "boolean", "null"})


def _kinds(prop: dict | None) -> set[str]:
    kind = prop.get("type") if prop else None
    return set(kind) if isinstance(kind, list) else {kind} if isinstance(kind, str) else set()


class SchemaCoerce:
    """Coerce the parsed text values to the tool's schema (``"3"`` → ``3`` for an integer).

    Records the repair ids ``coerce_arguments`` reports, not ``schema.coerce`` itself: reading
    a number out of XML text is the format's meaning, not a repair."""

    id = "schema.coerce"
    phase: Phase = "post-parse"

    def applies(self, ctx: HeuristicContext) -> bool:
        return ctx.meta.get("tool_spec") is not None and isinstance(ctx.parsed, dict)

    def run(self, ctx: HeuristicContext) -> HeuristicResult | None:
        from toolcodec.schema.coerce import coerce_arguments  # late: a sibling module

        # coerce_arguments never mutates its input, so the pipeline's comparison sees changes.
        coerced, repairs = coerce_arguments(ctx.meta["tool_spec"], ctx.parsed, text_values=True,
                                            limits=ctx.meta.get("limits", DEFAULT_LIMITS))
        return HeuristicResult(parsed=coerced, repairs=tuple(repairs))


def default_heuristics() -> list[Any]:
    """The default XML heuristics, in pipeline order."""
    return [
        NormalizeCloseTag(),
        EscapeLt(),
        EscapeAmpersand(),
        DropCutTag(),
        BalanceTags(),
        DedupeTags(),
        UnwrapScalar(),
        SchemaCoerce(),
    ]


def default_pipeline() -> Pipeline:
    """The pipeline ``decode`` uses for XML calls (see ``docs/repairs-xml.md``)."""
    return Pipeline().with_added(default_heuristics())
