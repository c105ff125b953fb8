"""What the operations code costs per job and per scrape, against the job it accounts for.

Prints, in one run:
- per job: ``Metrics.observe`` of a decode envelope with repairs and result error codes, then
  the same plus ``JobLog.job`` deciding not to log a fast success (the path every healthy job
  takes), and ``JobLog.job`` writing a line for a failed job (to a null handler);
- the decode itself of the same 1 KB Hermes output (``toolcodec.ToolCallCodec.decode``) as
  the baseline, and each cost as a share of it (target: under 5 % for the healthy path);
- per HTTP request: serve's request-context wrapper (request and trace ids, job ids), and
  with it the access line, each against the same bare app in the same rounds;
- per scrape: collecting a registry with the child-CPU collector (it reads ``/proc``) and the
  heartbeat reader against a real redis-server with 16 live lanes.

Run: ``python tests/benchmarks/bench_ops_overhead.py``. Figures on a shared machine are noisy;
the ratios are what to read.
"""

from __future__ import annotations

import asyncio
import io
import logging
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

import redis  # noqa: E402
import toolcodec  # noqa: E402
from prometheus_client import CollectorRegistry, generate_latest  # noqa: E402
from toolcodec.pool.service.access import request_ids  # noqa: E402
from toolcodec.worker import heartbeat, logs  # noqa: E402
from toolcodec.worker.joblog import JobLog  # noqa: E402
from toolcodec.worker.metrics import Metrics  # noqa: E402

from tests.benchmarks.bench_stream import hermes_1kb  # noqa: E402
from tests.benchmarks.timing import best  # noqa: E402
from tests.redis_server import RedisServer  # noqa: E402

N = 20_000
TOOLS = [{"name": "get_weather", "parameters": {"type": "object", "properties": {
    "city": {"type": "string"}, "days": {"type": "integer"}, "notes": {"type": "string"}},
    "required": ["city"]}}]


async def bare_app(scope: dict, receive, send) -> None:
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"application/json")]})
    await send({"type": "http.response.body", "body": b"{}"})


async def per_request(app, n: int = N) -> float:
    """CPU seconds per request through the ASGI *app*."""
    async def receive() -> dict:
        return {"type": "http.request", "body": b""}

    async def send(message: dict) -> None:
        pass

    start = time.process_time()
    for _ in range(n):
        await app({"type": "http", "method": "POST", "path": "/v1/decode",
                   "headers": [(b"host", b"x"), (b"content-type", b"application/json")]},
                  receive, send)
    return (time.process_time() - start) / n


def per_job(fn, n: int = N) -> float:
    return best(lambda: [fn() for _ in range(n)], 5) / n


def main() -> None:
    codec = toolcodec.ToolCallCodec(tools=TOOLS)
    text = hermes_1kb()
    result = codec.decode(text).to_dict()
    ok = {"status": "ok", "op": "decode", "backend": "process", "result": result,
          "error": None, "elapsed_ms": 1.2}
    failed = {**ok, "result": {**result, "ok": False,
                               "errors": [{"code": "schema_violation", "message": "m"}]}}
    payload = {"text": text, "tools": TOOLS}
    metrics = Metrics(CollectorRegistry())
    joblog = JobLog("caller", max_per_s=1e9)
    logging.getLogger("toolcodec.jobs").addHandler(logging.NullHandler())
    logging.getLogger("toolcodec.jobs").propagate = False

    decode = per_job(lambda: codec.decode(text), 500)
    observe = per_job(lambda: metrics.observe("decode", "process", failed))
    healthy = per_job(lambda: (metrics.observe("decode", "process", ok),
                               joblog.job("decode", "process", ok, payload)))
    logged = per_job(lambda: joblog.job("decode", "process", failed, payload), 2000)
    print(f"decode of a 1 KB Hermes output (baseline): {decode * 1e6:8.1f} µs")
    print(f"observe, result errors counted:             {observe * 1e6:8.2f} µs "
          f"({observe / decode:.2%} of the decode)")
    print(f"observe + job log, healthy job (no line):   {healthy * 1e6:8.2f} µs "
          f"({healthy / decode:.2%} of the decode; target < 5 %)")
    print(f"job log line written for a failed job:      {logged * 1e6:8.2f} µs "
          f"({logged / decode:.2%} of the decode)")

    # Per HTTP request: the request-context wrapper serve always runs (request id, trace id,
    # job ids, X-Request-Id echoed), and with --access-log its line (JSON, to a null stream),
    # around an app that answers at once; CPU time, contenders alternated over 7 rounds.
    bare_us, ids_us, access_us = [], [], []
    apps = (bare_app, request_ids(bare_app), request_ids(bare_app, access_log=True))
    handler = logs.configure("json")
    handler.stream = io.StringIO()
    for _ in range(7):
        for app, out in zip(apps, (bare_us, ids_us, access_us), strict=True):
            out.append(asyncio.run(per_request(app)) * 1e6)
    for name, got in (("request context (always on)", ids_us),
                      ("request context + access line", access_us)):
        extra = [t - b for t, b in zip(got, bare_us, strict=True)]
        print(f"{name:31s} {min(extra):6.2f} µs min, {statistics.median(extra):6.2f} µs "
              f"median per request ({min(extra) / (decode * 1e6):.2%} of the decode)")

    scrape = best(lambda: generate_latest(metrics.registry), 20)
    print(f"scrape of a pool's registry (child CPU from /proc included): {scrape * 1e3:.2f} ms")

    server = RedisServer()
    server.start()
    try:
        client = redis.Redis.from_url(server.url)
        lanes = {f"lane-{i}": "idle" for i in range(16)}
        beat = best(lambda: heartbeat.beat(client, "bench", lanes), 50)
        read = best(lambda: heartbeat.live_lanes(client, "bench"), 50)
        print(f"heartbeat of 16 lanes (once a second per worker process): {beat * 1e3:.2f} ms")
        print(f"live-lane read (per /readyz and per scrape of serve):     {read * 1e3:.2f} ms")
    finally:
        server.close()
    verdict = "OK" if healthy / decode < 0.05 else "OVER"
    print(f"healthy-path ratio {healthy / decode:.2%}: {verdict}")


if __name__ == "__main__":
    main()
