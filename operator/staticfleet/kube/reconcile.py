"""One reconcile pass for one StaticConsumerGroup, and its deletion: the executor.

A pass is: observe (observe.py: every read) -> plan the steps (planner.plan_actions, pure) -> run them
-> plan the status (planner.plan_status, pure) -> write it once (WriteStatus). Every step is idempotent,
so a pass that dies half-way is simply run again; a status write that meets a newer resourceVersion
starts the pass again from a fresh read.
"""

from __future__ import annotations

import contextlib
import dataclasses
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from staticfleet.admin import (
    AclBinding,
    AdminError,
    CoordinatorUnreachable,
    GroupAdmin,
    GroupNotFound,
)
from staticfleet.coordinator import EXPECTED_INSTANCE_IDS as PRE_REGISTRATION_CONFIG
from staticfleet.kube import builders, secrets
from staticfleet.kube.claims import Claim
from staticfleet.kube.context import OperatorContext
from staticfleet.kube.fleetstatus import EventSpec, FleetStatus
from staticfleet.kube.kubeapi import ApplyConflict, KubeApi, KubeError
from staticfleet.kube.limits import REPLICAS_ABOVE_LIMIT
from staticfleet.kube.metrics import OperatorMetrics
from staticfleet.kube.observation import Conflicting, Invalid, Observed
from staticfleet.kube.observe import (
    acls_or_none,
    fleet_pods,
    observe,
    observe_group,
    observe_lag,
    other_owner,
    provisioned_access,
)
from staticfleet.kube.planner import plan_actions, plan_conflict, plan_invalid, plan_status, scale_duration
from staticfleet.kube.scaling import now_utc, parse_time
from staticfleet.kube.spec import RETAIN, GroupSpec, Manifest, SpecError, parse_group
from staticfleet.kube.steps import Outcome, Step, WriteStatus, removal_message
from staticfleet.kube.tenancy import TENANCY_DENIED, Tenancy

log = logging.getLogger(__name__)

# A deletion waits this long for an unreachable coordinator before it lets the resource go anyway.
DELETION_PATIENCE_S = 300.0
# A pass that loses a write race to another writer starts again from a fresh read, this many times.
CONFLICT_ATTEMPTS = 3

__all__ = ["OperatorContext", "Retry", "finalize", "reconcile"]


class Retry(Exception):
    """Not done yet: try again shortly (the message says what we wait for)."""


# -- execution -----------------------------------------------------------------------------------------------


@dataclass
class PassIO:
    """What the steps of one pass act through (steps.StepIO), and the status as the server holds it."""

    ctx: OperatorContext
    body: Manifest
    observed: Observed
    outcome: Outcome
    admin: GroupAdmin
    status: dict[str, Any] = dataclasses.field(init=False)
    """As the server holds it now (read at the start of the pass, then as each write left it)."""
    resource_version: str = dataclasses.field(init=False)

    def __post_init__(self) -> None:
        self.status = dict(self.body.get("status") or {})
        self.resource_version = str(self.body["metadata"].get("resourceVersion", ""))

    @property
    def api(self) -> KubeApi:
        return self.ctx.api

    @property
    def metrics(self) -> OperatorMetrics:
        return self.ctx.metrics

    @property
    def written(self) -> FleetStatus:
        return FleetStatus.of(self.status)

    def write_status(self, status: FleetStatus) -> None:
        self.status, self.resource_version = write_status(
            self.ctx.api, self.body, status.to_status(), self.resource_version, self.status
        )

    def post(self, event: EventSpec) -> None:
        post_event(self.ctx, self.body, event)

    def watch_hold(self, member_id: str, instance_ids: tuple[str, ...], bound_s: float) -> None:
        self.ctx.hold_watcher(self.admin, self.observed.spec.group_id, member_id, instance_ids, bound_s)


def run_steps(steps: Sequence[Step], io: PassIO) -> None:
    """Each step in order, until one halts the pass (the API server refused our objects, or another
    operator owns them)."""
    for step in steps:
        step.run(io)
        if io.outcome.halted:
            return


def write_status(
    api: KubeApi,
    body: Manifest,
    status: Mapping[str, Any],
    resource_version: str,
    expected: Mapping[str, Any],
) -> tuple[dict[str, Any], str]:
    """Server-side apply of the whole status, on the condition that the resource is still at
    `resource_version`. Returns what the server holds now.

    A newer version whose status is still `expected` (what this pass last read or wrote: the spec, a
    label or kopf's finalizer changed) takes the write again at that version: the status records what
    this pass did, and must not be lost. A status that changed under us (another operator wrote it)
    raises the conflict (KubeError 409), and the pass starts again from a fresh read."""
    namespace, name = body["metadata"]["namespace"], body["metadata"]["name"]
    for attempt in range(1, CONFLICT_ATTEMPTS + 1):
        try:
            written = api.apply_group_status(namespace, name, status, resource_version)
            return dict(written.get("status") or {}), str(written["metadata"].get("resourceVersion", ""))
        except KubeError as exc:
            if exc.status != 409 or attempt == CONFLICT_ATTEMPTS:
                raise
            fresh = api.get_group(namespace, name)
            if fresh is None or (fresh.get("status") or {}) != dict(expected):
                raise
            resource_version = str(fresh["metadata"].get("resourceVersion", ""))
    raise AssertionError("unreachable")


def post_event(ctx: OperatorContext, body: Manifest, event: EventSpec) -> None:
    try:
        ctx.events(body, event)
    except Exception as exc:  # an Event is news, never a reason to fail the pass
        log.warning("could not post event %s: %s", event.reason, exc)


def _write_only(ctx: OperatorContext, body: Manifest, step: WriteStatus) -> None:
    """A pass that only writes status (an invalid or conflicting resource)."""
    previous = body.get("status") or {}
    written, _ = write_status(
        ctx.api, body, step.status.to_status(), str(body["metadata"].get("resourceVersion", "")), previous
    )
    meta, spec = body["metadata"], body.get("spec") or {}
    group = str(spec.get("groupId") or f"{meta['namespace']}.{meta['name']}")
    ctx.metrics.observe_fleet(meta["namespace"], meta["name"], group, int(spec.get("replicas") or 0), written)
    for event in step.events:
        post_event(ctx, body, event)


def reconcile(
    ctx: OperatorContext,
    namespace: str,
    name: str,
    claims: Mapping[str, Sequence[Claim]],
    tenancy: Tenancy | None = None,
) -> None:
    with ctx.locks(namespace, name):
        for attempt in range(1, CONFLICT_ATTEMPTS + 1):
            body = ctx.api.get_group(namespace, name)
            if body is None or body["metadata"].get("deletionTimestamp"):
                return
            try:
                _reconcile(ctx, body, claims, tenancy)
                return
            except KubeError as exc:
                if exc.status == 409 and attempt < CONFLICT_ATTEMPTS:
                    log.info("%s/%s: %s; starting again from a fresh read", namespace, name, exc)
                    continue
                ctx.metrics.reconciles.labels("error").inc()
                raise
            except Exception:
                ctx.metrics.reconciles.labels("error").inc()
                raise


def _reconcile(
    ctx: OperatorContext, body: Manifest, claims: Mapping[str, Sequence[Claim]], tenancy: Tenancy | None
) -> None:
    observation, admin = observe(ctx, body, claims, tenancy)
    if isinstance(observation, Invalid):
        if observation.reason == TENANCY_DENIED:
            observation = withdraw_access(ctx, observation)
        _write_only(ctx, body, plan_invalid(observation))
        ctx.metrics.reconciles.labels("invalid").inc()
        return
    if isinstance(observation, Conflicting):
        _write_only(ctx, body, plan_conflict(observation))
        ctx.metrics.reconciles.labels("conflict").inc()
        return
    assert admin is not None
    obs = observation
    plan = plan_actions(obs)
    io = PassIO(ctx, body, obs, plan.outcome(obs), admin)
    outcome = io.outcome
    run_steps(plan.steps, io)
    if outcome.conflict is not None:
        _report_conflict(ctx, body, outcome.conflict)
        return
    ctx.conflicts.pop((obs.spec.namespace, obs.spec.name), None)
    if plan.scale.started is not None and outcome.rejected is None:
        ctx.metrics.scale_operations.labels(obs.spec.group_id, plan.scale.started.direction.value).inc()
    group, pods = obs.group, obs.pods
    if outcome.rejected is None and (
        outcome.acted_on_group or plan.scale.started or plan.scale.completed_scale_down
    ):
        # Read what the steps changed again, so the status shows this pass's outcome.
        token, cafile = ctx.api_token(obs.spec), ctx.api_ca(obs.spec)
        group, pods = observe_group(admin, obs.spec, token, cafile), fleet_pods(ctx.api, obs.spec)
    # The lag feeds only the status and the metrics: read after the steps, so no step waits for it.
    lag = observe_lag(admin, obs.spec) if obs.group.reachable else None
    obs = dataclasses.replace(obs, lag=lag)
    status = plan_status(obs, plan, outcome, group, pods, io.written)
    status.step.run(io)
    if status.completed_scale is not None:
        measured = scale_duration(status.completed_scale, obs.now)
        if measured is not None:
            ctx.metrics.scale_duration.labels(measured[0]).observe(measured[1])
    ctx.metrics.observe_fleet(
        obs.spec.namespace, obs.spec.name, obs.spec.group_id, obs.spec.replicas, io.status
    )
    ctx.metrics.reconciles.labels("invalid" if outcome.rejected else "ok").inc()


def _report_conflict(ctx: OperatorContext, body: Manifest, conflict: ApplyConflict) -> None:
    """Another operator owns our children's fields: stop here, write nothing (the status is the owner's
    to write), and say so once (a Warning Event, the log, a metric), naming the other field manager."""
    meta = body["metadata"]
    key = (str(meta["namespace"]), str(meta["name"]))
    ctx.metrics.reconciles.labels("conflict").inc()
    message = (
        f"not applied: {', '.join(conflict.managers)} manages fields of this fleet's children that "
        f"{ctx.api.field_manager} would change (two operators act on this resource; stop one): {conflict}"
    )
    log.warning("%s/%s: %s", *key, message)
    if ctx.conflicts.get(key) != message:
        ctx.conflicts[key] = message
        post_event(ctx, body, EventSpec("Warning", "ApplyConflict", message))


# -- deletion ------------------------------------------------------------------------------------------------


def previous_cluster_id(body: Manifest) -> str | None:
    found = (body.get("status") or {}).get("clusterId")
    return str(found) if found else None


def finalize(
    ctx: OperatorContext,
    body: Manifest,
    claims: Mapping[str, Sequence[Claim]],
    tenancy: Tenancy | None = None,
) -> str:
    """deletionPolicy RemoveMembers: stop the pods, then remove every member. Raises Retry while waiting.
    Returns what was done (for the log)."""
    meta = body["metadata"]
    namespace, name = meta["namespace"], meta["name"]
    with ctx.locks(namespace, name):
        message = _finalize(ctx, body, claims, tenancy)
    ctx.forget(namespace, name)
    ctx.metrics.forget(namespace, name)
    return message


def _finalize(
    ctx: OperatorContext, body: Manifest, claims: Mapping[str, Sequence[Claim]], tenancy: Tenancy | None
) -> str:
    """The members first (their pods stop before anything else), then the fleet's provisioned user and
    its ACLs, whatever the deletionPolicy: the Secret goes with the resource, so the user would be left
    with a password nobody holds."""
    members = _finalize_members(ctx, body, claims, tenancy)
    revoked = _revoke_access(ctx, body)
    return members if revoked is None else f"{members}; {revoked}"


def _patience_left(body: Manifest) -> bool:
    deleted_at = parse_time(str(body["metadata"].get("deletionTimestamp") or "")) or now_utc()
    return (now_utc() - deleted_at).total_seconds() < DELETION_PATIENCE_S


def _revoke_access(ctx: OperatorContext, body: Manifest) -> str | None:
    """Deletes the fleet's ACLs and SCRAM credentials (None: the operator provisioned nothing for it)."""
    try:
        spec = parse_group(body, ctx.defaults)
    except SpecError:
        return None
    if ctx.kafka is None or not spec.bootstrap_servers:
        return None
    refusal = ctx.limits.refusal(spec)
    if refusal is not None and refusal.reason != REPLICAS_ABOVE_LIMIT:
        return None
    access = provisioned_access(ctx, spec)
    # A user provisioned before kafka.credentials became External, not yet removed, is still ours.
    user = (
        access.user if access is not None else ((body.get("status") or {}).get("kafkaUser") or {}).get("name")
    )
    if not user:
        return None
    admin = ctx.admin(secrets.connection(ctx.api, ctx.secret_files, spec, ctx.own_options()))
    try:
        acls, _ = remove_user(admin, str(user))
    except AdminError as exc:
        if _patience_left(body):
            raise Retry(f"cannot remove user {user} and its ACLs yet: {exc}") from exc
        message = f"deleted without removing user {user} and its ACLs: {exc}"
        post_event(ctx, body, EventSpec("Warning", "AccessNotRevoked", message))
        return message
    message = f"user {user} and its {len(acls)} ACLs removed"
    post_event(ctx, body, EventSpec("Normal", "UserRemoved", message))
    return message


def remove_user(admin: GroupAdmin, user: str) -> tuple[frozenset[AclBinding], frozenset[str]]:
    """Deletes the user's ACLs, then its SCRAM credentials; returns what there was of each."""
    acls = acls_or_none(admin, f"User:{user}")
    admin.delete_acls(acls)
    mechanisms = admin.scram_mechanisms(user)
    admin.delete_scram(user, mechanisms)
    return acls, mechanisms


def provisioned_user(ctx: OperatorContext, spec: GroupSpec, status: FleetStatus) -> str | None:
    """The user the operator made (or makes) for the resource: its own, or a former one status names."""
    access = provisioned_access(ctx, spec)
    if access is not None:
        return access.user
    found = status.kafka_user.name if status.kafka_user else None
    return found if found and ctx.kafka is not None else None


def withdraw_access(ctx: OperatorContext, obs: Invalid) -> Invalid:
    """A resource outside its namespace's tenancy keeps no Kafka user and no ACL: both are removed
    before its status says why (so a narrowed policy takes effect within one pass). A removal that
    fails is retried on the next pass, and the condition says so."""
    spec = parse_group(obs.body, ctx.defaults)
    user = provisioned_user(ctx, spec, obs.previous)
    if user is None or not spec.bootstrap_servers:
        return obs
    try:
        admin = ctx.admin(secrets.connection(ctx.api, ctx.secret_files, spec, ctx.own_options()))
        acls, mechanisms = remove_user(admin, user)
    except (AdminError, SpecError) as exc:
        why = f"{obs.why} Removing user {user} and its ACLs failed, and is tried again: {exc}"
        return dataclasses.replace(obs, why=why)
    if acls or mechanisms:
        message = f"user {user} and its {len(acls)} ACLs removed: {obs.why}"
        post_event(ctx, obs.body, EventSpec("Warning", "AccessRevoked", message))
    return dataclasses.replace(obs, previous=dataclasses.replace(obs.previous, kafka_user=None))


def _finalize_members(
    ctx: OperatorContext, body: Manifest, claims: Mapping[str, Sequence[Claim]], tenancy: Tenancy | None
) -> str:
    meta = body["metadata"]
    namespace, name = meta["namespace"], meta["name"]
    try:
        spec = parse_group(body, ctx.defaults)
    except SpecError as exc:
        return f"nothing to clean up ({exc})"
    if spec.deletion_policy == RETAIN:
        return "deletionPolicy Retain: the group is left as it is"
    if not spec.bootstrap_servers:
        return "no bootstrap servers: nothing to clean up"
    refusal = ctx.limits.refusal(spec)
    if refusal is not None and refusal.reason != REPLICAS_ABOVE_LIMIT:
        return f"left as it is: {refusal.message}"
    if tenancy is not None and not tenancy.allows_group(spec.namespace, spec.group_id):
        return f"namespace {spec.namespace} may not claim group {spec.group_id}: left as it is"
    winner = other_owner(spec, previous_cluster_id(body), claims, tenancy)
    if winner is not None:
        return f"group {spec.group_id} belongs to {winner.ref}: left as it is"
    api = ctx.api
    statefulset = api.get_statefulset(namespace, name)
    if statefulset is not None and int(statefulset["spec"].get("replicas", 0)) > 0:
        api.scale_statefulset(namespace, name, 0)
    running = [p for p in fleet_pods(api, spec) if builders.consumer_may_run(p)]
    if running:
        raise Retry(f"waiting for {len(running)} pods to stop before removing their members")
    admin = ctx.admin(secrets.connection(api, ctx.secret_files, spec, ctx.own_options()))
    previous = FleetStatus.of(body.get("status"))
    known = max(
        min(spec.replicas, ctx.limits.max_replicas),
        int((statefulset or {}).get("spec", {}).get("replicas", 0) or 0),
        previous.scale_down.from_replicas if previous.scale_down else 0,
        previous.replicas or 0,
    )
    ids = list(spec.member_ids(0, known))
    try:
        with contextlib.suppress(GroupNotFound):
            ids += sorted(admin.describe_group(spec.group_id).instance_ids - set(ids))
        report = admin.remove_members(spec.group_id, ids, reason="staticfleet: StaticConsumerGroup deleted")
        if report.failed:
            raise Retry(removal_message(report, "removal incomplete"))
        with contextlib.suppress(AdminError):  # without pre-registration there is nothing to withdraw
            admin.set_group_config(spec.group_id, PRE_REGISTRATION_CONFIG, None)
        pre = previous.pre_registration
        if pre is not None and pre.hold_member_id:
            with contextlib.suppress(AdminError):  # expired already, or it expires by itself
                admin.release_join_phase(spec.group_id, pre.hold_member_id)
    except (CoordinatorUnreachable, AdminError) as exc:
        if _patience_left(body):
            raise Retry(f"cannot remove the members yet: {exc}") from exc
        post_event(
            ctx,
            body,
            EventSpec("Warning", "CoordinatorUnavailable", f"deleted without removing members: {exc}"),
        )
        return f"gave up removing members: {exc}"
    ctx.metrics.members_removed.labels(spec.group_id).inc(len(report.removed))
    ctx.metrics.removal_batches.labels(spec.group_id, "ok").inc()
    message = removal_message(report, "deleted")
    post_event(ctx, body, EventSpec("Normal", "MembersRemoved", message))
    return message
