"""Muse Glimmer's ATEM calls: DSML-like invokes with the ``atem:`` prefix on every tag::

    <atem:function_calls>
    <atem:invoke name="get_weather">
    <atem:parameter name="city">Paris</atem:parameter>
    </atem:invoke>
    </atem:function_calls>

Values are raw text, typed by the schema (``toolcodec.formats.invoke``). The model's
addressed message headers (``<|start|>assistant to=RECIPIENT<|message|>…<|eom|>``, harmony's
shape) are rows of ``toolcodec.formats.reasoning``: ``to=self`` reasoning, ``to=user`` the
answer, ``to=functions`` framing before this block.
"""

from __future__ import annotations

from toolcodec.formats import FormatRead, invoke

OPENER, CLOSER, CALL_END = "<atem:function_calls>", "</atem:function_calls>", "</atem:invoke>"


def read(body: str, *, closed: bool = True) -> FormatRead:
    """Read the invokes of one ATEM block."""
    return invoke.read(body, closed=closed, prefix="atem:")
