"""The operator's behaviour on a real kubelet, from the chart the README installs (secured: each fleet
logs in as its own user): one fleet of examples/embedded.yaml (session timeout 120 s) in a namespace of its
own, which a StaticFleetTenancyPolicy lets read the topic `orders` that examples/producer.yaml writes,
taken through the operations users do, in order. Rebalances are counted by the group's generation on the
coordinator (each completed rebalance is one generation), which survives the coordinator's restart.

The tests share the fleet and run in file order; each first brings it to the size it starts from, so
one can also run alone (`-k`).
"""

from __future__ import annotations

import json
import re
import secrets
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from e2e.helpers import Cluster, Kubectl, Manifest
from examples.demo.driver import rolling_restart, stable_with
from staticfleet.kube.builders import consumer_may_run

from .support import (
    COORDINATOR_POD,
    FLEET,
    PARTITIONS,
    RELEASE,
    RELEASE_NAMESPACE,
    allow_topics,
    assigned_partitions,
    committed_offsets,
    coordinator_group,
    forget_policy,
    instance_ids,
    wait_explained,
)

pytestmark = pytest.mark.kind

SESSION_TIMEOUT_S = 120  # examples/embedded.yaml


@pytest.fixture(scope="module")
def fleet_namespace(cluster: Cluster, chart: None) -> Iterator[str]:
    kubectl = cluster.kubectl
    name = f"kind-fleet-{secrets.token_hex(3)}"
    kubectl.run("create", "namespace", name)
    policy = allow_topics(kubectl, name, "orders")
    try:
        kubectl.run("apply", "-f", "examples/producer.yaml")  # in the release's namespace
        kubectl.run("apply", "-n", name, "-f", "examples/embedded.yaml")
        yield name
    finally:
        kubectl.run("delete", "scg", FLEET, "-n", name, "--ignore-not-found", "--timeout=120s", check=False)
        kubectl.run("delete", "namespace", name, "--wait=false", check=False)
        forget_policy(kubectl, policy)


class Fleet:
    def __init__(self, kubectl: Kubectl, namespace: str) -> None:
        self.kubectl = kubectl
        self.namespace = namespace
        self.group_id = f"{namespace}.{FLEET}"

    def body(self) -> Manifest:
        return self.kubectl.get("scg", FLEET, self.namespace)

    def group(self) -> Manifest:
        found = coordinator_group(self.kubectl, self.group_id)
        assert found is not None, f"the coordinator does not know group {self.group_id}"
        return found

    def generation(self) -> int:
        return int(self.group()["generation"])

    def pods(self, may_run_only: bool = False) -> set[str]:
        """The fleet's pods; with `may_run_only`, less those stopped for good (a terminal phase), which
        the operator counts as gone when it removes their members: such a pod's object may outlast its
        removal by a moment."""
        pods = self.kubectl.items("pods", self.namespace, "-l", f"staticfleet.io/group={FLEET}")
        return {p["metadata"]["name"] for p in pods if not may_run_only or consumer_may_run(p)}

    def wait_stable(self, replicas: int, timeout: float = 240) -> Manifest:
        def probe() -> Manifest | None:
            body = self.kubectl.get_or_none("scg", FLEET, self.namespace)
            return body if body is not None and stable_with(body, replicas) else None

        found: Manifest = wait_explained(
            self.kubectl,
            [self.namespace, RELEASE_NAMESPACE],
            probe,
            timeout=timeout,
            what=f"{FLEET}: a Stable group of {replicas} ready consumers",
        )
        return found

    def scale(self, replicas: int) -> None:
        self.kubectl.run("scale", f"scg/{FLEET}", "-n", self.namespace, f"--replicas={replicas}")

    def at(self, replicas: int) -> int:
        """Brings the fleet to `replicas` (if it is not) and returns the group's generation."""
        if self.body()["spec"]["replicas"] != replicas:
            self.scale(replicas)
        self.wait_stable(replicas)
        return self.generation()

    def assert_members_are_the_pods(self, replicas: int) -> None:
        expected = {f"{FLEET}-{i}" for i in range(replicas)}
        group = self.group()
        assert group["state"] == "Stable"
        assert instance_ids(group) == expected
        assert self.pods(may_run_only=True) == expected
        assert assigned_partitions(group) == PARTITIONS


@pytest.fixture
def fleet(cluster: Cluster, fleet_namespace: str) -> Fleet:
    return Fleet(cluster.kubectl, fleet_namespace)


def test_three_consumers_form_a_stable_group_with_their_pod_names_as_instance_ids(fleet: Fleet) -> None:
    fleet.at(3)
    fleet.assert_members_are_the_pods(3)
    for pod in sorted(fleet.pods()):
        env = fleet.kubectl.run("exec", "-n", fleet.namespace, pod, "-c", "consumer", "--", "env").stdout
        assert f"KAFKA_GROUP_INSTANCE_ID={pod}" in env.splitlines()
    # The fleet's pods run under the restricted defaults: non-root, no privilege escalation, no capabilities.
    spec = fleet.kubectl.get("pod", f"{FLEET}-0", fleet.namespace)["spec"]
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    container = spec["containers"][0]["securityContext"]
    assert container["allowPrivilegeEscalation"] is False
    assert container["capabilities"]["drop"] == ["ALL"]


def test_a_rolling_restart_replaces_every_pod_without_a_rebalance(fleet: Fleet) -> None:
    before = fleet.at(3)
    rolling_restart(fleet.kubectl, fleet.namespace, timeout=300)
    fleet.wait_stable(3)
    assert fleet.generation() == before, "a rolling restart of static members costs no rebalance"
    fleet.assert_members_are_the_pods(3)


def test_scaling_three_to_one_is_one_rebalance_with_the_members_removed_as_the_pods_go(fleet: Fleet) -> None:
    before = fleet.at(3)
    started = datetime.now(UTC)
    fleet.scale(1)
    body = fleet.wait_stable(1)
    took = (datetime.now(UTC) - started).total_seconds()
    assert fleet.generation() == before + 1
    fleet.assert_members_are_the_pods(1)
    # Removed by the operator, not left to the 120 s session timeout.
    assert took < SESSION_TIMEOUT_S / 2, f"the departed members were removed only after {took:.0f} s"
    removed = [
        e for e in fleet.kubectl.items("events", fleet.namespace) if e.get("reason") == "MembersRemoved"
    ]
    assert removed, "the operator reports the removal as an event"
    assert body["status"]["lastScale"]["toReplicas"] == 1
    # The operator reached the departing pods at their pod IPs on the port named `departure`
    # (examples/embedded.yaml): the departure handshake, whose outcome the Event says.
    (handshake,) = [
        e for e in fleet.kubectl.items("events", fleet.namespace) if e.get("reason") == "DepartureHandshake"
    ]
    print(f"\n[kind] scale 3->1 in {took:.1f} s: {handshake['message']}")
    assert "did not answer" not in handshake["message"]
    # On a real kubelet the downward-API file can trail the annotation past the handshake's deadline;
    # then the Event names the pods that had not read it, and they leave at the mark's moment.
    assert re.match(
        r"orders-1, orders-2 leave together |(orders-1, orders-2|orders-1|orders-2) had not read the mark",
        handshake["message"],
    ), handshake["message"]


def test_scaling_one_to_four_is_one_rebalance(fleet: Fleet) -> None:
    before = fleet.at(1)
    fleet.scale(4)
    fleet.wait_stable(4)
    assert fleet.generation() == before + 1
    fleet.assert_members_are_the_pods(4)


def leader_pod(kubectl: Kubectl) -> str | None:
    """The operator pod holding the chart's Lease (its identity is the pod's hostname and pid)."""
    lease = kubectl.get_or_none("lease", f"{RELEASE}-operator", RELEASE_NAMESPACE)
    holder = (lease or {}).get("spec", {}).get("holderIdentity") or ""
    return holder.rpartition("-")[0] or None


def test_the_leading_operator_pod_force_deleted_mid_scale_down_leaves_the_step_to_the_other(
    fleet: Fleet,
) -> None:
    kubectl = fleet.kubectl
    before = fleet.at(4)
    selector = "app.kubernetes.io/component=operator"
    pods = [p["metadata"]["name"] for p in kubectl.items("pods", RELEASE_NAMESPACE, "-l", selector)]
    leader = leader_pod(kubectl)
    assert leader is not None and leader in pods, (leader, pods)
    fleet.scale(2)
    # The operator has taken the step once it records the scale-down on the resource.
    wait_explained(
        kubectl,
        [fleet.namespace, RELEASE_NAMESPACE],
        lambda: fleet.body().get("status", {}).get("scaleDown"),
        timeout=60,
        what="the operator to start the scale-down",
        interval=0.1,
    )
    kubectl.run("delete", "pod", leader, "-n", RELEASE_NAMESPACE, "--force", "--grace-period=0")
    fleet.wait_stable(2)
    successor = leader_pod(kubectl)
    assert successor is not None and successor != leader
    assert fleet.generation() == before + 1
    fleet.assert_members_are_the_pods(2)
    assert not fleet.body()["status"].get("scaleDown")


def test_a_coordinator_pod_deleted_comes_back_with_the_group_offsets_and_count_intact(fleet: Fleet) -> None:
    kubectl = fleet.kubectl
    before = fleet.at(2)
    shown = fleet.body()["status"]["group"]["rebalances"]
    offsets = committed_offsets(kubectl, fleet.group_id)
    assert len(offsets) == PARTITIONS and sum(offsets.values()) > 0, offsets
    old_uid = kubectl.get("pod", COORDINATOR_POD, RELEASE_NAMESPACE)["metadata"]["uid"]

    kubectl.run("delete", "pod", COORDINATOR_POD, "-n", RELEASE_NAMESPACE)
    wait_explained(
        kubectl,
        [RELEASE_NAMESPACE],
        lambda: (
            (pod := kubectl.get_or_none("pod", COORDINATOR_POD, RELEASE_NAMESPACE)) is not None
            and pod["metadata"]["uid"] != old_uid
            and any(
                c["type"] == "Ready" and c["status"] == "True" for c in pod["status"].get("conditions", [])
            )
        ),
        timeout=120,
        what="the coordinator's new pod to be ready",
    )
    fleet.wait_stable(2)
    assert fleet.generation() == before, "the group survived the coordinator's restart without a rebalance"
    fleet.assert_members_are_the_pods(2)
    after = committed_offsets(kubectl, fleet.group_id)
    assert set(after) == set(offsets)
    assert all(after[p] >= offsets[p] for p in offsets), json.dumps({"before": offsets, "after": after})
    # The resource's count does not go backwards because the coordinator's own count restarted.
    assert fleet.body()["status"]["group"]["rebalances"] == shown


def test_deleting_the_fleet_removes_its_members_and_its_pods(fleet: Fleet) -> None:
    kubectl = fleet.kubectl
    fleet.at(2)
    kubectl.run("delete", "scg", FLEET, "-n", fleet.namespace, "--timeout=120s")
    wait_explained(
        kubectl,
        [fleet.namespace],
        lambda: not fleet.pods() and not instance_ids(coordinator_group(kubectl, fleet.group_id)),
        timeout=120,
        what="the pods and the group's members to be gone",
    )
    assert not kubectl.items("statefulsets", fleet.namespace)
    assert f"{RELEASE}-operator" in kubectl.run("get", "deployments", "-n", RELEASE_NAMESPACE).stdout
