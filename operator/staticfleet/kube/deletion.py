"""A deletion, planned like a pass: which of the pass's own steps the finalizer takes (plan_deletion),
and how each of its two parts ended (members_finished, user_finished). Pure; reconcile.finalize reads,
runs the steps and reports.

deletionPolicy RemoveMembers stops the consumers, then removes every member of every pod the fleet had
and withdraws a pre-registration; whatever the policy, the user the operator provisioned for the fleet
goes last. A coordinator or a cluster that does not answer is waited for up to DELETION_PATIENCE_S, then
the resource is let go with a Warning.
"""

from __future__ import annotations

from dataclasses import dataclass

from staticfleet.kube.conditions import COORDINATOR_UNAVAILABLE
from staticfleet.kube.fleetstatus import EventSpec
from staticfleet.kube.observation import Deleting, Observed
from staticfleet.kube.steps import (
    Outcome,
    RemoveMembers,
    RetireFleetUser,
    Step,
    StopConsumers,
    WithdrawPreRegistration,
    removal_message,
    user_removed,
)

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
