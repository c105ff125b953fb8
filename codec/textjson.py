"""The JSON-in-text path: tool calls a model wrote as bare JSON inside its prose.

This path is deliberately strict, because JSON in prose is often an example shown to the
reader rather than a request to act. A JSON value is taken as calls only when it parses
(without closing a truncated value), has a call shape, names registered tools and every
call in it validates. Anything else stays content and is not an error.

Call shapes: ``{"name", "arguments"|"parameters"}``, ``{"function": {…}}`` (the OpenAI
``{"type": "function", "function": …}`` form), ``{"tool_calls": [...]}``, or a non-empty
list of these.

Candidates are a fenced block (```` ```json … ``` ```` or a bare ```` ``` ```` fence) or a
``{``/``[`` whose first key looks like a call (``name``, ``function``, ``tool_calls``,
``type``). At most ``MAX_CANDIDATES`` are parsed per region so that text full of braces
costs linear time.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from codec.limits import Limits

MAX_CANDIDATES = 32
# Markers some models print right before JSON calls; they belong to the call, not the prose.
CALL_MARKERS = ("<|python_tag|>", "[TOOL_CALLS]", "functools")

_START = re.compile(r"""[\[{]\s*(?:\{\s*)?["']?(?:name|function|tool_calls|type)["']?\s*:""")
_FENCE_OPEN = re.compile(r"```[ \t]*(?:json|JSON|json5)?[ \t]*\r?\n")

# (name, arguments) pairs -> (ok, calls) where calls are whatever the caller builds.
Checker = Callable[[list[tuple[str, Any]]], "tuple[bool, list[Any]]"]


@dataclass(slots=True)
class JsonHit:
    """A JSON value in the text accepted as calls; ``[start, end)`` includes fences/markers."""

    start: int
    end: int
    calls: list[Any] = field(default_factory=list)


def call_pairs(value: Any) -> list[tuple[str, Any]] | None:
    """The ``(name, arguments)`` pairs of a call-shaped value, or None if it is not one."""
    items = value if isinstance(value, list) else [value]
    if not items:
        return None
    pairs: list[tuple[str, Any]] = []
    for item in items:
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
    return None


def find_json_calls(text: str, regions: list[tuple[int, int]], *, check: Checker,
                    limits: Limits) -> list[JsonHit]:
    """Scan ``text[start:end]`` for each region and return the accepted JSON calls in order."""
    hits: list[JsonHit] = []
    for start, end in regions:
        if end - start >= 2:
            hits.extend(_scan_region(text, start, end, check, limits))
    return hits


def _scan_region(text: str, start: int, end: int, check: Checker,
                 limits: Limits) -> list[JsonHit]:
    sub = text[start:end]
    if "{" not in sub and "[" not in sub:
        return []
    from codec.jsonrepair import repair_json, repair_json_prefix

    hits: list[JsonHit] = []
    fences = _fences(sub)
    pos = tries = fi = 0
    depth = counted = 0  # bracket balance of sub[:counted], outside parsed values
    while tries < MAX_CANDIDATES:
        while fi < len(fences) and fences[fi][0] < pos:
            fi += 1
        fence = fences[fi] if fi < len(fences) else None
        m = _START.search(sub, pos)
        if m is None and fence is None:
            break
        if fence is not None and (m is None or fence[0] <= m.start()):
            tries += 1
            res = repair_json(sub[fence[1]:fence[2]], limits=limits)
            hit = _accept(res, check, start + fence[0], start + fence[3])
            pos = depth_reset = fence[3] if hit else fence[1]
            depth, counted = 0, depth_reset
        else:
            depth = max(0, depth + _balance(sub, counted, m.start()))
            counted = m.start()
            if depth > 0:  # inside another bracketed value: part of an example, not a call
                pos = m.start() + 1
                continue
            tries += 1
            res, stop = repair_json_prefix(sub, m.start(), limits=limits)
            hit = _accept(res, check, start + m.start(), start + stop)
            # A value that parsed is skipped whole, call or not.
            if res.ok and stop > m.start():
                pos = counted = stop
            else:
                pos = m.start() + 1
        if hit:
            hits.append(_with_marker(text, hit))
    return hits


def _balance(sub: str, start: int, end: int) -> int:
    seg = sub[start:end]
    return seg.count("{") + seg.count("[") - seg.count("}") - seg.count("]")


def _fences(sub: str) -> list[tuple[int, int, int, int]]:
    """``(fence_start, body_start, body_end, fence_end)`` for each closed ``` fence."""
    out = []
    pos = 0
    while True:
        m = _FENCE_OPEN.search(sub, pos)
        if m is None:
            return out
        close = sub.find("```", m.end())
        if close < 0:
            return out
        out.append((m.start(), m.end(), close, close + 3))
        pos = close + 3


def _accept(res: Any, check: Checker, start: int, end: int) -> JsonHit | None:
    # A truncated value closed by repair could carry cut-off arguments: never a call here.
    if not res.ok or "json.unclosed" in res.repairs:
        return None
    pairs = call_pairs(res.value)
    if not pairs:
        return None
    ok, calls = check(pairs)
    return JsonHit(start, end, calls) if ok else None


def _with_marker(text: str, hit: JsonHit) -> JsonHit:
    head = text[:hit.start].rstrip()
    for marker in CALL_MARKERS:
        if head.endswith(marker):
            hit.start = len(head) - len(marker)
            break
    return hit
