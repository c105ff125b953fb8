"""Feedback for the model: what to fix in an output that could not be decoded, and how.

``build_feedback(result, tools=TOOLS)`` turns a decode result's errors into one compact,
exact text — the tool, the JSON Pointer, what was expected and what was found, the allowed
enum values, the closest known tool for an unknown one, the arithmetic to compute first — and
says which repairs were already made, so the model is not asked to fix those. The text is
bounded (``max_chars``) and quotes no more of the model's output than the error messages
already do (values there are cut at 80 characters).

The same text is then shaped for the API in use: ``as_openai`` (``role: "tool"`` messages
answering the failed native call ids, or one ``user`` message), ``as_anthropic`` (a ``user``
message of ``tool_result`` blocks with ``is_error: true``), ``as_hermes`` (a ``<tool_response>``)
and ``text`` itself.

Which errors are worth a retry is explicit (`RETRYABLE_CODES`): the model's mistakes are; our
own failures (a timeout, a lost worker, back-pressure, a bad request) are not.
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field
from typing import Any

import orjson
from toolcodec.results import errors as E
from toolcodec.results.result import DecodeResult

# The model can fix these by writing a different output.
RETRYABLE_CODES = frozenset({
    E.INVALID_JSON, E.INVALID_XML, E.ARITHMETIC_EXPRESSION, E.UNKNOWN_TOOL,
    E.SCHEMA_VIOLATION, E.NESTING_TOO_DEEP, E.PAYLOAD_TOO_LARGE, E.TRUNCATED,
})  # fmt: skip
DEFAULT_MAX_CHARS = 2000
_MAX_LINE = 240
_MAX_ENUM_SHOWN = 20
_MAX_TOOLS_SHOWN = 10
# Prefixes the decoder puts before a block's or a native call's own message.
_PREFIX = re.compile(r"^(?:tool-call block \d+ \([^)]*\) at offset \d+: |tool_calls\[\d+\]: )")


@dataclass(slots=True)
class Feedback:
    """The feedback for one failed output: ``text`` plus what the API shapes need."""

    text: str
    retryable: bool
    codes: list[str] = field(default_factory=list)
    # (native call index or None, tool name or None) per failed call, in order
    failed: list[tuple[int | None, str | None]] = field(default_factory=list)

    def as_openai(self, assistant_message: dict | None = None) -> list[dict[str, Any]]:
        """Messages to append after the assistant's message (OpenAI chat completions).

        When the failed calls were native ``tool_calls`` with ids, every call id of that
        message is answered with a ``role: "tool"`` message (the API requires an answer for
        each); the failed ones carry the feedback. Otherwise one ``role: "user"`` message.
        """
        ids = _native_ids(assistant_message)
        failed = {i for i, _ in self.failed if i is not None}
        if not ids or not failed:
            return [{"role": "user", "content": self.text}]
        out = []
        for index, call_id in enumerate(ids):
            text = self.text if index in failed else (
                "Not run: another call in the same message was invalid; send all calls again.")
            out.append({"role": "tool", "tool_call_id": call_id, "content": text})
        return out

    def as_anthropic(self, tool_use_ids: list[str] | None = None) -> dict[str, Any]:
        """A ``user`` message (Anthropic Messages API) answering the given ``tool_use`` ids
        with ``tool_result`` blocks marked ``is_error``; a text block when there are none."""
        if not tool_use_ids:
            return {"role": "user", "content": [{"type": "text", "text": self.text}]}
        blocks = [{"type": "tool_result", "tool_use_id": i, "is_error": True,
                   "content": self.text} for i in tool_use_ids]
        return {"role": "user", "content": blocks}

    def as_hermes(self) -> dict[str, Any]:
        """A ``tool`` message whose content is a Hermes/Qwen ``<tool_response>`` block."""
        name = next((n for _, n in self.failed if n), None)
        body = orjson.dumps({"name": name, "error": self.text}).decode()
        return {"role": "tool", "content": f"<tool_response>\n{body}\n</tool_response>"}


def build_feedback(result: DecodeResult | dict[str, Any], *, tools: list[dict] | None = None,
                   max_chars: int = DEFAULT_MAX_CHARS) -> Feedback:
    """Build the feedback for a decode result (a ``DecodeResult``, its ``to_dict()``, or a job
    envelope holding one). *tools* lets the text name allowed values and close tool names.

    A result with no errors gives an empty, non-retryable feedback.
    """
    data = _result_dict(result)
    errors = [e for e in data.get("errors") or [] if isinstance(e, dict)]
    schemas = _schemas(tools)
    lines = [_line(e, schemas) for e in errors]
    codes = list(dict.fromkeys(str(e.get("code")) for e in errors))
    retryable = bool(errors) and all(c in RETRYABLE_CODES for c in codes)
    failed = list(dict.fromkeys((e.get("call_index"), e.get("tool")) for e in errors))
    text = _compose(lines, data.get("repairs") or [], max_chars) if errors else ""
    return Feedback(text, retryable, codes, failed)


# -- one line per error ---------------------------------------------------------------------


def _line(error: dict, schemas: dict[str, Any]) -> str:
    code = error.get("code")
    message = _PREFIX.sub("", str(error.get("message", "")))
    tool = error.get("tool")
    if code == E.UNKNOWN_TOOL:
        return _unknown_tool(str(tool), schemas)
    if code == E.SCHEMA_VIOLATION:
        return _violation(error, message, schemas)
    if code == E.ARITHMETIC_EXPRESSION:
        expr = error.get("expression", "")
        return (f"The value `{_cut(str(expr), 60)}` is an arithmetic expression; JSON cannot "
                "compute. Work out the result yourself and send the number.")
    if code == E.INVALID_JSON:
        return f"Invalid JSON: {message} Send the arguments as one valid JSON object."
    if code == E.INVALID_XML:
        return f"Invalid tool-call markup: {message}"
    if code == E.NESTING_TOO_DEEP:
        return f"The arguments nest too deeply: {message} Use a flatter structure."
    if code == E.PAYLOAD_TOO_LARGE:
        return f"The output is too large: {message} Send fewer or smaller calls."
    if code == E.TRUNCATED:
        return ("The output hit the token limit before this tool call was complete, so it was "
                "not run. Send it again, shorter, or fewer calls at once.")
    return f"{code}: {message}"


def _unknown_tool(name: str, schemas: dict[str, Any]) -> str:
    known = list(schemas)
    text = f'There is no tool named "{_cut(name, 60)}".'
    close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
    if close:
        text += f' Did you mean "{close[0]}"?'
    if known:
        shown = ", ".join(f'"{n}"' for n in known[:_MAX_TOOLS_SHOWN])
        more = f" and {len(known) - _MAX_TOOLS_SHOWN} more" if len(known) > _MAX_TOOLS_SHOWN else ""
        text += f" Available tools: {shown}{more}."
    return text


def _violation(error: dict, message: str, schemas: dict[str, Any]) -> str:
    tool, pointer = error.get("tool"), str(error.get("path", ""))
    where = f'Tool "{tool}", argument {pointer or "(the arguments object)"}'
    # The validator's own sentence says what was found and what was expected.
    start = message.find(f"{pointer or '(arguments)'}: ")
    detail = message[start + len(pointer or "(arguments)") + 2:] if start >= 0 else message
    text = f"{where}: {detail.rstrip('.')}."
    sub = _subschema(schemas.get(str(tool)), pointer)
    if isinstance(sub, dict):
        if isinstance(sub.get("enum"), list):
            values = ", ".join(_json(v) for v in sub["enum"][:_MAX_ENUM_SHOWN])
            text += f" Allowed values: {values}."
        elif "type" in sub and error.get("validator") == "type":
            text += f" Expected type: {_json(sub['type'])}."
    return text


def _subschema(schema: Any, pointer: str) -> Any:
    """Follow an arguments pointer through ``properties``/``items`` (best effort)."""
    node = schema
    for part in [p.replace("~1", "/").replace("~0", "~") for p in pointer.split("/")[1:]]:
        if not isinstance(node, dict):
            return None
        if isinstance(node.get("properties"), dict) and part in node["properties"]:
            node = node["properties"][part]
        elif part.isdigit() and isinstance(node.get("items"), dict):
            node = node["items"]
        else:
            return None
    return node


# -- assembling --------------------------------------------------------------------------


def _compose(lines: list[str], repairs: list[str], max_chars: int) -> str:
    head = "Your last output could not be used. Fix the following and send it again:"
    tail = ""
    if repairs:
        shown = ", ".join(str(r) for r in repairs[:12])
        tail = (f"\nAlready repaired automatically (no need to change): {shown}.")
    body, used = [], len(head) + len(tail)
    for i, line in enumerate(lines):
        item = "\n- " + _cut(line, _MAX_LINE)
        rest = len(lines) - i
        if used + len(item) > max_chars - 40 and rest > 0:
            body.append(f"\n- … and {rest} more problem{'s' if rest > 1 else ''}.")
            break
        body.append(item)
        used += len(item)
    return _cut(head + "".join(body) + tail, max_chars)


def _result_dict(result: DecodeResult | dict[str, Any]) -> dict[str, Any]:
    if isinstance(result, DecodeResult):
        return result.to_dict()
    if isinstance(result, dict) and "status" in result and "result" in result:
        inner = result.get("result")  # a job envelope
        if isinstance(inner, dict):
            return inner
        err = result.get("error")
        return {"errors": [err] if isinstance(err, dict) else [], "repairs": []}
    return result if isinstance(result, dict) else {}


def _schemas(tools: list[dict] | None) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for tool in tools or []:
        body = tool.get("function", tool) if isinstance(tool, dict) else None
        if isinstance(body, dict) and isinstance(body.get("name"), str):
            out[body["name"]] = body.get("parameters", body.get("input_schema",
                                                                  body.get("inputSchema")))
    return out


def _native_ids(message: dict | None) -> list[str]:
    calls = message.get("tool_calls") if isinstance(message, dict) else None
    if not isinstance(calls, list):
        return []
    ids = [c.get("id") for c in calls if isinstance(c, dict)]
    return [str(i) for i in ids] if ids and all(isinstance(i, str) and i for i in ids) else []


def _json(value: Any) -> str:
    try:
        return _cut(orjson.dumps(value).decode(), 60)
    except TypeError:
        return _cut(repr(value), 60)


def _cut(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"
