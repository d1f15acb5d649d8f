"""Kafka's ACL vocabulary (codes as on the wire), bindings, and the filters DescribeAcls/DeleteAcls use."""

from __future__ import annotations

import enum
from dataclasses import dataclass


class ResourceType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    TOPIC = 2
    GROUP = 3
    CLUSTER = 4
    TRANSACTIONAL_ID = 5
    DELEGATION_TOKEN = 6
    USER = 7


class AclOperation(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    ALL = 2
    READ = 3
    WRITE = 4
    CREATE = 5
    DELETE = 6
    ALTER = 7
    DESCRIBE = 8
    CLUSTER_ACTION = 9
    DESCRIBE_CONFIGS = 10
    ALTER_CONFIGS = 11
    IDEMPOTENT_WRITE = 12
    CREATE_TOKENS = 13
    DESCRIBE_TOKENS = 14
    TWO_PHASE_COMMIT = 15


class PatternType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    MATCH = 2
    LITERAL = 3
    PREFIXED = 4


class PermissionType(enum.IntEnum):
    UNKNOWN = 0
    ANY = 1
    DENY = 2
    ALLOW = 3


def decode(enum_type: type[enum.IntEnum], code: int) -> enum.IntEnum:
    """A wire code as the enum; a code Kafka does not know decodes to UNKNOWN (`fromCode`)."""
    try:
        return enum_type(code)
    except ValueError:
        return enum_type(0)


WILDCARD_RESOURCE = "*"
WILDCARD_PRINCIPAL = "User:*"
WILDCARD_HOST = "*"
CLUSTER_NAME = "kafka-cluster"
ANONYMOUS = "User:ANONYMOUS"


@dataclass(frozen=True, order=True)
class ResourcePattern:
    resource_type: ResourceType
    name: str
    pattern_type: PatternType


@dataclass(frozen=True, order=True)
class AccessControlEntry:
    principal: str
    host: str
    operation: AclOperation
    permission: PermissionType


@dataclass(frozen=True, order=True)
class AclBinding:
    pattern: ResourcePattern
    entry: AccessControlEntry


@dataclass(frozen=True)
class AclBindingFilter:
    """A DescribeAcls filter or one DeleteAcls filter; None matches anything (ResourcePatternFilter and
    AccessControlEntryFilter)."""

    resource_type: ResourceType = ResourceType.ANY
    name: str | None = None
    pattern_type: PatternType = PatternType.ANY
    principal: str | None = None
    host: str | None = None
    operation: AclOperation = AclOperation.ANY
    permission: PermissionType = PermissionType.ANY

    def matches(self, binding: AclBinding) -> bool:
        return self.matches_pattern(binding.pattern) and self.matches_entry(binding.entry)

    def matches_pattern(self, pattern: ResourcePattern) -> bool:
        if self.resource_type not in (ResourceType.ANY, pattern.resource_type):
            return False
        if self.pattern_type not in (PatternType.ANY, PatternType.MATCH, pattern.pattern_type):
            return False
        if self.name is None:
            return True
        if self.pattern_type in (PatternType.ANY, PatternType.LITERAL, PatternType.PREFIXED):
            return self.name == pattern.name
        # MATCH: the patterns that would apply to a resource with this name.
        if pattern.pattern_type == PatternType.LITERAL:
            return pattern.name in (self.name, WILDCARD_RESOURCE)
        if pattern.pattern_type == PatternType.PREFIXED:
            return self.name.startswith(pattern.name)
        return False

    def matches_entry(self, entry: AccessControlEntry) -> bool:
        if self.principal is not None and self.principal != entry.principal:
            return False
        if self.host is not None and self.host != entry.host:
            return False
        if self.operation not in (AclOperation.ANY, entry.operation):
            return False
        return self.permission in (PermissionType.ANY, entry.permission)

    def unknown_part(self) -> str | None:
        """Why DeleteAcls rejects this filter (INVALID_REQUEST), if it names an UNKNOWN value."""
        if self.resource_type == ResourceType.UNKNOWN or self.pattern_type == PatternType.UNKNOWN:
            return "Unknown patternFilter."
        if self.operation == AclOperation.UNKNOWN or self.permission == PermissionType.UNKNOWN:
            return "Unknown entryFilter."
        return None


class InvalidAcl(ValueError):
    """A CreateAcls creation Kafka rejects with INVALID_REQUEST and this message."""


class UnconstructibleAcl(ValueError):
    """A creation Kafka cannot even build (filter-only values): every result of the request becomes
    UNKNOWN_SERVER_ERROR with the default message."""


def validate_creation(binding: AclBinding) -> None:
    """Kafka's checks on one creation, in its order (AclApis.handleCreateAcls, AclControlManager)."""
    pattern, entry = binding.pattern, binding.entry
    if pattern.resource_type == ResourceType.ANY or pattern.pattern_type in (
        PatternType.ANY,
        PatternType.MATCH,
    ):
        raise UnconstructibleAcl("resource pattern must not be a filter")
    if entry.operation == AclOperation.ANY or entry.permission == PermissionType.ANY:
        raise UnconstructibleAcl("access control entry must not be a filter")
    if pattern.resource_type == ResourceType.CLUSTER and pattern.name != CLUSTER_NAME:
        raise InvalidAcl("The only valid name for the CLUSTER resource is kafka-cluster")
    if not pattern.name:
        raise InvalidAcl("Invalid empty resource name")
    if pattern.resource_type == ResourceType.UNKNOWN:
        raise InvalidAcl("Invalid resourceType UNKNOWN")
    if pattern.pattern_type == PatternType.UNKNOWN:
        raise InvalidAcl("Invalid patternType UNKNOWN")
    if entry.operation == AclOperation.UNKNOWN:
        raise InvalidAcl("Invalid operation UNKNOWN")
    if entry.permission == PermissionType.UNKNOWN:
        raise InvalidAcl("Invalid permissionType UNKNOWN")
    if ":" not in entry.principal:
        raise InvalidAcl(
            f"Could not parse principal from `{entry.principal}` (no colon is present separating the "
            "principal type from the principal name)"
        )


# The operations each resource type supports, in the order Kafka checks them for KIP-430 bitfields.
SUPPORTED_OPERATIONS: dict[ResourceType, tuple[AclOperation, ...]] = {
    ResourceType.GROUP: (
        AclOperation.READ,
        AclOperation.DESCRIBE,
        AclOperation.DELETE,
        AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS,
    ),
    ResourceType.TOPIC: (
        AclOperation.READ,
        AclOperation.WRITE,
        AclOperation.CREATE,
        AclOperation.DESCRIBE,
        AclOperation.DELETE,
        AclOperation.ALTER,
        AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS,
    ),
    ResourceType.CLUSTER: (
        AclOperation.CREATE,
        AclOperation.CLUSTER_ACTION,
        AclOperation.DESCRIBE_CONFIGS,
        AclOperation.ALTER_CONFIGS,
        AclOperation.IDEMPOTENT_WRITE,
        AclOperation.ALTER,
        AclOperation.DESCRIBE,
    ),
    ResourceType.TRANSACTIONAL_ID: (AclOperation.DESCRIBE, AclOperation.WRITE, AclOperation.TWO_PHASE_COMMIT),
}

# The value of an authorized-operations field that was not requested (Integer.MIN_VALUE).
AUTHORIZED_OPERATIONS_OMITTED = -(2**31)
