"""The classic group coordinator: Kafka's rules for JoinGroup, SyncGroup, Heartbeat, LeaveGroup, offsets
and group administration, as a pure state machine.

No sockets, no threads, no sleeping, no store. Requests come in as dataclasses. An operation that
changes state returns a `CoordinatorResult`: the records it wants durable, the replies it decided (to
its own request and to requests parked earlier) and what to do once the append succeeded or failed.
The runtime that owns the store appends the records, calls `settle`, and sends the replies only once
the records are durable: persist first, answer second, in one place. Reads (Heartbeat, OffsetFetch,
DescribeGroups, ListGroups) answer directly. Time comes from an injected clock and advances only when
the owner fires due timers, each of which is an operation too.

The work is split as Kafka splits it: membership (membership.py), offsets (offsets.py), group configs
(group_configs.py) and loading (loading.py); per-group rules live on the group (group.py).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TypeVar

from staticfleet.coordinator import events as ev
from staticfleet.coordinator.clock import Clock
from staticfleet.coordinator.config import CoordinatorConfig
from staticfleet.coordinator.consumer_heartbeat import (
    ConsumerGroups,
    ConsumerHeartbeatRequest,
    ConsumerHeartbeatResponse,
    DescribedConsumerGroup,
)
from staticfleet.coordinator.errors import (
    CoordinatorError,
    ErrorCode,
    StoreError,
    append_error_to_response_error,
)
from staticfleet.coordinator.group import ClassicGroup, GroupState
from staticfleet.coordinator.group_configs import GROUP_CONFIG_KEYS, GroupConfigs
from staticfleet.coordinator.loading import Loader
from staticfleet.coordinator.membership import Membership
from staticfleet.coordinator.messages import (
    DeleteGroupResult,
    DescribedGroup,
    DescribedMember,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    ListedGroup,
    ListGroupsRequest,
    ListGroupsResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetDeleteResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    OffsetFetchTopic,
    RequestContext,
    SyncGroupRequest,
    SyncGroupResponse,
)
from staticfleet.coordinator.offsets import OffsetManager
from staticfleet.coordinator.records import GroupTombstone, Record
from staticfleet.coordinator.result import CoordinatorResult, Once
from staticfleet.coordinator.state import EXPECTED_INSTANCE_IDS, CoordinatorState, parse_instance_ids

__all__ = [
    "EXPECTED_INSTANCE_IDS",
    "GROUP_CONFIG_KEYS",
    "CoordinatorResult",
    "GroupCoordinator",
    "parse_instance_ids",
]

T = TypeVar("T")


def _no_answer(error: ErrorCode) -> None:
    """Operations nobody waits on (timers, unloading) have nothing to answer."""


class GroupCoordinator:
    def __init__(
        self,
        clock: Clock,
        config: CoordinatorConfig | None = None,
        events: ev.EventSink | None = None,
        new_uuid: Callable[[], str] = lambda: str(uuid.uuid4()),
        rebalance_on_partition_growth: bool = False,
    ) -> None:
        state = CoordinatorState(clock, config or CoordinatorConfig(), events or ev.NullSink(), new_uuid)
        self.state = state
        self.clock = clock
        self.config = state.config
        self.events = state.events
        self.groups = state.groups
        self.offsets = state.offsets
        self.group_configs = state.group_configs
        self.timers = state.timers
        self._recorder = state.recorder
        self.membership = Membership(state, rebalance_on_partition_growth=rebalance_on_partition_growth)
        self.offset_manager = OffsetManager(state, self.membership)
        self.configs = GroupConfigs(state, self.membership)
        self.consumer_groups = ConsumerGroups(state)
        self.offset_manager.forget_consumer_group = self.consumer_groups.events.forget
        self.loader = Loader(state, self.configs, self.consumer_groups)
        # Reads answer directly; bound once, as the heartbeat is the hottest call there is.
        self.heartbeat: Callable[[RequestContext, HeartbeatRequest], HeartbeatResponse] = (
            self.membership.heartbeat
        )

    # === the runtime's side ========================================================================

    def settle(
        self, result: CoordinatorResult[T], failure: StoreError | Exception | None
    ) -> CoordinatorResult[T]:
        """Finish an operation once its records were appended (failure None) or refused: apply or undo
        what they say. Returns the operation's replies, with any records this in turn wants written.

        A failure other than a StoreError is something that raised while the operation was deciding,
        or while its records were encoded or appended: what it decided is undone as for a failed
        append, and the request gets the operation's answer for UNKNOWN_SERVER_ERROR, as Kafka answers
        an operation that hit an unexpected exception."""
        unexpected = failure is not None and not isinstance(failure, StoreError)

        def finish() -> T:
            if failure is None:
                for written in result.on_written:
                    written()
                return result.response
            if isinstance(failure, StoreError):
                error = append_error_to_response_error(failure.code)
            else:
                error = ErrorCode.unknown_server_error
            for failed in result.on_failed:
                failed(error, str(failure))
            if not unexpected or result.answer_error is None:
                return result.response
            answer: T = result.answer_error(error)
            self._recorder.respond_instead(answer)
            return answer

        follow = self._recorder.run(finish, result.name, result.answer_error)
        follow.replies[:0] = result.replies
        if follow.error is None:
            follow.error = result.error
        return follow

    def next_deadline(self) -> int | None:
        return self.timers.next_deadline()

    def fire_next_timer(self) -> CoordinatorResult[None] | None:
        """Run the earliest timer due at the clock's current time, as an operation; None if none is due."""
        due = self.timers.pop_due(self.clock.now_ms())
        if due is None:
            return None
        task: Callable[[], None] = due[1]
        return self._recorder.run(task, "a timer", _no_answer)

    # === writes ====================================================================================

    def join_group(
        self, ctx: RequestContext, request: JoinGroupRequest, respond: Callable[[JoinGroupResponse], None]
    ) -> CoordinatorResult[None]:
        reply = Once(self._recorder, respond)

        def answer_error(error: ErrorCode) -> None:
            reply(JoinGroupResponse(error=error))

        def join() -> None:
            consumer_group = request.group_id in self.state.consumer_groups
            if consumer_group and not self.consumer_groups.give_way_to_classic(request.group_id):
                reply(JoinGroupResponse(error=ErrorCode.inconsistent_group_protocol, member_id=""))
                return
            self.membership.join_group(ctx, request, reply)

        return self._recorder.run(join, "JoinGroup", answer_error)

    def sync_group(
        self, ctx: RequestContext, request: SyncGroupRequest, respond: Callable[[SyncGroupResponse], None]
    ) -> CoordinatorResult[None]:
        reply = Once(self._recorder, respond)

        def answer_error(error: ErrorCode) -> None:
            reply(SyncGroupResponse(error=error))

        return self._recorder.run(
            lambda: self.membership.sync_group(ctx, request, reply), "SyncGroup", answer_error
        )

    def leave_group(
        self, ctx: RequestContext, request: LeaveGroupRequest
    ) -> CoordinatorResult[LeaveGroupResponse]:
        if request.group_id in self.state.consumer_groups:
            return self._recorder.run(
                lambda: self.consumer_groups.leave_group(request),
                "LeaveGroup",
                lambda error: LeaveGroupResponse(error=error),
            )
        return self._recorder.run(
            lambda: self.membership.leave_group(ctx, request),
            "LeaveGroup",
            lambda error: LeaveGroupResponse(error=error),
        )

    def consumer_group_heartbeat(
        self, ctx: RequestContext, request: ConsumerHeartbeatRequest
    ) -> CoordinatorResult[ConsumerHeartbeatResponse]:
        return self._recorder.run(
            lambda: self.consumer_groups.heartbeat(ctx, request),
            "ConsumerGroupHeartbeat",
            lambda error: ConsumerHeartbeatResponse(error=error),
        )

    def commit_offsets(
        self, ctx: RequestContext, request: OffsetCommitRequest
    ) -> CoordinatorResult[OffsetCommitResponse]:
        return self._recorder.run(
            lambda: self.offset_manager.commit_offsets(ctx, request),
            "OffsetCommit",
            lambda error: OffsetCommitResponse.all_failed(request, error),
        )

    def delete_offsets(
        self, group_id: str, topics: tuple[OffsetFetchTopic, ...]
    ) -> CoordinatorResult[OffsetDeleteResponse]:
        return self._recorder.run(
            lambda: self.offset_manager.delete_offsets(group_id, topics),
            "OffsetDelete",
            lambda error: OffsetDeleteResponse(error),
        )

    def delete_groups(
        self, ctx: RequestContext, group_ids: Iterable[str]
    ) -> CoordinatorResult[list[DeleteGroupResult]]:
        ids = list(dict.fromkeys(group_ids))
        return self._recorder.run(
            lambda: self._delete_groups(ids),
            "DeleteGroups",
            lambda error: [DeleteGroupResult(group_id, error) for group_id in ids],
        )

    def alter_group_config(
        self, group_id: str, changes: Mapping[str, str | None], validate_only: bool = False
    ) -> CoordinatorResult[None]:
        """Set (value) or delete (None) group configs; CoordinatorError(INVALID_CONFIG) says what is wrong."""

        def answer_error(error: ErrorCode) -> None:
            self._recorder.fail(CoordinatorError(error, "the group config could not be changed"))

        return self._recorder.run(
            lambda: self.configs.alter(group_id, changes, validate_only), "AlterConfigs", answer_error
        )

    def on_partitions_changed(self, topic: str) -> CoordinatorResult[list[str]]:
        """A topic gained partitions: rebalance the consumer groups subscribed to it (their ids)."""
        return self._recorder.run(
            lambda: self.membership.on_partitions_changed(topic),
            "the rebalance for new partitions",
            lambda error: [],
        )

    def load(self, records: Iterable[Record]) -> CoordinatorResult[int]:
        """Replay durable records, then start timers as a freshly loaded coordinator does."""

        def load_all() -> int:
            count = self.loader.replay_all(records)
            self.membership.on_loaded()
            self.consumer_groups.on_loaded()
            self.offset_manager.schedule_cleanup()
            return count

        return self._recorder.run(load_all)

    def unload(self) -> CoordinatorResult[None]:
        """Shutting down: every parked JoinGroup and SyncGroup is answered NOT_COORDINATOR."""
        return self._recorder.run(self.membership.unload, "unloading", _no_answer)

    # === reads =====================================================================================

    def fetch_offsets(self, ctx: RequestContext, request: OffsetFetchRequest) -> OffsetFetchResponse:
        return self.offset_manager.fetch_offsets(ctx, request)

    def describe_consumer_groups(self, group_ids: Iterable[str]) -> list[DescribedConsumerGroup]:
        return self.consumer_groups.describe(group_ids)

    def describe_group_config(self, group_id: str) -> dict[str, str]:
        return self.configs.describe(group_id)

    def describe_groups(self, ctx: RequestContext, group_ids: Iterable[str]) -> list[DescribedGroup]:
        described = []
        for group_id in group_ids:
            group = self.groups.get(group_id)
            if group is None:
                if ctx.api_version >= 6:
                    kind = "is not a classic group" if group_id in self.state.consumer_groups else "not found"
                    described.append(
                        DescribedGroup(
                            group_id,
                            error=ErrorCode.group_id_not_found,
                            error_message=f"Group {group_id} {kind}.",
                            state=str(GroupState.DEAD),
                        )
                    )
                else:
                    described.append(DescribedGroup(group_id, state=str(GroupState.DEAD)))
                continue
            stable = group.is_in(GroupState.STABLE)
            protocol = group.protocol_name
            members = tuple(
                DescribedMember(
                    member_id=m.member_id,
                    group_instance_id=m.group_instance_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    metadata=m.metadata(protocol) if stable and protocol is not None else b"",
                    assignment=m.assignment,
                )
                for m in group.members.values()
            )
            described.append(
                DescribedGroup(
                    group_id,
                    state=str(group.state),
                    protocol_type=group.protocol_type or "",
                    protocol_data=(protocol or "") if stable else "",
                    members=members,
                )
            )
        return described

    def list_groups(self, ctx: RequestContext, request: ListGroupsRequest) -> ListGroupsResponse:
        states = {s.lower().strip() for s in request.states_filter}
        types = {t.lower() for t in request.types_filter}
        listed = []
        for group in self.groups.values():
            if states and str(group.state).lower() not in states:
                continue
            if types and "classic" not in types:
                continue
            listed.append(ListedGroup(group.group_id, group.protocol_type or "", str(group.state)))
        for consumer_group in self.state.consumer_groups.values():
            state = str(consumer_group.state)
            if states and state.lower() not in states:
                continue
            if types and "consumer" not in types:
                continue
            listed.append(ListedGroup(consumer_group.group_id, "consumer", state, group_type="consumer"))
        return ListGroupsResponse(tuple(listed))

    def snapshot_records(self) -> Iterator[Record]:
        """The live durable state as records: replaying them rebuilds what a full log replay would."""
        return self.loader.snapshot_records()

    def replay(self, record: Record) -> None:
        """Apply one durable record while loading; no timers, no events."""
        self.loader.replay(record)

    def schedule_cleanup(self) -> None:
        self.offset_manager.schedule_cleanup()

    # === DeleteGroups ==============================================================================

    def _delete_groups(self, group_ids: Iterable[str]) -> list[DeleteGroupResult]:
        results: list[DeleteGroupResult] = []
        records: list[Record] = []
        deleted: list[ClassicGroup] = []
        consumer_gone: list[str] = []
        for group_id in dict.fromkeys(group_ids):
            if group_id in self.state.consumer_groups:
                error = self.consumer_groups.delete_if_empty(group_id)
                if not error:
                    records.extend(self.offset_manager.tombstones(group_id))
                    records.append(GroupTombstone(group_id))
                    consumer_gone.append(group_id)
                results.append(DeleteGroupResult(group_id, error))
                continue
            group = self.groups.get(group_id)
            if group is None or group.is_in(GroupState.DEAD):
                results.append(DeleteGroupResult(group_id, ErrorCode.group_id_not_found))
                continue
            if not group.is_empty:
                results.append(DeleteGroupResult(group_id, ErrorCode.non_empty_group))
                continue
            records.extend(self.offset_manager.tombstones(group_id))
            records.append(GroupTombstone(group_id))
            deleted.append(group)
            results.append(DeleteGroupResult(group_id))
        if records:

            def written() -> None:
                for group in deleted:
                    self.membership.drop_group(group)
                    self.state.emit(ev.GROUP_DELETED, group.group_id)
                for group_id in consumer_gone:
                    self.state.consumer_groups.pop(group_id, None)
                    self.consumer_groups.events.forget(group_id)
                    self.state.offsets.delete_group(group_id)
                    self.state.emit(ev.GROUP_DELETED, group_id, protocol="consumer")

            def failed(error: ErrorCode, message: str) -> None:
                refused = {g.group_id for g in deleted} | set(consumer_gone)
                self._recorder.respond_instead(
                    [
                        DeleteGroupResult(r.group_id, error if r.group_id in refused else r.error)
                        for r in results
                    ]
                )

            self._recorder.write(records, written, failed)
        return results
