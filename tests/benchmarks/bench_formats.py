"""Linear cost on outputs that stress the marker-in-value and reasoning rules.

    python tests/benchmarks/bench_formats.py [--n 4000]

For each shape, decode (batch) and a stream in 16-character chunks are timed at n and 4n
repetitions; the cost per character at 4n against n must stay near 1 (target <= 1.5; a scan
that restarts per repetition shows 4x). Shapes: lines that start like a call in reasoning the
prompt opened, calls drafted there, Kimi-K2 JSON strings holding its end token, GLM values
holding <tool_call>, Qwen values holding </parameter> or <function=x>, MiniMax-M3's prefixed
tags, a Mistral string holding [TOOL_CALLS], a Gemma string holding its own tokens.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from toolcodec.decoding.codec import ToolCallCodec  # noqa: E402

TOOLS = [{"name": "write_file", "parameters": {"type": "object", "properties": {
    "path": {"type": "string"}, "content": {"type": "string"}}}}]
Q = '<|"|>'
SHAPES = {
    "reasoning: call-like lines": (True, lambda n: "\n<tool_call> is a tag" * n + "</think>ok"),
    "reasoning: drafted calls": (True, lambda n: (
        "\n<tool_call>\n<function=write_file>\n</function>\n</tool_call>\n") * n + "</think>ok"),
    "kimi: end token in strings": (False, lambda n: (
        "<|tool_calls_section_begin|><|tool_call_begin|>functions.write_file:0"
        "<|tool_call_argument_begin|>{" + '"a": "<|tool_call_end|>",' * n
        + '"path": "x"}<|tool_call_end|><|tool_calls_section_end|>')),
    "glm: <tool_call> in values": (False, lambda n: (
        "<tool_call>write_file\n" + "<arg_key>k</arg_key><arg_value><tool_call></arg_value>" * n
        + "</tool_call>")),
    "qwen: <function=x> in a value": (False, lambda n: (
        "<tool_call>\n<function=write_file>\n<parameter=content>\n" + "use <function=x> " * n
        + "\n</parameter>\n</function>\n</tool_call>")),
    "minimax-m3: prefixed tags": (False, lambda n: (
        "]<]minimax[>[<tool_call>\n" + ('<invoke name="write_file">]<]minimax[>[<path>a'
                                         "]<]minimax[>[</path>]<]minimax[>[</invoke>\n") * n
        + "]<]minimax[>[</tool_call>")),
    "qwen: </parameter> in a value": (False, lambda n: (
        "<tool_call>\n<function=write_file>\n<parameter=content>\n" + "a</parameter>b" * n
        + "\n</parameter>\n</function>\n</tool_call>")),
    "mistral: marker in a string": (False, lambda n: (
        '[TOOL_CALLS]write_file[ARGS]{"path": "a", "content": "' + "[TOOL_CALLS] x " * n
        + '"}')),
    "gemma: tokens in a string": (False, lambda n: (
        f"<|tool_call>call:write_file{{path:{Q}a{Q},content:{Q}" + "<tool_call|> x " * n
        + f"{Q}}}<tool_call|>")),
}


def cost(codec: ToolCallCodec, text: str, streamed: bool) -> float:
    """Seconds per character, best of three."""
    best = float("inf")
    for _ in range(3):
        start = time.perf_counter()
        if streamed:
            s = codec.stream()
            for i in range(0, len(text), 16):
                s.feed(text[i:i + 16])
            s.close()
        else:
            codec.decode(text)
        best = min(best, time.perf_counter() - start)
    return best / len(text)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=4000)
    args = parser.parse_args()
    print(f"{'shape':<30}{'mode':>8}{'ns/char n':>12}{'ns/char 4n':>12}{'ratio':>8}")
    worst = 0.0
    for name, (prefill, make) in SHAPES.items():
        codec = ToolCallCodec(TOOLS, starts_in_reasoning=prefill)
        small, large = make(args.n), make(4 * args.n)
        for streamed in (False, True):
            a, b = cost(codec, small, streamed), cost(codec, large, streamed)
            worst = max(worst, b / a)
            mode = "stream" if streamed else "batch"
            print(f"{name:<30}{mode:>8}{a * 1e9:>12.0f}{b * 1e9:>12.0f}{b / a:>8.2f}")
    print(f"worst ratio {worst:.2f} (target <= 1.5) {'OK' if worst <= 1.5 else 'SLOW'}")


if __name__ == "__main__":
    main()
