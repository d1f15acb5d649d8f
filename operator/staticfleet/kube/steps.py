"""The steps of a pass, and the rules that choose them.

A step is a frozen dataclass with a `run(io)` method that performs it through `StepIO` and notes what
happened in `io.outcome`. The planners at the end of this module (plan_actions for a pass,
plan_withdrawal for a resource its tenancy refuses) decide which steps to take, and in which order, from
the observation alone: they are pure. A deletion takes these same steps (deletion.plan_deletion);
reconcile.py runs them; the status that ends a pass is status.plan_status's. Adding a step is one class
here, its rule in a planner here, and its test (docs/architecture.md walks through one).

Every step is idempotent: a pass that dies after any step is simply run again, and the records in status
(scaleDown, preRegistration) say where a scale stands. Those are written once, at the end of the pass
(WriteStatus), except where a later step must find them durable: there the plan holds a Checkpoint.
"""

from __future__ import annotations

import logging
import time
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from functools import partial
from typing import TYPE_CHECKING, Protocol

from staticfleet.admin import AclBinding, AdminError, ConfigRejected, RemovalReport
from staticfleet.coordinator import EXPECTED_INSTANCE_IDS as PRE_REGISTRATION_CONFIG
from staticfleet.kube import builders, departure, faults, join_hold, passes
from staticfleet.kube.access import SCRAM_ITERATIONS, RetiredUser, plan_access
from staticfleet.kube.applied import AppliedChildren
from staticfleet.kube.fleetstatus import EventSpec, FleetStatus
from staticfleet.kube.kubeapi import ApplyConflict, KubeError
from staticfleet.kube.observation import Invalid, Observed
from staticfleet.kube.scaling import (
    NOT_NEEDED_MESSAGE,
    PreRegistration,
    ScaleDirection,
    ScaleDownState,
    ScalePhase,
    ScalePlan,
    after_removal,
    iso,
    plan_scale,
    pre_registration_done,
)
from staticfleet.kube.spec import CONSUMER_PROTOCOL, COOPERATIVE_STICKY, IMMEDIATE, Manifest

if TYPE_CHECKING:
    from staticfleet.admin import GroupAdmin
    from staticfleet.kube.kubeapi import KubeApi
    from staticfleet.kube.metrics import OperatorMetrics

log = logging.getLogger(__name__)


# -- what the steps did --------------------------------------------------------------------------------------


@dataclass
class Outcome:
    """Filled in by the steps as they run; the status planner reads it."""

    scale_down: ScaleDownState | None = None
    """The scale-down record as planned, then as the steps leave it."""
    pre_registration: PreRegistration | None = None
    statefulset: Manifest | None = None
    rejected: str | None = None
    """Why the API server refused our objects (the pass stops there)."""
    conflict: ApplyConflict | None = None
    """Another operator owns fields of our children (the pass stops there, and writes no status)."""
    removal: RemovalReport | None = None
    """The coordinator's answer to a LeaveGroup batch."""
    removal_error: str | None = None
    """Why members could not be removed: the batch unanswered, or answered with failures."""
    events: list[EventSpec] = field(default_factory=list)
    acted_on_group: bool = False
    """A step changed the group: read it again before computing status."""
    access_error: str | None = None
    """Provisioning the fleet's user or ACLs failed (Degraded says why; the next pass tries again)."""
    user_retired: bool = False
    retire_error: str | None = None
    """Why a user could not be removed (as the cluster said it)."""

    @property
    def halted(self) -> bool:
        """The pass stops here: the API server refused our objects, or another operator owns them."""
        return self.rejected is not None or self.conflict is not None

    @property
    def failed(self) -> bool:
        """A step could not do its work (the fields above say why)."""
        return self.halted or self.removal_error is not None or self.access_error is not None


class AccessIO(Protocol):
    """What the steps on a fleet's user touch: the cluster, and the outcome."""

    @property
    def admin(self) -> GroupAdmin: ...
    @property
    def outcome(self) -> Outcome: ...


class StepIO(AccessIO, Protocol):
    """What steps may touch (reconcile.PassIO is the real one; tests pass their own)."""

    @property
    def api(self) -> KubeApi: ...
    @property
    def metrics(self) -> OperatorMetrics: ...
    @property
    def observed(self) -> Observed: ...
    @property
    def applied(self) -> AppliedChildren:
        """What this operator last applied of each fleet's children (applied.py)."""
        ...

    @property
    def written(self) -> FleetStatus:
        """The status as the API server holds it now."""
        ...

    @property
    def departure_key(self) -> str:
        """The fleet's departure key (departure.fleet_key), which signs the marks handed to its pods."""
        ...

    def write_status(self, status: FleetStatus) -> None: ...
    def post(self, event: EventSpec) -> None: ...
    def watch_hold(
        self, member_id: str, instance_ids: tuple[str, ...], bound_s: float, linger_s: float = 0.0
    ) -> None:
        """Releases the held join phase `linger_s` after every instance has joined (join_hold.py), beside
        the pass."""
        ...


# -- the steps -----------------------------------------------------------------------------------------------


# Pods marked (or unmarked) at once, each with the same moment to leave: this long after the marking
# begins, enough for the marks to reach every pod. Consumers that leave together leave within one join
# phase (one rebalance); one that read its mark during a rebalance the others started would join that
# rebalance first and leave after it (a second rebalance). The StatefulSet shrinks only once the moment
# has come: a kubelet stops refreshing the downwardAPI files of a pod it is stopping, so a pod stopped
# before its mark arrived would never see it and stay in the group until the removal (a second rebalance).
# Pods that answer the departure handshake (departure.py) leave sooner, once all of them have the mark.
MARKING_THREADS = 16
DEPARTURE_DELAY_S = 1.0


@dataclass(frozen=True, slots=True)
class MarkDeparting:
    """Tells the consumers of the pods a scale-down takes away that they are leaving for good (the
    departing annotation, which each pod's downwardAPI volume shows; its value is the moment to leave,
    in epoch milliseconds, the same for every pod of the step): a consumer that reads it leaves the
    group itself then, as a dynamic one does as it stops, and the removal that follows the pods finds
    it gone. When every marked pod answers the departure handshake (`endpoints`), they leave together as
    soon as all have read the mark instead, and the step returns (the StatefulSet shrinks) once the group
    is Stable without their members (`leaving`), or a bound passes; the pods that stay and answer the
    handshake (`staying`) are told to join again right after that moment rather than at their next
    heartbeat. The operator still removes no member of a pod that may run; a consumer that leaves on its
    own is not removed. Pods a scale-down no longer takes away lose the mark, and their consumers join
    again."""

    mark: tuple[str, ...]
    clear: tuple[str, ...] = ()
    endpoints: tuple[departure.Endpoint, ...] = ()
    leaving: tuple[str, ...] = ()  # the instance ids of the marked pods' members
    staying: tuple[departure.Endpoint, ...] = ()

    def run(self, io: StepIO) -> None:
        spec = io.observed.spec
        leave_at = str(int((time.time() + DEPARTURE_DELAY_S) * 1000))
        if not self.mark:
            self.annotate(io, leave_at)
            return
        mark_ms = int(leave_at)
        key = io.departure_key if self.endpoints else ""

        def rejoin(target: departure.Endpoint, mark_ms: int, rejoin_at_ms: int) -> bool:
            return departure.send_rejoin(target, key, mark_ms, rejoin_at_ms)

        result: departure.Handshake | None = None
        annotated = False
        if self.endpoints:
            # Handed their mark, the pods need not wait for a kubelet to show the annotation: when all
            # took it, they are given their sooner moment at once.
            held = departure.hand_marks(self.endpoints, key, mark_ms)
            hasten = partial(
                departure.hasten, self.endpoints, mark_ms, held=held, staying=self.staying, rejoin=rejoin
            )
            if len(held) == len(self.endpoints):
                result = hasten()
            else:  # the others read the mark from their files: the annotations go out as the handshake waits
                with ThreadPoolExecutor(max_workers=1) as aside:
                    handshake = aside.submit(hasten)
                    self.annotate(io, leave_at)
                    annotated = True
                    result = handshake.result()
        sooner = result.sooner if result is not None else None
        hastened = sooner is not None
        if not annotated and not hastened:  # the consumers leave at the mark's moment, as their files show
            self.annotate(io, leave_at)
            annotated = True
        # the pass goes on to shrink the StatefulSet: not before the moment
        moment = sooner if sooner is not None else mark_ms / 1000
        with passes.waiting():
            time.sleep(max(0.0, moment - time.time()))
        describe = partial(_state_and_members, io, spec.group_id)
        rejoining = tuple(e for e in self.staying if result is not None and e.pod in result.rejoining)
        if rejoining:  # the pods that stay join the departures' rebalance as soon as it is under way
            with passes.waiting():
                departure.rejoin_when_rebalancing(describe, self.leaving, rejoining, mark_ms, rejoin)
        if not annotated:
            # Every pod took its handed mark and has left: its annotation, which it holds the mark by once
            # its file shows it, is written now. Written before, the writes (the API server's and etcd's
            # work on the same nodes) came as the consumers left and as the operator watched for the
            # rebalance, and delayed both.
            self.annotate(io, leave_at)
        if result is not None:
            io.metrics.departure_handshakes.labels(spec.group_id, result.result).inc()
            message = result.message(self.mark, mark_ms / 1000)
            log.info("%s/%s: departure handshake: %s", spec.namespace, spec.name, message)
            io.post(EventSpec("Normal", "DepartureHandshake", message))
        if hastened:
            # Every departing consumer took the sooner moment and has left: their pods stop once the
            # group has settled without them and its members have had a second to fetch what they were
            # given (departure.wait_until_settled says why).
            bound_s = departure.settle_bound_s(spec.heartbeat_interval_ms)
            with passes.waiting():
                settled = departure.wait_until_settled(describe, self.leaving, bound_s)
            if not settled:
                log.info(
                    "%s/%s: the group did not settle without the departed members within %.1f s; "
                    "shrinking the StatefulSet now",
                    spec.namespace,
                    spec.name,
                    bound_s,
                )

    def annotate(self, io: StepIO, leave_at: str) -> None:
        """Writes the departing annotation (the moment, in epoch ms) on the marked pods and removes it
        from the cleared ones, all at once."""
        spec = io.observed.spec
        changes = [(name, leave_at) for name in self.mark] + [(name, None) for name in self.clear]

        def write(change: tuple[str, str | None]) -> None:
            name, value = change
            try:
                io.api.annotate_pod(spec.namespace, name, {builders.DEPARTING_ANNOTATION: value})
            except KubeError as exc:  # without the mark the consumer waits for the removal: slower, not wrong
                log.info("%s/%s: could not mark pod %s: %s", spec.namespace, spec.name, name, exc)

        with ThreadPoolExecutor(max_workers=min(MARKING_THREADS, len(changes) or 1)) as pool:
            list(pool.map(write, changes))


def _state_and_members(io: StepIO, group_id: str) -> tuple[str, frozenset[str]] | None:
    try:
        group = io.admin.describe_group(group_id)
    except AdminError as exc:
        log.info("group %s: could not describe it while it settles: %s", group_id, exc)
        return None
    return group.state, group.instance_ids


def departure_marks(obs: Observed, scale: ScalePlan) -> MarkDeparting | None:
    """Which pods to mark as departing and which to unmark: while a scale-down (removeMembers:
    Immediate) has yet to see its pods go, the pods from its target up are departing; no other pod is.
    Pods whose consumers have stopped for good are left as they are. A fleet on the consumer protocol
    marks none: its static members leave (epoch -2) as their pods stop, without a rebalance, and are
    removed together once all have (scaling._all_left), so no moment to leave together is needed."""
    record = scale.scale_down
    waiting = record is not None and record.phase in (ScalePhase.SHRINKING, ScalePhase.WAITING_FOR_PODS)
    waiting = waiting and obs.spec.group_protocol != CONSUMER_PROTOCOL
    leaving_from = (
        record.to_replicas if waiting and record is not None and record.remove_members == IMMEDIATE else None
    )
    mark: list[Manifest] = []
    clear: list[str] = []
    staying: list[Manifest] = []
    for pod in obs.pods:
        ordinal = builders.pod_ordinal(pod, obs.spec.name)
        if ordinal is None or not builders.consumer_may_run(pod):
            continue
        departing = leaving_from is not None and ordinal >= leaving_from
        marked = builders.marked_departing(pod)
        name = str(pod["metadata"]["name"])
        if departing and not marked:
            mark.append(pod)
        elif marked and not departing:
            clear.append(name)
        elif not departing and not marked:
            staying.append(pod)
    if not mark and not clear:
        return None
    mark.sort(key=lambda pod: str(pod["metadata"]["name"]))
    names = tuple(str(pod["metadata"]["name"]) for pod in mark)
    ordinals = (builders.pod_ordinal(pod, obs.spec.name) for pod in mark)
    leaving = tuple(i for o in ordinals if o is not None for i in obs.spec.pod_member_ids(o))
    endpoints = departure.every_endpoint(mark)
    # Told to join again only when some departing pods leave at a moment the handshake sets.
    told = sorted(staying, key=lambda pod: str(pod["metadata"]["name"])) if endpoints else []
    staying_endpoints = tuple(e for e in map(departure.endpoint, told) if e is not None)
    return MarkDeparting(names, tuple(sorted(clear)), endpoints, leaving, staying_endpoints)


@dataclass(frozen=True, slots=True)
class PreRegister:
    """Tells the coordinator which instance ids to hold the join phase for; a coordinator that refuses
    (Apache Kafka) gets the join phase held by a pending member instead, recorded with the reason. A
    cooperative group's join phase is held `linger_s` past the last join (join_hold.INCREMENTAL_LINGER_S),
    by a pending member on any coordinator. The record is written to status before the StatefulSet grows,
    so that an operator that dies in between still knows to withdraw it once the group is complete."""

    instance_ids: tuple[str, ...]
    linger_s: float = 0.0

    def run(self, io: StepIO) -> None:
        spec, now = io.observed.spec, iso(io.observed.now)
        ids = self.instance_ids
        try:
            io.admin.set_group_config(spec.group_id, PRE_REGISTRATION_CONFIG, ",".join(ids) if ids else None)
        except ConfigRejected as exc:
            refused = f"the coordinator refused pre-registration ({exc.name})"
            io.outcome.pre_registration = _hold_join_phase(io, ids, now, refused, self.linger_s)
        except AdminError as exc:
            io.outcome.pre_registration = PreRegistration(ids, False, now, str(exc))
        else:
            registered = PreRegistration(ids, True, now, "")
            if self.linger_s and ids:
                held = _hold_join_phase(io, ids, now, "pre-registered", self.linger_s)
                registered = held if held.accepted else replace(registered, message=held.message)
            io.outcome.pre_registration = registered


# What a held join phase advertises when the group has no members to copy it from: any protocol will do
# for an Empty group, and the pending member never joins.
_DEFAULT_PROTOCOL = ("consumer", "range")


@dataclass(frozen=True, slots=True)
class PreRegistrationNotNeeded:
    """A consumer-protocol fleet grows: there is no join phase to prepare, and the status says so."""

    instance_ids: tuple[str, ...]

    def run(self, io: StepIO) -> None:
        now = iso(io.observed.now)
        io.outcome.pre_registration = PreRegistration(
            self.instance_ids, False, now, NOT_NEEDED_MESSAGE, needed=False
        )


def _hold_join_phase(
    io: StepIO, ids: tuple[str, ...], now: str, why: str, linger_s: float
) -> PreRegistration:
    """Holds the join phase with a pending member, released `linger_s` after every instance joined: where
    the coordinator refused pre-registration (`why` says so), or to make a cooperative group's hold linger."""
    spec = io.observed.spec
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
        return PreRegistration(ids, False, now, f"{why}, and holding the join phase failed: {exc}")
    previous = io.observed.pre_registration
    if previous is not None and previous.hold_member_id:
        _release(io, previous.hold_member_id)
    io.watch_hold(member_id, ids, spec.session_timeout_ms / 1000, linger_s)
    until = "until every instance has joined"
    if linger_s:
        until = f"until {linger_s:g} s after every instance has joined (a cooperative assignor)"
    return PreRegistration(
        ids,
        True,
        now,
        f"{why}; pending member {member_id} holds the join phase {until}",
        hold_member_id=member_id,
        linger_ms=int(linger_s * 1000),
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
            if not _release(io, pre.hold_member_id):
                return
            io.outcome.pre_registration = replace(pre, hold_member_id="", linger_ms=0)
        try:
            io.admin.set_group_config(spec.group_id, PRE_REGISTRATION_CONFIG, None)
        except ConfigRejected:  # a coordinator that refuses the key even to delete it: the hold was all
            pass
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
        faults.crash_after(faults.FLEET_CREDENTIAL_SET)


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
    """A user the operator made for the resource, which it no longer has: kafka.credentials became
    External, its namespace may no longer claim what it names, or the resource is being deleted. Its ACLs,
    then its SCRAM credentials, are deleted (status keeps its name until this succeeds); `announce` is
    the Event that says so. Its Secret stays until the resource goes."""

    user: RetiredUser
    announce: EventSpec | None = None

    def run(self, io: AccessIO) -> None:
        retired = self.user
        try:
            io.admin.delete_acls(retired.acls)
            io.admin.delete_scram(retired.user, retired.mechanisms)
        except AdminError as exc:
            io.outcome.access_error = f"could not remove the former user {retired.user}: {exc}"
            io.outcome.retire_error = str(exc)
            return
        io.outcome.user_retired = True
        if self.announce is not None:
            io.outcome.events.append(self.announce)


@dataclass(frozen=True, slots=True)
class ApplyChildren:
    """The StatefulSet at `replicas`, the headless Service, the PDB and, for pods that answer the departure
    handshake, the Secret of the fleet's departure key. A new StatefulSet comes last (it names the Service
    and the Secret); an existing one first, so that a scale does not wait for the others."""

    replicas: int
    grows: bool = False
    """This pass scales up (or creates the fleet)."""

    def run(self, io: StepIO) -> None:
        spec, observed = io.observed.spec, io.observed.statefulset
        assert spec.bootstrap_servers is not None
        access = io.observed.fleet_access
        statefulset = builders.statefulset(spec, spec.bootstrap_servers, self.replicas, access)
        service, budget = builders.headless_service(spec), builders.pod_disruption_budget(spec)
        fleet = (spec.namespace, spec.name)
        children: tuple[Manifest, ...] = (statefulset, service, budget)
        if departure.answers_handshake(statefulset["spec"]["template"]["spec"]):
            children += (builders.departure_key_secret(spec, io.departure_key),)
        record = io.outcome.scale_down
        shrinking = record is not None and record.phase is ScalePhase.SHRINKING
        if observed is not None and not shrinking and not io.applied.needed(fleet, children, observed):
            io.outcome.statefulset = observed  # at rest: as applied, and unchanged since
            return
        if len(children) > 3 and io.applied.first(fleet):
            _create_departure_key(io, children[3])
        try:
            if observed is not None:  # a scale takes effect before the rest is applied
                applied = io.api.apply(statefulset)
            io.api.apply(service)
            io.api.apply(budget)
            if observed is None:  # new: it names the Service, which comes first
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
        io.applied.record(fleet, children, applied)
        io.outcome.statefulset = applied
        if self.grows:
            faults.crash_after(faults.STATEFULSET_GROWN)
        if record is not None and shrinking:
            io.outcome.scale_down = record.shrunk(int(applied["metadata"].get("generation", 0)))


def _create_departure_key(io: StepIO, secret: Manifest) -> None:
    """Once per fleet and operator process, before the StatefulSet, so that new pods start with the key;
    created, never read or changed (one of that name is left as it is). Without it (the operator may not
    create Secrets there, or an older one holds another key) the pods are only slower to leave: they are
    asked for the mark their file shows instead of being handed it."""
    spec = io.observed.spec
    name = secret["metadata"]["name"]
    try:
        if not io.api.create_secret(secret):
            log.debug("%s/%s: the departure key's Secret %s exists", spec.namespace, spec.name, name)
    except KubeError as exc:
        log.warning(
            "%s/%s: could not create the departure key's Secret %s (departing pods wait for their kubelet "
            "to show the mark): %s",
            spec.namespace,
            spec.name,
            name,
            exc,
        )


@dataclass(frozen=True, slots=True)
class RemoveMembers:
    """One LeaveGroup batch for the departed instance ids (`reason`: what the coordinator logs);
    UNKNOWN_MEMBER_ID means already gone. Within a scale-down the record notes the answer
    (ConfirmingRemoval, or the error), and a Checkpoint follows: from then on, members the coordinator
    lists again are known to have returned. `purpose` begins the MembersRemoved Event."""

    instance_ids: tuple[str, ...]
    reason: str
    purpose: str = "scale-down"

    def run(self, io: StepIO) -> None:
        outcome, metrics, group = io.outcome, io.metrics, io.observed.spec.group_id
        error: str | None
        try:
            report = io.admin.remove_members(io.observed.spec.group_id, self.instance_ids, reason=self.reason)
        except AdminError as exc:
            metrics.removal_batches.labels(group, "failed").inc()
            error = str(exc)
        else:
            outcome.removal = report
            error = None if report.ok else removal_message(report, "removal incomplete")
            metrics.removal_batches.labels(group, "ok" if report.ok else "failed").inc()
            metrics.members_removed.labels(group).inc(len(report.removed))
            if report.ok:
                outcome.events.append(
                    EventSpec("Normal", "MembersRemoved", removal_message(report, self.purpose))
                )
        outcome.removal_error = error
        if outcome.scale_down is not None:
            outcome.scale_down = after_removal(outcome.scale_down, error is None, error, io.observed.now)
        outcome.acted_on_group = True


@dataclass(frozen=True, slots=True)
class StopConsumers:
    """The StatefulSet scaled to 0, before a deleted fleet's members go: its spec.replicas alone, by
    merge patch (the rest of it is left as it is, and a resource being deleted gets no new children)."""

    def run(self, io: StepIO) -> None:
        spec = io.observed.spec
        io.api.scale_statefulset(spec.namespace, spec.name, 0)


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """A status write in the middle of a pass: the scale records (status.scaleDown and
    status.preRegistration) as the steps before it left them, durable before the steps after it run.
    Those rely on it (the pending instance ids are recorded before any pod goes: persist first), or an
    operator that dies after them must find it (a pre-registration to withdraw, a removal to confirm
    rather than repeat). Nothing is written when the server holds the records already. `crash_point`
    names it for the fault tests (faults.py)."""

    crash_point: str

    def run(self, io: StepIO) -> None:
        outcome = io.outcome
        status = replace(io.written, scale_down=outcome.scale_down, pre_registration=outcome.pre_registration)
        if status != io.written:
            io.write_status(status)
        faults.crash_after(self.crash_point)


@dataclass(frozen=True, slots=True)
class WriteStatus:
    """The pass's status, written once (server-side apply), then its Events. `crash_points`: the fault
    tests' points that this write completes (faults.py)."""

    status: FleetStatus
    events: tuple[EventSpec, ...] = ()
    crash_points: tuple[str, ...] = ()

    def run(self, io: StepIO) -> None:
        io.write_status(self.status)
        for point in self.crash_points:
            faults.crash_after(point)
        for event in self.events:
            io.post(event)


Step = (
    SetFleetCredential
    | ApplyFleetSecret
    | GrantAcls
    | RevokeAcls
    | RetireFleetUser
    | MarkDeparting
    | PreRegister
    | PreRegistrationNotNeeded
    | WithdrawPreRegistration
    | ApplyChildren
    | RemoveMembers
    | StopConsumers
    | Checkpoint
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


# -- which steps to take -------------------------------------------------------------------------------------


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
    marks = departure_marks(obs, scale)
    if marks is not None:  # after the record is durable, before the StatefulSet shrinks
        steps.append(marks)
    if scale.pre_register_ids is not None:
        steps += (PreRegister(scale.pre_register_ids, join_linger_s(obs)), Checkpoint(faults.PRE_REGISTERED))
    elif pre_registration_finished(obs):
        steps.append(WithdrawPreRegistration())
    elif spec.group_protocol == CONSUMER_PROTOCOL and grows(scale):
        steps.append(PreRegistrationNotNeeded(spec.member_ids(0, scale.statefulset_replicas)))
    if scale.remove_instance_ids and scale.scale_down is not None:
        # First: the group waits for this removal, and the StatefulSet is already at its new size.
        reason = f"staticfleet: scaled down to {scale.scale_down.to_replicas}, consumers stopped"
        steps += (RemoveMembers(scale.remove_instance_ids, reason), Checkpoint(faults.MEMBERS_REMOVED))
    steps.append(ApplyChildren(scale.statefulset_replicas, grows(scale)))
    return ActionPlan(tuple(steps), scale)


def join_linger_s(obs: Observed) -> float:
    """How long a scale-up's held join phase outlasts the last join: join_hold.INCREMENTAL_LINGER_S where
    the fleet's consumers assign with cooperative-sticky (KIP-429), as its spec says or as the group chose
    it, and some already own partitions to give up; else none. Kafka Streams' own assignor is incremental
    too, but its Java clients rejoin at once: the linger would cost them a second and win nothing."""
    group = obs.group.description
    if group is None or not group.members:
        return 0.0
    chosen = group.protocol if group.protocol_type == "consumer" else None
    cooperative = COOPERATIVE_STICKY in (obs.spec.assignment_strategy, chosen)
    return join_hold.INCREMENTAL_LINGER_S if cooperative else 0.0


def grows(scale: ScalePlan) -> bool:
    return scale.started is not None and scale.started.direction is ScaleDirection.UP


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
