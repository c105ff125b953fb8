"""How a bare Qwen3-Coder ``<function=NAME>…</function>`` block ends (no ``<tool_call>``).

It ends at ``</function>``; a ``</tool_call>`` right after it (within ``BODY_WS`` blanks) whose
opener was lost belongs to the block (``xml.stray_close_dropped``).
"""

from __future__ import annotations

from typing import Any

from toolcodec.formats.open_block import OpenBlock, find_closer

BODY_WS = 64  # blanks allowed between </function> and a stray </tool_call>
_WRAPPER_CLOSE = "</tool_call>"


def function_end(text: str, cur: OpenBlock, final: bool,
                 codec: Any = None) -> tuple[int, int, bool] | None:
    """The end rule of a bare ``<function=…>`` block."""
    found = find_closer(text, cur, final, "</function>")
    if found is None or not found[2]:
        return found
    end, body_end, _ = found
    after = _stray_wrapper_close(text, end, final)
    if after is None:
        cur.scan = end - len("</function>")
        return None
    return after, body_end, True


def _stray_wrapper_close(text: str, at: int, final: bool) -> int | None:
    """Past a ``</tool_call>`` that follows the call within ``BODY_WS`` blanks (else ``at``;
    None: not known yet)."""
    window = text[at:at + BODY_WS + len(_WRAPPER_CLOSE)]
    stripped = window.lstrip()
    blanks = len(window) - len(stripped)
    if blanks <= BODY_WS and stripped.startswith(_WRAPPER_CLOSE):
        return at + blanks + len(_WRAPPER_CLOSE)
    cut = at + len(window) == len(text) and blanks <= BODY_WS
    if not final and cut and _WRAPPER_CLOSE.startswith(stripped):
        return None
    return at
