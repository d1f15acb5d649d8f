"""The status, computed in one place from what a pass saw: a pure function of its inputs.

The parts are small functions of their own: the group block and its rebalances (group_status.py), the
members and pods compared (members.py), each condition and the Events their changes are worth
(conditions.py). The previous status is an input too: conditions keep their lastTransitionTime while
their status holds, counts carry on, and what the coordinator could not tell this time is kept.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from staticfleet.admin.model import LagSummary
from staticfleet.kube.builders import selector_string
from staticfleet.kube.conditions import (
    DEGRADED,
    GROUP_STABLE,
    MEMBERS_OUTSIDE_FLEET,
    PODS_OUTSIDE_GROUP,
    PROGRESSING,
    READY,
    SCALE_DOWN_BLOCKED,
    Seen,
    Verdict,
    condition,
    condition_events,
    conflict_conditions,
    degraded,
    group_stable,
    incomplete_pods,
    invalid_conditions,
    members_outside,
    pods_outside,
    progressing,
    ready,
    scale_down_blocked,
)
from staticfleet.kube.fleetstatus import EventSpec, FleetStatus, GroupStatus, KafkaUser, Lag, Member
from staticfleet.kube.group_status import GroupSeen, group_status
from staticfleet.kube.members import fenced_pods, group_members
from staticfleet.kube.observation import GroupObservation
from staticfleet.kube.scaling import Blocked, LastScale, PreRegistration, ScaleDownState
from staticfleet.kube.spec import GroupSpec, Manifest

MEMBER_LIST_CAP = 50


@dataclass(frozen=True, slots=True)
class StatusInputs:
    spec: GroupSpec
    generation: int
    previous: FleetStatus
    statefulset: Manifest | None
    pods: Sequence[Manifest]
    group: GroupObservation
    now: datetime
    scale_down: ScaleDownState | None = None
    scale_waiting: str | None = None
    pre_registration: PreRegistration | None = None
    last_scale: LastScale | None = None
    removal_error: str | None = None
    access_error: str | None = None
    """Provisioning the fleet's user or ACLs failed."""
    kafka_user: KafkaUser | None = None
    """The fleet's provisioned user (name, secretName)."""
    blocked: Blocked | None = None
    cluster_id: str | None = None
    lag: LagSummary | None = None
    """None when the offsets could not be read: the previous lag is kept while the coordinator is away."""


@dataclass(frozen=True, slots=True)
class StatusResult:
    status: FleetStatus
    events: tuple[EventSpec, ...] = ()
    completed_scale: LastScale | None = None
    """The scale operation this pass saw complete."""


def rolling_update(statefulset: Manifest | None) -> bool:
    """Whether the StatefulSet is replacing pods: a template change not yet rolled out to every pod."""
    status = (statefulset or {}).get("status", {}) or {}
    return bool(statefulset) and (
        status.get("currentRevision") != status.get("updateRevision")
        or int(status.get("updatedReplicas", 0) or 0) < int(status.get("replicas", 0) or 0)
    )


def seen_of(inputs: StatusInputs, group: GroupStatus, members: Sequence[Member], rolling: bool) -> Seen:
    """What the conditions judge: the inputs, with the group as status shows it."""
    sts_status = (inputs.statefulset or {}).get("status", {}) or {}
    return Seen(
        spec=inputs.spec,
        group=inputs.group,
        state=group.state,
        group_status=group,
        members=members,
        pods=inputs.pods,
        ready_replicas=int(sts_status.get("readyReplicas", 0) or 0),
        current_replicas=int(sts_status.get("replicas", 0) or 0),
        updated_replicas=int(sts_status.get("updatedReplicas", 0) or 0),
        rolling=rolling,
        fenced=fenced_pods(inputs.pods, inputs.now),
        scale_down=inputs.scale_down,
        scale_waiting=inputs.scale_waiting,
        pre_registration=inputs.pre_registration,
        blocked=inputs.blocked,
        removal_error=inputs.removal_error,
        access_error=inputs.access_error,
    )


def scale_progress(last_scale: LastScale | None, fleet_ready: bool, now: datetime) -> LastScale | None:
    """The last scale operation, completed now if the fleet is ready at its new size."""
    if last_scale is not None and not last_scale.completed_at and fleet_ready:
        return last_scale.completing(now)
    return last_scale


def compute_status(inputs: StatusInputs) -> StatusResult:
    spec, now, generation, previous = inputs.spec, inputs.now, inputs.generation, inputs.previous
    members = group_members(inputs.group, spec) if inputs.group.reachable else list(previous.members or ())
    rolling = rolling_update(inputs.statefulset)
    group, group_events = group_status(GroupSeen(spec, inputs.group, previous.group, members, rolling, now))
    seen = seen_of(inputs, group, members, rolling)
    last_scale = scale_progress(inputs.last_scale, seen.fleet_ready, now)
    verdicts: dict[str, Verdict] = {
        READY: ready(seen),
        GROUP_STABLE: group_stable(seen),
        PROGRESSING: progressing(seen, last_scale),
        DEGRADED: degraded(seen),
        SCALE_DOWN_BLOCKED: scale_down_blocked(seen),
        PODS_OUTSIDE_GROUP: pods_outside(seen),
        MEMBERS_OUTSIDE_FLEET: members_outside(seen),
    }
    conditions = tuple(condition(previous.conditions, t, v, generation, now) for t, v in verdicts.items())
    events = (*group_events, *condition_events(previous.conditions, verdicts))
    status = FleetStatus(
        observed_generation=generation,
        replicas=seen.current_replicas,
        ready_replicas=seen.ready_replicas,
        selector=selector_string(spec),
        group_id=spec.group_id,
        bootstrap_servers=spec.bootstrap_servers,
        cluster_id=inputs.cluster_id or previous.cluster_id,
        group=group,
        members=tuple(members[:MEMBER_LIST_CAP]),
        members_total=len(members),
        members_truncated=len(members) > MEMBER_LIST_CAP,
        pods_missing_members=(
            tuple(p.shown() for p in incomplete_pods(seen)[:MEMBER_LIST_CAP]) if seen.compared else None
        ),
        scale_down=inputs.scale_down,
        pre_registration=inputs.pre_registration,
        last_scale=last_scale,
        lag=Lag.of_summary(inputs.lag) if inputs.lag is not None else previous.lag,
        kafka_user=inputs.kafka_user,
        conditions=conditions,
    )
    completed = last_scale if last_scale is not inputs.last_scale else None
    return StatusResult(status, events, completed)


def conflict_status(
    spec: GroupSpec,
    generation: int,
    previous: FleetStatus,
    winner: str,
    now: datetime,
    cluster_id: str | None = None,
    shared_ids: str = "",
) -> StatusResult:
    """A resource that lost a claim on its group: nothing is reconciled, the status says why (and which
    instance ids the two fleets would share, described in `shared_ids`); the rest of it is kept."""
    message = (
        f"group {spec.group_id} on {spec.bootstrap_servers} is already managed by StaticConsumerGroup "
        f"{winner}; this resource is not reconciled. Give it another groupId."
    )
    if shared_ids:
        message += (
            f" In one group the two fleets would also share instance ids, and consumers with one instance "
            f"id fence each other: {shared_ids}."
        )
    before = previous.condition(DEGRADED)
    events: tuple[EventSpec, ...] = ()
    if before is None or before.reason != "GroupIdConflict":
        events = (EventSpec("Warning", "GroupIdConflict", message),)
    status = replace(
        previous,
        observed_generation=generation,
        selector=selector_string(spec),
        group_id=spec.group_id,
        bootstrap_servers=spec.bootstrap_servers,
        cluster_id=cluster_id or previous.cluster_id,
        conditions=conflict_conditions(previous.conditions, generation, message, now),
    )
    return StatusResult(status, events)


def invalid_status(
    previous: FleetStatus, generation: int, message: str, now: datetime, reason: str
) -> FleetStatus:
    """A resource the operator cannot act on: Ready False and Degraded say why; the rest of the status
    (a scale-down in progress above all) is kept."""
    conditions = invalid_conditions(previous.conditions, generation, message, now, reason)
    return replace(previous, observed_generation=generation, conditions=conditions)
