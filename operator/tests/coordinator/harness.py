"""A small driver for the coordinator state machine in virtual time."""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from staticfleet.coordinator import (
    ClassicGroup,
    GroupCoordinator,
    GroupState,
    InProcessCoordinator,
    ManualClock,
)
from staticfleet.coordinator.config import CoordinatorConfig
from staticfleet.coordinator.events import ListSink
from staticfleet.coordinator.log import MemoryStore
from staticfleet.coordinator.messages import (
    DescribedGroup,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    MemberIdentity,
    OffsetCommitPartition,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetCommitTopic,
    Protocol,
    RequestContext,
    SyncGroupAssignment,
    SyncGroupRequest,
    SyncGroupResponse,
)

T = TypeVar("T")

RANGE_RR = (Protocol("range", b"m"), Protocol("roundrobin", b"m"))


class Reply(Generic[T]):
    """The eventual answer to a request that may be parked."""

    def __init__(self) -> None:
        self.values: list[T] = []

    def __call__(self, value: T) -> None:
        self.values.append(value)

    @property
    def done(self) -> bool:
        return bool(self.values)

    def get(self) -> T:
        assert len(self.values) == 1, f"expected exactly one answer, got {self.values}"
        return self.values[0]


@dataclass
class Harness:
    config: CoordinatorConfig = field(
        default_factory=lambda: CoordinatorConfig(initial_rebalance_delay_ms=0, min_session_timeout_ms=10)
    )
    clock: ManualClock = field(default_factory=ManualClock)
    store: MemoryStore = field(default_factory=MemoryStore)
    events: ListSink = field(default_factory=ListSink)
    rebalance_on_partition_growth: bool = False
    counter: itertools.count[int] = field(default_factory=lambda: itertools.count(1))

    def __post_init__(self) -> None:
        counter = self.counter
        self.coordinator = InProcessCoordinator(
            GroupCoordinator(
                self.clock,
                self.config,
                self.events,
                new_uuid=lambda: f"uuid{next(counter)}",
                rebalance_on_partition_growth=self.rebalance_on_partition_growth,
            ),
            self.store,
        )

    # --- requests ------------------------------------------------------------------------------

    def join(
        self,
        member_id: str = "",
        instance: str | None = None,
        *,
        group: str = "g",
        version: int = 9,
        protocols: tuple[Protocol, ...] = RANGE_RR,
        protocol_type: str = "consumer",
        session: int = 10_000,
        rebalance: int = 30_000,
        client_id: str = "client",
    ) -> Reply[JoinGroupResponse]:
        reply: Reply[JoinGroupResponse] = Reply()
        request = JoinGroupRequest(group, session, rebalance, member_id, instance, protocol_type, protocols)
        self.coordinator.join_group(RequestContext(version, client_id), request, reply)
        return reply

    def sync(
        self,
        member_id: str,
        generation: int,
        instance: str | None = None,
        *,
        group: str = "g",
        version: int = 5,
        assignments: dict[str, bytes] | None = None,
        protocol_type: str | None = "consumer",
        protocol_name: str | None = "range",
    ) -> Reply[SyncGroupResponse]:
        reply: Reply[SyncGroupResponse] = Reply()
        request = SyncGroupRequest(
            group,
            generation,
            member_id,
            instance,
            protocol_type,
            protocol_name,
            tuple(SyncGroupAssignment(m, a) for m, a in (assignments or {}).items()),
        )
        self.coordinator.sync_group(RequestContext(version), request, reply)
        return reply

    def heartbeat(
        self,
        member_id: str,
        generation: int,
        instance: str | None = None,
        *,
        group: str = "g",
        version: int = 4,
    ) -> int:
        response: HeartbeatResponse = self.coordinator.heartbeat(
            RequestContext(version), HeartbeatRequest(group, generation, member_id, instance)
        )
        return response.error

    def leave(
        self, *members: tuple[str, str | None], group: str = "g", version: int = 5
    ) -> LeaveGroupResponse:
        request = LeaveGroupRequest(group, tuple(MemberIdentity(m, i) for m, i in members))
        response: LeaveGroupResponse = self.coordinator.leave_group(RequestContext(version), request)
        return response

    def commit(
        self,
        member_id: str,
        generation: int,
        instance: str | None = None,
        *,
        group: str = "g",
        version: int = 9,
        offsets: dict[tuple[str, int], int] | None = None,
        metadata: str = "",
    ) -> OffsetCommitResponse:
        by_topic: dict[str, list[OffsetCommitPartition]] = {}
        for (topic, partition), offset in (offsets or {("t", 0): 1}).items():
            by_topic.setdefault(topic, []).append(OffsetCommitPartition(partition, offset, -1, metadata))
        request = OffsetCommitRequest(
            group,
            generation,
            member_id,
            instance,
            tuple(OffsetCommitTopic(t, tuple(p)) for t, p in by_topic.items()),
        )
        response: OffsetCommitResponse = self.coordinator.commit_offsets(RequestContext(version), request)
        return response

    def describe(self, group: str = "g", version: int = 5) -> DescribedGroup:
        described: list[DescribedGroup] = self.coordinator.describe_groups(RequestContext(version), [group])
        return described[0]

    # --- time ----------------------------------------------------------------------------------

    def tick(self) -> None:
        self.coordinator.fire_due_timers()

    def advance(self, ms: int) -> None:
        """Move time forward in 1 ms steps' worth of timer firings, like a real clock would."""
        target = self.clock.now_ms() + ms
        while True:
            deadline = self.coordinator.next_deadline()
            if deadline is None or deadline > target:
                break
            self.clock.set(max(deadline, self.clock.now_ms()))
            self.coordinator.fire_due_timers()
        self.clock.set(target)
        self.coordinator.fire_due_timers()

    # --- state ---------------------------------------------------------------------------------

    def state(self, group: str = "g") -> GroupState:
        g = self.coordinator.groups.get(group)
        return GroupState.DEAD if g is None else g.state

    def generation(self, group: str = "g") -> int:
        return self.group(group).generation_id

    def leader(self, group: str = "g") -> str | None:
        return self.group(group).leader_id

    def group(self, group: str = "g") -> ClassicGroup:
        found: ClassicGroup = self.coordinator.groups[group]
        return found

    def event_types(self) -> list[str]:
        return [e["type"] for e in self.events.events]

    # --- common setups -------------------------------------------------------------------------

    def stable_static_group(
        self, *instances: str, group: str = "g", join_version: int = 9, **join: Any
    ) -> dict[str, str]:
        """Static members join with member id "" and sync: a Stable group. Returns instance -> member id."""
        replies = {i: self.join("", i, group=group, version=join_version, **join) for i in instances}
        self.tick()
        responses = {i: r.get() for i, r in replies.items()}
        ids = {i: resp.member_id for i, resp in responses.items()}
        generation = next(iter(responses.values())).generation_id
        leader = self.leader(group)
        assignments = {member_id: f"assignment-{i}".encode() for i, member_id in ids.items()}
        syncs = []
        for i, member_id in ids.items():
            syncs.append(
                self.sync(
                    member_id,
                    generation,
                    i,
                    group=group,
                    assignments=assignments if member_id == leader else None,
                )
            )
        for s in syncs:
            assert s.get().error == 0
        assert self.state(group) is GroupState.STABLE
        return ids
