"""OffsetCommit, OffsetFetch and OffsetDelete."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TypeVar

from kio.schema.errors import ErrorCode
from kio.schema.offset_commit.v4 import request as offset_commit_v4_req
from kio.schema.offset_commit.v9 import request as offset_commit_v9_req
from kio.schema.offset_commit.v9 import response as offset_commit_v9_res
from kio.schema.offset_commit.v10 import request as offset_commit_req
from kio.schema.offset_commit.v10 import response as offset_commit_res
from kio.schema.offset_delete.v0 import request as offset_delete_req
from kio.schema.offset_delete.v0 import response as offset_delete_res
from kio.schema.offset_fetch.v7 import request as offset_fetch_v7_req
from kio.schema.offset_fetch.v7 import response as offset_fetch_v7_res
from kio.schema.offset_fetch.v9 import request as offset_fetch_v9_req
from kio.schema.offset_fetch.v9 import response as offset_fetch_v9_res
from kio.schema.offset_fetch.v10 import request as offset_fetch_req
from kio.schema.offset_fetch.v10 import response as offset_fetch_res
from kio.schema.types import GroupId, TopicName
from kio.static.primitive import i32, i64
from kio.static.protocol import ResponsePayload

from staticfleet.broker.apis.common import E, gated, ms
from staticfleet.broker.registry import NO_THROTTLE, ApiError, BrokerContext, Request, Requires, kafka_api
from staticfleet.broker.security.acl import AclOperation, ResourceType
from staticfleet.coordinator import messages as m

P = TypeVar("P")
OffsetCommitRequest = offset_commit_req.OffsetCommitRequest
OffsetFetchRequest = offset_fetch_req.OffsetFetchRequest
OffsetDeleteRequest = offset_delete_req.OffsetDeleteRequest


def _name_of(ctx: BrokerContext, topic_id: uuid.UUID | None) -> str | None:
    return None if topic_id is None else ctx.topics.topic_name_for_id(topic_id)


# === OffsetCommit =========================================================================================


def _committed_names(ctx: BrokerContext, request: Request[OffsetCommitRequest]) -> list[str | None]:
    """Each request topic's name: given before v10, found from its id from v10 (None: an unknown id)."""
    if request.version >= 10:
        return [_name_of(ctx, t.topic_id) for t in request.body.topics]
    return [t.name for t in request.shaped(offset_commit_v9_req.OffsetCommitRequest).topics]


def _offset_commit_response(
    request: Request[OffsetCommitRequest], order: Sequence[int], error_of: Callable[[int, int], ErrorCode]
) -> ResponsePayload:
    """The answer, topics in `order` (indexes into the request's), each partition's error from
    `error_of(topic index, partition)`: topics by id from v10, by name before."""
    topics = request.body.topics
    if request.version >= 10:
        return offset_commit_res.OffsetCommitResponse(
            throttle_time=NO_THROTTLE,
            topics=tuple(
                offset_commit_res.OffsetCommitResponseTopic(
                    topic_id=topics[index].topic_id,
                    partitions=tuple(
                        offset_commit_res.OffsetCommitResponsePartition(
                            partition_index=p.partition_index, error_code=error_of(index, p.partition_index)
                        )
                        for p in topics[index].partitions
                    ),
                )
                for index in order
            ),
        )
    named = request.shaped(offset_commit_v9_req.OffsetCommitRequest).topics
    return offset_commit_v9_res.OffsetCommitResponse(
        throttle_time=NO_THROTTLE,
        topics=tuple(
            offset_commit_v9_res.OffsetCommitResponseTopic(
                name=named[index].name,
                partitions=tuple(
                    offset_commit_v9_res.OffsetCommitResponsePartition(
                        partition_index=p.partition_index, error_code=error_of(index, p.partition_index)
                    )
                    for p in named[index].partitions
                ),
            )
            for index in order
        ),
    )


def _offset_commit_error(request: Request[OffsetCommitRequest], error: ApiError) -> ResponsePayload:
    return _offset_commit_response(request, range(len(request.body.topics)), lambda index, p: error.code)


@kafka_api(
    "offset_commit",
    (2, 10),
    OffsetCommitRequest,
    error=_offset_commit_error,
    acl=(
        Requires.request(AclOperation.READ, ResourceType.GROUP, lambda r: r.body.group_id),
        # A topic the caller may not read is answered in its place (an unknown id checks the name "").
        Requires.each(
            AclOperation.READ,
            ResourceType.TOPIC,
            lambda ctx, r: [name or "" for name in _committed_names(ctx, r)],
        ),
    ),
)
async def handle_offset_commit(ctx: BrokerContext, request: Request[OffsetCommitRequest]) -> ResponsePayload:
    body = request.body
    by_id = request.version >= 10
    # Only v2 to v4 carry a retention time; later versions leave it to the broker.
    retention_ms = (
        ms(request.shaped(offset_commit_v4_req.OffsetCommitRequest).retention_time)
        if request.version <= 4
        else -1
    )
    results: dict[tuple[int, int], ErrorCode] = {}
    valid_topics = []
    # Unauthorized topics come first in the answer, as Kafka builds it.
    denied_first: list[int] = []
    for index, (name, topic) in enumerate(zip(_committed_names(ctx, request), body.topics, strict=True)):
        if not request.allows(AclOperation.READ, ResourceType.TOPIC, name or ""):
            for p in topic.partitions:
                results[(index, p.partition_index)] = E.topic_authorization_failed
            denied_first.append(index)
            continue
        partitions = []
        count = ctx.topics.partition_count(name) if name is not None and ctx.topics.has_topic(name) else 0
        unknown = E.unknown_topic_id if by_id and name is None else E.unknown_topic_or_partition
        for p in topic.partitions:
            if name is None or not 0 <= p.partition_index < count:
                results[(index, p.partition_index)] = unknown
            else:
                partitions.append(
                    m.OffsetCommitPartition(
                        p.partition_index, p.committed_offset, p.committed_leader_epoch, p.committed_metadata
                    )
                )
        if partitions and name is not None:
            valid_topics.append((index, m.OffsetCommitTopic(name, tuple(partitions))))
    if valid_topics:
        commit = m.OffsetCommitRequest(
            group_id=body.group_id,
            generation_id=body.generation_id_or_member_epoch,
            member_id=body.member_id,
            group_instance_id=body.group_instance_id,
            topics=tuple(t for _, t in valid_topics),
            retention_time_ms=retention_ms,
        )
        r = ctx.host.call(lambda c: c.commit_offsets(request.context(), commit))
        for (index, _), result in zip(valid_topics, r.topics, strict=True):
            for done in result.partitions:
                results[(index, done.partition)] = done.error
    order = denied_first + [i for i in range(len(body.topics)) if i not in denied_first]
    response = _offset_commit_response(request, order, lambda index, p: results[(index, p)])
    return await gated(ctx, response)


# === OffsetFetch ==========================================================================================


@dataclass(frozen=True, slots=True)
class _Asked:
    """A topic an OffsetFetch asks about, whatever the version: its name (None: an id this broker does
    not know), the id it was asked by (from v10), and the partitions."""

    name: str | None
    topic_id: uuid.UUID | None
    partitions: tuple[int, ...]


def _asked_groups(
    ctx: BrokerContext, request: Request[OffsetFetchRequest]
) -> list[tuple[str, list[_Asked] | None]]:
    """Each group asked about with the topics asked (None: every topic it has offsets for)."""
    if request.version < 8:
        one = request.shaped(offset_fetch_v7_req.OffsetFetchRequest)
        topics = (
            None if one.topics is None else [_Asked(t.name, None, t.partition_indexes) for t in one.topics]
        )
        return [(one.group_id, topics)]
    if request.version < 10:
        return [
            (
                g.group_id,
                None if g.topics is None else [_Asked(t.name, None, t.partition_indexes) for t in g.topics],
            )
            for g in request.shaped(offset_fetch_v9_req.OffsetFetchRequest).groups
        ]
    return [
        (
            g.group_id,
            None
            if g.topics is None
            else [_Asked(_name_of(ctx, t.topic_id), t.topic_id, t.partition_indexes) for t in g.topics],
        )
        for g in request.body.groups
    ]


def _offset_fetch_error(request: Request[OffsetFetchRequest], error: ApiError) -> ResponsePayload:
    v7 = offset_fetch_v7_res
    if request.version >= 8:
        return offset_fetch_res.OffsetFetchResponse(
            throttle_time=NO_THROTTLE,
            groups=tuple(
                offset_fetch_res.OffsetFetchResponseGroup(
                    group_id=g.group_id, error_code=error.code, topics=()
                )
                for g in request.body.groups
            ),
        )
    if request.version >= 2:
        return v7.OffsetFetchResponse(throttle_time=NO_THROTTLE, error_code=error.code, topics=())
    # v1 has no top-level error: every partition asked for carries it.
    return v7.OffsetFetchResponse(
        throttle_time=NO_THROTTLE,
        error_code=E.none,
        topics=tuple(
            v7.OffsetFetchResponseTopic(
                name=t.name,
                partitions=tuple(
                    v7.OffsetFetchResponsePartition(
                        partition_index=i32(p),
                        committed_offset=i64(-1),
                        committed_leader_epoch=i32(-1),
                        metadata="",
                        error_code=error.code,
                    )
                    for p in t.partition_indexes
                ),
            )
            for t in request.shaped(offset_fetch_v7_req.OffsetFetchRequest).topics or ()
        ),
    )


@kafka_api(
    "offset_fetch",
    (1, 10),
    OffsetFetchRequest,
    error=_offset_fetch_error,
    acl=(
        # Before v8 one group, refused as a whole; from v8 each group is answered in its place.
        Requires.request(
            AclOperation.DESCRIBE,
            ResourceType.GROUP,
            lambda r: r.shaped(offset_fetch_v7_req.OffsetFetchRequest).group_id,
            applies=lambda r: r.version < 8,
        ),
        Requires.each(
            AclOperation.DESCRIBE,
            ResourceType.GROUP,
            lambda ctx, r: [g.group_id for g in r.body.groups],
            applies=lambda r: r.version >= 8,
        ),
        # Topics asked for that the caller may not describe are answered after the others; when it asks
        # for every topic, they are left out (so their names come from the coordinator's answer).
        Requires.each(AclOperation.DESCRIBE, ResourceType.TOPIC),
    ),
)
async def handle_offset_fetch(ctx: BrokerContext, request: Request[OffsetFetchRequest]) -> ResponsePayload:
    by_id = request.version >= 10
    require_stable = request.body.require_stable

    def describable(name: str | None) -> bool:
        return request.allows(AclOperation.DESCRIBE, ResourceType.TOPIC, name or "")

    def fetch(
        group_id: str, asked: list[_Asked] | None
    ) -> list[tuple[m.FetchedTopic, uuid.UUID | None, bool]]:
        """(topic, its id, whether the id asked for is unknown) for each topic of one group; topics the
        caller may not DESCRIBE are answered TOPIC_AUTHORIZATION_FAILED after the others (when listed)
        or left out (when all were asked for)."""
        if asked is None:
            return [f for f in fetch_allowed(group_id, None) if describable(f[0].name)]
        allowed = [a for a in asked if describable(a.name)]
        denied = [a for a in asked if a not in allowed]
        return (fetch_allowed(group_id, allowed) if allowed else []) + [
            (
                m.FetchedTopic(
                    a.name or "",
                    tuple(m.FetchedOffset(p, error=E.topic_authorization_failed) for p in a.partitions),
                ),
                a.topic_id,
                False,
            )
            for a in denied
        ]

    def fetch_allowed(
        group_id: str, asked: list[_Asked] | None
    ) -> list[tuple[m.FetchedTopic, uuid.UUID | None, bool]]:
        wanted = None
        if asked is not None:
            wanted = tuple(m.OffsetFetchTopic(a.name or "", a.partitions) for a in asked)
        r = ctx.host.coordinator.fetch_offsets(
            request.context(), m.OffsetFetchRequest(group_id, wanted, require_stable)
        )
        if asked is not None:  # echo the ids that were asked, as Kafka does
            return [(t, a.topic_id, by_id and a.name is None) for t, a in zip(r.topics, asked, strict=True)]
        return [
            (t, ctx.topics.describe_topic(t.name).topic_id if ctx.topics.has_topic(t.name) else None, False)
            for t in r.topics
        ]

    def offsets(make: Callable[..., P], t: m.FetchedTopic, unknown_id: bool) -> tuple[P, ...]:
        """One topic's partitions as `make` (the partition entity of the answered version) builds them."""
        return tuple(
            make(
                partition_index=i32(p.partition),
                committed_offset=i64(p.offset),
                committed_leader_epoch=i32(p.leader_epoch),
                metadata=p.metadata,
                error_code=E.unknown_topic_id if unknown_id else p.error,
            )
            for p in t.partitions
        )

    groups = _asked_groups(ctx, request)
    response: ResponsePayload
    denied = E.group_authorization_failed
    if request.version < 8:  # one group, topics by name
        v7 = offset_fetch_v7_res
        ((group_id, asked),) = groups
        response = v7.OffsetFetchResponse(
            throttle_time=NO_THROTTLE,
            error_code=E.none,
            topics=tuple(
                v7.OffsetFetchResponseTopic(
                    name=TopicName(t.name), partitions=offsets(v7.OffsetFetchResponsePartition, t, unknown)
                )
                for t, _, unknown in fetch(group_id, asked)
            ),
        )
    elif not by_id:  # groups, topics by name
        v9 = offset_fetch_v9_res
        response = v9.OffsetFetchResponse(
            throttle_time=NO_THROTTLE,
            groups=tuple(
                v9.OffsetFetchResponseGroup(
                    group_id=GroupId(group_id),
                    error_code=E.none,
                    topics=tuple(
                        v9.OffsetFetchResponseTopics(
                            name=TopicName(t.name),
                            partitions=offsets(v9.OffsetFetchResponsePartitions, t, unknown),
                        )
                        for t, _, unknown in fetch(group_id, asked)
                    ),
                )
                if request.allows(AclOperation.DESCRIBE, ResourceType.GROUP, group_id)
                else v9.OffsetFetchResponseGroup(group_id=GroupId(group_id), error_code=denied, topics=())
                for group_id, asked in groups
            ),
        )
    else:  # groups, topics by id
        v10 = offset_fetch_res
        response = v10.OffsetFetchResponse(
            throttle_time=NO_THROTTLE,
            groups=tuple(
                v10.OffsetFetchResponseGroup(
                    group_id=GroupId(group_id),
                    error_code=E.none,
                    topics=tuple(
                        v10.OffsetFetchResponseTopics(
                            topic_id=topic_id,
                            partitions=offsets(v10.OffsetFetchResponsePartitions, t, unknown),
                        )
                        for t, topic_id, unknown in fetch(group_id, asked)
                    ),
                )
                if request.allows(AclOperation.DESCRIBE, ResourceType.GROUP, group_id)
                else v10.OffsetFetchResponseGroup(group_id=GroupId(group_id), error_code=denied, topics=())
                for group_id, asked in groups
            ),
        )
    return await gated(ctx, response)


# === OffsetDelete =========================================================================================


def _offset_delete_error(request: Request[OffsetDeleteRequest], error: ApiError) -> ResponsePayload:
    return offset_delete_res.OffsetDeleteResponse(error_code=error.code, throttle_time=NO_THROTTLE, topics=())


@kafka_api(
    "offset_delete",
    (0, 0),
    OffsetDeleteRequest,
    error=_offset_delete_error,
    acl=(
        Requires.request(AclOperation.DELETE, ResourceType.GROUP, lambda r: r.body.group_id),
        # A topic the caller may not read is answered in its place.
        Requires.each(AclOperation.READ, ResourceType.TOPIC, lambda ctx, r: [t.name for t in r.body.topics]),
    ),
)
async def handle_offset_delete(ctx: BrokerContext, request: Request[OffsetDeleteRequest]) -> ResponsePayload:
    """As Kafka's KafkaApis answers it: denied topics and unknown partitions first, then what the group
    coordinator answers for the rest; a group-level error from the coordinator is the whole answer."""
    body = request.body
    if not body.group_id:
        return _offset_delete_error(request, ApiError(E.invalid_group_id))
    answered: dict[str, list[tuple[int, ErrorCode]]] = {}
    valid: list[m.OffsetFetchTopic] = []
    for topic in body.topics:
        partitions = [int(p.partition_index) for p in topic.partitions]
        if not request.allows(AclOperation.READ, ResourceType.TOPIC, topic.name):
            answered.setdefault(topic.name, []).extend((p, E.topic_authorization_failed) for p in partitions)
            continue
        count = ctx.topics.partition_count(topic.name) if ctx.topics.has_topic(topic.name) else 0
        unknown = [p for p in partitions if not 0 <= p < count]
        if unknown:
            answered.setdefault(topic.name, []).extend((p, E.unknown_topic_or_partition) for p in unknown)
        known = tuple(p for p in partitions if 0 <= p < count)
        if known:
            valid.append(m.OffsetFetchTopic(topic.name, known))
    result = ctx.host.call(lambda c: c.delete_offsets(body.group_id, tuple(valid)))
    if result.error != E.none:
        return await gated(ctx, _offset_delete_error(request, ApiError(result.error)))
    for done in result.topics:
        answered.setdefault(done.name, []).extend((p.partition, p.error) for p in done.partitions)
    response = offset_delete_res.OffsetDeleteResponse(
        error_code=E.none,
        throttle_time=NO_THROTTLE,
        topics=tuple(
            offset_delete_res.OffsetDeleteResponseTopic(
                name=TopicName(name),
                partitions=tuple(
                    offset_delete_res.OffsetDeleteResponsePartition(partition_index=i32(p), error_code=error)
                    for p, error in partitions
                ),
            )
            for name, partitions in answered.items()
        ),
    )
    return await gated(ctx, response)
