"""Plain result types. Every ``to_dict`` returns JSON data (``orjson.dumps`` works)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

import orjson
from toolcodec.repair.normalize import (
    SURROGATE_REPLACED,
    replace_surrogates,
    replace_surrogates_in_errors,
)
from toolcodec.results.errors import CodecError

# An integer past the 64 bits a JSON result carries, made the nearest float.
BIG_INTEGER = "json.big_integer"
NONFINITE_NUMBER = "json.nonfinite_number"

Path = Literal["native", "xml", "json", "none"]
SpanKind = Literal["text", "call", "reasoning", "markup", "end", "tokens"]


def unique_ids(ids: list[str]) -> list[str]:
    """``ids`` without repeats, first occurrence kept (repair ids are reported once)."""
    return list(dict.fromkeys(ids))


@dataclass(slots=True)
class RepairResult:
    """What ``repair_json`` returns: the value, the repair ids applied, and any errors."""

    ok: bool
    value: Any = None
    repairs: list[str] = field(default_factory=list)
    errors: list[CodecError] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "value": self.value,
            "repairs": list(self.repairs),
            "errors": [e.to_dict() for e in self.errors],
        }


@dataclass(slots=True)
class ValidationResult:
    """What ``validate`` returns: arguments after coercion, the repairs made, and errors."""

    ok: bool
    arguments: Any = None
    repairs: list[str] = field(default_factory=list)
    errors: list[CodecError] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "arguments": self.arguments,
            "repairs": list(self.repairs),
            "errors": [e.to_dict() for e in self.errors],
        }


@dataclass(slots=True)
class Span:
    """A half-open ``[start, end)`` range of the decoded text and what it was taken as."""

    kind: SpanKind
    start: int
    end: int


@dataclass(slots=True)
class Call:
    """One decoded tool call. ``format`` names the format it was read from (``hermes``,
    ``pythonic``, ``kimi_k2``, … or ``native``); ``span`` locates its raw markup in the input
    text, if any."""

    name: str
    arguments: dict[str, Any]
    repairs: list[str] = field(default_factory=list)
    span: tuple[int, int] | None = None
    format: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "arguments": self.arguments, "repairs": list(self.repairs),
                "format": self.format}


@dataclass(slots=True)
class DecodeResult:
    """What ``ToolCallCodec.decode`` returns.

    ``spans`` partitions the input text (for str input) in order, so that no character is
    unaccounted for: text spans make up ``content``, call spans the calls, reasoning spans
    ``reasoning``, and markup spans what was recognised as tool-call syntax but not decoded
    (those also stay in ``content`` and carry an error).
    """

    ok: bool
    path: Path = "none"
    calls: list[Call] = field(default_factory=list)
    content: str = ""
    reasoning: str | None = None
    repairs: list[str] = field(default_factory=list)
    errors: list[CodecError] = field(default_factory=list)
    spans: list[Span] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {
            "ok": self.ok,
            "path": self.path,
            "calls": [c.to_dict() for c in self.calls],
            "content": self.content,
            "reasoning": self.reasoning,
            "repairs": unique_ids(self.repairs),
            "errors": [e.to_dict() for e in self.errors],
        }


def encodable_result(result: DecodeResult) -> DecodeResult:
    """Replace lone surrogates in everything the result carries, so it encodes as UTF-8.

    Python strings may hold them (``surrogateescape``, ``\\uD800`` escapes); JSON cannot.
    One character replaces one, so spans stay valid.
    """
    calls, errors = result.calls, result.errors
    try:  # the usual result: orjson encodes it all, so nothing holds a surrogate (one C call)
        orjson.dumps((result.content, result.reasoning,
                      [c.arguments for c in calls] if calls else None,
                      [(e.message, e.details) for e in errors] if errors else None))
        return result
    except TypeError:  # a surrogate, or arguments that are not plain JSON: each part checked
        return _made_encodable(result)


def _made_encodable(result: DecodeResult) -> DecodeResult:
    """``encodable_result``'s work, part by part."""
    changed = False
    result.content, hit = replace_surrogates(result.content)
    changed |= hit
    if result.reasoning is not None:
        result.reasoning, hit = replace_surrogates(result.reasoning)
        changed |= hit
    applied: list[str] = []
    for call in result.calls:
        applied += clean_call(call)
        changed |= SURROGATE_REPLACED in call.repairs
    changed |= replace_surrogates_in_errors(result.errors)
    if changed:
        applied.append(SURROGATE_REPLACED)
    result.repairs.extend(r for r in unique_ids(applied) if r not in result.repairs)
    return result


def clean_call(call: Call) -> list[str]:
    """Make a call's arguments encodable (once), naming the repairs on the call; returns
    the repairs this applied."""
    try:
        orjson.dumps(call.arguments)  # C speed; fails on a surrogate (or deep nesting)
        return []
    except TypeError:
        call.arguments, repairs, _ = encodable_value(call.arguments)
    for repair in repairs:
        if repair not in call.repairs:
            call.repairs.append(repair)
    return repairs


def encodable_validation(result: ValidationResult) -> ValidationResult:
    """Make a validation's arguments and errors encodable, naming the repairs (validation
    already made its input JSON data: this is the net under what it reports)."""
    replace_surrogates_in_errors(result.errors)
    try:
        orjson.dumps(result.arguments)
        return result
    except TypeError:
        result.arguments, repairs, _ = encodable_value(result.arguments)
    result.repairs.extend(r for r in repairs if r not in result.repairs)
    return result


_INT_MIN, _UINT_MAX = -(2**63), 2**64 - 1  # what orjson (and so every result) carries


def encodable_value(value: Any) -> tuple[Any, list[str], list[tuple[str, str]]]:
    """A copy of *value* that ``orjson.dumps`` encodes, the repair ids that made it so, and
    the ``(pointer, type name)`` of each value JSON cannot carry (replaced by its repr).

    Iterative: a value nested as deeply as the limits allow cannot exhaust Python's stack.
    """
    repairs: dict[str, None] = {}
    foreign: list[tuple[str, str]] = []
    holder: list[Any] = [None]
    stack: list[tuple[Any, Any, Any, str]] = [(value, holder, 0, "")]
    while stack:
        node, parent, key, pointer = stack.pop()
        if isinstance(node, dict):
            out: dict = {}
            parent[key] = out
            for k, v in node.items():
                k = _encodable_key(k, pointer, repairs, foreign)
                out[k] = None  # keeps the order; the value lands when its turn comes
                stack.append((v, out, k, f"{pointer}/{_escape(k)}"))
        elif isinstance(node, list | tuple):
            items = [None] * len(node)
            parent[key] = items
            stack.extend((v, items, i, f"{pointer}/{i}") for i, v in enumerate(node))
        else:
            parent[key] = _encodable_scalar(node, pointer, repairs, foreign)
    return holder[0], list(repairs), foreign


def _encodable_key(key: Any, pointer: str, repairs: dict[str, None],
                   foreign: list[tuple[str, str]]) -> str:
    if not isinstance(key, str):
        foreign.append((pointer, f"{type(key).__name__} key"))
        return repr(key)[:_MAX_REPR]
    key, hit = replace_surrogates(key)
    if hit:
        repairs[SURROGATE_REPLACED] = None
    return key


def _encodable_scalar(value: Any, pointer: str, repairs: dict[str, None],
                      foreign: list[tuple[str, str]]) -> Any:
    if isinstance(value, str):
        value, hit = replace_surrogates(value)
        if hit:
            repairs[SURROGATE_REPLACED] = None
        return value
    if isinstance(value, bool) or value is None or isinstance(value, float):
        return value
    if isinstance(value, int):
        if _INT_MIN <= value <= _UINT_MAX:
            return value
        try:
            repairs[BIG_INTEGER] = None
            return float(value)
        except OverflowError:  # beyond the float range too: null, as repair_json does
            repairs[NONFINITE_NUMBER] = None
            return None
    try:
        orjson.dumps(value)  # orjson's own types (datetime, UUID, dataclasses, ...) pass
        return value
    except TypeError:
        foreign.append((pointer, type(value).__name__))
        shown, _ = replace_surrogates(repr(value)[:_MAX_REPR])
        return shown


_MAX_REPR = 80


def _escape(key: str) -> str:
    return key.replace("~", "~0").replace("/", "~1")
