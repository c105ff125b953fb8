"""One decoder, everywhere: every recorded model output of every format the codec reads is
decoded by each path a user can take, and each answers what ``ToolCallCodec.decode`` answers.

Paths: the in-process stream decoder, ``Pool.stream`` on the process and the Redis/RQ
backends, ``POST /v1/decode``, and the proxy (whole answers and streams) called with the real
``openai`` client. The outputs are the rows of ``tests/data/recorded_outputs.jsonl`` that name
a ``format`` (and an ``origin``); a row's ``model`` selects its decoder options through
``tests/data/proxy_models.toml``, as a deployment would. Upstream is a STAND-IN for a model
server (``tests/upstream_standin.py``) that replays the outputs over real HTTP and SSE, in 1–8
character deltas. A format the codec reads with no row here fails
``test_every_format_has_a_recorded_output``: adding one is a one-line data change.
"""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx
import openai
import pytest
from prometheus_client import CollectorRegistry
from toolcodec.decoding.codec import ToolCallCodec
from toolcodec.formats.table import ALL_FORMATS
from toolcodec.pool import Pool
from toolcodec.pool.proxy.demo_upstream import pieces
from toolcodec.pool.proxy.message import openai_message
from toolcodec.pool.proxy.settings import ModelSettings

from tests.serve_process import ServeProcess
from tests.upstream_standin import CASES, TOOLS

CONFIG = Path(__file__).resolve().parent / "data" / "proxy_models.toml"
MODELS = ModelSettings.load(str(CONFIG))
ROWS = [row for row in CASES.values() if row.get("format")]
IDS = [row["name"] for row in ROWS]


def model_of(row: dict) -> str:
    return row.get("model") or "any-model"


def codec_for_row(row: dict) -> ToolCallCodec:
    options = MODELS.for_model(model_of(row))
    if "formats" in options:
        options["formats"] = tuple(options["formats"])
    return ToolCallCodec(TOOLS, **options)


def expected(row: dict) -> dict:
    return codec_for_row(row).decode(row["content"]).to_dict()


def test_every_format_has_a_recorded_output() -> None:
    assert set(ALL_FORMATS) <= {row["format"] for row in ROWS}
    assert all(row.get("origin") for row in ROWS)


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_each_row_is_read_in_its_format(row) -> None:
    result = expected(row)
    assert result["ok"] and result["calls"], result["errors"]
    assert {c["format"] for c in result["calls"]} == {row["format"]}


# -- the stream decoder, in process and in the pool ----------------------------------------------


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_in_process_stream(row) -> None:
    for seed in range(3):
        stream = codec_for_row(row).stream(id_prefix="")
        for piece in pieces(row["content"], f"{row['name']}:{seed}"):
            stream.feed(piece)
        stream.close()
        assert stream.result().to_dict() == expected(row)


def pool_stream(pool: Pool, row: dict, seed: str) -> tuple[dict, list[dict]]:
    async def run() -> tuple[dict, list[dict]]:
        stream = pool.stream(TOOLS, id_prefix="", **MODELS.for_model(model_of(row)))
        events = []
        for piece in pieces(row["content"], seed):
            events += await stream.feed(piece)
        events += await stream.close()
        assert stream.undecoded == []
        return stream.result().to_dict(), events
    return asyncio.run(run())


def check_events(events: list[dict], result: dict) -> None:
    assert [(e["name"], e["arguments"]) for e in events if e["type"] == "tool_call"] == \
        [(c["name"], c["arguments"]) for c in result["calls"]]
    assert "".join(e["text"] for e in events if e["type"] == "content").strip() == \
        result["content"]


@pytest.fixture(scope="module")
def process_pool():
    with Pool("process", workers=1, timeout_ms=5000, registry=CollectorRegistry()) as pool:
        yield pool


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_pool_stream_process_backend(process_pool, row) -> None:
    result, events = pool_stream(process_pool, row, row["name"])
    assert result == expected(row)
    check_events(events, result)


@pytest.mark.redis
def test_pool_stream_rq_backend(redis_server, start_rq_worker, queue_name) -> None:
    start_rq_worker()
    with Pool("rq", redis_url=redis_server.url, queue=queue_name, timeout_ms=5000,
              registry=CollectorRegistry()) as pool:
        for row in ROWS:
            result, events = pool_stream(pool, row, row["name"])
            assert result == expected(row), row["name"]
            check_events(events, result)


# -- over HTTP: /v1/decode and the proxy ----------------------------------------------------------


@pytest.fixture(scope="module")
def server(upstream):
    srv = ServeProcess("--upstream", upstream.url, "--proxy-config", str(CONFIG),
                       "--workers", "1", "--timeout-ms", "5000").start()
    yield srv
    srv.stop()


def client(server) -> openai.OpenAI:
    return openai.OpenAI(base_url=server.url + "/v1", api_key="k", max_retries=0,
                         default_headers={"x-toolcodec-report": "1"})


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_decode_endpoint_with_the_models_options(server, row) -> None:
    response = httpx.post(server.url + "/v1/decode", json={
        "text": row["content"], "tools": TOOLS, "model": model_of(row)}, timeout=30)
    assert response.status_code == 200
    assert response.json()["result"] == expected(row)


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_proxy_whole_answer(server, row) -> None:
    answer = client(server).chat.completions.create(
        model=model_of(row), messages=[{"role": "user", "content": f"case:{row['name']}"}],
        tools=TOOLS)
    want = expected(row)
    (report,) = answer.model_extra["toolcodec"]
    assert report == {"status": "ok", **want}
    message = answer.choices[0].message
    built = openai_message(want, "")
    assert message.content == built["content"]
    assert message.model_extra.get("reasoning_content") == built.get("reasoning_content")
    assert [(t.function.name, json.loads(t.function.arguments))
            for t in message.tool_calls or []] == [(c["name"], c["arguments"])
                                                   for c in want["calls"]]
    assert answer.choices[0].finish_reason == "tool_calls"


@pytest.mark.parametrize("row", ROWS, ids=IDS)
def test_proxy_stream(server, row) -> None:
    want = expected(row)
    content, reasoning, calls, report, finish = "", "", {}, None, None
    for chunk in client(server).chat.completions.create(
            model=model_of(row), messages=[{"role": "user", "content": f"case:{row['name']}"}],
            tools=TOOLS, stream=True):
        report = (chunk.model_extra or {}).get("toolcodec") or report
        for choice in chunk.choices:
            content += choice.delta.content or ""
            reasoning += (choice.delta.model_extra or {}).get("reasoning_content") or ""
            for t in choice.delta.tool_calls or []:
                calls[t.index] = (t.function.name, json.loads(t.function.arguments))
            finish = choice.finish_reason or finish
    assert report == {"status": "ok", **want}
    assert [calls[i] for i in sorted(calls)] == [(c["name"], c["arguments"])
                                                 for c in want["calls"]]
    assert content.strip() == want["content"]
    assert " ".join(reasoning.split()) == " ".join((want["reasoning"] or "").split())
    assert finish == "tool_calls"


def test_the_chunking_of_the_stand_in_is_fine_grained() -> None:
    # the suite means something only if markers arrive cut: 1–8 characters per delta
    sizes = {len(p) for row in ROWS for p in pieces(row["content"], row["name"])}
    assert min(sizes) == 1 and max(sizes) == 8
