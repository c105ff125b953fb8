"""Generate the checked-in operations files from one description each.

- ``grafana/dashboards/parse-health.json`` and ``capacity.json``: Grafana dashboards, built from
  the panel lists below (a small generator of our own: plain dicts, Grafana's JSON model);
- ``deploy/prometheus/tests/toolcodec_test.yml``: the promtool unit tests, built from
  ``cases.yml`` with each expected alert's annotations rendered from the rules file, so that
  runbook text lives in the rules alone;
- ``deploy/k8s/*.yaml``: the Kubernetes manifests, from ``deploy/values.yaml``
  (``deploy/manifests.py``), with a PrometheusRule holding the rules file's groups and a
  ConfigMap with the dashboards for Grafana's sidecar (what kube-prometheus-stack loads);
- ``deploy/models.yaml``: the proxy's model config from the same values, for compose.

``python deploy/generate.py`` writes them; ``python deploy/generate.py --values FILE --out DIR``
renders the manifests of your values (merged over ``deploy/values.yaml``) into DIR;
``python deploy/generate.py --check`` exits 1 when a checked-in file differs from what would be
generated (the tests run the same check). Every query may name only series toolcodec exports
(``toolcodec.pool.metric_catalog``), the recording rules of ``deploy/prometheus/rules``, or
Prometheus' own ``up``/``process_*``.
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))  # deploy/ is not a package
import manifests  # noqa: E402 - after the path it is found on

ROOT = Path(__file__).resolve().parent.parent
DASHBOARDS = ROOT / "grafana" / "dashboards"
RULES = ROOT / "deploy" / "prometheus" / "rules" / "toolcodec.yml"
CASES = ROOT / "deploy" / "prometheus" / "tests" / "cases.yml"
PROMTOOL_TESTS = ROOT / "deploy" / "prometheus" / "tests" / "toolcodec_test.yml"
K8S = ROOT / "deploy" / "k8s"
VALUES = ROOT / "deploy" / "values.yaml"
ALERTMANAGER = ROOT / "deploy" / "alertmanager" / "alertmanager.yml"
MODELS = ROOT / "deploy" / "models.yaml"  # the proxy's model config for compose
# The label Grafana's sidecar loads dashboard ConfigMaps by (kube-prometheus-stack's release
# label, which selects the rules and ServiceMonitors, is in deploy/values.yaml).
DASHBOARD_LABEL = {"grafana_dashboard": "1"}
# Where the rules file's runbook_url annotations point (values: monitoring.runbooks).
RUNBOOKS = "https://github.com/toolcodec/toolcodec/blob/main/docs/runbooks.md"
BUDGET_S = 0.05  # the 50 ms job budget drawn on latency panels
DATASOURCE = {"type": "prometheus", "uid": "${datasource}"}


@dataclass(frozen=True)
class Panel:
    """One panel: its queries as (PromQL, legend) pairs.

    ``counts`` says what the first query's series add up to once ``rate(...)`` is taken off
    (``tests/test_ops.py`` checks it against what a test run sent): ``jobs`` (each job once),
    ``worker_jobs`` (each job an RQ worker ran, once), ``decode_jobs`` (each decode result
    once), ``error_jobs`` (each job answered with status error, once), ``lanes`` (each worker
    lane once), ``queued`` (each waiting job once), or None.
    """

    title: str
    targets: tuple[tuple[str, str], ...]
    unit: str = "short"
    kind: str = "timeseries"
    budget_line: bool = False
    expect_data: bool = True  # after a short load with faults (checked against Prometheus)
    counts: str | None = None
    instant: bool = False  # one value per series over the dashboard's range (bar charts)
    stack: bool = False


RATE = "$__rate_interval"
# The template variables, in every caller-side selector: job, backend, op.
SEL = 'job=~"$job", backend=~"$backend", op=~"$op"'
JOB = 'job=~"$job"'
BACKEND = 'job=~"$job", backend=~"$backend"'
SLO_BAD = (f'(sum(increase(toolcodec_jobs_total{{{SEL}, outcome=~"timeout|worker_lost|rejected"}}'
           f'[30d])) or vector(0)) + (sum(increase(toolcodec_job_errors_total{{{SEL}, '
           f'code=~"internal_error|backend_unavailable"}}[30d])) or vector(0))')
# Queue depth: the Redis queue is one list whatever the number of readers (max); each
# process backend queues its own callers (sum).
QUEUE = (f'max by (backend) (toolcodec_queue_depth{{{BACKEND}, backend="rq"}}) '
         f'or sum by (backend) (toolcodec_queue_depth{{{BACKEND}, backend!="rq"}})')
PARSE_HEALTH = [
    Panel("Jobs per second by outcome (caller side: what clients got)",
          ((f"sum by (outcome) (rate(toolcodec_jobs_total{{{SEL}}}[{RATE}]))", "{{outcome}}"),),
          "reqps", counts="jobs", stack=True),
    Panel("Outcome shares (5m; they add up to 100 %)",
          ((f"sum by (outcome) (rate(toolcodec_jobs_total{{{SEL}}}[5m])) / ignoring (outcome) "
            f"group_left sum(rate(toolcodec_jobs_total{{{SEL}}}[5m]))", "{{outcome}}"),),
          "percentunit", stack=True),
    Panel("Parse failures: returned results that could not be used (5m)",
          (('toolcodec:parse_failure_ratio:rate5m{backend=~"$backend", op=~"$op"}',
            "{{op}} {{backend}}"),), "percentunit"),
    Panel("Why parses fail: result error codes",
          ((f'sum by (code) (rate(toolcodec_result_errors_total{{job=~"$job", op=~"$op"}}'
            f"[{RATE}]))", "{{code}}"),), "reqps"),
    Panel("Job latency p50 / p95 / p99 against the budget (caller side)",
          tuple((f"histogram_quantile({q}, sum by (le) (rate("
                 f"toolcodec_job_duration_seconds_bucket{{{SEL}}}[{RATE}])))", f"p{q[2:4]}")
                for q in ("0.50", "0.95", "0.99")), "s", budget_line=True),
    Panel("SLO error ratio (answered in time, no error of ours)",
          (("toolcodec:slo_errors:ratio_rate5m", "5m"), ("toolcodec:slo_errors:ratio_rate1h",
                                                          "1h")), "percentunit"),
    Panel("Error budget burn rate (1 = the 30-day budget lasts 30 days; pages at 14.4)",
          (("toolcodec:slo_errors:ratio_rate1h / 0.001", "1h"),
           ("toolcodec:slo_errors:ratio_rate6h / 0.001", "6h"))),
    Panel("Error budget left, 30 days (SLO 99.9 %)",
          ((f"1 - ({SLO_BAD}) / sum(increase(toolcodec_jobs_total{{{SEL}}}[30d])) / 0.001",
            "budget left"),), "percentunit", kind="stat"),
    Panel("Queue depth (jobs waiting for a worker)", ((QUEUE, "{{backend}}"),),
          counts="queued"),
    Panel("Worker lanes by state (each counted by the process that runs it)",
          ((f"sum by (backend, state) (toolcodec_workers{{{BACKEND}}})",
            "{{backend}} {{state}}"),
           ('max by (queue, state) (toolcodec_rq_live_workers{job=~"$job"})',
            "rq heartbeats {{queue}} {{state}}")), counts="lanes"),
    Panel("Worker restarts",
          ((f"sum by (backend, reason) (increase(toolcodec_worker_restarts_total{{{BACKEND}}}"
            f"[{RATE}]))", "{{backend}} {{reason}}"),)),
    Panel("Top repair ids over the dashboard's range: what your models get wrong",
          (('topk(10, sum by (repair) (increase(toolcodec_repairs_total{job=~"$job"}'
            '[$__range])))', "{{repair}}"),), kind="barchart", instant=True),
    Panel("Decode paths",
          ((f'sum by (path) (rate(toolcodec_decode_path_total{{job=~"$job"}}[{RATE}]))',
            "{{path}}"),), "reqps", counts="decode_jobs"),
    Panel("Jobs that could not run, by error code (bad_request: the caller's)",
          ((f"sum by (code) (rate(toolcodec_job_errors_total{{{SEL}}}[{RATE}]))", "{{code}}"),),
          "reqps", counts="error_jobs"),
    Panel("HTTP requests by route and status code",
          ((f"sum by (route, code) (rate(toolcodec_http_requests_total{{{JOB}}}[{RATE}]))",
            "{{route}} {{code}}"),), "reqps"),
    Panel("Proxy: model errors left unrepaired, by model and code",
          ((f"sum by (model, code) (rate(toolcodec_proxy_model_errors_total{{{JOB}}}"
            f"[{RATE}]))", "{{model}} {{code}}"),), "reqps", expect_data=False),
    Panel("Proxy: answers by model and outcome (model: the config entry matched)",
          ((f"sum by (model, outcome) (rate(toolcodec_proxy_requests_total{{{JOB}}}"
            f"[{RATE}]))", "{{model}} {{outcome}}"),), "reqps", expect_data=False),
    Panel("Proxy: share of answers repaired or left with a model error, by model (5m)",
          ((f'sum by (model) (rate(toolcodec_proxy_requests_total{{{JOB}, '
            f'outcome=~"repaired|model_error"}}[5m])) / sum by (model) '
            f"(rate(toolcodec_proxy_requests_total{{{JOB}}}[5m]))", "{{model}}"),),
          "percentunit", expect_data=False),
    Panel("Proxy: calls by model and format",
          ((f'sum by (model, format) (rate(toolcodec_proxy_requests_total{{{JOB}, '
            f'format!="none"}}[{RATE}]))', "{{model}} {{format}}"),), "reqps",
          expect_data=False),
    Panel("Redis reachable from serve (rq backend; 0: down, every job fails)",
          (('min by (queue) (toolcodec_rq_redis_up{job=~"$job"})', "{{queue}}"),)),
    Panel("Versions running", (('count by (version) (toolcodec_build_info{job=~"$job"})',
                                "{{version}}"),)),
]
CAPACITY = [
    Panel("Throughput by op and backend (caller side)",
          ((f"sum by (op, backend) (rate(toolcodec_jobs_total{{{SEL}}}[{RATE}]))",
            "{{op}} {{backend}}"),), "reqps", counts="jobs", stack=True),
    Panel("What clients see: HTTP request p99 beside job p99",
          ((f'histogram_quantile(0.99, sum by (le) (rate(toolcodec_http_request_duration_seconds'
            f'_bucket{{{JOB}, route=~"/v1/.*"}}[{RATE}])))', "HTTP request p99 (at the door)"),
           (f"histogram_quantile(0.99, sum by (le) (rate(toolcodec_job_duration_seconds_bucket"
            f"{{{SEL}}}[{RATE}])))", "job p99 (caller)"),
           (f"histogram_quantile(0.99, sum by (le) (rate(toolcodec_worker_job_duration_seconds"
            f'_bucket{{job=~"$job", op=~"$op"}}[{RATE}])))', "job p99 (in the RQ worker)")),
          "s", budget_line=True),
    Panel("Job latency p99 by op (recorded)",
          (('toolcodec:job_duration_seconds:p99{backend=~"$backend", op=~"$op"}',
            "{{op}} {{backend}}"),), "s", budget_line=True),
    Panel("Busy share of the worker lanes (1m average)",
          (('toolcodec:workers_busy:share1m{backend=~"$backend"}', "{{backend}}"),),
          "percentunit"),
    Panel("Timeouts per second", ((f'sum by (op, backend) (rate(toolcodec_jobs_total{{{SEL}, '
                                   f'outcome="timeout"}}[{RATE}]))', "{{op}} {{backend}}"),),
          "reqps"),
    Panel("Queue depth (jobs waiting for a worker)", ((QUEUE, "{{backend}}"),),
          counts="queued"),
    Panel("CPU of toolcodec processes and their worker processes (cores)",
          ((f"sum by (job, instance) (rate(process_cpu_seconds_total{{{JOB}}}[{RATE}])) + "
            f"sum by (job, instance) (rate(toolcodec_child_cpu_seconds_total{{{JOB}}}[{RATE}]))",
            "{{job}} {{instance}}"),)),
    Panel("RQ workers: jobs run per second by outcome (worker side: what ran)",
          ((f'sum by (outcome) (rate(toolcodec_worker_jobs_total{{job=~"$job", op=~"$op"}}'
            f"[{RATE}]))", "{{outcome}}"),), "reqps", counts="worker_jobs", stack=True),
]
VARIABLES = [
    {"name": "datasource", "label": "Data source", "type": "datasource", "query": "prometheus",
     "current": {}, "hide": 0},
    {"name": "job", "label": "Job", "type": "query", "datasource": {"uid": "${datasource}"},
     "query": {"query": 'label_values(up{job=~"toolcodec.*"}, job)', "refId": "job"},
     "definition": 'label_values(up{job=~"toolcodec.*"}, job)', "refresh": 2,
     "includeAll": True, "multi": True, "allValue": ".*", "current": {}, "hide": 0},
    {"name": "backend", "label": "Backend", "type": "query",
     "datasource": {"uid": "${datasource}"},
     "query": {"query": "label_values(toolcodec_jobs_total, backend)", "refId": "backend"},
     "definition": "label_values(toolcodec_jobs_total, backend)", "refresh": 2,
     "includeAll": True, "multi": True, "allValue": ".*", "current": {}, "hide": 0},
    {"name": "op", "label": "Op", "type": "query", "datasource": {"uid": "${datasource}"},
     "query": {"query": 'label_values(toolcodec_jobs_total{backend=~"$backend"}, op)',
               "refId": "op"},
     "definition": 'label_values(toolcodec_jobs_total{backend=~"$backend"}, op)',
     "refresh": 2, "includeAll": True, "multi": True, "allValue": ".*", "current": {},
     "hide": 0},
]


def dashboard(uid: str, title: str, panels: list[Panel]) -> dict[str, Any]:
    return {
        "uid": uid, "title": title, "tags": ["toolcodec"], "timezone": "browser",
        "schemaVersion": 39, "version": 1, "refresh": "30s",
        "time": {"from": "now-6h", "to": "now"}, "editable": True,
        "templating": {"list": VARIABLES}, "annotations": {"list": []},
        "panels": [_panel(i, p) for i, p in enumerate(panels)],
    }


def _panel(index: int, panel: Panel) -> dict[str, Any]:
    thresholds = [{"color": "green", "value": None}]
    if panel.budget_line:
        thresholds.append({"color": "red", "value": BUDGET_S})
    custom: dict[str, Any] = {"thresholdsStyle": {"mode": "line" if panel.budget_line
                                                  else "off"}}
    if panel.stack:
        custom["stacking"] = {"mode": "normal", "group": "A"}
    if panel.unit == "percentunit" and panel.kind == "timeseries":
        custom["axisSoftMax"] = 1
    return {
        "id": index + 1, "type": panel.kind, "title": panel.title, "datasource": DATASOURCE,
        "gridPos": {"h": 8, "w": 12, "x": 12 * (index % 2), "y": 8 * (index // 2)},
        "fieldConfig": {"defaults": {
            "unit": panel.unit, "thresholds": {"mode": "absolute", "steps": thresholds},
            "custom": custom}, "overrides": []},
        "options": {"legend": {"showLegend": True, "displayMode": "list", "placement": "bottom",
                               "calcs": []}},
        "targets": [{"refId": chr(ord("A") + i), "datasource": DATASOURCE, "expr": expr,
                     "legendFormat": legend, "instant": panel.instant,
                     "range": not panel.instant,
                     **({"format": "table"} if panel.instant else {})}
                    for i, (expr, legend) in enumerate(panel.targets)],
    }


def dashboards() -> dict[Path, dict[str, Any]]:
    return {
        DASHBOARDS / "parse-health.json": dashboard("toolcodec-parse-health",
                                                    "toolcodec: parse health", PARSE_HEALTH),
        DASHBOARDS / "capacity.json": dashboard("toolcodec-capacity", "toolcodec: capacity",
                                                CAPACITY),
    }


# -- promtool tests ------------------------------------------------------------------------------


def promtool_tests() -> dict[str, Any]:
    """``cases.yml`` as promtool reads it. A case may carry a ``fault``: ``at`` (an eval
    time), ``firing`` (the alerts expected then, by ``alertname`` and ``exp_labels``) and
    ``pages`` (how many notifications the shipped Alertmanager config sends the pager for
    them, checked by tests/test_ops_alertmanager.py); every other alert is expected quiet then."""
    rules = yaml.safe_load(RULES.read_text())
    annotations = {r["alert"]: r.get("annotations", {}) for g in rules["groups"]
                   for r in g["rules"] if "alert" in r}
    cases = yaml.safe_load(CASES.read_text())
    for test in cases["tests"]:
        fault = test.pop("fault", None)
        if fault is not None:  # every alert's state at that time: the firing ones, the rest []
            firing: dict[str, list[dict[str, Any]]] = {}
            for alert in fault["firing"]:
                firing.setdefault(alert["alertname"], []).append(
                    {"exp_labels": dict(alert["exp_labels"])})
            test.setdefault("alert_rule_test", []).extend(
                {"eval_time": fault["at"], "alertname": name, "exp_alerts": firing.get(name, [])}
                for name in annotations)
        for check in test.get("alert_rule_test", []):
            for alert in check.get("exp_alerts", []):
                labels = alert["exp_labels"]
                alert["exp_annotations"] = {
                    k: _render(v, labels) for k, v in annotations[check["alertname"]].items()}
    return cases


def _render(template: str, labels: dict[str, Any]) -> str:
    return re.sub(r"\{\{\s*\$labels\.(\w+)\s*\}\}", lambda m: str(labels.get(m.group(1), "")),
                  template)


# -- Kubernetes: the rules and dashboards as the Prometheus Operator and Grafana load them ------


def prometheus_rule(values: dict[str, Any] | None = None) -> dict[str, Any]:
    """A PrometheusRule (monitoring.coreos.com/v1) holding the rules file's groups."""
    values = values or default_values()
    text = RULES.read_text().replace(RUNBOOKS, values["monitoring"]["runbooks"])
    return {"apiVersion": "monitoring.coreos.com/v1", "kind": "PrometheusRule",
            "metadata": {"name": "toolcodec", "namespace": values["namespace"],
                         "labels": {"app.kubernetes.io/name": "toolcodec",
                                    "release": values["monitoring"]["release"]}},
            "spec": yaml.safe_load(text)}


def dashboard_config_map(values: dict[str, Any] | None = None) -> dict[str, Any]:
    """A ConfigMap with both dashboards, labelled for Grafana's dashboard sidecar."""
    values = values or default_values()
    return {"apiVersion": "v1", "kind": "ConfigMap",
            "metadata": {"name": "toolcodec-dashboards", "namespace": values["namespace"],
                         "labels": {"app.kubernetes.io/name": "toolcodec", **DASHBOARD_LABEL},
                         "annotations": {"grafana_folder": "toolcodec"}},
            "data": {path.name: json.dumps(body, sort_keys=True, separators=(",", ":"))
                     for path, body in dashboards().items()}}


# -- Kubernetes from the values file ------------------------------------------------------------


def default_values() -> dict[str, Any]:
    return yaml.safe_load(VALUES.read_text())


def alertmanager_config(values: dict[str, Any] | None = None) -> dict[str, Any]:
    """``deploy/alertmanager/alertmanager.yml`` as an AlertmanagerConfig
    (monitoring.coreos.com/v1alpha1) for the Prometheus Operator's Alertmanager, which scopes
    its routes and inhibitions to the object's namespace."""
    values = values or default_values()
    config = yaml.safe_load(ALERTMANAGER.read_text())
    route = config["route"]

    def matchers(items: list[str]) -> list[dict[str, str]]:
        out = []
        for item in items:
            name, op, value = re.fullmatch(r'(\w+)(=~|!~|!=|=)"(.*)"', item).groups()
            out.append({"name": name, "value": value, "matchType": op})
        return out

    return {"apiVersion": "monitoring.coreos.com/v1alpha1", "kind": "AlertmanagerConfig",
            "metadata": {"name": "toolcodec", "namespace": values["namespace"],
                         "labels": {"app.kubernetes.io/name": "toolcodec",
                                    "release": values["monitoring"]["release"]}},
            "spec": {
                "route": {"receiver": route["receiver"], "groupBy": route["group_by"],
                          "groupWait": route["group_wait"],
                          "groupInterval": route["group_interval"],
                          "repeatInterval": route["repeat_interval"],
                          "routes": [{"receiver": r["receiver"],
                                      "matchers": matchers(r["matchers"])}
                                     for r in route["routes"]]},
                "inhibitRules": [{"sourceMatch": matchers(r["source_matchers"]),
                                  "targetMatch": matchers(r["target_matchers"]),
                                  "equal": r["equal"]} for r in config["inhibit_rules"]],
                "receivers": [{"name": r["name"]} for r in config["receivers"]]}}


def kubernetes(values: dict[str, Any] | None = None) -> dict[str, list[dict[str, Any]]]:
    """Every manifest for *values* (merged over ``deploy/values.yaml``), by file name."""
    values = manifests.merged(default_values(), values or {})
    files = manifests.render(values)
    if values["monitoring"]["prometheusRule"]:
        files["prometheus-rule.yaml"] = [prometheus_rule(values)]
    if values["monitoring"]["dashboards"]:
        files["grafana-dashboards.yaml"] = [dashboard_config_map(values)]
    if values["monitoring"]["alertmanagerConfig"]:
        files["alertmanager-config.yaml"] = [alertmanager_config(values)]
    return files


def kubernetes_text(values: dict[str, Any] | None = None) -> dict[str, str]:
    header = ("# Generated by deploy/generate.py from deploy/values.yaml, the rules and the "
              "dashboards: do not edit.\n")
    return {name: header + yaml.safe_dump_all(docs, sort_keys=False, width=100)
            for name, docs in kubernetes(values).items()}


# -- writing and checking ------------------------------------------------------------------------


def rendered() -> dict[Path, str]:
    files = {path: json.dumps(body, indent=2, sort_keys=True) + "\n"
             for path, body in dashboards().items()}
    header = "# Generated by deploy/generate.py from cases.yml and the rules: do not edit.\n"
    files[PROMTOOL_TESTS] = header + yaml.safe_dump(promtool_tests(), sort_keys=False,
                                                    width=100)
    for name, text in kubernetes_text().items():
        files[K8S / name] = text
    files[MODELS] = ("# Generated by deploy/generate.py from deploy/values.yaml (proxy."
                     "modelConfig): do not edit.\n" + manifests.models_yaml(default_values()))
    return files


def all_queries() -> list[tuple[str, str, bool]]:
    """(where, PromQL, data expected) for every dashboard panel target."""
    return [(where, expr, panel.expect_data) for where, panel in all_panels()
            for expr, _ in panel.targets]


def all_panels() -> list[tuple[str, Panel]]:
    return [(f"{name}: {panel.title}", panel)
            for name, panels in (("parse-health", PARSE_HEALTH), ("capacity", CAPACITY))
            for panel in panels]


def main(argv: list[str]) -> int:
    if "--values" in argv:  # a user's values: render the manifests into --out
        given = yaml.safe_load(Path(argv[argv.index("--values") + 1]).read_text()) or {}
        out = Path(argv[argv.index("--out") + 1]) if "--out" in argv else Path("k8s")
        out.mkdir(parents=True, exist_ok=True)
        for name, text in kubernetes_text(given).items():
            (out / name).write_text(text)
        return 0
    stale = []
    for path, text in rendered().items():
        if "--check" in argv:
            if not path.exists() or path.read_text() != text:
                stale.append(str(path.relative_to(ROOT)))
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text)
    if stale:
        print("out of date (run python deploy/generate.py): " + ", ".join(stale))
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1:]))
