"""The reconcile pass as data: what was observed, the typed steps planned from it, and what the steps did.

    observe (reconcile.observe: every read)  ->  plan_actions (pure)  ->  run each step (I/O)
                                             ->  plan_status (pure)   ->  WriteStatus (I/O, once)

Every step is idempotent: a pass that dies after any step is simply run again, and the scale-down
record in status says where the sequence stands (scaling.py). A step is a frozen dataclass with a
`run(io)` method that performs it through `StepIO` and notes its result in `io.outcome`; the planners
below decide which steps a pass takes, from the observation alone. Adding a step is one class here,
its rule in a planner, and its test (docs/architecture.md walks through one).
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any, Protocol

from staticfleet.admin import AclBinding, AdminError, ConfigRejected, RemovalReport
from staticfleet.coordinator import EXPECTED_INSTANCE_IDS as PRE_REGISTRATION_CONFIG
from staticfleet.kube import builders, faults
from staticfleet.kube.access import (
    SCRAM_ITERATIONS,
    RetiredUser,
    plan_access,
)
from staticfleet.kube.claims import describe_shared, shared_instance_ids
from staticfleet.kube.conditions import DEGRADED, INVALID_SPEC
from staticfleet.kube.fleetstatus import EventSpec, FleetStatus, KafkaUser, holding_reason
from staticfleet.kube.kubeapi import ApplyConflict, KubeError
from staticfleet.kube.observation import Conflicting, GroupObservation, Invalid, Observed
from staticfleet.kube.scaling import (
    LastScale,
    PreRegistration,
    ScaleDirection,
    ScaleDownState,
    ScalePhase,
    ScalePlan,
    after_removal,
    iso,
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

if TYPE_CHECKING:
    from staticfleet.admin import GroupAdmin
    from staticfleet.kube.kubeapi import KubeApi
    from staticfleet.kube.metrics import OperatorMetrics

log = logging.getLogger(__name__)


# -- what the steps did --------------------------------------------------------------------------------------


@dataclass
class Outcome:
    """Filled in by the steps as they run; the status planner reads it."""

    status: dict[str, Any]
    """The status as the server now holds it."""
    resource_version: str
    scale_down: ScaleDownState | None
    """The scale-down record as planned, then as the steps leave it."""
    pre_registration: PreRegistration | None
    statefulset: Manifest | None = None
    rejected: str | None = None
    """Why the API server refused our objects (the pass stops there)."""
    conflict: ApplyConflict | None = None
    """Another operator owns fields of our children (the pass stops there, and writes no status)."""
    removal_error: str | None = None
    events: list[EventSpec] = field(default_factory=list)
    acted_on_group: bool = False
    """A step changed the group: read it again before computing status."""
    shrunk: bool = False
    access_error: str | None = None
    """Provisioning the fleet's user or ACLs failed (Degraded says why; the next pass tries again)."""
    user_retired: bool = False
    grown: bool = False


class StepIO(Protocol):
    """What steps may touch (reconcile.PassIO is the real one; tests pass their own)."""

    @property
    def api(self) -> KubeApi: ...
    @property
    def admin(self) -> GroupAdmin: ...
    @property
    def metrics(self) -> OperatorMetrics: ...
    @property
    def observed(self) -> Observed: ...
    @property
    def outcome(self) -> Outcome: ...
    def write_status(self, status: Mapping[str, Any]) -> None: ...
    def post(self, event: EventSpec) -> None: ...
    def watch_hold(self, member_id: str, instance_ids: tuple[str, ...], bound_s: float) -> None:
        """Releases the held join phase once every instance has joined (join_hold.py), beside the pass."""
        ...


# -- the steps -----------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PersistScaleDownRecord:
    """The pending instance ids are durable in status before any pod goes away."""

    record: ScaleDownState

    def run(self, io: StepIO) -> None:
        io.write_status({**io.outcome.status, "scaleDown": self.record.to_status()})
        io.outcome.scale_down = self.record
        faults.checkpoint("scale-down-recorded")


@dataclass(frozen=True, slots=True)
class PreRegister:
    """Tells the coordinator which instance ids to hold the join phase for; a coordinator that refuses
    (Apache Kafka) just means no pre-registration, recorded with the reason. The record is written to
    status before the StatefulSet grows, so that an operator that dies in between still knows to
    withdraw it once the group is complete."""

    instance_ids: tuple[str, ...]

    def run(self, io: StepIO) -> None:
        spec, now = io.observed.spec, iso(io.observed.now)
        ids = self.instance_ids
        try:
            io.admin.set_group_config(spec.group_id, PRE_REGISTRATION_CONFIG, ",".join(ids) if ids else None)
        except ConfigRejected as exc:
            io.outcome.pre_registration = _hold_join_phase(io, ids, now, exc)
        except AdminError as exc:
            io.outcome.pre_registration = PreRegistration(ids, False, now, str(exc))
        else:
            io.outcome.pre_registration = PreRegistration(ids, True, now, "")
        io.write_status({**io.outcome.status, "preRegistration": io.outcome.pre_registration.to_status()})
        faults.checkpoint("pre-registered")


# What a held join phase advertises when the group has no members to copy it from: any protocol will do
# for an Empty group, and the pending member never joins.
_DEFAULT_PROTOCOL = ("consumer", "range")


def _hold_join_phase(io: StepIO, ids: tuple[str, ...], now: str, refusal: ConfigRejected) -> PreRegistration:
    """The coordinator refused pre-registration: hold the join phase with a pending member instead."""
    spec = io.observed.spec
    refused = f"the coordinator refused pre-registration ({refusal.name})"
    protocol_type, protocol = _DEFAULT_PROTOCOL
    group = io.observed.group.description  # read by this pass; None for a new fleet's group
    if group is not None and group.protocol_type and group.protocol:
        protocol_type, protocol = group.protocol_type, group.protocol
    try:
        member_id = io.admin.hold_join_phase(
            spec.group_id,
            protocol_type=protocol_type,
            protocol=protocol,
            session_timeout_ms=spec.session_timeout_ms,
        )
    except AdminError as exc:
        return PreRegistration(ids, False, now, f"{refused}, and holding the join phase failed: {exc}")
    previous = io.observed.pre_registration
    if previous is not None and previous.hold_member_id:
        _release(io, previous.hold_member_id)
    io.watch_hold(member_id, ids, spec.session_timeout_ms / 1000)
    return PreRegistration(
        ids,
        True,
        now,
        f"{refused}; pending member {member_id} holds the join phase until every instance has joined",
        hold_member_id=member_id,
    )


def _release(io: StepIO, member_id: str) -> bool:
    """False when the coordinator could not be asked (the hold stays recorded, the next pass tries again)."""
    spec = io.observed.spec
    try:
        io.admin.release_join_phase(spec.group_id, member_id)
    except AdminError as exc:
        log.info("%s/%s: could not release the held join phase: %s", spec.namespace, spec.name, exc)
        return False
    return True


@dataclass(frozen=True, slots=True)
class WithdrawPreRegistration:
    """The pre-registration did its job (or is too old to): the group follows Kafka's rules again."""

    def run(self, io: StepIO) -> None:
        spec = io.observed.spec
        pre = io.observed.pre_registration
        if pre is not None and pre.hold_member_id:
            if _release(io, pre.hold_member_id):
                io.outcome.pre_registration = None
            return
        try:
            io.admin.set_group_config(spec.group_id, PRE_REGISTRATION_CONFIG, None)
        except AdminError as exc:  # kept in status: the next pass tries again
            log.info("%s/%s: could not withdraw the pre-registration: %s", spec.namespace, spec.name, exc)
            return
        io.outcome.pre_registration = None


@dataclass(frozen=True, slots=True)
class SetFleetCredential:
    """The fleet's SCRAM credential (AlterUserScramCredentials upsert), before any Secret names it."""

    user: str
    mechanism: str
    password: str = field(repr=False)

    def run(self, io: StepIO) -> None:
        try:
            io.admin.upsert_scram(self.user, self.mechanism, self.password, SCRAM_ITERATIONS)
        except AdminError as exc:
            io.outcome.access_error = f"could not set the SCRAM credential of {self.user}: {exc}"
            return
        io.outcome.events.append(
            EventSpec("Normal", "UserProvisioned", f"{self.mechanism} credential of user {self.user} set")
        )
        faults.checkpoint("fleet-credential-set")


@dataclass(frozen=True, slots=True)
class ApplyFleetSecret:
    """The Secret the pods read the fleet's user from (owned by the resource)."""

    data: Mapping[str, bytes] = field(repr=False)

    def run(self, io: StepIO) -> None:
        if io.outcome.access_error is not None:
            return  # never a password the cluster was not given
        access = io.observed.fleet_access
        assert access is not None
        try:
            io.api.apply(builders.credentials_secret(io.observed.spec, access, self.data))
        except KubeError as exc:
            if exc.status in (400, 403, 422):
                io.outcome.access_error = f"the Secret {access.secret_name} was rejected: {exc}"
                return
            raise


@dataclass(frozen=True, slots=True)
class GrantAcls:
    """CreateAcls for the fleet's user: what fleet_acls wants and the cluster does not have yet."""

    bindings: frozenset[AclBinding]

    def run(self, io: StepIO) -> None:
        try:
            io.admin.create_acls(self.bindings)
        except AdminError as exc:
            io.outcome.access_error = f"could not create ACLs: {exc}"


@dataclass(frozen=True, slots=True)
class RevokeAcls:
    """DeleteAcls of the fleet's user's ACLs that fleet_acls no longer wants (a topic dropped)."""

    bindings: frozenset[AclBinding]

    def run(self, io: StepIO) -> None:
        try:
            io.admin.delete_acls(self.bindings)
        except AdminError as exc:
            io.outcome.access_error = f"could not delete ACLs: {exc}"


@dataclass(frozen=True, slots=True)
class RetireFleetUser:
    """A user the resource no longer wants: its ACLs, then its SCRAM credentials, are deleted (status
    keeps its name until this succeeds). Its Secret stays until the resource goes."""

    user: RetiredUser

    def run(self, io: StepIO) -> None:
        retired = self.user
        try:
            io.admin.delete_acls(retired.acls)
            io.admin.delete_scram(retired.user, retired.mechanisms)
        except AdminError as exc:
            io.outcome.access_error = f"could not remove the former user {retired.user}: {exc}"
            return
        io.outcome.user_retired = True
        io.outcome.events.append(
            EventSpec(
                "Normal", "UserRemoved", f"user {retired.user} and its {len(retired.acls)} ACLs removed"
            )
        )


@dataclass(frozen=True, slots=True)
class ApplyChildren:
    """The StatefulSet at `replicas`, the headless Service and the PDB. A new StatefulSet comes last (it
    names the Service); an existing one first, so that a scale does not wait for the other two."""

    replicas: int
    grows: bool = False
    """This pass scales up (or creates the fleet)."""

    def run(self, io: StepIO) -> None:
        spec = io.observed.spec
        assert spec.bootstrap_servers is not None
        statefulset = builders.statefulset(
            spec, spec.bootstrap_servers, self.replicas, io.observed.fleet_access
        )
        try:
            if io.observed.statefulset is not None:  # a scale takes effect before the rest is applied
                applied = io.api.apply(statefulset)
            io.api.apply(builders.headless_service(spec))
            io.api.apply(builders.pod_disruption_budget(spec))
            if io.observed.statefulset is None:  # new: it names the Service, which comes first
                applied = io.api.apply(statefulset)
        except ApplyConflict as exc:
            io.outcome.conflict = exc
            return
        except KubeError as exc:
            if exc.status in (400, 403, 422):
                # The API server refused our objects (an invalid pod template, or missing permissions):
                # nothing else can proceed, and retrying only helps once the cause is fixed.
                io.outcome.rejected = f"the StatefulSet was rejected: {exc}"
                return
            raise
        io.outcome.statefulset = applied
        if self.grows:
            io.outcome.grown = True
            faults.checkpoint("statefulset-grown")
        record = io.outcome.scale_down
        if record is not None and record.phase is ScalePhase.SHRINKING:
            io.outcome.scale_down = record.shrunk(int(applied["metadata"].get("generation", 0)))
            io.outcome.shrunk = True


@dataclass(frozen=True, slots=True)
class RemoveMembers:
    """One LeaveGroup batch for the departed instance ids; UNKNOWN_MEMBER_ID means already gone. An
    acknowledged removal is recorded in status at once (ConfirmingRemoval), before the rest of the pass:
    from then on, members the coordinator lists again are known to have returned."""

    instance_ids: tuple[str, ...]
    reason: str

    def run(self, io: StepIO) -> None:
        outcome, metrics, group = io.outcome, io.metrics, io.observed.spec.group_id
        record = outcome.scale_down
        assert record is not None
        error: str | None
        try:
            report = io.admin.remove_members(io.observed.spec.group_id, self.instance_ids, reason=self.reason)
        except AdminError as exc:
            metrics.removal_batches.labels(group, "failed").inc()
            error = str(exc)
        else:
            error = None if report.ok else removal_message(report, "removal incomplete")
            metrics.removal_batches.labels(group, "ok" if report.ok else "failed").inc()
            metrics.members_removed.labels(group).inc(len(report.removed))
            if report.ok:
                outcome.events.append(
                    EventSpec("Normal", "MembersRemoved", removal_message(report, "scale-down"))
                )
        outcome.removal_error = error
        outcome.scale_down = after_removal(record, error is None, error, io.observed.now)
        outcome.acted_on_group = True
        if error is None:
            io.write_status({**outcome.status, "scaleDown": outcome.scale_down.to_status()})
        faults.checkpoint("members-removed")


@dataclass(frozen=True, slots=True)
class WriteStatus:
    """The pass's status, written once (server-side apply), then its Events."""

    status: FleetStatus
    events: tuple[EventSpec, ...] = ()

    def run(self, io: StepIO) -> None:
        io.write_status(self.status.to_status())
        if io.outcome.shrunk:
            faults.checkpoint("statefulset-shrunk")
        if io.outcome.grown:
            faults.checkpoint("scale-up-recorded")
        for event in self.events:
            io.post(event)


Step = (
    SetFleetCredential
    | ApplyFleetSecret
    | GrantAcls
    | RevokeAcls
    | RetireFleetUser
    | PersistScaleDownRecord
    | PreRegister
    | WithdrawPreRegistration
    | ApplyChildren
    | RemoveMembers
    | WriteStatus
)


def removal_message(report: RemovalReport, why: str) -> str:
    parts = []
    if report.removed:
        parts.append(f"removed {', '.join(report.removed)}")
    if report.already_gone:
        parts.append(f"already gone: {', '.join(report.already_gone)}")
    if report.failed:
        parts.append("failed: " + ", ".join(f"{r.instance_id} ({r.outcome})" for r in report.failed))
    return f"{why}: " + "; ".join(parts) + f" (group {report.group_id})"


# -- the planners --------------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class ActionPlan:
    steps: tuple[Step, ...]
    scale: ScalePlan


def plan_actions(obs: Observed) -> ActionPlan:
    """The steps that change the cluster or the group, in order. Pure."""
    spec = obs.spec
    scale = plan_scale(spec, obs.scale_down, obs.fleet(), obs.now, obs.step_timeout)
    steps: list[Step] = list(plan_access_steps(obs))
    if scale.persist_first and scale.scale_down is not None:
        steps.append(PersistScaleDownRecord(scale.scale_down))
    if scale.pre_register_ids is not None:
        steps.append(PreRegister(scale.pre_register_ids))
    elif pre_registration_finished(obs):
        steps.append(WithdrawPreRegistration())
    if scale.remove_instance_ids and scale.scale_down is not None:
        # First: the group waits for this removal, and the StatefulSet is already at its new size.
        reason = f"staticfleet: scaled down to {scale.scale_down.to_replicas}, consumers stopped"
        steps.append(RemoveMembers(scale.remove_instance_ids, reason))
    grows = scale.started is not None and scale.started.direction is ScaleDirection.UP
    steps.append(ApplyChildren(scale.statefulset_replicas, grows))
    return ActionPlan(tuple(steps), scale)


def plan_access_steps(obs: Observed) -> tuple[Step, ...]:
    """A provisioned fleet's user, Secret and ACLs, before the children (the pods read the Secret)."""
    if obs.retired is not None:
        return (RetireFleetUser(obs.retired),)
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
) -> StatusPlan:
    """The one status write that ends a pass, from what was observed and what the steps did. Pure."""
    spec, now, scale = obs.spec, obs.now, plan.scale
    if outcome.rejected is not None:
        written = FleetStatus.of(outcome.status)
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
    return StatusPlan(WriteStatus(result.status, (*events, *result.events)), result.completed_scale)


def kafka_user_status(obs: Observed, outcome: Outcome) -> KafkaUser | None:
    """status.kafkaUser: the provisioned user; a former one stays there until it is removed."""
    access = obs.fleet_access
    if access is not None:
        return KafkaUser(access.user, access.secret_name)
    return None if outcome.user_retired else obs.previous.kafka_user


def plan_invalid(obs: Invalid) -> WriteStatus:
    """Conditions say what to fix; the rest of the status (a scale-down in progress above all) is kept.
    A refusal (not a schema matter, so nothing else told the author) is also an Event, once."""
    status = invalid_status(obs.previous, obs.generation, obs.why, obs.now, obs.reason)
    events: tuple[EventSpec, ...] = ()
    if obs.reason != INVALID_SPEC and holding_reason(obs.previous.conditions, DEGRADED) != obs.reason:
        events = (EventSpec("Warning", obs.reason, obs.why),)
    return WriteStatus(status, events)


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
