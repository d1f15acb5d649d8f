"""Tenancy on a real kubelet, from the chart the README installs (secured, tenancy by policies): a fleet in
namespace B naming namespace A's topic gets the condition Degraded/TenancyDenied and nothing to log in
with; a StaticFleetTenancyPolicy letting B read the topic gives it a user and it consumes every message;
deleting the policy takes the user and its ACLs away in the pass that reports the condition, and the
credentials the fleet had then read nothing.

Reading with a fleet's credentials happens inside the coordinator's pod (the chart's TLS CA is there),
with the fleet's Secret as the login: what any client holding that Secret could do.
"""

from __future__ import annotations

import json
import secrets
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest

from e2e.helpers import Cluster, Kubectl, Manifest
from e2e.tests.operator.harness import condition, timing
from e2e.tests.operator.test_tenancy import denied, secret_or_none
from examples.demo.driver import stable_with
from examples.demo.incluster import KAFKA_PRELUDE, in_coordinator

from .support import (
    RELEASE,
    RELEASE_NAMESPACE,
    allow_topics,
    committed_offsets,
    create_topic,
    forget_policy,
    produce,
    readme_fleet,
    wait_explained,
)

pytestmark = pytest.mark.kind

SPY = "spy"
MESSAGES = 30
PARTITIONS = 3

# Reads a topic from the start with the credentials on stdin ({"username", "password"}): the number of
# messages, or the name of the error that stopped the read.
_READ_AS_SCRIPT = (
    KAFKA_PRELUDE
    + """
from kafka import KafkaConsumer, TopicPartition
from kafka.errors import KafkaError
login = json.loads(sys.stdin.read())
options = {**options, "sasl_username": login["username"], "sasl_password": login["password"]}
config = KafkaConnection("127.0.0.1:9092", **options).kafka_python_config(10)
try:
    consumer = KafkaConsumer(**config, consumer_timeout_ms=5000)
except KafkaError as exc:
    print(json.dumps(type(exc).__name__))
    raise SystemExit(0)
try:
    partitions = consumer.partitions_for_topic(sys.argv[1])
    if not partitions:
        print(json.dumps("no partitions visible"))
    else:
        consumer.assign([TopicPartition(sys.argv[1], p) for p in sorted(partitions)])
        consumer.seek_to_beginning()
        print(json.dumps(sum(1 for _ in consumer)))
except KafkaError as exc:
    print(json.dumps(type(exc).__name__))
finally:
    consumer.close()
"""
)

# A SCRAM user's mechanisms and ACLs, as the chart's admin sees them.
_USER_SCRIPT = (
    KAFKA_PRELUDE
    + """
from staticfleet.admin import GroupAdmin
with GroupAdmin(KafkaConnection("127.0.0.1:9092", **options), timeout_s=10) as admin:
    user = sys.argv[1]
    print(json.dumps({
        "scram": bool(admin.scram_mechanisms(user)),
        "acls": sorted(a.describe() for a in admin.acls_of("User:" + user)),
    }))
"""
)


@dataclass(frozen=True)
class Tenants:
    kubectl: Kubectl
    a: str
    b: str

    @property
    def topic(self) -> str:
        return f"{self.a}.orders"

    @property
    def spy_user(self) -> str:
        return f"staticfleet.{self.b}.{SPY}"

    def spy(self) -> Manifest:
        return self.kubectl.get("scg", SPY, self.b)

    def user(self) -> Manifest:
        found: Manifest = in_coordinator(
            self.kubectl, RELEASE, RELEASE_NAMESPACE, _USER_SCRIPT, self.spy_user, kafka=True
        )
        return found

    def credentials(self) -> dict[str, str] | None:
        return secret_or_none(self.kubectl, self.b, f"{SPY}-kafka-user")

    def read_as(self, credentials: dict[str, str]) -> int | str:
        login = json.dumps({"username": credentials["username"], "password": credentials["password"]})
        found: int | str = in_coordinator(
            self.kubectl, RELEASE, RELEASE_NAMESPACE, _READ_AS_SCRIPT, self.topic, kafka=True, stdin=login
        )
        return found

    def wait_spy(self, holds: Callable[[Manifest], bool], what: str, timeout: float = 90) -> Manifest:
        def probe() -> Manifest | None:
            body = self.kubectl.get_or_none("scg", SPY, self.b)
            return body if body is not None and holds(body) else None

        found: Manifest = wait_explained(
            self.kubectl, [self.b, RELEASE_NAMESPACE], probe, timeout=timeout, what=what
        )
        return found


@pytest.fixture
def tenants(cluster: Cluster, chart: None) -> Iterator[Tenants]:
    kubectl = cluster.kubectl
    tag = secrets.token_hex(3)
    made = Tenants(kubectl, f"kind-tenant-a-{tag}", f"kind-tenant-b-{tag}")
    for namespace in (made.a, made.b):
        kubectl.run("create", "namespace", namespace)
    try:
        yield made
    finally:
        kubectl.run("delete", "scg", SPY, "-n", made.b, "--ignore-not-found", "--timeout=120s", check=False)
        for namespace in (made.a, made.b):
            kubectl.run("delete", "namespace", namespace, "--wait=false", check=False)


def test_a_fleet_naming_another_namespaces_topic_reads_it_only_while_a_policy_allows_it(
    tenants: Tenants,
) -> None:
    kubectl, b, topic = tenants.kubectl, tenants.b, tenants.topic
    create_topic(kubectl, topic, PARTITIONS)
    produce(kubectl, topic, MESSAGES)

    # B's fleet names A's topic: refused, with nothing to log in with.
    spy = readme_fleet(replicas=1, topics=[topic])
    spy["metadata"]["name"] = SPY
    kubectl.apply(spy, b)
    body = tenants.wait_spy(denied, "TenancyDenied")
    assert f"namespace {b} may not claim topic {topic}" in condition(body, "Degraded")["message"]
    assert tenants.credentials() is None
    assert tenants.user() == {"scram": False, "acls": []}
    assert kubectl.get_or_none("statefulset", SPY, b) is None

    # Widened: a policy lets B read the topic; the fleet gets its user and consumes every message.
    policy = allow_topics(kubectl, b, topic)
    try:
        tenants.wait_spy(lambda body: stable_with(body, 1), "the spy fleet Stable with 1", timeout=240)
        group = f"{b}.{SPY}"
        wait_explained(
            kubectl,
            [b, RELEASE_NAMESPACE],
            lambda: sum(committed_offsets(kubectl, group).values()) == MESSAGES,
            timeout=120,
            what=f"{group} to commit all {MESSAGES} messages",
        )
        credentials = tenants.credentials()
        assert credentials is not None
        assert tenants.read_as(credentials) == MESSAGES
        assert f"ALLOW User:{tenants.spy_user} READ on TOPIC {topic}" in tenants.user()["acls"]
    finally:
        began = time.monotonic()
        forget_policy(kubectl, policy)

    # Narrowed: the pass that reports the condition has already taken the user and its ACLs away.
    tenants.wait_spy(denied, "TenancyDenied again")
    timing("tenancy on kind: policy deleted -> access revoked", time.monotonic() - began)
    assert tenants.user() == {"scram": False, "acls": []}, "revoked before the condition was written"
    assert tenants.read_as(credentials) != MESSAGES
    assert "kafkaUser" not in tenants.spy().get("status", {})
