"""``Pool``: the one object callers use, whichever backend runs the jobs."""

from __future__ import annotations

import asyncio
from collections.abc import Iterable
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from prometheus_client import CollectorRegistry

from worker.metrics import Metrics

BACKENDS = ("process", "rq")


class Pool:
    """Run codec jobs under hard deadlines and return DESIGN.md envelopes.

    :param backend: ``"process"`` (embedded worker processes, the default) or ``"rq"``
        (Redis/RQ workers started with ``toolcodec worker``).
    :param workers: process backend: how many worker processes (default: CPU count).
    :param timeout_ms: default budget of one call, counted from the call, queueing included.
    :param queue_size: how many calls may wait for a worker before ``submit`` answers
        ``rejected`` (the RQ backend's ``max_queue``).
    :param metrics: where outcomes are counted; by default a :class:`Metrics` on
        ``registry`` (the prometheus_client default registry if that is None too).
    :param backend_options: passed to the backend, e.g. ``redis_url=`` and ``queue=`` for
        RQ, ``handler=`` or ``start_method=`` for processes.

    Envelopes are ``{"status", "op", "backend", "result", "error", "elapsed_ms"}``; no call
    raises on a bad payload or a failed job. Use as a context manager, or call
    :meth:`close`.
    """

    def __init__(
        self,
        backend: str = "process",
        *,
        workers: int | None = None,
        timeout_ms: float = 50,
        queue_size: int | None = None,
        metrics: Metrics | None = None,
        registry: CollectorRegistry | None = None,
        **backend_options: Any,
    ) -> None:
        if backend not in BACKENDS:
            raise ValueError(f"backend must be one of {BACKENDS}, got {backend!r}")
        self.backend = backend
        self.metrics = metrics if metrics is not None else Metrics(registry)
        self._impl = _make_backend(
            backend, workers, timeout_ms, queue_size, self.metrics, backend_options
        )
        self._threads: ThreadPoolExecutor | None = None

    def submit(self, op: str, payload: dict, *, timeout_ms: float | None = None) -> dict:
        """Run one job and return its envelope within ``timeout_ms`` (plus a small grace)."""
        return self._impl.submit(op, payload, timeout_ms=timeout_ms)

    def map(
        self, op: str, payloads: Iterable[dict], *, timeout_ms: float | None = None
    ) -> list[dict]:
        """Run one job per payload concurrently; the envelopes keep the payloads' order."""
        native = getattr(self._impl, "map", None)
        if native is not None:
            return native(op, payloads, timeout_ms=timeout_ms)
        items = list(payloads)
        if self._threads is None:
            self._threads = ThreadPoolExecutor(16, thread_name_prefix="toolcodec-pool-map")
        futures = [self._threads.submit(self.submit, op, p, timeout_ms=timeout_ms) for p in items]
        return [f.result() for f in futures]

    async def asubmit(self, op: str, payload: dict, *, timeout_ms: float | None = None) -> dict:
        """Like :meth:`submit`, awaitable; the event loop stays free while the job runs."""
        native = getattr(self._impl, "asubmit", None)
        if native is not None:
            return await native(op, payload, timeout_ms=timeout_ms)
        return await asyncio.to_thread(self.submit, op, payload, timeout_ms=timeout_ms)

    def close(self, timeout: float = 5.0) -> None:
        """Stop taking jobs, let in-flight ones finish for up to ``timeout`` s, stop workers."""
        self._impl.close(timeout=timeout)
        if self._threads is not None:
            self._threads.shutdown(wait=False, cancel_futures=True)

    @property
    def impl(self) -> Any:
        """The backend object (``ProcessBackend`` or ``RQBackend``), for diagnostics."""
        return self._impl

    def __enter__(self) -> Pool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _make_backend(
    backend: str,
    workers: int | None,
    timeout_ms: float,
    queue_size: int | None,
    metrics: Metrics,
    options: dict[str, Any],
) -> Any:
    if backend == "process":
        from pool.process import DEFAULT_QUEUE_SIZE, ProcessBackend

        size = DEFAULT_QUEUE_SIZE if queue_size is None else queue_size
        return ProcessBackend(
            workers=workers, timeout_ms=timeout_ms, queue_size=size, metrics=metrics, **options
        )
    from pool.rq_backend import RQBackend  # needs redis; loaded only when asked for

    if queue_size is not None:
        options.setdefault("max_queue", queue_size)
    return RQBackend(timeout_ms=timeout_ms, metrics=metrics, **options)
