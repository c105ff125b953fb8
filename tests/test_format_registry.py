"""A family registered by a user, in one file: read by ``decode``, the stream (the same answer
at every cut), ``formats=``, ``Pool.stream`` (blocks decoded in worker processes), and a real
``toolcodec serve`` that found it through the ``toolcodec.formats`` entry point group, on
``/v1/decode`` and as the proxy in front of a model-server stand-in."""

from __future__ import annotations

import asyncio
import textwrap

import httpx
import orjson
import pytest
from prometheus_client import CollectorRegistry
from starlette.requests import Request
from starlette.responses import JSONResponse, Response, StreamingResponse
from toolcodec import ToolCallCodec
from toolcodec.formats import registry
from toolcodec.formats.registry import (
    Family,
    FormatRead,
    MarkerFormat,
    ReasoningFormat,
    register,
)
from toolcodec.pool import Pool

from tests import upstream_standin as standin
from tests.serve_process import ServeProcess
from tests.test_stream import check

# The family module a user writes (the docs/formats.md example): calls are `NAME {json}`
# lines between <|acme_calls|> and <|/acme_calls|>, reasoning between <|acme_think|> tokens.
FAMILY_MODULE = '''
from toolcodec.formats.registry import (Family, FormatRead, MarkerFormat, ReasoningFormat,
                                        register)


def read(body, *, closed):
    """`NAME {json}` on each line: (name, JSON text the codec repairs and validates)."""
    found = FormatRead()
    for line in body.strip().splitlines():
        name, _, arguments = line.strip().partition(" ")
        found.calls.append((name, arguments or "{}"))
    return found


FAMILY = Family(
    "acme",
    markers=[MarkerFormat("acme", ("<|acme_calls|>",), ("<|/acme_calls|>",), body=read,
                          quotes=('"',))],
    reasoning=[ReasoningFormat("acme_think", ("<|acme_think|>",), ("<|/acme_think|>",))],
)
'''
TOOLS = [{"name": "get_weather", "parameters": {"type": "object", "properties": {
    "city": {"type": "string"}, "days": {"type": "integer"}}, "required": ["city"]}}]
OUTPUT = ('<|acme_think|>Oslo, then Bergen.<|/acme_think|>Checking.'
          '<|acme_calls|>\nget_weather {"city": "Oslo", "days": 2}\n'
          'get_weather {"city": "Say \\"<|/acme_calls|>\\"",}\n<|/acme_calls|> Done.')
CALLS = [{"name": "get_weather", "arguments": {"city": "Oslo", "days": 2}, "repairs": [],
          "format": "acme"},
         {"name": "get_weather", "arguments": {"city": 'Say "<|/acme_calls|>"'},
          "repairs": ["json.trailing_comma"], "format": "acme"}]


@pytest.fixture
def acme():
    namespace: dict = {}
    exec(compile(FAMILY_MODULE, "acme_family.py", "exec"), namespace)  # noqa: S102 - our text
    register(namespace["FAMILY"])
    yield namespace["FAMILY"]
    registry.unregister("acme")


def test_a_registered_family_decodes_whole_and_streamed_at_every_cut(acme) -> None:
    c = ToolCallCodec(TOOLS)
    r = c.decode(OUTPUT).to_dict()
    assert r["calls"] == CALLS and r["ok"] and r["path"] == "xml"
    assert r["content"] == "Checking. Done." and r["reasoning"] == "Oslo, then Bergen."
    for cut in range(len(OUTPUT) + 1):
        check(c, OUTPUT, [OUTPUT[:cut], OUTPUT[cut:]])
    check(c, OUTPUT, list(OUTPUT))


def test_the_formats_option_names_a_registered_family(acme) -> None:
    assert ToolCallCodec(TOOLS, formats=["acme"]).decode(OUTPUT).to_dict()["calls"] == CALLS
    left_out = ToolCallCodec(TOOLS, formats=["hermes"]).decode(OUTPUT).to_dict()
    assert left_out["calls"] == [] and "<|acme_calls|>" in left_out["content"]


def test_a_registered_family_is_read_after_registration_only() -> None:
    assert ToolCallCodec(TOOLS).decode(OUTPUT).to_dict()["calls"] == []
    with pytest.raises(ValueError, match="unknown format"):
        ToolCallCodec(TOOLS, formats=["acme"])


def test_a_cut_block_of_a_registered_family_is_no_call_with_length(acme) -> None:
    cut = OUTPUT[:OUTPUT.index("get_weather {\"city\": \"Say")]
    r = ToolCallCodec(TOOLS).decode(cut, finish_reason="length").to_dict()
    assert r["calls"] == [] and r["errors"][0]["code"] == "truncated"


def test_a_reader_that_fails_is_the_blocks_error_not_the_decodes() -> None:
    def broken(body: str, *, closed: bool) -> FormatRead:
        raise RuntimeError("boom")

    register(Family("broken", markers=[MarkerFormat("broken", ("<|b|>",), ("<|/b|>",),
                                                    body=broken)]))
    try:
        r = ToolCallCodec(TOOLS).decode("Hi <|b|>x<|/b|> there").to_dict()
    finally:
        registry.unregister("broken")
    assert not r["ok"] and r["errors"][0]["code"] == "internal_error"
    assert "boom" in r["errors"][0]["message"] and r["content"] == "Hi <|b|>x<|/b|> there"


def test_two_families_may_not_claim_one_token(acme) -> None:
    with pytest.raises(ValueError, match="already"):
        register(Family("other", markers=[MarkerFormat("other", ("<|acme_calls|>",))]))
    with pytest.raises(ValueError, match="already"):
        register(Family("hermes", reasoning=[ReasoningFormat("x", ("<|x|>",), ("<|/x|>",))]))
    with pytest.raises(ValueError, match="family's id"):
        Family("a", markers=[MarkerFormat("b", ("<|c|>",))])


class AcmeStandin(standin.Standin):
    """The model-server stand-in, answering ``case:acme`` with the family's output."""

    async def _completions(self, request: Request) -> Response:
        body = orjson.loads(await request.body())
        if standin._case(body) != "acme":
            return await super()._completions(request)
        case = {"name": "acme", "content": OUTPUT}
        if body.get("stream"):
            return StreamingResponse(standin._stream("acme", [case], False, False),
                                     media_type="text/event-stream")
        return JSONResponse(standin._answer("acme", [case]))


@pytest.fixture(scope="module")
def served(tmp_path_factory):
    """``toolcodec serve`` in front of the stand-in, with a package on its path that declares
    the family in the ``toolcodec.formats`` group: the service and its worker processes
    read it."""
    site = tmp_path_factory.mktemp("site")
    (site / "acme_family.py").write_text(FAMILY_MODULE)
    info = site / "acme_family-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-family\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(textwrap.dedent("""\
        [toolcodec.formats]
        acme = acme_family:FAMILY
        """))
    upstream = AcmeStandin().start()
    srv = ServeProcess("--upstream", upstream.url, "--workers", "1", "--timeout-ms", "5000",
                       env={"PYTHONPATH": str(site)}).start()
    yield srv
    srv.stop()
    upstream.stop()


def test_serve_reads_a_family_installed_through_its_entry_point(served) -> None:
    body = orjson.dumps({"text": OUTPUT, "tools": TOOLS})
    answer = httpx.post(served.url + "/v1/decode", content=body, timeout=30,
                        headers={"content-type": "application/json"}).json()
    assert answer["status"] == "ok", answer
    assert answer["result"]["calls"] == CALLS
    assert answer["result"]["reasoning"] == "Oslo, then Bergen."


CHAT_TOOLS = [{"type": "function", "function": t} for t in TOOLS]
ASK = {"model": "m", "messages": [{"role": "user", "content": "case:acme"}], "tools": CHAT_TOOLS}


def test_the_proxy_reads_an_installed_family_whole_and_streamed(served) -> None:
    """The stand-in replays the family's output over real HTTP; the proxy answers proper tool
    calls, whole and streamed (in 1-8 character deltas), with the same calls and text."""
    expected = [(c["name"], c["arguments"]) for c in CALLS]
    message = httpx.post(served.url + "/v1/chat/completions", json=ASK,
                         timeout=30).json()["choices"][0]["message"]
    assert [(t["function"]["name"], orjson.loads(t["function"]["arguments"]))
            for t in message["tool_calls"]] == expected
    assert (message["content"], message["reasoning_content"]) == (
        "Checking. Done.", "Oslo, then Bergen.")
    content, reasoning, calls, finish = "", "", {}, None
    with httpx.stream("POST", served.url + "/v1/chat/completions",
                      json={**ASK, "stream": True}, timeout=30) as response:
        lines = [line[5:] for line in response.iter_lines() if line.startswith("data:")]
    assert lines[-1].strip() == "[DONE]"
    for chunk in map(orjson.loads, lines[:-1]):
        for choice in chunk.get("choices") or []:
            delta = choice["delta"]
            content += delta.get("content") or ""
            reasoning += delta.get("reasoning_content") or ""
            for t in delta.get("tool_calls") or []:
                calls[t["index"]] = (t["function"]["name"],
                                     orjson.loads(t["function"]["arguments"]))
            finish = choice.get("finish_reason") or finish
    assert [calls[i] for i in sorted(calls)] == expected
    assert (content.strip(), reasoning, finish) == ("Checking. Done.", "Oslo, then Bergen.",
                                                    "tool_calls")

def _pool_stream(pool, parts: list[str]) -> tuple[list[dict], dict, list]:
    async def main() -> list[dict]:
        events: list[dict] = []
        for part in parts:
            events += await s.feed(part)
        return events + await s.close()

    s = pool.stream(TOOLS, id_prefix="p")
    events = asyncio.run(main())
    return events, s.result().to_dict(), s.undecoded


def test_pool_stream_decodes_a_registered_family_in_its_workers(acme) -> None:
    """Registered before the pool starts: the workers (forked then) read it, and every block
    is decoded there, at every cut as ``decode`` reads the whole text."""
    expected = ToolCallCodec(TOOLS, formats=None).decode(OUTPUT).to_dict()
    with Pool("process", workers=1, timeout_ms=10000, registry=CollectorRegistry()) as pool:
        for cut in range(0, len(OUTPUT) + 1, 7):
            events, result, undecoded = _pool_stream(pool, [OUTPUT[:cut], OUTPUT[cut:]])
            assert undecoded == [] and result == expected, cut
            assert [e["arguments"] for e in events if e["type"] == "tool_call"] == [
                c["arguments"] for c in CALLS]
        decoded = pool.metrics.registry.get_sample_value(
            "toolcodec_jobs_total", {"op": "decode_block", "backend": "process",
                                     "outcome": "success"})
    assert decoded and decoded >= len(range(0, len(OUTPUT) + 1, 7))  # one block a stream


def test_a_family_registered_after_the_pool_started_is_said_not_dropped() -> None:
    """The workers were forked before the registration: they refuse the block, which stays
    content with that error (docs/formats.md)."""
    namespace: dict = {}
    exec(compile(FAMILY_MODULE, "acme_family.py", "exec"), namespace)  # noqa: S102 - our text
    with Pool("process", workers=1, timeout_ms=10000, registry=CollectorRegistry()) as pool:
        register(namespace["FAMILY"])
        try:
            events, result, undecoded = _pool_stream(pool, [OUTPUT])
        finally:
            registry.unregister("acme")
    assert result["calls"] == [] and [e["code"] for e in result["errors"]] == ["bad_request"]
    assert [u["status"] for u in undecoded] == ["error"]
    assert "<|acme_calls|>" in result["content"] and "Say" in result["content"]
