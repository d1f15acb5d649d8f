"""No stuck steps: a scale-down whose removal cannot finish (the coordinator is down) is reported as
ScaleDownBlocked within the step timeout, a new target supersedes it, and once the coordinator is back
the group converges on the new target."""

from __future__ import annotations

from pathlib import Path

import pytest

from e2e.helpers import Cluster, wait_until

from .harness import (
    OperatorRunner,
    condition,
    events,
    fleet_manifest,
    get_fleet,
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
STEP_TIMEOUT_S = 5


def test_a_blocked_removal_is_reported_and_a_new_target_supersedes_it(
    cluster: Cluster, namespace: str, operator: OperatorRunner, tmp_path: Path, chaos_round: int
) -> None:
    kubectl = cluster.kubectl
    gid = f"{namespace}.{NAME}"
    topic = f"{namespace}-orders"
    coordinator = start_coordinator(tmp_path / "coordinator")
    try:
        coordinator.create_topic(topic)
        operator.extra_args = ("--scale-down-step-timeout", str(STEP_TIMEOUT_S))
        operator.start()
        kubectl.apply(fleet_manifest(NAME, 3, coordinator, topic, sessionTimeoutMs=60_000), namespace)
        wait_fleet(kubectl, namespace, NAME, ready_with(3), timeout=120, what="Ready with 3")

        stop_coordinator(coordinator)
        kubectl.run("scale", f"scg/{NAME}", "-n", namespace, "--replicas=1")
        scaled = stopwatch()
        body = wait_fleet(
            kubectl,
            namespace,
            NAME,
            lambda b: condition(b, "ScaleDownBlocked").get("reason") == "RemovalFailing",
            timeout=90,
            what="ScaleDownBlocked/RemovalFailing",
        )
        timing(f"blocked: scale-down -> ScaleDownBlocked (step timeout {STEP_TIMEOUT_S} s)", scaled())
        blocked = condition(body, "ScaleDownBlocked")
        assert blocked["reason"] == "RemovalFailing", blocked
        assert "orders-1, orders-2" in blocked["message"]
        assert events(kubectl, namespace, NAME, "ScaleDownBlocked")

        # A new target supersedes it: orders-1 comes back and is no longer to be removed.
        kubectl.run("scale", f"scg/{NAME}", "-n", namespace, "--replicas=2")
        wait_fleet(
            kubectl,
            namespace,
            NAME,
            lambda b: (b["status"].get("scaleDown") or {}).get("pendingInstanceIds") == ["orders-2"],
            timeout=60,
            what="the superseding record",
        )
        wait_until(
            lambda: kubectl.get("statefulset", NAME, namespace)["spec"]["replicas"] == 2,
            timeout=30,
            what="the StatefulSet at 2",
        )

        back = stopwatch()
        coordinator = restart_coordinator(coordinator)
        wait_fleet(kubectl, namespace, NAME, ready_with(2), timeout=180, what="Ready with 2")
        timing("blocked: coordinator back -> Ready at the new target", back())
        assert coordinator.members(gid) == {"orders-0", "orders-1"}
        body = get_fleet(kubectl, namespace, NAME)
        assert "scaleDown" not in body["status"]
        assert condition(body, "ScaleDownBlocked")["status"] == "False"
    finally:
        # The fleet goes while its coordinator runs, so that its deletion can remove the members.
        kubectl.run("delete", "scg", NAME, "-n", namespace, "--wait=false", check=False)
        try:
            wait_until(
                lambda: not kubectl.items("staticconsumergroups", namespace),
                timeout=90,
                what="the fleet to go",
            )
        finally:
            stop_coordinator(coordinator)
