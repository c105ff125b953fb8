"""How a tool's own tag ends: ``<NAME …>…</NAME>``, ``<NAME/>``, a bare call (the tool's name
alone on its line, then its parameters' elements) and ``<tool>…</tool>``.

A tool tag ends at its matching close tag: a parameter named like the tool
(``<s><s>10</s></s>``) nests; ``<NAME/>`` is a whole call. A bare call ends after the last
parameter element that no such element (and no closer) follows.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any

import regex  # partial matching: a tag cut at the end of a chunk
from toolcodec.formats.open_block import OpenBlock, find_closer
from toolcodec.scanning.envelopes import Block
from toolcodec.scanning.opener_scan import SPACE

BODY_WS = 64  # blanks allowed between a bare call's elements
_ELEMENT_OPEN = regex.compile(r"<([A-Za-z_][\w.\-]{0,63})[ \t]{0,8}(/?)>")
_BLANKS = re.compile(r"[ \t\r\n]*")


@lru_cache(maxsize=256)
def tag_pattern(name: str) -> Any:
    """Opening, closing and self-closing tags of one tool's name."""
    return regex.compile(rf"<(?P<close>/[ \t]*)?{regex.escape(name)}(?=[\s>/])[^<>]{{0,64}}>")


@lru_cache(maxsize=256)
def _tag_counters(name: str) -> tuple[Any, Any, Any]:
    """``tag_pattern`` split in three: opening tags, the self-closing ones among them, and
    closing tags (no match of one overlaps a match of another). ``re`` patterns, which cost
    a third of ``regex`` ones to compile: a whole text needs no partial match."""
    name = re.escape(name)
    return (re.compile(rf"<{name}(?=[{SPACE}>/])[^<>]{{0,64}}>"),
            re.compile(rf"<{name}(?=[{SPACE}>/])[^<>]{{0,63}}/>"),
            re.compile(rf"</[ \t]*{name}(?=[{SPACE}>/])[^<>]{{0,64}}>"))


def tool_tag_end(text: str, cur: OpenBlock, final: bool,
                 codec: Any = None) -> tuple[int, int, bool] | None:
    """The end rule of ``<NAME …>…</NAME>``: the matching close tag."""
    if cur.scan == cur.body_start:  # the opening tag itself
        opening = (_tag_counters(cur.tag)[0] if final else tag_pattern(cur.tag)).match(
            text, cur.start)
        if opening.group().endswith("/>"):
            return opening.end(), opening.end(), True
        cur.scan, cur.depth = opening.end(), 1
    if final:
        return _tool_tag_end_final(text, cur)
    pattern = tag_pattern(cur.tag)
    while True:
        m = pattern.search(text, cur.scan, partial=True)
        if m is None or m.partial:
            cur.scan = len(text) if m is None else m.start()
            return None
        cur.scan = m.end()
        if m.group("close"):
            cur.depth -= 1
            if cur.depth == 0:
                return m.end(), m.end(), True
        elif not m.group().endswith("/>"):
            cur.depth += 1


def _tool_tag_end_final(text: str, cur: OpenBlock) -> tuple[int, int, bool]:
    """``tool_tag_end`` on the whole text: the opening tags before each close tag are counted
    in C (a run of ``<NAME>`` cost a Python step each: 0.4 µs per character)."""
    opens, self_closing, closes = _tag_counters(cur.tag)
    while True:
        close = closes.search(text, cur.scan)
        end = len(text) if close is None else close.start()
        cur.depth += len(opens.findall(text, cur.scan, end)) - len(
            self_closing.findall(text, cur.scan, end))
        if close is None:
            cur.scan = len(text)
            return len(text), len(text), False
        cur.scan = close.end()
        cur.depth -= 1
        if cur.depth == 0:
            return close.end(), close.end(), True


def bare_end(text: str, cur: OpenBlock, final: bool,
             codec: Any) -> tuple[int, int, bool] | None:
    """The end rule of a bare call: its parameters' elements, separated by blanks and maybe
    closed by ``</NAME>`` (or ``/>``). An element named like another tool, and not a
    parameter of this one, starts that tool's call instead."""
    while True:
        if cur.element:
            if not _element_end(text, cur, final):
                return (len(text), len(text), False) if final else None
            continue
        at = _BLANKS.match(text, cur.scan).end()
        if at == len(text) and not final and at - cur.scan <= BODY_WS:
            return None
        closer = f"</{cur.tag}>"
        for end in (closer, "/>"):  # </NAME>, or the "/>" of a tag left open: <NAME …/>
            if text.startswith(end, at):
                return at + len(end), cur.scan, True
            if not final and at - cur.scan <= BODY_WS and end.startswith(text[at:at + 80]):
                return None
        m = _ELEMENT_OPEN.match(text, at, partial=not final)
        if m is not None and m.partial and at - cur.scan <= BODY_WS:
            return None
        if (m is None or m.partial or at - cur.scan > BODY_WS
                or not _is_parameter(codec, cur.tag, m.group(1))):
            return cur.scan, cur.scan, True
        cur.scan = m.end()
        if not m.group(2):
            cur.element, cur.depth = m.group(1), 1


def bare_cut(text: str, cur: OpenBlock, block: Block, codec: Any) -> bool:
    """Whether the end of the text cut a bare call: only blanks follow its last element, so
    the next could have been coming."""
    if block.end == block.body_end:
        rest = text[block.end:]
        return len(rest) <= BODY_WS and not rest.strip()
    return not block.closed and block.end == len(text)


def bare_quiet(cur: OpenBlock, chunk: str) -> bool:
    """Inside an element, only a ``>`` can end it; between elements anything may."""
    return bool(cur.element) and ">" not in chunk


def _element_end(text: str, cur: OpenBlock, final: bool) -> bool:
    """Read up to the close tag of the element ``cur.element`` (False: not there yet)."""
    pattern = tag_pattern(cur.element)
    while True:
        m = pattern.search(text, cur.scan, partial=not final)
        if m is None or m.partial:
            if not final:
                cur.scan = len(text) if m is None else m.start()
            return False
        cur.scan = m.end()
        if m.group("close"):
            cur.depth -= 1
            if cur.depth == 0:
                cur.element = ""
                return True
        elif not m.group().endswith("/>"):
            cur.depth += 1


def _is_parameter(codec: Any, tool: str, tag: str) -> bool:
    """Whether ``<tag>`` goes on a bare call of ``tool``: one of its parameters, or any tag
    that is not another tool's name."""
    return codec.registry.get(tag) is None or tag in codec._openers.parameters.get(tool, ())


def element_end(text: str, cur: OpenBlock, final: bool,
                codec: Any = None) -> tuple[int, int, bool] | None:
    """The end rule of ``<tool>…</tool>``."""
    return find_closer(text, cur, final, "</tool>")
