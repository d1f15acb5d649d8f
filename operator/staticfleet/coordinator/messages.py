"""Requests and responses of the classic group protocol, independent of any wire codec.

Field defaults follow Kafka's generated message classes, so a response built with only an error code
looks exactly like the one Kafka builds the same way. Errors are kio's `ErrorCode`, as on the wire. The
API version, where behaviour depends on it, travels in `RequestContext`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Final

from kio.schema.errors import ErrorCode

MAX_STRING_BYTES: Final = 0x7FFF
"""The longest string Kafka's protocol carries, in UTF-8 bytes: Kafka's generated readers refuse a
longer one (closing the connection) and its writers cannot write one (group ids, instance ids, member
ids; the coordinator log holds them with 2-byte lengths)."""


@dataclass(frozen=True, slots=True)
class RequestContext:
    api_version: int
    client_id: str = ""
    client_host: str = "/127.0.0.1"


@dataclass(frozen=True, slots=True)
class Protocol:
    name: str
    metadata: bytes


# --- JoinGroup -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class JoinGroupRequest:
    group_id: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    member_id: str
    group_instance_id: str | None
    protocol_type: str
    protocols: tuple[Protocol, ...]
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class JoinGroupResponseMember:
    member_id: str
    group_instance_id: str | None
    metadata: bytes


@dataclass(frozen=True, slots=True)
class JoinGroupResponse:
    error: ErrorCode = ErrorCode.none
    generation_id: int = -1
    protocol_type: str | None = None
    protocol_name: str | None = ""
    leader: str | None = ""
    skip_assignment: bool = False
    member_id: str = ""
    members: tuple[JoinGroupResponseMember, ...] = ()


# --- SyncGroup -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class SyncGroupAssignment:
    member_id: str
    assignment: bytes


@dataclass(frozen=True, slots=True)
class SyncGroupRequest:
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None = None
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignments: tuple[SyncGroupAssignment, ...] = ()


@dataclass(frozen=True, slots=True)
class SyncGroupResponse:
    error: ErrorCode = ErrorCode.none
    protocol_type: str | None = None
    protocol_name: str | None = None
    assignment: bytes = b""


# --- Heartbeat -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class HeartbeatRequest:
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None = None


@dataclass(frozen=True, slots=True)
class HeartbeatResponse:
    error: ErrorCode = ErrorCode.none


# --- LeaveGroup ------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MemberIdentity:
    member_id: str
    group_instance_id: str | None = None
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class LeaveGroupRequest:
    """Versions 0-2 carry one member id; callers normalise them to a one-element `members`."""

    group_id: str
    members: tuple[MemberIdentity, ...]


@dataclass(frozen=True, slots=True)
class LeaveMemberResponse:
    member_id: str
    group_instance_id: str | None
    error: ErrorCode = ErrorCode.none


@dataclass(frozen=True, slots=True)
class LeaveGroupResponse:
    error: ErrorCode = ErrorCode.none
    members: tuple[LeaveMemberResponse, ...] = ()

    def single_member_error(self) -> ErrorCode:
        """The one error code a v0-2 response carries: the top-level error, else the first member error."""
        if self.error:
            return self.error
        for member in self.members:
            if member.error:
                return member.error
        return ErrorCode.none


# --- OffsetCommit / OffsetFetch --------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class OffsetCommitPartition:
    partition: int
    offset: int
    leader_epoch: int = -1
    metadata: str | None = ""


@dataclass(frozen=True, slots=True)
class OffsetCommitTopic:
    name: str
    partitions: tuple[OffsetCommitPartition, ...]


@dataclass(frozen=True, slots=True)
class OffsetCommitRequest:
    group_id: str
    generation_id: int
    member_id: str
    group_instance_id: str | None
    topics: tuple[OffsetCommitTopic, ...]
    retention_time_ms: int = -1


@dataclass(frozen=True, slots=True)
class PartitionResult:
    partition: int
    error: ErrorCode = ErrorCode.none


@dataclass(frozen=True, slots=True)
class TopicResult:
    name: str
    partitions: tuple[PartitionResult, ...]


@dataclass(frozen=True, slots=True)
class OffsetCommitResponse:
    topics: tuple[TopicResult, ...]

    @staticmethod
    def all_failed(request: OffsetCommitRequest, error: ErrorCode) -> OffsetCommitResponse:
        return OffsetCommitResponse(
            tuple(
                TopicResult(t.name, tuple(PartitionResult(p.partition, error) for p in t.partitions))
                for t in request.topics
            )
        )


@dataclass(frozen=True, slots=True)
class OffsetFetchTopic:
    name: str
    partitions: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class OffsetDeleteResponse:
    """A group-level error (with no topics), or each partition's result."""

    error: ErrorCode = ErrorCode.none
    topics: tuple[TopicResult, ...] = ()


@dataclass(frozen=True, slots=True)
class OffsetFetchRequest:
    group_id: str
    topics: tuple[OffsetFetchTopic, ...] | None
    """None asks for every committed offset of the group."""
    require_stable: bool = False


@dataclass(frozen=True, slots=True)
class FetchedOffset:
    partition: int
    offset: int = -1
    leader_epoch: int = -1
    metadata: str | None = ""
    error: ErrorCode = ErrorCode.none


@dataclass(frozen=True, slots=True)
class FetchedTopic:
    name: str
    partitions: tuple[FetchedOffset, ...]


@dataclass(frozen=True, slots=True)
class OffsetFetchResponse:
    group_id: str
    topics: tuple[FetchedTopic, ...]
    error: ErrorCode = ErrorCode.none


# --- DescribeGroups / ListGroups / DeleteGroups ----------------------------------------------------


@dataclass(frozen=True, slots=True)
class DescribedMember:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    metadata: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class DescribedGroup:
    group_id: str
    error: ErrorCode = ErrorCode.none
    error_message: str | None = None
    state: str = ""
    protocol_type: str = ""
    protocol_data: str = ""
    members: tuple[DescribedMember, ...] = ()


@dataclass(frozen=True, slots=True)
class ListedGroup:
    group_id: str
    protocol_type: str
    state: str
    group_type: str = "classic"


@dataclass(frozen=True, slots=True)
class ListGroupsRequest:
    states_filter: tuple[str, ...] = ()
    types_filter: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class ListGroupsResponse:
    groups: tuple[ListedGroup, ...]
    error: ErrorCode = ErrorCode.none


@dataclass(frozen=True, slots=True)
class DeleteGroupResult:
    group_id: str
    error: ErrorCode = ErrorCode.none


@dataclass(frozen=True, slots=True)
class GroupConfigEntry:
    name: str
    value: str | None


@dataclass(frozen=True, slots=True)
class GroupConfigs:
    group_id: str
    entries: tuple[GroupConfigEntry, ...] = field(default_factory=tuple)
