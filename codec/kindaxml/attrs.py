"""Parse the attribute text of one tag (spec §5): every form, with bounded recovery.

The text given is already bounded by the tag (see the tokenizer), so a quote left open
closes at the end of the tag (§5.2) and nothing here can run past it.
"""

from __future__ import annotations

import re
from typing import Any

_SPACE = re.compile(r"\s*")
_NAME = re.compile(r"[^\s=\"']+")
_UNQUOTED = re.compile(r"\S+")

QUOTE_CLOSED_AT_TAG_END = "quote_closed_at_tag_end"
DUPLICATE_ATTRIBUTE = "duplicate_attribute"
ATTRIBUTE_MISSING_NAME = "attribute_missing_name"
ATTRIBUTE_MISSING_VALUE = "attribute_missing_value"


def parse_attrs(body: str, policy: str = "last_wins") -> tuple[dict[str, Any], list[str]]:
    """Return ``(attrs, recoveries)`` for the attribute text ``body`` of one tag.

    Values are strings, or ``True`` for a bare (boolean) attribute. Duplicates follow
    ``policy``: ``last_wins``, ``first_wins`` or ``keep_list`` (a repeated name maps to the
    list of its values in order). ``recoveries`` names each guess, in order, without repeats.
    """
    attrs: dict[str, Any] = {}
    repeated: set[str] = set()
    recoveries: list[str] = []
    i, n = 0, len(body)
    while True:
        i = _SPACE.match(body, i).end()
        if i >= n:
            break
        name_match = _NAME.match(body, i)
        name = name_match.group() if name_match else ""
        i = name_match.end() if name_match else i
        if not name:  # a value with no name before it: `="x"` or a bare quoted string
            _note(recoveries, ATTRIBUTE_MISSING_NAME)
            if body[i] == "=":
                i += 1
            _, i = _read_value(body, _SPACE.match(body, i).end(), recoveries)
            continue
        after = _SPACE.match(body, i).end()
        value: Any = True
        if after < n and body[after] == "=":
            value, i = _read_value(body, _SPACE.match(body, after + 1).end(), recoveries)
        _store(attrs, repeated, name, value, policy, recoveries)
    return attrs, recoveries


def _read_value(body: str, i: int, recoveries: list[str]) -> tuple[str, int]:
    """Read a quoted or unquoted value at ``i``; return it and the index after it."""
    if i >= len(body):
        _note(recoveries, ATTRIBUTE_MISSING_VALUE)
        return "", i
    quote = body[i]
    if quote in "\"'":
        close = body.find(quote, i + 1)
        if close < 0:
            _note(recoveries, QUOTE_CLOSED_AT_TAG_END)
            return body[i + 1 :], len(body)
        return body[i + 1 : close], close + 1
    match = _UNQUOTED.match(body, i)
    return match.group(), match.end()


def _store(
    attrs: dict[str, Any],
    repeated: set[str],
    name: str,
    value: Any,
    policy: str,
    recoveries: list[str],
) -> None:
    if name not in attrs:
        attrs[name] = value
        return
    _note(recoveries, DUPLICATE_ATTRIBUTE)
    if policy == "last_wins":
        attrs[name] = value
    elif policy == "keep_list":
        if name not in repeated:
            repeated.add(name)
            attrs[name] = [attrs[name]]
        attrs[name].append(value)


def _note(recoveries: list[str], reason: str) -> None:
    if reason not in recoveries:
        recoveries.append(reason)
