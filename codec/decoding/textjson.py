"""Call shapes of JSON values: what a JSON tool call looks like, whatever carried it.

Call shapes: ``{"name", "arguments"|"parameters"}`` (keys in any order), ``{"function": {…}}``
(the OpenAI ``{"type": "function", "function": …}`` form), ``{"tool_calls": [...]}``,
llama.cpp's generic ``{"tool_call": {…}}``, or a non-empty list of these. ``{"name": NAME}``
alone has ``None`` for its arguments: a call only of a tool that declares no parameters (the
codec decides), else a description. Finding such values in prose is the engine's job
(``toolcodec.decoding.engine``): there a value is a call only when it is strict JSON, has a
call shape, names registered tools and every call in it validates.
"""

from __future__ import annotations

from typing import Any


def call_pairs(value: Any) -> list[tuple[str, Any]] | None:
    """The ``(name, arguments)`` pairs of a call-shaped value, or None if it is not one."""
    items = value if isinstance(value, list) else [value]
    if not items:
        return None
    pairs: list[tuple[str, Any]] = []
    for item in items:
        if isinstance(item, dict) and isinstance(item.get("tool_call"), dict) and len(item) == 1:
            item = item["tool_call"]  # llama.cpp's generic format
        if isinstance(item, dict) and isinstance(item.get("tool_calls"), list) and len(item) == 1:
            inner = call_pairs(item["tool_calls"])
            if inner is None:
                return None
            pairs.extend(inner)
            continue
        pair = _one_call(item)
        if pair is None:
            return None
        pairs.append(pair)
    return pairs


def _one_call(item: Any) -> tuple[str, Any] | None:
    if not isinstance(item, dict):
        return None
    fn = item.get("function")
    if isinstance(fn, dict):
        item = fn
    name = item.get("name")
    if not isinstance(name, str):
        return None
    for key in ("arguments", "parameters"):
        if key in item:
            args = item[key]
            return (name, args) if isinstance(args, dict | str) else None
    return (name, None) if len(item) == 1 else None  # {"name": NAME}: no arguments written
