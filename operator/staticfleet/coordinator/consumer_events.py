"""The event log lines of consumer-protocol groups (KIP-848), in the schema classic groups write
(docs/events.md), so that the analytics read both alike.

A consumer-protocol group has no join phase: its rebalance is a new group epoch, from the change that
raised it (`rebalance_started`) until every member runs the new target assignment (`rebalance_completed`,
or `group_empty` when nobody is left). `generation` is the group epoch; `state` is the classic name of
what the group is doing (Assigning as PreparingRebalance, Reconciling as CompletingRebalance), and
`group_state` the consumer protocol's own.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from staticfleet.coordinator import events as ev
from staticfleet.coordinator.consumer_group import ConsumerGroup, GroupState, Member, TopicCatalog

Emit = Callable[..., None]

CLASSIC_STATE_NAMES = {
    GroupState.EMPTY: "Empty",
    GroupState.ASSIGNING: "PreparingRebalance",
    GroupState.RECONCILING: "CompletingRebalance",
    GroupState.STABLE: "Stable",
}
REASON_REBALANCE_TIMEOUT = "rebalance-timeout"
"""A consumer-protocol member did not give up its partitions within its rebalance timeout."""


@dataclass(frozen=True, slots=True)
class Cause:
    """Why a group changed, as its events say: the rebalance's reason, and the event of a member that goes."""

    reason: str
    detail: str = ""
    gone: str = ev.MEMBER_LEFT
    expired: str | None = None
    """member_expired's cause."""


@dataclass(slots=True)
class _Episode:
    started_ms: int
    reason: str


class ConsumerGroupEvents:
    def __init__(self, emit: Emit, now_ms: Callable[[], int], session_timeout_ms: Callable[[], int]) -> None:
        self._emit = emit
        self._now_ms = now_ms
        self._session_timeout_ms = session_timeout_ms
        self._episodes: dict[str, _Episode] = {}

    def _line(self, kind: str, group: ConsumerGroup, **fields: Any) -> None:
        self._emit(
            kind,
            group.group_id,
            generation=group.group_epoch,
            state=CLASSIC_STATE_NAMES[group.state],
            group_state=str(group.state),
            protocol_type="consumer",
            **fields,
        )

    def changed(
        self, before: ConsumerGroup, after: ConsumerGroup, cause: Cause, assignor: str, topics: TopicCatalog
    ) -> None:
        self._members(before, after, cause)
        episode = self._episodes.get(after.group_id)
        if after.group_epoch > before.group_epoch and episode is None:
            episode = self._episodes[after.group_id] = _Episode(self._now_ms(), cause.reason)
            self._line(
                ev.REBALANCE_STARTED,
                after,
                reason=cause.reason,
                detail=cause.detail,
                from_state=CLASSIC_STATE_NAMES[before.state],
                members=len(after.members),
            )
        if episode is None:
            return
        duration_ms = self._now_ms() - episode.started_ms
        if after.state is GroupState.STABLE:
            del self._episodes[after.group_id]
            self._line(
                ev.REBALANCE_COMPLETED,
                after,
                reason=episode.reason,
                duration_ms=duration_ms,
                protocol=assignor,
                leader=None,
                leader_instance_id=None,
                members=[_described(m, topics) for m in after.members.values()],
            )
        elif after.state is GroupState.EMPTY:
            del self._episodes[after.group_id]
            self._line(ev.GROUP_EMPTY, after, reason=episode.reason, duration_ms=duration_ms)

    def _members(self, before: ConsumerGroup, after: ConsumerGroup, cause: Cause) -> None:
        joined = [m for k, m in after.members.items() if k not in before.members]
        gone = [m for k, m in before.members.items() if k not in after.members]
        bumped = after.group_epoch > before.group_epoch
        for member in joined:
            old = next((g for g in gone if member.instance_id and g.instance_id == member.instance_id), None)
            if old is not None:
                gone.remove(old)
                self._line(
                    ev.STATIC_MEMBER_REPLACED,
                    after,
                    instance_id=member.instance_id,
                    old_member_id=old.member_id,
                    new_member_id=member.member_id,
                    client_host=member.client_host,
                    rebalance=bumped,
                )
                continue
            self._line(
                ev.MEMBER_JOINED,
                after,
                member_id=member.member_id,
                instance_id=member.instance_id,
                client_id=member.client_id,
                client_host=member.client_host,
                session_timeout_ms=self._session_timeout_ms(),
                rebalance_timeout_ms=member.rebalance_timeout_ms,
            )
        for member in gone:
            extra: dict[str, Any] = {"cause": cause.expired} if cause.gone == ev.MEMBER_EXPIRED else {}
            if cause.gone in (ev.MEMBER_LEFT, ev.MEMBER_REMOVED):
                extra["client_reason"] = None
            self._line(cause.gone, after, member_id=member.member_id, instance_id=member.instance_id, **extra)

    def forget(self, group_id: str) -> None:
        self._episodes.pop(group_id, None)


def _described(member: Member, topics: TopicCatalog) -> dict[str, Any]:
    assignment: dict[str, list[int]] = {}
    for topic_id, partitions in member.assigned.items():
        name = topics.topic_name(topic_id)
        if name is not None and partitions:
            assignment[name] = sorted(partitions)
    return {"member_id": member.member_id, "instance_id": member.instance_id, "assignment": assignment}
