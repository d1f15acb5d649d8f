"""One reconcile pass for one StaticConsumerGroup, and its deletion: the executor.

A pass is: observe (observe.py: every read) -> plan the steps (steps.plan_actions, pure) -> run them
-> plan the status (status.plan_status, pure) -> write it once (WriteStatus). Every step is idempotent,
so a pass that dies half-way is simply run again; a status write that meets a newer resourceVersion
starts the pass again from a fresh read.
"""

from __future__ import annotations

import dataclasses
import enum
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from staticfleet.admin import GroupAdmin
from staticfleet.kube.applied import AppliedChildren
from staticfleet.kube.claims import Claim
from staticfleet.kube.context import OperatorContext
from staticfleet.kube.deletion import members_finished, plan_deletion, user_finished
from staticfleet.kube.fleetstatus import EventSpec, FleetStatus
from staticfleet.kube.kubeapi import ApplyConflict, KubeApi, KubeError, prune
from staticfleet.kube.metrics import OperatorMetrics
from staticfleet.kube.observation import Conflicting, Invalid, Observed, Untouched
from staticfleet.kube.observe import fleet_pods, observe, observe_deletion, observe_group, observe_lag
from staticfleet.kube.spec import Manifest
from staticfleet.kube.status import plan_conflict, plan_invalid, plan_status, scale_duration
from staticfleet.kube.steps import Outcome, Step, WriteStatus, plan_actions, plan_withdrawal
from staticfleet.kube.tenancy import Tenancy

log = logging.getLogger(__name__)

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
    cluster: GroupAdmin | None
    """None when the pass asks nothing of the cluster (a deletion waiting for its pods)."""
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
    def admin(self) -> GroupAdmin:
        assert self.cluster is not None, "planned a step on the cluster without reading it"
        return self.cluster

    @property
    def metrics(self) -> OperatorMetrics:
        return self.ctx.metrics

    @property
    def applied(self) -> AppliedChildren:
        return self.ctx.applied

    @property
    def written(self) -> FleetStatus:
        return FleetStatus.of(self.status)

    @property
    def departure_key(self) -> str:
        return self.ctx.departure_key(self.observed.spec)

    def write_status(self, status: FleetStatus) -> None:
        self.status, self.resource_version = write_status(
            self.ctx, self.body, status.to_status(), self.resource_version, self.status
        )

    def post(self, event: EventSpec) -> None:
        post_event(self.ctx, self.body, event)

    def watch_hold(
        self, member_id: str, instance_ids: tuple[str, ...], bound_s: float, linger_s: float = 0.0
    ) -> None:
        group_id = self.observed.spec.group_id
        self.ctx.hold_watcher(self.admin, group_id, member_id, instance_ids, bound_s, linger_s)


def run_steps(steps: Sequence[Step], io: PassIO, *, stop_on_failure: bool = False) -> None:
    """Each step in order, until one halts the pass (the API server refused our objects, or another
    operator owns them) or, with `stop_on_failure` (a deletion, whose steps depend on each other and
    which is tried again as a whole), until one fails."""
    for step in steps:
        step.run(io)
        if io.outcome.failed if stop_on_failure else io.outcome.halted:
            return


@dataclass
class WithdrawalIO:
    """What the withdrawal of a refused resource's user acts through (steps.AccessIO)."""

    admin: GroupAdmin
    outcome: Outcome


def write_status(
    ctx: OperatorContext,
    body: Manifest,
    status: Mapping[str, Any],
    resource_version: str,
    expected: Mapping[str, Any],
) -> tuple[dict[str, Any], str]:
    """Server-side apply of the whole status, on the condition that the resource is still at
    `resource_version`. Returns what the server holds now. The write is noted in ctx.own_writes before
    and after it, so that its watch event starts no pass.

    A newer version whose status is still `expected` (what this pass last read or wrote: the spec, a
    label or kopf's finalizer changed) takes the write again at that version: the status records what
    this pass did, and must not be lost. A status that changed under us (another operator wrote it)
    raises the conflict (KubeError 409), and the pass starts again from a fresh read.

    A status equal to `expected` is not written at all: a fleet at rest costs no write per pass."""
    if prune(status) == dict(expected):
        return dict(expected), resource_version
    namespace, name = body["metadata"]["namespace"], body["metadata"]["name"]
    key = (str(namespace), str(name))
    ctx.own_writes.writing(key, prune(status))
    for attempt in range(1, CONFLICT_ATTEMPTS + 1):
        try:
            written = ctx.api.apply_group_status(namespace, name, status, resource_version)
        except KubeError as exc:
            if exc.status != 409 or attempt == CONFLICT_ATTEMPTS:
                raise
            fresh = ctx.api.get_group(namespace, name)
            if fresh is None or (fresh.get("status") or {}) != dict(expected):
                raise
            resource_version = str(fresh["metadata"].get("resourceVersion", ""))
            continue
        held, version = dict(written.get("status") or {}), str(written["metadata"].get("resourceVersion", ""))
        ctx.own_writes.wrote(key, version, held)
        return held, version
    raise AssertionError("unreachable")


def post_event(ctx: OperatorContext, body: Manifest, event: EventSpec) -> None:
    try:
        ctx.events(body, event)
    except Exception as exc:  # an Event is news, never a reason to fail the pass
        log.warning("could not post event %s: %s", event.reason, exc)


def _write_only(ctx: OperatorContext, body: Manifest, step: WriteStatus) -> None:
    """A pass that only writes status (an invalid or conflicting resource)."""
    meta, spec = body["metadata"], body.get("spec") or {}
    previous, version = body.get("status") or {}, str(meta.get("resourceVersion", ""))
    written, _ = write_status(ctx, body, step.status.to_status(), version, previous)
    group = str(spec.get("groupId") or f"{meta['namespace']}.{meta['name']}")
    ctx.metrics.observe_fleet(meta["namespace"], meta["name"], group, int(spec.get("replicas") or 0), written)
    for event in step.events:
        post_event(ctx, body, event)


class Follow(enum.Enum):
    """Which changes of a fleet's children bring its next pass forward (the resource's always do)."""

    NOTHING = "nothing"
    """The interval's pass sees them: a rollout's pods, a pod restarting, each changing four or five times
    as it starts, would each meet a pass that competes with them for the API server and the CPU."""
    READINESS = "readiness"
    """A pod that became ready, stopped being ready, or went away: during a scale-up, whose new pods
    start together, so that the status shows them ready (and the pre-registration, once every instance is
    in a Stable group, is withdrawn) without a pass at each step of their start."""
    EVERY_CHANGE = "every change"
    """Every change: during a scale-down, whose next move follows its pods (the removal once they have
    stopped)."""


def follow(status: FleetStatus) -> Follow:
    """What the pass that wrote `status` waits for."""
    if status.scale_down is not None:
        return Follow.EVERY_CHANGE
    return Follow.READINESS if status.pre_registration is not None else Follow.NOTHING


def reconcile(
    ctx: OperatorContext,
    namespace: str,
    name: str,
    claims: Mapping[str, Sequence[Claim]],
    tenancy: Tenancy | None = None,
) -> Follow:
    """One pass. Returns which changes of the fleet's children bring the next pass forward."""
    with ctx.locks(namespace, name):
        for attempt in range(1, CONFLICT_ATTEMPTS + 1):
            body = ctx.api.get_group(namespace, name)
            if body is None or body["metadata"].get("deletionTimestamp"):
                return Follow.NOTHING
            try:
                return _reconcile(ctx, body, claims, tenancy)
            except KubeError as exc:
                if exc.status == 409 and attempt < CONFLICT_ATTEMPTS:
                    log.info("%s/%s: %s; starting again from a fresh read", namespace, name, exc)
                    continue
                ctx.metrics.reconciles.labels("error").inc()
                raise
            except Exception:
                ctx.metrics.reconciles.labels("error").inc()
                raise
    return Follow.EVERY_CHANGE  # not reached: the last attempt returns or raises


def _reconcile(
    ctx: OperatorContext, body: Manifest, claims: Mapping[str, Sequence[Claim]], tenancy: Tenancy | None
) -> Follow:
    observation, admin = observe(ctx, body, claims, tenancy)
    if isinstance(observation, Invalid):
        outcome = Outcome()
        for step in plan_withdrawal(observation):
            assert admin is not None
            step.run(WithdrawalIO(admin, outcome))
        _write_only(ctx, body, plan_invalid(observation, outcome))
        ctx.metrics.reconciles.labels("invalid").inc()
        return Follow.NOTHING
    if isinstance(observation, Conflicting):
        _write_only(ctx, body, plan_conflict(observation))
        ctx.metrics.reconciles.labels("conflict").inc()
        return Follow.NOTHING
    assert admin is not None
    obs = observation
    plan = plan_actions(obs)
    io = PassIO(ctx, body, obs, plan.outcome(obs), admin)
    outcome = io.outcome
    run_steps(plan.steps, io)
    if outcome.conflict is not None:
        _report_conflict(ctx, body, outcome.conflict)
        return Follow.NOTHING
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
    # The lag feeds only the status and the metrics: read after the steps, so no step waits for it, and
    # not at every pass (lag_reads.py); the status keeps the lag it shows until the next read.
    fleet = (obs.spec.namespace, obs.spec.name)
    lag = observe_lag(admin, obs.spec) if obs.group.reachable and ctx.lag_reads.due(fleet) else None
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
    return follow(io.written)


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


# -- deletion -----------------------------------------------------------------------------------------------


def finalize(
    ctx: OperatorContext,
    body: Manifest,
    claims: Mapping[str, Sequence[Claim]],
    tenancy: Tenancy | None = None,
) -> str:
    """The finalizer's work (deletion.plan_deletion). Raises Retry while waiting; returns what was done
    (for the log)."""
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
    """The members first, then the user: each part's steps stop at the first that fails, and a part that
    is not done (Retry) ends the attempt before the next one begins."""
    observation, admin = observe_deletion(ctx, body, claims, tenancy)
    if isinstance(observation, Untouched):
        return observation.why
    plan = plan_deletion(observation)
    said = []
    for steps, finished in ((plan.members, members_finished), (plan.user, user_finished)):
        io = PassIO(ctx, body, observation.observed, Outcome(), admin)
        run_steps(steps, io, stop_on_failure=True)
        result = finished(observation, plan, io.outcome)
        for event in result.events:
            post_event(ctx, body, event)
        if result.retry is not None:
            raise Retry(result.retry)
        if result.message:
            said.append(result.message)
    return "; ".join(said)
