"""Membership of classic groups: Kafka's rules for JoinGroup, SyncGroup, Heartbeat and LeaveGroup
(GroupMetadataManager's classic-group request handlers), on top of the rebalances and timers of
rebalancing.py.

Every method runs inside an operation of the coordinator: records go to `recorder.write` with what to
do once they are durable (or not), and answers to parked requests are recorded as replies.
"""

from __future__ import annotations

import logging
from typing import Final

from staticfleet.coordinator import events as ev
from staticfleet.coordinator.errors import CoordinatorError, ErrorCode
from staticfleet.coordinator.group import (
    ClassicGroup,
    GroupState,
    IllegalTransition,
    JoinResponder,
    Member,
    SyncResponder,
)
from staticfleet.coordinator.messages import (
    MAX_STRING_BYTES,
    HeartbeatRequest,
    HeartbeatResponse,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    LeaveGroupResponse,
    LeaveMemberResponse,
    RequestContext,
    SyncGroupRequest,
    SyncGroupResponse,
)
from staticfleet.coordinator.rebalancing import Rebalancing

log = logging.getLogger(__name__)

_HB_NONE: Final = HeartbeatResponse(ErrorCode.none)
_HB_REBALANCING: Final = HeartbeatResponse(ErrorCode.rebalance_in_progress)
_HB_UNKNOWN: Final = HeartbeatResponse(ErrorCode.unknown_member_id)
_HB_FENCED: Final = HeartbeatResponse(ErrorCode.fenced_instance_id)
_HB_ILLEGAL_GENERATION: Final = HeartbeatResponse(ErrorCode.illegal_generation)
_HB_INVALID_GROUP: Final = HeartbeatResponse(ErrorCode.invalid_group_id)
_HB_NOT_AVAILABLE: Final = HeartbeatResponse(ErrorCode.coordinator_not_available)


class Membership(Rebalancing):
    """The request handlers of classic groups."""

    # === JoinGroup =================================================================================

    def join_group(self, ctx: RequestContext, request: JoinGroupRequest, reply: JoinResponder) -> None:
        """`reply` answers the request at most once (the coordinator's `Once`)."""
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
        if group is None:
            if not is_unknown_member:
                reply(JoinGroupResponse(error=ErrorCode.unknown_member_id, member_id=request.member_id))
                return
            group = self.state.create_group(request.group_id)
            # Asked for first, so that whatever fails later in this join takes the new group back out.
            self._commit_new_group(group, reply)
        if not group.accepts_joining_member(request.member_id, self.config.max_size):
            group.remove(request.member_id)
            reply(JoinGroupResponse(error=ErrorCode.group_max_size_reached, member_id=""))
        elif is_unknown_member:
            self._join_new_member(ctx, request, group, reply)
        else:
            self._join_existing_member(ctx, request, group, reply)

    def _commit_new_group(self, group: ClassicGroup, reply: JoinResponder) -> None:
        """A freshly created group is committed to the log with an empty record, as Kafka does; if that
        fails the group is taken back out, as Kafka's snapshot revert does."""
        record = group.empty_record()

        def written() -> None:
            group.last_persisted = record

        def failed(error: ErrorCode, message: str) -> None:
            reply(JoinGroupResponse(error=error))
            if self.groups.get(group.group_id) is group:
                self.cancel_group_timers(group)
                for member in list(group.members.values()):
                    group.complete_join(member, JoinGroupResponse(error=error))
                del self.groups[group.group_id]

        self.recorder.write([record], written, failed)

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
        new_member_id = f"{instance_id if instance_id is not None else ctx.client_id}-{self.state.new_uuid()}"
        if len(new_member_id.encode("utf-8")) > MAX_STRING_BYTES:
            # Kafka admits the member, then cannot write any answer that names it (a protocol string
            # holds at most 32767 bytes) and answers UNKNOWN_SERVER_ERROR: it is refused here at once.
            log.info(
                "JoinGroup for group %s refused: the member id made from its %s would be %d bytes",
                group.group_id,
                "group.instance.id" if instance_id is not None else "client id",
                len(new_member_id.encode("utf-8")),
            )
            reply(JoinGroupResponse(error=ErrorCode.unknown_server_error))
            return
        if instance_id is not None:
            existing = group.static_member_id(instance_id)
            if existing is not None:
                self._replace_static_member(ctx, request, group, existing, new_member_id, reply)
            else:
                self._add_member_and_rebalance(ctx, request, group, new_member_id, reply)
        elif ctx.api_version >= 4:
            # KIP-394: hand out a member id and ask the client to come back with it.
            group.add_pending_member(new_member_id)
            self.schedule_heartbeat(group, new_member_id, request.session_timeout_ms)
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
        self.schedule_heartbeat(group, member_id, self.config.new_member_join_timeout_ms)
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
        self.maybe_prepare_rebalance_or_complete_join(group, ev.REASON_MEMBER_JOINED, detail)

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
        self.maybe_prepare_rebalance_or_complete_join(group, reason, detail)

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
        self.reschedule_member_heartbeat(group, new_member)
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
                record = group.metadata_record(group.group_assignment())

                def written() -> None:
                    group.last_persisted = record
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

                def failed(error: ErrorCode, message: str) -> None:
                    # Undo the replacement: the old member id, protocols and timeouts are back.
                    group.update_member(
                        new_member, old_protocols, old_rebalance_timeout, old_session_timeout, None
                    )
                    restored = group.replace_static_member(instance_id, new_member_id, old_member_id)
                    self.reschedule_member_heartbeat(group, restored)
                    reply(
                        JoinGroupResponse(
                            error=error,
                            member_id="",
                            generation_id=group.generation_id,
                            protocol_name=group.protocol_name,
                            protocol_type=group.protocol_type,
                            leader=leader_before,
                            skip_assignment=False,
                        )
                    )

                self.recorder.write([record], written, failed)
                return
            self._emit_replaced_with_rebalance(group, instance_id, old_member_id, new_member_id, ctx)
            self.maybe_prepare_rebalance_or_complete_join(
                group,
                ev.REASON_STATIC_PROTOCOL_CHANGED,
                f"static member {instance_id} rejoined with a protocol that changes the group's choice",
            )
        elif state is GroupState.COMPLETING_REBALANCE:
            # The leader may already be assigning to the old member id: start over.
            self._emit_replaced_with_rebalance(group, instance_id, old_member_id, new_member_id, ctx)
            self.prepare_rebalance(
                group,
                ev.REASON_STATIC_REPLACED_DURING_SYNC,
                f"static member {instance_id} was replaced while the group was completing a rebalance",
            )
        elif state in (GroupState.EMPTY, GroupState.DEAD):
            raise IllegalTransition(f"group {group.group_id} in state {state} maps instance {instance_id}")
        else:
            self._emit_replaced_with_rebalance(group, instance_id, old_member_id, new_member_id, ctx)
            self.maybe_complete_join_phase(group)

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

    # === SyncGroup =================================================================================

    def sync_group(self, ctx: RequestContext, request: SyncGroupRequest, reply: SyncResponder) -> None:
        """`reply` answers the request at most once (the coordinator's `Once`)."""
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
        error = group.validate_sync(
            request.member_id,
            request.group_instance_id,
            request.generation_id,
            request.protocol_type,
            request.protocol_name,
        )
        if error == ErrorCode.fenced_instance_id:
            self._emit_fenced(group, request.member_id, request.group_instance_id, "SyncGroup")
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

    def _store_assignment(self, group: ClassicGroup, request: SyncGroupRequest) -> None:
        assignment = {a.member_id: a.assignment for a in request.assignments}
        for member_id in group.members:
            assignment.setdefault(member_id, b"")
        record = group.metadata_record(assignment)
        generation = request.generation_id

        def still_completing() -> bool:
            # Another member may have joined meanwhile: act only on the generation this was for.
            return group.is_in(GroupState.COMPLETING_REBALANCE) and generation == group.generation_id

        def written() -> None:
            group.last_persisted = record
            if still_completing():
                self._set_and_propagate_assignment(group, assignment)
                now = self.clock.now_ms()
                group.transition_to(GroupState.STABLE, now)
                self._finish_rebalance(group, now)

        def failed(error: ErrorCode, message: str) -> None:
            if still_completing():
                self._reset_and_propagate_assignment(group, error)
                self.maybe_prepare_rebalance_or_complete_join(
                    group, ev.REASON_ASSIGNMENT_NOT_STORED, f"storing the assignment failed: {message}"
                )

        self.recorder.write([record], written, failed)

    def _remove_pending_sync_member(self, group: ClassicGroup, member_id: str) -> None:
        group.pending_sync_members.discard(member_id)
        if group.state in (GroupState.COMPLETING_REBALANCE, GroupState.STABLE):
            if group.has_received_sync_from_all_members():
                self.cancel_sync_expiration(group)
        else:
            self.cancel_sync_expiration(group)

    # === Heartbeat =================================================================================

    def heartbeat(self, ctx: RequestContext, request: HeartbeatRequest) -> HeartbeatResponse:
        """A read: it moves the member's session timer and writes nothing."""
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
        self.extend_session(group, member)
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
                self.cancel_heartbeat(group, member_id)
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
                self.maybe_prepare_rebalance_or_complete_join(group, reason, f"LeaveGroup for {left}")
            elif group.is_in(GroupState.PREPARING_REBALANCE):
                self.maybe_complete_join_phase(group)
        return LeaveGroupResponse(members=tuple(responses))

    def _remove_leaving_member(
        self, group: ClassicGroup, member_id: str, kind: str, reason: str | None
    ) -> None:
        member = group.member(member_id)
        self.cancel_heartbeat(group, member_id)
        group.complete_join(member, JoinGroupResponse(error=ErrorCode.unknown_member_id, member_id=""))
        group.remove(member_id)
        self._emit(
            kind, group, member_id=member_id, instance_id=member.group_instance_id, client_reason=reason
        )

    # === beyond Kafka ==============================================================================

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
            self.prepare_rebalance(group, ev.REASON_PARTITIONS_CHANGED, f"topic {topic} gained partitions")
            started.append(group.group_id)
        return started

    # === loading and unloading =====================================================================

    def on_loaded(self) -> None:
        """Fresh session timers for every loaded member; a group loaded over capacity rebalances."""
        for group in list(self.groups.values()):
            for member in group.members.values():
                self.reschedule_member_heartbeat(group, member)
            self._emit(ev.GROUP_LOADED, group, members=len(group.members))
            if len(group.members) > self.config.max_size:
                self.prepare_rebalance(
                    group,
                    ev.REASON_OVER_CAPACITY,
                    f"loaded with {len(group.members)} members, above group.max.size {self.config.max_size}",
                )

    def unload(self) -> None:
        """Shutting down: answer every parked JoinGroup and SyncGroup with NOT_COORDINATOR, as Kafka does
        when it unloads a group, so clients look for the coordinator again instead of hanging."""
        for group in self.groups.values():
            for member in list(group.members.values()):
                group.complete_join(
                    member, JoinGroupResponse(error=ErrorCode.not_coordinator, member_id=member.member_id)
                )
                group.complete_sync(member, SyncGroupResponse(error=ErrorCode.not_coordinator))
