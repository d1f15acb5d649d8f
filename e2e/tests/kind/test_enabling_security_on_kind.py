"""`helm upgrade` that turns security on under running fleets, on a real kubelet: an installation made open
(coordinator.security.enabled=false) with two fleets consuming, upgraded with
coordinator.security.enabled=true. The coordinator restarts with SASL_SSL, SCRAM and ACLs (its groups
reloaded from its volume), the operator provisions each fleet's user and rolls its pods onto it, and every
static member is back within its session timeout: each group keeps its generation (no rebalance) and
consumes what is written after the upgrade.

It runs before the README's release is installed (file order), since that one watches every namespace.
"""

from __future__ import annotations

import functools
import secrets
import time
from collections.abc import Iterator

import pytest

from e2e.helm import CHART, Helm, set_flags
from e2e.helpers import Cluster, Kubectl, Manifest
from e2e.tests.chart.test_chart_render import OPEN
from e2e.tests.operator.harness import timing
from examples.demo.driver import stable_with

from .support import (
    PARTITIONS,
    Shell,
    committed_offsets,
    coordinator_group,
    create_topic,
    produce,
    readme_fleet,
    readme_release_absent,
    wait_explained,
)

pytestmark = pytest.mark.kind

FLEETS = {"orders": 3, "audit": 1}
MESSAGES = 120


@pytest.fixture
def release(cluster: Cluster, shell: Shell, namespace: str) -> Iterator[tuple[Helm, str]]:
    assert readme_release_absent(shell), "run this before the README's release is installed (file order)"
    helm = Helm(shell.helm, cluster.kubeconfig)
    name = f"up-{secrets.token_hex(3)}"
    values = {**OPEN, "operator.watchNamespaces": [namespace], "coordinator.defaultPartitions": PARTITIONS}
    helm.run("install", name, str(CHART), "-n", namespace, "--wait", "--timeout=300s", *set_flags(values))
    try:
        yield helm, name
    finally:
        for fleet in FLEETS:
            cluster.kubectl.run("delete", "scg", fleet, "-n", namespace, "--timeout=120s", check=False)
        helm.run("uninstall", name, "-n", namespace, "--wait", "--timeout=180s", check=False)


def group_of(namespace: str, fleet: str) -> str:
    return f"{namespace}.{fleet}"


def rolled_onto_its_user(kubectl: Kubectl, namespace: str, fleet: str, replicas: int) -> bool:
    """The fleet's pods all run the template that logs in as its own user, and its group is Stable with
    them."""
    body: Manifest | None = kubectl.get_or_none("scg", fleet, namespace)
    sts = kubectl.get_or_none("statefulset", fleet, namespace)
    if body is None or sts is None or not stable_with(body, replicas):
        return False
    env = {e["name"]: e for e in sts["spec"]["template"]["spec"]["containers"][0].get("env", [])}
    status = sts.get("status", {})
    return (
        env.get("KAFKA_SECURITY_PROTOCOL", {}).get("value") == "SASL_SSL"
        and status.get("updatedReplicas") == replicas == status.get("readyReplicas")
        and status.get("currentRevision") == status.get("updateRevision")
        and bool(body.get("status", {}).get("kafkaUser"))
    )


def test_helm_upgrade_enabling_security_keeps_every_fleet_consuming_without_a_rebalance(
    cluster: Cluster, namespace: str, release: tuple[Helm, str]
) -> None:
    kubectl = cluster.kubectl
    helm, name = release
    where = {"fullname": f"{name}-staticfleet", "namespace": namespace}

    def stable(fleet: str, replicas: int) -> bool:
        found = kubectl.get_or_none("scg", fleet, namespace)
        return found is not None and stable_with(found, replicas)

    def consumed(fleet: str, count: int) -> bool:
        return sum(committed_offsets(kubectl, group_of(namespace, fleet), **where).values()) == count

    def generation(fleet: str) -> int:
        return int((coordinator_group(kubectl, group_of(namespace, fleet), **where) or {})["generation"])

    for fleet, replicas in FLEETS.items():
        create_topic(kubectl, fleet, PARTITIONS, **where)
        produce(kubectl, fleet, MESSAGES, **where)
        body = readme_fleet(replicas=replicas, topics=[fleet])
        body["metadata"]["name"] = fleet
        kubectl.apply(body, namespace)
    for fleet, replicas in FLEETS.items():
        wait_explained(
            kubectl,
            [namespace],
            functools.partial(stable, fleet, replicas),
            timeout=300,
            what=f"{fleet}: Stable with {replicas} (open installation)",
        )
        wait_explained(
            kubectl,
            [namespace],
            functools.partial(consumed, fleet, MESSAGES),
            timeout=120,
            what=f"{fleet}: every message committed",
        )
    before = {
        f: int((coordinator_group(kubectl, group_of(namespace, f), **where) or {})["generation"])
        for f in FLEETS
    }

    started = time.monotonic()
    helm.run(
        "upgrade", name, str(CHART), "-n", namespace, "--reuse-values", "--wait", "--timeout=300s",
        *set_flags({"coordinator.security.enabled": True}),
        timeout=420,
    )  # fmt: skip
    for fleet, replicas in FLEETS.items():
        wait_explained(
            kubectl,
            [namespace],
            functools.partial(rolled_onto_its_user, kubectl, namespace, fleet, replicas),
            timeout=420,
            what=f"{fleet}: its pods on its own user, Stable",
        )
    timing(
        "kind: helm upgrade enabling security -> every fleet Stable on its own user",
        time.monotonic() - started,
    )
    args = kubectl.get("pod", f"{name}-staticfleet-coordinator-0", namespace)["spec"]["containers"][0]["args"]
    assert any(a.startswith("--listener=SASL_SSL://") for a in args) and "--authorizer=standard" in args

    for fleet in FLEETS:
        produce(kubectl, fleet, MESSAGES, **where)  # as the admin the upgrade made
    for fleet in FLEETS:
        wait_explained(
            kubectl,
            [namespace],
            functools.partial(consumed, fleet, 2 * MESSAGES),
            timeout=180,
            what=f"{fleet}: the messages written after the upgrade committed",
        )
    after = {
        f: int((coordinator_group(kubectl, group_of(namespace, f), **where) or {})["generation"])
        for f in FLEETS
    }
    assert after == before, f"rebalances during the upgrade: {before} -> {after}"
    for fleet in FLEETS:
        assert (
            kubectl.get("scg", fleet, namespace)["status"]["kafkaUser"]["name"]
            == f"staticfleet.{namespace}.{fleet}"
        )
