"""Plain result types. Every ``to_dict`` returns JSON data (``orjson.dumps`` works)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

import orjson
from toolcodec.errors import CodecError
from toolcodec.normalize import (
    SURROGATE_REPLACED,
    replace_surrogates,
    replace_surrogates_in,
    replace_surrogates_in_errors,
)

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
    changed = False
    result.content, hit = replace_surrogates(result.content)
    changed |= hit
    if result.reasoning is not None:
        result.reasoning, hit = replace_surrogates(result.reasoning)
        changed |= hit
    for call in result.calls:
        clean_call(call)
        changed |= SURROGATE_REPLACED in call.repairs
    changed |= replace_surrogates_in_errors(result.errors)
    if changed and SURROGATE_REPLACED not in result.repairs:
        result.repairs.append(SURROGATE_REPLACED)
    return result


def clean_call(call: Call) -> None:
    """Replace lone surrogates in a call's arguments (once), naming the repair on the call."""
    try:
        orjson.dumps(call.arguments)  # C speed; fails on a surrogate (or deep nesting)
        return
    except TypeError:
        call.arguments, hit = replace_surrogates_in(call.arguments)
    if hit and SURROGATE_REPLACED not in call.repairs:
        call.repairs.append(SURROGATE_REPLACED)
