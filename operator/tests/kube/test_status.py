from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any

from staticfleet.admin.coordinator_api import CoordinatorGroupView, RebalanceRecord
from staticfleet.admin.model import GroupDescription, MemberDescription, Node, PartitionOffsets, lag_summary
from staticfleet.kube import status as computed
from staticfleet.kube.fleetstatus import EventSpec, FleetStatus, KafkaUser, merge_patch
from staticfleet.kube.group_status import rebalances_total
from staticfleet.kube.kubeapi import prune
from staticfleet.kube.observation import GroupObservation
from staticfleet.kube.scaling import (
    Blocked,
    LastScale,
    PreRegistration,
    ScaleDirection,
    ScaleDownState,
    ScalePhase,
    iso,
)
from staticfleet.kube.status import MEMBER_LIST_CAP, StatusInputs, conflict_status

from .fixtures import group_spec

NOW = datetime(2026, 11, 22, 10, 0, 0, tzinfo=UTC)
NODE = Node(1, "127.0.0.1", 9092)


def members(n: int, state: str = "Stable", prefix: str = "orders") -> GroupDescription:
    return GroupDescription(
        group_id="shop.orders",
        state=state,
        protocol_type="consumer",
        protocol="range",
        members=tuple(
            MemberDescription(
                f"{prefix}-{i}-uuid{i}", f"{prefix}-{i}", f"{prefix}-{i}", "/10.0.0.1", {"orders": [i]}
            )
            for i in range(n)
        ),
        coordinator=NODE,
    )


def statefulset(ready: int, replicas: int | None = None, revision: str = "r1") -> dict[str, Any]:
    replicas = ready if replicas is None else replicas
    return {
        "spec": {"replicas": replicas},
        "status": {
            "replicas": replicas,
            "readyReplicas": ready,
            "updatedReplicas": replicas,
            "currentRevision": revision,
            "updateRevision": revision,
        },
    }


def pods(n: int) -> list[dict[str, Any]]:
    return [{"metadata": {"name": f"orders-{i}"}, "status": {}} for i in range(n)]


def inputs(**overrides: Any) -> StatusInputs:
    """A pass's inputs; `previous` is the status object as the API server holds it."""
    values: dict[str, Any] = {
        "spec": group_spec(replicas=3),
        "generation": 2,
        "previous": {},
        "statefulset": statefulset(3),
        "pods": pods(3),
        "group": GroupObservation(description=members(3)),
        "now": NOW,
    }
    values.update(overrides)
    values["previous"] = FleetStatus.of(values["previous"])
    return StatusInputs(**values)


@dataclass(frozen=True)
class Shown:
    status: dict[str, Any]
    """As the resource shows it."""
    events: tuple[EventSpec, ...]
    completed_scale: LastScale | None


def compute_status(values: StatusInputs) -> Shown:
    result = computed.compute_status(values)
    return Shown(result.status.to_status(), result.events, result.completed_scale)


def conditions(status: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["type"]: c for c in status["conditions"]}


def test_a_full_stable_fleet_is_ready() -> None:
    result = compute_status(inputs())
    status = result.status
    c = conditions(status)
    assert c["Ready"]["status"] == "True" and c["Ready"]["reason"] == "FleetReady"
    assert c["GroupStable"]["status"] == "True"
    assert c["Progressing"]["status"] == "False"
    assert c["Degraded"]["status"] == "False"
    assert status["observedGeneration"] == 2
    assert status["replicas"] == 3 and status["readyReplicas"] == 3
    assert status["selector"].startswith("app.kubernetes.io/instance=orders")
    assert status["group"]["members"] == 3 and status["group"]["assignedPartitions"] == 3
    assert [m["instanceId"] for m in status["members"]] == ["orders-0", "orders-1", "orders-2"]
    assert status["members"][1]["partitions"] == {"orders": [1]}


def test_a_missing_member_keeps_the_fleet_not_ready() -> None:
    result = compute_status(inputs(group=GroupObservation(description=members(2))))
    ready = conditions(result.status)["Ready"]
    assert ready["status"] == "False" and ready["reason"] == "MembersMissing"
    assert "orders-2" in ready["message"]


def test_a_rebalancing_group_is_not_stable() -> None:
    result = compute_status(inputs(group=GroupObservation(description=members(3, "PreparingRebalance"))))
    c = conditions(result.status)
    assert c["GroupStable"]["reason"] == "RebalanceInProgress"
    assert c["Ready"]["reason"] == "GroupNotStable"


def test_transition_time_moves_only_when_the_condition_status_changes() -> None:
    first = compute_status(inputs()).status
    later = compute_status(inputs(previous=first, now=NOW + timedelta(minutes=5))).status
    assert conditions(later)["Ready"]["lastTransitionTime"] == iso(NOW)
    flipped = compute_status(
        inputs(previous=later, now=NOW + timedelta(minutes=6), statefulset=statefulset(2, 3))
    ).status
    assert conditions(flipped)["Ready"]["lastTransitionTime"] == iso(NOW + timedelta(minutes=6))


def test_an_unreachable_coordinator_degrades_the_fleet_with_one_event() -> None:
    down = GroupObservation(error="coordinator at kafka:9092 unreachable")
    first = compute_status(inputs(group=down))
    c = conditions(first.status)
    assert c["Degraded"]["status"] == "True" and c["Degraded"]["reason"] == "CoordinatorUnavailable"
    assert [e.reason for e in first.events] == ["CoordinatorUnavailable"]
    again = compute_status(inputs(group=down, previous=first.status))
    assert not [e for e in again.events if e.reason == "CoordinatorUnavailable"]


def test_a_consumer_that_exited_fenced_is_reported() -> None:
    fenced_pod = {
        "metadata": {"name": "orders-1"},
        "status": {
            "containerStatuses": [
                {
                    "lastState": {
                        "terminated": {"exitCode": 82, "finishedAt": iso(NOW - timedelta(seconds=20))}
                    }
                }
            ]
        },
    }
    result = compute_status(inputs(pods=[*pods(1), fenced_pod]))
    degraded = conditions(result.status)["Degraded"]
    assert degraded["reason"] == "InstanceFenced" and "orders-1" in degraded["message"]
    assert "InstanceFenced" in [e.reason for e in result.events]
    old = compute_status(inputs(pods=[fenced_pod], now=NOW + timedelta(hours=1)))
    assert conditions(old.status)["Degraded"]["status"] == "False"


def test_the_member_list_is_capped_with_totals() -> None:
    spec = group_spec(replicas=70)
    result = compute_status(
        inputs(
            spec=spec,
            statefulset=statefulset(70),
            pods=pods(70),
            group=GroupObservation(description=members(70)),
        )
    )
    assert len(result.status["members"]) == MEMBER_LIST_CAP
    assert result.status["membersTotal"] == 70 and result.status["membersTruncated"] is True
    assert result.status["members"][10]["instanceId"] == "orders-10"  # natural order


def view(rebalances: int, generation: int) -> CoordinatorGroupView:
    return CoordinatorGroupView(
        group_id="shop.orders",
        state="Stable",
        generation=generation,
        protocol="range",
        leader_instance_id="orders-0",
        members=3,
        rebalances=rebalances,
        last_rebalance=RebalanceRecord(
            generation, "member-removed", started_ms=1_000, completed_ms=1_250, members=3
        ),
        rebalance_in_progress=None,
    )


def test_the_coordinator_api_supplies_generation_rebalances_and_the_last_rebalance() -> None:
    first = compute_status(inputs(group=GroupObservation(description=members(3), view=view(1, 1))))
    group = first.status["group"]
    assert (group["generation"], group["rebalances"], group["rebalancesSource"]) == (1, 1, "coordinator")
    assert group["leader"] == "orders-0"
    assert (
        group["lastRebalance"]["reason"] == "member-removed" and group["lastRebalance"]["durationMs"] == 250
    )
    assert not [e for e in first.events if e.reason == "RebalanceObserved"]  # no baseline yet
    second = compute_status(
        inputs(group=GroupObservation(description=members(3), view=view(2, 2)), previous=first.status)
    )
    observed = [e for e in second.events if e.reason == "RebalanceObserved"]
    assert (
        len(observed) == 1
        and "generation 2" in observed[0].message
        and "member-removed" in observed[0].message
    )


def test_a_session_that_ran_out_during_a_rolling_update_is_explained_in_the_event() -> None:
    def expired(rebalances: int, generation: int) -> CoordinatorGroupView:
        record = RebalanceRecord(
            generation, "session-timeout", started_ms=1_000, completed_ms=1_300, members=2
        )
        return replace(view(rebalances, generation), last_rebalance=record)

    def observed(sts: dict[str, Any]) -> list[str]:
        first = compute_status(
            inputs(statefulset=sts, group=GroupObservation(description=members(3), view=view(1, 1)))
        )
        second = compute_status(
            inputs(
                statefulset=sts,
                group=GroupObservation(description=members(2), view=expired(2, 2)),
                previous=first.status,
            )
        )
        return [e.message for e in second.events if e.reason == "RebalanceObserved"]

    rolling = statefulset(3)
    rolling["status"]["updateRevision"] = "r2"
    [during] = observed(rolling)
    assert "reason session-timeout" in during
    timeout = group_spec(replicas=3).session_timeout_ms
    assert "during the rolling update" in during and f"sessionTimeoutMs, {timeout} ms" in during
    # Outside a rollout an expiry is only reported: a crash or a stalled consumer is no pod coming back.
    [outside] = observed(statefulset(3))
    assert "reason session-timeout" in outside and "rolling update" not in outside


def test_the_shown_count_survives_a_restart_of_the_coordinator() -> None:
    def observe(previous: dict[str, Any], rebalances: int, generation: int) -> dict[str, Any]:
        group = GroupObservation(description=members(3), view=view(rebalances, generation))
        status: dict[str, Any] = compute_status(inputs(group=group, previous=previous)).status
        return status

    status = observe({}, 5, 5)
    assert (status["group"]["rebalances"], status["group"]["coordinatorRebalances"]) == (5, 5)
    status = observe(status, 0, 5)  # restarted: its count begins again, the group carries on
    assert (status["group"]["rebalances"], status["group"]["coordinatorRebalances"]) == (5, 0)
    status = observe(status, 0, 5)
    assert status["group"]["rebalances"] == 5
    status = observe(status, 1, 6)  # one rebalance after the restart
    assert status["group"]["rebalances"] == 6
    status = observe(status, 1, 6)
    assert status["group"]["rebalances"] == 6


def test_the_shown_count_grows_by_what_the_coordinator_counted_since_the_last_look() -> None:
    assert rebalances_total(None, None, 3) == 3  # no previous observation
    assert rebalances_total(3, None, 7) == 7  # a status without the coordinator's own count
    assert rebalances_total(5, 2, 4) == 7
    assert rebalances_total(5, 4, 1) == 6  # restarted, then one rebalance before this look
    assert rebalances_total(5, 4, 4) == 5


def test_an_unreachable_coordinator_keeps_both_counts() -> None:
    seen = compute_status(inputs(group=GroupObservation(description=members(3), view=view(4, 4)))).status
    lost = compute_status(inputs(group=GroupObservation(error="connection refused"), previous=seen)).status
    assert (lost["group"]["rebalances"], lost["group"]["coordinatorRebalances"]) == (4, 4)


def test_a_coordinator_api_not_answering_for_a_while_keeps_both_counts() -> None:
    # A restarting coordinator may answer DescribeGroups before its HTTP API: the count must not be
    # inferred from transitions then, nor lose the coordinator's own count.
    api = {"bootstrapServers": "coordinator:9092", "coordinatorApi": "http://coordinator:8080"}
    spec = group_spec(replicas=3, kafka=api)
    seen = compute_status(
        inputs(spec=spec, group=GroupObservation(description=members(3), view=view(4, 4)))
    ).status
    gap = compute_status(
        inputs(spec=spec, group=GroupObservation(description=members(3)), previous=seen)
    ).status
    assert (gap["group"]["rebalances"], gap["group"]["coordinatorRebalances"]) == (4, 4)
    assert gap["group"]["rebalancesSource"] == "coordinator"
    back = compute_status(
        inputs(spec=spec, group=GroupObservation(description=members(3), view=view(0, 4)), previous=gap)
    ).status
    assert back["group"]["rebalances"] == 4  # restarted: its count begins again, the shown one does not


def test_without_the_api_rebalances_are_inferred_from_transitions() -> None:
    stable = compute_status(inputs()).status
    assert stable["group"]["rebalancesSource"] == "observed" and stable["group"]["rebalances"] == 0
    moving = compute_status(
        inputs(previous=stable, group=GroupObservation(description=members(3, "CompletingRebalance")))
    ).status
    back = compute_status(inputs(previous=moving))
    assert back.status["group"]["rebalances"] == 1
    assert [e.reason for e in back.events if e.reason == "RebalanceObserved"] == ["RebalanceObserved"]


def test_a_static_restart_is_not_counted_but_a_new_assignment_is() -> None:
    stable = compute_status(inputs()).status
    restarted = members(3)
    restarted = GroupDescription(
        restarted.group_id,
        "Stable",
        "consumer",
        "range",
        tuple(
            MemberDescription(m.member_id + "-new", m.instance_id, m.client_id, m.client_host, m.partitions)
            for m in restarted.members
        ),
        NODE,
    )
    same = compute_status(inputs(previous=stable, group=GroupObservation(description=restarted)))
    assert same.status["group"]["rebalances"] == 0
    moved = compute_status(inputs(previous=stable, group=GroupObservation(description=members(2))))
    assert moved.status["group"]["rebalances"] == 1


def test_a_scale_down_in_progress_shows_as_progressing() -> None:
    result = compute_status(inputs(scale_waiting="scaling down from 3 to 1: waiting for orders-2"))
    c = conditions(result.status)
    assert c["Progressing"]["status"] == "True" and c["Progressing"]["reason"] == "ScalingDown"
    assert c["Ready"]["reason"] == "ScalingInProgress"


def test_a_rejected_pre_registration_is_explained_and_the_scale_completes() -> None:
    pre = PreRegistration(("orders-0", "orders-1", "orders-2"), False, iso(NOW), "INVALID_CONFIG: unknown")
    last = LastScale(ScaleDirection.UP, 1, 3, iso(NOW - timedelta(seconds=8)))
    pending = compute_status(
        inputs(group=GroupObservation(description=members(2)), pre_registration=pre, last_scale=last)
    )
    progressing = conditions(pending.status)["Progressing"]
    assert progressing["reason"] == "ScalingUp" and "pre-registration not supported" in progressing["message"]
    done = compute_status(inputs(pre_registration=pre, last_scale=last))
    assert done.completed_scale is not None and done.completed_scale.duration_seconds == 8.0
    assert done.status["lastScale"]["completedAt"] == iso(NOW)


def test_a_losing_claim_is_degraded_with_the_owner_named() -> None:
    result = conflict_status(group_spec(), 1, FleetStatus(), "shop/first", NOW)
    degraded = conditions(result.status.to_status())["Degraded"]
    assert degraded["reason"] == "GroupIdConflict" and "shop/first" in degraded["message"]
    assert [e.reason for e in result.events] == ["GroupIdConflict"]
    assert not conflict_status(group_spec(), 1, result.status, "shop/first", NOW).events


def test_merge_patch_nulls_what_disappeared_and_keeps_what_did_not_change() -> None:
    old = {
        "a": 1,
        "scaleDown": {"phase": "X"},
        "group": {"state": "Stable", "rebalanceInProgress": "r"},
        "l": [1],
    }
    new = {"a": 1, "scaleDown": None, "group": {"state": "Stable"}, "l": [1, 2]}
    assert merge_patch(old, new) == {"scaleDown": None, "group": {"rebalanceInProgress": None}, "l": [1, 2]}
    assert merge_patch(new, new) == {}


def test_a_blocked_scale_down_is_a_condition_and_one_event() -> None:
    blocked = Blocked(
        "RemovalFailing", "removing orders-2 has not succeeded after 300 s: COORDINATOR_NOT_AVAILABLE"
    )
    first = compute_status(inputs(blocked=blocked))
    condition = conditions(first.status)["ScaleDownBlocked"]
    assert (condition["status"], condition["reason"]) == ("True", "RemovalFailing")
    assert [e.reason for e in first.events] == ["ScaleDownBlocked"]
    again = compute_status(inputs(blocked=blocked, previous=first.status))
    assert "ScaleDownBlocked" not in [e.reason for e in again.events]
    cleared = compute_status(inputs(previous=first.status))
    assert conditions(cleared.status)["ScaleDownBlocked"]["status"] == "False"


def test_a_missing_topic_degrades_the_fleet_with_a_condition_that_names_it() -> None:
    group = GroupObservation(not_found=True, missing_topics=("orders",))
    result = compute_status(inputs(pods=[], statefulset=statefulset(0, replicas=3), group=group))
    degraded = conditions(result.status)["Degraded"]
    assert (degraded["status"], degraded["reason"]) == ("True", "TopicNotFound")
    assert degraded["message"].startswith("topic orders does not exist on kafka:9092")
    assert [e.reason for e in result.events] == ["TopicNotFound"]
    again = compute_status(inputs(group=group, previous=result.status))
    assert "TopicNotFound" not in [e.reason for e in again.events]  # one event when it starts
    found = compute_status(inputs(previous=again.status))
    assert conditions(found.status)["Degraded"]["status"] == "False"


def running(n: int, ready: bool = True) -> list[dict[str, Any]]:
    state = "True" if ready else "False"
    return [
        {
            "metadata": {"name": f"orders-{i}"},
            "status": {"phase": "Running", "conditions": [{"type": "Ready", "status": state}]},
        }
        for i in range(n)
    ]


def outside(result: Any) -> dict[str, Any]:
    return next(c for c in result.status["conditions"] if c["type"] == "PodsOutsideGroup")


def test_a_running_ready_pod_whose_member_expired_is_named_with_an_event() -> None:
    result = compute_status(inputs(pods=running(3), group=GroupObservation(description=members(2))))
    found = outside(result)
    assert found["status"] == "True" and found["reason"] == "RunningNotInGroup"
    assert found["message"].startswith("orders-2: Running but not in group shop.orders")
    assert [e.reason for e in result.events if e.type == "Warning"] == ["PodsOutsideGroup"]

    # Named once: the next pass with the same pod posts no second Warning.
    again = compute_status(
        inputs(pods=running(3), group=GroupObservation(description=members(2)), previous=result.status)
    )
    assert "PodsOutsideGroup" not in [e.reason for e in again.events]

    # Back in the group: the condition clears, with a Normal Event.
    back = compute_status(
        inputs(pods=running(3), group=GroupObservation(description=members(3)), previous=again.status)
    )
    assert outside(back)["status"] == "False"
    assert [e.reason for e in back.events if e.reason == "PodsBackInGroup"] == ["PodsBackInGroup"]


def test_pods_still_joining_or_departing_are_not_named() -> None:
    joining = compute_status(
        inputs(pods=running(3, ready=False), group=GroupObservation(description=members(2)))
    )
    assert outside(joining)["status"] == "False"
    unreachable = compute_status(inputs(pods=running(3), group=GroupObservation(error="connection refused")))
    assert outside(unreachable)["status"] == "False"
    departing = compute_status(
        inputs(
            spec=group_spec(replicas=2),
            pods=running(3),
            group=GroupObservation(description=members(2)),
        )
    )
    assert outside(departing)["status"] == "False"


# -- several members per pod ------------------------------------------------------------------------------


def streams_members(*ids: str, state: str = "Stable") -> GroupDescription:
    return GroupDescription(
        group_id="shop.orders",
        state=state,
        protocol_type="consumer",
        protocol="stream",
        members=tuple(MemberDescription(f"{i}-uuid", i, f"{i}-client", "/10.0.0.1", {}) for i in ids),
        coordinator=NODE,
    )


FULL = ("orders-0-1", "orders-0-2", "orders-1-1", "orders-1-2", "orders-2-1", "orders-2-2")


def two_per_pod(*ids: str, **overrides: Any) -> StatusInputs:
    values: dict[str, Any] = {
        "spec": group_spec(replicas=3, membersPerPod=2),
        "pods": running(3),
        "group": GroupObservation(description=streams_members(*ids)),
    }
    values.update(overrides)
    return inputs(**values)


def test_a_fleet_of_several_members_per_pod_is_ready_with_every_member_grouped_by_pod() -> None:
    status = compute_status(two_per_pod(*reversed(FULL))).status
    c = conditions(status)
    assert c["Ready"]["status"] == "True"
    assert c["Ready"]["message"] == "3 pods of 2 consumers in group shop.orders, Stable"
    assert [(m["pod"], m["instanceId"]) for m in status["members"]] == [
        ("orders-0", "orders-0-1"), ("orders-0", "orders-0-2"), ("orders-1", "orders-1-1"),
        ("orders-1", "orders-1-2"), ("orders-2", "orders-2-1"), ("orders-2", "orders-2-2"),
    ]  # fmt: skip
    assert status["podsMissingMembers"] == []
    assert c["PodsOutsideGroup"]["status"] == "False" and c["MembersOutsideFleet"]["status"] == "False"


def test_a_pod_missing_one_of_its_members_is_named_with_the_missing_member() -> None:
    result = compute_status(two_per_pod(*(i for i in FULL if i != "orders-1-2")))
    c = conditions(result.status)
    assert c["Ready"]["reason"] == "MembersMissing"
    assert c["Ready"]["message"] == "not yet in the group: orders-1 (orders-1-2)"
    assert (
        c["PodsOutsideGroup"]["status"] == "True" and c["PodsOutsideGroup"]["reason"] == "RunningNotInGroup"
    )
    assert c["PodsOutsideGroup"]["message"].startswith(
        "orders-1 (orders-1-2): Running, but these members of theirs are not in group shop.orders"
    )
    assert result.status["podsMissingMembers"] == [{"pod": "orders-1", "missing": ["orders-1-2"]}]
    assert "PodsOutsideGroup" in [e.reason for e in result.events]


def test_a_pod_that_is_still_starting_is_listed_as_missing_members_but_not_as_outside_the_group() -> None:
    starting = running(3)
    starting[2]["status"] = {"phase": "Pending"}
    result = compute_status(two_per_pod(*FULL[:4], pods=starting))
    assert result.status["podsMissingMembers"] == [
        {"pod": "orders-2", "missing": ["orders-2-1", "orders-2-2"]}
    ]
    assert conditions(result.status)["PodsOutsideGroup"]["status"] == "False"


def test_members_no_pod_of_the_fleet_runs_are_named_with_why() -> None:
    strays = ("orders-3-1", "orders-1", "orders-0-3", "billing-0")
    result = compute_status(two_per_pod(*FULL, *strays))
    found = conditions(result.status)["MembersOutsideFleet"]
    assert found["status"] == "True" and found["reason"] == "UnexpectedMembers"
    message = found["message"]
    assert "orders-3-1 (pod orders-3 is beyond the fleet's 3 replicas)" in message
    assert "orders-1 (pod orders-1 runs 2 members: orders-1-1, orders-1-2)" in message
    assert "orders-0-3 (pod orders-0 runs 2 members: orders-0-1, orders-0-2)" in message
    assert "billing-0 (not an instance id of this fleet)" in message
    assert [e.type for e in result.events if e.reason == "MembersOutsideFleet"] == ["Warning"]
    by_id = {m["instanceId"]: m["pod"] for m in result.status["members"]}
    assert by_id["orders-3-1"] == "orders-3" and by_id["billing-0"] is None
    # Ready is about the fleet's own members: they are all there.
    assert conditions(result.status)["Ready"]["status"] == "True"

    cleared = compute_status(two_per_pod(*FULL, previous=result.status))
    assert conditions(cleared.status)["MembersOutsideFleet"]["status"] == "False"
    assert "MembersOutsideFleetCleared" in [e.reason for e in cleared.events if e.type == "Normal"]


def test_members_a_scale_down_is_removing_are_not_outside_the_fleet() -> None:
    record = ScaleDownState(
        ScalePhase.CONFIRMING_REMOVAL, 4, 3, ("orders-3-1", "orders-3-2"), "Immediate", iso(NOW)
    )
    result = compute_status(two_per_pod(*FULL, "orders-3-1", "orders-3-2", scale_down=record))
    assert conditions(result.status)["MembersOutsideFleet"]["status"] == "False"


def test_a_dynamic_member_in_a_static_fleets_group_is_outside_the_fleet() -> None:
    dynamic = MemberDescription("rogue-uuid", None, "rogue", "/10.0.0.9", {})
    group = replace(members(3), members=(*members(3).members, dynamic))
    found = conditions(compute_status(inputs(group=GroupObservation(description=group))).status)
    assert "rogue-uuid (no group.instance.id: a dynamic member)" in found["MembersOutsideFleet"]["message"]


def test_a_one_member_fleet_names_a_streams_style_member_of_its_pod_as_outside_it() -> None:
    group = replace(members(3), members=(*members(3).members, *streams_members("orders-0-1").members))
    found = conditions(compute_status(inputs(group=GroupObservation(description=group))).status)
    assert found["MembersOutsideFleet"]["message"].startswith(
        "orders-0-1 (pod orders-0 runs one member: orders-0)"
    )


def test_a_message_names_at_most_twenty_members_outside_the_fleet_and_counts_the_rest() -> None:
    strays = [f"billing-{i}" for i in range(25)]
    message = conditions(compute_status(two_per_pod(*FULL, *strays)).status)["MembersOutsideFleet"]["message"]
    assert "billing-19 (not an instance id of this fleet); and 5 more: members of group" in message
    assert "billing-20" not in message


def test_a_status_read_back_from_the_api_server_is_the_status_written() -> None:
    record = ScaleDownState(ScalePhase.CONFIRMING_REMOVAL, 4, 3, ("orders-3",), "Immediate", iso(NOW))
    pre = PreRegistration(("orders-0", "orders-1"), True, iso(NOW), "held", hold_member_id="m-1")
    written = computed.compute_status(
        inputs(
            group=GroupObservation(description=members(3), view=view(3, 4)),
            pods=running(3),
            scale_down=record,
            pre_registration=pre,
            last_scale=LastScale(ScaleDirection.DOWN, 4, 3, iso(NOW - timedelta(seconds=3))),
            kafka_user=KafkaUser("staticfleet.shop.orders", "orders-kafka-user"),
            lag=lag_summary([PartitionOffsets("orders", 0, 3, 10), PartitionOffsets("orders", 1, None, 4)]),
            cluster_id="cluster-1",
        )
    ).status
    stored = prune(written.to_status())  # the API server keeps no nulls
    assert FleetStatus.of(stored) == written
    assert FleetStatus.of(stored).to_status() == written.to_status()


def test_a_consumer_protocol_group_shows_its_epochs_and_where_a_member_is_moving() -> None:
    def member(i: int, epoch: int, owned: list[int], target: list[int]) -> MemberDescription:
        return MemberDescription(
            f"m{i}", f"orders-{i}", f"orders-{i}", "/10.0.0.1", {"orders": owned}, epoch, {"orders": target}
        )

    described = GroupDescription(
        "shop.orders",
        "Reconciling",
        "consumer",
        "uniform",
        (member(0, 7, [0, 1], [0, 1]), member(1, 6, [2, 3], [2]), member(2, -2, [4], [4])),
        NODE,
        group_epoch=7,
        assignment_epoch=7,
    )
    status = compute_status(
        inputs(spec=group_spec(replicas=3, groupProtocol="consumer"), group=GroupObservation(described))
    ).status
    assert (status["group"]["groupEpoch"], status["group"]["assignmentEpoch"]) == (7, 7)
    assert status["group"]["state"] == "CompletingRebalance"
    shown = {m["instanceId"]: m for m in status["members"]}
    assert [shown[f"orders-{i}"]["memberEpoch"] for i in range(3)] == [7, 6, -2]
    # The target only while it differs from what the member holds.
    assert "targetPartitions" not in shown["orders-0"] and "targetPartitions" not in shown["orders-2"]
    assert shown["orders-1"]["targetPartitions"] == {"orders": [2]}
    again = FleetStatus.of(status).to_status()
    assert again["members"] == status["members"] and again["group"] == status["group"]


def test_a_classic_group_shows_no_epochs() -> None:
    status = compute_status(inputs()).status
    assert "groupEpoch" not in status["group"]
    assert all("memberEpoch" not in m and "targetPartitions" not in m for m in status["members"])
