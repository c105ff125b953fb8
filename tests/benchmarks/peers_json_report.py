"""Print how repair_json scores on the peer JSON-repair vectors.

Usage: python tests/benchmarks/peers_json_report.py [N]   (N failing inputs shown per file)
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.test_jsonrepair_peers import FILES, FLOORS, evaluate  # noqa: E402


def main() -> None:
    show = int(sys.argv[1]) if len(sys.argv) > 1 else 20
    for name in FILES:
        out = evaluate(name)
        deliberate = sum(map(len, out.deliberate.values()))
        print(f"== {name}")
        print(f"   pass {out.passed}  deliberate {deliberate}  fail {len(out.failed)}  "
              f"skipped {out.skipped}  rate {out.rate:.3f} (floor {FLOORS[name]})")
        for rule, cases in sorted(out.deliberate.items()):
            print(f"   deliberate {rule}: {len(cases)}  e.g. {cases[0]['input'][:60]!r}")
        for case, res in out.failed[:show]:
            got = res.value if res.ok else [e.code for e in res.errors]
            print(f"   FAIL {case['id']}: {case['input'][:70]!r}")
            print(f"        expected {case['expected'][:70]!r}  got {str(got)[:70]!r}")


if __name__ == "__main__":
    main()
