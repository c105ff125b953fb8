"""worker.metrics.Metrics: the documented names, outcome mapping, repairs and decode paths."""

from __future__ import annotations

import pytest
from prometheus_client import REGISTRY, CollectorRegistry, generate_latest

from worker.metrics import Metrics


@pytest.fixture
def registry() -> CollectorRegistry:
    return CollectorRegistry()


def value(registry: CollectorRegistry, name: str, **labels: str) -> float:
    return registry.get_sample_value(name, labels) or 0.0


def env(status: str, result: dict | None = None, elapsed_ms: float = 2.0) -> dict:
    return {"status": status, "op": "decode", "backend": "process", "result": result,
            "error": None, "elapsed_ms": elapsed_ms}  # fmt: skip


def test_two_metrics_on_the_default_registry_share_collectors() -> None:
    first, second = Metrics(), Metrics()
    assert first.jobs_total is second.jobs_total
    assert first.registry is REGISTRY


def test_separate_registries_count_separately() -> None:
    a_reg, b_reg = CollectorRegistry(), CollectorRegistry()
    Metrics(a_reg).observe("repair", "process", env("ok", {"ok": True}))
    assert value(a_reg, "toolcodec_jobs_total", op="repair", backend="process",
                 outcome="success") == 1  # fmt: skip
    assert value(b_reg, "toolcodec_jobs_total", op="repair", backend="process",
                 outcome="success") == 0  # fmt: skip


def test_every_design_metric_name_is_exposed(registry: CollectorRegistry) -> None:
    m = Metrics(registry)
    m.observe("decode", "rq", env("ok", {"ok": True, "path": "xml", "repairs": ["a.b"]}))
    m.restarted("rq", "crash")
    m.queue_depth.labels("rq").set(0)
    m.set_workers("rq", {"idle": 1})
    text = generate_latest(registry).decode()
    for name in (
        "toolcodec_jobs_total",
        "toolcodec_job_duration_seconds_bucket",
        "toolcodec_queue_depth",
        "toolcodec_workers",
        "toolcodec_worker_restarts_total",
        "toolcodec_repairs_total",
        "toolcodec_decode_path_total",
    ):
        assert name in text
    assert 'le="0.0001"' in text and 'le="1.0"' in text


@pytest.mark.parametrize(
    ("envelope", "outcome"),
    [
        (env("ok", {"ok": True}), "success"),
        (env("ok", {"slept": 0.0}), "success"),  # results without "ok" ran fine
        (env("ok", {"ok": False}), "failure"),
        (env("error"), "failure"),
        (env("timeout"), "timeout"),
        (env("rejected"), "rejected"),
        (env("worker_lost"), "worker_lost"),
    ],
)
def test_outcome_mapping(registry: CollectorRegistry, envelope: dict, outcome: str) -> None:
    Metrics(registry).observe("decode", "process", envelope)
    for name in ("success", "failure", "timeout", "rejected", "worker_lost"):
        expected = 1 if name == outcome else 0
        assert value(registry, "toolcodec_jobs_total", op="decode", backend="process",
                     outcome=name) == expected  # fmt: skip


def test_latency_goes_to_the_histogram_in_seconds(registry: CollectorRegistry) -> None:
    m = Metrics(registry)
    for ms in (0.05, 3.0, 40.0):
        m.observe("validate", "process", env("ok", {"ok": True}, elapsed_ms=ms))
    labels = {"op": "validate", "backend": "process"}
    assert value(registry, "toolcodec_job_duration_seconds_count", **labels) == 3
    assert value(registry, "toolcodec_job_duration_seconds_sum", **labels) == pytest.approx(0.04305)
    assert value(registry, "toolcodec_job_duration_seconds_bucket", le="0.005", **labels) == 2


def test_repairs_and_decode_paths_come_from_results(registry: CollectorRegistry) -> None:
    m = Metrics(registry)
    result = {"ok": True, "path": "json", "repairs": ["json.trailing_comma", "json.unclosed"]}
    m.observe("decode", "process", env("ok", result))
    m.observe("decode", "process", env("ok", {**result, "path": "xml", "repairs": []}))
    m.observe("repair", "process", env("ok", {"ok": True, "repairs": ["json.trailing_comma"]}))
    m.observe("decode", "process", env("timeout"))  # no result: nothing to count
    assert value(registry, "toolcodec_repairs_total", repair="json.trailing_comma") == 2
    assert value(registry, "toolcodec_repairs_total", repair="json.unclosed") == 1
    assert value(registry, "toolcodec_decode_path_total", path="json") == 1
    assert value(registry, "toolcodec_decode_path_total", path="xml") == 1
    # only decode results carry a path worth counting
    assert value(registry, "toolcodec_decode_path_total", path="none") == 0


def test_restarts_by_reason(registry: CollectorRegistry) -> None:
    m = Metrics(registry)
    m.restarted("process", "timeout")
    m.restarted("process", "timeout")
    m.restarted("process", "crash")
    name = "toolcodec_worker_restarts_total"
    assert value(registry, name, backend="process", reason="timeout") == 2
    assert value(registry, name, backend="process", reason="crash") == 1
