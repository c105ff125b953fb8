"""The repairing proxy's added latency and its SSE throughput, against a direct connection.

Upstream is the recorded-output STAND-IN (``tests/upstream_standin.py``, real HTTP/SSE on
loopback). Prints, in one run: p50/p99 of a whole (non-streaming) completion with a broken
Hermes call, direct vs through ``toolcodec serve --upstream``, and the difference; and SSE
chunks per second of a streamed completion, direct vs through the proxy.

Run: ``python tests/benchmarks/bench_proxy.py``
"""

from __future__ import annotations

import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import httpx  # noqa: E402

from tests.serve_process import ServeProcess  # noqa: E402
from tests.upstream_standin import Standin  # noqa: E402

TOOLS = [{"type": "function", "function": {"name": "get_weather", "parameters": {
    "type": "object", "properties": {"city": {"type": "string"}, "days": {"type": "integer"}},
    "required": ["city"]}}}]
BODY = {"model": "m", "messages": [{"role": "user", "content": "case:hermes_broken"}],
        "tools": TOOLS}
RUNS = 300


def latencies(client: httpx.Client, url: str) -> list[float]:
    out = []
    for _ in range(RUNS):
        t0 = time.perf_counter()
        client.post(url, json=BODY).raise_for_status()
        out.append(time.perf_counter() - t0)
    return sorted(out)


def sse_rate(client: httpx.Client, url: str) -> float:
    chunks, t0 = 0, time.perf_counter()
    for _ in range(30):
        with client.stream("POST", url, json={**BODY, "stream": True}) as response:
            chunks += sum(1 for line in response.iter_lines() if line.startswith("data:"))
    return chunks / (time.perf_counter() - t0)


def pct(xs: list[float], q: float) -> float:
    return xs[min(len(xs) - 1, int(q * len(xs)))] * 1000


def main() -> None:
    upstream = Standin().start()
    proxy = ServeProcess("--upstream", upstream.url, "--workers", "2", "--timeout-ms",
                         "2000").start()
    try:
        with httpx.Client(timeout=30) as client:
            direct_url = upstream.url + "/v1/chat/completions"
            proxy_url = proxy.url + "/v1/chat/completions"
            latencies(client, proxy_url)[:0]  # warm both paths
            direct, through = latencies(client, direct_url), latencies(client, proxy_url)
            print(f"whole completion, {RUNS} sequential requests:")
            print(f"  direct : p50 {pct(direct, .5):.2f} ms, p99 {pct(direct, .99):.2f} ms")
            print(f"  proxied: p50 {pct(through, .5):.2f} ms, p99 {pct(through, .99):.2f} ms")
            print(f"  added  : p50 {pct(through, .5) - pct(direct, .5):.2f} ms, "
                  f"p99 {pct(through, .99) - pct(direct, .99):.2f} ms")
            d, p = sse_rate(client, direct_url), sse_rate(client, proxy_url)
            print(f"SSE: direct {d:.0f} chunks/s, proxied {p:.0f} chunks/s ({p / d:.2f}x)")
    finally:
        proxy.stop()
        upstream.stop()


if __name__ == "__main__":
    main()
