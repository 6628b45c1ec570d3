"""deploy/: the alerting rules pass promtool (syntax and unit tests), and every metric and label the
rules and the Grafana dashboard use is one a real server exports."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import httpx
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy"
PROMETHEUS_LABELS = {"instance", "job"}  # added by the scrape, not by the service
PROMETHEUS_METRICS = {"up"}  # Prometheus's own series about the scrape
METRIC = re.compile(r"\b([a-z_][a-z0-9_]*)\s*(\{[^}]*\})?")
LABEL = re.compile(r"([a-zA-Z_][a-zA-Z0-9_]*)\s*(?:=~|!~|!=|=)")


def promtool(*args: str) -> subprocess.CompletedProcess[str]:
    if shutil.which("promtool") is None:
        pytest.fail("promtool is not installed: apt-get install prometheus (.ci/run does)")
    return subprocess.run(["promtool", *args], check=False, cwd=DEPLOY, capture_output=True, text=True, timeout=120)


def test_alert_rules_are_valid() -> None:
    result = promtool("check", "rules", "alerts.yml")
    assert result.returncode == 0, result.stdout + result.stderr
    assert "SUCCESS: 8 rules found" in result.stdout


def test_alert_rules_unit_tests_pass() -> None:
    result = promtool("test", "rules", "alerts_test.yml")
    assert result.returncode == 0, result.stdout + result.stderr


def alert_expressions() -> dict[str, str]:
    groups = yaml.safe_load((DEPLOY / "alerts.yml").read_text())["groups"]
    return {rule["alert"]: rule["expr"] for group in groups for rule in group["rules"]}


def dashboard_expressions() -> dict[str, str]:
    dashboard = json.loads((DEPLOY / "grafana" / "errtriage.json").read_text())
    found = {f"{panel['title']}/{target['refId']}": target["expr"]
             for panel in dashboard["panels"] for target in panel["targets"]}
    for variable in dashboard["templating"]["list"]:
        if variable["type"] == "query":
            found[f"${variable['name']}"] = variable["definition"]
    return found


def test_alerts_cover_what_the_issue_asks() -> None:
    alerts = alert_expressions()
    assert set(alerts) == {"ErrtriageTargetDown", "ErrtriageNoTargets", "ErrtriageRulesReloadFailing",
                           "ErrtriageNotificationsFailing", "ErrtriageNotificationsDropped",
                           "ErrtriageNotificationQueueNearFull", "ErrtriageRedisDown", "ErrtriageUnknownShareRising"}
    tested = {case["alertname"] for test in yaml.safe_load((DEPLOY / "alerts_test.yml").read_text())["tests"]
              for case in test["alert_rule_test"] if case["exp_alerts"]}
    assert tested == set(alerts), "every alert has a unit test in which it fires"


def test_dashboard_has_the_panels_and_a_datasource_variable() -> None:
    dashboard = json.loads((DEPLOY / "grafana" / "errtriage.json").read_text())
    titles = {panel["title"] for panel in dashboard["panels"]}
    assert {"Errors by class", "Errors by provider", "Unknown share", "Notification outcomes",
            "Notification delivery latency", "Notification queue", "Rules: last reload",
            "Request latency p95 by route"} <= titles
    assert len({panel["id"] for panel in dashboard["panels"]}) == len(dashboard["panels"])
    assert all(panel["datasource"]["uid"] == "${datasource}" for panel in dashboard["panels"])


def test_compose_loads_the_alerts_and_offers_grafana_behind_a_profile() -> None:
    compose = yaml.safe_load((ROOT / "docker-compose.yml").read_text())
    mounts = compose["services"]["prometheus"]["volumes"]
    assert "./deploy/alerts.yml:/etc/prometheus/alerts.yml:ro" in mounts
    assert yaml.safe_load((DEPLOY / "prometheus.yml").read_text())["rule_files"] == ["/etc/prometheus/alerts.yml"]
    grafana = compose["services"]["grafana"]
    assert grafana["profiles"] == ["grafana"]
    for mount in grafana["volumes"]:
        assert (ROOT / mount.split(":")[0]).exists(), mount


@pytest.fixture
def exported(live: Callable[..., httpx.Client]) -> Iterator[dict[str, set[str]]]:
    """Sample name -> label names, scraped from a real server after reports, a classify, a sent notification."""
    api = live()
    api.post("/v1/errors", json={"message": "You exceeded your current quota", "code": "insufficient_quota",
                                 "provider": "openai", "context": {"user_email": "dev@example.com"}})
    api.post("/v1/errors", json={"message": "KeyError: 'x'"})
    api.post("/v1/classify", json={"message": "Overloaded", "type": "overloaded_error"})
    deadline = time.monotonic() + 20
    while True:  # the notification is sent off the request path: wait for its delivery histogram
        text = api.get("/metrics").text
        if "errtriage_notification_delivery_seconds_bucket" in text or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    samples: dict[str, set[str]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples.setdefault(sample.name, set()).update(sample.labels)
    yield samples


def used(expressions: dict[str, str]) -> Iterator[tuple[str, str, set[str]]]:
    """(where, metric, label names) for every selector of our metrics and Prometheus's own `up`."""
    for where, expr in expressions.items():
        for match in METRIC.finditer(re.sub(r'"[^"]*"', '""', expr)):
            name = match.group(1)
            if name.startswith("errtriage_") or name in PROMETHEUS_METRICS:
                yield where, name, set(LABEL.findall(match.group(2) or ""))


@pytest.mark.parametrize("source", [alert_expressions, dashboard_expressions])
def test_every_metric_and_label_used_is_exported(exported: dict[str, set[str]],
                                                 source: Callable[[], dict[str, str]]) -> None:
    uses = list(used(source()))
    assert len({name for _, name, _ in uses}) >= 5
    for where, name, labels in uses:
        if name in PROMETHEUS_METRICS:
            assert labels <= PROMETHEUS_LABELS, (where, name, labels)
            continue
        assert name in exported, f"{where}: {name} is not exported (have: {sorted(exported)})"
        assert labels <= exported[name] | PROMETHEUS_LABELS | {"le"}, (where, name, labels - exported[name])


def test_the_delivery_latency_panel_has_its_metric(exported: dict[str, set[str]]) -> None:
    assert {"channel", "le"} <= exported["errtriage_notification_delivery_seconds_bucket"]
