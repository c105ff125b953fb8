"""The tool registry: tool definitions checked once, each schema compiled once.

Accepts the OpenAI shape ``{"type": "function", "function": {"name", "description",
"parameters"}}`` and bare ``{"name", "parameters"}`` dicts; ``input_schema`` (and the
``inputSchema`` spelling) are taken as synonyms of ``parameters``. A schema wrapped the way the
Vercel AI SDK serialises its ``jsonSchema()`` helper, ``{"jsonSchema": {...}}`` with no other
schema keyword beside it, is unwrapped.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

from jsonschema import Draft202012Validator
from jsonschema.exceptions import SchemaError
from jsonschema.protocols import Validator
from jsonschema.validators import extend, validator_for
from toolcodec.schema import patterns as schema_regex
from toolcodec.schema.budget import counted
from toolcodec.schema.fast import compile_check
from toolcodec.schema.meta import surely_valid
from toolcodec.schema.refs import SchemaRefError, keywords_per_value

_SCHEMA_KEYS = ("parameters", "input_schema", "inputSchema")
_EMPTY_OBJECT_SCHEMA: dict[str, Any] = {"type": "object", "properties": {}}


class InvalidToolsError(ValueError):
    """A tool definition is unusable. The message names the tool (index and name) and why."""


@dataclass(frozen=True)
class ToolSpec:
    """One registered tool: its name, description, parameter schema and compiled validator.

    ``validator`` is a jsonschema validator for ``schema`` (the draft the schema declares,
    2020-12 by default) whose ``integer`` type accepts only real integers: ``5.0`` is not an
    integer argument, so it gets coerced to ``5`` instead of reaching the tool as a float.
    """

    name: str
    description: str
    schema: dict[str, Any]
    validator: Validator
    # "valid for sure" for schemas in the common subset (``toolcodec.schema.fast``), else None.
    fast_check: Callable[[Any], bool] | None = None
    # The most keywords that apply to one value (``toolcodec.schema.refs``): scales the
    # validation budget (``toolcodec.schema.budget``).
    per_value: int = 1
    # Checks of parts of ``schema`` built by coercion (``toolcodec.schema.coerce``), kept across
    # calls: by the part's canonical JSON, so a part rebuilt on each call is built once.
    part_checks: dict[bytes, Any] = field(default_factory=dict, compare=False, repr=False)


class ToolRegistry:
    """The tools a model may call, by name, in the order they were given."""

    __slots__ = ("_specs",)

    def __init__(self, specs: list[ToolSpec] | None = None) -> None:
        self._specs: dict[str, ToolSpec] = {}
        for spec in specs or ():
            if spec.name in self._specs:
                raise InvalidToolsError(f"duplicate tool name {spec.name!r}")
            self._specs[spec.name] = spec

    @classmethod
    def from_tools(cls, tools: list[dict] | None) -> ToolRegistry:
        """Build a registry from tool definitions; ``None`` gives an empty registry.

        Raises `InvalidToolsError` for a non-list, a non-dict entry, a missing or empty
        name, a duplicate name, or a parameter schema that is not a valid JSON Schema for
        an object.
        """
        if tools is None:
            return cls()
        if not isinstance(tools, list | tuple):
            raise InvalidToolsError(f"tools must be a list, got {type(tools).__name__}")
        specs: list[ToolSpec] = []
        seen: dict[str, int] = {}
        for index, entry in enumerate(tools):
            spec = _parse_tool(index, entry)
            if spec.name in seen:
                raise InvalidToolsError(
                    f"tools[{index}] ({spec.name!r}): duplicate name, "
                    f"already defined by tools[{seen[spec.name]}]"
                )
            seen[spec.name] = index
            specs.append(spec)
        return cls(specs)

    def get(self, name: str) -> ToolSpec | None:
        """Return the tool called *name*, or ``None`` if there is none."""
        return self._specs.get(name)

    def names(self) -> list[str]:
        """Return the registered tool names in definition order."""
        return list(self._specs)

    def __len__(self) -> int:
        return len(self._specs)

    def __iter__(self) -> Iterator[ToolSpec]:
        return iter(self._specs.values())

    def __contains__(self, name: object) -> bool:
        return name in self._specs

    def __repr__(self) -> str:
        return f"ToolRegistry({self.names()!r})"


def _parse_tool(index: int, entry: object) -> ToolSpec:
    where = f"tools[{index}]"
    if not isinstance(entry, dict):
        raise InvalidToolsError(f"{where}: expected an object, got {type(entry).__name__}")
    body = _function_body(where, entry)
    name = body.get("name")
    if not isinstance(name, str) or not name.strip():
        raise InvalidToolsError(f"{where}: 'name' must be a non-empty string, got {name!r:.60}")
    where = f"{where} ({name!r})"
    description = body.get("description") or ""
    if not isinstance(description, str):
        raise InvalidToolsError(f"{where}: 'description' must be a string")
    schema = _schema_of(where, body)
    validator, per_value = _compile_costed(where, schema)
    return ToolSpec(name, description, schema, validator, compile_check(schema), per_value)


def _function_body(where: str, entry: dict) -> dict:
    """The dict holding name/parameters: ``entry["function"]`` in the OpenAI shape."""
    kind = entry.get("type")
    if "function" not in entry:
        if kind not in (None, "function"):
            raise InvalidToolsError(f"{where}: unsupported tool type {kind!r}")
        return entry
    if kind not in (None, "function"):
        raise InvalidToolsError(f"{where}: unsupported tool type {kind!r}")
    body = entry["function"]
    if not isinstance(body, dict):
        raise InvalidToolsError(f"{where}: 'function' must be an object")
    return body


def _schema_of(where: str, body: dict) -> dict | bool:
    for key in _SCHEMA_KEYS:
        if body.get(key) is not None:
            schema = body[key]
            break
    else:
        return dict(_EMPTY_OBJECT_SCHEMA)
    if isinstance(schema, bool):
        return schema  # valid JSON Schema: true accepts any arguments, false none
    schema = _unwrapped(schema)
    if not isinstance(schema, dict):
        raise InvalidToolsError(f"{where}: {key!r} must be a JSON Schema (an object or a "
                                f"boolean), got {type(schema).__name__}")
    declared = schema.get("type")
    if declared is not None and "object" not in (
        declared if isinstance(declared, list) else [declared]
    ):
        raise InvalidToolsError(
            f"{where}: {key!r} must describe an object (arguments are named), got type {declared!r}"
        )
    return schema


def _unwrapped(schema: Any) -> Any:
    """``{"jsonSchema": S}`` (the AI SDK's wrapper, maybe beside its ``validate``) is ``S``."""
    if (isinstance(schema, dict) and isinstance(schema.get("jsonSchema"), dict)
            and set(schema) <= {"jsonSchema", "validate"}):
        return schema["jsonSchema"]
    return schema


_STRICT_CLASSES: dict[type, type] = {}


def _strict_class(base: type) -> type:
    """*base* with an ``integer`` type that excludes floats like ``5.0`` (and booleans), and
    with its regex keywords evaluated by RE2 in linear time (``toolcodec.schema.patterns``)."""
    cls = _STRICT_CLASSES.get(base)
    if cls is None:
        checker = base.TYPE_CHECKER.redefine(
            "integer", lambda _checker, inst: isinstance(inst, int) and not isinstance(inst, bool)
        )
        keywords = {**base.VALIDATORS, **{k: f for k, f in schema_regex.KEYWORDS.items()
                                           if k in base.VALIDATORS}}
        cls = extend(base, validators=counted(keywords), type_checker=checker)
        _STRICT_CLASSES[base] = cls
    return cls


def _compile(where: str, schema: dict | bool) -> Validator:
    return _compile_costed(where, schema)[0]


def _compile_costed(where: str, schema: dict | bool) -> tuple[Validator, int]:
    """The validator, and how many keywords apply to one value at most."""
    # The declared draft decides the keyword meanings (draft-07 ``items: [...]`` differs
    # from 2020-12); 2020-12 when none is declared. No format checker: in 2020-12 ``format``
    # is an annotation, and rejecting a call over a date's spelling would be a guess.
    base = validator_for(schema, default=Draft202012Validator)
    try:
        # The meta-schema walk costs ~1.7 ms a tool; the common subset needs none of it.
        if not (base is Draft202012Validator and surely_valid(schema)):
            base.check_schema(schema)
    except SchemaError as exc:
        pointer = "/" + "/".join(str(p) for p in exc.absolute_path) if exc.absolute_path else ""
        raise InvalidToolsError(
            f"{where}: invalid parameter schema at '{pointer or '/'}': {exc.message:.200}"
        ) from None
    try:
        schema_regex.check_patterns(schema)
    except schema_regex.UnsafePattern as exc:
        raise InvalidToolsError(f"{where}: {exc}") from None
    try:
        per_value = keywords_per_value(schema, base.META_SCHEMA.get("$id") or
                                       base.META_SCHEMA.get("id", ""))
    except SchemaRefError as exc:
        raise InvalidToolsError(f"{where}: invalid parameter schema: {exc}") from None
    return _strict_class(base)(schema), per_value


def compile_schema(where: str, schema: dict | bool) -> Validator:
    """Compile any JSON Schema as parameter schemas are (e.g. a tool's output schema).

    *where* names the schema in the ``InvalidToolsError`` raised when it is invalid.
    """
    return _compile(where, schema)
