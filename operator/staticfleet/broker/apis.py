"""Kafka API handlers: kio request entity in, coordinator or topic log call, kio response entity out.

Every handler is written once for all the versions it supports: it reads fields with `_get` (absent
in a version means the protocol default) and answers through `build_response`, which keeps exactly
the fields the requested version has. The table `SUPPORTED` is what ApiVersions advertises.
"""

from __future__ import annotations

import asyncio
import itertools
import logging
import re
import time
import uuid
from collections.abc import Awaitable, Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

from staticfleet.broker.codec import (
    API_VERSIONS_KEY,
    EncodedBody,
    RequestHeader,
    build_response,
    encode_body,
)
from staticfleet.broker.host import CoordinatorHost
from staticfleet.broker.topiclog import TopicLog
from staticfleet.broker.topiclog_errors import TopicLogError
from staticfleet.coordinator import CoordinatorError, ErrorCode, GroupCoordinator
from staticfleet.coordinator import messages as m

log = logging.getLogger(__name__)

E = ErrorCode
INT32_MIN = -(2**31)

# Resource types of DescribeConfigs / IncrementalAlterConfigs.
RESOURCE_TOPIC, RESOURCE_BROKER, RESOURCE_GROUP = 2, 4, 32
# AclOperation codes: what an unauthenticated single-node broker allows on each resource.
_GROUP_OPERATIONS = (1 << 3) | (1 << 6) | (1 << 8)  # READ, DELETE, DESCRIBE
_TOPIC_OPERATIONS = sum(1 << op for op in (2, 3, 4, 5, 6, 7, 8, 9))
_CLUSTER_OPERATIONS = sum(1 << op for op in (4, 7, 8, 9, 10, 11, 12))


@dataclass
class BrokerContext:
    """What handlers need besides the request: the coordinator, the topics, and who this node is."""

    host: CoordinatorHost
    topics: TopicLog
    node_id: int
    advertised_host: str
    advertised_port: int
    cluster_id: str
    auto_create_topics: bool = True
    producer_ids: Iterable[int] = field(default_factory=lambda: itertools.count(int(time.time()) << 12))

    def node(self) -> dict[str, Any]:
        return {
            "node_id": self.node_id,
            "host": self.advertised_host,
            "port": self.advertised_port,
            "rack": None,
        }


Handler = Callable[[BrokerContext, RequestHeader, Any], Awaitable[Any]]


def _get(entity: Any, name: str, default: Any = None) -> Any:
    return getattr(entity, name, default)


def _ms(value: Any) -> int:
    """Milliseconds of a kio timedelta field (or a plain int)."""
    if hasattr(value, "total_seconds"):
        return round(float(value.total_seconds()) * 1000)
    return int(value)


def _ctx(header: RequestHeader, client_host: str) -> m.RequestContext:
    return m.RequestContext(header.api_version, header.client_id or "", client_host)


# === ApiVersions ==========================================================================================

_CLIENT_SOFTWARE = re.compile(r"^[a-zA-Z0-9](?:[a-zA-Z0-9\-.]*[a-zA-Z0-9])?$")


def api_versions_body(error: int = 0) -> dict[str, Any]:
    keys = sorted(SUPPORTED.items())
    if error == E.UNSUPPORTED_VERSION:
        # KIP-511: a client asking with a version too new learns only which ApiVersions versions exist.
        keys = [(API_VERSIONS_KEY, SUPPORTED[API_VERSIONS_KEY])]
    return {
        "error_code": error,
        "api_keys": [{"api_key": key, "min_version": low, "max_version": high} for key, (low, high) in keys],
        "throttle_time": 0,
    }


async def handle_api_versions(ctx: BrokerContext, header: RequestHeader, request: Any) -> Any:
    if header.api_version >= 3:
        name = _get(request, "client_software_name", "")
        version = _get(request, "client_software_version", "")
        if not _CLIENT_SOFTWARE.match(name or "") or not _CLIENT_SOFTWARE.match(version or ""):
            return build_response(18, header.api_version, {"error_code": E.INVALID_REQUEST, "api_keys": []})
    return build_response(18, header.api_version, api_versions_body())


# === Metadata / FindCoordinator / DescribeCluster ==========================================================


def _partition_metadata(ctx: BrokerContext, count: int) -> list[dict[str, Any]]:
    node = ctx.node_id
    return [
        {
            "error_code": 0,
            "partition_index": p,
            "leader_id": node,
            "leader_epoch": 0,
            "replica_nodes": [node],
            "isr_nodes": [node],
            "offline_replicas": [],
        }
        for p in range(count)
    ]


async def handle_metadata(ctx: BrokerContext, header: RequestHeader, request: Any) -> Any:
    version = header.api_version
    requested = _get(request, "topics")
    auto_create = bool(_get(request, "allow_auto_topic_creation", True)) and ctx.auto_create_topics
    include_ops = bool(_get(request, "include_topic_authorized_operations", False))
    names: list[tuple[str | None, Any]]
    if requested is None or (version == 0 and not requested):
        names = [(name, None) for name in ctx.topics.topic_names()]
    else:
        names = [(_get(t, "name"), _get(t, "topic_id")) for t in requested]
    topics = []
    for name, topic_id in names:
        if name is None and topic_id is not None:
            name = ctx.topics.topic_name_for_id(topic_id)
            if name is None:
                topics.append(
                    {"error_code": E.UNKNOWN_TOPIC_ID, "name": None, "topic_id": topic_id, "partitions": []}
                )
                continue
        assert name is not None
        error = 0
        if not ctx.topics.has_topic(name):
            if auto_create:
                try:
                    ctx.topics.create_topic(name)
                except TopicLogError as exc:
                    error = exc.error_code
            else:
                error = E.UNKNOWN_TOPIC_OR_PARTITION
        if error or not ctx.topics.has_topic(name):
            topics.append(
                {
                    "error_code": error or E.UNKNOWN_TOPIC_OR_PARTITION,
                    "name": name,
                    "topic_id": uuid.UUID(int=0),
                    "partitions": [],
                }
            )
            continue
        description = ctx.topics.describe_topic(name)
        topics.append(
            {
                "error_code": 0,
                "name": name,
                "topic_id": description.topic_id,
                "is_internal": False,
                "partitions": _partition_metadata(ctx, description.partitions),
                "topic_authorized_operations": _TOPIC_OPERATIONS if include_ops else INT32_MIN,
            }
        )
    return build_response(
        3,
        version,
        {
            "throttle_time": 0,
            "brokers": [ctx.node()],
            "cluster_id": ctx.cluster_id,
            "controller_id": ctx.node_id,
            "topics": topics,
            "cluster_authorized_operations": INT32_MIN,
            "error_code": 0,
        },
    )


async def handle_find_coordinator(ctx: BrokerContext, header: RequestHeader, request: Any) -> Any:
    version = header.api_version
    key_type = int(_get(request, "key_type", 0))

    def answer(key: str) -> dict[str, Any]:
        if key_type != 0:
            # Only group coordination lives here: transactions and share groups are not served.
            return {
                "key": key,
                "error_code": E.COORDINATOR_NOT_AVAILABLE,
                "error_message": "not a group key",
                "node_id": -1,
                "host": "",
                "port": -1,
            }
        # Kafka says "NONE" on success before v4 and "" from v4 on.
        return {
            "key": key,
            "error_code": 0,
            "error_message": "NONE" if version < 4 else "",
            **_node_fields(ctx),
        }

    if version >= 4:
        coordinators = [answer(key) for key in _get(request, "coordinator_keys", ())]
        return build_response(10, version, {"throttle_time": 0, "coordinators": coordinators})
    single = answer(_get(request, "key", ""))
    return build_response(10, version, {"throttle_time": 0, **single})


def _node_fields(ctx: BrokerContext) -> dict[str, Any]:
    return {"node_id": ctx.node_id, "host": ctx.advertised_host, "port": ctx.advertised_port}


async def handle_describe_cluster(ctx: BrokerContext, header: RequestHeader, request: Any) -> Any:
    include = bool(_get(request, "include_cluster_authorized_operations", False))
    return build_response(
        60,
        header.api_version,
        {
            "throttle_time": 0,
            "error_code": 0,
            "error_message": None,
            "endpoint_type": 1,
            "cluster_id": ctx.cluster_id,
            "controller_id": ctx.node_id,
            "brokers": [
                {
                    "broker_id": ctx.node_id,
                    "host": ctx.advertised_host,
                    "port": ctx.advertised_port,
                    "rack": None,
                }
            ],
            "cluster_authorized_operations": _CLUSTER_OPERATIONS if include else INT32_MIN,
        },
    )


# === group membership =====================================================================================


async def handle_join_group(ctx: BrokerContext, header: RequestHeader, request: Any, client_host: str) -> Any:
    version = header.api_version
    session_timeout = _ms(request.session_timeout)
    join = m.JoinGroupRequest(
        group_id=request.group_id,
        session_timeout_ms=session_timeout,
        rebalance_timeout_ms=_ms(_get(request, "rebalance_timeout", session_timeout)),
        member_id=request.member_id,
        group_instance_id=_get(request, "group_instance_id"),
        protocol_type=request.protocol_type,
        protocols=tuple(m.Protocol(p.name, bytes(p.metadata)) for p in request.protocols),
        reason=_get(request, "reason"),
    )
    future: asyncio.Future[m.JoinGroupResponse] = asyncio.get_running_loop().create_future()
    ctx.host.call(lambda c: c.join_group(_ctx(header, client_host), join, ctx.host.responder(future)))
    r = await future
    protocol_name = r.protocol_name
    if version >= 7 and protocol_name == "":
        protocol_name = None  # v7+ says "no protocol" with null
    return build_response(
        11,
        version,
        {
            "throttle_time": 0,
            "error_code": r.error,
            "generation_id": r.generation_id,
            "protocol_type": r.protocol_type,
            "protocol_name": protocol_name,
            "leader": r.leader,
            "skip_assignment": r.skip_assignment,
            "member_id": r.member_id,
            "members": [
                {"member_id": x.member_id, "group_instance_id": x.group_instance_id, "metadata": x.metadata}
                for x in r.members
            ],
        },
    )


async def handle_sync_group(ctx: BrokerContext, header: RequestHeader, request: Any, client_host: str) -> Any:
    sync = m.SyncGroupRequest(
        group_id=request.group_id,
        generation_id=request.generation_id,
        member_id=request.member_id,
        group_instance_id=_get(request, "group_instance_id"),
        protocol_type=_get(request, "protocol_type"),
        protocol_name=_get(request, "protocol_name"),
        assignments=tuple(
            m.SyncGroupAssignment(a.member_id, bytes(a.assignment)) for a in request.assignments
        ),
    )
    future: asyncio.Future[m.SyncGroupResponse] = asyncio.get_running_loop().create_future()
    ctx.host.call(lambda c: c.sync_group(_ctx(header, client_host), sync, ctx.host.responder(future)))
    r = await future
    return build_response(
        14,
        header.api_version,
        {
            "throttle_time": 0,
            "error_code": r.error,
            "protocol_type": r.protocol_type,
            "protocol_name": r.protocol_name,
            "assignment": r.assignment,
        },
    )


_HEARTBEAT_BODIES: dict[tuple[int, int], EncodedBody] = {}


def _heartbeat_body(version: int, error: int) -> EncodedBody:
    """Heartbeat answers are tiny and few: encode each (version, error) pair once."""
    body = _HEARTBEAT_BODIES.get((version, error))
    if body is None:
        body = encode_body(build_response(12, version, {"throttle_time": 0, "error_code": error}))
        _HEARTBEAT_BODIES[(version, error)] = body
    return body


async def handle_heartbeat(ctx: BrokerContext, header: RequestHeader, request: Any, client_host: str) -> Any:
    hb = m.HeartbeatRequest(
        request.group_id, request.generation_id, request.member_id, _get(request, "group_instance_id")
    )
    # A heartbeat writes nothing and only pushes timers later, so the host needs no after_change().
    response = ctx.host.coordinator.heartbeat(_ctx(header, client_host), hb)
    return await _gated(ctx, _heartbeat_body(header.api_version, response.error))


async def _gated(ctx: BrokerContext, response: Any) -> Any:
    """Hold a synchronously computed response until the records it depends on are durable."""
    if not ctx.host.unsynced:
        return response
    future: asyncio.Future[Any] = asyncio.get_running_loop().create_future()
    ctx.host.deliver(lambda: future.set_result(response))
    return await future


async def handle_leave_group(
    ctx: BrokerContext, header: RequestHeader, request: Any, client_host: str
) -> Any:
    version = header.api_version
    if version <= 2:
        identities: tuple[m.MemberIdentity, ...] = (m.MemberIdentity(request.member_id),)
    else:
        identities = tuple(
            m.MemberIdentity(x.member_id, _get(x, "group_instance_id"), _get(x, "reason"))
            for x in request.members
        )
    leave = m.LeaveGroupRequest(request.group_id, identities)
    r = ctx.host.call(lambda c: c.leave_group(_ctx(header, client_host), leave))
    if version <= 2:
        body: dict[str, Any] = {"throttle_time": 0, "error_code": r.single_member_error()}
    else:
        body = {
            "throttle_time": 0,
            "error_code": r.error,
            "members": [
                {"member_id": x.member_id, "group_instance_id": x.group_instance_id, "error_code": x.error}
                for x in r.members
            ],
        }
    return await _gated(ctx, build_response(13, version, body))


# === offsets ==============================================================================================


def _topic_name(ctx: BrokerContext, topic: Any) -> str | None:
    """The name of a request topic given by name (older versions) or by id (newer ones)."""
    name = _get(topic, "name")
    if name is not None:
        return str(name)
    topic_id = _get(topic, "topic_id")
    return None if topic_id is None else ctx.topics.topic_name_for_id(topic_id)


async def handle_offset_commit(
    ctx: BrokerContext, header: RequestHeader, request: Any, client_host: str
) -> Any:
    version = header.api_version
    by_id = version >= 10
    generation = _get(request, "generation_id_or_member_epoch", _get(request, "generation_id", -1))
    retention = _get(request, "retention_time")
    results: dict[tuple[int, int], int] = {}
    valid_topics = []
    for index, topic in enumerate(request.topics):
        name = _topic_name(ctx, topic)
        partitions = []
        count = ctx.topics.partition_count(name) if name is not None and ctx.topics.has_topic(name) else 0
        unknown = E.UNKNOWN_TOPIC_ID if by_id and name is None else E.UNKNOWN_TOPIC_OR_PARTITION
        for p in topic.partitions:
            if name is None or not 0 <= p.partition_index < count:
                results[(index, p.partition_index)] = unknown
            else:
                partitions.append(
                    m.OffsetCommitPartition(
                        p.partition_index,
                        p.committed_offset,
                        _get(p, "committed_leader_epoch", -1),
                        p.committed_metadata,
                    )
                )
        if partitions and name is not None:
            valid_topics.append((index, m.OffsetCommitTopic(name, tuple(partitions))))
    if valid_topics:
        commit = m.OffsetCommitRequest(
            group_id=request.group_id,
            generation_id=generation,
            member_id=_get(request, "member_id", ""),
            group_instance_id=_get(request, "group_instance_id"),
            topics=tuple(t for _, t in valid_topics),
            retention_time_ms=-1 if retention is None else _ms(retention),
        )
        r = ctx.host.call(lambda c: c.commit_offsets(_ctx(header, client_host), commit))
        for (index, _), result in zip(valid_topics, r.topics, strict=True):
            for p in result.partitions:
                results[(index, p.partition)] = p.error
    topics = [
        {
            "name": _get(topic, "name"),
            "topic_id": _get(topic, "topic_id"),
            "partitions": [
                {"partition_index": p.partition_index, "error_code": results[(index, p.partition_index)]}
                for p in topic.partitions
            ],
        }
        for index, topic in enumerate(request.topics)
    ]
    return await _gated(ctx, build_response(8, version, {"throttle_time": 0, "topics": topics}))


def _fetched_topics(ctx: BrokerContext, response: m.OffsetFetchResponse) -> list[dict[str, Any]]:
    return [
        {
            "name": t.name,
            "topic_id": ctx.topics.describe_topic(t.name).topic_id if ctx.topics.has_topic(t.name) else None,
            "partitions": [
                {
                    "partition_index": p.partition,
                    "committed_offset": p.offset,
                    "committed_leader_epoch": p.leader_epoch,
                    "metadata": p.metadata,
                    "error_code": p.error,
                }
                for p in t.partitions
            ],
        }
        for t in response.topics
    ]


async def handle_offset_fetch(
    ctx: BrokerContext, header: RequestHeader, request: Any, client_host: str
) -> Any:
    version = header.api_version
    require_stable = bool(_get(request, "require_stable", False))

    def fetch(group_id: str, topics: Any) -> list[dict[str, Any]]:
        if topics is None:
            wanted = None
        else:
            wanted = tuple(
                m.OffsetFetchTopic(_topic_name(ctx, t) or "", tuple(t.partition_indexes)) for t in topics
            )
        r = ctx.host.coordinator.fetch_offsets(
            _ctx(header, client_host), m.OffsetFetchRequest(group_id, wanted, require_stable)
        )
        out = _fetched_topics(ctx, r)
        if topics is not None:
            for entry, t in zip(out, topics, strict=True):
                entry["topic_id"] = _get(t, "topic_id")  # echo what was asked, as Kafka does
                if version >= 10 and _topic_name(ctx, t) is None:
                    for p in entry["partitions"]:
                        p["error_code"] = E.UNKNOWN_TOPIC_ID
        return out

    if version >= 8:
        groups = [
            {"group_id": g.group_id, "topics": fetch(g.group_id, _get(g, "topics")), "error_code": 0}
            for g in request.groups
        ]
        return await _gated(ctx, build_response(9, version, {"throttle_time": 0, "groups": groups}))
    body = {"throttle_time": 0, "topics": fetch(request.group_id, _get(request, "topics")), "error_code": 0}
    return await _gated(ctx, build_response(9, version, body))


# === group administration =================================================================================


async def handle_describe_groups(
    ctx: BrokerContext, header: RequestHeader, request: Any, client_host: str
) -> Any:
    include_ops = bool(_get(request, "include_authorized_operations", False))
    described = ctx.host.coordinator.describe_groups(_ctx(header, client_host), list(request.groups))
    groups = [
        {
            "error_code": g.error,
            "error_message": g.error_message,
            "group_id": g.group_id,
            "group_state": g.state,
            "protocol_type": g.protocol_type,
            "protocol_data": g.protocol_data,
            "members": [
                {
                    "member_id": x.member_id,
                    "group_instance_id": x.group_instance_id,
                    "client_id": x.client_id,
                    "client_host": x.client_host,
                    "member_metadata": x.metadata,
                    "member_assignment": x.assignment,
                }
                for x in g.members
            ],
            "authorized_operations": _GROUP_OPERATIONS if include_ops and not g.error else INT32_MIN,
        }
        for g in described
    ]
    return build_response(15, header.api_version, {"throttle_time": 0, "groups": groups})


async def handle_list_groups(
    ctx: BrokerContext, header: RequestHeader, request: Any, client_host: str
) -> Any:
    listed = ctx.host.coordinator.list_groups(
        _ctx(header, client_host),
        m.ListGroupsRequest(
            tuple(_get(request, "states_filter", ()) or ()), tuple(_get(request, "types_filter", ()) or ())
        ),
    )
    return build_response(
        16,
        header.api_version,
        {
            "throttle_time": 0,
            "error_code": listed.error,
            "groups": [
                {
                    "group_id": g.group_id,
                    "protocol_type": g.protocol_type,
                    "group_state": g.state,
                    "group_type": g.group_type,
                }
                for g in listed.groups
            ],
        },
    )


async def handle_delete_groups(
    ctx: BrokerContext, header: RequestHeader, request: Any, client_host: str
) -> Any:
    results = ctx.host.call(lambda c: c.delete_groups(_ctx(header, client_host), list(request.groups_names)))
    body = {"throttle_time": 0, "results": [{"group_id": r.group_id, "error_code": r.error} for r in results]}
    return await _gated(ctx, build_response(42, header.api_version, body))


# === configs (groups: the staticfleet extension; topics: the topic log) ===================================


def _config_entry(name: str, value: str | None, source: int, read_only: bool = False) -> dict[str, Any]:
    return {
        "name": name,
        "value": value,
        "read_only": read_only,
        "config_source": source,
        "is_sensitive": False,
        "synonyms": [],
        "config_type": 2 if name.endswith(("ms", "bytes", "partitions")) else 0,
        "documentation": None,
    }


async def handle_describe_configs(
    ctx: BrokerContext, header: RequestHeader, request: Any, client_host: str
) -> Any:
    results = []
    for resource in request.resources:
        kind, name = resource.resource_type, resource.resource_name
        keys = _get(resource, "configuration_keys")
        wanted = None if keys is None else set(keys)
        result: dict[str, Any] = {
            "error_code": 0,
            "error_message": None,
            "resource_type": kind,
            "resource_name": name,
        }
        if kind == RESOURCE_GROUP:
            configs = ctx.host.coordinator.describe_group_config(name)
            result["configs"] = [
                _config_entry(k, v, source=1)
                for k, v in sorted(configs.items())
                if wanted is None or k in wanted
            ]
        elif kind == RESOURCE_TOPIC:
            if not ctx.topics.has_topic(name):
                result.update(
                    error_code=E.UNKNOWN_TOPIC_OR_PARTITION, error_message=f"Topic {name} does not exist."
                )
                result["configs"] = []
            else:
                overrides = ctx.topics.describe_topic(name).configs
                result["configs"] = [
                    _config_entry(k, v, source=1 if k in overrides else 5)
                    for k, v in sorted(ctx.topics.topic_configs(name).items())
                    if wanted is None or k in wanted
                ]
        elif kind == RESOURCE_BROKER:
            result["configs"] = []
        else:
            result.update(
                error_code=E.INVALID_REQUEST, error_message=f"Unsupported resource type {kind}", configs=[]
            )
        results.append(result)
    return build_response(32, header.api_version, {"throttle_time": 0, "results": results})


_SET, _DELETE, _APPEND, _SUBTRACT = 0, 1, 2, 3


def _group_config_changes(current: dict[str, str], configs: Iterable[Any]) -> dict[str, str | None]:
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
            raise CoordinatorError(E.INVALID_REQUEST, f"unknown config operation {op}")
    return changes


async def handle_incremental_alter_configs(
    ctx: BrokerContext, header: RequestHeader, request: Any, client_host: str
) -> Any:
    validate_only = bool(request.validate_only)
    responses = []
    for resource in request.resources:
        kind, name = resource.resource_type, resource.resource_name
        error: int = 0
        message: str | None = None
        try:
            if kind == RESOURCE_GROUP:
                changes = _group_config_changes(
                    ctx.host.coordinator.describe_group_config(name), resource.configs
                )

                def alter(
                    c: GroupCoordinator, group: str = name, ch: dict[str, str | None] = changes
                ) -> None:
                    c.alter_group_config(group, ch, validate_only)

                ctx.host.call(alter)
            elif kind == RESOURCE_TOPIC:
                current = ctx.topics.describe_topic(name).configs if ctx.topics.has_topic(name) else {}
                topic_changes = _group_config_changes(dict(current), resource.configs)
                ctx.topics.alter_topic_configs(name, topic_changes, validate_only=validate_only)
            else:
                error, message = (
                    E.INVALID_REQUEST,
                    f"Altering configs of resource type {kind} is not supported",
                )
        except CoordinatorError as exc:
            error, message = exc.code, str(exc)
        except TopicLogError as exc:
            error, message = exc.error_code, str(exc)
        responses.append(
            {"error_code": error, "error_message": message, "resource_type": kind, "resource_name": name}
        )
    result = build_response(44, header.api_version, {"throttle_time": 0, "responses": responses})
    return await _gated(ctx, result)


# === topics ===============================================================================================


async def handle_create_topics(
    ctx: BrokerContext, header: RequestHeader, request: Any, client_host: str
) -> Any:
    validate_only = bool(_get(request, "validate_only", False))
    out = []
    for topic in request.topics:
        configs = {c.name: c.value for c in topic.configs}
        entry: dict[str, Any] = {
            "name": topic.name,
            "topic_id": uuid.UUID(int=0),
            "error_code": 0,
            "error_message": None,
            "configs": [],
        }
        try:
            if topic.assignments:
                if any(set(a.broker_ids) != {ctx.node_id} for a in topic.assignments):
                    raise _invalid_assignment(ctx)
                partitions = len(topic.assignments)
                replication = 1
            else:
                partitions, replication = topic.num_partitions, topic.replication_factor
            description = ctx.topics.create_topic(
                topic.name, partitions, replication, configs, validate_only=validate_only
            )
            effective = ctx.topics.topic_configs(topic.name) if not validate_only else {}
            entry.update(
                topic_id=description.topic_id,
                num_partitions=description.partitions,
                replication_factor=1,
                configs=[
                    {
                        "name": k,
                        "value": v,
                        "read_only": False,
                        "config_source": 1 if k in configs else 5,
                        "is_sensitive": False,
                    }
                    for k, v in sorted(effective.items())
                ],
            )
        except TopicLogError as exc:
            entry.update(
                error_code=exc.error_code, error_message=str(exc), num_partitions=-1, replication_factor=-1
            )
        out.append(entry)
    return build_response(19, header.api_version, {"throttle_time": 0, "topics": out})


class _AssignmentError(TopicLogError):
    error_code = 39  # INVALID_REPLICA_ASSIGNMENT


def _invalid_assignment(ctx: BrokerContext) -> TopicLogError:
    return _AssignmentError(f"replicas can only be placed on this broker (node {ctx.node_id})")


async def handle_delete_topics(
    ctx: BrokerContext, header: RequestHeader, request: Any, client_host: str
) -> Any:
    if header.api_version >= 6:
        wanted = [(_get(t, "name"), _get(t, "topic_id")) for t in request.topics]
    else:
        wanted = [(name, None) for name in request.topic_names]
    responses = []
    for name, topic_id in wanted:
        if name is None and topic_id is not None:
            name = ctx.topics.topic_name_for_id(topic_id)
        entry: dict[str, Any] = {"name": name, "topic_id": topic_id, "error_code": 0, "error_message": None}
        if name is None:
            entry.update(error_code=E.UNKNOWN_TOPIC_ID, error_message="Topic id not found")
        else:
            try:
                entry["topic_id"] = (
                    ctx.topics.describe_topic(name).topic_id if ctx.topics.has_topic(name) else topic_id
                )
                ctx.topics.delete_topic(name)
            except TopicLogError as exc:
                entry.update(error_code=exc.error_code, error_message=str(exc))
        responses.append(entry)
    return build_response(20, header.api_version, {"throttle_time": 0, "responses": responses})


async def handle_create_partitions(
    ctx: BrokerContext, header: RequestHeader, request: Any, client_host: str
) -> Any:
    results = []
    for topic in request.topics:
        entry: dict[str, Any] = {"name": topic.name, "error_code": 0, "error_message": None}
        try:
            if topic.assignments and any(set(a.broker_ids) != {ctx.node_id} for a in topic.assignments):
                raise _invalid_assignment(ctx)
            ctx.topics.create_partitions(topic.name, topic.count, validate_only=bool(request.validate_only))
        except TopicLogError as exc:
            entry.update(error_code=exc.error_code, error_message=str(exc))
        results.append(entry)
    return build_response(37, header.api_version, {"throttle_time": 0, "results": results})


# === data path ============================================================================================


async def handle_produce(ctx: BrokerContext, header: RequestHeader, request: Any, client_host: str) -> Any:
    # Transactions are not served: a transactional produce is refused.
    error_all = (
        int(E.TRANSACTIONAL_ID_AUTHORIZATION_FAILED) if _get(request, "transactional_id") is not None else 0
    )
    responses = []
    for topic in request.topic_data:
        partitions = []
        for p in topic.partition_data:
            entry: dict[str, Any] = {
                "index": p.index,
                "error_code": error_all,
                "base_offset": -1,
                "log_append_time": -1,
                "log_start_offset": -1,
                "record_errors": [],
                "error_message": None,
            }
            if not error_all:
                try:
                    appended = ctx.topics.append(topic.name, p.index, bytes(p.records or b""))
                    entry.update(
                        base_offset=appended.base_offset,
                        log_append_time=appended.log_append_time_ms,
                        log_start_offset=appended.log_start_offset,
                    )
                except TopicLogError as exc:
                    entry.update(error_code=exc.error_code, error_message=str(exc))
            partitions.append(entry)
        responses.append({"name": topic.name, "partition_responses": partitions})
    if int(request.acks) == 0:
        return None  # acks=0: the producer expects no answer at all
    return build_response(0, header.api_version, {"throttle_time": 0, "responses": responses})


def _fetch_one(ctx: BrokerContext, name: str, p: Any, budget: int) -> tuple[dict[str, Any], int]:
    entry: dict[str, Any] = {
        "partition_index": p.partition,
        "error_code": 0,
        "high_watermark": -1,
        "last_stable_offset": -1,
        "log_start_offset": -1,
        "aborted_transactions": None,
        "preferred_read_replica": -1,
        "records": None,
    }
    try:
        result = ctx.topics.read(
            name, p.partition, p.fetch_offset, min(budget, p.partition_max_bytes), min_one_batch=True
        )
    except TopicLogError as exc:
        entry["error_code"] = exc.error_code
        if ctx.topics.has_topic(name) and 0 <= p.partition < ctx.topics.partition_count(name):
            entry["high_watermark"] = ctx.topics.log_end_offset(name, p.partition)
            entry["log_start_offset"] = ctx.topics.log_start_offset(name, p.partition)
        return entry, 0
    entry.update(
        high_watermark=result.high_watermark,
        last_stable_offset=result.last_stable_offset,
        log_start_offset=result.log_start_offset,
        records=result.records,
    )
    return entry, len(result.records)


async def handle_fetch(ctx: BrokerContext, header: RequestHeader, request: Any, client_host: str) -> Any:
    version = header.api_version
    max_wait_s = max(0, _ms(request.max_wait)) / 1000
    min_bytes = max(0, int(request.min_bytes))
    max_bytes = int(_get(request, "max_bytes", 2**31 - 1))
    wanted: list[tuple[str | None, Any, Any]] = []
    for topic in request.topics:
        topic_id = _get(topic, "topic_id")
        name = _get(topic, "topic") if version < 13 else ctx.topics.topic_name_for_id(topic_id)
        wanted.append((name, topic_id, topic))

    def read_all() -> tuple[list[dict[str, Any]], int]:
        budget = max_bytes
        total = 0
        out = []
        for name, topic_id, topic in wanted:
            partitions = []
            for p in topic.partitions:
                if name is None:
                    partitions.append(
                        {
                            "partition_index": p.partition,
                            "error_code": E.UNKNOWN_TOPIC_ID,
                            "high_watermark": -1,
                            "last_stable_offset": -1,
                            "log_start_offset": -1,
                            "aborted_transactions": None,
                            "preferred_read_replica": -1,
                            "records": None,
                        }
                    )
                    continue
                entry, size = _fetch_one(ctx, name, p, budget if total == 0 else max(budget, 0))
                budget -= size
                total += size
                partitions.append(entry)
            out.append({"topic": name, "topic_id": topic_id, "partitions": partitions})
        return out, total

    responses, total = read_all()
    if total < min_bytes and max_wait_s > 0:
        positions = {
            (name, p.partition): p.fetch_offset
            for name, _, topic in wanted
            if name is not None
            for p in topic.partitions
        }
        if positions and await ctx.topics.wait_for_data(positions, max_wait_s, min_bytes=min_bytes):
            responses, total = read_all()
        elif not positions:
            await asyncio.sleep(max_wait_s)
    return build_response(
        1, version, {"throttle_time": 0, "error_code": 0, "session_id": 0, "responses": responses}
    )


async def handle_list_offsets(
    ctx: BrokerContext, header: RequestHeader, request: Any, client_host: str
) -> Any:
    topics = []
    for topic in request.topics:
        partitions = []
        for p in topic.partitions:
            entry: dict[str, Any] = {
                "partition_index": p.partition_index,
                "error_code": 0,
                "timestamp": -1,
                "offset": -1,
                "leader_epoch": -1,
            }
            try:
                found = ctx.topics.list_offset(topic.name, p.partition_index, p.timestamp)
                entry.update(
                    timestamp=found.timestamp,
                    offset=found.offset,
                    leader_epoch=0 if found.offset >= 0 else -1,
                )
            except TopicLogError as exc:
                entry["error_code"] = exc.error_code
            partitions.append(entry)
        topics.append({"name": topic.name, "partitions": partitions})
    return build_response(2, header.api_version, {"throttle_time": 0, "topics": topics})


async def handle_init_producer_id(
    ctx: BrokerContext, header: RequestHeader, request: Any, client_host: str
) -> Any:
    if _get(request, "transactional_id") is not None:
        body = {"error_code": E.COORDINATOR_NOT_AVAILABLE, "producer_id": -1, "producer_epoch": -1}
    else:
        body = {"error_code": 0, "producer_id": next(iter(ctx.producer_ids)), "producer_epoch": 0}
    return build_response(22, header.api_version, {"throttle_time": 0, **body})


# === the table ============================================================================================

SUPPORTED: dict[int, tuple[int, int]] = {
    0: (3, 12),  # Produce
    1: (4, 12),  # Fetch (topic names; v13+ use topic ids)
    2: (1, 10),  # ListOffsets
    3: (0, 12),  # Metadata
    8: (2, 10),  # OffsetCommit
    9: (1, 10),  # OffsetFetch
    10: (0, 6),  # FindCoordinator
    11: (0, 9),  # JoinGroup
    12: (0, 4),  # Heartbeat
    13: (0, 5),  # LeaveGroup
    14: (0, 5),  # SyncGroup
    15: (0, 6),  # DescribeGroups
    16: (0, 5),  # ListGroups
    18: (0, 4),  # ApiVersions
    19: (2, 7),  # CreateTopics
    20: (1, 6),  # DeleteTopics
    22: (0, 5),  # InitProducerId (idempotent producers; no transactions)
    32: (1, 4),  # DescribeConfigs
    37: (0, 3),  # CreatePartitions
    42: (0, 2),  # DeleteGroups
    44: (0, 1),  # IncrementalAlterConfigs
    60: (0, 1),  # DescribeCluster
}

# Handlers taking the client's address (for member client hosts) get it as a fourth argument.
HANDLERS: dict[int, Callable[..., Awaitable[Any]]] = {
    0: handle_produce,
    1: handle_fetch,
    2: handle_list_offsets,
    3: handle_metadata,
    8: handle_offset_commit,
    9: handle_offset_fetch,
    10: handle_find_coordinator,
    11: handle_join_group,
    12: handle_heartbeat,
    13: handle_leave_group,
    14: handle_sync_group,
    15: handle_describe_groups,
    16: handle_list_groups,
    18: handle_api_versions,
    19: handle_create_topics,
    20: handle_delete_topics,
    22: handle_init_producer_id,
    32: handle_describe_configs,
    37: handle_create_partitions,
    42: handle_delete_groups,
    44: handle_incremental_alter_configs,
    60: handle_describe_cluster,
}
TAKES_CLIENT_HOST = frozenset({0, 1, 2, 8, 9, 11, 12, 13, 14, 15, 16, 19, 20, 22, 32, 37, 42, 44})

API_NAMES = {
    0: "Produce",
    1: "Fetch",
    2: "ListOffsets",
    3: "Metadata",
    8: "OffsetCommit",
    9: "OffsetFetch",
    10: "FindCoordinator",
    11: "JoinGroup",
    12: "Heartbeat",
    13: "LeaveGroup",
    14: "SyncGroup",
    15: "DescribeGroups",
    16: "ListGroups",
    18: "ApiVersions",
    19: "CreateTopics",
    20: "DeleteTopics",
    22: "InitProducerId",
    32: "DescribeConfigs",
    37: "CreatePartitions",
    42: "DeleteGroups",
    44: "IncrementalAlterConfigs",
    60: "DescribeCluster",
}


def is_supported(api_key: int, api_version: int) -> bool:
    bounds = SUPPORTED.get(api_key)
    return bounds is not None and bounds[0] <= api_version <= bounds[1]
