"""The user's story with the embedded coordinator: create a fleet, roll it, scale it down and up.
Rebalances are counted by the coordinator itself (its HTTP API and event log)."""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any

import pytest

from e2e.helpers import Cluster, Kubectl, Manifest, wait_until
from staticfleet.kube import departure

from .harness import (
    PARTITIONS,
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


def group_id(namespace: str) -> str:
    return f"{namespace}.{NAME}"


def test_a_fleet_of_three_is_a_stable_group_of_its_pods(
    cluster: Cluster, namespace: str, coordinator: Coordinator, operator: OperatorRunner
) -> None:
    kubectl = cluster.kubectl
    body = start_fleet(kubectl, namespace, coordinator, operator, 3)

    pods = kubectl.items("pods", namespace, "-l", f"staticfleet.io/group={NAME}")
    assert sorted(p["metadata"]["name"] for p in pods) == ["orders-0", "orders-1", "orders-2"]
    assert all(p["status"]["phase"] == "Running" for p in pods)

    group = coordinator.group(group_id(namespace))
    assert group is not None and group["state"] == "Stable"
    assert coordinator.members(group_id(namespace)) == {"orders-0", "orders-1", "orders-2"}
    # Pre-registered at creation: the first join phase waited for all three, one rebalance.
    assert group["rebalances"] == 1 and group["generation"] == 1

    status = body["status"]
    assert status["group"]["state"] == "Stable"
    assert status["group"]["rebalancesSource"] == "coordinator"
    assert status["group"]["generation"] == 1 and status["group"]["rebalances"] == 1
    assert [m["instanceId"] for m in status["members"]] == ["orders-0", "orders-1", "orders-2"]
    partitions = sorted(p for m in status["members"] for parts in m["partitions"].values() for p in parts)
    assert partitions == list(range(PARTITIONS))
    assert status["selector"] == (
        "app.kubernetes.io/instance=orders,app.kubernetes.io/name=staticfleet-consumer,staticfleet.io/group=orders"
    )
    assert condition(body, "GroupStable")["status"] == "True"
    assert condition(body, "Degraded")["status"] == "False"

    # The environment contract reached the consumers, and the operator owns its children.
    sts = kubectl.get("statefulset", NAME, namespace)
    assert sts["spec"]["podManagementPolicy"] == "Parallel"
    assert sts["metadata"]["ownerReferences"][0]["kind"] == "StaticConsumerGroup"
    assert kubectl.get("service", NAME, namespace)["spec"]["clusterIP"] == "None"
    assert kubectl.get("poddisruptionbudget", NAME, namespace)["spec"]["maxUnavailable"] == 1
    table = kubectl.run("get", "scg", NAME, "-n", namespace).stdout
    header, row = table.splitlines()[:2]
    columns = ["NAME", "REPLICAS", "READY", "READY-PODS", "STATE", "GENERATION", "REBALANCES", "LAG", "AGE"]
    assert header.split() == columns
    assert row.split()[:8] == ["orders", "3", "True", "3", "Stable", "1", "1", "0"]
    assert status["lag"]["partitions"] == PARTITIONS
    scale_path = f"/apis/staticfleet.io/v1alpha1/namespaces/{namespace}/staticconsumergroups/{NAME}/scale"
    scale = json.loads(kubectl.run("get", "--raw", scale_path).stdout)
    assert scale["status"]["replicas"] == 3 and scale["status"]["selector"] == status["selector"]


def test_a_rolling_update_restarts_every_pod_once_without_a_rebalance(
    cluster: Cluster, namespace: str, coordinator: Coordinator, operator: OperatorRunner
) -> None:
    kubectl = cluster.kubectl
    start_fleet(kubectl, namespace, coordinator, operator, 3)
    before = coordinator.group(group_id(namespace))
    assert before is not None
    old_uids = pod_uids(kubectl, namespace, NAME)
    observed_before = len(events(kubectl, namespace, NAME, "RebalanceObserved"))

    elapsed = stopwatch()
    patch = '[{"op": "add", "path": "/spec/template/metadata/annotations/rollout", "value": "2"}]'
    kubectl.run("patch", "scg", NAME, "-n", namespace, "--type", "json", "-p", patch)

    wait_until(
        lambda: rolled_out(kubectl, namespace, NAME, 3, old_uids),
        timeout=180,
        what="every pod to be replaced",
    )
    body = wait_fleet(kubectl, namespace, NAME, ready_with(3), timeout=60, what="Ready after the rollout")
    timing("rolling update of 3 pods", elapsed())

    after = coordinator.group(group_id(namespace))
    assert after is not None and after["state"] == "Stable"
    assert (after["generation"], after["rebalances"]) == (before["generation"], before["rebalances"])
    assert coordinator.members(group_id(namespace)) == {"orders-0", "orders-1", "orders-2"}
    # Every pod was replaced exactly once: two incarnations in each pod's log.
    for pod in ("orders-0", "orders-1", "orders-2"):
        log = cluster.pod_dir(namespace, pod) / "consumer.log"
        incarnations = {line.split()[3] for line in log.read_text().splitlines() if line.startswith("--- ")}
        assert len(incarnations) == 2, f"{pod}: {incarnations}"
    replaced = [e for e in coordinator.events(group_id(namespace)) if e["type"] == "static_member_replaced"]
    assert sorted(e["instance_id"] for e in replaced) == ["orders-0", "orders-1", "orders-2"]
    assert not any(e["rebalance"] for e in replaced)
    assert body["status"]["group"]["rebalances"] == before["rebalances"]
    assert len(events(kubectl, namespace, NAME, "RebalanceObserved")) == observed_before


RESTARTED_AT = "kubectl.kubernetes.io/restartedAt"


def test_kubectl_rollout_restart_of_the_statefulset_rolls_every_pod_once_and_the_operator_keeps_it(
    cluster: Cluster, namespace: str, coordinator: Coordinator, operator: OperatorRunner
) -> None:
    """How a user restarts a fleet's pods: kubectl rolls only built-in workloads, so the StatefulSet. The
    operator's next apply, which the changed StatefulSet starts, leaves kubectl's annotation alone: no
    second rollout, and no rebalance."""
    kubectl = cluster.kubectl
    start_fleet(kubectl, namespace, coordinator, operator, 3)
    before = coordinator.group(group_id(namespace))
    assert before is not None
    old_uids = pod_uids(kubectl, namespace, NAME)
    generation = kubectl.get("statefulset", NAME, namespace)["metadata"]["generation"]

    kubectl.run("rollout", "restart", f"statefulset/{NAME}", "-n", namespace)
    wait_until(
        lambda: rolled_out(kubectl, namespace, NAME, 3, old_uids),
        timeout=180,
        what="every pod to be replaced",
    )
    # Ready as the operator's status says: its passes followed the whole rollout.
    wait_fleet(kubectl, namespace, NAME, ready_with(3), timeout=60, what="Ready after the rollout")

    sts = kubectl.get("statefulset", NAME, namespace)
    assert RESTARTED_AT in sts["spec"]["template"]["metadata"]["annotations"]
    assert sts["metadata"]["generation"] == generation + 1  # one rollout: the operator changed nothing
    assert sts["status"]["currentRevision"] == sts["status"]["updateRevision"]
    after = coordinator.group(group_id(namespace))
    assert after is not None and after["state"] == "Stable"
    assert (after["generation"], after["rebalances"]) == (before["generation"], before["rebalances"])
    for pod in ("orders-0", "orders-1", "orders-2"):
        log = cluster.pod_dir(namespace, pod) / "consumer.log"
        incarnations = {line.split()[3] for line in log.read_text().splitlines() if line.startswith("--- ")}
        assert len(incarnations) == 2, f"{pod}: {incarnations}"


def consumer_events(cluster: Cluster, namespace: str, pod: str, event: str) -> list[dict[str, Any]]:
    """The pod's consumer's log lines of one kind, over all its runs."""
    lines = (cluster.pod_dir(namespace, pod) / "consumer.log").read_text().splitlines()
    records = (json.loads(line) for line in lines if line.startswith("{"))
    return [r for r in records if r.get("event") == event]


def last_stop(cluster: Cluster, namespace: str, pod: str) -> float:
    """When the pod's consumer last logged that it had stopped (it closes, then exits)."""
    stops = [e["ts"] for e in consumer_events(cluster, namespace, pod, "stopped")]
    assert stops, f"{pod} never logged that it stopped"
    return float(stops[-1])


@dataclass
class ScaledDown:
    gid: str
    before: dict[str, Any]  # the group as the coordinator described it before the scale
    body: Manifest  # the resource, Ready with 1
    gone_after: float  # seconds from the command until orders-1 and orders-2 were out of the group
    ready_after: float


def scale_three_to_one(
    kubectl: Kubectl, namespace: str, coordinator: Coordinator, operator: OperatorRunner, **spec: Any
) -> ScaledDown:
    start_fleet(kubectl, namespace, coordinator, operator, 3, sessionTimeoutMs=60_000, **spec)
    gid = group_id(namespace)
    before = coordinator.group(gid)
    assert before is not None
    elapsed = stopwatch()
    kubectl.run("scale", f"scg/{NAME}", "-n", namespace, "--replicas=1")
    wait_until(
        lambda: coordinator.members(gid) == {"orders-0"}, timeout=60, what="orders-1 and orders-2 to leave"
    )
    gone_after = elapsed()
    body = wait_fleet(kubectl, namespace, NAME, ready_with(1), timeout=60, what="Ready with 1")
    return ScaledDown(gid, before, body, gone_after, elapsed())


def test_departing_consumers_leave_the_group_themselves_before_their_pods_stop_in_one_rebalance(
    cluster: Cluster, namespace: str, coordinator: Coordinator, operator: OperatorRunner
) -> None:
    kubectl = cluster.kubectl
    # At the client's 3 s heartbeat the member that stays learns of the rebalance from the operator, not
    # from a heartbeat of its own, but in a rare race.
    scaled = scale_three_to_one(kubectl, namespace, coordinator, operator, heartbeatIntervalMs=3000)
    gid, before, body = scaled.gid, scaled.before, scaled.body
    timing("scale 3->1, departing consumers: members gone after", scaled.gone_after)

    after = coordinator.group(gid)
    assert after is not None and after["state"] == "Stable"
    assert after["rebalances"] == before["rebalances"] + 1, "exactly one rebalance"
    log = coordinator.events(gid)
    left = [e for e in log if e["type"] == "member_left" and e["ts"] > before["lastRebalance"]["completedMs"]]
    assert sorted(e["instance_id"] for e in left) == ["orders-1", "orders-2"]
    assert not [e for e in log if e["type"] in ("member_removed", "member_expired")]
    # They left on their own, each before its consumer stopped: the pods were still running.
    for pod, event in zip(
        ("orders-1", "orders-2"), sorted(left, key=lambda e: e["instance_id"]), strict=True
    ):
        assert event["ts"] / 1000 <= last_stop(cluster, namespace, pod)
        # The operator handed it its mark (the moment to leave, the same for both), signed with the
        # fleet's key from the Secret it made; once both held it, the departure handshake gave them one
        # sooner moment, and they left then.
        (handed,) = consumer_events(cluster, namespace, pod, "handed")
        (marked,) = consumer_events(cluster, namespace, pod, "marked")
        (hastened,) = consumer_events(cluster, namespace, pod, "hastened")
        (departing,) = consumer_events(cluster, namespace, pod, "departing")
        assert handed["mark"] == hastened["mark"] == marked["leave_at"]
        assert handed["ts"] <= hastened["ts"]
        # (The handshake reads the file itself: the consumer's loop may log `marked` a moment after.)
        assert hastened["ts"] <= hastened["leave_at"] <= departing["ts"] < marked["leave_at"]
    for kind, field in (("marked", "leave_at"), ("hastened", "leave_at")):
        moments = {
            consumer_events(cluster, namespace, pod, kind)[0][field] for pod in ("orders-1", "orders-2")
        }
        assert len(moments) == 1, f"the departing pods were given different moments: {kind} {moments}"
    joined_after = [e for e in log if e["type"] == "member_joined" and e["ts"] > left[0]["ts"]]
    assert joined_after == []
    # The pod that stays was told to join again once both had taken that moment: a latest moment first,
    # then now, as the operator saw the group rebalancing; its consumer (eager) joined the rebalance then
    # (or, in a rare race, its heartbeat found the rebalance first and it dropped the moment).
    (hastened,) = consumer_events(cluster, namespace, "orders-1", "hastened")
    told = consumer_events(cluster, namespace, "orders-0", "rejoin_told")
    assert [t["mark"] for t in told] == [hastened["mark"]] * 2
    assert abs(told[0]["rejoin_at"] - (hastened["leave_at"] + departure.REJOIN_LATEST_S)) < 0.002
    assert hastened["ts"] <= told[0]["ts"] <= hastened["leave_at"] <= told[1]["rejoin_at"] <= told[1]["ts"]
    rejoined = consumer_events(cluster, namespace, "orders-0", "rejoined")
    revokes = consumer_events(cluster, namespace, "orders-0", "revoked")
    revoked = [e for e in revokes if e["ts"] > told[0]["ts"]]
    assert revoked, "orders-0 took no part in the rebalance"
    if rejoined:
        (rejoined_at,) = rejoined
        assert rejoined_at["rejoin_at"] == told[1]["rejoin_at"] <= rejoined_at["ts"] <= revoked[0]["ts"]
    else:
        assert revoked[0]["ts"] < told[1]["ts"] + 0.02, "told to join again, orders-0 did not"
    # The operator's removal, once the pods had stopped, found them gone.
    status = body["status"]
    assert "scaleDown" not in status
    assert [m["instanceId"] for m in status["members"]] == ["orders-0"]
    (event,) = events(kubectl, namespace, NAME, "MembersRemoved")
    assert "already gone: orders-1, orders-2" in event["message"]
    (handshake,) = events(kubectl, namespace, NAME, "DepartureHandshake")
    assert "orders-1, orders-2 leave together" in handshake["message"]
    assert handshake["message"].endswith("1 of the 1 pods that stay join again right after")
    metrics = operator.metrics()
    removed_line = f'staticfleet_operator_members_removed_total{{group="{group_id(namespace)}"}} 0.0'
    assert removed_line in metrics
    handshakes = "staticfleet_operator_departure_handshakes_total"
    assert f'{handshakes}{{group="{group_id(namespace)}",result="sooner"}} 1.0' in metrics


def test_scaling_down_removes_the_departed_members_right_after_their_consumers_stop(
    cluster: Cluster, namespace: str, coordinator: Coordinator, operator: OperatorRunner
) -> None:
    """Consumers that do not read the departure mark stay members until the operator removes them."""
    kubectl = cluster.kubectl
    session_ms = 60_000
    template = consumer_template(leaves_when_departing=False)
    scaled = scale_three_to_one(kubectl, namespace, coordinator, operator, template=template)
    gid, before, body = scaled.gid, scaled.before, scaled.body
    removed_after, stable_after = scaled.gone_after, scaled.ready_after
    timing("scale 3->1: members removed after", removed_after)
    timing("scale 3->1: Stable group of 1 after", stable_after)

    assert removed_after < session_ms / 1000 / 3, "the removal should not wait for the session timeout"
    after = coordinator.group(gid)
    assert after is not None and after["state"] == "Stable"
    assert after["rebalances"] == before["rebalances"] + 1, "exactly one rebalance"
    assert after["lastRebalance"]["reason"] == "member-removed"
    log = coordinator.events(gid)
    removed = [e for e in log if e["type"] == "member_removed"]
    assert sorted(e["instance_id"] for e in removed) == ["orders-1", "orders-2"]
    assert not [e for e in log if e["type"] == "member_expired"]
    # The removal came after the consumers had stopped (they never rejoined as new members).
    for pod in ("orders-1", "orders-2"):
        assert removed[0]["ts"] / 1000 >= last_stop(cluster, namespace, pod)
    joined_after = [e for e in log if e["type"] == "member_joined" and e["ts"] > removed[0]["ts"]]
    assert joined_after == []
    # They answered the departure handshake without a mark: the operator kept the mark's moment.
    (handshake,) = events(kubectl, namespace, NAME, "DepartureHandshake")
    assert handshake["message"].endswith(
        "had not read the mark in time: the departing pods leave at their mark's moment"
    )

    status = body["status"]
    assert "scaleDown" not in status
    assert [m["instanceId"] for m in status["members"]] == ["orders-0"]
    assert status["group"]["rebalances"] == after["rebalances"]
    assert status["lastScale"]["direction"] == "Down" and status["lastScale"]["toReplicas"] == 1
    (event,) = events(kubectl, namespace, NAME, "MembersRemoved")
    assert "removed orders-1, orders-2" in event["message"]
    assert [e["message"] for e in events(kubectl, namespace, NAME, "Scaled")][
        -1
    ] == "scaling down from 3 to 1"
    removed_line = f'staticfleet_operator_members_removed_total{{group="{group_id(namespace)}"}} 2.0'
    assert removed_line in operator.metrics()


def test_scaling_up_from_one_to_four_is_one_rebalance(
    cluster: Cluster, namespace: str, coordinator: Coordinator, operator: OperatorRunner
) -> None:
    kubectl = cluster.kubectl
    start_fleet(kubectl, namespace, coordinator, operator, 1)
    gid = group_id(namespace)
    before = coordinator.group(gid)
    assert before is not None

    elapsed = stopwatch()
    kubectl.run("scale", f"scg/{NAME}", "-n", namespace, "--replicas=4")
    body = wait_fleet(kubectl, namespace, NAME, ready_with(4), timeout=120, what="Ready with 4")
    timing("scale 1->4: Stable group of 4 after", elapsed())

    after = coordinator.group(gid)
    assert after is not None and after["state"] == "Stable"
    assert coordinator.members(gid) == {"orders-0", "orders-1", "orders-2", "orders-3"}
    assert after["rebalances"] == before["rebalances"] + 1, "exactly one rebalance"
    # The expectation is withdrawn once the group has every pre-registered instance.
    wait_until(
        lambda: not (coordinator.group(gid) or {}).get("expectedInstanceIds"), timeout=30, what="withdrawal"
    )
    configs = [e for e in coordinator.events(gid) if e["type"] == "group_config_changed"]
    assert configs[-2]["configs"] == {
        "staticfleet.expected.instance.ids": "orders-0,orders-1,orders-2,orders-3"
    }
    assert configs[-1]["configs"] == {}
    assert body["status"]["lastScale"]["direction"] == "Up"
    scaled = events(kubectl, namespace, NAME, "Scaled")[-1]["message"]
    assert scaled == "scaling up from 1 to 4; new instances pre-registered with the coordinator"
    assert get_fleet(kubectl, namespace, NAME)["status"]["group"]["rebalances"] == after["rebalances"]


def test_a_cooperative_fleet_holds_its_first_join_phase_a_second_past_the_last_join(
    cluster: Cluster, namespace: str, coordinator: Coordinator, operator: OperatorRunner
) -> None:
    kubectl = cluster.kubectl
    start_fleet(kubectl, namespace, coordinator, operator, 1, assignmentStrategy="cooperative-sticky")
    gid = group_id(namespace)
    before = coordinator.group(gid)
    assert before is not None
    seen = len(coordinator.events(gid))

    kubectl.run("scale", f"scg/{NAME}", "-n", namespace, "--replicas=3")
    wait_fleet(kubectl, namespace, NAME, ready_with(3), timeout=120, what="Ready with 3")
    wait_until(
        lambda: not (coordinator.group(gid) or {}).get("expectedInstanceIds"), timeout=30, what="withdrawal"
    )
    after = coordinator.group(gid)
    assert after is not None and after["state"] == "Stable"
    assert coordinator.members(gid) == {"orders-0", "orders-1", "orders-2"}  # the pending member is gone
    # Incremental: the first rebalance takes partitions from orders-0, the second gives them away.
    assert after["rebalances"] == before["rebalances"] + 2
    scaled = events(kubectl, namespace, NAME, "Scaled")[-1]["message"]
    assert (
        scaled
        == "scaling up from 1 to 3; the join phase is held until 1 s after the new instances have joined"
    )
    assert "preRegistration" not in get_fleet(kubectl, namespace, NAME)["status"]

    # The first join phase ended a second or more after the last new instance joined, so that each of
    # them could join the second at once (librdkafka joins at most once a second).
    news = coordinator.events(gid)[seen:]
    first_phase = next(e["ts"] for e in news if e["type"] == "join_completed")
    joined = {
        e["instance_id"]: e["ts"] for e in news if e["type"] == "member_joined" and e["ts"] <= first_phase
    }
    assert set(joined) == {"orders-1", "orders-2"}
    assert first_phase - max(joined.values()) >= 1000
