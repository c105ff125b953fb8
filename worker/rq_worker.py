"""``toolcodec worker``: RQ workers whose jobs run in supervised, SIGKILLable children.

Each *lane* is a thread running an RQ :class:`~rq.SimpleWorker` subclass
(:class:`ToolcodecWorker`) next to one long-lived
:class:`toolcodec.worker.child.WorkerProcess`. RQ's
loop dequeues the job (BLMOVE + HGETALL of ``rq:job:<id>``); instead of running it in
process, :meth:`ToolcodecWorker.execute_job` sends it to the child and waits on the pipe
until the job's absolute deadline. At the deadline the child is SIGKILLed (C code
included) and forked again (~10 ms), so the lane is back within milliseconds and no fork is
paid per job. The answer goes to the caller's reply list in one pipelined round trip.

Only toolcodec jobs run: a job that names any other function, or carries no ``reply_to``,
or whose data cannot be read, is refused without being imported, deserialised beyond JSON or
called — it is removed from the queue, logged and counted in
``toolcodec_rq_jobs_refused_total{reason}``. Anyone who can write to Redis can still submit
toolcodec jobs (and so use CPU), but never run code of their choosing: see ``docs/rq.md``.
RQ's registry maintenance is replaced by one that loads no job, callbacks and webhooks read
from a job are dropped, and no lane listens to commands published on Redis unless the
operator allowed ``shutdown`` (``--allow-redis-shutdown``).
Lanes share one process, so one prometheus registry counts every outcome the workers see
(``--metrics-port``); see ``docs/rq.md`` for which side counts what.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import signal
import socket
import sys
import threading
import time
import uuid
from collections.abc import Callable
from typing import Any

import redis
from rq import SimpleWorker, worker_registration
from rq.exceptions import DequeueTimeout, NoSuchJobError
from rq.job import Job
from rq.queue import Queue
from rq.timeouts import TimerDeathPenalty
from rq.utils import now
from rq.worker import WorkerStatus
from toolcodec.results.errors import TIMEOUT, WORKER_LOST
from toolcodec.worker import rq_protocol as proto
from toolcodec.worker.child import WorkerDied, WorkerProcess
from toolcodec.worker.envelope import error_envelope
from toolcodec.worker.heartbeat import Heartbeat
from toolcodec.worker.joblog import JobLog
from toolcodec.worker.jobs import warm
from toolcodec.worker.limits import ENV as ENV_LIMITS
from toolcodec.worker.limits import LimitsError, operator_limits
from toolcodec.worker.metrics import Metrics
from toolcodec.worker.redis_link import Backoff, RedisLink

log = logging.getLogger("toolcodec.worker")

BACKEND = "rq"
# The child is killed this long after the job's deadline: the caller has already answered
# "timeout" on its own clock, so there is no point in letting it run longer.
KILL_GRACE_S = 0.001
# RQ writes heartbeats, state and suspension checks on every job; a few per second are
# enough for `rq info` and keep those round trips off the per-job path.
HOUSEKEEPING_EVERY_S = 1.0
# A job still running after this share of what was left of its budget when it started (and
# at least DEMOTE_AFTER_S) is
# likely a runaway: its process drops to DEMOTED_NICE until it ends or is killed.
DEMOTE_SHARE = 0.25
DEMOTE_AFTER_S = 0.01
DEMOTED_NICE = 19
# A dequeue that took longer than this waited for a job to arrive: the lane was idle.
DEQUEUE_NO_WAIT_S = 0.005
# How often one lane of the queue looks for ids left in the intermediate list.
LEFTOVERS_EVERY_S = 5.0
# A lane's worker that ran this long before its loop ended starts again without delay.
LANE_STABLE_AFTER_S = 5.0
_REDIS_ERRORS = (redis.exceptions.ConnectionError, redis.exceptions.TimeoutError)
_JOBLOG = JobLog("worker")  # one line per failed or slow job (see toolcodec.worker.joblog)


class _MissingJobCounter:
    """Counts queued job ids whose hash expired before a worker reached them."""

    metrics: Metrics | None = None

    @classmethod
    def record(cls, job_id: str) -> None:
        log.warning("job %s expired in the queue before a worker reached it; not run", job_id)
        if cls.metrics is not None:
            cls.metrics.observe("unknown", BACKEND, {"status": "timeout"})


class ForeignName(Exception):
    """A job read from Redis named a function toolcodec does not run."""


class ToolcodecJob(Job):
    """RQ's Job, loaded from Redis without ever resolving a name it carries.

    A job that vanished from the queue is counted, not ignored. Callbacks and webhooks read
    from the hash are dropped, and ``func`` resolves only toolcodec's one job function: any
    RQ code path that reaches them (registry clean-up, failure handling) finds nothing to
    import, call or request.
    """

    @classmethod
    def fetch(cls, id: str, connection: Any = None, serializer: Any = None) -> Job:
        try:
            return super().fetch(id, connection=connection, serializer=serializer)
        except NoSuchJobError:
            _MissingJobCounter.record(id)
            raise

    def restore(self, raw_data: Any) -> Any:
        result = super().restore(raw_data)
        named = [n for n in (self._success_callback_name, self._failure_callback_name,
                             self._stopped_callback_name) if n]
        if named or self.webhooks:
            log.warning("job %s names callbacks %s and %d webhook(s); toolcodec ignores them",
                        self.id, named, len(self.webhooks))
        self._success_callback_name = self._failure_callback_name = None
        self._stopped_callback_name = None
        self.webhooks = []
        return result

    @property
    def func(self) -> Any:
        if self.func_name != proto.RUN_JOB:
            raise ForeignName(f"job {self.id} names {self.func_name!r}, not a toolcodec job")
        return super().func

    @property
    def success_callback(self) -> None:
        return None

    @property
    def failure_callback(self) -> None:
        return None

    @property
    def stopped_callback(self) -> None:
        return None


class _LaneStates:
    """Tracks idle/busy lanes for the ``toolcodec_workers`` gauge."""

    def __init__(self, metrics: Metrics) -> None:
        self.metrics = metrics
        self._states: dict[str, str] = {}
        self._lock = threading.Lock()

    def set(self, lane: str, state: str | None) -> None:
        with self._lock:
            if state is None:
                self._states.pop(lane, None)
            else:
                self._states[lane] = state
            counts = {s: 0 for s in ("idle", "busy", "starting")}
            for s in self._states.values():
                counts[s] = counts.get(s, 0) + 1
            self.metrics.set_workers(BACKEND, counts)

    def snapshot(self) -> dict[str, str]:
        """Lane name -> state, for the heartbeat."""
        with self._lock:
            return dict(self._states)


class ToolcodecWorker(SimpleWorker):
    """An RQ SimpleWorker that hands toolcodec jobs to a supervised child process.

    :param child: the long-lived process jobs run in; started by the caller.
    :param metrics: where outcomes, restarts and the queue depth are counted.
    :param lanes: shared idle/busy bookkeeping (optional).
    :param on_shutdown_command: what RQ's ``shutdown`` command published on Redis does;
        ``None`` (the default) means the worker does not listen to commands at all.
    :param link: where Redis failures are reported (one log line per change of state),
        shared by the lanes of a process.
    """

    job_class = ToolcodecJob
    # Stock jobs run in a lane thread, where SIGALRM cannot be used.
    death_penalty_class = TimerDeathPenalty

    def __init__(self, queues: Any, *, child: WorkerProcess, metrics: Metrics,
                 lanes: _LaneStates | None = None,
                 on_shutdown_command: Callable[[], None] | None = None,
                 link: RedisLink | None = None, **kwargs: Any) -> None:
        kwargs.setdefault("serializer", proto.SERIALIZER)
        super().__init__(queues, **kwargs)
        self.child = child
        self.metrics = metrics
        self.lanes = lanes
        # Called when RQ's shutdown command arrives; None: commands are not listened to.
        self.on_shutdown_command = on_shutdown_command
        self.link = link or RedisLink(log)
        self.registered = False  # set once the worker has registered itself in Redis
        self._last_housekeeping = 0.0
        self._last_leftovers = 0.0
        self._last_suspension_check = 0.0
        self._state_written: str | None = None
        self._cycle_from = 0.0  # time.monotonic() the lane's cycle for its current job began

    # -- lighter RQ housekeeping -------------------------------------------------------------

    @property
    def dequeue_timeout(self) -> int:
        # Short blocking pops let a stop request end the loop within a second.
        return 1

    def _install_signal_handlers(self) -> None:
        """Signals belong to the supervising main thread (see :func:`run`)."""

    def heartbeat(self, timeout: int | None = None, pipeline: Any = None) -> None:
        if pipeline is not None or timeout is not None:
            super().heartbeat(timeout, pipeline)
            return
        if time.monotonic() - self._last_housekeeping < HOUSEKEEPING_EVERY_S:
            return
        try:
            with self.connection.pipeline(transaction=False) as pipe:
                super().heartbeat(None, pipe)
                pipe.llen(self.queues[0].key)
                depth = pipe.execute()[-1]
        except _REDIS_ERRORS as exc:
            # RQ's loop would quit on this (after a job); the next dequeue retries instead.
            self.link.failed(exc)
            return
        self.metrics.queue_depth.labels(backend=BACKEND).set(depth)
        self._last_housekeeping = time.monotonic()
        if self._last_housekeeping - self._last_leftovers >= LEFTOVERS_EVERY_S:
            self._last_leftovers = self._last_housekeeping
            try:
                self.remove_leftovers()
            except _REDIS_ERRORS as exc:
                self.link.failed(exc)
            except Exception as exc:  # noqa: BLE001 - housekeeping must not stop the lane
                log.warning("worker %s: could not check for leftover job ids: %s", self.name, exc)

    def remove_leftovers(self) -> int:
        """Remove ids a killed worker left in the intermediate list; returns how many.

        RQ dequeues by moving an id to ``rq:queue:<q>:intermediate``; a worker killed before
        it answers leaves the id there, with no TTL. An id is a leftover once its job hash is
        gone (every toolcodec hash expires) or its deadline is :data:`proto.LEFTOVER_AFTER_S`
        behind. RQ's own cleanup is not used: it would file our jobs as failed for a year.
        """
        key = proto.intermediate_key(self.queues[0].name)
        ids = [i.decode() for i in self.connection.lrange(key, 0, -1)]
        if not ids:
            return 0
        with self.connection.pipeline(transaction=False) as pipe:
            for job_id in ids:
                pipe.exists(proto.job_key(job_id))
                pipe.hget(proto.job_key(job_id), proto.DEADLINE_FIELD)
            found = pipe.execute()
        cutoff = time.time() - proto.LEFTOVER_AFTER_S
        stale = [i for i, exists, deadline in zip(ids, found[::2], found[1::2], strict=True)
                 if not exists or (deadline is not None and _before(deadline, cutoff))]
        removed = 0
        if stale:
            with self.connection.pipeline(transaction=False) as pipe:
                for job_id in stale:
                    pipe.lrem(key, 1, job_id)
                pipe.delete(*map(proto.job_key, stale))
                # A lane that answered meanwhile removed its own id: only the rest count.
                removed = sum(pipe.execute()[:-1])
        if removed:
            log.warning("worker %s: removed %d job id(s) a stopped worker left in %s",
                        self.name, removed, key)
        return removed

    def run_maintenance_tasks(self) -> None:
        """Registry clean-up only: RQ's scheduler start and group clean-up are not ours."""
        self.clean_registries()

    def clean_registries(self) -> None:
        """toolcodec's registry maintenance, run at start and every ``maintenance_interval``.

        RQ's own is never run: it loads the jobs listed in the queue's registries and acts
        on what they name, so a Redis writer could plant an "abandoned" job whose failure
        callback is imported, whose webhooks are requested and whose dependents are
        enqueued. Our jobs never enter those registries (replies bypass them), so every
        entry there was written by someone else: expired ones are dropped unread. Dead
        workers leave the queue's worker set as in RQ (that reads key names only); leftovers
        in the intermediate list are :meth:`remove_leftovers`' job.
        """
        for queue in self.queues:
            try:
                if not queue.acquire_maintenance_lock():
                    continue
                try:
                    dropped = proto.drop_expired_registry_entries(self.connection, queue.name,
                                                                  time.time())
                    worker_registration.clean_worker_registry(queue)
                finally:
                    queue.release_maintenance_lock()
            except _REDIS_ERRORS as exc:
                self.link.failed(exc)
                return  # run again at the next check, once Redis answers
            except redis.RedisError as exc:
                # E.g. a registry key of another type (WRONGTYPE): maintenance must never
                # stop a lane, or a Redis writer could keep every lane from serving.
                log.warning("worker %s: registry maintenance of queue %s failed: %s",
                            self.name, queue.name, exc)
                continue
            if dropped:
                log.warning("worker %s: dropped %d expired registry entr%s of queue %s "
                            "without loading their jobs (toolcodec writes none)",
                            self.name, dropped, "y" if dropped == 1 else "ies", queue.name)
        self.last_cleaned_at = now()

    def clean_group_registries(self) -> None:
        """Groups are not toolcodec's; their clean-up is left to whoever created them."""

    # -- commands published on Redis ---------------------------------------------------------

    def subscribe(self) -> None:
        """Listen to RQ's command channel only when the operator allowed a command.

        Anyone who can PUBLISH on Redis could otherwise stop every worker
        (``rq.command.send_shutdown_command``). Without ``--allow-redis-shutdown`` no lane
        subscribes, so a published command reaches nobody.
        """
        if self.on_shutdown_command is not None:
            super().subscribe()

    def _pubsub_exception_handler(self, exc: Exception, pubsub: Any, thread: Any) -> None:
        """RQ's retry of the command subscription, reporting a lost Redis once."""
        if not isinstance(exc, redis.exceptions.ConnectionError):
            super()._pubsub_exception_handler(exc, pubsub, thread)
            return
        self.link.failed(exc)
        time.sleep(1.0)  # redis-py subscribes again once a connection succeeds

    def handle_payload(self, message: Any) -> None:
        """Obey ``shutdown`` (when allowed); every other command is logged and ignored.

        ``kill-horse``, ``stop-job`` and ``stop-execution`` have no meaning here: a job's
        child is killed by the job's own deadline, never on request from Redis.
        """
        try:
            command = json.loads(message["data"]).get("command")
        except (ValueError, TypeError, AttributeError, KeyError):
            command = None
        if command == "shutdown" and self.on_shutdown_command is not None:
            log.warning("worker %s: shutdown command received on Redis; stopping "
                        "(--allow-redis-shutdown)", self.name)
            self.on_shutdown_command()
            return
        log.warning("worker %s: ignored a command published on Redis: %.100r",
                    self.name, command)

    def set_state(self, state: str, pipeline: Any = None) -> None:
        if pipeline is None and state == self._state_written:
            self._state = state
            return
        super().set_state(state, pipeline)
        if pipeline is None:
            self._state_written = state

    def check_for_suspension(self, burst: bool) -> None:
        if time.monotonic() - self._last_suspension_check < HOUSEKEEPING_EVERY_S:
            return
        try:
            super().check_for_suspension(burst)
        except _REDIS_ERRORS as exc:
            self.link.failed(exc)
            return  # the dequeue step retries
        self._last_suspension_check = time.monotonic()

    def dequeue_job_and_maintain_ttl(
        self, timeout: int | None, max_idle_time: int | None = None
    ) -> tuple[Job, Queue] | None:
        """RQ's dequeue, minus per-job heartbeats, with a reconnect backoff.

        While Redis is unreachable the lane retries after :class:`Backoff`'s delays and the
        process logs once (:class:`RedisLink`), not once per attempt.
        """
        backoff = Backoff()
        failed = False
        while not self._stop_requested:
            try:
                if failed:
                    self._register_again()  # a restarted Redis has forgotten this worker
                    failed = False
                self.set_state(WorkerStatus.IDLE)
                self.heartbeat()
                if self.should_run_maintenance_tasks:
                    self.run_maintenance_tasks()
                asked = time.monotonic()
                dequeued = self.queue_class.dequeue_any(
                    self._ordered_queues, timeout, connection=self.connection,
                    job_class=self.job_class, serializer=self.serializer,
                    death_penalty_class=self.death_penalty_class,
                )
                got = time.monotonic()
                # A pop that waited for a job was idle time, not part of the lane's cycle.
                self._cycle_from = asked if got - asked < DEQUEUE_NO_WAIT_S else got
                self.link.answered()  # only a whole cycle, the pop included, counts
                return dequeued
            except DequeueTimeout:
                self.link.answered()
                continue
            except _REDIS_ERRORS as exc:
                self.link.failed(exc)
                self._state_written = None  # a restarted Redis has forgotten us
                failed = True
                time.sleep(backoff.next())
            except Exception as exc:  # noqa: BLE001 - an unreadable job must not stop the lane
                if getattr(exc, "job_id", None) is None and isinstance(exc, redis.RedisError):
                    # Redis refused a command (an ACL without it, a replica that became
                    # read-only, loading): no job is at fault, and retrying at once would spin.
                    self.link.failed(exc)
                    failed = True
                    time.sleep(backoff.next())
                    continue
                self._refuse_unloadable(exc)
        return None

    def bootstrap(self, *args: Any, **kwargs: Any) -> None:
        super().bootstrap(*args, **kwargs)
        self.registered = True
        self.link.answered()

    def teardown(self) -> None:
        """RQ's teardown; a Redis that went away is reported once, not as a traceback."""
        try:
            self.register_death()
        except _REDIS_ERRORS as exc:
            self.link.failed(exc)
        finally:
            self.unsubscribe()

    def _register_again(self) -> None:
        """Write this worker's registration again (``rq info`` and readiness read it)."""
        try:
            if not self.connection.exists(self.key):
                self.register_birth()
        except _REDIS_ERRORS:
            raise
        except Exception as exc:  # noqa: BLE001 - registration is informational
            log.warning("worker %s: could not register again: %s", self.name, exc)

    def _refuse_unloadable(self, exc: Exception) -> None:
        """A job hash RQ could not load (e.g. pickled by another producer): drop it, count it."""
        job_id, queue = getattr(exc, "job_id", None), getattr(exc, "queue", None)
        log.warning("worker %s: refused job %s: it cannot be read as a toolcodec job (%s)",
                    self.name, job_id or "?", exc)
        self.metrics.refused("undecodable")
        if not isinstance(job_id, str) or queue is None:
            return
        try:
            with self.connection.pipeline(transaction=False) as pipe:
                pipe.lrem(proto.intermediate_key(queue.name), 1, job_id)
                pipe.delete(proto.job_key(job_id))
                pipe.execute()
        except _REDIS_ERRORS as redis_exc:
            log.error("worker %s: could not remove job %s: %s", self.name, job_id, redis_exc)

    # -- running a job -----------------------------------------------------------------------

    def execute_job(self, job: Job, queue: Queue) -> None:
        """Run a toolcodec job in the child under its deadline; refuse anything else.

        RQ's stock path is never taken: it would import and call whatever function the job
        names (and its callbacks), so a Redis writer could run code in the worker.
        """
        reply_to, refusal = _ours(job)
        if refusal is not None:
            self._refuse(job, queue, refusal)
            return
        started = time.monotonic()
        task = job.args[0]
        op = task.get("op") if isinstance(task, dict) and isinstance(task.get("op"), str) else ""
        self._set_lane("busy")
        try:
            env, restart_reason = self._supervise(task, op, job)
        finally:
            self._set_lane("idle")
        self._reply(job, queue, reply_to, env)
        if restart_reason is not None:
            self._restart_child(restart_reason)
        env = {**env, "elapsed_ms": (time.monotonic() - started) * 1000.0}
        self.metrics.observe(op or "unknown", BACKEND, env)
        _JOBLOG.job(op or "unknown", BACKEND, env,
                    task.get("payload") if isinstance(task, dict) else None, job_id=job.id)

    def _refuse(self, job: Job, queue: Queue, reason: str) -> None:
        log.warning("worker %s: refused job %s from queue %s (%s); it was not run",
                    self.name, job.id, queue.name, reason)
        self.metrics.refused(reason)
        try:
            with self.connection.pipeline(transaction=False) as pipe:
                pipe.lrem(proto.intermediate_key(queue.name), 1, job.id)
                pipe.delete(job.key)
                pipe.execute()
        except _REDIS_ERRORS as exc:
            log.error("worker %s: could not remove refused job %s: %s", self.name, job.id, exc)

    def _supervise(self, task: Any, op: str, job: Job) -> tuple[dict, str | None]:
        """Send the task to the child and wait for it until its deadline.

        Returns the envelope and, when the child had to be killed or died, the restart reason.
        """
        job_id = job.id
        deadline = task.get("deadline") if isinstance(task, dict) else None
        if not isinstance(deadline, int | float) or isinstance(deadline, bool):
            # Another producer: fall back to RQ's whole-second job timeout.
            deadline = time.time() + float(job.timeout or 180)
        late = time.time() - deadline
        if late >= 0:
            msg = f"job {job_id} was queued {late * 1000:.1f} ms past its deadline; not run"
            return error_envelope(op, "timeout", TIMEOUT, msg, job_id=job_id), None
        try:
            self.child.send(task)
        except WorkerDied:
            self._restart_child("crash")  # died between jobs; this job was not sent
            self.child.send(task)
        demoted = False
        left = deadline - time.time()
        overrun = min(left, max(DEMOTE_AFTER_S, DEMOTE_SHARE * left))
        if not self.child.poll(overrun):
            # Likely a runaway: until its deadline it runs at the lowest CPU priority, so
            # on a busy host it does not take the cores the other lanes' jobs need.
            demoted = _set_priority(self.child.pid, DEMOTED_NICE)
            if not self.child.poll(deadline - time.time() + KILL_GRACE_S):
                self.child.kill()
                msg = f"job {job_id} ran past its deadline; its worker process was killed"
                return error_envelope(op, "timeout", TIMEOUT, msg, job_id=job_id), "timeout"
        try:
            env = self.child.recv()
            if demoted and not _set_priority(self.child.pid, 0):
                # Not allowed to raise it again (no CAP_SYS_NICE): a fresh child instead.
                log.info("worker %s: replacing a child demoted by a slow job", self.name)
                self.child.restart()
            return env, None
        except WorkerDied as exc:
            msg = f"job {job_id}: the worker process died while running it ({exc})"
            return error_envelope(op, "worker_lost", WORKER_LOST, msg, job_id=job_id), "crash"

    def _reply(self, job: Job, queue: Queue, reply_to: str, env: dict) -> None:
        # The lane's time for this job, from which callers estimate queue waits: the dequeue
        # (unless it waited for work) and the run; this reply's round trip is not counted.
        cycle = time.monotonic() - self._cycle_from if self._cycle_from else None
        try:
            with self.connection.pipeline(transaction=False) as pipe:
                pipe.rpush(reply_to, proto.encode_reply(job.id, env, cycle))
                pipe.pexpire(reply_to, proto.REPLY_TTL_MS)
                pipe.lrem(proto.intermediate_key(queue.name), 1, job.id)
                pipe.delete(job.key)
                pipe.execute()
        except _REDIS_ERRORS as exc:
            # The caller, if still waiting, was told backend_unavailable by its listener.
            log.error("worker %s: reply of job %s not delivered: %s", self.name, job.id, exc)

    def _restart_child(self, reason: str) -> None:
        self._set_lane("starting")
        self.child.restart()
        self.metrics.restarted(BACKEND, reason)
        self._set_lane("idle")

    def _set_lane(self, state: str) -> None:
        if self.lanes is not None:
            self.lanes.set(self.name, state)


def _set_priority(pid: int | None, nice: int) -> bool:
    """Set the CPU priority of process ``pid``; whether it was allowed."""
    if pid is None:
        return False
    try:
        os.setpriority(os.PRIO_PROCESS, pid, nice)
    except OSError:  # not permitted, or the process is gone
        return False
    return True


def _before(deadline: bytes, cutoff: float) -> bool:
    try:
        return float(deadline) < cutoff
    except ValueError:
        return True  # not a deadline toolcodec wrote


def _ours(job: Job) -> tuple[str, str | None]:
    """``(reply_to, None)`` for a toolcodec job, else ``("", why it is refused)``.

    Reads only strings and JSON (the JSON serializer); nothing named in the job is imported.
    """
    try:
        func_name, reply_to, args, kwargs = (job.func_name, job.meta.get(proto.META_REPLY_TO),
                                             job.args, job.kwargs)
    except Exception:  # noqa: BLE001 - data that is not our JSON (e.g. a pickle)
        return "", "undecodable"
    if func_name != proto.RUN_JOB:
        return "", "foreign_function"
    if not isinstance(reply_to, str) or not reply_to.startswith(proto.REPLY_PREFIX):
        return "", "no_reply_to"
    if len(args) != 1 or kwargs:
        return "", "bad_arguments"
    return reply_to, None


class Supervisor:
    """Runs ``concurrency`` lanes (RQ worker + child) and restarts a lane whose loop ends."""

    def __init__(self, redis_url: str, queue: str, concurrency: int, metrics: Metrics,
                 allow_redis_shutdown: bool = False) -> None:
        self.redis_url = redis_url
        self.queue = queue
        self.concurrency = max(1, int(concurrency))
        self.metrics = metrics
        self.allow_redis_shutdown = allow_redis_shutdown
        self.link = RedisLink(log)
        self.lanes = _LaneStates(metrics)
        self._stop = threading.Event()
        self._workers: list[ToolcodecWorker] = []
        self._threads: list[threading.Thread] = []
        self.heartbeat = Heartbeat(redis_url, queue, self.lanes.snapshot)
        _MissingJobCounter.metrics = metrics

    def start(self) -> None:
        warm()  # children forked (and re-forked after a kill) inherit the loaded codec
        for i in range(self.concurrency):
            thread = threading.Thread(target=self._lane, args=(i,), name=f"toolcodec-lane-{i}")
            thread.start()
            self._threads.append(thread)
        self.heartbeat.start()

    def stop(self) -> None:
        """Ask every lane to finish its current job and leave; returns at once."""
        self._stop.set()
        for w in list(self._workers):
            w._stop_requested = True

    def wait(self) -> None:
        for thread in self._threads:
            while thread.is_alive():
                thread.join(0.2)  # short joins keep the main thread responsive to signals
        self.heartbeat.stop()

    def _lane(self, index: int) -> None:
        child = WorkerProcess()
        child.start()
        backoff = Backoff()
        try:
            while not self._stop.is_set():
                started = time.monotonic()
                if (self._run_worker(index, child)
                        and time.monotonic() - started >= LANE_STABLE_AFTER_S):
                    backoff.reset()
                # The worker could not register (Redis down) or its loop ended: try again,
                # waiting longer after each attempt that did not serve for a while, so a
                # lane that keeps failing neither spins nor floods the log.
                self._stop.wait(backoff.next())
        finally:
            child.kill()

    def _run_worker(self, index: int, child: WorkerProcess) -> bool:
        """Run one RQ worker on this lane until it stops; returns whether it registered."""
        name = f"toolcodec-{socket.gethostname()}-{os.getpid()}-{index}-{uuid.uuid4().hex[:6]}"
        try:
            conn = redis.Redis.from_url(self.redis_url, socket_connect_timeout=1.0,
                                        socket_timeout=5.0)
        except Exception as exc:
            log.error("lane %d: bad Redis URL: %s", index, exc)
            return False
        try:
            # RQ's constructor already talks to Redis (client name, address).
            worker = ToolcodecWorker(
                [self.queue], connection=conn, child=child, metrics=self.metrics,
                lanes=self.lanes, name=name, link=self.link,
                on_shutdown_command=self.stop if self.allow_redis_shutdown else None)
        except _REDIS_ERRORS as exc:
            self.link.failed(exc)
            conn.close()
            return False
        except Exception as exc:
            log.error("lane %d: could not create the RQ worker: %s", index, exc)
            conn.close()
            return False
        self._workers.append(worker)
        self.lanes.set(name, "idle")
        try:
            if not self._stop.is_set():
                worker.work(logging_level=logging.getLevelName(log.getEffectiveLevel()))
        except _REDIS_ERRORS as exc:
            self.link.failed(exc)
        except Exception as exc:
            log.error("lane %d: RQ worker loop ended: %s", index, exc)
        finally:
            self.lanes.set(name, None)
            self._workers.remove(worker)
            conn.close()
        return worker.registered


def run(redis_url: str, queue: str = "toolcodec", concurrency: int | None = None,
        metrics_port: int | None = None, max_chars: int | None = None,
        max_depth: int | None = None, allow_redis_shutdown: bool = False) -> int:
    """Run RQ workers until SIGTERM/SIGINT; the body of ``toolcodec worker``.

    :param redis_url: any URL :meth:`redis.Redis.from_url` accepts (password, TLS).
    :param queue: the RQ queue to serve.
    :param concurrency: lanes, i.e. jobs run at once (one child process each); by default
        the number of cores.
    :param metrics_port: serve prometheus metrics on this port when given.
    :param max_chars: ceiling on the text one job may have parsed (``TOOLCODEC_MAX_CHARS``);
        a job may ask for less, never more.
    :param max_depth: ceiling on nesting depth (``TOOLCODEC_MAX_DEPTH``), likewise.
    :param allow_redis_shutdown: obey RQ's ``shutdown`` command published on Redis (it then
        stops the whole process like SIGTERM); off by default, as anyone who can write to
        Redis could send it. No other command is ever obeyed.
    :returns: the process exit code.
    """
    for name, value in (("max_chars", max_chars), ("max_depth", max_depth)):
        if value is not None:
            os.environ[ENV_LIMITS[name]] = str(value)  # the lanes' children inherit it
    try:
        operator_limits()  # a bad ceiling stops the worker here, not in every job
    except LimitsError as exc:
        print(f"toolcodec worker: {exc}", file=sys.stderr)
        return 2
    if not logging.getLogger().handlers:
        logging.basicConfig(level=logging.WARNING, format="%(asctime)s %(name)s %(message)s")
    metrics = Metrics(side="worker")
    if metrics_port is not None:
        from prometheus_client import start_http_server

        start_http_server(metrics_port, registry=metrics.registry)
    supervisor = Supervisor(redis_url, queue, concurrency or os.cpu_count() or 1, metrics,
                            allow_redis_shutdown)

    def on_signal(signum: int, _frame: Any) -> None:
        if supervisor._stop.is_set():
            os._exit(1)  # second signal: do not wait for jobs in flight
        supervisor.stop()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    supervisor.start()
    supervisor.wait()
    return 0


def main(argv: list[str] | None = None) -> int:
    """``python -m toolcodec.worker.rq_worker --redis-url URL [--queue Q] [--concurrency N]``."""
    parser = argparse.ArgumentParser(prog="toolcodec worker", description=__doc__.split("\n")[0])
    parser.add_argument("--redis-url", required=True)
    parser.add_argument("--queue", default="toolcodec")
    parser.add_argument("--concurrency", type=int, default=None)
    parser.add_argument("--metrics-port", type=int, default=None)
    parser.add_argument("--max-chars", type=int, default=None)
    parser.add_argument("--max-depth", type=int, default=None)
    parser.add_argument("--allow-redis-shutdown", action="store_true")
    args = parser.parse_args(argv)
    return run(args.redis_url, args.queue, args.concurrency, args.metrics_port,
               args.max_chars, args.max_depth, args.allow_redis_shutdown)


if __name__ == "__main__":
    sys.exit(main())

