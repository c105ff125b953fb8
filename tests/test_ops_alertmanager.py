"""One incident pages once: each fault of the promtool cases, through the shipped Alertmanager.

``deploy/prometheus/tests/cases.yml`` gives, for each fault (every worker killed, one worker
killed, Redis down, a runaway burst, overload, a cold start), the alerts that fire (promtool
checks that they do, and that no other one does). Here they are posted to a real Alertmanager
(Debian's ``prometheus-alertmanager``) running ``deploy/alertmanager/alertmanager.yml``, and
the groups that would reach the pager, inhibitions applied, are counted.
"""

from __future__ import annotations

import shutil
import subprocess
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import httpx
import pytest
import yaml

from tests.redis_server import free_port

ROOT = Path(__file__).resolve().parent.parent
CONFIG = ROOT / "deploy" / "alertmanager" / "alertmanager.yml"
CASES = ROOT / "deploy" / "prometheus" / "tests" / "cases.yml"
RULES = ROOT / "deploy" / "prometheus" / "rules" / "toolcodec.yml"
RUNBOOKS = ROOT / "docs" / "runbooks.md"
PAGER = "toolcodec-pager"


def faults() -> list[dict]:
    return [t for t in yaml.safe_load(CASES.read_text())["tests"] if "fault" in t]


def tool(*names: str) -> str:
    for name in names:
        if path := shutil.which(name):
            return path
    raise AssertionError(f"{names[0]} is missing: apt-get install -y prometheus-alertmanager")


@pytest.fixture(scope="module")
def alertmanager(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("alertmanager")
    port = free_port()
    proc = subprocess.Popen([tool("prometheus-alertmanager", "alertmanager"),
                             f"--config.file={CONFIG}", f"--storage.path={tmp}",
                             f"--web.listen-address=127.0.0.1:{port}",
                             "--cluster.listen-address=", "--log.level=warn"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    url = f"http://127.0.0.1:{port}"
    try:
        assert wait_for(lambda: ready(url), 60), "alertmanager did not start"
        yield url
    finally:
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
        time.sleep(0.1)
    return predicate()


def post(url: str, alerts: list[dict[str, str]]) -> None:
    now = datetime.now(UTC)
    body = [{"labels": labels, "startsAt": now.isoformat(),
             "endsAt": (now + timedelta(hours=1)).isoformat()} for labels in alerts]
    assert httpx.post(url + "/api/v2/alerts", json=body, timeout=10).status_code == 200


def alerts(url: str, namespace: str) -> list[dict]:
    got = httpx.get(url + "/api/v2/alerts", params={"filter": f'namespace="{namespace}"'},
                    timeout=10).json()
    return got


def settled(url: str, namespace: str) -> None:
    """Alertmanager's inhibitor reads posted alerts in order: once a source and target posted
    after the fault's alerts show the target muted, the fault's alerts are all seen."""
    post(url, [{"alertname": "ToolcodecBackendDown", "severity": "critical", "team": "platform",
                "namespace": namespace},
               {"alertname": "ToolcodecNoWorkers", "severity": "critical", "team": "platform",
                "namespace": namespace}])
    assert wait_for(lambda: any(a["labels"]["alertname"] == "ToolcodecNoWorkers"
                                and a["status"]["inhibitedBy"]
                                for a in alerts(url, namespace)), 30)


def pages(url: str, namespace: str) -> list[list[str]]:
    """The pager's notifications for ``namespace``: one per group, with its alerts' names."""
    groups = httpx.get(url + "/api/v2/alerts/groups", params={
        "receiver": PAGER, "inhibited": "false", "silenced": "false", "active": "true",
        "filter": f'namespace="{namespace}"'}, timeout=10).json()
    return [sorted(a["labels"]["alertname"] for a in g["alerts"]) for g in groups
            if g["alerts"]]


def test_every_fault_is_a_case() -> None:
    names = " | ".join(t["name"] for t in faults())
    for fault in ("every rq worker killed", "one rq worker of four killed", "Redis down",
                  "runaway burst", "overload", "cold start"):
        assert fault in names, fault


@pytest.mark.parametrize("case", faults(), ids=lambda t: t["name"].split("(")[0].strip())
def test_each_fault_pages_once(alertmanager, case) -> None:
    index = faults().index(case)
    namespace = f"fault-{index}"
    fired = [{**{k: str(v) for k, v in a["exp_labels"].items()},
              "alertname": a["alertname"], "namespace": namespace}
             for a in case["fault"]["firing"]]
    if fired:
        post(alertmanager, fired)
    settled(alertmanager, f"{namespace}-sentinel")
    assert wait_for(lambda: len(alerts(alertmanager, namespace)) == len(fired), 30)
    got = pages(alertmanager, namespace)
    assert len(got) == case["fault"]["pages"], got
    for names in got:  # the page names one cause, not a pile of consequences
        assert len(names) == 1, names


def test_the_critical_alerts_are_routed_to_the_pager_and_warnings_are_not() -> None:
    rules = yaml.safe_load(RULES.read_text())
    amtool = tool("amtool")
    for rule in (r for g in rules["groups"] for r in g["rules"] if "alert" in r):
        labels = [f"alertname={rule['alert']}", *(f"{k}={v}" for k, v in rule["labels"].items())]
        out = subprocess.run([amtool, "config", "routes", "test", f"--config.file={CONFIG}",
                              *labels], capture_output=True, text=True, check=True)
        want = PAGER if rule["labels"]["severity"] == "critical" else "toolcodec-warning"
        assert out.stdout.strip() == want, (rule["alert"], out.stdout)
        assert rule["labels"]["severity"] in ("critical", "warning")
        assert set(rule["annotations"]) == {"summary", "description", "runbook_url"}
        base, _, anchor = rule["annotations"]["runbook_url"].partition("#")
        assert base.endswith("/docs/runbooks.md") and anchor == rule["alert"].lower()
        assert f"## {rule['alert']}\n" in RUNBOOKS.read_text()
