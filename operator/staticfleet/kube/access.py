"""Per-fleet least privilege on a secured cluster: each fleet's own SCRAM user, the Secret its pods read
it from, and ACLs that allow exactly what a consumer of its group needs.

When the operator itself logs in with SASL (`--kafka-config`), every StaticConsumerGroup whose
`kafka.credentials` is Provisioned (the default without `kafka.sasl`) gets:

- the user `staticfleet.<namespace>.<name>` with a random password (a SCRAM credential made with
  AlterUserScramCredentials; the password lives only in the Secret),
- the Secret `<name>-kafka-user` (owned by the resource: keys `username`, `password`, `mechanism` and,
  when the operator trusts a CA, `ca.crt`), which the pods read through the KAFKA_SASL_* environment,
- the ACLs READ on its group and READ and DESCRIBE on each of its topics; with `kafka.access`, WRITE on
  its output topics and, for a Kafka Streams application, what it does with its internal topics (the
  PREFIXED `<group id>-`); nothing else.

Kafka lets any principal with READ on a group remove that group's members, so no two fleets ever share
a group (claims.py) and a fleet's user has READ on its own group only. Deleting the resource removes the
user and its ACLs; the Secret goes with the resource (garbage collection).

Everything here is pure: names, the desired ACLs, the Secret, and the rule that plans the steps.
"""

from __future__ import annotations

import base64
import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

from staticfleet.admin import AclBinding
from staticfleet.admin.client_properties import load_client_properties
from staticfleet.kube.spec import PROVISIONED, GroupSpec

USER_PREFIX = "staticfleet."
SECRET_SUFFIX = "-kafka-user"
USERNAME_KEY = "username"
PASSWORD_KEY = "password"
MECHANISM_KEY = "mechanism"
CA_KEY = "ca.crt"
DEFAULT_FLEET_MECHANISM = "SCRAM-SHA-512"
SCRAM_MECHANISMS = ("SCRAM-SHA-256", "SCRAM-SHA-512")
SCRAM_ITERATIONS = 8192
PASSWORD_BYTES = 32
CLUSTER_RESOURCE = "kafka-cluster"


@dataclass(frozen=True, slots=True)
class OperatorKafka:
    """The operator's own Kafka client settings (`--kafka-config`, a Kafka client properties file that
    a Secret mounts). Read again on every use, so a rotated Secret takes effect without a restart."""

    config_file: Path
    ca_file: Path | None = None
    """Overrides the file's ssl.truststore.location (--kafka-ca-file)."""

    def options(self) -> dict[str, object]:
        options = load_client_properties(self.config_file)
        if self.ca_file is not None:
            options["ssl_cafile"] = str(self.ca_file)
        return options

    def fleet_security(self) -> FleetSecurity | None:
        """How fleets reach the cluster when the operator provisions their users (None: the operator
        does not log in with SASL, so the cluster is taken to have no SASL to provision for)."""
        options = self.options()
        mechanism = options.get("sasl_mechanism")
        if not mechanism:
            return None
        mechanism = str(mechanism)
        ca_file = options.get("ssl_cafile")
        return FleetSecurity(
            security_protocol=str(options.get("security_protocol", "SASL_PLAINTEXT")),
            mechanism=mechanism if mechanism in SCRAM_MECHANISMS else DEFAULT_FLEET_MECHANISM,
            ca=Path(str(ca_file)).read_bytes() if ca_file else None,
        )


@dataclass(frozen=True, slots=True)
class FleetSecurity:
    """What every provisioned fleet's consumers use: the cluster's protocol, a SCRAM mechanism, and the
    CA the operator trusts (copied into each fleet's Secret)."""

    security_protocol: str
    mechanism: str
    ca: bytes | None = None


@dataclass(frozen=True, slots=True)
class FleetAccess:
    """One fleet's provisioned identity."""

    user: str
    secret_name: str
    mechanism: str
    security_protocol: str
    ca: bytes | None = None

    @property
    def principal(self) -> str:
        return f"User:{self.user}"


def fleet_user(spec: GroupSpec) -> str:
    # A namespace has no dots, so <namespace>.<name> names one resource only.
    return f"{USER_PREFIX}{spec.namespace}.{spec.name}"


def secret_name(spec: GroupSpec) -> str:
    return f"{spec.name}{SECRET_SUFFIX}"


def fleet_access(spec: GroupSpec, security: FleetSecurity | None) -> FleetAccess | None:
    """The fleet's provisioned identity, or None when the operator provisions nothing for it (no
    SASL on the operator's side, or kafka.credentials External)."""
    if security is None or spec.credentials != PROVISIONED:
        return None
    return FleetAccess(
        fleet_user(spec), secret_name(spec), security.mechanism, security.security_protocol, security.ca
    )


# What Kafka Streams does with its internal topics: creates them (CreateTopics, after DescribeConfigs of
# those that exist), writes and reads them (changelogs, repartition topics), and purges consumed
# repartition records (DeleteRecords needs DELETE).
INTERNAL_TOPIC_OPERATIONS = ("CREATE", "READ", "WRITE", "DELETE", "DESCRIBE", "DESCRIBE_CONFIGS")


def fleet_acls(spec: GroupSpec, principal: str) -> frozenset[AclBinding]:
    """Exactly what a consumer of the fleet's group needs (Kafka's StandardAuthorizer): READ on the group
    (join, sync, heartbeat, commit, leave) and READ and DESCRIBE on each topic (fetch, metadata, list
    offsets; READ implies DESCRIBE, which is also granted on its own so that a listing shows it); and
    what `kafka.access` adds: WRITE and DESCRIBE on each output topic (WRITE on any topic also lets the
    producer be idempotent, KIP-679), and the internal-topic operations on the PREFIXED `<group id>-`."""
    acls = {AclBinding("GROUP", spec.group_id, principal, "READ")}
    for topic in spec.topics:
        acls.add(AclBinding("TOPIC", topic, principal, "READ"))
        acls.add(AclBinding("TOPIC", topic, principal, "DESCRIBE"))
    for topic in spec.access.output_topics:
        acls.add(AclBinding("TOPIC", topic, principal, "WRITE"))
        acls.add(AclBinding("TOPIC", topic, principal, "DESCRIBE"))
    prefix = spec.access.internal_prefix(spec.group_id)
    if prefix is not None:
        acls.update(
            AclBinding("TOPIC", prefix, principal, op, pattern="PREFIXED") for op in INTERNAL_TOPIC_OPERATIONS
        )
    return frozenset(acls)


# What the operator itself does on a secured cluster, and the ACL each needs (Kafka's StandardAuthorizer):
#   DescribeGroups, FindCoordinator, OffsetFetch       DESCRIBE on the group (implied by READ)
#   LeaveGroup by instance id (scale-down, deletion)   READ on the group
#   JoinGroup without member id, LeaveGroup (a held    READ on the group
#     join phase, where pre-registration is refused)
#   IncrementalAlterConfigs on GROUP (pre-register)    ALTER_CONFIGS on the group
#   Metadata for the fleet's topics, ListOffsets       DESCRIBE on the topics (missing topics, lag)
#   DescribeUserScramCredentials, DescribeAcls         DESCRIBE on the cluster (implied by ALTER)
#   AlterUserScramCredentials, CreateAcls, DeleteAcls  ALTER on the cluster (fleet users and their ACLs)
#   Metadata without topics (the cluster id)           nothing
# Groups and topics are every name (`*`): which of them a fleet may claim is the tenancy policies' to
# say (tenancy.py), and they change while the operator runs. ALTER on the cluster lets its holder grant
# itself any ACL, so nothing narrower on groups and topics would hold it to less.
OPERATOR_ACLS = (
    ("CLUSTER", CLUSTER_RESOURCE, "ALTER"),
    ("CLUSTER", CLUSTER_RESOURCE, "DESCRIBE"),
    ("GROUP", "*", "READ"),
    ("GROUP", "*", "DESCRIBE"),
    ("GROUP", "*", "ALTER_CONFIGS"),
    ("TOPIC", "*", "DESCRIBE"),
)


def operator_acls(principal: str) -> frozenset[AclBinding]:
    """Exactly the ACLs the operator's own principal needs (OPERATOR_ACLS), granted at install."""
    return frozenset(AclBinding(kind, name, principal, op) for kind, name, op in OPERATOR_ACLS)


def new_password() -> str:
    return base64.urlsafe_b64encode(os.urandom(PASSWORD_BYTES)).decode().rstrip("=")


def secret_data(access: FleetAccess, password: str) -> dict[str, bytes]:
    data = {
        USERNAME_KEY: access.user.encode(),
        PASSWORD_KEY: password.encode(),
        MECHANISM_KEY: access.mechanism.encode(),
    }
    if access.ca is not None:
        data[CA_KEY] = access.ca
    return data


@dataclass(frozen=True, slots=True)
class AccessObservation:
    """What one pass reads about a provisioned fleet's identity."""

    access: FleetAccess
    secret: Mapping[str, bytes] | None = field(repr=False)
    """The Secret's data (None: there is no Secret)."""
    mechanisms: frozenset[str]
    """SCRAM mechanisms the cluster holds a credential of the user for."""
    acls: frozenset[AclBinding] | None
    """The user's ACLs; None when the cluster has no authorizer (SECURITY_DISABLED): nothing to grant."""
    candidate_password: str = field(repr=False, default="")
    """A fresh random password, used only when there is no Secret yet (keeps the planner pure)."""
    error: str | None = None
    """The cluster could not be asked (the pass provisions nothing and says why)."""

    @property
    def password(self) -> str | None:
        found = (self.secret or {}).get(PASSWORD_KEY)
        return found.decode() if found else None


@dataclass(frozen=True, slots=True)
class RetiredUser:
    """A user the operator made for this resource (status.kafkaUser) that it should no longer have:
    kafka.credentials became External. Its ACLs and credentials, as the cluster holds them now."""

    user: str
    mechanisms: frozenset[str]
    acls: frozenset[AclBinding]


@dataclass(frozen=True, slots=True)
class AccessPlan:
    """What to change, in this order: the credential before the Secret (a Secret always holds a
    password the cluster knows), then the ACLs."""

    credential_password: str | None = field(repr=False, default=None)
    secret: Mapping[str, bytes] | None = field(repr=False, default=None)
    grant: frozenset[AclBinding] = frozenset()
    revoke: frozenset[AclBinding] = frozenset()


def plan_access(obs: AccessObservation, spec: GroupSpec) -> AccessPlan:
    """Pure. A missing Secret means a new password (set on the cluster, then written to a new Secret);
    a Secret whose user the cluster does not know (a coordinator that lost its data) sets its password
    again; ACLs are made equal to fleet_acls (extra ones of the user, e.g. for a topic the fleet no
    longer reads, are revoked)."""
    if obs.error is not None:
        return AccessPlan()
    access = obs.access
    password = obs.password
    credential = None
    if password is None:
        password = credential = obs.candidate_password
    elif access.mechanism not in obs.mechanisms:
        credential = password
    desired_secret = secret_data(access, password)
    secret = desired_secret if obs.secret is None or dict(obs.secret) != desired_secret else None
    grant: frozenset[AclBinding] = frozenset()
    revoke: frozenset[AclBinding] = frozenset()
    if obs.acls is not None:
        wanted = fleet_acls(spec, access.principal)
        grant, revoke = wanted - obs.acls, obs.acls - wanted
    return AccessPlan(credential, secret, grant, revoke)
