"""``toolcodec demo-upstream``: a STAND-IN model server that replays recorded outputs.

No model runs: ``POST /v1/chat/completions`` answers with a recorded model output (shipped in
``demo_outputs.jsonl``, each named and with the origin of its shape), as one JSON answer or,
with ``stream: true``, as SSE chunks the way vLLM and llama.cpp send them: content in 1–8
character pieces cut at seeded places (inside special tokens too), native tool calls as an
id/name fragment followed by argument fragments. It exists to try the proxy in a minute
(``toolcodec serve --upstream http://127.0.0.1:8000/v1``) and for the documentation's examples.

Which output answers a request: the last user message ``"case:NAME"`` names one; else the
request's ``model`` if a recording was made with that model; else the default
(``--default``). ``GET /v1/models`` lists the recordings' models; ``GET /v1/demo/outputs``
lists every recording (name, origin, model). The request's ``tools`` are not read: the answer
is what the model wrote, broken or not.
"""

from __future__ import annotations

import asyncio
import random
from collections.abc import AsyncIterator
from importlib import resources
from typing import Any

import orjson
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import Response, StreamingResponse
from starlette.routing import Route

DEFAULT = "qwen3-hermes-broken"
CREATED = 1_700_000_000
_JSON = "application/json"


def recorded_outputs() -> dict[str, dict[str, Any]]:
    """The shipped recordings by name, in file order."""
    raw = resources.files("toolcodec.pool.proxy").joinpath("demo_outputs.jsonl").read_bytes()
    return {row["name"]: row for row in map(orjson.loads, raw.splitlines()) if row}


def choose(body: dict[str, Any], outputs: dict[str, dict[str, Any]], default: str
           ) -> dict[str, Any] | None:
    """The recording that answers *body* (None: ``case:NAME`` names none)."""
    for message in reversed(body.get("messages") or []):
        if isinstance(message, dict) and message.get("role") == "user":
            text = message.get("content")
            if isinstance(text, str) and text.startswith("case:"):
                return outputs.get(text[5:].strip())
            break
    model = body.get("model")
    for row in outputs.values():
        if row.get("model") is not None and row.get("model") == model:
            return row
    return outputs[default]


def pieces(text: str, seed: str) -> list[str]:
    """*text* in 1–8 character pieces, the same ones for the same seed."""
    rng = random.Random(seed)
    out, i = [], 0
    while i < len(text):
        n = rng.randint(1, 8)
        out.append(text[i:i + n])
        i += n
    return out


def message(row: dict[str, Any]) -> dict[str, Any]:
    """The recorded assistant message."""
    out: dict[str, Any] = {"role": "assistant", "content": row.get("content")}
    for key in ("reasoning_content", "tool_calls"):
        if row.get(key) is not None:
            out[key] = row[key]
    return out


def finish_reason(row: dict[str, Any]) -> str:
    return row.get("finish_reason") or ("tool_calls" if row.get("tool_calls") else "stop")


def deltas(row: dict[str, Any]) -> list[dict[str, Any]]:
    """The recorded message as the deltas an engine streams."""
    out: list[dict[str, Any]] = [{"role": "assistant", "content": ""}]
    reasoning = row.get("reasoning_content") or ""
    out += [{"reasoning_content": reasoning[i:i + 4]} for i in range(0, len(reasoning), 4)]
    out += [{"content": piece} for piece in pieces(row.get("content") or "", row["name"])]
    for index, call in enumerate(row.get("tool_calls") or []):
        fn = call["function"]
        out.append({"tool_calls": [{"index": index, "id": call["id"], "type": "function",
                                    "function": {"name": fn["name"], "arguments": ""}}]})
        args = fn["arguments"]
        out += [{"tool_calls": [{"index": index, "function": {"arguments": args[i:i + 5]}}]}
                for i in range(0, len(args), 5)]
    return out


def _usage(row: dict[str, Any]) -> dict[str, int]:
    written = len(row.get("content") or "") + len(orjson.dumps(row.get("tool_calls") or []))
    completion = max(1, written // 4)  # about four characters a token
    return {"prompt_tokens": 10, "completion_tokens": completion,
            "total_tokens": 10 + completion}


def build_app(default: str = DEFAULT) -> Starlette:
    """The stand-in's ASGI app, answering with *default* unless a request names another."""
    outputs = recorded_outputs()
    if default not in outputs:
        raise ValueError(f"no recorded output {default!r}; there are {list(outputs)}")

    async def completions(request: Request) -> Response:
        try:
            body = orjson.loads(await request.body())
        except orjson.JSONDecodeError:
            return _error(400, "the request body is not JSON")
        if not isinstance(body, dict) or not isinstance(body.get("messages"), list):
            return _error(400, "'messages' must be a list")
        row = choose(body, outputs, default)
        if row is None:
            return _error(404, f"no recorded output by that name; there are {list(outputs)}")
        model = body.get("model") if isinstance(body.get("model"), str) else "demo"
        head = {"id": f"chatcmpl-demo-{row['name']}", "created": CREATED, "model": model,
                "system_fingerprint": "fp_demo"}
        if body.get("stream"):
            usage = (body.get("stream_options") or {}).get("include_usage") is True
            return StreamingResponse(_stream(row, head, usage), media_type="text/event-stream")
        answer = {**head, "object": "chat.completion", "usage": _usage(row), "choices": [
            {"index": 0, "message": message(row), "finish_reason": finish_reason(row)}]}
        return Response(orjson.dumps(answer), media_type=_JSON)

    async def models(request: Request) -> Response:
        names = dict.fromkeys(r["model"] for r in outputs.values() if r.get("model"))
        return Response(orjson.dumps({"object": "list", "data": [
            {"id": name, "object": "model", "created": CREATED, "owned_by": "demo"}
            for name in names]}), media_type=_JSON)

    async def listing(request: Request) -> Response:
        return Response(orjson.dumps([{k: r.get(k) for k in ("name", "origin", "model")}
                                      for r in outputs.values()]), media_type=_JSON)

    return Starlette(routes=[Route("/v1/chat/completions", completions, methods=["POST"]),
                             Route("/v1/models", models, methods=["GET"]),
                             Route("/v1/demo/outputs", listing, methods=["GET"])])


async def _stream(row: dict[str, Any], head: dict[str, Any], usage: bool
                  ) -> AsyncIterator[bytes]:
    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        body = {**head, "object": "chat.completion.chunk",
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
        return b"data: " + orjson.dumps(body) + b"\n\n"

    for delta in deltas(row):
        yield chunk(delta)
        await asyncio.sleep(0)  # one chunk per write, as a server sends tokens
    yield chunk({}, finish_reason(row))
    if usage:
        body = {**head, "object": "chat.completion.chunk", "choices": [], "usage": _usage(row)}
        yield b"data: " + orjson.dumps(body) + b"\n\n"
    yield b"data: [DONE]\n\n"


def _error(status: int, text: str) -> Response:
    return Response(orjson.dumps({"error": {"message": text, "type": "invalid_request_error"}}),
                    status, media_type=_JSON)


def serve(host: str, port: int, default: str = DEFAULT) -> int:
    """Serve until interrupted; prints one line once listening."""
    import uvicorn  # the server, for this command only

    app = build_app(default)

    class _Server(uvicorn.Server):
        async def startup(self, sockets: Any = None) -> None:
            await super().startup(sockets)
            if self.started:
                print(f"toolcodec demo-upstream: recorded model outputs on "
                      f"http://{host}:{port}/v1 (default {default!r}; no model runs)",
                      flush=True)

        def handle_exit(self, sig: int, frame: Any) -> None:
            super().handle_exit(sig, frame)
            # uvicorn re-raises the signal after shutting down; stopped on request is exit 0
            self._captured_signals.clear()

    config = uvicorn.Config(app, host=host, port=port, log_level="warning", access_log=False,
                            lifespan="off")
    server = _Server(config)
    server.run()
    return 0 if server.started else 1
