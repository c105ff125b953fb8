"""Turn one job dict into a result envelope; shared by the process and the Redis backends.

A job is ``{"id": str, "op": str, "payload": dict, "deadline": float}`` where ``deadline`` is
an absolute ``time.time()``. :func:`run_job` always returns an envelope and never raises on a
bad job: a malformed job is ``bad_request``, an exception inside the codec is
``internal_error`` naming the job id (any ``BaseException``, a Rust extension's
``PanicException`` included; only ``KeyboardInterrupt``, ``SystemExit`` and ``GeneratorExit``
propagate), a job picked up after its deadline, or that finished after it, is ``timeout``.
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable
from contextvars import ContextVar
from functools import lru_cache
from typing import Any

import toolcodec as codec
from toolcodec.decoding.codec import ToolCallCodec, cached_codec, codec_for
from toolcodec.formats import registry as families
from toolcodec.formats.table import marker_formats
from toolcodec.results.errors import BAD_REQUEST, TIMEOUT, json_kind
from toolcodec.results.limits import Limits
from toolcodec.schema.tools import InvalidToolsError
from toolcodec.worker import faults
from toolcodec.worker.envelope import BadRequest, envelope, error_envelope, internal_error
from toolcodec.worker.limits import ENV as LIMIT_ENV
from toolcodec.worker.limits import LimitsError, job_limits, operator_limits
from toolcodec.worker.notices import BUILDING, BUILT, NOTICE

FAULT_ENV = "TOOLCODEC_FAULT_INJECTION"
# The operator's ceilings for a job run outside a worker process (``toolcodec.worker.inline``),
# which are the pool's, not this process's environment's; None: the environment's.
CEILING: ContextVar[Limits | None] = ContextVar("toolcodec_ceiling", default=None)
# The codec a job run in the calling process uses: found there, for this very payload, just
# before it ran (``toolcodec.worker.inline.run_here``), so it is not looked up twice.
GIVEN_CODEC: ContextVar[ToolCallCodec | None] = ContextVar("toolcodec_given_codec",
                                                           default=None)
# The ToolCallCodec options a payload may set, and their JSON types. Heuristics and pipelines
# are code, and code never arrives in a job.
CODEC_OPTIONS = {"nfkc_strings": bool, "starts_in_reasoning": bool, "limits": dict,
                 "formats": list}
# Seconds the running job spent building its codec: not parse time, so its deadline moves by
# as much (``toolcodec.worker.notices``). A one-item list, set per job by ``run_job``.
_BUILD_SPENT: ContextVar[list[float] | None] = ContextVar("toolcodec_build_spent", default=None)


def run_job(job: dict) -> dict:
    """Run one job and return its envelope; see the module docstring for the contract."""
    op = job.get("op") if isinstance(job, dict) else None
    op_name = op if isinstance(op, str) else ""
    try:
        payload, deadline = _check_job(job)
    except BadRequest as exc:
        return _refused(op_name, exc)
    spent = [0.0]
    token = _BUILD_SPENT.set(spent)
    try:
        return _run(op_name, job["id"], payload, deadline, spent)
    finally:
        _BUILD_SPENT.reset(token)


def run_given(op: str, job_id: str, payload: dict, deadline: float | None,
              codec: ToolCallCodec) -> dict:
    """``run_job`` for a job its caller made (an id, an op of :data:`GIVEN_OPS`, a payload
    object and a deadline: well formed, so not checked again) with the codec it found for
    the payload (``codec_ready``): the same checks of the payload, answer and envelope, the
    codec handed to the op instead of looked up. Nothing is built, so no build time moves
    the deadline."""
    return _run(op, job_id, payload, deadline, None, codec)


def _run(op: str, job_id: str, payload: dict, deadline: float | None,
         spent: list[float] | None, codec: ToolCallCodec | None = None) -> dict:
    """A well-formed job run: its envelope, whatever happens (``run_job``'s contract);
    ``codec``: the one ``run_given``'s caller found (the op one of ``GIVEN_OPS``)."""
    try:
        if deadline is not None and (now := time.time()) >= deadline:
            return _late(op, job_id, now - deadline, _PICKED_LATE)
        # run_given's op is one of GIVEN_OPS, which take the codec it found
        handler = _handler_for(op) if codec is None else GIVEN_OPS[op]
        _check_fields(op, payload)
        result = handler(payload) if codec is None else handler(payload, codec)
        # An answer finished after the deadline is not one: whether it counted would depend on
        # how soon the caller woke (a caller on time has already answered timeout), not on
        # the job. Building the job's codec was not parsing: the deadline moves by its time.
        if deadline is not None and spent is not None:
            deadline += spent[0]
        if deadline is not None and (now := time.time()) > deadline:
            return _late(op, job_id, now - deadline, _RAN_LATE)
        return envelope(op, "ok", result=result)
    except BadRequest as exc:
        return _refused(op, exc)
    except (KeyboardInterrupt, SystemExit, GeneratorExit):
        raise
    except BaseException as exc:  # noqa: BLE001 - the worker must answer, whatever the codec
        # did; a Rust extension's PanicException is a BaseException too
        return internal_error({"id": job_id, "op": op}, exc)


_PICKED_LATE = "was picked up {ms} ms after its deadline; not run"
_RAN_LATE = "ran {ms} ms past its deadline; its answer is not used"


def _refused(op: str, exc: BadRequest) -> dict:
    details = {"field": exc.field} if exc.field else {}
    return error_envelope(op, "error", BAD_REQUEST, str(exc), **details)


def _late(op: str, job_id: str, late_s: float, what: str) -> dict:
    """The ``timeout`` envelope of a job *late_s* seconds past its deadline; *what* says
    when, with ``{ms}`` for how late."""
    return error_envelope(op, "timeout", TIMEOUT,
                          f"job {job_id!r} " + what.format(ms=f"{late_s * 1000.0:.1f}"),
                          job_id=job_id)


# -- job shape ---------------------------------------------------------------------------


def _check_job(job: Any) -> tuple[dict, float | None]:
    if not isinstance(job, dict):
        raise BadRequest(f"a job must be a JSON object, got {json_kind(job)}")
    if not isinstance(job.get("id"), str):
        raise BadRequest(f"job field 'id' must be a string, got {_got(job, 'id')}", "id")
    if not isinstance(job.get("op"), str):
        raise BadRequest(f"job field 'op' must be a string, got {_got(job, 'op')}", "op")
    payload = job.get("payload")
    if not isinstance(payload, dict):
        raise BadRequest(f"job field 'payload' must be an object, got {_got(job, 'payload')}",
                         "payload")
    deadline = job.get("deadline")
    if deadline is not None and (isinstance(deadline, bool) or not _is_number(deadline)):
        raise BadRequest(
            "job field 'deadline' must be a number (absolute epoch seconds), "
            f"got {json_kind(deadline)}",
            "deadline",
        )
    return payload, deadline


def _check_fields(op: str, payload: dict) -> None:
    """Refuse a field the op does not read, the same way for every op: a misspelt field
    (``"tool"`` for ``"tools"``) must not pass silently."""
    allowed = PAYLOAD_FIELDS.get(op)
    # fault-injection ops take what they take; most payloads hold only allowed fields
    if allowed is None or allowed.issuperset(payload):
        return
    unknown = sorted(k for k in payload if k not in allowed)
    if unknown:
        raise BadRequest(f"{op}: unknown payload field(s) {unknown}; expected some of "
                         f"{sorted(allowed)}", f"payload.{unknown[0]}")


def _got(container: dict, key: str) -> str:
    """What a message says a field held: its JSON kind, or that it is missing."""
    return json_kind(container[key]) if key in container else "nothing (the field is missing)"


def _is_number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool)


def _field(payload: dict, name: str, kind: type | tuple, required: bool = True) -> Any:
    value = payload.get(name)
    if value is None and not required:
        return None
    if not isinstance(value, kind) or isinstance(value, bool) and kind is not bool:
        want = kind.__name__ if isinstance(kind, type) else " or ".join(k.__name__ for k in kind)
        raise BadRequest(
            f"payload field '{name}' must be {want}, got {_got(payload, name)}", f"payload.{name}"
        )
    return value


# -- ops ---------------------------------------------------------------------------------


def _op_decode(payload: dict, codec: ToolCallCodec | None = None) -> dict:
    text, message = payload.get("text"), payload.get("message")
    if (text is None) == (message is None):
        raise BadRequest("decode needs exactly one of 'text' (string) or 'message' (object)")
    # the usual types at once; _field checks (and refuses) the others
    if text is None:
        source = message if type(message) is dict else _field(payload, "message", dict)
    else:
        source = text if type(text) is str else _field(payload, "text", str)
    finish_reason = payload.get("finish_reason")  # "length": cut off
    if finish_reason is not None and type(finish_reason) is not str:
        finish_reason = _field(payload, "finish_reason", str, required=False)
    if codec is None:
        codec = _codec(payload, tools_required=False)
    return codec.decode(source, finish_reason=finish_reason).to_dict()


def _op_repair(payload: dict) -> dict:
    options = _field(payload, "options", dict, required=False) or {}
    limits = _limits(options.get("limits"))
    return codec.repair_json(_field(payload, "text", str), limits=limits).to_dict()


def _op_validate(payload: dict) -> dict:
    name = _field(payload, "name", str)
    if "arguments" not in payload:
        raise BadRequest("validate needs 'arguments'", "payload.arguments")
    return _codec(payload, tools_required=True).validate(name, payload["arguments"]).to_dict()


def _op_kindaxml(payload: dict) -> dict:
    text = _field(payload, "text", str)
    config = _field(payload, "config", dict, required=False) or {}
    from toolcodec import kindaxml  # imported on first use: optional part of the codec

    try:
        parsed_config = kindaxml.KindaXMLConfig(**config)
    except (TypeError, ValueError) as exc:
        raise BadRequest(f"kindaxml config rejected: {exc}", "payload.config") from exc
    return kindaxml.parse(text, config=parsed_config).to_dict()


def _op_decode_block(payload: dict, codec: ToolCallCodec | None = None) -> dict:
    """One tool-call block of a stream, decoded on its own (``toolcodec.pool.stream``).

    ``fmt`` is the engine's block kind and ``tag`` what opened it: a tool's name, or a marker
    format's opening token (``[TOOL_CALLS]``, ``<|python_tag|>``…), so every format the codec
    reads can be decoded here exactly as ``decode`` decodes it.
    """
    text = _field(payload, "text", str)
    fmt = _field(payload, "fmt", str)
    body = _field(payload, "body", list)
    if fmt not in BLOCK_KINDS or len(body) != 2 \
            or not all(isinstance(b, int) and not isinstance(b, bool) and 0 <= b <= len(text)
                       for b in body) or body[0] > body[1]:
        raise BadRequest(f"decode_block needs fmt (one of {list(BLOCK_KINDS)}) and body "
                         "[start, end] inside text", "payload")
    tag = payload.get("tag") if isinstance(payload.get("tag"), str) else None
    families.load_entry_points()  # installed families, as a codec built here would
    if fmt == "marker" and tag not in _marker_tokens():
        raise BadRequest("decode_block: a marker block's tag must be the opening token of a "
                         "marker format this worker reads (toolcodec.formats.table, or a "
                         "family registered before the worker started)", "payload.tag")
    delay = payload.get("_sleep_s")  # fault injection only: a slow block, for tests
    if delay is not None and os.environ.get(FAULT_ENV) == "1" and _is_number(delay):
        time.sleep(min(float(delay), 60.0))
    c = codec if codec is not None else _codec(payload, tools_required=False)
    calls, errors = c.block_calls(text, fmt, tag, bool(payload.get("closed", True)),
                                  (body[0], body[1]))
    return {"ok": not errors,
            "calls": [{**call.to_dict()} for call in calls],
            "errors": [e.to_dict() for e in errors]}


# The block kinds the engine hands to a worker (``toolcodec.decoding.engine``: every kind but the
# reasoning and JSON-in-prose candidates, which are decided in the caller).
BLOCK_KINDS = ("tool_call", "tool_element", "function", "tool_tag", "bare_tag", "marker")


@lru_cache(maxsize=1)
def _marker_tokens() -> frozenset[str]:
    """Every marker format's openers, registered families' included."""
    return frozenset(token for fmt in marker_formats(None) for token in fmt.openers)


families.on_change(_marker_tokens.cache_clear)  # a family registered in this process


def _op_validate_result(payload: dict) -> dict:
    from toolcodec.results.toolresults import ResultSchemas, validate_result

    tool = _field(payload, "tool", str)
    if "output" not in payload:
        raise BadRequest("validate_result needs 'output' (the tool's output: text or JSON)",
                         "payload.output")
    schemas = _field(payload, "schemas", dict, required=False)
    tools = _field(payload, "tools", list, required=False)
    try:
        registry = ResultSchemas(schemas) if schemas is not None else \
            ResultSchemas.from_tools(tools or [])
    except InvalidToolsError as exc:
        raise BadRequest(f"output schemas rejected: {exc}", "payload.schemas") from exc
    checked = validate_result(tool, payload["output"], schemas=registry, limits=_limits(None))
    return {**checked.to_dict(), "tool": tool}


# -- codec and limits ---------------------------------------------------------------------


def _codec(payload: dict, *, tools_required: bool) -> ToolCallCodec:
    """The codec for the payload's ``tools`` and ``options``, from the codec's own cache.

    The tool definitions are checked once, by the codec (``InvalidToolsError``), which
    answers ``bad_request`` here.
    """
    given = GIVEN_CODEC.get()
    if given is not None:
        return given
    tools, kwargs = _codec_args(payload, tools_required=tools_required)
    try:
        return cached_codec(tools, **kwargs) or _build(tools, kwargs)
    except InvalidToolsError as exc:
        raise BadRequest(f"tools rejected: {exc}", "payload.tools") from exc
    except ValueError as exc:  # an unknown format id or reasoning family
        field = ("payload.options.starts_in_reasoning" if "starts_in_reasoning" in str(exc)
                 else "payload.options.formats")
        raise BadRequest(f"{field}: {exc}", field) from exc


def _build(tools: Any, kwargs: dict[str, Any]) -> ToolCallCodec:
    """Build the codec, told to a listening pool and kept out of the job's parse time."""
    notice, spent = NOTICE.get(), _BUILD_SPENT.get()
    start = time.time()
    if notice is not None:
        notice(BUILDING)
    try:
        return codec_for(tools, **kwargs)
    finally:
        if spent is not None:
            spent[0] += time.time() - start
        if notice is not None:
            notice(BUILT)


def _op_prepare(payload: dict) -> dict:
    """Build the codec for ``tools`` and ``options`` now, so that the decode jobs that use
    them later spend their budget parsing (``Pool.prepare``)."""
    _codec(payload, tools_required=False)
    return {"ok": True}


def codec_ready(payload: dict) -> ToolCallCodec | None:
    """The codec a decode job with ``payload`` uses, if this process has already built it
    (None for a payload whose tools or options are refused: a worker answers those)."""
    try:
        tools, kwargs = _codec_args(payload, tools_required=False)
        return cached_codec(tools, **kwargs)
    except Exception:  # noqa: BLE001 - any refusal: not ready here
        return None


def build_codec(payload: dict) -> None:
    """Build (and cache) the codec a decode job with ``payload`` uses; quiet on a refusal."""
    try:
        _codec(payload, tools_required=False)
    except Exception:  # noqa: BLE001 - a worker answers a refused payload
        pass


def _codec_args(payload: dict, *, tools_required: bool) -> tuple[Any, dict[str, Any]]:
    """The payload's ``tools`` and the keyword options ``codec_for`` takes for its
    ``options``; ``BadRequest`` names what is refused."""
    tools = _field(payload, "tools", list, required=tools_required)
    options = _field(payload, "options", dict, required=False) or {}
    unknown = sorted(set(options) - set(CODEC_OPTIONS))
    if unknown:
        raise BadRequest(f"payload.options: unknown option(s) {unknown}; expected some of "
                         f"{sorted(CODEC_OPTIONS)}", "payload.options")
    kwargs: dict[str, Any] = {}
    for name, kind in CODEC_OPTIONS.items():
        value = options.get(name)
        if name == "starts_in_reasoning" and isinstance(value, str):
            kwargs[name] = value  # a family's reasoning id or opener, checked by the codec
        elif value is not None and kind is bool:
            if not isinstance(value, bool):
                raise BadRequest(f"payload.options.{name} must be true or false, got "
                                 f"{json_kind(value)}", f"payload.options.{name}")
            kwargs[name] = value
    kwargs["limits"] = _limits(options.get("limits"))
    formats = options.get("formats")
    if formats is not None:
        if not isinstance(formats, list) or not all(isinstance(f, str) for f in formats):
            raise BadRequest("payload.options.formats must be a list of format ids, got "
                             f"{json_kind(formats)}", "payload.options.formats")
        kwargs["formats"] = tuple(sorted(set(formats)))  # hashable: the codec cache's key
    return tools, kwargs


def _ceiling() -> Limits:
    """The operator's limits: the pool's for a job run outside a worker (:data:`CEILING`),
    else the worker's environment's (``TOOLCODEC_MAX_CHARS``, ``TOOLCODEC_MAX_DEPTH``) as it
    is now."""
    given = CEILING.get()
    if given is not None:
        return given
    return _ceiling_of(os.environ.get(LIMIT_ENV["max_chars"]),
                       os.environ.get(LIMIT_ENV["max_depth"]))


@lru_cache(maxsize=8)
def _ceiling_of(max_chars: str | None, max_depth: str | None) -> Limits:
    values = ((LIMIT_ENV["max_chars"], max_chars), (LIMIT_ENV["max_depth"], max_depth))
    return operator_limits({name: value for name, value in values if value is not None})


def _limits(requested: Any) -> Limits:
    """The job's limits: what it asked for, never above the operator's ceiling."""
    ceiling = _ceiling()  # a bad environment is the operator's error: internal_error
    try:
        return job_limits(requested, ceiling)
    except LimitsError as exc:
        raise BadRequest(str(exc), "payload.options.limits") from exc


OPS: dict[str, Callable[[dict], dict]] = {
    "decode": _op_decode,
    "repair": _op_repair,
    "validate": _op_validate,
    "kindaxml": _op_kindaxml,
    "validate_result": _op_validate_result,
    "decode_block": _op_decode_block,
    "prepare": _op_prepare,
}
# The ops that take the codec their caller found for the payload (``run_given``).
GIVEN_OPS: dict[str, Callable[..., dict]] = {"decode": _op_decode,
                                             "decode_block": _op_decode_block}


# The callers' ops, in the order docs list them; decode_block is the streaming pool's own.
PUBLIC_OPS = ("decode", "repair", "validate", "kindaxml", "validate_result")
PAYLOAD_FIELDS: dict[str, frozenset[str]] = {
    "decode": frozenset({"text", "message", "tools", "options", "finish_reason"}),
    "repair": frozenset({"text", "options"}),
    "validate": frozenset({"name", "arguments", "tools", "options"}),
    "kindaxml": frozenset({"text", "config"}),
    "validate_result": frozenset({"tool", "output", "schemas", "tools"}),
    "decode_block": frozenset({"text", "fmt", "tag", "closed", "body", "tools", "options",
                               "_sleep_s"}),
    "prepare": frozenset({"tools", "options"}),
}


def _handler_for(op: str) -> Callable[[dict], dict]:
    if op in OPS:
        return OPS[op]
    if op in faults.FAULT_OPS:
        if os.environ.get(FAULT_ENV) == "1":
            return faults.FAULT_OPS[op]
        raise BadRequest(f"op {op!r} needs {FAULT_ENV}=1 in the worker's environment", "op")
    raise BadRequest(f"unknown op {op!r}; expected one of {', '.join(PUBLIC_OPS)}", "op")


def warm() -> None:
    """Load the codec's lazily imported parts now, so forked workers inherit them, with the
    block openers every tool set of the default formats shares (compiled once per process:
    ``toolcodec.scanning.openers.compile_openers``).

    A worker forked before this pays the imports on its first job, after every respawn.
    Best effort: a codec that fails here reports the failure in job results instead.
    """
    tools = [{"name": "warm_up", "parameters": {"type": "object"}}]
    text = '<tool_call>{"name": "warm_up", "arguments": {}}</tool_call> {\'a\': 1,}'
    try:
        codec_for(tools).decode(text)
        stream = codec_for(tools).stream()  # the openers' patterns a stream adds
        stream.feed(text[:5])
        stream.close()
        codec.repair_json(text)
        from toolcodec import kindaxml  # noqa: F401 - loaded for the kindaxml op
    except Exception:  # noqa: BLE001 - warm-up must never stop a pool from starting
        pass
