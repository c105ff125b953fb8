"""Tool results: check what a tool returned against its output schema, never break the chain.

A tool's output goes back to the model. When the tool declares an output schema (the tool
definition's ``output_schema``, or MCP's ``outputSchema``, or one given separately), the output
is checked in three steps, and the answer says which one held (``mode``):

1. ``structured`` — the output is valid JSON (or already a JSON value) that satisfies the
   schema, unchanged;
2. ``repaired`` — strict reading failed, but ``repair_json`` and schema coercion (the same
   repairs as for call arguments, named in ``repairs``) give a value that satisfies it;
3. ``raw_text`` — nothing validates, or no schema is known: the output is passed on as text,
   so the conversation goes on. ``ok`` is false only when a schema was known and the output
   could not be made to satisfy it; ``errors`` then say why.

The value of ``raw_text`` is the output itself when it is a string, else its JSON text.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

import orjson
from toolcodec.repair.jsonrepair import repair_json
from toolcodec.results.errors import BAD_REQUEST, SCHEMA_VIOLATION, CodecError
from toolcodec.results.limits import DEFAULT_LIMITS, Limits
from toolcodec.scanning.jsonscan import UNQUOTED_VALUE
from toolcodec.schema.coerce import coerce_checked
from toolcodec.schema.tools import InvalidToolsError, ToolSpec, compile_schema

Mode = Literal["structured", "repaired", "raw_text"]
_OUTPUT_KEYS = ("output_schema", "outputSchema")
_MAX_ERRORS = 20


@dataclass(slots=True)
class ToolResultValidation:
    """What ``validate_result`` returns."""

    ok: bool
    mode: Mode
    value: Any
    repairs: list[str] = field(default_factory=list)
    errors: list[CodecError] = field(default_factory=list)

    def to_dict(self) -> dict[str, Any]:
        return {"ok": self.ok, "mode": self.mode, "value": self.value,
                "repairs": list(self.repairs), "errors": [e.to_dict() for e in self.errors]}


class ResultSchemas:
    """Output schemas by tool name, each compiled once.

    ``ResultSchemas.from_tools(tools)`` reads ``output_schema``/``outputSchema`` from OpenAI-
    style or bare tool definitions (tools without one are simply not registered);
    ``ResultSchemas({"name": schema})`` takes them directly. An invalid schema raises
    ``InvalidToolsError`` naming the tool.
    """

    __slots__ = ("_specs",)

    def __init__(self, schemas: dict[str, Any] | None = None) -> None:
        self._specs: dict[str, ToolSpec] = {}
        for name, schema in (schemas or {}).items():
            if not isinstance(name, str) or not name:
                raise InvalidToolsError(f"output schema names must be non-empty strings, "
                                        f"got {name!r:.60}")
            where = f"output schema of {name!r}"
            if not isinstance(schema, dict | bool):
                raise InvalidToolsError(f"{where}: must be a JSON Schema (object or boolean)")
            self._specs[name] = ToolSpec(name, "", schema, compile_schema(where, schema))

    @classmethod
    def from_tools(cls, tools: list[dict] | None) -> ResultSchemas:
        found: dict[str, Any] = {}
        for index, tool in enumerate(tools or []):
            body = tool.get("function", tool) if isinstance(tool, dict) else None
            if not isinstance(body, dict):
                raise InvalidToolsError(f"tools[{index}]: expected an object")
            schema = next((body[k] for k in _OUTPUT_KEYS if body.get(k) is not None), None)
            if schema is not None:
                found[str(body.get("name"))] = schema
        return cls(found)

    def get(self, name: str) -> ToolSpec | None:
        return self._specs.get(name)

    def names(self) -> list[str]:
        return list(self._specs)


def validate_result(tool: str, output: Any, *, schemas: ResultSchemas,
                    limits: Limits = DEFAULT_LIMITS) -> ToolResultValidation:
    """Check one tool's *output* (a string, or a JSON value) against its output schema."""
    spec = schemas.get(tool) if isinstance(tool, str) else None
    text = output if isinstance(output, str) else _dump(output)
    if text is None:
        error = CodecError(BAD_REQUEST, f"the output of {tool!r} is not JSON data "
                           f"({type(output).__name__})", {"tool": str(tool)})
        return ToolResultValidation(False, "raw_text", repr(output)[:limits.max_chars], [],
                                    [error])
    if spec is None:
        return ToolResultValidation(True, "raw_text", text)
    value, strict = _strict_value(output)
    if strict and spec.validator.is_valid(value):
        return ToolResultValidation(True, "structured", value)
    repaired, repairs, errors = _repaired(spec, output, value, strict, limits)
    if not errors:
        return ToolResultValidation(True, "repaired", repaired, repairs)
    return ToolResultValidation(False, "raw_text", text, [], errors)


def _strict_value(output: Any) -> tuple[Any, bool]:
    if not isinstance(output, str):
        return output, True
    try:
        return orjson.loads(output), True
    except orjson.JSONDecodeError:
        return None, False


def _repaired(spec: ToolSpec, output: Any, value: Any, strict: bool,
              limits: Limits) -> tuple[Any, list[str], list[CodecError]]:
    repairs: list[str] = []
    if not strict:
        res = repair_json(output, limits=limits)
        if not res.ok and spec.validator.is_valid(output):  # prose, for a string schema
            return output, [UNQUOTED_VALUE], []
        if not res.ok:
            return None, [], [_tagged(e, spec.name) for e in res.errors[:_MAX_ERRORS]]
        value, repairs = res.value, list(res.repairs)
    try:
        value, found, valid = coerce_checked(spec, value)
    except RecursionError:
        valid, found = False, []
    repairs += [r for r in found if r not in repairs]
    if valid or spec.validator.is_valid(value):
        return value, repairs, []
    problems = sorted(spec.validator.iter_errors(value), key=lambda e: list(map(str, e.path)))
    return None, [], [_violation(spec.name, e) for e in problems[:_MAX_ERRORS]]


def _violation(tool: str, error: Any) -> CodecError:
    pointer = "".join("/" + str(p).replace("~", "~0").replace("/", "~1")
                      for p in error.absolute_path)
    return CodecError(SCHEMA_VIOLATION, f"{pointer or '(output)'}: {error.message[:300]}",
                      {"path": pointer, "tool": tool, "validator": str(error.validator)})


def _tagged(error: CodecError, tool: str) -> CodecError:
    return CodecError(error.code, error.message, {**error.details, "tool": tool})


def _dump(value: Any) -> str | None:
    try:
        return orjson.dumps(value).decode()
    except TypeError:
        return None
