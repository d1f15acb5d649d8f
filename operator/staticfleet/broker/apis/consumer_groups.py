"""Kafka 4's consumer group protocol (KIP-848): ConsumerGroupHeartbeat and ConsumerGroupDescribe."""

from __future__ import annotations

import datetime
import uuid

from kio.schema.consumer_group_describe.v1 import request as describe_req
from kio.schema.consumer_group_describe.v1 import response as describe_res
from kio.schema.consumer_group_heartbeat.v1 import request as heartbeat_req
from kio.schema.consumer_group_heartbeat.v1 import response as heartbeat_res
from kio.schema.types import GroupId, TopicName
from kio.static.primitive import i8, i32, i32Timedelta
from kio.static.protocol import ResponsePayload

from staticfleet.broker.apis.common import INT32_MIN, E, gated, ms
from staticfleet.broker.registry import NO_THROTTLE, ApiError, BrokerContext, Request, Requires, kafka_api
from staticfleet.broker.security.acl import AclOperation, ResourceType
from staticfleet.broker.topiclog import TopicLog
from staticfleet.coordinator import consumer_heartbeat as ch

HeartbeatRequest = heartbeat_req.ConsumerGroupHeartbeatRequest
DescribeRequest = describe_req.ConsumerGroupDescribeRequest
_CONSUMER_MEMBER: i8 = i8(1)
"""ConsumerGroupDescribe's member type of a member that speaks the consumer protocol."""
_UNAUTHORIZED_TOPICS = "The group has described topic(s) that the client is not authorized to describe."


class TopicLogCatalog:
    """The broker's topics as the group coordinator sees them: ids, names, partition counts."""

    def __init__(self, topics: TopicLog) -> None:
        self._topics = topics

    def topic_id(self, name: str) -> uuid.UUID | None:
        if not self._topics.has_topic(name):
            return None
        return self._topics.describe_topic(name).topic_id

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        return self._topics.topic_name_for_id(topic_id)

    def topic_names(self) -> list[str]:
        return self._topics.topic_names()

    def partition_count(self, topic_id: uuid.UUID) -> int:
        name = self._topics.topic_name_for_id(topic_id)
        return -1 if name is None else self._topics.partition_count(name)


def _heartbeat_error(request: Request[HeartbeatRequest], error: ApiError) -> ResponsePayload:
    # Kafka's getErrorResponse sets the code alone.
    return heartbeat_res.ConsumerGroupHeartbeatResponse(
        throttle_time=NO_THROTTLE,
        error_code=error.code,
        member_epoch=i32(0),
        heartbeat_interval=NO_THROTTLE,
    )


def _subscribed_topics(ctx: BrokerContext, request: Request[HeartbeatRequest]) -> tuple[str, ...]:
    return tuple(request.body.subscribed_topic_names or ())


@kafka_api(
    "consumer_group_heartbeat",
    (0, 1),
    HeartbeatRequest,
    error=_heartbeat_error,
    acl=(
        Requires.request(AclOperation.READ, ResourceType.GROUP, lambda r: r.body.group_id),
        Requires.each(AclOperation.DESCRIBE, ResourceType.TOPIC, _subscribed_topics),
    ),
)
async def handle_consumer_group_heartbeat(
    ctx: BrokerContext, request: Request[HeartbeatRequest]
) -> ResponsePayload:
    body = request.body
    # Subscribing to a topic the caller may not describe would tell it the topic exists.
    names = _subscribed_topics(ctx, request)
    if any(not request.allows(AclOperation.DESCRIBE, ResourceType.TOPIC, name) for name in set(names)):
        return _heartbeat_error(request, ApiError(E.topic_authorization_failed))
    heartbeat = ch.ConsumerHeartbeatRequest(
        group_id=body.group_id,
        member_id=body.member_id,
        member_epoch=int(body.member_epoch),
        instance_id=body.instance_id,
        rack_id=body.rack_id,
        rebalance_timeout_ms=ms(body.rebalance_timeout),
        subscribed_topic_names=None
        if body.subscribed_topic_names is None
        else tuple(body.subscribed_topic_names),
        subscribed_topic_regex=body.subscribed_topic_regex,
        server_assignor=body.server_assignor,
        describable=lambda name: request.allows(AclOperation.DESCRIBE, ResourceType.TOPIC, name),
        owned=None
        if body.topic_partitions is None
        else {
            t.topic_id or uuid.UUID(int=0): tuple(int(p) for p in t.partitions) for t in body.topic_partitions
        },
    )
    r = ctx.host.call(lambda c: c.consumer_group_heartbeat(request.context(), heartbeat))
    response = heartbeat_res.ConsumerGroupHeartbeatResponse(
        throttle_time=NO_THROTTLE,
        error_code=r.error,
        error_message=r.message,
        member_id=r.member_id,
        member_epoch=i32(r.member_epoch),
        heartbeat_interval=_interval(r.heartbeat_interval_ms),
        assignment=None
        if r.assignment is None
        else heartbeat_res.Assignment(
            topic_partitions=tuple(
                heartbeat_res.TopicPartitions(topic_id=t, partitions=tuple(i32(p) for p in ps))
                for t, ps in r.assignment.items()
            )
        ),
    )
    return await gated(ctx, response)


def _interval(milliseconds: int) -> i32Timedelta:
    return i32Timedelta.parse(datetime.timedelta(milliseconds=milliseconds))


def _describe_error(request: Request[DescribeRequest], error: ApiError) -> ResponsePayload:
    return describe_res.ConsumerGroupDescribeResponse(
        throttle_time=NO_THROTTLE,
        groups=tuple(_group_error(g, error.code, error.message) for g in request.body.group_ids),
    )


def _group_error(group_id: str, code: E, message: str | None = None) -> describe_res.DescribedGroup:
    return describe_res.DescribedGroup(
        error_code=code,
        error_message=message,
        group_id=GroupId(group_id),
        group_state="",
        group_epoch=i32(0),
        assignment_epoch=i32(0),
        assignor_name="",
        members=(),
    )


def _topics(topics: tuple[ch.DescribedTopic, ...]) -> describe_res.Assignment:
    return describe_res.Assignment(
        topic_partitions=tuple(
            describe_res.TopicPartitions(
                topic_id=t.topic_id,
                topic_name=TopicName(t.topic_name),
                partitions=tuple(i32(p) for p in t.partitions),
            )
            for t in topics
        )
    )


def _described(
    group: ch.DescribedConsumerGroup, operations: i32, hidden_topics: bool
) -> describe_res.DescribedGroup:
    if group.error:
        return _group_error(group.group_id, group.error, group.message)
    if hidden_topics:
        return _group_error(group.group_id, E.topic_authorization_failed, _UNAUTHORIZED_TOPICS)
    return describe_res.DescribedGroup(
        error_code=E.none,
        group_id=GroupId(group.group_id),
        group_state=group.state,
        group_epoch=i32(group.group_epoch),
        assignment_epoch=i32(group.assignment_epoch),
        assignor_name=group.assignor_name,
        members=tuple(
            describe_res.Member(
                member_id=x.member_id,
                instance_id=x.instance_id,
                rack_id=x.rack_id,
                member_epoch=i32(x.member_epoch),
                client_id=x.client_id,
                client_host=x.client_host,
                subscribed_topic_names=tuple(TopicName(n) for n in x.subscribed_topic_names),
                subscribed_topic_regex=x.subscribed_topic_regex,
                assignment=_topics(x.assignment),
                target_assignment=_topics(x.target_assignment),
                member_type=_CONSUMER_MEMBER,
            )
            for x in group.members
        ),
        authorized_operations=operations,
    )


@kafka_api(
    "consumer_group_describe",
    (0, 1),
    DescribeRequest,
    error=_describe_error,
    acl=(
        Requires.each(AclOperation.DESCRIBE, ResourceType.GROUP, lambda ctx, r: r.body.group_ids),
        Requires.each(AclOperation.DESCRIBE, ResourceType.TOPIC),
    ),
)
async def handle_consumer_group_describe(
    ctx: BrokerContext, request: Request[DescribeRequest]
) -> ResponsePayload:
    body = request.body
    allowed = [g for g in body.group_ids if request.allows(AclOperation.DESCRIBE, ResourceType.GROUP, g)]
    refused = [g for g in body.group_ids if g not in allowed]
    described = ctx.host.coordinator.describe_consumer_groups(allowed) if allowed else []

    def hides_topics(group: ch.DescribedConsumerGroup) -> bool:
        if not request.grants.enabled:
            return False
        names = {t.topic_name for m in group.members for t in (*m.assignment, *m.target_assignment)}
        return any(not request.allows(AclOperation.DESCRIBE, ResourceType.TOPIC, n) for n in names)

    def operations(group_id: str) -> i32:
        if not body.include_authorized_operations:
            return INT32_MIN
        return i32(request.grants.authorized_operations(ResourceType.GROUP, group_id))

    return describe_res.ConsumerGroupDescribeResponse(
        throttle_time=NO_THROTTLE,
        # Groups the caller may not describe come first, as Kafka lists them.
        groups=tuple(_group_error(g, E.group_authorization_failed) for g in refused)
        + tuple(_described(g, operations(g.group_id), hides_topics(g)) for g in described),
    )
