"""Per-request access checks and the address form Kafka's ACL host field compares."""

from __future__ import annotations

import pytest

from staticfleet.broker.security.access import Access, Session, kafka_host
from staticfleet.broker.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclOperation,
    PatternType,
    PermissionType,
    ResourcePattern,
    ResourceType,
)
from staticfleet.broker.security.authorizer import Authorizer, AuthorizerConfig


@pytest.mark.parametrize(
    ("address", "host"),
    [
        ("127.0.0.1", "127.0.0.1"),
        ("::1", "0:0:0:0:0:0:0:1"),
        ("fe80::1%eth0", "fe80:0:0:0:0:0:0:1"),
        ("2001:db8::ff00:42:8329", "2001:db8:0:0:0:ff00:42:8329"),
        ("::ffff:10.0.0.7", "10.0.0.7"),
    ],
)
def test_addresses_are_written_as_java_writes_them(address: str, host: str) -> None:
    assert kafka_host(address) == host


def test_without_an_authorizer_everything_is_allowed_and_every_operation_is_listed() -> None:
    access = Access(None, Session())
    assert access.group(AclOperation.DELETE, "g") and access.cluster(AclOperation.ALTER)
    assert access.authorized_operations(ResourceType.GROUP, "g") == 3400


def test_not_requested_authorized_operations_are_integer_min() -> None:
    assert Access(None, Session()).authorized_operations(ResourceType.GROUP, "g", requested=False) == -(2**31)


def test_topic_creation_is_allowed_by_create_on_the_cluster_or_on_the_topic() -> None:
    def acl(resource: ResourceType, name: str) -> AclBinding:
        return AclBinding(
            ResourcePattern(resource, name, PatternType.LITERAL),
            AccessControlEntry("User:a", "*", AclOperation.CREATE, PermissionType.ALLOW),
        )

    on_topic = Access(Authorizer(AuthorizerConfig(), [acl(ResourceType.TOPIC, "t")]), Session("User:a"))
    on_cluster = Access(
        Authorizer(AuthorizerConfig(), [acl(ResourceType.CLUSTER, "kafka-cluster")]), Session("User:a")
    )
    assert on_topic.create_topic("t") and not on_topic.create_topic("u")
    assert on_cluster.create_topic("anything")


def test_host_acls_match_the_session_address_in_kafkas_form() -> None:
    binding = AclBinding(
        ResourcePattern(ResourceType.GROUP, "g", PatternType.LITERAL),
        AccessControlEntry("User:a", "0:0:0:0:0:0:0:1", AclOperation.READ, PermissionType.ALLOW),
    )
    authorizer = Authorizer(AuthorizerConfig(), [binding])
    assert Access(authorizer, Session.of("User:a", "::1")).group(AclOperation.READ, "g")
    assert not Access(authorizer, Session.of("User:a", "127.0.0.1")).group(AclOperation.READ, "g")
