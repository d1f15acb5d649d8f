"""One classic group: its members, its state and the transitions Kafka allows between states.

This mirrors Kafka's ClassicGroup closely (same fields, same bookkeeping) because the observable
behaviour of the protocol falls out of that bookkeeping: who counts as "awaiting join", which members
are pending sync, how the leader is chosen, which protocol wins the vote.
"""

from __future__ import annotations

from collections import deque
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass, field
from enum import Enum

from staticfleet.coordinator.consumer_protocol import subscribed_topics
from staticfleet.coordinator.errors import CoordinatorError, ErrorCode
from staticfleet.coordinator.messages import (
    JoinGroupResponse,
    JoinGroupResponseMember,
    Protocol,
    SyncGroupResponse,
)
from staticfleet.coordinator.records import GroupMetadataRecord, MemberRecord

JoinResponder = Callable[[JoinGroupResponse], None]
SyncResponder = Callable[[SyncGroupResponse], None]


class GroupState(Enum):
    EMPTY = "Empty"
    PREPARING_REBALANCE = "PreparingRebalance"
    COMPLETING_REBALANCE = "CompletingRebalance"
    STABLE = "Stable"
    DEAD = "Dead"

    def __str__(self) -> str:
        return self.value


_VALID_PREVIOUS: dict[GroupState, frozenset[GroupState]] = {
    GroupState.EMPTY: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.PREPARING_REBALANCE: frozenset(
        {GroupState.STABLE, GroupState.COMPLETING_REBALANCE, GroupState.EMPTY}
    ),
    GroupState.COMPLETING_REBALANCE: frozenset({GroupState.PREPARING_REBALANCE}),
    GroupState.STABLE: frozenset({GroupState.COMPLETING_REBALANCE}),
    GroupState.DEAD: frozenset(
        {
            GroupState.STABLE,
            GroupState.PREPARING_REBALANCE,
            GroupState.COMPLETING_REBALANCE,
            GroupState.EMPTY,
            GroupState.DEAD,
        }
    ),
}


class IllegalTransition(RuntimeError):
    pass


def java_string_hash(text: str) -> int:
    """Java's String.hashCode over UTF-16 code units, as a signed 32-bit int."""
    h = 0
    data = text.encode("utf-16-be")
    for i in range(0, len(data), 2):
        h = (31 * h + ((data[i] << 8) | data[i + 1])) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def java_hashmap_order(keys: list[str]) -> list[str]:
    """Iteration order of a java.util.HashMap holding `keys` inserted in the given order.

    Kafka picks the winning protocol with a HashMap iteration, so ties between protocols are broken
    in this order. Good for maps up to 12 entries (one table size), which covers protocol votes.
    """
    capacity = 16
    while len(keys) > capacity * 3 // 4:
        capacity *= 2

    def bucket(key: str) -> int:
        h = java_string_hash(key) & 0xFFFFFFFF
        return (h ^ (h >> 16)) & (capacity - 1)

    indexed = sorted(enumerate(keys), key=lambda item: (bucket(item[1]), item[0]))
    return [key for _, key in indexed]


@dataclass(slots=True, eq=False)
class Member:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    protocol_type: str
    protocols: tuple[Protocol, ...]
    assignment: bytes = b""
    awaiting_join: JoinResponder | None = None
    awaiting_sync: SyncResponder | None = None
    is_new: bool = False

    @property
    def is_static(self) -> bool:
        return self.group_instance_id is not None

    def metadata(self, protocol_name: str) -> bytes:
        for protocol in self.protocols:
            if protocol.name == protocol_name:
                return protocol.metadata
        raise ValueError(f"member {self.member_id} does not support protocol {protocol_name}")

    def matches(self, protocols: tuple[Protocol, ...]) -> bool:
        """Kafka compares the protocol lists in order, names and metadata bytes alike."""
        return self.protocols == protocols

    def vote(self, candidates: set[str]) -> str:
        for protocol in self.protocols:
            if protocol.name in candidates:
                return protocol.name
        raise ValueError(f"member {self.member_id} supports none of the candidate protocols")

    def has_satisfied_heartbeat(self) -> bool:
        if self.is_new:
            return False
        return self.awaiting_join is not None or self.awaiting_sync is not None


@dataclass(frozen=True, slots=True)
class RebalanceRecord:
    """A completed rebalance, kept for the HTTP API."""

    generation: int
    reason: str
    started_ms: int
    completed_ms: int
    members: int

    @property
    def duration_ms(self) -> int:
        return self.completed_ms - self.started_ms


@dataclass(slots=True, eq=False)
class ClassicGroup:
    group_id: str
    state: GroupState = GroupState.EMPTY
    previous_state: GroupState = GroupState.DEAD
    current_state_timestamp: int | None = None
    protocol_type: str | None = None
    protocol_name: str | None = None
    generation_id: int = 0
    leader_id: str | None = None
    members: dict[str, Member] = field(default_factory=dict)
    static_members: dict[str, str] = field(default_factory=dict)
    pending_join_members: set[str] = field(default_factory=set)
    num_awaiting_join: int = 0
    supported_protocols: dict[str, int] = field(default_factory=dict)
    pending_sync_members: set[str] = field(default_factory=set)
    new_member_added: bool = False
    subscribed_topics: frozenset[str] | None = None
    # staticfleet bookkeeping (not part of Kafka's group, never changes protocol answers by itself)
    rebalance_started_ms: int | None = None
    rebalance_reason: str = ""
    rebalances: deque[RebalanceRecord] = field(default_factory=lambda: deque(maxlen=20))
    rebalance_count: int = 0
    last_persisted: GroupMetadataRecord | None = None

    # --- queries -----------------------------------------------------------------------------------

    def is_in(self, state: GroupState) -> bool:
        return self.state is state

    @property
    def is_empty(self) -> bool:
        return self.state is GroupState.EMPTY

    def member(self, member_id: str) -> Member:
        return self.members[member_id]

    def is_leader(self, member_id: str) -> bool:
        return self.leader_id is not None and self.leader_id == member_id

    def static_member_id(self, instance_id: str) -> str | None:
        return self.static_members.get(instance_id)

    def is_pending_member(self, member_id: str) -> bool:
        return member_id in self.pending_join_members

    def can_rebalance(self) -> bool:
        return self.state in _VALID_PREVIOUS[GroupState.PREPARING_REBALANCE]

    def has_all_members_joined(self) -> bool:
        return len(self.members) == self.num_awaiting_join and not self.pending_join_members

    def has_received_sync_from_all_members(self) -> bool:
        return not self.pending_sync_members

    def rebalance_timeout_ms(self) -> int:
        return max((m.rebalance_timeout_ms for m in self.members.values()), default=0)

    def not_yet_rejoined(self) -> Iterator[Member]:
        return (m for m in self.members.values() if m.awaiting_join is None)

    def supports_protocols(self, protocol_type: str, protocol_names: set[str]) -> bool:
        if self.state is GroupState.EMPTY:
            return bool(protocol_type) and bool(protocol_names)
        if self.protocol_type != protocol_type:
            return False
        size = len(self.members)
        return any(self.supported_protocols.get(name, 0) == size for name in protocol_names)

    def candidate_protocols(self) -> set[str]:
        size = len(self.members)
        return {name for name, count in self.supported_protocols.items() if count == size}

    def select_protocol(self) -> str:
        if not self.members:
            raise IllegalTransition(f"cannot select a protocol for empty group {self.group_id}")
        candidates = self.candidate_protocols()
        votes: dict[str, int] = {}
        for member in self.members.values():
            name = member.vote(candidates)
            votes[name] = votes.get(name, 0) + 1
        best: str | None = None
        for name in java_hashmap_order(list(votes)):
            if best is None or votes[name] > votes[best]:
                best = name
        assert best is not None
        return best

    def current_members_for_leader(self) -> tuple[JoinGroupResponseMember, ...]:
        if self.state in (GroupState.DEAD, GroupState.PREPARING_REBALANCE):
            raise IllegalTransition(
                f"cannot list member metadata of group {self.group_id} in state {self.state}"
            )
        name = self.protocol_name
        return tuple(
            JoinGroupResponseMember(m.member_id, m.group_instance_id, m.metadata(name) if name else b"")
            for m in self.members.values()
        )

    def group_assignment(self) -> dict[str, bytes]:
        return {m.member_id: m.assignment for m in self.members.values()}

    def accepts_joining_member(self, member_id: str, max_size: int) -> bool:
        """group.max.size: whether a JoinGroup from this member id may enter the group."""
        state = self.state
        if state in (GroupState.EMPTY, GroupState.DEAD):
            return True
        if state is GroupState.PREPARING_REBALANCE:
            member = self.members.get(member_id)
            return (
                member is not None and member.awaiting_join is not None
            ) or self.num_awaiting_join < max_size
        return member_id in self.members or len(self.members) < max_size

    def expected_instances_joined(self, expected: tuple[str, ...] | None) -> bool:
        """Whether every pre-registered instance id has joined (true when none are expected)."""
        if not expected:
            return True
        static = self.static_members
        return all(instance in static for instance in expected)

    def consumer_topics(self) -> frozenset[str] | None:
        """The topics the members of a consumer group subscribe to; None if any cannot be read."""
        if self.protocol_type != "consumer" or self.protocol_name is None:
            return None
        topics: set[str] = set()
        decoded: dict[bytes, frozenset[str] | None] = {}  # members of a fleet usually send identical bytes
        for member in self.members.values():
            metadata = member.metadata(self.protocol_name)
            if metadata not in decoded:
                decoded[metadata] = subscribed_topics(metadata)
            member_topics = decoded[metadata]
            if member_topics is None:
                return None
            topics |= member_topics
        return frozenset(topics)

    def metadata_record(self, assignment: Mapping[str, bytes]) -> GroupMetadataRecord:
        """The group as Kafka's GroupMetadataValue holds it, with the given assignment."""
        name = self.protocol_name
        members = []
        for m in self.members.values():
            if name is None:
                raise IllegalTransition(f"group {self.group_id} has members but no protocol")
            members.append(
                MemberRecord(
                    member_id=m.member_id,
                    group_instance_id=m.group_instance_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    rebalance_timeout_ms=m.rebalance_timeout_ms,
                    session_timeout_ms=m.session_timeout_ms,
                    subscription=m.metadata(name),
                    assignment=assignment[m.member_id],
                )
            )
        return GroupMetadataRecord(
            group_id=self.group_id,
            protocol_type=self.protocol_type or "",
            generation=self.generation_id,
            protocol=name,
            leader=self.leader_id,
            current_state_timestamp=self.current_state_timestamp or -1,
            members=tuple(members),
        )

    def empty_record(self) -> GroupMetadataRecord:
        """The record that commits a newly created group to the log, as Kafka writes it."""
        return GroupMetadataRecord(
            group_id=self.group_id,
            protocol_type="",
            generation=0,
            protocol=None,
            leader=None,
            current_state_timestamp=self.current_state_timestamp or -1,
            members=(),
        )

    def validate_sync(
        self,
        member_id: str,
        instance_id: str | None,
        generation_id: int,
        protocol_type: str | None,
        protocol_name: str | None,
    ) -> ErrorCode | None:
        """SyncGroup's checks, in Kafka's order: identity, generation, then protocol."""
        if self.state is GroupState.DEAD:
            return ErrorCode.coordinator_not_available
        try:
            self.validate_member(member_id, instance_id)
        except CoordinatorError as exc:
            return exc.code
        if generation_id != self.generation_id:
            return ErrorCode.illegal_generation
        if _inconsistent(protocol_type, self.protocol_type) or _inconsistent(
            protocol_name, self.protocol_name
        ):
            return ErrorCode.inconsistent_group_protocol
        return None

    def validate_offset_commit(self, member_id: str, instance_id: str | None, generation_id: int) -> None:
        """OffsetCommit's checks; raises CoordinatorError with the code Kafka answers."""
        if self.state is GroupState.DEAD:
            raise CoordinatorError(ErrorCode.coordinator_not_available)
        if generation_id < 0 and self.state is GroupState.EMPTY:
            return
        if generation_id >= 0 or member_id or instance_id is not None:
            self.validate_member(member_id, instance_id)
            if generation_id != self.generation_id:
                raise CoordinatorError(ErrorCode.illegal_generation)
        elif self.state is not GroupState.EMPTY:
            raise CoordinatorError(ErrorCode.unknown_member_id)
        if self.state is GroupState.COMPLETING_REBALANCE:
            raise CoordinatorError(ErrorCode.rebalance_in_progress)

    def validate_member(self, member_id: str, instance_id: str | None) -> None:
        """The identity check every member API runs before looking at generations."""
        if instance_id is not None:
            mapped = self.static_members.get(instance_id)
            if mapped is None:
                raise CoordinatorError(ErrorCode.unknown_member_id)
            if mapped != member_id:
                raise CoordinatorError(ErrorCode.fenced_instance_id)
        if member_id not in self.members:
            raise CoordinatorError(ErrorCode.unknown_member_id)

    # --- transitions -------------------------------------------------------------------------------

    def transition_to(self, target: GroupState, now_ms: int) -> None:
        if self.state not in _VALID_PREVIOUS[target]:
            raise IllegalTransition(f"group {self.group_id} cannot move from {self.state} to {target}")
        self.previous_state = self.state
        self.state = target
        self.current_state_timestamp = now_ms

    def init_next_generation(self, now_ms: int) -> None:
        self.generation_id += 1
        if self.members:
            self.protocol_name = self.select_protocol()
            self.transition_to(GroupState.COMPLETING_REBALANCE, now_ms)
        else:
            self.protocol_name = None
            self.transition_to(GroupState.EMPTY, now_ms)
        self.pending_sync_members.clear()

    # --- membership --------------------------------------------------------------------------------

    def _count_protocols(self, member: Member, delta: int) -> None:
        counts = self.supported_protocols
        for protocol in member.protocols:
            counts[protocol.name] = counts.get(protocol.name, 0) + delta

    def add(self, member: Member, responder: JoinResponder | None = None) -> None:
        if member.group_instance_id is not None:
            if member.group_instance_id in self.static_members:
                raise IllegalTransition(
                    f"static member {member.group_instance_id} is already a member of {self.group_id}"
                )
            self.static_members[member.group_instance_id] = member.member_id
        if not self.members:
            self.protocol_type = member.protocol_type
        if self.leader_id is None:
            self.leader_id = member.member_id
        self.members[member.member_id] = member
        self._count_protocols(member, +1)
        member.awaiting_join = responder
        if responder is not None:
            self.num_awaiting_join += 1
        self.pending_join_members.discard(member.member_id)

    def remove(self, member_id: str) -> Member | None:
        removed = self.members.pop(member_id, None)
        if removed is not None:
            self._count_protocols(removed, -1)
            if removed.awaiting_join is not None:
                self.num_awaiting_join -= 1
            if removed.group_instance_id is not None:
                self.static_members.pop(removed.group_instance_id, None)
        if self.is_leader(member_id):
            self.leader_id = next(iter(self.members), None)
        self.pending_join_members.discard(member_id)
        self.pending_sync_members.discard(member_id)
        return removed

    def update_member(
        self,
        member: Member,
        protocols: tuple[Protocol, ...],
        rebalance_timeout_ms: int,
        session_timeout_ms: int,
        responder: JoinResponder | None,
    ) -> None:
        self._count_protocols(member, -1)
        member.protocols = protocols
        self._count_protocols(member, +1)
        member.rebalance_timeout_ms = rebalance_timeout_ms
        member.session_timeout_ms = session_timeout_ms
        if responder is not None and member.awaiting_join is None:
            self.num_awaiting_join += 1
        elif responder is None and member.awaiting_join is not None:
            self.num_awaiting_join -= 1
        member.awaiting_join = responder

    def maybe_elect_new_joined_leader(self) -> bool:
        if self.leader_id is None:
            return False
        leader = self.members[self.leader_id]
        if leader.awaiting_join is not None:
            return True
        for member in self.members.values():
            if member.awaiting_join is not None:
                self.leader_id = member.member_id
                return True
        return False

    def replace_static_member(self, instance_id: str, old_member_id: str, new_member_id: str) -> Member:
        """Re-key a static member under a new member id and fence whatever the old id had parked."""
        old = self.members.pop(old_member_id, None)
        if old is None:
            raise IllegalTransition(f"cannot replace unknown member {old_member_id}")
        self.complete_join(
            old,
            JoinGroupResponse(
                error=ErrorCode.fenced_instance_id,
                member_id=old_member_id,
                protocol_name=None,
                protocol_type=None,
                leader="",
            ),
        )
        self.complete_sync(old, SyncGroupResponse(error=ErrorCode.fenced_instance_id))
        new = Member(
            member_id=new_member_id,
            group_instance_id=old.group_instance_id,
            client_id=old.client_id,
            client_host=old.client_host,
            rebalance_timeout_ms=old.rebalance_timeout_ms,
            session_timeout_ms=old.session_timeout_ms,
            protocol_type=old.protocol_type,
            protocols=old.protocols,
            assignment=old.assignment,
        )
        self.members[new_member_id] = new
        if self.is_leader(old_member_id):
            self.leader_id = new_member_id
        self.static_members[instance_id] = new_member_id
        return new

    def add_pending_member(self, member_id: str) -> None:
        if member_id in self.members:
            raise IllegalTransition(f"pending member {member_id} is already a member")
        self.pending_join_members.add(member_id)

    def complete_join(self, member: Member, response: JoinGroupResponse) -> bool:
        responder = member.awaiting_join
        if responder is None:
            return False
        member.awaiting_join = None
        self.num_awaiting_join -= 1
        responder(response)
        return True

    def complete_sync(self, member: Member, response: SyncGroupResponse) -> bool:
        responder = member.awaiting_sync
        if responder is None:
            return False
        member.awaiting_sync = None
        responder(response)
        return True


def _inconsistent(given: str | None, current: str | None) -> bool:
    return given is not None and current is not None and given != current
