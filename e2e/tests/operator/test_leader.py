"""Two operator replicas elect a leader on a Lease; when the leader dies in the middle of a scale-down,
the other takes over and finishes it: one removal, one rebalance."""

from __future__ import annotations

import signal
from collections.abc import Iterator
from functools import partial
from pathlib import Path

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
LEASE = "staticfleet-operator"
FOLLOWER_STOPS = 5


@pytest.fixture
def second_operator(cluster: Cluster, namespace: str, tmp_path: Path) -> Iterator[OperatorRunner]:
    runner = OperatorRunner(cluster.kubeconfig, namespace, tmp_path / "second")
    runner.workdir.mkdir()
    try:
        yield runner
    finally:
        runner.stop()


def holder(cluster: Cluster, namespace: str) -> str | None:
    lease = cluster.kubectl.get_or_none("lease", LEASE, namespace)
    return None if lease is None else lease["spec"].get("holderIdentity")


def test_the_other_replica_finishes_a_scale_down_when_the_leader_dies(
    cluster: Cluster,
    namespace: str,
    coordinator: Coordinator,
    operator: OperatorRunner,
    second_operator: OperatorRunner,
    chaos_round: int,
) -> None:
    kubectl = cluster.kubectl
    gid = f"{namespace}.{NAME}"
    topic = f"{namespace}-orders"
    coordinator.create_topic(topic)
    election = ("--leader-election", "--leader-election-namespace", namespace)
    operator.extra_args = election
    second_operator.extra_args = election
    # The first replica leads, and is SIGKILLed right after it shrank the StatefulSet.
    operator.start({"STATICFLEET_OPERATOR_EXIT_AFTER": "statefulset-shrunk"})
    first = wait_until(lambda: holder(cluster, namespace), timeout=60, what="a leader")
    second_operator.start()
    kubectl.apply(fleet_manifest(NAME, 3, coordinator, topic), namespace)
    wait_fleet(kubectl, namespace, NAME, ready_with(3), timeout=120, what="Ready with 3")
    assert holder(cluster, namespace) == first, "the first replica still leads"
    assert "leading" not in second_operator.logs(), "the second replica only waits"
    before = coordinator.group(gid)
    assert before is not None

    kubectl.run("scale", f"scg/{NAME}", "-n", namespace, "--replicas=1")
    assert operator.wait_exit(timeout=60) == -signal.SIGKILL
    elapsed = stopwatch()
    wait_until(lambda: holder(cluster, namespace) not in (None, first), timeout=60, what="a new leader")
    wait_until(lambda: coordinator.members(gid) == {"orders-0"}, timeout=90, what="the removal")
    timing("leader died -> the other replica removed the departed members", elapsed())
    body = wait_fleet(kubectl, namespace, NAME, ready_with(1), timeout=60, what="Ready with 1")
    assert "scaleDown" not in body["status"]
    after = coordinator.group(gid)
    assert after is not None and after["rebalances"] == before["rebalances"] + 1
    (event,) = events(kubectl, namespace, NAME, "MembersRemoved")
    assert "orders-1, orders-2" in event["message"]
    assert get_fleet(kubectl, namespace, NAME)["status"]["readyReplicas"] == 1


def test_a_leader_stopped_cleanly_gives_up_the_lease_to_the_other_replica(
    cluster: Cluster,
    namespace: str,
    coordinator: Coordinator,
    operator: OperatorRunner,
    second_operator: OperatorRunner,
) -> None:
    kubectl = cluster.kubectl
    topic = f"{namespace}-orders"
    coordinator.create_topic(topic)
    election = ("--leader-election", "--leader-election-namespace", namespace)
    operator.extra_args = election
    second_operator.extra_args = election
    operator.start()
    first = wait_until(lambda: holder(cluster, namespace), timeout=60, what="a leader")
    second_operator.start()
    wait_until(lambda: "waiting to lead" in second_operator.logs(), timeout=60, what="the second to follow")

    operator.stop()  # SIGTERM, as a rollout or a drained node sends it
    assert operator.process is not None and operator.process.returncode == 0, operator.logs()[-2000:]
    # Given up before the process ended: the Lease no longer names it, though it has not expired.
    assert holder(cluster, namespace) != first
    assert "gave up the Lease" in operator.logs()
    second = wait_until(lambda: holder(cluster, namespace), timeout=60, what="the other replica to lead")
    assert second != first
    kubectl.apply(fleet_manifest(NAME, 1, coordinator, topic), namespace)
    wait_fleet(kubectl, namespace, NAME, ready_with(1), timeout=120, what="Ready under the new leader")

    # The first replica back, now a follower: SIGTERM ends it at once and cleanly (as the first process
    # of a pod's container, one that handled no SIGTERM would ignore it until the kubelet's grace period
    # ran out), and the leader keeps the Lease. Several times, right as it starts waiting: the signal
    # then lands while its election thread is starting or mid-request.
    def waiting(times: int) -> bool:  # each start logs "waiting to lead (Lease ...": not the stop's line
        return operator.logs().count("waiting to lead (Lease") == times

    for times in range(2, 2 + FOLLOWER_STOPS):
        operator.start()
        wait_until(partial(waiting, times), timeout=60, what="the first to follow", interval=0.01)
        operator.stop()
        assert operator.process is not None and operator.process.returncode == 0, operator.logs()[-2000:]
    assert operator.logs().count("stopped while waiting to lead") == FOLLOWER_STOPS
    assert holder(cluster, namespace) == second
