"""toolcodec.worker.metrics.Metrics: documented names, outcome mapping, repairs and decode paths."""

from __future__ import annotations

import subprocess
import sys
import threading

import pytest
from prometheus_client import REGISTRY, CollectorRegistry, generate_latest
from toolcodec.worker import metrics as names
from toolcodec.worker.metrics import HELP, LiveWorkers, Metrics


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
    assert first.tally is second.tally and first.workers is second.workers
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


def test_a_burst_of_restarts_is_counted_whole_and_logged_a_few_lines_a_second(
        registry: CollectorRegistry, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level("WARNING", "toolcodec.workers")
    names._restart_lines._second = -1  # a fresh second for this burst
    m = Metrics(registry)
    for _ in range(40):
        m.restarted("process", "timeout")
    assert value(registry, "toolcodec_worker_restarts_total", backend="process",
                 reason="timeout") == 40
    logged = [r for r in caplog.records if r.name == "toolcodec.workers"]
    assert 1 <= len(logged) <= 2 * names.RESTART_LINES_PER_S  # the burst may span a second


def test_exposition_keeps_the_documented_names_types_and_help(
    registry: CollectorRegistry,
) -> None:
    m = Metrics(registry)
    m.observe("decode", "process", env("ok", {"ok": True, "path": "xml", "repairs": ["a.b"]}))
    m.observe("decode", "process", env("error") | {"error": {"code": "bad_request"}})
    m.observe("validate_result", "process", env("ok", {"ok": True, "tool": "t",
                                                       "mode": "structured"}))
    registry.register(LiveWorkers("q", lambda: {"idle": 1}))
    text = generate_latest(registry).decode()
    kinds = {names.JOB_DURATION_SECONDS: "histogram", names.QUEUE_DEPTH: "gauge",
             names.WORKERS: "gauge", names.RQ_LIVE_WORKERS: "gauge",
             names.RQ_REDIS_UP: "gauge", names.BUILD_INFO: "gauge"}
    for name, (doc, _labels) in HELP.items():
        assert f"# HELP {name} {doc}\n# TYPE {name} {kinds.get(name, 'counter')}\n" in text
    assert 'toolcodec_jobs_total{backend="process",op="decode",outcome="success"} 1.0' in text
    assert 'toolcodec_job_errors_total{backend="process",code="bad_request",op="decode"} 1.0' \
        in text
    assert 'toolcodec_tool_results_total{mode="structured",tool="t"} 1.0' in text


def test_counts_from_many_threads_are_exact(registry: CollectorRegistry) -> None:
    m = Metrics(registry)

    def work() -> None:
        for _ in range(500):
            m.observe("repair", "process", env("ok", {"ok": True, "repairs": ["json.x"]}))

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    labels = {"op": "repair", "backend": "process"}
    assert value(registry, "toolcodec_jobs_total", outcome="success", **labels) == 4000
    assert value(registry, "toolcodec_job_duration_seconds_count", **labels) == 4000
    assert value(registry, "toolcodec_repairs_total", repair="json.x") == 4000


def test_tracked_pools_are_read_at_scrape_time_and_summed(registry: CollectorRegistry) -> None:
    m = Metrics(registry)
    a = {"idle": 1, "busy": 1, "starting": 0, "waiting": 3}
    stop_a = m.track("process", lambda: a)
    stop_b = Metrics(registry).track("process", lambda: {"idle": 2, "busy": 0, "starting": 1,
                                                         "waiting": 0})
    assert value(registry, "toolcodec_workers", backend="process", state="idle") == 3
    assert value(registry, "toolcodec_queue_depth", backend="process") == 3
    a["waiting"] = 0  # read when scraped, never a stale copy
    assert value(registry, "toolcodec_queue_depth", backend="process") == 0
    stop_a()
    assert value(registry, "toolcodec_workers", backend="process", state="idle") == 2
    stop_b()
    assert value(registry, "toolcodec_workers", backend="process", state="starting") == 0


def test_ops_outside_the_closed_set_are_counted_as_unknown(registry: CollectorRegistry) -> None:
    m = Metrics(registry)
    for op in ("x" * 50, "drop table", "decode2"):
        m.observe(op, "process", env("error"))
    assert value(registry, "toolcodec_jobs_total", op="unknown", backend="process",
                 outcome="failure") == 3
    assert "decode2" not in generate_latest(registry).decode()


def test_the_ops_counted_without_the_environment_are_the_workers_ops() -> None:
    from toolcodec.worker.jobs import OPS

    assert names._OPS == frozenset(OPS)


def test_the_worker_side_never_exports_a_callers_per_job_name() -> None:
    """A dashboard summing every target counts a job once: the caller's names are not on a
    worker's endpoint, and results (repairs, paths, error codes) are counted by the caller."""
    caller, worker = CollectorRegistry(), CollectorRegistry()
    result = {"ok": False, "path": "json", "repairs": ["json.x"],
              "errors": [{"code": "schema_violation", "message": "m"}]}
    Metrics(caller).observe("decode", "rq", env("ok", result))
    w = Metrics(worker, side="worker")
    w.observe("decode", "rq", env("ok", result))
    w.queue_depth.labels("rq").set(4)
    caller_names = {s.name for f in caller.collect() for s in f.samples}
    worker_names = {s.name for f in worker.collect() for s in f.samples}
    assert "toolcodec_jobs_total" in caller_names
    assert value(worker, "toolcodec_worker_jobs_total", op="decode", backend="rq",
                 outcome="failure") == 1
    assert value(worker, "toolcodec_worker_job_duration_seconds_count", op="decode",
                 backend="rq") == 1
    assert value(worker, "toolcodec_worker_queue_depth", backend="rq") == 4
    per_job = {"toolcodec_jobs_total", "toolcodec_job_duration_seconds_count",
               "toolcodec_repairs_total", "toolcodec_decode_path_total",
               "toolcodec_result_errors_total", "toolcodec_queue_depth",
               "toolcodec_job_errors_total"}
    assert not per_job & worker_names, per_job & worker_names


def test_result_error_codes_are_counted_once_per_result(registry: CollectorRegistry) -> None:
    m = Metrics(registry)
    errors = [{"code": "schema_violation", "message": "a"},
              {"code": "schema_violation", "message": "b"},
              {"code": "unknown_tool", "message": "c"}, {"code": "made_up", "message": "d"}]
    m.observe("decode", "process", env("ok", {"ok": False, "errors": errors}))
    m.observe("decode", "process", env("ok", {"ok": True, "errors": []}))
    name = "toolcodec_result_errors_total"
    assert value(registry, name, op="decode", code="schema_violation") == 1
    assert value(registry, name, op="decode", code="unknown_tool") == 1
    assert value(registry, name, op="decode", code="other") == 1  # label values stay closed


def test_buckets_bracket_the_job_budget(registry: CollectorRegistry) -> None:
    m = Metrics(registry)
    for ms in (28, 35, 45, 55):
        m.observe("repair", "process", env("ok", {"ok": True}, elapsed_ms=ms))
    labels = {"op": "repair", "backend": "process"}
    got = [value(registry, "toolcodec_job_duration_seconds_bucket", le=le, **labels)
           for le in ("0.025", "0.03", "0.04", "0.05", "0.06")]
    assert got == [0, 1, 2, 3, 4]


def test_child_cpu_counts_live_children_and_keeps_them_after_they_exit(
        registry: CollectorRegistry) -> None:
    """The decoding runs in child processes; process_cpu_seconds_total leaves them out."""
    Metrics(registry)

    def cpu() -> float:
        return value(registry, "toolcodec_child_cpu_seconds_total")

    before = cpu()
    child = subprocess.Popen([sys.executable, "-c", "while True: pass"])
    try:
        while cpu() < before + 0.2:  # read from /proc while the child runs
            assert child.poll() is None
    finally:
        child.kill()
        child.wait()
    assert cpu() >= before + 0.2  # reaped: now in RUSAGE_CHILDREN, never lower


def test_every_series_a_rule_reads_exists_at_zero_from_the_start(
        registry: CollectorRegistry) -> None:
    """A counter first seen at its first event hides that event from increase(): the first
    crash of every worker would read as 0 restarts. Primed series start at 0 instead."""
    from toolcodec.worker.jobs import PUBLIC_OPS

    m = Metrics(registry)
    assert registry.get_sample_value("toolcodec_worker_restarts_total",
                                     {"backend": "rq", "reason": "crash"}) is None
    m.prime("rq")
    m.prime("rq")  # idempotent
    for reason in ("crash", "timeout"):
        assert registry.get_sample_value("toolcodec_worker_restarts_total",
                                         {"backend": "rq", "reason": reason}) == 0.0
    for op in PUBLIC_OPS:
        for outcome in ("success", "failure", "timeout", "rejected", "worker_lost"):
            assert registry.get_sample_value("toolcodec_jobs_total", {
                "op": op, "backend": "rq", "outcome": outcome}) == 0.0
        assert registry.get_sample_value("toolcodec_job_errors_total", {
            "op": op, "backend": "rq", "code": "backend_unavailable"}) == 0.0
    m.restarted("rq", "crash")
    m.observe("decode", "rq", env("timeout"))
    assert value(registry, "toolcodec_worker_restarts_total", backend="rq", reason="crash") == 1
    assert value(registry, "toolcodec_jobs_total", op="decode", backend="rq",
                 outcome="timeout") == 1


def test_a_tracked_pool_and_a_workers_endpoint_are_primed(registry: CollectorRegistry) -> None:
    Metrics(registry).track("process", dict)
    assert registry.get_sample_value("toolcodec_worker_restarts_total",
                                     {"backend": "process", "reason": "timeout"}) == 0.0
    worker = CollectorRegistry()
    Metrics(worker, side="worker")
    assert worker.get_sample_value("toolcodec_worker_jobs_total", {
        "op": "decode", "backend": "rq", "outcome": "worker_lost"}) == 0.0
    assert worker.get_sample_value("toolcodec_rq_jobs_refused_total",
                                   {"reason": "foreign_function"}) == 0.0


def test_build_info_names_the_version(registry: CollectorRegistry) -> None:
    import platform

    from toolcodec import __version__

    Metrics(registry)
    assert registry.get_sample_value("toolcodec_build_info", {
        "version": __version__, "python": platform.python_version()}) == 1.0


def test_redis_up_is_exported_while_redis_is_down() -> None:
    registry = CollectorRegistry()

    def down() -> dict[str, int]:
        raise ConnectionError("Redis is down")

    registry.register(LiveWorkers("q", down))
    assert registry.get_sample_value("toolcodec_rq_redis_up", {"queue": "q"}) == 0.0
    assert registry.get_sample_value("toolcodec_rq_live_workers",
                                     {"queue": "q", "state": "idle"}) is None
    up = CollectorRegistry()
    up.register(LiveWorkers("q", lambda: {"idle": 2}))
    assert up.get_sample_value("toolcodec_rq_redis_up", {"queue": "q"}) == 1.0
