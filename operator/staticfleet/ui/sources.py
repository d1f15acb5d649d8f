"""Where the dashboard reads from, behind one small interface (`FleetSource`):

- the Kubernetes API: the StaticConsumerGroups, their pods, Events and the StatefulSet's revisions;
- the admin path (any Kafka cluster): DescribeGroups, committed offsets, log-end offsets;
- the embedded coordinator's HTTP API, where the fleet has one: generation and rebalance history.

Each source that fails is reported in the inputs (`group_error`, `coordinator_error`, ...), never raised:
a coordinator that is down is something to show, not a reason for the page to fail.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import ssl
import threading
import time
import urllib.parse
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

import aiohttp

from staticfleet.admin import AdminError, GroupAdmin, GroupNotFound, KafkaConnection
from staticfleet.admin.model import GroupDescription, PartitionOffsets
from staticfleet.coordinator.group_view import CoordinatorGroupView
from staticfleet.kube.builders import selector_string
from staticfleet.kube.kubeapi import KubeApi, KubeError, group_path
from staticfleet.kube.observe import describe as describe_group
from staticfleet.kube.spec import GROUP, PLURAL, VERSION, GroupSpec, OperatorDefaults, SpecError, parse_group
from staticfleet.ui.history import AssignmentTracker
from staticfleet.ui.views import CoordinatorView, FleetInputs, Manifest, Rebalance

log = logging.getLogger(__name__)

COORDINATOR_API_TIMEOUT_S = 2.0


class FleetSource(Protocol):
    """What the server needs; tests give it a fake."""

    @property
    def namespaces(self) -> Sequence[str]:
        """The namespaces the operator watches (empty: all)."""
        ...

    async def list_fleets(self) -> list[Manifest]: ...

    async def get_fleet(self, namespace: str, name: str) -> Manifest | None: ...

    async def read(self, body: Manifest, *, detail: bool) -> FleetInputs: ...

    async def close(self) -> None: ...


def parse_coordinator_view(data: Mapping[str, Any]) -> CoordinatorView:
    """The coordinator's `/api/groups/{id}` (read with its own `from_json`) as the dashboard uses it."""
    view = CoordinatorGroupView.from_json(data)
    in_progress = view.rebalance_in_progress
    return CoordinatorView(
        state=view.state,
        generation=view.generation,
        leader_instance_id=view.leader_instance_id,
        rebalances=view.rebalances,
        rebalance_in_progress=None if in_progress is None else in_progress or "rebalancing",
        history=tuple(
            Rebalance(r.started_ms or None, r.completed_ms or None, r.reason, r.generation, r.members)
            for r in view.recent_rebalances
        ),
    )


@dataclass(frozen=True, slots=True)
class KafkaView:
    """What the admin path said about one group (an `*error` says why it could not)."""

    description: GroupDescription | None = None
    missing: bool = False
    error: str | None = None
    offsets: tuple[PartitionOffsets, ...] = ()
    offsets_error: str | None = None


@dataclass(frozen=True, slots=True)
class KubeDetail:
    """What a fleet's page reads from Kubernetes besides the resource it was asked for (`error` says why
    it could not)."""

    pods: list[Manifest] = field(default_factory=list)
    events: list[Manifest] = field(default_factory=list)
    revisions: list[Manifest] = field(default_factory=list)
    resource: Manifest | None = None
    """The resource as read after the Events (None if it is gone, or without the detail)."""
    error: str | None = None


class LiveSource:
    """The real sources. Kubernetes and Kafka clients are synchronous: their calls run in threads."""

    def __init__(
        self,
        kube: KubeApi,
        *,
        namespaces: Sequence[str] = (),
        defaults: OperatorDefaults | None = None,
        connect: Callable[[GroupSpec], KafkaConnection] | None = None,
        refusal: Callable[[GroupSpec], str | None] | None = None,
        api_token: Callable[[GroupSpec], str | None] | None = None,
        api_ca: Callable[[GroupSpec], str | None] | None = None,
        admin_timeout_s: float = 5.0,
        tracker: AssignmentTracker | None = None,
    ) -> None:
        self.kube = kube
        self.namespaces = list(namespaces)
        self.defaults = defaults or OperatorDefaults()
        self.connect = connect or _plain_connection
        self.refusal = refusal or (lambda spec: None)
        self.api_token = api_token or (lambda spec: None)
        self.api_ca = api_ca or (lambda spec: None)
        self.admin_timeout_s = admin_timeout_s
        self.tracker = tracker or AssignmentTracker()
        self._admins: dict[KafkaConnection, GroupAdmin] = {}
        self._guard = threading.Lock()
        self._http: aiohttp.ClientSession | None = None

    # -- Kubernetes ----------------------------------------------------------------------------------------

    async def list_fleets(self) -> list[Manifest]:
        paths = (
            [group_path(ns) for ns in self.namespaces]
            if self.namespaces
            else [f"/apis/{GROUP}/{VERSION}/{PLURAL}"]
        )
        found: list[Manifest] = []
        for path in paths:
            found.extend(await asyncio.to_thread(self.kube.list_items, path))
        return found

    async def get_fleet(self, namespace: str, name: str) -> Manifest | None:
        if self.namespaces and namespace not in self.namespaces:
            return None
        return await asyncio.to_thread(self.kube.get, group_path(namespace, name))

    def _events(self, namespace: str, name: str) -> list[Manifest]:
        selector = f"involvedObject.kind=StaticConsumerGroup,involvedObject.name={name}"
        return list(
            self.kube.request(
                "GET", f"/api/v1/namespaces/{namespace}/events", query={"fieldSelector": selector}
            ).get("items", [])
        )

    def _revisions(self, spec: GroupSpec) -> list[Manifest]:
        items = self.kube.list_items(
            f"/apis/apps/v1/namespaces/{spec.namespace}/controllerrevisions", selector_string(spec)
        )
        return [
            r
            for r in items
            if any(o.get("name") == spec.name for o in r.get("metadata", {}).get("ownerReferences") or [])
        ]

    async def _kube_detail(self, spec: GroupSpec) -> KubeDetail:
        """The pods, Events and revisions, then the resource again. The operator writes a pass's status
        before it posts the pass's Events, so a resource read after the Events holds every status those
        Events follow: a Scaled Event is never shown beside the status from before its scale."""

        def read() -> KubeDetail:
            pods = self.kube.list_pods(spec.namespace, selector_string(spec))
            events, revisions = self._events(spec.namespace, spec.name), self._revisions(spec)
            return KubeDetail(pods, events, revisions, self.kube.get(group_path(spec.namespace, spec.name)))

        try:
            return await asyncio.to_thread(read)
        except (KubeError, OSError) as exc:
            return KubeDetail(error=str(exc))

    # -- Kafka (admin path) ----------------------------------------------------------------------------------

    def _admin(self, connection: KafkaConnection) -> GroupAdmin:
        with self._guard:
            admin = self._admins.get(connection)
            if admin is None:
                admin = self._admins[connection] = GroupAdmin(connection, timeout_s=self.admin_timeout_s)
            return admin

    def _kafka(self, spec: GroupSpec) -> KafkaView:
        """DescribeGroups (ConsumerGroupDescribe for a consumer-protocol fleet), then the offsets: one
        thread, one connection."""
        try:
            admin = self._admin(self.connect(spec))
        except (SpecError, KubeError) as exc:
            return KafkaView(error=str(exc), offsets_error=str(exc))
        try:
            description = describe_group(admin, spec)  # by the fleet's protocol
        except GroupNotFound:
            description = None
        except AdminError as exc:
            return KafkaView(error=str(exc), offsets_error="the cluster did not answer")
        try:
            offsets = admin.partition_offsets(spec.group_id, spec.topics)
        except AdminError as exc:
            return KafkaView(description, missing=description is None, offsets_error=str(exc))
        return KafkaView(description, missing=description is None, offsets=offsets)

    # -- the coordinator's HTTP API --------------------------------------------------------------------------

    async def _coordinator(
        self, base: str, group_id: str, token: str | None = None, cafile: str | None = None
    ) -> tuple[CoordinatorView | None, str | None]:
        if self._http is None:
            self._http = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=COORDINATOR_API_TIMEOUT_S))
        url = f"{base.rstrip('/')}/api/groups/{urllib.parse.quote(group_id, safe='')}"
        headers = {"Authorization": f"Bearer {token}"} if token else {}
        trust = ssl.create_default_context(cafile=cafile) if cafile else True
        try:
            async with self._http.get(url, headers=headers, ssl=trust) as response:
                if response.status == 404:
                    return None, None
                if response.status != 200:
                    return None, f"coordinator API {url} answered HTTP {response.status}"
                data = await response.json()
        except (aiohttp.ClientError, TimeoutError, ValueError) as exc:
            return None, f"coordinator API {url} unreachable: {exc or type(exc).__name__}"
        return parse_coordinator_view(data), None

    # -- one fleet -------------------------------------------------------------------------------------------

    async def read(self, body: Manifest, *, detail: bool) -> FleetInputs:
        now_ms = int(time.time() * 1000)
        try:
            spec = parse_group(body, self.defaults)
        except (SpecError, KeyError, ValueError, TypeError) as exc:
            return FleetInputs(body=body, now_ms=now_ms, group_error=f"invalid resource: {exc}")
        if not spec.bootstrap_servers:
            return FleetInputs(body=body, now_ms=now_ms, group_error="no bootstrap servers")
        refused = self.refusal(spec)
        if refused is not None:  # the operator does not contact this cluster, nor does its dashboard
            return FleetInputs(body=body, now_ms=now_ms, group_error=refused)
        kafka = asyncio.to_thread(self._kafka, spec)
        coordinator = (
            self._coordinator(spec.coordinator_api, spec.group_id, self.api_token(spec), self.api_ca(spec))
            if spec.coordinator_api
            else _none_pair()
        )
        kube = self._kube_detail(spec) if detail else _no_detail()
        cluster, (view, api_error), found = await asyncio.gather(kafka, coordinator, kube)
        if found.error:
            log.info("%s/%s: %s", spec.namespace, spec.name, found.error)
        body = found.resource or body
        key = (spec.namespace, spec.name)
        self.tracker.observe(key, cluster.description, view.generation if view else None, now_ms)
        return FleetInputs(
            body=body,
            now_ms=now_ms,
            pods=found.pods,
            events=found.events,
            revisions=found.revisions,
            group=cluster.description,
            group_missing=cluster.missing,
            group_error=cluster.error,
            offsets=cluster.offsets,
            offsets_error=cluster.offsets_error,
            coordinator=view,
            coordinator_api=spec.coordinator_api,
            coordinator_error=api_error,
            observed=self.tracker.observed(key),
            moved_by_generation=self.tracker.moved_by_generation(key),
        )

    async def close(self) -> None:
        if self._http is not None:
            await self._http.close()
        with self._guard:
            admins, self._admins = list(self._admins.values()), {}
        for admin in admins:
            with contextlib.suppress(Exception):
                admin.close()


async def _none_pair() -> tuple[None, None]:
    return None, None


async def _no_detail() -> KubeDetail:
    return KubeDetail()


def _plain_connection(spec: GroupSpec) -> KafkaConnection:
    assert spec.bootstrap_servers is not None
    return KafkaConnection(
        spec.bootstrap_servers, security_protocol=spec.security_protocol, client_id="staticfleet-ui"
    )
