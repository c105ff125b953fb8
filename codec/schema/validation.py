"""Check a tool call's arguments: known tool, JSON object, normalised, coerced, schema-valid."""

from __future__ import annotations

from typing import Any

import orjson
from toolcodec.repair.jsonrepair import repair_json
from toolcodec.repair.normalize import NestingTooDeep, normalize_payload
from toolcodec.results.errors import (
    ARITHMETIC_EXPRESSION,
    INTERNAL_ERROR,
    INVALID_JSON,
    NESTING_TOO_DEEP,
    SCHEMA_VIOLATION,
    UNKNOWN_TOOL,
    CodecError,
    json_kind,
)
from toolcodec.results.limits import DEFAULT_LIMITS, Limits
from toolcodec.results.result import ValidationResult, encodable_validation, encodable_value
from toolcodec.scanning.jsonscan import is_arithmetic
from toolcodec.schema.budget import TooCostly, spending, steps_for
from toolcodec.schema.coerce import DECODE_JSON_STRING, coerce_checked
from toolcodec.schema.tools import ToolRegistry, ToolSpec
from toolcodec.schema.valid import compile_valid

_MAX_ERRORS = 50  # one bad array of 10 000 items must not yield 10 000 errors
_MAX_VALUE_REPR = 80
_MAX_MESSAGE = 300
_MAX_LISTED_TOOLS = 10
_MAX_EXPRESSION = 200  # longer text is not looked at as arithmetic
# Where a tool's one-walk check (`toolcodec.schema.valid`) is kept: beside the checks of its
# schema's parts (`ToolSpec.part_checks`, keyed by canonical JSON, which this never is).
_VALID_KEY = b"(valid)"
_NO_CHECK = object()  # the schema is outside the one-walk subset


def check_arguments(spec: ToolSpec, arguments: object) -> list[CodecError]:
    """Validate *arguments* against ``spec``'s schema; one ``schema_violation`` per problem.

    Errors are sorted by JSON path. Each carries ``path`` (a JSON Pointer, ``""`` for the
    arguments object itself), ``tool`` and ``validator`` (the failing schema keyword); the
    first also carries ``arguments``, the arguments as read and checked, so that a retry
    prompt or a UI can show what the model tried (once: a call's arguments are not copied
    into each of its errors). Values quoted in messages are truncated, so a huge argument
    cannot flood a log.
    """
    fast = spec.fast_check  # "valid for sure" costs a fraction of a jsonschema walk
    if fast is not None and fast(arguments):
        return []
    found = sorted(spec.validator.iter_errors(arguments), key=_error_order)
    errors = [_violation(spec.name, e) for e in found[:_MAX_ERRORS]]
    if errors:
        errors[0] = _with_arguments(errors[0], arguments)
    if len(found) > _MAX_ERRORS:
        errors.append(
            CodecError(
                SCHEMA_VIOLATION,
                f"{len(found) - _MAX_ERRORS} more schema violations not listed",
                {"path": "", "tool": spec.name, "validator": "truncated"},
            )
        )
    return errors


def validate_call(
    registry: ToolRegistry,
    name: str,
    arguments: object,
    *,
    text_values: bool = False,
    nfkc_strings: bool = False,
    limits: Limits = DEFAULT_LIMITS,
) -> ValidationResult:
    """Validate one call of tool *name*, repairing what can be repaired without guessing.

    Steps: the tool must be registered (``unknown_tool``); string arguments are decoded as
    (possibly malformed) JSON; ``None`` and ``""`` mean no arguments; anything but an object
    is a ``schema_violation``; then `normalize_payload`, `coerce_arguments` and
    `check_arguments`. The result holds the coerced arguments even when they are invalid,
    so the caller sees what was checked. ``ok`` is true iff there are no errors.
    *text_values* and *nfkc_strings* are passed on to coercion and normalisation; *limits*
    bounds the nesting depth and any JSON string decoded here.

    Never raises, whatever *arguments* hold: the result always encodes as JSON
    (`encodable_validation`), a check that spends its budget (`toolcodec.schema.budget`) is a
    ``schema_violation``, and any exception (a ``BaseException`` too, such as a Rust
    extension's ``PanicException``; only ``KeyboardInterrupt``, ``SystemExit`` and
    ``GeneratorExit`` propagate) is an ``internal_error``.

    Arguments that need nothing of this (JSON data, clean, valid by a schema in the common
    subset) are proven so in one walk and returned as they are (`toolcodec.schema.valid`).
    """
    if type(arguments) is dict and not nfkc_strings and type(name) is str:
        spec = registry.get(name)
        try:
            if spec is not None and _surely_valid(spec, arguments, text_values, limits):
                return ValidationResult(True, arguments, [], [])
        except Exception:  # noqa: BLE001 - e.g. a schema nested past the stack: the full path
            pass
    return full_validation(registry, name, arguments, text_values=text_values,
                           nfkc_strings=nfkc_strings, limits=limits)


def full_validation(registry: ToolRegistry, name: str, arguments: object, *,
                    text_values: bool, nfkc_strings: bool, limits: Limits) -> ValidationResult:
    """`validate_call` without its one-walk shortcut: every step, whatever the arguments."""
    arguments, repairs, foreign = _json_arguments(arguments)
    try:
        result = _validate_call(registry, name, arguments, text_values=text_values,
                                nfkc_strings=nfkc_strings, limits=limits)
    except (KeyboardInterrupt, SystemExit, GeneratorExit):
        raise
    except BaseException as exc:  # noqa: BLE001 - a bug or a panic must not reach the caller
        error = CodecError(INTERNAL_ERROR, f"validation of {_short(repr(name))} failed: "
                           f"{type(exc).__name__}: {_short(str(exc), _MAX_MESSAGE)}",
                           {"tool": _short(str(name)), "exception": type(exc).__name__})
        result = ValidationResult(False, arguments, [], [error])
    if repairs or foreign:
        result.repairs[:0] = [r for r in repairs if r not in result.repairs]
        result.errors.extend(foreign)
        result.ok = result.ok and not foreign
    return encodable_validation(result)


def _surely_valid(spec: ToolSpec, arguments: dict, text_values: bool, limits: Limits) -> bool:
    """Whether the full path would return ``arguments`` themselves, valid, with no repair."""
    check = spec.part_checks.get(_VALID_KEY)
    if check is None:
        check = compile_valid(spec.schema)
        spec.part_checks[_VALID_KEY] = check = _NO_CHECK if check is None else check
    if check is _NO_CHECK or not check(arguments, limits.max_depth):
        return False
    # XML text `null` may become null (toolcodec.schema.coerce): such a call takes the full path
    return not text_values or not any(type(v) is str and v.strip() == "null"
                                      for v in arguments.values())


def _json_arguments(arguments: object) -> tuple[Any, list[str], list[CodecError]]:
    """*arguments* as values JSON carries, before the schema judges them (a Python caller may
    pass integers past 64 bits, lone surrogates, bytes...): the repairs that made them so and
    a ``schema_violation`` for each value no JSON could carry."""
    try:
        orjson.dumps(arguments)  # C speed: the common case is already JSON
        return arguments, [], []
    except TypeError:
        arguments, repairs, foreign = encodable_value(arguments)
    errors = [CodecError(SCHEMA_VIOLATION,
                         f"{pointer or '(arguments)'}: a Python {kind} is not a JSON value",
                         {"path": pointer, "validator": "type"})
              for pointer, kind in foreign[:_MAX_ERRORS]]
    return arguments, repairs, errors


def _validate_call(registry: ToolRegistry, name: str, arguments: object, *,
                   text_values: bool, nfkc_strings: bool, limits: Limits) -> ValidationResult:
    spec = registry.get(name) if isinstance(name, str) else None
    if spec is None:
        return ValidationResult(False, arguments, [], [_unknown_tool(registry, name)])
    repairs: list[str] = []
    arguments, error = _as_object(spec, arguments, repairs, limits)
    if error is not None:
        return ValidationResult(False, arguments, repairs, [error])
    try:
        arguments, found = normalize_payload(
            arguments, nfkc_strings=nfkc_strings, max_depth=limits.max_depth
        )
        _extend(repairs, found)
        with spending(steps_for(arguments, spec.per_value)):
            arguments, found, valid = coerce_checked(spec, arguments, text_values=text_values,
                                                     limits=limits)
            _extend(repairs, found)
            errors = [] if valid else check_arguments(spec, arguments)
    except TooCostly:
        error = CodecError(
            SCHEMA_VIOLATION,
            f"arguments of {spec.name!r} could not be checked: its schema's subschemas branch "
            "too much for a value this deep (the check's budget is spent)",
            {"path": "", "tool": spec.name, "validator": "cost_limit"},
        )
        return ValidationResult(False, arguments, repairs, [error])
    except (NestingTooDeep, RecursionError):
        error = CodecError(
            NESTING_TOO_DEEP,
            f"arguments of {spec.name!r} nest deeper than {limits.max_depth} levels",
            {"tool": spec.name, "limit": limits.max_depth},
        )
        return ValidationResult(False, arguments, repairs, [error])
    return ValidationResult(not errors, arguments, repairs, errors)


def _as_object(
    spec: ToolSpec, arguments: object, repairs: list[str], limits: Limits
) -> tuple[Any, CodecError | None]:
    """The arguments as a dict (decoding a JSON string), or an error saying why not."""
    if arguments is None or (isinstance(arguments, str) and not arguments.strip()):
        return {}, None
    if isinstance(arguments, str):
        decoded, error = _decode(spec, arguments, repairs, limits)
        if error is not None:
            return arguments, error
        arguments = decoded
    if not isinstance(arguments, dict):
        return arguments, CodecError(
            SCHEMA_VIOLATION,
            f"arguments of {spec.name!r} must be a JSON object, got {json_kind(arguments)}",
            {"path": "", "tool": spec.name, "validator": "type", "arguments": arguments},
        )
    return arguments, None


def _decode(spec: ToolSpec, text: str, repairs: list[str],
            limits: Limits) -> tuple[Any, CodecError | None]:
    result = repair_json(text, limits=limits)
    if not result.ok:
        errors = result.errors or [
            CodecError(INVALID_JSON, f"arguments of {spec.name!r} could not be decoded as JSON")
        ]
        return None, errors[0]
    _extend(repairs, [*result.repairs, DECODE_JSON_STRING])
    return result.value, None


def _extend(repairs: list[str], found: list[str]) -> None:
    for repair in found:
        if repair not in repairs:
            repairs.append(repair)


def _unknown_tool(registry: ToolRegistry, name: object) -> CodecError:
    names = registry.names()
    listed = ", ".join(repr(n) for n in names[:_MAX_LISTED_TOOLS])
    if len(names) > _MAX_LISTED_TOOLS:
        listed += f" and {len(names) - _MAX_LISTED_TOOLS} more"
    known = f"known tools: {listed}" if names else "no tools are registered"
    shown = _short(repr(name))
    return CodecError(UNKNOWN_TOOL, f"unknown tool {shown}; {known}", {"tool": _short(str(name))})


def _error_order(error: Any) -> tuple:
    # ints before strings at each level so mixed paths compare; then keyword for stability
    path = tuple((0, p, "") if isinstance(p, int) else (1, 0, str(p)) for p in error.path)
    return path, str(error.validator), error.message


def _violation(tool: str, error: Any) -> CodecError:
    pointer = _json_pointer(error.absolute_path)
    arithmetic = _arithmetic(error)
    if arithmetic is not None:  # `<parameter=n>2 ** 8</parameter>`, `{"n": "100 * 3"}`
        return CodecError(ARITHMETIC_EXPRESSION, f"{pointer or '(arguments)'}: arithmetic "
                          f"expression `{_short(arithmetic)}` where a number is expected: "
                          "send its computed result",
                          {"path": pointer, "tool": tool, "expression": _short(arithmetic)})
    message = error.message
    shown = repr(error.instance)
    if len(shown) > _MAX_VALUE_REPR and shown in message:
        message = message.replace(shown, _short(shown))
    message = f"{pointer or '(arguments)'}: {_short(message, _MAX_MESSAGE)}"
    return CodecError(
        SCHEMA_VIOLATION,
        message,
        # validator is None when a `false` subschema rejected the value
        {"path": pointer, "tool": tool, "validator": str(error.validator or "false")},
    )


def _arithmetic(error: Any) -> str | None:
    """The expression, when a number was expected and the text given reads as arithmetic."""
    wanted = error.validator_value if error.validator == "type" else None
    wanted = [wanted] if isinstance(wanted, str) else wanted
    if not isinstance(error.instance, str) or not isinstance(wanted, list) \
            or not wanted or not set(wanted) <= {"integer", "number", "null"}:
        return None
    text = error.instance.strip()
    return text if len(text) <= _MAX_EXPRESSION and is_arithmetic(text) else None


def _with_arguments(error: CodecError, arguments: object) -> CodecError:
    return CodecError(error.code, error.message, {**error.details, "arguments": arguments})


def _json_pointer(path: Any) -> str:
    return "".join("/" + str(p).replace("~", "~0").replace("/", "~1") for p in path)


def _short(text: str, limit: int = _MAX_VALUE_REPR) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
