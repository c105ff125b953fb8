"""The assistant message an OpenAI client gets from a decode result, streamed or whole."""

from __future__ import annotations

import hashlib
from typing import Any

import orjson


def call_id(seed: str, index: int) -> str:
    """The id of call *index* of an answer; *seed* is random per request and choice, so that
    ids are unique per call (never derived from the upstream's answer id alone)."""
    digest = hashlib.blake2b(f"{seed}:{index}".encode(), digest_size=12).hexdigest()
    return f"call_{digest}"


def unrepaired_natives(result: dict[str, Any], natives: Any) -> list[dict[str, Any]]:
    """The native calls decoding refused (by ``call_index``), exactly as the model sent them;
    not one the output was cut off in (``truncated``): a call never finished reaches no tool."""
    if not isinstance(natives, list):
        return []
    failed = sorted({e["call_index"] for e in result.get("errors") or []
                     if isinstance(e.get("call_index"), int) and e.get("code") != "truncated"})
    return [natives[i] for i in failed if 0 <= i < len(natives) and isinstance(natives[i], dict)]


def openai_message(result: dict[str, Any], id_seed: str) -> dict[str, Any]:
    """The assistant message an OpenAI client expects, from a decode result."""
    message: dict[str, Any] = {"role": "assistant", "content": result["content"] or None}
    if result.get("reasoning"):
        message["reasoning_content"] = result["reasoning"]
    if result["calls"]:
        message["tool_calls"] = [
            {"id": call_id(id_seed, i), "type": "function",
             "function": {"name": c["name"], "arguments": orjson.dumps(c["arguments"]).decode()}}
            for i, c in enumerate(result["calls"])]
    return message
