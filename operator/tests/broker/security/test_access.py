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
    assert access.allowed(AclOperation.DELETE, ResourceType.GROUP, "g") and access.cluster(AclOperation.ALTER)
    assert access.authorized_operations(ResourceType.GROUP, "g") == 3400


def test_not_requested_authorized_operations_are_integer_min() -> None:
    assert Access(None, Session()).authorized_operations(ResourceType.GROUP, "g", requested=False) == -(2**31)


def test_host_acls_match_the_session_address_in_kafkas_form() -> None:
    binding = AclBinding(
        ResourcePattern(ResourceType.GROUP, "g", PatternType.LITERAL),
        AccessControlEntry("User:a", "0:0:0:0:0:0:0:1", AclOperation.READ, PermissionType.ALLOW),
    )
    authorizer = Authorizer(AuthorizerConfig(), [binding])
    read = AclOperation.READ, ResourceType.GROUP, "g"
    assert Access(authorizer, Session.of("User:a", "::1")).allowed(*read)
    assert not Access(authorizer, Session.of("User:a", "127.0.0.1")).allowed(*read)
