"""Fairness of the proxy's streams: one long answer among many short ones costs its own time.

    python tests/benchmarks/bench_proxy_fairness.py [--crowd 63] [--rounds 3]
                                                    [--long-chars 5400] [--short-chars 600]

Upstream is the recorded-output STAND-IN (``tests/upstream_standin.py``) in its own process;
the proxy is ``toolcodec serve --upstream URL`` in its own. One long streamed answer
(``case:big:N``: about N/4.5 deltas of 1–8 characters) is timed from request to its last
byte: alone, then started together with ``--crowd`` short streams. The same is measured
direct to the upstream, so that what the stand-in itself adds is seen apart from the proxy.
Printed as min / median over the rounds: the long stream alone, in the crowd, the crowd's
median, the ratio crowd/alone for the long stream, and the long stream's time over the
others' (fair: about 1 plus its own share; a starved stream: many times that).
``--long-case bigcall`` makes the long answer one Hermes call with a long argument (its
block is open for the whole stream).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import orjson  # noqa: E402

from tests.benchmarks.bench_proxy import read_response, request_bytes, start_standin  # noqa: E402
from tests.serve_process import ServeProcess  # noqa: E402

TOOLS = [{"type": "function", "function": {"name": "search_files", "parameters": {
    "type": "object", "properties": {"query": {"type": "string"}}, "required": ["query"]}}}]


def body(case: str, chars: int) -> bytes:
    return orjson.dumps({"model": "m", "stream": True, "tools": TOOLS,
                         "messages": [{"role": "user", "content": f"case:{case}:{chars}"}]})


async def one(url: str, payload: bytes) -> float:
    """Seconds from sending the request to the end of its stream (a new connection)."""
    host = url.removeprefix("http://")
    name, port = host.rsplit(":", 1)
    reader, writer = await asyncio.open_connection(name, int(port))
    start = time.perf_counter()
    writer.write(request_bytes(host, payload))
    status, _ = await read_response(reader, [])
    took = time.perf_counter() - start
    writer.close()
    assert status == 200, status
    return took


async def crowd(url: str, long: bytes, short: bytes, others: int) -> tuple[float, float]:
    """(the long stream's time, the median of the others') when started together."""
    times = await asyncio.gather(one(url, long), *(one(url, short) for _ in range(others)))
    return times[0], statistics.median(times[1:])


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--crowd", type=int, default=63)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--long-chars", type=int, default=5400)
    parser.add_argument("--short-chars", type=int, default=600)
    parser.add_argument("--long-case", choices=["big", "bigcall"], default="big",
                        help="the long answer: prose, or one Hermes call with a long argument")
    args = parser.parse_args()
    standin, upstream = start_standin()
    proxy = ServeProcess("--upstream", upstream, "--workers", "1").start()
    long, short = body(args.long_case, args.long_chars), body("big", args.short_chars)
    try:
        for name, url in (("direct", upstream), ("proxy", proxy.url)):
            asyncio.run(one(url, long))  # warm-up: connections, the first decoder
            alone, inside, others = [], [], []
            for _ in range(args.rounds):  # alone and in the crowd alternated
                alone.append(asyncio.run(one(url, long)))
                a, b = asyncio.run(crowd(url, long, short, args.crowd))
                inside.append(a)
                others.append(b)
            ratio = [c / a for c, a in zip(inside, alone, strict=True)]
            print(f"{name:7} long alone {min(alone) * 1000:7.0f} / "
                  f"{statistics.median(alone) * 1000:7.0f} ms   in the crowd "
                  f"{min(inside) * 1000:7.0f} / {statistics.median(inside) * 1000:7.0f} ms   "
                  f"others {statistics.median(others) * 1000:7.0f} ms   crowd/alone "
                  f"{min(ratio):5.1f} / {statistics.median(ratio):5.1f}x   long/others "
                  f"{statistics.median(inside) / statistics.median(others):4.2f}x  "
                  "(min / median)")
    finally:
        proxy.stop()
        standin.kill()
        standin.wait()


if __name__ == "__main__":
    main()
