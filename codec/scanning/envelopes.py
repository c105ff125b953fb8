"""Find ``<think>`` blocks and tool-call envelopes in model text, with their spans.

The scanner is one compiled regex over the text plus a ``str.find`` per block for the closing
tag; it does not parse what is inside an envelope. Blocks never overlap: once an envelope is
found, scanning resumes after its end, so a tool-name tag inside a ``<tool_call>`` body is part
of that body, not a second envelope.

Envelope formats (``Block.fmt``):

- ``"tool_call"``: ``<tool_call>…</tool_call>`` (body: Hermes JSON or a ``<function=…>`` call)
- ``"function"``: a bare ``<function=NAME>…</function>`` with no wrapper
- ``"tool_tag"``: ``<NAME>…</NAME>`` where NAME is a registered tool (``Block.tag``)
- ``"tool_element"``: ``<tool>…</tool>``
- ``"think"``: reasoning, ``<think>…</think>``; also a leading ``…</think>`` with no opener

A missing close tag makes the block run to the end of the text, except that an unclosed
``<tool_call>`` stops where the next ``<tool_call>`` opens. Such blocks have ``closed=False``.
An envelope that is never closed counts only when what follows it can be a body (a tag,
``{`` or ``[``, or the end of the text): a model that writes "use <get_weather> to check" or
"I will emit a <tool_call> block" is naming the syntax, not calling a tool.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass

_FIXED = r"<(?P<fixed>think|tool_call|tool)\s*>|<(?P<function>function=)|(?P<orphan></think\s*>)"
_CLOSERS = {"think": "</think>", "tool_call": "</tool_call>", "tool": "</tool>"}
_JSON_TOKENS = re.compile(r'"(?:[^"\\]|\\.)*"|</?tool_call>')
# The fixed opener tags and the block format each starts (shared with the engine,
# ``toolcodec.decoding.engine``).
FORMAT_OF_TAG = {"think": "think", "tool_call": "tool_call", "tool": "tool_element"}
# What an unclosed envelope's body must start with to be a cut-off call: a parameter tag or
# JSON, or nothing at all (the output stopped right after the opener).
_BODY_NEXT = re.compile(r"\s*(?:[<{\[]|\Z)")


@dataclass(slots=True)
class Block:
    """One recognised block: ``[start, end)`` in the text, ``[body_start, body_end)`` inside."""

    fmt: str
    start: int
    end: int
    body_start: int
    body_end: int
    closed: bool
    tag: str | None = None

    @property
    def is_envelope(self) -> bool:
        return self.fmt != "think"


def compile_openers(tool_names: Iterable[str]) -> re.Pattern[str]:
    """Compile the opener regex for a tool set (tool names become ``<NAME>`` tags)."""
    names = sorted({n for n in tool_names if n}, key=len, reverse=True)
    pattern = _FIXED
    if names:
        alt = "|".join(re.escape(n) for n in names)
        # A tool-name tag may carry attributes (``<get_weather id="1">``) but must end the name.
        pattern += rf"|<(?P<tag>{alt})(?=[\s>/])[^<>]*>"
    return re.compile(pattern)


def scan(text: str, openers: re.Pattern[str], max_envelopes: int | None = None) -> list[Block]:
    """Return the blocks of ``text`` in order, non-overlapping.

    With ``max_envelopes``, scanning stops after one envelope more than that, so a caller
    can tell that the limit was passed without paying for the rest of the text.
    """
    blocks: list[Block] = []
    if "<" not in text:
        return blocks
    pos = envelopes = 0
    while max_envelopes is None or envelopes <= max_envelopes:
        m = openers.search(text, pos)
        if m is None:
            return blocks
        if m.group("orphan"):
            # Some chat templates put ``<think>`` in the prompt, so the output starts inside
            # the reasoning and only closes it. Honour that only before any other block.
            if not blocks:
                blocks.append(Block("think", 0, m.end(), 0, m.start(), True))
            pos = m.end()
            continue
        block = _block_at(text, m, openers)
        if block is None:
            pos = m.end()
            continue
        blocks.append(block)
        envelopes += block.is_envelope
        pos = max(block.end, m.end())
    return blocks


def _block_at(text: str, m: re.Match[str], openers: re.Pattern[str]) -> Block | None:
    fixed = m.group("fixed")
    if fixed == "tool_call":
        block = _tool_call_block(text, m.start(), m.end())
    elif fixed:
        block = _closed_block(text, FORMAT_OF_TAG[fixed], m.start(), m.end(), _CLOSERS[fixed],
                              len(text))
    elif m.group("function"):
        return _closed_block(text, "function", m.start(), m.start(), "</function>", len(text))
    else:
        tag = m.group("tag")
        # The tool-tag body is handed whole (tags included) to the XML decoder.
        block = _closed_block(text, "tool_tag", m.start(), m.start(), f"</{tag}>", len(text))
        block.tag = tag
    if block.is_envelope and not block.closed and not _BODY_NEXT.match(text, m.end()):
        return None  # "use <get_weather> to…", "a <tool_call> block": named, not called
    return block


def _tool_call_block(text: str, start: int, body_start: int) -> Block:
    block = _closed_block(text, "tool_call", start, body_start, "</tool_call>",
                          _next_opener(text, body_start))
    body = text[body_start:block.body_end]
    # A JSON body whose string values contain "<tool_call>" or "</tool_call>" would be cut
    # there; an odd number of quotes before the cut says so. Only then re-scan, skipping
    # over strings (the common case stays two str.find calls).
    if body.lstrip()[:1] in ("{", "[") and (body.count('"') - body.count('\\"')) % 2:
        return _json_aware_block(text, start, body_start)
    return block


def _json_aware_block(text: str, start: int, body_start: int) -> Block:
    for m in _JSON_TOKENS.finditer(text, body_start):
        token = m.group()
        if token == "</tool_call>":
            return Block("tool_call", start, m.end(), body_start, m.start(), True)
        if token == "<tool_call>":
            return Block("tool_call", start, m.start(), body_start, m.start(), False)
    return Block("tool_call", start, len(text), body_start, len(text), False)


def _next_opener(text: str, pos: int) -> int:
    nxt = text.find("<tool_call>", pos)
    return len(text) if nxt < 0 else nxt


def _closed_block(text: str, fmt: str, start: int, body_start: int, closer: str,
                  limit: int) -> Block:
    close = text.find(closer, body_start, limit)
    if close >= 0:
        end = close + len(closer)
        body_end = end if body_start == start else close
        return Block(fmt, start, end, body_start, body_end, True)
    return Block(fmt, start, limit, body_start, limit, False)


def trailing_partial_close(body: str, closer: str) -> int:
    """Length of a truncated ``closer`` at the very end of ``body`` (``"</tool"``), else 0."""
    for n in range(len(closer) - 1, 1, -1):
        if body.endswith(closer[:n]):
            return n
    return 0
