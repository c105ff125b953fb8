"""Prometheus metrics (names and labels as README "Metrics" states), caller side and worker side.

Outcomes are counted where they are known (the caller's side of the pool), which keeps the
numbers right however many workers die and respawn, and avoids prometheus_client's
multiprocess mode, which leaves a file behind for every dead process.

One job is counted once on a dashboard that sums every target: the caller side (serve, a
``Pool``) exports ``toolcodec_jobs_total`` and the other per-job series; an RQ worker's own
endpoint exports what its lanes ran under other names (``toolcodec_worker_jobs_total``, …,
:data:`WORKER_NAMES`), and no repair, path or result-error counts (the caller counts those
from the same envelopes).

Per-job counts stay off the hot path: :meth:`Metrics.observe` adds to plain integers under
one lock (about 1 µs), and a custom collector turns them into metric families when the
registry is scraped. A prometheus_client ``Counter`` and ``Histogram`` cost about nine
locked updates per job. The metric names are the constants below, in one place, so that
dashboards and alert rules can import them.

Every series a rule or a panel reads exists at 0 from the start (:meth:`Metrics.prime`, run by
serve, by a tracked pool and on a worker's endpoint): a counter that first appeared at its
first event would hide that event from ``increase()``.
"""

from __future__ import annotations

import bisect
import itertools
import logging
import os
import platform
import resource
import threading
import weakref
from collections.abc import Callable
from typing import Any

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.utils import floatToGoString
from toolcodec.results.errors import ALL_CODES
from toolcodec.worker.logs import LinesPerSecond, event

JOBS_TOTAL = "toolcodec_jobs_total"
JOB_DURATION_SECONDS = "toolcodec_job_duration_seconds"
QUEUE_DEPTH = "toolcodec_queue_depth"
WORKERS = "toolcodec_workers"
WORKER_RESTARTS_TOTAL = "toolcodec_worker_restarts_total"
REPAIRS_TOTAL = "toolcodec_repairs_total"
DECODE_PATH_TOTAL = "toolcodec_decode_path_total"
JOB_ERRORS_TOTAL = "toolcodec_job_errors_total"
TOOL_RESULTS_TOTAL = "toolcodec_tool_results_total"
RQ_JOBS_REFUSED_TOTAL = "toolcodec_rq_jobs_refused_total"
RESULT_ERRORS_TOTAL = "toolcodec_result_errors_total"
RQ_LIVE_WORKERS = "toolcodec_rq_live_workers"
RQ_REDIS_UP = "toolcodec_rq_redis_up"
BUILD_INFO = "toolcodec_build_info"

# name -> (HELP text, label names)
HELP: dict[str, tuple[str, tuple[str, ...]]] = {
    JOBS_TOTAL: (
        "Jobs by op, backend and outcome (success, failure, timeout, rejected, worker_lost).",
        ("op", "backend", "outcome")),
    JOB_DURATION_SECONDS: (
        "Job latency as the caller saw it, queueing included.", ("op", "backend")),
    QUEUE_DEPTH: ("Callers waiting for a free worker.", ("backend",)),
    WORKERS: ("Worker processes by state (idle, busy, starting).", ("backend", "state")),
    WORKER_RESTARTS_TOTAL: (
        "Worker processes replaced, by reason (timeout, crash).", ("backend", "reason")),
    REPAIRS_TOTAL: ("Repairs applied in returned results, by repair id.", ("repair",)),
    DECODE_PATH_TOTAL: ("Decoded outputs by the path that produced the calls.", ("path",)),
    JOB_ERRORS_TOTAL: (
        "Jobs that could not run (status error), by error code: bad_request, "
        "payload_too_large, internal_error, backend_unavailable. Counted as outcome "
        "failure in toolcodec_jobs_total too; this splits our failures from the caller's.",
        ("op", "backend", "code")),
    TOOL_RESULTS_TOTAL: (
        "Tool outputs checked by validate_result, by tool and mode (structured, repaired, "
        "raw_text); tools past the first 200 names are counted as tool=\"other\".",
        ("tool", "mode")),
    RQ_JOBS_REFUSED_TOTAL: (
        "Jobs found on the Redis queue that are not toolcodec jobs, refused unrun "
        "(reason: foreign_function, no_reply_to, bad_arguments, undecodable).", ("reason",)),
    RESULT_ERRORS_TOTAL: (
        "Results (status ok) that report an error code, by op and code (invalid_json, "
        "unknown_tool, schema_violation, nesting_too_deep, payload_too_large, ...; other "
        "for a code outside the documented set); a code counts once per result.",
        ("op", "code")),
    RQ_LIVE_WORKERS: (
        "RQ worker lanes with an unexpired heartbeat on this queue, by state, read from "
        "Redis at scrape time by toolcodec serve --backend rq (the same number on every "
        "replica: take max, not sum).", ("queue", "state")),
    RQ_REDIS_UP: (
        "1 when Redis answered the heartbeat read of this scrape, 0 when it did not "
        "(toolcodec serve --backend rq): the series that is there while Redis is down.",
        ("queue",)),
    BUILD_INFO: ("Always 1; the toolcodec version and Python version as labels.",
                 ("version", "python")),
}

# The worker side's names for the series both sides measure: an RQ worker's endpoint never
# exports a caller's name, so a dashboard summing every target counts each job once.
WORKER_NAMES: dict[str, str] = {
    JOBS_TOTAL: "toolcodec_worker_jobs_total",
    JOB_DURATION_SECONDS: "toolcodec_worker_job_duration_seconds",
    JOB_ERRORS_TOTAL: "toolcodec_worker_job_errors_total",
    QUEUE_DEPTH: "toolcodec_worker_queue_depth",
}

# What a worker process exports on its own --metrics-port: the same series, measured on the
# worker's side of the queue, so their HELP says so (a caller's HELP would mislead there).
WORKER_HELP: dict[str, str] = {
    JOBS_TOTAL: "Jobs this worker ran, by op, backend and outcome (success, failure, timeout, "
                "rejected, worker_lost), counted where they ran.",
    JOB_DURATION_SECONDS: "Job time measured in this worker, from taking the job off the queue "
                          "to replying (time waiting in Redis not included).",
    QUEUE_DEPTH: "Jobs waiting in the Redis queue this worker serves, read by the worker "
                 "(the same number on every worker of the queue: take max, not sum).",
    WORKERS: "This worker's lanes (child processes) by state (idle, busy, starting).",
    WORKER_RESTARTS_TOTAL: "This worker's lanes replaced, by reason (timeout, crash).",
    JOB_ERRORS_TOTAL: "Jobs this worker could not run (status error), by error code.",
}

# Dense around the 30-50 ms job budget, so a p99 can be read against it.
BUCKETS = (
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.02, 0.025, 0.03, 0.04, 0.05, 0.06,
    0.075, 0.1, 0.25, 0.5, 1.0,
)  # fmt: skip
_LE = [floatToGoString(b) for b in BUCKETS] + ["+Inf"]
MAX_TOOL_LABELS = 200
ERROR_CODES = frozenset({"bad_request", "payload_too_large", "internal_error",
                         "backend_unavailable", "nesting_too_deep"})
WORKER_STATES = ("idle", "busy", "starting")
RESULT_CODES = ALL_CODES  # label values: the documented codes, else "other"
OUTCOMES = ("success", "failure", "timeout", "rejected", "worker_lost")
RESTART_REASONS = ("timeout", "crash")
REFUSED_REASONS = ("foreign_function", "no_reply_to", "bad_arguments", "undecodable")

_workers_log = logging.getLogger("toolcodec.workers")  # a lane killed and re-forked
RESTART_LINES_PER_S = 5.0
_restart_lines = LinesPerSecond(RESTART_LINES_PER_S)
# One set of collectors per registry: a second Metrics on the same registry shares them
# instead of failing with "Duplicated timeseries".
_SHARED: weakref.WeakKeyDictionary[CollectorRegistry, _Shared] = weakref.WeakKeyDictionary()
_SHARED_LOCK = threading.Lock()


def outcome_of(envelope: dict) -> str:
    """Map an envelope to the ``outcome`` label (README "Metrics")."""
    status = envelope.get("status")
    if status == "ok":
        result = envelope.get("result")
        ok = result.get("ok", True) if isinstance(result, dict) else True
        return "success" if ok else "failure"
    if status in ("timeout", "rejected", "worker_lost"):
        return status
    return "failure"


class JobTally:
    """Per-job counts as plain integers, exported as metric families on collect."""

    def __init__(self, side: str = "caller") -> None:
        self.side = side
        self.lock = threading.Lock()
        self.jobs: dict[tuple[str, str, str], int] = {}
        self.durations: dict[tuple[str, str], list[float]] = {}  # bucket counts, then sum
        self.errors: dict[tuple[str, str, str], int] = {}
        self.repairs: dict[str, int] = {}
        self.paths: dict[str, int] = {}
        self.tool_results: dict[tuple[str, str], int] = {}
        self.result_errors: dict[tuple[str, str], int] = {}
        self.tools_seen: set[str] = set()

    def describe(self) -> list[Metric]:
        return self._families()

    def collect(self) -> list[Metric]:
        with self.lock:
            return self._families()

    def _families(self) -> list[Metric]:
        out: list[Metric] = []
        series = [(JOBS_TOTAL, self.jobs), (JOB_ERRORS_TOTAL, self.errors)]
        if self.side == "caller":  # results are read once, where the caller gets them
            series += [(REPAIRS_TOTAL, self.repairs), (DECODE_PATH_TOTAL, self.paths),
                       (TOOL_RESULTS_TOTAL, self.tool_results),
                       (RESULT_ERRORS_TOTAL, self.result_errors)]
        for name, counts in series:
            doc, labels = help_of(name, self.side)
            family = CounterMetricFamily(name_of(name, self.side), doc, labels=labels)
            for key, n in counts.items():
                family.add_metric(key if isinstance(key, tuple) else (key,), n)
            out.append(family)
        doc, labels = help_of(JOB_DURATION_SECONDS, self.side)
        out.append(histogram_family(name_of(JOB_DURATION_SECONDS, self.side), doc, labels,
                                    _LE, self.durations))
        return out


def observe_cells(cells: dict[Any, list[float]], key: Any, buckets: tuple[float, ...],
                  value: float) -> None:
    """Add *value* to the histogram *cells* of *key*: one count per bucket (``le``, sorted
    *buckets*, then +Inf) and the sum last. A value equal to a bound counts in that bound's
    bucket, as prometheus_client's ``Histogram`` counts it."""
    held = cells.get(key)
    if held is None:
        held = cells[key] = [0.0] * (len(buckets) + 2)
    held[bisect.bisect_left(buckets, value)] += 1
    held[-1] += value


def histogram_family(name: str, doc: str, labels: Any, le: list[str],
                     cells: dict[Any, list[float]]) -> HistogramMetricFamily:
    """The ``histogram`` family of :func:`observe_cells`' *cells* (*le*: the buckets' bounds
    as the exposition writes them, then ``+Inf``); each key's cells read in one copy."""
    family = HistogramMetricFamily(name, doc, labels=labels)
    for key, held in [(k, list(v)) for k, v in dict(cells).items()]:
        running, buckets = 0.0, []
        for bound, n in zip(le, held, strict=False):
            running += n
            buckets.append((bound, running))
        family.add_metric(key, buckets, sum_value=held[-1])
    return family


def name_of(name: str, side: str) -> str:
    """The name a metric has on ``side`` ("caller" or "worker")."""
    return WORKER_NAMES.get(name, name) if side == "worker" else name


def help_of(name: str, side: str) -> tuple[str, tuple[str, ...]]:
    """The HELP text and labels of a metric as ``side`` ("caller" or "worker") exports it."""
    doc, labels = HELP[name]
    return (WORKER_HELP.get(name, doc) if side == "worker" else doc), labels


class _Shared:
    """What every ``Metrics`` on one registry shares."""

    def __init__(self, registry: CollectorRegistry, side: str) -> None:
        self.tally = JobTally(side)
        registry.register(self.tally)
        registry.register(ChildCpu())
        self.queue_depth = Gauge(name_of(QUEUE_DEPTH, side), *help_of(QUEUE_DEPTH, side),
                                 registry=registry)
        self.workers = Gauge(WORKERS, *help_of(WORKERS, side), registry=registry)
        self.worker_restarts_total = Counter(
            WORKER_RESTARTS_TOTAL, *help_of(WORKER_RESTARTS_TOTAL, side), registry=registry)
        self.jobs_refused_total = Counter(
            RQ_JOBS_REFUSED_TOTAL, *HELP[RQ_JOBS_REFUSED_TOTAL], registry=registry)
        build = Gauge(BUILD_INFO, *HELP[BUILD_INFO], registry=registry)
        build.labels(_version(), platform.python_version()).set(1)
        self.primed: set[str] = set()
        # Live pools' gauge readers, by backend; summed when the registry is scraped.
        self.sources: dict[str, dict[int, Callable[[], dict[str, int]]]] = {}
        self.sources_lock = threading.Lock()
        self.source_ids = itertools.count()


class Metrics:
    """The toolcodec metrics on ``registry`` (the prometheus_client default one if None).

    ``side="worker"`` gives the series the HELP texts of a worker's own endpoint.
    :meth:`observe` counts a finished job; :meth:`restarted`, :meth:`refused` and the
    gauges (``queue_depth``, ``workers``: prometheus_client ``Gauge`` objects, or a pool's
    own counts read at scrape time through :meth:`track`) cover the rest.
    """

    def __init__(self, registry: CollectorRegistry | None = None, *,
                 side: str = "caller") -> None:
        self.registry = REGISTRY if registry is None else registry
        with _SHARED_LOCK:
            shared = _SHARED.get(self.registry)
            if shared is None:
                shared = _SHARED[self.registry] = _Shared(self.registry, side)
        self._shared = shared
        self.tally = shared.tally
        self.queue_depth: Gauge = shared.queue_depth
        self.workers: Gauge = shared.workers
        self.worker_restarts_total: Counter = shared.worker_restarts_total
        self.jobs_refused_total: Counter = shared.jobs_refused_total
        if side == "worker":  # a worker's endpoint counts RQ jobs only
            self.prime("rq")

    def prime(self, backend: str) -> None:
        """Create at 0 every series a dashboard or an alert rule reads for ``backend``:
        each public op's outcomes and error codes, the restart reasons (and, on a worker's
        side, the refusal reasons). A counter that first appears at its first event hides
        that event from ``increase()``; one that starts at 0 does not. Idempotent.
        """
        shared = self._shared
        with shared.sources_lock:
            if backend in shared.primed:
                return
            shared.primed.add(backend)
        tally = self.tally
        with tally.lock:
            for op in _public_ops():
                for outcome in OUTCOMES:
                    tally.jobs.setdefault((op, backend, outcome), 0)
                for code in sorted(ERROR_CODES):
                    tally.errors.setdefault((op, backend, code), 0)
        for reason in RESTART_REASONS:
            self.worker_restarts_total.labels(backend, reason)
        if tally.side == "worker":
            for reason in REFUSED_REASONS:
                self.jobs_refused_total.labels(reason)

    def observe(self, op: str, backend: str, envelope: dict) -> None:
        """Count one finished call: outcome, latency, and the repairs/path of its result.

        An op that is not one of the worker's is counted as ``op="unknown"``: label values
        must stay a small closed set whatever callers send.
        """
        if op not in _OPS and op not in _known_ops():  # a worker op needs no environment
            op = "unknown"
        status = envelope.get("status")
        result = envelope.get("result")
        elapsed_ms = envelope.get("elapsed_ms")
        if status == "ok" and type(result) is dict:  # outcome_of's answer, without its call
            outcome = "success" if result.get("ok", True) else "failure"
        else:
            outcome = outcome_of(envelope)
        tally = self.tally
        with tally.lock:
            key = (op, backend, outcome)
            jobs = tally.jobs
            jobs[key] = jobs.get(key, 0) + 1
            if isinstance(elapsed_ms, int | float):
                observe_cells(tally.durations, (op, backend), BUCKETS, elapsed_ms / 1000.0)
            if status == "error":
                code = (envelope.get("error") or {}).get("code")
                key = (op, backend, code if code in ERROR_CODES else "other")
                tally.errors[key] = tally.errors.get(key, 0) + 1
            elif status == "ok" and isinstance(result, dict):
                _count_result(tally, op, result)

    def restarted(self, backend: str, reason: str) -> None:
        """Count one worker replacement (``reason``: ``timeout`` or ``crash``), and log it
        (at most :data:`RESTART_LINES_PER_S` lines a second; the next says how many were
        left out: a burst of runaway jobs is one story, not a flood)."""
        self.worker_restarts_total.labels(backend, reason).inc()
        left_out = _restart_lines.admit()
        if left_out is not None:
            event(_workers_log, logging.WARNING, "worker_restarted", backend=backend,
                  reason=reason, **({"suppressed": left_out} if left_out else {}))

    def refused(self, reason: str) -> None:
        """Count one job refused by an RQ worker because it is not a toolcodec job."""
        self.jobs_refused_total.labels(reason).inc()

    def set_workers(self, backend: str, counts: dict[str, int]) -> None:
        """Set the ``workers`` gauge for every state in ``counts``."""
        for state, n in counts.items():
            self.workers.labels(backend, state).set(n)

    def track(self, backend: str, counts: Callable[[], dict[str, int]]) -> Callable[[], None]:
        """Report a pool's ``counts()`` (``idle``, ``busy``, ``starting``, ``waiting``) as
        the ``workers`` and ``queue_depth`` gauges, read at scrape time and summed over the
        pools tracked on this registry; returns the function that stops it."""
        self.prime(backend)
        shared = self._shared
        with shared.sources_lock:
            first = backend not in shared.sources
            sources = shared.sources.setdefault(backend, {})
            key = next(shared.source_ids)
            sources[key] = counts
        if first:
            def total(state: str) -> Callable[[], float]:
                return lambda: float(sum(f().get(state, 0) for f in list(sources.values())))

            for state in WORKER_STATES:
                self.workers.labels(backend, state).set_function(total(state))
            self.queue_depth.labels(backend).set_function(total("waiting"))

        def untrack() -> None:
            with shared.sources_lock:
                sources.pop(key, None)

        return untrack


def _count_result(tally: JobTally, op: str, result: dict) -> None:
    errors = result.get("errors")
    if errors and isinstance(errors, list):
        codes = {e.get("code") for e in errors if isinstance(e, dict)}
        for code in codes:
            key = (op, code if code in RESULT_CODES else "other")
            tally.result_errors[key] = tally.result_errors.get(key, 0) + 1
    repairs = result.get("repairs")
    if repairs and isinstance(repairs, list):
        for repair in repairs:
            if isinstance(repair, str):
                tally.repairs[repair] = tally.repairs.get(repair, 0) + 1
    if op == "decode":
        path = result.get("path")
        if isinstance(path, str):
            tally.paths[path] = tally.paths.get(path, 0) + 1
    elif op == "validate_result":
        tool, mode = result.get("tool"), result.get("mode")
        if isinstance(mode, str):
            seen = tally.tools_seen
            if not isinstance(tool, str) or (tool not in seen and len(seen) >= MAX_TOOL_LABELS):
                tool = "other"  # tool names come from callers: keep the label set bounded
            seen.add(tool)
            key = (tool, mode)
            tally.tool_results[key] = tally.tool_results.get(key, 0) + 1


def _version() -> str:
    from toolcodec import __version__  # imported on use: the package imports this module

    return __version__


def _public_ops() -> tuple[str, ...]:
    from toolcodec.worker.jobs import PUBLIC_OPS  # imported on use: jobs imports the codec

    return tuple(PUBLIC_OPS)


_KNOWN_OPS: list[frozenset[str]] = []  # [public ops, public + fault ops]
# The worker's own ops, always known (the job ops' names: jobs imports the codec, and this
# module must not). Checked first: every job is counted, and reading the environment for
# the fault-injection switch cost more than the rest of the count.
_OPS = frozenset({"decode", "repair", "validate", "kindaxml", "validate_result",
                  "decode_block", "prepare"})
_FAULT_ENV: list[str] = []


def _known_ops() -> frozenset[str]:
    if not _KNOWN_OPS:  # imported on first use: jobs imports the codec
        from toolcodec.worker.faults import FAULT_OPS
        from toolcodec.worker.jobs import FAULT_ENV, OPS

        _KNOWN_OPS.append(frozenset(OPS))
        _KNOWN_OPS.append(frozenset(OPS) | frozenset(FAULT_OPS))
        _FAULT_ENV.append(FAULT_ENV)
    # Fault-injection ops are ops only where the operator enabled them.
    return _KNOWN_OPS[1] if os.environ.get(_FAULT_ENV[0]) == "1" else _KNOWN_OPS[0]


class LiveWorkers:
    """``toolcodec_rq_live_workers{queue, state}``: heartbeats read from Redis at scrape time,
    and ``toolcodec_rq_redis_up{queue}``: whether that read succeeded.

    ``read()`` returns lanes by state (:func:`toolcodec.worker.heartbeat.live_lanes`); when it
    raises (Redis down), no lane count is exported (an unknown count is not shown as a
    number) and ``toolcodec_rq_redis_up`` is 0, so an alert has a series to fire on.
    """

    def __init__(self, queue: str, read: Callable[[], dict[str, int]]) -> None:
        self.queue, self.read = queue, read

    def describe(self) -> list[Metric]:
        return self._families()

    def collect(self) -> list[Metric]:
        family, up = self._families()
        try:
            counts = self.read()
        except Exception:  # noqa: BLE001 - a scrape must not fail because Redis is down
            up.add_metric((self.queue,), 0)
            return [family, up]
        up.add_metric((self.queue,), 1)
        for state in WORKER_STATES:
            family.add_metric((self.queue, state), counts.get(state, 0))
        return [family, up]

    @staticmethod
    def _families() -> list[GaugeMetricFamily]:
        return [GaugeMetricFamily(name, HELP[name][0], labels=HELP[name][1])
                for name in (RQ_LIVE_WORKERS, RQ_REDIS_UP)]


CHILD_CPU_SECONDS_TOTAL = "toolcodec_child_cpu_seconds_total"
HELP[CHILD_CPU_SECONDS_TOTAL] = (
    "CPU seconds (user + system) of this process's child processes, where the decoding runs "
    "(process_cpu_seconds_total counts only the parent): live children read from /proc, "
    "plus every child already reaped.", ())


class ChildCpu:
    """``toolcodec_child_cpu_seconds_total``: the worker processes' CPU, read at scrape time.

    Live children are found by their parent pid in ``/proc`` (Linux); children that have
    exited and been waited for are in ``getrusage(RUSAGE_CHILDREN)``. The total never goes
    down (a child between its exit and its reaping is briefly in neither).
    """

    def __init__(self) -> None:
        self._last = 0.0
        self._lock = threading.Lock()
        try:
            self._tick = float(os.sysconf("SC_CLK_TCK"))
        except (ValueError, OSError, AttributeError):
            self._tick = 100.0

    def describe(self) -> list[Metric]:
        return [CounterMetricFamily(CHILD_CPU_SECONDS_TOTAL, HELP[CHILD_CPU_SECONDS_TOTAL][0])]

    def collect(self) -> list[Metric]:
        reaped = resource.getrusage(resource.RUSAGE_CHILDREN)
        total = reaped.ru_utime + reaped.ru_stime + self._live_children()
        with self._lock:
            self._last = total = max(total, self._last)
        return [CounterMetricFamily(CHILD_CPU_SECONDS_TOTAL, HELP[CHILD_CPU_SECONDS_TOTAL][0],
                                    value=total)]

    def _live_children(self) -> float:
        me, ticks = os.getpid(), 0
        try:
            entries = os.listdir("/proc")
        except OSError:
            return 0.0
        for entry in entries:
            if not entry.isdigit():
                continue
            try:
                with open(f"/proc/{entry}/stat", "rb") as f:
                    stat = f.read()
            except OSError:
                continue  # gone meanwhile
            fields = stat[stat.rfind(b")") + 2:].split()  # the name may hold spaces
            if len(fields) > 12 and int(fields[1]) == me:  # ppid; utime, stime follow
                ticks += int(fields[11]) + int(fields[12])
        return ticks / self._tick
