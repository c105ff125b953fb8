"""Anthropic's Messages API (``POST /v1/messages``) over the upstream's Chat Completions.

The request is translated to a chat completion request (so any OpenAI-compatible model server
answers it), decoded by the chat route, and its answer translated back:

- request: ``system`` → a system message; ``tools[{name, description, input_schema}]`` →
  function tools; ``tool_choice`` ``auto``/``any``/``tool``/``none`` → ``auto``/``required``/
  a forced function/``none`` (``disable_parallel_tool_use`` → ``parallel_tool_calls:
  false``); ``tool_use`` blocks → the assistant's ``tool_calls``, ``tool_result`` blocks →
  ``tool`` messages; ``text`` and ``image`` blocks → content parts; ``thinking`` blocks are
  not sent back; ``max_tokens``, ``temperature``, ``top_p``, ``top_k``, ``stop_sequences``,
  ``stream`` and the ``toolcodec`` field go on.
- answer: ``reasoning_content`` → a ``thinking`` block, content → a ``text`` block, each call
  → a ``tool_use`` block with its ``input`` object; ``finish_reason`` ``tool_calls`` /
  ``length`` / ``stop`` → ``stop_reason`` ``tool_use`` / ``max_tokens`` / ``end_turn``
  (``stop_sequence`` when upstream says which of ``stop_sequences`` ended it).
- stream: ``message_start``, then per block ``content_block_start``, ``content_block_delta``
  (``thinking_delta``, ``text_delta``, ``input_json_delta``), ``content_block_stop``, then
  ``message_delta`` (``stop_reason``, ``usage``) and ``message_stop``; heartbeats are
  ``ping`` events; an upstream failure mid-way is an ``error`` event, after which the stream
  ends without ``message_stop``.

A native call the decoder could not repair has no ``input`` object to give; it is no
``tool_use`` block but is listed, as the model wrote it, in the message's
``toolcodec.unsent_calls`` (streams: in ``message_delta``), and counted by the chat route as a
model error.
"""

from __future__ import annotations

import hashlib
from collections.abc import AsyncIterator
from typing import Any

import orjson
from toolcodec.pool.proxy.chat_events import ChunkReader, arguments_object, relay
from toolcodec.pool.proxy.translated import TranslationError

_STOP = {"tool_calls": "tool_use", "length": "max_tokens", "stop": "end_turn"}
_ERROR_TYPE = {400: "invalid_request_error", 401: "authentication_error",
               403: "permission_error", 404: "not_found_error", 413: "request_too_large",
               429: "rate_limit_error", 503: "overloaded_error", 529: "overloaded_error"}
_COPIED = ("model", "max_tokens", "temperature", "top_p", "top_k", "stream", "toolcodec")


def to_chat(body: dict[str, Any]) -> dict[str, Any]:
    """The chat completion request for a Messages request (``TranslationError``: a 400)."""
    messages = body.get("messages")
    if not isinstance(messages, list):
        raise TranslationError("'messages' must be a list")
    chat: dict[str, Any] = {k: body[k] for k in _COPIED if k in body}
    if isinstance(body.get("stop_sequences"), list):
        chat["stop"] = body["stop_sequences"]
    if body.get("stream"):
        chat["stream_options"] = {"include_usage": True}
    out: list[dict[str, Any]] = []
    system = _text_of(body.get("system"), "system")
    if system:
        out.append({"role": "system", "content": system})
    for i, message in enumerate(messages):
        out += _message(message, f"messages[{i}]")
    chat["messages"] = out
    if body.get("tools") is not None:
        chat["tools"] = [_tool(t, f"tools[{i}]") for i, t in enumerate(_list(body, "tools"))]
    choice = body.get("tool_choice")
    if choice is not None:
        chat.update(_tool_choice(choice))
    return chat


def _list(body: dict[str, Any], key: str) -> list[Any]:
    if not isinstance(body.get(key), list):
        raise TranslationError(f"'{key}' must be a list")
    return body[key]


def _text_of(value: Any, where: str) -> str:
    """A string, or the text of a list of text blocks."""
    if value is None or isinstance(value, str):
        return value or ""
    if isinstance(value, list):
        parts = []
        for block in value:
            if not isinstance(block, dict) or block.get("type") != "text":
                raise TranslationError(f"{where}: only text blocks are taken here")
            parts.append(str(block.get("text") or ""))
        return "\n".join(parts)
    raise TranslationError(f"{where} must be a string or a list of text blocks")


def _tool(tool: Any, where: str) -> dict[str, Any]:
    if not isinstance(tool, dict) or not isinstance(tool.get("name"), str):
        raise TranslationError(f"{where} must be an object with a 'name'")
    if tool.get("type") not in (None, "custom"):
        raise TranslationError(f"{where}: server tools ({tool['type']!r}) are not available "
                               "through this proxy; only tools with an input_schema")
    fn: dict[str, Any] = {"name": tool["name"],
                          "parameters": tool.get("input_schema") or {"type": "object"}}
    if tool.get("description"):
        fn["description"] = tool["description"]
    return {"type": "function", "function": fn}


def _tool_choice(choice: Any) -> dict[str, Any]:
    kind = choice.get("type") if isinstance(choice, dict) else None
    out: dict[str, Any] = {}
    if kind == "auto":
        out["tool_choice"] = "auto"
    elif kind == "any":
        out["tool_choice"] = "required"
    elif kind == "none":
        out["tool_choice"] = "none"
    elif kind == "tool" and isinstance(choice.get("name"), str):
        out["tool_choice"] = {"type": "function", "function": {"name": choice["name"]}}
    else:
        raise TranslationError("tool_choice must be {\"type\": \"auto\" | \"any\" | \"none\"} "
                               "or {\"type\": \"tool\", \"name\": NAME}")
    if choice.get("disable_parallel_tool_use") is True:
        out["parallel_tool_calls"] = False
    return out


def _message(message: Any, where: str) -> list[dict[str, Any]]:
    """One Messages message as chat messages (tool results become ``tool`` messages)."""
    if not isinstance(message, dict) or message.get("role") not in ("user", "assistant"):
        raise TranslationError(f"{where} must have the role 'user' or 'assistant'")
    role, content = message["role"], message.get("content")
    if isinstance(content, str):
        return [{"role": role, "content": content}]
    if not isinstance(content, list):
        raise TranslationError(f"{where}.content must be a string or a list of blocks")
    parts: list[dict[str, Any]] = []
    calls: list[dict[str, Any]] = []
    results: list[dict[str, Any]] = []
    for j, block in enumerate(content):
        kind = block.get("type") if isinstance(block, dict) else None
        here = f"{where}.content[{j}]"
        if kind == "text":
            parts.append({"type": "text", "text": str(block.get("text") or "")})
        elif kind == "image":
            parts.append({"type": "image_url", "image_url": {"url": _image_url(block, here)}})
        elif kind == "tool_use" and role == "assistant":
            calls.append({"id": str(block.get("id") or ""), "type": "function", "function": {
                "name": str(block.get("name") or ""),
                "arguments": orjson.dumps(block.get("input") or {}).decode()}})
        elif kind == "tool_result" and role == "user":
            results.append({"role": "tool", "tool_call_id": str(block.get("tool_use_id") or ""),
                            "content": _result_text(block.get("content"), here)})
        elif kind in ("thinking", "redacted_thinking"):
            continue  # the model's own reasoning is not sent back
        else:
            raise TranslationError(f"{here}: a {kind!r} block is not taken in a {role} message")
    out: list[dict[str, Any]] = list(results)  # answers to the previous turn's calls first
    if role == "assistant":
        text = "".join(p["text"] for p in parts if p["type"] == "text")
        if text or calls:
            entry: dict[str, Any] = {"role": "assistant", "content": text or None}
            if calls:
                entry["tool_calls"] = calls
            out.append(entry)
    elif parts:
        plain = all(p["type"] == "text" for p in parts)
        out.append({"role": "user", "content": "".join(p["text"] for p in parts)
                    if plain else parts})
    return out


def _image_url(block: dict[str, Any], where: str) -> str:
    source = block.get("source") or {}
    if source.get("type") == "base64":
        return f"data:{source.get('media_type') or 'image/png'};base64,{source.get('data')}"
    if source.get("type") == "url" and isinstance(source.get("url"), str):
        return source["url"]
    raise TranslationError(f"{where}: an image source is base64 or url")


def _result_text(content: Any, where: str) -> str:
    if isinstance(content, list):
        return "".join(str(b.get("text") or "") for b in content
                       if isinstance(b, dict) and b.get("type") == "text")
    if content is None or isinstance(content, str):
        return content or ""
    raise TranslationError(f"{where}.content must be a string or a list of blocks")


def headers(incoming: dict[str, str]) -> dict[str, str]:
    """The client's headers for the chat route: Anthropic's ``x-api-key`` is its bearer key
    (sent upstream unless the proxy has its own)."""
    key = incoming.get("x-api-key")
    if key and not incoming.get("authorization"):
        return {**incoming, "authorization": f"Bearer {key}"}
    return incoming


# -- answers -----------------------------------------------------------------------------------


def message_id(chat_id: str) -> str:
    return "msg_" + hashlib.blake2b(chat_id.encode(), digest_size=12).hexdigest()


def _stop(finish: Any, stop_reason: Any, sequences: Any, calls: bool
          ) -> tuple[str, str | None]:
    if finish == "stop" and isinstance(stop_reason, str) and isinstance(sequences, list) \
            and stop_reason in sequences:
        return "stop_sequence", stop_reason
    if finish == "tool_calls" and not calls:
        return "end_turn", None
    return _STOP.get(finish or "stop", "end_turn"), None


def _usage(usage: Any) -> dict[str, int]:
    usage = usage if isinstance(usage, dict) else {}
    return {"input_tokens": int(usage.get("prompt_tokens") or 0),
            "output_tokens": int(usage.get("completion_tokens") or 0)}


def answer(chat: dict[str, Any], request: dict[str, Any]) -> tuple[dict[str, Any], dict]:
    """The Messages answer for the chat route's decoded answer, and extra headers."""
    choice = (chat.get("choices") or [{}])[0]
    message = choice.get("message") or {}
    content: list[dict[str, Any]] = []
    if message.get("reasoning_content"):
        content.append({"type": "thinking", "thinking": message["reasoning_content"],
                        "signature": ""})
    if message.get("content"):
        content.append({"type": "text", "text": message["content"]})
    unsent = []
    for call in message.get("tool_calls") or []:
        fn = call.get("function") or {}
        arguments = arguments_object(fn.get("arguments"))
        if arguments is None:
            unsent.append({"id": call.get("id"), "name": fn.get("name"),
                           "arguments": fn.get("arguments")})
            continue
        content.append({"type": "tool_use", "id": call.get("id"), "name": fn.get("name"),
                        "input": arguments})
    calls = any(b["type"] == "tool_use" for b in content)
    stop_reason, sequence = _stop(choice.get("finish_reason"), choice.get("stop_reason"),
                                  request.get("stop_sequences"), calls)
    out: dict[str, Any] = {"id": message_id(str(chat.get("id") or "")), "type": "message",
                           "role": "assistant", "model": request.get("model") or chat.get("model"),
                           "content": content, "stop_reason": stop_reason,
                           "stop_sequence": sequence, "usage": _usage(chat.get("usage"))}
    report = chat.get("toolcodec")
    field: dict[str, Any] = {}
    if isinstance(report, list) and report:
        field.update(report[0])
    if unsent:
        field["unsent_calls"] = unsent
    if field:
        out["toolcodec"] = field
    return out, ({"x-toolcodec-unsent-calls": str(len(unsent))} if unsent else {})


def error(status: int, body: Any) -> dict[str, Any]:
    """A Messages error body for the chat route's error answer (its ``toolcodec`` kept)."""
    inner = body.get("error") if isinstance(body, dict) else None
    inner = inner if isinstance(inner, dict) else {}
    out: dict[str, Any] = {"type": "error", "error": {
        "type": _ERROR_TYPE.get(status, "api_error"),
        "message": str(inner.get("message") or f"status {status}")}}
    if inner.get("code"):
        out["error"]["code"] = inner["code"]
    if isinstance(body, dict) and body.get("toolcodec") is not None:
        out["toolcodec"] = body["toolcodec"]
    return out


def _event(kind: str, body: dict[str, Any]) -> bytes:
    return b"event: " + kind.encode() + b"\ndata: " + orjson.dumps({"type": kind, **body}) \
        + b"\n\n"


async def stream(parts: AsyncIterator[bytes], request: dict[str, Any]
                 ) -> AsyncIterator[bytes]:
    """The Messages stream events for the chat route's decoded stream *parts*."""
    reader = ChunkReader()
    started = False
    block: str | None = None  # the open block's type
    index = -1
    unsent: list[dict[str, Any]] = []
    tool_uses = 0

    def open_block(kind: str, start: dict[str, Any]) -> list[bytes]:
        nonlocal block, index
        out = close_block()
        index += 1
        block = kind
        out.append(_event("content_block_start", {"index": index, "content_block": start}))
        return out

    def close_block() -> list[bytes]:
        nonlocal block
        if block is None:
            return []
        block = None
        return [_event("content_block_stop", {"index": index})]

    def start() -> list[bytes]:
        nonlocal started
        if started:
            return []
        started = True
        return [_event("message_start", {"message": {
            "id": message_id(reader.id), "type": "message", "role": "assistant",
            "model": request.get("model") or reader.model, "content": [],
            "stop_reason": None, "stop_sequence": None,
            "usage": {"input_tokens": 0, "output_tokens": 0}}})]

    def events(found: list[tuple[str, Any]]) -> tuple[list[bytes], bool]:
        nonlocal tool_uses
        out: list[bytes] = []
        for kind, value in found:
            if kind == "heartbeat":
                out.append(_event("ping", {}))
                continue
            out += start()
            if kind == "error":
                out += close_block()
                out.append(_event("error", {"error": {"type": "api_error",
                                                      "message": value["message"],
                                                      "code": value["code"]}}))
                return out, True
            if kind == "reasoning":
                if block != "thinking":
                    out += open_block("thinking", {"type": "thinking", "thinking": "",
                                                   "signature": ""})
                out.append(_event("content_block_delta", {"index": index, "delta": {
                    "type": "thinking_delta", "thinking": value}}))
            elif kind == "text":
                if block != "text":
                    out += open_block("text", {"type": "text", "text": ""})
                out.append(_event("content_block_delta", {"index": index, "delta": {
                    "type": "text_delta", "text": value}}))
            elif kind == "call":
                arguments = arguments_object(value["arguments"])
                if arguments is None:
                    unsent.append(value)
                    continue
                tool_uses += 1
                out += open_block("tool_use", {"type": "tool_use", "id": value["id"],
                                               "name": value["name"], "input": {}})
                out.append(_event("content_block_delta", {"index": index, "delta": {
                    "type": "input_json_delta",
                    "partial_json": orjson.dumps(arguments).decode()}}))
                out += close_block()
        return out, False

    def finish(out: list[bytes]) -> list[bytes]:
        out += start() + close_block()
        stop_reason, sequence = _stop(reader.finish, None, None, tool_uses > 0)
        delta: dict[str, Any] = {"delta": {"stop_reason": stop_reason,
                                           "stop_sequence": sequence},
                                 "usage": _usage(reader.usage)}  # known at the end only
        field = dict(reader.toolcodec or {})
        if unsent:
            field["unsent_calls"] = unsent
        if field:
            delta["toolcodec"] = field
        out.append(_event("message_delta", delta))
        out.append(_event("message_stop", {}))
        return out

    async for chunk in relay(parts, reader, events, finish):
        yield chunk
