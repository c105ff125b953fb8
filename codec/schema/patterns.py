"""Schema regexes evaluated in linear time, so a tool schema cannot be a ReDoS.

Tool schemas may come from a request (the HTTP service, the proxy), and the strings they are
matched against come from the model. Python's backtracking ``re`` takes exponential time on
patterns like ``^(a+)+$``; RE2 (the ``google-re2`` package) never backtracks, so matching costs
O(pattern × text). Every ``pattern`` and ``patternProperties`` regex of a schema is compiled
with RE2 once, when the tool set is registered; a pattern RE2 cannot run (backreferences,
lookahead/lookbehind) makes the tool set invalid (``InvalidToolsError``) instead of being run
by a backtracking engine.

Dialect: RE2 syntax, close to ECMA-262 (JSON Schema's regex dialect): ``\\d``, ``\\w``, ``\\s``
and ``\\b`` are ASCII-only there, as in ECMA-262 without the ``u`` flag (Python's ``re`` would
match any Unicode digit or letter).

The validator keywords below replace jsonschema's own ``pattern``, ``patternProperties`` and
``additionalProperties`` (which call ``re.search``). ``unevaluatedProperties`` would match
``patternProperties`` with ``re`` internally, so a schema that uses both is refused.
"""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import Any

import re2
from jsonschema.exceptions import ValidationError

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # errors are reported through UnsafePattern, not stderr
_MAX_PATTERNS = 4096


class UnsafePattern(ValueError):
    """A schema regex that cannot be evaluated in linear time; ``pointer`` locates it."""

    def __init__(self, pointer: str, pattern: str | None, why: str) -> None:
        what = "schema" if pattern is None else f"regex {pattern!r:.80}"
        super().__init__(f"{what} at '{pointer or '/'}' cannot be run safely: {why}")
        self.pointer, self.pattern = pointer, pattern


@functools.lru_cache(maxsize=_MAX_PATTERNS)
def compiled(pattern: str) -> Any:
    """The RE2 program for *pattern* (raises ``re2.error`` when RE2 cannot run it)."""
    return re2.compile(pattern, _OPTIONS)


def search(pattern: str, text: str) -> bool:
    return compiled(pattern).search(text) is not None


def check_patterns(schema: Any) -> None:
    """Compile every regex in *schema* with RE2; raise ``UnsafePattern`` for the first that
    cannot run, or for ``unevaluatedProperties`` beside ``patternProperties``."""
    unevaluated_at: str | None = None
    uses_pattern_properties = False
    for pointer, node in _nodes(schema):
        pattern = node.get("pattern")
        if isinstance(pattern, str):
            _compile_at(f"{pointer}/pattern", pattern)
        props = node.get("patternProperties")
        if isinstance(props, dict):
            uses_pattern_properties = True
            for key in props:
                if isinstance(key, str):
                    _compile_at(f"{pointer}/patternProperties", key)
        if "unevaluatedProperties" in node:
            unevaluated_at = pointer
    if unevaluated_at is not None and uses_pattern_properties:
        raise UnsafePattern(unevaluated_at, None, "'unevaluatedProperties' together with "
                            "'patternProperties' is not supported (jsonschema would match "
                            "them with a backtracking regex engine)")


def _compile_at(pointer: str, pattern: str) -> None:
    try:
        compiled(pattern)
    except re2.error as exc:
        why = exc.args[0].decode() if exc.args and isinstance(exc.args[0], bytes) else str(exc)
        raise UnsafePattern(pointer, pattern, f"{why} (RE2 has no backreferences or "
                            "lookaround)") from None


def _nodes(schema: Any) -> Iterator[tuple[str, dict]]:
    """Every object node of the schema with its JSON Pointer (iterative: no recursion)."""
    stack: list[tuple[str, Any]] = [("", schema)]
    while stack:
        pointer, node = stack.pop()
        if isinstance(node, dict):
            yield pointer, node
            for key, value in node.items():
                if isinstance(value, dict | list):
                    stack.append((f"{pointer}/{_escape(str(key))}", value))
        elif isinstance(node, list):
            stack.extend((f"{pointer}/{i}", v) for i, v in enumerate(node)
                         if isinstance(v, dict | list))


def _escape(part: str) -> str:
    return part.replace("~", "~0").replace("/", "~1")


# -- jsonschema keywords ----------------------------------------------------------------------


def pattern_keyword(validator: Any, pattern: str, instance: Any, schema: Any) -> Iterator:
    if validator.is_type(instance, "string") and not search(pattern, instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def pattern_properties_keyword(validator: Any, patterns: dict, instance: Any,
                               schema: Any) -> Iterator:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        for key, value in instance.items():
            if search(pattern, key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def additional_properties_keyword(validator: Any, additional: Any, instance: Any,
                                  schema: Any) -> Iterator:
    if not validator.is_type(instance, "object"):
        return
    extras = [key for key in instance if not _declared(key, schema)]
    if validator.is_type(additional, "object"):
        for key in extras:
            yield from validator.descend(instance[key], additional, path=key)
    elif additional is False and extras:
        listed = ", ".join(repr(k) for k in sorted(extras, key=str))
        if "patternProperties" in schema:
            yield ValidationError(f"{listed} not allowed: no property or pattern matches")
        else:
            yield ValidationError(f"Additional properties are not allowed ({listed} "
                                  f"{'was' if len(extras) == 1 else 'were'} unexpected)")


def _declared(key: str, schema: dict) -> bool:
    if key in (schema.get("properties") or {}):
        return True
    return any(search(p, key) for p in (schema.get("patternProperties") or {}))


KEYWORDS = {"pattern": pattern_keyword, "patternProperties": pattern_properties_keyword,
            "additionalProperties": additional_properties_keyword}
