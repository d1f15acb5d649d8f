"""Kafka 4's consumer group protocol (KIP-848) on the coordinator: ConsumerGroupHeartbeat,
ConsumerGroupDescribe, and the classic LeaveGroup of a consumer-protocol group, with Kafka's rules
(GroupMetadataManager): member and group epochs, a target assignment the server computes, revocation
before reassignment, static members that leave with epoch -2 and come back to their partitions, and
members fenced by their session and rebalance timeouts.

Every change writes the whole group as one record; the group is kept only once that record is
appended, and the answer waits for it to be durable, as every other answer of the coordinator does.
"""

from __future__ import annotations

import base64
import enum
import re
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from typing import Final

from staticfleet.coordinator import events as ev
from staticfleet.coordinator import server_assignors as sa
from staticfleet.coordinator.consumer_events import REASON_REBALANCE_TIMEOUT, Cause, ConsumerGroupEvents
from staticfleet.coordinator.consumer_group import (
    LEAVE_EPOCH,
    STATIC_LEAVE_EPOCH,
    ConsumerGroup,
    Member,
    MemberState,
    Partitions,
    TopicCatalog,
    homogeneous,
    metadata_hash,
    reconcile,
    subscribed_topic_ids,
)
from staticfleet.coordinator.errors import CoordinatorError, ErrorCode
from staticfleet.coordinator.group import GroupState as ClassicState
from staticfleet.coordinator.messages import (
    LeaveGroupRequest,
    LeaveGroupResponse,
    LeaveMemberResponse,
    RequestContext,
)
from staticfleet.coordinator.records import ConsumerGroupRecord, GroupTombstone
from staticfleet.coordinator.state import CoordinatorState

CONSUMER_GENERATED_MEMBER_ID_VERSION: Final = 1
"""From this ConsumerGroupHeartbeat version the client names itself."""
_SESSION: Final = "consumer-session"
_REBALANCE: Final = "consumer-rebalance"

_REGEX: Final = "consumer-regex"
REGEX_MIN_REFRESH_INTERVAL_MS: Final = 10_000
"""A group's regular expressions are resolved at most this often."""
REGEX_REFRESH_INTERVAL_MS: Final = 600_000
"""group.consumer.regex.refresh.interval.ms: and at least this often while members heartbeat."""

Assignment = dict[uuid.UUID, tuple[int, ...]]


_LEFT: Final = Cause(ev.REASON_MEMBER_LEFT)


class _RegexChange(enum.Enum):
    NONE = "none"
    UPDATED = "updated"
    UNRESOLVED = "unresolved"
    RESOLVED = "resolved"


def _subscribes(group: ConsumerGroup, regex: str) -> bool:
    return any(m.subscribed_topic_regex == regex for m in group.members.values())


# Python's descriptions of what is wrong with a pattern, as RE2's (Kafka's RE2/J) words them.
_RE2_DESCRIPTIONS: Final = (
    ("unterminated character set", "missing closing ]"),
    ("missing ), unterminated subpattern", "missing closing )"),
    ("unbalanced parenthesis", "unexpected )"),
    ("nothing to repeat", "missing argument to repetition operator"),
    ("multiple repeat", "invalid nested repetition operator"),
    ("bad escape", "invalid escape sequence"),
    ("bad character range", "invalid character class range"),
)
_UNSUPPORTED_BY_RE2: Final = re.compile(r"\(\?(<?[=!]|P=|<[^>]*>)|\\[1-9]")


def check_regex(regex: str) -> None:
    """INVALID_REGULAR_EXPRESSION for a pattern RE2 would refuse, in Kafka's words."""
    description: str | None = None
    if _UNSUPPORTED_BY_RE2.search(regex):
        description = "invalid or unsupported Perl syntax"
    else:
        try:
            re.compile(regex)
        except re.error as exc:
            description = next((ours for theirs, ours in _RE2_DESCRIPTIONS if theirs in exc.msg), exc.msg)
    if description is not None:
        raise CoordinatorError(
            ErrorCode.invalid_regular_expression,
            f"SubscribedTopicRegex `{regex}` is not a valid regular expression: {description}.",
        )


@dataclass(frozen=True, slots=True)
class ConsumerHeartbeatRequest:
    group_id: str
    member_id: str
    member_epoch: int
    instance_id: str | None = None
    rack_id: str | None = None
    rebalance_timeout_ms: int = -1
    subscribed_topic_names: tuple[str, ...] | None = None
    subscribed_topic_regex: str | None = None
    server_assignor: str | None = None
    owned: Mapping[uuid.UUID, tuple[int, ...]] | None = None
    describable: Callable[[str], bool] | None = None
    """Whether the member may see a topic (DESCRIBE): a regex resolves only to those (None: all)."""


@dataclass(frozen=True, slots=True)
class ConsumerHeartbeatResponse:
    error: ErrorCode = ErrorCode.none
    message: str | None = None
    member_id: str | None = None
    member_epoch: int = 0
    heartbeat_interval_ms: int = 0
    assignment: Assignment | None = None


@dataclass(frozen=True, slots=True)
class DescribedTopic:
    topic_id: uuid.UUID
    topic_name: str
    partitions: tuple[int, ...]


@dataclass(frozen=True, slots=True)
class DescribedConsumerMember:
    member_id: str
    instance_id: str | None
    rack_id: str | None
    member_epoch: int
    client_id: str
    client_host: str
    subscribed_topic_names: tuple[str, ...]
    subscribed_topic_regex: str | None
    assignment: tuple[DescribedTopic, ...]
    target_assignment: tuple[DescribedTopic, ...]


@dataclass(frozen=True, slots=True)
class DescribedConsumerGroup:
    group_id: str
    error: ErrorCode = ErrorCode.none
    message: str | None = None
    state: str = ""
    group_epoch: int = 0
    assignment_epoch: int = 0
    assignor_name: str = ""
    members: tuple[DescribedConsumerMember, ...] = ()


def _invalid(message: str) -> CoordinatorError:
    return CoordinatorError(ErrorCode.invalid_request, message)


def _blank(value: str | None) -> bool:
    """Java's `value.trim().isEmpty()`: nothing but spaces and control characters."""
    return value is not None and all(ord(c) <= 0x20 for c in value)


def validate(request: ConsumerHeartbeatRequest, api_version: int, assignors: Iterable[str]) -> None:
    """What Kafka's service refuses before the group is looked at (INVALID_REQUEST, UNSUPPORTED_ASSIGNOR)."""
    if (
        api_version >= CONSUMER_GENERATED_MEMBER_ID_VERSION
        or request.member_epoch > 0
        or request.member_epoch == LEAVE_EPOCH
    ) and _blank(request.member_id):
        raise _invalid("MemberId can't be empty.")
    if _blank(request.group_id):
        raise _invalid("GroupId can't be empty.")
    if _blank(request.instance_id):
        raise _invalid("InstanceId can't be empty.")
    if _blank(request.rack_id):
        raise _invalid("RackId can't be empty.")
    if request.member_epoch == 0:
        if request.rebalance_timeout_ms == -1:
            raise _invalid("RebalanceTimeoutMs must be provided in first request.")
        if request.owned is None or request.owned:
            raise _invalid("TopicPartitions must be empty when (re-)joining.")
        if request.subscribed_topic_names is None and request.subscribed_topic_regex is None:
            raise _invalid(
                "Either SubscribedTopicNames or SubscribedTopicRegex must be non-null when (re-)joining."
            )
    elif request.member_epoch == STATIC_LEAVE_EPOCH:
        if request.instance_id is None:
            raise _invalid("InstanceId can't be null.")
    elif request.member_epoch < STATIC_LEAVE_EPOCH:
        raise _invalid("MemberEpoch is invalid.")
    names = list(assignors)
    if request.server_assignor is not None and request.server_assignor not in names:
        raise CoordinatorError(
            ErrorCode.unsupported_assignor,
            f"ServerAssignor {request.server_assignor} is not supported. Supported assignors: "
            f"{', '.join(names)}.",
        )


def _kafka_uuid() -> str:
    """A random id as Kafka's Uuid writes itself: URL-safe base64 without padding (22 characters)."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


def _unknown_instance(instance_id: str) -> CoordinatorError:
    return CoordinatorError(ErrorCode.unknown_member_id, f"Instance id {instance_id} is unknown.")


def _error_response(error: CoordinatorError) -> ConsumerHeartbeatResponse:
    return ConsumerHeartbeatResponse(error=error.code, message=str(error))


def _fenced_epoch(received: int, known: int, smaller: bool) -> CoordinatorError:
    size = "smaller" if smaller else "greater"
    return CoordinatorError(
        ErrorCode.fenced_member_epoch,
        f"The consumer group member has a {size} member epoch ({received}) than the one known by the group "
        f"coordinator ({known}). The member must abandon all its partitions and rejoin.",
    )


def _check_epoch(member: Member, received: int, owned: Mapping[uuid.UUID, tuple[int, ...]] | None) -> None:
    if received == 0:
        return
    if received > member.member_epoch:
        raise _fenced_epoch(received, member.member_epoch, smaller=False)
    if received < member.member_epoch:
        # The answer that gave the new epoch may have been lost: the previous epoch is accepted from a
        # member that owns no more than it is assigned.
        subset = owned is not None and all(
            p in member.assigned.get(t, {}) for t, partitions in owned.items() for p in partitions
        )
        if received != member.previous_member_epoch or not subset:
            raise _fenced_epoch(received, member.member_epoch, smaller=True)


def _assignment(member: Member) -> Assignment:
    return {t: tuple(sorted(ps)) for t, ps in member.assigned.items() if ps}


class ConsumerGroups:
    """The consumer-protocol groups of one coordinator, beside its classic groups."""

    def __init__(self, state: CoordinatorState) -> None:
        self.state = state
        self.groups: dict[str, ConsumerGroup] = state.consumer_groups
        # How the operation in progress answers an append that failed (timers answer nobody).
        self._answer_failure: Callable[[ErrorCode], object] | None = None
        self.events = ConsumerGroupEvents(
            state.emit, state.clock.now_ms, lambda: state.config.consumer_session_timeout_ms
        )
        # The topics each group's regexes were last resolved against (a new topic means resolve again).
        self._resolved_against: dict[str, frozenset[str]] = {}

    @property
    def topics(self) -> TopicCatalog:
        return self.state.topics

    # --- reads -------------------------------------------------------------------------------------

    @property
    def _assignor_names(self) -> tuple[str, ...]:
        return self.state.config.consumer_assignors

    def preferred_assignor(self, members: Iterable[Member]) -> str:
        counts: dict[str, int] = {}
        for member in members:
            if member.server_assignor is not None:
                counts[member.server_assignor] = counts.get(member.server_assignor, 0) + 1
        if not counts:
            return self._assignor_names[0]
        top = max(counts.values())
        # Kafka takes the first of the most used in its map's iteration order.
        return next(name for name in sa.java_order(counts) if counts[name] == top)

    def describe(self, group_ids: Iterable[str]) -> list[DescribedConsumerGroup]:
        described: list[DescribedConsumerGroup] = []
        for group_id in group_ids:
            group = self.groups.get(group_id)
            if group is None:
                message = (
                    f"Group {group_id} is not a consumer group."
                    if group_id in self.state.groups
                    else f"Group {group_id} not found."
                )
                described.append(DescribedConsumerGroup(group_id, ErrorCode.group_id_not_found, message))
                continue
            described.append(
                DescribedConsumerGroup(
                    group_id=group_id,
                    state=str(group.state),
                    group_epoch=group.group_epoch,
                    assignment_epoch=group.assignment_epoch,
                    assignor_name=self.preferred_assignor(group.members.values()),
                    members=tuple(self._describe_member(group, m) for m in group.members.values()),
                )
            )
        return described

    def _describe_topics(self, partitions: Mapping[uuid.UUID, Iterable[int]]) -> tuple[DescribedTopic, ...]:
        topics: list[DescribedTopic] = []
        for topic_id, ps in partitions.items():
            name = self.topics.topic_name(topic_id)
            if name is not None:
                topics.append(DescribedTopic(topic_id, name, tuple(sorted(ps))))
        return tuple(topics)

    def _describe_member(self, group: ConsumerGroup, member: Member) -> DescribedConsumerMember:
        held: dict[uuid.UUID, set[int]] = {}
        for source in (member.assigned, member.pending_revocation):
            for topic_id, ps in source.items():
                held.setdefault(topic_id, set()).update(ps)
        return DescribedConsumerMember(
            member_id=member.member_id,
            instance_id=member.instance_id,
            rack_id=member.rack_id,
            member_epoch=member.member_epoch,
            client_id=member.client_id,
            client_host=member.client_host,
            subscribed_topic_names=member.subscribed_topic_names,
            subscribed_topic_regex=member.subscribed_topic_regex or "",
            assignment=self._describe_topics(held),
            target_assignment=self._describe_topics(self._target_of(group, member)),
        )

    def _target_of(self, group: ConsumerGroup, member: Member) -> Partitions:
        target = group.target.get(member.member_id)
        if target is None and member.instance_id is not None:
            previous = group.static_member(member.instance_id)
            if previous is not None:
                target = group.target.get(previous.member_id)
        return target or {}

    # --- ConsumerGroupHeartbeat --------------------------------------------------------------------

    def heartbeat(self, ctx: RequestContext, request: ConsumerHeartbeatRequest) -> ConsumerHeartbeatResponse:
        self._answer_failure = lambda code: ConsumerHeartbeatResponse(error=code)
        try:
            validate(request, ctx.api_version, self._assignor_names)
            if request.member_epoch in (LEAVE_EPOCH, STATIC_LEAVE_EPOCH):
                return self._leave(request)
            return self._heartbeat(ctx, request)
        except CoordinatorError as error:
            return _error_response(error)
        finally:
            self._answer_failure = None

    def _consumer_group(self, group_id: str) -> ConsumerGroup:
        group = self.groups.get(group_id)
        if group is not None:
            return group
        if group_id in self.state.groups:
            raise CoordinatorError(ErrorCode.group_id_not_found, f"Group {group_id} is not a consumer group.")
        raise CoordinatorError(ErrorCode.group_id_not_found, f"Group {group_id} not found.")

    def _group_for_join(self, group_id: str) -> tuple[ConsumerGroup, bool]:
        """The group, made if it does not exist; True if an empty classic group of that id gives way."""
        group = self.groups.get(group_id)
        if group is not None:
            return group, False
        classic = self.state.groups.get(group_id)
        if classic is None:
            return ConsumerGroup(group_id), False
        if classic.is_in(ClassicState.EMPTY):
            return ConsumerGroup(group_id), True
        # Kafka's group.consumer.migration.policy=disabled: a classic group with members is not upgraded.
        if classic.protocol_type != "consumer":
            why = "the group does not use the consumer embedded protocol"
        else:
            why = "online upgrade is disabled"
        raise CoordinatorError(
            ErrorCode.group_id_not_found,
            f"Cannot upgrade classic group {group_id} to consumer group because {why}.",
        )

    def _heartbeat(self, ctx: RequestContext, request: ConsumerHeartbeatRequest) -> ConsumerHeartbeatResponse:
        now = self.state.clock.now_ms()
        config = self.state.config
        joining = request.member_epoch == 0
        replaces_classic = False
        if joining:
            stored, replaces_classic = self._group_for_join(request.group_id)
        elif request.group_id not in self.groups and request.group_id not in self.state.groups:
            raise CoordinatorError(
                ErrorCode.group_id_not_found, f"Consumer group {request.group_id} not found."
            )
        else:
            stored = self._consumer_group(request.group_id)
        member_id = request.member_id or _kafka_uuid()
        if len(stored.members) >= config.consumer_max_size and (
            request.member_id == "" or member_id not in stored.members
        ):
            raise CoordinatorError(
                ErrorCode.group_max_size_reached,
                f"The consumer group has reached its maximum capacity of {config.consumer_max_size} members.",
            )

        replaced: Member | None = None
        if request.instance_id is None:
            member = stored.members.get(member_id)
            if member is None:
                if not joining:
                    raise self._unknown_member(member_id, stored.group_id)
                member = Member(member_id)
            _check_epoch(member, request.member_epoch, request.owned)
        else:
            existing = stored.static_member(request.instance_id)
            if joining:
                if existing is None:
                    member = stored.members.get(member_id) or Member(member_id)
                else:
                    if existing.member_epoch != STATIC_LEAVE_EPOCH:
                        raise CoordinatorError(
                            ErrorCode.unreleased_instance_id,
                            f"Static member {member_id} with instance id {request.instance_id} cannot join "
                            f"the group because the instance id is owned by {existing.member_id} member.",
                        )
                    replaced = existing
                    member = replace(existing, member_id=member_id, member_epoch=0, previous_member_epoch=0)
            else:
                if existing is None:
                    raise _unknown_instance(request.instance_id)
                self._check_not_fenced(existing, member_id, request.instance_id)
                member = existing
                _check_epoch(member, request.member_epoch, request.owned)

        updated = replace(
            member,
            instance_id=request.instance_id if request.instance_id is not None else member.instance_id,
            rack_id=request.rack_id if request.rack_id is not None else member.rack_id,
            rebalance_timeout_ms=(
                request.rebalance_timeout_ms
                if request.rebalance_timeout_ms != -1
                else member.rebalance_timeout_ms
            ),
            server_assignor=request.server_assignor
            if request.server_assignor is not None
            else member.server_assignor,
            # A set, as Kafka keeps it: the same topics in another order are no change.
            subscribed_topic_names=(
                tuple(sorted(set(request.subscribed_topic_names)))
                if request.subscribed_topic_names is not None
                else member.subscribed_topic_names
            ),
            subscribed_topic_regex=(
                request.subscribed_topic_regex
                if request.subscribed_topic_regex is not None
                else member.subscribed_topic_regex
            ),
            client_id=ctx.client_id,
            client_host=ctx.client_host,
        )
        names_changed = set(updated.subscribed_topic_names) != set(member.subscribed_topic_names)

        # The group as it will be: the replaced static member gone, this member in.
        members = {k: v for k, v in stored.members.items() if replaced is None or k != replaced.member_id}
        members[member_id] = updated
        target = {k: v for k, v in stored.target.items() if replaced is None or k != replaced.member_id}
        if replaced is not None and replaced.member_id in stored.target:
            target[member_id] = stored.target[replaced.member_id]
        group = replace(stored, members=members, target=target)
        regex = self._regex_change(stored, member, updated)
        group = replace(group, regexes={r: t for r, t in group.regexes.items() if _subscribes(group, r)})
        subscription_changed = names_changed or regex is not _RegexChange.NONE

        new_hash = metadata_hash(group, self.topics)
        group_epoch = stored.group_epoch
        if names_changed or regex is _RegexChange.RESOLVED or new_hash != stored.metadata_hash:
            group_epoch += 1
            group = replace(group, group_epoch=group_epoch, metadata_hash=new_hash)

        target_epoch = group.assignment_epoch
        if group.assignment_epoch < group_epoch and self._may_assign(stored, now):
            group = self._assign(stored, group, updated, replaced, now)
            target_epoch = group.assignment_epoch
        member_target = self._target_of(group, updated)

        reconciled = reconcile(
            updated,
            stored,
            target_epoch,
            member_target,
            frozenset(subscribed_topic_ids(updated, group, self.topics)),
            subscription_changed,
            request.owned,
        )
        group = group.with_member(reconciled)

        full_request = (
            request.rebalance_timeout_ms != -1
            and (request.subscribed_topic_names is not None or request.subscribed_topic_regex is not None)
            and request.owned is not None
        )
        response = ConsumerHeartbeatResponse(
            member_id=reconciled.member_id,
            member_epoch=reconciled.member_epoch,
            heartbeat_interval_ms=config.consumer_heartbeat_interval_ms,
            assignment=(
                _assignment(reconciled)
                if joining or full_request or reconciled.assigned != member.assigned
                else None
            ),
        )
        if group != stored or replaces_classic:
            if member_id not in stored.members and replaced is None:
                cause = Cause(ev.REASON_MEMBER_JOINED, f"new member {member_id} joined")
            elif subscription_changed:
                cause = Cause(ev.REASON_METADATA_CHANGED, f"member {member_id} changed its subscription")
            else:
                cause = Cause(ev.REASON_PARTITIONS_CHANGED, "the subscribed topics changed")
            self._write(stored, group, cause, replaces_classic=replaces_classic)
        self._schedule_session(group.group_id, member_id)
        self._maybe_resolve_regexes(group, now, regex is _RegexChange.UNRESOLVED, request.describable)
        return response

    def _regex_change(self, stored: ConsumerGroup, before: Member, after: Member) -> _RegexChange:
        """What a member's new regular expression does (Kafka's UpdateRegularExpressionStatus): nothing
        new; a regex no member had, to be resolved first (no new epoch yet); or a change whose topics are
        known (a new epoch at once)."""
        old, new = before.subscribed_topic_regex or "", after.subscribed_topic_regex or ""
        if old == new:
            return _RegexChange.NONE
        if new:
            others = [m for m in stored.members.values() if m.member_id != before.member_id]
            if not any(m.subscribed_topic_regex == new for m in others):
                check_regex(new)
                return _RegexChange.UNRESOLVED
            return _RegexChange.RESOLVED if new in stored.regexes else _RegexChange.UPDATED
        return _RegexChange.RESOLVED

    def _maybe_resolve_regexes(
        self,
        group: ConsumerGroup,
        now: int,
        unresolved: bool,
        describable: Callable[[str], bool] | None,
    ) -> None:
        """Resolve the group's regular expressions in an operation of its own (Kafka resolves them off
        the coordinator's thread), when one is new, topics appeared, or the last resolution is old; at
        most once every 10 s."""
        subscribed = {m.subscribed_topic_regex for m in group.members.values() if m.subscribed_topic_regex}
        key = (_REGEX, group.group_id)
        if not subscribed or key in self.state.timers:
            return
        if now <= group.regexes_resolved_ms + REGEX_MIN_REFRESH_INTERVAL_MS:
            return
        topics = frozenset(self.topics.topic_names())
        stale = (
            unresolved
            or len(subscribed) != len(group.regexes)
            or self._resolved_against.get(group.group_id) != topics
            or now > group.regexes_resolved_ms + REGEX_REFRESH_INTERVAL_MS
        )
        if stale:
            self.state.timers.schedule(key, now, lambda: self._resolve_regexes(group.group_id, describable))

    def _resolve_regexes(self, group_id: str, describable: Callable[[str], bool] | None) -> None:
        group = self.groups.get(group_id)
        if group is None:
            return
        topics = frozenset(self.topics.topic_names())
        self._resolved_against[group_id] = topics
        visible = sorted(t for t in topics if describable is None or describable(t))
        subscribed = {m.subscribed_topic_regex for m in group.members.values() if m.subscribed_topic_regex}
        resolved = {
            regex: frozenset(t for t in visible if re.fullmatch(regex, t)) for regex in sorted(subscribed)
        }
        after = replace(group, regexes=resolved, regexes_resolved_ms=self.state.clock.now_ms())
        if any(group.regexes.get(r) != topics_ for r, topics_ in resolved.items()):
            after = replace(
                after, group_epoch=group.group_epoch + 1, metadata_hash=metadata_hash(after, self.topics)
            )
        self._write(group, after, Cause(ev.REASON_METADATA_CHANGED, "regular expressions resolved anew"))

    @staticmethod
    def _unknown_member(member_id: str, group_id: str) -> CoordinatorError:
        return CoordinatorError(
            ErrorCode.unknown_member_id, f"Member {member_id} is not a member of group {group_id}."
        )

    @staticmethod
    def _check_not_fenced(existing: Member, member_id: str, instance_id: str) -> None:
        if existing.member_id != member_id:
            raise CoordinatorError(
                ErrorCode.fenced_instance_id,
                f"Static member {member_id} with instance id {instance_id} was fenced by member "
                f"{existing.member_id}.",
            )

    def _may_assign(self, group: ConsumerGroup, now: int) -> bool:
        """group.consumer.assignment.interval.ms: a new target at most this often."""
        interval = self.state.config.consumer_assignment_interval_ms
        return (
            group.assignment_timestamp_ms == 0
            or interval == 0
            or now >= group.assignment_timestamp_ms + interval
        )

    def _assign(
        self, stored: ConsumerGroup, group: ConsumerGroup, updated: Member, replaced: Member | None, now: int
    ) -> ConsumerGroup:
        """A new target assignment for the group's epoch (Kafka's TargetAssignmentBuilder)."""
        # Kafka's map of member specs: the members it held, then the updated one; the replaced one removed.
        order = list(stored.members)
        if updated.member_id not in stored.members:
            order.append(updated.member_id)
        entries = len(order)
        if replaced is not None:
            order.remove(replaced.member_id)
        specs: dict[str, sa.MemberSpec] = {}
        for member_id in sa.java_order(order, sa.table_size(entries)):
            member = group.members[member_id]
            current = stored.target.get(member_id)
            if member_id == updated.member_id and replaced is not None:
                current = stored.target.get(replaced.member_id)
            specs[member_id] = sa.MemberSpec(
                member.instance_id,
                tuple(subscribed_topic_ids(member, group, self.topics)),
                current or {},
            )
        assigned = {(t, p): m for m, target in stored.target.items() for t, ps in target.items() for p in ps}
        topic_ids = {t for spec in specs.values() for t in spec.subscribed_topic_ids}
        spec = sa.GroupSpec(
            specs,
            homogeneous(group),
            {t: self.topics.partition_count(t) for t in topic_ids},
            assigned,
        )
        name = self.preferred_assignor(group.members.values())
        assignor = sa.ASSIGNORS[name]
        try:
            result = assignor(spec)
        except sa.AssignorError as exc:
            raise CoordinatorError(
                ErrorCode.unknown_server_error,
                f"Failed to compute a new target assignment for epoch {group.group_epoch}: {exc}",
            ) from exc
        target = {m: {t: frozenset(ps) for t, ps in result.get(m, {}).items() if ps} for m in specs}
        return replace(group, target=target, assignment_epoch=group.group_epoch, assignment_timestamp_ms=now)

    # --- leaving -----------------------------------------------------------------------------------

    def _leave(self, request: ConsumerHeartbeatRequest) -> ConsumerHeartbeatResponse:
        group = self._consumer_group(request.group_id)
        response = ConsumerHeartbeatResponse(member_id=request.member_id, member_epoch=request.member_epoch)
        if request.instance_id is None:
            member = group.members.get(request.member_id)
            if member is None:
                raise self._unknown_member(request.member_id, group.group_id)
            self.fence(group, [member], _LEFT)
            return response
        member_or_none = group.static_member(request.instance_id)
        if member_or_none is None:
            raise CoordinatorError(
                ErrorCode.unknown_member_id, f"Instance id {request.instance_id} is unknown."
            )
        self._check_not_fenced(member_or_none, request.member_id, request.instance_id)
        if request.member_epoch == STATIC_LEAVE_EPOCH:
            away = replace(
                member_or_none,
                member_epoch=STATIC_LEAVE_EPOCH,
                pending_revocation={},
                assigned={t: dict.fromkeys(ps, 0) for t, ps in member_or_none.assigned.items()},
            )
            self._write(group, group.with_member(away), Cause(ev.REASON_MEMBER_LEFT))
            return ConsumerHeartbeatResponse(member_id=away.member_id, member_epoch=STATIC_LEAVE_EPOCH)
        self.fence(group, [member_or_none], _LEFT)
        return response

    def fence(self, group: ConsumerGroup, members: Iterable[Member], cause: Cause) -> None:
        """Remove members at once: one bump of the group epoch for all of them."""
        gone = list(members)
        if not gone:
            return
        remaining = group.without_members(m.member_id for m in gone)
        remaining = replace(
            remaining, regexes={r: t for r, t in remaining.regexes.items() if _subscribes(remaining, r)}
        )
        after = replace(
            remaining,
            group_epoch=group.group_epoch + 1,
            metadata_hash=metadata_hash(remaining, self.topics),
        )
        self._write(group, after, cause)
        for member in gone:
            self.state.timers.cancel((_SESSION, group.group_id, member.member_id))
            self.state.timers.cancel((_REBALANCE, group.group_id, member.member_id))

    def leave_group(self, request: LeaveGroupRequest) -> LeaveGroupResponse:
        """A classic LeaveGroup of a consumer-protocol group: removal by member id or instance id."""
        self._answer_failure = lambda code: LeaveGroupResponse(error=code)
        try:
            return self._leave_group(request)
        finally:
            self._answer_failure = None

    def _leave_group(self, request: LeaveGroupRequest) -> LeaveGroupResponse:
        group = self.groups[request.group_id]
        responses: list[LeaveMemberResponse] = []
        leaving: dict[str, Member] = {}
        for identity in request.members:
            try:
                if identity.group_instance_id is None:
                    member = group.members.get(identity.member_id)
                    if member is None:
                        raise self._unknown_member(identity.member_id, group.group_id)
                else:
                    found = group.static_member(identity.group_instance_id)
                    if found is None:
                        raise CoordinatorError(
                            ErrorCode.unknown_member_id,
                            f"Instance id {identity.group_instance_id} is unknown.",
                        )
                    if identity.member_id != "":
                        self._check_not_fenced(found, identity.member_id, identity.group_instance_id)
                    member = found
                leaving[member.member_id] = member
                responses.append(LeaveMemberResponse(identity.member_id, identity.group_instance_id))
            except CoordinatorError as error:
                responses.append(
                    LeaveMemberResponse(identity.member_id, identity.group_instance_id, error.code)
                )
        self.fence(group, leaving.values(), Cause(ev.REASON_MEMBER_REMOVED, gone=ev.MEMBER_REMOVED))
        return LeaveGroupResponse(members=tuple(responses))

    # --- timers ------------------------------------------------------------------------------------

    def _session_timeout_ms(self) -> int:
        return self.state.config.consumer_session_timeout_ms

    def _schedule_session(self, group_id: str, member_id: str) -> None:
        deadline = self.state.clock.now_ms() + self._session_timeout_ms()
        self.state.timers.schedule(
            (_SESSION, group_id, member_id), deadline, lambda: self._expire(group_id, member_id, None)
        )

    def _schedule_rebalance(self, group_id: str, member: Member) -> None:
        deadline = self.state.clock.now_ms() + member.rebalance_timeout_ms
        epoch = member.member_epoch
        self.state.timers.schedule(
            (_REBALANCE, group_id, member.member_id),
            deadline,
            lambda: self._expire(group_id, member.member_id, epoch),
        )

    def _expire(self, group_id: str, member_id: str, revoking_epoch: int | None) -> None:
        """A session ran out (revoking_epoch None), or a member did not revoke in its rebalance timeout."""
        group = self.groups.get(group_id)
        member = group.members.get(member_id) if group is not None else None
        if group is None or member is None:
            return
        if revoking_epoch is not None and member.member_epoch != revoking_epoch:
            return
        if revoking_epoch is None:
            cause = Cause(ev.REASON_SESSION_TIMEOUT, gone=ev.MEMBER_EXPIRED, expired="session-timeout")
        else:
            cause = Cause(REASON_REBALANCE_TIMEOUT, gone=ev.MEMBER_EXPIRED, expired="rebalance-timeout")
        self.fence(group, [member], cause)

    # --- the record --------------------------------------------------------------------------------

    def _write(
        self,
        before: ConsumerGroup,
        after: ConsumerGroup,
        cause: Cause,
        *,
        replaces_classic: bool = False,
    ) -> None:
        records: list[ConsumerGroupRecord | GroupTombstone] = []
        if replaces_classic:
            records.append(GroupTombstone(after.group_id))
        records.append(ConsumerGroupRecord(after))

        def written() -> None:
            if replaces_classic:
                self.state.groups.pop(after.group_id, None)
            self.groups[after.group_id] = after
            self._on_change(before, after, cause)

        answer = self._answer_failure

        def failed(error: ErrorCode, message: str) -> None:
            if answer is not None:
                self.state.recorder.respond_instead(answer(error))

        self.state.recorder.write(records, written, failed)

    def _on_change(self, before: ConsumerGroup, after: ConsumerGroup, cause: Cause) -> None:
        """Timers and events that follow a kept change."""
        for member_id, member in after.members.items():
            old = before.members.get(member_id)
            if old == member:
                continue
            if member.state is MemberState.UNREVOKED_PARTITIONS and member.member_epoch >= 0:
                self._schedule_rebalance(after.group_id, member)
            else:
                self.state.timers.cancel((_REBALANCE, after.group_id, member_id))
        assignor = self.preferred_assignor(after.members.values())
        self.events.changed(before, after, cause, assignor, self.topics)

    def on_loaded(self) -> None:
        """After a load, as Kafka does: every member's session starts again, and a member asked to revoke
        has its rebalance timeout again."""
        for group in self.groups.values():
            for member in group.members.values():
                self._schedule_session(group.group_id, member.member_id)
                if member.state is MemberState.UNREVOKED_PARTITIONS:
                    self._schedule_rebalance(group.group_id, member)

    def replay(self, record: ConsumerGroupRecord) -> None:
        self.groups[record.group.group_id] = record.group

    def snapshot_records(self) -> list[ConsumerGroupRecord]:
        return [ConsumerGroupRecord(group) for group in self.groups.values()]

    def give_way_to_classic(self, group_id: str) -> bool:
        """A classic JoinGroup for this id: an empty consumer-protocol group is deleted so that a classic
        one takes its place, as Kafka does; one with members keeps its id (False). Kafka would take the
        classic member into the group (KIP-848's migration), which this coordinator does not do."""
        group = self.groups[group_id]
        if group.members:
            return False
        del self.groups[group_id]
        self.events.forget(group_id)

        def restore(error: ErrorCode, message: str) -> None:
            self.groups.setdefault(group_id, group)

        self.state.recorder.write([GroupTombstone(group_id)], None, restore)
        return True

    def delete_if_empty(self, group_id: str) -> ErrorCode:
        group = self.groups.get(group_id)
        if group is None:
            return ErrorCode.group_id_not_found
        if group.members:
            return ErrorCode.non_empty_group
        return ErrorCode.none


__all__ = [
    "ConsumerGroups",
    "ConsumerHeartbeatRequest",
    "ConsumerHeartbeatResponse",
    "DescribedConsumerGroup",
    "DescribedConsumerMember",
    "DescribedTopic",
]
