"""The StaticConsumerGroup resource, read into typed values with the defaults applied.

The CRD's schema and CEL rules reject invalid resources before they reach the operator; this module
still applies every default itself, so that an object written before a default existed (or read from
a test fixture) means the same thing.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

GROUP = "staticfleet.io"
VERSION = "v1alpha1"
PLURAL = "staticconsumergroups"
KIND = "StaticConsumerGroup"
API_VERSION = f"{GROUP}/{VERSION}"

DEFAULT_SESSION_TIMEOUT_MS = 120_000
# Members learn of a rebalance from their next heartbeat, so the heartbeat interval bounds how long every
# rebalance waits for the slowest member: Kafka's clients default to 3 s. A fleet whose scale-ups are
# pre-registered heartbeats every quarter second, since a pre-registered (or, on Apache Kafka, held) join
# phase waits for every new instance anyway: a scale step's rebalance then waits at most 250 ms for the
# remaining members, and 1,000 members cost 4,000 heartbeats a second, about a tenth of what one core of
# the embedded coordinator answers. Without pre-registration a short join phase lets new pods that start
# apart cost a rebalance each, so the client default stays (bench/fleet_ops.py, docs/benchmarks.md).
DEFAULT_HEARTBEAT_INTERVAL_MS = 250
DEFAULT_INSTANCE_ID_TEMPLATE = "{pod}"
IMMEDIATE = "Immediate"
AFTER_SESSION_TIMEOUT = "AfterSessionTimeout"
REMOVE_MEMBERS = "RemoveMembers"
RETAIN = "Retain"
PROVISIONED = "Provisioned"
EXTERNAL = "External"

Manifest = dict[str, Any]


class SpecError(ValueError):
    """The resource cannot be acted on as it stands (the message says which field to fix)."""


@dataclass(frozen=True, slots=True)
class SecretKeyRef:
    secret_name: str
    key: str


@dataclass(frozen=True, slots=True)
class TlsSpec:
    secret_name: str
    ca_key: str = "ca.crt"
    cert_key: str | None = None
    key_key: str | None = None


@dataclass(frozen=True, slots=True)
class SaslSpec:
    mechanism: str
    secret_name: str
    username_key: str = "username"
    password_key: str = "password"


@dataclass(frozen=True, slots=True)
class OperatorDefaults:
    """What the operator was started with (flags or env); the Helm chart sets them."""

    bootstrap_servers: str | None = None
    coordinator_api: str | None = None


@dataclass(frozen=True, slots=True)
class GroupSpec:
    name: str
    namespace: str
    uid: str
    replicas: int
    group_id: str
    topics: tuple[str, ...]
    template: Manifest
    bootstrap_servers: str | None
    coordinator_api: str | None
    tls: TlsSpec | None
    sasl: SaslSpec | None
    session_timeout_ms: int
    rebalance_timeout_ms: int | None
    heartbeat_interval_ms: int | None
    instance_id_template: str
    remove_members: str
    pre_register: bool
    volume_claim_templates: tuple[Manifest, ...]
    pvc_retention: Manifest
    deletion_policy: str
    labels: Mapping[str, str] = field(default_factory=dict)
    credentials: str = PROVISIONED
    """Provisioned: on a secured cluster the operator makes the fleet's own SASL user and ACLs.
    External: the fleet's credentials are managed elsewhere (always so when kafka.sasl is set)."""

    @property
    def security_protocol(self) -> str:
        if self.tls and self.sasl:
            return "SASL_SSL"
        if self.tls:
            return "SSL"
        if self.sasl:
            return "SASL_PLAINTEXT"
        return "PLAINTEXT"

    def pod_name(self, ordinal: int) -> str:
        return f"{self.name}-{ordinal}"

    def instance_id(self, ordinal: int) -> str:
        return render_instance_id(self.instance_id_template, self.name, self.namespace, ordinal)

    def instance_ids(self, start: int, stop: int) -> tuple[str, ...]:
        """Instance ids of the ordinals start..stop-1."""
        return tuple(self.instance_id(i) for i in range(start, stop))


def render_instance_id(template: str, name: str, namespace: str, ordinal: int) -> str:
    return (
        template.replace("{pod}", f"{name}-{ordinal}")
        .replace("{ordinal}", str(ordinal))
        .replace("{name}", name)
        .replace("{namespace}", namespace)
    )


def _int(value: Any, default: int | None) -> int | None:
    return default if value is None else int(value)


def _heartbeat_interval(spec: Mapping[str, Any], session_ms: int, pre_register: bool) -> int | None:
    given = _int(spec.get("heartbeatIntervalMs"), None)
    if given is not None or not pre_register:
        return given
    return min(DEFAULT_HEARTBEAT_INTERVAL_MS, max(session_ms // 3, 1))


def parse_group(body: Mapping[str, Any], defaults: OperatorDefaults | None = None) -> GroupSpec:
    """Reads a StaticConsumerGroup object. Raises SpecError for what the CRD cannot express."""
    defaults = defaults or OperatorDefaults()
    meta = body.get("metadata", {})
    spec = body.get("spec", {}) or {}
    name, namespace = str(meta["name"]), str(meta.get("namespace", "default"))
    kafka = spec.get("kafka", {}) or {}
    bootstrap = kafka.get("bootstrapServers") or defaults.bootstrap_servers
    coordinator_api = kafka.get("coordinatorApi")
    if not coordinator_api and defaults.coordinator_api and not kafka.get("bootstrapServers"):
        # The operator's default API belongs to the operator's default coordinator only.
        coordinator_api = defaults.coordinator_api
    tls_spec = kafka.get("tls")
    tls = (
        TlsSpec(
            secret_name=str(tls_spec["secretName"]),
            ca_key=str(tls_spec.get("caKey", "ca.crt")),
            cert_key=tls_spec.get("certKey"),
            key_key=tls_spec.get("keyKey"),
        )
        if tls_spec
        else None
    )
    sasl_spec = kafka.get("sasl")
    sasl = (
        SaslSpec(
            mechanism=str(sasl_spec.get("mechanism", "SCRAM-SHA-512")),
            secret_name=str(sasl_spec["secretName"]),
            username_key=str(sasl_spec.get("usernameKey", "username")),
            password_key=str(sasl_spec.get("passwordKey", "password")),
        )
        if sasl_spec
        else None
    )
    credentials = str(kafka.get("credentials") or (EXTERNAL if sasl else PROVISIONED))
    if credentials not in (PROVISIONED, EXTERNAL):
        raise SpecError(f"kafka.credentials must be {PROVISIONED} or {EXTERNAL}, not {credentials}")
    if credentials == PROVISIONED and sasl is not None:
        raise SpecError(
            "kafka.credentials Provisioned means the operator makes the fleet's SASL user: remove "
            "kafka.sasl, or set kafka.credentials to External"
        )
    topics = tuple(str(t) for t in spec.get("topics", []) or [])
    if not topics:
        raise SpecError("spec.topics must list at least one topic")
    scale_down = spec.get("scaleDown", {}) or {}
    scale_up = spec.get("scaleUp", {}) or {}
    session = _int(spec.get("sessionTimeoutMs"), DEFAULT_SESSION_TIMEOUT_MS)
    assert session is not None
    pre_register = bool(scale_up.get("preRegister", True))
    return GroupSpec(
        name=name,
        namespace=namespace,
        uid=str(meta.get("uid", "")),
        replicas=int(spec.get("replicas", 1)),
        group_id=str(spec.get("groupId") or f"{namespace}.{name}"),
        topics=topics,
        template=dict(spec.get("template", {}) or {}),
        bootstrap_servers=str(bootstrap) if bootstrap else None,
        coordinator_api=str(coordinator_api).rstrip("/") if coordinator_api else None,
        tls=tls,
        sasl=sasl,
        session_timeout_ms=session,
        rebalance_timeout_ms=_int(spec.get("rebalanceTimeoutMs"), None),
        heartbeat_interval_ms=_heartbeat_interval(spec, session, pre_register),
        instance_id_template=str(spec.get("instanceIdTemplate") or DEFAULT_INSTANCE_ID_TEMPLATE),
        remove_members=str(scale_down.get("removeMembers", IMMEDIATE)),
        pre_register=pre_register,
        volume_claim_templates=tuple(spec.get("volumeClaimTemplates", []) or []),
        pvc_retention=dict(spec.get("persistentVolumeClaimRetentionPolicy", {}) or {}),
        deletion_policy=str(spec.get("deletionPolicy", REMOVE_MEMBERS)),
        labels=dict(meta.get("labels", {}) or {}),
        credentials=credentials,
    )
