"""Time repair_json against the json_repair package on the same malformed inputs.

Usage: python tests/benchmarks/bench_repair_json.py
Targets: >= 5x faster than json_repair.loads at ~1 KB and ~100 KB; 1 MB takes <= 12x the
time of 100 KB; 100 000 levels of nesting answer nesting_too_deep quickly (and parse when the
limit is raised).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from toolcodec.jsonrepair import repair_json  # noqa: E402
from toolcodec.limits import Limits  # noqa: E402

from tests.benchmarks.timing import best  # noqa: E402

try:
    import json_repair
except ImportError:  # the comparison is optional; our own figures still print
    json_repair = None

SPEEDUP_TARGET = 5.0
GROWTH_TARGET = 12.0


def _records(size: int) -> list[dict]:
    out, total, i = [], 0, 0
    while total < size:
        rec = {"id": i, "name": f"item {i}", "tags": ["a", "b"], "price": i * 1.5,
               "active": i % 2 == 0, "note": None}
        out.append(rec)
        total += len(json.dumps(rec)) + 2
        i += 1
    return out


def malformed(kind: str, size: int) -> str:
    """A document of about ``size`` characters with one kind of damage throughout."""
    text = json.dumps({"items": _records(size)})
    if kind == "trailing_comma":
        return text.replace("]", ",]").replace("}", ",}")
    if kind == "single_quotes":
        return text.replace('"', "'")
    if kind == "truncation":
        return text[: len(text) - len(text) // 7]
    if kind == "unquoted_keys":
        for key in ("id", "name", "tags", "price", "active", "note", "items"):
            text = text.replace(f'"{key}":', f"{key}:")
        return text
    raise ValueError(kind)





def compare() -> None:
    print(f"repair_json vs json_repair.loads (best of runs; target speedup >= {SPEEDUP_TARGET}x)")
    for size, runs in ((1_000, 30), (100_000, 3)):
        for kind in ("trailing_comma", "single_quotes", "truncation", "unquoted_keys"):
            text = malformed(kind, size)
            res = repair_json(text)
            assert res.ok, (kind, res.errors)
            ours = best(lambda t=text: repair_json(t), runs)
            line = f"  {kind:15s} {len(text):>7d} chars  ours {ours * 1e3:8.3f} ms"
            if json_repair is not None:
                theirs = best(lambda t=text: json_repair.loads(t), runs)
                ratio = theirs / ours
                flag = "ok" if ratio >= SPEEDUP_TARGET else "BELOW TARGET"
                line += f"  json_repair {theirs * 1e3:8.3f} ms  speedup {ratio:5.1f}x  {flag}"
            print(line)


def growth() -> None:
    print(f"growth 1 MB vs 100 KB (target <= {GROWTH_TARGET}x)")
    for kind in ("trailing_comma", "single_quotes", "truncation", "unquoted_keys"):
        small, large = malformed(kind, 100_000), malformed(kind, 1_000_000)
        t_small = best(lambda t=small: repair_json(t), 3)
        t_large = best(lambda t=large: repair_json(t), 2)
        ratio = t_large / t_small
        flag = "ok" if ratio <= GROWTH_TARGET else "ABOVE TARGET"
        print(f"  {kind:15s} 100KB {t_small * 1e3:8.2f} ms  1MB {t_large * 1e3:8.2f} ms  "
              f"ratio {ratio:5.1f}x  {flag}")


def nesting() -> None:
    depth = 100_000
    text = "[" * depth + "]" * depth
    t0 = time.perf_counter()
    res = repair_json(text)
    t1 = time.perf_counter()
    code = res.errors[0].code if res.errors else None
    print(f"nesting {depth} levels, default limit: {code} in {(t1 - t0) * 1e3:.2f} ms "
          f"(target: nesting_too_deep, quickly)")
    t0 = time.perf_counter()
    res = repair_json(text, limits=Limits(max_depth=depth + 1))
    t1 = time.perf_counter()
    print(f"nesting {depth} levels, max_depth={depth + 1}: ok={res.ok} in "
          f"{(t1 - t0) * 1e3:.2f} ms (target: ok=True, no RecursionError)")
    broken = "[" * depth  # unclosed: must go through the reader, not the fast path
    t0 = time.perf_counter()
    res = repair_json(broken, limits=Limits(max_depth=depth + 1))
    t1 = time.perf_counter()
    print(f"unclosed {depth} levels, max_depth={depth + 1}: ok={res.ok} repairs={res.repairs} "
          f"in {(t1 - t0) * 1e3:.2f} ms")


if __name__ == "__main__":
    compare()
    growth()
    nesting()
