"""Decoding leaves no reference cycles behind: a cycle (a caught exception kept in a local of
a frame its traceback holds, say) keeps that frame, every caller's and their locals alive
until the garbage collector runs, and makes it run more often under load."""

from __future__ import annotations

import gc
from pathlib import Path

import orjson
import pytest
import toolcodec
from toolcodec.decoding.codec import codec_for

from tests.upstream_standin import TOOLS

CODEC_DIR = str(Path(toolcodec.__file__).resolve().parent)
RECORDED = Path(__file__).resolve().parent / "data" / "recorded_outputs.jsonl"
ROWS = [row for row in map(orjson.loads, RECORDED.read_bytes().splitlines()) if row]


def _message(row: dict) -> dict:
    message = {"role": "assistant", "content": row.get("content")}
    for key in ("tool_calls", "reasoning_content"):
        if row.get(key) is not None:
            message[key] = row[key]
    return message


def _codecs(obj: object) -> bool:
    """Whether *obj* is the codec's: a frame of its code or an object of its types (another
    test's pool, say, may drop a cycle of its own meanwhile)."""
    if type(obj).__name__ == "frame":
        return obj.f_code.co_filename.startswith(CODEC_DIR)  # type: ignore[attr-defined]
    module = type(obj).__module__
    return module.startswith("toolcodec.") and not module.startswith(
        ("toolcodec.pool", "toolcodec.worker"))


def _cyclic_garbage(work) -> list:
    """The codec's objects left in cycles by *work* (and what they hold, for the message)."""
    gc.collect()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        work()
        gc.collect()
        return [o for o in gc.garbage if _codecs(o)]
    finally:
        gc.set_debug(0)
        gc.garbage.clear()


@pytest.mark.parametrize("row", ROWS, ids=[row["name"] for row in ROWS])
def test_decoding_a_recorded_output_leaves_no_cycle(row: dict) -> None:
    codec = codec_for(TOOLS)
    codec.decode(_message(row))  # built and warmed outside the count

    def work() -> None:
        for reason in ("stop", "length"):
            codec.decode(_message(row), finish_reason=reason).to_dict()
            if row.get("content"):
                codec.decode(row["content"], finish_reason=reason).to_dict()
                stream, text = codec.stream(), row["content"]
                for i in range(0, len(text), 7):
                    stream.feed(text[i:i + 7])
                stream.close(finish_reason=reason)

    garbage = _cyclic_garbage(work)
    frames = sorted({o.f_code.co_name for o in garbage if type(o).__name__ == "frame"})
    assert not garbage, f"{len(garbage)} objects in cycles, frames of {frames}"
