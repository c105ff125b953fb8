"""The proxy's stream relay, read as it runs: content deltas read by their frame and fed
together (``toolcodec.pool.proxy.chunk_frame``, ``Relay._texts``) give the client what each
chunk relayed on its own gives: the same text in order, the same calls, the same result; and a
stream's last bytes leave with the end of its body."""

from __future__ import annotations

import asyncio
import random

import orjson
import pytest
from prometheus_client import CollectorRegistry
from toolcodec.pool import Pool
from toolcodec.pool.proxy.chat import ChatProxy, ProxyConfig, _Seen
from toolcodec.pool.proxy.demo_upstream import deltas, finish_reason
from toolcodec.pool.proxy.endpoint import _send_stream
from toolcodec.pool.proxy.stream import DONE, Relay, _SSEBody

from tests.upstream_standin import CASES, TOOLS


@pytest.fixture(scope="module")
def proxy():
    with Pool("process", workers=1, timeout_ms=5000, inline_max_chars=1 << 20,
              registry=CollectorRegistry()) as pool:
        yield ChatProxy(ProxyConfig(upstream="http://127.0.0.1:9"), pool,
                        registry=CollectorRegistry())


class Parts:
    """An upstream SSE response: its bytes in the given parts, ``arrived`` as scripted."""

    headers = {"content-type": "text/event-stream"}
    status_code = 200

    def __init__(self, parts: list[bytes], arrived: list[bool]) -> None:
        self.parts, self.said = list(parts), list(arrived)

    async def next_part(self) -> bytes:
        return self.parts.pop(0) if self.parts else b""

    def arrived(self) -> bool:
        return bool(self.parts) and (self.said.pop(0) if self.said else False)

    def poke(self) -> None:
        pass

    async def aclose(self, linger: float = 0.0) -> None:
        pass


def _sse(name: str, rng: random.Random) -> list[dict]:
    row = CASES[name]
    ident = "chatcmpl-1"
    chunks = []
    for delta in deltas(row):
        if rng.random() < 0.03:  # a head that changes mid-stream
            ident = rng.choice(["chatcmpl-2", "chatcmpl-1"])
        chunks.append({"id": ident, "object": "chat.completion.chunk", "created": 5,
                       "model": "m", "choices": [{"index": 0, "delta": delta,
                                                  "finish_reason": None}]})
    chunks.append({"id": ident, "object": "chat.completion.chunk", "created": 5, "model": "m",
                   "choices": [{"index": 0, "delta": {}, "finish_reason": finish_reason(row)}]})
    return chunks


def _relay(proxy: ChatProxy, response) -> Relay:
    body = {"model": "m", "stream": True, "tools": TOOLS, "messages": []}
    prepared, refused = proxy._prepared(body, stream=True)
    assert refused is None
    relay = Relay(proxy, response, prepared, True, float("inf"), _Seen("r", "m"))
    relay.nonce = "n"  # the call ids, the same in both runs
    return relay


def _streamed(proxy: ChatProxy, chunks: list[dict], rng: random.Random
              ) -> tuple[list[bytes], list[bool]]:
    """The relay's parts and, for each, whether it said they were its last."""
    data = b"".join(b"data: " + orjson.dumps(c) + b"\n\n" for c in chunks) + DONE
    cuts = sorted(rng.sample(range(1, len(data)), min(len(data) - 1, len(chunks))))
    parts = [data[a:b] for a, b in zip([0, *cuts], [*cuts, len(data)], strict=True)]
    relay = _relay(proxy, Parts(parts, [rng.random() < 0.8 for _ in parts]))

    async def main() -> tuple[list[bytes], list[bool]]:
        out, last = [], []
        async for part in relay:
            out.append(part)
            last.append(relay.last)
        return out, last
    return asyncio.run(main())


def _one_by_one(proxy: ChatProxy, chunks: list[dict]) -> list[bytes]:
    """Each chunk through the relay's full parse alone, then the end."""
    relay = _relay(proxy, None)

    async def main() -> list[bytes]:
        out: list[bytes] = []
        for chunk in chunks:
            out += await relay._chunk(orjson.loads(orjson.dumps(chunk)))
        return out + await relay._close() + [DONE]
    return asyncio.run(main())


def _read(parts: list[bytes]) -> tuple[str, list, list, int]:
    """(the content, the calls, the final chunks' fields, how many content deltas)."""
    text, calls, finals, contents = [], {}, [], 0
    for line in b"".join(parts).split(b"\n"):
        if not line.startswith(b"data: {"):
            continue
        chunk = orjson.loads(line[6:])
        for choice in chunk["choices"]:
            delta = choice["delta"]
            if delta.get("content"):
                text.append(delta["content"])
                contents += 1
            for call in delta.get("tool_calls") or []:
                slot = calls.setdefault(call["index"], {"name": "", "arguments": ""})
                slot["name"] += call.get("function", {}).get("name") or ""
                slot["arguments"] += call.get("function", {}).get("arguments") or ""
            if choice["finish_reason"] is not None:
                finals.append((choice["finish_reason"], chunk.get("toolcodec")))
    return "".join(text), sorted(calls.items()), finals, contents


@pytest.mark.parametrize("seed", range(24))
def test_merged_deltas_give_what_each_chunk_gives_alone(proxy, seed) -> None:
    rng = random.Random(seed)
    name = rng.choice(["prose", "hermes_broken", "qwen_xml", "two_calls", "tool_tag",
                       "json_in_prose", "reasoning_field", "truncated", "unknown_tool",
                       "fmt_hermes", "fmt_qwen_xml", "native_ok"])
    chunks = _sse(name, rng)
    merged, last = _streamed(proxy, chunks, rng)
    alone = _one_by_one(proxy, chunks)
    assert _read(merged)[:3] == _read(alone)[:3]
    assert last == [False] * (len(merged) - 1) + [True]
    assert merged[-1].endswith(DONE) and not any(DONE in part for part in merged[:-1])


def test_content_deltas_that_arrive_together_leave_as_one(proxy) -> None:
    chunks = _sse("prose", random.Random(0))
    data = [b"data: " + orjson.dumps(c) + b"\n\n" for c in chunks]
    # The role chunk and the first text alone, then the rest in parts that had all arrived.
    parts = [data[0], data[1], *data[2:], DONE]
    relay = _relay(proxy, Parts(parts, [True] * len(parts)))

    async def main() -> list[bytes]:
        return [part async for part in relay]
    merged = asyncio.run(main())
    text, _, _, contents = _read(merged)
    assert text == CASES["prose"]["content"]
    assert len(chunks) - 2 > 3  # many content deltas upstream...
    assert contents <= 3  # ...few downstream: the first ones, then the rest as one


def test_the_last_bytes_leave_with_the_end_of_the_body(proxy) -> None:
    chunks = _sse("hermes_broken", random.Random(1))
    data = b"".join(b"data: " + orjson.dumps(c) + b"\n\n" for c in chunks) + DONE
    relay = _relay(proxy, Parts([data[:40], data[40:]], [False, False]))
    sent: list[dict] = []

    async def receive() -> dict:
        await asyncio.Event().wait()  # the client stays
        return {"type": "http.disconnect"}

    async def send(message: dict) -> None:
        sent.append(message)
    asyncio.run(_send_stream(relay, receive, send))
    bodies = [m for m in sent if m["type"] == "http.response.body"]
    assert [m["more_body"] for m in bodies] == [True] * (len(bodies) - 1) + [False]
    assert bodies[-1]["body"].endswith(DONE)
    assert all(m["body"] for m in bodies)  # no empty write for the end alone


def _body_items(chunks: list[dict]) -> tuple[list, bool]:
    body = _SSEBody(1 << 20)
    body.frames = True  # as the relay has it once choice 0 has a decoder
    items, _, _ = body.chunks(b"".join(b"data: " + orjson.dumps(c) + b"\n\n" for c in chunks))
    return items, body.frames


def test_a_one_choice_stream_is_read_by_frames_and_interleaved_choices_stop_trying() -> None:
    one = _sse("prose", random.Random(2))
    items, learning = _body_items(one)
    assert learning and sum(type(i) is str for i in items) > len(one) // 2
    # Two choices interleaved: each frame is dropped unused; learning stops after a few.
    two = [dict(c, choices=[dict(c["choices"][0], index=n)]) for c in one for n in (0, 1)]
    items, learning = _body_items(two)
    assert not learning and all(type(i) is dict for i in items)
