"""Every metric toolcodec exports, read from the collectors themselves (one place for names).

The dashboards and alert rules under ``grafana/`` and ``deploy/`` are checked against this:
a query may only name a series that some part of toolcodec really exports, and the promtool
cases may only feed series with the labels a real process gives them.
"""

from __future__ import annotations

from typing import Any

from prometheus_client import CollectorRegistry


def exported_labels() -> dict[str, frozenset[str]]:
    """Sample name (``…_total``, ``…_bucket``, ``…_count``, ``…_sum``, gauges) -> its label
    names, for every toolcodec collector: the caller side (a pool, the HTTP service, the proxy,
    the retry helper, serve's heartbeat reader) and an RQ worker's side."""
    from toolcodec.pool.proxy.chat import ProxyMetrics
    from toolcodec.pool.retry import retries_counter
    from toolcodec.pool.service.http_metrics import HttpMetrics
    from toolcodec.worker.metrics import LiveWorkers, Metrics

    caller, worker = CollectorRegistry(), CollectorRegistry()
    for metrics in (Metrics(caller), Metrics(worker, side="worker")):
        _observe_every_kind(metrics)
    HttpMetrics(caller)
    ProxyMetrics(caller)
    retries_counter(caller)
    caller.register(LiveWorkers("q", dict))
    labels: dict[str, frozenset[str]] = {}
    for registry in (caller, worker):
        for collector in list(registry._collector_to_names):  # noqa: SLF001 - no public list
            declared = getattr(collector, "_labelnames", None)
            for family in collector.collect():
                names = (frozenset(declared) if declared is not None
                         else frozenset(k for s in family.samples for k in s.labels) - {"le"})
                for sample in _sample_names(family):
                    labels[sample] = names | ({"le"} if sample.endswith("_bucket") else set())
    return labels


def exported_series() -> set[str]:
    """The sample names of :func:`exported_labels`."""
    return set(exported_labels())


def _sample_names(family: Any) -> list[str]:
    if family.type == "counter":
        return [family.name + "_total"]
    if family.type == "histogram":
        return [family.name + s for s in ("_bucket", "_count", "_sum")]
    return [family.name]


def _observe_every_kind(metrics: Any) -> None:
    """One job of each kind, so that every per-job family has a sample to read labels from."""
    result = {"ok": False, "path": "json", "repairs": ["json.x"],
              "errors": [{"code": "schema_violation"}]}
    metrics.observe("decode", "process", {"status": "ok", "result": result, "elapsed_ms": 1.0})
    metrics.observe("validate_result", "process",
                    {"status": "ok", "result": {"tool": "t", "mode": "raw_text"}})
    metrics.observe("decode", "process", {"status": "error", "error": {"code": "bad_request"}})
