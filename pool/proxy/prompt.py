"""Tools as a system prompt, for model servers that cannot take ``tools`` themselves.

The request's ``tools`` and ``tool_choice`` are removed and a system message is put first
that lists each tool (name, description, JSON Schema of the arguments) and asks for calls in
the Hermes form, ``<tool_call>{"name": …, "arguments": {…}}</tool_call>``, which the proxy then
decodes like any other output. An existing first system message is kept, after the tools.
"""

from __future__ import annotations

from typing import Any

import orjson

_INSTRUCTIONS = (
    "You can call the tools below. To call one, write exactly\n"
    '<tool_call>{"name": "<tool name>", "arguments": {<arguments as JSON>}}</tool_call>\n'
    "with arguments that satisfy the tool's JSON Schema. Write one <tool_call> block per "
    "call, and nothing inside the block but the JSON.\n\nTools:\n")


def tools_as_system_prompt(body: dict[str, Any]) -> dict[str, Any]:
    """A copy of the chat request with its tools moved into a leading system message."""
    lines = []
    for tool in body.get("tools") or []:
        fn = tool.get("function", tool) if isinstance(tool, dict) else {}
        if not isinstance(fn, dict) or not isinstance(fn.get("name"), str):
            continue
        schema = fn.get("parameters") or {"type": "object"}
        description = fn.get("description") or ""
        lines.append(f"- {fn['name']}: {description}\n  arguments schema: "
                     f"{orjson.dumps(schema).decode()}")
    prompt = _INSTRUCTIONS + "\n".join(lines)
    messages = list(body.get("messages") or [])
    if messages and isinstance(messages[0], dict) and messages[0].get("role") == "system":
        first = messages.pop(0)
        prompt = f"{prompt}\n\n{first.get('content') or ''}".rstrip()
    out = {k: v for k, v in body.items() if k not in ("tools", "tool_choice")}
    out["messages"] = [{"role": "system", "content": prompt}, *messages]
    return out
