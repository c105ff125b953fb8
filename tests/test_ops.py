"""deploy/ and grafana/: every query runs on a real Prometheus scraping the real service.

A real ``prometheus`` (Debian's package) scrapes a running ``toolcodec serve`` and a
``toolcodec worker`` on free ports while a short load with faults runs; then every dashboard
panel query and every recording and alert expression is run through Prometheus' HTTP API.
The static checks: promtool, docker-compose, kubernetes-validate, and the generated files.
"""

from __future__ import annotations

import importlib.util
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import orjson
import pytest
import redis
import yaml
from toolcodec.pool.metric_catalog import exported_labels, exported_series

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
    cases = generate.promtool_tests()["tests"]
    fired = {c["alertname"] for t in cases for c in t["alert_rule_test"] if c["exp_alerts"]}
    quiet = {c["alertname"] for t in cases for c in t["alert_rule_test"] if not c["exp_alerts"]}
    alerts = {name for name, _ in rule_exprs() if name.startswith("Toolcodec")}
    assert fired == alerts and quiet == alerts


def test_queries_name_only_exported_metrics() -> None:
    known = exported_series() | {"up", "process_cpu_seconds_total"}
    assert "toolcodec_child_cpu_seconds_total" in known
    recorded = {name for name, _ in rule_exprs() if ":" in name}
    exprs = [e for _, e, _ in generate.all_queries()] + [e for _, e in rule_exprs()]
    for expr in exprs:
        for name in re.findall(r"[a-z_:]+(?=\{|\[|\)| |$)", expr):
            if name.startswith("toolcodec") or name in ("up", "process_cpu_seconds_total"):
                assert name in known or name in recorded, f"{name} in {expr}"


def test_promtool_cases_feed_only_series_real_processes_export() -> None:
    """No invented series: every input series of the alert tests has the name and the labels
    a real toolcodec process gives it (plus job and instance, which the scrape adds)."""
    exported = exported_labels()
    cases = yaml.safe_load(generate.CASES.read_text())["tests"]
    for test in cases:
        for series in test["input_series"]:
            name, _, body = series["series"].partition("{")
            labels = set(re.findall(r'(\w+)="', body))
            # The scrape adds job and instance; Kubernetes service discovery a namespace, an
            # external label a cluster.
            labels -= {"namespace", "cluster"}
            if name in ("up", "redis_up"):  # Prometheus' own, the Redis exporter's
                assert labels == {"job", "instance"}, series
                continue
            assert name in exported, series
            assert labels == exported[name] | {"job", "instance"}, (series, exported[name])


def test_worker_side_and_caller_side_names_do_not_overlap_where_dashboards_sum() -> None:
    """The per-job series a dashboard sums over every target come from one side only."""
    from toolcodec.worker.metrics import WORKER_NAMES

    exported = exported_labels()
    for caller_name, worker_name in WORKER_NAMES.items():
        assert worker_name != caller_name
        assert any(n.startswith(worker_name) for n in exported), worker_name


def test_dashboards_have_variables_legends_and_an_instant_top_list() -> None:
    for path, board in generate.dashboards().items():
        names = [v["name"] for v in board["templating"]["list"]]
        assert names == ["datasource", "job", "backend", "op"], path
        for panel in board["panels"]:
            assert panel["datasource"]["uid"] == "${datasource}"
            assert panel["options"]["legend"]["showLegend"]
            for target in panel["targets"]:
                assert target["legendFormat"], (panel["title"], target["expr"])
    (top,) = [p for _, p in generate.all_panels() if p.title.startswith("Top repair ids")]
    assert top.instant and "$__range" in top.targets[0][0]
    percent = [p for _, p in generate.all_panels() if p.unit == "percentunit"]
    for panel in percent:  # a ratio panel never adds ratios of several ops
        for expr, _ in panel.targets:
            assert not re.match(r"\s*sum\(toolcodec:\w*ratio", expr), expr


def test_compose_file_is_valid() -> None:
    compose = tool("docker-compose")
    out = subprocess.run([compose, "-f", str(ROOT / "deploy" / "compose.yaml"), "config"],
                         capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    services = yaml.safe_load(out.stdout)["services"]
    assert {"redis", "redis-exporter", "worker", "serve", "prometheus", "alertmanager",
            "grafana"} <= set(services)
    assert all("healthcheck" in s for s in services.values())
    assert all(s.get("restart") == "unless-stopped" for s in services.values())


def k8s_docs() -> list[dict]:
    return [doc for path in sorted((ROOT / "deploy" / "k8s").glob("*.yaml"))
            for doc in yaml.safe_load_all(path.read_text())]


CUSTOM = {"ScaledObject": "keda.sh/v1alpha1", "ServiceMonitor": "monitoring.coreos.com/v1",
          "PrometheusRule": "monitoring.coreos.com/v1",
          "AlertmanagerConfig": "monitoring.coreos.com/v1alpha1"}


def test_kubernetes_manifests_are_valid() -> None:
    import kubernetes_validate

    kinds = []
    for doc in k8s_docs():
        kinds.append(doc["kind"])
        if doc["kind"] in CUSTOM:
            check_custom_resource(doc)  # CRDs kubernetes-validate has no schema for
        else:
            kubernetes_validate.validate(doc, "1.30", strict=True)
    assert {"Deployment", "Service", "HorizontalPodAutoscaler", "ScaledObject",
            "ServiceMonitor", "PrometheusRule", "AlertmanagerConfig", "ConfigMap",
            "PodDisruptionBudget", "NetworkPolicy"} <= set(kinds)


def check_custom_resource(doc: dict) -> None:
    """The fields KEDA and the Prometheus Operator require, checked by hand."""
    assert doc["metadata"]["name"] and doc["apiVersion"] == CUSTOM[doc["kind"]]
    if doc["kind"] == "ScaledObject":
        assert doc["spec"]["scaleTargetRef"]["name"] == "toolcodec-worker"
        (trigger,) = doc["spec"]["triggers"]
        # Busy lanes, not the queue's length: a 50 ms queue stays short while jobs time out.
        assert trigger["type"] == "prometheus" and float(trigger["metadata"]["threshold"]) > 0
        assert "toolcodec_worker_job_duration_seconds_sum" in trigger["metadata"]["query"]
    elif doc["kind"] == "AlertmanagerConfig":  # the shipped config, field for field
        shipped = yaml.safe_load((ROOT / "deploy" / "alertmanager" / "alertmanager.yml")
                                 .read_text())
        spec = doc["spec"]
        assert spec["route"]["groupBy"] == shipped["route"]["group_by"]
        assert {r["name"] for r in spec["receivers"]} == {r["name"] for r in
                                                          shipped["receivers"]}
        assert len(spec["inhibitRules"]) == len(shipped["inhibit_rules"])
        for rule, given in zip(spec["inhibitRules"], shipped["inhibit_rules"], strict=True):
            assert [f'{m["name"]}{m["matchType"]}"{m["value"]}"' for m in rule["sourceMatch"]] \
                == given["source_matchers"] and rule["equal"] == given["equal"]
            assert all(m["matchType"] in ("=", "!=", "=~", "!~") for m in rule["targetMatch"])
        for route in spec["route"]["routes"]:
            assert route["receiver"] in {r["name"] for r in spec["receivers"]}
    elif doc["kind"] == "ServiceMonitor":
        assert doc["metadata"]["labels"]["release"] == "kube-prometheus-stack"
        assert {e["port"] for e in doc["spec"]["endpoints"]} == {"http", "metrics"}
    else:
        assert doc["metadata"]["labels"]["release"] == "kube-prometheus-stack"
        assert doc["spec"] == yaml.safe_load(RULES.read_text())


def test_kubernetes_pods_meet_the_restricted_pod_security_standard() -> None:
    """The "restricted" profile's checks (kubernetes.io/docs/concepts/security/
    pod-security-standards), a pinned image with a pull policy, and spread replicas."""
    pods = [doc for doc in k8s_docs() if doc["kind"] == "Deployment"]
    assert {p["metadata"]["name"] for p in pods} == {"toolcodec-serve", "toolcodec-worker",
                                                      "toolcodec-redis"}
    for deployment in pods:
        spec = deployment["spec"]["template"]["spec"]
        pod = spec["securityContext"]
        assert pod["runAsNonRoot"] is True and pod["seccompProfile"]["type"] == "RuntimeDefault"
        assert not spec.get("hostNetwork") and not spec.get("hostPID")
        assert all("hostPath" not in v for v in spec.get("volumes", []))
        for container in spec["containers"]:
            sc = container["securityContext"]
            assert sc["allowPrivilegeEscalation"] is False and sc["capabilities"]["drop"] == \
                ["ALL"] and not sc.get("privileged")
            assert ":" in container["image"] and not container["image"].endswith(":latest")
            assert container["imagePullPolicy"] in ("IfNotPresent", "Always")
        if deployment["metadata"]["name"] != "toolcodec-redis":
            assert spec["affinity"]["podAntiAffinity"], deployment["metadata"]["name"]
    serve = next(p for p in pods if p["metadata"]["name"] == "toolcodec-serve")
    container = serve["spec"]["template"]["spec"]["containers"][0]
    assert container["lifecycle"]["preStop"]
    args = container["args"]
    delay, drain = (float(args[args.index(f) + 1]) for f in ("--shutdown-delay-s", "--drain-s"))
    pre_stop = float(container["lifecycle"]["preStop"]["exec"]["command"][-1])
    assert pre_stop + delay + drain < serve["spec"]["template"]["spec"][
        "terminationGracePeriodSeconds"]
    budgets = {d["spec"]["selector"]["matchLabels"].get("app.kubernetes.io/component")
               for d in k8s_docs() if d["kind"] == "PodDisruptionBudget"}
    assert budgets == {"serve", "worker"}
    redis_args = " ".join(next(p for p in pods if p["metadata"]["name"] == "toolcodec-redis")[
        "spec"]["template"]["spec"]["containers"][0]["command"])
    assert "--requirepass" in redis_args


def test_dashboards_ship_as_a_config_map_for_grafanas_sidecar() -> None:
    (config_map,) = [d for d in k8s_docs() if d["kind"] == "ConfigMap"
                     and d["metadata"]["name"] == "toolcodec-dashboards"]
    assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
    shipped = {name: json.loads(text) for name, text in config_map["data"].items()}
    assert shipped == {path.name: body for path, body in generate.dashboards().items()}


@pytest.mark.parametrize(("backend", "workers_scaled_by"),
                         [("rq", "keda"), ("rq", "hpa"), ("rq", "none"), ("process", None)])
def test_the_values_file_renders_valid_manifests_for_both_backends_with_the_proxy(
        tmp_path, backend, workers_scaled_by) -> None:
    """``deploy/generate.py --values`` (a user's values over deploy/values.yaml): every
    manifest validates, the image is the package's version, serve runs the proxy with a model
    config serve itself accepts, and no Deployment has replicas beside its autoscaler."""
    import kubernetes_validate
    import toolcodec
    from toolcodec.pool.proxy.settings import ModelSettings

    values = {"backend": backend, "namespace": "team-a",
              "proxy": {"upstream": "http://vllm:8000/v1"}}
    if workers_scaled_by:
        values["worker"] = {"autoscaling": {"kind": workers_scaled_by}}
    (tmp_path / "values.yaml").write_text(yaml.safe_dump(values))
    out = tmp_path / "k8s"
    assert generate.main(["--values", str(tmp_path / "values.yaml"), "--out", str(out)]) == 0
    docs = [d for path in sorted(out.glob("*.yaml")) for d in yaml.safe_load_all(path.read_text())]
    kinds = [d["kind"] for d in docs]
    for doc in docs:
        assert doc["metadata"]["namespace"] == "team-a", doc["metadata"]
        if doc["kind"] in CUSTOM:
            check_custom_resource(doc)
        else:
            kubernetes_validate.validate(doc, "1.30", strict=True)
    scaled = {d["spec"]["scaleTargetRef"]["name"] for d in docs
              if d["kind"] in ("HorizontalPodAutoscaler", "ScaledObject")}
    deployments = {d["metadata"]["name"]: d for d in docs if d["kind"] == "Deployment"}
    for name, deployment in deployments.items():
        assert ("replicas" in deployment["spec"]) == (name not in scaled), name
        for container in deployment["spec"]["template"]["spec"]["containers"]:
            if container["image"].startswith("toolcodec:"):
                assert container["image"] == f"toolcodec:{toolcodec.__version__}"
                assert container["args"][container["args"].index("--log-format") + 1] == "json"
    serve = deployments["toolcodec-serve"]["spec"]["template"]["spec"]["containers"][0]["args"]
    assert serve[serve.index("--upstream") + 1] == "http://vllm:8000/v1"
    assert serve[serve.index("--backend") + 1] == backend
    (models,) = [d for d in docs if d["metadata"]["name"] == "toolcodec-models"]
    (tmp_path / "models.yaml").write_text(models["data"]["models.yaml"])
    settings = ModelSettings.build(file=str(tmp_path / "models.yaml"))
    assert settings.for_model("Qwen/Qwen3-32B")  # the config serve reads, with its presets
    if backend == "process":
        assert set(deployments) == {"toolcodec-serve"} and "ScaledObject" not in kinds
    else:
        assert set(deployments) == {"toolcodec-serve", "toolcodec-worker", "toolcodec-redis"}
        assert ("ScaledObject" in kinds) == (workers_scaled_by == "keda")
        query = next((d["spec"]["triggers"][0]["metadata"]["query"] for d in docs
                      if d["kind"] == "ScaledObject"), 'namespace="team-a"')
        assert 'namespace="team-a"' in query  # two installs are scaled apart
    assert {"ServiceMonitor", "PrometheusRule", "PodDisruptionBudget", "ConfigMap"} <= set(kinds)


def test_compose_runs_the_proxy_with_the_generated_model_config_and_the_pinned_image() -> None:
    import toolcodec

    compose = yaml.safe_load((ROOT / "deploy" / "compose.yaml").read_text())["services"]
    values = generate.default_values()
    assert yaml.safe_load((ROOT / "deploy" / "models.yaml").read_text()) == \
        values["proxy"]["modelConfig"]
    for name in ("serve", "worker"):
        assert compose[name]["image"] == f"toolcodec:{toolcodec.__version__}"
        command = compose[name]["command"]
        assert command[command.index("--log-format") + 1] == "json"
    command = compose["serve"]["command"]
    assert "--upstream" in command and "--access-log" in command
    config = command[command.index("--proxy-config") + 1]
    assert any(v.endswith(":" + config + ":ro") and v.startswith("./models.yaml")
               for v in compose["serve"]["volumes"])


# -- the real thing -------------------------------------------------------------------------------


@pytest.fixture
def prometheus(tmp_path, request):
    """A real Prometheus on a free port, evaluating the project's rules every second; call it
    with {job: [targets]}."""
    procs = []

    def start(targets: dict[str, list[str]]) -> str:
        port = free_port()
        config = {
            "global": {"scrape_interval": "1s", "evaluation_interval": "1s"},
            "rule_files": [str(RULES)],
            "scrape_configs": [{"job_name": job, "static_configs": [{"targets": addresses}]}
                               for job, addresses in {**targets, "prometheus": [
                                   f"127.0.0.1:{port}"]}.items()],
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


# Grafana's variables as "All" and its range variables as fixed windows.
_VARIABLES = {"$__rate_interval": "1m", "$__range": "5m", "$job": ".*", "$backend": ".*",
              "$op": ".*"}


def query(url: str, expr: str, at: float | None = None) -> dict:
    """The instant query's answer, now or ``at`` (epoch seconds)."""
    for name, value in _VARIABLES.items():
        expr = expr.replace(name, value)
    params = {"query": expr} if at is None else {"query": expr, "time": f"{at:.3f}"}
    return httpx.get(url + "/api/v1/query", params=params, timeout=10).json()


def total(url: str, expr: str) -> float:
    """The panel's series with rate()/increase() taken off (the raw totals), added up."""
    raw = re.sub(r"(?:rate|increase)\(([^\[\]]*?)\[[^\]]+\]\)", r"\1", expr)
    return sum(float(r["value"][1]) for r in query(url, raw)["data"]["result"])


def post(serve: ServeProcess, op: str, body: dict) -> int:
    return httpx.post(f"{serve.url}/v1/{op}", content=orjson.dumps(body),
                      headers={"content-type": "application/json"}, timeout=30).status_code


FAULTS = {"TOOLCODEC_FAULT_INJECTION": "1"}
TOOLS = [{"name": "f", "parameters": {"type": "object", "properties": {
    "a": {"type": "integer"}}, "required": ["a"]}}]


@pytest.mark.redis
def test_every_query_runs_and_counts_each_job_once(
        prometheus, redis_server, queue_name, start_rq_worker) -> None:
    """serve (process backend), serve (rq backend) and an RQ worker, all scraped; after a load
    with faults every panel and rule has data, and the panels' totals equal what was sent."""
    worker = start_rq_worker(concurrency=1, metrics=True)
    local = ServeProcess("--workers", "2", "--timeout-ms", "2000", env=FAULTS).start()
    remote = ServeProcess("--backend", "rq", "--redis-url", redis_server.url, "--queue",
                          queue_name, "--timeout-ms", "2000", env=FAULTS).start()
    try:
        url = prometheus({"toolcodec-serve": [f"127.0.0.1:{local.port}",
                                              f"127.0.0.1:{remote.port}"],
                          "toolcodec-worker": [f"127.0.0.1:{worker.metrics_port}"]})
        # A first load, scraped, then the whole load: each series the load makes has grown
        # between two scrapes, so its rate is not 0 however late Prometheus's first scrape
        # came (its scrape manager starts seconds after it is ready).
        first = [load(local), load(remote)]
        jobs = next(p.targets[0][0] for _, p in generate.all_panels() if p.counts == "jobs")
        assert wait_for(lambda: total(url, jobs) == sum(r["all"] for r in first), 60), \
            (total(url, jobs), first)
        runs = [*first, load(local), load(remote), load(local, faults_only=True),
                load(remote, faults_only=True)]
        loaded = time.time()
        sent = {key: sum(r[key] for r in runs) for key in runs[0]}
        sent["rq"] = sum(r["rq"] for r in runs[1::2])
        recorded = [name for name, _ in rule_exprs() if ":" in name]
        assert wait_for(lambda: all(query(url, name)["data"]["result"] for name in recorded),
                        90), [n for n in recorded if not query(url, n)["data"]["result"]]
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
        # Each job once: the totals under every counting panel equal what was sent.
        expected = {"jobs": sent["all"], "worker_jobs": sent["rq"], "lanes": 2 + 1,
                    "queued": 0, "decode_jobs": sent["decode"], "error_jobs": sent["error"]}
        for where, panel in generate.all_panels():
            if panel.counts is None:
                continue
            expr = panel.targets[0][0]
            want = expected[panel.counts]
            assert wait_for(lambda e=expr, w=want: total(url, e) == w, 60), \
                (where, expr, total(url, expr), want)
        # Shares over 5 minutes are read at an instant whose window holds the load, once it
        # is scraped (1 s scrapes; the totals above are): on a slow run "now" may be more
        # than 5 minutes after it, where every rate is 0 and a share is 0/0.
        loaded = min(loaded + 5.0, time.time())
        for where, panel in generate.all_panels():  # shares are shares: never over 100 %
            if panel.unit == "percentunit":
                for expr, _ in panel.targets:
                    got = query(url, expr, at=loaded)["data"]["result"]
                    values = [float(r["value"][1]) for r in got]
                    assert all(v <= 1.0 + 1e-9 for v in values), (where, expr, values)
        (shares,) = [p for _, p in generate.all_panels() if p.title.startswith("Outcome shares")]
        got = query(url, shares.targets[0][0], at=loaded)["data"]["result"]
        assert abs(sum(float(r["value"][1]) for r in got) - 1.0) < 1e-9
    finally:
        local.stop()
        remote.stop()


def load(serve: ServeProcess, faults_only: bool = False) -> dict[str, int]:
    """A short load with faults through ``serve``; returns how many jobs it sent (``all``), how
    many of them an RQ worker runs (``rq``: the known ops; the rest the server answers), how
    many were decodes answered with a result (``decode``) and how many were answered with
    status error (``error``, HTTP 4xx/5xx other than a timeout or a lost worker)."""
    sent = {"all": 0, "rq": 0, "decode": 0, "error": 0}

    def job(op: str, body: dict, runs: bool = True) -> None:
        status = post(serve, op, body)
        sent["all"] += 1
        sent["rq"] += int(runs)
        sent["decode"] += op == "decode" and status == 200
        sent["error"] += status in (400, 413, 500)

    if not faults_only:
        for i in range(40):
            job("decode", {"text": f'<tool_call>{{"name": "f", "arguments": {{"a": "{i}",}}}}'
                                   "</tool_call>", "tools": TOOLS})
            job("decode", {"text": '<tool_call>{"name": "f", "arguments": {"a": 1+1}}'
                                   "</tool_call>", "tools": TOOLS})
            job("repair", {"text": "{'a': 1,}"})
        job("nope", {}, runs=False)
        job("repair", {"text": 5})
        return sent
    job("_sleep", {"seconds": 1, "timeout_ms": 50})
    job("_crash", {})
    job("repair", {"text": "[2,"})
    return sent


@pytest.mark.redis
def test_a_fresh_service_pages_nobody_then_killing_every_worker_fails_readiness_and_pages(
        prometheus, redis_server, queue_name, start_rq_worker) -> None:
    """Two minutes of rule evaluation (one a second) over a fresh serve + two RQ workers under
    light traffic fire nothing; then every worker is SIGKILLed: /readyz fails and
    ToolcodecNoWorkers fires. The queue panel counts the waiting jobs once."""
    workers = [start_rq_worker(concurrency=1, metrics=True) for _ in range(2)]
    serve = ServeProcess("--backend", "rq", "--redis-url", redis_server.url, "--queue",
                         queue_name, "--timeout-ms", "250").start()
    try:
        url = prometheus({"toolcodec-serve": [f"127.0.0.1:{serve.port}"],
                          "toolcodec-worker": [f"127.0.0.1:{w.metrics_port}" for w in workers]})
        assert wait_for(lambda: httpx.get(serve.url + "/readyz").status_code == 200, 30)

        def evaluations() -> float:
            got = query(url, 'prometheus_rule_group_iterations_total{rule_group=~".*;'
                             'toolcodec-alerts"}')["data"]["result"]
            return float(got[0]["value"][1]) if got else 0.0

        def firing() -> list[str]:
            got = query(url, 'ALERTS{alertstate="firing"}')["data"]["result"]
            return [r["metric"]["alertname"] for r in got]

        assert wait_for(lambda: evaluations() > 0, 30), "Prometheus does not scrape itself"
        start = evaluations()
        while evaluations() < start + 120:  # light traffic: one small job per loop turn
            assert post(serve, "repair", {"text": "[1, 2,"}) == 200
            assert firing() == []
        assert query(url, 'toolcodec:rq_live_workers:max')["data"]["result"][0]["value"][1] == "2"

        for w in workers:
            os.killpg(w.proc.pid, signal.SIGKILL)  # no clean-up runs: heartbeats just stop
            w.proc.wait(10)
        assert wait_for(lambda: httpx.get(serve.url + "/readyz").status_code == 503, 60)
        reason = httpx.get(serve.url + "/readyz").json()["reason"]
        assert "heartbeat" in reason, reason

        client = redis.Redis.from_url(redis_server.url)
        client.rpush(f"rq:queue:{queue_name}", "waiting-1", "waiting-2", "waiting-3")
        (queue,) = [p for _, p in generate.all_panels() if p.title.startswith("Queue depth")][:1]
        assert wait_for(lambda: total(url, queue.targets[0][0]) == 3, 30)

        assert wait_for(lambda: "ToolcodecNoWorkers" in firing(), 240), firing()
    finally:
        serve.stop()


@pytest.mark.redis
def test_redis_down_fires_the_backend_alert_while_the_worker_alert_has_no_series(
        prometheus, own_redis_server, queue_name, start_rq_worker) -> None:
    """Redis stopped under a running serve (rq) and worker: toolcodec_rq_redis_up turns 0 and
    ToolcodecBackendDown fires on a real Prometheus with the shipped rules, while Redis is
    still down; ToolcodecNoWorkers (whose heartbeats cannot be read) does not."""
    start_rq_worker(server=own_redis_server)
    serve = ServeProcess("--backend", "rq", "--redis-url", own_redis_server.url, "--queue",
                         queue_name, "--timeout-ms", "250").start()
    try:
        url = prometheus({"toolcodec-serve": [f"127.0.0.1:{serve.port}"]})
        up = 'max(toolcodec_rq_redis_up{job="toolcodec-serve"})'

        def value(expr: str) -> float | None:
            got = query(url, expr)["data"]["result"]
            return float(got[0]["value"][1]) if got else None

        assert wait_for(lambda: value(up) == 1.0, 60)
        own_redis_server.stop()

        def firing() -> set[str]:
            got = query(url, 'ALERTS{alertstate="firing"}')["data"]["result"]
            return {r["metric"]["alertname"] for r in got}

        assert wait_for(lambda: value(up) == 0.0, 60)
        assert wait_for(lambda: "ToolcodecBackendDown" in firing(), 240), firing()
        assert "ToolcodecNoWorkers" not in firing()
        assert own_redis_server.proc is None or own_redis_server.proc.poll() is not None
    finally:
        serve.stop()
