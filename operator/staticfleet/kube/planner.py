"""The planners: which steps a pass takes, in which order, and the status that ends it, decided from the
observation alone (and, for the status, from what the steps did). Pure: no I/O here.

    observe (observe.py: every read)  ->  plan_actions  ->  run each step (reconcile.py)
                                      ->  plan_status   ->  WriteStatus, once

A resource that cannot be reconciled gets only a status (plan_invalid, plan_conflict; one outside its
namespace's tenancy loses its user first, plan_withdrawal). A deletion is planned the same way
(plan_deletion) and run by the same executor, with the same steps.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime

from staticfleet.kube import faults
from staticfleet.kube.access import RetiredUser, plan_access
from staticfleet.kube.claims import describe_shared, shared_instance_ids
from staticfleet.kube.conditions import COORDINATOR_UNAVAILABLE, DEGRADED, INVALID_SPEC
from staticfleet.kube.fleetstatus import EventSpec, FleetStatus, KafkaUser, holding_reason
from staticfleet.kube.observation import Conflicting, Deleting, GroupObservation, Invalid, Observed
from staticfleet.kube.scaling import (
    LastScale,
    ScaleDirection,
    ScalePhase,
    ScalePlan,
    parse_time,
    plan_scale,
    pre_registration_done,
    removal_confirmed,
)
from staticfleet.kube.spec import Manifest
from staticfleet.kube.status import (
    StatusInputs,
    StatusResult,
    compute_status,
    conflict_status,
    invalid_status,
)
from staticfleet.kube.steps import (
    ApplyChildren,
    ApplyFleetSecret,
    Checkpoint,
    GrantAcls,
    Outcome,
    PreRegister,
    RemoveMembers,
    RetireFleetUser,
    RevokeAcls,
    SetFleetCredential,
    Step,
    StopConsumers,
    WithdrawPreRegistration,
    WriteStatus,
    removal_message,
)

# -- a pass --------------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ActionPlan:
    steps: tuple[Step, ...]
    scale: ScalePlan

    def outcome(self, obs: Observed) -> Outcome:
        """Where the steps start from: the records as planned, the children as observed."""
        return Outcome(self.scale.scale_down, obs.pre_registration, obs.statefulset)


def plan_actions(obs: Observed) -> ActionPlan:
    """The steps that change the cluster or the group, in order; a Checkpoint wherever a later step needs
    the scale records durable first. Pure."""
    spec = obs.spec
    scale = plan_scale(spec, obs.scale_down, obs.fleet(), obs.now, obs.step_timeout)
    steps: list[Step] = list(plan_access_steps(obs))
    if scale.persist_first and scale.scale_down is not None:
        steps.append(Checkpoint(faults.SCALE_DOWN_RECORDED))  # the pending ids, before any pod goes
    if scale.pre_register_ids is not None:
        steps += (PreRegister(scale.pre_register_ids), Checkpoint(faults.PRE_REGISTERED))
    elif pre_registration_finished(obs):
        steps.append(WithdrawPreRegistration())
    if scale.remove_instance_ids and scale.scale_down is not None:
        # First: the group waits for this removal, and the StatefulSet is already at its new size.
        reason = f"staticfleet: scaled down to {scale.scale_down.to_replicas}, consumers stopped"
        steps += (RemoveMembers(scale.remove_instance_ids, reason), Checkpoint(faults.MEMBERS_REMOVED))
    grows = scale.started is not None and scale.started.direction is ScaleDirection.UP
    steps.append(ApplyChildren(scale.statefulset_replicas, grows))
    return ActionPlan(tuple(steps), scale)


def plan_access_steps(obs: Observed) -> tuple[Step, ...]:
    """A provisioned fleet's user, Secret and ACLs, before the children (the pods read the Secret)."""
    if obs.retired is not None:
        return (RetireFleetUser(obs.retired, user_removed(obs.retired)),)
    if obs.access is None:
        return ()
    access = obs.access.access
    plan = plan_access(obs.access, obs.spec)
    steps: list[Step] = []
    if plan.credential_password is not None:
        steps.append(SetFleetCredential(access.user, access.mechanism, plan.credential_password))
    if plan.secret is not None:
        steps.append(ApplyFleetSecret(plan.secret))
    if plan.grant:
        steps.append(GrantAcls(plan.grant))
    if plan.revoke:
        steps.append(RevokeAcls(plan.revoke))
    return tuple(steps)


def pre_registration_finished(obs: Observed) -> bool:
    """Our pre-registration is in force and every instance it names is in a Stable group (or it is too
    old to still be useful)."""
    pre = obs.pre_registration
    if pre is None or not pre.accepted:
        return False
    group = obs.group
    return pre_registration_done(pre, group.state, group.instance_ids, obs.spec.rebalance_timeout_ms, obs.now)


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
        if started.direction is ScaleDirection.UP and pre is not None and scale.pre_register_ids is not None:
            if pre.hold_member_id:
                note = "; the join phase is held until the new instances have joined"
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


def user_removed(user: RetiredUser) -> EventSpec:
    return EventSpec("Normal", "UserRemoved", f"user {user.user} and its {len(user.acls)} ACLs removed")


def plan_withdrawal(obs: Invalid) -> tuple[RetireFleetUser, ...]:
    """A resource outside its namespace's tenancy keeps no Kafka user and no ACL: both are removed before
    its status says why, so that a narrowed policy takes effect within one pass."""
    held = obs.withdrawn
    if held is None:
        return ()
    revoked = f"user {held.user} and its {len(held.acls)} ACLs removed: {obs.why}"
    announce = EventSpec("Warning", "AccessRevoked", revoked) if held.acls or held.mechanisms else None
    return (RetireFleetUser(held, announce),)


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


# -- a deletion ----------------------------------------------------------------------------------------------

# A deletion waits this long for an unreachable coordinator before it lets the resource go anyway.
DELETION_PATIENCE_S = 300.0
DELETED = "staticfleet: StaticConsumerGroup deleted"


@dataclass(frozen=True, slots=True)
class DeletionPlan:
    """deletionPolicy RemoveMembers: stop the consumers, then remove every member of every pod the fleet
    had (and any other member the group lists) and withdraw a pre-registration. Then, whatever the
    policy, the user the operator provisioned for the fleet: its Secret goes with the resource, so the
    user would be left with a password nobody holds. The second part runs once the first is done."""

    members: tuple[Step, ...] = ()
    waiting: str | None = None
    """Why the members cannot go yet: the deletion is tried again shortly."""
    user: tuple[Step, ...] = ()


def plan_deletion(obs: Deleting) -> DeletionPlan:
    """The steps of a deletion, decided from what it read. Pure."""
    fleet = obs.observed
    held = fleet.retired
    user: tuple[Step, ...] = (RetireFleetUser(held, user_removed(held)),) if held is not None else ()
    if obs.left_alone is not None:
        return DeletionPlan(user=user)
    if fleet.statefulset_replicas:
        return DeletionPlan((StopConsumers(),), waiting_for_pods(fleet))
    if fleet.running_pods:
        return DeletionPlan(waiting=waiting_for_pods(fleet))
    if not fleet.group.reachable:
        return DeletionPlan(user=user)  # members_finished waits for the coordinator, or gives up
    ids = fleet.spec.member_ids(0, obs.known_replicas)
    others = sorted((fleet.group.instance_ids or frozenset()) - set(ids))
    removal = RemoveMembers((*ids, *others), DELETED, "deleted")
    return DeletionPlan((removal, WithdrawPreRegistration()), user=user)


def waiting_for_pods(fleet: Observed) -> str:
    """Removing the member of a consumer that may still run would make it rejoin as a new member."""
    running = len(fleet.running_pods)
    if running:
        return f"waiting for {running} pods to stop before removing their members"
    return "waiting for the StatefulSet to stop its pods before removing their members"


@dataclass(frozen=True, slots=True)
class Finished:
    """How one part of a deletion ended: what to log and its Events, or why to try again (`retry`)."""

    message: str | None = None
    events: tuple[EventSpec, ...] = ()
    retry: str | None = None


def patience_left(obs: Deleting) -> bool:
    return (obs.observed.now - obs.deleted_at).total_seconds() < DELETION_PATIENCE_S


def members_finished(obs: Deleting, plan: DeletionPlan, outcome: Outcome) -> Finished:
    """After the members' steps: done, waiting, or (past DELETION_PATIENCE_S without a coordinator)
    given up with a Warning. A removal the coordinator answered with failures is always tried again."""
    if obs.left_alone is not None:
        return Finished(obs.left_alone)
    if plan.waiting is not None:
        return Finished(retry=plan.waiting)
    report = outcome.removal
    if report is not None and not report.ok:
        return Finished(retry=outcome.removal_error)
    unanswered = obs.observed.group.error or outcome.removal_error
    if unanswered is not None:
        if patience_left(obs):
            return Finished(retry=f"cannot remove the members yet: {unanswered}")
        warning = f"deleted without removing members: {unanswered}"
        return Finished(
            f"gave up removing members: {unanswered}",
            (EventSpec("Warning", COORDINATOR_UNAVAILABLE, warning),),
        )
    assert report is not None
    return Finished(removal_message(report, "deleted"), tuple(outcome.events))


def user_finished(obs: Deleting, plan: DeletionPlan, outcome: Outcome) -> Finished:
    """After the user's step: removed, waiting for the cluster, or (past DELETION_PATIENCE_S) left with a
    Warning."""
    if obs.user is None:
        return Finished()
    failure = obs.user_error or outcome.retire_error
    if failure is not None:
        if patience_left(obs):
            return Finished(retry=f"cannot remove user {obs.user} and its ACLs yet: {failure}")
        message = f"deleted without removing user {obs.user} and its ACLs: {failure}"
        return Finished(message, (EventSpec("Warning", "AccessNotRevoked", message),))
    held = obs.observed.retired
    assert held is not None
    return Finished(user_removed(held).message, tuple(outcome.events))
