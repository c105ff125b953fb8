"""Is a tool's parameter schema a valid JSON Schema? "Valid for sure", or "don't know".

``jsonschema``'s ``check_schema`` validates a schema against the 2020-12 meta-schema through
its ``$dynamicRef`` chain: about 1.7 ms for a small tool, 14 ms for a tool set of eight, paid
before the first call with a new tool set can be decoded. Tool schemas are nearly always in
a small common subset (``type``, ``properties``, ``required``, ``enum``, bounds, ``items``,
``anyOf``…), for which the meta-schema's demands are simple type checks on the keyword
values. :func:`surely_valid` checks those in one walk and answers True only when the
meta-schema would accept the schema; anything else (``$ref``, ``$schema``, ``pattern``,
other vocabulary keywords, a value it does not check) is "don't know" (False) and
``check_schema`` decides, as before. Keywords outside the 2020-12 vocabulary are
annotations the meta-schema accepts with any value.
"""

from __future__ import annotations

from typing import Any

_TYPES = frozenset({"array", "boolean", "integer", "null", "number", "object", "string"})

# 2020-12 vocabulary keywords (and the meta-schema's draft-07 compatibility ones) this walk
# does not check: their presence means "don't know".
_UNCHECKED = frozenset({
    "$schema", "$id", "$anchor", "$dynamicAnchor", "$ref", "$dynamicRef", "$vocabulary",
    "$defs", "$recursiveAnchor", "$recursiveRef", "definitions", "dependencies",
    "not", "if", "then", "else", "dependentSchemas", "prefixItems", "contains",
    "patternProperties", "propertyNames", "unevaluatedItems", "unevaluatedProperties",
    "pattern", "maxContains", "minContains", "dependentRequired", "contentEncoding",
    "contentMediaType", "contentSchema",
})


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _is_count(value: Any) -> bool:  # the meta-schema's nonNegativeInteger
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _is_type(value: Any) -> bool:
    if isinstance(value, str):
        return value in _TYPES
    return (isinstance(value, list) and len(value) > 0 and all(
        isinstance(v, str) and v in _TYPES for v in value) and len(set(value)) == len(value))


def _unique_strings(value: Any) -> bool:
    return (isinstance(value, list) and all(isinstance(v, str) for v in value)
            and len(set(value)) == len(value))


_VALUE_CHECKS = {
    "type": _is_type,
    "required": _unique_strings,
    "enum": lambda v: isinstance(v, list),
    "title": lambda v: isinstance(v, str),
    "format": lambda v: isinstance(v, str),
    "description": lambda v: isinstance(v, str),
    "$comment": lambda v: isinstance(v, str),
    "deprecated": lambda v: isinstance(v, bool),
    "readOnly": lambda v: isinstance(v, bool),
    "writeOnly": lambda v: isinstance(v, bool),
    "uniqueItems": lambda v: isinstance(v, bool),
    "examples": lambda v: isinstance(v, list),
    "const": lambda v: True,
    "default": lambda v: True,
    "minimum": _is_number, "maximum": _is_number,
    "exclusiveMinimum": _is_number, "exclusiveMaximum": _is_number,
    "multipleOf": lambda v: _is_number(v) and v > 0,
    "minLength": _is_count, "maxLength": _is_count, "minItems": _is_count,
    "maxItems": _is_count, "minProperties": _is_count, "maxProperties": _is_count,
}
_SCHEMA_KEYS = ("items", "additionalProperties")  # a schema each
_SCHEMA_LISTS = ("anyOf", "oneOf", "allOf")  # a non-empty list of schemas each


def surely_valid(schema: Any, *, limit: int = 10_000) -> bool:
    """True if the 2020-12 meta-schema certainly accepts ``schema``; False: don't know.

    ``limit`` bounds the walk (schemas visited): past it, "don't know".
    """
    stack, seen = [schema], 0
    while stack:
        node = stack.pop()
        seen += 1
        if seen > limit:
            return False
        if isinstance(node, bool):
            continue
        if not isinstance(node, dict):
            return False
        for key, value in node.items():
            check = _VALUE_CHECKS.get(key)
            if check is not None:
                if not check(value):
                    return False
            elif key in _UNCHECKED:
                return False
            elif key == "properties":
                if not isinstance(value, dict):
                    return False
                stack.extend(value.values())
            elif key in _SCHEMA_KEYS:
                stack.append(value)
            elif key in _SCHEMA_LISTS:
                if not isinstance(value, list) or not value:
                    return False
                stack.extend(value)
            # any other key is an annotation the meta-schema accepts with any value
    return True
