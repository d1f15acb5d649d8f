"""Tenancy on the real control plane, against the secured embedded coordinator (SASL_SSL, SCRAM-SHA-512,
ACLs): the operator holds exactly its own ACLs and enforces StaticFleetTenancyPolicies.

Namespace A's fleet reads A's topic `<A>.orders`. A fleet in namespace B naming that topic gets the
condition Degraded/TenancyDenied, no Secret, no Kafka user and no ACL, and the operator leaves its group
alone. A policy that lets B read the topic provisions it on the next pass (pokes from the policy watch,
not the operator's 30 s timer), and it consumes every message with its own user; deleting the policy
removes its user and ACLs in the pass that reports the condition, and its credentials then read nothing.
"""

from __future__ import annotations

import base64
import time
from collections.abc import Iterator

import pytest

from e2e.helpers import Cluster, Kubectl, Manifest, wait_until
from examples.demo.fleet import tenancy_policy
from staticfleet.admin import AuthenticationFailed, GroupAdmin

from .harness import OperatorRunner, condition, ready_with, timing, wait_fleet
from .test_security import (
    MESSAGES,
    Secured,
    committed,
    create_topic_with_messages,
    embedded,
    fleet,
    grant_operator,
    user_and_acls,
)

pytestmark = pytest.mark.localcluster

INTERVAL_S = 30.0  # the operator's timer: the policy watch must act long before it
POLICY = "tenancy-e2e-{suffix}"


@pytest.fixture(scope="module")
def secured(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Secured]:
    with embedded(tmp_path_factory.mktemp("tenancy-coordinator")) as cluster:
        yield cluster


@pytest.fixture
def other_namespace(cluster: Cluster, namespace: str) -> Iterator[str]:
    name = f"{namespace[:50]}-b"
    cluster.kubectl.run("create", "namespace", name)
    try:
        yield name
    finally:
        cluster.kubectl.run("delete", "namespace", name, "--wait=false", check=False)


def secret_or_none(kubectl: Kubectl, namespace: str, name: str) -> dict[str, str] | None:
    found = kubectl.get_or_none("secret", name, namespace)
    if found is None:
        return None
    return {k: base64.b64decode(v).decode() for k, v in found["data"].items()}


def read_all(secured: Secured, user: str, password: str, topic: str) -> int | str:
    """Messages of `topic` read with these credentials (Metadata, ListOffsets and Fetch, no group), or
    the error that stopped the read."""
    from kafka import KafkaConsumer, TopicPartition
    from kafka.errors import KafkaError

    try:
        consumer = KafkaConsumer(
            **secured.kafka_python(user, password), consumer_timeout_ms=5_000, request_timeout_ms=10_000
        )
    except KafkaError as exc:
        return type(exc).__name__
    try:
        partitions = consumer.partitions_for_topic(topic)
        if not partitions:
            return "no partitions visible"
        consumer.assign([TopicPartition(topic, p) for p in sorted(partitions)])
        consumer.seek_to_beginning()
        return sum(1 for _ in consumer)
    except KafkaError as exc:
        return type(exc).__name__
    finally:
        consumer.close()


def login_refusal(secured: Secured, user: str, password: str) -> str | None:
    """Why the coordinator refuses these credentials' SASL login (None: it accepts them)."""
    try:
        with GroupAdmin(secured.connection(user, password), timeout_s=10) as admin:
            admin.cluster_id()
    except AuthenticationFailed as exc:
        return str(exc)
    return None


def denied(body: Manifest) -> bool:
    degraded = condition(body, "Degraded")
    return degraded.get("status") == "True" and degraded.get("reason") == "TenancyDenied"


def test_a_fleet_naming_another_namespaces_topic_gets_access_only_while_a_policy_allows_it(
    cluster: Cluster,
    namespace: str,
    other_namespace: str,
    secured: Secured,
    operator: OperatorRunner,
) -> None:
    kubectl = cluster.kubectl
    a, b = namespace, other_namespace
    topic = f"{a}.orders"
    create_topic_with_messages(secured, topic, MESSAGES)
    grant_operator(secured, operator.workdir)
    operator.tenancy = "policies"
    operator.interval_s = INTERVAL_S
    operator.extra_args = (
        "--namespace", b,
        "--kafka-config", str(secured.operator_config(operator.workdir / "operator.properties")),
        "--default-bootstrap-servers", secured.bootstrap,
    )  # fmt: skip
    operator.start()
    name = POLICY.format(suffix=b[-12:])
    try:
        # A's own fleet, on names that start with "<A>.": no policy needed.
        kubectl.apply(fleet("orders", 1, topic), a)
        wait_fleet(kubectl, a, "orders", ready_with(1), timeout=150, what="Ready with 1")
        wait_until(lambda: committed(secured, f"{a}.orders") == MESSAGES, timeout=60, what="A consumed")

        # B's fleet names A's topic: refused, with nothing provisioned.
        kubectl.apply(fleet("spy", 1, topic), b)
        body = wait_fleet(kubectl, b, "spy", denied, timeout=60, what="TenancyDenied")
        message = condition(body, "Degraded")["message"]
        assert f"namespace {b} may not claim topic {topic}" in message
        spy_user = f"staticfleet.{b}.spy"
        assert secret_or_none(kubectl, b, "spy-kafka-user") is None
        assert user_and_acls(secured, spy_user) == (False, set())
        assert kubectl.get_or_none("statefulset", "spy", b) is None
        assert "kafkaUser" not in body.get("status", {})

        # Widened: a policy lets B read the topic; the spy fleet gets its user and consumes.
        began = time.monotonic()
        kubectl.apply(tenancy_policy(name, b, [topic]), b)
        wait_until(lambda: user_and_acls(secured, spy_user)[0], timeout=60, what="the spy's user")
        granted_after = time.monotonic() - began
        timing("tenancy: policy widened -> user provisioned", granted_after)
        wait_fleet(kubectl, b, "spy", ready_with(1), timeout=150, what="Ready with 1")
        wait_until(lambda: committed(secured, f"{b}.spy") == MESSAGES, timeout=90, what="the spy consumed")
        credentials = secret_or_none(kubectl, b, "spy-kafka-user")
        assert credentials is not None
        assert read_all(secured, credentials["username"], credentials["password"], topic) == MESSAGES
        _, acls = user_and_acls(secured, spy_user)
        assert f"ALLOW User:{spy_user} READ on TOPIC {topic}" in acls

        # Narrowed: the policy goes; the same pass that reports it has already revoked the access.
        began = time.monotonic()
        kubectl.run("delete", "staticfleettenancypolicy", name, "--wait=true")
        wait_fleet(kubectl, b, "spy", denied, timeout=60, what="TenancyDenied again")
        revoked_after = time.monotonic() - began
        assert user_and_acls(secured, spy_user) == (False, set()), "revoked before the condition was written"
        timing("tenancy: policy narrowed -> access revoked", revoked_after)
        refused = login_refusal(secured, credentials["username"], credentials["password"])
        assert refused is not None and "invalid credentials with SASL mechanism SCRAM-SHA-512" in refused
        assert read_all(secured, credentials["username"], credentials["password"], topic) != MESSAGES
        assert "kafkaUser" not in kubectl.get("scg", "spy", b)["status"]
        # One pass each way, started by the policy's watch event: the timer would take up to 30 s.
        assert granted_after < 10 and revoked_after < 10, (granted_after, revoked_after)

        # A's fleet was never touched: same members, everything committed, no condition.
        a_body = kubectl.get("scg", "orders", a)
        assert condition(a_body, "Degraded")["status"] == "False"
        assert user_and_acls(secured, f"staticfleet.{a}.orders")[0]
    finally:
        kubectl.run("delete", "staticfleettenancypolicy", name, "--ignore-not-found", check=False)
        kubectl.run("delete", "scg", "--all", "-n", b, "--wait=true", "--timeout=90s", check=False)
