"""A STAND-IN for a model server that misbehaves as real ones do (no model runs here).

``FaultStandin`` is ``tests.upstream_standin.Standin`` (recorded outputs over real HTTP/SSE)
with more answers, named by the last user message ``"case:fault:NAME"``:

- ``fault:reset:CASE`` — CASE's stream up to the middle of its call markup, then the
  connection is reset (no ``finish_reason``, no ``[DONE]``);
- ``fault:badsse:CASE`` — CASE's stream up to the same place, then an SSE event that is not
  JSON;
- ``fault:eof:CASE`` — the same, then the body ends cleanly, with neither ``finish_reason``
  nor ``[DONE]``;
- ``fault:json:CASE`` — a whole JSON answer, whatever ``stream`` asked (a server that does
  not stream); ``fault:json:badshape`` — JSON that is no chat completion;
- ``fault:usage:CASE`` — CASE's answer with ``usage.completion_tokens`` equal to the
  request's ``max_completion_tokens`` / ``max_tokens`` while ``finish_reason`` says
  ``tool_calls`` (a server that hides ``length``); streamed, the usage comes in a last chunk
  with no choices, as with ``stream_options.include_usage``; ``fault:under:CASE`` — the
  same, one token under the limit.

Plain ``case:CASE`` also reads the cases below (:data:`CASES`), besides the recorded ones.
``RawUpstream`` is a socket server that answers every request with fixed bytes (for HTTP
framing a web framework will not write: a bad chunk size).
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import orjson
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse

from tests import upstream_standin as standin

RUN_SHELL = {"type": "function", "function": {"name": "run_shell", "parameters": {
    "type": "object", "properties": {"cmd": {"type": "string"}}, "required": ["cmd"]}}}
TOOLS = [*standin.TOOLS, RUN_SHELL]

# Outputs in the shapes real servers send, with where each shape comes from.
CASES: dict[str, dict[str, Any]] = {row["name"]: row for row in [
    {"name": "rm_rf", "origin": "a Hermes call (Qwen2.5/Qwen3 template) to a shell tool",
     "content": 'Cleaning up.\n<tool_call>\n{"name": "run_shell", "arguments": {"cmd": '
                '"rm -rf /tmp/build/cache"}}\n</tool_call>'},
    {"name": "rm_rf_cut", "origin": "the same call cut by max_tokens inside its argument, "
                                    "reported by the server as finish_reason tool_calls",
     "content": 'Cleaning up.\n<tool_call>\n{"name": "run_shell", "arguments": {"cmd": '
                '"rm -rf /'},
    {"name": "r1_split", "model": "deepseek-ai/DeepSeek-R1-0528",
     "origin": "DeepSeek-R1-0528 behind vLLM --reasoning-parser deepseek_r1: the reasoning "
               "split off into reasoning_content, the call markup left in content",
     "reasoning_content": "The user wants files about cats.",
     "content": "One moment.<｜tool▁calls▁begin｜><｜tool▁call▁begin｜>function<｜tool▁sep｜>"
                'search_files\n```json\n{"query": "cats"}\n```<｜tool▁call▁end｜>'
                "<｜tool▁calls▁end｜>"},
    {"name": "k3_direct", "model": "moonshotai/Kimi-K3",
     "origin": "Kimi K3 grammar (as in fmt_kimi_k3) when the model skips its think section: "
               "the prompt opened it, the output starts with the tools section",
     "content": '<|open|>tools<|sep|><|open|>call tool="get_weather" index="0"<|sep|>'
                '<|open|>argument key="city" type="string"<|sep|>Oslo<|close|>argument<|sep|>'
                "<|close|>call<|sep|><|close|>tools<|sep|><|close|>message<|sep|>"},
    {"name": "cohere", "origin": "Cohere Command A chat template (<|START_ACTION|> block)",
     "content": '<|START_ACTION|>[\n    {"tool_call_id": "0", "tool_name": "get_weather", '
                '"parameters": {"city": "Oslo"}}\n]<|END_ACTION|>'},
    {"name": "hunyuan", "origin": "Hunyuan: <tool_calls> holding name<tool_sep>arguments",
     "content": '<tool_calls>\n<tool_call>get_weather\n<tool_sep>\n{"city": "Oslo"}\n'
                "</tool_call>\n</tool_calls>"},
    {"name": "prose_mentions_tags",
     "origin": "an answer about tool calling, naming the tags in prose and in code",
     "content": "Models such as Qwen3 put each call in a <tool_call> tag; Cohere writes "
                "`<|START_ACTION|>` first, and Hunyuan separates the name with `<tool_sep>`. "
                "The template:\n```jinja\n{{- '<tool_call>' }}\n{{- tool_call | tojson }}\n"
                "{{- '</tool_call>' }}\n```\nThat is all."},
    {"name": "plain_prose", "origin": "an answer in words", "content": "It is sunny in Oslo."},
]}


def _case(name: str) -> dict[str, Any]:
    return CASES.get(name) or standin.CASES[name]


def _cut_deltas(case: dict[str, Any]) -> list[dict[str, Any]]:
    """CASE's deltas up to the middle of its first call's markup (or of its content)."""
    content = case.get("content") or ""
    at = content.find("<tool_call>")
    at = len(content) // 2 if at < 0 else at + len('<tool_call>\n{"name": "run_shell", '
                                                     '"arguments": {"cmd": "rm -rf /')
    return standin.deltas({**case, "content": content[:at], "tool_calls": None})


async def _broken(name: str, case: dict[str, Any], how: str):
    for delta in _cut_deltas(case):
        yield standin._chunk(name, delta)
        await asyncio.sleep(0)
    if how == "reset":
        raise ConnectionResetError("stand-in resets the stream")  # uvicorn drops it
    if how == "badsse":
        yield b"data: {\"choices\": [{\"index\": 0, \"delta\": {\"content\": \"x\n\n"


async def _with_usage(name: str, case: dict[str, Any], used: int):
    for delta in standin.deltas(case):
        yield standin._chunk(name, delta)
    yield standin._chunk(name, {}, "tool_calls")
    usage = {"prompt_tokens": 10, "completion_tokens": used, "total_tokens": 10 + used}
    yield b"data: " + orjson.dumps({"id": f"chatcmpl-{name}", "object": "chat.completion.chunk",
                                    "created": standin.CREATED, "model": standin.MODEL,
                                    "choices": [], "usage": usage}) + b"\n\n"
    yield b"data: [DONE]\n\n"


class FaultStandin(standin.Standin):
    """The stand-in with the answers above; see the module docstring."""

    async def _completions(self, request: Request) -> Response:
        body = orjson.loads(await request.body())
        name = standin._case(body, self.default_case)
        if not name.startswith("fault:") and name not in CASES:
            return await super()._completions(request)
        self.last = {"body": body, "authorization": request.headers.get("authorization"),
                     "headers": dict(request.headers)}
        if name in CASES:
            case = CASES[name]
            if body.get("stream"):
                return StreamingResponse(standin._stream(name, [case], False, False),
                                         media_type="text/event-stream")
            return JSONResponse(standin._answer(name, [case]))
        how, _, rest = name[6:].partition(":")
        if how in ("reset", "badsse", "eof"):
            return StreamingResponse(_broken(name, _case(rest), how),
                                     media_type="text/event-stream")
        if how == "json":
            if rest == "badshape":
                return JSONResponse({"id": "x", "choices": 5})
            return JSONResponse(standin._answer(name, [_case(rest)]))
        if how in ("usage", "under"):
            used = body.get("max_completion_tokens", body.get("max_tokens"))
            used -= how == "under"
            case = {**_case(rest), "finish_reason": "tool_calls"}
            if body.get("stream"):
                return StreamingResponse(_with_usage(name, case, used),
                                         media_type="text/event-stream")
            answer = standin._answer(name, [case])
            answer["usage"] = {"prompt_tokens": 10, "completion_tokens": used,
                               "total_tokens": 10 + used}
            return JSONResponse(answer)
        return JSONResponse({"error": {"message": f"no fault {how!r}"}}, 400)


class RawUpstream:
    """A socket server on a free loopback port (in a thread) that answers every request
    with ``answer`` as given, then closes the connection. ``url`` is its base."""

    def __init__(self, answer: bytes) -> None:
        self.answer = answer
        self.loop = asyncio.new_event_loop()
        self.ready = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def start(self) -> RawUpstream:
        self.thread.start()
        self.ready.wait(30)
        return self

    def stop(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(10)

    def _run(self) -> None:
        asyncio.set_event_loop(self.loop)
        server = self.loop.run_until_complete(asyncio.start_server(self._serve, "127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{server.sockets[0].getsockname()[1]}"
        self.ready.set()
        self.loop.run_forever()
        server.close()

    async def _serve(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        try:
            head = await reader.readuntil(b"\r\n\r\n")
            length = next((int(line.split(b":", 1)[1]) for line in head.split(b"\r\n")
                           if line.lower().startswith(b"content-length:")), 0)
            await reader.readexactly(length)
            writer.write(self.answer)
            await writer.drain()
        except (asyncio.IncompleteReadError, ConnectionError):
            pass
        finally:
            writer.close()


def sse_with_bad_chunking(case: dict[str, Any]) -> bytes:
    """A chunked SSE answer: CASE's deltas up to the middle of its call, then a chunk-size
    line that is not hexadecimal."""
    head = (b"HTTP/1.1 200 OK\r\ncontent-type: text/event-stream\r\n"
            b"transfer-encoding: chunked\r\n\r\n")
    parts = b"".join(b"%x\r\n%s\r\n" % (len(c), c) for c in
                     (standin._chunk("badchunk", d) for d in _cut_deltas(case)))
    return head + parts + b"zz-not-a-size\r\nabc\r\n"
