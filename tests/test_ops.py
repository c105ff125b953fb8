"""deploy/ and grafana/: every query runs on a real Prometheus scraping the real service.

A real ``prometheus`` (Debian's package) scrapes a running ``toolcodec serve`` and a
``toolcodec worker`` on free ports while a short load with faults runs; then every dashboard
panel query and every recording and alert expression is run through Prometheus' HTTP API.
The static checks: promtool, docker-compose, kubernetes-validate, and the generated files.
"""

from __future__ import annotations

import importlib.util
import re
import shutil
import subprocess
import sys
import time
from pathlib import Path

import httpx
import orjson
import pytest
import yaml
from toolcodec.pool import Pool
from toolcodec.pool.metric_catalog import exported_series

from tests.redis_server import free_port
from tests.serve_process import ServeProcess

ROOT = Path(__file__).resolve().parent.parent
RULES = ROOT / "deploy" / "prometheus" / "rules" / "toolcodec.yml"
spec = importlib.util.spec_from_file_location("deploy_generate", ROOT / "deploy" / "generate.py")
generate = importlib.util.module_from_spec(spec)
sys.modules["deploy_generate"] = generate  # dataclasses look their module up
spec.loader.exec_module(generate)


def tool(name: str) -> str:
    path = shutil.which(name)
    assert path, f"{name} is missing: apt-get install -y prometheus (.ci/run installs it)"
    return path


def rule_exprs() -> list[tuple[str, str]]:
    rules = yaml.safe_load(RULES.read_text())
    return [(r.get("record") or r.get("alert"), r["expr"]) for g in rules["groups"]
            for r in g["rules"]]


# -- static checks ----------------------------------------------------------------------------


def test_generated_files_are_what_the_generator_makes() -> None:
    assert generate.main(["--check"]) == 0


def test_promtool_checks_rules_and_config_and_the_alert_unit_tests_pass(tmp_path) -> None:
    promtool = tool("promtool")
    subprocess.run([promtool, "check", "rules", str(RULES)], check=True, capture_output=True)
    config = tmp_path / "prometheus.yml"
    text = (ROOT / "deploy" / "prometheus" / "prometheus.yml").read_text()
    config.write_text(text.replace("/etc/prometheus/rules/*.yml", str(RULES)))
    subprocess.run([promtool, "check", "config", str(config)], check=True, capture_output=True)
    out = subprocess.run([promtool, "test", "rules", str(generate.PROMTOOL_TESTS)],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stdout + out.stderr


def test_every_alert_has_a_unit_test_that_fires_and_a_quiet_one() -> None:
    cases = yaml.safe_load(generate.CASES.read_text())["tests"]
    fired = {c["alertname"] for t in cases for c in t["alert_rule_test"] if c["exp_alerts"]}
    quiet = {c["alertname"] for t in cases for c in t["alert_rule_test"] if not c["exp_alerts"]}
    alerts = {name for name, _ in rule_exprs() if name.startswith("Toolcodec")}
    assert fired == alerts and quiet == alerts


def test_queries_name_only_exported_metrics() -> None:
    known = exported_series() | {"up", "process_cpu_seconds_total"}
    recorded = {name for name, _ in rule_exprs() if ":" in name}
    exprs = [e for _, e, _ in generate.all_queries()] + [e for _, e in rule_exprs()]
    for expr in exprs:
        for name in re.findall(r"[a-z_:]+(?=\{|\[|\)| |$)", expr):
            if name.startswith("toolcodec") or name in ("up", "process_cpu_seconds_total"):
                assert name in known or name in recorded, f"{name} in {expr}"


def test_compose_file_is_valid() -> None:
    compose = tool("docker-compose")
    out = subprocess.run([compose, "-f", str(ROOT / "deploy" / "compose.yaml"), "config"],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    services = yaml.safe_load(out.stdout)["services"]
    assert {"redis", "worker", "serve", "prometheus", "grafana"} <= set(services)
    assert all("healthcheck" in s for s in services.values())


def test_kubernetes_manifests_are_valid() -> None:
    import kubernetes_validate

    kinds = []
    for path in sorted((ROOT / "deploy" / "k8s").glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            kinds.append(doc["kind"])
            if doc["kind"] in ("ScaledObject", "ServiceMonitor"):
                check_custom_resource(doc)  # CRDs kubernetes-validate has no schema for
            else:
                kubernetes_validate.validate(doc, "1.30", strict=True)
    assert {"Deployment", "Service", "HorizontalPodAutoscaler", "ScaledObject",
            "ServiceMonitor"} <= set(kinds)


def check_custom_resource(doc: dict) -> None:
    """The fields KEDA and the Prometheus Operator require, checked by hand."""
    assert doc["metadata"]["name"]
    if doc["kind"] == "ScaledObject":
        assert doc["apiVersion"] == "keda.sh/v1alpha1"
        assert doc["spec"]["scaleTargetRef"]["name"] == "toolcodec-worker"
        (trigger,) = doc["spec"]["triggers"]
        assert trigger["type"] == "redis" and trigger["metadata"]["listName"] == \
            "rq:queue:toolcodec"
        assert int(trigger["metadata"]["listLength"]) > 0
    else:
        assert doc["apiVersion"] == "monitoring.coreos.com/v1"
        assert {e["port"] for e in doc["spec"]["endpoints"]} == {"http", "metrics"}


# -- the real thing -------------------------------------------------------------------------------


@pytest.fixture
def prometheus(tmp_path, request):
    """A real Prometheus on a free port; call it with the scrape targets."""
    procs = []

    def start(targets: dict[str, str]) -> str:
        port = free_port()
        config = {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "rule_files": [str(RULES)],
            "scrape_configs": [{"job_name": job, "static_configs": [{"targets": [target]}]}
                               for job, target in targets.items()],
        }
        (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(config))
        proc = subprocess.Popen([tool("prometheus"), f"--config.file={tmp_path}/prometheus.yml",
                                 f"--storage.tsdb.path={tmp_path}/data",
                                 f"--web.listen-address=127.0.0.1:{port}", "--log.level=warn"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        procs.append(proc)
        url = f"http://127.0.0.1:{port}"
        assert wait_for(lambda: ready(url), 60), "prometheus did not start"
        return url

    yield start
    for proc in procs:
        proc.terminate()
        proc.wait(20)


def ready(url: str) -> bool:
    try:
        return httpx.get(url + "/-/ready", timeout=1).status_code == 200
    except httpx.HTTPError:
        return False


def wait_for(predicate, timeout: float) -> bool:
    end = time.monotonic() + timeout
    while time.monotonic() < end:
        if predicate():
            return True
        time.sleep(0.2)
    return predicate()


def query(url: str, expr: str) -> dict:
    expr = expr.replace("$__rate_interval", "1m").replace("$__range", "5m")
    return httpx.get(url + "/api/v1/query", params={"query": expr}, timeout=10).json()


@pytest.mark.redis
def test_every_query_runs_on_prometheus_scraping_the_service_and_a_worker(
        prometheus, redis_server, queue_name, start_rq_worker) -> None:
    worker = start_rq_worker(concurrency=1, metrics=True)
    faults = {"TOOLCODEC_FAULT_INJECTION": "1"}
    serve = ServeProcess("--workers", "2", "--timeout-ms", "2000", env=faults).start()
    try:
        url = prometheus({"toolcodec-serve": f"127.0.0.1:{serve.port}",
                          "toolcodec-worker": f"127.0.0.1:{worker.metrics_port}"})
        load(serve, redis_server.url, queue_name)
        recorded = [name for name, _ in rule_exprs() if ":" in name]
        assert wait_for(lambda: all(query(url, name)["data"]["result"] for name in recorded),
                        60), "recording rules not evaluated on the scraped data"
        assert wait_for(lambda: query(url, 'up{job="toolcodec-worker"} == 1')["data"][
            "result"], 30)
        empty = []
        for where, expr, expect_data in generate.all_queries():
            got = query(url, expr)
            assert got["status"] == "success", (where, expr, got)
            if expect_data and not got["data"]["result"]:
                empty.append(f"{where}: {expr}")
        for name, expr in rule_exprs():
            got = query(url, expr)
            assert got["status"] == "success", (name, expr, got)
            if ":" in name and not got["data"]["result"]:
                empty.append(f"{name}: {expr}")
        assert not empty, "no data for:\n" + "\n".join(empty)
    finally:
        serve.stop()


def load(serve: ServeProcess, redis_url: str, queue: str) -> None:
    """A short load with faults through the service (process backend) and the RQ worker."""
    def post(op: str, body: dict) -> int:
        return httpx.post(f"{serve.url}/v1/{op}", content=orjson.dumps(body),
                          headers={"content-type": "application/json"}, timeout=30).status_code

    tools = [{"name": "f", "parameters": {"type": "object", "properties": {
        "a": {"type": "integer"}}, "required": ["a"]}}]
    for i in range(40):
        post("decode", {"text": f'<tool_call>{{"name": "f", "arguments": {{"a": "{i}",}}}}'
                                "</tool_call>", "tools": tools})
        post("decode", {"text": '<tool_call>{"name": "f", "arguments": {"a": 1+1}}</tool_call>',
                        "tools": tools})
        post("repair", {"text": "{'a': 1,}"})
    post("nope", {})
    post("repair", {"text": 5})
    post("_sleep", {"seconds": 1, "timeout_ms": 50})
    post("_crash", {})
    with Pool("rq", redis_url=redis_url, queue=queue, timeout_ms=2000) as pool:
        for _ in range(20):
            pool.submit("repair", {"text": "[1,"})
        pool.submit("_sleep", {"seconds": 1}, timeout_ms=50)
        pool.submit("_crash", {}, timeout_ms=2000)
        pool.submit("repair", {"text": "[2,"})
