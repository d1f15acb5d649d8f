"""An authorizer with the semantics of Kafka's StandardAuthorizer (KIP-801).

For a request by `principal` from `host` to do `operation` on the resource (type, name):
1. a principal listed in super.users may do anything;
2. the candidate ACLs are those of the same resource type whose pattern is LITERAL with the same name,
   LITERAL `*`, or PREFIXED with a prefix of the name;
3. an ACL applies when its principal is the caller or `User:*`, its host is `*` or the caller's address
   (string-equal, no DNS), and its operation is the one asked, ALL, or (ALLOW ACLs only) one that implies
   it: READ, WRITE, DELETE and ALTER imply DESCRIBE; ALTER_CONFIGS implies DESCRIBE_CONFIGS;
4. an applicable DENY wins; else an applicable ALLOW allows; else, if any candidate ACL exists at all (for
   anyone, any operation), the answer is deny; else allow.everyone.if.no.acl.found (default false).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from staticfleet.broker.security.acl import (
    SUPPORTED_OPERATIONS,
    WILDCARD_HOST,
    WILDCARD_PRINCIPAL,
    WILDCARD_RESOURCE,
    AccessControlEntry,
    AclBinding,
    AclBindingFilter,
    AclOperation,
    PatternType,
    PermissionType,
    ResourcePattern,
    ResourceType,
)

_IMPLIES_DESCRIBE = frozenset(
    {AclOperation.DESCRIBE, AclOperation.READ, AclOperation.WRITE, AclOperation.DELETE, AclOperation.ALTER}
)
_IMPLIES_DESCRIBE_CONFIGS = frozenset({AclOperation.DESCRIBE_CONFIGS, AclOperation.ALTER_CONFIGS})


def parse_super_users(value: str) -> frozenset[str]:
    """Kafka's `super.users`: principals separated by `;` (e.g. `User:admin;User:operator`)."""
    users = frozenset(part.strip() for part in value.split(";") if part.strip())
    for user in users:
        if ":" not in user:
            raise ValueError(
                f"super user {user!r} is not a principal of the form Type:name (e.g. User:{user})"
            )
    return users


@dataclass(frozen=True)
class AuthorizerConfig:
    super_users: frozenset[str] = frozenset()
    allow_everyone_if_no_acl_found: bool = False


def _applies(entry: AccessControlEntry, principal: str, host: str, operation: AclOperation) -> bool:
    if entry.principal not in (principal, WILDCARD_PRINCIPAL):
        return False
    if entry.host != WILDCARD_HOST and entry.host != host:
        return False
    if entry.operation == AclOperation.ALL:
        return True
    if entry.permission == PermissionType.ALLOW:
        if operation == AclOperation.DESCRIBE:
            return entry.operation in _IMPLIES_DESCRIBE
        if operation == AclOperation.DESCRIBE_CONFIGS:
            return entry.operation in _IMPLIES_DESCRIBE_CONFIGS
    return entry.operation == operation


class Authorizer:
    """ACLs in memory, indexed by resource pattern; decisions as StandardAuthorizer makes them."""

    def __init__(self, config: AuthorizerConfig, bindings: Iterable[AclBinding] = ()) -> None:
        self.config = config
        self._acls: dict[ResourcePattern, set[AccessControlEntry]] = {}
        # The same sets keyed by plain tuples, and the lengths PREFIXED names have per resource type:
        # every request is authorized, and building a ResourcePattern for each prefix of a name cost
        # more than the heartbeat it guarded.
        self._lookup: dict[tuple[ResourceType, PatternType, str], set[AccessControlEntry]] = {}
        self._prefix_lengths: dict[ResourceType, list[int]] = {}
        for binding in bindings:
            self.add(binding)

    # --- the ACL set

    def add(self, binding: AclBinding) -> bool:
        """Stores a binding; False if it was already there (Kafka answers NONE and keeps one copy)."""
        pattern = binding.pattern
        entries = self._acls.get(pattern)
        if entries is None:
            entries = self._acls[pattern] = set()
            self._lookup[(pattern.resource_type, pattern.pattern_type, pattern.name)] = entries
            self._index_prefixes(pattern.resource_type)
        if binding.entry in entries:
            return False
        entries.add(binding.entry)
        return True

    def remove(self, binding: AclBinding) -> bool:
        pattern = binding.pattern
        entries = self._acls.get(pattern)
        if entries is None or binding.entry not in entries:
            return False
        entries.discard(binding.entry)
        if not entries:
            del self._acls[pattern]
            del self._lookup[(pattern.resource_type, pattern.pattern_type, pattern.name)]
            self._index_prefixes(pattern.resource_type)
        return True

    def _index_prefixes(self, resource_type: ResourceType) -> None:
        self._prefix_lengths[resource_type] = sorted(
            {
                len(p.name)
                for p in self._acls
                if p.resource_type == resource_type and p.pattern_type == PatternType.PREFIXED and p.name
            }
        )

    def bindings(self, acl_filter: AclBindingFilter | None = None) -> list[AclBinding]:
        """Every binding the filter matches (all of them without one), in a stable order."""
        found = [
            AclBinding(pattern, entry)
            for pattern, entries in self._acls.items()
            for entry in entries
            if acl_filter is None or acl_filter.matches(AclBinding(pattern, entry))
        ]
        return sorted(found)

    def __len__(self) -> int:
        return sum(len(entries) for entries in self._acls.values())

    # --- decisions

    def _candidates(self, resource_type: ResourceType, name: str) -> list[set[AccessControlEntry]]:
        lookup = self._lookup
        found = []
        entries = lookup.get((resource_type, PatternType.LITERAL, name))
        if entries:
            found.append(entries)
        if name != WILDCARD_RESOURCE:  # the resource named `*` found the wildcard set already
            entries = lookup.get((resource_type, PatternType.LITERAL, WILDCARD_RESOURCE))
            if entries:
                found.append(entries)
        for end in self._prefix_lengths.get(resource_type, ()):
            if end > len(name):
                break
            entries = lookup.get((resource_type, PatternType.PREFIXED, name[:end]))
            if entries:
                found.append(entries)
        return found

    def authorize(
        self, principal: str, host: str, operation: AclOperation, resource_type: ResourceType, name: str
    ) -> bool:
        if principal in self.config.super_users:
            return True
        allowed = False
        any_acl = False
        for entries in self._candidates(resource_type, name):
            any_acl = True
            for entry in entries:
                if not _applies(entry, principal, host, operation):
                    continue
                if entry.permission == PermissionType.DENY:
                    return False
                if entry.permission == PermissionType.ALLOW:
                    allowed = True
        if allowed:
            return True
        return False if any_acl else self.config.allow_everyone_if_no_acl_found

    def authorized_operations(self, principal: str, host: str, resource_type: ResourceType, name: str) -> int:
        """The KIP-430 bitfield: bit `1 << code` for each supported operation the caller may do."""
        bits = 0
        for operation in SUPPORTED_OPERATIONS[resource_type]:
            if self.authorize(principal, host, operation, resource_type, name):
                bits |= 1 << int(operation)
        return bits
