"""Fleets whose pods each run two static members, as a Kafka Streams instance with two stream threads
does: the example consumer runs two consumers per pod (KAFKA_MEMBERS_PER_POD), named `<pod>-1` and
`<pod>-2`. The operator creates, rolls and scales them with the rebalances a fleet of one member per pod
costs. Rebalances are counted by the embedded coordinator itself (its HTTP API and event log)."""

from __future__ import annotations

import pytest

from e2e.helpers import Cluster, wait_until

from .harness import (
    Coordinator,
    OperatorRunner,
    condition,
    consumer_template,
    events,
    get_fleet,
    pod_uids,
    ready_with,
    rolled_out,
    start_fleet,
    stopwatch,
    timing,
    wait_fleet,
)

pytestmark = pytest.mark.localcluster

NAME = "orders"
PER_POD = 2
PARTITIONS = 8


def members_of(*ordinals: int) -> set[str]:
    return {f"{NAME}-{o}-{k}" for o in ordinals for k in range(1, PER_POD + 1)}


def group_id(namespace: str) -> str:
    return f"{namespace}.{NAME}"


def test_two_member_pods_are_one_stable_group_grouped_by_pod_and_roll_without_a_rebalance(
    cluster: Cluster, namespace: str, coordinator: Coordinator, operator: OperatorRunner
) -> None:
    kubectl = cluster.kubectl
    body = start_fleet(
        kubectl, namespace, coordinator, operator, 3, partitions=PARTITIONS, membersPerPod=PER_POD
    )
    gid = group_id(namespace)

    group = coordinator.group(gid)
    assert group is not None and group["state"] == "Stable"
    assert coordinator.members(gid) == members_of(0, 1, 2)
    assert group["rebalances"] == 1, "created with every member pre-registered: one join phase"

    status = body["status"]
    assert [(m["pod"], m["instanceId"]) for m in status["members"]] == [
        (f"{NAME}-{o}", f"{NAME}-{o}-{k}") for o in range(3) for k in range(1, PER_POD + 1)
    ]
    partitions = sorted(p for m in status["members"] for parts in m["partitions"].values() for p in parts)
    assert partitions == list(range(PARTITIONS))
    assert status["podsMissingMembers"] == []
    assert condition(body, "PodsOutsideGroup")["status"] == "False"
    assert condition(body, "MembersOutsideFleet")["status"] == "False"
    assert condition(body, "Ready")["message"] == f"3 pods of {PER_POD} consumers in group {gid}, Stable"
    # The pod keeps its own instance id in the environment and learns how many members to run.
    sts = kubectl.get("statefulset", NAME, namespace)
    env = {e["name"]: e for e in sts["spec"]["template"]["spec"]["containers"][0]["env"]}
    assert env["KAFKA_MEMBERS_PER_POD"]["value"] == str(PER_POD)
    assert env["KAFKA_GROUP_INSTANCE_ID"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.name"

    # A rolling restart: every pod comes back with the same two members, and the group does not rebalance.
    old_uids = pod_uids(kubectl, namespace, NAME)
    elapsed = stopwatch()
    patch = '[{"op": "add", "path": "/spec/template/metadata/annotations/rollout", "value": "2"}]'
    kubectl.run("patch", "scg", NAME, "-n", namespace, "--type", "json", "-p", patch)

    wait_until(
        lambda: rolled_out(kubectl, namespace, NAME, 3, old_uids),
        timeout=240,
        what="every pod to be replaced",
    )
    body = wait_fleet(
        kubectl, namespace, NAME, ready_with(3, PER_POD), timeout=60, what="Ready after the rollout"
    )
    timing(f"rolling restart of 3 pods x {PER_POD} members", elapsed())
    after = coordinator.group(gid)
    assert after is not None and after["state"] == "Stable"
    assert (after["generation"], after["rebalances"]) == (group["generation"], group["rebalances"])
    replaced = [e for e in coordinator.events(gid) if e["type"] == "static_member_replaced"]
    assert sorted(e["instance_id"] for e in replaced) == sorted(members_of(0, 1, 2))
    assert not any(e["rebalance"] for e in replaced)
    assert body["status"]["group"]["rebalances"] == group["rebalances"]


def test_every_member_of_a_departing_two_member_pod_leaves_the_group_itself_in_one_rebalance(
    cluster: Cluster, namespace: str, coordinator: Coordinator, operator: OperatorRunner
) -> None:
    """The operator marks the departing pods; each of their consumer threads reads the one mark and
    leaves at the moment it names, so the group loses all four members in one rebalance."""
    kubectl = cluster.kubectl
    start_fleet(kubectl, namespace, coordinator, operator, 4, partitions=PARTITIONS, membersPerPod=PER_POD)
    gid = group_id(namespace)
    before = coordinator.group(gid)
    assert before is not None

    elapsed = stopwatch()
    kubectl.run("scale", f"scg/{NAME}", "-n", namespace, "--replicas=2")
    wait_until(
        lambda: coordinator.members(gid) == members_of(0, 1), timeout=60, what="pods 2 and 3's members to go"
    )
    timing(f"scale 4->2 pods x {PER_POD}, departing consumers: members gone after", elapsed())
    body = wait_fleet(kubectl, namespace, NAME, ready_with(2, PER_POD), timeout=60, what="Ready with 2")

    down = coordinator.group(gid)
    assert down is not None and down["state"] == "Stable"
    assert down["rebalances"] == before["rebalances"] + 1, "exactly one rebalance"
    log = coordinator.events(gid)
    since = before["lastRebalance"]["completedMs"]
    left = [e for e in log if e["type"] == "member_left" and e["ts"] > since]
    assert sorted(e["instance_id"] for e in left) == sorted(members_of(2, 3))
    assert not [e for e in log if e["type"] in ("member_removed", "member_expired")]
    # The operator's removal, once the pods had stopped, found every member gone.
    (event,) = events(kubectl, namespace, NAME, "MembersRemoved")
    assert "already gone: orders-2-1, orders-2-2, orders-3-1, orders-3-2" in event["message"]
    assert "scaleDown" not in body["status"]
    assert [m["instanceId"] for m in body["status"]["members"]] == sorted(members_of(0, 1))


def test_scaling_two_member_pods_down_removes_every_departed_member_in_one_batch_and_up_costs_one_rebalance(
    cluster: Cluster, namespace: str, coordinator: Coordinator, operator: OperatorRunner
) -> None:
    """Consumers that do not read the departure mark stay members until the operator removes them."""
    kubectl = cluster.kubectl
    template = consumer_template(leaves_when_departing=False)
    start_fleet(
        kubectl,
        namespace,
        coordinator,
        operator,
        4,
        partitions=PARTITIONS,
        membersPerPod=PER_POD,
        template=template,
    )
    gid = group_id(namespace)
    before = coordinator.group(gid)
    assert before is not None

    elapsed = stopwatch()
    kubectl.run("scale", f"scg/{NAME}", "-n", namespace, "--replicas=2")
    wait_until(
        lambda: coordinator.members(gid) == members_of(0, 1), timeout=60, what="pods 2 and 3's members to go"
    )
    removed_after = elapsed()
    body = wait_fleet(kubectl, namespace, NAME, ready_with(2, PER_POD), timeout=60, what="Ready with 2")
    timing(f"scale 4->2 pods x {PER_POD}: members removed after", removed_after)
    timing(f"scale 4->2 pods x {PER_POD}: Ready after", elapsed())

    down = coordinator.group(gid)
    assert down is not None and down["state"] == "Stable"
    assert coordinator.members(gid) == members_of(0, 1), "exactly the remaining pods' members"
    assert down["rebalances"] == before["rebalances"] + 1, "exactly one rebalance"
    assert down["lastRebalance"]["reason"] == "member-removed"
    log = coordinator.events(gid)
    removed = [e for e in log if e["type"] == "member_removed"]
    assert sorted(e["instance_id"] for e in removed) == sorted(members_of(2, 3))
    assert not [e for e in log if e["type"] == "member_expired"]
    (event,) = events(kubectl, namespace, NAME, "MembersRemoved")
    assert "removed orders-2-1, orders-2-2, orders-3-1, orders-3-2" in event["message"]
    metrics = operator.metrics()
    labels = f'group="{gid}"'
    assert f'staticfleet_operator_removal_batches_total{{{labels},result="ok"}} 1.0' in metrics, "one batch"
    assert f"staticfleet_operator_members_removed_total{{{labels}}} 4.0" in metrics
    assert "scaleDown" not in body["status"]
    assert condition(body, "MembersOutsideFleet")["status"] == "False"

    elapsed = stopwatch()
    kubectl.run("scale", f"scg/{NAME}", "-n", namespace, "--replicas=4")
    body = wait_fleet(
        kubectl, namespace, NAME, ready_with(4, PER_POD), timeout=150, what="Ready with 4 again"
    )
    timing(f"scale 2->4 pods x {PER_POD}: Ready after", elapsed())
    up = coordinator.group(gid)
    assert up is not None and up["state"] == "Stable"
    assert coordinator.members(gid) == members_of(0, 1, 2, 3)
    assert up["rebalances"] == down["rebalances"] + 1, "one rebalance: every new member was pre-registered"
    configs = [e for e in coordinator.events(gid) if e["type"] == "group_config_changed"]
    pre_registered = [c for c in configs if c["configs"].get("staticfleet.expected.instance.ids")]
    assert pre_registered[-1]["configs"]["staticfleet.expected.instance.ids"] == ",".join(
        f"{NAME}-{o}-{k}" for o in range(4) for k in range(1, PER_POD + 1)
    )
    scaled = events(kubectl, namespace, NAME, "Scaled")[-1]["message"]
    assert scaled == "scaling up from 2 to 4; new instances pre-registered with the coordinator"
    assert get_fleet(kubectl, namespace, NAME)["status"]["group"]["rebalances"] == up["rebalances"]
