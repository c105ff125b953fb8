"""The kinds of block the engine reads, each with its rules: how it ends, which chunks
certainly leave it open, and whether the end of the text cut it.

A block kind is what an opener starts: ``tool_call`` (``<tool_call>``: Hermes JSON, Qwen3 XML,
GLM, bare calls), ``function`` (a bare Qwen3-Coder ``<function=…>``), ``tool_tag`` (a tool's
own tag), ``bare_tag`` (a tool's name alone on its line, then its parameters), ``tool_element``
(``<tool>``) and ``marker`` (every family of ``toolcodec.formats.table``, registered ones
included: their ``MarkerFormat`` says how they end). The engine looks the rules up here and
knows no kind itself.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from toolcodec.formats import glm, hermes, marker_end, qwen_xml, tool_tag, yamlbody
from toolcodec.formats.open_block import EndRule, OpenBlock, quiet_until_gt
from toolcodec.scanning.envelopes import Block


def _never_quiet(cur: OpenBlock, chunk: str) -> bool:
    return False


def cut_if_unclosed(text: str, cur: OpenBlock, block: Block, codec: Any) -> bool:
    """The end of the text came before the block's closer."""
    return not block.closed and block.end == len(text)


@dataclass(frozen=True, slots=True)
class BlockKind:
    """The rules of one kind of block.

    ``end`` finds where it ends (``toolcodec.formats.open_block.EndRule``); ``quiet(cur,
    chunk)`` is True when the chunk certainly leaves it open (then nothing is scanned);
    ``cut(text, cur, block, codec)`` says whether the end of the text cut it (with
    ``finish_reason="length"`` a cut block is no call); ``calls_end(text, block, codec)``,
    for a cut block, is where its complete calls end (None: none); with
    ``empty_is_framing`` a closed block with a blank body is framing, not a failed call.

    What its opener needs (a tag-like opener, ``toolcodec.scanning.openers``): with ``checks_body``,
    a body must follow (``<``, ``{``, ``[``; a word when ``word_head`` matches it; a code fence
    around JSON with ``fenced_json``; ``<NAME/>`` is whole with ``self_closing``, whose opener's
    group is the block's tag). ``body_at_opener``: the opener is part of the body.
    ``past_body_repair``: the repair of a call whose block goes on past its body."""

    end: EndRule
    quiet: Callable[[OpenBlock, str], bool] = quiet_until_gt
    cut: Callable[[str, OpenBlock, Block, Any], bool] = cut_if_unclosed
    calls_end: Callable[[str, Block, Any], int | None] | None = None
    empty_is_framing: bool = False
    checks_body: bool = True
    word_head: re.Pattern[str] | None = None
    fenced_json: bool = False
    self_closing: bool = False
    body_at_opener: bool = False
    past_body_repair: str = ""


# A <tool_call> body that starts with a word: a GLM name, or a Qwen `function=NAME>` that lost
# its "<" (xml.missing_lt).
_TOOL_CALL_WORD = re.compile(glm.TEXT_HEAD.pattern
                             + r"|[ \t\r\n]*(?:function|call|invoke|tool)=[\w.\-]+>")

BLOCK_KINDS: dict[str, BlockKind] = {
    "tool_call": BlockKind(hermes.tool_call_end, word_head=_TOOL_CALL_WORD, fenced_json=True),
    "function": BlockKind(qwen_xml.function_end, checks_body=False, body_at_opener=True,
                          past_body_repair="xml.stray_close_dropped"),
    "tool_element": BlockKind(tool_tag.element_end),
    "tool_tag": BlockKind(tool_tag.tool_tag_end, word_head=yamlbody.TEXT_HEAD,
                          self_closing=True, body_at_opener=True),
    "bare_tag": BlockKind(tool_tag.bare_end, tool_tag.bare_quiet, tool_tag.bare_cut),
    "marker": BlockKind(marker_end.marker_end, _never_quiet, marker_end.marker_cut,
                        marker_end.calls_end, empty_is_framing=True),
}
# The block kind an opener group of ``toolcodec.scanning.openers`` starts (``fixed`` tags by name).
OPENER_KINDS = {"function": "function", "tag": "tool_tag"}
