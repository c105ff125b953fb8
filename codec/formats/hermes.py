"""How a ``<tool_call>`` block ends (Hermes JSON, Qwen3 XML, GLM and bare calls inside it).

A ``<tool_call>`` block ends at ``</tool_call>`` (also written ``</ tool_call >``) or at the next
``<tool_call>``. A ``<tool_call>`` or ``</tool_call>`` inside a GLM ``<arg_value>`` or a Qwen
``<parameter=…>`` value is the value's text (the value's own close tag decides; a value never
closed falls back to the first tag), and one inside a JSON string is the string's text when the
body's quotes are unbalanced before it. In a JSON body, value tags are string text.
"""

from __future__ import annotations

import re
from typing import Any

import regex  # partial matching: a tag cut at the end of a chunk
from toolcodec.formats.open_block import OpenBlock

# `</ tool_call >` with blanks is still the closer (the seed's normalizeCloseTags read it).
_EDGE = regex.compile(r"</[ \t]{0,8}tool_call[ \t]{0,8}>|<tool_call>")
_EDGE_MAX = 28  # the longest text it matches
# The value tags of GLM (<arg_value>) and Qwen XML (<parameter=…>): a <tool_call> or
# </tool_call> between them is the value's text.
_VALUE_OPEN = re.compile(r"<arg_value>|<parameter=")
_VALUE_CLOSE = re.compile(r"</arg_value>|</parameter>")
_STRING_OR_TAG = re.compile(r'["<]')
_JSON_STRING = re.compile(r'"(?:[^"\\]|\\.)*"')
_JSON_STRING_BODY = re.compile(r'(?:[^"\\]|\\.)*')  # resumable: stops at '"', a cut escape
# Escapes read left to right: a quote is escaped when an escape sequence takes it.
_ESCAPE = re.compile(r"\\.", re.DOTALL)


def tool_call_end(text: str, cur: OpenBlock, final: bool,
                  codec: Any = None) -> tuple[int, int, bool] | None:
    """The end rule of a ``<tool_call>`` block (``toolcodec.formats.open_block.EndRule``)."""
    while not cur.json_aware:
        m = _EDGE.search(text, cur.scan)
        if m is None:
            if final:
                return len(text), len(text), False
            # Back over a tag the chunk may have cut, never over one already judged.
            cur.scan = max(cur.body_start, cur.counted, len(text) - _EDGE_MAX + 1)
            return None
        counted = max(cur.body_start, cur.counted)  # value tags counted once each
        if not _json_head(text, cur.body_start, m.start()):  # in JSON they are string text
            cur.values_open += (len(_VALUE_OPEN.findall(text, counted, m.start()))
                                - len(_VALUE_CLOSE.findall(text, counted, m.start())))
        cur.counted = m.start()
        if cur.values_open > 0:  # the tag is inside a GLM or Qwen value: text
            close = _VALUE_CLOSE.search(text, max(m.end(), cur.vscan))
            if close is not None:
                cur.scan = cur.counted = close.end()
                cur.values_open -= 1
                continue
            if not final:  # the value's end decides; until then the tag may be text
                cur.scan, cur.vscan = m.start(), max(m.end(), len(text) - 11)
                return None
        if ends_json_body(text[cur.body_start:m.start()]):
            closed = m.group().startswith("</")
            return (m.end() if closed else m.start()), m.start(), closed
        cur.json_aware, cur.scan = True, cur.body_start  # a closer inside a JSON string
    while True:  # skip JSON strings: a closer inside one does not count
        m = _STRING_OR_TAG.search(text, cur.scan)
        if m is None:
            if final:
                return len(text), len(text), False
            cur.scan = len(text)
            return None
        at = m.start()
        if text[at] == '"':
            if not final:  # an open string is read on from where it stopped, not again
                end = _JSON_STRING_BODY.match(text, max(at + 1, cur.sscan)).end()
                if end == len(text) or text[end] != '"':
                    cur.scan, cur.sscan = at, end
                    return None
            string = _JSON_STRING.match(text, at)
            if string is None and not final:  # not closed yet: wait for more
                cur.scan = at
                return None
            cur.scan = string.end() if string is not None else at + 1
            continue
        tag = _EDGE.match(text, at, partial=not final)
        if tag is not None and tag.partial:
            cur.scan = at
            return None
        if tag is not None:
            closed = tag.group().startswith("</")
            return (tag.end() if closed else at), at, closed
        cur.scan = at + 1


def _json_head(text: str, start: int, end: int) -> bool:
    """Whether the body from *start* begins as JSON (its opener allows at most 64 blanks)."""
    return text[start:min(end, start + 80)].lstrip()[:1] in ("{", "[")


def ends_json_body(body: str) -> bool:
    """Whether a closer right after *body* ends the block: not when *body* is JSON whose
    quotes are unbalanced (the closer is then inside a string)."""
    return not (body.lstrip()[:1] in ("{", "[") and _unescaped_quotes(body) % 2)


def _unescaped_quotes(body: str) -> int:
    """How many quotes of *body* no backslash escapes (a quote after an even run of them)."""
    quotes = body.count('"')
    if quotes and "\\" in body:
        quotes -= _ESCAPE.findall(body).count('\\"')
    return quotes
