"""One reconcile pass for one StaticConsumerGroup, and its deletion: observe, decide with the pure
functions (scaling.plan_scale, status.compute_status), act, write status once.

Everything is read straight from the API server and the coordinator on every pass (no cache), so a
decision never rests on stale state; every action is idempotent, so a pass that dies half-way is
simply run again.
"""

from __future__ import annotations

import base64
import contextlib
import logging
import os
import socket
import tempfile
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from staticfleet.admin import (
    AdminError,
    ConfigRejected,
    CoordinatorUnreachable,
    GroupAdmin,
    GroupNotFound,
    KafkaConnection,
    RemovalReport,
)
from staticfleet.admin.coordinator_api import CoordinatorApiUnavailable, fetch_group_view
from staticfleet.coordinator import EXPECTED_INSTANCE_IDS
from staticfleet.kube import builders, faults
from staticfleet.kube.claims import Claim, conflicting_owner
from staticfleet.kube.kubeapi import KubeApi, KubeError
from staticfleet.kube.metrics import OperatorMetrics
from staticfleet.kube.scaling import (
    SHRINKING,
    FleetObservation,
    PreRegistration,
    ScaleDownState,
    after_removal,
    expectation_done,
    iso,
    now_utc,
    parse_time,
    plan_scale,
)
from staticfleet.kube.spec import (
    API_VERSION,
    KIND,
    RETAIN,
    GroupSpec,
    Manifest,
    OperatorDefaults,
    SpecError,
    claim_key,
    parse_group,
)
from staticfleet.kube.status import (
    EventSpec,
    GroupObservation,
    StatusInputs,
    compute_status,
    conflict_status,
    invalid_spec_status,
    merge_patch,
)

log = logging.getLogger(__name__)

COMPONENT = "staticfleet-operator"
# A deletion waits this long for an unreachable coordinator before it lets the resource go anyway.
DELETION_PATIENCE_S = 300.0


class Retry(Exception):
    """Not done yet: try again shortly (the message says what we wait for)."""


@dataclass
class OperatorContext:
    api: KubeApi
    defaults: OperatorDefaults
    metrics: OperatorMetrics
    admin_timeout_s: float = 5.0
    _admins: dict[KafkaConnection, GroupAdmin] = field(default_factory=dict)
    _locks: dict[tuple[str, str], threading.Lock] = field(default_factory=dict)
    _guard: threading.Lock = field(default_factory=threading.Lock)
    _secret_dir: Path | None = None

    def lock(self, namespace: str, name: str) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault((namespace, name), threading.Lock())

    def admin(self, connection: KafkaConnection) -> GroupAdmin:
        with self._guard:
            admin = self._admins.get(connection)
            if admin is None:
                admin = self._admins[connection] = GroupAdmin(connection, timeout_s=self.admin_timeout_s)
            return admin

    def close(self) -> None:
        with self._guard:
            admins, self._admins = list(self._admins.values()), {}
        for admin in admins:
            admin.close()

    # -- connection secrets ---------------------------------------------------------------------------------

    def _secret(self, namespace: str, name: str) -> dict[str, bytes]:
        secret = self.api.get_secret(namespace, name)
        if secret is None:
            raise SpecError(f"Secret {namespace}/{name} does not exist")
        return {k: base64.b64decode(v) for k, v in (secret.get("data") or {}).items()}

    def _secret_file(self, namespace: str, secret: str, key: str, data: dict[str, bytes]) -> str:
        if key not in data:
            raise SpecError(f"Secret {namespace}/{secret} has no key {key}")
        if self._secret_dir is None:
            self._secret_dir = Path(tempfile.mkdtemp(prefix="staticfleet-kafka-"))
        path = self._secret_dir / f"{namespace}.{secret}.{key}"
        if not path.exists() or path.read_bytes() != data[key]:
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "wb") as out:
                out.write(data[key])
        return str(path)

    def connection(self, spec: GroupSpec) -> KafkaConnection:
        assert spec.bootstrap_servers is not None
        options: dict[str, Any] = {}
        if spec.sasl is not None:
            data = self._secret(spec.namespace, spec.sasl.secret_name)
            for key in (spec.sasl.username_key, spec.sasl.password_key):
                if key not in data:
                    raise SpecError(f"Secret {spec.namespace}/{spec.sasl.secret_name} has no key {key}")
            options.update(
                sasl_mechanism=spec.sasl.mechanism,
                sasl_username=data[spec.sasl.username_key].decode(),
                sasl_password=data[spec.sasl.password_key].decode(),
            )
        if spec.tls is not None:
            tls = spec.tls
            data = self._secret(spec.namespace, tls.secret_name)
            options["ssl_cafile"] = self._secret_file(spec.namespace, tls.secret_name, tls.ca_key, data)
            if tls.cert_key and tls.key_key:
                options["ssl_certfile"] = self._secret_file(
                    spec.namespace, tls.secret_name, tls.cert_key, data
                )
                options["ssl_keyfile"] = self._secret_file(spec.namespace, tls.secret_name, tls.key_key, data)
        return KafkaConnection(
            spec.bootstrap_servers,
            security_protocol=spec.security_protocol,
            client_id=COMPONENT,
            **options,
        )


# -- observation -------------------------------------------------------------------------------------------


def observe_group(admin: GroupAdmin, spec: GroupSpec) -> GroupObservation:
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
            view = fetch_group_view(spec.coordinator_api, spec.group_id)
        except CoordinatorApiUnavailable as exc:
            log.info("%s/%s: %s; rebalances are inferred instead", spec.namespace, spec.name, exc)
    return GroupObservation(description=description, view=view, not_found=not_found and view is None)


def claim_of(body: Mapping[str, Any], defaults: OperatorDefaults) -> tuple[str, Claim] | None:
    """The index entry of a resource: (bootstrap servers + group id) -> its claim."""
    meta = body.get("metadata", {})
    try:
        spec = parse_group(body, defaults)
    except (SpecError, KeyError, ValueError, TypeError):
        return None
    created = str(meta.get("creationTimestamp") or "9999-12-31T23:59:59Z")
    return claim_key(spec.bootstrap_servers, spec.group_id), Claim(created, spec.namespace, spec.name)


def _pods(api: KubeApi, spec: GroupSpec) -> list[Manifest]:
    return api.list_pods(spec.namespace, builders.selector_string(spec))


def _ordinals(spec: GroupSpec, pods: Sequence[Manifest]) -> frozenset[int]:
    return frozenset(o for o in (builders.pod_ordinal(p, spec.name) for p in pods) if o is not None)


# -- actions ----------------------------------------------------------------------------------------------


def set_expectation(admin: GroupAdmin, spec: GroupSpec, ids: Sequence[str], now: datetime) -> PreRegistration:
    """Pre-registers the expected instance ids; a coordinator that refuses just means no pre-registration."""
    try:
        admin.set_group_config(spec.group_id, EXPECTED_INSTANCE_IDS, ",".join(ids) if ids else None)
    except ConfigRejected as exc:
        return PreRegistration(tuple(ids), False, iso(now), f"{exc.name}: {exc}")
    except AdminError as exc:
        return PreRegistration(tuple(ids), False, iso(now), str(exc))
    return PreRegistration(tuple(ids), True, iso(now), "")


def apply_children(api: KubeApi, spec: GroupSpec, replicas: int) -> Manifest:
    """Service and PDB first (the StatefulSet names the Service); returns the applied StatefulSet."""
    assert spec.bootstrap_servers is not None
    api.apply(builders.headless_service(spec))
    api.apply(builders.pod_disruption_budget(spec))
    return api.apply(builders.statefulset(spec, spec.bootstrap_servers, replicas))


def post_event(api: KubeApi, body: Mapping[str, Any], event: EventSpec) -> None:
    meta = body["metadata"]
    now = now_utc().strftime("%Y-%m-%dT%H:%M:%S.%fZ")
    try:
        api.create_event(
            meta["namespace"],
            {
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": {"generateName": f"{meta['name']}.", "namespace": meta["namespace"]},
                "involvedObject": {
                    "apiVersion": API_VERSION,
                    "kind": KIND,
                    "name": meta["name"],
                    "namespace": meta["namespace"],
                    "uid": meta.get("uid"),
                },
                "type": event.type,
                "reason": event.reason,
                "message": event.message[:1024],
                "source": {"component": COMPONENT},
                "reportingComponent": COMPONENT,
                "reportingInstance": socket.gethostname(),
                "firstTimestamp": now[:19] + "Z",
                "lastTimestamp": now[:19] + "Z",
                "eventTime": now,
                "action": event.reason,
                "count": 1,
            },
        )
    except KubeError as exc:
        log.warning("could not post event %s: %s", event.reason, exc)


def removal_message(report: RemovalReport, why: str) -> str:
    parts = []
    if report.removed:
        parts.append(f"removed {', '.join(report.removed)}")
    if report.already_gone:
        parts.append(f"already gone: {', '.join(report.already_gone)}")
    if report.failed:
        parts.append("failed: " + ", ".join(f"{r.instance_id} ({r.outcome})" for r in report.failed))
    return f"{why}: " + "; ".join(parts) + f" (group {report.group_id})"


# -- one pass -----------------------------------------------------------------------------------------------


def reconcile(ctx: OperatorContext, namespace: str, name: str, claims: Mapping[str, Sequence[Claim]]) -> None:
    with ctx.lock(namespace, name):
        body = ctx.api.get_group(namespace, name)
        if body is None or body["metadata"].get("deletionTimestamp"):
            return
        try:
            _reconcile(ctx, body, claims)
        except Exception:
            ctx.metrics.reconciles.labels("error").inc()
            raise


def _write_status(
    ctx: OperatorContext, body: Manifest, status: Mapping[str, Any], written: Mapping[str, Any] | None = None
) -> None:
    """Writes status as a merge patch against what the server holds (`written`, default the body's)."""
    patch = merge_patch(body.get("status") or {} if written is None else written, status)
    if patch:
        meta = body["metadata"]
        ctx.api.patch_group_status(meta["namespace"], meta["name"], patch)


def _invalid(
    ctx: OperatorContext, body: Manifest, previous: Mapping[str, Any], generation: int, why: str
) -> None:
    """Conditions say what to fix; the rest of the status (a scale-down in progress above all) is kept."""
    status = {**previous, **invalid_spec_status(previous, generation, why, now_utc())}
    _write_status(ctx, body, status, previous)
    ctx.metrics.reconciles.labels("invalid").inc()


def _reconcile(ctx: OperatorContext, body: Manifest, claims: Mapping[str, Sequence[Claim]]) -> None:
    api, now = ctx.api, now_utc()
    meta = body["metadata"]
    previous: dict[str, Any] = dict(body.get("status") or {})
    generation = int(meta.get("generation", 0))
    try:
        spec = parse_group(body, ctx.defaults)
        if not spec.bootstrap_servers:
            raise SpecError(
                "no bootstrap servers: set spec.kafka.bootstrapServers or start the operator with "
                "--default-bootstrap-servers"
            )
        found = claim_of(body, ctx.defaults)
        winner = conflicting_owner(claims.get(found[0], ()) if found else (), spec.namespace, spec.name)
        if winner is not None:
            result = conflict_status(spec, generation, previous, winner.ref, now)
            _write_status(ctx, body, {**previous, **result.status})
            for event in result.events:
                post_event(api, body, event)
            ctx.metrics.reconciles.labels("conflict").inc()
            return
        connection = ctx.connection(spec)
    except SpecError as exc:
        _invalid(ctx, body, previous, generation, str(exc))
        return

    admin = ctx.admin(connection)
    statefulset = api.get_statefulset(spec.namespace, spec.name)
    pods = _pods(api, spec)
    group = observe_group(admin, spec)
    pre = PreRegistration.from_status(previous.get("preRegistration"))
    state = ScaleDownState.from_status(previous.get("scaleDown"))
    observation = FleetObservation(
        statefulset_replicas=int(statefulset["spec"].get("replicas", 1)) if statefulset else None,
        statefulset_observed_generation=int(
            (statefulset or {}).get("status", {}).get("observedGeneration", 0)
        ),
        pod_ordinals=_ordinals(spec, pods),
        group_instance_ids=group.instance_ids,
        expectation_active=pre is not None and pre.accepted,
    )
    plan = plan_scale(spec, state, observation, now)
    events: list[EventSpec] = []
    last_scale: dict[str, Any] | None = previous.get("lastScale")

    written = dict(previous)  # the status as the server holds it
    if plan.persist_first and plan.scale_down is not None:
        # The pending instance ids are durable before any pod goes away.
        api.patch_group_status(spec.namespace, spec.name, {"scaleDown": plan.scale_down.to_status()})
        written["scaleDown"] = plan.scale_down.to_status()
        faults.checkpoint("scale-down-recorded")
    if plan.expected_instance_ids is not None:
        pre = set_expectation(admin, spec, plan.expected_instance_ids, now)
    try:
        applied = apply_children(api, spec, plan.statefulset_replicas)
    except KubeError as exc:
        if exc.status in (400, 403, 422):
            # The API server refused our objects (an invalid pod template, or missing permissions):
            # nothing else can proceed, and retrying only helps once the cause is fixed.
            _invalid(ctx, body, written, generation, f"the StatefulSet was rejected: {exc}")
            return
        raise
    scale_down = plan.scale_down
    if scale_down is not None and scale_down.phase == SHRINKING:
        scale_down = scale_down.shrunk(int(applied["metadata"].get("generation", 0)))
        api.patch_group_status(spec.namespace, spec.name, {"scaleDown": scale_down.to_status()})
        written["scaleDown"] = scale_down.to_status()
        faults.checkpoint("statefulset-shrunk")
    if plan.started is not None:
        started = plan.started
        last_scale = {
            "direction": started.direction,
            "fromReplicas": started.from_replicas,
            "toReplicas": started.to_replicas,
            "startedAt": iso(now),
        }
        ctx.metrics.scale_operations.labels(started.direction).inc()
        note = ""
        if started.direction == "Up" and pre is not None and plan.expected_instance_ids is not None:
            note = (
                "; new instances pre-registered with the coordinator"
                if pre.accepted
                else f"; no pre-registration ({pre.message})"
            )
        events.append(
            EventSpec(
                "Normal",
                "Scaled",
                f"scaling {started.direction.lower()} from {started.from_replicas} "
                f"to {started.to_replicas}{note}",
            )
        )

    removal_error = None
    if plan.remove_instance_ids and scale_down is not None:
        try:
            report = admin.remove_members(
                spec.group_id,
                plan.remove_instance_ids,
                reason=f"staticfleet: scaled down to {scale_down.to_replicas}, pods gone",
            )
        except AdminError as exc:
            report, removal_error = None, str(exc)
        if report is not None:
            ok = report.ok
            removal_error = None if ok else removal_message(report, "removal incomplete")
            ctx.metrics.removal_batches.labels("ok" if ok else "failed").inc()
            ctx.metrics.members_removed.inc(len(report.removed))
            if ok:
                events.append(EventSpec("Normal", "MembersRemoved", removal_message(report, "scale-down")))
        else:
            ctx.metrics.removal_batches.labels("failed").inc()
        scale_down = after_removal(scale_down, removal_error is None, removal_error)
        faults.checkpoint("members-removed")
    if plan.completed_scale_down is not None:
        done = plan.completed_scale_down
        events.append(
            EventSpec(
                "Normal",
                "MembersExpired",
                f"scale-down to {done.to_replicas}: {', '.join(done.pending_instance_ids)} left the group "
                "after the session timeout",
            )
        )

    # Refresh what the actions changed, so the status reflects this pass's outcome.
    if plan.remove_instance_ids or plan.started is not None or plan.completed_scale_down is not None:
        group = observe_group(admin, spec)
        pods = _pods(api, spec)
    if pre is not None:
        if pre.accepted and expectation_done(
            pre, group.state, group.instance_ids, spec.rebalance_timeout_ms, now
        ):
            try:
                admin.set_group_config(spec.group_id, EXPECTED_INSTANCE_IDS, None)
                pre = None
            except AdminError as exc:
                log.info("%s/%s: could not withdraw the pre-registration: %s", spec.namespace, spec.name, exc)
        elif not pre.accepted and last_scale and last_scale.get("completedAt"):
            pre = None

    result = compute_status(
        StatusInputs(
            spec=spec,
            generation=generation,
            previous=previous,
            statefulset=applied,
            pods=pods,
            group=group,
            now=now,
            scale_down=scale_down,
            scale_waiting=plan.waiting if scale_down is not None else None,
            pre_registration=pre,
            last_scale=last_scale,
            removal_error=removal_error,
        )
    )
    if result.completed_scale is not None:
        started_at = parse_time(result.completed_scale.get("startedAt"))
        if started_at is not None:
            ctx.metrics.scale_duration.labels(str(result.completed_scale.get("direction"))).observe(
                (now - started_at).total_seconds()
            )
    _write_status(ctx, body, result.status, written)
    for event in [*events, *result.events]:
        post_event(api, body, event)
    ctx.metrics.reconciles.labels("ok").inc()


# -- deletion -----------------------------------------------------------------------------------------------


def finalize(ctx: OperatorContext, body: Manifest, claims: Mapping[str, Sequence[Claim]]) -> str:
    """deletionPolicy RemoveMembers: stop the pods, then remove every member. Raises Retry while waiting.
    Returns what was done (for the log)."""
    meta = body["metadata"]
    namespace, name = meta["namespace"], meta["name"]
    with ctx.lock(namespace, name):
        try:
            spec = parse_group(body, ctx.defaults)
        except SpecError as exc:
            return f"nothing to clean up ({exc})"
        if spec.deletion_policy == RETAIN:
            return "deletionPolicy Retain: the group is left as it is"
        if not spec.bootstrap_servers:
            return "no bootstrap servers: nothing to clean up"
        found = claim_of(body, ctx.defaults)
        winner = conflicting_owner(claims.get(found[0], ()) if found else (), namespace, name)
        if winner is not None:
            return f"group {spec.group_id} belongs to {winner.ref}: left as it is"
        api = ctx.api
        statefulset = api.get_statefulset(namespace, name)
        if statefulset is not None and int(statefulset["spec"].get("replicas", 0)) > 0:
            api.scale_statefulset(namespace, name, 0)
        pods = _pods(api, spec)
        if pods:
            raise Retry(f"waiting for {len(pods)} pods to stop before removing their members")
        admin = ctx.admin(ctx.connection(spec))
        previous = body.get("status") or {}
        known = max(
            spec.replicas,
            int((statefulset or {}).get("spec", {}).get("replicas", 0) or 0),
            int((previous.get("scaleDown") or {}).get("fromReplicas", 0) or 0),
            int(previous.get("replicas", 0) or 0),
        )
        ids = list(spec.instance_ids(0, known))
        try:
            with contextlib.suppress(GroupNotFound):
                ids += sorted(admin.describe_group(spec.group_id).instance_ids - set(ids))
            report = admin.remove_members(
                spec.group_id, ids, reason="staticfleet: StaticConsumerGroup deleted"
            )
            if report.failed:
                raise Retry(removal_message(report, "removal incomplete"))
            with contextlib.suppress(AdminError):  # without pre-registration there is nothing to withdraw
                admin.set_group_config(spec.group_id, EXPECTED_INSTANCE_IDS, None)
        except (CoordinatorUnreachable, AdminError) as exc:
            deleted_at = parse_time(str(meta.get("deletionTimestamp") or "")) or now_utc()
            if (now_utc() - deleted_at).total_seconds() < DELETION_PATIENCE_S:
                raise Retry(f"cannot remove the members yet: {exc}") from exc
            post_event(
                api,
                body,
                EventSpec("Warning", "CoordinatorUnavailable", f"deleted without removing members: {exc}"),
            )
            return f"gave up removing members: {exc}"
        ctx.metrics.members_removed.inc(len(report.removed))
        ctx.metrics.removal_batches.labels("ok").inc()
        message = removal_message(report, "deleted")
        post_event(api, body, EventSpec("Normal", "MembersRemoved", message))
        return message
