"""The repairing proxy under load, against the upstream alone, in one run.

    python tests/benchmarks/bench_proxy.py [--duration S] [--inflight N] [--streams N]
                                           [--instances N] [--rounds N] [--no-relay]
                                           [-- proxy options, e.g. --workers 2]

Upstream is the recorded-output STAND-IN (``tests/upstream_standin.py``, real HTTP/SSE on
loopback, in its own process). The proxy is ``toolcodec serve --upstream URL`` in its own
process, with default settings unless options follow ``--``. The load comes from this process:
a plain asyncio HTTP/1.1 client over keep-alive connections (cheaper per request than httpx,
so that the generator takes as little of the shared CPU as it can). The mix is realistic for a
chat backend: a few tool sets reused across requests, the recorded outputs (broken Hermes
calls, Qwen XML, tool tags, native calls, prose) in turn.

Printed, for each phase (non-stream with ``--inflight`` requests in flight, then
``--streams`` concurrent streams), direct to the upstream and through the proxy: requests/s,
p50/p99 latency (streams: time to first chunk and to the end), the proxy/upstream throughput
ratio, the added p50/p99, and through the proxy the share of answers decoded, shed (the
proxy said it did not decode: ``rejected``, HTTP 429/503) and otherwise undecoded. Each answer
asks for the proxy's report (``x-toolcodec-report: 1``) to tell which. Last, requests paced
below capacity (``--below`` times the proxy's closed-loop rate, open loop), where every
answer should be decoded. With ``--instances N`` the proxy is N ``toolcodec serve`` processes
(replicas, as a deployment runs them to use more cores) and the connections go to each in turn.

The floor: a bare relay (``tests/benchmarks/bare_relay.py``: a raw ASGI app on uvicorn with an
``aiohttp`` client, no parsing, no decode) in front of the same stand-in. Each phase runs
``--rounds`` times with the upstream alone, the relay and the proxy in turn, and prints the
CPU per request of each (the server process measured, min and median over the rounds) and
the proxy's over the relay's. LiteLLM is not run here; the script says so.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import socket
import statistics
import subprocess
import sys
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import orjson  # noqa: E402

from tests.serve_process import ServeProcess  # noqa: E402

CASES = ("hermes_broken", "qwen_xml", "tool_tag", "tool_element", "two_calls", "native_broken",
         "native_ok", "prose", "json_in_prose", "reasoning_field")
NOT_RUN = {"timeout", "rejected", "worker_lost", "backend_unavailable"}  # job did not decode


def _tool(name: str, properties: dict, required: list[str]) -> dict:
    return {"type": "function", "function": {
        "name": name, "description": f"{name.replace('_', ' ')} for the user",
        "parameters": {"type": "object", "properties": properties, "required": required}}}


BASE = [
    _tool("get_weather", {"city": {"type": "string", "description": "city name"},
                          "days": {"type": "integer", "minimum": 1, "maximum": 14},
                          "unit": {"type": "string", "enum": ["celsius", "fahrenheit"]}},
          ["city"]),
    _tool("search_files", {"query": {"type": "string"},
                           "limit": {"type": "integer", "minimum": 1}}, ["query"]),
]
EXTRA = [
    [],
    [_tool("create_event", {"title": {"type": "string"}, "start": {"type": "string"},
                            "attendees": {"type": "array", "items": {"type": "string"}}},
           ["title", "start"])],
    [_tool("run_shell", {"command": {"type": "string"}, "timeout_s": {"type": "number"}},
           ["command"]),
     _tool("read_file", {"path": {"type": "string"}, "offset": {"type": "integer"}}, ["path"])],
    [_tool("send_email", {"to": {"type": "array", "items": {"type": "string"}},
                          "subject": {"type": "string"}, "body": {"type": "string"},
                          "urgent": {"type": "boolean"}}, ["to", "subject"])],
]
TOOL_SETS = [BASE + extra for extra in EXTRA]  # a few tool sets, reused across requests


def bodies(stream: bool) -> list[bytes]:
    out = []
    for i, case in enumerate(CASES * len(TOOL_SETS)):
        body = {"model": "m", "messages": [{"role": "user", "content": f"case:{case}"}],
                "tools": TOOL_SETS[i % len(TOOL_SETS)], "stream": stream}
        out.append(orjson.dumps(body))
    return out


def request_bytes(host: str, body: bytes) -> bytes:
    head = (f"POST /v1/chat/completions HTTP/1.1\r\nhost: {host}\r\n"
            f"content-type: application/json\r\nx-toolcodec-report: 1\r\n"
            f"content-length: {len(body)}\r\n\r\n")
    return head.encode() + body


# -- a small HTTP/1.1 client ----------------------------------------------------------------


async def read_response(reader: asyncio.StreamReader, first: list[float]) -> tuple[int, bytes]:
    """Status and body of one response (content-length or chunked); ``first`` gets the
    time the first body bytes arrived."""
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    status = int(lines[0].split()[1])
    headers = {}
    for line in lines[1:]:
        if b":" in line:
            k, v = line.split(b":", 1)
            headers[k.strip().lower()] = v.strip()
    if b"content-length" in headers:
        body = await reader.readexactly(int(headers[b"content-length"]))
        first.append(time.perf_counter())
        return status, body
    parts = []
    while True:
        size = int((await reader.readuntil(b"\r\n")).strip().split(b";")[0], 16)
        if size == 0:
            await reader.readuntil(b"\r\n")
            return status, b"".join(parts)
        parts.append(await reader.readexactly(size))
        await reader.readexactly(2)
        if not first and parts[-1].strip():
            first.append(time.perf_counter())


def cpu_seconds(pid: int) -> float:
    """CPU time (user + system) of a process and its living children (the pool's workers)."""
    tick = os.sysconf("SC_CLK_TCK")
    total = 0.0
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        total += (int(fields[11]) + int(fields[12])) / tick
        for task in Path(f"/proc/{pid}/task").iterdir():
            for child in (task / "children").read_text().split():
                total += cpu_seconds(int(child))
    except (FileNotFoundError, ProcessLookupError):
        pass
    return total


@dataclass
class Phase:
    """What one phase saw; ``cpu`` is the CPU seconds the server measured (upstream or
    proxy, with its workers) spent in it."""

    latencies: list[float] = field(default_factory=list)
    firsts: list[float] = field(default_factory=list)
    outcomes: Counter = field(default_factory=Counter)
    wall: float = 0.0
    cpu: float = 0.0

    def pct(self, q: float, first: bool = False) -> float:
        xs = sorted(self.firsts if first else self.latencies)
        return xs[min(len(xs) - 1, int(q * len(xs)))] * 1000 if xs else float("nan")

    @property
    def rate(self) -> float:
        return len(self.latencies) / self.wall if self.wall else 0.0


def outcome(status: int, body: bytes, stream: bool) -> str:
    """decoded, shed (the proxy said it could not decode for lack of capacity), undecoded
    (a job failed otherwise), or http_NNN."""
    if status in (429, 503):
        return "shed"
    if status != 200:
        return f"http_{status}"
    if stream:
        report = None
        for line in body.split(b"\n"):
            if line.startswith(b"data: {") and b'"toolcodec"' in line:
                report = orjson.loads(line[6:]).get("toolcodec")
        if report is None:
            return "no_report"
        codes = {e.get("code") for e in report.get("errors") or []}
    else:
        reports = orjson.loads(body).get("toolcodec")
        if reports is None:
            return "no_report"
        codes = {r["status"] if r.get("status") != "ok" else "ok" for r in reports}
        codes |= {(r.get("error") or {}).get("code") for r in reports}
    if "rejected" in codes:
        return "shed"
    return "undecoded" if codes & NOT_RUN else "decoded"


async def connection(url: str, payloads: list[bytes], offset: int, stop: float, phase: Phase,
                     stream: bool, judge: bool) -> None:
    host_port = url.split("//", 1)[1]
    host, port = host_port.split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    i = offset
    try:
        while time.perf_counter() < stop:
            data = payloads[i % len(payloads)]
            i += 1
            t0 = time.perf_counter()
            writer.write(data)
            first: list[float] = []
            status, body = await read_response(reader, first)
            t1 = time.perf_counter()
            phase.latencies.append(t1 - t0)
            phase.firsts.append((first[0] if first else t1) - t0)
            phase.outcomes[outcome(status, body, stream) if judge else f"http_{status}"] += 1
    finally:
        writer.close()


async def run_phase(urls: list[str], stream: bool, clients: int, duration: float,
                    judge: bool, pids: tuple[int, ...] = ()) -> Phase:
    """``clients`` keep-alive connections, spread over ``urls`` in turn (several proxy
    instances: the balancing a Service in front of replicas does)."""
    host = urls[0].split("//", 1)[1]
    payloads = [request_bytes(host, b) for b in bodies(stream)]
    phase = Phase()
    cpu0 = sum(map(cpu_seconds, pids))
    t0 = time.perf_counter()
    await asyncio.gather(*(connection(urls[k % len(urls)], payloads, k, t0 + duration, phase,
                                      stream, judge) for k in range(clients)))
    phase.wall = time.perf_counter() - t0
    phase.cpu = sum(map(cpu_seconds, pids)) - cpu0
    return phase


async def run_paced(urls: list[str], rate: float, duration: float) -> Phase:
    """Non-stream requests sent at ``rate`` per second whether or not earlier ones have
    answered (open loop), on as many keep-alive connections as that takes, to ``urls`` in
    turn; latency counts from each request's intended send time."""
    addresses = [url.split("//", 1)[1].split(":") for url in urls]
    payloads = [request_bytes(urls[0].split("//", 1)[1], b) for b in bodies(False)]
    idle: list[list[tuple[asyncio.StreamReader, asyncio.StreamWriter]]] = [[] for _ in urls]
    phase = Phase()

    async def one(k: int, due: float) -> None:
        i = k % len(urls)
        host, port = addresses[i]
        conn = idle[i].pop() if idle[i] else await asyncio.open_connection(host, int(port))
        conn[1].write(payloads[k % len(payloads)])
        status, body = await read_response(conn[0], [])
        phase.latencies.append(time.perf_counter() - due)
        phase.outcomes[outcome(status, body, False)] += 1
        idle[i].append(conn)

    t0 = time.perf_counter()
    tasks, k = [], 0
    while (due := t0 + k / rate) < t0 + duration:
        await asyncio.sleep(max(due - time.perf_counter(), 0))
        tasks.append(asyncio.create_task(one(k, due)))
        k += 1
    await asyncio.gather(*tasks)
    phase.wall = time.perf_counter() - t0
    for _, writer in (conn for conns in idle for conn in conns):
        writer.close()
    return phase


# -- the run --------------------------------------------------------------------------------


def start_standin() -> tuple[subprocess.Popen, str]:
    code = ("import sys; sys.path.insert(0, sys.argv[1]); "
            "from tests.upstream_standin import Standin; s = Standin().start(); "
            "print(s.url, flush=True); sys.stdin.read()")
    proc = subprocess.Popen([sys.executable, "-c", code, str(ROOT)], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, cwd=ROOT)
    assert proc.stdout is not None
    return proc, proc.stdout.readline().decode().strip()


def start_relay(upstream: str) -> tuple[subprocess.Popen, str]:
    """The bare relay (``tests/benchmarks/bare_relay.py``) in its own process, in front of
    ``upstream``; returns once it accepts connections."""
    proc = subprocess.Popen([sys.executable, str(Path(__file__).with_name("bare_relay.py")),
                             upstream], stdout=subprocess.PIPE, cwd=ROOT)
    assert proc.stdout is not None
    url = proc.stdout.readline().decode().strip()
    host, port = url.split("//", 1)[1].split(":")
    for _ in range(300):  # the socket is bound before uvicorn serves it: wait for an answer
        try:
            with socket.create_connection((host, int(port)), timeout=1.0) as sock:
                sock.sendall(b"GET /healthz HTTP/1.1\r\nhost: x\r\n\r\n")
                if sock.recv(16).startswith(b"HTTP/1.1"):
                    return proc, url
        except OSError:
            pass
        if proc.poll() is not None:
            break
        time.sleep(0.05)
    proc.kill()
    raise RuntimeError("the bare relay did not come up")


def cpu_figures(name: str, phases: list[Phase]) -> list[float]:
    """CPU µs per request of each round; printed with min and median."""
    per = [p.cpu / max(len(p.latencies), 1) * 1e6 for p in phases]
    rates = [p.rate for p in phases]
    print(f"  {name:<22} CPU per request min {min(per):6.0f} µs  median "
          f"{statistics.median(per):6.0f} µs   {statistics.median(rates):7.0f} req/s (median)")
    return per


def report_floor(name: str, rounds: dict[str, list[Phase]]) -> None:
    """The CPU each server spent per request, over the alternated rounds, and the proxy's
    against the bare relay's (the floor any Python proxy pays)."""
    print(f"\n{name}: CPU per request over {len(rounds['proxy'])} alternated rounds")
    per = {who: cpu_figures(label, rounds[who]) for who, label in (
        ("direct", "upstream alone"), ("relay", "bare relay (aiohttp)"),
        ("proxy", "toolcodec proxy"))}
    for who, label in (("relay", "bare relay"), ("direct", "upstream")):
        by_round = [p / r for p, r in zip(per["proxy"], per[who], strict=True)]
        print(f"  proxy / {label}: min {min(by_round):.2f}x, median "
              f"{statistics.median(by_round):.2f}x (per round)")
    try:
        import litellm  # noqa: F401 - optional, only to say whether it could be measured
    except ImportError:
        print("  LiteLLM: not installed, not measured (pip install 'litellm[proxy]')")
    else:
        print("  LiteLLM: installed, but this script does not run its proxy")


def report(name: str, direct: Phase, proxied: Phase, stream: bool) -> None:
    print(f"\n{name}")
    label = "first chunk" if stream else "latency"
    for who, p in (("upstream alone", direct), ("through proxy", proxied)):
        extra = f", end p50 {p.pct(.5):.1f} / p99 {p.pct(.99):.1f} ms" if stream else ""
        print(f"  {who:<15} {p.rate:8.0f} req/s  {label} p50 {p.pct(.5, stream):7.1f} ms"
              f"  p99 {p.pct(.99, stream):7.1f} ms{extra}  ({len(p.latencies)} requests)")
    per = [p.cpu / max(len(p.latencies), 1) * 1e6 for p in (direct, proxied)]
    print(f"  CPU per request: upstream {per[0]:.0f} µs; proxy with its workers {per[1]:.0f} µs"
          f" (upstream's share of it excluded), {per[1] / per[0]:.1f}x the upstream's")
    n = sum(proxied.outcomes.values()) or 1
    print(f"  proxy/upstream throughput {proxied.rate / direct.rate:.2f}x;  added "
          f"p50 {proxied.pct(.5, stream) - direct.pct(.5, stream):.1f} ms, "
          f"p99 {proxied.pct(.99, stream) - direct.pct(.99, stream):.1f} ms")
    shares = ", ".join(f"{k} {v / n:.1%}" for k, v in sorted(proxied.outcomes.items()))
    print(f"  answers through the proxy: decoded {proxied.outcomes['decoded'] / n:.1%}, "
          f"shed {proxied.outcomes['shed'] / n:.1%}  [{shares}]")


async def measure(upstream: str, proxies: list[str], args: argparse.Namespace,
                  pids: tuple[int, tuple[int, ...]], relay: tuple[str, int] | None) -> None:
    for stream in (False, True):  # warm both paths: connections, codecs, workers
        await run_phase(proxies, stream, 8 * len(proxies), 1.0, judge=False)
        if relay is not None:
            await run_phase([relay[0]], stream, 8, 1.0, judge=False)
    rate = 0.0
    for stream, clients in ((False, args.inflight), (True, args.streams)):
        rounds: dict[str, list[Phase]] = {"direct": [], "relay": [], "proxy": []}
        for _ in range(args.rounds):  # the contenders in turn, so load hits them alike
            rounds["direct"].append(await run_phase([upstream], stream, clients, args.duration,
                                                    judge=False, pids=(pids[0],)))
            if relay is not None:
                rounds["relay"].append(await run_phase([relay[0]], stream, clients,
                                                       args.duration, judge=False,
                                                       pids=(relay[1],)))
            rounds["proxy"].append(await run_phase(proxies, stream, clients, args.duration,
                                                   judge=True, pids=pids[1]))
        direct, proxied = rounds["direct"][-1], rounds["proxy"][-1]
        name = (f"streams: {clients} concurrent" if stream
                else f"non-stream: {clients} requests in flight")
        report(name, direct, proxied, stream)
        if relay is not None:
            report_floor(name, rounds)
        rate = rate or proxied.rate
    paced = await run_paced(proxies, rate * args.below, args.duration)
    n = sum(paced.outcomes.values()) or 1
    print(f"\nbelow capacity: non-stream at {rate * args.below:.0f} req/s offered "
          f"({args.below:.0%} of the proxy's rate at {args.inflight} in flight), open loop")
    print(f"  through proxy   {paced.rate:8.0f} req/s  latency p50 {paced.pct(.5):7.1f} ms"
          f"  p99 {paced.pct(.99):7.1f} ms;  decoded {paced.outcomes['decoded'] / n:.1%}, "
          f"shed {paced.outcomes['shed'] / n:.1%}  {dict(paced.outcomes)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=5.0)
    parser.add_argument("--inflight", type=int, default=64)
    parser.add_argument("--streams", type=int, default=200)
    parser.add_argument("--below", type=float, default=0.5,
                        help="the paced phase's rate, as a share of the 64-in-flight rate")
    parser.add_argument("--instances", type=int, default=1,
                        help="proxy instances (replicas), connections spread over them in turn")
    parser.add_argument("--rounds", type=int, default=3,
                        help="alternated rounds of upstream, relay and proxy in each phase")
    parser.add_argument("--no-relay", action="store_true", help="skip the bare relay")
    parser.add_argument("proxy_options", nargs="*")
    args = parser.parse_args()
    standin, url = start_standin()
    relay_proc, relay_url = (None, "") if args.no_relay else start_relay(url)
    proxies = [ServeProcess("--upstream", url, *args.proxy_options).start()
               for _ in range(args.instances)]
    try:
        instances = f"{args.instances} instances of " if args.instances > 1 else ""
        print(f"{os.cpu_count()} CPUs (shared), load average {os.getloadavg()[0]:.1f}; "
              f"proxy: {instances}toolcodec serve --upstream "
              f"{' '.join(args.proxy_options) or '(defaults)'}"
              f"; {len(TOOL_SETS)} tool sets, {len(CASES)} recorded outputs")
        pids = tuple(p.proc.pid for p in proxies if p.proc is not None)
        relay = None if relay_proc is None else (relay_url, relay_proc.pid)
        asyncio.run(measure(url, [p.url for p in proxies], args, (standin.pid, pids), relay))
    finally:
        if relay_proc is not None:
            relay_proc.kill()
            relay_proc.wait()
        for proxy in proxies:
            proxy.stop()
        standin.kill()
        standin.wait()


if __name__ == "__main__":
    main()
