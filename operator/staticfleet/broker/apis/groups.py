"""The group APIs: membership (JoinGroup, SyncGroup, Heartbeat, LeaveGroup) and administration
(DescribeGroups, ListGroups, DeleteGroups)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Hashable
from typing import Any, Final, Generic, TypeVar

from kio.schema.delete_groups.v2 import request as delete_groups_req
from kio.schema.delete_groups.v2 import response as delete_groups_res
from kio.schema.describe_groups.v6 import request as describe_groups_req
from kio.schema.describe_groups.v6 import response as describe_groups_res
from kio.schema.heartbeat.v4 import request as heartbeat_req
from kio.schema.heartbeat.v4 import response as heartbeat_res
from kio.schema.join_group.v9 import request as join_group_req
from kio.schema.join_group.v9 import response as join_group_res
from kio.schema.leave_group.v2 import request as leave_group_v2_req
from kio.schema.leave_group.v2 import response as leave_group_v2_res
from kio.schema.leave_group.v5 import request as leave_group_req
from kio.schema.leave_group.v5 import response as leave_group_res
from kio.schema.list_groups.v5 import request as list_groups_req
from kio.schema.list_groups.v5 import response as list_groups_res
from kio.schema.sync_group.v5 import request as sync_group_req
from kio.schema.sync_group.v5 import response as sync_group_res
from kio.schema.types import GroupId
from kio.static.primitive import i32
from kio.static.protocol import ResponsePayload

from staticfleet.broker.apis.common import INT32_MIN, E, gated, ms
from staticfleet.broker.codec import EncodedBody, TrailingFieldBody, encode_body, for_version
from staticfleet.broker.registry import NO_THROTTLE, ApiError, BrokerContext, Request, Requires, kafka_api
from staticfleet.broker.security.acl import AclOperation, ResourceType
from staticfleet.coordinator import messages as m

K = TypeVar("K", bound=Hashable)
T = TypeVar("T")
JoinGroupRequest = join_group_req.JoinGroupRequest
SyncGroupRequest = sync_group_req.SyncGroupRequest
HeartbeatRequest = heartbeat_req.HeartbeatRequest
LeaveGroupRequest = leave_group_req.LeaveGroupRequest
DescribeGroupsRequest = describe_groups_req.DescribeGroupsRequest
ListGroupsRequest = list_groups_req.ListGroupsRequest
DeleteGroupsRequest = delete_groups_req.DeleteGroupsRequest
# AclOperation codes: what an unauthenticated single-node broker allows on a group.
_GROUP_OPERATIONS = i32((1 << 3) | (1 << 6) | (1 << 8))  # READ, DELETE, DESCRIBE


def _join_group_error(request: Request[JoinGroupRequest], error: ApiError) -> ResponsePayload:
    return join_group_res.JoinGroupResponse(
        throttle_time=NO_THROTTLE,
        error_code=error.code,
        generation_id=i32(-1),
        protocol_type=None,
        protocol_name=None if request.version >= 7 else "",
        leader="",
        skip_assignment=False,
        member_id="",
        members=(),
    )


@kafka_api(
    "join_group",
    (0, 9),
    JoinGroupRequest,
    error=_join_group_error,
    acl=(Requires.request(AclOperation.READ, ResourceType.GROUP, lambda r: r.body.group_id),),
    timed=True,
)
async def handle_join_group(
    ctx: BrokerContext, request: Request[JoinGroupRequest]
) -> join_group_res.JoinGroupResponse | EncodedBody:
    body = request.body
    session_timeout = ms(body.session_timeout)
    join = m.JoinGroupRequest(
        group_id=body.group_id,
        session_timeout_ms=session_timeout,
        # v0 has no rebalance timeout: the session timeout stands in for it, as in Kafka.
        rebalance_timeout_ms=ms(body.rebalance_timeout) if request.version >= 1 else session_timeout,
        member_id=body.member_id,
        group_instance_id=body.group_instance_id,
        protocol_type=body.protocol_type,
        protocols=tuple(m.Protocol(p.name, bytes(p.metadata)) for p in body.protocols),
        reason=body.reason,
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
        error_code=r.error,
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
        error_code=r.error,
        protocol_type=r.protocol_type,
        protocol_name=r.protocol_name,
        assignment=b"",
    )
    return TrailingFieldBody.of(for_version(response, version), "assignment")


def _sync_group_error(request: Request[SyncGroupRequest], error: ApiError) -> ResponsePayload:
    return sync_group_res.SyncGroupResponse(
        throttle_time=NO_THROTTLE,
        error_code=error.code,
        protocol_type=None,
        protocol_name=None,
        assignment=b"",
    )


def _protocol_given(request: Request[SyncGroupRequest]) -> bool:
    """From v5 a SyncGroup names its protocol; one that does not is refused first
    (INCONSISTENT_GROUP_PROTOCOL), before READ is checked."""
    return request.version < 5 or (
        request.body.protocol_type is not None and request.body.protocol_name is not None
    )


@kafka_api(
    "sync_group",
    (0, 5),
    SyncGroupRequest,
    error=_sync_group_error,
    acl=(
        Requires.request(
            AclOperation.READ, ResourceType.GROUP, lambda r: r.body.group_id, applies=_protocol_given
        ),
    ),
    timed=True,
)
async def handle_sync_group(
    ctx: BrokerContext, request: Request[SyncGroupRequest]
) -> sync_group_res.SyncGroupResponse | EncodedBody:
    body = request.body
    sync = m.SyncGroupRequest(
        group_id=body.group_id,
        generation_id=body.generation_id,
        member_id=body.member_id,
        group_instance_id=body.group_instance_id,
        protocol_type=body.protocol_type,
        protocol_name=body.protocol_name,
        assignments=tuple(m.SyncGroupAssignment(a.member_id, bytes(a.assignment)) for a in body.assignments),
    )
    future: asyncio.Future[m.SyncGroupResponse] = asyncio.get_running_loop().create_future()
    ctx.host.call(lambda c: c.sync_group(request.context(), sync, ctx.host.responder(future)))
    r = await future
    return _sync_body(request.version, r).with_field(r.assignment)


# Room for every pair of version (0 to 4) and error code, so this one never clears.
_HEARTBEAT_BODIES: Final = _ClearedWhenFull[tuple[int, E], EncodedBody](5 * len(E))


def _heartbeat_body(version: int, error: E) -> EncodedBody:
    """Heartbeat answers are tiny and few: encode each (version, error) pair once."""
    return _HEARTBEAT_BODIES.get((version, error), lambda: _encode_heartbeat_body(version, error))


def _encode_heartbeat_body(version: int, error: E) -> EncodedBody:
    response = heartbeat_res.HeartbeatResponse(throttle_time=NO_THROTTLE, error_code=error)
    return encode_body(for_version(response, version))


def _heartbeat_error(request: Request[HeartbeatRequest], error: ApiError) -> ResponsePayload:
    return heartbeat_res.HeartbeatResponse(throttle_time=NO_THROTTLE, error_code=error.code)


@kafka_api(
    "heartbeat",
    (0, 4),
    HeartbeatRequest,
    error=_heartbeat_error,
    acl=(Requires.request(AclOperation.READ, ResourceType.GROUP, lambda r: r.body.group_id),),
)
async def handle_heartbeat(ctx: BrokerContext, request: Request[HeartbeatRequest]) -> EncodedBody:
    body = request.body
    hb = m.HeartbeatRequest(body.group_id, body.generation_id, body.member_id, body.group_instance_id)
    # A heartbeat writes nothing and only pushes timers later, so the host needs no after_change().
    response = ctx.host.coordinator.heartbeat(request.context(), hb)
    return await gated(ctx, _heartbeat_body(request.version, response.error))


def _leave_group_error(request: Request[LeaveGroupRequest], error: ApiError) -> ResponsePayload:
    if request.version < 3:
        return leave_group_v2_res.LeaveGroupResponse(throttle_time=NO_THROTTLE, error_code=error.code)
    return leave_group_res.LeaveGroupResponse(throttle_time=NO_THROTTLE, error_code=error.code, members=())


@kafka_api(
    "leave_group",
    (0, 5),
    LeaveGroupRequest,
    error=_leave_group_error,
    # READ (not DELETE), also for an admin removing static members, as in Kafka.
    acl=(Requires.request(AclOperation.READ, ResourceType.GROUP, lambda r: r.body.group_id),),
)
async def handle_leave_group(ctx: BrokerContext, request: Request[LeaveGroupRequest]) -> ResponsePayload:
    single = request.version < 3  # one member by id; v3+ carry a batch
    if single:
        member_id = request.shaped(leave_group_v2_req.LeaveGroupRequest).member_id
        identities: tuple[m.MemberIdentity, ...] = (m.MemberIdentity(member_id),)
    else:
        identities = tuple(
            m.MemberIdentity(x.member_id, x.group_instance_id, x.reason) for x in request.body.members
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
            error_code=r.error,
            members=tuple(
                leave_group_res.MemberResponse(
                    member_id=x.member_id, group_instance_id=x.group_instance_id, error_code=x.error
                )
                for x in r.members
            ),
        )
    return await gated(ctx, response)


def _describe_groups_error(request: Request[DescribeGroupsRequest], error: ApiError) -> ResponsePayload:
    return describe_groups_res.DescribeGroupsResponse(
        throttle_time=NO_THROTTLE, groups=tuple(described_error(g, error.code) for g in request.body.groups)
    )


@kafka_api(
    "describe_groups",
    (0, 6),
    DescribeGroupsRequest,
    error=_describe_groups_error,
    acl=(Requires.each(AclOperation.DESCRIBE, ResourceType.GROUP, lambda ctx, r: r.body.groups),),
)
async def handle_describe_groups(
    ctx: BrokerContext, request: Request[DescribeGroupsRequest]
) -> describe_groups_res.DescribeGroupsResponse:
    include_ops = request.body.include_authorized_operations
    allowed = [g for g in request.body.groups if request.allows(AclOperation.DESCRIBE, ResourceType.GROUP, g)]
    refused = [g for g in request.body.groups if g not in allowed]
    described = ctx.host.coordinator.describe_groups(request.context(), allowed) if allowed else []
    res = describe_groups_res

    def operations(group_id: str) -> i32:
        if not request.grants.enabled:
            return _GROUP_OPERATIONS
        return i32(request.grants.authorized_operations(ResourceType.GROUP, group_id))

    return res.DescribeGroupsResponse(
        throttle_time=NO_THROTTLE,
        # Groups the caller may not describe come first, as Kafka lists them.
        groups=tuple(described_error(g, E.group_authorization_failed) for g in refused)
        + tuple(
            res.DescribedGroup(
                error_code=g.error,
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


def _list_groups_error(request: Request[ListGroupsRequest], error: ApiError) -> ResponsePayload:
    return list_groups_res.ListGroupsResponse(throttle_time=NO_THROTTLE, error_code=error.code, groups=())


@kafka_api(
    "list_groups",
    (0, 5),
    ListGroupsRequest,
    error=_list_groups_error,
    # Without DESCRIBE on the cluster the list holds only the groups the caller may describe.
    acl=(Requires.each(AclOperation.DESCRIBE, ResourceType.GROUP, cluster_grants=True),),
)
async def handle_list_groups(
    ctx: BrokerContext, request: Request[ListGroupsRequest]
) -> list_groups_res.ListGroupsResponse:
    listed = ctx.host.coordinator.list_groups(
        request.context(),
        m.ListGroupsRequest(tuple(request.body.states_filter), tuple(request.body.types_filter)),
    )
    return list_groups_res.ListGroupsResponse(
        throttle_time=NO_THROTTLE,
        error_code=listed.error,
        groups=tuple(
            list_groups_res.ListedGroup(
                group_id=GroupId(g.group_id),
                protocol_type=g.protocol_type,
                group_state=g.state,
                group_type=g.group_type,
            )
            for g in listed.groups
            if request.allows(AclOperation.DESCRIBE, ResourceType.GROUP, g.group_id)
        ),
    )


def _delete_groups_error(request: Request[DeleteGroupsRequest], error: ApiError) -> ResponsePayload:
    return delete_groups_res.DeleteGroupsResponse(
        throttle_time=NO_THROTTLE,
        results=tuple(
            delete_groups_res.DeletableGroupResult(group_id=g, error_code=error.code)
            for g in request.body.groups_names
        ),
    )


@kafka_api(
    "delete_groups",
    (0, 2),
    DeleteGroupsRequest,
    error=_delete_groups_error,
    acl=(Requires.each(AclOperation.DELETE, ResourceType.GROUP, lambda ctx, r: r.body.groups_names),),
)
async def handle_delete_groups(
    ctx: BrokerContext, request: Request[DeleteGroupsRequest]
) -> delete_groups_res.DeleteGroupsResponse:
    names = list(dict.fromkeys(request.body.groups_names))
    allowed = [g for g in names if request.allows(AclOperation.DELETE, ResourceType.GROUP, g)]
    refused = [g for g in names if g not in allowed]
    results = ctx.host.call(lambda c: c.delete_groups(request.context(), allowed)) if allowed else []
    response = delete_groups_res.DeleteGroupsResponse(
        throttle_time=NO_THROTTLE,
        # Refused groups come after the coordinator's answers, as Kafka appends them.
        results=tuple(
            delete_groups_res.DeletableGroupResult(group_id=GroupId(r.group_id), error_code=r.error)
            for r in results
        )
        + tuple(
            delete_groups_res.DeletableGroupResult(
                group_id=GroupId(g), error_code=E.group_authorization_failed
            )
            for g in refused
        ),
    )
    return await gated(ctx, response)


def described_error(group_id: str, error: E) -> describe_groups_res.DescribedGroup:
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
