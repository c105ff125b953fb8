"""What the header bounds of ``toolcodec serve`` cost: uvicorn's httptools protocol with and
without :mod:`toolcodec.pool.service.header_guard`, in one run.

Each server is uvicorn (uvloop) in its own process serving a minimal ASGI app (200, 2 bytes),
so the figures are the HTTP layer's alone, where the guard's share is largest; a codec job
costs far more than either. ``wrk`` (Debian's package) drives 64 keep-alive connections with
a ``GET`` and with a ``POST`` of a 1 KB body; the servers take turns, twice, and the best
figure of each is kept. Prints requests/s, the server's CPU time per request (less sensitive
than throughput to other load on a shared machine) and the ratios guarded / plain (target:
throughput >= 0.95).

Run: ``python tests/benchmarks/bench_header_guard.py [seconds per run, default 4]``.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.redis_server import free_port  # noqa: E402

SERVER = """
import sys, uvicorn
from toolcodec.pool.service.header_guard import guarded_protocol

async def app(scope, receive, send):
    if scope["type"] != "http":
        return
    more = True
    while more:
        more = (await receive()).get("more_body", False)
    await send({"type": "http.response.start", "status": 200,
                "headers": [(b"content-type", b"text/plain")]})
    await send({"type": "http.response.body", "body": b"ok"})

http = guarded_protocol() if sys.argv[2] == "guarded" else "httptools"
uvicorn.run(app, host="127.0.0.1", port=int(sys.argv[1]), http=http, loop="uvloop",
            log_level="warning", access_log=False, lifespan="off")
"""


def start(kind: str) -> tuple[subprocess.Popen, str]:
    port = free_port()
    proc = subprocess.Popen([sys.executable, "-c", SERVER, str(port), kind])
    url = f"http://127.0.0.1:{port}"
    for _ in range(300):  # wait for the condition: the server answers
        try:
            if httpx.get(url, timeout=1).status_code == 200:
                return proc, url
        except httpx.HTTPError:
            time.sleep(0.05)
    proc.kill()
    raise SystemExit(f"{kind} server did not start")


def cpu_seconds(pid: int) -> float:
    """User + system CPU time of a process so far (Linux /proc)."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def wrk(url: str, pid: int, seconds: int, script: str | None) -> tuple[float, float]:
    """Requests/s and the server's CPU microseconds per request."""
    cmd = ["wrk", "-t2", "-c64", f"-d{seconds}s"]
    if script:
        cmd += ["-s", script]
    cpu = cpu_seconds(pid)
    out = subprocess.run([*cmd, url + "/"], capture_output=True, text=True, check=True).stdout
    cpu = cpu_seconds(pid) - cpu
    if "Non-2xx" in out:
        raise SystemExit(f"non-2xx answers: {out}")
    requests = int(re.search(r"(\d+) requests in", out).group(1))
    return float(re.search(r"Requests/sec:\s+([\d.]+)", out).group(1)), cpu / requests * 1e6


def main() -> None:
    if shutil.which("wrk") is None:
        raise SystemExit("wrk is missing: apt-get install -y wrk")
    seconds = int(sys.argv[1]) if len(sys.argv) > 1 else 4
    with tempfile.NamedTemporaryFile("w", suffix=".lua", delete=False) as fh:
        fh.write('wrk.method = "POST"\nwrk.headers["Content-Type"] = "application/json"\n'
                 f'wrk.body = [[{{"text": "{"x" * 1000}"}}]]\n')
    best: dict[tuple[str, str], float] = {}
    cpu: dict[tuple[str, str], float] = {}
    for _ in range(2):
        for kind in ("plain", "guarded"):
            proc, url = start(kind)
            try:
                for name, script in (("GET", None), ("POST 1 KB", fh.name)):
                    rate, us = wrk(url, proc.pid, seconds, script)
                    best[kind, name] = max(best.get((kind, name), 0.0), rate)
                    cpu[kind, name] = min(cpu.get((kind, name), float("inf")), us)
            finally:
                proc.kill()
                proc.wait()
    for name in ("GET", "POST 1 KB"):
        plain, guarded = best["plain", name], best["guarded", name]
        ratio = guarded / plain
        print(f"{name:10s} plain {plain:7.0f} req/s {cpu['plain', name]:5.1f} us CPU/req  "
              f"guarded {guarded:7.0f} req/s {cpu['guarded', name]:5.1f} us CPU/req  "
              f"throughput ratio {ratio:.2f} (target >= 0.95) "
              f"{'OK' if ratio >= 0.95 else 'MISSED'}, CPU ratio "
              f"{cpu['guarded', name] / cpu['plain', name]:.2f}")


if __name__ == "__main__":
    main()
