"""What the load is sent to. Each target answers ``await target.call(op, payload)`` with a job
status (``ok``, ``error``, ``timeout``, ``rejected``, ``worker_lost``, ...).

- ``inprocess``: the codec called directly in the load generator's process (a thread);
- ``process``: the embedded process pool (``Pool(backend="process")``);
- ``rq``: the Redis/RQ backend (workers started separately with ``toolcodec worker``);
- ``http``: a running ``toolcodec serve`` (``POST {url}/v1/{op}``, keep-alive connections);
- ``executor``: a baseline — ``concurrent.futures.ProcessPoolExecutor`` running the same job
  function, no deadline, so the pool's numbers can be judged against it.
"""

from __future__ import annotations

import asyncio
import os
import time
from concurrent.futures import ProcessPoolExecutor, ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, Protocol

TARGETS = ("inprocess", "process", "rq", "http", "executor")


class Target(Protocol):
    name: str

    async def call(self, op: str, payload: dict[str, Any]) -> str: ...

    async def close(self) -> None: ...


@dataclass(slots=True)
class TargetConfig:
    """Everything a target may need; each takes only what applies to it."""

    name: str
    workers: int | None = None
    timeout_ms: float = 50.0
    url: str = "http://127.0.0.1:8080"
    redis_url: str = "redis://127.0.0.1:6379/0"
    queue: str = "toolcodec"
    concurrency: int = 256  # threads for blocking targets; connections for http


def make_target(config: TargetConfig) -> Target:
    if config.name == "inprocess":
        return _InProcess(config)
    if config.name in ("process", "rq"):
        return _PoolTarget(config)
    if config.name == "http":
        return _HttpTarget(config)
    if config.name == "executor":
        return _ExecutorTarget(config)
    raise ValueError(f"unknown target {config.name!r}; expected one of {', '.join(TARGETS)}")


def _run_job(op: str, payload: dict[str, Any]) -> str:
    """The job function of the in-process and executor targets (top level: picklable)."""
    from toolcodec.worker.jobs import run_job

    job = {"id": "bench", "op": op, "payload": payload, "deadline": time.time() + 3600}
    return run_job(job)["status"]


class _InProcess:
    def __init__(self, config: TargetConfig) -> None:
        self.name = "inprocess"
        self._threads = ThreadPoolExecutor(1, thread_name_prefix="bench-inprocess")

    async def call(self, op: str, payload: dict[str, Any]) -> str:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._threads, _run_job, op, payload)

    async def close(self) -> None:
        self._threads.shutdown(wait=False, cancel_futures=True)


class _ExecutorTarget:
    def __init__(self, config: TargetConfig) -> None:
        self.name = "executor"
        self._procs = ProcessPoolExecutor(config.workers or os.cpu_count() or 1)
        list(self._procs.map(_run_job, ["repair"] * 4, [{"text": "[1,"}] * 4))  # warm

    async def call(self, op: str, payload: dict[str, Any]) -> str:
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._procs, _run_job, op, payload)

    async def close(self) -> None:
        self._procs.shutdown(wait=False, cancel_futures=True)


class _PoolTarget:
    def __init__(self, config: TargetConfig) -> None:
        from prometheus_client import CollectorRegistry
        from toolcodec.pool import Pool

        self.name = config.name
        options: dict[str, Any] = {}
        if config.name == "rq":
            options = {"redis_url": config.redis_url, "queue": config.queue}
        else:
            options = {"workers": config.workers}
        # A registry of its own: the bench must not add to the caller's process metrics.
        self.pool = Pool(config.name, timeout_ms=config.timeout_ms,
                         registry=CollectorRegistry(), **options)
        self._async = config.name == "process"
        self._threads = ThreadPoolExecutor(config.concurrency, thread_name_prefix="bench-pool")

    async def call(self, op: str, payload: dict[str, Any]) -> str:
        if self._async:
            return (await self.pool.asubmit(op, payload))["status"]
        loop = asyncio.get_running_loop()
        out = await loop.run_in_executor(self._threads, self.pool.submit, op, payload)
        return out["status"]

    async def close(self) -> None:
        self._threads.shutdown(wait=False, cancel_futures=True)
        await asyncio.to_thread(self.pool.close)


class _HttpTarget:
    def __init__(self, config: TargetConfig) -> None:
        import httpx

        self.name = "http"
        limits = httpx.Limits(max_connections=config.concurrency,
                              max_keepalive_connections=config.concurrency)
        self._client = httpx.AsyncClient(base_url=config.url.rstrip("/"), limits=limits,
                                         timeout=httpx.Timeout(30.0))
        self._timeout_ms = config.timeout_ms

    async def call(self, op: str, payload: dict[str, Any]) -> str:
        import httpx
        import orjson

        body = orjson.dumps({**payload, "timeout_ms": self._timeout_ms})
        try:
            response = await self._client.post(f"/v1/{op}", content=body,
                                               headers={"content-type": "application/json"})
            return str(orjson.loads(response.content).get("status", "error"))
        except (httpx.HTTPError, ValueError):
            return "transport_error"

    async def close(self) -> None:
        await self._client.aclose()
