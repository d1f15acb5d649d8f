"""The wire codec around kio: headers, unknown tagged fields, version-aware responses, length checks."""

from __future__ import annotations

import dataclasses
import datetime
import io
import struct
from typing import Any

import pytest
from kio.schema.errors import ErrorCode
from kio.schema.heartbeat.v4.request import HeartbeatRequest
from kio.schema.join_group.v9.request import JoinGroupRequest, JoinGroupRequestProtocol
from kio.schema.join_group.v9.response import JoinGroupResponse, JoinGroupResponseMember
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2
from kio.schema.sync_group.v5.response import SyncGroupResponse
from kio.schema.types import GroupId
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i16, i32, i32Timedelta

from staticfleet.broker.apis import groups
from staticfleet.broker.codec import (
    FrameError,
    TrailingFieldBody,
    carry,
    encode_body,
    encode_response,
    for_version,
    parse_request,
)
from staticfleet.broker.registry import NO_THROTTLE, UnsupportedVersion, is_supported
from staticfleet.coordinator import messages as coordinator_messages


def _encode(entity: Any) -> bytes:
    buffer = io.BytesIO()
    entity_writer(type(entity))(buffer, entity)
    return buffer.getvalue()


def _header(api_key: int, version: int, correlation: int = 42, client: str | None = "c") -> bytes:
    return _encode(
        RequestHeaderV2(
            request_api_key=i16(api_key),
            request_api_version=i16(version),
            correlation_id=i32(correlation),
            client_id=client,
        )
    )


def _with_unknown_tag(encoded: bytes, tag: int = 99, payload: bytes = b"zz") -> bytes:
    """Replace an empty trailing tagged-field section (one 0x00 byte) by one holding an unknown tag."""
    assert encoded.endswith(b"\x00")
    return encoded[:-1] + bytes([1, tag, len(payload)]) + payload


def test_unknown_tagged_fields_in_the_body_are_skipped() -> None:
    body = _encode(
        HeartbeatRequest(group_id=GroupId("g"), generation_id=i32(3), member_id="m", group_instance_id="i")
    )
    header, request = parse_request(_header(12, 4) + _with_unknown_tag(body), is_supported)
    assert (header.api_key, header.api_version, header.correlation_id, header.client_id) == (12, 4, 42, "c")
    assert (request.group_id, request.generation_id, request.member_id, request.group_instance_id) == (
        "g",
        3,
        "m",
        "i",
    )


def test_unknown_tagged_fields_in_the_header_and_in_nested_structs_are_skipped() -> None:
    join = JoinGroupRequest(
        group_id=GroupId("g"),
        session_timeout=i32Timedelta.parse(datetime.timedelta(seconds=10)),
        rebalance_timeout=i32Timedelta.parse(datetime.timedelta(seconds=30)),
        member_id="",
        group_instance_id="i",
        protocol_type="consumer",
        protocols=(JoinGroupRequestProtocol(name="range", metadata=b"\x00\x01"),),
        reason=None,
    )
    body = bytearray(_encode(join))
    # The protocol struct's own tagged-field section sits right after its metadata bytes.
    at = bytes(body).index(b"\x03\x00\x01") + 3  # compact bytes: length 2+1, then the two metadata bytes
    body[at : at + 1] = bytes([1, 7, 1]) + b"x"
    frame = _with_unknown_tag(_header(11, 9)) + _with_unknown_tag(bytes(body), tag=12)
    _, request = parse_request(frame, is_supported)
    assert request == join


def test_an_unsupported_version_is_reported_with_its_correlation_id() -> None:
    body = _encode(
        HeartbeatRequest(group_id=GroupId("g"), generation_id=i32(1), member_id="m", group_instance_id=None)
    )
    with pytest.raises(UnsupportedVersion) as raised:
        parse_request(_header(12, 9, correlation=77) + body, is_supported)
    assert (raised.value.api_key, raised.value.api_version, raised.value.correlation_id) == (12, 9, 77)


def test_garbage_after_a_valid_header_is_a_frame_error() -> None:
    with pytest.raises(FrameError):
        parse_request(_header(12, 4) + b"\x05\xff", is_supported)


def _join_with_no_protocols() -> tuple[bytearray, int]:
    """A JoinGroup v9 body and where its empty protocol array's count stands."""
    body = bytearray(
        _encode(
            JoinGroupRequest(
                group_id=GroupId("g"),
                session_timeout=i32Timedelta.parse(datetime.timedelta(seconds=10)),
                rebalance_timeout=i32Timedelta.parse(datetime.timedelta(seconds=30)),
                member_id="",
                group_instance_id=None,
                protocol_type="consumer",
                protocols=(),
                reason=None,
            )
        )
    )
    return body, body.index(b"consumer") + len(b"consumer")


def test_an_array_count_larger_than_the_frame_is_refused_before_kio_allocates() -> None:
    # JoinGroup v9 whose protocol array claims a million entries in a few bytes.
    body, empty_array = _join_with_no_protocols()
    body[empty_array : empty_array + 1] = b"\xc0\x84\x3d"  # uvarint 1,000,001 = 1,000,000 elements
    with pytest.raises(FrameError, match="cannot fit"):
        parse_request(_header(11, 9) + bytes(body), is_supported)


def test_a_null_array_the_schema_never_allows_null_is_a_frame_error() -> None:
    """kio would read it as None and the handler would meet it; Kafka's reader refuses it, and so the
    connection closes."""
    body, empty_array = _join_with_no_protocols()
    body[empty_array : empty_array + 1] = b"\x00"  # a compact array's null
    with pytest.raises(FrameError, match="never null"):
        parse_request(_header(11, 9) + bytes(body), is_supported)
    # Before flexible versions the null is a count of -1: Metadata v0's topics may not be null ...
    with pytest.raises(FrameError, match="never null"):
        parse_request(_legacy_header(3, 0) + struct.pack(">i", -1), is_supported)
    # ... Metadata v1's may (all topics).
    _, metadata = parse_request(_legacy_header(3, 1) + struct.pack(">i", -1), is_supported)
    assert metadata.topics is None


def test_a_request_is_read_into_the_newest_version_with_the_protocols_defaults() -> None:
    _, old = parse_request(_legacy_header(11, 0) + _encode(_join_v0()), is_supported)
    newest = carry(old, JoinGroupRequest)
    assert (newest.group_id, newest.group_instance_id, newest.reason) == ("g", None, None)
    assert newest.rebalance_timeout == i32Timedelta.parse(datetime.timedelta(milliseconds=-1))
    assert carry(newest, type(old)) == old


def _legacy_header(api_key: int, version: int) -> bytes:
    return struct.pack(">hhih", api_key, version, 42, 1) + b"c"


def _join_v0() -> Any:
    from kio.schema.join_group.v0.request import JoinGroupRequest as JoinV0
    from kio.schema.join_group.v0.request import JoinGroupRequestProtocol as ProtocolV0

    return JoinV0(
        group_id=GroupId("g"),
        session_timeout=i32Timedelta.parse(datetime.timedelta(seconds=10)),
        member_id="",
        protocol_type="consumer",
        protocols=(ProtocolV0(name="range", metadata=b"m"),),
    )


def test_responses_keep_only_the_fields_of_their_version() -> None:
    values = JoinGroupResponse(throttle_time=NO_THROTTLE, error_code=ErrorCode.none, generation_id=i32(2),
              protocol_type="consumer", protocol_name="range", leader="a", skip_assignment=True,
              member_id="a", members=(JoinGroupResponseMember(member_id="a", group_instance_id="i",
              metadata=b""),))  # fmt: skip
    v0: Any = for_version(values, 0)
    v9: Any = for_version(values, 9)
    assert not hasattr(v0, "skip_assignment") and not hasattr(v0.members[0], "group_instance_id")
    assert v9.skip_assignment is True and v9.members[0].group_instance_id == "i"


def test_null_protocol_name_becomes_empty_string_where_a_version_cannot_carry_null() -> None:
    def unknown_member(version: int) -> Any:
        response = JoinGroupResponse(throttle_time=NO_THROTTLE, error_code=ErrorCode(25), protocol_name=None,
                                     leader="", member_id="", members=())  # fmt: skip
        return for_version(response, version)

    assert unknown_member(6).protocol_name == ""
    assert unknown_member(7).protocol_name is None


def test_api_versions_responses_always_use_header_v0() -> None:
    from kio.schema.api_versions.v3.response import ApiVersionsResponse

    frame = encode_response(
        5, ApiVersionsResponse(error_code=ErrorCode.none, api_keys=(), throttle_time=NO_THROTTLE)
    )
    (size, correlation) = struct.unpack_from(">ii", frame, 0)
    assert (size, correlation) == (len(frame) - 4, 5)
    decoded, _ = entity_reader(ApiVersionsResponse)(frame[8:], 0)  # no tagged section after the id
    assert int(decoded.error_code) == 0


# Member ids and assignments of every length class: empty, non-ASCII, and long enough that a compact
# length takes two varint bytes.
_MEMBER_IDS = ("", "m-1", "consumer-ü-7f3a", "x" * 200)
_ASSIGNMENTS = (b"", b"\x00\x01\x00\x00\x00\x01", bytes(range(256)) * 2)


@pytest.mark.parametrize("version", range(10))
@pytest.mark.parametrize(
    "shared",
    [
        coordinator_messages.JoinGroupResponse(
            generation_id=7, protocol_type="consumer", protocol_name="range", leader="m-0"
        ),
        coordinator_messages.JoinGroupResponse(
            generation_id=3, protocol_type=None, protocol_name="", leader="", skip_assignment=True
        ),
        coordinator_messages.JoinGroupResponse(error=ErrorCode.rebalance_in_progress, leader=None),
    ],
)
def test_a_followers_join_answer_is_the_same_bytes_as_kio_writes(
    version: int, shared: coordinator_messages.JoinGroupResponse
) -> None:
    protocol_name = None if version >= 7 and shared.protocol_name == "" else shared.protocol_name
    body = groups._join_body(version, shared, protocol_name)
    for member_id in _MEMBER_IDS:
        expected = encode_body(for_version(groups._join_response(shared, protocol_name, member_id), version))
        written = body.with_field(member_id.encode("utf-8"))
        assert written.body == expected.body
        assert written.flexible_header == expected.flexible_header
        assert getattr(written.response, "error_code") == getattr(expected.response, "error_code")  # noqa: B009


@pytest.mark.parametrize("version", range(6))
@pytest.mark.parametrize(
    "shared",
    [
        coordinator_messages.SyncGroupResponse(protocol_type="consumer", protocol_name="range"),
        coordinator_messages.SyncGroupResponse(error=ErrorCode.rebalance_in_progress),
    ],
)
def test_a_sync_answer_is_the_same_bytes_as_kio_writes(
    version: int, shared: coordinator_messages.SyncGroupResponse
) -> None:
    for assignment in _ASSIGNMENTS:
        r = dataclasses.replace(shared, assignment=assignment)
        expected = encode_body(
            for_version(
                SyncGroupResponse(
                    throttle_time=NO_THROTTLE,
                    error_code=ErrorCode(r.error),
                    protocol_type=r.protocol_type,
                    protocol_name=r.protocol_name,
                    assignment=assignment,
                ),
                version,
            )
        )
        written = groups._sync_body(version, r).with_field(assignment)
        assert written.body == expected.body
        assert written.flexible_header == expected.flexible_header


def test_a_trailing_field_that_is_not_last_is_refused() -> None:
    response = JoinGroupResponse(
        throttle_time=NO_THROTTLE,
        error_code=ErrorCode.none,
        generation_id=i32(1),
        protocol_type="consumer",
        protocol_name="range",
        leader="",
        skip_assignment=False,
        member_id="m",
        members=(),
    )
    with pytest.raises(ValueError, match="leader is not the last field"):
        TrailingFieldBody.of(response, "leader", empty_arrays=1)
