"""An operator that dies in the middle of a scale-down finishes the job after a restart."""

from __future__ import annotations

import pytest

from e2e.helpers import Cluster, wait_until

from .harness import (
    Coordinator,
    OperatorRunner,
    events,
    fleet_manifest,
    get_fleet,
    ready_with,
    stopwatch,
    timing,
    wait_fleet,
)

pytestmark = pytest.mark.localcluster

NAME = "orders"
EXIT_AFTER = "STATICFLEET_OPERATOR_EXIT_AFTER"


def test_an_operator_killed_after_shrinking_completes_the_removal_after_restart(
    cluster: Cluster, namespace: str, coordinator: Coordinator, operator: OperatorRunner
) -> None:
    kubectl = cluster.kubectl
    gid = f"{namespace}.{NAME}"
    topic = f"{namespace}-orders"
    coordinator.create_topic(topic)
    # This operator exits abruptly (no cleanup, like SIGKILL) right after it shrank the StatefulSet.
    operator.start({EXIT_AFTER: "statefulset-shrunk"})
    kubectl.apply(fleet_manifest(NAME, 3, coordinator, topic, sessionTimeoutMs=60_000), namespace)
    wait_fleet(kubectl, namespace, NAME, ready_with(3), timeout=120, what="Ready with 3")
    before = coordinator.group(gid)
    assert before is not None

    kubectl.run("scale", f"scg/{NAME}", "-n", namespace, "--replicas=1")
    assert operator.wait_exit(timeout=60) == 70

    # The state it left behind: the pending ids are recorded, the StatefulSet is shrunk, nobody removed.
    body = get_fleet(kubectl, namespace, NAME)
    assert body["status"]["scaleDown"]["phase"] == "WaitingForPods"
    assert body["status"]["scaleDown"]["pendingInstanceIds"] == ["orders-1", "orders-2"]
    assert kubectl.get("statefulset", NAME, namespace)["spec"]["replicas"] == 1
    wait_until(
        lambda: sorted(p["metadata"]["name"] for p in kubectl.items("pods", namespace)) == ["orders-0"],
        timeout=60,
        what="the departing pods to be gone",
    )
    assert coordinator.members(gid) == {"orders-0", "orders-1", "orders-2"}, "no operator, no removal yet"

    elapsed = stopwatch()
    operator.start()
    wait_until(lambda: coordinator.members(gid) == {"orders-0"}, timeout=60, what="the removal after restart")
    timing("operator restart -> departed members removed", elapsed())
    body = wait_fleet(kubectl, namespace, NAME, ready_with(1), timeout=60, what="Ready with 1")
    assert "scaleDown" not in body["status"]
    after = coordinator.group(gid)
    assert after is not None and after["rebalances"] == before["rebalances"] + 1
    removed = [e for e in coordinator.events(gid) if e["type"] == "member_removed"]
    assert sorted(e["instance_id"] for e in removed) == ["orders-1", "orders-2"]
    (event,) = events(kubectl, namespace, NAME, "MembersRemoved")
    assert "orders-1, orders-2" in event["message"]
