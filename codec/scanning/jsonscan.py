"""Token scanners for the tolerant JSON reader: blanks and comments, strings, bare scalars.

Each scanner consumes a whole token with a precompiled regex where it can (as CPython's
``json.scanner`` does) and records the repairs it had to make in an insertion-ordered dict
(``repairs[id] = None``), so ids stay unique and in order of first use. Scanners never
evaluate anything: a bare scalar that reads as arithmetic is refused with ``ScanFailure``.
"""

from __future__ import annotations

import re
from typing import Any

from toolcodec.results.errors import ARITHMETIC_EXPRESSION, INVALID_JSON

Repairs = dict[str, None]

# Repair ids (documented one per line in docs/repairs-json.md).
CODE_FENCE = "json.code_fence"
SURROUNDING_TEXT = "json.surrounding_text"
TRAILING_COMMA = "json.trailing_comma"
EXTRA_COMMA = "json.extra_comma"
MISSING_COMMA = "json.missing_comma"
MISSING_COLON = "json.missing_colon"
MISSING_VALUE = "json.missing_value"
SINGLE_QUOTES = "json.single_quotes"
SMART_QUOTES = "json.smart_quotes"
UNESCAPED_QUOTE = "json.unescaped_quote"
MISSING_QUOTE = "json.missing_quote"
UNQUOTED_KEY = "json.unquoted_key"
UNQUOTED_VALUE = "json.unquoted_value"
PYTHON_LITERAL = "json.python_literal"
LITERAL_CASE = "json.literal_case"
UNDEFINED = "json.undefined"
NONFINITE = "json.nonfinite_number"
NUMBER_FORMAT = "json.number_format"
HEX_NUMBER = "json.hex_number"
COMMENT = "json.comment"
RAW_NEWLINE = "json.raw_newline"
INVALID_ESCAPE = "json.invalid_escape"
UNCLOSED = "json.unclosed"
UNCLOSED_STRING = "json.unclosed_string"  # the text ended inside a string: it may be cut
DANGLING_KEY = "json.dangling_key_dropped"
MISMATCHED_BRACKET = "json.mismatched_bracket"
EXTRA_CLOSING = "json.extra_closing_bracket"
STRAY_CLOSER = "json.stray_closer"
CUT_VALUE = "json.cut_value_dropped"
ELLIPSIS = "json.ellipsis"
TUPLE = "json.tuple_as_list"  # `(1, 2)`: a Python tuple, read as an array
PARENTHESES = "json.parentheses_dropped"  # `(1)`: a parenthesised value, read as the value
SET = "json.set_as_list"  # `{"a", "b"}`: a Python set, read as an array
BIDI_REMOVED = "text.bidi_removed"
NFKC = "text.nfkc"
UNICODE_SPACE = "text.unicode_whitespace"

# Where a string sits decides what may follow its closing quote: a key, a member value,
# an array item, or the top-level value.
KEY, MEMBER, ITEM, ROOT, TUPLE_ITEM = 0, 1, 2, 3, 4  # TUPLE_ITEM: an item inside `( )`


class ScanFailure(Exception):
    """Input that cannot be read without guessing: ``code``, ``position`` and what was wrong."""

    def __init__(self, code: str, position: int, what: str, expression: str | None = None):
        super().__init__(what)
        self.code = code
        self.position = position
        self.what = what
        self.expression = expression


BIDI = frozenset("\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
# Blank characters JSON does not allow between tokens but models (and editors) emit.
ODD_SPACE = frozenset(
    "\u00a0\u1680\u180e\u2000\u2001\u2002\u2003\u2004\u2005\u2006\u2007\u2008\u2009\u200a"
    "\u200b\u2028\u2029\u202f\u205f\u3000\ufeff"
)
TRIM = " \t\r\n" + "".join(ODD_SPACE) + "".join(BIDI)
# Fullwidth structural characters outside strings, read as their ASCII forms (NFKC).
FULLWIDTH = {"｛": "{", "｝": "}", "［": "[", "］": "]", "：": ":", "，": ","}

WS = re.compile(r"[ \t\n\r]*")
NUMBER = re.compile(r"-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?")
LOOSE_NUMBER = re.compile(r"[-+]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][-+]?[0-9]*)?")
# Python-style digit groups: `82_461_110`, `1_234.5_6`.
GROUPED_NUMBER = re.compile(r"-?[0-9]+(?:_[0-9]+)*(?:\.[0-9]+(?:_[0-9]+)*)?")
HEX_INT = re.compile(r"[-+]?0[xX][0-9a-fA-F]+")
HEX4 = re.compile(r"[0-9a-fA-F]{4}")
HEX_PREFIX = re.compile(r"[0-9a-fA-F]{0,3}")
# A bare scalar runs to the next separator, closer, double quote or line end.
VALUE_REGION = re.compile(r'[^,}\]\n\r"，｝］]*')
TUPLE_REGION = re.compile(r'[^,})\]\n\r"，｝］]*')  # inside `( )`, `)` ends a bare scalar too
KEY_REGION = re.compile(r"[^:,{}\[\]\n\r\"'“”‘’＂：，｛｝［］]*")
# Inside a bare scalar `/*` opens a comment; `//` only at its start or after a blank
# (so "https://…" stays whole).
REGION_COMMENT = re.compile(r"/\*|(?:^|(?<=[\s\d]))//"  # `1// c`, not `http://x`
                            r"|(?:^|(?<=[ \t]))#(?=[ \t#]|$)")  # `1 # c`, not `Issue #42`
# A Python/YAML comment: `#` then a blank, another `#` or the line's end (`#fff` is no comment).
HASH_COMMENT = re.compile(r"#(?:[ \t#]|[\r\n]|\Z)")
LINE_END = re.compile(r"[\r\n]")
# After an inner `, "` in a value string: does a `key":` follow? Bounded, so linear.
KEY_AHEAD = re.compile(r'[^"\\\n,:{}\[\]]{1,80}"[ \t]*:')

_ESCAPES = {'"': '"', "\\": "\\", "/": "/", "b": "\b", "f": "\f", "n": "\n", "r": "\r", "t": "\t"}
_QUOTE_ESCAPES = frozenset("'`“”‘’")

# opener -> (chunk regex, closing characters, repair id or None)
STRING_KINDS: dict[str, tuple[re.Pattern[str], str, str | None]] = {
    '"': (re.compile(r'[^"\\\x00-\x1f]*'), '"', None),
    "'": (re.compile(r"[^'\\\x00-\x1f]*"), "'", SINGLE_QUOTES),
    "“": (re.compile(r'[^"”“\\\x00-\x1f]*'), '”“"', SMART_QUOTES),
    "‘": (re.compile(r"[^’‘\\\x00-\x1f]*"), "’‘", SMART_QUOTES),
    "＂": (re.compile(r"[^＂\\\x00-\x1f]*"), "＂", NFKC),
}
QUOTES = frozenset(STRING_KINDS)
# A run of a string's closing characters, to step over quotes that cannot close it at once.
_CLOSER_RUN = {
    closers: re.compile(f"[{closers}]*") for _, closers, _ in STRING_KINDS.values()
}

# What may follow a closing quote directly, and after blanks on the same line.
_CLOSE_ADJACENT = frozenset(",}]/+`，｝］")
_CUT_AT_END = " \t\r\n}]`"
_CLOSE_AFTER_BLANK = frozenset(",}]:/+\"'“‘{[-0123456789，｝］：")

_LITERALS: dict[str, tuple[Any, str | None]] = {
    "true": (True, None),
    "false": (False, None),
    "null": (None, None),
    "True": (True, PYTHON_LITERAL),
    "False": (False, PYTHON_LITERAL),
    "None": (None, PYTHON_LITERAL),
    "NaN": (None, NONFINITE),
    "-NaN": (None, NONFINITE),
    "Infinity": (None, NONFINITE),
    "+Infinity": (None, NONFINITE),
    "-Infinity": (None, NONFINITE),
    "undefined": (None, UNDEFINED),
}
_CASE_LITERALS = {"true": True, "false": False, "null": None}
ELLIPSES = frozenset({"...", "…"})
SKIP = object()  # stands for a placeholder that adds no element


def skip_blank(text: str, pos: int, repairs: Repairs) -> int:
    """Return the first position at or after ``pos`` that is not a blank or a comment."""
    n = len(text)
    while True:
        pos = WS.match(text, pos).end()
        if pos >= n:
            return pos
        c = text[pos]
        if c == "#" and HASH_COMMENT.match(text, pos):
            m = LINE_END.search(text, pos)
            pos = n if m is None else m.start()
            repairs[COMMENT] = None
        elif c == "/":
            nxt = text[pos + 1 : pos + 2]
            if nxt == "/":
                m = LINE_END.search(text, pos)  # \n, \r or \r\n ends a line comment
                pos = n if m is None else m.start()
            elif nxt == "*":
                end = text.find("*/", pos + 2)
                pos = n if end < 0 else end + 2
            else:
                return pos
            repairs[COMMENT] = None
        elif c in BIDI:
            repairs[BIDI_REMOVED] = None
            pos += 1
        elif c in ODD_SPACE:
            repairs[UNICODE_SPACE] = None
            pos += 1
        else:
            return pos


def _closes(text: str, i: int, ctx: int) -> bool:
    """Is the quote just before ``i`` the closing one? (Otherwise it is part of the text.)"""
    if i >= len(text):
        return True
    c = text[i]
    if c in _CLOSE_ADJACENT or (c == ")" and ctx == TUPLE_ITEM):
        return True
    if c == ":":
        return ctx != MEMBER  # `"a":` ends a key; inside a member value it is suspect
    if c in " \t\r\n":
        j = WS.match(text, i).end()
        if ctx == KEY or ctx == ROOT or j >= len(text) or "\n" in text[i:j]:
            return True
        return text[j] in _CLOSE_AFTER_BLANK or (text[j] == ")" and ctx == TUPLE_ITEM) or (
            text[j] == "#" and HASH_COMMENT.match(text, j) is not None)
    if ctx == KEY:
        return not c.isalpha()  # `"k"e"y":` keeps its inner quotes
    return False


def scan_string(text: str, start: int, ctx: int, repairs: Repairs) -> tuple[str, int, bool]:
    """Read the string whose opening quote is at ``start``.

    Returns ``(value, end, closed)``; ``closed`` is False when the input ended first.
    """
    chunk_re, closers, quote_repair = STRING_KINDS[text[start]]
    if quote_repair is not None:
        repairs[quote_repair] = None
    match = chunk_re.match
    n = len(text)
    pos = start + 1
    parts: list[str] = []
    while True:
        end = match(text, pos).end()
        c = text[end] if end < n else ""
        if c and c in closers:
            if _closes(text, end + 1, ctx):
                if not parts:
                    return text[pos:end], end + 1, True
                parts.append(text[pos:end])
                return "".join(parts), end + 1, True
            if c == '"' and (ctx == MEMBER or ctx == KEY):
                cut = text[pos:end].rstrip(" \t")
                if (cut.endswith(",") and ctx == MEMBER and KEY_AHEAD.match(text, end + 1)) or (
                        cut.endswith(":") and ctx == KEY):
                    # `"New York, "next": …` (a value) or `"key:"value"` (a key): the string
                    # lost its closing quote before the separator
                    repairs[MISSING_QUOTE] = None
                    parts.append(cut[:-1])
                    return "".join(parts), pos + len(cut) - 1, True
            repairs[UNESCAPED_QUOTE] = None
            parts.append(text[pos:end])  # (one-character slices are cached, not allocated)
            parts.append(c)
            pos = end + 1
            if pos + 1 < n and text[pos] in closers and text[pos + 1] in closers and ctx != KEY:
                # Outside a key a quote followed by another closing character never closes
                # (see _closes): a run of them is text up to its last quote, judged next.
                last = _CLOSER_RUN[closers].match(text, pos).end() - 1
                parts.append(text[pos:last])
                pos = last
            continue
        if end != pos:
            parts.append(text[pos:end])
        if not c:
            repairs[UNCLOSED] = None
            repairs[UNCLOSED_STRING] = None
            value = "".join(parts)
            if ctx in (MEMBER, ITEM, TUPLE_ITEM):
                # `{"a": "b}`: closers (and a fence) ending an unclosed string are taken as
                # the structure they look like, not as text
                raw = text[start + 1 :]
                cut = len(raw) - len(raw.rstrip(_CUT_AT_END))
                if cut and raw.rstrip(" \t\r\n`") != raw.rstrip(_CUT_AT_END):
                    return value[: len(value) - cut], n - cut, False
            return value, n, False
        if c == "\\":
            pos = _escape(text, end, parts, repairs, text[start])
            if pos < 0:
                repairs[UNCLOSED] = None
                repairs[UNCLOSED_STRING] = None
                return "".join(parts), n, False
        else:
            repairs[RAW_NEWLINE] = None  # a raw control character, kept as that character
            parts.append(c)
            pos = end + 1


def _escape(text: str, at: int, parts: list[str], repairs: Repairs, opener: str) -> int:
    """Decode the escape whose backslash is at ``at``; return where to go on, -1 at the end."""
    n = len(text)
    if at + 1 >= n:
        return -1  # a lone trailing backslash: the input was cut
    e = text[at + 1]
    plain = _ESCAPES.get(e)
    if plain is not None:
        parts.append(plain)
        return at + 2
    if e == "u":
        digits = text[at + 2 : at + 6]
        if HEX4.fullmatch(digits):
            code = int(digits, 16)
            pos = at + 6
            if 0xD800 <= code < 0xDC00 and text.startswith("\\u", pos):
                low = text[pos + 2 : pos + 6]
                if HEX4.fullmatch(low) and 0xDC00 <= int(low, 16) < 0xE000:
                    code = 0x10000 + ((code - 0xD800) << 10) + (int(low, 16) - 0xDC00)
                    pos += 6
            parts.append(chr(code))
            return pos
        if at + 6 > n and HEX_PREFIX.fullmatch(digits):
            return -1  # `\u26` cut off by the end of the input
    if e in _QUOTE_ESCAPES:
        if e != opener:
            repairs[INVALID_ESCAPE] = None
        parts.append(e)
        return at + 2
    # Unknown escape (`\x`, `\d`, a Windows path): keep the backslash, nothing is lost.
    repairs[INVALID_ESCAPE] = None
    parts.append("\\")
    return at + 1


def to_number(literal: str, is_float: bool, repairs: Repairs) -> Any:
    """Convert a number literal in JSON form the way ``orjson.loads`` does.

    Integers outside the 64-bit range become floats (results must serialise with orjson);
    a number too large for a float becomes null, named ``json.nonfinite_number``.
    """
    if not is_float:
        if len(literal) < 19:
            return int(literal)
        if len(literal) < 4000:  # below Python's int/str conversion limit
            value = int(literal)
            if _INT_MIN <= value <= _UINT_MAX:
                return value
    value = float(literal)
    if value in _INFINITIES:
        repairs[NONFINITE] = None
        return None
    return value


_INT_MIN, _UINT_MAX = -(2**63), 2**64 - 1
_INFINITIES = (float("inf"), float("-inf"))


def read_bare(text: str, pos: int, ctx: int, repairs: Repairs) -> tuple[Any, int]:
    """Read an unquoted scalar at ``pos``: literal, number, or a bare word taken as a string.

    Returns ``(value, end)``; ``value`` is ``SKIP`` for a `...` placeholder.
    """
    region = (TUPLE_REGION if ctx == TUPLE_ITEM else VALUE_REGION).match(text, pos).group()
    cm = REGION_COMMENT.search(region)
    if cm is not None:
        region = region[: cm.start()]
    s = region.rstrip(TRIM)
    end = pos + len(s)
    for ch in region[len(s):].strip(" \t\r\n"):
        repairs[BIDI_REMOVED if ch in BIDI else UNICODE_SPACE] = None
    if not s:
        raise ScanFailure(INVALID_JSON, pos, f"expected a value, found {text[pos]!r}")
    literal = _LITERALS.get(s)
    if literal is not None:
        if literal[1] is not None:
            repairs[literal[1]] = None
        return literal[0], end
    lowered = s.lower()
    if lowered in _CASE_LITERALS:
        repairs[LITERAL_CASE] = None
        return _CASE_LITERALS[lowered], end
    if s in ELLIPSES:
        repairs[ELLIPSIS] = None
        return SKIP, end
    number = _number(s, repairs)
    if number is not _NOT_A_NUMBER:
        return number, end
    if is_arithmetic(s):
        raise arithmetic_failure(s, pos)
    m = NUMBER.match(s)
    if m is not None and m.end() < len(s) and s[m.end()] in " \t":
        rest = s[m.end():].lstrip(" \t")
        if ctx == ROOT or rest[0] in "-.0123456789":
            # `[1 2]`: a number, then the next value without a comma; `42 is the answer`
            # at the top level: the number, then text that is not part of it
            return to_number(m.group(), bool(m.group(1) or m.group(2)), repairs), pos + m.end()
    if ctx == ROOT:
        word = s.partition(" ")[0]
        if word in _CASE_LITERALS and len(word) < len(s):
            return _CASE_LITERALS[word], pos + len(word)
        if " " in s or _MORE_WORDS.search(text, end):
            _refuse_bare(s, pos)  # a call's own message says more
            raise ScanFailure(INVALID_JSON, pos, "the text is prose, not a JSON value (words "
                              "with no JSON structure); an answer in words carries no value")
    if end >= len(text) and ctx != ROOT and not any(ch.isalnum() for ch in s):
        repairs[CUT_VALUE] = None  # `[1, -`: a number cut off by the end of the output
        return SKIP, end
    _refuse_bare(s, pos)
    repairs[UNQUOTED_VALUE] = None
    if end < len(text) and text[end] == '"' and _closes(text, end + 1, ctx):
        if MISSING_QUOTE in repairs:  # `"a ,"b": c"`: which quotes belong together is a guess
            raise ScanFailure(INVALID_JSON, end, "the quotes around this value do not pair up "
                              "(a quote inside a string?); escape inner quotes as \\\"")
        end += 1  # `abc",`: a value that only lost its opening quote
    return s, end


def arithmetic_failure(s: str, pos: int) -> ScanFailure:
    return ScanFailure(ARITHMETIC_EXPRESSION, pos, f"arithmetic expression `{s}` is not a JSON "
                       "value: send its computed result", expression=s)


def _refuse_bare(s: str, pos: int) -> None:
    """Bare text that cannot be a word of a value: punctuation alone, or a call."""
    if not any(ch.isalnum() for ch in s):
        raise ScanFailure(INVALID_JSON, pos, f"{s!r} is not a value")
    if "(" in s or ")" in s:
        raise ScanFailure(INVALID_JSON, pos, f"`{s}` looks like a function call (JSONP or a "
                          "constructor such as ObjectId(...)); send the plain value")


_NOT_A_NUMBER = object()
_MORE_WORDS = re.compile(r"[^\W_]")  # a letter or digit after a bare top-level word


def _number(s: str, repairs: Repairs) -> Any:
    m = NUMBER.fullmatch(s)
    if m is not None:
        return to_number(s, bool(m.group(1) or m.group(2)), repairs)
    if LOOSE_NUMBER.fullmatch(s):
        body = s.lstrip("+-")
        int_part = body.split(".")[0].split("e")[0].split("E")[0]
        if len(int_part) > 1 and int_part[0] == "0":
            return _NOT_A_NUMBER  # `0789`, `00.5`: leading zeros mean a code, not a number
        repairs[NUMBER_FORMAT] = None
        sign = "-" if s[0] == "-" else ""
        mant, _, exp = body.replace("E", "e").partition("e")
        whole, dot, frac = mant.partition(".")
        literal = f"{sign}{whole or '0'}.{frac or '0'}" if dot else f"{sign}{whole}"
        if exp.lstrip("+-"):
            return to_number(f"{literal}e{exp}", True, repairs)
        return to_number(literal, bool(dot), repairs)
    if "_" in s and GROUPED_NUMBER.fullmatch(s):
        repairs[NUMBER_FORMAT] = None
        plain = s.replace("_", "")
        return to_number(plain, "." in plain, repairs)
    if HEX_INT.fullmatch(s):
        repairs[HEX_NUMBER] = None
        return to_number(str(int(s, 16)), False, repairs)  # beyond 64 bits: a float, as above
    return _NOT_A_NUMBER


_ARITH_TOKEN = re.compile(
    r"(\s*)(?:([0-9]+(?:\.[0-9]*)?(?:[eE][-+]?[0-9]+)?|\.[0-9]+)|([^\W\d][\w.]*)"
    r"|(\*\*|[-+*/%])|([()]))"  # `**`: Python's power, as models write `2 ** 8`
)


def is_arithmetic(s: str) -> bool:
    """Does the bare scalar ``s`` read as arithmetic (and so must be refused)?

    ``s`` must be operands (numbers, identifiers) joined by binary operators, with optional
    parentheses and unary signs. Each binary operator must count: ``-`` only with blanks on
    both sides (so dates, ranges and UUIDs stay text); ``* / + %`` with blanks on both sides
    or a number on either side (so ``text/plain`` stays text). ``01/05/2024`` (two unspaced
    slashes between integers) is a date, not a division.
    """
    tokens: list[tuple[str, bool]] = []
    i, n = 0, len(s)
    while i < n:
        m = _ARITH_TOKEN.match(s, i)
        if m is None:
            return False
        kind = "num" if m.group(2) else "id" if m.group(3) else m.group(4) or m.group(5)
        tokens.append((kind, m.end(1) > m.start(1)))
        i = m.end()
    ops: list[tuple[str, bool, bool, str, str]] = []
    expect_operand, depth, left, pending = True, 0, "", None
    for idx, (kind, blank_before) in enumerate(tokens):
        if kind == "(":
            if not expect_operand:
                return False
            depth += 1
        elif kind == ")":
            if expect_operand or depth == 0:
                return False
            depth -= 1
        elif kind in ("num", "id"):
            if not expect_operand:
                return False
            if pending is not None:
                ops.append((*pending, kind))
                pending = None
            left, expect_operand = kind, False
        elif expect_operand:
            if kind not in "+-":
                return False  # unary signs only
        else:
            blank_after = idx + 1 < len(tokens) and tokens[idx + 1][1]
            pending = (kind, blank_before, blank_after, left)
            expect_operand = True
    if expect_operand or depth or not ops:
        return False
    for op, before, after, lhs, rhs in ops:
        spaced = before and after
        if not (spaced if op == "-" else spaced or "num" in (lhs, rhs)):
            return False
    is_date = len(ops) == 2 and all(
        o[0] == "/" and not (o[1] or o[2]) and o[3] == o[4] == "num" for o in ops
    )
    return not is_date
