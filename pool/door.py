"""What the pool checks before a job leaves the caller: op, budget and payload size.

A job that fails here is answered at once, without being encoded, pickled or enqueued:
an oversized payload (``payload_too_large``), a budget that is not a positive finite number
or an op that is not a string (``bad_request``). Budgets longer than the platform can wait
are clamped to ``MAX_TIMEOUT_MS``.
"""

from __future__ import annotations

import math
from typing import Any

import orjson
from toolcodec.results.errors import BAD_REQUEST, PAYLOAD_TOO_LARGE
from toolcodec.results.limits import Limits
from toolcodec.worker.envelope import error_envelope
from toolcodec.worker.limits import operator_limits

# One hour: far beyond any sensible parse budget, and within what every wait primitive
# (poll(2) in milliseconds as a C int, Redis PEXPIRE, threading timeouts) can take.
MAX_TIMEOUT_MS = 3_600_000.0
# Payload characters on top of the text the codec may parse: tools, options, message fields.
PAYLOAD_SLACK_CHARS = 1_000_000
# Values counted one by one before a payload is measured by its JSON encoding instead.
_QUICK_NODES = 16


def default_max_payload_chars(ceiling: Limits | None = None) -> int:
    """The operator's ``max_chars`` ceiling (``ceiling``, else the environment's) plus room
    for tools and options."""
    return (ceiling or operator_limits()).max_chars + PAYLOAD_SLACK_CHARS


def plain_budget_ms(timeout_ms: Any) -> float | None:
    """*timeout_ms* as a budget in milliseconds if it is the usual kind (a number within
    ``check_budget``'s bounds, not clamped); None for any other, which ``check_budget``
    decides."""
    kind = type(timeout_ms)
    if (kind is float or kind is int) and 0 < timeout_ms <= MAX_TIMEOUT_MS:
        return float(timeout_ms)
    return None


def check_budget(timeout_ms: Any, default_ms: float) -> tuple[float | None, str | None]:
    """``(budget in seconds, None)`` or ``(None, why the value is refused)``."""
    if timeout_ms is None:
        timeout_ms = default_ms
    usual = plain_budget_ms(timeout_ms)
    if usual is not None:
        return usual / 1000.0, None
    if isinstance(timeout_ms, bool) or not isinstance(timeout_ms, int | float):
        return None, f"timeout_ms must be a number, got {type(timeout_ms).__name__}"
    if not math.isfinite(timeout_ms) or timeout_ms <= 0:
        return None, f"timeout_ms must be a positive, finite number of milliseconds, " \
                     f"got {timeout_ms!r}"
    return min(float(timeout_ms), MAX_TIMEOUT_MS) / 1000.0, None


def payload_size(payload: Any, stop_after: int) -> int:
    """Characters in the payload's strings plus one per container item, counted without
    encoding anything; stops counting once past *stop_after* (so the cost is bounded)."""
    size = _walked_size(payload, stop_after, None)
    assert size is not None
    return size


def within(payload: Any, max_chars: int) -> bool:
    """Whether ``payload_size(payload)`` is at most *max_chars*, cheaply.

    A payload of a few values is counted (an object without containers in one pass); one of
    many (a tool set) is encoded once, in C:
    its JSON is at least as long as the size counts (every character of a string or key is
    a byte or more, every container item has its own separator or bracket, every other value
    a byte or more), so a short encoding settles it. Anything else is counted in full.
    """
    if not isinstance(payload, dict):
        size = _walked_size(payload, max_chars, _QUICK_NODES)
    else:
        size = _flat_size(payload)
        if size is None and not _many_values(payload):  # a tool set: straight to the encoding
            size = _walked_size(payload, max_chars, _QUICK_NODES)
    if size is not None:
        return size <= max_chars
    try:
        if len(orjson.dumps(payload)) <= max_chars:
            return True
    except TypeError:  # not JSON data: counted as it is
        pass
    return payload_size(payload, max_chars) <= max_chars


def _flat_size(payload: dict) -> int | None:
    """``payload_size`` of an object that holds no container (None if it holds one): its
    strings' and keys' lengths, one per other value, one per item."""
    total = len(payload)
    for key, value in payload.items():
        if isinstance(value, str):
            total += len(value)
        elif isinstance(value, dict | list | tuple):
            return None
        else:
            total += 1
        if isinstance(key, str):
            total += len(key)
    return total


def _many_values(payload: dict) -> bool:
    """Whether the object holds a list of objects (a tool set): more values than are worth
    counting one by one."""
    return any(isinstance(v, list) and v and isinstance(v[0], dict) for v in payload.values())


def _walked_size(payload: Any, stop_after: int, max_nodes: int | None) -> int | None:
    """``payload_size``; None if the payload has more than *max_nodes* values."""
    total, stack, nodes = 0, [payload], 0
    while stack and total <= stop_after:
        nodes += 1
        if max_nodes is not None and nodes > max_nodes:
            return None
        value = stack.pop()
        if isinstance(value, str):
            total += len(value)
        elif isinstance(value, dict):
            total += len(value)
            for key, item in value.items():
                stack.append(item)
                if isinstance(key, str):
                    total += len(key)
        elif isinstance(value, list | tuple):
            total += len(value)
            stack.extend(value)
        else:
            total += 1
    return total


def within_given(payload: dict, max_chars: int, tools_size: int) -> bool:
    """``within`` for a payload whose ``tools`` are known to count ``tools_size``: the rest
    is counted, the tools are not encoded again."""
    return rest_size(payload, max_chars, tools_size) is not None


def rest_size(payload: dict, max_chars: int, tools_size: int, settles: int = 0) -> int | None:
    """For a payload whose ``tools`` count ``tools_size``: what its other fields count (each
    key and its value, and one for the item), if the whole is within *max_chars*; None if it
    is over (``within_given`` is False).

    ``settles``: a caller that only asks whether the count is at most *settles* (the inline
    jobs' bound) may get, instead of the count, a bound of it no greater than *settles*:
    the length of those fields' JSON, encoded in C (see ``within``), which settles both
    questions without counting."""
    if settles:
        others = payload.copy()  # two calls in C, not a comprehension
        others.pop("tools", None)
        try:
            bound = len(orjson.dumps(others))
        except TypeError:  # not JSON data: counted as it is
            bound = settles + 1
        if bound <= settles and bound + ("tools" in payload) * (6 + tools_size) <= max_chars:
            return bound
    size = len(payload)
    rest = 0
    for key, value in payload.items():
        if key == "tools":
            size += 5 + tools_size
        else:
            counted = (len(key) if isinstance(key, str) else 0) + 1
            counted += payload_size(value, max_chars - size - counted + 1)
            size += counted - 1
            rest += counted
        if size > max_chars:
            return None
    return rest


def refusal(op: Any, payload: Any, max_chars: int,
            tools_size: int | None = None) -> dict[str, Any] | None:
    """A worker-side error envelope when the job must not leave the caller, else None.
    ``tools_size``: ``payload_size`` of the payload's ``tools``, when the caller knows it."""
    name = op if isinstance(op, str) else ""
    if not isinstance(op, str):
        return error_envelope(name, "error", BAD_REQUEST,
                              f"op must be a string, got {type(op).__name__}", field="op")
    if not (within(payload, max_chars) if tools_size is None
            else within_given(payload, max_chars, tools_size)):
        return error_envelope(name, "error", PAYLOAD_TOO_LARGE,
                              f"the payload has more than {max_chars} characters, the limit "
                              "on what is carried to a worker (Pool max_payload_chars, "
                              "toolcodec serve --max-payload-chars); nothing was decoded",
                              limit=max_chars)
    return None
