"""Committed offsets, keyed group -> topic -> partition (the stored value is the record that committed
it), and the rules of OffsetCommit, OffsetFetch and offset retention."""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Final

from staticfleet.coordinator import events as ev
from staticfleet.coordinator.consumer_group import ConsumerGroup, subscribed_names
from staticfleet.coordinator.errors import CoordinatorError, ErrorCode
from staticfleet.coordinator.group import ClassicGroup, GroupState
from staticfleet.coordinator.messages import (
    FetchedOffset,
    FetchedTopic,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetDeleteResponse,
    OffsetFetchRequest,
    OffsetFetchResponse,
    OffsetFetchTopic,
    PartitionResult,
    RequestContext,
    TopicResult,
)
from staticfleet.coordinator.records import GroupTombstone, OffsetCommitRecord, OffsetTombstone, Record

if TYPE_CHECKING:
    from staticfleet.coordinator.membership import Membership
    from staticfleet.coordinator.state import CoordinatorState

log = logging.getLogger(__name__)

_CLEANUP: Final = "offsets-cleanup"


@dataclass(slots=True)
class OffsetStore:
    by_group: dict[str, dict[str, dict[int, OffsetCommitRecord]]] = field(default_factory=dict)

    def put(self, record: OffsetCommitRecord) -> None:
        topics = self.by_group.get(record.group_id)
        if topics is None:
            topics = self.by_group[record.group_id] = {}
        partitions = topics.get(record.topic)
        if partitions is None:
            partitions = topics[record.topic] = {}
        partitions[record.partition] = record

    def get(self, group_id: str, topic: str, partition: int) -> OffsetCommitRecord | None:
        topics = self.by_group.get(group_id)
        if topics is None:
            return None
        partitions = topics.get(topic)
        return None if partitions is None else partitions.get(partition)

    def delete(self, group_id: str, topic: str, partition: int) -> None:
        topics = self.by_group.get(group_id)
        if topics is None:
            return
        partitions = topics.get(topic)
        if partitions is None:
            return
        partitions.pop(partition, None)
        if not partitions:
            del topics[topic]
        if not topics:
            del self.by_group[group_id]

    def delete_group(self, group_id: str) -> None:
        self.by_group.pop(group_id, None)

    def of_group(self, group_id: str) -> dict[str, dict[int, OffsetCommitRecord]]:
        return self.by_group.get(group_id, {})

    def all(self) -> Iterator[OffsetCommitRecord]:
        for topics in self.by_group.values():
            for partitions in topics.values():
                yield from partitions.values()

    def __len__(self) -> int:
        return sum(len(p) for topics in self.by_group.values() for p in topics.values())


def _metadata_length(metadata: str | None) -> int:
    """Kafka measures offset metadata in UTF-16 code units (java.lang.String.length)."""
    return 0 if metadata is None else len(metadata.encode("utf-16-le")) // 2


class OffsetManager:
    """OffsetCommit, OffsetFetch and offset retention (Kafka's OffsetMetadataManager)."""

    def __init__(self, state: CoordinatorState, membership: Membership) -> None:
        self.state = state
        self.membership = membership
        self.store = state.offsets
        # What else forgets a consumer-protocol group its offsets' expiry deleted (its event bookkeeping).
        self.forget_consumer_group: Callable[[str], None] = lambda group_id: None

    def commit_offsets(self, ctx: RequestContext, request: OffsetCommitRequest) -> OffsetCommitResponse:
        state = self.state
        consumer_group = state.consumer_groups.get(request.group_id)
        if consumer_group is not None:
            try:
                self._validate_consumer_commit(ctx, consumer_group, request)
            except CoordinatorError as exc:
                return OffsetCommitResponse.all_failed(request, exc.code)
            return self._write_offsets(request, None)
        group = state.groups.get(request.group_id)
        if group is None:
            if request.generation_id >= 0:
                error = ErrorCode.group_id_not_found if ctx.api_version >= 9 else ErrorCode.illegal_generation
                return OffsetCommitResponse.all_failed(request, error)
            # No group and no generation: a consumer outside group management. Kafka calls it a simple group.
            group = created = state.create_group(request.group_id)
        else:
            created = None
        try:
            group.validate_offset_commit(request.member_id, request.group_instance_id, request.generation_id)
        except CoordinatorError as exc:
            if exc.code == ErrorCode.fenced_instance_id:
                state.emit_fenced(group, request.member_id, request.group_instance_id, "OffsetCommit")
            return OffsetCommitResponse.all_failed(request, exc.code)
        if group.state in (GroupState.STABLE, GroupState.PREPARING_REBALANCE):
            self.membership.reschedule_member_heartbeat(group, group.member(request.member_id))
        return self._write_offsets(request, created)

    def _validate_consumer_commit(
        self, ctx: RequestContext, group: ConsumerGroup, request: OffsetCommitRequest
    ) -> None:
        """A consumer-protocol group's commit rules (Kafka's ConsumerGroup.validateOffsetCommit): the
        member's current epoch, or an older one no older than each partition's assignment epoch."""
        epoch = request.generation_id
        if epoch < 0 and not group.members:
            return  # an admin client, or a consumer outside the group, commits for an empty group
        member = group.members.get(request.member_id)
        if member is None:
            raise CoordinatorError(ErrorCode.unknown_member_id)
        if ctx.api_version < 9:
            raise CoordinatorError(ErrorCode.unsupported_version)
        if epoch == member.member_epoch:
            return
        if epoch > member.member_epoch:
            raise CoordinatorError(ErrorCode.stale_member_epoch)
        topics = self.state.topics
        for topic in request.topics:
            topic_id = topics.topic_id(topic.name)
            for p in topic.partitions:
                held = {} if topic_id is None else member.assigned.get(topic_id, {})
                assigned_at = held.get(p.partition)
                if assigned_at is None and topic_id is not None:
                    assigned_at = member.pending_revocation.get(topic_id, {}).get(p.partition)
                if assigned_at is None or epoch < assigned_at:
                    raise CoordinatorError(ErrorCode.stale_member_epoch)

    def _write_offsets(
        self, request: OffsetCommitRequest, created: ClassicGroup | None
    ) -> OffsetCommitResponse:
        state = self.state
        now = state.clock.now_ms()
        expire = now + request.retention_time_ms if request.retention_time_ms != -1 else -1
        records: list[OffsetCommitRecord] = []
        topics: list[TopicResult] = []
        max_metadata = state.config.offset_metadata_max_bytes
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
            put = self.store.put

            def written() -> None:
                for record in records:
                    put(record)

            def failed(error: ErrorCode, message: str) -> None:
                state.recorder.respond_instead(OffsetCommitResponse.all_failed(request, error))
                if created is not None and state.groups.get(created.group_id) is created:
                    del state.groups[created.group_id]  # the simple group this commit created is undone

            state.recorder.write(records, written, failed)
        return OffsetCommitResponse(tuple(topics))

    def fetch_offsets(self, ctx: RequestContext, request: OffsetFetchRequest) -> OffsetFetchResponse:
        group = self.state.groups.get(request.group_id)
        known = (group is not None and not group.is_in(GroupState.DEAD)) or (
            request.group_id in self.state.consumer_groups
        )
        committed = self.store.of_group(request.group_id) if known else {}
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

    def delete_offsets(self, group_id: str, topics: tuple[OffsetFetchTopic, ...]) -> OffsetDeleteResponse:
        """OffsetDelete, as Kafka's OffsetMetadataManager does it: GROUP_ID_NOT_FOUND for an unknown or
        Dead group, NON_EMPTY_GROUP for a group with members that is not a consumer group; in a consumer
        group, GROUP_SUBSCRIBED_TO_TOPIC for every partition of a topic its members subscribe to. The
        other partitions answer NONE, and those with a committed offset lose it (a tombstone each)."""
        state = self.state
        group = state.groups.get(group_id)
        consumer_group = state.consumer_groups.get(group_id)
        if consumer_group is not None:
            subscribed = frozenset(
                name for m in consumer_group.members.values() for name in m.subscribed_topic_names
            )
        elif group is None or group.is_in(GroupState.DEAD):
            return OffsetDeleteResponse(ErrorCode.group_id_not_found)
        elif not group.is_empty and group.protocol_type != "consumer":
            return OffsetDeleteResponse(ErrorCode.non_empty_group)
        else:
            # An Empty group subscribes to nothing (Kafka recomputes its topics as the last member goes).
            subscribed = frozenset() if group.is_empty else group.subscribed_topics or frozenset()
        committed = self.store.of_group(group_id)
        doomed: list[OffsetTombstone] = []
        results = []
        for topic in topics:
            if topic.name in subscribed:
                error = ErrorCode.group_subscribed_to_topic
                results.append(
                    TopicResult(topic.name, tuple(PartitionResult(p, error) for p in topic.partitions))
                )
                continue
            held = committed.get(topic.name, {})
            doomed.extend(OffsetTombstone(group_id, topic.name, p) for p in topic.partitions if p in held)
            results.append(TopicResult(topic.name, tuple(PartitionResult(p) for p in topic.partitions)))
        if doomed:

            def written() -> None:
                for tombstone in doomed:
                    self.store.delete(tombstone.group_id, tombstone.topic, tombstone.partition)

            def failed(error: ErrorCode, message: str) -> None:
                state.recorder.respond_instead(OffsetDeleteResponse(error))

            state.recorder.write(list[Record](doomed), written, failed)
        return OffsetDeleteResponse(topics=tuple(results))

    def tombstones(self, group_id: str) -> list[Record]:
        """Records that delete every committed offset of a group."""
        return [
            OffsetTombstone(group_id, topic, partition)
            for topic, partitions in self.store.of_group(group_id).items()
            for partition in partitions
        ]

    # --- retention ---------------------------------------------------------------------------------

    def schedule_cleanup(self) -> None:
        state = self.state
        state.timers.schedule(
            (_CLEANUP,),
            state.clock.now_ms() + state.config.offsets_retention_check_interval_ms,
            self.cleanup_expired_offsets,
        )

    def cleanup_expired_offsets(self) -> None:
        """Expire offsets past retention and delete empty groups left with none, as Kafka's cleanup does
        (GroupCoordinatorShard.cleanupGroupMetadata): for each group, the offsets of the topics it does not
        subscribe to, by the group's expiration condition (offset_expiry)."""
        state = self.state
        now = state.clock.now_ms()
        retention = state.config.offsets_retention_ms
        records: list[Record] = []
        expired: list[OffsetCommitRecord] = []
        doomed: list[ClassicGroup] = []
        consumer_doomed: list[str] = []
        expiring: list[tuple[str, OffsetExpiry | None, bool]] = [
            (g.group_id, classic_offset_expiry(g), g.is_empty) for g in state.groups.values()
        ]
        expiring += [
            (g.group_id, consumer_offset_expiry(g), not g.members) for g in state.consumer_groups.values()
        ]
        for group_id, expiry, empty in expiring:
            if expiry is None:
                continue  # Kafka expires nothing of such a group (an active classic group not Stable)
            offsets = self.store.of_group(group_id)
            expired_here = [
                record
                for topic, partitions in offsets.items()
                if topic not in expiry.subscribed
                for record in partitions.values()
                if expiry.expired(record, now, retention)
            ]
            remaining = sum(len(p) for p in offsets.values()) - len(expired_here)
            records.extend(OffsetTombstone(r.group_id, r.topic, r.partition) for r in expired_here)
            expired.extend(expired_here)
            if remaining == 0 and empty:
                records.append(GroupTombstone(group_id))
                if group_id in state.consumer_groups:
                    consumer_doomed.append(group_id)
                else:
                    doomed.append(state.groups[group_id])
        if records:

            def written() -> None:
                for record in expired:
                    self.store.delete(record.group_id, record.topic, record.partition)
                for group in doomed:
                    self.membership.drop_group(group)
                    state.emit(ev.GROUP_DELETED, group.group_id, cause="expired")
                for group_id in consumer_doomed:
                    state.consumer_groups.pop(group_id, None)
                    self.forget_consumer_group(group_id)
                    state.emit(ev.GROUP_DELETED, group_id, cause="expired", protocol="consumer")

            def failed(error: ErrorCode, message: str) -> None:
                # Nothing changed: the next check expires them.
                log.warning("could not persist offset expiration: %s", message)

            state.recorder.write(records, written, failed)
        self.schedule_cleanup()


@dataclass(frozen=True, slots=True)
class OffsetExpiry:
    """A group's offset expiration condition (Kafka's OffsetExpirationConditionImpl): an offset of a topic
    the group does not subscribe to expires at its explicit expire timestamp (OffsetCommit v2-v4), or once
    retention has passed since its base: the moment an Empty classic group became Empty, else the commit."""

    subscribed: frozenset[str] = frozenset()
    empty_since_ms: int | None = None

    def expired(self, record: OffsetCommitRecord, now_ms: int, retention_ms: int) -> bool:
        if record.expire_timestamp != -1:
            return now_ms >= record.expire_timestamp
        base = self.empty_since_ms if self.empty_since_ms is not None else record.commit_timestamp
        return now_ms - base >= retention_ms


def classic_offset_expiry(group: ClassicGroup) -> OffsetExpiry | None:
    """ClassicGroup.offsetExpirationCondition: every offset of an Empty group, from when it became Empty;
    those of a Stable consumer group's unsubscribed topics, from their commit; every offset of a group
    with no protocol type (a simple consumer's), from its commit; nothing otherwise."""
    if group.protocol_type is None:
        return OffsetExpiry()
    if group.is_empty:
        return OffsetExpiry(empty_since_ms=group.current_state_timestamp)
    subscribed = group.subscribed_topics
    if group.protocol_type == "consumer" and subscribed is not None and group.is_in(GroupState.STABLE):
        return OffsetExpiry(subscribed)
    return None


def consumer_offset_expiry(group: ConsumerGroup) -> OffsetExpiry:
    """ConsumerGroup.offsetExpirationCondition: from each commit, for the topics no member subscribes to
    (by name or through a regular expression)."""
    subscribed = frozenset().union(*(subscribed_names(m, group) for m in group.members.values()))
    return OffsetExpiry(subscribed)
