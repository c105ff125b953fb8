"""Run the peer tool-call vectors through ``codec.decode`` and report pass rates.

    python tests/benchmarks/peers_toolcall_report.py [--format hermes] [--failures 10]

Cases come from ``tests/data/peers/toolcall_cases.jsonl`` (non-streaming only;
``TOOLCODEC_PEERS`` names another folder). A case passes on *calls* when the decoded calls
(name and arguments, in order) equal the peer's, and on *content* when, in addition, our
stripped ``content`` equals the peer's stripped content (cases that record no content count
on calls alone).

Two deliberate differences lower the content figure: ``<think>`` text is moved to
``reasoning`` (peers often leave it in content), and content is stripped.

A case without tool definitions (the peer parser did not need any) gets permissive tools
named after its expected calls, since toolcodec refuses calls to tools it does not know.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections import defaultdict
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.peers import peer_file  # noqa: E402

# Every format of the suite is claimed: toolcodec detects them all by their markers.
CLAIMED = ("apertus", "deepseek_v3", "deepseek_v31", "deepseek_v32", "dots", "functiongemma",
           "gemma4", "gigachat3", "glm4_moe", "granite", "granite_20b_fc", "hermes", "hunyuan",
           "internlm", "jamba", "json", "kimi_k2", "longcat", "minicpm_xml", "minimax",
           "mistral", "morph_xml", "pythonic", "qwen_xml", "seed_oss_xml", "step3", "yaml_xml")

# Vectors whose peer expectation contradicts a rule of ours: the calls we answer instead, and
# the rule. They count as passing only when our answer is exactly that.
DECIDED = {
    # issue #27 item 5: XML text `null` is null where the schema admits null, as vLLM's
    # qwen3coder parser reads it; the ai-sdk middleware keeps the string "null"
    "mw-qwen_xml-0213": [{"name": "set_alarm", "arguments": {
        "time": "07:30", "days": ["mon", "tue", "wed", "thu", "fri"], "volume": 0.8,
        "label": None}}],
}


@dataclass
class Outcome:
    case: dict
    calls_ok: bool
    content_ok: bool
    got_calls: list
    got_content: str | None
    note: str = ""
    codes: tuple[str, ...] = ()


def load_cases(path: Path | None = None) -> list[dict]:
    """The non-streaming cases of the peer file (raises when the file is missing)."""
    path = path or peer_file("toolcall_cases.jsonl")
    rows = [json.loads(line) for line in path.read_text().splitlines() if line.strip()]
    return [r for r in rows if r.get("mode") == "non-streaming"]


def tools_for(case: dict) -> list[dict]:
    if case.get("tools"):
        return case["tools"]
    names = dict.fromkeys(c["name"] for c in case.get("expected_calls") or [])
    return [{"name": n, "parameters": {"type": "object"}} for n in names]


def run_case(case: dict) -> Outcome:
    import toolcodec as codec

    expected = DECIDED.get(case["id"]) or [
        {"name": c["name"], "arguments": c.get("arguments") or {}}
        for c in case.get("expected_calls") or []]
    try:
        tc = codec.ToolCallCodec(tools_for(case))
    except codec.InvalidToolsError as exc:
        return Outcome(case, False, False, [], None, f"tools rejected: {exc}")
    result = tc.decode(case["input"])
    got = [{"name": c.name, "arguments": c.arguments} for c in result.calls]
    calls_ok = got == expected
    want_content = case.get("expected_content")
    content_ok = calls_ok and (want_content is None or
                               want_content.strip() == result.content)
    note = "; ".join(f"{e.code}: {e.message[:120]}" for e in result.errors)
    codes = tuple(sorted({e.code for e in result.errors}))
    return Outcome(case, calls_ok, content_ok, got, result.content, note, codes)


def run_all(cases: list[dict]) -> list[Outcome]:
    return [run_case(c) for c in cases]


def rates(outcomes: list[Outcome], key: str = "format") -> dict[str, tuple[int, int, int]]:
    """``{group: (cases, calls passed, calls+content passed)}``."""
    table: dict[str, list[int]] = defaultdict(lambda: [0, 0, 0])
    for o in outcomes:
        row = table[o.case[key]]
        row[0] += 1
        row[1] += o.calls_ok
        row[2] += o.content_ok
    return {k: tuple(v) for k, v in sorted(table.items())}


def _print_table(title: str, table: dict[str, tuple[int, int, int]]) -> None:
    print(f"\n{title:<28} {'cases':>6} {'calls':>8} {'+content':>9}")
    for group, (n, calls, content) in table.items():
        mark = "*" if group in CLAIMED else " "
        print(f"{mark}{group:<27} {n:>6} {calls / n:>8.1%} {content / n:>9.1%}")


def difference(o: Outcome) -> str:
    """The class of a failed case: what kind of answer toolcodec gave instead."""
    if o.calls_ok:
        return "content differs"
    want = o.case.get("expected_calls") or []
    if not o.got_calls:
        return f"no call ({', '.join(o.codes) or 'no error'})" if want else "?"
    if not want:
        return "a call where the peer sees none"
    if [c["name"] for c in o.got_calls] != [c["name"] for c in want]:
        return "different calls"
    return "different arguments"


def _print_classes(outcomes: list[Outcome]) -> None:
    classes: dict[str, list[str]] = defaultdict(list)
    for o in outcomes:
        if not o.content_ok:
            classes[f"{o.case['format']}: {difference(o)}"].append(o.case["id"])
    print("\nremaining differences by class:")
    for name, ids in sorted(classes.items(), key=lambda kv: (-len(kv[1]), kv[0])):
        print(f"  {len(ids):>4}  {name}  (e.g. {', '.join(ids[:3])})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--format", help="only this format")
    parser.add_argument("--failures", type=int, default=5, help="failures shown per format")
    args = parser.parse_args()
    cases = load_cases()
    if args.format:
        cases = [c for c in cases if c["format"] == args.format]
    outcomes = run_all(cases)
    _print_table("format (* = claimed)", rates(outcomes))
    claimed = [o for o in outcomes if o.case["format"] in CLAIMED]
    _print_table("peer (claimed formats)", rates(claimed, "peer"))
    n = len(outcomes) or 1
    print(f"\n{'overall':<28} {len(outcomes):>6} {sum(o.calls_ok for o in outcomes) / n:>8.1%} "
          f"{sum(o.content_ok for o in outcomes) / n:>9.1%}")
    _print_classes(claimed)
    shown: dict[str, int] = defaultdict(int)
    print("\nfailures (claimed formats):")
    for o in claimed:
        fmt = o.case["format"]
        if o.content_ok or shown[fmt] >= args.failures:
            continue
        shown[fmt] += 1
        print(f"- {o.case['id']} [{fmt}] {'content' if o.calls_ok else 'calls'} mismatch")
        print(f"    input:    {o.case['input'][:160]!r}")
        print(f"    expected: {json.dumps(o.case['expected_calls'])[:160]} "
              f"content={str(o.case.get('expected_content'))[:60]!r}")
        print(f"    got:      {json.dumps(o.got_calls)[:160]} content={str(o.got_content)[:60]!r}")
        if o.note:
            print(f"    errors:   {o.note[:200]}")


if __name__ == "__main__":
    main()
