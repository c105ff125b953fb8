"""What the Redis caller (:mod:`toolcodec.pool.rq_backend`) and the RQ worker agree on.

Jobs are ordinary RQ jobs: a ``rq:job:<id>`` hash written from :meth:`rq.job.Job.to_dict`
with the JSON serializer, its id pushed on ``rq:queue:<name>``. The function is
:func:`toolcodec.worker.jobs.run_job` and its one argument is the job dict
``{"id", "op", "payload", "deadline"}`` (``deadline`` in absolute ``time.time()`` seconds).
The hash also holds :data:`DEADLINE_FIELD`.
``job.meta["reply_to"]`` names the caller's reply list: the worker pushes
``{"id": <job id>, "envelope": {...}, "lane_ms": <float>}`` there (JSON) instead of storing
an RQ result, and the caller's listener wakes the waiting thread. Every key written carries a TTL.
"""

from __future__ import annotations

from typing import Any

import orjson
from rq.serializers import JSONSerializer

RUN_JOB = "toolcodec.worker.jobs.run_job"
SERIALIZER = JSONSerializer
REPLY_PREFIX = "toolcodec:reply:"
META_REPLY_TO = "reply_to"

# A reply waits at most this long for a caller that went away.
REPLY_TTL_MS = 30_000
# A job hash outlives its deadline by this much, so a worker that picks it up late can still
# read it and report the timeout instead of finding nothing.
JOB_GRACE_MS = 30_000
# The job hash also carries the deadline in plain text (``repr`` of the float), so a worker can
# tell a leftover in the intermediate list from a job another lane is running without
# decoding RQ's payload.
DEADLINE_FIELD = "toolcodec_deadline"
# An id in the intermediate list this long past its deadline belongs to no live lane (lanes
# reply within milliseconds of a deadline): it was left by a killed worker.
LEFTOVER_AFTER_S = 2.0


def queue_key(queue: str) -> str:
    """RQ's list key for ``queue``."""
    return f"rq:queue:{queue}"


def intermediate_key(queue: str) -> str:
    """Where RQ's BLMOVE parks a job id between dequeue and start."""
    return f"rq:queue:{queue}:intermediate"


def job_key(job_id: str) -> str:
    """RQ's hash key for a job."""
    return f"rq:job:{job_id}"


def reply_key(client_id: str) -> str:
    """The list one caller process BLPOPs for its replies."""
    return REPLY_PREFIX + client_id


def workers_key(queue: str) -> str:
    """RQ's set of the workers registered on ``queue``."""
    return f"rq:workers:{queue}"


def registry_keys(queue: str) -> tuple[str, ...]:
    """RQ's started (WIP), finished and failed registries of ``queue``: sorted sets scored by
    expiry time. toolcodec jobs never enter them."""
    return tuple(f"rq:{kind}:{queue}" for kind in ("wip", "finished", "failed"))


def drop_expired_registry_entries(conn: Any, queue: str, now: float) -> int:
    """Remove the entries of :func:`registry_keys` that expired before ``now``, unread.

    RQ's clean-up would load each entry's job and act on what it names (callbacks, webhooks,
    dependents); here nothing but the sorted sets' scores is read. Returns how many went.
    """
    with conn.pipeline(transaction=False) as pipe:
        for key in registry_keys(queue):
            pipe.zremrangebyscore(key, 0, now)
        return sum(pipe.execute())


def encode_reply(job_id: str, envelope: dict[str, Any], lane_s: float | None = None) -> bytes:
    """Serialise a worker's answer for the caller's reply list; ``lane_s``: how long the
    lane spent on the job (dequeue, run, reply), from which callers estimate queue waits."""
    reply: dict[str, Any] = {"id": job_id, "envelope": envelope}
    if lane_s is not None:
        reply["lane_ms"] = round(lane_s * 1000, 3)
    return orjson.dumps(reply)


def decode_reply(raw: bytes) -> tuple[str, dict[str, Any], float | None] | None:
    """Parse a reply into ``(job id, envelope, lane seconds or None)``; ``None`` when it is
    not one of ours (never raises)."""
    try:
        data = orjson.loads(raw)
        job_id, env = data["id"], data["envelope"]
        lane_ms = data.get("lane_ms")
    except (orjson.JSONDecodeError, TypeError, KeyError, AttributeError):
        return None
    if not isinstance(job_id, str) or not isinstance(env, dict):
        return None
    ok = isinstance(lane_ms, int | float) and not isinstance(lane_ms, bool) and lane_ms >= 0
    return job_id, env, lane_ms / 1000 if ok else None
