"""Worker liveness from heartbeats that expire: what ``/readyz`` and the no-worker alert read.

Each RQ worker process beats once a second for each of its lanes: ``SET
toolcodec:worker:<queue>:<lane> <state> EX`` :data:`TTL_S`, and adds the lane's name to the
index set ``toolcodec:workers:<queue>``. A killed worker stops beating and Redis drops its keys
after :data:`TTL_S` seconds, whatever happened to the process; RQ's own worker set keeps the
names of killed workers for minutes, so it is never read for liveness. Readers look up the
indexed names (no SCAN of the keyspace) and remove the names whose key has expired.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

import redis

log = logging.getLogger("toolcodec.worker")

BEAT_EVERY_S = 1.0
# Five missed beats: a worker is called dead 5 s after its last beat, not minutes later.
TTL_S = 5
STATES = ("idle", "busy", "starting")


def index_key(queue: str) -> str:
    return f"toolcodec:workers:{queue}"


def lane_key(queue: str, lane: str) -> str:
    return f"toolcodec:worker:{queue}:{lane}"


def beat(client: redis.Redis, queue: str, lanes: dict[str, str]) -> None:
    """Write one heartbeat for every lane in ``lanes`` (name -> state), in one round trip."""
    if not lanes:
        return
    with client.pipeline(transaction=False) as pipe:
        for lane, state in lanes.items():
            pipe.set(lane_key(queue, lane), state, ex=TTL_S)
        pipe.sadd(index_key(queue), *lanes)
        pipe.execute()


def forget(client: redis.Redis, queue: str, lanes: list[str]) -> None:
    """Remove lanes that stopped cleanly at once (no need to wait for the expiry)."""
    if not lanes:
        return
    with client.pipeline(transaction=False) as pipe:
        pipe.delete(*(lane_key(queue, lane) for lane in lanes))
        pipe.srem(index_key(queue), *lanes)
        pipe.execute()


def live_lanes(client: redis.Redis, queue: str) -> dict[str, int]:
    """Lanes with an unexpired heartbeat on ``queue``, by state; raises ``redis`` errors.

    Names whose heartbeat expired are removed from the index on the way.
    """
    names = sorted(n.decode() for n in client.smembers(index_key(queue)))
    counts = dict.fromkeys(STATES, 0)
    if not names:
        return counts
    states = client.mget([lane_key(queue, n) for n in names])
    dead = [n for n, s in zip(names, states, strict=True) if s is None]
    for state in states:
        if state is not None:
            name = state.decode()
            counts[name if name in counts else "idle"] += 1
    if dead:
        client.srem(index_key(queue), *dead)
    return counts


class Heartbeat:
    """A daemon thread beating for the lanes ``lanes()`` returns, until :meth:`stop`."""

    def __init__(self, redis_url: str, queue: str, lanes: Callable[[], dict[str, str]]) -> None:
        self.queue = queue
        self.lanes = lanes
        self.client = redis.Redis.from_url(redis_url, socket_connect_timeout=1.0,
                                           socket_timeout=2.0)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="toolcodec-heartbeat",
                                        daemon=True)
        self._beaten: set[str] = set()

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        """Stop beating and remove this process's lanes from the live set."""
        self._stop.set()
        self._thread.join(5)
        try:
            forget(self.client, self.queue, sorted(self._beaten))
        except redis.exceptions.RedisError:
            pass  # they expire on their own
        self.client.close()

    def _run(self) -> None:
        failing = False
        while not self._stop.is_set():
            lanes = self.lanes()
            try:
                beat(self.client, self.queue, lanes)
                gone = sorted(self._beaten - set(lanes))
                forget(self.client, self.queue, gone)
                self._beaten = set(lanes)
                failing = False
            except redis.exceptions.RedisError as exc:
                if not failing:  # once per outage, not once a second
                    log.error("heartbeat on queue %s failed: %s", self.queue, exc)
                failing = True
            self._stop.wait(BEAT_EVERY_S)
