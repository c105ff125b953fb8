"""``toolcodec serve`` under 64 keep-alive connections, against the pool used in-process.

Prints, in one run, for ``POST /v1/decode`` of a 1 KB Hermes output:
- through the service: requests/s and p50/p99 latency measured by ``wrk`` (Debian's package;
  64 connections, 2 threads, a Lua script for the POST body), the service started as
  ``toolcodec serve --workers 2 --timeout-ms 50`` (uvicorn with httptools and uvloop);
- in-process: the same jobs through ``Pool.submit`` from 64 threads (the same 2 workers);
- the ratio of throughputs (target ≥ 0.5) and whether the service's p99 is within the 50 ms
  budget at that load.

Run: ``python tests/benchmarks/bench_serve.py`` (needs ``wrk`` on the PATH).
"""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import orjson  # noqa: E402
from toolcodec.pool import Pool  # noqa: E402

from tests.benchmarks.bench_stream import hermes_1kb  # noqa: E402
from tests.benchmarks.timing import drive  # noqa: E402
from tests.serve_process import ServeProcess  # noqa: E402

TOOLS = [{"name": "get_weather", "parameters": {"type": "object", "properties": {
    "city": {"type": "string"}, "days": {"type": "integer"}, "notes": {"type": "string"}},
    "required": ["city"]}}]
PAYLOAD = {"text": hermes_1kb(), "tools": TOOLS}
SECONDS = 10


def wrk(url: str) -> tuple[float, float, float]:
    body = orjson.dumps(PAYLOAD).decode()
    script = ('wrk.method = "POST"\nwrk.headers["Content-Type"] = "application/json"\n'
              f"wrk.body = [[{body}]]\n")
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as fh:
        fh.write(script)
    out = subprocess.run(["wrk", "-t2", "-c64", f"-d{SECONDS}s", "--latency", "-s", fh.name,
                          url + "/v1/decode"], capture_output=True, text=True, check=True).stdout
    rate = float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1))
    p50 = _ms(re.search(r"50%\s+([\d.]+\w+)", out).group(1))
    p99 = _ms(re.search(r"99%\s+([\d.]+\w+)", out).group(1))
    if "Non-2xx" in out:
        print("  wrk saw non-2xx answers:", re.search(r"Non-2xx.*", out).group(0))
    return rate, p50, p99


def _ms(text: str) -> float:
    value, unit = float(re.match(r"[\d.]+", text).group()), re.sub(r"[\d.]+", "", text)
    return value * {"us": 0.001, "ms": 1.0, "s": 1000.0}[unit]


def main() -> None:
    if shutil.which("wrk") is None:
        raise SystemExit("wrk is missing: apt-get install -y wrk")
    server = ServeProcess("--workers", "2", "--timeout-ms", "50").start()
    try:
        rate, p50, p99 = wrk(server.url)
    finally:
        server.stop()
    with Pool("process", workers=2, timeout_ms=50) as pool:
        load = drive(lambda: pool.submit("decode", PAYLOAD)["status"], 64, 300)
    in_rate = load.rate
    print(f"service (wrk, 64 keep-alive connections): {rate:.0f} req/s, p50 {p50:.2f} ms, "
          f"p99 {p99:.2f} ms (budget 50 ms: {'OK' if p99 <= 50 else 'MISSED'})")
    print(f"in-process Pool.submit, 64 threads: {in_rate:.0f} jobs/s, p50 "
          f"{load.percentile(0.5) * 1000:.2f} ms, p99 {load.percentile(0.99) * 1000:.2f} ms, "
          f"statuses {load.statuses}")
    print(f"service / in-process throughput: {rate / in_rate:.2f} (target >= 0.5) "
          f"{'OK' if rate / in_rate >= 0.5 else 'MISSED'}")


if __name__ == "__main__":
    main()
