"""A bound on the keyword evaluations one validation may spend, linear in the arguments.

A schema whose recursion descends into the value can still branch: ``anyOf`` of two arrays
whose items refer back to it evaluates both branches at every level a value fails, 2^depth
keywords for one nested list. `toolcodec.schema.refs` bounds what applies to one value;
this bounds the total. Every keyword of a compiled validator counts one step against the
budget opened around the call (`spending`); past it `TooCostly` is raised and the caller
reports the arguments as not shown valid. Outside `spending` nothing is counted.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from toolcodec.schema.fast import all_scalars

# Steps allowed per argument value (scaled by what applies to one value), plus a floor.
STEPS_PER_VALUE = 16
STEPS_FLOOR = 4_096


class TooCostly(Exception):
    """The validation spent its budget of keyword evaluations."""


_state = threading.local()


def counted(keywords: dict[str, Callable]) -> dict[str, Callable]:
    """*keywords* (jsonschema's keyword functions) each counting one step when called."""
    return {name: _counting(function) for name, function in keywords.items()}


def _counting(function: Callable) -> Callable:
    def keyword(validator: Any, value: Any, instance: Any, schema: Any) -> Any:
        left = getattr(_state, "left", None)
        if left is not None:
            if left <= 0:
                raise TooCostly
            _state.left = left - 1
        return function(validator, value, instance, schema)

    return keyword


def steps_for(arguments: Any, per_value: int) -> int:
    """The budget for *arguments*: `STEPS_PER_VALUE` × *per_value* steps per value in it."""
    return STEPS_FLOOR + STEPS_PER_VALUE * per_value * count_values(arguments)


def count_values(value: Any) -> int:
    """How many values (containers and scalars) *value* holds, itself included."""
    if type(value) is dict and all_scalars(value.values()):
        return 1 + len(value)  # an object of scalars (most arguments): no walk
    count, stack = 0, [value]
    while stack:
        item = stack.pop()
        count += 1
        if isinstance(item, dict):
            stack.extend(item.values())
        elif isinstance(item, list | tuple):
            stack.extend(item)
    return count


class spending:  # noqa: N801 - used as a function: ``with spending(steps):``
    """Count keyword evaluations in this thread against *steps* (nested budgets: innermost).
    A class, not a generator: it opens around every validation that is not surely valid."""

    __slots__ = ("steps", "outer")

    def __init__(self, steps: int) -> None:
        self.steps = steps

    def __enter__(self) -> None:
        self.outer = getattr(_state, "left", None)
        _state.left = self.steps

    def __exit__(self, *exc: object) -> None:
        _state.left = self.outer
