"""GigaChat 3.5's GCML: DeepSeek's DSML invokes with ``GCML`` in each tag's prefix::

    <｜GCML｜tool_calls><｜GCML｜invoke name="get_weather">
    <｜GCML｜parameter name="city" string="true">Tokyo</｜GCML｜parameter></｜GCML｜invoke>
    </｜GCML｜tool_calls>

Parameters with ``string="true"`` are text, the others JSON (``toolcodec.formats.invoke``).
"""

from __future__ import annotations

from toolcodec.formats import FormatRead, invoke

_BAR = "\uff5c"
OPENERS = (f"<{_BAR}GCML{_BAR}tool_calls>", "<|GCML|tool_calls>")
CLOSERS = (f"</{_BAR}GCML{_BAR}tool_calls>", "</|GCML|tool_calls>")
CALL_ENDS = (f"</{_BAR}GCML{_BAR}invoke>", "</|GCML|invoke>")
_PREFIX = r"[|\uff5c]GCML[|\uff5c] ?"


def read(body: str, *, closed: bool = True) -> FormatRead:
    """Read the invokes of one GCML block."""
    return invoke.read(body, closed=closed, prefix=_PREFIX)
