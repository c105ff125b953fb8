"""Tolerant JSON reading with provenance: repair what a model got wrong and name each repair.

Valid JSON takes a fast path (``orjson``, then ``json``) and comes back untouched with no repairs.
Anything else goes through an iterative reader (an explicit stack, so nesting depth costs memory,
never the call stack) built on the token scanners in ``toolcodec.scanning.jsonscan``. Every
heuristic that changes something adds its id to ``repairs``; what cannot be read without guessing,
arithmetic above all, is refused with a ``CodecError``. The ids and the rules are documented in
``docs/repairs-json.md``.
"""

from __future__ import annotations

import json
import re
from typing import Any

import orjson
from toolcodec.repair.json_rewrite import rewrite_repair
from toolcodec.results.errors import (
    ARITHMETIC_EXPRESSION,
    INTERNAL_ERROR,
    INVALID_JSON,
    NESTING_TOO_DEEP,
    PAYLOAD_TOO_LARGE,
    CodecError,
)
from toolcodec.results.limits import DEFAULT_LIMITS, Limits
from toolcodec.results.result import RepairResult
from toolcodec.scanning import jsonscan as scan
from toolcodec.scanning.jsonscan import ScanFailure

__all__ = ["repair_json", "repair_json_prefix"]

_VALUE, _AFTER, _KEY, _DONE = 0, 1, 2, 3
_SKIP = scan.SKIP  # a placeholder that adds no element (`...`); a module global: read often
# What ``keys`` holds for a list read from Python syntax: its closer is not `]`.
_PAREN, _SET = object(), object()  # `( … )` and `{"a", "b"}`
_ARITHMETIC_WINDOW = 200
_LIST_CLOSERS = {None: "]", _PAREN: ")", _SET: "}"}
# `(` opens a tuple only when a value follows, so `(see below)` stays text.
_TUPLE_START = re.compile(r"""[ \t\r\n]*(?:["'\[{(\-0-9)]|(?:true|false|null|True|False|None)\b)""")
_NUMBER_START = frozenset("-0123456789")
_OPERATORS = frozenset("+*/%")
_KEY_AHEAD = re.compile(r'(?:"[^"\\\n]{0,200}"|[A-Za-z_]\w{0,64})\s*:')
_SWALLOWED_KEY = re.compile(r'(?<!\\)"[ \t]*:')  # an unescaped `":` inside a string
_STRUCTURE_IN_TAIL = re.compile(r"[\"{}\[\]]")
_VALUE_OPENERS = frozenset("{[") | scan.QUOTES | frozenset("｛［")
# Where prose ends and JSON (or a fence around it) begins.
_PROSE_STOP = re.compile(r"[{\[｛［]|```")
_FENCE_LANG = re.compile(r"[ \t]*[A-Za-z0-9_+.-]*")  # ``` json: blanks before the language


# Hot-path tokens: well-formed JSON needing no repair but single quotes. Each lookahead
# demands what the general code would also accept as the token's end, so both paths read such
# a token the same way. A string is two groups: double-quoted, then single-quoted.
_END = r"(?=[ \t\n\r]*(?:[,}\]]|\Z))"
_QUOTED = r""""([^"\\\x00-\x1f]*)"|'([^'\\\x00-\x1f]*)'"""
_STRING = "(?:" + _QUOTED + ")"
_NUMBER = r"(-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?)"
_FAST_VALUE = re.compile(
    r"[ \t\n\r]*(?:" + _STRING + _END + "|" + _NUMBER + _END
    + r"|(true|false|null|True|False|None)" + _END + r"|([{\[]))"
)
# A scalar's groups: string (two), number, fraction, exponent, word.
_SCALAR = ("(?:" + _STRING + _END + "|" + _NUMBER + _END
           + r"|(true|false|null|True|False|None)" + _END + ")")
# A key's groups: the string's two, then a bare identifier (`{id: 1}`).
_KEY_TOKEN = "(?:" + _QUOTED + "|([A-Za-z_][A-Za-z0-9_]*))"
# `"key": scalar` (the key's groups, then the scalar's) or `"key": {` / `"key": [` (group 10),
# with or without the comma before it; `, scalar` or `, {` in arrays (the scalar's groups,
# then the opener's, 7). An opener read here saves a trip through the key and value states.
_SCALAR_OR_OPEN = "(?:" + _SCALAR + r"|([{\[]))"
_MEMBER = r"[ \t\n\r]*" + _KEY_TOKEN + r"[ \t\n\r]*:[ \t\n\r]*" + _SCALAR_OR_OPEN
_FAST_MEMBER = re.compile(_MEMBER)
# The loops over members and items also end in one match: `}` or `]`, after a trailing comma
# (group 11 or 8) or not; the closer is group 12 or 9.
_FAST_NEXT_MEMBER = re.compile(
    r"[ \t\n\r]*(?:," + _MEMBER + r"|(,?)[ \t\n\r]*(\}))")
_FAST_NEXT_ITEM = re.compile(
    r"[ \t\n\r]*(?:,[ \t\n\r]*" + _SCALAR_OR_OPEN + r"|(,?)[ \t\n\r]*(\]))")
# A comma or a closer after a value; group 1 is a comma right before a closer (trailing).
_FAST_AFTER = re.compile(r"[ \t\n\r]*(?:(,)[ \t\n\r]*(?=[}\]]))?([,}\]])")
_FAST_KEY = re.compile(r"[ \t\n\r]*" + _KEY_TOKEN + r"[ \t\n\r]*:")
# JSON's words, and Python's (named json.python_literal): read on the hot path too.
_JSON_WORDS = {"true": True, "false": False, "null": None, "True": True, "False": False,
               "None": None}


def repair_json(text: str, *, limits: Limits = DEFAULT_LIMITS) -> RepairResult:
    """Read one JSON value from model output, repairing what can be repaired.

    Strips code fences and prose around the value, and reports every repair it makes.
    Never raises: problems come back as ``errors`` with ``ok=False`` and ``value=None``.
    """
    return _repaired(text, _repair_json(text, limits))


def repair_refused(text: str, refusal: Exception, *,
                   limits: Limits = DEFAULT_LIMITS) -> RepairResult:
    """``repair_json(text)`` for a text ``orjson.loads`` just refused with *refusal*: the
    same answer, without that parse again (a refused parse costs several times a good one)."""
    return _repaired(text, _repair_json(text, limits, refusal))


def _repaired(text: str, result: RepairResult) -> RepairResult:
    if result.ok and result.value is _SKIP:  # only a placeholder such as "..." was there
        return _failed(result.repairs, INVALID_JSON, 0, "no JSON value: only a placeholder "
                       "(`...`) was found")
    return _encodable(text, result)


def _repair_json(text: str, limits: Limits, refusal: Exception | None = None) -> RepairResult:
    if not isinstance(text, str):
        return _failed([], INVALID_JSON, 0, f"expected text (str), got {type(text).__name__}")
    if len(text) > limits.max_chars:
        return _too_large(text, limits)
    found, value = _strict(text, limits, refusal)
    if found:
        return RepairResult(True, value)
    quick = rewrite_repair(text)  # the common damage only: rewritten, then parsed at C speed
    if quick is not None and not depth_exceeds(text, quick[0], limits.max_depth):
        return RepairResult(True, quick[0], quick[1])
    return _read(text, limits)


def _read(text: str, limits: Limits) -> RepairResult:
    """The full reader over the whole text: prose, fences, every repair."""
    reader = _Repairer(text, limits)
    try:
        start = reader.locate_start()
        value, end = reader.parse(start)
        reader.finish_tail(end)
    except ScanFailure as failure:
        return reader.failed(failure)
    except Exception as exc:  # a bug must still not escape to the caller
        return _failed(list(reader.repairs), INTERNAL_ERROR, 0, f"JSON repair failed: {exc!r}")
    return RepairResult(True, value, list(reader.repairs))


def repair_json_prefix(
    text: str, pos: int = 0, *, limits: Limits = DEFAULT_LIMITS
) -> tuple[RepairResult, int]:
    """Read exactly one JSON value starting at ``pos`` (after optional blanks).

    Returns the result and the offset just past what was consumed (``pos`` on failure).
    Does not strip prose or fences and does not look beyond the value.
    """
    result, end = _repair_json_prefix(text, pos, limits)
    return _encodable(text, result), end


def _repair_json_prefix(text: str, pos: int, limits: Limits) -> tuple[RepairResult, int]:
    if not isinstance(text, str):
        return _failed([], INVALID_JSON, 0, "expected text (str)"), pos
    if len(text) > limits.max_chars:
        return _too_large(text, limits), pos
    if not 0 <= pos <= len(text):
        return _failed([], INVALID_JSON, 0, f"start offset {pos} is outside the text"), pos
    start = scan.WS.match(text, pos).end()
    if start < len(text) and text[start] in "{[":
        found, value, end = _strict_prefix(text, start, limits)
        if found:
            return RepairResult(True, value), end
    reader = _Repairer(text, limits)
    try:
        value, end = reader.parse(pos)
    except ScanFailure as failure:
        return reader.failed(failure), pos
    except Exception as exc:  # a bug must still not escape to the caller
        return _failed(list(reader.repairs), INTERNAL_ERROR, 0, f"JSON repair failed: {exc!r}"), pos
    return RepairResult(True, value, list(reader.repairs)), end


def _encodable(text: str, result: RepairResult) -> RepairResult:
    """Replace lone surrogates (raw, or from ``\\uD800`` escapes) so the result encodes as UTF-8.

    Only results of texts that could hold one are walked: non-ASCII texts, or ones with
    ``\\u`` escapes. Error messages and details may quote the text, so they are cleaned too.
    """
    if not isinstance(text, str) or (text.isascii() and "\\u" not in text):
        return result
    from toolcodec.repair.normalize import (
        SURROGATE_REPLACED,
        replace_surrogates_in,
        replace_surrogates_in_errors,
    )

    value, changed = replace_surrogates_in(result.value)
    if changed:
        result.value = value
        result.repairs.append(SURROGATE_REPLACED)
    replace_surrogates_in_errors(result.errors)
    return result


# -- strict fast paths -------------------------------------------------------------------


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _finite_float(literal: str) -> float:
    value = float(literal)
    if value in (float("inf"), float("-inf")):
        raise ValueError("number out of range")
    return value


def _orjson_int(literal: str) -> int | float:
    return scan.to_number(literal, False, {})


def _json_loads(text: str) -> Any:
    """``json.loads`` with orjson's reading of numbers: no NaN/Infinity, 64-bit integers."""
    return json.loads(text, parse_constant=_reject_constant, parse_float=_finite_float,
                      parse_int=_orjson_int)


_DECODER = json.JSONDecoder(parse_float=_finite_float, parse_int=_orjson_int)


def _strict(text: str, limits: Limits, refusal: Exception | None = None) -> tuple[bool, Any]:
    """``(True, value)`` when ``text`` is valid JSON within the depth limit; *refusal*: what
    ``orjson.loads(text)`` raised, when the caller has just tried it."""
    if refusal is None:
        try:
            value = orjson.loads(text)
        except Exception as exc:
            refusal = exc.with_traceback(None)  # no cycle through this frame
    if refusal is not None:
        if "surrogate" not in str(refusal):
            return False, None
        try:  # orjson refuses lone surrogates, which json (and Python str) accept
            value = _json_loads(text)
        except Exception:
            return False, None
    if depth_exceeds(text, value, limits.max_depth):
        return False, None
    return True, value


def _strict_prefix(text: str, start: int, limits: Limits) -> tuple[bool, Any, int]:
    try:  # raw_decode reads one value and reports where it ended
        value, end = _DECODER.raw_decode(text, start)
    except Exception:
        return False, None, start
    if depth_exceeds(text, value, limits.max_depth):
        return False, None, start
    if "NaN" in text[start:end] or "Infinity" in text[start:end]:
        return False, None, start  # let the reader name json.nonfinite_number
    return True, value, end


def depth_exceeds(text: str, value: Any, limit: int) -> bool:
    """Whether ``value``, parsed from ``text``, nests deeper than ``limit``."""
    if text.count("[") + text.count("{") <= limit or type(value) not in (dict, list):
        return False  # cannot nest deeper than it has brackets
    level = [value]  # the containers at one depth, level by level (no call stack)
    for _ in range(limit):
        level = [c for item in level for c in (item.values() if type(item) is dict else item)
                 if type(c) is dict or type(c) is list]
        if not level:
            return False
    return True


# -- errors ------------------------------------------------------------------------------


def _line_col(text: str, pos: int) -> tuple[int, int]:
    line = text.count("\n", 0, pos) + 1
    return line, pos - (text.rfind("\n", 0, pos) + 1) + 1


def _failed(repairs: list[str], code: str, pos: int, message: str, **details: Any) -> RepairResult:
    error = CodecError(code, message, {"position": pos, **details})
    return RepairResult(False, None, repairs, [error])


def _too_large(text: str, limits: Limits) -> RepairResult:
    return _failed([], PAYLOAD_TOO_LARGE, 0,
                   f"input has {len(text)} characters, more than the limit of {limits.max_chars}",
                   limit=limits.max_chars)


# -- the reader --------------------------------------------------------------------------


class _Repairer:
    """One pass over ``text``: locate the value, read it with an explicit stack, check the tail."""

    __slots__ = ("text", "limits", "repairs", "stack", "keys", "open_lists", "after_comma",
                 "vstart")

    def __init__(self, text: str, limits: Limits) -> None:
        self.text = text
        self.limits = limits
        self.repairs: scan.Repairs = {}

    def failed(self, failure: ScanFailure) -> RepairResult:
        line, col = _line_col(self.text, failure.position)
        message = f"{failure.what} (line {line}, column {col})"
        details: dict[str, Any] = {}
        if failure.expression is not None:
            details["expression"] = failure.expression
        return _failed(list(self.repairs), failure.code, failure.position, message, **details)

    def _peek(self, pos: int) -> str:
        c = self.text[pos]
        if c in scan.FULLWIDTH:
            self.repairs[scan.NFKC] = None
            return scan.FULLWIDTH[c]
        return c

    def _significant(self, pos: int) -> tuple[int, str]:
        """Skip blanks and comments from ``pos``: where the next token starts and its first
        character (fullwidth structure read as ASCII), or ``(len(text), "")`` at the end."""
        pos = scan.skip_blank(self.text, pos, self.repairs)
        if pos >= len(self.text):
            return pos, ""
        return pos, self._peek(pos)

    def locate_start(self) -> int:
        """Skip blanks, comments, a code fence and leading prose; return where the value starts."""
        text, rep = self.text, self.repairs
        pos = scan.skip_blank(text, 0, rep)
        if pos >= len(text):
            raise ScanFailure(INVALID_JSON, pos, "expected a JSON value, found only blanks")
        if text[pos] == "(" and _TUPLE_START.match(text, pos + 1):
            return pos  # a Python tuple
        if text[pos] not in _VALUE_OPENERS and not text.startswith("```", pos):
            stop = _PROSE_STOP.search(text, pos)
            if stop is None:
                return pos  # a bare scalar such as `true`, `12` or `hello world`
            rep[scan.SURROUNDING_TEXT] = None
            pos = stop.start()
        if text.startswith("```", pos):
            rep[scan.CODE_FENCE] = None
            pos = scan.skip_blank(text, _FENCE_LANG.match(text, pos + 3).end(), rep)
            if pos < len(text) and text[pos] not in _VALUE_OPENERS:
                stop = _PROSE_STOP.search(text, pos)
                if stop is not None and not text.startswith("```", stop.start()):
                    rep[scan.SURROUNDING_TEXT] = None
                    pos = stop.start()
        return pos

    def finish_tail(self, pos: int) -> None:
        """Account for whatever follows the value: a closing fence, stray closers, more text."""
        text, rep, n = self.text, self.repairs, len(self.text)
        comma = False
        while True:
            pos = scan.skip_blank(text, pos, rep)
            if pos >= n:
                if comma:
                    rep[scan.TRAILING_COMMA] = None
                return
            if text.startswith("```", pos):
                rep[scan.CODE_FENCE] = None
                pos += 3
                continue
            c = self._peek(pos)
            if c == "," and not comma:
                comma = True
            elif c in "}]":
                rep[scan.EXTRA_CLOSING] = None
            else:
                break
            pos += 1
        if c in _VALUE_OPENERS or c in _NUMBER_START:
            raise ScanFailure(INVALID_JSON, pos, "more JSON follows the complete value; keeping "
                              "one and dropping the rest would lose data")
        if _STRUCTURE_IN_TAIL.search(text, pos) is not None:
            raise ScanFailure(INVALID_JSON, pos, "text with quotes or brackets follows the "
                              "complete value (a quote inside a string, or more members?); "
                              "dropping it could lose data")
        rep[scan.SURROUNDING_TEXT] = None

    def parse(self, pos: int) -> tuple[Any, int]:
        """Read one value starting at ``pos``; return it and the offset just past it.

        A loop over three states, one method each: a value is expected (:meth:`_value`), a
        value was read (:meth:`_after`: store it, then a comma or a closer), a key is expected
        (:meth:`_key`). Open containers live on an explicit stack, so depth costs no
        recursion. Each state first tries one precompiled regex for the common well-formed
        token (the hot path); anything else goes to the general, repairing code.
        """
        self.stack, self.keys = [], []
        self.open_lists, self.after_comma, self.vstart = 0, False, pos
        value_step, after_step, key_step = self._value, self._after, self._key
        state, value = _VALUE, None
        while True:
            if state == _AFTER:
                state, value, pos = after_step(value, pos)
            elif state == _VALUE:
                state, value, pos = value_step(pos)
            elif state == _KEY:
                state, value, pos = key_step(pos)
            else:
                return value, pos

    def _open(self, c: str, at: int) -> int:
        """Open a container at ``at``; the state that follows its opener."""
        self.vstart = at
        stack = self.stack
        if len(stack) >= self.limits.max_depth:
            raise ScanFailure(NESTING_TOO_DEEP, at,
                              f"arrays and objects nest deeper than {self.limits.max_depth} levels")
        stack.append({} if c == "{" else [])
        self.keys.append(None)
        self.after_comma = False
        if c == "{":
            return _KEY
        self.open_lists += 1
        return _VALUE

    def _close(self) -> Any:
        """Pop the innermost container (its closer matched) and return it."""
        value = self.stack.pop()
        self.keys.pop()
        self.open_lists -= type(value) is list
        return value

    def _close_paren(self, at: int) -> Any:
        """The `)` at ``at`` closes a `(`: a tuple reads as an array, one value without a
        comma (`(1)`, Python's grouping) as that value."""
        value = self._close()
        text, i = self.text, at - 1
        while text[i] in " \t\r\n":
            i -= 1
        if len(value) == 1 and text[i] != ",":
            self.repairs[scan.PARENTHESES] = None
            return value[0]
        self.repairs[scan.TUPLE] = None
        return value

    def _refuse_grouped_arithmetic(self, pos: int) -> None:
        """`(1+2)*3` is arithmetic, not a tuple: refuse it whole. A bounded window (an
        expression longer than it is still refused, by its part inside the parentheses)."""
        end = min(len(self.text), pos + _ARITHMETIC_WINDOW)
        s = scan.VALUE_REGION.match(self.text, pos, end).group().rstrip(scan.TRIM)
        if scan.is_arithmetic(s):
            raise scan.arithmetic_failure(s, pos)

    def _as_set(self, item: str, pos: int) -> tuple[int, Any, int]:
        """`{"a", "b"}`: the first member is a lone string, so the object is a Python set; it
        becomes an array that `}` closes."""
        self.stack[-1] = [item]
        self.keys[-1] = _SET
        self.open_lists += 1
        self.repairs[scan.SET] = None
        return _AFTER, _SKIP, pos

    def _end(self) -> tuple[int, Any, int]:
        """The input ended inside containers: close them all."""
        self.repairs[scan.UNCLOSED] = None
        return _DONE, _close_all(self.stack, self.keys), len(self.text)

    def _value(self, pos: int) -> tuple[int, Any, int]:
        m = _FAST_VALUE.match(self.text, pos)
        if m is None:
            return self._value_slow(pos)
        kind = m.lastindex
        if kind <= 2:  # a plain string
            if kind == 2:  # single-quoted: where the general path, which reads it, puts it
                self.vstart = m.start(2) - 1
            return _AFTER, _scalar(m.groups(), 0, self.repairs), m.end()
        if kind <= 5:  # a number (groups 3-5)
            self.vstart = m.start(3)
            return _AFTER, _scalar(m.groups(), 0, self.repairs), m.end()
        if kind == 6:
            return _AFTER, _word(m.group(6), self.repairs), m.end()
        return self._open(m.group(7), m.start(7)), None, m.end()  # kind 7: `{` or `[`

    def _value_slow(self, pos: int) -> tuple[int, Any, int]:
        text, rep, stack = self.text, self.repairs, self.stack
        top = stack[-1] if stack else None
        pos, c = self._significant(pos)
        if not c:
            if top is None:
                raise ScanFailure(INVALID_JSON, pos, "expected a JSON value, found the end")
            if type(top) is dict:
                rep[scan.DANGLING_KEY] = None
            return self._end()
        self.vstart = pos
        if c == "{" or c == "[":  # after a comment, a blank the hot path skips, or NFKC
            return self._open(c, pos), None, pos + 1
        ctx = (scan.ROOT if top is None else scan.MEMBER if type(top) is dict
               else scan.ITEM if self.keys[-1] is not _PAREN else scan.TUPLE_ITEM)
        if c in scan.QUOTES:
            start = pos
            value, pos, closed = scan.scan_string(text, pos, ctx, rep)
            if not closed and ctx != scan.ROOT and _SWALLOWED_KEY.search(text, start + 1, pos):
                # `{"a": "x" note "b": 2}`: the string ran to the end over a `"b":`, a member
                # of its own after a stray word; keeping it as text would hide the member
                raise ScanFailure(INVALID_JSON, start, "this string never closes and holds "
                                  "what reads as a key (`\"…\":`); a stray word after a value? "
                                  "Where it ends would be a guess")
            return _AFTER, value, pos
        if c in ",]}":
            return self._closer_for_value(c, pos, top)
        if c == "(" and _TUPLE_START.match(text, pos + 1):
            self._refuse_grouped_arithmetic(pos)
            self._open("[", pos)
            self.keys[-1] = _PAREN
            return _VALUE, None, pos + 1
        if c == ")" and ctx == scan.TUPLE_ITEM:  # `()`, `(1, )`
            return _AFTER, self._close_paren(pos), pos + 1
        if c in _NUMBER_START:
            m = scan.NUMBER.match(text, pos)
            if m is not None:
                end = m.end()
                if end >= len(text) or text[end] in ",]}\n\r" or (
                        text[end] == ")" and ctx == scan.TUPLE_ITEM):
                    return _AFTER, scan.to_number(m.group(), bool(m.group(1) or m.group(2)),
                                                  rep), end
        value, pos = scan.read_bare(text, pos, ctx, rep)
        return _AFTER, value, pos

    def _closer_for_value(self, c: str, pos: int, top: Any) -> tuple[int, Any, int]:
        """A comma or a closer where a value was expected."""
        rep = self.repairs
        if type(top) is list:
            if c == ",":
                rep[scan.EXTRA_COMMA] = None
                self.after_comma = True
                return _VALUE, None, pos + 1
            if c == "]":
                if self.after_comma:
                    rep[scan.TRAILING_COMMA] = None
                return _AFTER, self._close(), pos + 1
        elif type(top) is dict:
            rep[scan.MISSING_VALUE] = None  # `{"a": }`: read as null
            return _AFTER, None, pos
        if top is None:
            raise ScanFailure(INVALID_JSON, pos, f"expected a JSON value, found {c!r}")
        return self._mismatched(c, pos + 1, _VALUE)

    def _mismatched(self, c: str, pos: int, stay: int) -> tuple[int, Any, int]:
        """A closer (just before ``pos``) that does not close the innermost container: skipped
        when it closes nothing and a comma follows (staying in state ``stay``), else it closes
        up to the container of its kind."""
        more = self._comma_next(pos)
        if more and not _kind_open(c, self.stack, self.open_lists):  # closes nothing
            self.repairs[scan.STRAY_CLOSER] = None
            return stay, _SKIP, pos
        value, self.open_lists = _close_mismatched(self.stack, self.keys, c, self.open_lists,
                                                   self.repairs, more)
        return _AFTER, value, pos

    def _after(self, value: Any, pos: int) -> tuple[int, Any, int]:
        """Store ``value`` in the innermost container, then read what follows it."""
        stack = self.stack
        if not stack:
            self._refuse_operator(pos, self.vstart)
            return _DONE, value, pos
        text, rep, top = self.text, self.repairs, stack[-1]
        if type(top) is list:
            is_list, closer = True, _LIST_CLOSERS[self.keys[-1]]
            if value is not _SKIP:
                top.append(value)
            m = _FAST_NEXT_ITEM.match(text, pos)  # hot path: more scalar items, one match each
            while m is not None:
                g = m.groups()  # one call, cheaper than several m.group()
                if g[8] is not None:  # `]`
                    if closer != "]":
                        break  # `]` in a tuple or a set: the general code below decides
                    if g[7]:
                        rep[scan.TRAILING_COMMA] = None
                        self.vstart = m.start(9)  # as the general path, which reads `]` there
                    return _AFTER, self._close(), m.end()
                if g[6] is not None:  # `{` or `[`
                    return self._open(g[6], m.start(7)), None, m.end()
                item = g[0]
                top.append(item if item is not None else _scalar(g, 0, rep))
                pos = m.end()
                m = _FAST_NEXT_ITEM.match(text, pos)
        else:
            is_list, closer = False, "}"
            if value is not _SKIP:
                key = self.keys[-1]
                if key in top:
                    _duplicate(key, self.vstart)
                top[key] = value
            m = _FAST_NEXT_MEMBER.match(text, pos)  # hot path: more scalar members
            while m is not None:
                g = m.groups()
                if g[11] is not None:  # `}`
                    if g[10]:
                        rep[scan.TRAILING_COMMA] = None
                    return _AFTER, self._close(), m.end()
                key = g[0]
                if key is None:
                    key = _key_of(g, rep)
                if key in top:
                    _duplicate(key, m.start())
                if g[9] is not None:  # `{` or `[`
                    self.keys[-1] = key
                    return self._open(g[9], m.start(10)), None, m.end()
                value = g[3]
                top[key] = value if value is not None else _scalar(g, 3, rep)
                pos = m.end()
                m = _FAST_NEXT_MEMBER.match(text, pos)
        m = _FAST_AFTER.match(text, pos)
        if m is not None:
            c, pos = m.group(2), m.end()
            if m.group(1) is not None:  # `, ]` or `, }`: a trailing comma
                if c == closer:
                    rep[scan.TRAILING_COMMA] = None
                    if is_list:  # as the general path, which reads `]` where a value may be
                        self.vstart = m.start(2)
                else:
                    c, pos = ",", m.end(1)
        else:
            pos, c = self._significant(pos)
            if not c:
                return self._end()
            pos += 1
        if c == ",":
            self.after_comma = True
            return (_VALUE if is_list else _KEY), None, pos
        if c == closer:
            return _AFTER, self._close() if c != ")" else self._close_paren(pos - 1), pos
        if c in "]}":
            return self._mismatched(c, pos, _AFTER)
        return self._after_other(c, pos, closer)

    def _after_other(self, c: str, pos: int, closer: str) -> tuple[int, Any, int]:
        """After a value, neither a comma nor a closer (``c`` is just before ``pos``)."""
        text = self.text
        if c in _OPERATORS:
            self._refuse_operator(pos - 1, self.vstart)
        if c == "`" and text.startswith("```", pos - 1):
            self.repairs[scan.UNCLOSED] = None  # a closing fence: the value ends here
            return _DONE, _close_all(self.stack, self.keys), pos - 1
        is_list = type(self.stack[-1]) is list
        if c == ":" and closer == "}" and is_list:
            raise ScanFailure(INVALID_JSON, pos - 1, "this {…} starts like a set of strings "
                              "({\"a\", \"b\"}) but has a `key: value` member too; send an "
                              "object or an array")
        if c == ":" or (not is_list and c in "{["):
            raise ScanFailure(INVALID_JSON, pos - 1,
                              f"expected ',' or '{closer}' after a value, found {c!r}")
        self.repairs[scan.MISSING_COMMA] = None
        self.after_comma = False
        return (_VALUE if is_list else _KEY), None, pos - 1

    def _key(self, pos: int) -> tuple[int, Any, int]:
        """After ``{`` or a comma inside an object."""
        text = self.text
        m = _FAST_MEMBER.match(text, pos)
        if m is not None:
            g = m.groups()
            self.keys[-1] = _key_of(g, self.repairs)
            if g[9] is not None:  # `{` or `[`
                return self._open(g[9], m.start(10)), None, m.end()
            return _AFTER, _scalar(g, 3, self.repairs), m.end()
        m = _FAST_KEY.match(text, pos)
        if m is not None:
            self.keys[-1] = _key_of(m.groups(), self.repairs)
            return _VALUE, None, m.end()
        pos, c = self._significant(pos)
        if not c:
            return self._end()
        if c == "}":
            if self.after_comma:
                self.repairs[scan.TRAILING_COMMA] = None
            return _AFTER, self._close(), pos + 1
        if c == ",":
            self.repairs[scan.EXTRA_COMMA] = None
            self.after_comma = True
            return _KEY, None, pos + 1
        if c == "]":
            return self._mismatched(c, pos + 1, _KEY)
        return self._key_slow(c, pos)

    def _key_slow(self, c: str, pos: int) -> tuple[int, Any, int]:
        """A key that is not a plain string: quoted otherwise, bare, or missing."""
        rep = self.repairs
        bare_key = c not in scan.QUOTES
        if not bare_key:
            key, pos, closed = scan.scan_string(self.text, pos, scan.KEY, rep)
            if not closed:
                rep[scan.DANGLING_KEY] = None
                return _DONE, _close_all(self.stack, self.keys), len(self.text)
        elif c in "{[":
            raise ScanFailure(INVALID_JSON, pos, f"expected a key (a string), found {c!r}")
        else:
            key, pos = self._bare_key(pos)
            if key is _SKIP:
                return _AFTER, key, pos
        pos, c = self._significant(pos)
        if not c:
            rep[scan.DANGLING_KEY] = None
            return self._end()
        self.keys[-1] = key
        if c == ":":
            return _VALUE, None, pos + 1
        if c in ",}":
            if bare_key:  # `{invalid json}`: prose, not a key whose value is missing
                raise ScanFailure(INVALID_JSON, pos, f"`{key}` has no ':' and no value; "
                                  "it is not a key of this object")
            if not self.stack[-1]:
                return self._as_set(key, pos)
            rep[scan.MISSING_VALUE] = None  # `{"a": 1, "b"}`: the key alone reads as null
            return _AFTER, None, pos
        if c in scan.QUOTES:
            # `{"a": 1, note "b": 2}`, `{""a"": 1}`, `{"a""b": 1}`: a word or a quote too many
            # before a key; reading on would make the key a value and invent a member
            raise ScanFailure(INVALID_JSON, pos, f"a string follows the key {key!r} with no "
                              "':' between them (a stray word or doubled quotes?); which of "
                              "them is the key would be a guess")
        rep[scan.MISSING_COLON] = None
        return _VALUE, None, pos

    def _comma_next(self, pos: int) -> str:
        """What follows a closer: "" unless a comma comes next; then "key" when a member
        (`"k":`) follows the comma, else "item"."""
        pos, c = self._significant(pos)
        if c != ",":
            return ""
        pos, c = self._significant(pos + 1)
        return "key" if _KEY_AHEAD.match(self.text, pos) else "item"

    def _bare_key(self, pos: int) -> tuple[Any, int]:
        m = scan.KEY_REGION.match(self.text, pos)
        key = m.group().rstrip(scan.TRIM)
        if not key:
            raise ScanFailure(INVALID_JSON, pos,
                              f"expected a key (a string), found {self.text[pos]!r}")
        if key in scan.ELLIPSES:
            self.repairs[scan.ELLIPSIS] = None
            return _SKIP, pos + len(key)
        self.repairs[scan.UNQUOTED_KEY] = None
        return key, pos + len(key)

    def _refuse_operator(self, pos: int, vstart: int) -> None:
        """Refuse `"a" + "b"`, `[1] * 2` and the like: expressions are never evaluated."""
        text = self.text
        op = scan.skip_blank(text, pos, {})
        if op >= len(text) or text[op] not in _OPERATORS:
            return
        expression = text[vstart:vstart + 80].split("\n")[0].strip()
        kind = "string concatenation" if text[vstart] in scan.QUOTES else "expression"
        raise ScanFailure(ARITHMETIC_EXPRESSION, vstart,
                          f"{kind} `{expression}` is not a JSON value: send its result",
                          expression=expression)


def _key_of(g: tuple[Any, ...], rep: dict[str, None]) -> str:
    """The key of a fast-path member or key match from its groups (``g[0:3]``: double-quoted,
    single-quoted, bare identifier)."""
    key = g[0]
    if key is not None:
        return key
    key = g[1]
    if key is not None:
        rep[scan.SINGLE_QUOTES] = None
        return key
    rep[scan.UNQUOTED_KEY] = None
    return g[2]


def _scalar(g: tuple[Any, ...], i: int, rep: dict[str, None]) -> Any:
    """The value of a fast-path scalar from a match's groups ``g``, its own starting at ``i``:
    a string (``g[i]`` double-quoted, ``g[i+1]`` single-quoted), a number (``g[i+2]`` to
    ``g[i+4]``: digits, fraction, exponent) or a JSON word (``g[i+5]``)."""
    value = g[i]
    if value is not None:
        return value
    value = g[i + 1]
    if value is not None:
        rep[scan.SINGLE_QUOTES] = None
        return value
    number = g[i + 2]
    if number is None:
        return _word(g[i + 5], rep)
    if g[i + 3] or g[i + 4] or len(number) > 18:
        return scan.to_number(number, bool(g[i + 3] or g[i + 4]), rep)
    return int(number)


def _word(word: str, rep: dict[str, None]) -> Any:
    """The value of a JSON or Python word; a Python one (`True`, `None`) is a repair."""
    if word[0] < "a":  # upper case
        rep[scan.PYTHON_LITERAL] = None
    return _JSON_WORDS[word]


def _close_all(stack: list[Any], keys: list[Any]) -> Any:
    """Close every open container (the input ended) and return the outermost one."""
    value = stack.pop()
    keys.pop()
    while stack:
        parent = stack.pop()
        key = keys.pop()
        if type(parent) is list:
            parent.append(value)
        else:
            parent[key] = value
        value = parent
    return value


def _duplicate(key: Any, pos: int) -> None:
    raise ScanFailure(INVALID_JSON, pos, f"the key {key!r} appears twice in one object; the "
                      "repaired text would keep only one of its values")


def _kind_open(closer: str, stack: list[Any], open_lists: int) -> bool:
    """Whether a container that ``closer`` would close is open at all."""
    return open_lists > 0 if closer == "]" else len(stack) - open_lists > 0


def _close_mismatched(stack: list[Any], keys: list[Any], closer: str, open_lists: int,
                      repairs: scan.Repairs, more: str) -> tuple[Any, int]:
    """Handle a closer that does not match the innermost container.

    When a comma follows and what comes after it (``more``: "key" or "item") fits the container
    under the innermost one, it closes the innermost container only, so that what follows is
    still read (`{"a": [1, 2}, "b": 3}`). Otherwise, if
    a container of the closer's kind is open further out, everything inside it is closed with
    it (`[{"a": 1]`); if none is, the closer is read as the innermost one's (`{"a": 1]`).
    Returns ``(closed container, open_lists)``.
    """
    repairs[scan.MISMATCHED_BRACKET] = None
    want = list if closer == "]" else dict
    # what follows the comma fits the container under the innermost one: close that one only
    parent = type(stack[-2]) if len(stack) > 1 else None
    fits = (more == "key" and parent is dict) or (more == "item" and parent is list)
    has_kind = _kind_open(closer, stack, open_lists) and not fits
    while True:
        value = stack.pop()
        keys.pop()
        if type(value) is list:
            open_lists -= 1
        if not has_kind or type(value) is want or not stack:
            return value, open_lists
        parent = stack[-1]
        if type(parent) is list:
            parent.append(value)
        else:
            parent[keys[-1]] = value
