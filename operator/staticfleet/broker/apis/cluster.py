"""ApiVersions, Metadata, FindCoordinator and DescribeCluster: what a client asks before anything else."""

from __future__ import annotations

import re
import uuid
from typing import Any, Final

from kio.schema.api_versions.v4 import request as api_versions_req
from kio.schema.api_versions.v4 import response as api_versions_res
from kio.schema.describe_cluster.v1 import request as describe_cluster_req
from kio.schema.describe_cluster.v1 import response as describe_cluster_res
from kio.schema.errors import ErrorCode
from kio.schema.find_coordinator.v3 import response as find_coordinator_v3_res
from kio.schema.find_coordinator.v6 import request as find_coordinator_req
from kio.schema.find_coordinator.v6 import response as find_coordinator_res
from kio.schema.metadata.v12 import request as metadata_req
from kio.schema.metadata.v12 import response as metadata_res
from kio.schema.types import BrokerId, TopicName
from kio.static.primitive import i8, i32
from kio.static.protocol import ResponsePayload

from staticfleet.broker.apis.common import INT32_MIN, NULL_TOPIC_ID, E
from staticfleet.broker.apis.security import access
from staticfleet.broker.codec import for_version
from staticfleet.broker.registry import (
    NO_THROTTLE,
    BrokerContext,
    Request,
    UnsupportedVersion,
    api_versions_response,
    kafka_api,
)
from staticfleet.broker.security.acl import AclOperation
from staticfleet.broker.topiclog_errors import TopicAlreadyExistsError, TopicLogError

_TOPIC_OPERATIONS = i32(sum(1 << op for op in (2, 3, 4, 5, 6, 7, 8, 9)))
_CLUSTER_OPERATIONS = i32(sum(1 << op for op in (4, 7, 8, 9, 10, 11, 12)))
GROUP_KEY_TYPE: Final = i8(0)  # FindCoordinator's key type of a consumer group

_CLIENT_SOFTWARE = re.compile(r"^[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?$")


def unsupported_version_reply(exc: UnsupportedVersion) -> ResponsePayload | None:
    """KIP-511: an ApiVersions the broker cannot parse is answered as v0 with the list; any other
    unsupported request closes the connection (None)."""
    if not exc.is_for("api_versions"):
        return None
    # A client asking with a version too new learns only which ApiVersions versions exist.
    return for_version(api_versions_response(E.unsupported_version, names=("api_versions",)), 0)


@kafka_api("api_versions", (0, 4))
async def handle_api_versions(
    ctx: BrokerContext, request: Request[api_versions_req.ApiVersionsRequest]
) -> api_versions_res.ApiVersionsResponse:
    return api_versions_for(request)


def api_versions_for(request: Request[Any]) -> api_versions_res.ApiVersionsResponse:
    """ApiVersions' answer (also given before SASL authentication, where the handlers are not reached)."""
    name = request.optional("client_software_name", "")
    version = request.optional("client_software_version", "")
    if request.version >= 3 and not (_CLIENT_SOFTWARE.match(name) and _CLIENT_SOFTWARE.match(version)):
        return api_versions_response(E.invalid_request, names=())
    return api_versions_response()


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


def _missing_topic(error: ErrorCode, name: str | None, topic_id: uuid.UUID | None) -> Any:
    return metadata_res.MetadataResponseTopic(
        error_code=error,
        name=None if name is None else TopicName(name),
        topic_id=topic_id,
        partitions=(),
    )


@kafka_api("metadata", (0, 12))
async def handle_metadata(
    ctx: BrokerContext, request: Request[metadata_req.MetadataRequest]
) -> metadata_res.MetadataResponse:
    requested = request.body.topics
    auto_create = bool(request.optional("allow_auto_topic_creation", True)) and ctx.auto_create_topics
    include_ops = bool(request.optional("include_topic_authorized_operations", False))
    names: list[tuple[str | None, uuid.UUID | None]]
    if requested is None or (request.version < 1 and not requested):
        names = [(name, None) for name in ctx.topics.topic_names()]
    else:
        names = [(t.name, getattr(t, "topic_id", None)) for t in requested]
    topics = []
    checks = access(ctx, request)
    listed_all = requested is None or (request.version < 1 and not requested)
    create_denied, describe_denied = [], []
    for name, topic_id in names:
        if checks.enabled and name is not None and not checks.topic(AclOperation.DESCRIBE, name):
            if not listed_all:  # named: refused whether or not it exists; all topics: left out
                describe_denied.append(_missing_topic(E.topic_authorization_failed, name, NULL_TOPIC_ID))
            continue
        if (
            checks.enabled
            and name is not None
            and auto_create
            and not ctx.topics.has_topic(name)
            and not checks.create_topic(name)
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
                topic_authorized_operations=_TOPIC_OPERATIONS if include_ops else INT32_MIN,
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


@kafka_api("find_coordinator", (0, 6))
async def handle_find_coordinator(
    ctx: BrokerContext, request: Request[find_coordinator_req.FindCoordinatorRequest]
) -> ResponsePayload:
    # Only group coordination lives here: transactions and share groups are not served.
    is_group = int(request.optional("key_type", 0)) == int(GROUP_KEY_TYPE)
    error = E.none if is_group else E.coordinator_not_available
    # Kafka says "NONE" on success before v4 and "" from v4 on.
    message = "not a group key" if not is_group else ("NONE" if request.version < 4 else "")
    node = BrokerId(ctx.node_id if is_group else -1)
    advertised_host, advertised_port = ctx.advertised(request.listener)
    host = advertised_host if is_group else ""
    port = i32(advertised_port if is_group else -1)
    checks = access(ctx, request)
    denied = E.group_authorization_failed
    if request.version >= 4:
        return find_coordinator_res.FindCoordinatorResponse(
            throttle_time=NO_THROTTLE,
            coordinators=tuple(
                find_coordinator_res.Coordinator(
                    key=key, node_id=node, host=host, port=port, error_code=error, error_message=message
                )
                if not is_group or checks.group(AclOperation.DESCRIBE, key)
                else find_coordinator_res.Coordinator(
                    key=key, node_id=BrokerId(-1), host="", port=i32(-1), error_code=denied, error_message=""
                )
                for key in request.body.coordinator_keys
            ),
        )
    if is_group and not checks.group(AclOperation.DESCRIBE, request.optional("key")):
        return find_coordinator_v3_res.FindCoordinatorResponse(
            throttle_time=NO_THROTTLE,
            error_code=denied,
            error_message="Group authorization failed.",
            node_id=BrokerId(-1),
            host="",
            port=i32(-1),
        )
    return find_coordinator_v3_res.FindCoordinatorResponse(
        throttle_time=NO_THROTTLE, error_code=error, error_message=message, node_id=node, host=host, port=port
    )


@kafka_api("describe_cluster", (0, 1))
async def handle_describe_cluster(
    ctx: BrokerContext, request: Request[describe_cluster_req.DescribeClusterRequest]
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
