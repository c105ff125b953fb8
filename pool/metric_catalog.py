"""Every metric toolcodec exports, read from the collectors themselves (one place for names).

The dashboards and alert rules under ``grafana/`` and ``deploy/`` are checked against this:
a query may only name a series that some part of toolcodec really exports.
"""

from __future__ import annotations

from prometheus_client import CollectorRegistry


def exported_series() -> set[str]:
    """Sample names (``…_total``, ``…_bucket``, ``…_count``, ``…_sum``, gauges) of every
    toolcodec collector: the pool and workers, the HTTP service, the proxy, the retry helper."""
    from toolcodec.pool.proxy.chat import ProxyMetrics
    from toolcodec.pool.retry import retries_counter
    from toolcodec.pool.service.http_metrics import HttpMetrics
    from toolcodec.worker.metrics import Metrics

    registry = CollectorRegistry()
    Metrics(registry)
    HttpMetrics(registry)
    ProxyMetrics(registry)
    retries_counter(registry)
    names: set[str] = set()
    for family in registry.collect():
        kind = family.type
        if kind == "counter":
            names.add(family.name + "_total")
        elif kind == "histogram":
            names.update(family.name + s for s in ("_bucket", "_count", "_sum"))
        else:
            names.add(family.name)
    return names
