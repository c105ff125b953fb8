"""YAML in a tool's tag: ``<get_weather>\\ncity: Paris\\nunit: celsius\\n</get_weather>``.

Some middleware asks models to write a call's arguments as a YAML mapping inside the tool's
tag. This reads the part of YAML models use, with no YAML library: ``key: value`` lines (the
whole mapping may be indented), ``#`` comments, plain scalars, ``"…"`` and ``'…'`` scalars
with their escapes, block scalars (``|``, ``>``, with ``-``/``+`` chomping) and, under a key
with no value, a ``- item`` list or a nested mapping. Scalars stay text (the codec converts
them to the schema's types, as for XML parameters). Anything else — a top-level list, a line
that is not ``key: value``, an indentation that does not fit, flow collections — is an
``invalid_xml`` error rather than a guess.
"""

from __future__ import annotations

import re
from typing import Any

from toolcodec.formats import FormatRead
from toolcodec.results.errors import INVALID_XML, CodecError

_KEY_LINE = re.compile(r"([A-Za-z_][\w.\-]*)[ \t]*:(?:[ \t]+(.*))?$")
_ITEM_LINE = re.compile(r"-(?:[ \t]+(.*))?$")
_FIRST = re.compile(r"[ \t\r\n]*[A-Za-z_][\w.\-]{0,127}[ \t]*:(?:[ \t]|\r?\n|$)")
# What the engine sees after a tool's opening tag before the block has ended.
TEXT_HEAD = re.compile(r"[ \t\r\n]*[A-Za-z_][\w.\-]{0,127}[ \t]*:(?:[ \t]|\r?\n)")
_COMMENT = re.compile(r"[ \t]+#.*$")
_BLOCK = re.compile(r"([|>])([+-]?)[ \t]*(?:#.*)?$")
_DOUBLE_ESCAPE = re.compile(r'\\(x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|.)')
_SIMPLE = {"n": "\n", "t": "\t", "r": "\r", "0": "\0", '"': '"', "\\": "\\", "/": "/",
           " ": " ", "b": "\b", "f": "\f", "e": "\x1b", "a": "\a", "v": "\v"}
MAX_NESTING = 32


class _Bad(Exception):  # noqa: N818 - control flow inside the reader
    def __init__(self, message: str, line: int) -> None:
        super().__init__(message)
        self.message, self.line = message, line


def looks_like_mapping(body: str) -> bool:
    """Whether a tag's body starts like a YAML mapping (its first line is ``key: …``)."""
    return _FIRST.match(body[:256]) is not None


def read(body: str, *, name: str, closed: bool = True) -> FormatRead:
    """Read the mapping in a tool tag's body as the arguments of one call of ``name``."""
    lines = body.split("\n")
    starts, at = [], 0
    for line in lines:
        starts.append(at)
        at += len(line) + 1
    lines = [line.rstrip("\r") for line in lines]
    try:
        arguments = _Mapping(lines).read_mapping(0, _indent_of_first(lines), 0)
    except _Bad as bad:
        where = starts[min(bad.line, len(starts) - 1)]
        return FormatRead(errors=[CodecError(
            INVALID_XML, f"YAML arguments of {name!r}: {bad.message} (line {bad.line + 1} of "
            "the body)", {"position": where})])
    return FormatRead(calls=[(name, arguments)], text_values=True)


def _indent_of_first(lines: list[str]) -> int:
    for line in lines:
        if _content(line):
            return len(line) - len(line.lstrip(" "))
    return 0


def _content(line: str) -> bool:
    stripped = line.strip()
    return bool(stripped) and not stripped.startswith("#")


class _Mapping:
    """Reads lines top-down; each method consumes the lines of one construct."""

    def __init__(self, lines: list[str]) -> None:
        self.lines = lines
        self.i = 0

    def next_content(self) -> int | None:
        while self.i < len(self.lines) and not _content(self.lines[self.i]):
            self.i += 1
        return self.i if self.i < len(self.lines) else None

    def indent(self, i: int) -> int:
        line = self.lines[i]
        if line[:len(line) - len(line.lstrip(" \t"))].count("\t"):
            raise _Bad("a tab in the indentation", i)
        return len(line) - len(line.lstrip(" "))

    def read_mapping(self, first: int, indent: int, depth: int) -> dict[str, Any]:
        if depth > MAX_NESTING:
            raise _Bad(f"nested more than {MAX_NESTING} levels", first)
        result: dict[str, Any] = {}
        while (i := self.next_content()) is not None:
            here = self.indent(i)
            if here < indent:
                break
            if here > indent:
                raise _Bad("a line indented more than the keys before it", i)
            m = _KEY_LINE.match(self.lines[i].strip())
            if m is None:
                raise _Bad("expected `key: value`", i)
            key = m.group(1)
            if key in result:
                raise _Bad(f"the key {key!r} is given twice", i)
            self.i = i + 1
            result[key] = self.read_value(m.group(2) or "", i, indent, depth)
        return result

    def read_value(self, rest: str, i: int, indent: int, depth: int) -> Any:
        block = _BLOCK.match(rest)
        if block is not None:
            return self.read_block(block.group(1), block.group(2), indent, i)
        text = _COMMENT.sub("", rest).strip() if not rest.startswith(("'", '"')) else rest.strip()
        if text:
            return _scalar(text, i)
        nxt = self.next_content()
        if nxt is None or self.indent(nxt) < indent or (
                self.indent(nxt) == indent and not self.lines[nxt].lstrip().startswith("-")):
            return ""  # `key:` with nothing under it: an empty value
        child = self.indent(nxt)
        if self.lines[nxt].lstrip().startswith("-"):
            return self.read_list(nxt, child, depth + 1)
        return self.read_mapping(nxt, child, depth + 1)

    def read_list(self, first: int, indent: int, depth: int) -> list[Any]:
        if depth > MAX_NESTING:
            raise _Bad(f"nested more than {MAX_NESTING} levels", first)
        items: list[Any] = []
        while (i := self.next_content()) is not None and self.indent(i) == indent:
            m = _ITEM_LINE.match(self.lines[i].strip())
            if m is None:
                break
            self.i = i + 1
            item = _COMMENT.sub("", m.group(1) or "").strip()
            if not item:
                raise _Bad("an empty list item", i)
            if _KEY_LINE.match(item):
                raise _Bad("a mapping inside a list item is not supported", i)
            items.append(_scalar(item, i))
        return items

    def read_block(self, style: str, chomp: str, indent: int, at: int) -> str:
        body: list[str] = []
        block_indent = None
        while self.i < len(self.lines):
            line = self.lines[self.i]
            if line.strip():
                here = len(line) - len(line.lstrip(" "))
                if here <= indent:
                    break
                block_indent = here if block_indent is None else block_indent
                if here < block_indent:
                    raise _Bad("a block scalar line indented less than its first line", self.i)
                body.append(line[block_indent:])
            else:
                body.append("")
            self.i += 1
        while body and not body[-1] and chomp != "+":
            body.pop()
        if style == "|":
            text = "\n".join(body)
        else:
            text = _fold(body)
        return text if chomp == "-" or not text else text + "\n"


def _fold(lines: list[str]) -> str:
    out, pending_break = "", False
    for line in lines:
        if not line:
            out += "\n"
            pending_break = False
            continue
        if out and not out.endswith("\n"):
            out += " "
        elif pending_break:
            out += " "
        out += line
        pending_break = True
    return out


def _scalar(text: str, line: int) -> str:
    if text[0] == '"':
        if len(text) < 2 or not text.endswith('"') or text.endswith('\\"') and not \
                text.endswith('\\\\"'):
            raise _Bad("a double-quoted value is not closed on its line", line)
        return _DOUBLE_ESCAPE.sub(_double_escape, text[1:-1])
    if text[0] == "'":
        if len(text) < 2 or not text.endswith("'"):
            raise _Bad("a single-quoted value is not closed on its line", line)
        return text[1:-1].replace("''", "'")
    if text[0] in "[{&*!|>%@`":
        raise _Bad(f"a value starting with {text[0]!r} (flow collections, anchors, tags) "
                   "is not supported", line)
    return text


def _double_escape(m: re.Match[str]) -> str:
    code = m.group(1)
    if code in _SIMPLE:
        return _SIMPLE[code]
    if code[0] in "xuU" and len(code) > 1:
        point = int(code[1:], 16)
        return chr(point) if point <= 0x10FFFF else "\ufffd"
    raise _Bad(f"an unknown escape \\{code} in a double-quoted value", 0)
