"""The operator SIGKILLed at every checkpoint of a scale-down and a scale-up (staticfleet.kube.faults):
after each kill the state it left behind is the one the checkpoint names, a restarted operator finishes
the step, and every step costs exactly one rebalance and removes each departed member exactly once.

STATICFLEET_CHAOS_ROUNDS=<n> repeats the whole sequence n times (docs/reliability.md).
"""

from __future__ import annotations

import signal
from collections.abc import Callable

import pytest

from e2e.helpers import Cluster, Kubectl, Manifest, wait_until
from staticfleet.kube.faults import EXIT_AFTER_ENV, SCALE_DOWN_CHECKPOINTS, SCALE_UP_CHECKPOINTS

from .harness import (
    Coordinator,
    OperatorRunner,
    fleet_manifest,
    get_fleet,
    ready_with,
    stopwatch,
    timing,
    wait_fleet,
)

pytestmark = pytest.mark.localcluster

NAME = "orders"
LARGE, SMALL = 2, 1


def left_behind(
    checkpoint: str, kubectl: Kubectl, namespace: str, coordinator: Coordinator, gid: str
) -> None:
    """What an operator killed at `checkpoint` leaves: proof that it died where the checkpoint says."""
    status = get_fleet(kubectl, namespace, NAME)["status"]
    sts_replicas = kubectl.get("statefulset", NAME, namespace)["spec"]["replicas"]
    phase = (status.get("scaleDown") or {}).get("phase")
    if checkpoint == "scale-down-recorded":
        assert (phase, sts_replicas) == ("ShrinkingStatefulSet", LARGE)
    elif checkpoint == "statefulset-shrunk":
        assert (phase, sts_replicas) == ("WaitingForPods", SMALL)
    elif checkpoint == "members-removed":
        # The coordinator removed the member, and the removal step recorded that before the checkpoint:
        # the restarted operator only waits for the coordinator to confirm it.
        assert phase == "ConfirmingRemoval" and sts_replicas == SMALL
        assert coordinator.members(gid) == {"orders-0"}
    elif checkpoint == "pre-registered":
        assert status["preRegistration"]["instanceIds"] == ["orders-0", "orders-1"]
        assert sts_replicas == SMALL
    elif checkpoint == "statefulset-grown":
        assert status["preRegistration"]["instanceIds"] == ["orders-0", "orders-1"]
        assert sts_replicas == LARGE and status["lastScale"]["direction"] == "Down"
    elif checkpoint == "scale-up-recorded":
        assert sts_replicas == LARGE and status["lastScale"]["direction"] == "Up"
    else:
        raise AssertionError(f"unknown checkpoint {checkpoint}")


def settled(replicas: int) -> Callable[[Manifest], bool]:
    """Ready with `replicas`, nothing of the scale flows left in status."""
    ready = ready_with(replicas)
    return lambda body: (
        ready(body) and "scaleDown" not in body["status"] and "preRegistration" not in body["status"]
    )


def test_the_operator_killed_at_every_checkpoint_finishes_each_step_once(
    cluster: Cluster, namespace: str, coordinator: Coordinator, operator: OperatorRunner, chaos_round: int
) -> None:
    kubectl = cluster.kubectl
    gid = f"{namespace}.{NAME}"
    topic = f"{namespace}-orders"
    coordinator.create_topic(topic)
    operator.start()
    kubectl.apply(fleet_manifest(NAME, LARGE, coordinator, topic), namespace)
    wait_fleet(kubectl, namespace, NAME, settled(LARGE), timeout=120, what=f"Ready with {LARGE}")
    group = coordinator.group(gid)
    assert group is not None
    first_rebalances = rebalances = group["rebalances"]
    operator.stop()

    steps = [
        (checkpoint, target)
        for down, up in zip(SCALE_DOWN_CHECKPOINTS, SCALE_UP_CHECKPOINTS, strict=True)
        for checkpoint, target in ((down, SMALL), (up, LARGE))
    ]
    for checkpoint, target in steps:
        operator.start({EXIT_AFTER_ENV: checkpoint})
        kubectl.run("scale", f"scg/{NAME}", "-n", namespace, f"--replicas={target}")
        assert operator.wait_exit(timeout=90) == -signal.SIGKILL, f"killed at {checkpoint}"
        left_behind(checkpoint, kubectl, namespace, coordinator, gid)

        elapsed = stopwatch()
        operator.start()
        wait_fleet(
            kubectl, namespace, NAME, settled(target), timeout=120, what=f"{checkpoint}: settled at {target}"
        )
        timing(f"chaos: operator killed after {checkpoint}: restart -> Ready", elapsed())
        wait_until(
            lambda: not (coordinator.group(gid) or {}).get("expectedInstanceIds"),
            timeout=30,
            what="the pre-registration withdrawn on the coordinator",
        )
        group = coordinator.group(gid)
        assert group is not None and group["state"] == "Stable"
        assert coordinator.members(gid) == {f"orders-{o}" for o in range(target)}
        assert group["rebalances"] == rebalances + 1, f"one rebalance for the step killed at {checkpoint}"
        rebalances = group["rebalances"]
        operator.stop()

    removed = [e["instance_id"] for e in coordinator.events(gid) if e["type"] == "member_removed"]
    assert removed == ["orders-1"] * len(SCALE_DOWN_CHECKPOINTS), "each departed member removed once"
    assert rebalances == first_rebalances + len(steps)
