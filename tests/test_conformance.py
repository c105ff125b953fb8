"""The conformance collection (``tests/data/conformance``): real outputs of nine families,
each named by its origin. The pass rate per family holds its floor, and every case streams to
the batch result in every chunking."""

from __future__ import annotations

import random

import pytest
from toolcodec.decoding.codec import ToolCallCodec

from tests.benchmarks.conformance_report import load_cases, rates, run_case
from tests.test_stream import check, chunkings

CASES = load_cases()
# Measured rates, as floors (passed cases per family; the report prints the failures, and
# docs/formats.md gives the reason for each remaining one).
FLOORS = {"deepseek": 0.95, "gemma4": 1.0, "glm": 0.95, "gpt_oss": 1.0, "kimi": 1.0,
          "llama": 1.0, "mistral": 1.0, "qwen3_hermes": 1.0, "qwen3_xml": 1.0}


def test_every_case_names_its_family_origin_and_expectation():
    for case in CASES:
        assert case["family"] in FLOORS and case["origin"].strip(), case["id"]
        assert set(case["expected"]) == {"calls", "content", "reasoning"}, case["id"]
    assert len({c["id"] for c in CASES}) == len(CASES)


def test_pass_rate_per_family_holds_its_floor():
    table = rates([run_case(c) for c in CASES])
    assert set(table) == set(FLOORS)
    low = {f: f"{p}/{n}" for f, (p, n) in table.items() if p / n < FLOORS[f]}
    assert not low, low


@pytest.mark.parametrize("case", CASES, ids=[c["id"] for c in CASES])
def test_every_case_streams_as_it_decodes(case):
    codec = ToolCallCodec(case["tools"], **case["options"])
    for parts in chunkings(case["text"], random.Random(case["id"])):
        check(codec, case["text"], parts)
