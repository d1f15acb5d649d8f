"""Every read of a pass, straight from the API server and the coordinator (no cache, so a decision never
rests on stale state), gathered into an observation (observation.py) that the planners decide from. The
lag, which feeds only the status, is read at most every lag_reads.LAG_REFRESH_S."""

from __future__ import annotations

import base64
import dataclasses
import logging
from collections.abc import Mapping, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any

from kio.schema.errors import ErrorCode

from staticfleet.admin import (
    AclBinding,
    AdminError,
    GroupAdmin,
    GroupDescription,
    GroupNotFound,
    KafkaErrorResponse,
    LagSummary,
    lag_summary,
)
from staticfleet.admin.coordinator_api import (
    CoordinatorApiUnavailable,
    CoordinatorGroupView,
    fetch_group_view,
)
from staticfleet.coordinator import GroupState
from staticfleet.kube import builders, secrets
from staticfleet.kube.access import AccessObservation, FleetAccess, RetiredUser, fleet_access, new_password
from staticfleet.kube.claims import Claim, conflicting_owner, servers_key
from staticfleet.kube.conditions import INVALID_SPEC
from staticfleet.kube.context import OperatorContext
from staticfleet.kube.fleetstatus import FleetStatus
from staticfleet.kube.kubeapi import KubeApi
from staticfleet.kube.limits import REPLICAS_ABOVE_LIMIT
from staticfleet.kube.observation import (
    Conflicting,
    Deleting,
    DeletionObservation,
    GroupObservation,
    Invalid,
    Observation,
    Observed,
    Untouched,
)
from staticfleet.kube.scaling import now_utc, parse_time
from staticfleet.kube.spec import (
    CONSUMER_PROTOCOL,
    RETAIN,
    GroupSpec,
    Manifest,
    OperatorDefaults,
    SpecError,
    parse_group,
)
from staticfleet.kube.tenancy import TENANCY_DENIED, Tenancy

log = logging.getLogger(__name__)


# -- observation ---------------------------------------------------------------------------------------------


def describe(admin: GroupAdmin, spec: GroupSpec) -> GroupDescription:
    """The group, through the describe API of its protocol (DescribeGroups calls a consumer-protocol group
    Dead; ConsumerGroupDescribe knows no classic group)."""
    if spec.group_protocol == CONSUMER_PROTOCOL:
        return admin.describe_consumer_group(spec.group_id)
    return admin.describe_group(spec.group_id)


def observe_group(
    admin: GroupAdmin, spec: GroupSpec, token: str | None = None, cafile: str | None = None
) -> GroupObservation:
    # The coordinator's view over HTTP while the group is described: both wait on the coordinator, and a
    # pass that acts on the group acts that much sooner.
    with ThreadPoolExecutor(max_workers=1) as reads:
        view_read = reads.submit(group_view, spec, token, cafile) if spec.coordinator_api else None
        try:
            description = describe(admin, spec)
            not_found = False
        except GroupNotFound:
            description, not_found = None, True
        except AdminError as exc:
            return GroupObservation(error=str(exc))
        view = view_read.result() if view_read is not None else None
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


def group_view(spec: GroupSpec, token: str | None, cafile: str | None) -> CoordinatorGroupView | None:
    """The group as the resource's coordinator API shows it; None where it does not answer."""
    assert spec.coordinator_api
    try:
        return fetch_group_view(spec.coordinator_api, spec.group_id, token=token, cafile=cafile)
    except CoordinatorApiUnavailable as exc:
        log.info("%s/%s: %s; rebalances are inferred instead", spec.namespace, spec.name, exc)
        return None


def observe_lag(admin: GroupAdmin, spec: GroupSpec) -> LagSummary | None:
    """The group's lag over its topics; None when the offsets cannot be read this time."""
    try:
        return lag_summary(admin.partition_offsets(spec.group_id, spec.topics))
    except AdminError as exc:
        log.info("%s/%s: lag unknown: %s", spec.namespace, spec.name, exc)
        return None


def provisioned_access(ctx: OperatorContext, spec: GroupSpec) -> FleetAccess | None:
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


def acls_or_none(admin: GroupAdmin, principal: str) -> frozenset[AclBinding]:
    """The principal's ACLs; none on a cluster without an authorizer."""
    try:
        return admin.acls_of(principal)
    except KafkaErrorResponse as exc:
        if exc.code != ErrorCode.security_disabled:
            raise
        return frozenset()


def provisioned_user(ctx: OperatorContext, spec: GroupSpec, status: FleetStatus) -> str | None:
    """The user the operator made (or makes) for the resource: its own, or a former one status names."""
    access = provisioned_access(ctx, spec)
    if access is not None:
        return access.user
    found = status.kafka_user.name if status.kafka_user else None
    return found if found and ctx.kafka is not None else None


def user_as_held(admin: GroupAdmin, user: str) -> RetiredUser:
    """What the cluster holds of a user the operator made: its SCRAM mechanisms and its ACLs."""
    return RetiredUser(user, admin.scram_mechanisms(user), acls_or_none(admin, f"User:{user}"))


def observe_withdrawal(ctx: OperatorContext, refused: Invalid) -> tuple[Invalid, GroupAdmin | None]:
    """A resource outside its namespace's tenancy keeps no Kafka user and no ACL: what the cluster holds
    of the user it was given, to remove before its status says why."""
    spec = parse_group(refused.body, ctx.defaults)
    user = provisioned_user(ctx, spec, refused.previous)
    if user is None:
        return refused, None
    try:
        admin = ctx.admin(secrets.connection(ctx.api, ctx.secret_files, spec, ctx.own_options()))
        return dataclasses.replace(refused, user=user, withdrawn=user_as_held(admin, user)), admin
    except (AdminError, SpecError) as exc:
        return dataclasses.replace(refused, user=user, withdrawal_error=str(exc)), None


def observe_retired(ctx: OperatorContext, admin: GroupAdmin, previous: FleetStatus) -> RetiredUser | None:
    """The user status.kafkaUser names, when the resource no longer has it provisioned (None when
    there is none, or the cluster cannot say now: the record stays and the next pass asks again)."""
    user = previous.kafka_user.name if previous.kafka_user else None
    if not user or ctx.kafka is None:
        return None
    try:
        return user_as_held(admin, user)
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


def other_owner(
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


def fleet_pods(api: KubeApi, spec: GroupSpec) -> tuple[Manifest, ...]:
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
        if refusal is not None and refusal.reason == TENANCY_DENIED:
            return observe_withdrawal(
                ctx, Invalid(body, generation, previous, refusal.message, now, refusal.reason)
            )
        if refusal is not None:
            return Invalid(body, generation, previous, refusal.message, now, refusal.reason), None
        connection = secrets.connection(ctx.api, ctx.secret_files, spec, ctx.own_options())
        access = provisioned_access(ctx, spec)
    except SpecError as exc:
        return Invalid(body, generation, previous, str(exc), now, INVALID_SPEC), None
    admin = ctx.admin(connection)
    try:
        cluster_id, unreachable = admin.cluster_id(), None
    except AdminError as exc:  # the group cannot be described either: no second wait for it
        cluster_id, unreachable = None, str(exc)
    cluster_id = cluster_id or previous.cluster_id
    winner = other_owner(spec, cluster_id, claims, tenancy)
    if winner is not None:
        return Conflicting(body, spec, generation, previous, winner, now, cluster_id), None
    try:
        access_seen = observe_access(ctx, admin, spec, access, unreachable) if access is not None else None
    except SpecError as exc:
        return Invalid(body, generation, previous, str(exc), now, INVALID_SPEC), None
    retired = observe_retired(ctx, admin, previous) if access is None and unreachable is None else None
    token, cafile = ctx.api_token(spec), ctx.api_ca(spec)
    # Three independent reads at once: a pass that starts a scale step acts that much sooner.
    with ThreadPoolExecutor(max_workers=3) as reads:
        statefulset_read = reads.submit(ctx.api.get_statefulset, spec.namespace, spec.name)
        pods_read = reads.submit(fleet_pods, ctx.api, spec)
        group = (
            GroupObservation(error=unreachable) if unreachable else observe_group(admin, spec, token, cafile)
        )
        statefulset, pods = statefulset_read.result(), pods_read.result()
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


def observe_deletion(
    ctx: OperatorContext,
    body: Manifest,
    claims: Mapping[str, Sequence[Claim]],
    tenancy: Tenancy | None = None,
) -> tuple[DeletionObservation, GroupAdmin | None]:
    """Every read of a deletion, and the admin client for its cluster (None when nothing is asked of it
    this time). The group is asked about only once every consumer has stopped, the user only once
    nothing of the members is left to wait for."""
    meta, now = body["metadata"], now_utc()
    try:
        spec = parse_group(body, ctx.defaults)
    except SpecError as exc:
        return Untouched(f"nothing to clean up ({exc})"), None
    left_alone = (
        "deletionPolicy Retain: the group is left as it is" if spec.deletion_policy == RETAIN else None
    )
    if not spec.bootstrap_servers:
        return Untouched(left_alone or "no bootstrap servers: nothing to clean up"), None
    refusal = ctx.limits.refusal(spec)
    if refusal is not None and refusal.reason != REPLICAS_ABOVE_LIMIT:  # fewer replicas are no harm
        return Untouched(left_alone or f"left as it is: {refusal.message}"), None
    previous = FleetStatus.of(body.get("status"))
    if left_alone is None and tenancy is not None and not tenancy.allows_group(spec.namespace, spec.group_id):
        left_alone = f"namespace {spec.namespace} may not claim group {spec.group_id}: left as it is"
    winner = other_owner(spec, previous.cluster_id, claims, tenancy) if left_alone is None else None
    if winner is not None:
        left_alone = f"group {spec.group_id} belongs to {winner.ref}: left as it is"
    statefulset = ctx.api.get_statefulset(spec.namespace, spec.name)
    pods = fleet_pods(ctx.api, spec)
    fleet = Observed(
        body,
        spec,
        int(meta.get("generation", 0)),
        previous,
        statefulset,
        pods,
        _ordinals(spec, pods),
        GroupObservation(),  # not asked (yet)
        now,
        ctx.step_timeout,
        previous.cluster_id,
    )
    deleting = Deleting(
        fleet,
        parse_time(str(meta.get("deletionTimestamp") or "")) or now,
        left_alone,
        provisioned_user(ctx, spec, previous),
        known_replicas=max(
            min(spec.replicas, ctx.limits.max_replicas),
            fleet.statefulset_replicas or 0,
            previous.scale_down.from_replicas if previous.scale_down else 0,
            previous.replicas or 0,
        ),
    )
    if not deleting.members_done_with or (left_alone is not None and deleting.user is None):
        return deleting, None
    admin = ctx.admin(secrets.connection(ctx.api, ctx.secret_files, spec, ctx.own_options()))
    if left_alone is None:
        fleet = dataclasses.replace(fleet, group=_members_of(admin, spec))
    if deleting.user is not None:
        try:
            fleet = dataclasses.replace(fleet, retired=user_as_held(admin, deleting.user))
        except AdminError as exc:
            deleting = dataclasses.replace(deleting, user_error=str(exc))
    return dataclasses.replace(deleting, observed=fleet), admin


def _members_of(admin: GroupAdmin, spec: GroupSpec) -> GroupObservation:
    """The group's description alone: a deletion needs only who is in the group."""
    try:
        return GroupObservation(description=describe(admin, spec))
    except GroupNotFound:
        return GroupObservation(not_found=True)
    except AdminError as exc:
        return GroupObservation(error=str(exc))
