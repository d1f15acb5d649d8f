"""Rebalances of classic groups: preparing one, completing the join phase, propagating the assignment,
and the session, join and sync timers that drive them (GroupMetadataManager's classic-group half, less
the request handlers, which membership.py adds on top).

Every method runs inside an operation of the coordinator: records go to `recorder.write` with what to
do once they are durable (or not), and answers to parked requests are recorded as replies.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from staticfleet.coordinator import events as ev
from staticfleet.coordinator.consumer_protocol import assignment_partitions
from staticfleet.coordinator.errors import ErrorCode
from staticfleet.coordinator.group import (
    ClassicGroup,
    GroupState,
    IllegalTransition,
    Member,
    RebalanceRecord,
)
from staticfleet.coordinator.messages import (
    JoinGroupResponse,
    SyncGroupResponse,
)
from staticfleet.coordinator.state import CoordinatorState

log = logging.getLogger(__name__)

# Timer keys: (kind, group id[, member id]).
_HEARTBEAT: Final = 0
_JOIN: Final = 1
_SYNC: Final = 2


@dataclass(slots=True, eq=False)
class _SessionExpiry:
    """A member's session timer's task. Every member has one for as long as it lives, so it is one
    object for the garbage collector to walk where a closure would be four (function and cells)."""

    membership: Rebalancing
    group_id: str
    member_id: str

    def __call__(self) -> None:
        self.membership._expire_heartbeat(self.group_id, self.member_id)


class Rebalancing:
    def __init__(self, state: CoordinatorState, *, rebalance_on_partition_growth: bool = False) -> None:
        self.state = state
        self.clock = state.clock
        self.config = state.config
        self.groups = state.groups
        self.timers = state.timers
        self.recorder = state.recorder
        self.rebalance_on_partition_growth = rebalance_on_partition_growth
        self._emit = state.emit
        self._emit_fenced = state.emit_fenced

    # === timers ====================================================================================

    def schedule_heartbeat(self, group: ClassicGroup, member_id: str, timeout_ms: int) -> None:
        key = (_HEARTBEAT, group.group_id, member_id)
        deadline = self.clock.now_ms() + timeout_ms
        if self.timers.reschedule(key, deadline):
            return
        self.timers.schedule(key, deadline, _SessionExpiry(self, group.group_id, member_id))

    def cancel_heartbeat(self, group: ClassicGroup, member_id: str) -> None:
        self.timers.cancel((_HEARTBEAT, group.group_id, member_id))

    def reschedule_member_heartbeat(self, group: ClassicGroup, member: Member) -> None:
        self.schedule_heartbeat(group, member.member_id, member.session_timeout_ms)

    def _schedule_join_completion(self, group: ClassicGroup, deadline: int) -> None:
        group_id = group.group_id

        def complete_join_phase() -> None:
            current = self.groups.get(group_id)
            if current is not None:
                self._complete_join(current)

        self.timers.schedule((_JOIN, group_id), deadline, complete_join_phase)

    def _schedule_initial_delay(self, group: ClassicGroup, deadline: int, delay: int, remaining: int) -> None:
        group_id = group.group_id

        def end_initial_rebalance_delay() -> None:
            current = self.groups.get(group_id)
            if current is not None:
                self._on_initial_delay_over(current, delay, remaining)

        self.timers.schedule((_JOIN, group_id), deadline, end_initial_rebalance_delay)

    def _schedule_sync_expiration(self, group: ClassicGroup, deadline: int) -> None:
        group_id, generation = group.group_id, group.generation_id

        def expire_pending_sync() -> None:
            self._expire_pending_sync(group_id, generation)

        self.timers.schedule((_SYNC, group_id), deadline, expire_pending_sync)

    def extend_session(self, group: ClassicGroup, member: Member) -> None:
        """A heartbeat: the member's session timer starts again."""
        deadline = self.clock.now_ms() + member.session_timeout_ms
        if not self.timers.reschedule((_HEARTBEAT, group.group_id, member.member_id), deadline):
            self.schedule_heartbeat(group, member.member_id, member.session_timeout_ms)

    def cancel_sync_expiration(self, group: ClassicGroup) -> None:
        self.timers.cancel((_SYNC, group.group_id))

    def cancel_group_timers(self, group: ClassicGroup) -> None:
        group_id = group.group_id
        self.timers.cancel((_JOIN, group_id))
        self.timers.cancel((_SYNC, group_id))
        for member_id in list(group.members) + list(group.pending_join_members):
            self.cancel_heartbeat(group, member_id)

    def drop_group(self, group: ClassicGroup) -> None:
        """The group and its offsets are gone (deleted, or expired by retention)."""
        self.state.offsets.delete_group(group.group_id)
        self.cancel_group_timers(group)
        group.transition_to(GroupState.DEAD, self.clock.now_ms())
        del self.groups[group.group_id]

    # === rebalancing ===============================================================================

    def maybe_prepare_rebalance_or_complete_join(self, group: ClassicGroup, reason: str, detail: str) -> None:
        if group.can_rebalance():
            self.prepare_rebalance(group, reason, detail)
        else:
            self.maybe_complete_join_phase(group)

    def prepare_rebalance(self, group: ClassicGroup, reason: str, detail: str) -> None:
        now = self.clock.now_ms()
        if group.is_in(GroupState.COMPLETING_REBALANCE):
            self._reset_and_propagate_assignment(group, ErrorCode.rebalance_in_progress)
        self._remove_sync_expiration(group)
        is_initial = group.is_in(GroupState.EMPTY)
        if is_initial:
            delay = self.config.initial_rebalance_delay_ms
            remaining = max(group.rebalance_timeout_ms() - delay, 0)
            self._schedule_initial_delay(group, now + delay, delay, remaining)
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
        elif self.state.expected_instances(group.group_id):
            self.maybe_complete_join_phase(group)  # the only expected instance may have just joined

    def _expected_instances_joined(self, group: ClassicGroup) -> bool:
        return group.expected_instances_joined(self.state.expected_instances(group.group_id))

    def _maybe_complete_join_else_schedule(self, group: ClassicGroup) -> None:
        if group.has_all_members_joined() and self._expected_instances_joined(group):
            self._complete_join(group)
        else:
            self._schedule_join_completion(group, self.clock.now_ms() + group.rebalance_timeout_ms())

    def maybe_complete_join_phase(self, group: ClassicGroup) -> None:
        if not group.is_in(GroupState.PREPARING_REBALANCE) or not group.has_all_members_joined():
            return
        if group.previous_state is GroupState.EMPTY:
            # Kafka never ends an initial rebalance early; with expected instances configured, the
            # last expected instance to join ends it.
            if self.state.expected_instances(group.group_id) and self._expected_instances_joined(group):
                self._complete_join(group)
            return
        if self._expected_instances_joined(group):
            self._complete_join(group)

    def _on_initial_delay_over(self, group: ClassicGroup, delay: int, remaining: int) -> None:
        now = self.clock.now_ms()
        if (
            self.state.expected_instances(group.group_id)
            and not self._expected_instances_joined(group)
            and remaining
        ):
            # Wait for the expected instances until the rebalance timeout, not in initial-delay steps.
            group.new_member_added = False
            self._schedule_initial_delay(group, now + remaining, delay, 0)
            return
        if not group.new_member_added or remaining == 0:
            self._complete_join(group)
            return
        group.new_member_added = False
        new_delay = min(self.config.initial_rebalance_delay_ms, remaining)
        new_remaining = max(remaining - delay, 0)
        self._schedule_initial_delay(group, now + new_delay, new_delay, new_remaining)

    def _complete_join(self, group: ClassicGroup) -> None:
        self.timers.cancel((_JOIN, group.group_id))
        now = self.clock.now_ms()
        for member in list(group.not_yet_rejoined()):
            if member.is_static:
                continue  # static members are kept through the join phase (KIP-345)
            group.remove(member.member_id)
            self.cancel_heartbeat(group, member.member_id)
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
            self._schedule_join_completion(group, now + group.rebalance_timeout_ms())
            return
        group.init_next_generation(now)
        if group.is_in(GroupState.EMPTY):
            record = group.metadata_record({})

            def written() -> None:
                group.last_persisted = record

            def failed(error: ErrorCode, message: str) -> None:
                # As Kafka: nobody waits on this record, and the empty generation is harmless if lost.
                log.warning("could not persist that group %s is empty: %s", group.group_id, message)

            self.recorder.write([record], written, failed)
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
            self.reschedule_member_heartbeat(group, member)
            member.is_new = False
            group.pending_sync_members.add(member.member_id)
        group.subscribed_topics = group.consumer_topics()
        self._schedule_sync_expiration(group, now + group.rebalance_timeout_ms())
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
                self.reschedule_member_heartbeat(group, member)

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
            self.cancel_heartbeat(group, member_id)
            if removed is not None:
                self._emit(
                    ev.MEMBER_EXPIRED,
                    group,
                    member_id=member_id,
                    instance_id=removed.group_instance_id,
                    cause="sync-timeout",
                )
        self.prepare_rebalance(group, ev.REASON_SYNC_TIMEOUT, "members did not send SyncGroup in time")

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
            self.maybe_prepare_rebalance_or_complete_join(group, reason, detail)
        elif group.is_in(GroupState.PREPARING_REBALANCE) and group.has_all_members_joined():
            self._complete_join(group)
