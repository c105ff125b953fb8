"""One walk for a valid call: JSON data, nothing to clean, within the depth, valid by schema.

A valid answer should cost one strict parse and one check. Validation does more for arguments
it must mend: it makes them JSON data (``toolcodec.validation``), cleans their Unicode
(``toolcodec.normalize``), coerces them (``toolcodec.coerce``) and only then validates. For
arguments that need none of that, :func:`compile_valid` builds, once per tool, a check that
proves it in a single walk of the value beside the schema: ``True`` means validation would
return these very arguments, valid, with no repair; ``False`` means "take the full path". It
covers the keywords of ``toolcodec.schema_fast`` and compiles to ``None`` for any other
schema. ``tests/test_schema_valid.py`` holds it to the full path.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from typing import Any

# (value, containers still allowed below this point) -> valid with nothing to change.
Valid = Callable[[Any, int], bool]

# What normalisation would change in a string (bidi controls; lone surrogates, which no JSON
# carries); a key must also be NFKC-stable. ASCII strings have none of it.
_DIRTY = re.compile("[\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]")
_INT_MIN, _UINT_MAX = -(2**63), 2**64 - 1  # the integers every JSON result here carries
_ANNOTATIONS = frozenset({"title", "description", "default", "examples", "$comment",
                          "deprecated", "readOnly", "writeOnly", "format"})
_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,), "integer": (int,), "number": (int, float), "boolean": (bool,),
    "null": (type(None),), "array": (list,), "object": (dict,),
}
_KEYWORDS = frozenset({"type", "properties", "required", "additionalProperties", "items",
                       "enum", "minLength", "maxLength", "minItems", "maxItems", "minimum",
                       "maximum", "exclusiveMinimum", "exclusiveMaximum"})
_SIZES = ("minLength", "maxLength", "minItems", "maxItems")
_BOUNDS = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")


def clean_text(text: str) -> bool:
    """Whether normalisation leaves the string ``text`` as it is."""
    return text.isascii() or _DIRTY.search(text) is None


def clean_key(key: str) -> bool:
    """Whether normalisation leaves the key ``key`` as it is (keys are NFKC-folded too)."""
    return key.isascii() or (_DIRTY.search(key) is None
                             and unicodedata.is_normalized("NFKC", key))


def plain(value: Any, left: int) -> bool:
    """Any value: JSON data with clean keys and strings, 64-bit integers, and containers no
    deeper than ``left`` levels."""
    stack = [(value, left)]
    while stack:
        item, room = stack.pop()
        kind = type(item)
        if kind is str:
            if not (item.isascii() or _DIRTY.search(item) is None):
                return False
        elif kind is dict:
            if room <= 0:
                return False
            for key, child in item.items():
                if type(key) is not str or not clean_key(key):
                    return False
                stack.append((child, room - 1))
        elif kind is list:
            if room <= 0:
                return False
            stack.extend((child, room - 1) for child in item)
        elif kind is int:
            if not _INT_MIN <= item <= _UINT_MAX:
                return False
        elif kind is not float and kind is not bool and item is not None:
            return False
    return True


def compile_valid(schema: Any) -> Valid | None:
    """The one-walk check for ``schema``, or ``None`` when it uses a keyword outside the
    subset (``$ref``, ``pattern``, ``anyOf``, ``const``, a declared ``$schema``, …)."""
    if schema is True:
        return plain
    if not isinstance(schema, dict):
        return None
    if any(k not in _KEYWORDS and k not in _ANNOTATIONS for k in schema):
        return None
    allowed = _allowed_types(schema.get("type"))
    if allowed is False:
        return None
    sizes = [schema.get(k) for k in _SIZES]
    bounds = [schema.get(k) for k in _BOUNDS]
    if any(s is not None and type(s) is not int for s in sizes) or any(
            b is not None and type(b) not in (int, float) for b in bounds):
        return None
    enum = schema.get("enum")
    if enum is not None:
        if not isinstance(enum, list) or not all(isinstance(m, str) for m in enum):
            return None
        enum = frozenset(enum)
    text = _text_check(enum, sizes[0], sizes[1])
    number = _number_check(*bounds)
    obj = _object_check(schema)
    array = _array_check(schema, sizes[2], sizes[3])
    if obj is None or array is None:
        return None
    scalar_ok = enum is None  # a string enum rejects every other type

    def check(value: Any, left: int) -> bool:
        kind = type(value)
        if allowed is not None and kind not in allowed:
            return False
        if kind is str:
            return text(value)
        if kind is dict:
            return scalar_ok and obj(value, left)
        if kind is list:
            return scalar_ok and array(value, left)
        if kind is int:
            return scalar_ok and _INT_MIN <= value <= _UINT_MAX and number(value)
        if kind is float:
            return scalar_ok and number(value)
        return scalar_ok and (kind is bool or value is None)

    return check


def _allowed_types(declared: Any) -> frozenset[type] | None | bool:
    """The exact classes ``type`` allows; None when absent; False when not understood."""
    if declared is None:
        return None
    names = [declared] if isinstance(declared, str) else declared
    if not isinstance(names, list) or not names or any(n not in _TYPES for n in names):
        return False
    # Exact classes: bool is not an integer, 5.0 is not one for the codec's validator.
    return frozenset(t for n in names for t in _TYPES[n])


def _always(_value: Any) -> bool:
    return True


def _text_check(enum: frozenset[str] | None, least: int | None,
                most: int | None) -> Callable[[str], bool]:
    if enum is None and least is None and most is None:
        return clean_text

    def check(text: str) -> bool:
        if not (text.isascii() or _DIRTY.search(text) is None):
            return False
        if enum is not None and text not in enum:
            return False
        size = len(text)
        return (least is None or size >= least) and (most is None or size <= most)

    return check


def _number_check(low: Any, high: Any, above: Any, below: Any) -> Callable[[Any], bool]:
    if low is None and high is None and above is None and below is None:
        return _always

    def check(number: Any) -> bool:
        return ((low is None or number >= low) and (high is None or number <= high)
                and (above is None or number > above) and (below is None or number < below))

    return check


def _object_check(schema: dict) -> Callable[[dict, int], bool] | None:
    props = schema.get("properties", {})
    required = schema.get("required", [])
    extra = schema.get("additionalProperties", True)
    if not isinstance(props, dict) or not isinstance(required, list) or not all(
            isinstance(k, str) for k in required):
        return None
    checks = {}
    for name, sub in props.items():
        checks[name] = compile_valid(sub)
        if checks[name] is None:
            return None
    other = None if extra is False else compile_valid(extra)
    if other is None and extra is not False:
        return None
    needed = tuple(required)

    def check(value: dict, left: int) -> bool:
        if left <= 0:
            return False
        below = left - 1
        for key, item in value.items():
            if type(key) is not str or not (key.isascii() or clean_key(key)):
                return False
            sub = checks.get(key, other)
            if sub is None or not sub(item, below):
                return False
        for key in needed:
            if key not in value:
                return False
        return True

    return check


def _array_check(schema: dict, least: int | None,
                 most: int | None) -> Callable[[list, int], bool] | None:
    items = schema.get("items", True)
    sub = compile_valid(items) if isinstance(items, dict | bool) else None
    if sub is None and items is not False:
        return None

    def check(value: list, left: int) -> bool:
        if left <= 0:
            return False
        size = len(value)
        if (least is not None and size < least) or (most is not None and size > most):
            return False
        if sub is None:  # `items: false`: only the empty array
            return not value
        below = left - 1
        for item in value:
            if not sub(item, below):
                return False
        return True

    return check
