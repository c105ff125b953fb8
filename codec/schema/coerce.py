"""Schema-guided coercion of tool arguments: fix what the schema makes unambiguous.

The walk follows the schema alongside the value. Where a value already fits its schema it is
left alone, whatever it holds (``"**Warning**"`` stays). Where it does not, the conversions the
schema asks for are tried (``"5"`` -> ``5`` for an integer, ``"true"`` -> ``True`` for a
boolean, ``3`` -> ``[3]`` for an array, ...); one is applied only when exactly one distinct
result is possible, otherwise the value stays and validation reports it. Nothing is guessed:
``"yes"`` is not a boolean, ``"1,000"`` is not a number, a case-insensitive enum match must be
unique. Every applied change names its repair id; ``docs/repairs-schema.md`` lists them.
"""

from __future__ import annotations

import math
import re
import unicodedata
from dataclasses import dataclass, field
from typing import Any

import orjson
from toolcodec.results.limits import DEFAULT_LIMITS, Limits
from toolcodec.schema import patterns as schema_regex
from toolcodec.schema.fast import all_strings, compile_check, is_json_data
from toolcodec.schema.tools import ToolSpec

COERCE_INTEGER = "schema.coerce_integer"
COERCE_NUMBER = "schema.coerce_number"
COERCE_BOOLEAN = "schema.coerce_boolean"
COERCE_NULL = "schema.coerce_null"
COERCE_STRING = "schema.coerce_string"
COERCE_ENUM = "schema.coerce_enum"
WRAP_ARRAY = "schema.wrap_array"
DECODE_JSON_STRING = "schema.decode_json_string"
DECODE_ESCAPED_JSON = "schema.decode_escaped_json"  # a JSON text escaped once more
MARKDOWN_EMPHASIS = "json.markdown_emphasis"
_MAX_PART_CHECKS = 512  # per tool: far more parts than a schema has, and merged unions
NFKC = "text.nfkc"

_NO = object()  # "this conversion does not apply"; None is a real value (JSON null)

_INT64_MIN, _INT64_MAX = -(2**63), 2**63 - 1  # integers every JSON encoder here carries
_INTEGER_RE = re.compile(r"[+-]?[0-9]+(?:\.0+)?")
_NUMBER_RE = re.compile(r"[+-]?(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:[eE][+-]?[0-9]+)?")
# A whole string in *...* or **...**: inner part non-empty, free of '*', not space-padded.
_EMPHASIS_RE = re.compile(r"(\*\*?)([^*\s](?:[^*]*[^*\s])?)\1", re.DOTALL)
_MAX_REF_HOPS = 32
# Repairs after which the decoded value is not the whole string's meaning (cut off, text or
# values dropped, an elision): a free-text argument must not be traded for a fragment of it.
_LOSSY = frozenset(
    {
        "json.unclosed",
        "json.surrounding_text",
        "json.dangling_key_dropped",
        "json.ellipsis",
    }
)


def coerce_arguments(
    spec: ToolSpec, arguments: dict, *, text_values: bool = False,
    limits: Limits = DEFAULT_LIMITS,
) -> tuple[dict, list[str]]:
    """Coerce *arguments* towards ``spec.schema``; return ``(arguments, repair ids)``.

    Arguments that already validate come back unchanged (the same object) with no repairs.
    Markdown emphasis around a whole string is undone only where the string does not fit
    and the bare one does (``"**high**"`` for an enum of ``"high"``). With *text_values*
    the values came from XML text, where every value is a string: turning ``"5"`` into the
    integer the schema wants is then the format's meaning, not a repair, so the
    ``schema.coerce_*`` and ``schema.decode_json_string`` ids are not reported (other ids are).

    The input is never mutated; changed containers are copies.
    """
    value, repairs, _valid = coerce_checked(spec, arguments, text_values=text_values,
                                            limits=limits)
    return value, repairs


def coerce_checked(
    spec: ToolSpec, arguments: Any, *, text_values: bool = False,
    limits: Limits = DEFAULT_LIMITS,
) -> tuple[Any, list[str], bool]:
    """Like `coerce_arguments`, also saying whether the result is known to validate.

    The third item is ``True`` only when validity was established on the way (the fast
    path); ``False`` means "not checked", so the caller should validate.
    """
    ctx = _Context(spec, text_values, limits=limits)
    try:
        if text_values:
            arguments = _null_texts(arguments, spec.schema, ctx)
        fast = spec.fast_check
        # On JSON data the fast check's "no" is jsonschema's too (toolcodec.schema.fast)
        ctx.plain = fast is not None and is_json_data(arguments)
        if (fast is not None and fast(arguments)) or (
                not ctx.plain and spec.validator.is_valid(arguments)):
            return arguments, [], True
        coerced = _coerce_flat(arguments, spec, ctx) if ctx.plain else _NO
        if coerced is _NO:
            coerced = _coerce(arguments, spec.schema, ctx)
        return coerced, ctx.repairs, fast is not None and fast(coerced)
    except RecursionError:  # absurdly deep input: leave it for validation to report
        return arguments, [], False


@dataclass
class _Context:
    """State of one coercion walk: the tool, the mode, and the repairs made so far."""

    spec: ToolSpec
    text_values: bool
    repairs: list[str] = field(default_factory=list)
    _validators: dict[int, tuple[Any, Any]] = field(default_factory=dict)
    limits: Limits = DEFAULT_LIMITS
    plain: bool = False  # the arguments are JSON data (toolcodec.schema.fast.is_json_data)

    def note(self, repair: str) -> None:
        if repair not in self.repairs:
            self.repairs.append(repair)

    def note_all(self, repairs: list[str]) -> None:
        for repair in repairs:
            self.note(repair)

    def fork(self) -> _Context:
        """A context for a tentative walk whose repairs are kept only if it is chosen."""
        return _Context(self.spec, self.text_values, [], self._validators, self.limits,
                        self.plain)

    def fits(self, value: Any, schema: Any) -> bool:
        """Does *value* validate against *schema* (a part of the tool's schema)?"""
        if schema is True or schema == {}:
            return True
        if schema is False:
            return False
        validator, fast = self._checks(schema)
        if fast is not None:  # jsonschema's answer at a fraction of its cost, on JSON data
            if fast(value):
                return True
            if self.plain:  # what coercion builds from JSON data is JSON data
                return False
        return validator.is_valid(value)

    def _checks(self, schema: Any) -> tuple[Any, Any]:
        """The validator and the fast check (or None) of a part of the tool's schema."""
        cached = self._validators.get(id(schema))
        if cached is not None and cached[0] is schema:
            return cached[1]
        parts = self.spec.part_checks
        try:
            key = orjson.dumps(schema, option=orjson.OPT_SORT_KEYS)
        except TypeError:  # not JSON data (a Python caller's schema): this call only
            key = None
        checks = parts.get(key) if key is not None else None
        if checks is None:
            # evolve keeps the root's reference resolver, so local $refs still resolve
            checks = (self.spec.validator.evolve(schema=schema), compile_check(schema))
            if key is not None and len(parts) < _MAX_PART_CHECKS:
                parts[key] = checks
        self._validators[id(schema)] = (schema, checks)
        return checks

    def resolve(self, schema: Any) -> Any:
        """Follow local ``$ref`` (``#/$defs/...``, ``#/definitions/...``) to a schema."""
        for _ in range(_MAX_REF_HOPS):
            if not isinstance(schema, dict):
                return schema
            ref = schema.get("$ref")
            if not isinstance(ref, str) or not ref.startswith("#/") and ref != "#":
                return schema
            target = _follow_pointer(self.spec.schema, ref[1:])
            if target is None:
                return schema
            rest = {k: v for k, v in schema.items() if k != "$ref"}
            schema = {**target, **rest} if rest and isinstance(target, dict) else target
        return schema


def _follow_pointer(root: Any, pointer: str) -> Any:
    node = root
    for raw in pointer.split("/")[1:]:
        part = raw.replace("~1", "/").replace("~0", "~")
        if isinstance(node, dict) and part in node:
            node = node[part]
        elif isinstance(node, list) and part.isdigit() and int(part) < len(node):
            node = node[int(part)]
        else:
            return None
    return node


# --- flat tools: text values of scalar parameters ----------------------------------------

# Where a tool's flat plan is kept: beside the checks of its schema's parts
# (``ToolSpec.part_checks``, keyed by canonical JSON, which this never is).
_FLAT_KEY = b"(flat)"
_NOT_FLAT = object()
_SCALAR_KEYS = frozenset({"type", "description", "title"})
_ROOT_WALK_KEYS = frozenset({"$ref", "anyOf", "oneOf", "allOf"})


def _flat_plan(spec: ToolSpec) -> dict[str, Any] | None:
    """``{parameter: the converter its text goes through, None for a string}`` when the
    tool's schema is an object whose parameters are each described by one scalar type (and
    words: ``description``, ``title``); None otherwise. Kept on the spec."""
    plan = spec.part_checks.get(_FLAT_KEY)
    if plan is None:
        plan = _NOT_FLAT
        schema = spec.schema
        props = schema.get("properties") if isinstance(schema, dict) else None
        if isinstance(props, dict) and props and not _ROOT_WALK_KEYS & schema.keys() \
                and schema.get("type", "object") == "object":
            plan = {}
            for name, sub in props.items():
                kind = sub.get("type") if isinstance(sub, dict) else None
                if kind not in ("string", "integer", "number", "boolean") \
                        or not sub.keys() <= _SCALAR_KEYS:
                    plan = _NOT_FLAT
                    break
                plan[name] = None if kind == "string" else _CONVERTERS[kind]
        spec.part_checks[_FLAT_KEY] = plan
    return None if plan is _NOT_FLAT else plan


def _coerce_flat(arguments: Any, spec: ToolSpec, ctx: _Context) -> Any:
    """What ``_coerce`` makes of *arguments* that do not validate, for a flat tool whose
    arguments are all text of its own parameters (XML values, quoted numbers): each goes
    through its type's converter, as the walk would take it (the one candidate, kept whether
    or not it fits), without the walk's look-ups and checks. ``_NO`` for anything else."""
    plan = _flat_plan(spec)
    if plan is None or type(arguments) is not dict or not plan.keys() >= arguments.keys() \
            or not all_strings(arguments.values()):
        return _NO
    out: dict | None = None
    props = spec.schema["properties"]
    for i, (key, value) in enumerate(arguments.items()):
        convert = plan[key]
        new = value
        if convert is not None:  # else a string parameter: text fits as it is
            repairs: list[str] = []
            new = convert(value, props[key], ctx, repairs)
            if new is _NO:
                new = value
            else:
                ctx.note_all(repairs)
        if out is None and new is not value:
            out = dict(list(arguments.items())[:i])
        if out is not None:
            out[key] = new
    return arguments if out is None else out


# --- the coercion walk ------------------------------------------------------------------


def _coerce(value: Any, schema: Any, ctx: _Context) -> Any:
    schema = ctx.resolve(schema)
    if schema is True:
        return value  # anything goes
    if not isinstance(schema, dict):
        return value  # a `false` schema: nothing can fit, so nothing to steer by
    if ctx.fits(value, schema):
        return value  # valid as it is: never changed
    for key in ("anyOf", "oneOf"):
        if isinstance(schema.get(key), list):
            return _coerce_union(value, schema, key, ctx)
    if isinstance(schema.get("allOf"), list):
        return _coerce(value, _merge_all_of(schema, ctx), ctx)
    types = _types(schema)
    if isinstance(value, dict) and (not types or "object" in types):
        return _coerce_object(value, schema, ctx)
    if isinstance(value, list) and (not types or "array" in types):
        return _coerce_array(value, schema, ctx)
    return _convert(value, schema, types, ctx)


def _coerce_union(value: Any, schema: dict, key: str, ctx: _Context) -> Any:
    """Try each branch; keep the result only if exactly one distinct result validates."""
    base = {k: v for k, v in schema.items() if k != key}
    found: dict[str, tuple[Any, list[str]]] = {}
    for branch in schema[key]:
        branch = ctx.resolve(branch)
        if not isinstance(branch, dict):
            continue
        trial = ctx.fork()
        new = _coerce(value, {**base, **branch}, trial)
        if new is not value and ctx.fits(new, schema):
            found.setdefault(_identity(new), (new, trial.repairs))
    if len(found) != 1:
        return value
    new, repairs = next(iter(found.values()))
    ctx.note_all(repairs)
    return new


def _merge_all_of(schema: dict, ctx: _Context) -> dict:
    """Flatten ``allOf`` into one schema for steering (validation still sees the original)."""
    merged = {k: v for k, v in schema.items() if k != "allOf"}
    for part in schema["allOf"]:
        part = ctx.resolve(part)
        if not isinstance(part, dict):
            continue
        for k, v in part.items():
            if k == "properties" and isinstance(merged.get(k), dict) and isinstance(v, dict):
                merged[k] = {**merged[k], **v}
            else:
                merged.setdefault(k, v)
    return merged


def _types(schema: dict) -> list[str]:
    """The JSON types a schema wants, declared or implied by its keywords."""
    declared = schema.get("type")
    if isinstance(declared, str):
        return [declared]
    if isinstance(declared, list):
        return [t for t in declared if isinstance(t, str)]
    members = _enum_members(schema)
    if members is not None:
        return list(dict.fromkeys(_json_type(m) for m in members))
    if any(k in schema for k in ("properties", "additionalProperties", "required")):
        return ["object"]
    if any(k in schema for k in ("items", "prefixItems")):
        return ["array"]
    return []


def _enum_members(schema: dict) -> list | None:
    if "const" in schema:
        return [schema["const"]]
    enum = schema.get("enum")
    return enum if isinstance(enum, list) else None


def _json_type(value: Any) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    if isinstance(value, str):
        return "string"
    return "array" if isinstance(value, list) else "object"


def _coerce_object(value: dict, schema: dict, ctx: _Context) -> dict:
    props = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
    out: dict | None = None
    for i, (key, item) in enumerate(value.items()):
        sub = _property_schema(key, props, schema)
        new = item if sub is None else _coerce(item, sub, ctx)
        if out is None and new is not item:
            out = dict(list(value.items())[:i])
        if out is not None:
            out[key] = new
    return value if out is None else out


def _property_schema(key: Any, props: dict, schema: dict) -> Any:
    if key in props:
        return props[key]
    patterns = schema.get("patternProperties")
    if isinstance(patterns, dict) and isinstance(key, str):
        for pattern, sub in patterns.items():
            if schema_regex.search(pattern, key):  # compiled when the tools were registered
                return sub
    extra = schema.get("additionalProperties", True)
    if extra is False:
        return None
    return {} if extra is True else extra


def _coerce_array(value: list, schema: dict, ctx: _Context) -> list:
    out: list | None = None
    for i, item in enumerate(value):
        sub = _item_schema(i, schema)
        new = item if sub is None else _coerce(item, sub, ctx)
        if out is None and new is not item:
            out = value[:i]
        if out is not None:
            out.append(new)
    return value if out is None else out


def _item_schema(index: int, schema: dict) -> Any:
    prefix, rest = schema.get("prefixItems"), schema.get("items", True)
    if isinstance(rest, list):  # draft-07 tuple form
        prefix, rest = rest, schema.get("additionalItems", True)
    if isinstance(prefix, list) and index < len(prefix):
        return prefix[index]
    if rest is False:
        return None
    return {} if rest is True else rest


# --- scalar conversions -----------------------------------------------------------------


def _convert(value: Any, schema: dict, types: list[str], ctx: _Context) -> Any:
    """Try every conversion the schema allows; apply the one unambiguous result."""
    candidates: dict[str, tuple[Any, list[str]]] = {}
    for kind in types:
        converter = _CONVERTERS.get(kind)
        if converter is None:
            continue
        repairs: list[str] = []
        new = converter(value, schema, ctx, repairs)
        if new is not _NO:
            candidates.setdefault(_identity(new), (new, repairs))
    if isinstance(value, str) and _enum_members(schema) is not None:
        repairs = []
        new = _match_enum(value, schema, repairs)
        if new is not _NO:
            candidates.setdefault(_identity(new), (new, repairs))
    chosen = _choose(list(candidates.values()), schema, ctx)
    if chosen is None:
        return value
    ctx.note_all(chosen[1])
    return chosen[0]


def _choose(candidates: list, schema: dict, ctx: _Context) -> tuple[Any, list[str]] | None:
    """The one candidate that validates; else the only candidate (its type is right and
    validation will name the remaining problem precisely); else none."""
    fitting = [c for c in candidates if ctx.fits(c[0], schema)]
    if len(fitting) == 1:
        return fitting[0]
    if not fitting and len(candidates) == 1:
        return candidates[0]
    return None


def _folded(text: str, repairs: list[str]) -> str:
    """NFKC form of a string about to become a number, boolean or enum member."""
    if text.isascii() or unicodedata.is_normalized("NFKC", text):
        return text
    repairs.append(NFKC)
    return unicodedata.normalize("NFKC", text)


def _format_change(repair: str, ctx: _Context, repairs: list[str]) -> None:
    """Record a type change of text, unless the text came from XML (then it is no repair)."""
    if not ctx.text_values:
        repairs.append(repair)


def _to_integer(value: Any, schema: dict, ctx: _Context, repairs: list[str]) -> Any:
    if isinstance(value, float):
        if math.isfinite(value) and value.is_integer() and _INT64_MIN <= value <= _INT64_MAX:
            repairs.append(COERCE_INTEGER)
            return int(value)
        return _NO  # an integer no JSON encoder carries exactly stays as it was
    if not isinstance(value, str):
        return _NO
    text = _folded(value, repairs).strip()
    if not _INTEGER_RE.fullmatch(text):
        return _NO
    try:
        number = int(text.split(".")[0])
    except ValueError:  # more digits than int() will take
        return _NO
    if not _INT64_MIN <= number <= _INT64_MAX:
        return _NO
    _format_change(COERCE_INTEGER, ctx, repairs)
    return number


def _to_number(value: Any, schema: dict, ctx: _Context, repairs: list[str]) -> Any:
    if not isinstance(value, str):
        return _NO
    text = _folded(value, repairs).strip()
    if not _NUMBER_RE.fullmatch(text):
        return _NO
    try:
        number: int | float = int(text) if text.lstrip("+-").isdigit() else float(text)
    except ValueError:
        return _NO
    if isinstance(number, float) and not math.isfinite(number):
        return _NO  # "1e999" would become inf, which JSON cannot carry
    _format_change(COERCE_NUMBER, ctx, repairs)
    return number


def _to_boolean(value: Any, schema: dict, ctx: _Context, repairs: list[str]) -> Any:
    if not isinstance(value, str):
        return _NO  # 1/0 are not booleans: never guess one
    text = _folded(value, repairs).strip().lower()
    if text not in ("true", "false"):
        return _NO
    _format_change(COERCE_BOOLEAN, ctx, repairs)
    return text == "true"


def _to_null(value: Any, schema: dict, ctx: _Context, repairs: list[str]) -> Any:
    if not isinstance(value, str) or _folded(value, repairs).strip().lower() != "null":
        return _NO
    _format_change(COERCE_NULL, ctx, repairs)
    return None


def _null_texts(arguments: Any, schema: Any, ctx: _Context) -> Any:
    """XML text ``null`` is JSON null where the parameter's schema admits null, even where a
    string would fit too: a tag cannot write null any other way (Qwen3-Coder's own parser
    reads it so). Only the parameters themselves are text; nested values are JSON."""
    if type(arguments) is dict and all_strings(arguments.values()) \
            and "null" not in "".join(arguments.values()):
        return arguments  # no text reads null (most calls): nothing to look up
    schema = ctx.resolve(schema)
    if not isinstance(arguments, dict) or not isinstance(schema, dict):
        return arguments
    props = schema.get("properties") if isinstance(schema.get("properties"), dict) else {}
    out = None
    for key, value in arguments.items():
        if isinstance(value, str) and value.strip() == "null":
            sub = _property_schema(key, props, schema)
            if sub not in (None, {}, True) and ctx.fits(None, ctx.resolve(sub)):
                out = dict(arguments) if out is None else out
                out[key] = None
    return arguments if out is None else out


def _to_string(value: Any, schema: dict, ctx: _Context, repairs: list[str]) -> Any:
    if isinstance(value, str):
        inner = _emphasis_inner(value)
        if inner is None:
            return _NO
        repairs.append(MARKDOWN_EMPHASIS)
        return inner
    if isinstance(value, bool):
        repairs.append(COERCE_STRING)
        return "true" if value else "false"
    if isinstance(value, int):
        repairs.append(COERCE_STRING)
        return str(value)
    if isinstance(value, float) and math.isfinite(value):
        repairs.append(COERCE_STRING)
        return orjson.dumps(value).decode()  # JSON spelling: 1e+20 -> "1e+20", 2.5 -> "2.5"
    return _NO


def _to_array(value: Any, schema: dict, ctx: _Context, repairs: list[str]) -> Any:
    if isinstance(value, str) and value.lstrip().startswith("["):
        decoded = _decode_json(value, list, ctx, repairs)
        if decoded is _NO:
            return _NO  # looks like a broken array: wrapping it would hide the problem
        return _coerce_into(decoded, schema, ctx, repairs)
    if value is None or isinstance(value, dict | list):
        return _NO
    repairs.append(WRAP_ARRAY)
    return _coerce_into([value], schema, ctx, repairs)


def _to_object(value: Any, schema: dict, ctx: _Context, repairs: list[str]) -> Any:
    if not isinstance(value, str) or not value.lstrip().startswith("{"):
        return _NO
    decoded = _decode_json(value, dict, ctx, repairs)
    if decoded is _NO:
        return _NO
    return _coerce_into(decoded, schema, ctx, repairs)


def _coerce_into(container: Any, schema: dict, ctx: _Context, repairs: list[str]) -> Any:
    """Coerce a freshly built container's children, collecting their repairs in *repairs*."""
    trial = ctx.fork()
    out = _coerce(container, schema, trial)
    repairs.extend(trial.repairs)
    return out


def _decode_json(text: str, kind: type, ctx: _Context, repairs: list[str]) -> Any:
    """Decode a JSON object/array held in a string (repairing it if need be)."""
    value, found = _read_escaped(text, ctx), [DECODE_ESCAPED_JSON]
    if not isinstance(value, kind):  # not escaped JSON of that kind: read the text as it is
        try:
            from toolcodec.repair.jsonrepair import repair_json
        except ImportError:  # the repairer is optional here: fall back to strict JSON
            try:
                value, found = orjson.loads(text), []
            except orjson.JSONDecodeError:
                return _NO
        else:
            result = repair_json(text, limits=ctx.limits)
            if not result.ok or result.errors or _LOSSY.intersection(result.repairs):
                return _NO
            value, found = result.value, list(result.repairs)
    if not isinstance(value, kind):
        return _NO
    repairs.extend(found)
    _format_change(DECODE_JSON_STRING, ctx, repairs)
    return value


def _read_escaped(text: str, ctx: _Context) -> Any:
    """``[{\\"id\\": 1}]``: JSON escaped once more, as a server that encoded the output twice
    sends it. Read when the text holds ``\\"``, is the body of a JSON string literal, and that
    string is strict JSON within the limits (``_NO`` otherwise): one unescape, one parse. Valid
    JSON never qualifies: its first string opens with a quote with no backslash before it, which
    would end the literal."""
    if '\\"' not in text or len(text) > ctx.limits.max_chars:
        return _NO
    try:
        inner = orjson.loads(f'"{text}"')  # fails at once on a raw quote or a bad escape
        value = orjson.loads(inner)
    except orjson.JSONDecodeError:
        return _NO
    from toolcodec.repair.jsonrepair import depth_exceeds

    return _NO if depth_exceeds(inner, value, ctx.limits.max_depth) else value


def _match_enum(value: str, schema: dict, repairs: list[str]) -> Any:
    """Match a string to a string enum member by emphasis, NFKC, then a unique case fold."""
    members = [m for m in _enum_members(schema) or () if isinstance(m, str)]
    inner = _emphasis_inner(value)
    if inner is not None:
        repairs.append(MARKDOWN_EMPHASIS)
        value = inner
    if value in members:
        return value
    folded = _folded(value, repairs)
    if folded in members:
        return folded
    matches = [m for m in members if m.casefold() == folded.casefold()]
    if len(matches) != 1:
        return _NO  # no match, or ambiguous ("a" vs "A"): refuse
    repairs.append(COERCE_ENUM)
    return matches[0]


_CONVERTERS = {
    "integer": _to_integer,
    "number": _to_number,
    "boolean": _to_boolean,
    "null": _to_null,
    "string": _to_string,
    "array": _to_array,
    "object": _to_object,
}


def _identity(value: Any) -> str:
    """A key telling distinct JSON values apart (unlike ==, which has 1 == 1.0 == True)."""
    try:
        return orjson.dumps(value, option=orjson.OPT_SORT_KEYS).decode()
    except (TypeError, orjson.JSONEncodeError):
        return repr(value)


# --- markdown emphasis ------------------------------------------------------------------


def _emphasis_inner(text: str) -> str | None:
    if not text.startswith("*"):
        return None
    match = _EMPHASIS_RE.fullmatch(text)
    return match.group(2) if match else None
