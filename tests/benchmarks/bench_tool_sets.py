"""What a new tool set costs before its first call can be decoded, in one run.

    python tests/benchmarks/bench_tool_sets.py [--sets N]

Each tool set is new (its own tool names and schemas, in the shape chat backends send:
descriptions, enums, bounds, arrays, a nested object, a parameter of its own per tool).
Printed, as medians of CPU time: for 1, 8 and 32 tools, "build + first decode of a new tool
set" (``codec_for`` with tools it has not seen, then a decode) against the same decode with
the tool set cached, measured in the same run, for a Hermes output and for one that writes
the call as a ``<NAME>`` tag; then, for 8 tools, the parts: the tool registry (schemas
checked and compiled), the whole codec, and the baseline jsonschema's meta-schema check of
the same schemas, which the registry ran for every tool before. The openers are compiled
once per set of formats (in the warm-up here, as in a worker's ``warm()``), not per tool
set. The target is <= 2 ms added by a new tool set of 8 tools.
"""

from __future__ import annotations

import argparse
import itertools
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from jsonschema import Draft202012Validator  # noqa: E402
from toolcodec.decoding.codec import ToolCallCodec, codec_for  # noqa: E402
from toolcodec.schema.tools import ToolRegistry  # noqa: E402

TARGET_MS = 2.0
TARGET_TOOLS = 8
SIZES = (1, 8, 32)
_fresh = itertools.count(10_000)  # every tool set built here is one no codec has seen


def tool_set(k: int, size: int = 8) -> list[dict]:
    """*size* tools whose names and schemas no other set has."""
    out = []
    for i in range(size):
        out.append({"type": "function", "function": {
            "name": f"tool_{k}_{i}", "description": f"Tool {i} of set {k}: does one thing.",
            "parameters": {"type": "object", "properties": {
                "city": {"type": "string", "description": f"city {k}"},
                "days": {"type": "integer", "minimum": 1, "maximum": 14 + k},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 8},
                f"field_{i}": {"type": "string"},
                "options": {"type": "object", "properties": {
                    "verbose": {"type": "boolean"}, "note": {"type": ["string", "null"]}},
                    "additionalProperties": False},
            }, "required": ["city"]}}})
    return out


def text(k: int, size: int = 8) -> str:
    """A Hermes call to the set's last tool, with repairs to make (a quoted integer, a comma)."""
    return (f'Checking.\n<tool_call>\n{{"name": "tool_{k}_{size - 1}", "arguments": '
            f'{{"city": "Oslo", "days": "3",}}}}\n</tool_call>')


def tag_text(k: int, size: int = 8) -> str:
    """The same call written as a tool tag."""
    name = f"tool_{k}_{size - 1}"
    return f"Checking.\n<{name}>\n<city>Oslo</city>\n<days>3</days>\n</{name}>"


def cpu_ms(fn) -> float:
    t0 = time.process_time()
    fn()
    return (time.process_time() - t0) * 1000


def first_and_cached(size: int, sets: int, write) -> tuple[float, float]:
    """Medians of build + first decode of a new tool set, and of a decode with it cached."""
    first, cached = [], []
    for _ in range(sets):
        k = next(_fresh)
        tools, out = tool_set(k, size), write(k, size)
        first.append(cpu_ms(lambda t=tools, o=out: codec_for(t).decode(o)))
        assert codec_for(tools).decode(out).calls, out  # the call is read, not dropped
        cached.append(cpu_ms(lambda t=tools, o=out: codec_for(t).decode(o)))
    return statistics.median(first), statistics.median(cached)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", type=int, default=40)
    args = parser.parse_args()
    for write in (text, tag_text):  # imports, and what is compiled once per process
        codec_for(tool_set(-1)).decode(write(-1, 8))
    print(f"{args.sets} new tool sets per row (medians of CPU time, ms; shared machine):")
    print("  tools  output  build + first decode  cached decode  added by a new tool set")
    added = {}
    for size in SIZES:
        for label, write in (("hermes", text), ("tag", tag_text)):
            first, cached = first_and_cached(size, args.sets, write)
            added[size, label] = first - cached
            print(f"  {size:5d}  {label:6s}  {first:20.2f}  {cached:13.2f}  {first - cached:23.2f}")
    med = statistics.median
    meta = [cpu_ms(lambda k=k: [Draft202012Validator.check_schema(t["function"]["parameters"])
                                for t in tool_set(k)])
            for k in itertools.islice(_fresh, args.sets)]
    registry = [cpu_ms(lambda k=k: ToolRegistry.from_tools(tool_set(k)))
                for k in itertools.islice(_fresh, args.sets)]
    codec = [cpu_ms(lambda k=k: ToolCallCodec(tool_set(k)))
             for k in itertools.islice(_fresh, args.sets)]
    print(f"the parts, for {TARGET_TOOLS} tools:")
    print(f"  baseline: jsonschema meta-schema check of the 8 schemas  {med(meta):7.2f}")
    print(f"  tool registry (schemas checked and compiled)            {med(registry):7.2f}"
          f"  ({med(meta) / med(registry):.0f}x less than the baseline alone)")
    print(f"  whole codec (registry + openers, shared per formats)    {med(codec):7.2f}")
    worst = max(v for (size, _), v in added.items() if size == TARGET_TOOLS)
    print(f"a new tool set of {TARGET_TOOLS} tools adds at most {worst:.2f} ms before its first "
          f"call is decoded (target <= {TARGET_MS} ms: "
          f"{'met' if worst <= TARGET_MS else 'NOT met'})")


if __name__ == "__main__":
    main()
