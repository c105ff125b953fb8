"""The proxy's streamed chunks: a content chunk made from its text alone (``Relay._content``)
is byte for byte the chunk the writer makes and the relay dresses, whatever the upstream's
head, fingerprint and logprobs do mid-stream."""

from __future__ import annotations

import asyncio
import random

import orjson
import pytest
from prometheus_client import CollectorRegistry
from toolcodec.pool import Pool
from toolcodec.pool.proxy.chat import ChatProxy, ProxyConfig, _Seen
from toolcodec.pool.proxy.demo_upstream import deltas, finish_reason
from toolcodec.pool.proxy.stream import Relay

from tests.upstream_standin import CASES, TOOLS


@pytest.fixture(scope="module")
def proxy():
    with Pool("process", workers=1, timeout_ms=5000, inline_max_chars=1024,
              registry=CollectorRegistry()) as pool:
        yield ChatProxy(ProxyConfig(upstream="http://127.0.0.1:9"), pool,
                        registry=CollectorRegistry())


def _chunks(rng: random.Random, name: str, choices: int) -> list[dict]:
    """The recorded output's stream, its choices interleaved, with an id, a model, a
    fingerprint that come and go and change, and logprobs on some chunks."""
    steps = [deltas(CASES[name])] * choices
    out = []
    ident, fingerprint = "chatcmpl-a", "fp_a"
    for step in range(len(steps[0])):
        for index in range(choices):
            if rng.random() < 0.05:
                ident = rng.choice(["chatcmpl-b", 'chatcmpl-"quoted"', ""])
            if rng.random() < 0.05:
                fingerprint = rng.choice(["fp_b", None, 'fp "c"'])
            choice = {"index": index, "delta": steps[index][step], "finish_reason": None}
            if rng.random() < 0.2:
                choice["logprobs"] = {"content": [{"token": "t", "logprob": -0.5}]}
            chunk = {"id": ident, "object": "chat.completion.chunk", "created": 1 + step // 20,
                     "model": rng.choice(["m", "m", "m2"]), "choices": [choice]}
            if fingerprint is not None:
                chunk["system_fingerprint"] = fingerprint
            out.append(chunk)
    out += [{"id": ident, "object": "chat.completion.chunk", "created": 9, "model": "m",
             "choices": [{"index": i, "delta": {}, "finish_reason": finish_reason(CASES[name])}]}
            for i in range(choices)]
    return out


def _relayed(proxy: ChatProxy, chunks: list[dict]) -> list[bytes]:
    body = {"model": "m", "stream": True, "tools": TOOLS, "messages": []}
    prepared, refused = proxy._prepared(body, stream=True)
    assert refused is None
    relay = Relay(proxy, None, prepared, False, float("inf"), _Seen("r", "m"))
    relay.nonce = "n"  # the call ids, the same in both runs

    async def main() -> list[bytes]:
        out: list[bytes] = []
        for chunk in chunks:
            out += await relay._chunk(orjson.loads(orjson.dumps(chunk)))
        return out + await relay._close()
    return asyncio.run(main())


def _dressed(self: Relay, state, text: str) -> bytes:
    """What ``_content`` stands for: the writer's chunk, dressed."""
    return self._dress(state, state.writer.chunk({"type": "content", "text": text}))


@pytest.mark.parametrize("seed", range(12))
def test_a_content_chunk_made_from_its_text_is_the_dressed_chunk(proxy, monkeypatch,
                                                                 seed) -> None:
    rng = random.Random(seed)
    name = rng.choice(["hermes_broken", "prose", "qwen_xml", "two_calls", "reasoning_field",
                       "native_ok"])
    chunks = _chunks(rng, name, rng.choice([1, 1, 2]))
    fast = _relayed(proxy, chunks)
    with monkeypatch.context() as patch:
        patch.setattr(Relay, "_content", _dressed)
        slow = _relayed(proxy, chunks)
    assert fast == slow
    assert sum(b'"content":' in part for part in fast) > 1  # content chunks were made
