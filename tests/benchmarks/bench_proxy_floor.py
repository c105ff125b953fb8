"""The repairing proxy's CPU per answer against a bare relay (the floor), in one run.

    python tests/benchmarks/bench_proxy_floor.py [--rounds N] [--requests N] [--streams N]
                                                 [--inflight N] [--no-litellm]

Upstream is the recorded-output STAND-IN (``tests/upstream_standin.py``, real HTTP/SSE on
loopback, in its own process). The contenders, each a serving process of its own in front of
that same stand-in:

- ``bare``: the floor any Python proxy pays. A raw ASGI app on uvicorn (httptools, as
  ``toolcodec serve`` runs it) that forwards the chat request's bytes upstream with the
  proxy's own HTTP client and returns the answer's bytes (a stream's parts as they come);
  nothing is parsed or decoded.
- ``bare-aiohttp``: the same relay with an ``aiohttp`` client session as its upstream client
  (the client most Python proxies use); skipped when ``aiohttp`` is not importable.
- ``toolcodec``: ``toolcodec serve --upstream URL`` (the real CLI, default settings).
- ``litellm``: LiteLLM's proxy (``litellm --config``), from the cached test environment
  (``tests/envs/litellm_env.py``); skipped, with a message, when that environment is absent
  (this script never builds it). It gets a tenth of the requests: it costs far more each.

The same request bodies go to each in rounds, the contenders' order alternated from round to
round, over keep-alive connections from this process. What is measured is the CPU time (user +
system, from ``/proc/<pid>/stat``) the serving process and its children (the pool's workers)
spent per request in a round; printed: min and median over the rounds, the ratio
toolcodec/bare and toolcodec/bare-aiohttp (the targets, against the aiohttp relay: 1.4x for
whole answers, 1.8x for streams), and how many answers came
back decoded. An answer counts as decoded when it is a 200 that does not say it was left
undecoded (a whole answer: no ``x-toolcodec-undecoded``; a stream: no ``toolcodec.undecoded``
in its last chunk and a ``[DONE]``); the share of answers carrying ``tool_calls`` shows which
contender made calls out of the raw markup.

Whole answers: raw-markup Hermes (broken and well-formed), Qwen XML, a tool tag, two calls,
JSON in prose, prose, reasoning, native calls (well-formed and broken). Streams: the same kind
of outputs cut into 1-8 character deltas by the stand-in, about 57 deltas a stream on average.
"""

from __future__ import annotations

import argparse
import asyncio
import importlib.util
import os
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import orjson  # noqa: E402
import uvicorn  # noqa: E402
from toolcodec.pool.proxy.demo_upstream import deltas  # noqa: E402
from toolcodec.pool.proxy.http_client import HTTPClient  # noqa: E402

from tests.redis_server import free_port  # noqa: E402
from tests.serve_process import ServeProcess  # noqa: E402
from tests.upstream_standin import CASES as RECORDED  # noqa: E402
from tests.upstream_standin import TOOLS  # noqa: E402

LITELLM_ENVS = Path.home() / ".cache" / "toolcodec" / "envs"
WHOLE = ("hermes_broken", "fmt_hermes", "qwen_xml", "fmt_qwen_xml", "tool_tag", "two_calls",
         "json_in_prose", "prose", "reasoning_field", "native_ok", "native_broken")
STREAMED = ("hermes_broken", "qwen_xml", "two_calls", "native_ok", "big:400", "big:500",
            "bigcall:300", "bigcall:240")
EXTRA_TOOL = {"type": "function", "function": {"name": "create_event", "parameters": {
    "type": "object", "properties": {"title": {"type": "string"}, "start": {"type": "string"},
                                    "attendees": {"type": "array",
                                                  "items": {"type": "string"}}},
    "required": ["title", "start"]}}}
TOOL_SETS = [TOOLS, [*TOOLS, EXTRA_TOOL]]


def bodies(stream: bool) -> list[bytes]:
    cases = STREAMED if stream else WHOLE
    return [orjson.dumps({"model": "standin-model", "stream": stream, "tools": tools,
                          "messages": [{"role": "user", "content": f"case:{case}"}]})
            for tools in TOOL_SETS for case in cases]


def mean_deltas() -> float:
    """Deltas a stream of the mix carries, on average (as the stand-in cuts them)."""
    counts = []
    for case in STREAMED:
        if case.startswith("big:"):
            row = {"name": case, "content": "word " * (int(case[4:]) // 5)}
        elif case.startswith("bigcall:"):
            row = {"name": case, "content": '<tool_call>{"name": "search_files", "arguments": '
                   '{"query": "' + "q" * int(case[8:]) + '"}}</tool_call>'}
        else:
            row = RECORDED[case]
        counts.append(len(deltas(row)))
    return sum(counts) / len(counts)


# -- the bare relay (run as its own process: --serve-relay UPSTREAM) ------------------------


class BareRelay:
    """Raw ASGI: the chat request's bytes upstream, the answer's bytes back, no decode."""

    def __init__(self, upstream: str) -> None:
        self.upstream = upstream.rstrip("/") + "/v1"
        self.http: HTTPClient | None = None

    async def __call__(self, scope: dict, receive, send) -> None:
        if scope["type"] != "http":
            return
        if self.http is None:  # made on the server's loop
            self.http = HTTPClient(self.upstream, connections=512)
        body = await _body(receive)
        response = await self.http.request("POST", "/chat/completions",
                                           {"content-type": "application/json"}, body)
        kind = response.headers.get("content-type", "application/json").encode()
        if kind.startswith(b"text/event-stream"):
            await send({"type": "http.response.start", "status": response.status_code,
                        "headers": [(b"content-type", kind), (b"cache-control", b"no-cache")]})
            while part := await response.next_part():
                await send({"type": "http.response.body", "body": part, "more_body": True})
            await send({"type": "http.response.body", "body": b""})
            return
        body = await response.read()
        await send({"type": "http.response.start", "status": response.status_code,
                    "headers": [(b"content-type", kind),
                                (b"content-length", str(len(body)).encode())]})
        await send({"type": "http.response.body", "body": body})


class AiohttpRelay:
    """``BareRelay`` with an aiohttp client session as its upstream client."""

    def __init__(self, upstream: str) -> None:
        self.url = upstream.rstrip("/") + "/v1/chat/completions"
        self.session = None

    async def __call__(self, scope: dict, receive, send) -> None:
        import aiohttp  # optional: this relay runs only where it is installed

        if scope["type"] != "http":
            return
        if self.session is None:  # made on the server's loop
            self.session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=512), auto_decompress=False)
        body = await _body(receive)
        async with self.session.post(self.url, data=body,
                                     headers={"content-type": "application/json"}) as response:
            kind = response.headers.get("content-type", "application/json").encode()
            if kind.startswith(b"text/event-stream"):
                await send({"type": "http.response.start", "status": response.status,
                            "headers": [(b"content-type", kind), (b"cache-control", b"no-cache")]})
                async for part in response.content.iter_any():
                    await send({"type": "http.response.body", "body": part, "more_body": True})
                await send({"type": "http.response.body", "body": b""})
                return
            data = await response.read()
        await send({"type": "http.response.start", "status": response.status,
                    "headers": [(b"content-type", kind),
                                (b"content-length", str(len(data)).encode())]})
        await send({"type": "http.response.body", "body": data})


async def _body(receive) -> bytes:
    parts, more = [], True
    while more:
        message = await receive()
        parts.append(message.get("body", b""))
        more = message.get("more_body", False)
    return b"".join(parts)


def has_aiohttp() -> bool:
    return importlib.util.find_spec("aiohttp") is not None


def serve_relay(upstream: str, client: str) -> None:
    port = free_port()
    app = AiohttpRelay(upstream) if client == "aiohttp" else BareRelay(upstream)
    config = uvicorn.Config(app, host="127.0.0.1", port=port, http="httptools",
                            log_level="warning", access_log=False, lifespan="off",
                            timeout_keep_alive=30)
    server = uvicorn.Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    while not server.started:
        if not thread.is_alive():
            raise SystemExit("the bare relay failed to start")
        time.sleep(0.01)
    print(f"http://127.0.0.1:{port}", flush=True)
    sys.stdin.read()


# -- processes ------------------------------------------------------------------------------


def child(code_or_args: list[str]) -> tuple[subprocess.Popen, str]:
    """A process that prints its URL on its first line and runs until its stdin closes."""
    proc = subprocess.Popen([sys.executable, *code_or_args], stdin=subprocess.PIPE,
                            stdout=subprocess.PIPE, cwd=ROOT)
    assert proc.stdout is not None
    url = proc.stdout.readline().decode().strip()
    if not url:
        raise SystemExit(f"{code_or_args} did not start")
    return proc, url


def start_standin() -> tuple[subprocess.Popen, str]:
    return child(["-c", "import sys; sys.path.insert(0, sys.argv[1]); "
                  "from tests.upstream_standin import Standin; s = Standin().start(); "
                  "print(s.url, flush=True); sys.stdin.read()", str(ROOT)])


class LiteLLM:
    """LiteLLM's proxy from the cached environment, in front of the stand-in."""

    def __init__(self, python_env: Path, upstream: str, folder: Path) -> None:
        key = "sk-floor-bench"
        config = folder / "litellm.yaml"
        config.write_text(f"model_list:\n  - model_name: standin-model\n    litellm_params:\n"
                          f"      model: openai/standin-model\n      api_base: {upstream}/v1\n"
                          f"      api_key: sk-standin\ngeneral_settings:\n"
                          f"  master_key: {key}\n")
        self.headers = f"authorization: Bearer {key}\r\n"
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        env = {**os.environ, "LITELLM_LOCAL_MODEL_COST_MAP": "True",
               "LITELLM_TELEMETRY": "False"}
        self.log = open(folder / "litellm.log", "wb")  # noqa: SIM115 - closed in stop
        self.proc = subprocess.Popen(
            [str(python_env / "bin" / "litellm"), "--config", str(config), "--host",
             "127.0.0.1", "--port", str(self.port), "--num_workers", "1"],
            env=env, stdout=self.log, stderr=subprocess.STDOUT, cwd=folder)

    def wait_ready(self, timeout: float = 300.0) -> bool:
        end = time.monotonic() + timeout  # a bound for a hung start
        while time.monotonic() < end:
            if self.proc.poll() is not None:
                return False
            try:
                status, _, _ = asyncio.run(one_request(self.url, b"GET /health/liveliness "
                                                       b"HTTP/1.1\r\nhost: x\r\n\r\n"))
                if status == 200:
                    return True
            except OSError:
                pass
            time.sleep(0.3)
        return False

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
        self.log.close()


def find_litellm() -> Path | None:
    for env in sorted(LITELLM_ENVS.glob("litellm-*")):
        if (env / "bin" / "litellm").exists():
            return env
    return None


def cpu_seconds(pid: int) -> float:
    """CPU time of a process's threads and of its living children's, from
    ``/proc/<pid>/task/<tid>/schedstat`` (nanoseconds: the clock ticks of ``/proc/<pid>/stat``
    are too coarse for a round of a bare relay's requests)."""
    total = 0.0
    try:
        for task in Path(f"/proc/{pid}/task").iterdir():
            try:
                total += int((task / "schedstat").read_text().split()[0]) / 1e9
                kids = (task / "children").read_text().split()
            except (FileNotFoundError, ProcessLookupError):
                continue  # a thread that ended meanwhile
            for kid in kids:
                total += cpu_seconds(int(kid))
    except (FileNotFoundError, ProcessLookupError):
        pass
    return total


# -- the load -------------------------------------------------------------------------------


async def read_response(reader: asyncio.StreamReader) -> tuple[int, dict[bytes, bytes], bytes]:
    head = await reader.readuntil(b"\r\n\r\n")
    lines = head.split(b"\r\n")
    status = int(lines[0].split()[1])
    headers = {}
    for line in lines[1:]:
        if b":" in line:
            k, v = line.split(b":", 1)
            headers[k.strip().lower()] = v.strip()
    if b"content-length" in headers:
        return status, headers, await reader.readexactly(int(headers[b"content-length"]))
    parts = []
    while True:
        size = int((await reader.readuntil(b"\r\n")).strip().split(b";")[0], 16)
        if size == 0:
            await reader.readuntil(b"\r\n")
            return status, headers, b"".join(parts)
        parts.append(await reader.readexactly(size))
        await reader.readexactly(2)


async def one_request(url: str, data: bytes) -> tuple[int, dict[bytes, bytes], bytes]:
    host, port = url.split("//", 1)[1].split(":")
    reader, writer = await asyncio.open_connection(host, int(port))
    try:
        writer.write(data)
        return await read_response(reader)
    finally:
        writer.close()


def judge(status: int, headers: dict[bytes, bytes], body: bytes, stream: bool
          ) -> tuple[bool, bool]:
    """(decoded, has tool calls)."""
    if status != 200:
        return False, False
    if not stream:
        calls = bool(orjson.loads(body)["choices"][0]["message"].get("tool_calls"))
        return b"x-toolcodec-undecoded" not in headers, calls
    calls, undecoded, done = False, False, False
    for line in body.split(b"\n"):
        if line == b"data: [DONE]":
            done = True
        elif line.startswith(b"data: {"):
            chunk = orjson.loads(line[6:])
            for choice in chunk.get("choices") or []:
                calls = calls or bool((choice.get("delta") or {}).get("tool_calls"))
            undecoded = undecoded or bool((chunk.get("toolcodec") or {}).get("undecoded"))
    return done and not undecoded, calls


@dataclass
class Contender:
    name: str
    url: str
    pid: int
    share: float = 1.0  # of the requests a round sends
    headers: str = ""
    cpu: dict[bool, list[float]] = field(default_factory=lambda: {False: [], True: []})
    decoded: dict[bool, list[int]] = field(default_factory=lambda: {False: [0, 0],
                                                                    True: [0, 0]})
    calls: dict[bool, int] = field(default_factory=lambda: {False: 0, True: 0})

    def payloads(self, stream: bool) -> list[bytes]:
        host = self.url.split("//", 1)[1]
        return [(f"POST /v1/chat/completions HTTP/1.1\r\nhost: {host}\r\n"
                 f"content-type: application/json\r\n{self.headers}"
                 f"content-length: {len(b)}\r\n\r\n").encode() + b for b in bodies(stream)]


async def load(who: Contender, stream: bool, total: int, inflight: int, record: bool) -> None:
    payloads = who.payloads(stream)
    host, port = who.url.split("//", 1)[1].split(":")
    counter = iter(range(total))

    async def connection() -> None:
        reader, writer = await asyncio.open_connection(host, int(port))
        try:
            for i in counter:
                writer.write(payloads[i % len(payloads)])
                status, headers, body = await read_response(reader)
                if record:
                    decoded, calls = judge(status, headers, body, stream)
                    who.decoded[stream][0] += decoded
                    who.decoded[stream][1] += 1
                    who.calls[stream] += calls
        finally:
            writer.close()

    await asyncio.gather(*(connection() for _ in range(min(inflight, total))))


async def measure(contenders: list[Contender], args: argparse.Namespace) -> None:
    for who in contenders:  # warm: connections, codecs, workers
        for stream in (False, True):
            await load(who, stream, max(int(40 * who.share), 8), args.inflight, record=False)
    for stream, total in ((False, args.requests), (True, args.streams)):
        for r in range(args.rounds):
            order = contenders if r % 2 == 0 else contenders[::-1]
            for who in order:
                n = max(int(total * who.share), 10)
                before = cpu_seconds(who.pid)
                await load(who, stream, n, args.inflight, record=True)
                who.cpu[stream].append((cpu_seconds(who.pid) - before) / n * 1e6)


def report(contenders: list[Contender], args: argparse.Namespace) -> None:
    by = {who.name: who for who in contenders}
    for stream, target in ((False, 1.4), (True, 1.8)):
        what = (f"streams (about {mean_deltas():.0f} deltas each)" if stream
                else "whole answers")
        print(f"\n{what}: CPU per request of the serving process with its children, "
              f"{args.rounds} rounds, {args.inflight} in flight")
        for who in contenders:
            xs = who.cpu[stream]
            ok, n = who.decoded[stream]
            said = "decoded" if who.name == "toolcodec" else "answered"  # the others decode nothing
            print(f"  {who.name:<12} min {min(xs):8.0f} µs  median {statistics.median(xs):8.0f} µs"
                  f"   {said} {ok}/{n}, with tool_calls {who.calls[stream] / max(n, 1):.0%}")
        bare, ours = by["bare"].cpu[stream], by["toolcodec"].cpu[stream]
        print(f"  toolcodec/bare: min {min(ours) / min(bare):.2f}x, median "
              f"{statistics.median(ours) / statistics.median(bare):.2f}x")
        if "bare-aiohttp" in by:  # the target is set against the aiohttp relay
            other = by["bare-aiohttp"].cpu[stream]
            print(f"  toolcodec/bare-aiohttp: min {min(ours) / min(other):.2f}x, median "
                  f"{statistics.median(ours) / statistics.median(other):.2f}x "
                  f"(target {target}x)")
        if "litellm" in by:
            lite = by["litellm"].cpu[stream]
            ratio = statistics.median(lite) / statistics.median(bare)
            print(f"  litellm/bare: median {ratio:.1f}x")
        ok, n = by["toolcodec"].decoded[stream]
        print(f"  every toolcodec answer decoded: {'yes' if ok == n else f'NO ({n - ok} not)'}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=6)
    parser.add_argument("--requests", type=int, default=1500, help="whole answers per round")
    parser.add_argument("--streams", type=int, default=400, help="streams per round")
    parser.add_argument("--inflight", type=int, default=16)
    parser.add_argument("--no-litellm", action="store_true")
    parser.add_argument("--serve-relay", metavar="UPSTREAM", help=argparse.SUPPRESS)
    parser.add_argument("--relay-client", default="own", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.serve_relay:
        serve_relay(args.serve_relay, args.relay_client)
        return
    standin, upstream = start_standin()
    relay, relay_url = child([__file__, "--serve-relay", upstream])
    relays = [relay]
    ours = ServeProcess("--upstream", upstream).start()
    litellm = None
    folder = tempfile.TemporaryDirectory()
    try:
        assert ours.proc is not None
        contenders = [Contender("bare", relay_url, relay.pid),
                      Contender("toolcodec", ours.url, ours.proc.pid)]
        if has_aiohttp():
            proc, url = child([__file__, "--serve-relay", upstream, "--relay-client", "aiohttp"])
            relays.append(proc)
            contenders.insert(1, Contender("bare-aiohttp", url, proc.pid))
        else:
            print("bare-aiohttp: skipped, aiohttp is not installed (pip install aiohttp)")
        env = None if args.no_litellm else find_litellm()
        if args.no_litellm:
            print("litellm: skipped (--no-litellm)")
        elif env is None:
            print(f"litellm: skipped, no cached LiteLLM environment under {LITELLM_ENVS} "
                  "(python -m tests.envs.litellm_env builds it)")
        else:
            litellm = LiteLLM(env, upstream, Path(folder.name))
            if litellm.wait_ready():
                contenders.append(Contender("litellm", litellm.url, litellm.proc.pid, 0.1,
                                            litellm.headers))
            else:
                print("litellm: skipped, its proxy did not start "
                      f"({(Path(folder.name) / 'litellm.log').read_text()[-400:]})")
        print(f"{os.cpu_count()} CPUs (shared), load average {os.getloadavg()[0]:.1f}; "
              f"contenders: {', '.join(c.name for c in contenders)}; {len(WHOLE)} whole "
              f"answers and {len(STREAMED)} streams in turn, {len(TOOL_SETS)} tool sets")
        asyncio.run(measure(contenders, args))
        report(contenders, args)
    finally:
        if litellm is not None:
            litellm.stop()
        ours.stop()
        for proc in (*relays, standin):
            proc.kill()
            proc.wait()
        folder.cleanup()


if __name__ == "__main__":
    main()
