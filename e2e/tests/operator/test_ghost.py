"""A removal the coordinator acknowledged, then lost: the coordinator is SIGKILLed before the rebalance
the removal started has completed (so before the new membership is persisted), and comes back listing
the departed members. The operator kept its record, sees them again and removes them again: the group
ends Stable with exactly the remaining members."""

from __future__ import annotations

import signal
from pathlib import Path

import pytest

from e2e.helpers import Cluster, wait_until
from e2e.localcluster import procs

from .harness import (
    OperatorRunner,
    consumer_template,
    events,
    fleet_manifest,
    get_fleet,
    paused,
    ready_with,
    restart_coordinator,
    start_coordinator,
    stop_coordinator,
    stopwatch,
    timing,
    wait_fleet,
)

pytestmark = pytest.mark.localcluster

NAME = "orders"


def test_members_a_coordinator_restart_brings_back_are_removed_again(
    cluster: Cluster, namespace: str, operator: OperatorRunner, tmp_path: Path, chaos_round: int
) -> None:
    kubectl = cluster.kubectl
    gid = f"{namespace}.{NAME}"
    topic = f"{namespace}-orders"
    coordinator = start_coordinator(tmp_path / "coordinator")
    try:
        coordinator.create_topic(topic)
        operator.start()
        # The consumers ignore the departure mark, so that the operator removes them.
        template = consumer_template(leaves_when_departing=False)
        spec = {"sessionTimeoutMs": 60_000, "template": template}
        kubectl.apply(fleet_manifest(NAME, 3, coordinator, topic, **spec), namespace)
        wait_fleet(kubectl, namespace, NAME, ready_with(3), timeout=120, what="Ready with 3")

        def removed_not_settled() -> bool:
            group = coordinator.group(gid) or {}
            return group.get("state") == "PreparingRebalance" and coordinator.members(gid) == {"orders-0"}

        # The remaining member, paused, cannot rejoin (its session outlasts the pause): the rebalance the
        # removal starts stays open until the coordinator has been killed inside it.
        with paused(gid, 1, pod=f"{NAME}-0"):
            kubectl.run("scale", f"scg/{NAME}", "-n", namespace, "--replicas=1")
            wait_until(removed_not_settled, timeout=60, what="the removal, before the rebalance completes")
            procs.signal_group(coordinator.process.pid, signal.SIGKILL)
            coordinator.process.wait(timeout=10)
        body = get_fleet(kubectl, namespace, NAME)
        assert body["status"].get("scaleDown", {}).get("phase") in ("RemovingMembers", "ConfirmingRemoval")

        elapsed = stopwatch()
        coordinator = restart_coordinator(coordinator)
        body = wait_fleet(kubectl, namespace, NAME, ready_with(1), timeout=120, what="Ready with 1")
        timing("ghost: coordinator killed inside the removal's rebalance: restart -> Ready", elapsed())
        assert "scaleDown" not in body["status"]
        assert coordinator.members(gid) == {"orders-0"}
        group = coordinator.group(gid)
        assert group is not None and group["state"] == "Stable"
        returned = events(kubectl, namespace, NAME, "MembersReturned")
        assert returned and "orders-1, orders-2" in returned[0]["message"]
        assert len(events(kubectl, namespace, NAME, "MembersRemoved")) == 2
    finally:
        kubectl.run("delete", "scg", NAME, "-n", namespace, "--wait=false", check=False)
        try:
            gone = lambda: not kubectl.items("staticconsumergroups", namespace)  # noqa: E731
            wait_until(gone, timeout=90, what="the fleet to go")
        finally:
            stop_coordinator(coordinator)
