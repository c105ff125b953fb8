"""Shared pytest fixtures. Redis fixtures live in tests/redis_server.py."""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator

import pytest
from hypothesis import HealthCheck, settings
from hypothesis.database import DirectoryBasedExampleDatabase

from tests.redis_server import RedisBinaryMissing, RedisServer, WorkerProcessGroup, free_port

# Hypothesis profiles, chosen by HYPOTHESIS_PROFILE (docs/testing.md):
# - "ci" (the default): derandomized and without an example database, so every run of the
#   same code tries the same examples and an example saved on one machine cannot fail
#   another's run. What exploring finds becomes an @example or a plain test instead.
# - "dev": random seeds, more examples (EXAMPLES_FACTOR times each test's own count) and the
#   database in .hypothesis/ (never committed), to explore before submitting.
# Neither has a per-example deadline or the "too slow"/"filtered too much" health checks: a
# busy 2-core machine makes timing meaningless. Speed is the benchmarks' job.
_RELAXED = {"deadline": None, "print_blob": True,
            "suppress_health_check": [HealthCheck.too_slow, HealthCheck.filter_too_much,
                                      HealthCheck.data_too_large]}
EXAMPLES_FACTOR = 10
settings.register_profile("ci", derandomize=True, database=None, **_RELAXED)
settings.register_profile("dev", max_examples=100 * EXAMPLES_FACTOR, derandomize=False,
                          database=DirectoryBasedExampleDatabase(".hypothesis/examples"),
                          **_RELAXED)
PROFILE = os.environ.get("HYPOTHESIS_PROFILE") or "ci"
settings.load_profile(PROFILE)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Under "dev", tests that set their own max_examples run EXAMPLES_FACTOR times as many."""
    if PROFILE != "dev":
        return
    for item in items:
        test = getattr(item, "obj", None)
        own = getattr(test, "_hypothesis_internal_use_settings", None)
        if own is not None and own.max_examples < 100 * EXAMPLES_FACTOR:
            test._hypothesis_internal_use_settings = settings(
                own, max_examples=own.max_examples * EXAMPLES_FACTOR)


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


@pytest.fixture(scope="module")
def upstream():
    """The STAND-IN for a model server (no model runs here): recorded outputs over real HTTP/SSE
    (``tests/upstream_standin.py``), one per test module."""
    from tests.upstream_standin import Standin

    standin = Standin().start()
    yield standin
    standin.stop()
