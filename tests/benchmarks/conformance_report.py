"""Run the conformance collection of real outputs through ``codec.decode`` and report the pass
rate per model family.

    python tests/benchmarks/conformance_report.py [--family kimi] [--failures 10]

Cases come from ``tests/data/conformance/*.jsonl``: each names its ``origin`` (the chat
template rendered, the engine test or the bug report its text follows), the codec ``options``
an engine would use (``starts_in_reasoning`` where the template's generation prompt leaves the
reasoning open), and the expected ``calls`` (name and arguments, in order), ``content``
(stripped) and ``reasoning``. A case passes when all three are equal.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

FOLDER = Path(__file__).resolve().parents[1] / "data" / "conformance"


@dataclass
class Outcome:
    case: dict
    passed: bool
    got: dict
    why: str = ""


def load_cases(folder: Path = FOLDER) -> list[dict]:
    """Every case of the collection (raises when the folder holds none)."""
    cases = [json.loads(line) for path in sorted(folder.glob("*.jsonl"))
             for line in path.read_text().splitlines() if line.strip()]
    if not cases:
        raise FileNotFoundError(f"no conformance cases in {folder}")
    return cases


def run_case(case: dict) -> Outcome:
    from toolcodec.decoding.codec import ToolCallCodec

    codec = ToolCallCodec(case["tools"], **case.get("options", {}))
    got = codec.decode(case["text"]).to_dict()
    expected = case["expected"]
    calls = [{"name": c["name"], "arguments": c["arguments"]} for c in got["calls"]]
    why = []
    if calls != expected["calls"]:
        why.append("calls")
    if got["content"] != expected["content"]:
        why.append("content")
    if got["reasoning"] != expected["reasoning"]:
        why.append("reasoning")
    return Outcome(case, not why, got, "+".join(why))


def rates(outcomes: list[Outcome]) -> dict[str, tuple[int, int]]:
    """family -> (passed, cases)."""
    table: dict[str, list[int]] = defaultdict(lambda: [0, 0])
    for o in outcomes:
        table[o.case["family"]][0] += o.passed
        table[o.case["family"]][1] += 1
    return {k: (v[0], v[1]) for k, v in sorted(table.items())}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--family")
    parser.add_argument("--failures", type=int, default=20, help="failures to print")
    args = parser.parse_args()
    cases = [c for c in load_cases() if args.family in (None, c["family"])]
    outcomes = [run_case(c) for c in cases]
    print(f"{'family':<16}{'cases':>7}{'passed':>9}")
    for family, (passed, total) in rates(outcomes).items():
        print(f"{family:<16}{total:>7}{passed / total:>8.1%}")
    passed = sum(o.passed for o in outcomes)
    print(f"{'overall':<16}{len(outcomes):>7}{passed / len(outcomes):>8.1%}")
    failures = [o for o in outcomes if not o.passed]
    if failures:
        print("\nfailures:")
    for o in failures[:args.failures]:
        got = {"calls": [(c["name"], c["arguments"]) for c in o.got["calls"]],
               "content": o.got["content"], "reasoning": o.got["reasoning"],
               "errors": [e["message"][:120] for e in o.got["errors"]]}
        print(f"- {o.case['id']} ({o.why}) {o.case['origin']}\n  got {json.dumps(got)[:400]}")


if __name__ == "__main__":
    main()
