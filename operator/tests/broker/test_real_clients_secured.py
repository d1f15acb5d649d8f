"""Unmodified Kafka clients over SASL_SSL with SCRAM-SHA-512 on the secured backends: a static consumer of
each library (confluent-kafka, kafka-python, aiokafka) logged in as a user with READ on its group and
topic joins, consumes and commits; one without READ on its group gets the authorization error its library
raises for Kafka."""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka import KafkaAdminClient, KafkaProducer
from kafka.admin import ACL, ACLOperation, ACLPermissionType, NewTopic, ResourcePattern, ResourceType

from conformance.backends import KAFKA, STATICFLEET, Backend, make_backend, staticfleet_supports
from conformance.kafka_broker import GroupSettings
from conformance.security import SASL_SSL, SecurityProfile

from .processes import ConsumerProcess, wait_until

CLIENTS = ["confluent", "kafka-python", "aiokafka"]
PARTITIONS = 3
SECURED = GroupSettings(
    initial_rebalance_delay_ms=0,
    min_session_timeout_ms=1_000,
    max_session_timeout_ms=300_000,
    security=SecurityProfile(),
)
# The library's own name for GROUP_AUTHORIZATION_FAILED.
GROUP_DENIED = {
    "confluent": "GROUP_AUTHORIZATION_FAILED",
    "kafka-python": "GroupAuthorizationFailedError",
    "aiokafka": "GroupAuthorizationFailedError",
}
_names = itertools.count()

pytestmark = pytest.mark.filterwarnings("ignore:.*is deprecated. Use files\\(\\) instead:DeprecationWarning")


@pytest.fixture(scope="module", params=[KAFKA, STATICFLEET])
def secured(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Backend]:
    if request.param == STATICFLEET and not staticfleet_supports(SECURED):
        pytest.skip("not run: `staticfleet coordinator` has no listener, SASL and ACL settings yet")
    backend = make_backend(request.param, SECURED, tmp_path_factory.mktemp(f"clients-{request.param}"))
    asyncio.run(backend.start())
    yield backend
    backend.stop()


def superuser_admin(backend: Backend) -> KafkaAdminClient:
    """On the PLAINTEXT listener, whose User:ANONYMOUS is a super user in this layout."""
    return KafkaAdminClient(bootstrap_servers=backend.bootstrap)


def allow(backend: Backend, principal: str, operation: ACLOperation, resource: ResourcePattern) -> None:
    admin = superuser_admin(backend)
    try:
        acl = ACL(principal, "*", operation, ACLPermissionType.ALLOW, resource)
        assert not admin.create_acls([acl])["failed"]
    finally:
        admin.close()


def new_topic(backend: Backend, name: str) -> None:
    admin = superuser_admin(backend)
    try:
        admin.create_topics([NewTopic(name, PARTITIONS, 1)])
    finally:
        admin.close()


def produce(backend: Backend, topic: str, count: int) -> set[str]:
    producer = KafkaProducer(bootstrap_servers=backend.bootstrap)
    values = {f"v{i}" for i in range(count)}
    for i, value in enumerate(sorted(values)):
        producer.send(topic, value.encode(), partition=i % PARTITIONS)
    producer.flush()
    producer.close()
    return values


def committed(backend: Backend, group: str) -> dict[int, int]:
    admin = superuser_admin(backend)
    try:
        offsets = admin.list_group_offsets(group).get(group, {})
    finally:
        admin.close()
    return {tp.partition: meta.offset for tp, meta in offsets.items()}


def consumer(
    backend: Backend, client: str, group: str, topic: str, user: str, password: str
) -> ConsumerProcess:
    assert backend.ca_file is not None
    return ConsumerProcess(
        client,
        f"127.0.0.1:{backend.listener_ports[SASL_SSL]}",
        group,
        f"{group}-0",
        topic,
        15_000,
        sasl_ssl=("SCRAM-SHA-512", user, password, str(backend.ca_file)),
    )


@pytest.mark.parametrize("client", CLIENTS)
def test_static_consumer_with_read_acls_joins_consumes_and_commits_over_sasl_ssl(
    secured: Backend, client: str, tmp_path: Path
) -> None:
    n = next(_names)
    group, topic = f"secured-{client}-{n}", f"secured-{client}-{n}-topic"
    new_topic(secured, topic)
    allow(secured, "User:alice", ACLOperation.READ, ResourcePattern(ResourceType.GROUP, group))
    allow(secured, "User:alice", ACLOperation.READ, ResourcePattern(ResourceType.TOPIC, topic))
    values = produce(secured, topic, 30)
    process = consumer(secured, client, group, topic, "alice", "alice-secret")
    try:
        wait_until(
            lambda: process.assignment() == list(range(PARTITIONS)), 60, f"assignment: {process.describe()}"
        )
        wait_until(lambda: process.values() >= values, 60, f"every record: {process.describe()}")
        wait_until(lambda: sum(committed(secured, group).values()) == 30, 30, "the commits")
        assert not process.of("fatal"), process.describe()
    finally:
        process.stop()


@pytest.mark.parametrize("client", CLIENTS)
def test_consumer_without_read_on_its_group_gets_its_librarys_group_authorization_error(
    secured: Backend, client: str
) -> None:
    n = next(_names)
    group, topic = f"denied-{client}-{n}", f"denied-{client}-{n}-topic"
    new_topic(secured, topic)
    allow(secured, "User:bob", ACLOperation.READ, ResourcePattern(ResourceType.TOPIC, topic))
    process = consumer(secured, client, group, topic, "bob", "bob-secret")
    try:
        fatal = wait_until(lambda: process.of("fatal"), 60, f"an authorization error: {process.describe()}")
        assert GROUP_DENIED[client] in fatal[0].get("name", fatal[0]["error"]), process.describe()
        assert committed(secured, group) == {}
    finally:
        process.stop()
