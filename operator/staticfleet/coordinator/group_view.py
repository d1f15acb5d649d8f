"""The coordinator's view of a group as its HTTP API serves it (`/api/groups[/{id}]`): what DescribeGroups
cannot say — the generation, the rebalance count, the last rebalances with reason and duration, the
expected instance ids. Written by the coordinator with `to_json`, read by the operator with `from_json`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Protocol

from staticfleet.coordinator.consumer_protocol import assignment_partitions, subscribed_topics
from staticfleet.coordinator.group import ClassicGroup, Member, RebalanceRecord
from staticfleet.coordinator.state import EXPECTED_INSTANCE_IDS

__all__ = [
    "CoordinatorGroupView",
    "MemberSnapshot",
    "RebalanceRecord",
    "rebalance_from_json",
    "rebalance_to_json",
    "summary_json",
]


def rebalance_to_json(record: RebalanceRecord) -> dict[str, Any]:
    return {
        "generation": record.generation,
        "reason": record.reason,
        "startedMs": record.started_ms,
        "completedMs": record.completed_ms,
        "durationMs": record.duration_ms,
        "members": record.members,
    }


def rebalance_from_json(data: Mapping[str, Any]) -> RebalanceRecord:
    return RebalanceRecord(
        generation=int(data.get("generation", 0)),
        reason=str(data.get("reason") or ""),
        started_ms=int(data.get("startedMs") or 0),
        completed_ms=int(data.get("completedMs") or 0),
        members=int(data.get("members") or 0),
    )


class GroupConfigSource(Protocol):
    """Where a view finds a group's configs (the coordinator)."""

    def describe_group_config(self, group_id: str) -> dict[str, str]: ...


@dataclass(frozen=True, slots=True)
class CoordinatorGroupView:
    """One group; the fields after `last_rebalance` are only in the detailed view of one group."""

    group_id: str
    state: str
    generation: int
    protocol: str | None
    leader_instance_id: str | None
    members: int
    rebalances: int
    last_rebalance: RebalanceRecord | None
    protocol_type: str = ""
    leader: str | None = None
    rebalance_in_progress: str | None = None  # its reason, while one runs
    rebalance_started_ms: int | None = None
    recent_rebalances: tuple[RebalanceRecord, ...] = ()
    expected_instance_ids: tuple[str, ...] = ()
    member_list: tuple[dict[str, Any], ...] = ()

    @classmethod
    def of(
        cls,
        coordinator: GroupConfigSource,
        group: ClassicGroup,
        member_list: tuple[dict[str, Any], ...] | None = None,
    ) -> CoordinatorGroupView:
        """The view of `group` now; `member_list` given, it stands for the members' entries."""
        leader = group.members.get(group.leader_id) if group.leader_id else None
        expected = coordinator.describe_group_config(group.group_id).get(EXPECTED_INSTANCE_IDS)
        return cls(
            group_id=group.group_id,
            state=str(group.state),
            generation=group.generation_id,
            protocol=group.protocol_name,
            leader_instance_id=leader.group_instance_id if leader else None,
            members=len(group.members),
            rebalances=group.rebalance_count,
            last_rebalance=group.rebalances[-1] if group.rebalances else None,
            protocol_type=group.protocol_type or "",
            leader=group.leader_id,
            rebalance_in_progress=None if group.rebalance_started_ms is None else group.rebalance_reason,
            rebalance_started_ms=group.rebalance_started_ms,
            recent_rebalances=tuple(group.rebalances),
            expected_instance_ids=tuple(expected.split(",")) if expected else (),
            member_list=(
                tuple(_member(group, m) for m in group.members.values())
                if member_list is None
                else member_list
            ),
        )

    def to_json(self, *, detail: bool = True) -> dict[str, Any]:
        out: dict[str, Any] = {
            "groupId": self.group_id,
            "state": self.state,
            "generation": self.generation,
            "protocolType": self.protocol_type,
            "protocol": self.protocol,
            "leader": self.leader,
            "leaderInstanceId": self.leader_instance_id,
            "members": self.members,
            "rebalances": self.rebalances,
            "lastRebalance": None if self.last_rebalance is None else rebalance_to_json(self.last_rebalance),
        }
        if detail:
            out["memberList"] = list(self.member_list)
            out["rebalanceInProgress"] = (
                None
                if self.rebalance_in_progress is None
                else {"reason": self.rebalance_in_progress, "startedMs": self.rebalance_started_ms}
            )
            out["recentRebalances"] = [rebalance_to_json(r) for r in self.recent_rebalances]
            out["expectedInstanceIds"] = list(self.expected_instance_ids)
        return out

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> CoordinatorGroupView:
        last = data.get("lastRebalance")
        in_progress = data.get("rebalanceInProgress")
        return cls(
            group_id=str(data.get("groupId", "")),
            state=str(data.get("state", "")),
            generation=int(data.get("generation", 0)),
            protocol=data.get("protocol"),
            leader_instance_id=data.get("leaderInstanceId"),
            members=int(data.get("members", 0)),
            rebalances=int(data.get("rebalances", 0)),
            last_rebalance=rebalance_from_json(last) if last else None,
            protocol_type=str(data.get("protocolType") or ""),
            leader=data.get("leader"),
            rebalance_in_progress=str(in_progress.get("reason") or "") if in_progress else None,
            rebalance_started_ms=in_progress.get("startedMs") if in_progress else None,
            recent_rebalances=tuple(rebalance_from_json(r) for r in data.get("recentRebalances") or ()),
            expected_instance_ids=tuple(data.get("expectedInstanceIds") or ()),
            member_list=tuple(data.get("memberList") or ()),
        )


def summary_json(group: ClassicGroup) -> dict[str, Any]:
    """A group's entry in `/api/groups`: `CoordinatorGroupView.of(...).to_json(detail=False)`, read
    straight from the group (a listing of many groups builds one per group)."""
    leader_id = group.leader_id
    leader = group.members.get(leader_id) if leader_id else None
    last = group.rebalances[-1] if group.rebalances else None
    return {
        "groupId": group.group_id,
        "state": group.state.value,
        "generation": group.generation_id,
        "protocolType": group.protocol_type or "",
        "protocol": group.protocol_name,
        "leader": leader_id,
        "leaderInstanceId": leader.group_instance_id if leader else None,
        "members": len(group.members),
        "rebalances": group.rebalance_count,
        "lastRebalance": None if last is None else rebalance_to_json(last),
    }


@dataclass(frozen=True, slots=True)
class MemberSnapshot:
    """What the detailed view shows of a member, copied as it is now: turning it into JSON (decoding the
    assignment and subscription) can then wait, and the member change meanwhile."""

    member_id: str
    instance_id: str | None
    client_id: str
    client_host: str
    session_timeout_ms: int
    rebalance_timeout_ms: int
    assignment: bytes | None
    """The consumer-protocol assignment (None: not a consumer group)."""
    subscription: bytes | None
    """The consumer-protocol subscription of the group's protocol (None: no protocol chosen)."""

    @classmethod
    def of(cls, group: ClassicGroup, member: Member) -> MemberSnapshot:
        consumer = group.protocol_type == "consumer"
        protocol = group.protocol_name
        return cls(
            member.member_id,
            member.group_instance_id,
            member.client_id,
            member.client_host,
            member.session_timeout_ms,
            member.rebalance_timeout_ms,
            member.assignment if consumer else None,
            member.metadata(protocol) if consumer and protocol else None,
        )

    def to_json(self) -> dict[str, Any]:
        entry: dict[str, Any] = {
            "memberId": self.member_id,
            "instanceId": self.instance_id,
            "clientId": self.client_id,
            "clientHost": self.client_host,
            "sessionTimeoutMs": self.session_timeout_ms,
            "rebalanceTimeoutMs": self.rebalance_timeout_ms,
        }
        if self.assignment is not None:
            entry["partitions"] = assignment_partitions(self.assignment)
            if self.subscription is not None:
                topics = subscribed_topics(self.subscription)
                entry["subscription"] = sorted(topics) if topics is not None else None
        return entry


def _member(group: ClassicGroup, member: Member) -> dict[str, Any]:
    return MemberSnapshot.of(group, member).to_json()
