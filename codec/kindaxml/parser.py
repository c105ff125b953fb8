"""Turn KindaXML tokens into output text, tag spans and a recovery log (spec §6 rules).

At most one recognised tag is open at a time: the next tag auto-closes it (§6.2), and a tag
closed that way counts as unclosed (§6.3), so its span comes from its recovery strategy.
Spans are decided once the whole output text is known, since some strategies look ahead.

What a parse keeps per tag is flat: lists of strings, dicts of strings and tuples of those,
and arrays of ints. The garbage collector stops tracking such tuples and dicts (arrays it
never tracks), so a large document does not trigger the full collections that one record
object per tag would, and uses far less memory (see ``columns.py``).
"""

from __future__ import annotations

import re
from array import array
from typing import Any

from toolcodec.kindaxml import attrs as attr_reasons
from toolcodec.kindaxml.attrs import parse_attrs
from toolcodec.kindaxml.columns import Columns
from toolcodec.kindaxml.config import KindaXMLConfig
from toolcodec.kindaxml.spans import Lookahead, resolve, trim
from toolcodec.kindaxml.tokenizer import (
    CDATA,
    TAG,
    cdata_block,
    markup_pattern,
    self_closing_length,
)

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


class Parser:
    """One parse of one document; use :meth:`run` once."""

    def __init__(self, source: str, config: KindaXMLConfig) -> None:
        self.source = source
        self.config = config
        self.pieces: list[str] = []
        self.length = 0  # length of the output text so far
        self.line_start = 0  # output offset just after the last newline
        self.anchor = 0  # output offset just after the last recognised tag
        self.open = -1  # id of the open tag, -1 when none is open
        self.waiting: list[int] = []  # ids of self-closing tags that run until the next tag
        # One entry per recognised start or self-closing tag, indexed by tag id: flat lists
        # and int arrays rather than a record object per tag (see the module docstring).
        self.names: list[str] = []
        self.attrs: list[dict[str, Any]] = []
        self.strategies: list[str] = []
        self.reasons: list[tuple[str, ...]] = []  # attribute recoveries
        self.unclosed: list[str | None] = []  # why it was closed without an end tag
        self.src_starts = array("q")  # the tag's [start, end) in the input
        self.src_ends = array("q")
        self.positions = array("q")  # output offset where the tag stood
        self.retro_starts = array("q")  # where a retro_line span would begin
        self.end_tags = array("q")  # output offset of its own end tag, or -1
        self.closes = array("q")  # output offset of the tag that closed it, or -1
        self.log: list[tuple[str, int, str, str | None]] = []  # Recovery fields
        self._names = _name_table(config)
        self.copy_from = 0  # input offset of the first character not yet emitted
        self._recovery: dict[str, str] = {}  # config.recovery_strategy, remembered per tag

    def run(self) -> Columns:
        """Consume the whole document and return its spans and recovery log."""
        source = self.source
        pattern = markup_pattern(self.config.backslash_escapes)
        pos = 0
        while pos is not None:
            pos = self._scan(pattern, pos)
        self._emit(source[self.copy_from :])
        if self.open >= 0:
            self._close_unclosed(UNCLOSED_AT_END, None)
        return self._resolve("".join(self.pieces))

    def _scan(self, pattern: re.Pattern[str], pos: int) -> int | None:
        """Handle the markup from ``pos``; return where to resume after a CDATA block,
        or None at the end of the document.

        Text between pieces of markup, and markup that stays literal text, is not copied
        piece by piece: ``source[copy_from:]`` is the stretch still to be emitted, flushed
        (by :meth:`_flush`) only before something that needs the output length or drops
        input. A run of passthrough tags thus costs one dictionary look-up each.
        """
        source = self.source
        config = self.config
        names = self._names
        fold = not config.case_sensitive_tags
        mode = config.unknown_mode
        autoclose = config.autoclose_on_any_tag
        for m in pattern.finditer(source, pos):
            kind = m.lastindex
            if kind == TAG:
                name = m[3]
                key = name.lower() if fold else name
                tag = key if names is None else names.get(key)
                if tag is not None:
                    if m[2]:
                        self._end(m, tag, name)
                    else:
                        self._start(m, tag, name)
                elif mode == "passthrough":  # the tag stays in the text
                    if autoclose and (self.open >= 0 or self.waiting):
                        self._flush(m.start())
                        self._next_tag(m.start())
                elif mode == "strip":
                    self._strip(m)
                # treat_as_text: the tag stays in the text and closes nothing
            elif kind == CDATA:
                self._flush(m.start())
                text, end, terminated = cdata_block(source, m.end())
                if not terminated:
                    self._log(
                        CDATA_UNTERMINATED,
                        m.start(),
                        None,
                        "CDATA block has no ']]>'; it runs to the end of the document",
                    )
                self._emit(text)
                self.copy_from = end
                return end if end < len(source) else None
            else:  # an escape: drop the backslash, keep the character after it as text
                self._flush(m.start())
                self.copy_from = m.start() + 1
        return None

    # -- markup ------------------------------------------------------------------------

    def _start(self, m: re.Match[str], tag: str, name: str) -> None:
        start, end = m.span()
        if start > self.copy_from:  # _flush and _next_tag inlined: once per tag
            self._emit(self.source[self.copy_from : start])
        self.copy_from = end
        if self.open >= 0:
            self._close_unclosed(AUTOCLOSED, start)
        if self.waiting:
            self._wake(self.length)
        config = self.config
        attrs: dict[str, Any] = {}
        reasons: tuple[str, ...] = ()
        body = m[4]
        length = self_closing_length(body) if body else -1
        self_closing = length >= 0
        if self_closing:
            body = body[:length]
        if body:  # most tags have no attribute text at all
            attrs, found = parse_attrs(body, config.duplicate_attribute_policy)
            for reason in found:
                message = _ATTR_MESSAGES[reason].format(policy=config.duplicate_attribute_policy)
                self._log(reason, start, tag, f"<{name}>: {message}")
            reasons = tuple(found)
        if self_closing:
            strategy = config.self_closing(tag)
        else:
            strategy = self._recovery.get(tag) or self._recovery.setdefault(
                tag, config.recovery_strategy(tag)
            )
        tag_id = len(self.names)
        self.names.append(tag)
        self.attrs.append(attrs)
        self.strategies.append(strategy)
        self.reasons.append(reasons)
        self.unclosed.append(None)
        self.src_starts.append(start)
        self.src_ends.append(end)
        position, line_start, anchor = self.length, self.line_start, self.anchor
        self.positions.append(position)
        self.retro_starts.append(line_start if line_start > anchor else anchor)
        self.end_tags.append(-1)
        self.closes.append(-1)
        if not self_closing:
            self.open = tag_id
        elif strategy == "forward_until_tag":
            self.waiting.append(tag_id)
        self.anchor = self.length

    def _end(self, m: re.Match[str], tag: str, name: str) -> None:
        start, end = m.span()
        self._flush(start)
        self.copy_from = end
        self.anchor = self.length
        if self.open >= 0 and self.names[self.open] == tag:
            self.end_tags[self.open] = self.length
            self.open = -1
            self._wake(self.length)
            return
        self._next_tag(start)  # a stray closer is still a tag: it ends what is open
        if self.config.stray_end_tag_policy == "drop":
            self._log(STRAY_END_TAG_DROPPED, start, tag, f"</{name}> closes no open tag; dropped")
        else:
            self._log(STRAY_END_TAG_KEPT, start, tag, f"</{name}> closes no open tag; kept as text")
            self.copy_from = start

    def _strip(self, m: re.Match[str]) -> None:
        """An unrecognised tag under ``unknown_mode="strip"``: its markup is removed."""
        start = m.start()
        self._flush(start)
        self.copy_from = m.end()
        if self.config.autoclose_on_any_tag:
            self._next_tag(start)
        self._log(
            UNKNOWN_TAG_STRIPPED,
            start,
            None,
            f"{m[0][:40]!r} is not a recognised tag; its markup was removed",
        )

    # -- state -------------------------------------------------------------------------

    def _flush(self, upto: int) -> None:
        """Emit the input not yet copied, up to ``upto``."""
        if upto > self.copy_from:
            self._emit(self.source[self.copy_from : upto])
        self.copy_from = upto

    def _emit(self, text: str) -> None:
        newline = text.rfind("\n")
        if newline >= 0:
            self.line_start = self.length + newline + 1
        self.pieces.append(text)
        self.length += len(text)

    def _next_tag(self, source_pos: int) -> None:
        """A tag starts here: auto-close the open tag (§6.2) and end waiting markers."""
        if self.open >= 0:
            self._close_unclosed(AUTOCLOSED, source_pos)
        if self.waiting:
            self._wake(self.length)

    def _wake(self, pos: int) -> None:
        for tag_id in self.waiting:
            self.closes[tag_id] = pos
        self.waiting.clear()

    def _close_unclosed(self, reason: str, source_pos: int | None) -> None:
        tag_id = self.open
        self.open = -1
        if source_pos is not None:
            self.closes[tag_id] = self.length
        self.unclosed[tag_id] = reason
        tag = self.names[tag_id]
        where = f"before the next tag at {source_pos}" if source_pos is not None else "at all"
        position = self.src_starts[tag_id]
        self.log.append(
            (
                reason,
                position,
                f"<{tag}> is not closed {where}; its span was chosen by the "
                f"{self.strategies[tag_id]} strategy (offset {position})",
                tag,
            )
        )

    def _log(self, reason: str, position: int, tag: str | None, message: str) -> None:
        self.log.append((reason, position, f"{message} (offset {position})", tag))

    # -- spans -------------------------------------------------------------------------

    def _resolve(self, text: str) -> Columns:
        look = Lookahead(text)
        trimming = self.config.trim_punctuation
        unclosed = self.unclosed
        recoveries: list[tuple[str, ...]] = []
        shared: dict[tuple[Any, ...], tuple[str, ...]] = {}  # one tuple per distinct value
        starts = array("q")
        stops = array("q")
        spanned = array("q")
        markers = array("q")
        for tag_id, (strategy, pos, end_tag, close) in enumerate(
            zip(self.strategies, self.positions, self.end_tags, self.closes, strict=True)
        ):
            recovery = self.reasons[tag_id]
            if end_tag >= 0:
                start, end = pos, end_tag
            else:
                start, end = resolve(
                    strategy, look, pos, None if close < 0 else close, self.retro_starts[tag_id]
                )
                if trimming:
                    start, end = trim(text, start, end)
                why = unclosed[tag_id]
                if why is not None:
                    key = (recovery, why, strategy)
                    if key not in shared:
                        shared[key] = recovery + (why, f"unclosed_{strategy}")
                    recovery = shared[key]
            recoveries.append(recovery)
            if end > start:
                spanned.append(tag_id)
                starts.append(start)
                stops.append(end)
            else:  # an empty span: the tag is a marker where it stood
                markers.append(tag_id)
                starts.append(pos)
                stops.append(pos)
        return Columns(
            text,
            self.names,
            self.attrs,
            self.src_starts,
            self.src_ends,
            recoveries,
            starts,
            stops,
            spanned,
            markers,
            self.log,
        )


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
