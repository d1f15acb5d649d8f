"""The fleet benchmark's and the demo's pure parts: where in a heartbeat cycle a scale command is sent,
the cycle's length and origin, when Apache Kafka last logged a group Stable, when each fleet's rolling
restart begins, and when a fleet's pods are at its size."""

from __future__ import annotations

from datetime import datetime
from types import SimpleNamespace
from typing import Any

import pytest
import yaml

from bench.fleet_kinds import OPERATOR_INTERVAL_S
from bench.fleet_ops import Kube, in_turn, last_stabilized_at, step_finished
from e2e.helm import CHART
from examples.demo.fleet import CLIENT_HEARTBEAT_MS, cycle_moment, heartbeat_ms, last_rebalance_at

BROKER_LOG = """\
[2026-11-26 16:23:51,765] INFO [GroupCoordinator id=1 topic=__consumer_offsets partition=0] Preparing to \
rebalance group g.fleet in state PreparingRebalance with old generation 54 (reason: explicit LeaveGroup)
[2026-11-26 16:23:54,349] INFO [GroupCoordinator id=1 topic=__consumer_offsets partition=0] Stabilized group \
g.fleet generation 55 with 20 members. (org.apache.kafka.coordinator.group.GroupMetadataManager)
[2026-11-26 16:23:55,001] INFO [GroupCoordinator id=1 topic=__consumer_offsets partition=0] Stabilized group \
other.fleet generation 3 with 2 members. (org.apache.kafka.coordinator.group.GroupMetadataManager)
[2026-11-26 16:24:27,533] INFO [GroupCoordinator id=1 topic=__consumer_offsets partition=0] Stabilized group \
g.fleet generation 56 with 10 members. (org.apache.kafka.coordinator.group.GroupMetadataManager)
"""


@pytest.mark.parametrize(
    ("now", "fraction", "expected"),
    [
        (107.2, 0.5, 107.5),  # later in this cycle
        (107.6, 0.5, 110.5),  # this cycle's moment has passed: the next one
        (100.0, 0.0, 100.0),  # exactly on it
        (100.1, 1 / 6, 100.5),
        (100.6, 5 / 6, 102.5),
    ],
)
def test_a_command_goes_at_the_given_fraction_of_the_next_cycle(
    now: float, fraction: float, expected: float
) -> None:
    assert cycle_moment(100.0, now, 3.0, fraction) == pytest.approx(expected)


def test_runs_cover_the_cycle_evenly() -> None:
    runs = 3
    moments = [cycle_moment(0.0, 10.0, 3.0, (run - 0.5) / runs) % 3.0 for run in range(1, runs + 1)]
    assert moments == pytest.approx([0.5, 1.5, 2.5])


def test_the_last_time_kafka_logged_the_group_stable_is_read_from_its_log() -> None:
    expected = datetime(2026, 11, 26, 16, 24, 27, 533_000).timestamp()
    assert last_stabilized_at(BROKER_LOG, "g.fleet") == pytest.approx(expected)
    assert last_stabilized_at(BROKER_LOG, "other.fleet") == pytest.approx(
        datetime(2026, 11, 26, 16, 23, 55, 1_000).timestamp()
    )
    assert last_stabilized_at(BROKER_LOG, "g") is None  # a prefix of a name is not the group
    assert last_stabilized_at("", "g.fleet") is None


def test_the_cycle_is_the_pod_templates_heartbeat_or_the_clients_default() -> None:
    def statefulset(*env: dict[str, str]) -> dict[str, object]:
        containers = [{"name": "consumer", "env": list(env)}]
        return {"spec": {"template": {"spec": {"containers": containers}}}}

    assert heartbeat_ms(statefulset({"name": "KAFKA_HEARTBEAT_INTERVAL_MS", "value": "250"})) == 250
    assert heartbeat_ms(statefulset({"name": "KAFKA_GROUP_ID", "value": "g"})) == CLIENT_HEARTBEAT_MS == 3000
    assert heartbeat_ms({}) == CLIENT_HEARTBEAT_MS


def test_the_cycle_starts_at_the_groups_last_rebalance_as_the_coordinator_recorded_it() -> None:
    assert last_rebalance_at({"lastRebalance": {"completedMs": 1_795_709_379_350}}) == 1_795_709_379.35
    assert last_rebalance_at({"lastRebalance": None}) is None
    assert last_rebalance_at(None) is None


def test_a_fleet_is_settled_for_the_next_operation_only_once_its_operator_has_finished_the_step() -> None:
    assert step_finished({"group": {"state": "Stable"}, "replicas": 10})
    pending = {"phase": "WaitingForPods", "pendingInstanceIds": ["fleet-10"]}
    assert not step_finished({"scaleDown": pending})
    assert not step_finished({"preRegistration": {"instanceIds": ["fleet-15"], "accepted": True}})


def test_each_run_operates_the_fleets_in_turn_beginning_one_further_on() -> None:
    fleets = ["a", "b", "c"]
    assert in_turn(fleets, 1) == ["a", "b", "c"]
    assert in_turn(fleets, 2) == ["b", "c", "a"]
    assert in_turn(fleets, 4) == ["a", "b", "c"]
    # Over as many runs as fleets, each goes first once and last once.
    orders = [in_turn(fleets, run) for run in range(1, 4)]
    assert {o[0] for o in orders} == {"a", "b", "c"} and {o[-1] for o in orders} == {"a", "b", "c"}
    assert in_turn([], 3) == []


def _pods(*deleting: bool) -> Any:
    def pod(deleted: bool) -> Any:
        return SimpleNamespace(metadata=SimpleNamespace(deletion_timestamp="now" if deleted else None))

    return SimpleNamespace(items=[pod(d) for d in deleting])


@pytest.mark.parametrize(
    ("deleting", "replicas", "at_size"),
    [
        ((False,) * 10, 10, True),
        ((False,) * 10 + (True,), 10, False),  # a pod of the last scale-down still being deleted
        ((False,) * 9 + (True,), 10, False),
        ((False,) * 9, 10, False),  # one not created yet
    ],
)
def test_a_fleet_is_ready_for_the_next_step_only_with_exactly_its_pods_none_terminating(
    deleting: tuple[bool, ...], replicas: int, at_size: bool
) -> None:
    kube = Kube.__new__(Kube)
    kube.core = SimpleNamespace(list_namespaced_pod=lambda namespace: _pods(*deleting))  # type: ignore[assignment]
    fleet = SimpleNamespace(namespace="ns", replicas=replicas)
    assert kube.pods_at_size(fleet) is at_size  # type: ignore[arg-type]


def test_the_benchmarks_run_the_operator_at_the_charts_interval() -> None:
    values = yaml.safe_load((CHART / "values.yaml").read_text())
    assert float(values["operator"]["interval"]) == OPERATOR_INTERVAL_S
