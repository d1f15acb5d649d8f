"""The kopf wiring: thin handlers around reconcile.reconcile and reconcile.finalize.

One daemon per StaticConsumerGroup runs a reconcile pass every `interval` seconds, and at once when the
resource itself changes (watch events poke it; not those of its own status write, nor kopf's record of
the spec it handled). What a change to a pod or the StatefulSet does depends on what the fleet's last
pass said it waits for (Follow): during a scale-down every such change starts a pass
STEP_CHILD_EVENTS_DELAY_S after it, so that members leave the group right after their pods have stopped;
during a scale-up only a pod that became ready (or stopped being ready, or went away) does; otherwise (a
rollout, a pod restarting) the interval's next pass sees it. Claims on consumer groups
are a kopf index. With tenancy enforced (enable_tenancy), the StaticFleetTenancyPolicies and the
namespaces' labels are indexes too, and a change to either pokes the fleets it may concern, so a narrowed
policy revokes access within one pass; kopf starts no handler before every index holds its first full
listing.
"""

from __future__ import annotations

import asyncio
import contextvars
import functools
import json
import logging
import threading
from collections.abc import Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

import kopf

from staticfleet import logs
from staticfleet.kube import passes
from staticfleet.kube.builders import GROUP_LABEL, MANAGED_BY_LABEL, MANAGER
from staticfleet.kube.claims import Claim
from staticfleet.kube.context import OperatorContext
from staticfleet.kube.limits import RECONCILE_THREADS
from staticfleet.kube.members import running_and_ready
from staticfleet.kube.observe import claim_of
from staticfleet.kube.own_writes import canonical
from staticfleet.kube.reconcile import Follow, Retry, finalize, reconcile
from staticfleet.kube.secrets import COMPONENT
from staticfleet.kube.spec import GROUP, PLURAL, VERSION
from staticfleet.kube.tenancy import TENANCY_PLURAL, PolicyError, Tenancy, TenancyPolicy, parse_policy

log = logging.getLogger(__name__)
Logger = logging.Logger | logging.LoggerAdapter[Any]

registry = kopf.OperatorRegistry()
PREFIX = "staticfleet.io"
DIFFBASE_ANNOTATION = f"{PREFIX}/last-handled-configuration"
"""Where kopf kept the spec it last handled, in the operator's earlier versions (NoDiffBase): a resource
may still carry it, and a change to it alone starts no pass."""


class NoDiffBase(kopf.DiffBaseStorage):
    """kopf's record of the last spec it handled, which this operator does not keep. kopf needs it only to
    tell a resource's creation from its update for handlers of either, and the operator has none: its
    passes read the resource afresh, and its one handler of that kind is the deletion's. Kept in an
    annotation, as kopf does by default, it cost a write after every change of the spec, which came as
    the pass that the change started read the resource: that pass's first status write (in a scale-down,
    the record of the departing members, before any of them is told) then met a newer resourceVersion,
    and took a read and a second write."""

    def fetch(self, *, body: kopf.Body) -> kopf.BodyEssence | None:
        return None

    def store(self, *, body: kopf.Body, patch: kopf.Patch, essence: kopf.BodyEssence) -> None:
        pass


STEP_CHILD_EVENTS_DELAY_S = 0.25
"""How long a pass waits after a change to the children that it follows (Follow), so that pods changing
together meet one pass: during a scale-down the departing pods stop close together."""


@dataclass(eq=False)
class Wake:
    """What woke one fleet's daemon since its last pass: any change, a pod's readiness (or a pod going
    away) among them, and whether one was the resource's."""

    changed: asyncio.Event = field(default_factory=asyncio.Event)
    settled: asyncio.Event = field(default_factory=asyncio.Event)
    urgent: asyncio.Event = field(default_factory=asyncio.Event)

    def set(self, *, urgent: bool = True, settled: bool = False) -> None:
        self.changed.set()
        if settled or urgent:
            self.settled.set()
        if urgent:
            self.urgent.set()

    def clear(self) -> None:
        self.changed.clear()
        self.settled.clear()
        self.urgent.clear()

    async def next_pass(
        self,
        stopped: Any,
        interval_s: float,
        follow: Follow,
        child_delay_s: float = STEP_CHILD_EVENTS_DELAY_S,
    ) -> None:
        """Until the next pass is due: at once for a change to the resource; `child_delay_s` after a change
        to its children that `follow` names, or sooner if the resource changes meanwhile; without either,
        after `interval_s`."""
        trigger = {
            Follow.NOTHING: self.urgent,
            Follow.READINESS: self.settled,
            Follow.EVERY_CHANGE: self.changed,
        }
        await _wait(trigger[follow], stopped, interval_s)
        if trigger[follow].is_set() and not self.urgent.is_set() and child_delay_s > 0 and not stopped:
            await _wait(self.urgent, stopped, child_delay_s)


@dataclass
class OperatorMemo:
    ctx: OperatorContext
    interval_s: float = 2.0
    triggers: dict[tuple[str, str], Wake] = field(default_factory=dict)
    seen: dict[tuple[str, str], tuple[str, str]] = field(default_factory=dict)
    """Per resource, what its last watch event showed, but for what changes without telling the pass
    anything new (resource_essence), and its status."""
    pods_ready: set[tuple[str, str]] = field(default_factory=set)
    """The fleets' pods whose last watch event showed them running and ready."""
    pass_threads: int = RECONCILE_THREADS
    active_passes: int = field(default_factory=passes.active_passes)
    pool: ThreadPoolExecutor = field(init=False)
    slots: threading.Semaphore = field(init=False)

    def __post_init__(self) -> None:
        self.pool = ThreadPoolExecutor(max_workers=self.pass_threads, thread_name_prefix="pass")
        self.slots = threading.Semaphore(self.active_passes)

    async def run_pass(self, function: Any, *args: Any) -> Any:
        """`function(*args)` on a pass thread once a slot is free (passes.py), with this task's context
        (the fleet its log lines name)."""
        context = contextvars.copy_context()
        call = functools.partial(context.run, passes.run_in_slot, self.slots, function, *args)
        return await asyncio.get_running_loop().run_in_executor(self.pool, call)

    def poke(
        self, namespace: str | None, name: str | None, *, urgent: bool = True, settled: bool = False
    ) -> None:
        """`urgent` False: a child (a pod, the StatefulSet) changed, not the resource; `settled`: a pod
        became ready, stopped being ready, or went away."""
        trigger = self.triggers.get((namespace or "", name or ""))
        if trigger is not None:
            trigger.set(urgent=urgent, settled=settled)

    def pod_settled(self, namespace: str | None, name: str, pod: Mapping[str, Any], gone: bool) -> bool:
        """Notes a pod's watch event: whether its readiness changed, or it went away."""
        key, ready = (namespace or "", name), not gone and running_and_ready(pod)
        was_ready = key in self.pods_ready
        if ready:
            self.pods_ready.add(key)
        else:
            self.pods_ready.discard(key)
        return gone or ready != was_ready

    def poke_namespace(self, namespace: str | None) -> None:
        """Every fleet of one namespace (None: of every namespace)."""
        for (ns, _), trigger in list(self.triggers.items()):
            if namespace is None or ns == namespace:
                trigger.set()


def settings() -> kopf.OperatorSettings:
    s = kopf.OperatorSettings()
    s.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix=PREFIX)
    s.persistence.diffbase_storage = NoDiffBase()
    s.persistence.finalizer = f"{PREFIX}/finalizer"
    s.posting.level = logging.WARNING
    s.posting.reporting_component = COMPONENT
    s.watching.connect_timeout = 10
    s.watching.server_timeout = 120
    s.networking.request_timeout = 30
    return s


def _claims_snapshot(index: Any) -> dict[str, list[Claim]]:
    return {key: list(store) for key, store in index.items()}


TENANCY_INDEX_KEY = "policies"


def _tenancy_snapshot(memo: OperatorMemo, indexes: dict[str, Any], namespaces: set[str]) -> Tenancy | None:
    """The policies and the labels of `namespaces`, copied in the event loop (kopf changes the indexes
    there) for a pass that runs in a thread; None when tenancy is not enforced."""
    if not memo.ctx.tenancy_enforced:
        return None
    policies: list[TenancyPolicy] = list(indexes["tenancy_policies"].get(TENANCY_INDEX_KEY, ()))
    labels = indexes["namespace_labels"]
    found = {ns: next(iter(labels[ns])) for ns in namespaces if ns in labels}
    return Tenancy.of(policies, found)


def _pass_inputs(
    memo: OperatorMemo, namespace: str, indexes: dict[str, Any]
) -> tuple[dict[str, list[Claim]], Tenancy | None]:
    claims = _claims_snapshot(indexes["group_claims"])
    concerned = {namespace} | {c.namespace for found in claims.values() for c in found}
    return claims, _tenancy_snapshot(memo, indexes, concerned)


@kopf.on.login(registry=registry)
def login(**kwargs: Any) -> kopf.ConnectionInfo | None:
    return kopf.login_via_client(**kwargs)


@kopf.index(GROUP, VERSION, PLURAL, registry=registry)
def group_claims(body: kopf.Body, memo: OperatorMemo, **_: Any) -> dict[str, Claim] | None:
    found = claim_of(body, memo.ctx.defaults)
    return {found[0]: found[1]} if found else None


@kopf.daemon(GROUP, VERSION, PLURAL, registry=registry, cancellation_backoff=5.0, cancellation_timeout=10.0)
async def fleet(
    namespace: str | None,
    name: str,
    memo: Any,
    stopped: kopf.DaemonStopped,
    logger: Logger,
    **kwargs: Any,
) -> None:
    key = (namespace or "", name)
    logs.set_fleet(*key, str((kwargs.get("spec") or {}).get("groupId") or f"{key[0]}.{name}"))
    trigger = memo.triggers.setdefault(key, Wake())
    try:
        while not stopped:
            trigger.clear()
            follow = Follow.EVERY_CHANGE  # a pass that failed: whatever changes, try again soon
            try:
                claims, tenancy = _pass_inputs(memo, namespace or "", kwargs)
                follow = await memo.run_pass(reconcile, memo.ctx, namespace or "", name, claims, tenancy)
            except Exception as exc:
                logger.warning(
                    "reconcile failed (retrying in %.0fs): %s", memo.interval_s, exc, exc_info=True
                )
            await trigger.next_pass(stopped, memo.interval_s, follow)
    finally:
        memo.triggers.pop(key, None)
        memo.seen.pop(key, None)


async def _wait(trigger: asyncio.Event, stopped: kopf.DaemonStopped, timeout: float) -> None:
    """Until poked, stopped, or the interval is over."""
    poked = asyncio.ensure_future(trigger.wait())
    halted = asyncio.ensure_future(stopped.wait(timeout))
    try:
        await asyncio.wait({poked, halted}, timeout=timeout, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in (poked, halted):
            task.cancel()
        await asyncio.gather(poked, halted, return_exceptions=True)


def resource_essence(body: Mapping[str, Any]) -> str:
    """The resource as a pass reads it, but for its status: without its resourceVersion, its
    managedFields and kopf's record of the spec it handled, which change without changing anything a
    pass decides on."""
    metadata = dict(body.get("metadata") or {})
    for volatile in ("resourceVersion", "managedFields"):
        metadata.pop(volatile, None)
    annotations = dict(metadata.get("annotations") or {})
    annotations.pop(DIFFBASE_ANNOTATION, None)
    metadata["annotations"] = annotations
    rest = {field: value for field, value in body.items() if field != "status"}
    return json.dumps({**rest, "metadata": metadata}, sort_keys=True, default=str)


@kopf.on.event(GROUP, VERSION, PLURAL, registry=registry)
async def resource_changed(namespace: str | None, name: str, body: kopf.Body, memo: Any, **_: Any) -> None:
    key = (namespace or "", name)
    seen = (resource_essence(body), canonical(body.get("status")))
    before = memo.seen.get(key)
    memo.seen[key] = seen
    own = memo.ctx.own_writes
    if own.version(key, body.get("metadata", {}).get("resourceVersion")):
        return  # the status this process just wrote: the pass that wrote it has seen it
    if before is not None and seen[0] == before[0]:
        if seen[1] == before[1]:
            return  # kopf's own record of a spec change that has poked the fleet already
        if own.status(key, body.get("status")):
            return  # the same write, its event handled before the pass read the write's response
    memo.poke(namespace, name)


@kopf.on.event("", "v1", "pods", labels={MANAGED_BY_LABEL: MANAGER}, registry=registry)
async def pod_changed(
    type: str | None,
    namespace: str | None,
    name: str,
    labels: kopf.Labels,
    body: kopf.Body,
    memo: Any,
    **_: Any,
) -> None:
    settled = memo.pod_settled(namespace, name, body, gone=type == "DELETED")
    memo.poke(namespace, labels.get(GROUP_LABEL), urgent=False, settled=settled)


@kopf.on.event("apps", "v1", "statefulsets", labels={MANAGED_BY_LABEL: MANAGER}, registry=registry)
async def statefulset_changed(namespace: str | None, name: str, memo: Any, **_: Any) -> None:
    memo.poke(namespace, name, urgent=False)


@kopf.on.delete(GROUP, VERSION, PLURAL, registry=registry)
async def deleted(namespace: str | None, name: str, memo: Any, logger: Logger, **kwargs: Any) -> None:
    body = await memo.run_pass(memo.ctx.api.get_group, namespace or "", name)
    if body is None:
        return
    logs.set_fleet(namespace or "", name, str(body["spec"].get("groupId") or f"{namespace}.{name}"))
    claims, tenancy = _pass_inputs(memo, namespace or "", kwargs)
    try:
        message = await memo.run_pass(finalize, memo.ctx, body, claims, tenancy)
    except Retry as exc:
        raise kopf.TemporaryError(str(exc), delay=2) from exc
    logger.info("%s", message)


# -- tenancy -------------------------------------------------------------------------------------------------


async def _policy_changed(memo: Any, **_: Any) -> None:
    memo.poke_namespace(None)  # a policy's selector may concern any namespace


async def _namespace_changed(name: str, memo: Any, **_: Any) -> None:
    memo.poke_namespace(name)


def _policy_entry(body: kopf.Body, name: str, logger: Logger, **_: Any) -> dict[str, TenancyPolicy] | None:
    try:
        return {TENANCY_INDEX_KEY: parse_policy(body)}
    except PolicyError as exc:  # the CRD's schema keeps these out; one that slips in allows nothing
        logger.warning("ignoring %s: %s", name, exc)
        return None


def _namespace_entry(name: str, labels: kopf.Labels, **_: Any) -> dict[str, dict[str, str]]:
    return {name: dict(labels)}


def enable_tenancy() -> None:
    """Watches the policies and the namespaces' labels (the operator then needs list and watch on both,
    cluster-wide). Called once, before kopf runs."""
    kopf.index(GROUP, VERSION, TENANCY_PLURAL, registry=registry, id="tenancy_policies")(_policy_entry)
    kopf.index("", "v1", "namespaces", registry=registry, id="namespace_labels")(_namespace_entry)
    kopf.on.event(GROUP, VERSION, TENANCY_PLURAL, registry=registry)(_policy_changed)
    kopf.on.event("", "v1", "namespaces", registry=registry)(_namespace_changed)
