"""A compiled check for the common subset of JSON Schema that answers "valid for sure" or
"don't know".

Walking a value with ``jsonschema`` costs most of a valid call's decode. Tool schemas mostly use
a handful of keywords (``type``, ``properties``, ``required``, ``additionalProperties``,
``items``, ``enum`` of strings, length and range bounds); :func:`compile_check` turns such a
schema into nested closures. ``True`` means jsonschema would accept the value too; ``False``
means "not shown valid here" for any Python value; for JSON data (:func:`is_json_data`: what
a JSON parser builds) it is jsonschema's answer too, so the caller need not ask it again. A
schema with any other keyword (``$ref``, ``pattern``, ``oneOf``, a declared ``$schema``, …)
compiles to ``None``. The property tests in ``tests/test_schema_fast.py`` hold it to both.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterable
from typing import Any

Check = Callable[[Any], bool]
Maker = Callable[[Any, dict], "Check | None"]  # a keyword's argument and schema -> its check

# Keywords that do not assert anything (no format checker is configured: ``format`` too).
_ANNOTATIONS = frozenset({"title", "description", "default", "examples", "$comment",
                          "deprecated", "readOnly", "writeOnly", "format"})
_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,), "integer": (int,), "number": (int, float), "boolean": (bool,),
    "null": (type(None),), "array": (list,), "object": (dict,),
}


_JSON_SCALARS = frozenset({str, int, float, bool, type(None)})
_STR_ONLY = frozenset({str})


def all_scalars(values: Iterable[Any]) -> bool:
    """Whether each of *values* is a ``str``, ``int``, ``float``, ``bool`` or ``None``, of
    exactly that class; told in C (an object of them is most calls' arguments)."""
    return _JSON_SCALARS.issuperset(map(type, values))


def all_strings(values: Iterable[Any]) -> bool:
    """Whether each of *values* is a ``str``, of exactly that class; told in C."""
    return _STR_ONLY.issuperset(map(type, values))


def is_json_data(value: Any) -> bool:
    """Whether ``value`` is made only of ``dict`` (with ``str`` keys), ``list``, ``str``,
    ``int``, ``float``, ``bool`` and ``None``, exactly those classes (no subclasses)."""
    # Most arguments: an object of scalars, told by two scans in C
    if type(value) is dict and all_strings(value) and all_scalars(value.values()):
        return True
    stack = [value]
    while stack:
        item = stack.pop()
        kind = type(item)
        if kind is dict:
            if not all(type(k) is str for k in item):
                return False
            stack.extend(item.values())
        elif kind is list:
            stack.extend(item)
        elif kind not in _JSON_SCALARS:
            return False
    return True


def _always(_value: Any) -> bool:
    return True


def compile_check(schema: Any) -> Check | None:
    """A check for ``schema``, or ``None`` when it uses anything outside the subset."""
    if schema is True:
        return _always
    if not isinstance(schema, dict):
        return None
    checks = []
    for key, arg in schema.items():
        if key in _ANNOTATIONS:
            continue
        make = _KEYWORDS.get(key)
        check = make(arg, schema) if make is not None else None
        if check is None:
            return None
        if check is not _always:
            checks.append(check)
    if not checks:
        return _always
    if len(checks) == 1:
        return checks[0]
    every = tuple(checks)

    def all_of(v: Any) -> bool:  # a loop, not all() over a generator: one frame a call
        for check in every:
            if not check(v):
                return False
        return True

    return all_of


def _type(arg: Any, _schema: dict) -> Check | None:
    names = [arg] if isinstance(arg, str) else arg
    if not isinstance(names, list) or not names or any(n not in _TYPES for n in names):
        return None
    # Exact classes: bool is not an integer, and 5.0 is not one for the codec's validator.
    allowed = frozenset(t for n in names for t in _TYPES[n])
    return lambda v: type(v) in allowed


def _properties(arg: Any, _schema: dict) -> Check | None:
    if not isinstance(arg, dict):
        return None
    subs = {}
    for name, sub in arg.items():
        check = compile_check(sub)
        if check is None:
            return None
        if check is not _always:
            subs[name] = check
    pairs = tuple(subs.items())

    def properties(v: Any) -> bool:
        if type(v) is dict:
            for k, c in pairs:
                if k in v and not c(v[k]):
                    return False
        return True

    return properties


def _required(arg: Any, _schema: dict) -> Check | None:
    if not isinstance(arg, list) or not all(isinstance(k, str) for k in arg):
        return None
    keys = frozenset(arg)
    return lambda v: type(v) is not dict or v.keys() >= keys


def _additional(arg: Any, schema: dict) -> Check | None:
    known = schema.get("properties", {})
    if not isinstance(known, dict):
        return None
    if arg is False:
        return lambda v: type(v) is not dict or known.keys() >= v.keys()
    check = compile_check(arg)
    if check is None or check is _always:
        return check
    return lambda v: type(v) is not dict or all(check(x) for k, x in v.items() if k not in known)


def _items(arg: Any, _schema: dict) -> Check | None:
    check = compile_check(arg) if isinstance(arg, dict | bool) else None
    if check is None or check is _always:
        return check
    return lambda v: type(v) is not list or all(check(x) for x in v)


def _enum(arg: Any, _schema: dict) -> Check | None:
    if not isinstance(arg, list) or not all(isinstance(x, str) for x in arg):
        return None
    allowed = frozenset(arg)
    return lambda v: type(v) is str and v in allowed


def _size_bound(kind: type, test: Callable[[int, int], bool]) -> Maker:
    """``minLength``-style keywords: ``test(len(value), bound)`` for values of ``kind``."""

    def make(arg: Any, _schema: dict) -> Check | None:
        if type(arg) is not int:
            return None
        return lambda v: type(v) is not kind or test(len(v), arg)

    return make


def _number_bound(test: Callable[[Any, Any], bool]) -> Maker:
    """``minimum``-style keywords: ``test(value, bound)`` for numbers (never booleans)."""

    def make(arg: Any, _schema: dict) -> Check | None:
        if type(arg) not in (int, float):
            return None
        return lambda v: type(v) not in (int, float) or test(v, arg)

    return make


_KEYWORDS: dict[str, Maker] = {
    "type": _type,
    "properties": _properties,
    "required": _required,
    "additionalProperties": _additional,
    "items": _items,
    "enum": _enum,
    "minLength": _size_bound(str, operator.ge),
    "maxLength": _size_bound(str, operator.le),
    "minItems": _size_bound(list, operator.ge),
    "maxItems": _size_bound(list, operator.le),
    "minimum": _number_bound(operator.ge),
    "maximum": _number_bound(operator.le),
    "exclusiveMinimum": _number_bound(operator.gt),
    "exclusiveMaximum": _number_bound(operator.lt),
}
