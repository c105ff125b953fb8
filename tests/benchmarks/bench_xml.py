"""Time decode_xml_call on large calls, well-formed and needing repairs.

Usage: python tests/benchmarks/bench_xml.py
Targets: a ~100 KB call that needs ``xml.escape_lt`` and ``xml.escape_ampersand`` decodes in
well under 10 ms; every kind of call grows linearly: 1 MB takes <= 12x the time of 100 KB.
Also prints how deep nesting behaves with a raised ``Limits.max_depth``.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from toolcodec.repair.xml_heuristics import default_pipeline  # noqa: E402
from toolcodec.repair.xmlcall import decode_xml_call  # noqa: E402
from toolcodec.results.limits import Limits  # noqa: E402
from toolcodec.schema.tools import ToolRegistry  # noqa: E402

from tests.benchmarks.timing import best  # noqa: E402

GROWTH_TARGET = 12.0
REPAIR_100KB_TARGET_MS = 10.0
SIZES = (("1KB", 1_000), ("100KB", 100_000), ("1MB", 1_000_000))

PIPELINE = default_pipeline()
REGISTRY = ToolRegistry.from_tools(
    [{"name": "search", "parameters": {"type": "object", "properties": {
        "pattern": {"type": "string"}, "path": {"type": "string"}}}}]
)
# Code a model might search for: comparisons and logical ands, as the model writes them.
_LINE = "if (i<10 && a <= b) && x < y: func.*&&.*return {n}\n"


def _value(size: int, escaped: bool) -> str:
    out, total, n = [], 0, 0
    while total < size:
        line = _LINE.format(n=n)
        if escaped:
            line = line.replace("&", "&amp;").replace("<", "&lt;")
        out.append(line)
        total += len(line)
        n += 1
    return "".join(out)


def function_call(size: int, escaped: bool) -> str:
    body = _value(size, escaped)
    return (f"<tool_call>\n<function=search>\n<parameter=pattern>\n{body}</parameter>\n"
            "<parameter=path>src/</parameter>\n</function>\n</tool_call>")


def tool_tag_call(size: int, escaped: bool) -> str:
    body = _value(size, escaped)
    return f"<search>\n<pattern>\n{body}</pattern>\n<path>src/</path>\n</search>"


def unclosed_call(size: int) -> str:
    """Many raw parameters, none closed: the balancing fallback closes each one."""
    parts, total, n = ["<tool_call><function=search>"], 0, 0
    while total < size:
        part = f"<parameter=p{n}>value {n} with a < b\n"
        parts.append(part)
        total += len(part)
        n += 1
    return "".join(parts)


CASES: dict[str, tuple[str, str | None, Callable[[int], str], bool]] = {
    # name: (format, tag_name, builder, ok expected)
    "function, well-formed": ("function", None, lambda s: function_call(s, True), True),
    "function, repairs": ("function", None, lambda s: function_call(s, False), True),
    "tool_tag, well-formed": ("tool_tag", "search", lambda s: tool_tag_call(s, True), True),
    "tool_tag, repairs": ("tool_tag", "search", lambda s: tool_tag_call(s, False), True),
    "function, unclosed": ("function", None, unclosed_call, True),
}





def run_case(name: str) -> None:
    fmt, tag, build, want_ok = CASES[name]
    registry = None if name.endswith("unclosed") else REGISTRY
    timings = {}
    for label, size in SIZES:
        raw = build(size)
        res = decode_xml_call(raw, fmt, registry=registry, pipeline=PIPELINE, tag_name=tag)
        assert (not res.errors) == want_ok, (name, label, res.errors[:1])
        runs = {"1KB": 200, "100KB": 7, "1MB": 3}[label]
        timings[label] = best(
            lambda r=raw: decode_xml_call(r, fmt, registry=registry, pipeline=PIPELINE,
                                          tag_name=tag),
            runs,
        )
    ratio = timings["1MB"] / timings["100KB"]
    flag = "ok" if ratio <= GROWTH_TARGET else "ABOVE TARGET"
    cells = "  ".join(f"{lbl} {timings[lbl] * 1e3:8.3f} ms" for lbl, _ in SIZES)
    line = f"  {name:22s} {cells}  1MB/100KB {ratio:5.1f}x (target <= {GROWTH_TARGET:.0f}x) {flag}"
    if name.endswith("repairs"):
        hit = "ok" if timings["100KB"] * 1e3 < REPAIR_100KB_TARGET_MS else "ABOVE TARGET"
        line += f"; 100KB target < {REPAIR_100KB_TARGET_MS:.0f} ms {hit}"
    print(line)


def nesting() -> None:
    depth = 100_000
    raw = "<t><p>" + "<a>" * depth + "x" + "</a>" * depth + "</p></t>"
    limits = Limits(max_depth=depth + 10)
    t0 = time.perf_counter()
    res = decode_xml_call(raw, "tool_tag", registry=None, pipeline=PIPELINE, limits=limits)
    t1 = time.perf_counter()
    print(f"nesting {depth} levels, max_depth={limits.max_depth}: ok={not res.errors} in "
          f"{(t1 - t0) * 1e3:.1f} ms (target: ok, no RecursionError)")


def main() -> None:
    print("decode_xml_call, best of several runs")
    for name in CASES:
        run_case(name)
    nesting()


if __name__ == "__main__":
    main()
