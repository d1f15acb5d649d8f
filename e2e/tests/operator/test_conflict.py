"""Two fleets claiming one consumer group: the later one is Degraded/GroupIdConflict and left alone."""

from __future__ import annotations

import time

import pytest

from e2e.helpers import Cluster

from .harness import Coordinator, OperatorRunner, condition, events, fleet_manifest, get_fleet, wait_fleet

pytestmark = pytest.mark.localcluster


def test_the_later_claim_on_a_group_is_not_reconciled(
    cluster: Cluster, namespace: str, coordinator: Coordinator, operator: OperatorRunner
) -> None:
    kubectl = cluster.kubectl
    topic = f"{namespace}-orders"
    coordinator.create_topic(topic)
    operator.start()
    kubectl.apply(fleet_manifest("first", 0, coordinator, topic, groupId=f"{namespace}-shared"), namespace)
    wait_fleet(kubectl, namespace, "first", lambda b: bool(b.get("status")), timeout=60, what="a status")
    time.sleep(1.1)  # creation timestamps have one-second resolution
    kubectl.apply(fleet_manifest("second", 1, coordinator, topic, groupId=f"{namespace}-shared"), namespace)

    body = wait_fleet(
        kubectl,
        namespace,
        "second",
        lambda b: condition(b, "Degraded").get("reason") == "GroupIdConflict",
        timeout=60,
        what="GroupIdConflict",
    )
    assert f"{namespace}/first" in condition(body, "Degraded")["message"]
    assert condition(body, "Ready")["status"] == "False"
    assert kubectl.get_or_none("statefulset", "second", namespace) is None
    assert [e["reason"] for e in events(kubectl, namespace, "second", "GroupIdConflict")] == [
        "GroupIdConflict"
    ]
    assert condition(get_fleet(kubectl, namespace, "first"), "Degraded").get("reason") != "GroupIdConflict"


def test_two_addresses_of_one_cluster_are_one_claim(
    cluster: Cluster, namespace: str, coordinator: Coordinator, operator: OperatorRunner
) -> None:
    """127.0.0.1:<port> and localhost:<port> are one cluster (one cluster id): the later claim loses."""
    kubectl = cluster.kubectl
    topic = f"{namespace}-orders"
    coordinator.create_topic(topic)
    operator.start()
    group = f"{namespace}-shared"
    kubectl.apply(fleet_manifest("first", 0, coordinator, topic, groupId=group), namespace)
    first = wait_fleet(
        kubectl,
        namespace,
        "first",
        lambda b: bool(b.get("status", {}).get("clusterId")),
        timeout=60,
        what="a cluster id",
    )
    time.sleep(1.1)  # creation timestamps have one-second resolution
    by_name = coordinator.bootstrap.replace("127.0.0.1", "localhost")
    kubectl.apply(fleet_manifest("second", 1, by_name, topic, groupId=group), namespace)
    body = wait_fleet(
        kubectl,
        namespace,
        "second",
        lambda b: condition(b, "Degraded").get("reason") == "GroupIdConflict",
        timeout=60,
        what="GroupIdConflict",
    )
    assert f"{namespace}/first" in condition(body, "Degraded")["message"]
    assert body["status"]["clusterId"] == first["status"]["clusterId"]
    assert kubectl.get_or_none("statefulset", "second", namespace) is None
