"""Per-fleet least privilege on a secured cluster, on the real control plane with real consumers: the embedded
coordinator with a SASL_SSL listener, SCRAM, ACLs and an HTTP token, and Apache Kafka 4.3.1 with SCRAM and
StandardAuthorizer (the conformance suite's secured broker).

On each: the operator logs in as `staticfleet-operator` holding exactly the ACLs docs/security.md lists, as
`staticfleet operator-acls grant` (what the chart runs) sets them, with tenancy enforced; a fleet of 3
consumes with the user the operator made for it; a process holding another fleet's credentials can
neither join the first fleet's group nor remove its members (GROUP_AUTHORIZATION_FAILED); deleting a fleet
removes its user and its ACLs.
"""

from __future__ import annotations

import asyncio
import base64
import contextlib
import json
import secrets
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from conformance.certs import CertificateAuthority
from conformance.kafka_broker import GroupSettings, KafkaBroker
from conformance.security import SCRAM_SHA_512, ScramUser, SecurityProfile
from e2e.helpers import Cluster, Kubectl, Manifest, wait_until
from staticfleet.admin import GroupAdmin, KafkaConnection, KafkaErrorResponse
from staticfleet.kube.access import operator_acls

from .harness import (
    OperatorRunner,
    condition,
    fleet_manifest,
    ready_with,
    start_coordinator,
    stop_coordinator,
    wait_fleet,
)

pytestmark = pytest.mark.localcluster

OPERATOR_USER = "staticfleet-operator"
ADMIN_USER = "admin"
MESSAGES = 60


@dataclass(frozen=True)
class Secured:
    """A cluster reached over SASL_SSL with SCRAM-SHA-512; `admin` is a super user (the test's own)."""

    kind: str
    bootstrap: str
    ca_file: Path
    passwords: dict[str, str]
    coordinator_api: str | None = None
    token_file: Path | None = None

    def kafka_python(self, user: str, password: str | None = None) -> dict[str, Any]:
        return {
            "bootstrap_servers": [self.bootstrap],
            "security_protocol": "SASL_SSL",
            "sasl_mechanism": SCRAM_SHA_512,
            "sasl_plain_username": user,
            "sasl_plain_password": password or self.passwords[user],
            "ssl_cafile": str(self.ca_file),
        }

    def connection(self, user: str, password: str) -> KafkaConnection:
        return KafkaConnection(
            self.bootstrap,
            security_protocol="SASL_SSL",
            sasl_mechanism=SCRAM_SHA_512,
            sasl_username=user,
            sasl_password=password,
            ssl_cafile=str(self.ca_file),
        )

    def operator_config(self, path: Path, user: str = OPERATOR_USER) -> Path:
        path.write_text(
            "security.protocol=SASL_SSL\n"
            "sasl.mechanism=SCRAM-SHA-512\n"
            "sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required "
            f'username="{user}" password="{self.passwords[user]}";\n'
            "ssl.truststore.type=PEM\n"
            f"ssl.truststore.location={self.ca_file}\n"
        )
        return path


def _passwords() -> dict[str, str]:
    return {OPERATOR_USER: secrets.token_urlsafe(16), ADMIN_USER: secrets.token_urlsafe(16)}


@contextlib.contextmanager
def embedded(workdir: Path) -> Iterator[Secured]:
    """The embedded coordinator as the chart runs it secured: one SASL_SSL listener, SCRAM-SHA-512, the
    bootstrap users file with the operator and a super user, StandardAuthorizer, an HTTP token."""
    ca = CertificateAuthority.create(workdir / "tls")
    server = ca.server()
    passwords = _passwords()
    users = workdir / "users"
    users.write_text("".join(f"SCRAM-SHA-512=[name={u},password={p}]\n" for u, p in passwords.items()))
    token = workdir / "http-token"
    token.write_text(secrets.token_urlsafe(24))
    coordinator = start_coordinator(
        workdir,
        [
            "--sasl-enabled-mechanisms", SCRAM_SHA_512, "--users-file", str(users),
            "--authorizer", "standard", "--super-users", f"User:{ADMIN_USER}",
            "--tls-cert", str(server.cert), "--tls-key", str(server.key),
            "--http-token-file", str(token), "--group-initial-rebalance-delay-ms", "500",
        ],
        protocol="SASL_SSL",
    )  # fmt: skip
    try:
        yield Secured("staticfleet", coordinator.bootstrap, ca.cert_file, passwords, coordinator.api, token)
    finally:
        stop_coordinator(coordinator)


@contextlib.contextmanager
def apache_kafka(workdir: Path) -> Iterator[Secured]:
    """Apache Kafka 4.3.1 configured as the conformance suite's secured backend, with the operator's user."""
    passwords = _passwords()
    profile = SecurityProfile(
        mechanisms=(SCRAM_SHA_512,),
        super_users=(f"User:{ADMIN_USER}", "User:ANONYMOUS"),
        scram_users=tuple(ScramUser(u, SCRAM_SHA_512, p) for u, p in passwords.items()),
        plain_users=(),
    )
    settings = GroupSettings(
        initial_rebalance_delay_ms=500,
        min_session_timeout_ms=6_000,
        max_session_timeout_ms=300_000,
        security=profile,
    )
    broker = KafkaBroker(settings, workdir)
    asyncio.run(broker.start())
    try:
        assert broker.ca_file is not None
        yield Secured("kafka", f"127.0.0.1:{broker.listener_ports['SASL_SSL']}", broker.ca_file, passwords)
    finally:
        broker.stop()


@pytest.fixture(scope="module", params=["staticfleet", "kafka"])
def secured(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    start = embedded if request.param == "staticfleet" else apache_kafka
    with start(tmp_path_factory.mktemp(f"secured-{request.param}")) as cluster:
        yield cluster


# -- what the test does as the super user -----------------------------------------------------------------


def grant_operator(cluster: Secured, workdir: Path) -> None:
    """The operator's ACLs, exactly (docs/security.md), granted as the chart grants them: `staticfleet
    operator-acls grant` logged in as the super user."""
    admin = cluster.operator_config(workdir / "admin.properties", ADMIN_USER)
    done = subprocess.run(
        [
            sys.executable, "-m", "staticfleet.cli", "operator-acls", "grant",
            "--bootstrap-server", cluster.bootstrap, "--command-config", str(admin),
            "--principal", f"User:{OPERATOR_USER}",
        ],
        capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    with GroupAdmin(cluster.connection(ADMIN_USER, cluster.passwords[ADMIN_USER])) as admin_client:
        assert admin_client.acls_of(f"User:{OPERATOR_USER}") == operator_acls(f"User:{OPERATOR_USER}")


def create_topic_with_messages(cluster: Secured, topic: str, count: int) -> None:
    from kafka import KafkaAdminClient, KafkaProducer
    from kafka.admin import NewTopic

    admin = KafkaAdminClient(**cluster.kafka_python(ADMIN_USER))
    try:
        admin.create_topics([NewTopic(topic, 3, 1)])
    finally:
        admin.close()
    producer = KafkaProducer(**cluster.kafka_python(ADMIN_USER))
    try:
        for n in range(count):
            producer.send(topic, f"message-{n}".encode())
        producer.flush(timeout=30)
    finally:
        producer.close()


def committed(cluster: Secured, group: str) -> int:
    from kafka import KafkaAdminClient

    admin = KafkaAdminClient(**cluster.kafka_python(ADMIN_USER))
    try:
        offsets = admin.list_group_offsets(group).get(group, {})
        return sum(o.offset for o in offsets.values() if o.offset > 0)
    finally:
        admin.close()


def user_and_acls(cluster: Secured, user: str) -> tuple[bool, set[str]]:
    """Whether the cluster has a SCRAM credential for `user`, and its ACLs (as the super user sees them)."""
    with GroupAdmin(cluster.connection(ADMIN_USER, cluster.passwords[ADMIN_USER])) as admin:
        return bool(admin.scram_mechanisms(user)), {a.describe() for a in admin.acls_of(f"User:{user}")}


def fleet_secret(kubectl: Kubectl, namespace: str, name: str) -> dict[str, str]:
    secret = kubectl.get("secret", f"{name}-kafka-user", namespace)
    return {k: base64.b64decode(v).decode() for k, v in secret["data"].items()}


def fleet(name: str, replicas: int, topic: str) -> Manifest:
    """A fleet of the example consumer on the operator's default cluster (no kafka settings of its own)."""
    body = fleet_manifest(name, replicas, "unused:1", topic, sessionTimeoutMs=30_000)
    del body["spec"]["kafka"]
    return body


def join_attempt(cluster: Secured, user: str, password: str, group: str, instance: str, topic: str) -> str:
    """A static consumer with `user`'s credentials asking to join `group` as `instance`: the error it gets."""
    from confluent_kafka import Consumer, KafkaError

    errors: list[KafkaError] = []
    consumer = Consumer(
        {
            "bootstrap.servers": cluster.bootstrap,
            "security.protocol": "SASL_SSL",
            "sasl.mechanism": SCRAM_SHA_512,
            "sasl.username": user,
            "sasl.password": password,
            "ssl.ca.location": str(cluster.ca_file),
            "group.id": group,
            "group.instance.id": instance,
            "session.timeout.ms": 30_000,
            "error_cb": errors.append,
        }
    )
    try:
        consumer.subscribe([topic])
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            message = consumer.poll(0.5)
            error = message.error() if message is not None else None
            if error is not None:
                errors.append(error)
            refused = [e for e in errors if e.code() == KafkaError.GROUP_AUTHORIZATION_FAILED]
            if refused:
                return str(refused[0].name())
        return f"no authorization error within 30 s: {[e.str() for e in errors]}"
    finally:
        consumer.close()


def test_each_fleet_consumes_with_its_own_user_and_cannot_touch_another_fleets_group(
    cluster: Cluster, namespace: str, secured: Secured, operator: OperatorRunner
) -> None:
    kubectl = cluster.kubectl
    grant_operator(secured, operator.workdir)
    topics = {name: f"{namespace}.{name}" for name in ("orders", "audit")}
    for topic in topics.values():
        create_topic_with_messages(secured, topic, MESSAGES)
    operator.tenancy = "policies"
    operator.extra_args = (
        "--kafka-config", str(secured.operator_config(operator.workdir / "operator.properties")),
        "--default-bootstrap-servers", secured.bootstrap,
        *(["--default-coordinator-api", secured.coordinator_api] if secured.coordinator_api else []),
        *(["--coordinator-api-token-file", str(secured.token_file)] if secured.token_file else []),
    )  # fmt: skip
    operator.start()
    kubectl.apply(fleet("orders", 3, topics["orders"]), namespace)
    kubectl.apply(fleet("audit", 1, topics["audit"]), namespace)
    orders = wait_fleet(kubectl, namespace, "orders", ready_with(3), timeout=150, what="Ready with 3")
    wait_fleet(kubectl, namespace, "audit", ready_with(1), timeout=90, what="Ready with 1")

    # The fleet consumes with the user the operator made for it, which holds exactly its ACLs.
    orders_user = f"staticfleet.{namespace}.orders"
    assert orders["status"]["kafkaUser"] == {"name": orders_user, "secretName": "orders-kafka-user"}
    group = f"{namespace}.orders"
    wait_until(lambda: committed(secured, group) == MESSAGES, timeout=60, what="every message committed")
    assert fleet_secret(kubectl, namespace, "orders")["username"] == orders_user
    exists, acls = user_and_acls(secured, orders_user)
    assert exists
    principal = f"User:{orders_user}"
    assert acls == {
        f"ALLOW {principal} READ on GROUP {group}",
        f"ALLOW {principal} READ on TOPIC {topics['orders']}",
        f"ALLOW {principal} DESCRIBE on TOPIC {topics['orders']}",
    }
    if secured.coordinator_api:  # the operator reads the group's history with the HTTP token
        assert orders["status"]["group"]["rebalancesSource"] == "coordinator"
    assert condition(orders, "Degraded")["status"] == "False"

    # The audit fleet's credentials can neither join the orders group nor remove its members.
    audit = fleet_secret(kubectl, namespace, "audit")
    before = {m.instance_id: m.member_id for m in _members(secured, group)}
    assert sorted(before) == ["orders-0", "orders-1", "orders-2"]
    refused = join_attempt(secured, audit["username"], audit["password"], group, "orders-0", topics["orders"])
    assert refused == "GROUP_AUTHORIZATION_FAILED"
    intruder = GroupAdmin(secured.connection(audit["username"], audit["password"]))
    with intruder, pytest.raises(KafkaErrorResponse) as removal:
        intruder.remove_members(group, ["orders-0", "orders-1"])
    assert removal.value.name == "GROUP_AUTHORIZATION_FAILED"
    assert {m.instance_id: m.member_id for m in _members(secured, group)} == before

    # kafka.access adds what a Kafka Streams fleet writes and creates, and taking it away revokes it.
    audit_user = f"User:staticfleet.{namespace}.audit"
    access = {"outputTopics": [f"{namespace}.counts"], "internalTopics": True}
    patch = {"spec": {"kafka": {"access": access}}}
    kubectl.run("patch", "scg/audit", "-n", namespace, "--type=merge", "-p", json.dumps(patch))
    internal = f"{namespace}.audit-"
    streams_acls = {
        f"ALLOW {audit_user} READ on GROUP {namespace}.audit",
        f"ALLOW {audit_user} READ on TOPIC {topics['audit']}",
        f"ALLOW {audit_user} DESCRIBE on TOPIC {topics['audit']}",
        f"ALLOW {audit_user} WRITE on TOPIC {namespace}.counts",
        f"ALLOW {audit_user} DESCRIBE on TOPIC {namespace}.counts",
        *(
            f"ALLOW {audit_user} {op} on TOPIC {internal} (PREFIXED)"
            for op in ("CREATE", "READ", "WRITE", "DELETE", "DESCRIBE", "DESCRIBE_CONFIGS")
        ),
    }
    audit_name = f"staticfleet.{namespace}.audit"
    wait_until(
        lambda: user_and_acls(secured, audit_name)[1] == streams_acls, timeout=60, what="the Streams ACLs"
    )
    kubectl.run("patch", "scg/audit", "-n", namespace, "--type=json", "-p",
                json.dumps([{"op": "remove", "path": "/spec/kafka/access"}]))  # fmt: skip
    wait_until(lambda: len(user_and_acls(secured, audit_name)[1]) == 3, timeout=60, what="access revoked")

    # Deleting the fleet removes its user and its ACLs; the other fleet keeps its own.
    kubectl.run("delete", "scg/orders", "-n", namespace, "--wait=true", "--timeout=90s")
    assert user_and_acls(secured, orders_user) == (False, set())
    audit_exists, audit_acls = user_and_acls(secured, f"staticfleet.{namespace}.audit")
    assert audit_exists and len(audit_acls) == 3


def _members(cluster: Secured, group: str) -> tuple[Any, ...]:
    with GroupAdmin(cluster.connection(ADMIN_USER, cluster.passwords[ADMIN_USER])) as admin:
        return admin.describe_group(group).members
