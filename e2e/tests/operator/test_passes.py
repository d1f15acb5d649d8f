"""How many passes a change to a StaticConsumerGroup starts, counted by the operator's own metric, with the
real kube-apiserver and kopf: one, and kopf writes no record of the spec it handled (an annotation by
default, a write and a watch event of its own after each change, handlers.NoDiffBase); and a scale-up,
whose new pods each change four or five times as they start, one more for each pod that becomes ready,
and none at the interval."""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from e2e.helpers import Cluster, Manifest, wait_until

from .harness import Coordinator, OperatorRunner, fleet_manifest, get_fleet, ready_with, wait_fleet

pytestmark = pytest.mark.localcluster

NAME = "counted"
KOPF_RECORD = "staticfleet.io/last-handled-configuration"
PASSES_METRIC = "staticfleet_operator_reconciles_total{"
QUIET_S = 3.0
"""No pass for this long (its interval is far longer): nothing else is coming."""


def passes(runner: OperatorRunner) -> float:
    """Every pass the operator has run, whatever its result."""
    counted = (line for line in runner.metrics().splitlines() if line.startswith(PASSES_METRIC))
    return sum(float(line.split()[-1]) for line in counted)


def quiet_count(runner: OperatorRunner) -> float:
    """The number of passes once it has stopped moving for QUIET_S."""
    last = [passes(runner), time.monotonic()]

    def settled() -> float | None:
        now = passes(runner)
        if now != last[0]:
            last[:] = [now, time.monotonic()]
            return None
        return now if time.monotonic() - last[1] >= QUIET_S else None

    return float(wait_until(settled, timeout=60, interval=0.2, what="the operator's passes to settle"))


def fleet_annotations(cluster: Cluster, namespace: str) -> dict[str, str]:
    return dict(get_fleet(cluster.kubectl, namespace, NAME)["metadata"].get("annotations") or {})


def test_a_change_to_the_resource_starts_one_pass_and_kopf_writes_no_record_of_it(
    cluster: Cluster, namespace: str, coordinator: Coordinator, operator: OperatorRunner
) -> None:
    kubectl = cluster.kubectl
    topic = f"{namespace}-counted"
    coordinator.create_topic(topic)
    operator.interval_s = 600.0  # only the changes start passes
    operator.start()
    kubectl.apply(fleet_manifest(NAME, 0, coordinator, topic), namespace)
    wait_until(
        lambda: get_fleet(kubectl, namespace, NAME).get("status", {}).get("observedGeneration") == 1,
        timeout=60,
        what="the fleet's first pass",
    )
    before = quiet_count(operator)

    # No child carries a label of the resource: the pass it starts changes nothing.
    kubectl.run("label", f"scg/{NAME}", "-n", namespace, "team=payments")
    assert quiet_count(operator) - before == 1
    assert KOPF_RECORD not in fleet_annotations(cluster, namespace)


def test_a_scale_up_meets_a_pass_as_its_pods_become_ready_not_at_each_step_of_their_start(
    cluster: Cluster, namespace: str, coordinator: Coordinator, operator: OperatorRunner
) -> None:
    kubectl = cluster.kubectl
    topic = f"{namespace}-counted"
    coordinator.create_topic(topic, partitions=4)
    operator.interval_s = 600.0  # only the changes start passes

    def settled_with(replicas: int) -> Callable[[Manifest], bool]:
        # The pre-registration withdrawn too: a pass at a pod's readiness did it, not the interval's.
        return lambda body: ready_with(replicas)(body) and "preRegistration" not in body["status"]

    operator.start()
    kubectl.apply(fleet_manifest(NAME, 1, coordinator, topic), namespace)
    wait_fleet(kubectl, namespace, NAME, settled_with(1), timeout=120, what="Ready with 1")
    before = quiet_count(operator)

    kubectl.run("scale", f"scg/{NAME}", "-n", namespace, "--replicas=3")
    wait_fleet(kubectl, namespace, NAME, settled_with(3), timeout=120, what="Ready with 3")
    # The change, and one for each new pod that became ready (one for both, if together).
    assert 2 <= quiet_count(operator) - before <= 3
