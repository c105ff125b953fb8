"""A STAND-IN for a model server (no model can run here): it replays recorded outputs.

It speaks the OpenAI chat API over real HTTP (uvicorn on a free loopback port, in a thread):
``POST /v1/chat/completions`` answers with the recorded output named by the last user
message (``"case:NAME"``, from ``tests/data/recorded_outputs.jsonl``), as one JSON answer or,
with ``stream: true``, as SSE chunks the way vLLM and llama.cpp send them (content in small
pieces; native tool calls as an id/name fragment followed by argument fragments). Special
cases: ``case:http500``, ``case:http400`` (error answers), ``case:hang`` (never answers),
``case:cut:NAME`` (the stream stops half-way through NAME's output, without ``[DONE]``),
``case:A+B`` (an ``n = 2`` answer: choice 0 is A's output, choice 1 is B's, their chunks
interleaved), ``case:trickle`` (a stream that sends a dot every 50 ms and never ends),
``case:big:N`` (N characters of prose), ``case:bigcall:N`` (a Hermes call with an N-character
argument), ``case:bigline:N`` (one SSE line with N characters of content),
``case:gated:NAME`` (half of NAME's stream, then nothing until ``POST /_release``, then the
rest), ``case:badshape`` (``{"choices": 5}``). Streamed
content comes in 1–8 character deltas, cut at seeded random places; every chunk carries a
``system_fingerprint``, and content chunks carry ``logprobs`` when the request asks for them.
``POST /v1/completions``, ``/v1/responses``, ``/v1/embeddings``, ``/v1/moderations`` echo the
body with status 201 (with ``stream: true``, the ``prompt`` one character per SSE event).
``GET /v1/models`` lists one model; ``GET /_last`` returns the last request received (body, a
chat request's bytes as ``raw``, authorization, headers); ``GET /_trickling`` how many
``case:trickle`` streams are still being sent (one ends when its client, the proxy, goes away).
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
from toolcodec.pool.proxy.demo_upstream import deltas, finish_reason

from tests.redis_server import free_port

RECORDED = Path(__file__).resolve().parent / "data" / "recorded_outputs.jsonl"
CASES: dict[str, dict[str, Any]] = {
    row["name"]: row for row in map(orjson.loads, RECORDED.read_bytes().splitlines()) if row}
MODEL = "standin-model"
# The tools the recorded outputs call, as a chat client sends them.
TOOLS = [
    {"type": "function", "function": {"name": "get_weather", "parameters": {
        "type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
        "required": ["city"]}}},
    {"type": "function", "function": {"name": "search_files", "parameters": {
        "type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}}},
]
CREATED = 1_700_000_000
FINGERPRINT = "fp_standin"


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


def _answer(name: str, cases: list[dict[str, Any]]) -> dict[str, Any]:
    return {"id": f"chatcmpl-{name}", "object": "chat.completion", "created": CREATED,
            "model": MODEL, "system_fingerprint": FINGERPRINT,
            "choices": [{"index": i, "message": _message(case),
                         "finish_reason": finish_reason(case)}
                        for i, case in enumerate(cases)],
            "usage": {"prompt_tokens": 10, "completion_tokens": 20, "total_tokens": 30}}


def _chunk(name: str, delta: dict[str, Any], finish: str | None = None, index: int = 0,
           logprobs: bool = False) -> bytes:
    choice: dict[str, Any] = {"index": index, "delta": delta, "finish_reason": finish}
    if logprobs and delta.get("content"):
        choice["logprobs"] = {"content": [{"token": delta["content"], "logprob": -0.5,
                                           "bytes": list(delta["content"].encode()),
                                           "top_logprobs": []}], "refusal": None}
    body = {"id": f"chatcmpl-{name}", "object": "chat.completion.chunk", "created": CREATED,
            "model": MODEL, "system_fingerprint": FINGERPRINT, "choices": [choice]}
    return b"data: " + orjson.dumps(body) + b"\n\n"


async def _stream(name: str, cases: list[dict[str, Any]], cut: bool, logprobs: bool):
    """The choices' deltas interleaved (choice i of an ``n > 1`` answer is ``cases[i]``)."""
    streams = [deltas(case) for case in cases]
    if cut:
        streams = [steps[: max(1, len(steps) // 2)] for steps in streams]
    for step in range(max(map(len, streams))):
        for index, steps in enumerate(streams):
            if step < len(steps):
                yield _chunk(name, steps[step], index=index, logprobs=logprobs)
        await asyncio.sleep(0)
    if cut:
        raise ConnectionResetError("stand-in cuts the stream")  # uvicorn drops the connection
    for index, case in enumerate(cases):
        yield _chunk(name, {}, finish_reason(case), index=index)
    yield b"data: [DONE]\n\n"


async def _trickle(name: str, open_streams: list[int]):
    """A stream that never ends: one short piece of prose at a time, slowly. Counted in
    ``open_streams[0]`` while it is being sent."""
    open_streams[0] += 1
    try:
        yield _chunk(name, {"role": "assistant", "content": ""})
        for _ in range(3000):
            yield _chunk(name, {"content": "."})
            await asyncio.sleep(0.05)
    finally:
        open_streams[0] -= 1


class Standin:
    """The stand-in server; ``url`` is its base (``http://127.0.0.1:PORT``)."""

    def __init__(self, port: int | None = None, default_case: str = "prose") -> None:
        """*port*: a free one unless given; *default_case*: the answer to a request whose last
        user message names no case (a question as a reader would ask it)."""
        self.last: dict[str, Any] | None = None
        self.trickling = [0]  # case:trickle streams being sent
        self.default_case = default_case
        self.gate = threading.Event()  # case:gated:NAME waits for it (POST /_release)
        self.port = port or free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        app = Starlette(routes=[
            Route("/v1/chat/completions", self._completions, methods=["POST"]),
            Route("/v1/models", self._models, methods=["GET"]),
            Route("/_last", self._last, methods=["GET"]),
            Route("/_trickling", self._trickling, methods=["GET"]),
            Route("/_release", self._release, methods=["POST"]),
            *(Route(f"/v1/{path}", self._other, methods=["POST"])
              for path in ("completions", "responses", "embeddings", "moderations")),
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

    async def _trickling(self, request: Request) -> Response:
        return JSONResponse({"open": self.trickling[0]})

    async def _completions(self, request: Request) -> Response:
        raw = await request.body()
        body = orjson.loads(raw)
        self.last = {"body": body, "authorization": request.headers.get("authorization"),
                     "headers": dict(request.headers), "raw": raw.decode()}
        name = _case(body, self.default_case)
        if name == "badshape":
            return JSONResponse({"id": "x", "choices": 5})
        if name == "trickle":
            return StreamingResponse(_trickle(name, self.trickling), media_type="text/event-stream")
        if name.startswith("gated:"):
            case = CASES[name[6:]]
            return StreamingResponse(self._gated(name, case), media_type="text/event-stream")
        if name.startswith("bigline:"):  # one chunk of that many characters
            chunk = _chunk(name, {"role": "assistant", "content": "z" * int(name[8:])})
            return StreamingResponse(iter([chunk, b"data: [DONE]\n\n"]),
                                     media_type="text/event-stream")
        if name.startswith("bigcall:"):  # a Hermes call with an argument that long
            text = ('<tool_call>{"name": "search_files", "arguments": {"query": "'
                    + "q" * int(name[8:]) + '"}}</tool_call>')
            case = {"name": name, "content": text}
            if body.get("stream"):
                return StreamingResponse(_stream(name, [case], False, False),
                                         media_type="text/event-stream")
            return JSONResponse(_answer(name, [case]))
        if name.startswith("big:"):  # prose of that many characters
            case = {"name": name, "content": "word " * (int(name[4:]) // 5)}
            if body.get("stream"):
                return StreamingResponse(_stream(name, [case], False, False),
                                         media_type="text/event-stream")
            return JSONResponse(_answer(name, [case]))
        if name == "http500":
            return JSONResponse({"error": {"message": "boom", "type": "server_error"}}, 500)
        if name == "http400":
            return JSONResponse({"error": {"message": "bad model", "type": "invalid_request"}},
                                400)
        if name == "hang":
            await asyncio.sleep(3600)
        cut = name.startswith("cut:")
        name = name[4:] if cut else name
        cases = [CASES[n] for n in name.split("+")]  # "A+B": choice 0 is A, choice 1 is B
        if body.get("stream"):
            return StreamingResponse(_stream(name, cases, cut, bool(body.get("logprobs"))),
                                     media_type="text/event-stream")
        return JSONResponse(_answer(name, cases))

    async def _gated(self, name: str, case: dict[str, Any]):
        """Half of the output, then nothing until ``POST /_release``, then the rest."""
        recorded = deltas(case)
        half = len(recorded) // 2
        for delta in recorded[:half]:
            yield _chunk(name, delta)
        while not self.gate.is_set():  # the test opens the gate when it has seen what it awaits
            await asyncio.sleep(0.01)
        for delta in recorded[half:]:
            yield _chunk(name, delta)
        yield _chunk(name, {}, "stop")
        yield b"data: [DONE]\n\n"

    async def _release(self, request: Request) -> Response:
        self.gate.set()
        return JSONResponse({"released": True})

    async def _other(self, request: Request) -> Response:
        """/v1/completions, /v1/responses, /v1/embeddings: an echo of what arrived."""
        body = orjson.loads(await request.body())
        self.last = {"body": body, "authorization": request.headers.get("authorization"),
                     "headers": dict(request.headers)}
        if body.get("stream"):  # the prompt back, one character per SSE event
            events = [b"data: " + orjson.dumps({"text": c}) + b"\n\n"
                      for c in str(body.get("prompt"))] + [b"data: [DONE]\n\n"]
            return StreamingResponse(iter(events), media_type="text/event-stream")
        return JSONResponse({"object": "standin.echo", "path": request.url.path, "body": body},
                            201)
