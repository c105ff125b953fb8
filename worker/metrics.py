"""Prometheus metrics (names and labels as README "Metrics" states), counted by the caller.

Outcomes are counted where they are known (the caller's side of the pool), which keeps the
numbers right however many workers die and respawn, and avoids prometheus_client's
multiprocess mode, which leaves a file behind for every dead process.
"""

from __future__ import annotations

import threading
import weakref
from typing import Any

from prometheus_client import REGISTRY, CollectorRegistry, Counter, Gauge, Histogram

BUCKETS = (
    0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0,
)  # fmt: skip
MAX_TOOL_LABELS = 200
ERROR_CODES = frozenset({"bad_request", "payload_too_large", "internal_error",
                         "backend_unavailable", "nesting_too_deep"})
OUTCOMES = ("success", "failure", "timeout", "rejected", "worker_lost")

# One set of collectors per registry: a second Metrics on the same registry reuses them
# instead of failing with "Duplicated timeseries".
_SHARED: weakref.WeakKeyDictionary[CollectorRegistry, dict[str, Any]] = weakref.WeakKeyDictionary()
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


def _create(registry: CollectorRegistry) -> dict[str, Any]:
    return {
        "jobs_total": Counter(
            "toolcodec_jobs_total",
            "Jobs by op, backend and outcome (success, failure, timeout, rejected, worker_lost).",
            ["op", "backend", "outcome"],
            registry=registry,
        ),
        "job_duration_seconds": Histogram(
            "toolcodec_job_duration_seconds",
            "Job latency as the caller saw it, queueing included.",
            ["op", "backend"],
            buckets=BUCKETS,
            registry=registry,
        ),
        "queue_depth": Gauge(
            "toolcodec_queue_depth",
            "Callers waiting for a free worker.",
            ["backend"],
            registry=registry,
        ),
        "workers": Gauge(
            "toolcodec_workers",
            "Worker processes by state (idle, busy, starting).",
            ["backend", "state"],
            registry=registry,
        ),
        "worker_restarts_total": Counter(
            "toolcodec_worker_restarts_total",
            "Worker processes replaced, by reason (timeout, crash).",
            ["backend", "reason"],
            registry=registry,
        ),
        "repairs_total": Counter(
            "toolcodec_repairs_total",
            "Repairs applied in returned results, by repair id.",
            ["repair"],
            registry=registry,
        ),
        "decode_path_total": Counter(
            "toolcodec_decode_path_total",
            "Decoded outputs by the path that produced the calls.",
            ["path"],
            registry=registry,
        ),
        "job_errors_total": Counter(
            "toolcodec_job_errors_total",
            "Jobs that could not run (status error), by error code: bad_request, "
            "payload_too_large, internal_error, backend_unavailable. Counted as outcome "
            "failure in toolcodec_jobs_total too; this splits our failures from the caller's.",
            ["op", "backend", "code"],
            registry=registry,
        ),
        "tool_results_total": Counter(
            "toolcodec_tool_results_total",
            "Tool outputs checked by validate_result, by tool and mode (structured, repaired, "
            "raw_text); tools past the first 200 names are counted as tool=\"other\".",
            ["tool", "mode"],
            registry=registry,
        ),
        "jobs_refused_total": Counter(
            "toolcodec_rq_jobs_refused_total",
            "Jobs found on the Redis queue that are not toolcodec jobs, refused unrun "
            "(reason: foreign_function, no_reply_to, bad_arguments, undecodable).",
            ["reason"],
            registry=registry,
        ),
    }


class Metrics:
    """The toolcodec metric objects, registered on ``registry`` (the default one if None).

    Attributes are the prometheus_client collectors: ``jobs_total``,
    ``job_duration_seconds``, ``queue_depth``, ``workers``, ``worker_restarts_total``,
    ``repairs_total``, ``decode_path_total``.
    """

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = REGISTRY if registry is None else registry
        with _SHARED_LOCK:
            found = _SHARED.get(self.registry)
            if found is None:
                found = _SHARED[self.registry] = _create(self.registry)
        self.jobs_total: Counter = found["jobs_total"]
        self.job_duration_seconds: Histogram = found["job_duration_seconds"]
        self.queue_depth: Gauge = found["queue_depth"]
        self.workers: Gauge = found["workers"]
        self.worker_restarts_total: Counter = found["worker_restarts_total"]
        self.repairs_total: Counter = found["repairs_total"]
        self.decode_path_total: Counter = found["decode_path_total"]
        self.jobs_refused_total: Counter = found["jobs_refused_total"]
        self.tool_results_total: Counter = found["tool_results_total"]
        self.job_errors_total: Counter = found["job_errors_total"]
        self._tools_seen: set[str] = set()
        # labels() takes a lock and builds a key on every call (about 0.8 us): the hot path
        # keeps the children it has used. Label sets are few (ops x outcomes, repair ids,
        # paths), so these stay small.
        self._children: dict[tuple, Any] = {}
        self._repairs: dict[str, Any] = {}
        self._paths: dict[str, Any] = {}

    def observe(self, op: str, backend: str, envelope: dict) -> None:
        """Count one finished call: outcome, latency, and the repairs/path of its result.

        An op that is not one of the worker's is counted as ``op="unknown"``: label values
        must stay a small closed set whatever callers send.
        """
        if op not in _known_ops():
            op = "unknown"
        outcome = outcome_of(envelope)
        jobs = self._children.get((op, backend, outcome))
        if jobs is None:
            jobs = self._children[op, backend, outcome] = self.jobs_total.labels(
                op, backend, outcome
            )
        jobs.inc()
        elapsed_ms = envelope.get("elapsed_ms")
        if isinstance(elapsed_ms, int | float):
            latency = self._children.get((op, backend))
            if latency is None:
                latency = self._children[op, backend] = self.job_duration_seconds.labels(
                    op, backend
                )
            latency.observe(elapsed_ms / 1000.0)
        result = envelope.get("result")
        if envelope.get("status") == "error":
            code = (envelope.get("error") or {}).get("code")
            self.job_errors_total.labels(op, backend, code if code in ERROR_CODES
                                         else "other").inc()
        if envelope.get("status") != "ok" or not isinstance(result, dict):
            return
        repairs = result.get("repairs")
        if repairs and isinstance(repairs, list):
            for repair in _strings(repairs):
                child = self._repairs.get(repair)
                if child is None:
                    child = self._repairs[repair] = self.repairs_total.labels(repair)
                child.inc()
        if op == "validate_result":
            self._tool_result(envelope, result)
        path = result.get("path")
        if op == "decode" and isinstance(path, str):
            child = self._paths.get(path)
            if child is None:
                child = self._paths[path] = self.decode_path_total.labels(path)
            child.inc()

    def _tool_result(self, envelope: dict, result: dict) -> None:
        tool, mode = result.get("tool"), result.get("mode")
        if not isinstance(mode, str):
            return
        if not isinstance(tool, str) or (tool not in self._tools_seen
                                         and len(self._tools_seen) >= MAX_TOOL_LABELS):
            tool = "other"  # tool names come from callers: keep the label set bounded
        self._tools_seen.add(tool)
        self.tool_results_total.labels(tool, mode).inc()

    def refused(self, reason: str) -> None:
        """Count one job refused by an RQ worker because it is not a toolcodec job."""
        self.jobs_refused_total.labels(reason).inc()

    def restarted(self, backend: str, reason: str) -> None:
        """Count one worker replacement (``reason``: ``timeout`` or ``crash``)."""
        self.worker_restarts_total.labels(backend, reason).inc()

    def set_workers(self, backend: str, counts: dict[str, int]) -> None:
        """Set the ``workers`` gauge for every state in ``counts``."""
        for state, n in counts.items():
            self.workers.labels(backend, state).set(n)


_KNOWN_OPS: list[frozenset[str]] = []


def _known_ops() -> frozenset[str]:
    if not _KNOWN_OPS:  # imported on first use: jobs imports the codec
        from worker.faults import FAULT_OPS
        from worker.jobs import OPS

        _KNOWN_OPS.append(frozenset(OPS) | frozenset(FAULT_OPS))
    return _KNOWN_OPS[0]


def _strings(value: Any) -> list[str]:
    return [v for v in value if isinstance(v, str)] if isinstance(value, list) else []
