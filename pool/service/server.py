"""``toolcodec serve``: run the HTTP service (``toolcodec.pool.service.app``) on uvicorn.

One server process: the event loop (uvloop, httptools) serves HTTP/1.1 with keep-alive and
hands every job to the ``Pool``; the work runs in the pool's worker processes (or on the
Redis/RQ workers). One process means one set of counters, so ``/metrics`` adds up with no
multiprocess collector; to use more cores for HTTP itself, run several instances behind a
load balancer and let Prometheus sum them.

A request's headers must arrive within ``--header-timeout-s`` and fit in
``--max-header-bytes`` (:mod:`toolcodec.pool.service.header_guard`): slow or huge headers
cannot hold connections open.

SIGTERM drains: ``/readyz`` turns 503 at once while requests are still served for
``--shutdown-delay-s`` seconds (so a load balancer or Kubernetes sees the failing readiness and
stops sending before the socket closes), then the listening socket closes, jobs in flight
finish (each ends by its own deadline) for up to ``--drain-s`` seconds, and the process exits 0.
SIGINT (Ctrl-C), or a second SIGTERM, skips the delay.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import signal
import threading
import time
from dataclasses import dataclass
from typing import Any

import uvicorn
from prometheus_client import REGISTRY
from toolcodec import __version__
from toolcodec.pool.api import Pool
from toolcodec.pool.service.app import Service, build_app
from toolcodec.pool.service.header_guard import (
    DEFAULT_HEADER_TIMEOUT_S,
    DEFAULT_MAX_HEADER_BYTES,
    guarded_protocol,
)
from toolcodec.worker import logs
from toolcodec.worker.logs import event

DEFAULT_INLINE_MAX_CHARS = 1024
log = logging.getLogger("toolcodec.serve")  # lifecycle events: start, drain, exit, Redis
REDIS_GRACE_S = 5.0  # a Redis outage shorter than this leaves /readyz ready


@dataclass(slots=True)
class ServeConfig:
    host: str = "127.0.0.1"
    port: int = 8080
    backend: str = "process"
    workers: int | None = None
    redis_url: str = "redis://127.0.0.1:6379/0"
    queue: str = "toolcodec"
    timeout_ms: float = 50.0
    max_body: int = 10 * 1024 * 1024
    drain_s: float = 10.0
    upstream: str | None = None
    upstream_key: str | None = None
    tools_as_prompt: bool = False
    upstream_timeout_s: float = 300.0
    max_chars: int | None = None  # the codec's ceiling (None: TOOLCODEC_MAX_CHARS, else 8 M)
    max_depth: int | None = None
    max_payload_chars: int | None = None  # None: max_chars + 1 000 000
    # Small decode jobs run in this process (toolcodec.pool.inline); None: 1024 with the
    # process backend, 0 (off) with rq, whose workers' ceilings are set where they run.
    inline_max_chars: int | None = None
    models: Any = None  # toolcodec.pool.proxy.settings.ModelSettings: options per model
    proxy: dict[str, Any] | None = None  # more toolcodec.pool.proxy.chat.ProxyConfig fields
    header_timeout_s: float = DEFAULT_HEADER_TIMEOUT_S
    max_header_bytes: int = DEFAULT_MAX_HEADER_BYTES
    shutdown_delay_s: float = 5.0
    log_format: str | None = None  # json or text (toolcodec.worker.logs); None: as configured
    spares: int | None = None  # process backend: spare processes (None: the pool's default)
    access_log: bool = False  # one line per request (toolcodec.pool.service.access)


class _DrainingServer(uvicorn.Server):
    """uvicorn's server, failing readiness first and closing its socket ``delay_s`` later;
    *proxy* (its upstream connections) is closed after the shutdown, on the serving loop."""

    def __init__(self, config: uvicorn.Config, service: Service, delay_s: float,
                 proxy: Any = None) -> None:
        super().__init__(config)
        self.service = service
        self.delay_s = delay_s
        self.proxy = proxy
        self._timer: threading.Timer | None = None

    async def startup(self, sockets: Any = None) -> None:
        await super().startup(sockets)
        if self.started:  # listening: say so once, so scripts and people know where and how
            print(ready_line(self.config, self.service), flush=True)
            pool = self.service.pool
            event(log, logging.INFO, "start", version=__version__, host=self.config.host,
                  port=self.config.port, backend=pool.backend,
                  upstream=self.service.upstream, budget_ms=self.service.timeout_ms)

    async def shutdown(self, sockets: Any = None) -> None:
        await super().shutdown(sockets)
        if self.proxy is not None:
            await self.proxy.aclose()

    def handle_exit(self, sig: int, frame: Any) -> None:
        if sig == signal.SIGTERM and self._timer is None and self.delay_s > 0:
            self.service.draining = True  # /readyz answers 503; requests are still served
            event(log, logging.INFO, "drain", signal=signal.Signals(sig).name,
                  shutdown_delay_s=self.delay_s)
            self._timer = threading.Timer(self.delay_s, self._stop, (sig,))
            self._timer.daemon = True
            self._timer.start()
            return
        if self._timer is not None:
            self._timer.cancel()
        self._stop(sig)

    def _stop(self, sig: int) -> None:
        if not self.service.draining:
            event(log, logging.INFO, "drain", signal=signal.Signals(sig).name,
                  shutdown_delay_s=0)
        self.service.draining = True
        super().handle_exit(sig, None)
        # uvicorn re-raises the signal after its shutdown, which would end the process with
        # -SIGTERM; a drained shutdown is a clean exit (0), after the pool is closed too.
        self._captured_signals.clear()


def ready_line(uv: uvicorn.Config, service: Service) -> str:
    """``toolcodec serve: ready on http://HOST:PORT (backend …, workers …, upstream …)``."""
    pool = service.pool
    if pool.backend == "process":
        n = pool.impl.workers
        workers = f"{n} worker process{'' if n == 1 else 'es'}"
    else:
        workers = f"RQ workers on queue {pool.impl.queue!r}"
    upstream = service.upstream or "none"
    host = f"[{uv.host}]" if ":" in uv.host else uv.host
    return (f"toolcodec serve: ready on http://{host}:{uv.port} (backend {pool.backend}, "
            f"{workers}, job budget {service.timeout_ms:g} ms, upstream {upstream})")


def run(config: ServeConfig) -> int:
    """Serve until SIGTERM/SIGINT; returns the exit code (0 after a clean drain)."""
    if config.log_format or not logging.getLogger().handlers:
        logs.configure(config.log_format or "text")
    options: dict[str, Any] = ({"redis_url": config.redis_url, "queue": config.queue}
                               if config.backend == "rq" else {"workers": config.workers})
    if config.spares is not None and config.backend == "process":
        options["spares"] = config.spares
    limits = {name: value for name, value in (("max_chars", config.max_chars),
                                              ("max_depth", config.max_depth)) if value}
    if limits and config.backend == "process":
        options["limits"] = limits
    inline = config.inline_max_chars
    if inline is None:
        inline = DEFAULT_INLINE_MAX_CHARS if config.backend == "process" else 0
    pool = Pool(config.backend, timeout_ms=config.timeout_ms, registry=REGISTRY,
                max_payload_chars=config.max_payload_chars, inline_max_chars=inline, **options)
    pool.metrics.prime(pool.backend)  # every series a rule reads, at 0 from the first scrape
    try:
        service = Service(pool, timeout_ms=config.timeout_ms, max_body=config.max_body,
                          registry=REGISTRY, ready=_readiness(pool, config),
                          models=config.models)
        service.upstream = config.upstream
        service.access_log = config.access_log
        extra, direct, proxy = _proxy_routes(config, pool, service)
        # The httptools protocol, with bounds on header time and size (see header_guard).
        http = guarded_protocol(config.header_timeout_s, config.max_header_bytes,
                                pool.backend)
        uv = uvicorn.Config(build_app(service, extra, direct), host=config.host, port=config.port,
                            log_level="warning", access_log=False, lifespan="off",
                            timeout_graceful_shutdown=config.drain_s, timeout_keep_alive=30,
                            http=http)
        _freeze_startup_objects()
        _DrainingServer(uv, service, config.shutdown_delay_s, proxy).run()
    finally:
        pool.close(timeout=config.drain_s)
    event(log, logging.INFO, "exit", code=0)
    return 0


def _freeze_startup_objects() -> None:
    """Leave what the process holds at startup (modules, the app, compiled patterns and
    schemas) out of the garbage collector's full collections. Each one walked all of it while
    the loop waited: about 10 ms, every few hundred requests under load, which was most of the
    proxy's p99 (bench_proxy, 64 in flight: 38-39 ms without, 26-28 ms with). Collected first,
    so no garbage is kept forever."""
    gc.collect()
    gc.freeze()


def _proxy_routes(config: ServeConfig, pool: Pool, service: Service
                  ) -> tuple[list, dict[str, Any], Any]:
    """The proxy's routes, the ones the app calls directly, and the proxy (or nothing)."""
    if not config.upstream:
        return [], {}, None
    from toolcodec.pool.proxy.chat import ChatProxy, ProxyConfig
    from toolcodec.pool.proxy.routes import chat_endpoint, proxy_routes

    proxy = ChatProxy(ProxyConfig(config.upstream, config.upstream_key,
                                  tools_as_prompt=config.tools_as_prompt,
                                  read_timeout=config.upstream_timeout_s,
                                  **(config.proxy or {})), pool,
                      registry=service.registry, models=config.models)
    routes = proxy_routes(proxy, service.max_body)
    return routes, chat_endpoint(routes), proxy


def _readiness(pool: Pool, config: ServeConfig) -> Any:
    if config.backend == "process":
        async def ready() -> str | None:
            # "Can take work": a worker being re-forked after its job's deadline kill takes
            # the next job in a moment, and a busy one its next; overload is not unreadiness
            # (the pool sheds what it cannot start in time, with 429).
            # A dead dispatcher thread is the pool's one unready state; asking for the live
            # workers starts a new one, so the next probe finds it back.
            if not pool.impl.health()["dispatcher"]:
                pool.impl.live_workers()
                return "the pool's dispatcher thread had died; a new one is starting"
            counts = pool.impl.counts()
            if counts["idle"] + counts["busy"] + counts["starting"] < 1:
                return "no worker process is up"
            return None
        return ready

    import redis
    from toolcodec.worker.heartbeat import live_lanes
    from toolcodec.worker.metrics import LiveWorkers

    client = redis.Redis.from_url(config.redis_url, socket_connect_timeout=0.5,
                                  socket_timeout=0.5)
    failing: dict[str, float] = {}  # since when Redis has not answered
    REGISTRY.register(LiveWorkers(config.queue, lambda: live_lanes(client, config.queue)))

    def probe() -> str | None:
        # Live workers come from heartbeats that expire, not from RQ's worker set, which
        # keeps a killed worker's entry for minutes.
        # A Redis blip is not unreadiness: every replica shares Redis, so failing them all
        # at once would turn each caller's prompt 503 backend_unavailable into connection
        # errors. Only an outage longer than REDIS_GRACE_S fails readiness (and
        # ToolcodecBackendDown pages for it, from toolcodec_rq_redis_up).
        try:
            counts = live_lanes(client, config.queue)
        except redis.exceptions.RedisError as exc:
            now = time.monotonic()
            if "since" not in failing:
                event(log, logging.WARNING, "redis_lost", queue=config.queue,
                      exception=logs.one_line(exc))
            since = failing.setdefault("since", now)
            if now - since < REDIS_GRACE_S:
                return None
            return f"Redis does not answer (for {now - since:.0f} s): {type(exc).__name__}"
        if failing:
            event(log, logging.INFO, "redis_back", queue=config.queue,
                  after_s=round(time.monotonic() - failing.pop("since"), 3))
        if counts["idle"] + counts["busy"] < 1:
            return f"no toolcodec worker has a live heartbeat on queue {config.queue!r}"
        return None

    async def ready() -> str | None:
        return await asyncio.to_thread(probe)
    return ready
