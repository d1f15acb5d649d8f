"""The status, computed in one place from what a pass saw and what its steps did: pure functions.

plan_status is where a pass ends: it turns the observation and the steps' outcome into the inputs of
compute_status and the one WriteStatus. plan_invalid and plan_conflict do the same for a resource the
operator does not reconcile.

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
from staticfleet.kube import faults
from staticfleet.kube.builders import selector_string
from staticfleet.kube.claims import describe_shared, shared_instance_ids
from staticfleet.kube.conditions import (
    DEGRADED,
    GROUP_STABLE,
    INVALID_SPEC,
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
from staticfleet.kube.fleetstatus import (
    EventSpec,
    FleetStatus,
    GroupStatus,
    KafkaUser,
    Lag,
    Member,
    holding_reason,
)
from staticfleet.kube.group_status import GroupSeen, group_status
from staticfleet.kube.members import fenced_pods, group_members
from staticfleet.kube.observation import Conflicting, GroupObservation, Invalid, Observed
from staticfleet.kube.scaling import (
    Blocked,
    LastScale,
    PreRegistration,
    ScaleDirection,
    ScaleDownState,
    ScalePhase,
    parse_time,
    removal_confirmed,
)
from staticfleet.kube.spec import GroupSpec, Manifest
from staticfleet.kube.steps import ActionPlan, Outcome, WriteStatus

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


# -- the status that ends a pass -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class StatusPlan:
    step: WriteStatus
    completed_scale: LastScale | None = None


def plan_status(
    obs: Observed,
    plan: ActionPlan,
    outcome: Outcome,
    group: GroupObservation,
    pods: tuple[Manifest, ...],
    written: FleetStatus,
) -> StatusPlan:
    """The one status write that ends a pass, from what was observed (`group` and `pods` as read again
    after the steps) and what the steps did. `written`: the status as the server holds it now. Pure."""
    spec, now, scale = obs.spec, obs.now, plan.scale
    if outcome.rejected is not None:
        status = invalid_status(written, obs.generation, outcome.rejected, now, INVALID_SPEC)
        return StatusPlan(WriteStatus(status, ()))
    events = list(outcome.events)
    last_scale = obs.previous.last_scale
    pre = outcome.pre_registration
    if scale.started is not None:
        started = scale.started
        last_scale = LastScale.starting(started, now)
        note = ""
        growing = started.direction is ScaleDirection.UP and pre is not None
        if growing and pre is not None and not pre.needed:
            note = f"; no pre-registration ({pre.message})"
        elif growing and pre is not None and scale.pre_register_ids is not None:
            if pre.hold_member_id:
                after = f"{pre.linger_ms / 1000:g} s after " if pre.linger_ms else ""
                note = f"; the join phase is held until {after}the new instances have joined"
            elif pre.accepted:
                note = "; new instances pre-registered with the coordinator"
            else:
                note = f"; no pre-registration ({pre.message})"
        events.append(
            EventSpec(
                "Normal",
                "Scaled",
                f"scaling {started.direction.value.lower()} from {started.from_replicas} "
                f"to {started.to_replicas}{note}",
            )
        )
    if scale.completed_scale_down is not None:
        done = scale.completed_scale_down
        events.append(
            EventSpec(
                "Normal",
                "MembersExpired",
                f"scale-down to {done.to_replicas}: {', '.join(done.pending_instance_ids)} left the group "
                "after the session timeout",
            )
        )
    if scale.returned_instance_ids:
        events.append(
            EventSpec(
                "Warning",
                "MembersReturned",
                f"{', '.join(scale.returned_instance_ids)} are members again after their removal (the "
                "coordinator restarted before it persisted it); removing them again",
            )
        )
    record = outcome.scale_down
    if (
        record is not None
        and record.phase is ScalePhase.CONFIRMING_REMOVAL
        and outcome.acted_on_group
        and removal_confirmed(record, obs.fleet(group))
    ):
        record = None  # the group read after the removal already shows it settled
    if pre is not None and not pre.accepted and last_scale is not None and last_scale.completed_at:
        pre = None  # a refused pre-registration is only news while its scale-up runs
    result: StatusResult = compute_status(
        StatusInputs(
            spec=spec,
            generation=obs.generation,
            previous=obs.previous,
            statefulset=outcome.statefulset,
            pods=pods,
            group=group,
            now=now,
            scale_down=record,
            scale_waiting=scale.waiting if record is not None else None,
            pre_registration=pre,
            last_scale=last_scale,
            removal_error=outcome.removal_error,
            access_error=outcome.access_error or (obs.access.error if obs.access is not None else None),
            kafka_user=kafka_user_status(obs, outcome),
            blocked=scale.blocked,
            cluster_id=obs.cluster_id,
            lag=obs.lag,
        )
    )
    step = WriteStatus(result.status, (*events, *result.events), crash_points(plan, outcome))
    return StatusPlan(step, result.completed_scale)


def crash_points(plan: ActionPlan, outcome: Outcome) -> tuple[str, ...]:
    """The fault tests' points that the pass's status write completes: a shrink, or a scale-up, recorded."""
    planned, record, started = plan.scale.scale_down, outcome.scale_down, plan.scale.started
    shrunk = (
        planned is not None
        and planned.phase is ScalePhase.SHRINKING
        and record is not None
        and record.phase is ScalePhase.WAITING_FOR_PODS
    )
    grown = started is not None and started.direction is ScaleDirection.UP
    return (faults.STATEFULSET_SHRUNK,) * shrunk + (faults.SCALE_UP_RECORDED,) * grown


def kafka_user_status(obs: Observed, outcome: Outcome) -> KafkaUser | None:
    """status.kafkaUser: the provisioned user; a former one stays there until it is removed."""
    access = obs.fleet_access
    if access is not None:
        return KafkaUser(access.user, access.secret_name)
    return None if outcome.user_retired else obs.previous.kafka_user


def plan_invalid(obs: Invalid, outcome: Outcome) -> WriteStatus:
    """Conditions say what to fix; the rest of the status (a scale-down in progress above all) is kept.
    A refusal (not a schema matter, so nothing else told the author) is also an Event, once. `outcome`:
    what the withdrawal of the resource's user did (a removal that failed is tried again next pass)."""
    why, previous = obs.why, obs.previous
    failure = obs.withdrawal_error or outcome.retire_error
    if failure is not None:
        why = f"{why} Removing user {obs.user} and its ACLs failed, and is tried again: {failure}"
    elif outcome.user_retired:
        previous = replace(previous, kafka_user=None)
    events = list(outcome.events)
    if obs.reason != INVALID_SPEC and holding_reason(obs.previous.conditions, DEGRADED) != obs.reason:
        events.append(EventSpec("Warning", obs.reason, why))
    return WriteStatus(invalid_status(previous, obs.generation, why, obs.now, obs.reason), tuple(events))


def plan_conflict(obs: Conflicting) -> WriteStatus:
    shared = shared_instance_ids(obs.spec, obs.winner)
    overlap = describe_shared(obs.spec, obs.winner, shared) if shared else ""
    result = conflict_status(
        obs.spec, obs.generation, obs.previous, obs.winner.ref, obs.now, obs.cluster_id, overlap
    )
    return WriteStatus(result.status, result.events)


def scale_duration(completed: LastScale, now: datetime) -> tuple[str, float] | None:
    started_at = parse_time(completed.started_at)
    if started_at is None:
        return None
    return completed.direction.value, (now - started_at).total_seconds()
