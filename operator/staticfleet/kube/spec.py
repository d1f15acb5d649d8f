"""The StaticConsumerGroup resource, read into typed values with the defaults applied.

The CRD's schema and CEL rules reject invalid resources before they reach the operator; this module
still applies every default itself, so that an object written before a default existed (or read from
a test fixture) means the same thing.
"""

from __future__ import annotations

import functools
import re
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from staticfleet.admin.instance_ids import MAX_MEMBERS_PER_POD, member_index, member_instance_ids

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
# partition.assignment.strategy, in librdkafka's names. cooperative-sticky (KIP-429) stops only the
# partitions a rebalance moves; the eager ones stop every partition until the rebalance ends.
COOPERATIVE_STICKY = "cooperative-sticky"
ASSIGNMENT_STRATEGIES = ("range", "roundrobin", COOPERATIVE_STICKY)
CLASSIC_PROTOCOL, CONSUMER_PROTOCOL = "classic", "consumer"
GROUP_PROTOCOLS = (CLASSIC_PROTOCOL, CONSUMER_PROTOCOL)
IMMEDIATE = "Immediate"
AFTER_SESSION_TIMEOUT = "AfterSessionTimeout"
REMOVE_MEMBERS = "RemoveMembers"
RETAIN = "Retain"
PROVISIONED = "Provisioned"
EXTERNAL = "External"
DEFAULT_USERNAME_KEY = "username"
DEFAULT_PASSWORD_KEY = "password"
# The key of a Strimzi KafkaUser's Secret that holds the JAAS line (its user name and password).
JAAS_CONFIG_KEY = "sasl.jaas.config"

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
    username_key: str = DEFAULT_USERNAME_KEY
    password_key: str = DEFAULT_PASSWORD_KEY


@dataclass(frozen=True, slots=True)
class AccessSpec:
    """What a fleet's provisioned Kafka user may do beyond consuming its topics (spec.kafka.access)."""

    output_topics: tuple[str, ...] = ()
    """Topics the fleet writes to."""
    internal_topics: bool = False
    """The topics named `<group id>-...`, which Kafka Streams creates and uses (store changelogs,
    repartition topics): its application.id is the group id."""

    def internal_prefix(self, group_id: str) -> str | None:
        return f"{group_id}-" if self.internal_topics else None


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
    assignment_strategy: str | None
    """None: the client's default."""
    group_protocol: str
    """classic, or consumer: Kafka 4's consumer group protocol (KIP-848), with no join phase to
    pre-register in and the session, heartbeat and assignor the coordinator's."""
    instance_id_template: str
    remove_members: str
    pre_register: bool
    volume_claim_templates: tuple[Manifest, ...]
    pvc_retention: Manifest
    deletion_policy: str
    labels: Mapping[str, str] = field(default_factory=dict)
    members_per_pod: int = 1
    """Static members each pod runs (Kafka Streams: one per stream thread), named by Kafka Streams' rule
    from the pod's instance id (admin.instance_ids)."""
    credentials: str = PROVISIONED
    """Provisioned: on a secured cluster the operator makes the fleet's own SASL user and ACLs.
    External: the fleet's credentials are managed elsewhere (always so when kafka.sasl is set)."""
    access: AccessSpec = AccessSpec()

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

    @property
    def ids(self) -> InstanceIds:
        return InstanceIds(self.name, self.namespace, self.instance_id_template, self.members_per_pod)

    def instance_id(self, ordinal: int) -> str:
        """The pod's own instance id: its KAFKA_GROUP_INSTANCE_ID."""
        return self.ids.pod_id(ordinal)

    def pod_member_ids(self, ordinal: int) -> tuple[str, ...]:
        """The instance ids of the pod's members."""
        return self.ids.of_pod(ordinal)

    def member_ids(self, start: int, stop: int) -> tuple[str, ...]:
        """The instance ids of every member of the pods with ordinals start..stop-1, pod by pod."""
        return self.ids.of_pods(start, stop)


@dataclass(frozen=True, slots=True)
class MemberPlace:
    """Where an instance id belongs in a fleet: the pod's ordinal, and which of its members it is (1..n;
    None for the pod's own instance id)."""

    ordinal: int
    index: int | None


@dataclass(frozen=True, slots=True)
class InstanceIds:
    """How a fleet names its static members: each pod's own instance id from instanceIdTemplate (what
    KAFKA_GROUP_INSTANCE_ID carries) and, with several members per pod, theirs made from it by Kafka
    Streams' rule, `<pod's id>-<k>` for k in 1..membersPerPod."""

    name: str
    namespace: str
    template: str = DEFAULT_INSTANCE_ID_TEMPLATE
    members_per_pod: int = 1

    def pod_id(self, ordinal: int) -> str:
        return render_instance_id(self.template, self.name, self.namespace, ordinal)

    def of_pod(self, ordinal: int) -> tuple[str, ...]:
        return member_instance_ids(self.pod_id(ordinal), self.members_per_pod)

    def of_pods(self, start: int, stop: int) -> tuple[str, ...]:
        return tuple(i for ordinal in range(start, stop) for i in self.of_pod(ordinal))

    def locate(self, instance_id: str) -> MemberPlace | None:
        """The pod (and member) an instance id names under this fleet's template, whatever the number of
        members per pod: `orders-3` is pod 3's own id, `orders-3-2` its second member. None when the id
        is not one of this fleet's."""
        found = _id_pattern(self.template, self.name, self.namespace).fullmatch(instance_id)
        if found is None:
            return None
        ordinal = int(found.group(1))
        base = self.pod_id(ordinal)
        if instance_id == base:
            return MemberPlace(ordinal, None)
        index = member_index(instance_id, base)
        return MemberPlace(ordinal, index) if index is not None else None

    def expects(self, place: MemberPlace, replicas: int) -> bool:
        """Whether a fleet of `replicas` pods has this member."""
        if place.ordinal >= replicas:
            return False
        if self.members_per_pod == 1:
            return place.index is None
        return place.index is not None and place.index <= self.members_per_pod


@functools.lru_cache(maxsize=256)
def _id_pattern(template: str, name: str, namespace: str) -> re.Pattern[str]:
    """A pattern for the template's ids with any ordinal (group 1), followed by any member suffix."""
    parts = []
    for piece in re.split(r"(\{pod\}|\{ordinal\}|\{name\}|\{namespace\})", template):
        if piece == "{pod}":
            parts.append(re.escape(f"{name}-") + r"([0-9]+)")
        elif piece == "{ordinal}":
            parts.append(r"([0-9]+)")
        elif piece == "{name}":
            parts.append(re.escape(name))
        elif piece == "{namespace}":
            parts.append(re.escape(namespace))
        else:
            parts.append(re.escape(piece))
    return re.compile("".join(parts) + r"(?:-[0-9]+)?")


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
            username_key=str(sasl_spec.get("usernameKey", DEFAULT_USERNAME_KEY)),
            password_key=str(sasl_spec.get("passwordKey", DEFAULT_PASSWORD_KEY)),
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
    access = _access(kafka.get("access"), credentials)
    scale_down = spec.get("scaleDown", {}) or {}
    scale_up = spec.get("scaleUp", {}) or {}
    session = _int(spec.get("sessionTimeoutMs"), DEFAULT_SESSION_TIMEOUT_MS)
    assert session is not None
    pre_register = bool(scale_up.get("preRegister", True))
    members_per_pod = int(spec.get("membersPerPod", 1))
    if not 1 <= members_per_pod <= MAX_MEMBERS_PER_POD:
        raise SpecError(
            f"spec.membersPerPod must be between 1 and {MAX_MEMBERS_PER_POD}, not {members_per_pod}"
        )
    strategy = spec.get("assignmentStrategy")
    if strategy is not None and strategy not in ASSIGNMENT_STRATEGIES:
        known = ", ".join(ASSIGNMENT_STRATEGIES)
        raise SpecError(f"spec.assignmentStrategy must be one of {known}, not {strategy}")
    protocol = str(spec.get("groupProtocol") or CLASSIC_PROTOCOL)
    if protocol not in GROUP_PROTOCOLS:
        raise SpecError(f"spec.groupProtocol must be one of {', '.join(GROUP_PROTOCOLS)}, not {protocol}")
    if protocol == CONSUMER_PROTOCOL:
        if strategy is not None or spec.get("heartbeatIntervalMs") is not None:
            raise SpecError(
                "with groupProtocol consumer the coordinator assigns partitions and sets the heartbeat: "
                "leave assignmentStrategy and heartbeatIntervalMs unset"
            )
        # No join phase to pre-register in: a new member joins with its own heartbeat.
        pre_register = False
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
        assignment_strategy=None if strategy is None else str(strategy),
        group_protocol=protocol,
        instance_id_template=str(spec.get("instanceIdTemplate") or DEFAULT_INSTANCE_ID_TEMPLATE),
        remove_members=str(scale_down.get("removeMembers", IMMEDIATE)),
        pre_register=pre_register,
        volume_claim_templates=tuple(spec.get("volumeClaimTemplates", []) or []),
        pvc_retention=dict(spec.get("persistentVolumeClaimRetentionPolicy", {}) or {}),
        deletion_policy=str(spec.get("deletionPolicy", REMOVE_MEMBERS)),
        labels=dict(meta.get("labels", {}) or {}),
        credentials=credentials,
        members_per_pod=members_per_pod,
        access=access,
    )


def _access(body: Any, credentials: str) -> AccessSpec:
    if not body:
        return AccessSpec()
    if credentials != PROVISIONED:
        raise SpecError(
            "kafka.access says what the operator grants the fleet's provisioned user: with "
            "kafka.credentials External it grants nothing, so remove kafka.access"
        )
    return AccessSpec(
        output_topics=tuple(str(t) for t in body.get("outputTopics", []) or []),
        internal_topics=bool(body.get("internalTopics", False)),
    )
