"""Kafka API handlers: a typed request in, a coordinator or topic log call, a typed kio response out.

Each handler is registered with `kafka_api` (see registry.py) and written once for every version it
serves: it reads the fields all versions share from `request.body`, the others with
`request.optional`, and builds the response entity of one version (the newest, or the newest of the
shape the requested version has); the codec carries it over to the version that was asked for.
"""

from __future__ import annotations

import asyncio
import datetime
import re
import uuid
from collections.abc import Callable, Hashable, Iterable
from typing import Any, Final, Generic, TypeVar

from kio.schema.api_versions.v4 import request as api_versions_req
from kio.schema.api_versions.v4 import response as api_versions_res
from kio.schema.create_partitions.v3 import request as create_partitions_req
from kio.schema.create_partitions.v3 import response as create_partitions_res
from kio.schema.create_topics.v7 import request as create_topics_req
from kio.schema.create_topics.v7 import response as create_topics_res
from kio.schema.delete_groups.v2 import request as delete_groups_req
from kio.schema.delete_groups.v2 import response as delete_groups_res
from kio.schema.delete_topics.v6 import request as delete_topics_req
from kio.schema.delete_topics.v6 import response as delete_topics_res
from kio.schema.describe_cluster.v1 import request as describe_cluster_req
from kio.schema.describe_cluster.v1 import response as describe_cluster_res
from kio.schema.describe_configs.v4 import request as describe_configs_req
from kio.schema.describe_configs.v4 import response as describe_configs_res
from kio.schema.describe_groups.v6 import request as describe_groups_req
from kio.schema.describe_groups.v6 import response as describe_groups_res
from kio.schema.errors import ErrorCode
from kio.schema.fetch.v12 import request as fetch_req
from kio.schema.fetch.v12 import response as fetch_res
from kio.schema.find_coordinator.v3 import response as find_coordinator_v3_res
from kio.schema.find_coordinator.v6 import request as find_coordinator_req
from kio.schema.find_coordinator.v6 import response as find_coordinator_res
from kio.schema.heartbeat.v4 import request as heartbeat_req
from kio.schema.heartbeat.v4 import response as heartbeat_res
from kio.schema.incremental_alter_configs.v1 import request as alter_configs_req
from kio.schema.incremental_alter_configs.v1 import response as alter_configs_res
from kio.schema.init_producer_id.v5 import request as init_producer_id_req
from kio.schema.init_producer_id.v5 import response as init_producer_id_res
from kio.schema.join_group.v9 import request as join_group_req
from kio.schema.join_group.v9 import response as join_group_res
from kio.schema.leave_group.v2 import response as leave_group_v2_res
from kio.schema.leave_group.v5 import request as leave_group_req
from kio.schema.leave_group.v5 import response as leave_group_res
from kio.schema.list_groups.v5 import request as list_groups_req
from kio.schema.list_groups.v5 import response as list_groups_res
from kio.schema.list_offsets.v10 import request as list_offsets_req
from kio.schema.list_offsets.v10 import response as list_offsets_res
from kio.schema.metadata.v12 import request as metadata_req
from kio.schema.metadata.v12 import response as metadata_res
from kio.schema.offset_commit.v9 import response as offset_commit_v9_res
from kio.schema.offset_commit.v10 import request as offset_commit_req
from kio.schema.offset_commit.v10 import response as offset_commit_res
from kio.schema.offset_fetch.v7 import response as offset_fetch_v7_res
from kio.schema.offset_fetch.v9 import response as offset_fetch_v9_res
from kio.schema.offset_fetch.v10 import request as offset_fetch_req
from kio.schema.offset_fetch.v10 import response as offset_fetch_res
from kio.schema.produce.v12 import request as produce_req
from kio.schema.produce.v12 import response as produce_res
from kio.schema.sync_group.v5 import request as sync_group_req
from kio.schema.sync_group.v5 import response as sync_group_res
from kio.schema.types import BrokerId, GroupId, ProducerId, TopicName
from kio.static.primitive import Records, TZAware, i8, i16, i32, i64
from kio.static.protocol import ResponsePayload

from staticfleet.broker import registry
from staticfleet.broker.codec import (
    EncodedBody,
    FrameError,
    TrailingFieldBody,
    encode_body,
    for_version,
    frame_body,
    parse_request,
)
from staticfleet.broker.fetch_wire import RegionFetchResponse
from staticfleet.broker.partitionlog import FileRegion
from staticfleet.broker.registry import (
    NO_THROTTLE,
    BrokerContext,
    Request,
    UnsupportedVersion,
    api_versions_response,
    kafka_api,
)
from staticfleet.broker.security.acl import AclOperation, ResourceType
from staticfleet.broker.security_apis import access
from staticfleet.broker.topiclog import FetchResult, RegionFetchResult
from staticfleet.broker.topiclog_errors import TopicAlreadyExistsError, TopicLogError
from staticfleet.coordinator import CoordinatorError, CoordinatorResult, GroupCoordinator
from staticfleet.coordinator import messages as m

E = ErrorCode
T = TypeVar("T")
P = TypeVar("P")
K = TypeVar("K", bound=Hashable)
INT32_MIN: Final = i32(-(2**31))
NULL_TOPIC_ID: Final = uuid.UUID(int=0)

# Resource types of DescribeConfigs / IncrementalAlterConfigs.
RESOURCE_TOPIC, RESOURCE_BROKER, RESOURCE_GROUP = 2, 4, 32
# AclOperation codes: what an unauthenticated single-node broker allows on each resource.
_GROUP_OPERATIONS = i32((1 << 3) | (1 << 6) | (1 << 8))  # READ, DELETE, DESCRIBE
_TOPIC_OPERATIONS = i32(sum(1 << op for op in (2, 3, 4, 5, 6, 7, 8, 9)))
_CLUSTER_OPERATIONS = i32(sum(1 << op for op in (4, 7, 8, 9, 10, 11, 12)))
GROUP_KEY_TYPE: Final = i8(0)  # FindCoordinator's key type of a consumer group


def _ms(value: datetime.timedelta | int) -> int:
    """Milliseconds of a kio timedelta field (or a plain int)."""
    if isinstance(value, datetime.timedelta):
        return round(value.total_seconds() * 1000)
    return int(value)


def _timestamp(ms: int) -> TZAware | None:
    """A log-append time as kio writes it: null for -1 (the batch keeps its own times)."""
    if ms < 0:
        return None
    return TZAware.parse(datetime.datetime.fromtimestamp(ms / 1000, datetime.UTC))


async def _gated(ctx: BrokerContext, response: T) -> T:
    """Hold a synchronously computed response until the records it depends on are durable."""
    if not ctx.host.unsynced:
        return response
    future: asyncio.Future[T] = asyncio.get_running_loop().create_future()
    ctx.host.deliver(lambda: future.set_result(response))
    return await future


# === ApiVersions ==========================================================================================

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


# === Metadata / FindCoordinator / DescribeCluster ==========================================================


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


# === group membership =====================================================================================


@kafka_api("join_group", (0, 9), timed=True)
async def handle_join_group(
    ctx: BrokerContext, request: Request[join_group_req.JoinGroupRequest]
) -> join_group_res.JoinGroupResponse | EncodedBody:
    body = request.body
    if not access(ctx, request).group(AclOperation.READ, body.group_id):
        return join_group_res.JoinGroupResponse(
            throttle_time=NO_THROTTLE,
            error_code=E.group_authorization_failed,
            generation_id=i32(-1),
            protocol_type=None,
            protocol_name=None if request.version >= 7 else "",
            leader="",
            skip_assignment=False,
            member_id="",
            members=(),
        )
    session_timeout = _ms(body.session_timeout)
    join = m.JoinGroupRequest(
        group_id=body.group_id,
        session_timeout_ms=session_timeout,
        rebalance_timeout_ms=_ms(request.optional("rebalance_timeout", session_timeout)),
        member_id=body.member_id,
        group_instance_id=request.optional("group_instance_id"),
        protocol_type=body.protocol_type,
        protocols=tuple(m.Protocol(p.name, bytes(p.metadata)) for p in body.protocols),
        reason=request.optional("reason"),
    )
    future: asyncio.Future[m.JoinGroupResponse] = asyncio.get_running_loop().create_future()
    ctx.host.call(lambda c: c.join_group(request.context(), join, ctx.host.responder(future)))
    r = await future
    protocol_name = r.protocol_name
    if request.version >= 7 and protocol_name == "":
        protocol_name = None  # v7+ says "no protocol" with null
    if not r.members:
        return _join_body(request.version, r, protocol_name).with_field(r.member_id.encode("utf-8"))
    return _join_response(r, protocol_name, r.member_id)


def _join_response(
    r: m.JoinGroupResponse, protocol_name: str | None, member_id: str
) -> join_group_res.JoinGroupResponse:
    return join_group_res.JoinGroupResponse(
        throttle_time=NO_THROTTLE,
        error_code=E(r.error),
        generation_id=i32(r.generation_id),
        protocol_type=r.protocol_type,
        protocol_name=protocol_name,
        leader=r.leader or "",
        skip_assignment=r.skip_assignment,
        member_id=member_id,
        members=tuple(
            join_group_res.JoinGroupResponseMember(
                member_id=x.member_id, group_instance_id=x.group_instance_id, metadata=x.metadata
            )
            for x in r.members
        ),
    )


class _ClearedWhenFull(Generic[K, T]):
    """Made once per key, cleared when full: old generations' keys go together and hits need no LRU upkeep."""

    __slots__ = ("_entries", "_limit")

    def __init__(self, limit: int) -> None:
        self._entries: dict[K, T] = {}
        self._limit = limit

    def get(self, key: K, make: Callable[[], T]) -> T:
        value = self._entries.get(key)
        if value is None:
            if len(self._entries) >= self._limit:
                self._entries.clear()
            value = self._entries[key] = make()
        return value


_BODY_CACHE_ENTRIES: Final = 256
_BodyCache = _ClearedWhenFull[tuple[Any, ...], TrailingFieldBody]
_JOIN_BODIES: Final = _BodyCache(_BODY_CACHE_ENTRIES)
_SYNC_BODIES: Final = _BodyCache(_BODY_CACHE_ENTRIES)


def _join_body(version: int, r: m.JoinGroupResponse, protocol_name: str | None) -> TrailingFieldBody:
    """A follower's JoinGroup response but its member id: the same for every follower of a generation,
    so written once per generation rather than once per member."""
    key = (version, r.error, r.generation_id, r.protocol_type, protocol_name, r.leader, r.skip_assignment)
    return _JOIN_BODIES.get(key, lambda: _encode_join_body(version, r, protocol_name))


def _encode_join_body(version: int, r: m.JoinGroupResponse, protocol_name: str | None) -> TrailingFieldBody:
    response = for_version(_join_response(r, protocol_name, ""), version)
    return TrailingFieldBody.of(response, "member_id", empty_arrays=1)


def _sync_body(version: int, r: m.SyncGroupResponse) -> TrailingFieldBody:
    """A SyncGroup response but its assignment: the same for every member of a generation."""
    key = (version, r.error, r.protocol_type, r.protocol_name)
    return _SYNC_BODIES.get(key, lambda: _encode_sync_body(version, r))


def _encode_sync_body(version: int, r: m.SyncGroupResponse) -> TrailingFieldBody:
    response = sync_group_res.SyncGroupResponse(
        throttle_time=NO_THROTTLE,
        error_code=E(r.error),
        protocol_type=r.protocol_type,
        protocol_name=r.protocol_name,
        assignment=b"",
    )
    return TrailingFieldBody.of(for_version(response, version), "assignment")


@kafka_api("sync_group", (0, 5), timed=True)
async def handle_sync_group(
    ctx: BrokerContext, request: Request[sync_group_req.SyncGroupRequest]
) -> sync_group_res.SyncGroupResponse | EncodedBody:
    body = request.body
    protocol_given = request.version < 5 or (
        request.optional("protocol_type") is not None and request.optional("protocol_name") is not None
    )
    # From v5 a missing protocol is refused first (INCONSISTENT_GROUP_PROTOCOL), then READ is checked.
    if protocol_given and not access(ctx, request).group(AclOperation.READ, body.group_id):
        return sync_group_res.SyncGroupResponse(
            throttle_time=NO_THROTTLE,
            error_code=E.group_authorization_failed,
            protocol_type=None,
            protocol_name=None,
            assignment=b"",
        )
    sync = m.SyncGroupRequest(
        group_id=body.group_id,
        generation_id=body.generation_id,
        member_id=body.member_id,
        group_instance_id=request.optional("group_instance_id"),
        protocol_type=request.optional("protocol_type"),
        protocol_name=request.optional("protocol_name"),
        assignments=tuple(m.SyncGroupAssignment(a.member_id, bytes(a.assignment)) for a in body.assignments),
    )
    future: asyncio.Future[m.SyncGroupResponse] = asyncio.get_running_loop().create_future()
    ctx.host.call(lambda c: c.sync_group(request.context(), sync, ctx.host.responder(future)))
    r = await future
    return _sync_body(request.version, r).with_field(r.assignment)


# Room for every pair of version (0 to 4) and error code, so this one never clears.
_HEARTBEAT_BODIES: Final = _ClearedWhenFull[tuple[int, int], EncodedBody](5 * len(E))


def _heartbeat_body(version: int, error: int) -> EncodedBody:
    """Heartbeat answers are tiny and few: encode each (version, error) pair once."""
    return _HEARTBEAT_BODIES.get((version, error), lambda: _encode_heartbeat_body(version, error))


def _encode_heartbeat_body(version: int, error: int) -> EncodedBody:
    response = heartbeat_res.HeartbeatResponse(throttle_time=NO_THROTTLE, error_code=E(error))
    return encode_body(for_version(response, version))


@kafka_api("heartbeat", (0, 4))
async def handle_heartbeat(
    ctx: BrokerContext, request: Request[heartbeat_req.HeartbeatRequest]
) -> EncodedBody:
    body = request.body
    if not access(ctx, request).group(AclOperation.READ, body.group_id):
        return _heartbeat_body(request.version, int(E.group_authorization_failed))
    hb = m.HeartbeatRequest(
        body.group_id, body.generation_id, body.member_id, request.optional("group_instance_id")
    )
    # A heartbeat writes nothing and only pushes timers later, so the host needs no after_change().
    response = ctx.host.coordinator.heartbeat(request.context(), hb)
    return await _gated(ctx, _heartbeat_body(request.version, response.error))


@kafka_api("leave_group", (0, 5))
async def handle_leave_group(
    ctx: BrokerContext, request: Request[leave_group_req.LeaveGroupRequest]
) -> ResponsePayload:
    single = request.version < 3  # one member by id; v3+ carry a batch
    if not access(ctx, request).group(AclOperation.READ, request.body.group_id):
        # Kafka checks READ (not DELETE) for LeaveGroup, also for an admin removing static members.
        if single:
            return leave_group_v2_res.LeaveGroupResponse(
                throttle_time=NO_THROTTLE, error_code=E.group_authorization_failed
            )
        return leave_group_res.LeaveGroupResponse(
            throttle_time=NO_THROTTLE, error_code=E.group_authorization_failed, members=()
        )
    if single:
        identities: tuple[m.MemberIdentity, ...] = (m.MemberIdentity(request.optional("member_id")),)
    else:
        identities = tuple(
            m.MemberIdentity(x.member_id, x.group_instance_id, getattr(x, "reason", None))
            for x in request.body.members
        )
    leave = m.LeaveGroupRequest(request.body.group_id, identities)
    r = ctx.host.call(lambda c: c.leave_group(request.context(), leave))
    response: ResponsePayload
    if single:
        response = leave_group_v2_res.LeaveGroupResponse(
            throttle_time=NO_THROTTLE, error_code=E(r.single_member_error())
        )
    else:
        response = leave_group_res.LeaveGroupResponse(
            throttle_time=NO_THROTTLE,
            error_code=E(r.error),
            members=tuple(
                leave_group_res.MemberResponse(
                    member_id=x.member_id, group_instance_id=x.group_instance_id, error_code=E(x.error)
                )
                for x in r.members
            ),
        )
    return await _gated(ctx, response)


# === offsets ==============================================================================================


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
            retention_time_ms=-1 if retention is None else _ms(retention),
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
    return await _gated(ctx, response)


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
    return await _gated(ctx, response)


# === group administration =================================================================================


@kafka_api("describe_groups", (0, 6))
async def handle_describe_groups(
    ctx: BrokerContext, request: Request[describe_groups_req.DescribeGroupsRequest]
) -> describe_groups_res.DescribeGroupsResponse:
    include_ops = bool(request.optional("include_authorized_operations", False))
    checks = access(ctx, request)
    allowed = [g for g in request.body.groups if checks.group(AclOperation.DESCRIBE, g)]
    refused = [g for g in request.body.groups if g not in allowed]
    described = ctx.host.coordinator.describe_groups(request.context(), allowed) if allowed else []
    res = describe_groups_res

    def operations(group_id: str) -> i32:
        if not checks.enabled:
            return _GROUP_OPERATIONS
        return i32(checks.authorized_operations(ResourceType.GROUP, group_id))

    return res.DescribeGroupsResponse(
        throttle_time=NO_THROTTLE,
        # Groups the caller may not describe come first, as Kafka lists them.
        groups=tuple(_described_error(g, E.group_authorization_failed) for g in refused)
        + tuple(
            res.DescribedGroup(
                error_code=E(g.error),
                error_message=g.error_message,
                group_id=GroupId(g.group_id),
                group_state=g.state,
                protocol_type=g.protocol_type,
                protocol_data=g.protocol_data,
                members=tuple(
                    res.DescribedGroupMember(
                        member_id=x.member_id,
                        group_instance_id=x.group_instance_id,
                        client_id=x.client_id,
                        client_host=x.client_host,
                        member_metadata=x.metadata,
                        member_assignment=x.assignment,
                    )
                    for x in g.members
                ),
                authorized_operations=operations(g.group_id) if include_ops and not g.error else INT32_MIN,
            )
            for g in described
        ),
    )


@kafka_api("list_groups", (0, 5))
async def handle_list_groups(
    ctx: BrokerContext, request: Request[list_groups_req.ListGroupsRequest]
) -> list_groups_res.ListGroupsResponse:
    listed = ctx.host.coordinator.list_groups(
        request.context(),
        m.ListGroupsRequest(
            tuple(request.optional("states_filter", ()) or ()),
            tuple(request.optional("types_filter", ()) or ()),
        ),
    )
    checks = access(ctx, request)
    # Without DESCRIBE on the cluster the list holds only the groups the caller may describe.
    everything = checks.cluster(AclOperation.DESCRIBE)
    return list_groups_res.ListGroupsResponse(
        throttle_time=NO_THROTTLE,
        error_code=E(listed.error),
        groups=tuple(
            list_groups_res.ListedGroup(
                group_id=GroupId(g.group_id),
                protocol_type=g.protocol_type,
                group_state=g.state,
                group_type=g.group_type,
            )
            for g in listed.groups
            if everything or checks.group(AclOperation.DESCRIBE, g.group_id)
        ),
    )


@kafka_api("delete_groups", (0, 2))
async def handle_delete_groups(
    ctx: BrokerContext, request: Request[delete_groups_req.DeleteGroupsRequest]
) -> delete_groups_res.DeleteGroupsResponse:
    checks = access(ctx, request)
    names = list(dict.fromkeys(request.body.groups_names))
    allowed = [g for g in names if checks.group(AclOperation.DELETE, g)]
    refused = [g for g in names if g not in allowed]
    results = ctx.host.call(lambda c: c.delete_groups(request.context(), allowed)) if allowed else []
    response = delete_groups_res.DeleteGroupsResponse(
        throttle_time=NO_THROTTLE,
        # Refused groups come after the coordinator's answers, as Kafka appends them.
        results=tuple(
            delete_groups_res.DeletableGroupResult(group_id=GroupId(r.group_id), error_code=E(r.error))
            for r in results
        )
        + tuple(
            delete_groups_res.DeletableGroupResult(
                group_id=GroupId(g), error_code=E.group_authorization_failed
            )
            for g in refused
        ),
    )
    return await _gated(ctx, response)


# === configs (groups: the staticfleet extension; topics: the topic log) ===================================

_SOURCE_DYNAMIC_TOPIC, _SOURCE_DEFAULT = i8(1), i8(5)
_TYPE_STRING, _TYPE_LONG = i8(0), i8(2)


def _config_entry(
    name: str, value: str | None, source: i8
) -> describe_configs_res.DescribeConfigsResourceResult:
    return describe_configs_res.DescribeConfigsResourceResult(
        name=name,
        value=value,
        read_only=False,
        config_source=source,
        is_sensitive=False,
        synonyms=(),
        config_type=_TYPE_LONG if name.endswith(("ms", "bytes", "partitions")) else _TYPE_STRING,
        documentation=None,
    )


@kafka_api("describe_configs", (1, 4))
async def handle_describe_configs(
    ctx: BrokerContext, request: Request[describe_configs_req.DescribeConfigsRequest]
) -> describe_configs_res.DescribeConfigsResponse:
    results = []
    refused = []
    checks = access(ctx, request)
    for resource in request.body.resources:
        kind, name = resource.resource_type, resource.resource_name
        denial = _config_denial(checks, kind, name, AclOperation.DESCRIBE_CONFIGS)
        if denial is not None:
            # Refused resources come after the others, with the error's default message.
            refused.append(
                describe_configs_res.DescribeConfigsResult(
                    error_code=denial[0],
                    error_message=denial[1],
                    resource_type=kind,
                    resource_name=name,
                    configs=(),
                )
            )
            continue
        keys = resource.configuration_keys
        wanted = None if keys is None else set(keys)
        error, message = E.none, "" if checks.enabled else None
        configs: tuple[describe_configs_res.DescribeConfigsResourceResult, ...] = ()
        if kind == RESOURCE_GROUP:
            configs = tuple(
                _config_entry(k, v, _SOURCE_DYNAMIC_TOPIC)
                for k, v in sorted(ctx.host.coordinator.describe_group_config(name).items())
                if wanted is None or k in wanted
            )
        elif kind == RESOURCE_TOPIC:
            if not ctx.topics.has_topic(name):
                error, message = E.unknown_topic_or_partition, f"Topic {name} does not exist."
            else:
                overrides = ctx.topics.describe_topic(name).configs
                configs = tuple(
                    _config_entry(k, v, _SOURCE_DYNAMIC_TOPIC if k in overrides else _SOURCE_DEFAULT)
                    for k, v in sorted(ctx.topics.topic_configs(name).items())
                    if wanted is None or k in wanted
                )
        elif kind != RESOURCE_BROKER:
            error, message = E.invalid_request, f"Unsupported resource type {kind}"
        results.append(
            describe_configs_res.DescribeConfigsResult(
                error_code=error,
                error_message=message,
                resource_type=kind,
                resource_name=name,
                configs=configs,
            )
        )
    return describe_configs_res.DescribeConfigsResponse(
        throttle_time=NO_THROTTLE, results=tuple(results) + tuple(refused)
    )


def _config_denial(
    checks: Any, kind: int, name: str, operation: AclOperation
) -> tuple[ErrorCode, str] | None:
    """The error for a config resource the caller may not describe or alter (None: allowed)."""
    if not checks.enabled:
        return None
    if kind == RESOURCE_GROUP and not checks.group(operation, name):
        return E.group_authorization_failed, "Group authorization failed."
    if kind == RESOURCE_TOPIC and not checks.topic(operation, name):
        return E.topic_authorization_failed, "Topic authorization failed."
    if kind == RESOURCE_BROKER and not checks.cluster(operation):
        return E.cluster_authorization_failed, "Cluster authorization failed."
    return None


_SET, _DELETE, _APPEND, _SUBTRACT = range(4)


def _config_changes(current: dict[str, str], configs: Iterable[Any]) -> dict[str, str | None]:
    changes: dict[str, str | None] = {}
    for c in configs:
        op, name, value = int(c.config_operation), c.name, c.value
        if op == _SET:
            changes[name] = value
        elif op == _DELETE:
            changes[name] = None
        elif op in (_APPEND, _SUBTRACT):
            base = [v for v in (changes.get(name) or current.get(name) or "").split(",") if v]
            items = [v.strip() for v in (value or "").split(",") if v.strip()]
            if op == _APPEND:
                base += [v for v in items if v not in base]
            else:
                base = [v for v in base if v not in items]
            changes[name] = ",".join(base) if base else None
        else:
            raise CoordinatorError(E.invalid_request, f"unknown config operation {op}")
    return changes


@kafka_api("incremental_alter_configs", (0, 1))
async def handle_incremental_alter_configs(
    ctx: BrokerContext, request: Request[alter_configs_req.IncrementalAlterConfigsRequest]
) -> alter_configs_res.IncrementalAlterConfigsResponse:
    validate_only = bool(request.body.validate_only)
    responses = []
    checks = access(ctx, request)
    for resource in request.body.resources:
        kind, name = resource.resource_type, resource.resource_name
        error: ErrorCode = E.none
        message: str | None = None
        denial = _config_denial(checks, kind, name, AclOperation.ALTER_CONFIGS)
        if denial is not None:
            responses.append(
                alter_configs_res.AlterConfigsResourceResponse(
                    error_code=denial[0], error_message=denial[1], resource_type=kind, resource_name=name
                )
            )
            continue
        try:
            if kind == RESOURCE_GROUP:
                changes = _config_changes(ctx.host.coordinator.describe_group_config(name), resource.configs)

                def alter(
                    c: GroupCoordinator, group: str = name, ch: dict[str, str | None] = changes
                ) -> CoordinatorResult[None]:
                    return c.alter_group_config(group, ch, validate_only)

                ctx.host.call(alter)
            elif kind == RESOURCE_TOPIC:
                current = ctx.topics.describe_topic(name).configs if ctx.topics.has_topic(name) else {}
                topic_changes = _config_changes(dict(current), resource.configs)
                ctx.topics.alter_topic_configs(name, topic_changes, validate_only=validate_only)
            else:
                error, message = (
                    E.invalid_request,
                    f"Altering configs of resource type {kind} is not supported",
                )
        except CoordinatorError as exc:
            error, message = exc.code, str(exc)
        except TopicLogError as exc:
            error, message = exc.error_code, str(exc)
        responses.append(
            alter_configs_res.AlterConfigsResourceResponse(
                error_code=error, error_message=message, resource_type=kind, resource_name=name
            )
        )
    result = alter_configs_res.IncrementalAlterConfigsResponse(
        throttle_time=NO_THROTTLE, responses=tuple(responses)
    )
    return await _gated(ctx, result)


# === topics ===============================================================================================


class _AssignmentError(TopicLogError):
    error_code = E.invalid_replica_assignment


def _invalid_assignment(ctx: BrokerContext) -> TopicLogError:
    return _AssignmentError(f"replicas can only be placed on this broker (node {ctx.node_id})")


@kafka_api("create_topics", (2, 7))
async def handle_create_topics(
    ctx: BrokerContext, request: Request[create_topics_req.CreateTopicsRequest]
) -> create_topics_res.CreateTopicsResponse:
    res = create_topics_res
    validate_only = bool(request.optional("validate_only", False))
    out = []
    checks = access(ctx, request)
    for topic in request.body.topics:
        configs = {c.name: c.value for c in topic.configs}
        if not checks.create_topic(topic.name):
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
            # Without DESCRIBE_CONFIGS on the topic its settings are withheld (topic_config_error_code).
            shown = not checks.enabled or checks.topic(AclOperation.DESCRIBE_CONFIGS, topic.name)
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
                        config_source=_SOURCE_DYNAMIC_TOPIC if k in configs else _SOURCE_DEFAULT,
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


@kafka_api("delete_topics", (1, 6))
async def handle_delete_topics(
    ctx: BrokerContext, request: Request[delete_topics_req.DeleteTopicsRequest]
) -> delete_topics_res.DeleteTopicsResponse:
    wanted: list[tuple[str | None, uuid.UUID | None]]
    if request.version >= 6:
        wanted = [(t.name, t.topic_id) for t in request.body.topics]
    else:
        wanted = [(name, None) for name in request.optional("topic_names")]
    responses = []
    checks = access(ctx, request)
    for name, topic_id in wanted:
        if name is None and topic_id is not None:
            name = ctx.topics.topic_name_for_id(topic_id)
        error, message = E.none, None
        if name is None:
            error, message = E.unknown_topic_id, "Topic id not found"
        elif checks.enabled and not (
            checks.cluster(AclOperation.DELETE) or checks.topic(AclOperation.DELETE, name)
        ):
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


@kafka_api("create_partitions", (0, 3))
async def handle_create_partitions(
    ctx: BrokerContext, request: Request[create_partitions_req.CreatePartitionsRequest]
) -> create_partitions_res.CreatePartitionsResponse:
    results = []
    checks = access(ctx, request)
    for topic in request.body.topics:
        error, message = E.none, None
        if not checks.topic(AclOperation.ALTER, topic.name):
            results.append(
                create_partitions_res.CreatePartitionsTopicResult(
                    name=topic.name, error_code=E.topic_authorization_failed, error_message=None
                )
            )
            continue
        try:
            if topic.assignments and any(set(a.broker_ids) != {ctx.node_id} for a in topic.assignments):
                raise _invalid_assignment(ctx)
            ctx.topics.create_partitions(
                topic.name, topic.count, validate_only=bool(request.body.validate_only)
            )
        except TopicLogError as exc:
            error, message = exc.error_code, str(exc)
        results.append(
            create_partitions_res.CreatePartitionsTopicResult(
                name=topic.name, error_code=error, error_message=message
            )
        )
    return create_partitions_res.CreatePartitionsResponse(throttle_time=NO_THROTTLE, results=tuple(results))


# === data path ============================================================================================


def _produce_partition(
    ctx: BrokerContext, topic: str, p: Any, refused: ErrorCode
) -> produce_res.PartitionProduceResponse:
    error, message = refused, None
    base_offset, append_time, start_offset = -1, -1, -1
    if not refused:
        try:
            appended = ctx.topics.append(topic, p.index, bytes(p.records or b""))
            base_offset = appended.base_offset
            append_time = appended.log_append_time_ms
            start_offset = appended.log_start_offset
        except TopicLogError as exc:
            error, message = exc.error_code, str(exc)
    return produce_res.PartitionProduceResponse(
        index=p.index,
        error_code=error,
        base_offset=i64(base_offset),
        log_append_time=_timestamp(append_time),
        log_start_offset=i64(start_offset),
        record_errors=(),
        error_message=message,
    )


@kafka_api("produce", (3, 12))
async def handle_produce(
    ctx: BrokerContext, request: Request[produce_req.ProduceRequest]
) -> produce_res.ProduceResponse | None:
    # Transactions are not served: a transactional produce is refused.
    refused = E.transactional_id_authorization_failed if request.body.transactional_id is not None else E.none
    checks = access(ctx, request)
    writable = checks.topics(AclOperation.WRITE, (t.name for t in request.body.topic_data))
    responses = tuple(
        produce_res.TopicProduceResponse(
            name=topic.name,
            partition_responses=tuple(
                _produce_partition(
                    ctx,
                    topic.name,
                    p,
                    refused or (E.none if topic.name in writable else E.topic_authorization_failed),
                )
                for p in topic.partition_data
            ),
        )
        for topic in request.body.topic_data
    )
    if not request.body.acks:
        if len(writable) < len({t.name for t in request.body.topic_data}):
            raise ConnectionAbortedError("acks=0 produce to a topic the producer may not write")
        return None  # acks=0: the producer expects no answer at all
    return produce_res.ProduceResponse(throttle_time=NO_THROTTLE, responses=responses)


def _fetch_one(
    ctx: BrokerContext, name: str, p: Any, budget: int, splice: bool
) -> tuple[fetch_res.PartitionData, int, tuple[FileRegion, ...]]:
    """One partition's answer, its size, and (when spliced) its records as file regions."""
    max_bytes = min(budget, p.partition_max_bytes)
    regions: tuple[FileRegion, ...] = ()
    found: RegionFetchResult | FetchResult
    try:
        if splice:
            found = ctx.topics.read_regions(name, p.partition, p.fetch_offset, max_bytes, min_one_batch=True)
            regions, size, records = found.regions, found.size, None
        else:
            copied = ctx.topics.read(name, p.partition, p.fetch_offset, max_bytes, min_one_batch=True)
            found, size, records = copied, len(copied.records), Records(copied.records)
    except TopicLogError as exc:
        high_watermark = start_offset = -1
        if ctx.topics.has_topic(name) and 0 <= p.partition < ctx.topics.partition_count(name):
            high_watermark = ctx.topics.log_end_offset(name, p.partition)
            start_offset = ctx.topics.log_start_offset(name, p.partition)
        return _fetched(p.partition, exc.error_code, high_watermark, start_offset), 0, ()
    entry = fetch_res.PartitionData(
        partition_index=p.partition,
        error_code=E.none,
        high_watermark=i64(found.high_watermark),
        last_stable_offset=i64(found.last_stable_offset),
        log_start_offset=i64(found.log_start_offset),
        aborted_transactions=None,
        preferred_read_replica=BrokerId(-1),
        records=Records(b"") if splice and not regions else records,
    )
    return entry, size, regions


def _fetched(
    partition: i32, error: ErrorCode, high_watermark: int = -1, start: int = -1
) -> fetch_res.PartitionData:
    return fetch_res.PartitionData(
        partition_index=partition,
        error_code=error,
        high_watermark=i64(high_watermark),
        last_stable_offset=i64(-1),
        log_start_offset=i64(start),
        aborted_transactions=None,
        preferred_read_replica=BrokerId(-1),
        records=None,
    )


@kafka_api("fetch", (4, 12))
async def handle_fetch(
    ctx: BrokerContext, request: Request[fetch_req.FetchRequest]
) -> fetch_res.FetchResponse | RegionFetchResponse:
    body = request.body
    max_wait_s = max(0, _ms(body.max_wait)) / 1000
    min_bytes = max(0, int(body.min_bytes))
    max_bytes = int(request.optional("max_bytes", 2**31 - 1))

    readable = access(ctx, request).topics(AclOperation.READ, (t.topic for t in body.topics))

    def read_all() -> tuple[RegionFetchResponse, int]:
        budget = max_bytes
        total = 0
        out = []
        regions: list[tuple[tuple[FileRegion, ...], ...]] = []
        for topic in body.topics:
            partitions = []
            if topic.topic not in readable:
                refused = tuple(_fetched(p.partition, E.topic_authorization_failed) for p in topic.partitions)
                out.append(fetch_res.FetchableTopicResponse(topic=topic.topic, partitions=refused))
                regions.append(())
                continue
            topic_regions: list[tuple[FileRegion, ...]] = []
            for p in topic.partitions:
                entry, size, found = _fetch_one(
                    ctx, topic.topic, p, max(budget, 0) if total else budget, request.splice
                )
                budget -= size
                total += size
                partitions.append(entry)
                topic_regions.append(found)
            out.append(fetch_res.FetchableTopicResponse(topic=topic.topic, partitions=tuple(partitions)))
            regions.append(tuple(topic_regions))
        response = fetch_res.FetchResponse(
            throttle_time=NO_THROTTLE, error_code=E.none, session_id=i32(0), responses=tuple(out)
        )
        return RegionFetchResponse(response, tuple(regions)), total

    answer, total = read_all()
    if total < min_bytes and max_wait_s > 0:
        positions: dict[tuple[str, int], int] = {
            (topic.topic, p.partition): p.fetch_offset
            for topic in body.topics
            if topic.topic in readable
            for p in topic.partitions
        }
        try:
            if positions and await ctx.topics.wait_for_data(positions, max_wait_s, min_bytes=min_bytes):
                answer.close()
                answer, total = read_all()
            elif not positions:
                await asyncio.sleep(max_wait_s)
        except BaseException:
            answer.close()
            raise
    # Regions only when the server sends them (a spliced connection) and there are some.
    return answer if answer.has_regions else answer.response


@kafka_api("list_offsets", (1, 10))
async def handle_list_offsets(
    ctx: BrokerContext, request: Request[list_offsets_req.ListOffsetsRequest]
) -> list_offsets_res.ListOffsetsResponse:
    res = list_offsets_res
    describable = access(ctx, request).topics(AclOperation.DESCRIBE, (t.name for t in request.body.topics))

    def one(topic: str, p: Any) -> list_offsets_res.ListOffsetsPartitionResponse:
        if topic not in describable:
            return res.ListOffsetsPartitionResponse(
                partition_index=p.partition_index,
                error_code=E.topic_authorization_failed,
                timestamp=i64(-1),
                offset=i64(-1),
                leader_epoch=i32(-1),
            )
        try:
            found = ctx.topics.list_offset(topic, p.partition_index, p.timestamp)
        except TopicLogError as exc:
            return res.ListOffsetsPartitionResponse(
                partition_index=p.partition_index,
                error_code=exc.error_code,
                timestamp=i64(-1),
                offset=i64(-1),
                leader_epoch=i32(-1),
            )
        return res.ListOffsetsPartitionResponse(
            partition_index=p.partition_index,
            error_code=E.none,
            timestamp=i64(found.timestamp),
            offset=i64(found.offset),
            leader_epoch=i32(0 if found.offset >= 0 else -1),
        )

    return res.ListOffsetsResponse(
        throttle_time=NO_THROTTLE,
        topics=tuple(
            res.ListOffsetsTopicResponse(name=t.name, partitions=tuple(one(t.name, p) for p in t.partitions))
            for t in request.body.topics
        ),
    )


@kafka_api("init_producer_id", (0, 5))
async def handle_init_producer_id(
    ctx: BrokerContext, request: Request[init_producer_id_req.InitProducerIdRequest]
) -> init_producer_id_res.InitProducerIdResponse:
    if request.body.transactional_id is not None:
        return init_producer_id_res.InitProducerIdResponse(
            throttle_time=NO_THROTTLE,
            error_code=E.coordinator_not_available,
            producer_id=ProducerId(-1),
            producer_epoch=i16(-1),
        )
    return init_producer_id_res.InitProducerIdResponse(
        throttle_time=NO_THROTTLE,
        error_code=E.none,
        producer_id=ProducerId(next(iter(ctx.producer_ids))),
        producer_epoch=i16(0),
    )


# === errors during SASL authentication ====================================================================


def illegal_sasl_state_reply(frame: bytes, code: int, message: str) -> bytes | None:
    """An API's own error answer, as Kafka sends one to a request made during SASL authentication
    (`getErrorResponse`); None for an API this broker does not build one for (the connection closes)."""
    try:
        header, body = parse_request(frame, registry.is_supported)
    except (UnsupportedVersion, FrameError):
        return None
    error = E(code)
    version = header.api_version
    api = registry.api_for(header)
    name = api.name if api is not None else ""
    response: ResponsePayload | None = None
    if name == "heartbeat":
        response = heartbeat_res.HeartbeatResponse(throttle_time=NO_THROTTLE, error_code=error)
    elif name == "join_group":
        response = join_group_res.JoinGroupResponse(
            throttle_time=NO_THROTTLE,
            error_code=error,
            generation_id=i32(-1),
            protocol_type=None,
            protocol_name=None if version >= 7 else "",
            leader="",
            skip_assignment=False,
            member_id="",
            members=(),
        )
    elif name == "sync_group":
        response = sync_group_res.SyncGroupResponse(
            throttle_time=NO_THROTTLE,
            error_code=error,
            protocol_type=None,
            protocol_name=None,
            assignment=b"",
        )
    elif name == "leave_group":
        response = (
            leave_group_v2_res.LeaveGroupResponse(throttle_time=NO_THROTTLE, error_code=error)
            if version < 3
            else leave_group_res.LeaveGroupResponse(throttle_time=NO_THROTTLE, error_code=error, members=())
        )
    elif name == "describe_groups":
        response = describe_groups_res.DescribeGroupsResponse(
            throttle_time=NO_THROTTLE,
            groups=tuple(_described_error(g, error) for g in body.groups),
        )
    elif name == "offset_commit" and version < 10:
        response = offset_commit_v9_res.OffsetCommitResponse(
            throttle_time=NO_THROTTLE,
            topics=tuple(
                offset_commit_v9_res.OffsetCommitResponseTopic(
                    name=getattr(t, "name"),  # noqa: B009 (absent from the v10 entity the body is typed as)
                    partitions=tuple(
                        offset_commit_v9_res.OffsetCommitResponsePartition(
                            partition_index=p.partition_index, error_code=error
                        )
                        for p in t.partitions
                    ),
                )
                for t in body.topics
            ),
        )
    elif name == "sasl_handshake":
        from kio.schema.sasl_handshake.v1 import response as sasl_handshake_res

        response = sasl_handshake_res.SaslHandshakeResponse(error_code=error, mechanisms=())
    if response is None:
        return None
    return frame_body(header.correlation_id, encode_body(for_version(response, version)))


def _described_error(group_id: str, error: ErrorCode) -> describe_groups_res.DescribedGroup:
    """A DescribeGroups entry for a group the caller may not see (or cannot be told about yet)."""
    return describe_groups_res.DescribedGroup(
        error_code=error,
        error_message=None,
        group_id=GroupId(group_id),
        group_state="",
        protocol_type="",
        protocol_data="",
        members=(),
        authorized_operations=INT32_MIN,
    )
