"""The demo's pure parts: the operator events it records, the table it prints, and its agreement with the
chart (names) and the image (script paths)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from e2e.helm import REPO_ROOT, Helm
from examples.demo import fleet
from examples.demo.driver import OPERATIONS, _fullname, fleet_done, stable_with
from examples.demo.fleet import (
    FLEET_KINDS,
    PLAIN_DYNAMIC,
    PLAIN_STATIC,
    STATICFLEET,
    GroupView,
    expected_members,
    group_settled,
)
from examples.demo.summary import OperationLog, Outcome, compare, details, format_table, operation_rows


def test_operations_are_recorded_as_the_documented_operator_events(tmp_path: Path) -> None:
    log = OperationLog(tmp_path / "ops.jsonl", "shop.orders")
    first = log.started("scale-down", 3, 1)
    log.completed(first, "scale-down", 3, 1)
    second = log.started("scale-up", 1, 4)
    started, completed, again = (json.loads(line) for line in log.path.read_text().splitlines())
    assert started["type"] == "fleet_operation_started" and completed["type"] == "fleet_operation_completed"
    assert started["id"] == completed["id"] == first != second
    assert {k: started[k] for k in ("v", "group", "operation", "from_replicas", "to_replicas", "mode")} == {
        "v": 1,
        "group": "shop.orders",
        "operation": "scale-down",
        "from_replicas": 3,
        "to_replicas": 1,
        "mode": "staticfleet",
    }
    assert started["ts"] <= completed["ts"] <= again["ts"]
    # The fleets beside it number their operations alike, under ids of their own.
    dynamic = OperationLog(tmp_path / "ops.jsonl", "shop.orders-dynamic", "dynamic")
    assert dynamic.started("scale-down", 3, 1) not in (first, second)


def analysed(mode: str = "staticfleet", number: int = 1, **overrides: object) -> dict[str, object]:
    row: dict[str, object] = {
        "status": "completed",
        "operation_id": f"demo/{mode}/{number}",
        "mode": mode,
        "from_replicas": 3,
        "rebalances": 1,
        "duration_ms": 2940,
        "partitions_moved": 4,
        "restarts_absorbed": 0,
        "removed": 2,
    }
    row.update(overrides)
    return row


def column(header: str, rule: str, line: str, title: str) -> str:
    """The cell under `title` (cells are left-aligned under their header)."""
    start = header.index(title)
    end = rule.find(" ", start)
    return line[start : end if end >= 0 else None].strip()


def test_rows_come_from_the_analysis_and_every_column_is_computed() -> None:
    operations = [
        analysed("staticfleet", 1),
        analysed("static", 1, duration_ms=31_200, removed=0, expired=2),
        analysed("dynamic", 1, duration_ms=2_100, removed=0),
        analysed("staticfleet", 2, rebalances=0, partitions_moved=None, removed=None, duration_ms=61),
        analysed("static", 2, rebalances=0, partitions_moved=None, removed=None, duration_ms=70),
        analysed("dynamic", 2, rebalances=5, partitions_moved=9, removed=None, duration_ms=9_000),
    ]
    rows = operation_rows(operations, ["scale 3 -> 1", "rolling restart of 3"])
    assert rows[0].outcomes[STATICFLEET] == Outcome(1, 2.94, 4, 0, 2)
    assert rows[0].outcomes[PLAIN_STATIC].seconds_to_stable == 31.2
    assert (
        rows[1].outcomes[STATICFLEET].partitions_moved,
        rows[1].outcomes[STATICFLEET].members_removed,
    ) == (
        None,
        0,
    )
    header, rule, scale_down, restart = format_table(rows).splitlines()
    assert column(header, rule, scale_down, "staticfleet") == "1 rebalance, 2.9 s"
    assert column(header, rule, scale_down, "plain static") == "1 rebalance, 31.2 s"
    assert column(header, rule, scale_down, "plain dynamic") == "1 rebalance, 2.1 s"
    assert column(header, rule, restart, "staticfleet") == "0 rebalances, 0.1 s"
    assert column(header, rule, restart, "plain dynamic") == "5 rebalances, 9.0 s"
    # The comparison is computed from the same figures: here dynamic membership scaled down faster.
    assert scale_down.endswith("as many rebalances, 0.8 s slower")
    assert restart.endswith("5 fewer rebalances, 8.9 s faster")
    assert "0 partitions moved" not in details(rows)
    assert "scale 3 -> 1: 4 partitions moved, 0 restarts absorbed, 2 members removed" in details(rows)
    # Expiries are named where they happened (why an operation cost a rebalance), and only there.
    assert "expired" not in details(rows)
    assert rows[0].outcomes[PLAIN_STATIC].members_expired == 2
    plain = details(rows, PLAIN_STATIC).splitlines()[0]
    assert plain.endswith(": 4 partitions moved, 0 restarts absorbed, 0 members removed, 2 members expired")


def test_a_run_where_dynamic_membership_did_better_is_shown_as_such() -> None:
    operations = [
        analysed("staticfleet", 1, rebalances=2, duration_ms=5_000),
        analysed("static", 1, rebalances=2, duration_ms=6_000),
        analysed("dynamic", 1, rebalances=1, duration_ms=1_500),
    ]
    rows = operation_rows(operations, ["scale 1 -> 4"])
    assert rows[0].against_dynamic == "1 more rebalance, 3.5 s slower"
    assert format_table(rows).splitlines()[-1].endswith("1 more rebalance, 3.5 s slower")
    assert compare(1, 2.0, 1, 2.0) == "as many rebalances, as fast"


def test_an_operation_missing_from_the_analysis_or_incomplete_is_an_error() -> None:
    with pytest.raises(ValueError, match="is not in the analysis"):
        operation_rows([analysed()], OPERATIONS)
    with pytest.raises(ValueError, match="did not complete"):
        operation_rows([analysed(status="incomplete")], OPERATIONS[:1], kinds=[STATICFLEET])
    with pytest.raises(ValueError, match="expected 1 operations"):
        operation_rows([analysed(), analysed(number=2)], OPERATIONS[:1], kinds=[STATICFLEET])


def group_view(members: list[dict[str, Any]], state: str = "Stable") -> dict[str, Any]:
    return {"state": state, "rebalanceInProgress": False, "memberList": members}


def statefulset(replicas: int, ready: int, generation: int = 4, **status: Any) -> dict[str, Any]:
    return {
        "metadata": {"generation": generation},
        "spec": {"replicas": replicas},
        "status": {"observedGeneration": generation, "readyReplicas": ready, **status},
    }


def test_the_demo_waits_for_the_expected_members_assigned_and_every_consumer_ready() -> None:
    static: list[dict[str, Any]] = [
        {"instanceId": f"orders-{i}", "memberId": f"m{i}", "partitions": {"orders": [i]}} for i in range(3)
    ]
    assert fleet_done(STATICFLEET, 3, group_view(static), statefulset(3, 3))
    assert not fleet_done(STATICFLEET, 3, group_view(static), statefulset(3, 2))  # a pod not ready
    assert not fleet_done(STATICFLEET, 2, group_view(static), statefulset(2, 2))  # a member to remove
    assert not fleet_done(STATICFLEET, 3, group_view(static, "PreparingRebalance"), statefulset(3, 3))
    unassigned = [*static[:2], {**static[2], "partitions": None}]
    assert not fleet_done(STATICFLEET, 3, group_view(unassigned), statefulset(3, 3))
    assert not fleet_done(STATICFLEET, 3, None, statefulset(3, 3))
    # Another fleet's instance ids do not count; dynamic members are counted.
    assert not fleet_done(PLAIN_STATIC, 3, group_view(static), statefulset(3, 3))
    dynamic = [{**m, "instanceId": None} for m in static]
    assert fleet_done(PLAIN_DYNAMIC, 3, group_view(dynamic), statefulset(3, 3))
    assert not fleet_done(PLAIN_DYNAMIC, 4, group_view(dynamic), statefulset(4, 4))
    # A rollout is done once the StatefulSet has replaced every pod.
    rolling = statefulset(3, 3, generation=5, currentRevision="a", updateRevision="b", updatedReplicas=1)
    assert not fleet_done(STATICFLEET, 3, group_view(static), rolling, generation_before=4)
    rolled = statefulset(3, 3, generation=5, currentRevision="b", updateRevision="b", updatedReplicas=3)
    assert fleet_done(STATICFLEET, 3, group_view(static), rolled, generation_before=4)
    assert not fleet_done(STATICFLEET, 3, group_view(static), rolled, generation_before=5)


def test_a_group_is_settled_when_stable_with_exactly_the_expected_members_each_assigned() -> None:
    three = expected_members("orders", STATICFLEET, 3)
    assert three == frozenset({"orders-0", "orders-1", "orders-2"})
    assert expected_members("orders", PLAIN_STATIC, 2) == frozenset({"orders-0", "orders-1"})
    assert group_settled(GroupView("Stable", ("orders-2", "orders-0", "orders-1"), assigned=True), three)
    assert not group_settled(GroupView("Stable", ("orders-0", "orders-1"), assigned=True), three)  # missing
    extra = ("orders-0", "orders-1", "orders-2", "orders-3")
    assert not group_settled(GroupView("Stable", extra, assigned=True), three)
    other = ("orders-0", "orders-1", "orders-static-2")  # the right number, not the right ids
    assert not group_settled(GroupView("Stable", other, assigned=True), three)
    members = ("orders-0", "orders-1", "orders-2")
    assert not group_settled(GroupView("Stable", members, assigned=False), three)
    assert not group_settled(GroupView("CompletingRebalance", members, assigned=True), three)
    assert not group_settled(None, three)
    # Dynamic members have fresh ids each time they join: only their number counts.
    assert expected_members("orders-dynamic", PLAIN_DYNAMIC, 3) == 3
    assert group_settled(GroupView("Stable", ("c-1a", "c-2b", "c-3c"), assigned=True), 3)
    assert not group_settled(GroupView("Stable", ("c-1a", "c-2b"), assigned=True), 3)
    assert not group_settled(GroupView("Stable", ("c-1a", "c-2b", "c-3c", "c-4d"), assigned=True), 3)
    assert not group_settled(GroupView("PreparingRebalance", ("c-1a", "c-2b", "c-3c"), assigned=True), 3)


def test_the_group_view_of_the_coordinators_json_names_members_and_says_when_a_rebalance_runs() -> None:
    data: dict[str, Any] = {
        "state": "Stable",
        "rebalanceInProgress": None,
        "memberList": [
            {"instanceId": "orders-0", "memberId": "orders-0-x", "partitions": {"orders": [0, 1]}},
            {"instanceId": None, "memberId": "c-1a", "partitions": {"orders": [2]}},
        ],
    }
    assert GroupView.from_json(data) == GroupView("Stable", ("orders-0", "c-1a"), assigned=True)
    running = {**data, "rebalanceInProgress": {"reason": "a member joined", "startedMs": 1}}
    assert GroupView.from_json(running).state == "PreparingRebalance"
    unassigned = {**data, "memberList": [*data["memberList"], {"memberId": "c-2b", "partitions": {}}]}
    assert not GroupView.from_json(unassigned).assigned
    assert GroupView.from_json({"state": "Empty", "memberList": None}) == GroupView(
        "Empty", (), assigned=True
    )


def test_the_staticconsumergroups_status_says_when_it_is_a_stable_group_of_ready_consumers() -> None:
    status: dict[str, Any] = {
        "observedGeneration": 4,
        "readyReplicas": 3,
        "group": {"state": "Stable", "members": 3},
        "conditions": [{"type": "Ready", "status": "True"}],
    }
    body: dict[str, Any] = {"metadata": {"generation": 4}, "spec": {"replicas": 3}, "status": status}
    assert stable_with(body, 3)
    assert not stable_with(body, 1)
    assert not stable_with({**body, "metadata": {"generation": 5}}, 3)  # status not yet caught up
    assert not stable_with({**body, "status": {**status, "readyReplicas": 2}}, 3)
    assert not stable_with(
        {**body, "status": {**status, "group": {"state": "PreparingRebalance", "members": 3}}}, 3
    )


def test_the_plain_fleets_are_the_operators_statefulset_operated_by_nobody() -> None:
    from staticfleet.kube import builders
    from staticfleet.kube.spec import OperatorDefaults, parse_group

    fleets = {kind: fleet.consumer_fleet(3, image="i", local=False, kind=kind) for kind in FLEET_KINDS}
    names = {kind: body["metadata"]["name"] for kind, body in fleets.items()}
    assert len(set(names.values())) == 3 and names[STATICFLEET] == fleet.FLEET
    assert [fleet.operated(kind) for kind in FLEET_KINDS] == [True, False, False]

    def env(template: dict[str, Any]) -> dict[str, str]:
        return {e["name"]: e.get("value", "") for e in template["spec"]["containers"][0]["env"]}

    assert env(fleets[STATICFLEET]["spec"]["template"])["KAFKA_MEMBERSHIP"] == "static"
    service, plain_static = fleet.plain_workload(fleets[PLAIN_STATIC], "shop", "kafka:9092")
    _, plain_dynamic = fleet.plain_workload(fleets[PLAIN_DYNAMIC], "shop", "kafka:9092")
    assert (service["kind"], plain_static["kind"]) == ("Service", "StatefulSet")
    for body in (service, plain_static, plain_dynamic):
        assert "ownerReferences" not in body["metadata"]
        assert fleet.MANAGED_BY not in body["metadata"]["labels"]
    assert fleet.MANAGED_BY not in plain_static["spec"]["template"]["metadata"]["labels"]
    # Not the operator's, so through the chart's NetworkPolicy as a Kafka client, as the producer is.
    assert plain_static["spec"]["template"]["metadata"]["labels"][fleet.KAFKA_CLIENT_LABEL] == "true"
    assert env(plain_static["spec"]["template"])["KAFKA_MEMBERSHIP"] == "static"
    assert env(plain_dynamic["spec"]["template"])["KAFKA_MEMBERSHIP"] == "dynamic"
    assert "KAFKA_GROUP_INSTANCE_ID" in env(plain_static["spec"]["template"])
    # What the operator would build for the same resource, apart from the owner and its label.
    embedded = OperatorDefaults(bootstrap_servers="kafka:9092", coordinator_api="http://coordinator:8080")
    operators = builders.statefulset(
        parse_group(
            {**fleets[PLAIN_STATIC], "metadata": {"name": names[PLAIN_STATIC], "namespace": "shop"}}, embedded
        ),
        "kafka:9092",
        3,
    )
    assert plain_static["spec"]["selector"] == operators["spec"]["selector"]
    assert plain_static["spec"]["volumeClaimTemplates"] == operators["spec"]["volumeClaimTemplates"]
    # ... and without the operator's heartbeat default: a plain fleet heartbeats at the client's default.
    operators_pod = operators["spec"]["template"]["spec"]
    assert env(operators["spec"]["template"])[fleet.HEARTBEAT_ENV] == "250"
    assert fleet.HEARTBEAT_ENV not in env(plain_static["spec"]["template"])
    for container in operators_pod["containers"]:
        container["env"] = [e for e in container["env"] if e["name"] != fleet.HEARTBEAT_ENV]
    assert plain_static["spec"]["template"]["spec"] == operators_pod


def test_no_comparison_figure_is_typed_into_the_demo() -> None:
    source = (REPO_ROOT / "examples" / "demo" / "driver.py").read_text()
    assert "rebalances" not in " ".join(OPERATIONS)
    assert 'session timeout")' not in source and "or more" not in source


@pytest.mark.parametrize("release", ["staticfleet", "demo-1a2b3c", "x" * 45])
def test_the_demo_derives_the_chart_names_as_the_chart_does(helm: Helm, release: str) -> None:
    names = {d["metadata"]["name"] for d in helm.template(release=release) if d["kind"] == "Deployment"}
    assert names == {f"{_fullname(release)}-operator"}


def test_the_fleet_runs_scripts_that_exist_here_and_in_the_image() -> None:
    dockerfile = (REPO_ROOT / "Dockerfile").read_text()
    for name in ("consumer.py", "producer.py"):
        local = Path(fleet.script(name, local=True))
        assert local.is_file()
        assert f"{local.relative_to(REPO_ROOT)}" in dockerfile
        assert fleet.script(name, local=False) == f"/app/{name}"
    assert "examples/producer/producer.py /app/" in dockerfile
    for kind in FLEET_KINDS:
        consumers = fleet.consumer_fleet(3, image="i", local=False, kind=kind)
        command = consumers["spec"]["template"]["spec"]["containers"][0]["command"]
        assert command == ["python", "/app/consumer.py"]


def test_fleets_are_probed_over_http_and_answer_the_departure_handshake_on_a_pod_address() -> None:
    """On a real kubelet each pod has its address; on the pod runner each asks for one of its own, which
    the consumer listens on, so that the operator and the probes reach every pod on the same port."""
    for kind in FLEET_KINDS:
        for local in (False, True):
            template = fleet.consumer_fleet(3, image="i", local=local, kind=kind)["spec"]["template"]
            (container,) = template["spec"]["containers"]
            assert container["readinessProbe"]["httpGet"] == {"path": "/ready", "port": fleet.READY_PORT}
            assert {"name": "READY_PORT", "value": str(fleet.READY_PORT)} in container["env"]
            assert container["ports"] == [{"name": "departure", "containerPort": fleet.READY_PORT}]
            own = (template.get("metadata") or {}).get("annotations") == {fleet.OWN_IP_ANNOTATION: "true"}
            host = [e for e in container["env"] if e["name"] == "READY_HOST"]
            assert own == local and bool(host) == local
