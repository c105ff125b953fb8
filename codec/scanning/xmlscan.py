"""A small strict scanner for XML-ish tool-call bodies.

Model output is not XML (``<function=NAME>`` is not a legal tag), so this is a hand-written
scanner rather than ``xml.etree``. It is *strict*: it accepts well-formed input and otherwise
stops at the first fault with a precise :class:`ScanError` (kind, position, what was expected).
Repairs are the job of the heuristics, which run only after a scan has failed.

Accepted syntax:

- elements ``<a>…</a>``, ``<a/>``, attributes ``x="…"`` / ``x='…'``, whitespace before ``>``
  in a close tag (``</a >``);
- the shorthand ``<name=VALUE>`` (``VALUE`` is literal text up to ``>``, quotes around it are
  dropped), as in ``<function=get_weather>``;
- ``<![CDATA[…]]>`` (literal text) and the references ``&amp; &lt; &gt; &quot; &apos;``,
  ``&#N;`` and ``&#xH;``.

*Raw-text elements* (``ScanOptions.raw_text``) hold text only: inside them a ``<`` is literal
unless it starts CDATA, their own close tag, or a tag named in ``ScanOptions.structural``
(which means the raw element was never closed). References are still decoded there.

``ScanOptions.merge_text`` makes each run of text between two tags one :class:`Text`, its references
decoded in bulk (what ``toolcodec.repair.xmlcall`` uses); :func:`find_missing_closes` is the scan
that closes unclosed elements instead of stopping on them (what ``xml.balance_tags`` uses).

The scanner is iterative (depth costs memory, not stack), linear in the input and never raises.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from functools import lru_cache

from toolcodec.results.limits import DEFAULT_LIMITS

# Error kinds. ``unclosed`` is the one the balancing heuristic can mend.
UNCLOSED = "unclosed"  # an element is not closed where its parent ends (or at the end)
STRAY_CLOSE = "stray_close"  # a close tag that matches no open element
STRAY_LT = "stray_lt"  # a "<" that starts no tag
BAD_TAG = "bad_tag"  # a tag that starts but is malformed
UNTERMINATED_TAG = "unterminated_tag"  # the text ends inside a tag
UNTERMINATED_CDATA = "unterminated_cdata"
BARE_AMPERSAND = "bare_ampersand"
UNKNOWN_ENTITY = "unknown_entity"
BAD_CHAR_REF = "bad_char_ref"  # a numeric reference to a code point XML forbids
TOO_DEEP = "too_deep"

# XML names, plus bare digit names (<0>, </1>) that models use for tuple items; a digit name
# must end right at ">" so that "x<3 and" stays text.
_NAME = r"(?:[^\W\d][\w.:-]*|[0-9]+(?=[ \t\r\n]*>))"
NAME_PATTERN = _NAME
_NAME_RE = re.compile(_NAME)
_OPEN_NAME_RE = re.compile(r"<(" + _NAME + r")")
_CLOSE_RE = re.compile(r"</(" + _NAME + r")[ \t\r\n]*>")
_CLOSE_PARTIAL_RE = re.compile(r"</(" + _NAME + r")?[ \t\r\n]*\Z")
_ATTR_RE = re.compile(r"(" + _NAME + r")[ \t\r\n]*=[ \t\r\n]*(\"[^\"]*\"|'[^']*')")
_WS_RE = re.compile(r"[ \t\r\n]*")
_ANY_TAG_RE = re.compile(r"<(/?)[ \t\r\n]*(" + _NAME + r")")
_ENTITY_RE = re.compile(r"&(?:(amp|lt|gt|quot|apos)|#([0-9]{1,7})|#x([0-9a-fA-F]{1,6}));")
_NAMED_REF_RE = re.compile(r"&" + _NAME + r";")
# An "&" that starts no well-formed reference (the five XML entities or a numeric one).
BARE_AMP_PATTERN = r"&(?!(?:amp|lt|gt|quot|apos|#[0-9]{1,7}|#x[0-9a-fA-F]{1,6});)"
_BARE_AMP_RE = re.compile(BARE_AMP_PATTERN)
_ENTITIES = {"amp": "&", "lt": "<", "gt": ">", "quot": '"', "apos": "'"}
_CDATA_OPEN = "<![CDATA["
_CDATA_CLOSE = "]]>"
_TAG_END_CHARS = frozenset(" \t\r\n>/=")


@dataclass(slots=True)
class Text:
    """A run of character data. ``literal`` marks CDATA or a character reference: text the
    author spelled out on purpose, which whitespace trimming must leave alone.

    ``head`` and ``tail`` are the lengths of the plain (non-literal) text at the start and at
    the end of ``value``: the only parts layout trimming may touch. ``layout`` says the run is
    plain whitespace only. All three are derived from ``literal`` unless given, as they are
    for the merged runs of ``ScanOptions.merge_text``; the ``start`` of a merged run is where
    its first piece that is not layout begins (errors about the text point there)."""

    value: str
    start: int
    literal: bool = False
    head: int = -1
    tail: int = -1
    layout: bool | None = None

    def __post_init__(self) -> None:
        plain = 0 if self.literal else len(self.value)
        if self.head < 0:
            self.head = plain
        if self.tail < 0:
            self.tail = plain
        if self.layout is None:
            self.layout = not self.literal and (not self.value or self.value.isspace())


@dataclass(slots=True)
class Element:
    """One element: its name, attributes, shorthand value (``<name=value>``) and children."""

    name: str
    start: int
    attrs: dict[str, str] = field(default_factory=dict)
    value: str | None = None
    children: list[Element | Text] = field(default_factory=list)

    def elements(self) -> list[Element]:
        """The child elements, in order."""
        return [c for c in self.children if isinstance(c, Element)]


@dataclass(frozen=True, slots=True)
class ScanError:
    """Why a scan stopped. ``position`` is a 0-based offset into the scanned text; for
    ``unclosed`` errors ``open_name`` is the element to close and ``expected`` the close tag
    that was missing at ``position``."""

    kind: str
    position: int
    message: str
    expected: str | None = None
    open_name: str | None = None


@dataclass(frozen=True, slots=True)
class ScanOptions:
    """Which elements hold raw text, which tag names end a raw element, and the depth cap.

    ``merge_text`` joins each run of text, references and CDATA between two tags into one
    :class:`Text` (decoded in bulk, which is much faster on long values); without it every
    reference and CDATA section is a piece of its own."""

    raw_text: frozenset[str] = frozenset()
    structural: frozenset[str] = frozenset()
    max_depth: int = DEFAULT_LIMITS.max_depth
    merge_text: bool = False
    # With followers, a raw element's close tag is structural only when one of them (or the
    # end of the text) comes next, past blanks: a value may then hold its own close tag as
    # text (Qwen's `</parameter>` inside a parameter about the format). With no such close,
    # the first close tag counts, as without followers.
    value_followers: tuple[str, ...] = ()


@dataclass(slots=True)
class ScanResult:
    """The top-level nodes of a successful scan, or the error that stopped it (nodes empty)."""

    nodes: list[Element | Text]
    error: ScanError | None = None

    @property
    def ok(self) -> bool:
        return self.error is None


def line_col(text: str, position: int) -> tuple[int, int]:
    """1-based line and column of ``position`` in ``text``."""
    line = text.count("\n", 0, position) + 1
    return line, position - (text.rfind("\n", 0, position) + 1) + 1


def starts_tag(text: str, i: int) -> bool:
    """Whether the ``<`` at ``text[i]`` begins markup: a tag, a close tag (also the sloppy
    ``</ name`` form), or CDATA. ``a < b``, ``x<3`` and ``<=`` do not."""
    if text.startswith(_CDATA_OPEN, i):
        return True
    j = i + 1
    if text.startswith("/", j):
        j = _WS_RE.match(text, j + 1).end()
    if j >= len(text):
        return True  # "<" or "</" cut off by the end of the text: truncated markup
    m = _NAME_RE.match(text, j)
    if m is None:
        return False
    end = m.end()
    return end == len(text) or text[end] in _TAG_END_CHARS


def _tag_name(text: str, i: int) -> str | None:
    """The name of the tag or close tag whose ``<`` is at ``text[i]``, if it has one."""
    j = i + 1
    if text.startswith("/", j):
        j = _WS_RE.match(text, j + 1).end()
    m = _NAME_RE.match(text, j)
    return m.group(0) if m else None


def reference_length(text: str, i: int) -> int:
    """Length of the well-formed reference at ``text[i]`` (an ``&``), or 0 for a bare ``&``.
    Named references other than the five XML ones count as bare."""
    m = _ENTITY_RE.match(text, i)
    return m.end() - i if m else 0


def scan(text: str, options: ScanOptions | None = None) -> ScanResult:
    """Scan ``text`` into a tree. Never raises; a fault comes back as ``ScanResult.error``."""
    return _Scanner(text, options or ScanOptions()).run()


@dataclass(slots=True)
class Mends:
    """The close tags ``text`` lacks, and those it has too many, found by
    :func:`find_missing_closes`.

    ``inserts`` are ``(offset, close tag)`` pairs in text order; ``drops`` are the
    ``(start, end)`` spans of close tags that close no open element (``</b>`` in
    ``<a>x</b></a>``); ``end`` is where the original text stops counting (before a cut-off close
    tag such as ``</para`` that an insert at ``end`` completes; ``len(text)`` otherwise).
    ``error`` is the fault that no close tag mends, if one stopped the scan; the mends before
    it still stand."""

    inserts: list[tuple[int, str]]
    end: int
    error: ScanError | None = None
    result: ScanResult | None = None  # the scan of ``text`` itself, when nothing was mended
    drops: list[tuple[int, int]] = field(default_factory=list)

    def apply(self, text: str) -> str:
        """``text`` with the inserts made, the drops removed and the cut-off tail replaced."""
        if not self.inserts and not self.drops:
            return text[: self.end]
        edits = sorted([(pos, pos, tag) for pos, tag in self.inserts]
                       + [(a, b, "") for a, b in self.drops], key=lambda e: e[0])
        out, prev = [], 0
        for start, stop, tag in edits:
            start, stop = min(start, self.end), min(stop, self.end)
            out.append(text[prev:start])
            out.append(tag)
            prev = stop
        out.append(text[prev : self.end])
        return "".join(out)


def find_missing_closes(text: str, options: ScanOptions | None = None) -> Mends:
    """Scan ``text`` once, closing each element where the scan finds it unclosed (where its
    parent closes, where a structural tag ends a raw element, or at the end) and completing a
    close tag cut off at the very end. Linear: one pass however many elements are open.

    Inserting the tags and scanning again gives the same tree as this pass; the pass stops at
    the first fault that a close tag cannot mend (returned in ``Mends.error``)."""
    scanner = _Scanner(text, options or ScanOptions(), mend=True)
    result = scanner.run()
    unchanged = result.ok and not scanner.inserts and not scanner.drops
    return Mends(scanner.inserts, scanner.end, result.error, result if unchanged else None,
                 scanner.drops)


@lru_cache(maxsize=256)
def _close_re(name: str) -> re.Pattern[str]:
    return re.compile(r"</" + re.escape(name) + r"[ \t\r\n]*>")


@lru_cache(maxsize=64)
def _open_re(name: str) -> re.Pattern[str]:
    return re.compile(r"<" + re.escape(name) + r"(?=[ \t\r\n=>/])")


_MAX_TEXT_CLOSES = 16  # close tags a value may hold as text before the first one counts


def _valid_code_point(cp: int) -> bool:
    return (
        cp in (0x9, 0xA, 0xD)
        or 0x20 <= cp <= 0xD7FF
        or 0xE000 <= cp <= 0xFFFD
        or 0x10000 <= cp <= 0x10FFFF
    )


def _decode_refs(block: str) -> str | None:
    """``block`` with its references decoded in bulk, or None if any ``&`` in it is not a
    well-formed reference to an allowed character (the caller then finds which)."""
    if "&#" not in block:
        if _BARE_AMP_RE.search(block):
            return None
        # "&amp;" last, so that "&amp;lt;" becomes "&lt;", not "<".
        return (
            block.replace("&lt;", "<")
            .replace("&gt;", ">")
            .replace("&quot;", '"')
            .replace("&apos;", "'")
            .replace("&amp;", "&")
        )
    valid = True

    def char(m: re.Match[str]) -> str:
        nonlocal valid
        name, dec, hexa = m.groups()
        if name:
            return _ENTITIES[name]
        cp = int(dec) if dec else int(hexa, 16)
        valid = valid and _valid_code_point(cp)
        return chr(cp) if valid else ""

    decoded, count = _ENTITY_RE.subn(char, block)
    return decoded if valid and count == block.count("&") else None


def _is_cut_close(tail: str, expected: str) -> bool:
    """Whether ``tail`` (the end of the text) is ``expected`` cut off, spaces aside."""
    squeezed = re.sub(r"[ \t\r\n]+", "", tail)
    return bool(squeezed) and expected.startswith(squeezed)


class _Fault(Exception):
    """Internal: unwinds the scanner to ``run`` carrying the error (never escapes ``scan``)."""

    def __init__(self, error: ScanError) -> None:
        self.error = error


class _Scanner:
    """One pass over the text. With ``mend`` set, an unclosed element is closed (and the
    close tag recorded in ``inserts``) instead of failing the scan."""

    def __init__(self, text: str, options: ScanOptions, mend: bool = False) -> None:
        self.text = text
        self.opts = options
        self.root = Element(name="", start=0)
        self.stack: list[Element] = [self.root]
        self.open_names: dict[str, int] = {}  # name -> how many are on the stack
        self.next_close: dict[str, re.Match[str] | None] = {}  # per name, found ahead
        self.mend = mend
        self.inserts: list[tuple[int, str]] = []
        self.drops: list[tuple[int, int]] = []
        self.end = len(text)
        # The text run being merged (ScanOptions.merge_text): its parts and bookkeeping.
        self.parts: list[str] = []
        self.run_len = 0
        self.run_first = -1  # offset of its first piece
        self.run_content = -1  # offset of its first piece that is not layout
        self.run_head = -1  # length before its first literal piece
        self.run_lit_end = 0  # length up to the end of its last literal piece
        self.run_plain = False  # whether any of it is plain text
        self.run_gap = -1  # length at an empty CDATA not yet followed by text

    def run(self) -> ScanResult:
        try:
            self._scan()
        except _Fault as fault:
            return ScanResult(nodes=[], error=fault.error)
        return ScanResult(nodes=self.root.children)

    # -- helpers ---------------------------------------------------------------------------
    def _fail(self, kind: str, pos: int, what: str, **extra: str | None) -> None:
        line, col = line_col(self.text, pos)
        raise _Fault(ScanError(kind, pos, f"{what} (line {line}, column {col})", **extra))

    def _unclosed(self, pos: int, before: str) -> None:
        """The top element is not closed at ``pos``: fail, or (mending) close it there."""
        el = self.stack[-1]
        if self.mend:
            self.inserts.append((pos, f"</{el.name}>"))
            self._pop()
            return
        shown = el.name if el.value is None else f"{el.name}={el.value}"
        self._fail(
            UNCLOSED,
            pos,
            f"<{shown}> opened at offset {el.start} is not closed; expected </{el.name}> "
            f"{before}",
            expected=f"</{el.name}>",
            open_name=el.name,
        )

    def _cut_off(self, pos: int, what: str, expected: str | None) -> int:
        """The text ends inside a tag at ``pos``: fail, or (mending, when the tail is the
        expected close tag cut short) complete that close tag and go on at the end."""
        if self.mend and expected and _is_cut_close(self.text[pos:], expected):
            self.end = pos
            self.inserts.append((pos, expected))
            self._pop()
            return len(self.text)
        self._fail(UNTERMINATED_TAG, pos, what, expected=expected)
        return pos  # unreachable: _fail raises

    def _push(self, el: Element) -> None:
        self.stack.append(el)
        self.open_names[el.name] = self.open_names.get(el.name, 0) + 1

    def _pop(self) -> None:
        self._flush()
        el = self.stack.pop()
        self.open_names[el.name] -= 1

    # -- text ------------------------------------------------------------------------------
    def _plain(self, value: str, start: int) -> None:
        if not value:
            return
        if not self.opts.merge_text:
            self.stack[-1].children.append(Text(value, start))
            return
        if self.run_first < 0:
            self.run_first = start
        if self.run_content < 0 and not value.isspace():
            self.run_content = start
        if self.run_gap >= 0:
            self.run_lit_end, self.run_gap = self.run_gap, -1
        self.parts.append(value)
        self.run_len += len(value)
        self.run_plain = True

    def _literal(self, value: str, start: int, plain: bool = False) -> None:
        """A reference or CDATA (``plain``: a block of references with text between)."""
        if not self.opts.merge_text:
            if value:
                self.stack[-1].children.append(Text(value, start, literal=True))
            return
        if self.run_first < 0:
            self.run_first = start
        if not value:
            # An empty CDATA holds nothing, but it still splits the plain text around it:
            # trimming looks only at the first and the last piece.
            if self.run_len and self.run_head < 0:
                self.run_head = self.run_len
            self.run_gap = self.run_len
            return
        if self.run_head < 0:
            self.run_head = self.run_len
        if self.run_content < 0:
            self.run_content = start
        self.parts.append(value)
        self.run_len += len(value)
        self.run_lit_end, self.run_gap = self.run_len, -1
        self.run_plain = self.run_plain or plain

    def _flush(self) -> None:
        """Close the merged text run, if any, into one Text of the current element."""
        if self.run_first < 0:
            return
        value = self.parts[0] if len(self.parts) == 1 else "".join(self.parts)
        if value:
            n, head = self.run_len, self.run_head
            self.stack[-1].children.append(
                Text(
                    value,
                    self.run_content if self.run_content >= 0 else self.run_first,
                    literal=not self.run_plain,
                    head=n if head < 0 else head,
                    tail=n if head < 0 else n - self.run_lit_end,
                    layout=self.run_content < 0,
                )
            )
        self.parts = []
        self.run_len, self.run_first, self.run_content = 0, -1, -1
        self.run_head, self.run_lit_end, self.run_plain, self.run_gap = -1, 0, False, -1

    def _text(self, a: int, b: int) -> None:
        """The text ``text[a:b]`` (references decoded; any ``<`` in it is literal)."""
        if a >= b:
            return
        text = self.text
        first = text.find("&", a, b)
        if first < 0:
            self._plain(text[a:b], a)
            return
        if self.opts.merge_text:
            last = text.rfind("&", first, b)
            stop = text.find(";", last, b) + 1
            decoded = _decode_refs(text[first:stop]) if stop else None
            if decoded is not None:
                self._plain(text[a:first], a)
                # Each reference decodes to one character: anything longer holds plain text.
                plain = len(decoded) != text.count("&", first, stop)
                self._literal(decoded, first, plain=plain)
                self._plain(text[stop:b], stop)
                return
        # One reference at a time: every piece apart, or to find the faulty "&".
        pos = a
        while first >= 0:
            self._plain(text[pos:first], pos)
            pos = self._reference(first)
            first = text.find("&", pos, b)
        self._plain(text[pos:b], pos)

    def _reference(self, i: int) -> int:
        """Decode the reference at ``i`` into the current element; return the next offset."""
        text = self.text
        m = _ENTITY_RE.match(text, i)
        if m is None:
            named = _NAMED_REF_RE.match(text, i)
            if named:
                self._fail(
                    UNKNOWN_ENTITY,
                    i,
                    f"unknown entity {named.group(0)!r}; only &amp; &lt; &gt; &quot; &apos; "
                    "and numeric references are defined",
                )
            self._fail(BARE_AMPERSAND, i, "bare '&' must be written &amp;")
        name, dec, hexa = m.groups()
        if name:
            char = _ENTITIES[name]
        else:
            cp = int(dec) if dec else int(hexa, 16)
            if not _valid_code_point(cp):
                self._fail(BAD_CHAR_REF, i, f"{m.group(0)} is not a character XML allows")
            char = chr(cp)
        self._literal(char, i)
        return m.end()

    def _cdata(self, i: int) -> int:
        body = i + len(_CDATA_OPEN)
        end = self.text.find(_CDATA_CLOSE, body)
        if end < 0:
            self._fail(UNTERMINATED_CDATA, i, "<![CDATA[ is never closed by ]]>")
        self._literal(self.text[body:end], i)
        return end + len(_CDATA_CLOSE)

    # -- main loop -------------------------------------------------------------------------
    def _scan(self) -> None:
        text, n = self.text, len(self.text)
        raw_text = self.opts.raw_text
        pos = 0
        while pos < n:
            # the call's own element (stack[1]) is never raw, even when a parameter shares
            # its name (<s><s>10</s></s>)
            if len(self.stack) > 2 and self.stack[-1].name in raw_text:
                pos = self._raw(pos)
                continue
            stop = text.find("<", pos)
            if stop < 0:
                stop = n
            self._text(pos, stop)
            if stop == n:
                break
            if text.startswith(_CDATA_OPEN, stop):
                pos = self._cdata(stop)
            elif text.startswith("</", stop):
                pos = self._close_tag(stop)
            else:
                pos = self._open_tag(stop)
        while len(self.stack) > 1:
            self._unclosed(n, "before the end of the text")
        self._flush()

    def _trusted_end(self, el: Element, pos: int) -> int:
        """Where ``el``'s own close tag ends a body that is plainly its own, else -1.

        The body is plainly its own when no tag between here and that close tag opens a
        sibling of the same name or closes an ancestor; structural names in it are then text
        (``<content>a <path>x</path> b</content>`` holds markup as a value)."""
        close = self.next_close.get(el.name, False)
        if close is False or (close is not None and close.start() < pos):
            # Searched once per name and position reached, so many unclosed raw elements
            # cost one pass, not one pass each.
            close = _close_re(el.name).search(self.text, pos)
            self.next_close[el.name] = close
        if close is None:
            return -1
        counts = self.open_names
        for tag in _ANY_TAG_RE.finditer(self.text, pos, close.start()):
            slash, name = tag.groups()
            if not slash:
                if name == el.name:
                    return -1
            elif counts.get(name, 0) > (name == el.name):  # an ancestor, not el itself
                return -1
        return close.start()

    def _structural_end(self, el: Element, pos: int) -> int:
        """Where the first close tag of ``el`` that a follower comes after starts (-1: none;
        or an opening of the same name comes before any close tag and that close is its own
        first one: then ``el`` was never closed, and the opening starts a sibling)."""
        text, closes = self.text, _close_re(el.name)
        first = self.next_close.get(el.name, False)
        if first is False or (first is not None and first.start() < pos):
            first = closes.search(text, pos)  # cached: no close ahead costs one pass
            self.next_close[el.name] = first
        if first is None:
            return -1
        for seen, close in enumerate(closes.finditer(text, first.start())):
            after = _WS_RE.match(text, close.end()).end()
            if after == len(text) or text.startswith(self.opts.value_followers, after):
                break
            if seen >= _MAX_TEXT_CLOSES:
                return -1
        else:
            return -1
        opening = _open_re(el.name).search(text, pos, close.start())
        if opening is not None and closes.search(text, pos, opening.start()) is None:
            first = closes.search(text, opening.end())
            if first is not None and first.start() == close.start():
                return -1  # `a<parameter=b>…</parameter>`: a was never closed
        return close.start()

    def _raw(self, pos: int) -> int:
        """Scan the body of a raw-text element up to and including its close tag."""
        text, n = self.text, len(self.text)
        el = self.stack[-1]
        # a nameless raw element (`<parameter>NAME</parameter>VALUE`) holds no value to end
        trusted = (self._structural_end(el, pos)
                   if self.opts.value_followers and (el.value or el.attrs)
                   else self._trusted_end(el, pos))
        while True:
            if pos < trusted:
                # Up to the trusted close tag only CDATA is markup: take the text in bulk.
                cdata = text.find(_CDATA_OPEN, pos, trusted)
                if cdata < 0:
                    self._text(pos, trusted)
                    pos = trusted
                else:
                    self._text(pos, cdata)
                    pos = self._cdata(cdata)
                    continue
            stop = text.find("<", pos)
            if stop < 0:
                stop = n
            self._text(pos, stop)
            if stop == n:
                self._unclosed(n, "before the end of the text")
                return n
            if text.startswith(_CDATA_OPEN, stop):
                pos = self._cdata(stop)
                continue
            close = _CLOSE_RE.match(text, stop)
            if close and close.group(1) == el.name:
                self._pop()
                return close.end()
            cut = _CLOSE_PARTIAL_RE.match(text, stop) or (stop == n - 1 and text[stop] == "<")
            if cut and (cut is True or el.name.startswith(cut.group(1) or "")):
                what = "the text ends inside a close tag"
                return self._cut_off(stop, what, f"</{el.name}>")
            name = _tag_name(text, stop) if stop > trusted else None
            if name in self.opts.structural and starts_tag(text, stop):
                slash = "/" if text.startswith("</", stop) else ""
                self._unclosed(stop, f"before <{slash}{name}>")
                return stop
            self._plain("<", stop)
            pos = stop + 1

    def _close_tag(self, i: int) -> int:
        text = self.text
        m = _CLOSE_RE.match(text, i)
        if m is None:
            expected = f"</{self.stack[-1].name}>" if len(self.stack) > 1 else None
            if _CLOSE_PARTIAL_RE.match(text, i):
                return self._cut_off(i, "the text ends inside a close tag", expected)
            self._fail(BAD_TAG, i, "malformed close tag; expected </name>", expected=expected)
        name = m.group(1)
        if len(self.stack) > 1 and name == self.stack[-1].name:
            self._pop()
            return m.end()
        if self.open_names.get(name, 0) > 0:
            self._unclosed(i, f"before </{name}>")
            return i
        if self.mend:  # a close tag holds no data: dropping it loses nothing
            self.drops.append((i, m.end()))
            return m.end()
        self._fail(STRAY_CLOSE, i, f"</{name}> closes no open element")
        return i  # unreachable: _fail raises

    def _open_tag(self, i: int) -> int:
        text, n = self.text, len(self.text)
        if i + 1 == n:
            expected = f"</{self.stack[-1].name}>" if len(self.stack) > 1 else None
            return self._cut_off(i, "the text ends with '<'", expected)
        m = _OPEN_NAME_RE.match(text, i)
        if m is None or not starts_tag(text, i):
            self._fail(STRAY_LT, i, "'<' starts no tag; write &lt; for a literal '<'")
        el = Element(name=m.group(1), start=i)
        pos = m.end()
        self_closing = False
        eq = _WS_RE.match(text, pos).end()
        if text.startswith("=", eq):
            pos = eq
            end = text.find(">", pos)
            if end < 0:
                self._fail(UNTERMINATED_TAG, i, f"the text ends inside <{el.name}=…>")
            value = text[pos + 1 : end].strip()
            if value.endswith("/"):
                self_closing, value = True, value[:-1].rstrip()
            if len(value) >= 2 and value[0] == value[-1] and value[0] in "\"'":
                value = value[1:-1]
            el.value = value
            pos = end + 1
        else:
            pos, self_closing = self._attributes(el, pos)
        if len(self.stack) > self.opts.max_depth:
            self._fail(TOO_DEEP, i, f"elements nest deeper than {self.opts.max_depth} levels")
        self._flush()
        self.stack[-1].children.append(el)
        if not self_closing:
            self._push(el)
        return pos

    def _attributes(self, el: Element, pos: int) -> tuple[int, bool]:
        text, n = self.text, len(self.text)
        while True:
            pos = _WS_RE.match(text, pos).end()
            if pos >= n:
                self._fail(UNTERMINATED_TAG, el.start, f"the text ends inside <{el.name}>")
            if text[pos] == ">":
                return pos + 1, False
            if text.startswith("/>", pos):
                return pos + 2, True
            a = _ATTR_RE.match(text, pos)
            if a is None:
                what = f"malformed attribute in <{el.name}>; expected name=\"value\""
                self._fail(BAD_TAG, pos, what)
            el.attrs[a.group(1)] = self._attr_value(a.group(2)[1:-1], a.start(2) + 1)
            pos = a.end()

    def _attr_value(self, raw: str, start: int) -> str:
        if "&" not in raw:
            return raw
        out, pos = [], 0
        while (amp := raw.find("&", pos)) >= 0:
            out.append(raw[pos:amp])
            m = _ENTITY_RE.match(raw, amp)
            if m is None:
                self._fail(BARE_AMPERSAND, start + amp, "bare '&' in an attribute value")
            name, dec, hexa = m.groups()
            cp = 0 if name else (int(dec) if dec else int(hexa, 16))
            if not name and not _valid_code_point(cp):
                self._fail(BAD_CHAR_REF, start + amp, f"{m.group(0)} is not a character XML allows")
            out.append(_ENTITIES[name] if name else chr(cp))
            pos = m.end()
        out.append(raw[pos:])
        return "".join(out)
