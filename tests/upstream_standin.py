"""A STAND-IN for a model server (no model can run here): it replays recorded outputs.

It speaks the OpenAI chat API over real HTTP (uvicorn on a free loopback port, in a thread):
``POST /v1/chat/completions`` answers with the recorded output named by the last user
message (``"case:NAME"``, from ``tests/data/recorded_outputs.jsonl``), as one JSON answer or,
with ``stream: true``, as SSE chunks the way vLLM and llama.cpp send them (content in small
pieces; native tool calls as an id/name fragment followed by argument fragments). Special
cases: ``case:http500``, ``case:http400`` (error answers), ``case:hang`` (never answers),
``case:cut:NAME`` (the stream stops half-way through NAME's output, without ``[DONE]``).
``GET /v1/models`` lists one model; ``GET /_last`` returns the last request body received.
"""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from typing import Any

import orjson
import uvicorn
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from starlette.routing import Route

from tests.redis_server import free_port

RECORDED = Path(__file__).resolve().parent / "data" / "recorded_outputs.jsonl"
CASES: dict[str, dict[str, Any]] = {
    row["name"]: row for row in map(orjson.loads, RECORDED.read_bytes().splitlines()) if row}
MODEL = "standin-model"
CREATED = 1_700_000_000


def _case(body: dict[str, Any], default: str = "prose") -> str:
    for message in reversed(body.get("messages") or []):
        if message.get("role") == "user" and str(message.get("content", "")).startswith("case:"):
            return str(message["content"])[5:]
    return default


def _message(case: dict[str, Any]) -> dict[str, Any]:
    message = {"role": "assistant", "content": case.get("content")}
    for key in ("tool_calls", "reasoning_content"):
        if case.get(key) is not None:
            message[key] = case[key]
    return message


def _answer(name: str, case: dict[str, Any]) -> dict[str, Any]:
    return {"id": f"chatcmpl-{name}", "object": "chat.completion", "created": CREATED,
            "model": MODEL, "choices": [{"index": 0, "message": _message(case),
                                          "finish_reason": _finish(case)}],
            "usage": {"prompt_tokens": 10, "completion_tokens": 20, "total_tokens": 30}}


def _finish(case: dict[str, Any]) -> str:
    """The case's recorded finish_reason (``length`` for an output cut by max_tokens)."""
    return case.get("finish_reason") or ("tool_calls" if case.get("tool_calls") else "stop")


def _deltas(case: dict[str, Any]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = [{"role": "assistant", "content": ""}]
    reasoning = case.get("reasoning_content") or ""
    out += [{"reasoning_content": reasoning[i:i + 4]} for i in range(0, len(reasoning), 4)]
    content = case.get("content") or ""
    out += [{"content": content[i:i + 3]} for i in range(0, len(content), 3)]
    for index, call in enumerate(case.get("tool_calls") or []):
        fn = call["function"]
        out.append({"tool_calls": [{"index": index, "id": call["id"], "type": "function",
                                    "function": {"name": fn["name"], "arguments": ""}}]})
        args = fn["arguments"]
        out += [{"tool_calls": [{"index": index, "function": {"arguments": args[i:i + 5]}}]}
                for i in range(0, len(args), 5)]
    return out


def _chunk(name: str, delta: dict[str, Any], finish: str | None = None) -> bytes:
    body = {"id": f"chatcmpl-{name}", "object": "chat.completion.chunk", "created": CREATED,
            "model": MODEL, "choices": [{"index": 0, "delta": delta, "finish_reason": finish}]}
    return b"data: " + orjson.dumps(body) + b"\n\n"


async def _stream(name: str, case: dict[str, Any], cut: bool):
    deltas = _deltas(case)
    if cut:
        deltas = deltas[: max(1, len(deltas) // 2)]
    for delta in deltas:
        yield _chunk(name, delta)
        await asyncio.sleep(0)
    if cut:
        raise ConnectionResetError("stand-in cuts the stream")  # uvicorn drops the connection
    yield _chunk(name, {}, _finish(case))
    yield b"data: [DONE]\n\n"


class Standin:
    """The stand-in server; ``url`` is its base (``http://127.0.0.1:PORT``)."""

    def __init__(self, port: int | None = None, default_case: str = "prose") -> None:
        """*port*: a free one unless given; *default_case*: the answer to a request whose last
        user message names no case (a question as a reader would ask it)."""
        self.last: dict[str, Any] | None = None
        self.default_case = default_case
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        app = Starlette(routes=[
            Route("/v1/chat/completions", self._completions, methods=["POST"]),
            Route("/v1/models", self._models, methods=["GET"]),
            Route("/_last", self._last, methods=["GET"]),
        ])
        config = uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning",
                                lifespan="off")
        self.server = uvicorn.Server(config)
        self.thread = threading.Thread(target=self.server.run, daemon=True)

    def start(self) -> Standin:
        self.thread.start()
        while not self.server.started:  # a condition, not a guess of how long start-up takes
            if not self.thread.is_alive():
                raise RuntimeError("the upstream stand-in failed to start")
            threading.Event().wait(0.01)
        return self

    def stop(self) -> None:
        self.server.should_exit = True
        self.thread.join(timeout=10)

    async def _models(self, request: Request) -> Response:
        return JSONResponse({"object": "list", "data": [{"id": MODEL, "object": "model",
                                                          "owned_by": "standin"}]})

    async def _last(self, request: Request) -> Response:
        return JSONResponse(self.last)

    async def _completions(self, request: Request) -> Response:
        body = orjson.loads(await request.body())
        self.last = {"body": body, "authorization": request.headers.get("authorization")}
        name = _case(body, self.default_case)
        if name == "http500":
            return JSONResponse({"error": {"message": "boom", "type": "server_error"}}, 500)
        if name == "http400":
            return JSONResponse({"error": {"message": "bad model", "type": "invalid_request"}},
                                400)
        if name == "hang":
            await asyncio.sleep(3600)
        cut = name.startswith("cut:")
        name = name[4:] if cut else name
        case = CASES[name]
        if body.get("stream"):
            return StreamingResponse(_stream(name, case, cut), media_type="text/event-stream")
        return JSONResponse(_answer(name, case))
