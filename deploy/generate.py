"""Generate the checked-in operations files from one description each.

- ``grafana/dashboards/parse-health.json`` and ``capacity.json``: Grafana dashboards, built from
  the panel lists below (a small generator of our own: plain dicts, Grafana's JSON model);
- ``deploy/prometheus/tests/toolcodec_test.yml``: the promtool unit tests, built from
  ``cases.yml`` with each expected alert's annotations rendered from the rules file, so that
  runbook text lives in the rules alone.

``python deploy/generate.py`` writes them; ``python deploy/generate.py --check`` exits 1 when a
checked-in file differs from what would be generated (the tests run the same check). Every
query may name only series toolcodec exports (``toolcodec.pool.metric_catalog``), the
recording rules of
``deploy/prometheus/rules``, or Prometheus' own ``up``/``process_*``.
"""

from __future__ import annotations

import json
import re
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

ROOT = Path(__file__).resolve().parent.parent
DASHBOARDS = ROOT / "grafana" / "dashboards"
RULES = ROOT / "deploy" / "prometheus" / "rules" / "toolcodec.yml"
CASES = ROOT / "deploy" / "prometheus" / "tests" / "cases.yml"
PROMTOOL_TESTS = ROOT / "deploy" / "prometheus" / "tests" / "toolcodec_test.yml"
BUDGET_S = 0.05  # the 50 ms job budget drawn on latency panels
DATASOURCE = {"type": "prometheus", "uid": "prometheus"}


@dataclass(frozen=True)
class Panel:
    title: str
    exprs: tuple[str, ...]
    unit: str = "short"
    kind: str = "timeseries"
    legend: str = ""
    budget_line: bool = False
    expect_data: bool = True  # after a short load with faults (checked against Prometheus)


RATE = "$__rate_interval"
PARSE_HEALTH = [
    Panel("Jobs per second by outcome",
          (f"sum by (outcome) (rate(toolcodec_jobs_total[{RATE}]))",), "reqps",
          legend="{{outcome}}"),
    Panel("Success, failure and timeout ratios (5m)",
          ("sum(toolcodec:success_ratio:rate5m)", "sum(toolcodec:failure_ratio:rate5m)",
           "sum(toolcodec:timeout_ratio:rate5m)"), "percentunit"),
    Panel("Job latency p50 / p95 / p99 against the budget",
          tuple(f"histogram_quantile({q}, sum by (le) (rate("
                f"toolcodec_job_duration_seconds_bucket[{RATE}])))"
                for q in ("0.50", "0.95", "0.99")), "s", budget_line=True),
    Panel("SLO error ratio (answered in time, no error of ours), 5m and 1h",
          ("toolcodec:slo_errors:ratio_rate5m", "toolcodec:slo_errors:ratio_rate1h"),
          "percentunit"),
    Panel("Queue depth", ("sum by (backend) (toolcodec_queue_depth)",), legend="{{backend}}"),
    Panel("Workers by state", ("sum by (backend, state) (toolcodec_workers)",),
          legend="{{backend}} {{state}}"),
    Panel("Worker restarts", (f"sum by (backend, reason) (increase("
                              f"toolcodec_worker_restarts_total[{RATE}]))",),
          legend="{{backend}} {{reason}}"),
    Panel("Top repair ids: what your models get wrong",
          ("topk(10, sum by (repair) (increase(toolcodec_repairs_total[$__range])))",),
          kind="barchart", legend="{{repair}}"),
    Panel("Decode paths", (f"sum by (path) (rate(toolcodec_decode_path_total[{RATE}]))",),
          "reqps", legend="{{path}}"),
    Panel("Jobs that could not run, by error code",
          (f"sum by (code) (rate(toolcodec_job_errors_total[{RATE}]))",), "reqps",
          legend="{{code}}"),
    Panel("HTTP requests by route and status code",
          (f"sum by (route, code) (rate(toolcodec_http_requests_total[{RATE}]))",), "reqps",
          legend="{{route}} {{code}}"),
    Panel("Proxy: model errors left unrepaired",
          (f"sum by (code) (rate(toolcodec_proxy_model_errors_total[{RATE}]))",), "reqps",
          legend="{{code}}", expect_data=False),
]
CAPACITY = [
    Panel("Throughput by op and backend",
          (f"sum by (op, backend) (rate(toolcodec_jobs_total[{RATE}]))",), "reqps",
          legend="{{op}} {{backend}}"),
    Panel("Job latency p99 by op (recorded)", ("toolcodec:job_duration_seconds:p99",), "s",
          budget_line=True, legend="{{op}} {{backend}}"),
    Panel("Busy share of the workers",
          ('sum by (backend) (toolcodec_workers{state="busy"}) '
           "/ sum by (backend) (toolcodec_workers)",), "percentunit", legend="{{backend}}"),
    Panel("HTTP request duration p99 by route",
          (f"histogram_quantile(0.99, sum by (route, le) (rate("
           f"toolcodec_http_request_duration_seconds_bucket[{RATE}])))",), "s",
          legend="{{route}}"),
    Panel("Queue depth", ("sum by (backend) (toolcodec_queue_depth)",), legend="{{backend}}"),
    Panel("CPU of toolcodec processes",
          (f'sum by (job, instance) (rate(process_cpu_seconds_total{{job=~"toolcodec.*"}}'
           f"[{RATE}]))",), "percentunit", legend="{{job}} {{instance}}"),
]


def dashboard(uid: str, title: str, panels: list[Panel]) -> dict[str, Any]:
    return {
        "uid": uid, "title": title, "tags": ["toolcodec"], "timezone": "browser",
        "schemaVersion": 39, "version": 1, "refresh": "30s",
        "time": {"from": "now-6h", "to": "now"}, "editable": True,
        "templating": {"list": []}, "annotations": {"list": []},
        "panels": [_panel(i, p) for i, p in enumerate(panels)],
    }


def _panel(index: int, panel: Panel) -> dict[str, Any]:
    thresholds = [{"color": "green", "value": None}]
    if panel.budget_line:
        thresholds.append({"color": "red", "value": BUDGET_S})
    return {
        "id": index + 1, "type": panel.kind, "title": panel.title, "datasource": DATASOURCE,
        "gridPos": {"h": 8, "w": 12, "x": 12 * (index % 2), "y": 8 * (index // 2)},
        "fieldConfig": {"defaults": {
            "unit": panel.unit, "thresholds": {"mode": "absolute", "steps": thresholds},
            "custom": {"thresholdsStyle": {"mode": "line" if panel.budget_line else "off"}}},
            "overrides": []},
        "options": {"legend": {"showLegend": True, "displayMode": "list", "placement": "bottom"}},
        "targets": [{"refId": chr(ord("A") + i), "datasource": DATASOURCE, "expr": expr,
                     "legendFormat": panel.legend}
                    for i, expr in enumerate(panel.exprs)],
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
    rules = yaml.safe_load(RULES.read_text())
    annotations = {r["alert"]: r.get("annotations", {}) for g in rules["groups"]
                   for r in g["rules"] if "alert" in r}
    cases = yaml.safe_load(CASES.read_text())
    for test in cases["tests"]:
        for check in test.get("alert_rule_test", []):
            for alert in check.get("exp_alerts", []):
                labels = alert["exp_labels"]
                alert["exp_annotations"] = {
                    k: _render(v, labels) for k, v in annotations[check["alertname"]].items()}
    return cases


def _render(template: str, labels: dict[str, Any]) -> str:
    return re.sub(r"\{\{\s*\$labels\.(\w+)\s*\}\}", lambda m: str(labels.get(m.group(1), "")),
                  template)


# -- writing and checking ------------------------------------------------------------------------


def rendered() -> dict[Path, str]:
    files = {path: json.dumps(body, indent=2, sort_keys=True) + "\n"
             for path, body in dashboards().items()}
    header = "# Generated by deploy/generate.py from cases.yml and the rules: do not edit.\n"
    files[PROMTOOL_TESTS] = header + yaml.safe_dump(promtool_tests(), sort_keys=False,
                                                    width=100)
    return files


def all_queries() -> list[tuple[str, str, bool]]:
    """(where, PromQL, data expected) for every dashboard panel target."""
    out = []
    for name, panels in (("parse-health", PARSE_HEALTH), ("capacity", CAPACITY)):
        for panel in panels:
            out += [(f"{name}: {panel.title}", e, panel.expect_data) for e in panel.exprs]
    return out


def main(argv: list[str]) -> int:
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
