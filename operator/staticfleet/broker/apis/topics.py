"""CreateTopics, DeleteTopics, CreatePartitions and DeleteRecords on the topic log."""

from __future__ import annotations

import uuid

from kio.schema.create_partitions.v3 import request as create_partitions_req
from kio.schema.create_partitions.v3 import response as create_partitions_res
from kio.schema.create_topics.v7 import request as create_topics_req
from kio.schema.create_topics.v7 import response as create_topics_res
from kio.schema.delete_records.v2 import request as delete_records_req
from kio.schema.delete_records.v2 import response as delete_records_res
from kio.schema.delete_topics.v5 import request as delete_topics_v5_req
from kio.schema.delete_topics.v6 import request as delete_topics_req
from kio.schema.delete_topics.v6 import response as delete_topics_res
from kio.schema.errors import ErrorCode
from kio.schema.types import TopicName
from kio.static.primitive import i16, i32, i64
from kio.static.protocol import ResponsePayload

from staticfleet.broker.apis.common import NULL_TOPIC_ID, SOURCE_DEFAULT, SOURCE_DYNAMIC_TOPIC, E
from staticfleet.broker.registry import NO_THROTTLE, ApiError, BrokerContext, Request, Requires, kafka_api
from staticfleet.broker.security.acl import AclOperation, ResourceType
from staticfleet.broker.topiclog_errors import TopicLogError

CreateTopicsRequest = create_topics_req.CreateTopicsRequest
DeleteTopicsRequest = delete_topics_req.DeleteTopicsRequest
CreatePartitionsRequest = create_partitions_req.CreatePartitionsRequest
DeleteRecordsRequest = delete_records_req.DeleteRecordsRequest


class _AssignmentError(TopicLogError):
    error_code = E.invalid_replica_assignment


def _invalid_assignment(ctx: BrokerContext) -> TopicLogError:
    return _AssignmentError(f"replicas can only be placed on this broker (node {ctx.node_id})")


# === CreateTopics =========================================================================================


def _create_topics_error(request: Request[CreateTopicsRequest], error: ApiError) -> ResponsePayload:
    return create_topics_res.CreateTopicsResponse(
        throttle_time=NO_THROTTLE,
        topics=tuple(
            create_topics_res.CreatableTopicResult(
                name=t.name, topic_id=None, error_code=error.code, error_message=error.message, configs=()
            )
            for t in request.body.topics
        ),
    )


@kafka_api(
    "create_topics",
    (2, 7),
    CreateTopicsRequest,
    error=_create_topics_error,
    acl=(
        # CREATE on the topic or on the cluster (KIP-277); a denied topic is answered in its place.
        Requires.each(
            AclOperation.CREATE,
            ResourceType.TOPIC,
            lambda ctx, r: [t.name for t in r.body.topics],
            cluster_grants=True,
        ),
        # Without DESCRIBE_CONFIGS on a created topic its settings are withheld (topic_config_error_code).
        Requires.each(
            AclOperation.DESCRIBE_CONFIGS, ResourceType.TOPIC, lambda ctx, r: [t.name for t in r.body.topics]
        ),
    ),
)
async def handle_create_topics(
    ctx: BrokerContext, request: Request[CreateTopicsRequest]
) -> create_topics_res.CreateTopicsResponse:
    res = create_topics_res
    validate_only = request.body.validate_only
    out = []
    for topic in request.body.topics:
        configs = {c.name: c.value for c in topic.configs}
        if not request.allows(AclOperation.CREATE, ResourceType.TOPIC, topic.name):
            out.append(
                res.CreatableTopicResult(
                    name=topic.name,
                    topic_id=None,
                    error_code=E.topic_authorization_failed,
                    error_message="Authorization failed.",
                    num_partitions=i32(-1),
                    replication_factor=i16(-1),
                    configs=(),
                )
            )
            continue
        try:
            if topic.assignments:
                if any(set(a.broker_ids) != {ctx.node_id} for a in topic.assignments):
                    raise _invalid_assignment(ctx)
                partitions, replication = len(topic.assignments), 1
            else:
                partitions, replication = topic.num_partitions, topic.replication_factor
            description = await ctx.topics.create_topic_async(
                topic.name, partitions, replication, configs, validate_only=validate_only
            )
            effective = ctx.topics.topic_configs(topic.name) if not validate_only else {}
            shown = request.allows(AclOperation.DESCRIBE_CONFIGS, ResourceType.TOPIC, topic.name)
            if not shown:
                effective = {}
            result = res.CreatableTopicResult(
                name=topic.name,
                topic_id=description.topic_id,
                error_code=E.none,
                error_message=None,
                topic_config_error_code=i16(0 if shown else int(E.topic_authorization_failed)),
                num_partitions=i32(description.partitions if shown else -1),
                replication_factor=i16(1 if shown else -1),
                configs=tuple(
                    res.CreatableTopicConfigs(
                        name=k,
                        value=v,
                        read_only=False,
                        config_source=SOURCE_DYNAMIC_TOPIC if k in configs else SOURCE_DEFAULT,
                        is_sensitive=False,
                    )
                    for k, v in sorted(effective.items())
                ),
            )
        except TopicLogError as exc:
            result = res.CreatableTopicResult(
                name=topic.name,
                topic_id=NULL_TOPIC_ID,
                error_code=exc.error_code,
                error_message=str(exc),
                num_partitions=i32(-1),
                replication_factor=i16(-1),
                configs=(),
            )
        out.append(result)
    return res.CreateTopicsResponse(throttle_time=NO_THROTTLE, topics=tuple(out))


# === DeleteTopics =========================================================================================


def _asked_deletions(request: Request[DeleteTopicsRequest]) -> list[tuple[str | None, uuid.UUID | None]]:
    """(name, id) of each topic to delete: by name before v6, by name or id from v6."""
    if request.version >= 6:
        return [(t.name, t.topic_id) for t in request.body.topics]
    return [(name, None) for name in request.shaped(delete_topics_v5_req.DeleteTopicsRequest).topic_names]


def _deletions(
    ctx: BrokerContext, request: Request[DeleteTopicsRequest]
) -> list[tuple[str | None, uuid.UUID | None]]:
    """(name, id) of each topic to delete, a topic given by id named (None: an unknown id)."""
    return [
        (ctx.topics.topic_name_for_id(topic_id) if name is None and topic_id is not None else name, topic_id)
        for name, topic_id in _asked_deletions(request)
    ]


def _delete_topics_error(request: Request[DeleteTopicsRequest], error: ApiError) -> ResponsePayload:
    return delete_topics_res.DeleteTopicsResponse(
        throttle_time=NO_THROTTLE,
        responses=tuple(
            delete_topics_res.DeletableTopicResult(
                name=None if name is None else TopicName(name), topic_id=topic_id, error_code=error.code
            )
            for name, topic_id in _asked_deletions(request)
        ),
    )


@kafka_api(
    "delete_topics",
    (1, 6),
    DeleteTopicsRequest,
    error=_delete_topics_error,
    # DELETE on the topic or on the cluster; a denied topic is answered in its place.
    acl=(
        Requires.each(
            AclOperation.DELETE,
            ResourceType.TOPIC,
            lambda ctx, r: [name for name, _ in _deletions(ctx, r) if name is not None],
            cluster_grants=True,
        ),
    ),
)
async def handle_delete_topics(
    ctx: BrokerContext, request: Request[DeleteTopicsRequest]
) -> delete_topics_res.DeleteTopicsResponse:
    responses = []
    for name, topic_id in _asked_deletions(request):
        if name is None and topic_id is not None:  # named now: an earlier deletion may have removed it
            name = ctx.topics.topic_name_for_id(topic_id)
        error, message = E.none, None
        if name is None:
            error, message = E.unknown_topic_id, "Topic id not found"
        elif not request.allows(AclOperation.DELETE, ResourceType.TOPIC, name):
            error, message = E.topic_authorization_failed, "Topic authorization failed."
        else:
            try:
                if ctx.topics.has_topic(name):
                    topic_id = ctx.topics.describe_topic(name).topic_id
                ctx.topics.delete_topic(name)
            except TopicLogError as exc:
                error, message = exc.error_code, str(exc)
        responses.append(
            delete_topics_res.DeletableTopicResult(
                name=None if name is None else TopicName(name),
                topic_id=topic_id,
                error_code=error,
                error_message=message,
            )
        )
    return delete_topics_res.DeleteTopicsResponse(throttle_time=NO_THROTTLE, responses=tuple(responses))


# === CreatePartitions =====================================================================================


def _create_partitions_error(request: Request[CreatePartitionsRequest], error: ApiError) -> ResponsePayload:
    return create_partitions_res.CreatePartitionsResponse(
        throttle_time=NO_THROTTLE,
        results=tuple(
            create_partitions_res.CreatePartitionsTopicResult(
                name=t.name, error_code=error.code, error_message=error.message
            )
            for t in request.body.topics
        ),
    )


@kafka_api(
    "create_partitions",
    (0, 3),
    CreatePartitionsRequest,
    error=_create_partitions_error,
    acl=(
        Requires.each(AclOperation.ALTER, ResourceType.TOPIC, lambda ctx, r: [t.name for t in r.body.topics]),
    ),
)
async def handle_create_partitions(
    ctx: BrokerContext, request: Request[CreatePartitionsRequest]
) -> create_partitions_res.CreatePartitionsResponse:
    results = []
    for topic in request.body.topics:
        error, message = E.none, None
        if not request.allows(AclOperation.ALTER, ResourceType.TOPIC, topic.name):
            results.append(
                create_partitions_res.CreatePartitionsTopicResult(
                    name=topic.name, error_code=E.topic_authorization_failed, error_message=None
                )
            )
            continue
        try:
            if topic.assignments and any(set(a.broker_ids) != {ctx.node_id} for a in topic.assignments):
                raise _invalid_assignment(ctx)
            ctx.topics.create_partitions(topic.name, topic.count, validate_only=request.body.validate_only)
        except TopicLogError as exc:
            error, message = exc.error_code, str(exc)
        results.append(
            create_partitions_res.CreatePartitionsTopicResult(
                name=topic.name, error_code=error, error_message=message
            )
        )
    return create_partitions_res.CreatePartitionsResponse(throttle_time=NO_THROTTLE, results=tuple(results))


# === DeleteRecords ========================================================================================


def _deleted(
    partition: int, error: ErrorCode, low_watermark: int = -1
) -> delete_records_res.DeleteRecordsPartitionResult:
    return delete_records_res.DeleteRecordsPartitionResult(
        partition_index=i32(partition), low_watermark=i64(low_watermark), error_code=error
    )


def _delete_records_error(request: Request[DeleteRecordsRequest], error: ApiError) -> ResponsePayload:
    return delete_records_res.DeleteRecordsResponse(
        throttle_time=NO_THROTTLE,
        topics=tuple(
            delete_records_res.DeleteRecordsTopicResult(
                name=t.name, partitions=tuple(_deleted(p.partition_index, error.code) for p in t.partitions)
            )
            for t in request.body.topics
        ),
    )


@kafka_api(
    "delete_records",
    (0, 2),
    DeleteRecordsRequest,
    error=_delete_records_error,
    # DELETE on the topic; a denied topic's partitions are answered in their place.
    acl=(
        Requires.each(
            AclOperation.DELETE, ResourceType.TOPIC, lambda ctx, r: [t.name for t in r.body.topics]
        ),
    ),
)
async def handle_delete_records(
    ctx: BrokerContext, request: Request[DeleteRecordsRequest]
) -> delete_records_res.DeleteRecordsResponse:
    """Each partition's log start offset moves up to the offset asked (-1: the high watermark); the answer
    is the new log start offset (the low watermark), OFFSET_OUT_OF_RANGE beyond the high watermark."""

    def one(
        topic: str, p: delete_records_req.DeleteRecordsPartition
    ) -> delete_records_res.DeleteRecordsPartitionResult:
        if not request.allows(AclOperation.DELETE, ResourceType.TOPIC, topic):
            return _deleted(p.partition_index, E.topic_authorization_failed)
        try:
            start = ctx.topics.delete_records(topic, p.partition_index, p.offset)
        except TopicLogError as exc:
            return _deleted(p.partition_index, exc.error_code)
        return _deleted(p.partition_index, E.none, start)

    return delete_records_res.DeleteRecordsResponse(
        throttle_time=NO_THROTTLE,
        topics=tuple(
            delete_records_res.DeleteRecordsTopicResult(
                name=t.name, partitions=tuple(one(t.name, p) for p in t.partitions)
            )
            for t in request.body.topics
        ),
    )
