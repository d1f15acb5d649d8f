"""The conditions, each a small pure function of what a pass saw (`Seen`), and the Events their changes
are worth. docs/operator.md lists every condition and reason."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from staticfleet.admin.client import natural_key
from staticfleet.coordinator import GroupState
from staticfleet.kube.builders import pod_ordinal
from staticfleet.kube.fleetstatus import (
    Condition,
    EventSpec,
    GroupStatus,
    Member,
    ShownState,
    Unobserved,
    find_condition,
    holding_reason,
)
from staticfleet.kube.members import (
    PodMissingMembers,
    first_named,
    members_outside_fleet,
    missing_by_pod,
    pods_missing_members,
    pods_outside_group,
    pods_outside_message,
)
from staticfleet.kube.observation import GroupObservation
from staticfleet.kube.scaling import Blocked, LastScale, PreRegistration, ScaleDirection, ScaleDownState, iso
from staticfleet.kube.spec import GroupSpec, Manifest

READY = "Ready"
GROUP_STABLE = "GroupStable"
PROGRESSING = "Progressing"
DEGRADED = "Degraded"
SCALE_DOWN_BLOCKED = "ScaleDownBlocked"
PODS_OUTSIDE_GROUP = "PodsOutsideGroup"
MEMBERS_OUTSIDE_FLEET = "MembersOutsideFleet"

INVALID_SPEC = "InvalidSpec"
ACCESS_NOT_PROVISIONED = "AccessNotProvisioned"
GROUP_ID_CONFLICT = "GroupIdConflict"
COORDINATOR_UNAVAILABLE = "CoordinatorUnavailable"
# Degraded reasons that are news the moment they begin (an Event, once).
ANNOUNCED = (COORDINATOR_UNAVAILABLE, "InstanceFenced", "TopicNotFound")


@dataclass(frozen=True, slots=True)
class Verdict:
    """What a condition says this time."""

    holds: bool
    reason: str
    message: str = ""


def condition(
    previous: Sequence[Condition] | None, type_: str, verdict: Verdict, generation: int, now: datetime
) -> Condition:
    """The condition, whose lastTransitionTime moves only when its status changes."""
    before = find_condition(previous, type_)
    kept = before is not None and before.status == verdict.holds and before.last_transition_time
    transition = before.last_transition_time if kept and before is not None else iso(now)
    return Condition(type_, verdict.holds, verdict.reason, verdict.message, generation, transition)


@dataclass(frozen=True, slots=True)
class Seen:
    """What the conditions judge: the pass's observation, and the group as status shows it."""

    spec: GroupSpec
    group: GroupObservation
    state: ShownState
    """As status shows it: this pass's, or the previous one while the coordinator is away."""
    group_status: GroupStatus
    members: Sequence[Member]
    pods: Sequence[Manifest]
    ready_replicas: int
    current_replicas: int
    updated_replicas: int
    rolling: bool
    fenced: Sequence[str]
    scale_down: ScaleDownState | None = None
    scale_waiting: str | None = None
    pre_registration: PreRegistration | None = None
    blocked: Blocked | None = None
    removal_error: str | None = None
    access_error: str | None = None

    @property
    def member_ids(self) -> frozenset[str] | None:
        return self.group.instance_ids

    @property
    def expected_ids(self) -> frozenset[str]:
        return frozenset(self.spec.member_ids(0, self.spec.replicas))

    @property
    def stable(self) -> bool:
        """Stable, or, for a fleet of no replicas, a group with nobody in it."""
        empty = self.state in (GroupState.EMPTY, GroupState.DEAD, Unobserved.NOT_FOUND)
        return self.state is GroupState.STABLE or (self.spec.replicas == 0 and empty)

    @property
    def members_complete(self) -> bool:
        ids = self.member_ids
        return ids is not None and self.expected_ids <= ids

    @property
    def fleet_ready(self) -> bool:
        spec = self.spec
        beyond = [p for p in self.pods if (pod_ordinal(p, spec.name) or 0) >= spec.replicas]
        return (
            self.group.reachable
            and self.scale_down is None
            and self.ready_replicas >= spec.replicas
            and not beyond
            and self.stable
            and (self.members_complete or spec.replicas == 0)
        )

    @property
    def departing(self) -> frozenset[str]:
        """Members a scale-down is removing: neither missing nor outside the fleet."""
        return frozenset(self.scale_down.pending_instance_ids if self.scale_down else ())

    @property
    def compared(self) -> bool:
        """The pods and the group can be compared: the coordinator answered, and knows the group."""
        return self.group.reachable and self.state is not Unobserved.NOT_FOUND and self.member_ids is not None


def ready(seen: Seen) -> Verdict:
    spec = seen.spec
    if not seen.group.reachable:
        return Verdict(False, COORDINATOR_UNAVAILABLE, seen.group.error or "")
    if seen.scale_down is not None or seen.scale_waiting:
        return Verdict(False, "ScalingInProgress", seen.scale_waiting or "")
    if seen.ready_replicas < spec.replicas:
        return Verdict(False, "PodsNotReady", f"{seen.ready_replicas} of {spec.replicas} pods ready")
    if not seen.stable:
        return Verdict(False, "GroupNotStable", f"group {spec.group_id} is {seen.state.value}")
    if not seen.members_complete and spec.replicas:
        missing = sorted(seen.expected_ids - (seen.member_ids or frozenset()), key=natural_key)
        return Verdict(False, "MembersMissing", f"not yet in the group: {missing_by_pod(spec, missing)}")
    consumers = (
        f"{spec.replicas} consumers"
        if spec.members_per_pod == 1
        else f"{spec.replicas} pods of {spec.members_per_pod} consumers"
    )
    return Verdict(True, "FleetReady", f"{consumers} in group {spec.group_id}, Stable")


def group_stable(seen: Seen) -> Verdict:
    spec, state, group = seen.spec, seen.state, seen.group_status
    if not seen.group.reachable:
        return Verdict(False, COORDINATOR_UNAVAILABLE, seen.group.error or "")
    if state is GroupState.STABLE:
        detail = f" at generation {group.generation}" if group.generation is not None else ""
        return Verdict(
            True, "Stable", f"group {spec.group_id} is Stable{detail} with {len(seen.members)} members"
        )
    if state in (GroupState.PREPARING_REBALANCE, GroupState.COMPLETING_REBALANCE):
        why = f" ({group.rebalance_in_progress})" if group.rebalance_in_progress else ""
        return Verdict(False, "RebalanceInProgress", f"group {spec.group_id} is {state.value}{why}")
    if state is GroupState.EMPTY:
        return Verdict(False, "GroupEmpty", f"group {spec.group_id} has no members")
    return Verdict(False, "GroupNotFound", f"the coordinator does not know group {spec.group_id} yet")


def _pre_registration_note(pre: PreRegistration | None) -> str:
    if pre is not None and not pre.accepted:
        return (
            f"; pre-registration not supported by the coordinator ({pre.message}), "
            "so the join phase is not held for the new instances"
        )
    if pre is not None and pre.hold_member_id:
        return f"; {pre.message}"
    return ""


def progressing(seen: Seen, last_scale: LastScale | None) -> Verdict:
    """`last_scale` as this pass leaves it (completed once the fleet is ready)."""
    note = _pre_registration_note(seen.pre_registration)
    if seen.scale_down is not None or seen.scale_waiting:
        return Verdict(True, "ScalingDown", (seen.scale_waiting or "") + note)
    if last_scale is not None and not last_scale.completed_at:
        direction = "ScalingUp" if last_scale.direction is ScaleDirection.UP else "ScalingDown"
        return Verdict(
            True,
            direction,
            f"scaling from {last_scale.from_replicas} to {last_scale.to_replicas}: "
            f"{seen.ready_replicas} pods ready, group {seen.state.value}" + note,
        )
    if seen.rolling:
        return Verdict(
            True, "RollingUpdate", f"{seen.updated_replicas} of {seen.current_replicas} pods updated"
        )
    return Verdict(False, "Reconciled", f"{seen.spec.replicas} replicas" + note)


def degraded(seen: Seen) -> Verdict:
    spec, group = seen.spec, seen.group
    if not group.reachable:
        return Verdict(True, COORDINATOR_UNAVAILABLE, group.error or "")
    if group.missing_topics:
        absent = group.missing_topics
        return Verdict(
            True,
            "TopicNotFound",
            f"{'topic' if len(absent) == 1 else 'topics'} {', '.join(absent)} "
            f"{'does' if len(absent) == 1 else 'do'} not exist on {spec.bootstrap_servers}: the consumers "
            "cannot be assigned partitions until it is created (for example with the partitions the fleet "
            "should spread over)",
        )
    if seen.fenced:
        return Verdict(
            True,
            "InstanceFenced",
            f"{', '.join(seen.fenced)} exited with FENCED_INSTANCE_ID: another process used the same "
            "group.instance.id; check for duplicate instance ids",
        )
    if seen.removal_error:
        return Verdict(True, "MemberRemovalFailed", seen.removal_error)
    if seen.access_error:
        return Verdict(True, ACCESS_NOT_PROVISIONED, seen.access_error)
    return Verdict(False, "AsExpected")


def pods_outside(seen: Seen) -> Verdict:
    """Pods whose consumers run while their members are not in the group (members.pods_outside_group)."""
    outside: list[PodMissingMembers] = (
        pods_outside_group(seen.spec, seen.pods, seen.member_ids, seen.departing) if seen.compared else []
    )
    if not outside:
        return Verdict(False, "AllPodsInGroup")
    return Verdict(True, "RunningNotInGroup", pods_outside_message(seen.spec, outside))


def members_outside(seen: Seen) -> Verdict:
    strays = members_outside_fleet(seen.spec, seen.members, seen.departing) if seen.compared else []
    if not strays:
        return Verdict(False, "AllMembersInFleet")
    return Verdict(
        True,
        "UnexpectedMembers",
        f"{first_named(strays, '; ')}: members of group {seen.spec.group_id} that no pod of this fleet runs. "
        "They hold their partitions until the coordinator expires them after their session timeout; "
        "remove them sooner with `staticfleet members remove` once their processes are gone",
    )


def incomplete_pods(seen: Seen) -> list[PodMissingMembers]:
    if not seen.compared:
        return []
    return pods_missing_members(seen.spec, seen.pods, seen.member_ids or frozenset(), seen.departing)


def scale_down_blocked(seen: Seen) -> Verdict:
    blocked = seen.blocked
    return (
        Verdict(True, blocked.reason, blocked.message)
        if blocked is not None
        else Verdict(False, "NotBlocked")
    )


# -- the Events their changes are worth ----------------------------------------------------------------------


def outside_events(
    previous: Sequence[Condition] | None,
    type_: str,
    now: Verdict,
    cleared_reason: str,
    cleared_message: str,
) -> list[EventSpec]:
    """A Warning when the condition starts to name something (or what it names changes), a Normal Event
    when it names nothing any more."""
    before = find_condition(previous, type_)
    was_active = before is not None and before.status
    if now.holds and (not was_active or (before is not None and before.message != now.message)):
        return [EventSpec("Warning", type_, now.message)]
    if was_active and not now.holds:
        return [EventSpec("Normal", cleared_reason, cleared_message)]
    return []


def condition_events(previous: Sequence[Condition] | None, verdicts: dict[str, Verdict]) -> list[EventSpec]:
    """What changed in the conditions that a person should hear of."""
    events = outside_events(
        previous,
        PODS_OUTSIDE_GROUP,
        verdicts[PODS_OUTSIDE_GROUP],
        "PodsBackInGroup",
        "every Running pod is in the group again",
    )
    events += outside_events(
        previous,
        MEMBERS_OUTSIDE_FLEET,
        verdicts[MEMBERS_OUTSIDE_FLEET],
        "MembersOutsideFleetCleared",
        "every member of the group belongs to a pod of the fleet again",
    )
    degraded_now = verdicts[DEGRADED]
    if (
        degraded_now.holds
        and degraded_now.reason != holding_reason(previous, DEGRADED)
        and degraded_now.reason in ANNOUNCED
    ):
        events.append(EventSpec("Warning", degraded_now.reason, degraded_now.message))
    blocked = verdicts[SCALE_DOWN_BLOCKED]
    if blocked.holds and holding_reason(previous, SCALE_DOWN_BLOCKED) != blocked.reason:
        events.append(EventSpec("Warning", SCALE_DOWN_BLOCKED, f"{blocked.reason}: {blocked.message}"))
    return events


# -- a resource the operator does not reconcile --------------------------------------------------------------


def invalid_conditions(
    previous: Sequence[Condition] | None,
    generation: int,
    message: str,
    now: datetime,
    reason: str = INVALID_SPEC,
) -> tuple[Condition, ...]:
    refused = Verdict(False, reason, message)
    return (
        condition(previous, READY, refused, generation, now),
        condition(previous, DEGRADED, Verdict(True, reason, message), generation, now),
    )


def conflict_conditions(
    previous: Sequence[Condition] | None, generation: int, message: str, now: datetime
) -> tuple[Condition, ...]:
    lost = Verdict(False, GROUP_ID_CONFLICT, message)
    return (
        condition(previous, READY, lost, generation, now),
        condition(previous, GROUP_STABLE, lost, generation, now),
        condition(previous, PROGRESSING, lost, generation, now),
        condition(previous, DEGRADED, Verdict(True, GROUP_ID_CONFLICT, message), generation, now),
    )
