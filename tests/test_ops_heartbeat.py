"""Worker liveness from heartbeats with expiry (issue #26, item 1), on a real redis-server.

RQ's worker set keeps a killed worker's name for minutes; the heartbeat keys expire, so
``live_lanes`` (what ``/readyz`` and ``toolcodec_rq_live_workers`` read) follows the kill.
"""

from __future__ import annotations

import os
import signal
import time

import pytest
import redis
from toolcodec.worker import heartbeat
from toolcodec.worker.rq_protocol import workers_key

pytestmark = pytest.mark.redis


def wait_for(predicate, timeout: float) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.1)
    return predicate()


def live(client: redis.Redis, queue: str) -> int:
    counts = heartbeat.live_lanes(client, queue)
    return counts["idle"] + counts["busy"]


def test_beats_expire_and_dead_names_leave_the_index(redis_server, queue_name) -> None:
    client = redis.Redis.from_url(redis_server.url)
    heartbeat.beat(client, queue_name, {"a": "idle", "b": "busy"})
    assert heartbeat.live_lanes(client, queue_name) == {"idle": 1, "busy": 1, "starting": 0}
    client.delete(heartbeat.lane_key(queue_name, "a"))  # what expiry does after TTL_S
    assert heartbeat.live_lanes(client, queue_name)["idle"] == 0
    assert client.smembers(heartbeat.index_key(queue_name)) == {b"b"}
    assert 0 < client.ttl(heartbeat.lane_key(queue_name, "b")) <= heartbeat.TTL_S


def test_killed_workers_stop_counting_while_rqs_set_keeps_them(
        redis_server, queue_name, start_rq_worker) -> None:
    client = redis.Redis.from_url(redis_server.url)
    group = start_rq_worker(concurrency=2)
    assert wait_for(lambda: live(client, queue_name) == 2, 30)
    os.killpg(group.proc.pid, signal.SIGKILL)  # no clean-up code runs
    group.proc.wait(10)
    assert client.scard(workers_key(queue_name)) == 2  # RQ still lists both
    assert wait_for(lambda: live(client, queue_name) == 0, heartbeat.TTL_S * 4)


def test_a_clean_stop_leaves_the_live_set_at_once(redis_server, queue_name,
                                                  start_rq_worker) -> None:
    client = redis.Redis.from_url(redis_server.url)
    group = start_rq_worker(concurrency=1)
    assert wait_for(lambda: live(client, queue_name) == 1, 30)
    os.killpg(group.proc.pid, signal.SIGTERM)
    group.proc.wait(30)
    assert live(client, queue_name) == 0
    assert client.smembers(heartbeat.index_key(queue_name)) == set()
