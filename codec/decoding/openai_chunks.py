"""Stream-decoder events out as OpenAI ``chat.completion.chunk`` dicts.

A server that decodes an upstream stream with ``StreamDecoder`` can forward the repaired
stream to any OpenAI client::

    out = ChunkWriter(id=upstream_id, model=model, created=created)
    for event in decoder.feed(piece):
        chunk = out.chunk(event)          # None for events a client has no field for
    ...
    final = out.final()                   # finish_reason "tool_calls" when calls were sent

``content`` → ``delta.content``; ``reasoning`` → ``delta.reasoning_content``; ``tool_call`` →
``delta.tool_calls[{index, id, type: "function", function: {name, arguments}}]`` with the
arguments as a JSON string and ``index`` counting the calls of this stream; ``error`` events
have no place in a delta (the block's text follows as content) and give ``None``. The first
chunk carries ``role: "assistant"``. Pure: no I/O, no clock (``created`` is given).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import orjson


@dataclass(slots=True)
class ChunkWriter:
    """Builds the chunks of one choice of one streamed completion."""

    id: str
    model: str
    created: int
    choice: int = 0
    call_id: Any = None  # optional (event, n) -> id; the event's own id by default
    calls: int = 0
    _role_sent: bool = False

    def chunk(self, event: dict[str, Any]) -> dict[str, Any] | None:
        kind = event.get("type")
        if kind == "content" and event.get("text"):
            return self._delta({"content": event["text"]})
        if kind == "reasoning" and event.get("text"):
            return self._delta({"reasoning_content": event["text"]})
        if kind == "tool_call":
            n = self.calls
            self.calls += 1
            call_id = self.call_id(event, n) if self.call_id is not None else event["id"]
            return self._delta({"tool_calls": [{
                "index": n, "id": call_id, "type": "function",
                "function": {"name": event["name"],
                             "arguments": orjson.dumps(event["arguments"]).decode()}}]})
        return None

    @property
    def role_sent(self) -> bool:
        """Whether a chunk has been made (the first carries ``role: "assistant"``)."""
        return self._role_sent

    def raw_call(self, call: dict[str, Any]) -> dict[str, Any]:
        """A chunk for a call passed on as written (``{"id", "function": {...}}``)."""
        n = self.calls
        self.calls += 1
        fn = call.get("function") or {}
        return self._delta({"tool_calls": [{
            "index": n, "id": call.get("id") or f"call_{n}", "type": "function",
            "function": {"name": fn.get("name") or "", "arguments": fn.get("arguments") or ""}}]})

    def final(self, upstream_reason: str | None = None, **extra: Any) -> dict[str, Any]:
        """The last chunk: ``tool_calls`` when calls were sent, else the upstream's reason
        (``stop`` when it had none, or claimed calls that did not survive decoding); a cut
        output stays ``length`` even with calls (the one it was cut in was not completed)."""
        if upstream_reason == "length":
            reason = "length"
        elif self.calls:
            reason = "tool_calls"
        else:
            reason = "stop" if upstream_reason in (None, "tool_calls") else upstream_reason
        return {**self._head(), "choices": [{"index": self.choice, "delta": {},
                                              "finish_reason": reason}], **extra}

    def _delta(self, delta: dict[str, Any]) -> dict[str, Any]:
        if not self._role_sent:
            delta = {"role": "assistant", **delta}
            self._role_sent = True
        return {**self._head(), "choices": [{"index": self.choice, "delta": delta,
                                              "finish_reason": None}]}

    def _head(self) -> dict[str, Any]:
        return {"id": self.id, "object": "chat.completion.chunk", "created": self.created,
                "model": self.model}
