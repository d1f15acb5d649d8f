from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from staticfleet.coordinator import GroupState
from staticfleet.kube.scaling import (
    LINGERING_HOLD_LIFETIME,
    FleetObservation,
    PreRegistration,
    ScaleDirection,
    ScaleDownState,
    ScalePhase,
    after_removal,
    iso,
    plan_scale,
    pre_registration_done,
)
from staticfleet.kube.spec import GroupSpec

from .fixtures import group_spec

NOW = datetime(2026, 11, 22, 10, 0, 0, tzinfo=UTC)


def observe(replicas: int | None, pods: set[int], **extra: Any) -> FleetObservation:
    return FleetObservation(
        statefulset_replicas=replicas,
        statefulset_observed_generation=extra.pop("observed_generation", 5),
        pod_ordinals=frozenset(pods),
        **extra,
    )


def test_first_reconcile_creates_the_statefulset_at_full_size_with_the_ids_pre_registered() -> None:
    plan = plan_scale(group_spec(replicas=3), None, observe(None, set()), NOW)
    assert plan.statefulset_replicas == 3
    assert plan.pre_register_ids == ("orders-0", "orders-1", "orders-2")
    assert plan.started is not None and (plan.started.from_replicas, plan.started.to_replicas) == (0, 3)
    assert plan.scale_down is None


def test_scale_up_pre_registers_every_id_of_the_new_size_then_grows() -> None:
    plan = plan_scale(group_spec(replicas=4), None, observe(1, {0}), NOW)
    assert plan.pre_register_ids == ("orders-0", "orders-1", "orders-2", "orders-3")
    assert plan.statefulset_replicas == 4
    assert plan.started is not None and plan.started.direction is ScaleDirection.UP


def test_scale_up_without_pre_registration_just_grows() -> None:
    plan = plan_scale(group_spec(replicas=4, scaleUp={"preRegister": False}), None, observe(1, {0}), NOW)
    assert plan.pre_register_ids is None
    assert plan.statefulset_replicas == 4


def test_steady_state_changes_nothing() -> None:
    plan = plan_scale(group_spec(replicas=3), None, observe(3, {0, 1, 2}), NOW)
    assert plan.statefulset_replicas == 3
    assert plan.scale_down is None and plan.started is None and plan.pre_register_ids is None
    assert plan.waiting is None and not plan.remove_instance_ids


def test_scale_down_records_the_pending_ids_before_shrinking() -> None:
    plan = plan_scale(group_spec(replicas=1), None, observe(3, {0, 1, 2}), NOW)
    assert plan.persist_first
    assert plan.scale_down is not None
    assert plan.scale_down.phase is ScalePhase.SHRINKING
    assert plan.scale_down.pending_instance_ids == ("orders-1", "orders-2")
    assert (plan.scale_down.from_replicas, plan.scale_down.to_replicas) == (3, 1)
    assert plan.statefulset_replicas == 1
    assert not plan.remove_instance_ids  # never in the same step as the shrink


def test_scale_down_lowers_an_active_pre_registration_to_the_remaining_ids() -> None:
    plan = plan_scale(group_spec(replicas=1), None, observe(3, {0, 1, 2}, pre_registration_active=True), NOW)
    assert plan.pre_register_ids == ("orders-0",)
    idle = plan_scale(group_spec(replicas=1), None, observe(3, {0, 1, 2}), NOW)
    assert idle.pre_register_ids is None


def waiting(generation: int = 7) -> ScaleDownState:
    return ScaleDownState(
        phase=ScalePhase.WAITING_FOR_PODS,
        from_replicas=3,
        to_replicas=1,
        pending_instance_ids=("orders-1", "orders-2"),
        remove_members="Immediate",
        started_at=iso(NOW),
        statefulset_generation=generation,
    )


def test_no_member_is_removed_while_a_departing_pod_still_exists() -> None:
    plan = plan_scale(group_spec(replicas=1), waiting(), observe(1, {0, 2}, observed_generation=7), NOW)
    assert not plan.remove_instance_ids
    assert plan.waiting is not None and "orders-2" in plan.waiting
    assert plan.statefulset_replicas == 1


def test_no_member_is_removed_before_the_statefulset_controller_saw_the_shrink() -> None:
    plan = plan_scale(
        group_spec(replicas=1), waiting(generation=7), observe(1, {0}, observed_generation=6), NOW
    )
    assert not plan.remove_instance_ids


def test_once_the_pods_are_gone_the_pending_ids_are_removed_in_one_batch() -> None:
    plan = plan_scale(group_spec(replicas=1), waiting(), observe(1, {0}, observed_generation=7), NOW)
    assert plan.remove_instance_ids == ("orders-1", "orders-2")
    assert plan.scale_down is not None and plan.scale_down.phase is ScalePhase.REMOVING_MEMBERS


def consumer_fleet(**spec: Any) -> GroupSpec:
    return group_spec(replicas=1, groupProtocol="consumer", **spec)


def test_a_consumer_protocol_fleet_removes_its_departing_members_once_all_have_left_with_epoch_minus_2() -> (
    None
):
    members = frozenset({"orders-0", "orders-1", "orders-2"})
    both_left = observe(
        1,
        {0, 1, 2},
        observed_generation=7,
        group_instance_ids=members,
        group_left_instance_ids=frozenset({"orders-1", "orders-2"}),
    )
    plan = plan_scale(consumer_fleet(), waiting(), both_left, NOW)
    assert plan.remove_instance_ids == ("orders-1", "orders-2"), "the pods still stop, nobody consumes"
    # One still consuming: no removal yet (a batch, one new target assignment).
    one_left = replace(both_left, group_left_instance_ids=frozenset({"orders-2"}))
    assert not plan_scale(consumer_fleet(), waiting(), one_left, NOW).remove_instance_ids
    # Gone already counts as left; an unreachable coordinator does not.
    gone = replace(both_left, group_instance_ids=frozenset({"orders-0", "orders-2"}))
    assert plan_scale(consumer_fleet(), waiting(), gone, NOW).remove_instance_ids == ("orders-1", "orders-2")
    unknown = replace(both_left, group_instance_ids=None)
    assert not plan_scale(consumer_fleet(), waiting(), unknown, NOW).remove_instance_ids
    # Not before the StatefulSet controller saw the shrink: a departing pod could be made again.
    unseen = replace(both_left, statefulset_observed_generation=6)
    assert not plan_scale(consumer_fleet(), waiting(), unseen, NOW).remove_instance_ids


def test_a_classic_fleet_waits_for_the_pods_whatever_the_coordinator_says_of_its_members() -> None:
    obs = observe(
        1,
        {0, 2},
        observed_generation=7,
        group_instance_ids=frozenset({"orders-0"}),
        group_left_instance_ids=frozenset(),
    )
    assert not plan_scale(group_spec(replicas=1), waiting(), obs, NOW).remove_instance_ids


def test_a_new_target_waits_until_the_running_scale_down_is_done() -> None:
    plan = plan_scale(group_spec(replicas=5), waiting(), observe(1, {0, 2}, observed_generation=7), NOW)
    assert plan.statefulset_replicas == 1 and plan.started is None


def test_a_recorded_but_not_yet_applied_scale_down_is_dropped_when_the_target_changes() -> None:
    recorded = ScaleDownState(ScalePhase.SHRINKING, 3, 1, ("orders-1", "orders-2"), "Immediate", iso(NOW))
    plan = plan_scale(group_spec(replicas=3), recorded, observe(3, {0, 1, 2}), NOW)
    assert plan.scale_down is None and plan.statefulset_replicas == 3


def test_after_session_timeout_waits_for_the_coordinator_to_expire_the_members() -> None:
    spec = group_spec(replicas=1, sessionTimeoutMs=60_000, scaleDown={"removeMembers": "AfterSessionTimeout"})
    state = _with(waiting(), remove_members="AfterSessionTimeout")
    plan = plan_scale(spec, state, observe(1, {0}, observed_generation=7), NOW)
    assert not plan.remove_instance_ids
    assert plan.scale_down is not None and plan.scale_down.phase is ScalePhase.WAITING_FOR_SESSION_TIMEOUT
    members = frozenset({"orders-0", "orders-2"})
    later = plan_scale(
        spec, plan.scale_down, observe(1, {0}, group_instance_ids=members), NOW + timedelta(seconds=30)
    )
    assert later.scale_down is not None and later.completed_scale_down is None
    gone = plan_scale(spec, plan.scale_down, observe(1, {0}, group_instance_ids=frozenset({"orders-0"})), NOW)
    assert gone.scale_down is None and gone.completed_scale_down is not None
    expired = plan_scale(spec, plan.scale_down, observe(1, {0}), NOW + timedelta(seconds=91))
    assert expired.scale_down is None


def _fields(state: ScaleDownState) -> dict[str, Any]:
    return {name: getattr(state, name) for name in ScaleDownState.__slots__}


def _with(state: ScaleDownState, **changes: Any) -> ScaleDownState:
    return ScaleDownState(**{**_fields(state), **changes})


def test_an_acknowledged_removal_is_kept_until_the_coordinator_reports_a_settled_group_without_it() -> None:
    removing = _with(waiting(), phase=ScalePhase.REMOVING_MEMBERS)
    confirming = after_removal(removing, ok=True, error=None, now=NOW)
    assert confirming.phase is ScalePhase.CONFIRMING_REMOVAL
    spec, rest = group_spec(replicas=1), frozenset({"orders-0"})
    rebalancing = observe(1, {0}, group_instance_ids=rest, group_state=GroupState.PREPARING_REBALANCE)
    assert plan_scale(spec, confirming, rebalancing, NOW).scale_down == confirming
    unknown = observe(1, {0})  # the coordinator could not be asked
    assert plan_scale(spec, confirming, unknown, NOW).scale_down == confirming
    settled = observe(1, {0}, group_instance_ids=rest, group_state=GroupState.STABLE)
    assert plan_scale(spec, confirming, settled, NOW).scale_down is None
    kept = after_removal(removing, ok=False, error="coordinator unreachable", now=NOW)
    assert kept.phase is ScalePhase.REMOVING_MEMBERS and kept.last_error == "coordinator unreachable"


def test_members_a_coordinator_restart_brought_back_are_removed_again() -> None:
    confirming = after_removal(
        _with(waiting(), phase=ScalePhase.REMOVING_MEMBERS), ok=True, error=None, now=NOW
    )
    ghosts = frozenset({"orders-0", "orders-2"})
    plan = plan_scale(
        group_spec(replicas=1),
        confirming,
        observe(1, {0}, group_instance_ids=ghosts, group_state=GroupState.STABLE),
        NOW,
    )
    assert plan.remove_instance_ids == ("orders-1", "orders-2")
    assert plan.returned_instance_ids == ("orders-2",)
    assert plan.scale_down is not None and plan.scale_down.phase is ScalePhase.REMOVING_MEMBERS


def test_a_phase_that_waits_longer_than_the_step_timeout_is_blocked_with_the_reason() -> None:
    spec, stuck = group_spec(replicas=1), observe(1, {0, 2}, observed_generation=7)
    assert plan_scale(spec, waiting(), stuck, NOW + timedelta(minutes=4)).blocked is None
    late = plan_scale(spec, waiting(), stuck, NOW + timedelta(minutes=6))
    assert late.blocked is not None and late.blocked.reason == "PodsNotGone"
    assert "orders-2" in late.blocked.message
    assert late.statefulset_replicas == 1 and not late.remove_instance_ids  # still never removed early
    failing = _with(waiting(), phase=ScalePhase.REMOVING_MEMBERS, last_error="COORDINATOR_NOT_AVAILABLE")
    removal = plan_scale(spec, failing, observe(1, {0}), NOW + timedelta(minutes=6), timedelta(seconds=30))
    assert removal.blocked is not None and removal.blocked.reason == "RemovalFailing"
    assert "COORDINATOR_NOT_AVAILABLE" in removal.blocked.message
    assert removal.remove_instance_ids == ("orders-1", "orders-2")  # and it keeps trying


def test_a_new_target_supersedes_a_blocked_scale_down_and_pends_only_the_ordinals_from_it_up() -> None:
    blocked = _with(
        waiting(),
        phase=ScalePhase.REMOVING_MEMBERS,
        from_replicas=4,
        pending_instance_ids=("orders-1", "orders-2", "orders-3"),
    )
    later = NOW + timedelta(minutes=6)
    up_a_little = plan_scale(group_spec(replicas=2), blocked, observe(1, {0}), later)
    assert up_a_little.scale_down is not None and up_a_little.persist_first
    assert up_a_little.scale_down.pending_instance_ids == ("orders-2", "orders-3")
    assert up_a_little.statefulset_replicas == 2 and up_a_little.blocked is not None
    all_back = plan_scale(group_spec(replicas=4), blocked, observe(1, {0}), later)
    assert all_back.scale_down is None and all_back.statefulset_replicas == 4
    assert all_back.started is not None and all_back.started.direction is ScaleDirection.UP
    not_blocked = plan_scale(group_spec(replicas=2), blocked, observe(1, {0}), NOW)
    assert not_blocked.scale_down is not None and not_blocked.scale_down.to_replicas == 1


def test_scale_down_state_survives_a_round_trip_through_status() -> None:
    state = waiting()
    assert ScaleDownState.from_status(state.to_status()) == state
    assert ScaleDownState.from_status(None) is None
    assert ScaleDownState.from_status({"phase": "Bogus"}) is None


def test_pre_registration_is_withdrawn_once_every_pre_registered_instance_is_in_a_stable_group() -> None:
    pre = PreRegistration(("orders-0", "orders-1"), True, iso(NOW))
    both, one, later = (
        frozenset({"orders-0", "orders-1"}),
        frozenset({"orders-0"}),
        NOW + timedelta(minutes=6),
    )
    assert not pre_registration_done(pre, GroupState.PREPARING_REBALANCE, both, None, NOW)
    assert not pre_registration_done(pre, GroupState.STABLE, one, None, NOW)
    assert pre_registration_done(pre, GroupState.STABLE, both, None, NOW)
    assert pre_registration_done(pre, GroupState.STABLE, one, None, later)
    assert not pre_registration_done(pre, GroupState.STABLE, frozenset(), 600_000, later)


def test_a_lingering_hold_is_left_to_its_watcher_until_the_scale_up_is_long_past() -> None:
    ids = ("orders-0", "orders-1")
    held = PreRegistration(ids, True, iso(NOW), hold_member_id="hold-1")
    lingering = PreRegistration(ids, True, iso(NOW), hold_member_id="hold-1", linger_ms=1000)
    joined, soon = frozenset(ids), NOW + timedelta(seconds=2)
    # A plain hold goes as soon as everyone joined; a lingering one is the watcher's to release then.
    assert pre_registration_done(held, GroupState.PREPARING_REBALANCE, joined, None, soon)
    assert not pre_registration_done(lingering, GroupState.PREPARING_REBALANCE, joined, None, soon)
    assert pre_registration_done(lingering, GroupState.STABLE, joined, None, soon)
    past = NOW + LINGERING_HOLD_LIFETIME + timedelta(seconds=1)
    assert pre_registration_done(lingering, GroupState.PREPARING_REBALANCE, joined, None, past)
    one = frozenset(ids[:1])
    assert not pre_registration_done(lingering, GroupState.PREPARING_REBALANCE, one, None, past)
    assert PreRegistration.from_status(lingering.to_status()) == lingering
    assert "lingerMs" not in held.to_status()


# -- an operator that dies after any step finishes the job after a restart -------------------------------


@dataclass
class FakeCluster:
    """The StatefulSet controller, the pods and the group, advanced one tick at a time."""

    replicas: int
    pods: set[int]
    group: set[str]
    generation: int = 1
    observed_generation: int = 1
    status: dict[str, Any] | None = None
    removals: list[tuple[str, ...]] = field(default_factory=list)

    def apply(self, replicas: int) -> int:
        if replicas != self.replicas:
            self.replicas = replicas
            self.generation += 1
        return self.generation

    def tick(self) -> None:
        """The controller observes the spec and deletes one surplus pod per tick (termination takes time)."""
        self.observed_generation = self.generation
        surplus = sorted(o for o in self.pods if o >= self.replicas)
        if surplus:
            self.pods.discard(surplus[-1])
        self.pods |= set(range(self.replicas))


class Crash(Exception):
    pass


def operator_pass(cluster: FakeCluster, spec: GroupSpec, crash_at: str | None) -> None:
    """What reconcile() does with a plan, with the same checkpoints."""
    state = ScaleDownState.from_status(cluster.status)
    plan = plan_scale(
        spec,
        state,
        observe(
            cluster.replicas,
            set(cluster.pods),
            observed_generation=cluster.observed_generation,
            group_instance_ids=frozenset(cluster.group),
            group_state=GroupState.STABLE,
        ),
        NOW,
    )
    if plan.persist_first and plan.scale_down is not None:
        cluster.status = plan.scale_down.to_status()
        if crash_at == "scale-down-recorded":
            raise Crash
    generation = cluster.apply(plan.statefulset_replicas)
    current = plan.scale_down
    if current is not None and current.phase is ScalePhase.SHRINKING:
        current = current.shrunk(generation)
        cluster.status = current.to_status()
        if crash_at == "statefulset-shrunk":
            raise Crash
    if plan.remove_instance_ids and current is not None:
        leaving = {int(i.rsplit("-", 1)[1]) for i in plan.remove_instance_ids}
        assert not leaving & cluster.pods, "a member was removed while its pod still existed"
        assert cluster.observed_generation >= cluster.generation
        cluster.removals.append(plan.remove_instance_ids)
        cluster.group -= set(plan.remove_instance_ids)
        current = after_removal(current, ok=True, error=None)
        if crash_at == "members-removed":
            raise Crash
    cluster.status = current.to_status() if current else None


@pytest.mark.parametrize("crash_at", [None, "scale-down-recorded", "statefulset-shrunk", "members-removed"])
def test_a_scale_down_interrupted_at_any_step_completes_after_a_restart(crash_at: str | None) -> None:
    spec = group_spec(replicas=1)
    cluster = FakeCluster(replicas=3, pods={0, 1, 2}, group={"orders-0", "orders-1", "orders-2"})
    crashed = False
    for _ in range(20):
        try:
            operator_pass(cluster, spec, None if crashed else crash_at)
        except Crash:
            crashed = True  # the next pass is a fresh operator reading the status back
        if cluster.status is None and cluster.replicas == 1 and cluster.pods == {0}:
            break
        cluster.tick()
    assert crashed == (crash_at is not None)
    assert cluster.status is None
    assert (cluster.replicas, cluster.pods, cluster.group) == (1, {0}, {"orders-0"})
    assert cluster.removals[0] == ("orders-1", "orders-2")
    # A repeated batch after a crash is harmless: the ids are already gone (UNKNOWN_MEMBER_ID).
    assert all(batch == ("orders-1", "orders-2") for batch in cluster.removals)


# -- several members per pod ------------------------------------------------------------------------------

TWO_PER_POD: dict[str, Any] = {"membersPerPod": 2}


def test_a_scale_down_pends_every_member_of_the_departing_pods() -> None:
    plan = plan_scale(group_spec(replicas=2, **TWO_PER_POD), None, observe(4, {0, 1, 2, 3}), NOW)
    assert plan.persist_first and plan.scale_down is not None
    assert plan.scale_down.pending_instance_ids == ("orders-2-1", "orders-2-2", "orders-3-1", "orders-3-2")
    assert not plan.remove_instance_ids


def test_every_member_of_the_departed_pods_is_removed_in_one_batch_once_the_pods_are_gone() -> None:
    spec = group_spec(replicas=2, **TWO_PER_POD)
    recorded = plan_scale(spec, None, observe(4, {0, 1, 2, 3}), NOW).scale_down
    assert recorded is not None
    shrunk = recorded.shrunk(statefulset_generation=7)
    still_there = plan_scale(spec, shrunk, observe(2, {0, 1, 3}, observed_generation=7), NOW)
    assert not still_there.remove_instance_ids, "orders-3 may still run both its consumers"
    gone = plan_scale(spec, shrunk, observe(2, {0, 1}, observed_generation=7), NOW)
    assert gone.remove_instance_ids == ("orders-2-1", "orders-2-2", "orders-3-1", "orders-3-2")


def test_a_removal_is_confirmed_only_when_no_member_of_a_departed_pod_is_left() -> None:
    spec = group_spec(replicas=1, **TWO_PER_POD)
    record = ScaleDownState(
        ScalePhase.CONFIRMING_REMOVAL, 2, 1, ("orders-1-1", "orders-1-2"), "Immediate", iso(NOW)
    )
    one_left = frozenset({"orders-0-1", "orders-0-2", "orders-1-2"})
    plan = plan_scale(
        spec, record, observe(1, {0}, group_instance_ids=one_left, group_state=GroupState.STABLE), NOW
    )
    assert plan.remove_instance_ids == ("orders-1-1", "orders-1-2") and plan.returned_instance_ids == (
        "orders-1-2",
    )
    rest = frozenset({"orders-0-1", "orders-0-2"})
    settled = plan_scale(
        spec, record, observe(1, {0}, group_instance_ids=rest, group_state=GroupState.STABLE), NOW
    )
    assert settled.scale_down is None


def test_a_scale_up_pre_registers_every_member_of_every_pod_of_the_new_size() -> None:
    plan = plan_scale(group_spec(replicas=3, **TWO_PER_POD), None, observe(1, {0}), NOW)
    assert plan.pre_register_ids == (
        "orders-0-1", "orders-0-2", "orders-1-1", "orders-1-2", "orders-2-1", "orders-2-2",
    )  # fmt: skip
    created = plan_scale(group_spec(replicas=2, **TWO_PER_POD), None, observe(None, set()), NOW)
    assert created.pre_register_ids == ("orders-0-1", "orders-0-2", "orders-1-1", "orders-1-2")


def test_a_pre_registration_of_members_is_done_only_when_every_member_has_joined() -> None:
    ids = ("orders-0-1", "orders-0-2", "orders-1-1", "orders-1-2")
    pre = PreRegistration(ids, True, iso(NOW))
    three = frozenset(ids[:3])
    assert not pre_registration_done(pre, GroupState.PREPARING_REBALANCE, three, None, NOW)
    assert pre_registration_done(pre, GroupState.STABLE, frozenset(ids), None, NOW)


def test_a_superseding_scale_down_pends_the_members_of_the_pods_from_the_new_target_up() -> None:
    spec = group_spec(replicas=1, **TWO_PER_POD)
    blocked = ScaleDownState(
        ScalePhase.WAITING_FOR_PODS,
        3,
        2,
        ("orders-2-1", "orders-2-2"),
        "Immediate",
        iso(NOW),
        statefulset_generation=7,
    )
    plan = plan_scale(spec, blocked, observe(2, {0, 1, 2}, observed_generation=7), NOW + timedelta(minutes=6))
    assert plan.scale_down is not None and plan.blocked is not None
    assert plan.scale_down.pending_instance_ids == ("orders-1-1", "orders-1-2", "orders-2-1", "orders-2-2")
