"""Error answers during SASL authentication."""

from __future__ import annotations

from kio.schema.describe_groups.v6 import response as describe_groups_res
from kio.schema.heartbeat.v4 import response as heartbeat_res
from kio.schema.join_group.v9 import response as join_group_res
from kio.schema.leave_group.v2 import response as leave_group_v2_res
from kio.schema.leave_group.v5 import response as leave_group_res
from kio.schema.offset_commit.v9 import response as offset_commit_v9_res
from kio.schema.sync_group.v5 import response as sync_group_res
from kio.static.primitive import i32
from kio.static.protocol import ResponsePayload

from staticfleet.broker import registry
from staticfleet.broker.apis.common import E
from staticfleet.broker.apis.groups import described_error
from staticfleet.broker.codec import FrameError, encode_body, for_version, frame_body, parse_request
from staticfleet.broker.registry import NO_THROTTLE, UnsupportedVersion


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
            groups=tuple(described_error(g, error) for g in body.groups),
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
