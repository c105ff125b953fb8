"""A family registered by a user, in one file: read by ``decode``, the stream (the same answer
at every cut), ``formats=``, and a real ``toolcodec serve`` that found it through the
``toolcodec.formats`` entry point group."""

from __future__ import annotations

import textwrap

import httpx
import orjson
import pytest
from toolcodec import ToolCallCodec
from toolcodec.formats import registry
from toolcodec.formats.registry import (
    Family,
    FormatRead,
    MarkerFormat,
    ReasoningFormat,
    register,
)

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


def test_serve_reads_a_family_installed_through_its_entry_point(tmp_path) -> None:
    """A package that declares the family in the ``toolcodec.formats`` group, installed on
    the server's path: the service and its worker processes read it."""
    (tmp_path / "acme_family.py").write_text(FAMILY_MODULE)
    info = tmp_path / "acme_family-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: acme-family\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(textwrap.dedent("""\
        [toolcodec.formats]
        acme = acme_family:FAMILY
        """))
    srv = ServeProcess("--workers", "1", "--timeout-ms", "5000",
                       env={"PYTHONPATH": str(tmp_path)}).start()
    try:
        body = orjson.dumps({"text": OUTPUT, "tools": TOOLS})
        answer = httpx.post(srv.url + "/v1/decode", content=body, timeout=30,
                            headers={"content-type": "application/json"}).json()
    finally:
        srv.stop()
    assert answer["status"] == "ok", answer
    assert answer["result"]["calls"] == CALLS
    assert answer["result"]["reasoning"] == "Oslo, then Bergen."
