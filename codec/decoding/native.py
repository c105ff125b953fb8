"""Read an OpenAI-style assistant message: its native tool calls, content and reasoning.

This module only takes the message apart and reports what is malformed (``bad_request``);
validating the calls against the tool schemas is the codec's job.

Accepted shape::

    {"role": "assistant",
     "content": str | [{"type": "text", "text": str}, ...] | None,
     "reasoning_content": str | None,            # also "reasoning"
     "tool_calls": [{"id", "type": "function",
                     "function": {"name": str, "arguments": str | dict | None}}],
     "function_call": {"name", "arguments"}}      # legacy, used when tool_calls is absent

Text parts of a list content are joined with ``"\\n"``; other parts (images, audio) are not
text and are skipped.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from toolcodec.results.errors import BAD_REQUEST, CodecError, json_kind


@dataclass(slots=True)
class NativeCall:
    """One native call as written: ``arguments`` is still a str or a dict."""

    index: int
    name: str
    arguments: str | dict[str, Any]


@dataclass(slots=True)
class NativeMessage:
    """The parts of a message; ``has_calls`` is True when it carried any tool-call entry."""

    content: str = ""
    reasoning: str | None = None
    has_calls: bool = False
    calls: list[NativeCall] = field(default_factory=list)
    errors: list[CodecError] = field(default_factory=list)


def read_message(message: dict[str, Any]) -> NativeMessage:
    """Split an assistant message dict into calls, content and reasoning; never raises."""
    out = NativeMessage()
    out.content = _content(message.get("content"), out.errors)
    out.reasoning = _reasoning(message, out.errors)
    entries = message.get("tool_calls")
    if entries is None and message.get("function_call") is not None:
        entries = [{"type": "function", "function": message["function_call"]}]
    if entries is None:
        return out
    if not isinstance(entries, list):
        out.errors.append(_bad("tool_calls must be a list of calls", type(entries).__name__))
        out.has_calls = True
        return out
    out.has_calls = bool(entries)
    for index, entry in enumerate(entries):
        call = _call(index, entry, out.errors)
        if call is not None:
            out.calls.append(call)
    return out


def _content(content: Any, errors: list[CodecError]) -> str:
    if content is None:
        return ""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        parts = [_part_text(p) for p in content]
        return "\n".join(p for p in parts if p is not None)
    errors.append(_bad("content must be a string, a list of parts or null",
                       type(content).__name__))
    return ""


def _part_text(part: Any) -> str | None:
    if isinstance(part, str):
        return part
    if isinstance(part, dict) and part.get("type") == "text" and isinstance(part.get("text"), str):
        return part["text"]
    return None


def _reasoning(message: dict[str, Any], errors: list[CodecError]) -> str | None:
    for key in ("reasoning_content", "reasoning"):
        value = message.get(key)
        if value is None:
            continue
        if isinstance(value, str):
            return value
        errors.append(_bad(f"{key} must be a string", type(value).__name__))
    return None


def _call(index: int, entry: Any, errors: list[CodecError]) -> NativeCall | None:
    fn = entry.get("function") if isinstance(entry, dict) else None
    if not isinstance(fn, dict):
        errors.append(_bad(f"tool_calls[{index}] has no 'function' object", json_kind(entry),
                           index))
        return None
    name = fn.get("name")
    if not isinstance(name, str) or not name:
        errors.append(_bad(f"tool_calls[{index}].function.name must be a non-empty string",
                           json_kind(name), index))
        return None
    args = fn.get("arguments")
    if args is None or args == "":
        args = {}  # models omit arguments for parameterless tools
    if not isinstance(args, str | dict):
        errors.append(_bad(f"tool_calls[{index}].function.arguments must be a JSON string "
                           "or an object", json_kind(args), index))
        return None
    return NativeCall(index, name, args)


def _bad(message: str, got: str, index: int | None = None) -> CodecError:
    details: dict[str, Any] = {"got": got}
    if index is not None:
        details["call_index"] = index
    return CodecError(BAD_REQUEST, message + f" (got {got})", details)
