"""What the admin path reports: plain, immutable values."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

from kio.schema.errors import ErrorCode

from staticfleet.admin.errors import error_name
from staticfleet.coordinator.consumer_group import STATIC_LEAVE_EPOCH
from staticfleet.coordinator.group import GroupState


@dataclass(frozen=True, slots=True)
class Node:
    node_id: int
    host: str
    port: int

    @property
    def address(self) -> str:
        return f"{self.host}:{self.port}"


@dataclass(frozen=True, slots=True)
class MemberDescription:
    member_id: str
    instance_id: str | None
    client_id: str
    client_host: str
    partitions: dict[str, list[int]] | None
    """Decoded consumer-protocol assignment (None when the group is not Stable or the bytes are not one)."""
    member_epoch: int | None = None
    """A consumer-protocol member's epoch (KIP-848); None for a classic group's member."""
    target_partitions: dict[str, list[int]] | None = None
    """A consumer-protocol member's target assignment, where the coordinator is moving it (None: classic)."""

    @property
    def left_statically(self) -> bool:
        """A static member of a consumer-protocol group that has left (epoch -2): the coordinator keeps its
        partitions for it until its session ends or it is removed."""
        return self.member_epoch == STATIC_LEAVE_EPOCH

    @property
    def partition_count(self) -> int:
        return sum(len(p) for p in (self.partitions or {}).values())

    def to_json(self) -> dict[str, Any]:
        return {
            "memberId": self.member_id,
            "instanceId": self.instance_id,
            "clientId": self.client_id,
            "clientHost": self.client_host,
            "partitions": self.partitions,
        }


# A consumer-protocol group (KIP-848) names its own states; Empty, Stable and Dead are the classic names.
# Assigning (a new target assignment is due) and Reconciling (members are moving to it) are, for a fleet,
# the two halves of a rebalance.
_CONSUMER_PROTOCOL_STATES = {
    "Assigning": GroupState.PREPARING_REBALANCE,
    "Reconciling": GroupState.COMPLETING_REBALANCE,
}


def group_state(text: str | None) -> GroupState | None:
    """The group state a coordinator named (DescribeGroups, ConsumerGroupDescribe, its HTTP API, an earlier
    status); None for a name that is not a group state."""
    if text in _CONSUMER_PROTOCOL_STATES:
        return _CONSUMER_PROTOCOL_STATES[text]
    try:
        return GroupState(text)
    except ValueError:
        return None


@dataclass(frozen=True, slots=True)
class GroupDescription:
    group_id: str
    state: str
    """As the coordinator named it (group_state: the state it names)."""
    protocol_type: str
    protocol: str
    members: tuple[MemberDescription, ...]
    coordinator: Node
    group_epoch: int | None = None
    """A consumer-protocol group's epoch (KIP-848): each new target assignment raises it. None: classic."""
    assignment_epoch: int | None = None
    """The group epoch of its current target assignment (consumer protocol; None: classic)."""

    @property
    def group_state(self) -> GroupState | None:
        return group_state(self.state)

    @property
    def instance_ids(self) -> frozenset[str]:
        return frozenset(m.instance_id for m in self.members if m.instance_id)

    @property
    def left_instance_ids(self) -> frozenset[str]:
        """Instance ids of the static members that have left but are kept (consumer protocol, epoch -2)."""
        return frozenset(m.instance_id for m in self.members if m.instance_id and m.left_statically)

    def to_json(self) -> dict[str, Any]:
        return {
            "groupId": self.group_id,
            "state": self.state,
            "protocolType": self.protocol_type,
            "protocol": self.protocol,
            "coordinator": {"nodeId": self.coordinator.node_id, "address": self.coordinator.address},
            "members": [m.to_json() for m in self.members],
        }


@dataclass(frozen=True, slots=True)
class MemberRemoval:
    """The coordinator's answer for one instance id of a LeaveGroup v3+ batch."""

    instance_id: str
    error_code: int

    @property
    def removed(self) -> bool:
        return self.error_code == ErrorCode.none

    @property
    def already_gone(self) -> bool:
        """UNKNOWN_MEMBER_ID for an empty member id: the group has no member with that instance id."""
        return self.error_code == ErrorCode.unknown_member_id

    @property
    def ok(self) -> bool:
        return self.removed or self.already_gone

    @property
    def outcome(self) -> str:
        if self.removed:
            return "removed"
        if self.already_gone:
            return "already gone"
        return f"failed: {error_name(self.error_code)}"


@dataclass(frozen=True, slots=True)
class RemovalReport:
    group_id: str
    results: tuple[MemberRemoval, ...] = field(default_factory=tuple)

    @property
    def ok(self) -> bool:
        return all(r.ok for r in self.results)

    @property
    def removed(self) -> tuple[str, ...]:
        return tuple(r.instance_id for r in self.results if r.removed)

    @property
    def already_gone(self) -> tuple[str, ...]:
        return tuple(r.instance_id for r in self.results if r.already_gone)

    @property
    def failed(self) -> tuple[MemberRemoval, ...]:
        return tuple(r for r in self.results if not r.ok)


@dataclass(frozen=True, slots=True)
class PartitionOffsets:
    """One partition of a group's topics: the group's committed offset and the log-end offset."""

    topic: str
    partition: int
    committed: int | None
    """None when the group never committed an offset for this partition."""
    log_end: int | None

    @property
    def lag(self) -> int | None:
        if self.committed is None or self.log_end is None:
            return None
        return max(0, self.log_end - self.committed)

    def to_json(self) -> dict[str, Any]:
        return {
            "topic": self.topic,
            "partition": self.partition,
            "committed": self.committed,
            "logEnd": self.log_end,
            "lag": self.lag,
        }


@dataclass(frozen=True, slots=True)
class LagSummary:
    """A group's lag at a glance: the total over partitions with a committed offset, and the worst one."""

    total: int
    worst: PartitionOffsets | None
    partitions: int
    uncommitted: int
    """Partitions without a committed offset (their lag is unknown, not counted in the total)."""

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "total": self.total,
            "partitions": self.partitions,
            "uncommittedPartitions": self.uncommitted,
        }
        if self.worst is not None:
            out["worstPartition"] = {
                "topic": self.worst.topic,
                "partition": self.worst.partition,
                "lag": self.worst.lag,
            }
        return out


def lag_summary(offsets: Iterable[PartitionOffsets]) -> LagSummary:
    rows = list(offsets)
    known = [r for r in rows if r.lag is not None]
    worst = max(known, key=lambda r: (r.lag or 0, r.topic, -r.partition), default=None)
    return LagSummary(
        total=sum(r.lag or 0 for r in known),
        worst=worst,
        partitions=len(rows),
        uncommitted=len(rows) - len(known),
    )


@dataclass(frozen=True, slots=True, order=True)
class AclBinding:
    """One Kafka ACL, in Kafka's own names (as `kafka-acls --list` prints them, upper case)."""

    resource_type: str
    """TOPIC, GROUP or CLUSTER."""
    name: str
    principal: str
    operation: str
    """READ, DESCRIBE, ALTER, ..."""
    pattern: str = "LITERAL"
    host: str = "*"
    permission: str = "ALLOW"

    def describe(self) -> str:
        return (
            f"{self.permission} {self.principal} {self.operation} on {self.resource_type} "
            f"{self.name}{'' if self.pattern == 'LITERAL' else f' ({self.pattern})'}"
        )
