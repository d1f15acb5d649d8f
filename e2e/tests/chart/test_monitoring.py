"""The chart's monitoring kit: metrics Services that reach the pods' ports; a ServiceMonitor and a
PrometheusRule only where the Prometheus Operator's API exists, each with a switch; alert rules that
Prometheus' own promtool accepts, and that fire from series named as the code names them (and stay quiet
otherwise); a Grafana dashboard whose every query Prometheus parses."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from e2e.helm import Helm
from e2e.monitoring import (
    MONITORING_API,
    as_promql,
    dashboard,
    dashboard_queries,
    ensure_promtool,
    rendered,
    rule_groups,
)


@pytest.fixture(scope="session")
def promtool(pytestconfig: pytest.Config) -> Path:
    capture = pytestconfig.pluginmanager.getplugin("capturemanager")
    with capture.global_and_fixture_disabled():  # let a first build show its progress
        return ensure_promtool()


def kinds(docs: list[dict[str, Any]]) -> set[tuple[str, str]]:
    return {(d["kind"], d["metadata"]["name"]) for d in docs}


def test_service_monitor_and_rules_render_only_where_the_prometheus_operator_api_exists(helm: Helm) -> None:
    plain = kinds(rendered(helm, api=()))
    assert ("Service", "sf-staticfleet-operator-metrics") in plain
    assert ("ConfigMap", "sf-staticfleet-grafana-dashboard") in plain
    assert not {k for k, _ in plain} & {"ServiceMonitor", "PrometheusRule"}

    full = kinds(rendered(helm))
    assert {("ServiceMonitor", "sf-staticfleet"), ("PrometheusRule", "sf-staticfleet")} <= full

    off = {
        "monitoring.serviceMonitor.enabled": False,
        "monitoring.prometheusRule.enabled": False,
        "monitoring.grafanaDashboard.enabled": False,
        "monitoring.services.enabled": False,
    }
    left = kinds(rendered(helm, off))
    assert not {k for k, n in left if k in ("ServiceMonitor", "PrometheusRule") or "metrics" in n}
    assert ("ConfigMap", "sf-staticfleet-grafana-dashboard") not in left


def test_the_metrics_services_select_the_pods_that_serve_their_ports(helm: Helm) -> None:
    docs = rendered(helm)
    workloads = {d["metadata"]["name"]: d for d in docs if d["kind"] in ("Deployment", "StatefulSet")}
    monitor = next(d for d in docs if d["kind"] == "ServiceMonitor")["spec"]
    endpoints = {e["port"] for e in monitor["endpoints"]}
    for name, workload in (
        ("sf-staticfleet-operator-metrics", "sf-staticfleet-operator"),
        ("sf-staticfleet-coordinator-metrics", "sf-staticfleet-coordinator"),
    ):
        service = next(d for d in docs if d["kind"] == "Service" and d["metadata"]["name"] == name)
        pod = workloads[workload]["spec"]["template"]
        assert service["spec"]["selector"].items() <= pod["metadata"]["labels"].items()
        (port,) = service["spec"]["ports"]
        served = {p["name"] for c in pod["spec"]["containers"] for p in c.get("ports", [])}
        assert port["targetPort"] in served and port["name"] in endpoints
        # The ServiceMonitor's selector finds the Service.
        labels = service["metadata"]["labels"]
        assert monitor["selector"]["matchLabels"].items() <= labels.items()
        assert labels["staticfleet.io/metrics"] in monitor["selector"]["matchExpressions"][0]["values"]


def test_the_service_monitor_sends_the_coordinators_token_when_its_api_asks_for_one(helm: Helm) -> None:
    docs = rendered(helm, {"coordinator.httpTokenSecret": "coordinator-token"})
    monitor = next(d for d in docs if d["kind"] == "ServiceMonitor")["spec"]
    by_port = {e["port"]: e for e in monitor["endpoints"]}
    assert by_port["http"]["authorization"]["credentials"] == {"name": "coordinator-token", "key": "token"}
    assert "authorization" not in by_port["metrics"]
    assert "http" not in {e["port"] for e in _monitor(helm, {"coordinator.enabled": False, **_EXTERNAL})}


def test_the_service_monitor_scrapes_the_secured_coordinator_over_https_with_its_ca_and_token(
    helm: Helm,
) -> None:
    """The default install serves the coordinator's HTTP API on HTTPS behind the token it generates."""
    by_port = {e["port"]: e for e in _monitor(helm, {})}
    http = by_port["http"]
    assert http["scheme"] == "https"
    assert http["tlsConfig"]["ca"]["secret"] == {"name": "sf-staticfleet-coordinator-tls", "key": "ca.crt"}
    assert http["tlsConfig"]["serverName"].startswith("sf-staticfleet-coordinator-0.")
    assert http["authorization"]["credentials"] == {
        "name": "sf-staticfleet-coordinator-http-token",
        "key": "token",
    }
    open_install = {e["port"]: e for e in _monitor(helm, {"coordinator.security.enabled": False})}
    assert "scheme" not in open_install["http"] and "tlsConfig" not in open_install["http"]


_EXTERNAL = {"externalKafka.bootstrapServers": "kafka:9092"}


def _monitor(helm: Helm, values: dict[str, Any]) -> list[dict[str, Any]]:
    docs = rendered(helm, values)
    endpoints: list[dict[str, Any]] = next(d for d in docs if d["kind"] == "ServiceMonitor")["spec"][
        "endpoints"
    ]
    return endpoints


def test_every_alert_can_be_turned_off_and_tuned(helm: Helm) -> None:
    names = [r["alert"] for r in rule_groups(helm)["groups"][0]["rules"]]
    assert names == [
        "StaticfleetFleetNotReady",
        "StaticfleetRebalanceStorm",
        "StaticfleetLagGrowing",
        "StaticfleetRemovalBlocked",
        "StaticfleetCoordinatorStorageErrors",
        "StaticfleetAuthenticationFailures",
    ]
    tuned = rule_groups(
        helm,
        {
            "monitoring.prometheusRule.alerts.lagGrowing.enabled": False,
            "monitoring.prometheusRule.alerts.rebalanceStorm.rebalances": 3,
            "monitoring.prometheusRule.alerts.rebalanceStorm.window": "1h",
        },
    )
    rules = {r["alert"]: r for r in tuned["groups"][0]["rules"]}
    assert "StaticfleetLagGrowing" not in rules
    assert "[1h])) > 3" in rules["StaticfleetRebalanceStorm"]["expr"]


def test_promtool_checks_the_rendered_rules(helm: Helm, promtool: Path, tmp_path: Path) -> None:
    rules = tmp_path / "rules.yaml"
    rules.write_text(yaml.safe_dump(rule_groups(helm)))
    done = subprocess.run([str(promtool), "check", "rules", str(rules)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "SUCCESS: 6 rules found" in done.stdout


def _series(name: str, labels: dict[str, str], values: str) -> dict[str, str]:
    selector = ",".join(f'{k}="{v}"' for k, v in labels.items())
    return {"series": f"{name}{{{selector}}}", "values": values}


FLEET = {"group": "shop.orders"}
INFO = _series("staticfleet_fleet_info", {**FLEET, "fleet_namespace": "shop", "fleet_name": "orders"}, "1x60")
COORDINATOR = {"job": "coordinator", "namespace": "staticfleet", "pod": "sf-staticfleet-coordinator-0"}

WHERE = "StaticConsumerGroup shop/orders"
REMOVAL = (
    ". The departed members stay in the group until their session timeout; the condition's message says "
    "what waits (pods that do not stop, a coordinator that refuses LeaveGroup)."
)
STORAGE = {
    "summary": "The embedded coordinator cannot write its log.",
    "description": "staticfleet/sf-staticfleet-coordinator-0: appends, fsyncs or snapshots of the "
    "coordinator's log fail (a full or failing volume). Requests that must be persisted are answered with a "
    "storage error until it can write again (docs/reliability.md).",
}


def _fired(labels: dict[str, str], summary: str, description: str) -> dict[str, Any]:
    return {"exp_labels": labels, "exp_annotations": {"summary": summary, "description": description}}


def _storm(times: int) -> dict[str, Any]:
    return _fired(
        {**FLEET, "severity": "warning"},
        "A consumer group rebalanced more than 10 times in 15m.",
        f"Group shop.orders ({WHERE}) rebalanced {times} times in 15m: consumers that keep leaving and "
        "joining (crashing pods, a session timeout below a pod's restart time, polls slower than the "
        "rebalance timeout). The coordinator's event log says which members and why.",
    )


def _test(alert: str, at: str, *fired: dict[str, Any]) -> dict[str, Any]:
    return {"eval_time": at, "alertname": alert, "exp_alerts": list(fired)}


# Each alert from series written as the operator and the coordinator name them: it fires where it should,
# with its text (the fleet named from staticfleet_fleet_info), and not where it should not (other series
# beside it each time).
CASES: list[dict[str, Any]] = [
    {
        "input_series": [
            INFO,
            _series("staticfleet_fleet_ready", FLEET, "0x30"),
            _series("staticfleet_fleet_ready", {"group": "shop.other"}, "1x30"),
            _series(
                "staticfleet_fleet_condition", {**FLEET, "type": "Ready", "reason": "GroupNotStable"}, "0x30"
            ),
        ],
        "alert_rule_test": [
            _test("StaticfleetFleetNotReady", "5m"),
            _test(
                "StaticfleetFleetNotReady",
                "15m",
                _fired(
                    {**FLEET, "severity": "warning"},
                    "A fleet of consumers has not been Ready for 10m.",
                    f"Group shop.orders ({WHERE}) is not Ready: GroupNotStable. "
                    "kubectl describe scg says why.",
                ),
            ),
        ],
    },
    {
        "input_series": [
            INFO,
            # 12 rebalances in 12 minutes, then quiet; another group rebalances once.
            _series(
                "staticfleet_rebalances_total",
                {**COORDINATOR, **FLEET, "reason": "member-joined"},
                "0+1x12 12x40",
            ),
            _series(
                "staticfleet_rebalances_total",
                {**COORDINATOR, "group": "quiet", "reason": "member-left"},
                "0 1x50",
            ),
        ],
        "alert_rule_test": [
            _test("StaticfleetRebalanceStorm", "14m", _storm(12)),
            _test("StaticfleetRebalanceStorm", "40m"),
        ],
    },
    {
        # On any Kafka cluster: the status's count, from the operator (2 a minute).
        "input_series": [INFO, _series("staticfleet_fleet_rebalances_total", FLEET, "0+2x30")],
        "alert_rule_test": [_test("StaticfleetRebalanceStorm", "20m", _storm(30))],
    },
    {
        "input_series": [
            INFO,
            _series("staticfleet_fleet_lag_messages", FLEET, "2000+100x60"),
            _series("staticfleet_fleet_lag_messages", {"group": "steady"}, "5000x60"),
            _series("staticfleet_fleet_lag_messages", {"group": "small"}, "0+10x60"),
        ],
        "alert_rule_test": [
            _test("StaticfleetLagGrowing", "10m"),
            _test(
                "StaticfleetLagGrowing",
                "45m",
                _fired(
                    {**FLEET, "severity": "warning"},
                    "A fleet's lag has grown for 15m.",
                    f"Group shop.orders ({WHERE}) is 6500 messages behind and falling further behind: its "
                    "consumers do not keep up (scale the fleet, or look at the consumers).",
                ),
            ),
        ],
    },
    {
        "input_series": [
            INFO,
            _series(
                "staticfleet_fleet_condition",
                {**FLEET, "type": "ScaleDownBlocked", "reason": "PodsNotGone"},
                "1x20",
            ),
            _series(
                "staticfleet_fleet_condition",
                {"group": "b", "type": "Degraded", "reason": "MemberRemovalFailed"},
                "1x20",
            ),
            _series(
                "staticfleet_fleet_condition",
                {"group": "c", "type": "ScaleDownBlocked", "reason": "NotBlocked"},
                "0x20",
            ),
            _series(
                "staticfleet_fleet_condition",
                {"group": "d", "type": "Degraded", "reason": "TopicNotFound"},
                "1x20",
            ),
        ],
        "alert_rule_test": [
            _test(
                "StaticfleetRemovalBlocked",
                "10m",
                _fired(
                    {**FLEET, "type": "ScaleDownBlocked", "reason": "PodsNotGone", "severity": "warning"},
                    "A scale-down cannot finish removing the departed members.",
                    f"Group shop.orders ({WHERE}): ScaleDownBlocked PodsNotGone{REMOVAL}",
                ),
                _fired(
                    {
                        "group": "b",
                        "type": "Degraded",
                        "reason": "MemberRemovalFailed",
                        "severity": "warning",
                    },
                    "A scale-down cannot finish removing the departed members.",
                    "Group b (a group no fleet of this operator names): "
                    f"Degraded MemberRemovalFailed{REMOVAL}",
                ),
            ),
        ],
    },
    {
        "input_series": [
            _series("staticfleet_log_writable", COORDINATOR, "1x5 0x5 1x10"),
            _series("staticfleet_log_append_failures_total", COORDINATOR, "0x20"),
            _series("staticfleet_log_fsync_failures_total", COORDINATOR, "0x20"),
            _series("staticfleet_snapshot_failures_total", COORDINATOR, "0x20"),
        ],
        "alert_rule_test": [
            _test("StaticfleetCoordinatorStorageErrors", "3m"),
            _test(
                "StaticfleetCoordinatorStorageErrors",
                "7m",
                {"exp_labels": {**COORDINATOR, "severity": "critical"}, "exp_annotations": STORAGE},
            ),
            _test("StaticfleetCoordinatorStorageErrors", "15m"),
        ],
    },
    {
        "input_series": [_series("staticfleet_log_append_failures_total", COORDINATOR, "0x5 3x15")],
        "alert_rule_test": [
            _test(
                "StaticfleetCoordinatorStorageErrors",
                "7m",
                {"exp_labels": {**COORDINATOR, "severity": "critical"}, "exp_annotations": STORAGE},
            ),
            _test("StaticfleetCoordinatorStorageErrors", "15m"),
        ],
    },
    {
        "input_series": [
            # 10 failed logins a minute for 30 minutes; clients closing normally do not count.
            _series(
                "staticfleet_connections_closed_total", {**COORDINATOR, "reason": "authentication"}, "0+10x30"
            ),
            _series("staticfleet_connections_closed_total", {**COORDINATOR, "reason": "client"}, "0+100x30"),
        ],
        "alert_rule_test": [
            _test("StaticfleetAuthenticationFailures", "8m"),
            _test(
                "StaticfleetAuthenticationFailures",
                "20m",
                _fired(
                    {**COORDINATOR, "severity": "warning"},
                    "Clients keep failing to authenticate to the embedded coordinator.",
                    "staticfleet/sf-staticfleet-coordinator-0 closes 10.0 connections a minute that failed "
                    "SASL authentication: a wrong or rotated password, or someone trying. The coordinator's "
                    "log names the clients' addresses.",
                ),
            ),
        ],
    },
]


def test_promtool_fires_each_alert_from_the_series_the_code_exports(
    helm: Helm, promtool: Path, tmp_path: Path
) -> None:
    (tmp_path / "rules.yaml").write_text(yaml.safe_dump(rule_groups(helm)))
    tests = {
        "rule_files": ["rules.yaml"],
        "evaluation_interval": "1m",
        "tests": [{"interval": "1m", **c} for c in CASES],
    }
    (tmp_path / "tests.yaml").write_text(yaml.safe_dump(tests, sort_keys=False))
    done = subprocess.run(
        [str(promtool), "test", "rules", "tests.yaml"], cwd=tmp_path, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stdout + done.stderr
    alerts = {r["alert"] for r in rule_groups(helm)["groups"][0]["rules"]}
    assert alerts == {t["alertname"] for c in CASES for t in c["alert_rule_test"]}  # each one tested


def test_prometheus_parses_every_query_of_the_dashboard(promtool: Path, tmp_path: Path) -> None:
    """Each panel's query (Grafana's variables filled in) as a recording rule, checked by promtool."""
    queries = dashboard_queries(dashboard())
    rules = [
        {"record": f"staticfleet:dashboard_query_{i}", "expr": as_promql(q)} for i, q in enumerate(queries)
    ]
    path = tmp_path / "dashboard-queries.yaml"
    path.write_text(yaml.safe_dump({"groups": [{"name": "dashboard", "rules": rules}]}))
    done = subprocess.run([str(promtool), "check", "rules", str(path)], capture_output=True, text=True)
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_dashboard_charts_the_fleets_and_the_coordinators_health(helm: Helm) -> None:
    board = dashboard()
    (config_map,) = [
        d for d in rendered(helm) if d["kind"] == "ConfigMap" and "grafana" in d["metadata"]["name"]
    ]
    assert json.loads(config_map["data"]["staticfleet.json"]) == board
    assert config_map["metadata"]["labels"]["grafana_dashboard"] == "1"
    titles = {p["title"] for p in board["panels"]}
    for wanted in (
        "Ready",
        "Members",
        "Rebalances",
        "Lag",
        "Scale operations",
        "Log writable",
        "Storage errors",
    ):
        assert wanted in titles
    ids = [p["id"] for p in board["panels"]]
    assert len(ids) == len(set(ids))
    # Every fleet panel filters by the dashboard's group variable.
    for panel in board["panels"]:
        for target in panel.get("targets", []):
            if "staticfleet_fleet_" in target["expr"] and "_info" not in target["expr"]:
                assert '{group=~"$group"}' in target["expr"], target["expr"]


def test_the_api_server_would_accept_the_monitoring_objects(helm: Helm) -> None:
    """Their API versions and kinds are the Prometheus Operator's (monitoring.coreos.com/v1)."""
    docs = [d for d in rendered(helm) if d["apiVersion"].startswith("monitoring.coreos.com")]
    assert {(d["apiVersion"], d["kind"]) for d in docs} == {
        (version.rsplit("/", 1)[0], version.rsplit("/", 1)[1]) for version in MONITORING_API
    }
