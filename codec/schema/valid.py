"""One walk for a valid call: JSON data, nothing to clean, within the depth, valid by schema.

A valid answer should cost one strict parse and one check. Validation does more for arguments it
must mend: it makes them JSON data (``toolcodec.schema.validation``), cleans their Unicode
(``toolcodec.repair.normalize``), coerces them (``toolcodec.schema.coerce``) and only then
validates. For arguments that need none of that, :func:`compile_valid` builds, once per tool, a
check that proves it in a single walk of the value beside the schema: ``True`` means validation
would return these very arguments, valid, with no repair; ``False`` means "take the full path". It
covers the keywords of ``toolcodec.schema.fast`` and compiles to ``None`` for any other schema.
``tests/test_schema_valid.py`` holds it to the full path.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Callable
from typing import Any

from toolcodec.schema import patterns as schema_regex

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
                       "enum", "const", "pattern", "minLength", "maxLength", "minItems",
                       "maxItems", "minProperties", "maxProperties", "minimum", "maximum",
                       "exclusiveMinimum", "exclusiveMaximum", "anyOf", "oneOf", "allOf",
                       "$ref", "$defs", "definitions", "$schema"})
# Drafts whose meaning of every keyword above is the same (draft-04 has boolean exclusive
# bounds; draft-07 ignores the siblings of `$ref`, which is why `$ref` must stand alone).
_DRAFTS = frozenset(f"{scheme}://json-schema.org/{draft}" for scheme in ("http", "https")
                    for draft in ("draft-06/schema", "draft-06/schema#", "draft-07/schema",
                                  "draft-07/schema#", "draft/2019-09/schema",
                                  "draft/2020-12/schema"))
_BRANCHES = ("anyOf", "oneOf", "allOf")
_SIZES = ("minLength", "maxLength", "minItems", "maxItems", "minProperties", "maxProperties")
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
    subset (``not``, ``if``, ``patternProperties``, ``uniqueItems``, a remote ``$ref``, …)."""
    if isinstance(schema, dict) and schema.get("$schema", next(iter(_DRAFTS))) not in _DRAFTS:
        return None
    compiler = _Compiler(schema)
    try:
        check = compiler.compile(schema)
    except (RecursionError, ValueError, TypeError, schema_regex.UnsafePattern):
        return None
    # Branches under a recursive reference may be tried at every level of a value, 2^depth
    # walks in all; the full path's budget (toolcodec.schema.budget) bounds those, not this.
    # Without recursion each part of the value meets each part of the schema at most once
    # per branch of it: linear in the value, times the schema's size.
    return None if compiler.recursive and compiler.branched else check


class _Compiler:
    """Compiles the parts of one schema; local ``$ref`` targets once each (recursion too)."""

    def __init__(self, root: Any) -> None:
        self.root = root
        self.refs: dict[str, list[Valid]] = {}
        self.recursive = False  # a reference met again while its target was compiled
        self.branched = False  # anyOf, oneOf or allOf somewhere

    def compile(self, schema: Any) -> Valid | None:
        if schema is True:
            return plain
        if not isinstance(schema, dict):
            return None
        if any(k not in _KEYWORDS and k not in _ANNOTATIONS for k in schema):
            return None
        if "$ref" in schema:
            return self._ref(schema)
        own = self._own(schema)
        if own is None:
            return None
        parts = [own]
        for key in _BRANCHES:
            if key not in schema:
                continue
            branches = schema[key]
            self.branched = True
            if not isinstance(branches, list) or not branches:
                return None
            checks = [self.compile(b) for b in branches]
            if any(c is None for c in checks):
                return None
            parts.append(_combine(key, checks))
        return parts[0] if len(parts) == 1 else _all_of(parts)

    def _ref(self, schema: dict) -> Valid | None:
        """A local ``$ref`` standing alone (annotations aside): its target's check."""
        ref = schema["$ref"]
        if not isinstance(ref, str) or not ref.startswith("#") or any(
                k in _KEYWORDS for k in schema if k not in ("$ref", "$defs", "definitions")):
            return None
        holder = self.refs.get(ref)
        if holder is None:
            holder = self.refs[ref] = []
            target = _pointer(self.root, ref[1:])
            check = self.compile(target) if target is not None else None
            if check is None:
                raise ValueError(ref)  # the whole schema takes the full path
            holder.append(check)
        if holder:
            return holder[0]
        self.recursive = True

        def later(value: Any, left: int) -> bool:  # a recursive reference, compiled by now
            return holder[0](value, left)

        return later

    def _own(self, schema: dict) -> Valid | None:
        """The check of a schema's own keywords (not its branches)."""
        allowed = _allowed_types(schema.get("type"))
        if allowed is False:
            return None
        sizes = [schema.get(k) for k in _SIZES]
        bounds = [schema.get(k) for k in _BOUNDS]
        if any(s is not None and type(s) is not int for s in sizes) or any(
                b is not None and type(b) not in (int, float) for b in bounds):
            return None
        members = _members(schema)
        if members is False:
            return None
        pattern = schema.get("pattern")
        if pattern is not None and not isinstance(pattern, str):
            return None
        text = _text_check(members, sizes[0], sizes[1],
                           None if pattern is None else schema_regex.compiled(pattern))
        number = _number_check(*bounds)
        obj = self._object_check(schema, sizes[4], sizes[5])
        array = self._array_check(schema, sizes[2], sizes[3])
        if obj is None or array is None:
            return None
        scalar = _scalar_member(members)

        def check(value: Any, left: int) -> bool:
            kind = type(value)
            if allowed is not None and kind not in allowed:
                return False
            if kind is str:
                return text(value)
            if kind is dict:
                return members is None and obj(value, left)
            if kind is list:
                return members is None and array(value, left)
            if kind is int:
                return _INT_MIN <= value <= _UINT_MAX and number(value) and scalar(value)
            if kind is float:
                return number(value) and scalar(value)
            return (kind is bool or value is None) and scalar(value)

        return check

    def _object_check(self, schema: dict, least: int | None,
                      most: int | None) -> Callable[[dict, int], bool] | None:
        props = schema.get("properties", {})
        required = schema.get("required", [])
        extra = schema.get("additionalProperties", True)
        if not isinstance(props, dict) or not isinstance(required, list) or not all(
                isinstance(k, str) for k in required):
            return None
        checks = {}
        for name, sub in props.items():
            checks[name] = self.compile(sub)
            if checks[name] is None:
                return None
        other = None if extra is False else self.compile(extra)
        if other is None and extra is not False:
            return None
        needed = tuple(required)

        def check(value: dict, left: int) -> bool:
            if left <= 0:
                return False
            if (least is not None and len(value) < least) or (
                    most is not None and len(value) > most):
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

    def _array_check(self, schema: dict, least: int | None,
                     most: int | None) -> Callable[[list, int], bool] | None:
        items = schema.get("items", True)
        sub = self.compile(items) if isinstance(items, dict | bool) else None
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


def _combine(key: str, checks: list[Valid]) -> Valid:
    """``anyOf``: one branch; ``allOf``: every branch; ``oneOf``: exactly one. A branch's "no"
    on clean JSON data is jsonschema's "invalid" (the checks are exact there), and on anything
    else every branch says no, so counting the yeses is sound."""
    if key == "allOf":
        return _all_of(checks)
    if key == "anyOf":
        return lambda value, left: any(c(value, left) for c in checks)
    return lambda value, left: sum(1 for c in checks if c(value, left)) == 1


def _all_of(checks: list[Valid]) -> Valid:
    return lambda value, left: all(c(value, left) for c in checks)


def _pointer(root: Any, pointer: str) -> Any:
    node = root
    for raw in pointer.split("/")[1:] if pointer else ():
        part = raw.replace("~1", "/").replace("~0", "~")
        if not isinstance(node, dict) or part not in node:
            return None
        node = node[part]
    return node


def _members(schema: dict) -> frozenset | None | bool:
    """The scalars ``enum``/``const`` allow (``(type, value)`` pairs, so that ``True`` and
    ``1`` differ while ``1`` and ``1.0`` match, as jsonschema compares them); None when
    neither is there; False when a member is a container (not in the subset)."""
    found: list[Any] = []
    if "enum" in schema:
        if not isinstance(schema["enum"], list):
            return False
        found.extend(schema["enum"])
    if "const" in schema:
        found.append(schema["const"])
        if "enum" in schema:
            return False  # both: their intersection; rare, not in the subset
    if "enum" not in schema and "const" not in schema:
        return None
    members = set()
    for m in found:
        kind = type(m)
        if kind not in (str, bool, int, float, type(None)):
            return False
        members.add((_class(m), m))
    return frozenset(members)


def _class(value: Any) -> str:
    kind = type(value)
    return "number" if kind is int or kind is float else kind.__name__


def _scalar_member(members: frozenset | None) -> Callable[[Any], bool]:
    if members is None:
        return _always
    return lambda value: (_class(value), value) in members


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


def _text_check(members: frozenset | None, least: int | None, most: int | None,
                regex: Any) -> Callable[[str], bool]:
    if members is None and least is None and most is None and regex is None:
        return clean_text

    def check(text: str) -> bool:
        if not (text.isascii() or _DIRTY.search(text) is None):
            return False
        if members is not None and ("str", text) not in members:
            return False
        size = len(text)
        return ((least is None or size >= least) and (most is None or size <= most)
                and (regex is None or regex.search(text) is not None))

    return check


def _number_check(low: Any, high: Any, above: Any, below: Any) -> Callable[[Any], bool]:
    if low is None and high is None and above is None and below is None:
        return _always

    def check(number: Any) -> bool:
        return ((low is None or number >= low) and (high is None or number <= high)
                and (above is None or number > above) and (below is None or number < below))

    return check
