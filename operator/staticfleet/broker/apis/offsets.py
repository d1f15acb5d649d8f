"""OffsetCommit and OffsetFetch."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from typing import Any, TypeVar

from kio.schema.errors import ErrorCode
from kio.schema.offset_commit.v9 import response as offset_commit_v9_res
from kio.schema.offset_commit.v10 import request as offset_commit_req
from kio.schema.offset_commit.v10 import response as offset_commit_res
from kio.schema.offset_fetch.v7 import response as offset_fetch_v7_res
from kio.schema.offset_fetch.v9 import response as offset_fetch_v9_res
from kio.schema.offset_fetch.v10 import request as offset_fetch_req
from kio.schema.offset_fetch.v10 import response as offset_fetch_res
from kio.schema.types import TopicName
from kio.static.primitive import i32, i64
from kio.static.protocol import ResponsePayload

from staticfleet.broker.apis.common import E, gated, ms
from staticfleet.broker.apis.security import access
from staticfleet.broker.registry import NO_THROTTLE, BrokerContext, Request, kafka_api
from staticfleet.broker.security.acl import AclOperation
from staticfleet.coordinator import messages as m

P = TypeVar("P")


def _topic_name(ctx: BrokerContext, topic: Any) -> str | None:
    """The name of a request topic given by name (older versions) or by id (newer ones)."""
    name = getattr(topic, "name", None)
    if name is not None:
        return str(name)
    topic_id = getattr(topic, "topic_id", None)
    return None if topic_id is None else ctx.topics.topic_name_for_id(topic_id)


@kafka_api("offset_commit", (2, 10))
async def handle_offset_commit(
    ctx: BrokerContext, request: Request[offset_commit_req.OffsetCommitRequest]
) -> ResponsePayload:
    body = request.body
    by_id = request.version >= 10
    generation = request.optional("generation_id_or_member_epoch", request.optional("generation_id", -1))
    retention = request.optional("retention_time")
    results: dict[tuple[int, int], ErrorCode] = {}
    valid_topics = []
    checks = access(ctx, request)
    group_allowed = checks.group(AclOperation.READ, body.group_id)
    # Unauthorized topics come first in the answer, as Kafka builds it.
    denied_first: list[int] = []
    for index, topic in enumerate(body.topics):
        name = _topic_name(ctx, topic)
        if not group_allowed or (checks.enabled and not checks.topic(AclOperation.READ, name or "")):
            code = E.group_authorization_failed if not group_allowed else E.topic_authorization_failed
            for p in topic.partitions:
                results[(index, p.partition_index)] = code
            if group_allowed:
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
                        p.partition_index,
                        p.committed_offset,
                        getattr(p, "committed_leader_epoch", -1),
                        p.committed_metadata,
                    )
                )
        if partitions and name is not None:
            valid_topics.append((index, m.OffsetCommitTopic(name, tuple(partitions))))
    if valid_topics:
        commit = m.OffsetCommitRequest(
            group_id=body.group_id,
            generation_id=generation,
            member_id=request.optional("member_id", ""),
            group_instance_id=request.optional("group_instance_id"),
            topics=tuple(t for _, t in valid_topics),
            retention_time_ms=-1 if retention is None else ms(retention),
        )
        r = ctx.host.call(lambda c: c.commit_offsets(request.context(), commit))
        for (index, _), result in zip(valid_topics, r.topics, strict=True):
            for done in result.partitions:
                results[(index, done.partition)] = E(done.error)
    order = denied_first + [i for i in range(len(body.topics)) if i not in denied_first]
    ordered = [(index, body.topics[index]) for index in order]
    response: ResponsePayload
    if by_id:
        response = offset_commit_res.OffsetCommitResponse(
            throttle_time=NO_THROTTLE,
            topics=tuple(
                offset_commit_res.OffsetCommitResponseTopic(
                    topic_id=topic.topic_id,
                    partitions=tuple(
                        offset_commit_res.OffsetCommitResponsePartition(
                            partition_index=p.partition_index, error_code=results[(index, p.partition_index)]
                        )
                        for p in topic.partitions
                    ),
                )
                for index, topic in ordered
            ),
        )
    else:
        response = offset_commit_v9_res.OffsetCommitResponse(
            throttle_time=NO_THROTTLE,
            topics=tuple(
                offset_commit_v9_res.OffsetCommitResponseTopic(
                    name=getattr(topic, "name"),  # noqa: B009 (absent from the v10 entity the body is typed as)
                    partitions=tuple(
                        offset_commit_v9_res.OffsetCommitResponsePartition(
                            partition_index=p.partition_index, error_code=results[(index, p.partition_index)]
                        )
                        for p in topic.partitions
                    ),
                )
                for index, topic in ordered
            ),
        )
    return await gated(ctx, response)


@kafka_api("offset_fetch", (1, 10))
async def handle_offset_fetch(
    ctx: BrokerContext, request: Request[offset_fetch_req.OffsetFetchRequest]
) -> ResponsePayload:
    by_id = request.version >= 10
    require_stable = bool(request.optional("require_stable", False))
    checks = access(ctx, request)

    def fetch(group_id: str, asked: Any) -> list[tuple[m.FetchedTopic, uuid.UUID | None, bool]]:
        """(topic, its id, whether the id asked for is unknown) for each topic of one group; topics the
        caller may not DESCRIBE are answered TOPIC_AUTHORIZATION_FAILED after the others (when listed)
        or left out (when all were asked for)."""
        if checks.enabled:
            if asked is None:
                found = fetch_allowed(group_id, None)
                return [f for f in found if checks.topic(AclOperation.DESCRIBE, f[0].name)]
            allowed = [a for a in asked if checks.topic(AclOperation.DESCRIBE, _topic_name(ctx, a) or "")]
            denied = [a for a in asked if a not in allowed]
            return (fetch_allowed(group_id, allowed) if allowed else []) + (
                [
                    (
                        m.FetchedTopic(
                            _topic_name(ctx, a) or "",
                            tuple(
                                m.FetchedOffset(p, error=int(E.topic_authorization_failed))
                                for p in a.partition_indexes
                            ),
                        ),
                        getattr(a, "topic_id", None),
                        False,
                    )
                    for a in denied
                ]
            )
        return fetch_allowed(group_id, asked)

    def fetch_allowed(group_id: str, asked: Any) -> list[tuple[m.FetchedTopic, uuid.UUID | None, bool]]:
        wanted = None
        if asked is not None:
            wanted = tuple(
                m.OffsetFetchTopic(_topic_name(ctx, t) or "", tuple(t.partition_indexes)) for t in asked
            )
        r = ctx.host.coordinator.fetch_offsets(
            request.context(), m.OffsetFetchRequest(group_id, wanted, require_stable)
        )
        if asked is not None:  # echo the ids that were asked, as Kafka does
            return [
                (t, getattr(a, "topic_id", None), by_id and _topic_name(ctx, a) is None)
                for t, a in zip(r.topics, asked, strict=True)
            ]
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
                error_code=E.unknown_topic_id if unknown_id else E(p.error),
            )
            for p in t.partitions
        )

    response: ResponsePayload
    denied = E.group_authorization_failed
    if request.version < 8 and not checks.group(AclOperation.DESCRIBE, request.optional("group_id")):
        v7 = offset_fetch_v7_res
        if request.version >= 2:
            return v7.OffsetFetchResponse(throttle_time=NO_THROTTLE, error_code=denied, topics=())
        # v1 has no top-level error: every partition asked for carries it.
        return v7.OffsetFetchResponse(
            throttle_time=NO_THROTTLE,
            error_code=E.none,
            topics=tuple(
                v7.OffsetFetchResponseTopic(
                    name=TopicName(t.name),
                    partitions=tuple(
                        v7.OffsetFetchResponsePartition(
                            partition_index=i32(p),
                            committed_offset=i64(-1),
                            committed_leader_epoch=i32(-1),
                            metadata="",
                            error_code=denied,
                        )
                        for p in t.partition_indexes
                    ),
                )
                for t in request.optional("topics") or ()
            ),
        )
    if request.version < 8:  # one group, topics by name
        v7 = offset_fetch_v7_res
        response = v7.OffsetFetchResponse(
            throttle_time=NO_THROTTLE,
            error_code=E.none,
            topics=tuple(
                v7.OffsetFetchResponseTopic(
                    name=TopicName(t.name), partitions=offsets(v7.OffsetFetchResponsePartition, t, unknown)
                )
                for t, _, unknown in fetch(request.optional("group_id"), request.optional("topics"))
            ),
        )
    elif not by_id:  # groups, topics by name
        v9 = offset_fetch_v9_res
        response = v9.OffsetFetchResponse(
            throttle_time=NO_THROTTLE,
            groups=tuple(
                v9.OffsetFetchResponseGroup(
                    group_id=g.group_id,
                    error_code=E.none,
                    topics=tuple(
                        v9.OffsetFetchResponseTopics(
                            name=TopicName(t.name),
                            partitions=offsets(v9.OffsetFetchResponsePartitions, t, unknown),
                        )
                        for t, _, unknown in fetch(g.group_id, g.topics)
                    ),
                )
                if checks.group(AclOperation.DESCRIBE, g.group_id)
                else v9.OffsetFetchResponseGroup(group_id=g.group_id, error_code=denied, topics=())
                for g in request.body.groups
            ),
        )
    else:  # groups, topics by id
        v10 = offset_fetch_res
        response = v10.OffsetFetchResponse(
            throttle_time=NO_THROTTLE,
            groups=tuple(
                v10.OffsetFetchResponseGroup(
                    group_id=g.group_id,
                    error_code=E.none,
                    topics=tuple(
                        v10.OffsetFetchResponseTopics(
                            topic_id=topic_id,
                            partitions=offsets(v10.OffsetFetchResponsePartitions, t, unknown),
                        )
                        for t, topic_id, unknown in fetch(g.group_id, g.topics)
                    ),
                )
                if checks.group(AclOperation.DESCRIBE, g.group_id)
                else v10.OffsetFetchResponseGroup(group_id=g.group_id, error_code=denied, topics=())
                for g in request.body.groups
            ),
        )
    return await gated(ctx, response)
