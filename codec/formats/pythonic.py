"""Python call lists: ``[get_weather(city="Paris", days=3), search(q='x')]``.

Llama 3.2/4, LFM2 and others write tool calls as Python call expressions. They are *read* here,
never evaluated: a small scanner accepts keyword arguments whose values are literals (strings in
any quoting with Python's escapes, numbers, ``True``/``False``/``None``, lists, tuples, and dicts
with string keys). A variable, a nested call, an operator, a positional argument or ``**kw`` is
an ``invalid_json`` error that says what and where: guessing what the model meant by an
expression is exactly what must not happen.

Numbers follow the JSON reader's rule (integers beyond 64 bits become floats); a number too
large for a float is an error. A text cut off after complete values, missing only its closing
brackets, is completed (``pythonic.close_brackets``); one cut inside a string, a number or a
name is an error, since the value would be a guess.
"""

from __future__ import annotations

import re
from typing import Any

from toolcodec.formats import FormatRead
from toolcodec.results.errors import INVALID_JSON, NESTING_TOO_DEEP, CodecError
from toolcodec.results.limits import DEFAULT_LIMITS, Limits
from toolcodec.scanning.jsonscan import to_number

CLOSE_BRACKETS = "pythonic.close_brackets"
RAW_NEWLINE = "pythonic.raw_newline"  # a line break inside a '…' string (Python wants \n)
JSON_LITERAL = "pythonic.json_literal"  # true/false/null for True/False/None
SET_AS_LIST = "pythonic.set_as_list"  # {'a', 'b'}: JSON has no sets
UNESCAPED_QUOTE = "pythonic.unescaped_quote"  # 'sed -n '1,5p' f': a quote that cannot end

# With ``pythonic.unescaped_quote``, a quote inside a '…'/"…" string ends it only when what
# follows can go on with the containers open around it (``_can_end``); anything else is text.
# The look-ahead is bounded, so each candidate quote costs O(1) and the reader stays linear.
_CAN_END_WINDOW = 64
_CLOSER = {"calls": "]", "args": ")", "list": "]", "tuple": ")", "key": "}", "value": "}",
           "set": "}"}  # what each kind of open container waits for
_AFTER_COMMA = {  # what may follow a comma in each kind of container (besides its closer)
    "calls": re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*[ \t\r\n]*\("),  # the next call
    "args": re.compile(r"[A-Za-z_]\w*[ \t\r\n]*=(?!=)"),  # the next keyword argument
    "value": re.compile(r"[rRuU]{0,2}['\"]"),  # the next key (keys are strings)
}
_ITEM = re.compile(r"[rRuU]{0,2}['\"]|[-+]?\.?\d|[\[({]|(?:True|False|None|true|false|null)\b")
# An operator then a literal (`'x' + 'y'`): an expression, which the reader then refuses.
_OPERATOR = re.compile(r"(?:\*\*|//|==|!=|<=|>=|[-+*/%@<>&|^])[ \t]*['\"\d(\[]")

_WS = re.compile(r"[ \t\r\n]*")
_NAME = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")
_NUMBER = re.compile(r"[-+]?(?:0[xX][0-9a-fA-F](?:_?[0-9a-fA-F])*"
                     r"|(?:\d(?:_?\d)*(?:\.(?:\d(?:_?\d)*)?)?|\.\d(?:_?\d)*)"
                     r"(?:[eE][-+]?\d(?:_?\d)*)?)")
_PREFIX = re.compile(r"[rRuUbBfF]{1,2}(?=['\"])")
_STRING_BODY = {  # unrolled loops: linear, no backtracking
    "'": re.compile(r"[^'\\]*(?:\\.[^'\\]*)*'", re.S),
    '"': re.compile(r'[^"\\]*(?:\\.[^"\\]*)*"', re.S),
    "'''": re.compile(r"[^'\\]*(?:(?:\\.|'(?!''))[^'\\]*)*'''", re.S),
    '"""': re.compile(r'[^"\\]*(?:(?:\\.|"(?!""))[^"\\]*)*"""', re.S),
}
_ESCAPE = re.compile(r"\\(\n|x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|[0-7]{1,3}|.)", re.S)
_SIMPLE = {"\n": "", "\\": "\\", "'": "'", '"': '"', "a": "\a", "b": "\b", "f": "\f",
           "n": "\n", "r": "\r", "t": "\t", "v": "\v"}
_CONSTANTS = {"True": True, "False": False, "None": None}
_JSON_CONSTANTS = {"true": True, "false": False, "null": None}
_OPEN = {"[": "]", "(": ")", "{": "}"}


class _Stop(Exception):  # noqa: N818 - control flow inside the reader
    def __init__(self, message: str, position: int, code: str = INVALID_JSON) -> None:
        super().__init__(message)
        self.message, self.position, self.code = message, position, code


def read(body: str, *, limits: Limits = DEFAULT_LIMITS) -> FormatRead:
    """Read a Python call list (or one call) into ``(name, arguments)`` pairs.

    When the text does not read as written and holds quotes, it is read once more with
    ``pythonic.unescaped_quote``: a quote inside a ``'…'``/``"…"`` string ends it only where
    Python's structure can go on after it (``sed -n '1,5p' f`` inside ``'…'`` is text)."""
    reader = _CallReader(body, limits.max_depth)
    try:
        calls = reader.read_all()
    except _Stop as stop:
        if "'" not in body and '"' not in body:
            return FormatRead(errors=[_error(body, stop)])
        reader = _CallReader(body, limits.max_depth, lenient_quotes=True)
        try:
            calls = reader.read_all()
        except _Stop:
            return FormatRead(errors=[_error(body, stop)])  # the first fault says more
        if not reader.inner_quotes:
            return FormatRead(errors=[_error(body, stop)])
        reader.repairs[UNESCAPED_QUOTE] = None
    if reader.completed:
        reader.repairs[CLOSE_BRACKETS] = None
    return FormatRead(calls=calls, repairs=list(reader.repairs))


def _error(body: str, stop: _Stop) -> CodecError:
    near = body[max(0, stop.position - 20):stop.position + 20]
    return CodecError(stop.code, f"pythonic call: {stop.message}; near {near!r}",
                      {"position": stop.position})


class _CallReader:
    """One pass over the text, one method per construct, in the manner of a JSON scanner."""

    def __init__(self, text: str, max_depth: int, *, lenient_quotes: bool = False) -> None:
        self.text, self.max_depth = text, max_depth
        self.lenient_quotes = lenient_quotes
        self.inner_quotes = False  # a quote was kept as text (lenient_quotes)
        self.pos = 0
        self.completed = False  # closers were missing at the end and were supplied
        self.repairs: dict[str, None] = {}
        self.frames: list[str] = []  # the containers open here, innermost last (_CLOSER's keys)

    # -- tokens ---------------------------------------------------------------------------

    def skip(self) -> str:
        """Skip blanks; the next character, or "" at the end."""
        self.pos = _WS.match(self.text, self.pos).end()
        return self.text[self.pos:self.pos + 1]

    def next_item(self, closer: str, what: str) -> bool:
        """After an item: True when another may follow (a comma was read), False when the
        container is closed — also when the text ends there: only closers are missing, and
        they are supplied (every enclosing container then ends the same way)."""
        ch = self.skip()
        if ch == ",":
            self.pos += 1
            return True
        if ch == closer:
            self.pos += 1
        elif not ch:
            self.completed = True
        else:
            raise _Stop(f"expected {closer!r} or ',' in {what}, found {ch!r}", self.pos)
        return False

    def closed(self, closer: str) -> bool:
        """Before an item: whether the container ends here (its closer, or the text's end)."""
        ch = self.skip()
        if ch == closer:
            self.pos += 1
            return True
        if not ch:
            self.completed = True
            return True
        return False

    # -- calls ----------------------------------------------------------------------------

    def read_all(self) -> list[tuple[str, Any]]:
        ch = self.skip()
        if not ch:
            raise _Stop("no call found", self.pos)
        calls: list[tuple[str, Any]] = []
        if ch == "[":
            self.pos += 1
            self.frames.append("calls")
            while not self.closed("]"):
                calls.append(self.read_call())
                if not self.next_item("]", "the call list"):
                    break
            self.frames.pop()
        else:  # calls without a list: one, or several on their own lines
            calls.append(self.read_call())
            while self.skip() and self.text[self.pos] != ";" and _NAME.match(self.text, self.pos):
                calls.append(self.read_call())
        if self.skip() == ";":
            self.pos += 1
        if self.skip():
            raise _Stop("text after the call list", self.pos)
        return calls

    def read_call(self) -> tuple[str, Any]:
        start = self.pos
        m = _NAME.match(self.text, self.pos)
        if m is None:
            raise _Stop(f"expected a function name, found {self.text[start:start + 1]!r}", start)
        self.pos = m.end()
        name = m.group()
        if self.skip() != "(":
            if self.pos >= len(self.text):
                raise _Stop(f"the text ends after the name {name!r}", start)
            raise _Stop(f"{name!r} is not followed by '('", self.pos)
        self.pos += 1
        arguments: dict[str, Any] = {}
        index = 0
        self.frames.append("args")
        while not self.closed(")"):
            index += 1
            key, value = self.read_keyword(name, index)
            if key in arguments:
                raise _Stop(f"{name!r}: the argument {key!r} is given twice", self.pos)
            arguments[key] = value
            if not self.next_item(")", f"the arguments of {name!r}"):
                break
        self.frames.pop()
        return name, arguments

    def read_keyword(self, name: str, index: int) -> tuple[str, Any]:
        start = self.pos
        if self.text.startswith("*", start):
            raise _Stop(f"{name!r}: argument {index} unpacks with '*'; write each argument "
                        "as key=value", start)
        m = _NAME.match(self.text, start)
        if m is not None and "." not in m.group():
            self.pos = m.end()
            if self.skip() == "=" and not self.text.startswith("==", self.pos):
                self.pos += 1
                return m.group(), self.read_value(1)
            self.pos = start
        raise _Stop(f"{name!r}: argument {index} is positional; name it "
                    f"({name}(key=…))", start)

    # -- values ---------------------------------------------------------------------------

    def read_value(self, depth: int) -> Any:
        """A literal value (never an expression)."""
        ch = self.skip()
        start = self.pos
        if not ch:
            raise _Stop("the text ends where a value should be", start)
        if ch in _OPEN:
            if depth > self.max_depth:
                raise _Stop(f"values nest more than {self.max_depth} levels deep", start,
                            NESTING_TOO_DEEP)
            self.pos += 1
            value = self.read_dict(depth) if ch == "{" else self.read_sequence(_OPEN[ch], depth)
        else:
            value = self.read_scalar(ch, start)
        self.check_operator(start)
        return value

    def check_operator(self, start: int) -> None:
        ch = self.skip()
        if ch and ch in "+-*/%@<>=!&|^~.([":
            raise _Stop("an expression, not a literal value; send the value itself "
                        "(expressions are never evaluated)", start)

    def read_scalar(self, ch: str, start: int) -> Any:
        prefix = _PREFIX.match(self.text, start)
        if ch in "'\"" or prefix is not None:
            return self.read_strings()
        m = _NUMBER.match(self.text, start)
        if m is not None and m.group() not in ("+", "-"):
            self.pos = m.end()
            if self.pos >= len(self.text):
                raise _Stop("the text ends inside a number", start)
            return self.number(m.group(), start)
        m = _NAME.match(self.text, start)
        if m is not None:
            self.pos = m.end()
            if m.group() in _CONSTANTS and self.pos < len(self.text):
                return _CONSTANTS[m.group()]
            if m.group() in _JSON_CONSTANTS and self.pos < len(self.text):
                self.repairs[JSON_LITERAL] = None
                return _JSON_CONSTANTS[m.group()]
            if self.pos >= len(self.text):
                raise _Stop("the text ends inside a name", start)
            raise _Stop(f"{m.group()!r} is a name, not a literal value (names are never "
                        "looked up)", start)
        raise _Stop(f"expected a value, found {ch!r}", start)

    def number(self, literal: str, start: int) -> Any:
        text = literal.replace("_", "")
        digits = text.lstrip("+-")
        if digits[:2] in ("0x", "0X"):
            text = text[:len(text) - len(digits)] + str(int(digits, 16))
        repairs: dict[str, None] = {}
        value = to_number(text, any(c in text for c in ".eE"), repairs)
        if repairs:  # beyond a float's range
            raise _Stop(f"the number {literal} is too large to send", start)
        return value

    def read_strings(self) -> str:
        """One string literal, or several written next to each other (joined, as Python does)."""
        parts = [self.read_string()]
        while self.skip() and (self.text[self.pos] in "'\""
                               or _PREFIX.match(self.text, self.pos) is not None):
            parts.append(self.read_string())
        return "".join(parts)

    def read_string(self) -> str:
        start = self.pos
        prefix = _PREFIX.match(self.text, start)
        flags = prefix.group().lower() if prefix else ""
        if "f" in flags or "b" in flags:
            raise _Stop("f-strings and bytes are not literal text values", start)
        self.pos = prefix.end() if prefix else start
        quote = self.text[self.pos:self.pos + 3]
        if quote not in ("'''", '"""'):
            quote = quote[:1]
        self.pos += len(quote)
        m = self.string_end(quote, start)
        raw = self.text[self.pos:m.end() - len(quote)]
        if len(quote) == 1 and "\n" in raw:
            self.repairs[RAW_NEWLINE] = None
        self.pos = m.end()
        return raw if "r" in flags else _unescape(raw)

    def string_end(self, quote: str, start: int) -> re.Match[str]:
        """The match of a string's body up to its closing quote (with ``lenient_quotes``,
        past quotes that Python's structure cannot follow)."""
        at = self.pos
        while True:
            m = _STRING_BODY[quote].match(self.text, at)
            if m is None:
                raise _Stop("a string is never closed (the text may have been cut off)", start)
            if not self.lenient_quotes or len(quote) == 3 or _can_end(
                    self.text, m.end(), self.frames):
                return m  # its end is the string's end; the text before is the body
            self.inner_quotes = True
            at = m.end()

    def read_sequence(self, closer: str, depth: int) -> list[Any]:
        items: list[Any] = []
        self.frames.append("list" if closer == "]" else "tuple")
        while not self.closed(closer):
            items.append(self.read_value(depth + 1))
            if not self.next_item(closer, "a list"):
                break
        self.frames.pop()
        return items

    def read_dict(self, depth: int) -> dict[str, Any] | list[Any]:
        result: dict[str, Any] = {}
        self.frames.append("key")
        while not self.closed("}"):
            start = self.pos
            self.frames[-1] = "key"
            key = self.read_value(depth + 1)
            if not result and self.skip() in (",", "}"):  # {'a', 'b'}: a set
                self.frames.pop()
                return self.read_set(key, depth)
            if not isinstance(key, str):
                raise _Stop("a dict key must be a string (JSON has no other keys)", start)
            if self.skip() != ":":
                where = "the text ends" if self.pos >= len(self.text) else "expected ':'"
                raise _Stop(f"{where} after the key {key!r}", self.pos)
            self.pos += 1
            self.frames[-1] = "value"
            result[key] = self.read_value(depth + 1)
            if not self.next_item("}", "a dict"):
                break
        self.frames.pop()
        return result


    def read_set(self, first: Any, depth: int) -> list[Any]:
        self.repairs[SET_AS_LIST] = None
        items = [first]
        self.frames.append("set")
        while self.next_item("}", "a set") and not self.closed("}"):
            items.append(self.read_value(depth + 1))
        self.frames.pop()
        return items


def _can_end(text: str, at: int, frames: list[str]) -> bool:
    """Whether a quote just before ``at`` can end its string: what follows (within
    ``_CAN_END_WINDOW`` characters) must go on with the containers open around it. Each closer
    must be the innermost open container's, and what follows it must suit the one around that;
    otherwise the quote was text (``mul_symbol='\\,'))"')]`` ends only at the last quote)."""
    end = min(len(text), at + _CAN_END_WINDOW)
    level, pos = len(frames), at
    while True:
        pos = _WS.match(text, pos, end).end()
        if pos == len(text):
            return True  # cut after a complete value: the reader completes or refuses it
        if pos == end:
            return False  # nothing shown within the window: keep the quote as text
        ch = text[pos]
        if level == 0:  # every container closed: the end, ';', or the next bare call
            return ch == ";" or (frames[:1] == ["args"]
                                 and _AFTER_COMMA["calls"].match(text, pos, end) is not None)
        kind = frames[level - 1]
        if ch == _CLOSER[kind]:
            level, pos = level - 1, pos + 1
            continue
        if ch == ",":
            pos = _WS.match(text, pos + 1, end).end()
            if pos == len(text) or text.startswith(_CLOSER[kind], pos):
                continue  # the end, or a trailing comma before the closer
            return _AFTER_COMMA.get(kind, _ITEM).match(text, pos, end) is not None
        if level < len(frames):
            return False  # after a closer: only a closer, ',' or the end
        if ch == ":":
            return kind == "key"
        return _OPERATOR.match(text, pos, end) is not None


def _unescape(raw: str) -> str:
    if "\\" not in raw:
        return raw
    return _ESCAPE.sub(_escape, raw)


def _escape(m: re.Match[str]) -> str:
    code = m.group(1)
    if code in _SIMPLE:
        return _SIMPLE[code]
    if code[0] in "xuU" and len(code) > 1:
        return _char(int(code[1:], 16))
    if code[0] in "01234567":
        return _char(int(code, 8))
    # Python keeps an unknown escape as written; a cut \u, \x or \U (which Python refuses)
    # is kept so too: no character is invented, none dropped
    return "\\" + code


def _char(point: int) -> str:
    return chr(point) if point <= 0x10FFFF else "\ufffd"
