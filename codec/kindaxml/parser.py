"""Turn KindaXML tokens into output text, annotations and markers (spec §6 recovery rules).

At most one recognised tag is open at a time: the next tag auto-closes it (§6.2), and a tag
closed that way counts as unclosed (§6.3), so its span comes from its recovery strategy.
Spans are decided once the whole output text is known, since some strategies look ahead.
"""

from __future__ import annotations

from typing import Any, NamedTuple

from codec.kindaxml import attrs as attr_reasons
from codec.kindaxml.attrs import parse_attrs
from codec.kindaxml.config import KindaXMLConfig
from codec.kindaxml.output import Annotation, Marker, ParseResult, Recovery, build_segments
from codec.kindaxml.spans import Lookahead, resolve, trim
from codec.kindaxml.tokenizer import CDATA, END, START, TEXT, Token, tokenize

AUTOCLOSED = "autoclosed"
UNCLOSED_AT_END = "unclosed_at_end"
STRAY_END_TAG_DROPPED = "stray_end_tag_dropped"
STRAY_END_TAG_KEPT = "stray_end_tag_kept"
UNKNOWN_TAG_STRIPPED = "unknown_tag_stripped"
CDATA_UNTERMINATED = "cdata_unterminated"

_ATTR_MESSAGES = {
    attr_reasons.QUOTE_CLOSED_AT_TAG_END: "an attribute value's quote is never closed; "
    "the value ends where the tag ends",
    attr_reasons.DUPLICATE_ATTRIBUTE: "an attribute is repeated; kept per "
    "duplicate_attribute_policy ({policy})",
    attr_reasons.ATTRIBUTE_MISSING_NAME: "a value has no attribute name before it; ignored",
    attr_reasons.ATTRIBUTE_MISSING_VALUE: "an attribute has '=' but no value; taken as ''",
}


class _Tag(NamedTuple):
    """A recognised start or self-closing tag whose span is not decided yet.

    Stored as a plain tuple of strings and numbers, which the garbage collector stops
    tracking (it does not untrack tuple subclasses); what is learnt later, such as where the
    tag closed, lives in the parser's int tables.
    """

    id: int
    tag: str
    attrs: dict[str, Any]
    source: tuple[int, int]
    pos: int  # output offset where the tag stood
    retro_start: int  # where a retro_line span would begin
    strategy: str
    self_closing: bool
    recovery: tuple[str, ...]  # attribute recoveries


class Parser:
    """One parse of one document; use :meth:`run` once."""

    def __init__(self, source: str, config: KindaXMLConfig) -> None:
        self.source = source
        self.config = config
        self.pieces: list[str] = []
        self.length = 0  # length of the output text so far
        self.line_start = 0  # output offset just after the last newline
        self.anchor = 0  # output offset just after the last recognised tag
        self.open: _Tag | None = None
        self.waiting: list[_Tag] = []  # self-closing tags that run until the next tag
        self.tags: list[tuple[Any, ...]] = []  # _Tag fields as plain tuples
        self.ends: dict[int, int] = {}  # tag id -> output offset of its own end tag
        self.closes: dict[int, int] = {}  # tag id -> output offset of the next tag
        self.unclosed: dict[int, str] = {}  # tag id -> why it was closed without an end tag
        self.recoveries: list[Recovery] = []
        self._names = _name_table(config)

    def run(self) -> ParseResult:
        """Consume the whole document and return the result."""
        handlers = {TEXT: self._text, CDATA: self._cdata, START: self._start, END: self._end}
        for token in tokenize(self.source, self.config.backslash_escapes):
            handlers[token.kind](token)
        if self.open is not None:
            self._close_unclosed(UNCLOSED_AT_END, None)
        text = "".join(self.pieces)
        annotations, markers = self._resolve(text)
        return ParseResult(
            text, build_segments(text, annotations), annotations, markers, self.recoveries
        )

    # -- tokens ------------------------------------------------------------------------

    def _text(self, token: Token) -> None:
        self._emit(token.text)

    def _cdata(self, token: Token) -> None:
        if not token.terminated:
            self._log(
                CDATA_UNTERMINATED,
                token.start,
                None,
                "CDATA block has no ']]>'; it runs to the end of the document",
            )
        self._emit(token.text)

    def _start(self, token: Token) -> None:
        tag = self._recognise(token.name)
        if tag is None:
            self._unknown(token)
            return
        self._next_tag(token.start)
        body = self.source[token.body_start : token.body_end]
        attrs, reasons = parse_attrs(body, self.config.duplicate_attribute_policy)
        for reason in reasons:
            message = _ATTR_MESSAGES[reason].format(policy=self.config.duplicate_attribute_policy)
            self._log(reason, token.start, tag, f"<{token.name}>: {message}")
        if token.self_closing:
            strategy = self.config.self_closing(tag)
        else:
            strategy = self.config.recovery_strategy(tag)
        record = _Tag(
            id=len(self.tags),
            tag=tag,
            attrs=attrs,
            source=(token.start, token.end),
            pos=self.length,
            retro_start=max(self.line_start, self.anchor),
            strategy=strategy,
            self_closing=token.self_closing,
            recovery=tuple(reasons),
        )
        self.tags.append(tuple(record))
        if not token.self_closing:
            self.open = record
        elif strategy == "forward_until_tag":
            self.waiting.append(record)
        self.anchor = self.length

    def _end(self, token: Token) -> None:
        tag = self._recognise(token.name)
        if tag is None:
            self._unknown(token)
            return
        self.anchor = self.length
        if self.open is not None and self.open.tag == tag:
            self.ends[self.open.id] = self.length
            self.open = None
            self._wake(self.length)
            return
        self._next_tag(token.start)  # a stray closer is still a tag: it ends what is open
        if self.config.stray_end_tag_policy == "drop":
            self._log(
                STRAY_END_TAG_DROPPED,
                token.start,
                tag,
                f"</{token.name}> closes no open tag; dropped",
            )
        else:
            self._log(
                STRAY_END_TAG_KEPT,
                token.start,
                tag,
                f"</{token.name}> closes no open tag; kept as text",
            )
            self._emit(self.source[token.start : token.end])

    def _unknown(self, token: Token) -> None:
        raw = self.source[token.start : token.end]
        mode = self.config.unknown_mode
        if mode == "treat_as_text":
            self._emit(raw)
            return
        if self.config.autoclose_on_any_tag:
            self._next_tag(token.start)
        if mode == "passthrough":
            self._emit(raw)
        else:
            self._log(
                UNKNOWN_TAG_STRIPPED,
                token.start,
                None,
                f"{raw[:40]!r} is not a recognised tag; its markup was removed",
            )

    # -- state -------------------------------------------------------------------------

    def _emit(self, text: str) -> None:
        newline = text.rfind("\n")
        if newline >= 0:
            self.line_start = self.length + newline + 1
        self.pieces.append(text)
        self.length += len(text)

    def _next_tag(self, source_pos: int) -> None:
        """A tag starts here: auto-close the open tag (§6.2) and end waiting markers."""
        if self.open is not None:
            self._close_unclosed(AUTOCLOSED, source_pos)
        self._wake(self.length)

    def _wake(self, pos: int) -> None:
        for record in self.waiting:
            self.closes[record.id] = pos
        self.waiting.clear()

    def _close_unclosed(self, reason: str, source_pos: int | None) -> None:
        record = self.open
        assert record is not None
        self.open = None
        if source_pos is not None:
            self.closes[record.id] = self.length
        self.unclosed[record.id] = reason
        where = f"before the next tag at {source_pos}" if source_pos is not None else "at all"
        self._log(
            reason,
            record.source[0],
            record.tag,
            f"<{record.tag}> is not closed {where}; its span was chosen by "
            f"the {record.strategy} strategy",
        )

    def _recognise(self, name: str) -> str | None:
        key = name if self.config.case_sensitive_tags else name.lower()
        if self._names is None:
            return key
        return self._names.get(key)

    def _log(self, reason: str, position: int, tag: str | None, message: str) -> None:
        self.recoveries.append(Recovery(reason, position, f"{message} (offset {position})", tag))

    # -- spans -------------------------------------------------------------------------

    def _resolve(self, text: str) -> tuple[list[Annotation], list[Marker]]:
        look = Lookahead(text)
        annotations: list[Annotation] = []
        markers: list[Marker] = []
        for raw in self.tags:
            record = _Tag._make(raw)
            recovery = record.recovery
            if record.id in self.ends:
                start, end = record.pos, self.ends[record.id]
            else:
                start, end = resolve(
                    record.strategy,
                    look,
                    record.pos,
                    self.closes.get(record.id),
                    record.retro_start,
                )
                if self.config.trim_punctuation:
                    start, end = trim(text, start, end)
                if record.id in self.unclosed:
                    recovery += (self.unclosed[record.id], f"unclosed_{record.strategy}")
            if end > start:
                annotations.append(
                    Annotation(
                        record.id,
                        record.tag,
                        record.attrs,
                        start,
                        end,
                        record.source,
                        recovery,
                    )
                )
            else:
                markers.append(
                    Marker(
                        record.id,
                        record.tag,
                        record.attrs,
                        record.pos,
                        record.source,
                        recovery,
                    )
                )
        return annotations, markers


def _name_table(config: KindaXMLConfig) -> dict[str, str] | None:
    """Map each recognised name (lower-cased when matching ignores case) to its spelling."""
    if config.recognized_tags is None:
        return None
    if config.case_sensitive_tags:
        return {name: name for name in config.recognized_tags}
    table: dict[str, str] = {}
    for name in sorted(config.recognized_tags):  # sorted: the same spelling wins every run
        table.setdefault(name.lower(), name)
    return table
