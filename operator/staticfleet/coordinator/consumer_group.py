"""A consumer-protocol group (KIP-848) and its members, and the pure rules that move a member's
assignment towards the group's target one partition set at a time (Kafka's CurrentAssignmentBuilder).

The group is a value: an operation builds the group it wants, writes it as one record, and only once
that record is appended does the coordinator keep it (consumer_heartbeat.py). Partitions are keyed by
topic id as on the wire; a member's assigned partitions carry the assignment epoch each was given at.
"""

from __future__ import annotations

import enum
import hashlib
import json
import uuid
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field, replace
from typing import Final, Protocol

from staticfleet.coordinator.errors import CoordinatorError, ErrorCode

LEAVE_EPOCH: Final = -1
STATIC_LEAVE_EPOCH: Final = -2

PartitionEpochs = Mapping[uuid.UUID, Mapping[int, int]]
"""Partitions by topic id, each with the assignment epoch it was given at."""
Partitions = Mapping[uuid.UUID, frozenset[int]]


class TopicCatalog(Protocol):
    """What the group coordinator knows of topics: their ids, names and partition counts."""

    def topic_id(self, name: str) -> uuid.UUID | None: ...

    def topic_name(self, topic_id: uuid.UUID) -> str | None: ...

    def partition_count(self, topic_id: uuid.UUID) -> int:
        """-1 for a topic that does not exist."""
        ...

    def topic_names(self) -> list[str]: ...


class NoTopics:
    def topic_names(self) -> list[str]:
        return []

    def topic_id(self, name: str) -> uuid.UUID | None:
        return None

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        return None

    def partition_count(self, topic_id: uuid.UUID) -> int:
        return -1


class MemberState(enum.IntEnum):
    """The reconciliation states of Kafka's MemberState, by its ids."""

    UNREVOKED_PARTITIONS = 0
    UNRELEASED_PARTITIONS = 1
    STABLE = 2
    UNKNOWN = 127


class GroupState(enum.Enum):
    EMPTY = "Empty"
    ASSIGNING = "Assigning"
    RECONCILING = "Reconciling"
    STABLE = "Stable"

    def __str__(self) -> str:
        return self.value


@dataclass(frozen=True, slots=True)
class Member:
    member_id: str
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    client_id: str = ""
    client_host: str = ""
    subscribed_topic_names: tuple[str, ...] = ()
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    member_epoch: int = 0
    previous_member_epoch: int = 0
    state: MemberState = MemberState.STABLE
    assigned: PartitionEpochs = field(default_factory=dict)
    pending_revocation: PartitionEpochs = field(default_factory=dict)

    def reconciled_to(self, assignment_epoch: int) -> bool:
        return self.state is MemberState.STABLE and self.member_epoch == assignment_epoch

    def with_epoch(self, epoch: int) -> Member:
        """Kafka's `updateMemberEpoch`: the epoch it had becomes the previous one."""
        return replace(self, member_epoch=epoch, previous_member_epoch=self.member_epoch)


@dataclass(frozen=True, slots=True)
class ConsumerGroup:
    group_id: str
    group_epoch: int = 1
    """A new group starts at 1 (its first member's subscription makes it 2), as Kafka's does."""
    assignment_epoch: int = 0
    assignment_timestamp_ms: int = 0
    metadata_hash: int = 0
    members: Mapping[str, Member] = field(default_factory=dict)
    """In the order the members joined."""
    target: Mapping[str, Partitions] = field(default_factory=dict)
    regexes: Mapping[str, frozenset[str]] = field(default_factory=dict)
    """The topics each subscribed regular expression matched when last resolved."""
    regexes_resolved_ms: int = 0

    @property
    def state(self) -> GroupState:
        if not self.members:
            return GroupState.EMPTY
        if self.group_epoch > self.assignment_epoch:
            return GroupState.ASSIGNING
        if any(not m.reconciled_to(self.assignment_epoch) for m in self.members.values()):
            return GroupState.RECONCILING
        return GroupState.STABLE

    def static_member(self, instance_id: str | None) -> Member | None:
        if instance_id is None:
            return None
        for member in self.members.values():
            if member.instance_id == instance_id:
                return member
        return None

    def partition_epoch(self, topic_id: uuid.UUID, partition: int) -> int:
        """The epoch of the member that owns the partition (assigned or still revoking), -1 if none."""
        for member in self.members.values():
            if partition in member.assigned.get(topic_id, {}):
                return member.member_epoch
            if partition in member.pending_revocation.get(topic_id, {}):
                return member.member_epoch
        return -1

    def with_member(self, member: Member) -> ConsumerGroup:
        return replace(self, members={**self.members, member.member_id: member})

    def without_members(self, member_ids: Iterable[str]) -> ConsumerGroup:
        gone = set(member_ids)
        return replace(
            self,
            members={k: v for k, v in self.members.items() if k not in gone},
            target={k: v for k, v in self.target.items() if k not in gone},
        )


# --- what the group's subscriptions resolve to ------------------------------------------------------


def subscribed_names(member: Member, group: ConsumerGroup) -> frozenset[str]:
    """The topics a member subscribes to: by name, and those its regular expression resolved to."""
    names = frozenset(member.subscribed_topic_names)
    if member.subscribed_topic_regex:
        names |= group.regexes.get(member.subscribed_topic_regex, frozenset())
    return names


def subscribed_topic_ids(member: Member, group: ConsumerGroup, topics: TopicCatalog) -> tuple[uuid.UUID, ...]:
    """The ids of the subscribed topics that exist (Kafka's TopicIds view)."""
    ids = (topics.topic_id(name) for name in sorted(subscribed_names(member, group)))
    return tuple(i for i in ids if i is not None)


def metadata_hash(group: ConsumerGroup, topics: TopicCatalog) -> int:
    """A stable digest of every subscribed topic's id and partition count: a change bumps the epoch."""
    names = sorted({name for m in group.members.values() for name in subscribed_names(m, group)})
    described = []
    for name in names:
        topic_id = topics.topic_id(name)
        if topic_id is not None:
            described.append(f"{name}\0{topic_id}\0{topics.partition_count(topic_id)}")
    if not described:
        return 0
    digest = hashlib.blake2b("\n".join(described).encode(), digest_size=8).digest()
    return int.from_bytes(digest, "big", signed=True)


def homogeneous(group: ConsumerGroup) -> bool:
    """Every member subscribes to the same topics (Kafka's SubscriptionType.HOMOGENEOUS): the same
    names, or one regular expression and no names."""
    members = list(group.members.values())
    regexes = {m.subscribed_topic_regex for m in members if m.subscribed_topic_regex}
    if not regexes:
        counts: dict[str, int] = {}
        for member in members:
            for name in set(member.subscribed_topic_names):
                counts[name] = counts.get(name, 0) + 1
        return all(count == len(members) for count in counts.values())
    return (
        len(regexes) == 1
        and all(m.subscribed_topic_regex for m in members)
        and not any(m.subscribed_topic_names for m in members)
    )


# --- reconciliation ---------------------------------------------------------------------------------

Owned = Mapping[uuid.UUID, Iterable[int]] | None
"""The partitions a member says it owns (None: it did not say)."""


def owns_any(owned: Owned, partitions: PartitionEpochs) -> bool:
    """Whether the member still owns one of `partitions` (not saying counts as owning)."""
    if owned is None:
        return True
    return any(p in partitions.get(t, {}) for t, ps in owned.items() for p in ps)


def reconcile(
    member: Member,
    group: ConsumerGroup,
    target_epoch: int,
    target: Partitions,
    subscribed: frozenset[uuid.UUID],
    subscription_changed: bool,
    owned: Owned,
) -> Member:
    """The member's next step towards `target` (Kafka's CurrentAssignmentBuilder.build)."""
    if not subscription_changed and member.reconciled_to(target_epoch):
        return member
    if member.state is MemberState.STABLE:
        if member.member_epoch != target_epoch:
            return _next_assignment(member, group, target_epoch, target, subscribed, owned)
        if subscription_changed:
            return _drop_unsubscribed(member, subscribed, owned)
        return member
    if member.state is MemberState.UNREVOKED_PARTITIONS:
        if owns_any(owned, member.pending_revocation):
            return _drop_unsubscribed(member, subscribed, owned) if subscription_changed else member
        return _next_assignment(member, group, target_epoch, target, subscribed, owned)
    if member.state is MemberState.UNRELEASED_PARTITIONS:
        return _next_assignment(member, group, target_epoch, target, subscribed, owned)
    if owned is None or any(owned.values()):
        raise CoordinatorError(
            ErrorCode.fenced_member_epoch,
            "The consumer group member is in a unknown state. The member must abandon all its partitions and "
            "rejoin.",
        )
    return _next_assignment(member, group, target_epoch, target, subscribed, owned)


def _merge(a: PartitionEpochs, b: PartitionEpochs) -> dict[uuid.UUID, dict[int, int]]:
    out = {t: dict(ps) for t, ps in a.items()}
    for t, ps in b.items():
        out.setdefault(t, {}).update(ps)
    return out


def _drop_unsubscribed(member: Member, subscribed: frozenset[uuid.UUID], owned: Owned) -> Member:
    """The subscription changed: partitions of topics no longer subscribed are to be revoked."""
    if not subscribed and not member.pending_revocation:
        assigned: PartitionEpochs = {}
        pending: PartitionEpochs = member.assigned
    else:
        dropped = {t: ps for t, ps in member.assigned.items() if t not in subscribed}
        if not dropped:
            return member
        assigned = {t: ps for t, ps in member.assigned.items() if t in subscribed}
        pending = _merge(member.pending_revocation, dropped)
    if assigned == member.assigned:
        return member
    if pending and owns_any(owned, pending):
        return replace(
            member.with_epoch(member.member_epoch),
            state=MemberState.UNREVOKED_PARTITIONS,
            assigned=assigned,
            pending_revocation=pending,
        )
    return replace(member.with_epoch(member.member_epoch), assigned=assigned)


def _next_assignment(
    member: Member,
    group: ConsumerGroup,
    target_epoch: int,
    target: Partitions,
    subscribed: frozenset[uuid.UUID],
    owned: Owned,
) -> Member:
    unreleased = False
    assigned: dict[uuid.UUID, dict[int, int]] = {}
    revoking: dict[uuid.UUID, dict[int, int]] = {}
    to_assign: dict[uuid.UUID, set[int]] = {}
    for topic_id in set(target) | set(member.assigned):
        wanted = target.get(topic_id, frozenset()) if topic_id in subscribed else frozenset()
        current = member.assigned.get(topic_id, {})
        kept = {p: e for p, e in current.items() if p in wanted}
        revoked = {p: e for p, e in current.items() if p not in kept}
        pending_own = member.pending_revocation.get(topic_id, {})
        new = set()
        for p in wanted:
            if p in kept:
                continue
            if group.partition_epoch(topic_id, p) != -1 and p not in pending_own:
                unreleased = True
            else:
                new.add(p)
        if kept:
            assigned[topic_id] = kept
        if revoked:
            revoking[topic_id] = revoked
        if new:
            to_assign[topic_id] = new
    if revoking and owns_any(owned, revoking):
        # Revoke first: the member keeps its epoch until it says it let the partitions go.
        return replace(
            member.with_epoch(member.member_epoch),
            state=MemberState.UNREVOKED_PARTITIONS,
            assigned=assigned,
            pending_revocation=revoking,
        )
    for topic_id, partitions in to_assign.items():
        epochs = assigned.setdefault(topic_id, {})
        for p in partitions:
            epochs[p] = target_epoch
    state = MemberState.UNRELEASED_PARTITIONS if unreleased else MemberState.STABLE
    return replace(member.with_epoch(target_epoch), state=state, assigned=assigned, pending_revocation={})


# --- the record's body ------------------------------------------------------------------------------


def _epochs_json(epochs: PartitionEpochs) -> dict[str, list[list[int]]]:
    return {str(t): sorted([p, e] for p, e in ps.items()) for t, ps in epochs.items() if ps}


def _epochs_from(data: Mapping[str, list[list[int]]]) -> dict[uuid.UUID, dict[int, int]]:
    return {uuid.UUID(t): {int(p): int(e) for p, e in pairs} for t, pairs in data.items()}


def group_to_json(group: ConsumerGroup) -> bytes:
    """The group as compact JSON: the members in joining order, partitions by topic id."""
    members = [
        {
            "id": m.member_id,
            "instance": m.instance_id,
            "rack": m.rack_id,
            "rebalance_timeout_ms": m.rebalance_timeout_ms,
            "client_id": m.client_id,
            "client_host": m.client_host,
            "topics": list(m.subscribed_topic_names),
            "regex": m.subscribed_topic_regex,
            "assignor": m.server_assignor,
            "epoch": m.member_epoch,
            "previous_epoch": m.previous_member_epoch,
            "state": int(m.state),
            "assigned": _epochs_json(m.assigned),
            "revoking": _epochs_json(m.pending_revocation),
        }
        for m in group.members.values()
    ]
    body = {
        "group": group.group_id,
        "epoch": group.group_epoch,
        "assignment_epoch": group.assignment_epoch,
        "assignment_ts": group.assignment_timestamp_ms,
        "metadata_hash": group.metadata_hash,
        "members": members,
        "target": {m: {str(t): sorted(ps) for t, ps in target.items()} for m, target in group.target.items()},
        "regexes": {regex: sorted(names) for regex, names in group.regexes.items()},
        "regexes_resolved_ms": group.regexes_resolved_ms,
    }
    return json.dumps(body, separators=(",", ":")).encode()


def group_from_json(raw: bytes) -> ConsumerGroup:
    body = json.loads(raw)
    members = {}
    for m in body["members"]:
        members[m["id"]] = Member(
            member_id=m["id"],
            instance_id=m["instance"],
            rack_id=m["rack"],
            rebalance_timeout_ms=m["rebalance_timeout_ms"],
            client_id=m["client_id"],
            client_host=m["client_host"],
            subscribed_topic_names=tuple(m["topics"]),
            subscribed_topic_regex=m["regex"],
            server_assignor=m["assignor"],
            member_epoch=m["epoch"],
            previous_member_epoch=m["previous_epoch"],
            state=MemberState(m["state"]),
            assigned=_epochs_from(m["assigned"]),
            pending_revocation=_epochs_from(m["revoking"]),
        )
    target = {
        member_id: {uuid.UUID(t): frozenset(ps) for t, ps in partitions.items()}
        for member_id, partitions in body["target"].items()
    }
    return ConsumerGroup(
        group_id=body["group"],
        group_epoch=body["epoch"],
        assignment_epoch=body["assignment_epoch"],
        assignment_timestamp_ms=body["assignment_ts"],
        metadata_hash=body["metadata_hash"],
        members=members,
        target=target,
        regexes={regex: frozenset(names) for regex, names in body.get("regexes", {}).items()},
        regexes_resolved_ms=body.get("regexes_resolved_ms", 0),
    )
