"""Decoding leaves no reference cycles behind: a cycle (a caught exception kept in a local of
a frame its traceback holds, say) keeps that frame, every caller's and their locals alive
until the garbage collector runs, and makes it run more often under load."""

from __future__ import annotations

import gc
from pathlib import Path

import orjson
import pytest
from toolcodec.decoding.codec import codec_for

from tests.upstream_standin import TOOLS

RECORDED = Path(__file__).resolve().parent / "data" / "recorded_outputs.jsonl"
ROWS = [row for row in map(orjson.loads, RECORDED.read_bytes().splitlines()) if row]


def _message(row: dict) -> dict:
    message = {"role": "assistant", "content": row.get("content")}
    for key in ("tool_calls", "reasoning_content"):
        if row.get(key) is not None:
            message[key] = row[key]
    return message


def _cyclic_garbage(work) -> list:
    gc.collect()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        work()
        gc.collect()
        return list(gc.garbage)
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
