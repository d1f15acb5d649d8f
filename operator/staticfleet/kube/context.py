"""What every reconcile pass shares: the API client, the admin connections, per-resource locks, the
TLS files and the Event sink. Each concern is its own small class; OperatorContext only holds them."""

from __future__ import annotations

import dataclasses
import hashlib
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import timedelta
from pathlib import Path
from secrets import token_bytes
from typing import Any, Protocol, cast

from staticfleet.admin import GroupAdmin, KafkaConnection
from staticfleet.kube import departure
from staticfleet.kube.access import OperatorKafka
from staticfleet.kube.applied import AppliedChildren
from staticfleet.kube.fleetstatus import EventSpec
from staticfleet.kube.join_hold import HoldWatcher, watch_in_thread
from staticfleet.kube.kubeapi import KubeApi
from staticfleet.kube.lag_reads import LagReads
from staticfleet.kube.limits import Limits
from staticfleet.kube.metrics import OperatorMetrics
from staticfleet.kube.own_writes import OwnStatusWrites
from staticfleet.kube.scaling import DEFAULT_STEP_TIMEOUT
from staticfleet.kube.secrets import SecretFiles
from staticfleet.kube.spec import GroupSpec, OperatorDefaults


class ObjectLocks:
    """One lock per resource, so that the periodic pass and the deletion never run at once."""

    def __init__(self) -> None:
        self._locks: dict[tuple[str, str], threading.Lock] = {}
        self._guard = threading.Lock()

    def __call__(self, namespace: str, name: str) -> threading.Lock:
        with self._guard:
            return self._locks.setdefault((namespace, name), threading.Lock())

    def forget(self, namespace: str, name: str) -> None:
        with self._guard:
            self._locks.pop((namespace, name), None)


def _identity(connection: KafkaConnection) -> KafkaConnection:
    """The connection without its password: who connects where, not with which secret."""
    return dataclasses.replace(connection, sasl_password=None)


def _fingerprint(connection: KafkaConnection) -> str:
    return hashlib.sha256((connection.sasl_password or "").encode()).hexdigest()


class AdminCache:
    """One admin client per cluster identity. The key holds no password: a rotated password replaces
    the cached client (the old one is closed) instead of adding a new entry."""

    def __init__(self, factory: Callable[[KafkaConnection], GroupAdmin]) -> None:
        self._factory = factory
        self._admins: dict[KafkaConnection, tuple[str, GroupAdmin]] = {}
        self._guard = threading.Lock()

    def __call__(self, connection: KafkaConnection) -> GroupAdmin:
        key, fingerprint = _identity(connection), _fingerprint(connection)
        stale = None
        with self._guard:
            found = self._admins.get(key)
            if found is not None and found[0] == fingerprint:
                return found[1]
            if found is not None:
                stale = found[1]
            admin = self._factory(connection)
            self._admins[key] = (fingerprint, admin)
        if stale is not None:
            stale.close()
        return admin

    def __len__(self) -> int:
        return len(self._admins)

    def close(self) -> None:
        with self._guard:
            admins, self._admins = [a for _, a in self._admins.values()], {}
        for admin in admins:
            admin.close()


class EventSink(Protocol):
    def __call__(self, body: Mapping[str, Any], event: EventSpec) -> None: ...


def kopf_events(body: Mapping[str, Any], event: EventSpec) -> None:
    """Events through kopf's poster (queued, retried, attributed to the operator's component)."""
    import kopf

    kopf.event(
        kopf.Body(cast(kopf.RawBody, dict(body))), type=event.type, reason=event.reason, message=event.message
    )


@dataclass
class OperatorContext:
    api: KubeApi
    defaults: OperatorDefaults
    metrics: OperatorMetrics
    admin_timeout_s: float = 5.0
    events: EventSink = kopf_events
    locks: ObjectLocks = field(default_factory=ObjectLocks)
    secret_files: SecretFiles = field(default_factory=SecretFiles)
    limits: Limits = field(default_factory=Limits)
    step_timeout: timedelta = DEFAULT_STEP_TIMEOUT
    """How long a scale-down phase may wait on pods or the coordinator before it counts as blocked."""
    kafka: OperatorKafka | None = None
    """The operator's own Kafka login (--kafka-config); with SASL in it, fleets get their own users."""
    api_token_file: Path | None = None
    """The default coordinator's HTTP bearer token (--coordinator-api-token-file)."""
    tenancy_enforced: bool = False
    """Fleets may claim only the topics and group ids their namespace's tenancy allows (tenancy.py)."""
    api_ca_file: Path | None = None
    """The CA that signed the default coordinator's HTTPS certificate (--coordinator-api-ca-file)."""
    hold_watcher: HoldWatcher = watch_in_thread
    """Releases a held join phase once every new instance has joined (join_hold.py)."""
    admins: AdminCache = field(init=False)
    conflicts: dict[tuple[str, str], str] = field(default_factory=dict)
    """The apply conflict last reported per resource (namespace, name): each is reported once."""
    applied: AppliedChildren = field(default_factory=AppliedChildren)
    """The children last applied per resource: a pass at rest applies nothing (applied.py)."""
    lag_reads: LagReads = field(default_factory=LagReads)
    """When each fleet's lag was last read: at most every LAG_REFRESH_S (lag_reads.py)."""
    own_writes: OwnStatusWrites = field(default_factory=OwnStatusWrites)
    """The status writes this process made per resource: their watch events need no pass (own_writes.py)."""
    departure_signing_key: bytes = field(default_factory=lambda: token_bytes(32), repr=False)
    """What each fleet's departure key is derived from (--departure-signing-key-file); every replica of
    the operator must have the same one. Without the file: one of this process's own."""

    def __post_init__(self) -> None:
        self.admins = AdminCache(lambda c: GroupAdmin(c, timeout_s=self.admin_timeout_s))

    def admin(self, connection: KafkaConnection) -> GroupAdmin:
        return self.admins(connection)

    def departure_key(self, spec: GroupSpec) -> str:
        return departure.fleet_key(self.departure_signing_key, spec.namespace, spec.name, spec.uid)

    def own_options(self) -> dict[str, object] | None:
        """The operator's own connection settings, read again (a rotated Secret applies at once)."""
        return self.kafka.options() if self.kafka is not None else None

    def api_token(self, spec: GroupSpec) -> str | None:
        """The bearer token for the resource's coordinator API: only ever sent to the operator's own
        default coordinator (read again each time, so a rotated Secret applies at once)."""
        default = (self.defaults.coordinator_api or "").rstrip("/")
        if self.api_token_file is None or not default or spec.coordinator_api != default:
            return None
        return self.api_token_file.read_text().strip() or None

    def api_ca(self, spec: GroupSpec) -> str | None:
        """The CA file to verify the resource's coordinator API with: the operator's own for its default
        coordinator, else the system's trust store (None)."""
        default = (self.defaults.coordinator_api or "").rstrip("/")
        if self.api_ca_file is None or not default or spec.coordinator_api != default:
            return None
        return str(self.api_ca_file)

    def forget(self, namespace: str, name: str) -> None:
        """The resource is gone: drop what was kept for it."""
        self.secret_files.forget(namespace, name)
        self.locks.forget(namespace, name)
        self.conflicts.pop((namespace, name), None)
        self.applied.forget((namespace, name))
        self.lag_reads.forget((namespace, name))
        self.own_writes.forget((namespace, name))

    def close(self) -> None:
        self.admins.close()
        self.secret_files.close()
