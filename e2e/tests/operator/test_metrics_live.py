"""The monitoring kit against what the programs really serve: an operator and an embedded coordinator,
a fleet created and scaled down; then every metric and label the chart's alert rules and Grafana
dashboard use is in their /metrics pages. The operator runs with its readiness endpoint and JSON logs,
and both are checked too."""

from __future__ import annotations

import json
import urllib.error
import urllib.request

import pytest

from e2e.helm import Helm, ensure_helm
from e2e.helpers import Cluster, wait_until
from e2e.localcluster.ports import free_port
from e2e.monitoring import dashboard, dashboard_queries, missing, parse_exposition, rule_groups, rule_queries

from .harness import (
    Coordinator,
    OperatorRunner,
    consumer_template,
    fleet_manifest,
    get_fleet,
    ready_with,
    wait_fleet,
)

pytestmark = pytest.mark.localcluster

NAME = "watched"


def _readiness(url: str) -> tuple[int, str]:
    try:
        with urllib.request.urlopen(url, timeout=5) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read().decode()
    except OSError as exc:
        return 0, str(exc)


def _scrape(url: str) -> str:
    with urllib.request.urlopen(url, timeout=10) as response:
        return str(response.read().decode())


def test_every_metric_and_label_of_the_alerts_and_the_dashboard_is_served(
    cluster: Cluster, namespace: str, coordinator: Coordinator, operator: OperatorRunner
) -> None:
    kubectl = cluster.kubectl
    topic = f"{namespace}-watched"
    coordinator.create_topic(topic)
    readiness = f"http://127.0.0.1:{free_port()}/readyz"
    operator.extra_args = ("--readiness", readiness, "--log-format", "json")
    operator.start()
    wait_until(lambda: _readiness(readiness) == (200, "ready: operating\n"), timeout=60, what="ready")

    # Consumers that do not read the departure mark, so that the operator's removal metrics move.
    template = consumer_template(leaves_when_departing=False)
    kubectl.apply(fleet_manifest(NAME, 2, coordinator, topic, template=template), namespace)
    wait_fleet(kubectl, namespace, NAME, ready_with(2), timeout=120, what="Ready with 2")
    kubectl.run("scale", f"scg/{NAME}", "-n", namespace, "--replicas=1")
    wait_fleet(kubectl, namespace, NAME, ready_with(1), timeout=120, what="Ready with 1")
    wait_until(
        lambda: (get_fleet(kubectl, namespace, NAME)["status"].get("lastScale") or {}).get("completedAt"),
        timeout=60,
        what="the scale-down recorded as complete",
    )
    group = f"{namespace}.{NAME}"
    wait_until(
        lambda: 'staticfleet_operator_scale_duration_seconds_count{direction="Down"}' in operator.metrics(),
        timeout=30,
        what="the scale-down's duration observed",
    )

    served = parse_exposition(operator.metrics() + _scrape(f"{coordinator.api}/metrics"))
    helm = Helm(ensure_helm())
    queries = rule_queries(rule_groups(helm)) + dashboard_queries(dashboard())
    assert missing(queries, served) == []

    # The fleet is named by its group on both sides.
    operator_page, coordinator_page = operator.metrics(), _scrape(f"{coordinator.api}/metrics")
    assert f'staticfleet_fleet_ready{{group="{group}"}} 1.0' in operator_page
    info = f'staticfleet_fleet_info{{fleet_name="{NAME}",fleet_namespace="{namespace}",group="{group}"}} 1.0'
    assert info in operator_page
    assert f'staticfleet_group_members{{group="{group}"}} 1.0' in coordinator_page
    assert f'staticfleet_operator_members_removed_total{{group="{group}"}} 1.0' in operator_page

    # Every line of the operator's log is one JSON object with the documented fields.
    lines = [line for line in operator.log_path.read_text().splitlines() if line.strip()]
    assert lines
    for line in lines:
        record = json.loads(line)
        assert {"time", "level", "logger", "message"} <= record.keys(), line
