"""What a new tool set costs before its first call can be decoded, in one run.

    python tests/benchmarks/bench_tool_sets.py [--sets N]

Each of N tool sets is new (its own tool names and schemas, eight tools each, in the shape
chat backends send: descriptions, enums, bounds, arrays, a nested object). Printed, as
medians: the tool registry (schemas checked and compiled), the whole codec (registry plus
the opener regex for its tool names), the first decode with a new tool set against a decode
with a cached codec, and the baseline measured in the same run: jsonschema's meta-schema
check of the same schemas, which the registry ran for every tool before. The target is
<= 2 ms for a new tool set.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from jsonschema import Draft202012Validator  # noqa: E402
from toolcodec.toolcodec import ToolCallCodec, codec_for  # noqa: E402
from toolcodec.tools import ToolRegistry  # noqa: E402

TARGET_MS = 2.0


def tool_set(k: int) -> list[dict]:
    """Eight tools whose names and schemas no other set has."""
    out = []
    for i in range(8):
        out.append({"type": "function", "function": {
            "name": f"tool_{k}_{i}", "description": f"Tool {i} of set {k}: does one thing.",
            "parameters": {"type": "object", "properties": {
                "city": {"type": "string", "description": f"city {k}"},
                "days": {"type": "integer", "minimum": 1, "maximum": 14 + k},
                "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]},
                "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 8},
                "options": {"type": "object", "properties": {
                    "verbose": {"type": "boolean"}, "note": {"type": ["string", "null"]}},
                    "additionalProperties": False},
            }, "required": ["city"]}}})
    return out


def text(k: int) -> str:
    return (f'Checking.\n<tool_call>\n{{"name": "tool_{k}_3", "arguments": '
            f'{{"city": "Oslo", "days": "3",}}}}\n</tool_call>')


def timed_ms(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return (time.perf_counter() - t0) * 1000


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sets", type=int, default=40)
    args = parser.parse_args()
    codec_for(tool_set(-1)).decode(text(-1))  # imports and lazily built parts
    base = 10_000
    meta = [timed_ms(lambda k=k: [Draft202012Validator.check_schema(t["function"]["parameters"])
                                  for t in tool_set(k)]) for k in range(base, base + args.sets)]
    registry = [timed_ms(lambda k=k: ToolRegistry.from_tools(tool_set(k)))
                for k in range(base + args.sets, base + 2 * args.sets)]
    codec = [timed_ms(lambda k=k: ToolCallCodec(tool_set(k)))
             for k in range(base + 2 * args.sets, base + 3 * args.sets)]
    first = [timed_ms(lambda k=k: codec_for(tool_set(k)).decode(text(k)))
             for k in range(base + 3 * args.sets, base + 4 * args.sets)]
    cached = [timed_ms(lambda k=k: codec_for(tool_set(k)).decode(text(k)))
              for k in range(base + 3 * args.sets, base + 4 * args.sets)]
    med = statistics.median
    print(f"{args.sets} new tool sets of 8 tools each (medians, ms; shared machine):")
    print(f"  baseline: jsonschema meta-schema check of the 8 schemas  {med(meta):7.2f}")
    print(f"  tool registry (schemas checked and compiled)            {med(registry):7.2f}"
          f"  ({med(meta) / med(registry):.0f}x less than the baseline alone)")
    print(f"  whole codec (registry + opener regex)                   {med(codec):7.2f}")
    print(f"  first decode with a new tool set                        {med(first):7.2f}")
    print(f"  decode with the codec cached                            {med(cached):7.2f}")
    added = med(first) - med(cached)
    print(f"  a new tool set adds {added:.2f} ms before its first call is decoded "
          f"(target <= {TARGET_MS} ms: {'met' if added <= TARGET_MS else 'NOT met'})")


if __name__ == "__main__":
    main()
