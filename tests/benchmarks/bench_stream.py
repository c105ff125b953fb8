"""Streaming decoder: held-back text, linear cost, and cost against one batch decode.

Prints, in one run:
1. the most text ever held back while streaming 100 KB of prose full of ``<``, ``{``, ``[``,
   ``&`` and harmless tags in 1–6 character chunks (target ≤ 64 characters);
2. the cost per character of a 1 MB stream against a 100 KB stream, both in 4-character
   chunks (target ≤ 1.25×);
3. a 1 KB Hermes output streamed in 4-character chunks against the engine reading it in one
   batch (target ≤ 5×; ``decode``'s short way for a valid answer is printed beside it), and
   the same stream through a re-parse-everything decoder (what vLLM and SGLang do: decode
   the whole buffer again on every chunk) for contrast.

Run: ``python tests/benchmarks/bench_stream.py``
"""

from __future__ import annotations

import random
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from toolcodec.decoding.codec import ToolCallCodec  # noqa: E402

from tests.benchmarks.timing import best  # noqa: E402

TOOLS = [{"name": "get_weather", "parameters": {"type": "object", "properties": {
    "city": {"type": "string"}, "days": {"type": "integer"}, "notes": {"type": "string"}},
    "required": ["city"]}}]
CODEC = ToolCallCodec(TOOLS)


def noisy_prose(size: int, seed: int = 1) -> str:
    rng = random.Random(seed)
    words = ["a < b", "x & y", "{braces}", "[list]", "<b>bold</b>", "<i>", "</i>", "f(x)",
             "plain", "words", "and", "more", "<br/>", "{ }", "[ ]", "&amp;", "<", "{", "["]
    out, n = [], 0
    while n < size:
        w = rng.choice(words)
        out.append(w + " ")
        n += len(w) + 1
    return "".join(out)[:size]


def held_back(text: str, seed: int = 2) -> int:
    rng = random.Random(seed)
    s = CODEC.stream()
    fed = released = worst = i = 0
    while i < len(text):
        n = rng.randint(1, 6)
        events = s.feed(text[i:i + n])
        fed += len(text[i:i + n])
        released += sum(len(e["text"]) for e in events if e["type"] == "content")
        worst = max(worst, fed - released)
        i += n
    s.close()
    return worst


def stream_all(text: str, size: int) -> None:
    s = CODEC.stream()
    for i in range(0, len(text), size):
        s.feed(text[i:i + size])
    s.close()


def reparse_all(text: str, size: int) -> None:
    for i in range(size, len(text) + size, size):
        CODEC.decode(text[:i])


def hermes_1kb() -> str:
    notes = "n" * 860
    return ('Let me check.\n<tool_call>\n{"name": "get_weather", "arguments": '
            f'{{"city": "Paris", "days": 3, "notes": "{notes}"}}}}\n</tool_call>')


def main() -> None:
    prose = noisy_prose(100_000)
    worst = held_back(prose)
    print(f"1. most text held back, 100 KB noisy prose in 1-6 char chunks: {worst} chars "
          f"(target <= 64) {'OK' if worst <= 64 else 'MISSED'}")

    small, large = noisy_prose(100_000, 3), noisy_prose(1_000_000, 4)
    t_small = best(lambda: stream_all(small, 4), 3) / len(small)
    t_large = best(lambda: stream_all(large, 4), 2) / len(large)
    ratio = t_large / t_small
    print(f"2. per-char cost, 4-char chunks: 100 KB {t_small * 1e9:.0f} ns/char, 1 MB "
          f"{t_large * 1e9:.0f} ns/char: ratio {ratio:.2f} (target <= 1.25) "
          f"{'OK' if ratio <= 1.25 else 'MISSED'}")

    text = hermes_1kb()
    assert CODEC.decode(text).ok
    # The stream runs the engine; a batch decode of a valid answer takes the short way
    # (toolcodec.decoding.valid_path), which the stream cannot (a call must be sent as soon
    # as its block closes). The target holds the stream to the engine's batch reading; the
    # short way's figure is printed beside it.
    t_short = best(lambda: CODEC.decode(text), 200)
    t_batch = best(lambda: CODEC._decode_text(text), 200)
    t_stream = best(lambda: stream_all(text, 4), 50)
    t_reparse = best(lambda: reparse_all(text, 4), 5)
    print(f"3. 1 KB Hermes output: the engine's batch decode {t_batch * 1e6:.0f} us; streamed "
          f"in 4-char chunks {t_stream * 1e6:.0f} us = {t_stream / t_batch:.2f}x batch (target "
          f"<= 5) {'OK' if t_stream / t_batch <= 5 else 'MISSED'}; decode's short way "
          f"{t_short * 1e6:.0f} us ({t_stream / t_short:.1f}x); re-parse-everything baseline "
          f"{t_reparse * 1e6:.0f} us = {t_reparse / t_batch:.0f}x batch")

if __name__ == "__main__":
    main()
