"""OpenAI's Responses API (``POST /v1/responses``) over the upstream's Chat Completions.

The request is translated to a chat completion request (so any OpenAI-compatible model server
answers it), decoded by the chat route, and its answer translated back:

- request: ``instructions`` → a system message; ``input`` (a string, or items: messages with
  ``input_text``/``output_text``/``input_image`` parts, ``function_call`` and
  ``function_call_output`` items) → chat messages; ``tools[{type: "function", name,
  description, parameters}]`` → function tools; ``tool_choice`` as in chat (a forced one is
  ``{"type": "function", "name": N}``); ``max_output_tokens`` → ``max_tokens``;
  ``temperature``, ``top_p``, ``parallel_tool_calls``, ``stream`` and the ``toolcodec`` field
  go on. ``previous_response_id`` and built-in tools (web search, file search, …) need state
  or tools this proxy does not have: a 400.
- answer: a ``response`` object whose ``output`` holds a ``reasoning`` item
  (``reasoning_content``), a ``message`` item (``output_text``) and one ``function_call`` item
  per call (``call_id``, ``name``, ``arguments`` as a JSON string); ``finish_reason: length``
  → ``status: "incomplete"`` with ``incomplete_details.reason: "max_output_tokens"``.
- stream: ``response.created``, ``response.in_progress``, per item
  ``response.output_item.added`` … ``response.output_item.done`` (text:
  ``response.content_part.added``, ``response.output_text.delta``/``.done``,
  ``response.content_part.done``; reasoning: ``response.reasoning_text.delta``/``.done``;
  calls: ``response.function_call_arguments.delta``/``.done``), then ``response.completed``
  (or ``response.incomplete``). An upstream failure mid-way ends the stream with
  ``response.failed`` carrying the error's ``code`` and ``message``.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import AsyncIterator
from typing import Any

import orjson
from toolcodec.pool.proxy.chat_events import ChunkReader, relay
from toolcodec.pool.proxy.translated import TranslationError

_COPIED = ("model", "temperature", "top_p", "parallel_tool_calls", "stream", "toolcodec")


def to_chat(body: dict[str, Any]) -> dict[str, Any]:
    """The chat completion request for a Responses request (``TranslationError``: a 400)."""
    if body.get("previous_response_id"):
        raise TranslationError("previous_response_id: this proxy keeps no responses; send "
                               "the conversation in 'input'")
    chat: dict[str, Any] = {k: body[k] for k in _COPIED if k in body}
    if body.get("max_output_tokens") is not None:
        chat["max_tokens"] = body["max_output_tokens"]
    if body.get("stream"):
        chat["stream_options"] = {"include_usage": True}
    messages: list[dict[str, Any]] = []
    if isinstance(body.get("instructions"), str) and body["instructions"]:
        messages.append({"role": "system", "content": body["instructions"]})
    items = body.get("input")
    if isinstance(items, str):
        messages.append({"role": "user", "content": items})
    elif isinstance(items, list):
        for i, item in enumerate(items):
            _item(item, f"input[{i}]", messages)
    else:
        raise TranslationError("'input' must be a string or a list of items")
    chat["messages"] = messages
    if body.get("tools") is not None:
        if not isinstance(body["tools"], list):
            raise TranslationError("'tools' must be a list")
        chat["tools"] = [_tool(t, f"tools[{i}]") for i, t in enumerate(body["tools"])]
    choice = body.get("tool_choice")
    if choice is not None:
        if choice in ("auto", "none", "required"):
            chat["tool_choice"] = choice
        elif isinstance(choice, dict) and choice.get("type") == "function" \
                and isinstance(choice.get("name"), str):
            chat["tool_choice"] = {"type": "function", "function": {"name": choice["name"]}}
        else:
            raise TranslationError("tool_choice must be \"auto\", \"none\", \"required\" or "
                                   "{\"type\": \"function\", \"name\": NAME}")
    return chat


def _tool(tool: Any, where: str) -> dict[str, Any]:
    if not isinstance(tool, dict) or tool.get("type") != "function" \
            or not isinstance(tool.get("name"), str):
        kind = tool.get("type") if isinstance(tool, dict) else None
        raise TranslationError(f"{where}: only function tools ({{\"type\": \"function\", "
                               f"\"name\": …}}) are available through this proxy, not {kind!r}")
    fn: dict[str, Any] = {"name": tool["name"],
                          "parameters": tool.get("parameters") or {"type": "object"}}
    if tool.get("description"):
        fn["description"] = tool["description"]
    return {"type": "function", "function": fn}


def _item(item: Any, where: str, messages: list[dict[str, Any]]) -> None:
    if not isinstance(item, dict):
        raise TranslationError(f"{where} must be an object")
    kind = item.get("type", "message")
    if kind == "message":
        role = item.get("role")
        if role not in ("user", "assistant", "system", "developer"):
            raise TranslationError(f"{where}.role must be user, assistant, system or developer")
        messages.append({"role": "system" if role == "developer" else role,
                         "content": _content(item.get("content"), where)})
    elif kind == "function_call":
        call = {"id": str(item.get("call_id") or ""), "type": "function", "function": {
            "name": str(item.get("name") or ""), "arguments": str(item.get("arguments") or "")}}
        last = messages[-1] if messages else None
        if last is not None and last["role"] == "assistant" and "tool_calls" in last:
            last["tool_calls"].append(call)  # parallel calls: one assistant message
        elif last is not None and last["role"] == "assistant" and last.get("content") \
                and isinstance(last["content"], str):
            last["tool_calls"] = [call]
        else:
            messages.append({"role": "assistant", "content": None, "tool_calls": [call]})
    elif kind == "function_call_output":
        output = item.get("output")
        messages.append({"role": "tool", "tool_call_id": str(item.get("call_id") or ""),
                         "content": output if isinstance(output, str)
                         else _content(output, where)})
    elif kind == "reasoning":
        return  # the model's own reasoning is not sent back
    else:
        raise TranslationError(f"{where}: a {kind!r} item is not taken by this proxy")


def _content(content: Any, where: str) -> Any:
    if isinstance(content, str):
        return content
    if not isinstance(content, list):
        raise TranslationError(f"{where}.content must be a string or a list of parts")
    parts: list[dict[str, Any]] = []
    for part in content:
        kind = part.get("type") if isinstance(part, dict) else None
        if kind in ("input_text", "output_text", "text"):
            parts.append({"type": "text", "text": str(part.get("text") or "")})
        elif kind == "input_image" and isinstance(part.get("image_url"), str):
            parts.append({"type": "image_url", "image_url": {"url": part["image_url"]}})
        else:
            raise TranslationError(f"{where}: a {kind!r} content part is not taken here")
    if all(p["type"] == "text" for p in parts):
        return "".join(p["text"] for p in parts)
    return parts


# -- answers -----------------------------------------------------------------------------------


def _id(prefix: str, seed: str) -> str:
    return prefix + hashlib.blake2b(seed.encode(), digest_size=12).hexdigest()


def _usage(usage: Any) -> dict[str, Any] | None:
    if not isinstance(usage, dict):
        return None
    prompt = int(usage.get("prompt_tokens") or 0)
    completion = int(usage.get("completion_tokens") or 0)
    return {"input_tokens": prompt, "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": completion, "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": prompt + completion}


def _response(seed: str, request: dict[str, Any], created: int, status: str,
              output: list[dict[str, Any]], usage: Any = None, model: str = "") -> dict[str, Any]:
    return {"id": _id("resp_", seed), "object": "response", "created_at": created,
            "status": status, "error": None,
            "incomplete_details": {"reason": "max_output_tokens"}
            if status == "incomplete" else None,
            "instructions": request.get("instructions"), "metadata": {},
            "model": request.get("model") or model, "output": output,
            "parallel_tool_calls": request.get("parallel_tool_calls", True),
            "temperature": request.get("temperature"), "top_p": request.get("top_p"),
            "tool_choice": request.get("tool_choice", "auto"),
            "tools": request.get("tools") or [],
            "max_output_tokens": request.get("max_output_tokens"),
            "text": {"format": {"type": "text"}}, "truncation": "disabled",
            "usage": _usage(usage)}


def _reasoning_item(seed: str, text: str) -> dict[str, Any]:
    return {"type": "reasoning", "id": _id("rs_", seed), "summary": [],
            "content": [{"type": "reasoning_text", "text": text}], "status": "completed"}


def _message_item(seed: str, text: str, status: str = "completed") -> dict[str, Any]:
    return {"type": "message", "id": _id("msg_", seed), "role": "assistant", "status": status,
            "content": [{"type": "output_text", "text": text, "annotations": [],
                         "logprobs": []}]}


def _call_item(call: dict[str, Any], status: str = "completed") -> dict[str, Any]:
    return {"type": "function_call", "id": _id("fc_", str(call.get("id"))),
            "call_id": call.get("id"), "name": call.get("name"),
            "arguments": call.get("arguments"), "status": status}


def answer(chat: dict[str, Any], request: dict[str, Any]) -> tuple[dict[str, Any], dict]:
    """The Responses object for the chat route's decoded answer, and extra headers."""
    choice = (chat.get("choices") or [{}])[0]
    message = choice.get("message") or {}
    seed = str(chat.get("id") or "")
    output: list[dict[str, Any]] = []  # item ids as the stream gives them: by position
    if message.get("reasoning_content"):
        output.append(_reasoning_item(f"{seed}:{len(output)}", message["reasoning_content"]))
    if message.get("content"):
        output.append(_message_item(f"{seed}:{len(output)}", message["content"]))
    for call in message.get("tool_calls") or []:
        fn = call.get("function") or {}
        output.append(_call_item({"id": call.get("id"), "name": fn.get("name"),
                                  "arguments": fn.get("arguments")}))
    status = "incomplete" if choice.get("finish_reason") == "length" else "completed"
    created = chat.get("created") if isinstance(chat.get("created"), int) else int(time.time())
    out = _response(seed, request, created, status, output, chat.get("usage"),
                    str(chat.get("model") or ""))
    if isinstance(chat.get("toolcodec"), list) and chat["toolcodec"]:
        out["toolcodec"] = chat["toolcodec"][0]
    return out, {}


def error(status: int, body: Any) -> dict[str, Any]:
    """An OpenAI error body (the chat route's already is one; a bare one is wrapped)."""
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        inner = body["error"]
        out = {"error": {"message": str(inner.get("message") or f"status {status}"),
                         "type": inner.get("type") or "invalid_request_error",
                         "code": inner.get("code"), "param": inner.get("param")}}
        if body.get("toolcodec") is not None:
            out["toolcodec"] = body["toolcodec"]
        return out
    return {"error": {"message": f"status {status}", "type": "upstream_error", "code": None,
                      "param": None}}


async def stream(parts: AsyncIterator[bytes], request: dict[str, Any]
                 ) -> AsyncIterator[bytes]:
    """The Responses stream events for the chat route's decoded stream *parts*."""
    reader = ChunkReader()
    sequence = 0
    created = int(time.time())
    output: list[dict[str, Any]] = []  # items done
    item: dict[str, Any] | None = None  # the open item
    started = False

    def event(kind: str, body: dict[str, Any]) -> bytes:
        nonlocal sequence
        data = {"type": kind, "sequence_number": sequence, **body}
        sequence += 1
        return b"event: " + kind.encode() + b"\ndata: " + orjson.dumps(data) + b"\n\n"

    def response(status: str) -> dict[str, Any]:
        return _response(reader.id, request, created, status, list(output),
                         reader.usage, reader.model)

    def start() -> list[bytes]:
        nonlocal started
        if started:
            return []
        started = True
        return [event("response.created", {"response": response("in_progress")}),
                event("response.in_progress", {"response": response("in_progress")})]

    def close() -> list[bytes]:
        nonlocal item
        if item is None:
            return []
        done, item = item, None
        index = len(output)
        out = []
        if done["type"] == "message":
            text = done["content"][0]["text"]
            out.append(event("response.output_text.done", {
                "item_id": done["id"], "output_index": index, "content_index": 0,
                "text": text, "logprobs": []}))
            out.append(event("response.content_part.done", {
                "item_id": done["id"], "output_index": index, "content_index": 0,
                "part": done["content"][0]}))
        elif done["type"] == "reasoning":
            out.append(event("response.reasoning_text.done", {
                "item_id": done["id"], "output_index": index, "content_index": 0,
                "text": done["content"][0]["text"]}))
        done["status"] = "completed"
        output.append(done)
        out.append(event("response.output_item.done", {"output_index": index, "item": done}))
        return out

    def opened(new: dict[str, Any]) -> list[bytes]:
        nonlocal item
        out = close()
        item = new
        added = {**new, "status": "in_progress"}
        if new["type"] == "message":
            added["content"] = []
        elif new["type"] == "reasoning":
            added["content"] = []
        out.append(event("response.output_item.added", {"output_index": len(output),
                                                        "item": added}))
        if new["type"] == "message":
            out.append(event("response.content_part.added", {
                "item_id": new["id"], "output_index": len(output), "content_index": 0,
                "part": {"type": "output_text", "text": "", "annotations": [],
                         "logprobs": []}}))
        return out

    def events(found: list[tuple[str, Any]]) -> tuple[list[bytes], bool]:
        out: list[bytes] = []
        for kind, value in found:
            if kind == "heartbeat":
                out.append(b": keep-alive\n\n")
                continue
            out += start()
            index = len(output)
            if kind == "error":
                out += close()
                failed = response("failed")
                failed["error"] = {"code": value["code"], "message": value["message"]}
                out.append(event("response.failed", {"response": failed}))
                return out, True
            if kind == "reasoning":
                if item is None or item["type"] != "reasoning":
                    out += opened(_reasoning_item(f"{reader.id}:{index}", ""))
                item["content"][0]["text"] += value
                out.append(event("response.reasoning_text.delta", {
                    "item_id": item["id"], "output_index": len(output), "content_index": 0,
                    "delta": value}))
            elif kind == "text":
                if item is None or item["type"] != "message":
                    out += opened(_message_item(f"{reader.id}:{index}", ""))
                item["content"][0]["text"] += value
                out.append(event("response.output_text.delta", {
                    "item_id": item["id"], "output_index": len(output), "content_index": 0,
                    "delta": value, "logprobs": []}))
            elif kind == "call":
                new = _call_item({**value, "arguments": ""})
                out += opened(new)
                item["arguments"] = value["arguments"]
                out.append(event("response.function_call_arguments.delta", {
                    "item_id": new["id"], "output_index": len(output),
                    "delta": value["arguments"]}))
                out.append(event("response.function_call_arguments.done", {
                    "item_id": new["id"], "output_index": len(output), "name": value["name"],
                    "arguments": value["arguments"]}))
                out += close()
        return out, False

    def finish(out: list[bytes]) -> list[bytes]:
        out += start() + close()
        status = "incomplete" if reader.finish == "length" else "completed"
        final = response(status)
        if reader.toolcodec:
            final["toolcodec"] = reader.toolcodec
        out.append(event(f"response.{status}", {"response": final}))
        return out

    async for chunk in relay(parts, reader, events, finish):
        yield chunk
