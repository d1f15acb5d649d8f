"""The classic group coordinator: Kafka's rules for JoinGroup, SyncGroup, Heartbeat, LeaveGroup, offsets
and group administration, as a pure state machine.

No sockets, no threads, no sleeping. Requests come in as dataclasses; responses go out through
callbacks (JoinGroup and SyncGroup may be answered much later) or as return values. Time comes from
an injected clock and advances only when the owner calls `fire_due_timers`. Records that must be
durable are handed to the store before the response that depends on them is produced; the owner
delivers responses only after the store has synced (persist first, answer second).

Callbacks must not call back into the coordinator: they are invoked while it is mid-transition.
"""

from __future__ import annotations

import logging
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any, Final, Protocol

from staticfleet.coordinator import events as ev
from staticfleet.coordinator.clock import Clock
from staticfleet.coordinator.config import CoordinatorConfig
from staticfleet.coordinator.consumer_protocol import assignment_partitions, subscribed_topics
from staticfleet.coordinator.errors import (
    CoordinatorError,
    ErrorCode,
    StoreError,
    append_error_to_response_error,
)
from staticfleet.coordinator.group import (
    ClassicGroup,
    GroupState,
    IllegalTransition,
    JoinResponder,
    Member,
    RebalanceRecord,
)
from staticfleet.coordinator.messages import (
    DeleteGroupResult,
    DescribedGroup,
    DescribedMember,
    FetchedOffset,
    FetchedTopic,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    LeaveMemberResponse,
    ListedGroup,
    ListGroupsRequest,
    ListGroupsResponse,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    PartitionResult,
    RequestContext,
    SyncGroupRequest,
    SyncGroupResponse,
    TopicResult,
)
from staticfleet.coordinator.messages import (
    Protocol as JoinProtocol,
)
from staticfleet.coordinator.offsets import OffsetStore
from staticfleet.coordinator.records import (
    GroupConfigRecord,
    GroupMetadataRecord,
    GroupTombstone,
    MemberRecord,
    OffsetCommitRecord,
    OffsetTombstone,
    Record,
)
from staticfleet.coordinator.timers import Timers

log = logging.getLogger(__name__)

EXPECTED_INSTANCE_IDS: Final = "staticfleet.expected.instance.ids"
"""Group config (a staticfleet extension): instance ids a join phase waits for."""
GROUP_CONFIG_KEYS: Final = frozenset({EXPECTED_INSTANCE_IDS})

_HB_NONE: Final = HeartbeatResponse(ErrorCode.none)
_HB_REBALANCING: Final = HeartbeatResponse(ErrorCode.rebalance_in_progress)
_HB_UNKNOWN: Final = HeartbeatResponse(ErrorCode.unknown_member_id)
_HB_FENCED: Final = HeartbeatResponse(ErrorCode.fenced_instance_id)
_HB_ILLEGAL_GENERATION: Final = HeartbeatResponse(ErrorCode.illegal_generation)
_HB_INVALID_GROUP: Final = HeartbeatResponse(ErrorCode.invalid_group_id)
_HB_NOT_AVAILABLE: Final = HeartbeatResponse(ErrorCode.coordinator_not_available)

_HEARTBEAT: Final = 0
_JOIN: Final = 1
_SYNC: Final = 2
_CLEANUP: Final = 3


class GroupStore(Protocol):
    def append(self, records: Sequence[Record]) -> None: ...


class _Once:
    """A responder that answers at most once, like a completed CompletableFuture."""

    __slots__ = ("_respond", "done")

    def __init__(self, respond: Callable[[Any], None]) -> None:
        self._respond = respond
        self.done = False

    def __call__(self, response: Any) -> None:
        if not self.done:
            self.done = True
            self._respond(response)


def _metadata_length(metadata: str | None) -> int:
    """Kafka measures offset metadata in UTF-16 code units (java.lang.String.length)."""
    return 0 if metadata is None else len(metadata.encode("utf-16-le")) // 2


def parse_instance_ids(value: str) -> tuple[str, ...]:
    """The comma-separated instance-id list of the expected-instances config, validated."""
    ids = tuple(part.strip() for part in value.split(",")) if value.strip() else ()
    if any(not part for part in ids):
        raise ValueError(f"{EXPECTED_INSTANCE_IDS} has an empty instance id in {value!r}")
    if len(set(ids)) != len(ids):
        raise ValueError(f"{EXPECTED_INSTANCE_IDS} lists an instance id twice in {value!r}")
    return ids


class GroupCoordinator:
    def __init__(
        self,
        clock: Clock,
        store: GroupStore,
        config: CoordinatorConfig | None = None,
        events: ev.EventSink | None = None,
        new_uuid: Callable[[], str] = lambda: str(uuid.uuid4()),
        rebalance_on_partition_growth: bool = False,
    ) -> None:
        self.clock = clock
        self.store = store
        self.config = config or CoordinatorConfig()
        self.events: ev.EventSink = events or ev.NullSink()
        self.new_uuid = new_uuid
        self.rebalance_on_partition_growth = rebalance_on_partition_growth
        self.groups: dict[str, ClassicGroup] = {}
        self.offsets = OffsetStore()
        self.group_configs: dict[str, dict[str, str]] = {}
        self.timers = Timers()

    # === time ======================================================================================

    def next_deadline(self) -> int | None:
        return self.timers.next_deadline()

    def fire_due_timers(self) -> int:
        """Run every timer due at the clock's current time; return how many fired."""
        fired = 0
        now = self.clock.now_ms()
        while True:
            due = self.timers.pop_due(now)
            if due is None:
                return fired
            fired += 1
            key, payload = due
            assert isinstance(key, tuple)
            kind = key[0]
            if kind == _HEARTBEAT:
                self._expire_heartbeat(key[1], key[2])
            elif kind == _JOIN:
                self._on_join_timer(key[1], payload)
            elif kind == _SYNC:
                self._expire_pending_sync(key[1], payload)
            elif kind == _CLEANUP:
                self._cleanup_expired_offsets()

    def _schedule_heartbeat(self, group: ClassicGroup, member_id: str, timeout_ms: int) -> None:
        self.timers.schedule((_HEARTBEAT, group.group_id, member_id), self.clock.now_ms() + timeout_ms)

    def _cancel_heartbeat(self, group: ClassicGroup, member_id: str) -> None:
        self.timers.cancel((_HEARTBEAT, group.group_id, member_id))

    def _reschedule_member_heartbeat(self, group: ClassicGroup, member: Member) -> None:
        self._schedule_heartbeat(group, member.member_id, member.session_timeout_ms)

    # === events ====================================================================================

    def _emit(self, kind: str, group: ClassicGroup | str, **fields: Any) -> None:
        group_id = group if isinstance(group, str) else group.group_id
        event: dict[str, Any] = {
            "v": ev.SCHEMA_VERSION,
            "ts": self.clock.now_ms(),
            "type": kind,
            "group": group_id,
        }
        if not isinstance(group, str):
            event["generation"] = group.generation_id
            event["state"] = str(group.state)
        event.update(fields)
        self.events.emit(event)

    def _emit_fenced(self, group: ClassicGroup, member_id: str, instance_id: str | None, api: str) -> None:
        self._emit(ev.MEMBER_FENCED, group, member_id=member_id, instance_id=instance_id, api=api)

    # === persistence ===============================================================================

    def _group_record(self, group: ClassicGroup, assignment: Mapping[str, bytes]) -> GroupMetadataRecord:
        name = group.protocol_name
        members = []
        for m in group.members.values():
            if name is None:
                raise IllegalTransition(f"group {group.group_id} has members but no protocol")
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
            group_id=group.group_id,
            protocol_type=group.protocol_type or "",
            generation=group.generation_id,
            protocol=name,
            leader=group.leader_id,
            current_state_timestamp=group.current_state_timestamp or -1,
            members=tuple(members),
        )

    def _persist_group(self, group: ClassicGroup, record: GroupMetadataRecord) -> None:
        """Append a group record; raises StoreError and leaves the group's durable image unchanged."""
        self.store.append([record])
        group.last_persisted = record

    def _empty_group_record(self, group: ClassicGroup) -> GroupMetadataRecord:
        return GroupMetadataRecord(
            group_id=group.group_id,
            protocol_type="",
            generation=0,
            protocol=None,
            leader=None,
            current_state_timestamp=group.current_state_timestamp or -1,
            members=(),
        )

    # === JoinGroup =================================================================================

    def join_group(
        self, ctx: RequestContext, request: JoinGroupRequest, respond: Callable[[JoinGroupResponse], None]
    ) -> None:
        reply = _Once(respond)
        if not request.group_id:
            reply(JoinGroupResponse(error=ErrorCode.invalid_group_id, member_id=request.member_id))
            return
        if not (
            self.config.min_session_timeout_ms
            <= request.session_timeout_ms
            <= self.config.max_session_timeout_ms
        ):
            reply(JoinGroupResponse(error=ErrorCode.invalid_session_timeout, member_id=request.member_id))
            return
        if ctx.api_version == 0:
            # v0 has no rebalance timeout: the session timeout stands in for it.
            request = JoinGroupRequest(
                request.group_id,
                request.session_timeout_ms,
                request.session_timeout_ms,
                request.member_id,
                request.group_instance_id,
                request.protocol_type,
                request.protocols,
                request.reason,
            )
        is_unknown_member = request.member_id == ""
        group = self.groups.get(request.group_id)
        is_new_group = group is None
        if group is None:
            if not is_unknown_member:
                reply(JoinGroupResponse(error=ErrorCode.unknown_member_id, member_id=request.member_id))
                return
            group = self._create_group(request.group_id)
        try:
            if not self._accept_joining_member(group, request.member_id):
                group.remove(request.member_id)
                reply(JoinGroupResponse(error=ErrorCode.group_max_size_reached, member_id=""))
            elif is_unknown_member:
                self._join_new_member(ctx, request, group, reply)
            else:
                self._join_existing_member(ctx, request, group, reply)
        except IllegalTransition:
            log.exception("JoinGroup for group %s failed", request.group_id)
            reply(JoinGroupResponse(error=ErrorCode.unknown_server_error))
        if is_new_group:
            # A freshly created group is committed to the log with an empty record, as Kafka does.
            try:
                self._persist_group(group, self._empty_group_record(group))
            except StoreError as exc:
                reply(JoinGroupResponse(error=append_error_to_response_error(exc.code)))

    def _create_group(self, group_id: str) -> ClassicGroup:
        group = ClassicGroup(group_id=group_id, current_state_timestamp=self.clock.now_ms())
        group.rebalances = type(group.rebalances)(maxlen=self.config.rebalance_history_size)
        self.groups[group_id] = group
        return group

    def _accept_joining_member(self, group: ClassicGroup, member_id: str) -> bool:
        state = group.state
        max_size = self.config.max_size
        if state in (GroupState.EMPTY, GroupState.DEAD):
            return True
        if state is GroupState.PREPARING_REBALANCE:
            member = group.members.get(member_id)
            return (
                member is not None and member.awaiting_join is not None
            ) or group.num_awaiting_join < max_size
        return member_id in group.members or len(group.members) < max_size

    def _join_new_member(
        self, ctx: RequestContext, request: JoinGroupRequest, group: ClassicGroup, reply: JoinResponder
    ) -> None:
        if group.is_in(GroupState.DEAD):
            reply(JoinGroupResponse(error=ErrorCode.coordinator_not_available, member_id=""))
            return
        if not group.supports_protocols(request.protocol_type, {p.name for p in request.protocols}):
            reply(JoinGroupResponse(error=ErrorCode.inconsistent_group_protocol, member_id=""))
            return
        instance_id = request.group_instance_id
        new_member_id = f"{instance_id if instance_id is not None else ctx.client_id}-{self.new_uuid()}"
        if instance_id is not None:
            existing = group.static_member_id(instance_id)
            if existing is not None:
                self._replace_static_member(ctx, request, group, existing, new_member_id, reply)
            else:
                self._add_member_and_rebalance(ctx, request, group, new_member_id, reply)
        elif ctx.api_version >= 4:
            # KIP-394: hand out a member id and ask the client to come back with it.
            group.add_pending_member(new_member_id)
            self._schedule_heartbeat(group, new_member_id, request.session_timeout_ms)
            reply(JoinGroupResponse(error=ErrorCode.member_id_required, member_id=new_member_id))
        else:
            self._add_member_and_rebalance(ctx, request, group, new_member_id, reply)

    def _join_existing_member(
        self, ctx: RequestContext, request: JoinGroupRequest, group: ClassicGroup, reply: JoinResponder
    ) -> None:
        member_id = request.member_id
        if group.is_in(GroupState.DEAD):
            reply(JoinGroupResponse(error=ErrorCode.coordinator_not_available, member_id=member_id))
            return
        if not group.supports_protocols(request.protocol_type, {p.name for p in request.protocols}):
            reply(JoinGroupResponse(error=ErrorCode.inconsistent_group_protocol, member_id=member_id))
            return
        if group.is_pending_member(member_id):
            if request.group_instance_id is not None:
                raise IllegalTransition(
                    f"pending member {member_id} rejoined with instance id {request.group_instance_id}"
                )
            self._add_member_and_rebalance(ctx, request, group, member_id, reply)
            return
        try:
            group.validate_member(member_id, request.group_instance_id)
        except CoordinatorError as exc:
            if exc.code == ErrorCode.fenced_instance_id:
                self._emit_fenced(group, member_id, request.group_instance_id, "JoinGroup")
            reply(
                JoinGroupResponse(error=exc.code, member_id=member_id, protocol_type=None, protocol_name=None)
            )
            return
        member = group.member(member_id)
        state = group.state
        if state is GroupState.PREPARING_REBALANCE:
            self._update_member_and_rebalance(request, group, member, reply, ev.REASON_METADATA_CHANGED)
        elif state is GroupState.COMPLETING_REBALANCE:
            if member.matches(request.protocols):
                # The member lost its JoinGroup response: answer again from the current generation.
                reply(self._current_join_response(group, member_id, with_members=group.is_leader(member_id)))
            else:
                self._update_member_and_rebalance(request, group, member, reply, ev.REASON_METADATA_CHANGED)
        elif state is GroupState.STABLE:
            if group.is_leader(member_id):
                # A leader that rejoins always forces a rebalance: that is how it reacts to metadata changes.
                self._update_member_and_rebalance(request, group, member, reply, ev.REASON_LEADER_REJOINED)
            elif not member.matches(request.protocols):
                self._update_member_and_rebalance(request, group, member, reply, ev.REASON_METADATA_CHANGED)
            else:
                reply(self._current_join_response(group, member_id, with_members=False))
        else:
            reply(JoinGroupResponse(error=ErrorCode.unknown_member_id, member_id=member_id))

    def _current_join_response(
        self, group: ClassicGroup, member_id: str, with_members: bool
    ) -> JoinGroupResponse:
        return JoinGroupResponse(
            members=group.current_members_for_leader() if with_members else (),
            member_id=member_id,
            generation_id=group.generation_id,
            protocol_name=group.protocol_name,
            protocol_type=group.protocol_type,
            leader=group.leader_id,
            skip_assignment=False,
        )

    def _add_member_and_rebalance(
        self,
        ctx: RequestContext,
        request: JoinGroupRequest,
        group: ClassicGroup,
        member_id: str,
        reply: JoinResponder,
    ) -> None:
        member = Member(
            member_id=member_id,
            group_instance_id=request.group_instance_id,
            client_id=ctx.client_id,
            client_host=ctx.client_host,
            rebalance_timeout_ms=request.rebalance_timeout_ms,
            session_timeout_ms=request.session_timeout_ms,
            protocol_type=request.protocol_type,
            protocols=request.protocols,
            is_new=True,
        )
        if group.is_in(GroupState.PREPARING_REBALANCE) and group.previous_state is GroupState.EMPTY:
            group.new_member_added = True
        group.add(member, reply)
        # A new member cannot heartbeat yet; it is expired if it stays parked this long.
        self._schedule_heartbeat(group, member_id, self.config.new_member_join_timeout_ms)
        self._emit(
            ev.MEMBER_JOINED,
            group,
            member_id=member_id,
            instance_id=request.group_instance_id,
            client_id=ctx.client_id,
            client_host=ctx.client_host,
            session_timeout_ms=request.session_timeout_ms,
            rebalance_timeout_ms=request.rebalance_timeout_ms,
        )
        detail = f"new member {member_id} (instance {request.group_instance_id}) joined"
        self._maybe_prepare_rebalance_or_complete_join(group, ev.REASON_MEMBER_JOINED, detail)

    def _update_member_and_rebalance(
        self,
        request: JoinGroupRequest,
        group: ClassicGroup,
        member: Member,
        reply: JoinResponder,
        reason: str,
    ) -> None:
        group.update_member(
            member, request.protocols, request.rebalance_timeout_ms, request.session_timeout_ms, reply
        )
        detail = f"member {member.member_id} rejoined during {group.state}; client reason: {request.reason}"
        self._maybe_prepare_rebalance_or_complete_join(group, reason, detail)

    def _replace_static_member(
        self,
        ctx: RequestContext,
        request: JoinGroupRequest,
        group: ClassicGroup,
        old_member_id: str,
        new_member_id: str,
        reply: JoinResponder,
    ) -> None:
        instance_id = request.group_instance_id
        assert instance_id is not None
        leader_before = group.leader_id
        old_fenced = group.members[old_member_id]
        had_parked_request = old_fenced.awaiting_join is not None or old_fenced.awaiting_sync is not None
        new_member = group.replace_static_member(instance_id, old_member_id, new_member_id)
        if had_parked_request:
            self._emit_fenced(group, old_member_id, instance_id, "replaced")
        self._reschedule_member_heartbeat(group, new_member)
        old_protocols = new_member.protocols
        old_rebalance_timeout = new_member.rebalance_timeout_ms
        old_session_timeout = new_member.session_timeout_ms
        group.update_member(
            new_member, request.protocols, request.rebalance_timeout_ms, request.session_timeout_ms, reply
        )
        state = group.state
        if state is GroupState.STABLE:
            if (group.protocol_name or "") == group.select_protocol():
                # The restart changes nothing the group agreed on: persist the new member id, no rebalance.
                try:
                    self._persist_group(group, self._group_record(group, group.group_assignment()))
                except StoreError as exc:
                    group.update_member(
                        new_member, old_protocols, old_rebalance_timeout, old_session_timeout, None
                    )
                    restored = group.replace_static_member(instance_id, new_member_id, old_member_id)
                    self._reschedule_member_heartbeat(group, restored)
                    reply(
                        JoinGroupResponse(
                            error=append_error_to_response_error(exc.code),
                            member_id="",
                            generation_id=group.generation_id,
                            protocol_name=group.protocol_name,
                            protocol_type=group.protocol_type,
                            leader=leader_before,
                            skip_assignment=False,
                        )
                    )
                    return
                self._emit(
                    ev.STATIC_MEMBER_REPLACED,
                    group,
                    instance_id=instance_id,
                    old_member_id=old_member_id,
                    new_member_id=new_member_id,
                    client_host=ctx.client_host,
                    rebalance=False,
                )
                if ctx.api_version >= 9:
                    is_leader = group.is_leader(new_member_id)
                    response = JoinGroupResponse(
                        members=group.current_members_for_leader() if is_leader else (),
                        member_id=new_member_id,
                        generation_id=group.generation_id,
                        protocol_name=group.protocol_name,
                        protocol_type=group.protocol_type,
                        leader=group.leader_id,
                        skip_assignment=is_leader,
                    )
                else:
                    # Older clients are told the leader id from before the replacement, so a
                    # restarted leader does not run an assignment the group would ignore.
                    response = JoinGroupResponse(
                        member_id=new_member_id,
                        generation_id=group.generation_id,
                        protocol_name=group.protocol_name,
                        protocol_type=group.protocol_type,
                        leader=leader_before,
                        skip_assignment=False,
                    )
                group.complete_join(new_member, response)
                return
            self._emit_replaced_with_rebalance(group, instance_id, old_member_id, new_member_id, ctx)
            self._maybe_prepare_rebalance_or_complete_join(
                group,
                ev.REASON_STATIC_PROTOCOL_CHANGED,
                f"static member {instance_id} rejoined with a protocol that changes the group's choice",
            )
        elif state is GroupState.COMPLETING_REBALANCE:
            # The leader may already be assigning to the old member id: start over.
            self._emit_replaced_with_rebalance(group, instance_id, old_member_id, new_member_id, ctx)
            self._prepare_rebalance(
                group,
                ev.REASON_STATIC_REPLACED_DURING_SYNC,
                f"static member {instance_id} was replaced while the group was completing a rebalance",
            )
        elif state in (GroupState.EMPTY, GroupState.DEAD):
            raise IllegalTransition(f"group {group.group_id} in state {state} maps instance {instance_id}")
        else:
            self._emit_replaced_with_rebalance(group, instance_id, old_member_id, new_member_id, ctx)
            self._maybe_complete_join_phase(group)

    def _emit_replaced_with_rebalance(
        self, group: ClassicGroup, instance_id: str, old_id: str, new_id: str, ctx: RequestContext
    ) -> None:
        self._emit(
            ev.STATIC_MEMBER_REPLACED,
            group,
            instance_id=instance_id,
            old_member_id=old_id,
            new_member_id=new_id,
            client_host=ctx.client_host,
            rebalance=group.state is not GroupState.PREPARING_REBALANCE,
        )

    # === rebalancing ===============================================================================

    def _maybe_prepare_rebalance_or_complete_join(
        self, group: ClassicGroup, reason: str, detail: str
    ) -> None:
        if group.can_rebalance():
            self._prepare_rebalance(group, reason, detail)
        else:
            self._maybe_complete_join_phase(group)

    def _prepare_rebalance(self, group: ClassicGroup, reason: str, detail: str) -> None:
        now = self.clock.now_ms()
        if group.is_in(GroupState.COMPLETING_REBALANCE):
            self._reset_and_propagate_assignment(group, ErrorCode.rebalance_in_progress)
        self._remove_sync_expiration(group)
        is_initial = group.is_in(GroupState.EMPTY)
        if is_initial:
            delay = self.config.initial_rebalance_delay_ms
            remaining = max(group.rebalance_timeout_ms() - delay, 0)
            self.timers.schedule((_JOIN, group.group_id), now + delay, ("initial", delay, remaining))
        from_state = group.state
        group.transition_to(GroupState.PREPARING_REBALANCE, now)
        if group.rebalance_started_ms is None:
            group.rebalance_started_ms = now
            group.rebalance_reason = reason
        self._emit(
            ev.REBALANCE_STARTED,
            group,
            reason=reason,
            detail=detail,
            from_state=str(from_state),
            members=len(group.members),
        )
        if not is_initial:
            self._maybe_complete_join_else_schedule(group)
        elif self._has_expected_instances(group):
            self._maybe_complete_join_phase(group)  # the only expected instance may have just joined

    def _expected_instances_joined(self, group: ClassicGroup) -> bool:
        expected = self.group_configs.get(group.group_id, {}).get(EXPECTED_INSTANCE_IDS)
        if not expected:
            return True
        static = group.static_members
        return all(instance in static for instance in parse_instance_ids(expected))

    def _has_expected_instances(self, group: ClassicGroup) -> bool:
        return bool(self.group_configs.get(group.group_id, {}).get(EXPECTED_INSTANCE_IDS))

    def _maybe_complete_join_else_schedule(self, group: ClassicGroup) -> None:
        if group.has_all_members_joined() and self._expected_instances_joined(group):
            self._complete_join(group)
        else:
            self.timers.schedule(
                (_JOIN, group.group_id), self.clock.now_ms() + group.rebalance_timeout_ms(), ("complete",)
            )

    def _maybe_complete_join_phase(self, group: ClassicGroup) -> None:
        if not group.is_in(GroupState.PREPARING_REBALANCE) or not group.has_all_members_joined():
            return
        if group.previous_state is GroupState.EMPTY:
            # Kafka never ends an initial rebalance early; with expected instances configured, the
            # last expected instance to join ends it.
            if self._has_expected_instances(group) and self._expected_instances_joined(group):
                self._complete_join(group)
            return
        if self._expected_instances_joined(group):
            self._complete_join(group)

    def _on_join_timer(self, group_id: str, payload: tuple[Any, ...]) -> None:
        group = self.groups.get(group_id)
        if group is None:
            return
        if payload[0] == "complete":
            self._complete_join(group)
            return
        _, delay, remaining = payload
        now = self.clock.now_ms()
        if self._has_expected_instances(group) and not self._expected_instances_joined(group) and remaining:
            # Wait for the expected instances until the rebalance timeout, not in initial-delay steps.
            group.new_member_added = False
            self.timers.schedule((_JOIN, group_id), now + remaining, ("initial", delay, 0))
            return
        if not group.new_member_added or remaining == 0:
            self._complete_join(group)
            return
        group.new_member_added = False
        new_delay = min(self.config.initial_rebalance_delay_ms, remaining)
        new_remaining = max(remaining - delay, 0)
        self.timers.schedule((_JOIN, group_id), now + new_delay, ("initial", new_delay, new_remaining))

    def _complete_join(self, group: ClassicGroup) -> None:
        self.timers.cancel((_JOIN, group.group_id))
        now = self.clock.now_ms()
        for member in list(group.not_yet_rejoined()):
            if member.is_static:
                continue  # static members are kept through the join phase (KIP-345)
            group.remove(member.member_id)
            self._cancel_heartbeat(group, member.member_id)
            self._emit(
                ev.MEMBER_EXPIRED,
                group,
                member_id=member.member_id,
                instance_id=None,
                cause="rebalance-timeout",
            )
        if group.is_in(GroupState.DEAD):
            return
        if not group.maybe_elect_new_joined_leader() and group.members:
            # Nobody rejoined, only absent static members remain: wait another rebalance timeout.
            self.timers.schedule((_JOIN, group.group_id), now + group.rebalance_timeout_ms(), ("complete",))
            return
        group.init_next_generation(now)
        if group.is_in(GroupState.EMPTY):
            try:
                self._persist_group(group, self._group_record(group, {}))
            except StoreError:
                log.warning("could not persist that group %s is empty", group.group_id, exc_info=True)
            self._finish_rebalance(group, now)
            return
        leader_members = group.current_members_for_leader()
        for member in list(group.members.values()):
            response = JoinGroupResponse(
                members=leader_members if group.is_leader(member.member_id) else (),
                member_id=member.member_id,
                generation_id=group.generation_id,
                protocol_name=group.protocol_name,
                protocol_type=group.protocol_type,
                leader=group.leader_id,
                skip_assignment=False,
            )
            group.complete_join(member, response)
            self._reschedule_member_heartbeat(group, member)
            member.is_new = False
            group.pending_sync_members.add(member.member_id)
        group.subscribed_topics = self._subscribed_topics(group)
        self.timers.schedule((_SYNC, group.group_id), now + group.rebalance_timeout_ms(), group.generation_id)
        self._emit(
            ev.JOIN_COMPLETED,
            group,
            protocol_type=group.protocol_type,
            protocol=group.protocol_name,
            leader=group.leader_id,
            members=[
                {"member_id": m.member_id, "instance_id": m.group_instance_id} for m in group.members.values()
            ],
        )

    def _finish_rebalance(self, group: ClassicGroup, now: int) -> None:
        """Close the rebalance episode that started when the group entered PreparingRebalance."""
        started = group.rebalance_started_ms if group.rebalance_started_ms is not None else now
        reason = group.rebalance_reason
        group.rebalance_started_ms = None
        group.rebalance_reason = ""
        group.rebalance_count += 1
        group.rebalances.append(
            RebalanceRecord(group.generation_id, reason, started, now, len(group.members))
        )
        if group.is_in(GroupState.EMPTY):
            self._emit(ev.GROUP_EMPTY, group, reason=reason, duration_ms=now - started)
            return
        members = []
        for m in group.members.values():
            entry: dict[str, Any] = {"member_id": m.member_id, "instance_id": m.group_instance_id}
            if group.protocol_type == "consumer":
                entry["assignment"] = assignment_partitions(m.assignment)
            members.append(entry)
        self._emit(
            ev.REBALANCE_COMPLETED,
            group,
            reason=reason,
            duration_ms=now - started,
            protocol_type=group.protocol_type,
            protocol=group.protocol_name,
            leader=group.leader_id,
            leader_instance_id=group.members[group.leader_id].group_instance_id if group.leader_id else None,
            members=members,
        )

    def _subscribed_topics(self, group: ClassicGroup) -> frozenset[str] | None:
        if group.protocol_type != "consumer" or group.protocol_name is None:
            return None
        topics: set[str] = set()
        decoded: dict[bytes, frozenset[str] | None] = {}  # members of a fleet usually send identical bytes
        for member in group.members.values():
            metadata = member.metadata(group.protocol_name)
            if metadata not in decoded:
                decoded[metadata] = subscribed_topics(metadata)
            member_topics = decoded[metadata]
            if member_topics is None:
                return None
            topics |= member_topics
        return frozenset(topics)

    def _reset_and_propagate_assignment(self, group: ClassicGroup, error: ErrorCode) -> None:
        if not group.is_in(GroupState.COMPLETING_REBALANCE):
            raise IllegalTransition(f"group {group.group_id} is not completing a rebalance")
        for member in group.members.values():
            member.assignment = b""
        self._propagate_assignment(group, error)

    def _set_and_propagate_assignment(self, group: ClassicGroup, assignment: Mapping[str, bytes]) -> None:
        if not group.is_in(GroupState.COMPLETING_REBALANCE):
            raise IllegalTransition(f"group {group.group_id} is not completing a rebalance")
        for member in group.members.values():
            member.assignment = assignment.get(member.member_id, b"")
        self._propagate_assignment(group, ErrorCode.none)

    def _propagate_assignment(self, group: ClassicGroup, error: ErrorCode) -> None:
        ok = error == ErrorCode.none
        for member in list(group.members.values()):
            response = SyncGroupResponse(
                error=error,
                protocol_type=group.protocol_type if ok else None,
                protocol_name=group.protocol_name if ok else None,
                assignment=member.assignment,
            )
            if group.complete_sync(member, response):
                self._reschedule_member_heartbeat(group, member)

    def _remove_sync_expiration(self, group: ClassicGroup) -> None:
        group.pending_sync_members.clear()
        self.timers.cancel((_SYNC, group.group_id))

    def _expire_pending_sync(self, group_id: str, generation: int) -> None:
        group = self.groups.get(group_id)
        if group is None or generation != group.generation_id:
            return
        if group.state not in (GroupState.COMPLETING_REBALANCE, GroupState.STABLE):
            return
        if group.has_received_sync_from_all_members():
            return
        for member_id in list(group.pending_sync_members):
            removed = group.remove(member_id)
            self._cancel_heartbeat(group, member_id)
            if removed is not None:
                self._emit(
                    ev.MEMBER_EXPIRED,
                    group,
                    member_id=member_id,
                    instance_id=removed.group_instance_id,
                    cause="sync-timeout",
                )
        self._prepare_rebalance(group, ev.REASON_SYNC_TIMEOUT, "members did not send SyncGroup in time")

    def _expire_heartbeat(self, group_id: str, member_id: str) -> None:
        group = self.groups.get(group_id)
        if group is None or group.is_in(GroupState.DEAD):
            return
        if group.is_pending_member(member_id):
            group.remove(member_id)
            self._emit(ev.MEMBER_EXPIRED, group, member_id=member_id, instance_id=None, cause="pending")
            if group.is_in(GroupState.PREPARING_REBALANCE) and group.has_all_members_joined():
                self._complete_join(group)
            return
        member = group.members.get(member_id)
        if member is None or member.has_satisfied_heartbeat():
            return
        cause = "join-timeout" if member.is_new else "session-timeout"
        self._emit(
            ev.MEMBER_EXPIRED, group, member_id=member_id, instance_id=member.group_instance_id, cause=cause
        )
        self._remove_member_and_update_group(
            group, member, ev.REASON_SESSION_TIMEOUT, f"member {member_id} expired ({cause})"
        )

    def _remove_member_and_update_group(
        self, group: ClassicGroup, member: Member, reason: str, detail: str
    ) -> None:
        group.complete_join(member, JoinGroupResponse(error=ErrorCode.unknown_member_id, member_id=""))
        group.remove(member.member_id)
        if group.state in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
            self._maybe_prepare_rebalance_or_complete_join(group, reason, detail)
        elif group.is_in(GroupState.PREPARING_REBALANCE) and group.has_all_members_joined():
            self._complete_join(group)

    # === SyncGroup =================================================================================

    def sync_group(
        self, ctx: RequestContext, request: SyncGroupRequest, respond: Callable[[SyncGroupResponse], None]
    ) -> None:
        reply = _Once(respond)
        if ctx.api_version >= 5 and (request.protocol_type is None or request.protocol_name is None):
            reply(SyncGroupResponse(error=ErrorCode.inconsistent_group_protocol))
            return
        if not request.group_id:
            reply(SyncGroupResponse(error=ErrorCode.invalid_group_id))
            return
        group = self.groups.get(request.group_id)
        if group is None or group.is_empty:
            reply(SyncGroupResponse(error=ErrorCode.unknown_member_id))
            return
        error = self._validate_sync(group, request)
        if error is not None:
            reply(SyncGroupResponse(error=error))
            return
        member = group.member(request.member_id)
        state = group.state
        if state is GroupState.PREPARING_REBALANCE:
            reply(SyncGroupResponse(error=ErrorCode.rebalance_in_progress))
        elif state is GroupState.COMPLETING_REBALANCE:
            member.awaiting_sync = reply
            self._remove_pending_sync_member(group, request.member_id)
            if group.is_leader(request.member_id):
                self._store_assignment(group, request)
        elif state is GroupState.STABLE:
            self._remove_pending_sync_member(group, request.member_id)
            reply(
                SyncGroupResponse(
                    protocol_type=group.protocol_type,
                    protocol_name=group.protocol_name,
                    assignment=member.assignment,
                )
            )
        else:
            raise IllegalTransition(f"SyncGroup reached group {group.group_id} in state {state}")

    def _validate_sync(self, group: ClassicGroup, request: SyncGroupRequest) -> ErrorCode | None:
        if group.is_in(GroupState.DEAD):
            return ErrorCode.coordinator_not_available
        try:
            group.validate_member(request.member_id, request.group_instance_id)
        except CoordinatorError as exc:
            if exc.code == ErrorCode.fenced_instance_id:
                self._emit_fenced(group, request.member_id, request.group_instance_id, "SyncGroup")
            return exc.code
        if request.generation_id != group.generation_id:
            return ErrorCode.illegal_generation
        if _inconsistent(request.protocol_type, group.protocol_type) or _inconsistent(
            request.protocol_name, group.protocol_name
        ):
            return ErrorCode.inconsistent_group_protocol
        return None

    def _store_assignment(self, group: ClassicGroup, request: SyncGroupRequest) -> None:
        assignment = {a.member_id: a.assignment for a in request.assignments}
        for member_id in group.members:
            assignment.setdefault(member_id, b"")
        try:
            self._persist_group(group, self._group_record(group, assignment))
        except StoreError as exc:
            if group.is_in(GroupState.COMPLETING_REBALANCE) and request.generation_id == group.generation_id:
                error = append_error_to_response_error(exc.code)
                self._reset_and_propagate_assignment(group, error)
                self._maybe_prepare_rebalance_or_complete_join(
                    group, ev.REASON_ASSIGNMENT_NOT_STORED, f"storing the assignment failed: {exc}"
                )
            return
        if group.is_in(GroupState.COMPLETING_REBALANCE) and request.generation_id == group.generation_id:
            self._set_and_propagate_assignment(group, assignment)
            now = self.clock.now_ms()
            group.transition_to(GroupState.STABLE, now)
            self._finish_rebalance(group, now)

    def _remove_pending_sync_member(self, group: ClassicGroup, member_id: str) -> None:
        group.pending_sync_members.discard(member_id)
        if group.state in (GroupState.COMPLETING_REBALANCE, GroupState.STABLE):
            if group.has_received_sync_from_all_members():
                self.timers.cancel((_SYNC, group.group_id))
        else:
            self.timers.cancel((_SYNC, group.group_id))

    # === Heartbeat =================================================================================

    def heartbeat(self, ctx: RequestContext, request: HeartbeatRequest) -> HeartbeatResponse:
        group = self.groups.get(request.group_id)
        if group is None:
            return _HB_UNKNOWN if request.group_id else _HB_INVALID_GROUP
        if not request.group_id:
            return _HB_INVALID_GROUP
        state = group.state
        if state is GroupState.DEAD:
            return _HB_NOT_AVAILABLE
        member_id = request.member_id
        instance_id = request.group_instance_id
        if instance_id is not None:
            mapped = group.static_members.get(instance_id)
            if mapped is None:
                return _HB_UNKNOWN
            if mapped != member_id:
                self._emit_fenced(group, member_id, instance_id, "Heartbeat")
                return _HB_FENCED
        member = group.members.get(member_id)
        if member is None:
            return _HB_UNKNOWN
        if request.generation_id != group.generation_id:
            return _HB_ILLEGAL_GENERATION
        if state is GroupState.EMPTY:
            return _HB_UNKNOWN
        self.timers.schedule(
            (_HEARTBEAT, group.group_id, member_id), self.clock.now_ms() + member.session_timeout_ms
        )
        return _HB_REBALANCING if state is GroupState.PREPARING_REBALANCE else _HB_NONE

    # === LeaveGroup ================================================================================

    def leave_group(self, ctx: RequestContext, request: LeaveGroupRequest) -> LeaveGroupResponse:
        if not request.group_id:
            return LeaveGroupResponse(error=ErrorCode.invalid_group_id)
        group = self.groups.get(request.group_id)
        if group is None:
            return LeaveGroupResponse(
                members=tuple(
                    LeaveMemberResponse(m.member_id, m.group_instance_id, ErrorCode.unknown_member_id)
                    for m in request.members
                )
            )
        if group.is_in(GroupState.DEAD):
            return LeaveGroupResponse(error=ErrorCode.coordinator_not_available)
        responses: list[LeaveMemberResponse] = []
        removed_by_instance = False
        for identity in request.members:
            member_id = identity.member_id
            instance_id = identity.group_instance_id
            if member_id == "":
                mapped = group.static_member_id(instance_id) if instance_id is not None else None
                if mapped is None:
                    responses.append(LeaveMemberResponse(member_id, instance_id, ErrorCode.unknown_member_id))
                    continue
                self._remove_leaving_member(group, mapped, ev.MEMBER_REMOVED, identity.reason)
                removed_by_instance = True
                responses.append(LeaveMemberResponse(member_id, instance_id))
                continue
            if group.is_pending_member(member_id):
                group.remove(member_id)
                self._cancel_heartbeat(group, member_id)
                responses.append(LeaveMemberResponse(member_id, instance_id))
                continue
            try:
                group.validate_member(member_id, instance_id)
            except CoordinatorError as exc:
                if exc.code == ErrorCode.fenced_instance_id:
                    self._emit_fenced(group, member_id, instance_id, "LeaveGroup")
                responses.append(LeaveMemberResponse(member_id, instance_id, exc.code))
                continue
            self._remove_leaving_member(group, member_id, ev.MEMBER_LEFT, identity.reason)
            responses.append(LeaveMemberResponse(member_id, instance_id))
        if any(r.error == ErrorCode.none for r in responses):
            reason = ev.REASON_MEMBER_REMOVED if removed_by_instance else ev.REASON_MEMBER_LEFT
            left = ", ".join(
                r.member_id or f"instance {r.group_instance_id}" for r in responses if not r.error
            )
            if group.state in (GroupState.COMPLETING_REBALANCE, GroupState.STABLE):
                self._maybe_prepare_rebalance_or_complete_join(group, reason, f"LeaveGroup for {left}")
            elif group.is_in(GroupState.PREPARING_REBALANCE):
                self._maybe_complete_join_phase(group)
        return LeaveGroupResponse(members=tuple(responses))

    def _remove_leaving_member(
        self, group: ClassicGroup, member_id: str, kind: str, reason: str | None
    ) -> None:
        member = group.member(member_id)
        self._cancel_heartbeat(group, member_id)
        group.complete_join(member, JoinGroupResponse(error=ErrorCode.unknown_member_id, member_id=""))
        group.remove(member_id)
        self._emit(
            kind, group, member_id=member_id, instance_id=member.group_instance_id, client_reason=reason
        )

    # === OffsetCommit / OffsetFetch ================================================================

    def commit_offsets(self, ctx: RequestContext, request: OffsetCommitRequest) -> OffsetCommitResponse:
        group = self.groups.get(request.group_id)
        if group is None:
            if request.generation_id >= 0:
                error = ErrorCode.group_id_not_found if ctx.api_version >= 9 else ErrorCode.illegal_generation
                return OffsetCommitResponse.all_failed(request, error)
            # No group and no generation: a consumer outside group management. Kafka calls it a simple group.
            group = self._create_group(request.group_id)
        try:
            self._validate_offset_commit(group, request)
        except CoordinatorError as exc:
            return OffsetCommitResponse.all_failed(request, exc.code)
        if group.state in (GroupState.STABLE, GroupState.PREPARING_REBALANCE):
            self._reschedule_member_heartbeat(group, group.member(request.member_id))
        now = self.clock.now_ms()
        expire = now + request.retention_time_ms if request.retention_time_ms != -1 else -1
        records: list[OffsetCommitRecord] = []
        topics: list[TopicResult] = []
        max_metadata = self.config.offset_metadata_max_bytes
        for topic in request.topics:
            results = []
            for p in topic.partitions:
                if _metadata_length(p.metadata) > max_metadata:
                    results.append(PartitionResult(p.partition, ErrorCode.offset_metadata_too_large))
                    continue
                results.append(PartitionResult(p.partition))
                records.append(
                    OffsetCommitRecord(
                        request.group_id,
                        topic.name,
                        p.partition,
                        p.offset,
                        p.leader_epoch,
                        "" if p.metadata is None else p.metadata,
                        now,
                        expire,
                    )
                )
            topics.append(TopicResult(topic.name, tuple(results)))
        if records:
            try:
                self.store.append(records)
            except StoreError as exc:
                return OffsetCommitResponse.all_failed(request, append_error_to_response_error(exc.code))
            for record in records:
                self.offsets.put(record)
        return OffsetCommitResponse(tuple(topics))

    def _validate_offset_commit(self, group: ClassicGroup, request: OffsetCommitRequest) -> None:
        if group.is_in(GroupState.DEAD):
            raise CoordinatorError(ErrorCode.coordinator_not_available)
        if request.generation_id < 0 and group.is_in(GroupState.EMPTY):
            return
        if request.generation_id >= 0 or request.member_id or request.group_instance_id is not None:
            try:
                group.validate_member(request.member_id, request.group_instance_id)
            except CoordinatorError as exc:
                if exc.code == ErrorCode.fenced_instance_id:
                    self._emit_fenced(group, request.member_id, request.group_instance_id, "OffsetCommit")
                raise
            if request.generation_id != group.generation_id:
                raise CoordinatorError(ErrorCode.illegal_generation)
        elif not group.is_in(GroupState.EMPTY):
            raise CoordinatorError(ErrorCode.unknown_member_id)
        if group.is_in(GroupState.COMPLETING_REBALANCE):
            raise CoordinatorError(ErrorCode.rebalance_in_progress)

    def fetch_offsets(self, ctx: RequestContext, request: OffsetFetchRequest) -> OffsetFetchResponse:
        group = self.groups.get(request.group_id)
        known = group is not None and not group.is_in(GroupState.DEAD)
        committed = self.offsets.of_group(request.group_id) if known else {}
        if request.topics is None:
            return OffsetFetchResponse(
                request.group_id,
                tuple(
                    FetchedTopic(
                        topic,
                        tuple(
                            FetchedOffset(p, r.offset, r.leader_epoch, r.metadata)
                            for p, r in partitions.items()
                        ),
                    )
                    for topic, partitions in committed.items()
                ),
            )
        topics = []
        for topic in request.topics:
            by_partition = committed.get(topic.name, {})
            fetched = []
            for p in topic.partitions:
                record = by_partition.get(p)
                if record is None:
                    fetched.append(FetchedOffset(p))
                else:
                    fetched.append(FetchedOffset(p, record.offset, record.leader_epoch, record.metadata))
            topics.append(FetchedTopic(topic.name, tuple(fetched)))
        return OffsetFetchResponse(request.group_id, tuple(topics))

    # === DescribeGroups / ListGroups / DeleteGroups ================================================

    def describe_groups(self, ctx: RequestContext, group_ids: Iterable[str]) -> list[DescribedGroup]:
        described = []
        for group_id in group_ids:
            group = self.groups.get(group_id)
            if group is None:
                if ctx.api_version >= 6:
                    described.append(
                        DescribedGroup(
                            group_id,
                            error=ErrorCode.group_id_not_found,
                            error_message=f"Group {group_id} not found.",
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
        return ListGroupsResponse(tuple(listed))

    def delete_groups(self, ctx: RequestContext, group_ids: Iterable[str]) -> list[DeleteGroupResult]:
        results: list[DeleteGroupResult] = []
        records: list[Record] = []
        deleted: list[ClassicGroup] = []
        for group_id in dict.fromkeys(group_ids):
            group = self.groups.get(group_id)
            if group is None or group.is_in(GroupState.DEAD):
                results.append(DeleteGroupResult(group_id, ErrorCode.group_id_not_found))
                continue
            if not group.is_empty:
                results.append(DeleteGroupResult(group_id, ErrorCode.non_empty_group))
                continue
            records.extend(self._group_tombstones(group_id))
            deleted.append(group)
            results.append(DeleteGroupResult(group_id))
        if records:
            try:
                self.store.append(records)
            except StoreError as exc:
                error = append_error_to_response_error(exc.code)
                failed = {g.group_id for g in deleted}
                return [
                    DeleteGroupResult(r.group_id, error if r.group_id in failed else r.error) for r in results
                ]
        for group in deleted:
            self._drop_group(group)
            self._emit(ev.GROUP_DELETED, group.group_id)
        return results

    def _group_tombstones(self, group_id: str) -> list[Record]:
        records: list[Record] = [
            OffsetTombstone(group_id, topic, partition)
            for topic, partitions in self.offsets.of_group(group_id).items()
            for partition in partitions
        ]
        records.append(GroupTombstone(group_id))
        return records

    def _drop_group(self, group: ClassicGroup) -> None:
        group_id = group.group_id
        for topic, partitions in list(self.offsets.of_group(group_id).items()):
            for partition in list(partitions):
                self.offsets.delete(group_id, topic, partition)
        self.timers.cancel((_JOIN, group_id))
        self.timers.cancel((_SYNC, group_id))
        for member_id in list(group.members) + list(group.pending_join_members):
            self._cancel_heartbeat(group, member_id)
        group.transition_to(GroupState.DEAD, self.clock.now_ms())
        del self.groups[group_id]

    # === offset retention ==========================================================================

    def schedule_cleanup(self) -> None:
        interval = self.config.offsets_retention_check_interval_ms
        self.timers.schedule((_CLEANUP,), self.clock.now_ms() + interval)

    def _cleanup_expired_offsets(self) -> None:
        """Expire offsets past retention and delete Empty groups left with none, as Kafka's cleanup does."""
        now = self.clock.now_ms()
        retention = self.config.offsets_retention_ms
        records: list[Record] = []
        doomed: list[ClassicGroup] = []
        for group in list(self.groups.values()):
            if group.protocol_type is not None and not group.is_empty:
                continue  # offsets of an active group never expire
            base_on_state = group.protocol_type is not None
            offsets = self.offsets.of_group(group.group_id)
            expired = []
            for partitions in offsets.values():
                for record in partitions.values():
                    if record.expire_timestamp != -1:
                        is_expired = now >= record.expire_timestamp
                    else:
                        base = (
                            group.current_state_timestamp
                            if base_on_state and group.current_state_timestamp is not None
                            else record.commit_timestamp
                        )
                        is_expired = now - base >= retention
                    if is_expired:
                        expired.append(record)
            remaining = sum(len(p) for p in offsets.values()) - len(expired)
            records.extend(OffsetTombstone(r.group_id, r.topic, r.partition) for r in expired)
            if remaining == 0 and group.is_empty:
                records.append(GroupTombstone(group.group_id))
                doomed.append(group)
            for record in expired:
                self.offsets.delete(record.group_id, record.topic, record.partition)
        if records:
            try:
                self.store.append(records)
            except StoreError:
                log.warning("could not persist offset expiration", exc_info=True)
        for group in doomed:
            self._drop_group(group)
            self._emit(ev.GROUP_DELETED, group.group_id, cause="expired")
        self.schedule_cleanup()

    # === staticfleet extensions ====================================================================

    def describe_group_config(self, group_id: str) -> dict[str, str]:
        return dict(self.group_configs.get(group_id, {}))

    def alter_group_config(
        self, group_id: str, changes: Mapping[str, str | None], validate_only: bool = False
    ) -> None:
        """Set (value) or delete (None) group configs; CoordinatorError(INVALID_CONFIG) says what is wrong."""
        for name, value in changes.items():
            if name not in GROUP_CONFIG_KEYS:
                raise CoordinatorError(
                    ErrorCode.invalid_config,
                    f"Unknown group config name: {name}. Supported: {', '.join(sorted(GROUP_CONFIG_KEYS))}",
                )
            if value is not None:
                try:
                    parse_instance_ids(value)
                except ValueError as exc:
                    raise CoordinatorError(ErrorCode.invalid_config, str(exc)) from exc
        if validate_only:
            return
        configs = dict(self.group_configs.get(group_id, {}))
        for name, value in changes.items():
            if value is None:
                configs.pop(name, None)
            else:
                configs[name] = ",".join(parse_instance_ids(value))
        record = GroupConfigRecord(group_id, tuple(sorted(configs.items())))
        try:
            self.store.append([record])
        except StoreError as exc:
            raise CoordinatorError(append_error_to_response_error(exc.code), str(exc)) from exc
        self._apply_config(record)
        self._emit(ev.GROUP_CONFIG_CHANGED, group_id, configs=configs)
        group = self.groups.get(group_id)
        if group is not None:
            # A smaller expectation may let a waiting join phase finish now.
            self._maybe_complete_join_phase(group)

    def _apply_config(self, record: GroupConfigRecord) -> None:
        if record.configs:
            self.group_configs[record.group_id] = dict(record.configs)
        else:
            self.group_configs.pop(record.group_id, None)

    def on_partitions_changed(self, topic: str) -> list[str]:
        """A topic gained partitions: rebalance the consumer groups subscribed to it. Returns their ids."""
        if not self.rebalance_on_partition_growth:
            return []
        started = []
        for group in list(self.groups.values()):
            if group.state not in (GroupState.STABLE, GroupState.COMPLETING_REBALANCE):
                continue
            if group.subscribed_topics is None or topic not in group.subscribed_topics:
                continue
            self._prepare_rebalance(group, ev.REASON_PARTITIONS_CHANGED, f"topic {topic} gained partitions")
            started.append(group.group_id)
        return started

    # === loading ===================================================================================

    def replay(self, record: Record) -> None:
        """Apply one durable record while loading; no timers, no events."""
        if isinstance(record, OffsetCommitRecord):
            if record.group_id not in self.groups:
                self._create_group(record.group_id)
            self.offsets.put(record)
        elif isinstance(record, GroupMetadataRecord):
            self._replay_group(record)
        elif isinstance(record, OffsetTombstone):
            self.offsets.delete(record.group_id, record.topic, record.partition)
        elif isinstance(record, GroupTombstone):
            self.groups.pop(record.group_id, None)
        elif isinstance(record, GroupConfigRecord):
            self._apply_config(record)

    def _replay_group(self, record: GroupMetadataRecord) -> None:
        group = ClassicGroup(
            group_id=record.group_id,
            state=GroupState.STABLE if record.members else GroupState.EMPTY,
            generation_id=record.generation,
            protocol_type=record.protocol_type or None,
            protocol_name=record.protocol,
            leader_id=record.leader,
            current_state_timestamp=None
            if record.current_state_timestamp == -1
            else record.current_state_timestamp,
        )
        group.rebalances = type(group.rebalances)(maxlen=self.config.rebalance_history_size)
        previous = self.groups.get(record.group_id)
        if previous is not None:
            group.rebalances.extend(previous.rebalances)
            group.rebalance_count = previous.rebalance_count
        protocol_type = record.protocol_type
        for m in record.members:
            protocols = (
                (JoinProtocol(record.protocol, m.subscription),) if record.protocol is not None else ()
            )
            group.add(
                Member(
                    member_id=m.member_id,
                    group_instance_id=m.group_instance_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    rebalance_timeout_ms=m.rebalance_timeout_ms,
                    session_timeout_ms=m.session_timeout_ms,
                    protocol_type=protocol_type,
                    protocols=protocols,
                    assignment=m.assignment,
                )
            )
        group.subscribed_topics = self._subscribed_topics(group)
        group.last_persisted = record
        self.groups[record.group_id] = group

    def load(self, records: Iterable[Record]) -> int:
        """Replay durable records, then start timers as a freshly loaded coordinator does."""
        count = 0
        put_offset = self.offsets.put
        groups = self.groups
        for record in records:
            count += 1
            if type(record) is OffsetCommitRecord and record.group_id in groups:
                put_offset(record)  # the bulk of any log: skip the general dispatch
            else:
                self.replay(record)
        self.on_loaded()
        return count

    def on_loaded(self) -> None:
        for group in list(self.groups.values()):
            for member in group.members.values():
                self._reschedule_member_heartbeat(group, member)
            self._emit(ev.GROUP_LOADED, group, members=len(group.members))
            if len(group.members) > self.config.max_size:
                self._prepare_rebalance(
                    group,
                    ev.REASON_OVER_CAPACITY,
                    f"loaded with {len(group.members)} members, above group.max.size {self.config.max_size}",
                )
        self.schedule_cleanup()

    def unload(self) -> None:
        """Shutting down: answer every parked JoinGroup and SyncGroup with NOT_COORDINATOR, as Kafka does
        when it unloads a group, so clients look for the coordinator again instead of hanging."""
        for group in self.groups.values():
            for member in list(group.members.values()):
                group.complete_join(
                    member, JoinGroupResponse(error=ErrorCode.not_coordinator, member_id=member.member_id)
                )
                group.complete_sync(member, SyncGroupResponse(error=ErrorCode.not_coordinator))

    def snapshot_records(self) -> Iterator[Record]:
        """The live durable state as records: replaying them rebuilds what a full log replay would."""
        for group_id, configs in self.group_configs.items():
            yield GroupConfigRecord(group_id, tuple(sorted(configs.items())))
        for group in self.groups.values():
            if group.last_persisted is not None:
                yield group.last_persisted
        yield from self.offsets.all()


def _inconsistent(given: str | None, current: str | None) -> bool:
    return given is not None and current is not None and given != current
