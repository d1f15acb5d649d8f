"""ApiVersions, Metadata, FindCoordinator and DescribeCluster: what a client asks before anything else."""

from __future__ import annotations

import re
import uuid
from typing import Final

from kio.schema.api_versions.v4 import request as api_versions_req
from kio.schema.api_versions.v4 import response as api_versions_res
from kio.schema.describe_cluster.v1 import request as describe_cluster_req
from kio.schema.describe_cluster.v1 import response as describe_cluster_res
from kio.schema.errors import ErrorCode
from kio.schema.find_coordinator.v3 import request as find_coordinator_v3_req
from kio.schema.find_coordinator.v3 import response as find_coordinator_v3_res
from kio.schema.find_coordinator.v6 import request as find_coordinator_req
from kio.schema.find_coordinator.v6 import response as find_coordinator_res
from kio.schema.metadata.v12 import request as metadata_req
from kio.schema.metadata.v12 import response as metadata_res
from kio.schema.types import BrokerId, TopicName
from kio.static.primitive import i8, i32
from kio.static.protocol import ResponsePayload

from staticfleet.broker.apis.common import INT32_MIN, NULL_TOPIC_ID, E
from staticfleet.broker.registry import (
    NO_THROTTLE,
    ApiError,
    BrokerContext,
    Request,
    Requires,
    api_versions_response,
    kafka_api,
    kafka_message,
)
from staticfleet.broker.security.acl import AclOperation, ResourceType
from staticfleet.broker.security.authenticator import LoginStep
from staticfleet.broker.topiclog_errors import TopicAlreadyExistsError, TopicLogError

_TOPIC_OPERATIONS = i32(sum(1 << op for op in (2, 3, 4, 5, 6, 7, 8, 9)))
_CLUSTER_OPERATIONS = i32(sum(1 << op for op in (4, 7, 8, 9, 10, 11, 12)))
GROUP_KEY_TYPE: Final = i8(0)  # FindCoordinator's key type of a consumer group

_CLIENT_SOFTWARE = re.compile(r"^[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?$")

ApiVersionsRequest = api_versions_req.ApiVersionsRequest
MetadataRequest = metadata_req.MetadataRequest
FindCoordinatorRequest = find_coordinator_req.FindCoordinatorRequest
DescribeClusterRequest = describe_cluster_req.DescribeClusterRequest


# === ApiVersions ==========================================================================================


def _api_versions_error(request: Request[ApiVersionsRequest], error: ApiError) -> ResponsePayload:
    # KIP-511: an UNSUPPORTED_VERSION answer lists the versions of ApiVersions itself.
    listed = ("api_versions",) if error.code == E.unsupported_version else ()
    return api_versions_response(error.code, names=listed)


@kafka_api("api_versions", (0, 4), ApiVersionsRequest, error=_api_versions_error, login=LoginStep.VERSIONS)
async def handle_api_versions(
    ctx: BrokerContext, request: Request[ApiVersionsRequest]
) -> api_versions_res.ApiVersionsResponse:
    """The same answer before and after a SASL login; a good one moves the login on to the handshake."""
    body = request.body
    named = _CLIENT_SOFTWARE.match(body.client_software_name) and _CLIENT_SOFTWARE.match(
        body.client_software_version
    )
    if request.version >= 3 and not named:
        answer = api_versions_response(E.invalid_request, names=())
    else:
        answer = api_versions_response()
    if request.peer.login is not None:
        request.peer.login.api_versions_answered(ok=answer.error_code == E.none)
    return answer


# === Metadata =============================================================================================


def _partition_metadata(ctx: BrokerContext, count: int) -> tuple[metadata_res.MetadataResponsePartition, ...]:
    node = BrokerId(ctx.node_id)
    return tuple(
        metadata_res.MetadataResponsePartition(
            error_code=E.none,
            partition_index=i32(p),
            leader_id=node,
            leader_epoch=i32(0),
            replica_nodes=(node,),
            isr_nodes=(node,),
            offline_replicas=(),
        )
        for p in range(count)
    )


def _missing_topic(
    error: ErrorCode, name: str | None, topic_id: uuid.UUID | None
) -> metadata_res.MetadataResponseTopic:
    return metadata_res.MetadataResponseTopic(
        error_code=error,
        name=None if name is None else TopicName(name),
        topic_id=topic_id,
        partitions=(),
    )


def _lists_all(request: Request[MetadataRequest]) -> bool:
    """Null topics ask for every topic; so does an empty list before v1."""
    return request.body.topics is None or (request.version < 1 and not request.body.topics)


def _described_topics(ctx: BrokerContext, request: Request[MetadataRequest]) -> list[str]:
    """The topics a Metadata request names (every topic when it lists all; ids are not checked)."""
    if _lists_all(request):
        return ctx.topics.topic_names()
    return [t.name for t in request.body.topics or () if t.name is not None]


def _metadata_error(request: Request[MetadataRequest], error: ApiError) -> ResponsePayload:
    return metadata_res.MetadataResponse(
        throttle_time=NO_THROTTLE,
        brokers=(),
        cluster_id=None,
        controller_id=BrokerId(-1),
        topics=tuple(
            metadata_res.MetadataResponseTopic(
                error_code=error.code,
                name=TopicName(t.name or ""),  # the answer has no null name
                topic_id=t.topic_id,
                is_internal=False,
                partitions=(),
            )
            for t in request.body.topics or ()
        ),
    )


@kafka_api(
    "metadata",
    (0, 12),
    MetadataRequest,
    error=_metadata_error,
    acl=(
        # Named topics the caller may not describe are refused (whether or not they exist); when it
        # asks for all, they are left out.
        Requires.each(AclOperation.DESCRIBE, ResourceType.TOPIC, _described_topics),
        # Creating a missing topic needs CREATE on it or on the cluster.
        Requires.each(AclOperation.CREATE, ResourceType.TOPIC, cluster_grants=True),
    ),
)
async def handle_metadata(
    ctx: BrokerContext, request: Request[MetadataRequest]
) -> metadata_res.MetadataResponse:
    body = request.body
    auto_create = body.allow_auto_topic_creation and ctx.auto_create_topics
    listed_all = _lists_all(request)
    names: list[tuple[str | None, uuid.UUID | None]]
    if listed_all:
        names = [(name, None) for name in ctx.topics.topic_names()]
    else:
        names = [(t.name, t.topic_id) for t in body.topics or ()]
    topics = []
    create_denied, describe_denied = [], []
    for name, topic_id in names:
        if name is not None and not request.allows(AclOperation.DESCRIBE, ResourceType.TOPIC, name):
            if not listed_all:
                describe_denied.append(_missing_topic(E.topic_authorization_failed, name, NULL_TOPIC_ID))
            continue
        if (
            name is not None
            and auto_create
            and not ctx.topics.has_topic(name)
            and not request.allows(AclOperation.CREATE, ResourceType.TOPIC, name)
        ):
            create_denied.append(_missing_topic(E.topic_authorization_failed, name, NULL_TOPIC_ID))
            continue
        if name is None and topic_id is not None:
            name = ctx.topics.topic_name_for_id(topic_id)
            if name is None:
                topics.append(_missing_topic(E.unknown_topic_id, None, topic_id))
                continue
        assert name is not None
        error = E.none
        if not ctx.topics.has_topic(name):
            if auto_create:
                try:
                    await ctx.topics.create_topic_async(name)
                except TopicAlreadyExistsError:
                    pass  # another request is creating it
                except TopicLogError as exc:
                    error = exc.error_code
            else:
                error = E.unknown_topic_or_partition
        if error or not ctx.topics.has_topic(name):
            topics.append(_missing_topic(error or E.unknown_topic_or_partition, name, NULL_TOPIC_ID))
            continue
        description = ctx.topics.describe_topic(name)
        topics.append(
            metadata_res.MetadataResponseTopic(
                error_code=E.none,
                name=TopicName(name),
                topic_id=description.topic_id,
                is_internal=False,
                partitions=_partition_metadata(ctx, description.partitions),
                topic_authorized_operations=_TOPIC_OPERATIONS
                if body.include_topic_authorized_operations
                else INT32_MIN,
            )
        )
    return metadata_res.MetadataResponse(
        throttle_time=NO_THROTTLE,
        brokers=(
            metadata_res.MetadataResponseBroker(
                node_id=BrokerId(ctx.node_id),
                host=ctx.advertised(request.listener)[0],
                port=i32(ctx.advertised(request.listener)[1]),
            ),
        ),
        cluster_id=ctx.cluster_id,
        controller_id=BrokerId(ctx.node_id),
        topics=tuple(topics) + tuple(create_denied) + tuple(describe_denied),
    )


# === FindCoordinator ======================================================================================


_NOT_SERVED: Final = {
    1: "this broker runs no transaction coordinator: transactions (exactly-once) are not supported",
    2: "this broker runs no share coordinator: share groups are not supported",
}


def _is_group(request: Request[FindCoordinatorRequest]) -> bool:
    # Only group coordination lives here: transactions and share groups are not served.
    return request.body.key_type == GROUP_KEY_TYPE


def _find_coordinator_error(request: Request[FindCoordinatorRequest], error: ApiError) -> ResponsePayload:
    # Kafka's prepareOldResponse / prepareErrorResponse: no node, and the error's own message.
    message = kafka_message(error.code)
    if request.version < 4:
        return find_coordinator_v3_res.FindCoordinatorResponse(
            throttle_time=NO_THROTTLE,
            error_code=error.code,
            error_message=message,
            node_id=BrokerId(-1),
            host="",
            port=i32(-1),
        )
    return find_coordinator_res.FindCoordinatorResponse(
        throttle_time=NO_THROTTLE,
        coordinators=tuple(
            find_coordinator_res.Coordinator(
                key=key,
                node_id=BrokerId(-1),
                host="",
                port=i32(-1),
                error_code=error.code,
                error_message=message,
            )
            for key in request.body.coordinator_keys
        ),
    )


@kafka_api(
    "find_coordinator",
    (0, 6),
    FindCoordinatorRequest,
    error=_find_coordinator_error,
    acl=(
        # Before v4 one key, refused as a whole; from v4 each key is answered in its place.
        Requires.request(
            AclOperation.DESCRIBE,
            ResourceType.GROUP,
            lambda r: r.shaped(find_coordinator_v3_req.FindCoordinatorRequest).key,
            applies=lambda r: r.version < 4 and _is_group(r),
        ),
        Requires.each(
            AclOperation.DESCRIBE,
            ResourceType.GROUP,
            lambda ctx, r: r.body.coordinator_keys,
            applies=lambda r: r.version >= 4 and _is_group(r),
        ),
    ),
)
async def handle_find_coordinator(
    ctx: BrokerContext, request: Request[FindCoordinatorRequest]
) -> ResponsePayload:
    is_group = _is_group(request)
    # A coordinator type this broker does not run is INVALID_REQUEST, as Kafka answers for share groups
    # without a share coordinator: not retriable, so a transactional producer fails at once, with the
    # message, rather than looking for a transaction coordinator until max.block.ms and again.
    error = E.none if is_group else E.invalid_request
    # Kafka says "NONE" on success before v4 and "" from v4 on.
    message = (
        _NOT_SERVED.get(int(request.body.key_type), "unknown coordinator type")
        if not is_group
        else ("NONE" if request.version < 4 else "")
    )
    node = BrokerId(ctx.node_id if is_group else -1)
    advertised_host, advertised_port = ctx.advertised(request.listener)
    host = advertised_host if is_group else ""
    port = i32(advertised_port if is_group else -1)
    if request.version >= 4:
        return find_coordinator_res.FindCoordinatorResponse(
            throttle_time=NO_THROTTLE,
            coordinators=tuple(
                find_coordinator_res.Coordinator(
                    key=key, node_id=node, host=host, port=port, error_code=error, error_message=message
                )
                if not is_group or request.allows(AclOperation.DESCRIBE, ResourceType.GROUP, key)
                else find_coordinator_res.Coordinator(
                    key=key,
                    node_id=BrokerId(-1),
                    host="",
                    port=i32(-1),
                    error_code=E.group_authorization_failed,
                    error_message="",
                )
                for key in request.body.coordinator_keys
            ),
        )
    return find_coordinator_v3_res.FindCoordinatorResponse(
        throttle_time=NO_THROTTLE, error_code=error, error_message=message, node_id=node, host=host, port=port
    )


# === DescribeCluster ======================================================================================


def _describe_cluster_error(request: Request[DescribeClusterRequest], error: ApiError) -> ResponsePayload:
    return describe_cluster_res.DescribeClusterResponse(
        throttle_time=NO_THROTTLE,
        error_code=error.code,
        error_message=error.message,
        cluster_id="",
        controller_id=BrokerId(-1),
        brokers=(),
        cluster_authorized_operations=INT32_MIN,
    )


@kafka_api("describe_cluster", (0, 1), DescribeClusterRequest, error=_describe_cluster_error)
async def handle_describe_cluster(
    ctx: BrokerContext, request: Request[DescribeClusterRequest]
) -> describe_cluster_res.DescribeClusterResponse:
    include = bool(request.body.include_cluster_authorized_operations)
    return describe_cluster_res.DescribeClusterResponse(
        throttle_time=NO_THROTTLE,
        error_code=E.none,
        error_message=None,
        endpoint_type=i8(1),
        cluster_id=ctx.cluster_id,
        controller_id=BrokerId(ctx.node_id),
        brokers=(
            describe_cluster_res.DescribeClusterBroker(
                broker_id=BrokerId(ctx.node_id),
                host=ctx.advertised(request.listener)[0],
                port=i32(ctx.advertised(request.listener)[1]),
            ),
        ),
        cluster_authorized_operations=_CLUSTER_OPERATIONS if include else INT32_MIN,
    )
