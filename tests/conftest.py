"""Shared pytest fixtures. Redis fixtures live in tests/redis_server.py."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator

import pytest
from hypothesis import HealthCheck, settings

from tests.redis_server import RedisBinaryMissing, RedisServer, WorkerProcessGroup, free_port

# One Hypothesis profile for the whole suite: no per-example deadline and no "too slow" or
# "filtered too much" health checks, because a busy 2-core machine makes timing meaningless.
# Speed is the benchmarks' job (tests/benchmarks/), not the property tests'.
settings.register_profile(
    "toolcodec",
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much,
                           HealthCheck.data_too_large],
)
settings.load_profile("toolcodec")


def _new_server(**kwargs: object) -> RedisServer:
    try:
        return RedisServer(**kwargs)  # type: ignore[arg-type]
    except RedisBinaryMissing as exc:
        pytest.fail(str(exc), pytrace=False)


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    """A real redis-server for the whole session (fails, never skips, without the binary)."""
    server = _new_server()
    server.start()
    yield server
    server.close()


@pytest.fixture
def own_redis_server() -> Iterator[RedisServer]:
    """A redis-server for one test, free to be stopped and restarted."""
    server = _new_server()
    server.start()
    yield server
    server.close()


@pytest.fixture
def queue_name() -> str:
    """A queue name no other test uses, so tests never see each other's jobs."""
    return f"test-{uuid.uuid4().hex[:10]}"


@pytest.fixture
def start_rq_worker(
    redis_server: RedisServer, queue_name: str
) -> Iterator[Callable[..., WorkerProcessGroup]]:
    """Start ``python -m toolcodec.worker.rq_worker`` (fault injection on); all are killed at
    teardown.

    ``start_rq_worker(concurrency=1, metrics=False, server=None, queue=None, launch=True)``
    returns the :class:`WorkerProcessGroup` (not yet started when ``launch`` is false); with
    ``metrics`` its ``metrics_port`` is set.
    """
    started: list[WorkerProcessGroup] = []

    def start(concurrency: int = 1, metrics: bool = False, server: RedisServer | None = None,
              queue: str | None = None, launch: bool = True) -> WorkerProcessGroup:
        group = WorkerProcessGroup(
            (server or redis_server).url, queue or queue_name, concurrency=concurrency,
            metrics_port=free_port() if metrics else None,
        )
        started.append(group)
        if launch:
            group.start()
        return group

    yield start
    for group in started:
        group.stop()
