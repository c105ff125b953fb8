"""Tolerant JSON reading with provenance: repair what a model got wrong and name each repair.

Valid JSON takes a fast path (``orjson``, then ``json``) and comes back untouched with no
repairs. Anything else goes through an iterative reader (an explicit stack, so nesting depth
costs memory, never the call stack) built on the token scanners in ``codec.jsonscan``. Every
heuristic that changes something adds its id to ``repairs``; what cannot be read without
guessing, arithmetic above all, is refused with a ``CodecError``. The ids and the rules are
documented in ``docs/repairs-json.md``.
"""

from __future__ import annotations

import json
import re
from typing import Any

import orjson

from codec import jsonscan as scan
from codec.errors import (
    ARITHMETIC_EXPRESSION,
    INTERNAL_ERROR,
    INVALID_JSON,
    NESTING_TOO_DEEP,
    PAYLOAD_TOO_LARGE,
    CodecError,
)
from codec.jsonscan import ScanFailure
from codec.limits import DEFAULT_LIMITS, Limits
from codec.result import RepairResult

__all__ = ["repair_json", "repair_json_prefix"]

_VALUE, _AFTER, _KEY = 0, 1, 2
_NUMBER_START = frozenset("-0123456789")
_OPERATORS = frozenset("+*/%")
_KEY_AHEAD = re.compile(r'(?:"[^"\\\n]{0,200}"|[A-Za-z_]\w{0,64})\s*:')
_STRUCTURE_IN_TAIL = re.compile(r"[\"{}\[\]]")
_VALUE_OPENERS = frozenset("{[") | scan.QUOTES | frozenset("｛［")
# Where prose ends and JSON (or a fence around it) begins.
_PROSE_STOP = re.compile(r"[{\[｛［]|```")
_FENCE_LANG = re.compile(r"[A-Za-z0-9_+.-]*")


# Hot-path tokens: well-formed JSON needing no repair. Each lookahead demands what the general
# code would also accept as the token's end, so both paths read such a token the same way.
_END = r"(?=[ \t\n\r]*(?:[,}\]]|\Z))"
_FAST_VALUE = re.compile(
    r'[ \t\n\r]*(?:"([^"\\\x00-\x1f]*)"' + _END
    + r"|(-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?)" + _END
    + r"|(true|false|null)" + _END
    + r"|([{\[]))"
)
_SCALAR = (
    r'(?:"([^"\\\x00-\x1f]*)"' + _END
    + r"|(-?(?:0|[1-9][0-9]*)(\.[0-9]+)?([eE][-+]?[0-9]+)?)" + _END
    + r"|(true|false|null)" + _END + ")"
)
# `"key": scalar` (groups: key, string, number, fraction, exponent, word), with or without
# the comma before it; `, scalar` in arrays (the same groups without the key).
_MEMBER = r'[ \t\n\r]*"([^"\\\x00-\x1f]*)"[ \t\n\r]*:[ \t\n\r]*' + _SCALAR
_FAST_MEMBER = re.compile(_MEMBER)
_FAST_NEXT_MEMBER = re.compile(r"[ \t\n\r]*," + _MEMBER)
_FAST_NEXT_ITEM = re.compile(r"[ \t\n\r]*,[ \t\n\r]*" + _SCALAR)
_FAST_AFTER = re.compile(r"[ \t\n\r]*([,}\]])")
_FAST_KEY = re.compile(r'[ \t\n\r]*"([^"\\\x00-\x1f]*)"[ \t\n\r]*:')
_JSON_WORDS = {"true": True, "false": False, "null": None}


def repair_json(text: str, *, limits: Limits = DEFAULT_LIMITS) -> RepairResult:
    """Read one JSON value from model output, repairing what can be repaired.

    Strips code fences and prose around the value, and reports every repair it makes.
    Never raises: problems come back as ``errors`` with ``ok=False`` and ``value=None``.
    """
    result = _repair_json(text, limits)
    if result.ok and result.value is scan.SKIP:  # only a placeholder such as "..." was there
        return _failed(result.repairs, INVALID_JSON, 0, "no JSON value: only a placeholder "
                       "(`...`) was found")
    return _encodable(text, result)


def _repair_json(text: str, limits: Limits) -> RepairResult:
    if not isinstance(text, str):
        return _failed([], INVALID_JSON, 0, f"expected text (str), got {type(text).__name__}")
    if len(text) > limits.max_chars:
        return _too_large(text, limits)
    found, value = _strict(text, limits)
    if found:
        return RepairResult(True, value)
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
    from codec.normalize import (
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


def _strict(text: str, limits: Limits) -> tuple[bool, Any]:
    """``(True, value)`` when ``text`` is valid JSON within the depth limit."""
    try:
        value = orjson.loads(text)
    except Exception as exc:
        if "surrogate" not in str(exc):
            return False, None
        try:  # orjson refuses lone surrogates, which json (and Python str) accept
            value = _json_loads(text)
        except Exception:
            return False, None
    if _depth_exceeds(text, value, limits.max_depth):
        return False, None
    return True, value


def _strict_prefix(text: str, start: int, limits: Limits) -> tuple[bool, Any, int]:
    try:  # raw_decode reads one value and reports where it ended
        value, end = _DECODER.raw_decode(text, start)
    except Exception:
        return False, None, start
    if _depth_exceeds(text, value, limits.max_depth):
        return False, None, start
    if "NaN" in text[start:end] or "Infinity" in text[start:end]:
        return False, None, start  # let the reader name json.nonfinite_number
    return True, value, end


def _depth_exceeds(text: str, value: Any, limit: int) -> bool:
    if text.count("[") + text.count("{") <= limit:
        return False  # cannot nest deeper than it has brackets
    todo = [(value, 1)]
    while todo:
        item, depth = todo.pop()
        if depth > limit:
            return True
        children = item.values() if type(item) is dict else item
        todo.extend((c, depth + 1) for c in children if type(c) in (dict, list))
    return False


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

    __slots__ = ("text", "limits", "repairs")

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

        Each state first tries one precompiled regex for the common well-formed token (the
        hot path); anything else goes to the general, repairing code below it.
        """
        text, rep, n = self.text, self.repairs, len(self.text)
        max_depth = self.limits.max_depth
        significant = self._significant
        fast_value, fast_after, fast_key = _FAST_VALUE.match, _FAST_AFTER.match, _FAST_KEY.match
        fast_member, next_member = _FAST_MEMBER.match, _FAST_NEXT_MEMBER.match
        next_item = _FAST_NEXT_ITEM.match
        stack: list[Any] = []  # open containers, innermost last
        keys: list[Any] = []  # per container: the key whose value is being read (dicts)
        top: Any = None  # stack[-1], or None at the top level
        open_lists = 0
        state, value, after_comma, vstart = _VALUE, None, False, pos
        while True:
            if state == _VALUE:
                m = fast_value(text, pos)
                if m is not None:
                    kind = m.lastindex
                    if kind == 1:  # a plain string
                        value, pos, state = m.group(1), m.end(), _AFTER
                        continue
                    if kind <= 4:  # a number (groups 2-4)
                        literal = m.group(2)
                        vstart, pos = m.start(2), m.end()
                        if m.group(3) or m.group(4):
                            value = scan.to_number(literal, True, rep)
                        else:
                            value = int(literal) if len(literal) < 19 else scan.to_number(
                                literal, False, rep)
                        state = _AFTER
                        continue
                    if kind == 5:
                        value, pos, state = _JSON_WORDS[m.group(5)], m.end(), _AFTER
                        continue
                    # kind 6: `{` or `[`
                    vstart = m.start(6)
                    if len(stack) >= max_depth:
                        raise ScanFailure(NESTING_TOO_DEEP, m.start(6),
                                          f"arrays and objects nest deeper than {max_depth} levels")
                    pos = m.end()
                    if m.group(6) == "{":
                        top = {}
                        state = _KEY
                    else:
                        top = []
                        open_lists += 1
                    stack.append(top)
                    keys.append(None)
                    after_comma = False
                    continue
                pos, c = significant(pos)
                if not c:
                    if top is None:
                        raise ScanFailure(INVALID_JSON, pos, "expected a JSON value, found the end")
                    if type(top) is dict:
                        rep[scan.DANGLING_KEY] = None
                    rep[scan.UNCLOSED] = None
                    return _close_all(stack, keys), n
                vstart = pos
                if c == "{" or c == "[":  # after a comment, a blank the hot path skips, or NFKC
                    if len(stack) >= max_depth:
                        raise ScanFailure(NESTING_TOO_DEEP, pos,
                                          f"arrays and objects nest deeper than {max_depth} levels")
                    top = {} if c == "{" else []
                    open_lists += c == "["
                    stack.append(top)
                    keys.append(None)
                    after_comma = False
                    pos += 1
                    state = _KEY if c == "{" else _VALUE
                    continue
                ctx = (scan.ROOT if top is None else
                       scan.MEMBER if type(top) is dict else scan.ITEM)
                if c in scan.QUOTES:
                    value, pos, _ = scan.scan_string(text, pos, ctx, rep)
                    state = _AFTER
                    continue
                if c in ",]}":
                    if type(top) is list:
                        if c == ",":
                            rep[scan.EXTRA_COMMA] = None
                            after_comma = True
                            pos += 1
                            continue
                        if c == "]":
                            if after_comma:
                                rep[scan.TRAILING_COMMA] = None
                            value = stack.pop()
                            keys.pop()
                            open_lists -= 1
                            top = stack[-1] if stack else None
                            pos, state = pos + 1, _AFTER
                            continue
                    elif type(top) is dict:
                        rep[scan.MISSING_VALUE] = None  # `{"a": }`: read as null
                        value, state = None, _AFTER
                        continue
                    if top is None:
                        raise ScanFailure(INVALID_JSON, pos, f"expected a JSON value, found {c!r}")
                    more = self._comma_next(pos + 1)
                    if more and not _kind_open(c, stack, open_lists):  # closes nothing
                        rep[scan.STRAY_CLOSER] = None
                        pos += 1
                        continue
                    value, open_lists = _close_mismatched(stack, keys, c, open_lists, rep, more)
                    top = stack[-1] if stack else None
                    pos, state = pos + 1, _AFTER
                    continue
                if c in _NUMBER_START:
                    m = scan.NUMBER.match(text, pos)
                    if m is not None:
                        end = m.end()
                        if end >= n or text[end] in ",]}\n\r":
                            value = scan.to_number(m.group(), bool(m.group(1) or m.group(2)), rep)
                            pos, state = end, _AFTER
                            continue
                value, pos = scan.read_bare(text, pos, ctx, rep)
                state = _AFTER
                continue

            if state == _AFTER:
                if top is None:
                    self._refuse_operator(pos, vstart)
                    return value, pos
                is_list = type(top) is list
                if value is not scan.SKIP:
                    if is_list:
                        top.append(value)
                    else:
                        if keys[-1] in top:
                            _duplicate(keys[-1], vstart)
                        top[keys[-1]] = value
                # hot path: more well-formed scalar items or members, one regex match each
                if is_list:
                    m = next_item(text, pos)
                    while m is not None:
                        top.append(_scalar(m, 1, rep))
                        pos = m.end()
                        m = next_item(text, pos)
                else:
                    m = next_member(text, pos)
                    while m is not None:
                        if m.group(1) in top:
                            _duplicate(m.group(1), m.start())
                        top[m.group(1)] = _scalar(m, 2, rep)
                        pos = m.end()
                        m = next_member(text, pos)
                m = fast_after(text, pos)
                if m is not None:
                    c = m.group(1)
                    pos = m.end()
                else:
                    pos, c = significant(pos)
                    if not c:
                        rep[scan.UNCLOSED] = None
                        return _close_all(stack, keys), n
                    pos += 1
                if c == ",":
                    after_comma = True
                    state = _VALUE if is_list else _KEY
                elif c == ("]" if is_list else "}"):
                    value = stack.pop()
                    keys.pop()
                    open_lists -= is_list
                    top = stack[-1] if stack else None
                elif c in "]}":
                    more = self._comma_next(pos)
                    if more and not _kind_open(c, stack, open_lists):  # closes nothing
                        rep[scan.STRAY_CLOSER] = None
                        value = scan.SKIP  # still just after the value already stored
                        continue
                    value, open_lists = _close_mismatched(stack, keys, c, open_lists, rep, more)
                    top = stack[-1] if stack else None
                elif c in _OPERATORS:
                    self._refuse_operator(pos - 1, vstart)
                elif c == "`" and text.startswith("```", pos - 1):
                    rep[scan.UNCLOSED] = None  # a closing fence: the value ends here
                    return _close_all(stack, keys), pos - 1
                elif c == ":" or (not is_list and c in "{["):
                    closer = "]" if is_list else "}"
                    raise ScanFailure(INVALID_JSON, pos - 1,
                                      f"expected ',' or '{closer}' after a value, found {c!r}")
                else:
                    rep[scan.MISSING_COMMA] = None
                    after_comma = False
                    pos -= 1
                    state = _VALUE if is_list else _KEY
                continue

            # state == _KEY: after `{` or a comma inside an object
            m = fast_member(text, pos)
            if m is not None:
                keys[-1] = m.group(1)
                value = _scalar(m, 2, rep)
                pos, state = m.end(), _AFTER
                continue
            m = fast_key(text, pos)
            if m is not None:
                keys[-1] = m.group(1)
                pos, state = m.end(), _VALUE
                continue
            pos, c = significant(pos)
            if not c:
                rep[scan.UNCLOSED] = None
                return _close_all(stack, keys), n
            if c == "}":
                if after_comma:
                    rep[scan.TRAILING_COMMA] = None
                value = stack.pop()
                keys.pop()
                top = stack[-1] if stack else None
                pos, state = pos + 1, _AFTER
                continue
            if c == ",":
                rep[scan.EXTRA_COMMA] = None
                after_comma = True
                pos += 1
                continue
            if c == "]":
                more = self._comma_next(pos + 1)
                if more and not _kind_open(c, stack, open_lists):  # closes nothing
                    rep[scan.STRAY_CLOSER] = None
                    pos += 1
                    continue
                value, open_lists = _close_mismatched(stack, keys, c, open_lists, rep, more)
                top = stack[-1] if stack else None
                pos, state = pos + 1, _AFTER
                continue
            bare_key = c not in scan.QUOTES
            if c in scan.QUOTES:
                key, pos, closed = scan.scan_string(text, pos, scan.KEY, rep)
                if not closed:
                    rep[scan.DANGLING_KEY] = None
                    return _close_all(stack, keys), n
            elif c in "{[":
                raise ScanFailure(INVALID_JSON, pos, f"expected a key (a string), found {c!r}")
            else:
                key, pos = self._bare_key(pos)
                if key is scan.SKIP:
                    value, state = key, _AFTER
                    continue
            pos, c = significant(pos)
            if not c:
                rep[scan.DANGLING_KEY] = None
                rep[scan.UNCLOSED] = None
                return _close_all(stack, keys), n
            keys[-1] = key
            if c == ":":
                pos += 1
                state = _VALUE
            elif c in ",}":
                if bare_key:  # `{invalid json}`: prose, not a key whose value is missing
                    raise ScanFailure(INVALID_JSON, pos, f"`{key}` has no ':' and no value; "
                                      "it is not a key of this object")
                rep[scan.MISSING_VALUE] = None  # `{"a", "b": 1}`: the key alone reads as null
                value, state = None, _AFTER
            else:
                rep[scan.MISSING_COLON] = None
                state = _VALUE

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
            return scan.SKIP, pos + len(key)
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


def _scalar(m: re.Match[str], g: int, rep: dict[str, None]) -> Any:
    """The value of a fast-path scalar match whose string group is ``g``: a string, a number
    (groups ``g+1`` to ``g+3``: digits, fraction, exponent) or a JSON word (``g+4``)."""
    value = m.group(g)
    if value is not None:
        return value
    number = m.group(g + 1)
    if number is None:
        return _JSON_WORDS[m.group(g + 4)]
    if m.group(g + 2) or m.group(g + 3) or len(number) > 18:
        return scan.to_number(number, bool(m.group(g + 2) or m.group(g + 3)), rep)
    return int(number)


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
