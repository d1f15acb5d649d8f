"""Two operators acting on one resource (two releases, or one run by hand) see a conflict instead of
silently fighting: each applies the children under its own field manager and without force, so the
later one's differing fields are refused by the API server (server-side apply), and it reports the
conflict (an Event naming the other field manager) rather than overwriting them."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from e2e.helpers import Cluster, Manifest, wait_until

from .harness import (
    Coordinator,
    OperatorRunner,
    events,
    fleet_manifest,
    get_fleet,
    ready_with,
    wait_fleet,
)

pytestmark = pytest.mark.localcluster

NAME = "orders"
BLUE, GREEN = "staticfleet-operator/e2e/blue", "staticfleet-operator/e2e/green"


@pytest.fixture
def second_operator(cluster: Cluster, namespace: str, tmp_path: Path) -> Iterator[OperatorRunner]:
    runner = OperatorRunner(cluster.kubeconfig, namespace, tmp_path / "second")
    runner.workdir.mkdir()
    try:
        yield runner
    finally:
        runner.stop()


def bootstrap_env(statefulset: Manifest) -> str:
    (container,) = statefulset["spec"]["template"]["spec"]["containers"]
    return str(next(e["value"] for e in container["env"] if e["name"] == "KAFKA_BOOTSTRAP_SERVERS"))


def conflict_passes(runner: OperatorRunner) -> float:
    for line in runner.metrics().splitlines():
        if line.startswith('staticfleet_operator_reconciles_total{result="conflict"}'):
            return float(line.split()[-1])
    return 0.0


def test_a_second_operator_reports_the_conflict_instead_of_overwriting(
    cluster: Cluster,
    namespace: str,
    coordinator: Coordinator,
    operator: OperatorRunner,
    second_operator: OperatorRunner,
) -> None:
    kubectl = cluster.kubectl
    topic = f"{namespace}-orders"
    coordinator.create_topic(topic)
    # Two releases configured differently: the same cluster by two addresses, as their defaults.
    by_name = coordinator.bootstrap.replace("127.0.0.1", "localhost")
    api = ("--default-coordinator-api", coordinator.api)
    operator.extra_args = (
        "--field-manager",
        BLUE,
        "--default-bootstrap-servers",
        coordinator.bootstrap,
        *api,
    )
    second_operator.extra_args = ("--field-manager", GREEN, "--default-bootstrap-servers", by_name, *api)
    operator.start()
    fleet = fleet_manifest(NAME, 1, coordinator, topic)
    del fleet["spec"]["kafka"]
    kubectl.apply(fleet, namespace)
    wait_fleet(kubectl, namespace, NAME, ready_with(1), timeout=120, what="Ready with 1")
    before = kubectl.get("statefulset", NAME, namespace)
    assert bootstrap_env(before) == coordinator.bootstrap

    second_operator.start()
    (event,) = wait_until(
        lambda: events(kubectl, namespace, NAME, "ApplyConflict"), timeout=60, what="an ApplyConflict Event"
    )
    assert BLUE in event["message"] and GREEN in event["message"]
    assert "KAFKA_BOOTSTRAP_SERVERS" in event["message"]
    # It keeps meeting the conflict, pass after pass, and never overwrites: the StatefulSet is as the
    # first operator made it, and the Event is not repeated.
    wait_until(lambda: conflict_passes(second_operator) >= 3, timeout=60, what="three refused passes")
    after = kubectl.get("statefulset", NAME, namespace)
    assert bootstrap_env(after) == coordinator.bootstrap
    assert after["metadata"]["generation"] == before["metadata"]["generation"]
    assert len(events(kubectl, namespace, NAME, "ApplyConflict")) == 1
    assert ready_with(1)(get_fleet(kubectl, namespace, NAME))
    with_owners = kubectl.json("get", "statefulset", NAME, "-n", namespace, "--show-managed-fields")
    managers = {m["manager"] for m in with_owners["metadata"]["managedFields"]}
    assert BLUE in managers and GREEN not in managers

    # Once the first operator's release is gone and its fields given up, the second takes over.
    operator.stop()
    second_operator.stop()
    kubectl.run(
        "patch", "statefulset", NAME, "-n", namespace, "--type=json",
        "-p", '[{"op": "replace", "path": "/metadata/managedFields", "value": [{}]}]',
    )  # fmt: skip
    second_operator.start()
    wait_until(
        lambda: bootstrap_env(kubectl.get("statefulset", NAME, namespace)) == by_name,
        timeout=60,
        what="the second operator's StatefulSet",
    )
    wait_fleet(kubectl, namespace, NAME, ready_with(1), timeout=120, what="Ready with 1 again")
