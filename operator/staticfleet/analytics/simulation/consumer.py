"""A consumer process as Kafka's Java client runs it, reduced to what the group protocol sees.

It joins (JoinGroup v9, with its pod name as group.instance.id when membership is static), syncs (the
leader range-assigns and encodes consumer-protocol assignments), heartbeats every interval, and rejoins
on REBALANCE_IN_PROGRESS or ILLEGAL_GENERATION. A dynamic member sends LeaveGroup when it closes; a
static one does not. A restart is a new process: a new object with an empty member id.
"""

from __future__ import annotations

import enum
from typing import TYPE_CHECKING, Any, Final

from staticfleet.analytics.simulation.assignor import leader_assignments
from staticfleet.coordinator.consumer_protocol import decode_assignment
from staticfleet.coordinator.errors import ErrorCode
from staticfleet.coordinator.messages import (
    HeartbeatRequest,
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    MemberIdentity,
    RequestContext,
    SyncGroupAssignment,
    SyncGroupRequest,
    SyncGroupResponse,
)

if TYPE_CHECKING:
    from staticfleet.analytics.simulation.fleet import Fleet

JOIN_VERSION: Final = 9
SYNC_VERSION: Final = 5
HEARTBEAT_VERSION: Final = 4
LEAVE_VERSION: Final = 5
RETRY_BACKOFF_MS: Final = 100
MAX_RETRIES: Final = 50


class ClientState(enum.Enum):
    JOINING = "joining"
    SYNCING = "syncing"
    STABLE = "stable"
    FAILED = "failed"


class VirtualConsumer:
    def __init__(self, fleet: Fleet, ordinal: int, client_host: str) -> None:
        self.fleet = fleet
        self.sim = fleet.sim
        self.ordinal = ordinal
        self.lane = fleet.lane + 1 + ordinal
        pod = f"{fleet.group_id}-{ordinal}"
        self.instance_id: str | None = pod if fleet.static else None
        self.member_id = ""
        self.generation = -1
        self.state = ClientState.JOINING
        self.alive = True
        self.blocked = False
        """Cut off from the coordinator (a network blip): nothing is sent, answers are lost."""
        self.active = False
        """About to stop or be cut off: send every heartbeat (see Fleet.announce)."""
        self._assignment = b""
        self.hb_anchor = 0
        self.hb_at: int | None = None
        self._hb_token = 0
        self._request_token = 0
        self._lost_answer = False
        self._retries = 0
        self._hb_request = HeartbeatRequest(fleet.group_id, -1, "", None)
        self._ctx = RequestContext(JOIN_VERSION, pod, client_host)
        self._sync_ctx = RequestContext(SYNC_VERSION, pod, client_host)
        self._hb_ctx = RequestContext(HEARTBEAT_VERSION, pod, client_host)

    @property
    def assignment(self) -> dict[str, tuple[int, ...]]:
        return decode_assignment(self._assignment).partitions

    # --- lifecycle ---------------------------------------------------------------------------------

    def start(self) -> None:
        self.sim.at(self.sim.now(), self.lane, self._join)

    def stop(self, graceful: bool) -> None:
        """The process ends. Closing gracefully, a dynamic member leaves the group first, as
        KafkaConsumer.close() does; a static member never does, and a crash says nothing."""
        if not self.alive:
            return
        if graceful and not self.fleet.static and self.member_id and not self.blocked:
            request = LeaveGroupRequest(
                self.fleet.group_id, (MemberIdentity(self.member_id, None, "the consumer is being closed"),)
            )
            self.sim.coordinator.leave_group(RequestContext(LEAVE_VERSION, self._ctx.client_id), request)
        self.alive = False
        self._cancel_heartbeat()
        self.fleet.sim.changed(self.fleet)

    def block(self) -> None:
        self.blocked = True

    def unblock(self) -> None:
        """Connectivity is back: heartbeat at once, or rejoin if an answer was lost meanwhile."""
        self.blocked = False
        self.active = False
        if not self.alive:
            return
        now = self.sim.now()
        if self.state is ClientState.STABLE:
            self.hb_anchor = now
            self._schedule_heartbeat(now)
        elif self._lost_answer and self.state is not ClientState.FAILED:
            self._lost_answer = False
            self._join()
        self.sim.changed(self.fleet)

    def activate(self) -> None:
        self.active = True
        self.wake()

    # --- JoinGroup / SyncGroup ----------------------------------------------------------------------

    def _join(self, _: Any = None) -> None:
        if not self.alive or self.state is ClientState.FAILED:
            return
        if self.blocked:
            self._lost_answer = True  # rejoin once connectivity is back
            return
        self.state = ClientState.JOINING
        self._cancel_heartbeat()
        self._request_token += 1
        token = self._request_token
        fleet = self.fleet
        request = JoinGroupRequest(
            fleet.group_id,
            fleet.params.session_timeout_ms,
            fleet.params.rebalance_timeout_ms,
            self.member_id,
            self.instance_id,
            "consumer",
            fleet.protocols,
        )
        sim = self.sim
        sim.coordinator.join_group(
            self._ctx,
            request,
            lambda response: sim.at(sim.now(), self.lane, self._on_join, (token, response)),
        )

    def _answer_is_current(self, token: int) -> bool:
        if token != self._request_token or not self.alive:
            return False
        if self.blocked:
            self._lost_answer = True
            return False
        return True

    def _on_join(self, arg: tuple[int, JoinGroupResponse]) -> None:
        token, response = arg
        if not self._answer_is_current(token):
            return
        error = response.error
        if error == ErrorCode.none:
            self._retries = 0
            self.member_id = response.member_id
            self.generation = response.generation_id
            self.state = ClientState.SYNCING
            assignments: tuple[SyncGroupAssignment, ...] = ()
            if response.leader == self.member_id and not response.skip_assignment:
                encoded = leader_assignments(
                    [(m.member_id, m.group_instance_id, m.metadata) for m in response.members],
                    self.fleet.partitions_per_topic,
                )
                assignments = tuple(SyncGroupAssignment(m, a) for m, a in encoded.items())
            self._sync(assignments)
        elif error == ErrorCode.member_id_required:
            self.member_id = response.member_id
            self._join()
        elif error == ErrorCode.unknown_member_id:
            self.member_id = ""
            self._join()
        elif error == ErrorCode.fenced_instance_id:
            self._fail()
        else:
            self._retry(self._join)

    def _sync(self, assignments: tuple[SyncGroupAssignment, ...]) -> None:
        self._request_token += 1
        token = self._request_token
        request = SyncGroupRequest(
            self.fleet.group_id,
            self.generation,
            self.member_id,
            self.instance_id,
            "consumer",
            "range",
            assignments,
        )
        sim = self.sim
        sim.coordinator.sync_group(
            self._sync_ctx,
            request,
            lambda response: sim.at(sim.now(), self.lane, self._on_sync, (token, response)),
        )

    def _on_sync(self, arg: tuple[int, SyncGroupResponse]) -> None:
        token, response = arg
        if not self._answer_is_current(token):
            return
        error = response.error
        if error == ErrorCode.none:
            self._retries = 0
            self._assignment = response.assignment
            self._hb_request = HeartbeatRequest(
                self.fleet.group_id, self.generation, self.member_id, self.instance_id
            )
            self.state = ClientState.STABLE
            now = self.sim.now()
            self.hb_anchor = now
            self._schedule_heartbeat(now + self.fleet.params.heartbeat_interval_ms)
            self.sim.changed(self.fleet)
        elif error in (ErrorCode.rebalance_in_progress, ErrorCode.illegal_generation):
            self._join()
        elif error == ErrorCode.unknown_member_id:
            self.member_id = ""
            self._join()
        elif error == ErrorCode.fenced_instance_id:
            self._fail()
        else:
            self._retry(self._join)

    # --- heartbeats ---------------------------------------------------------------------------------

    def _schedule_heartbeat(self, time_ms: int) -> None:
        self._hb_token += 1
        self.hb_at = time_ms
        self.sim.at(time_ms, self.lane, self._heartbeat, self._hb_token)

    def _cancel_heartbeat(self) -> None:
        self._hb_token += 1
        self.hb_at = None

    def _heartbeat(self, token: int) -> None:
        if token != self._hb_token or not self.alive or self.state is not ClientState.STABLE:
            return
        self.hb_at = None
        if self.blocked:
            return  # resumes in unblock()
        sim = self.sim
        sim.heartbeats += 1
        error = sim.coordinator.heartbeat(self._hb_ctx, self._hb_request).error
        now = sim.now()
        if error == ErrorCode.none:
            interval = self.fleet.params.heartbeat_interval_ms
            if self.active or self.fleet.params.all_heartbeats:
                self._schedule_heartbeat(now + interval)
            else:
                # Nothing can change what this member hears before the next group event (which wakes
                # it) but its own session: heartbeat on the last tick before the session would end.
                ticks = (self.fleet.params.session_timeout_ms - 1) // interval
                self._schedule_heartbeat(now + ticks * interval)
        elif error in (ErrorCode.rebalance_in_progress, ErrorCode.illegal_generation):
            self._join()
        elif error == ErrorCode.unknown_member_id:
            self.member_id = ""
            self._join()
        elif error == ErrorCode.fenced_instance_id:
            self._fail()
        else:
            self._schedule_heartbeat(now + self.fleet.params.heartbeat_interval_ms)

    def wake(self) -> None:
        """Heartbeat on the next tick of this member's heartbeat clock, as it would with every heartbeat.

        A tick at this very millisecond counts if this member's lane has not had its turn yet.
        """
        scheduled = self.hb_at
        if scheduled is None:
            return
        sim = self.sim
        now = sim.now()
        interval = self.fleet.params.heartbeat_interval_ms
        elapsed = now - self.hb_anchor
        ticks = max(1, -(-elapsed // interval))
        tick = self.hb_anchor + ticks * interval
        if tick == now and self.lane <= sim.lane:
            tick += interval
        if tick < scheduled:
            self._schedule_heartbeat(tick)

    # --- errors -------------------------------------------------------------------------------------

    def _retry(self, action: Any) -> None:
        self._retries += 1
        if self._retries > MAX_RETRIES:
            self._fail()
            return
        self.sim.at(self.sim.now() + RETRY_BACKOFF_MS, self.lane, action)

    def _fail(self) -> None:
        """A fatal error (FENCED_INSTANCE_ID): the client gives up, as the Java client does."""
        self.state = ClientState.FAILED
        self._cancel_heartbeat()
        self.fleet.failed += 1
        self.sim.changed(self.fleet)
