"""The operator SIGKILLed at every crash point of a scale-down and a scale-up (staticfleet.kube.faults):
after each kill the state it left behind is the one the crash point names, a restarted operator finishes
the step, and every step costs exactly one rebalance and removes each departed member exactly once.

STATICFLEET_CHAOS_ROUNDS=<n> repeats the whole sequence n times (docs/reliability.md).
"""

from __future__ import annotations

import signal
from collections.abc import Callable

import pytest

from e2e.helpers import Cluster, Kubectl, Manifest, wait_until
from staticfleet.kube.faults import EXIT_AFTER_ENV, SCALE_DOWN_CRASH_POINTS, SCALE_UP_CRASH_POINTS

from .harness import (
    Coordinator,
    OperatorRunner,
    consumer_template,
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


def left_behind(point: str, kubectl: Kubectl, namespace: str, coordinator: Coordinator, gid: str) -> None:
    """What an operator killed at `point` leaves: proof that it died where the crash point says."""
    status = get_fleet(kubectl, namespace, NAME)["status"]
    sts_replicas = kubectl.get("statefulset", NAME, namespace)["spec"]["replicas"]
    phase = (status.get("scaleDown") or {}).get("phase")
    if point == "scale-down-recorded":
        assert (phase, sts_replicas) == ("ShrinkingStatefulSet", LARGE)
    elif point == "statefulset-shrunk":
        assert (phase, sts_replicas) == ("WaitingForPods", SMALL)
    elif point == "members-removed":
        # The coordinator removed the member, and the Checkpoint after the removal recorded that:
        # the restarted operator only waits for the coordinator to confirm it.
        assert phase == "ConfirmingRemoval" and sts_replicas == SMALL
        assert coordinator.members(gid) == {"orders-0"}
    elif point == "pre-registered":
        assert status["preRegistration"]["instanceIds"] == ["orders-0", "orders-1"]
        assert sts_replicas == SMALL
    elif point == "statefulset-grown":
        assert status["preRegistration"]["instanceIds"] == ["orders-0", "orders-1"]
        assert sts_replicas == LARGE and status["lastScale"]["direction"] == "Down"
    elif point == "scale-up-recorded":
        assert sts_replicas == LARGE and status["lastScale"]["direction"] == "Up"
    else:
        raise AssertionError(f"unknown crash point {point}")


def settled(replicas: int) -> Callable[[Manifest], bool]:
    """Ready with `replicas`, nothing of the scale flows left in status."""
    ready = ready_with(replicas)
    return lambda body: (
        ready(body) and "scaleDown" not in body["status"] and "preRegistration" not in body["status"]
    )


def test_the_operator_killed_at_every_crash_point_finishes_each_step_once(
    cluster: Cluster, namespace: str, coordinator: Coordinator, operator: OperatorRunner, chaos_round: int
) -> None:
    kubectl = cluster.kubectl
    gid = f"{namespace}.{NAME}"
    topic = f"{namespace}-orders"
    coordinator.create_topic(topic)
    operator.start()
    # Consumers that ignore the departure mark: every scale-down ends in the operator's own removal.
    template = consumer_template(leaves_when_departing=False)
    kubectl.apply(fleet_manifest(NAME, LARGE, coordinator, topic, template=template), namespace)
    wait_fleet(kubectl, namespace, NAME, settled(LARGE), timeout=120, what=f"Ready with {LARGE}")
    group = coordinator.group(gid)
    assert group is not None
    first_rebalances = rebalances = group["rebalances"]
    operator.stop()

    steps = [
        (point, target)
        for down, up in zip(SCALE_DOWN_CRASH_POINTS, SCALE_UP_CRASH_POINTS, strict=True)
        for point, target in ((down, SMALL), (up, LARGE))
    ]
    for point, target in steps:
        operator.start({EXIT_AFTER_ENV: point})
        kubectl.run("scale", f"scg/{NAME}", "-n", namespace, f"--replicas={target}")
        assert operator.wait_exit(timeout=90) == -signal.SIGKILL, f"killed at {point}"
        left_behind(point, kubectl, namespace, coordinator, gid)

        elapsed = stopwatch()
        operator.start()
        wait_fleet(
            kubectl, namespace, NAME, settled(target), timeout=120, what=f"{point}: settled at {target}"
        )
        timing(f"chaos: operator killed after {point}: restart -> Ready", elapsed())
        wait_until(
            lambda: not (coordinator.group(gid) or {}).get("expectedInstanceIds"),
            timeout=30,
            what="the pre-registration withdrawn on the coordinator",
        )
        group = coordinator.group(gid)
        assert group is not None and group["state"] == "Stable"
        assert coordinator.members(gid) == {f"orders-{o}" for o in range(target)}
        assert group["rebalances"] == rebalances + 1, f"one rebalance for the step killed at {point}"
        rebalances = group["rebalances"]
        operator.stop()

    removed = [e["instance_id"] for e in coordinator.events(gid) if e["type"] == "member_removed"]
    assert removed == ["orders-1"] * len(SCALE_DOWN_CRASH_POINTS), "each departed member removed once"
    assert rebalances == first_rebalances + len(steps)
