"""One reconcile pass for one StaticConsumerGroup, and its deletion.

A pass is: observe (every read, straight from the API server and the coordinator: no cache, so a
decision never rests on stale state) -> plan the steps (steps.plan_actions, pure) -> run them -> plan
the status (steps.plan_status, pure) -> write it once. Every step is idempotent, so a pass that dies
half-way is simply run again; a status write that meets a newer resourceVersion starts the pass again
from a fresh read.
"""

from __future__ import annotations

import base64
import contextlib
import dataclasses
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from kio.schema.errors import ErrorCode

from staticfleet.admin import (
    AclBinding,
    AdminError,
    CoordinatorUnreachable,
    GroupAdmin,
    GroupNotFound,
    KafkaErrorResponse,
    LagSummary,
    lag_summary,
)
from staticfleet.admin.coordinator_api import CoordinatorApiUnavailable, fetch_group_view
from staticfleet.coordinator import EXPECTED_INSTANCE_IDS as PRE_REGISTRATION_CONFIG
from staticfleet.coordinator import GroupState
from staticfleet.kube import builders, secrets
from staticfleet.kube.access import (
    AccessObservation,
    FleetAccess,
    RetiredUser,
    fleet_access,
    new_password,
)
from staticfleet.kube.claims import Claim, conflicting_owner, servers_key
from staticfleet.kube.conditions import INVALID_SPEC
from staticfleet.kube.context import OperatorContext
from staticfleet.kube.fleetstatus import EventSpec, FleetStatus
from staticfleet.kube.kubeapi import ApplyConflict, KubeApi, KubeError
from staticfleet.kube.limits import REPLICAS_ABOVE_LIMIT
from staticfleet.kube.metrics import OperatorMetrics
from staticfleet.kube.observation import Conflicting, GroupObservation, Invalid, Observation, Observed
from staticfleet.kube.scaling import now_utc, parse_time
from staticfleet.kube.spec import (
    RETAIN,
    GroupSpec,
    Manifest,
    OperatorDefaults,
    SpecError,
    parse_group,
)
from staticfleet.kube.steps import (
    Outcome,
    WriteStatus,
    plan_actions,
    plan_conflict,
    plan_invalid,
    plan_status,
    removal_message,
    scale_duration,
)
from staticfleet.kube.tenancy import TENANCY_DENIED, Tenancy

log = logging.getLogger(__name__)

# A deletion waits this long for an unreachable coordinator before it lets the resource go anyway.
DELETION_PATIENCE_S = 300.0
# A pass that loses a write race to another writer starts again from a fresh read, this many times.
CONFLICT_ATTEMPTS = 3

__all__ = ["OperatorContext", "Retry", "claim_of", "finalize", "reconcile"]


class Retry(Exception):
    """Not done yet: try again shortly (the message says what we wait for)."""


# -- observation ---------------------------------------------------------------------------------------------


def observe_group(
    admin: GroupAdmin, spec: GroupSpec, token: str | None = None, cafile: str | None = None
) -> GroupObservation:
    try:
        description = admin.describe_group(spec.group_id)
        not_found = False
    except GroupNotFound:
        description, not_found = None, True
    except AdminError as exc:
        return GroupObservation(error=str(exc))
    view = None
    if spec.coordinator_api:
        try:
            view = fetch_group_view(spec.coordinator_api, spec.group_id, token=token, cafile=cafile)
        except CoordinatorApiUnavailable as exc:
            log.info("%s/%s: %s; rebalances are inferred instead", spec.namespace, spec.name, exc)
    missing: list[str] = []
    if description is None or description.group_state is not GroupState.STABLE:
        try:  # a consumer of a topic that does not exist waits in silence: say so on the resource
            missing = admin.missing_topics(spec.topics)
        except AdminError as exc:
            log.info("%s/%s: topics not checked: %s", spec.namespace, spec.name, exc)
    return GroupObservation(
        description=description,
        view=view,
        not_found=not_found and view is None,
        missing_topics=tuple(missing),
    )


def observe_lag(admin: GroupAdmin, spec: GroupSpec) -> LagSummary | None:
    """The group's lag over its topics; None when the offsets cannot be read this time."""
    try:
        return lag_summary(admin.partition_offsets(spec.group_id, spec.topics))
    except AdminError as exc:
        log.info("%s/%s: lag unknown: %s", spec.namespace, spec.name, exc)
        return None


def _fleet_access(ctx: OperatorContext, spec: GroupSpec) -> FleetAccess | None:
    return fleet_access(spec, ctx.kafka.fleet_security()) if ctx.kafka is not None else None


def _secret_data(ctx: OperatorContext, spec: GroupSpec, access: FleetAccess) -> dict[str, bytes] | None:
    """The fleet's Secret, if there is one; a Secret of that name the resource does not own is refused
    (the operator never takes over a Secret someone else made)."""
    secret = ctx.api.get_secret(spec.namespace, access.secret_name)
    if secret is None:
        return None
    owners = (secret.get("metadata") or {}).get("ownerReferences") or []
    if not any(o.get("uid") == spec.uid and o.get("controller") for o in owners):
        raise SpecError(
            f"Secret {spec.namespace}/{access.secret_name} exists and is not owned by this resource: the "
            "operator keeps the fleet's provisioned credentials there. Rename or delete that Secret, or "
            "set kafka.credentials to External"
        )
    return {k: base64.b64decode(v) for k, v in (secret.get("data") or {}).items()}


def observe_access(
    ctx: OperatorContext, admin: GroupAdmin, spec: GroupSpec, access: FleetAccess, unreachable: str | None
) -> AccessObservation:
    """The fleet's Secret, its user's SCRAM mechanisms and its ACLs (no authorizer: acls None)."""
    secret = _secret_data(ctx, spec, access)
    if unreachable is not None:
        return AccessObservation(access, secret, frozenset(), None, error=unreachable)
    try:
        mechanisms = admin.scram_mechanisms(access.user)
        try:
            acls: frozenset[AclBinding] | None = admin.acls_of(access.principal)
        except KafkaErrorResponse as exc:
            if exc.code != ErrorCode.security_disabled:
                raise
            acls = None  # no authorizer: no ACLs to grant
    except AdminError as exc:
        return AccessObservation(access, secret, frozenset(), None, error=str(exc))
    return AccessObservation(access, secret, mechanisms, acls, new_password())


def _acls_or_none(admin: GroupAdmin, principal: str) -> frozenset[AclBinding]:
    """The principal's ACLs; none on a cluster without an authorizer."""
    try:
        return admin.acls_of(principal)
    except KafkaErrorResponse as exc:
        if exc.code != ErrorCode.security_disabled:
            raise
        return frozenset()


def observe_retired(ctx: OperatorContext, admin: GroupAdmin, previous: FleetStatus) -> RetiredUser | None:
    """The user status.kafkaUser names, when the resource no longer has it provisioned (None when
    there is none, or the cluster cannot say now: the record stays and the next pass asks again)."""
    user = previous.kafka_user.name if previous.kafka_user else None
    if not user or ctx.kafka is None:
        return None
    try:
        return RetiredUser(str(user), admin.scram_mechanisms(str(user)), _acls_or_none(admin, f"User:{user}"))
    except AdminError as exc:
        log.info("former user %s: %s", user, exc)
        return None


def claim_of(body: Mapping[str, Any], defaults: OperatorDefaults) -> tuple[str, Claim] | None:
    """The index entry of a resource: group id -> its claim (with its cluster, as far as known)."""
    meta = body.get("metadata", {})
    try:
        spec = parse_group(body, defaults)
    except (SpecError, KeyError, ValueError, TypeError):
        return None
    created = str(meta.get("creationTimestamp") or "9999-12-31T23:59:59Z")
    cluster_id = (body.get("status") or {}).get("clusterId")
    servers = servers_key(spec.bootstrap_servers)
    claim = Claim(created, spec.namespace, spec.name, cluster_id or None, servers, spec.ids, spec.replicas)
    return spec.group_id, claim


def _winner(
    spec: GroupSpec,
    cluster_id: str | None,
    claims: Mapping[str, Sequence[Claim]],
    tenancy: Tenancy | None = None,
) -> Claim | None:
    """The claim that owns the resource's group, when it is another's. A claim from a namespace that may
    not claim the group counts for nothing: no namespace squats another's group ids."""
    found = claims.get(spec.group_id, ())
    if tenancy is not None:
        found = [c for c in found if tenancy.allows_group(c.namespace, spec.group_id)]
    return conflicting_owner(
        found,
        spec.namespace,
        spec.name,
        cluster_id,
        servers_key(spec.bootstrap_servers),
    )


def _pods(api: KubeApi, spec: GroupSpec) -> tuple[Manifest, ...]:
    return tuple(api.list_pods(spec.namespace, builders.selector_string(spec)))


def _ordinals(spec: GroupSpec, pods: Sequence[Manifest]) -> frozenset[int]:
    """The ordinals of the pods whose consumers may still run (terminating ones included)."""
    running = (p for p in pods if builders.consumer_may_run(p))
    return frozenset(o for o in (builders.pod_ordinal(p, spec.name) for p in running) if o is not None)


def observe(
    ctx: OperatorContext,
    body: Manifest,
    claims: Mapping[str, Sequence[Claim]],
    tenancy: Tenancy | None = None,
) -> tuple[Observation, GroupAdmin | None]:
    """Every read of a pass, and the admin client for its cluster (None when there is nothing to ask).
    With `tenancy` (the policies, when enforced), a resource naming what its namespace may not claim is
    Invalid with reason TenancyDenied."""
    meta, now = body["metadata"], now_utc()
    previous = FleetStatus.of(body.get("status"))
    generation = int(meta.get("generation", 0))
    try:
        spec = parse_group(body, ctx.defaults)
        if not spec.bootstrap_servers:
            raise SpecError(
                "no bootstrap servers: set spec.kafka.bootstrapServers or start the operator with "
                "--default-bootstrap-servers"
            )
        refusal = ctx.limits.refusal(spec) or (tenancy.refusal(spec) if tenancy is not None else None)
        if refusal is not None:
            return Invalid(body, generation, previous, refusal.message, now, refusal.reason), None
        connection = secrets.connection(ctx.api, ctx.secret_files, spec, ctx.own_options())
        access = _fleet_access(ctx, spec)
    except SpecError as exc:
        return Invalid(body, generation, previous, str(exc), now, INVALID_SPEC), None
    admin = ctx.admin(connection)
    try:
        cluster_id, unreachable = admin.cluster_id(), None
    except AdminError as exc:  # the group cannot be described either: no second wait for it
        cluster_id, unreachable = None, str(exc)
    cluster_id = cluster_id or previous.cluster_id
    winner = _winner(spec, cluster_id, claims, tenancy)
    if winner is not None:
        return Conflicting(body, spec, generation, previous, winner, now, cluster_id), None
    try:
        access_seen = observe_access(ctx, admin, spec, access, unreachable) if access is not None else None
    except SpecError as exc:
        return Invalid(body, generation, previous, str(exc), now, INVALID_SPEC), None
    retired = observe_retired(ctx, admin, previous) if access is None and unreachable is None else None
    statefulset = ctx.api.get_statefulset(spec.namespace, spec.name)
    pods = _pods(ctx.api, spec)
    token, cafile = ctx.api_token(spec), ctx.api_ca(spec)
    group = GroupObservation(error=unreachable) if unreachable else observe_group(admin, spec, token, cafile)
    return (
        Observed(
            body,
            spec,
            generation,
            previous,
            statefulset,
            pods,
            _ordinals(spec, pods),
            group,
            now,
            ctx.step_timeout,
            cluster_id,
            access=access_seen,
            retired=retired,
        ),
        admin,
    )


# -- execution -----------------------------------------------------------------------------------------------


@dataclass
class PassIO:
    """What the steps of one pass act through (steps.StepIO)."""

    ctx: OperatorContext
    body: Manifest
    observed: Observed
    outcome: Outcome
    admin: GroupAdmin

    @property
    def api(self) -> KubeApi:
        return self.ctx.api

    @property
    def metrics(self) -> OperatorMetrics:
        return self.ctx.metrics

    def write_status(self, status: Mapping[str, Any]) -> None:
        self.outcome.status, self.outcome.resource_version = write_status(
            self.ctx.api, self.body, status, self.outcome.resource_version, self.outcome.status
        )

    def post(self, event: EventSpec) -> None:
        post_event(self.ctx, self.body, event)

    def watch_hold(self, member_id: str, instance_ids: tuple[str, ...], bound_s: float) -> None:
        self.ctx.hold_watcher(self.admin, self.observed.spec.group_id, member_id, instance_ids, bound_s)


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
    outcome = Outcome(
        status=dict(body.get("status") or {}),
        resource_version=str(body["metadata"].get("resourceVersion", "")),
        scale_down=plan.scale.scale_down,
        pre_registration=obs.pre_registration,
        statefulset=obs.statefulset,
    )
    io = PassIO(ctx, body, obs, outcome, admin)
    for step in plan.steps:
        step.run(io)
        if outcome.rejected is not None or outcome.conflict is not None:
            break
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
        group, pods = observe_group(admin, obs.spec, token, cafile), _pods(ctx.api, obs.spec)
    # The lag feeds only the status and the metrics: read after the steps, so no step waits for it.
    lag = observe_lag(admin, obs.spec) if obs.group.reachable else None
    obs = dataclasses.replace(obs, lag=lag)
    status = plan_status(obs, plan, outcome, group, pods)
    status.step.run(io)
    if status.completed_scale is not None:
        measured = scale_duration(status.completed_scale, obs.now)
        if measured is not None:
            ctx.metrics.scale_duration.labels(measured[0]).observe(measured[1])
    ctx.metrics.observe_fleet(
        obs.spec.namespace, obs.spec.name, obs.spec.group_id, obs.spec.replicas, outcome.status
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
    access = _fleet_access(ctx, spec)
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
    acls = _acls_or_none(admin, f"User:{user}")
    admin.delete_acls(acls)
    mechanisms = admin.scram_mechanisms(user)
    admin.delete_scram(user, mechanisms)
    return acls, mechanisms


def provisioned_user(ctx: OperatorContext, spec: GroupSpec, status: FleetStatus) -> str | None:
    """The user the operator made (or makes) for the resource: its own, or a former one status names."""
    access = _fleet_access(ctx, spec)
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
    winner = _winner(spec, previous_cluster_id(body), claims, tenancy)
    if winner is not None:
        return f"group {spec.group_id} belongs to {winner.ref}: left as it is"
    api = ctx.api
    statefulset = api.get_statefulset(namespace, name)
    if statefulset is not None and int(statefulset["spec"].get("replicas", 0)) > 0:
        api.scale_statefulset(namespace, name, 0)
    running = [p for p in _pods(api, spec) if builders.consumer_may_run(p)]
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
