"""ACL filters (DescribeAcls/DeleteAcls) and CreateAcls validation, as Kafka applies them."""

from __future__ import annotations

import pytest

from staticfleet.broker.security.acl import (
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    InvalidAcl,
    PatternType,
    PermissionType,
    ResourcePattern,
    ResourceType,
    UnconstructibleAcl,
    decode,
    validate_creation,
)


def binding(
    name: str,
    pattern: PatternType = PatternType.LITERAL,
    *,
    resource: ResourceType = ResourceType.GROUP,
    principal: str = "User:alice",
    operation: AclOperation = AclOperation.READ,
    permission: PermissionType = PermissionType.ALLOW,
) -> AclBinding:
    return AclBinding(
        ResourcePattern(resource, name, pattern), AccessControlEntry(principal, "*", operation, permission)
    )


LITERAL_FOO1 = binding("foo-1")
LITERAL_STAR = binding("*")
PREFIXED_FOO = binding("foo", PatternType.PREFIXED)
LITERAL_FOO = binding("foo")
ALL = [LITERAL_FOO1, LITERAL_STAR, PREFIXED_FOO, LITERAL_FOO]


def matching(acl_filter: AclBindingFilter) -> list[AclBinding]:
    return [b for b in ALL if acl_filter.matches(b)]


def test_match_filter_finds_every_pattern_that_applies_to_the_name() -> None:
    assert matching(AclBindingFilter(name="foo-1", pattern_type=PatternType.MATCH)) == [
        LITERAL_FOO1,
        LITERAL_STAR,
        PREFIXED_FOO,
    ]


def test_any_filter_with_a_name_matches_that_exact_name_in_either_pattern_type() -> None:
    assert matching(AclBindingFilter(name="foo", pattern_type=PatternType.ANY)) == [PREFIXED_FOO, LITERAL_FOO]


def test_literal_filter_treats_star_as_a_plain_string() -> None:
    assert matching(AclBindingFilter(name="*", pattern_type=PatternType.LITERAL)) == [LITERAL_STAR]
    assert matching(AclBindingFilter(name="foo-1", pattern_type=PatternType.LITERAL)) == [LITERAL_FOO1]


def test_pattern_type_filter_without_a_name_matches_only_that_type() -> None:
    assert matching(AclBindingFilter(pattern_type=PatternType.PREFIXED)) == [PREFIXED_FOO]
    assert matching(AclBindingFilter()) == ALL
    assert matching(AclBindingFilter(pattern_type=PatternType.MATCH)) == ALL


def test_entry_fields_match_exactly_unless_any_or_null() -> None:
    deny = binding("x", operation=AclOperation.ALL, permission=PermissionType.DENY, principal="User:bob")
    assert AclBindingFilter(principal="User:bob", permission=PermissionType.DENY).matches(deny)
    assert not AclBindingFilter(operation=AclOperation.READ).matches(deny)  # no implication in filters
    assert not AclBindingFilter(resource_type=ResourceType.TOPIC).matches(deny)


def test_unknown_codes_decode_to_unknown() -> None:
    assert decode(ResourceType, 99) == ResourceType.UNKNOWN
    assert decode(AclOperation, 8) == AclOperation.DESCRIBE


def test_cluster_resource_must_be_named_kafka_cluster() -> None:
    with pytest.raises(InvalidAcl, match="The only valid name for the CLUSTER resource is kafka-cluster"):
        validate_creation(binding("foo", resource=ResourceType.CLUSTER))
    validate_creation(binding("kafka-cluster", resource=ResourceType.CLUSTER))


def test_empty_resource_name_is_invalid() -> None:
    with pytest.raises(InvalidAcl, match="Invalid empty resource name"):
        validate_creation(binding(""))


def test_unknown_values_are_invalid_with_kafkas_messages() -> None:
    with pytest.raises(InvalidAcl, match="Invalid operation UNKNOWN"):
        validate_creation(binding("g", operation=AclOperation.UNKNOWN))
    with pytest.raises(InvalidAcl, match="Could not parse principal from `alice`"):
        validate_creation(binding("g", principal="alice"))


def test_filter_values_cannot_be_created() -> None:
    with pytest.raises(UnconstructibleAcl):
        validate_creation(binding("g", PatternType.MATCH))
    with pytest.raises(UnconstructibleAcl):
        validate_creation(binding("g", operation=AclOperation.ANY))


def test_delete_filter_with_unknown_values_is_reported() -> None:
    assert AclBindingFilter(pattern_type=PatternType.UNKNOWN).unknown_part() == "Unknown patternFilter."
    assert AclBindingFilter(operation=AclOperation.UNKNOWN).unknown_part() == "Unknown entryFilter."
    assert AclBindingFilter().unknown_part() is None
