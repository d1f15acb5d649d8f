"""The conformance driver on its own: codecs, request builders, normaliser, parked requests (no broker)."""

from __future__ import annotations

import asyncio
import datetime
import io
import struct
import uuid
from collections.abc import Awaitable, Callable
from dataclasses import replace
from typing import Any

import pytest
from kio.schema.consumer_group_describe.v1 import response as describe_v1_response
from kio.schema.consumer_group_heartbeat.v1 import response as heartbeat_v1_response
from kio.schema.errors import ErrorCode
from kio.schema.heartbeat.v4.response import HeartbeatResponse
from kio.schema.join_group.v9.response import JoinGroupResponse, JoinGroupResponseMember
from kio.schema.request_header.v2.header import RequestHeader
from kio.schema.response_header.v1.header import ResponseHeader
from kio.schema.types import GroupId, TopicName
from kio.serial import entity_reader, entity_writer
from kio.static.primitive import i8, i32, i32Timedelta

from conformance import driver as d
from conformance.kafka_broker import GroupSettings
from conformance.report import compact
from e2e.localcluster.ports import free_port


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_subscription_round_trip(version: int) -> None:
    owned = (("t1", (0, 2)),) if version >= 1 else ()
    original = d.Subscription(
        topics=("t1", "t2"),
        user_data=b"\x01",
        owned_partitions=owned,
        generation_id=7 if version >= 2 else -1,
        rack_id="r1" if version >= 3 else None,
        version=version,
    )
    data = d.encode_subscription(original)
    assert struct.unpack(">h", data[:2]) == (version,)
    assert d.decode_subscription(data) == original


@pytest.mark.parametrize("version", [0, 1, 2, 3])
def test_assignment_round_trip(version: int) -> None:
    original = d.Assignment(partitions=(("t1", (0, 1)), ("t2", (3,))), user_data=None, version=version)
    assert d.decode_assignment(d.encode_assignment(original)) == original


def test_subscription_v0_bytes_match_the_java_layout() -> None:
    # int16 version, array of strings (int32 count, int16 length + bytes), nullable bytes (-1 = null).
    assert d.subscription("t1") == b"\x00\x00" + b"\x00\x00\x00\x01" + b"\x00\x02t1" + b"\xff\xff\xff\xff"


def test_join_group_builder_follows_the_version() -> None:
    v0 = d.join_group(0, "g", protocols=(("range", b"m"),), session_timeout_ms=10_000, rebalance_timeout_ms=5)
    assert not hasattr(v0, "rebalance_timeout")
    v9 = d.join_group(9, "g", instance_id="i", protocols=(("range", b"m"),), reason="r")
    assert v9.__version__ == 9
    assert getattr(v9, "group_instance_id") == "i"  # noqa: B009
    with pytest.raises(ValueError, match="group_instance_id"):
        d.join_group(4, "g", instance_id="i", protocols=(("range", b"m"),))


def test_leave_group_builder_single_or_batch() -> None:
    assert getattr(d.leave_group(2, "g", member_id="m"), "member_id") == "m"  # noqa: B009
    batch = d.leave_group(5, "g", members=[("", "A", "bye"), ("m", None)])
    assert [(m.member_id, m.group_instance_id, m.reason) for m in getattr(batch, "members")] == [  # noqa: B009
        ("", "A", "bye"),
        ("m", None, None),
    ]
    with pytest.raises(ValueError):
        d.leave_group(2, "g", members=[("", "A")])


def test_builders_cover_every_version_kafka_4_serves() -> None:
    for version in range(10):
        d.join_group(version, "g", protocols=(("range", b"m"),))
    for version in range(6):
        d.sync_group(version, "g", generation=1, member_id="m")
        if version < 3:
            d.leave_group(version, "g", member_id="m")
        else:
            d.leave_group(version, "g", members=[("", "A")])
    for version in range(5):
        d.heartbeat(version, "g", generation=1, member_id="m")
        d.api_versions(version)
    for version in range(2, 10):
        d.offset_commit(version, "g", offsets={"t": {0: 1}})
    for version in range(1, 10):
        d.offset_fetch(version, "g", partitions={"t": [0]})
    for version in range(7):
        d.describe_groups(version, "g")
        d.find_coordinator(version, "g")
    for version in range(6):
        d.list_groups(version)
    for version in range(3):
        d.delete_groups(version, "g")


def _member_id(prefix: str, n: int) -> str:
    return f"{prefix}-{n:08x}-0000-4000-8000-{n:012x}"


def test_normaliser_names_member_ids_by_prefix_and_identity() -> None:
    norm = d.Normaliser({"grp-123": "<group>"})
    a1, a2, dyn = _member_id("A", 1), _member_id("A", 2), _member_id("client", 3)
    assert norm.member(a1) == "A#1"
    assert norm.member(a2) == "A#2"
    assert norm.member(a1) == "A#1"
    assert norm.member(dyn) == "client#1"
    assert norm.member("bogus") == "bogus"
    assert norm.text(f"Group grp-123 member {a2} fenced") == "Group <group> member A#2 fenced"


def test_normaliser_plain_data() -> None:
    norm = d.Normaliser()
    a, b = _member_id("A", 1), _member_id("B", 2)
    response = JoinGroupResponse(
        throttle_time=i32Timedelta.parse(datetime.timedelta(milliseconds=5)),
        error_code=ErrorCode.none,
        generation_id=i32(3),
        protocol_type="consumer",
        protocol_name="range",
        leader=a,
        skip_assignment=True,
        member_id=a,
        members=(
            JoinGroupResponseMember(member_id=b, group_instance_id="B", metadata=d.subscription("t1")),
            JoinGroupResponseMember(member_id=a, group_instance_id="A", metadata=b"\x00\xff"),
        ),
    )
    value = norm.value(d.JoinResult.of(response))
    assert value == {
        "error_code": "NONE",
        "generation_id": 3,
        "protocol_type": "consumer",
        "protocol_name": "range",
        "leader": "A#1",
        "skip_assignment": True,
        "member_id": "A#1",
        "members": [
            {"member_id": "A#1", "group_instance_id": "A", "metadata": "hex:00ff"},
            {
                "member_id": "B#1",
                "group_instance_id": "B",
                "metadata": {"consumer_protocol": {"topics": ["t1"], "version": 0}},
            },
        ],
    }
    assert compact(value).startswith(
        "{NONE, gen=3, protocol_type=consumer, proto=range, leader=A#1, skip=true"
    )


# --- a tiny fake broker: answers Heartbeat v4 after a delay, or closes the connection


async def _with_fake_broker(
    behaviour: Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]],
    body: Callable[[int], Awaitable[None]],
) -> None:
    server = await asyncio.start_server(behaviour, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    try:
        await body(port)
    finally:
        server.close()
        await server.wait_closed()


async def _read_request(reader: asyncio.StreamReader) -> RequestHeader:
    (size,) = struct.unpack(">i", await reader.readexactly(4))
    frame = await reader.readexactly(size)
    header, _ = entity_reader(RequestHeader)(frame, 0)
    return header


def _answer(correlation: int, error: ErrorCode) -> bytes:
    out = io.BytesIO()
    entity_writer(ResponseHeader)(out, ResponseHeader(correlation_id=i32(correlation)))
    entity_writer(HeartbeatResponse)(
        out, HeartbeatResponse(throttle_time=i32Timedelta.parse(datetime.timedelta()), error_code=error)
    )
    data = out.getvalue()
    return struct.pack(">i", len(data)) + data


def test_parked_request_is_answered_later() -> None:
    # The broker answers when the test says so, not after a delay a loaded machine may outrun.
    release = asyncio.Event()

    async def slow(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        header = await _read_request(reader)
        await release.wait()
        writer.write(_answer(header.correlation_id, ErrorCode.rebalance_in_progress))
        await writer.drain()
        await reader.read()

    async def body(port: int) -> None:
        async with d.Driver("127.0.0.1", port) as driver:
            conn = await driver.connect()
            pending = conn.send(d.heartbeat(4, "g", generation=1, member_id="m"))
            await pending.assert_parked(200)
            with pytest.raises(d.StillParked):
                await pending.result(timeout=0.01)
            release.set()
            answer = await pending.result(timeout=2.0)
            assert answer.error_code == ErrorCode.rebalance_in_progress
            with pytest.raises(d.AnsweredTooEarly):
                await pending.assert_parked(10)

    asyncio.run(_with_fake_broker(slow, body))


def test_closed_connection_fails_pending_requests() -> None:
    async def rude(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        await _read_request(reader)
        writer.close()

    async def body(port: int) -> None:
        async with d.Driver("127.0.0.1", port) as driver:
            conn = await driver.connect()
            with pytest.raises(d.ConnectionClosed):
                await conn.request(d.heartbeat(4, "g", generation=1, member_id="m"), timeout=2.0)

    asyncio.run(_with_fake_broker(rude, body))


def test_normaliser_keeps_only_the_permission_of_kafkas_request_description() -> None:
    text = (
        "Request Request(processor=0, connectionId=127.0.0.1:1-127.0.0.1:2-0-1, session=Session@45c877d3, "
        "envelope=Some(Request(processor=0))) needs ALTER permission."
    )
    assert d.Normaliser().text(text) == "Request Request(<request>) needs ALTER permission."


def test_acl_builders_carry_kafkas_codes() -> None:
    acl = d.Acl(d.RESOURCE_GROUP, "g", d.PATTERN_PREFIXED, "User:bob", "*", d.OP_READ, d.PERMISSION_DENY)
    request: Any = d.create_acls(3, acl)
    creation = request.creations[0]
    codes = (
        creation.resource_type,
        creation.resource_pattern_type,
        creation.operation,
        creation.permission_type,
    )
    assert codes == (3, 4, 3, 2)
    described: Any = d.describe_acls(
        1, d.Acl(d.RESOURCE_ANY, None, d.PATTERN_MATCH, None, None, d.OP_ANY, d.PERMISSION_ANY)
    )
    assert described.resource_name_filter is None and described.pattern_type_filter == 2


# --- the consumer group protocol (KIP-848)

_TOPIC_A = uuid.UUID("00000000-0000-4000-8000-00000000000a")
_TOPIC_B = uuid.UUID("00000000-0000-4000-8000-00000000000b")


def test_consumer_group_heartbeat_builder_follows_the_version() -> None:
    request: Any = d.consumer_group_heartbeat(
        1,
        "g",
        "m",
        0,
        instance_id="i",
        rebalance_timeout_ms=5000,
        subscribed_topic_names=["t"],
        subscribed_topic_regex="t.*",
        server_assignor="range",
        topic_partitions={_TOPIC_A: [2, 0]},
    )
    assert (request.__api_key__, request.__version__) == (d.CONSUMER_GROUP_HEARTBEAT, 1)
    assert request.rebalance_timeout == datetime.timedelta(milliseconds=5000)
    assert request.subscribed_topic_names == ("t",) and request.subscribed_topic_regex == "t.*"
    assert [(tp.topic_id, tp.partitions) for tp in request.topic_partitions] == [(_TOPIC_A, (0, 2))]
    # None is "unchanged since the last heartbeat" on the wire; -1 is an unset rebalance timeout.
    plain: Any = d.consumer_group_heartbeat(0, "g", "m", 3)
    assert plain.topic_partitions is None and plain.subscribed_topic_names is None
    assert plain.rebalance_timeout == datetime.timedelta(milliseconds=-1)
    with pytest.raises(ValueError, match="subscribed_topic_regex"):
        d.consumer_group_heartbeat(0, "g", "m", 0, subscribed_topic_regex="t.*")
    described: Any = d.consumer_group_describe(1, "g1", "g2", include_authorized_operations=True)
    assert (described.__api_key__, described.group_ids) == (d.CONSUMER_GROUP_DESCRIBE, ("g1", "g2"))
    assert described.include_authorized_operations is True
    d.consumer_group_describe(0, "g")


def test_consumer_heartbeat_answer_by_topic_name() -> None:
    module = heartbeat_v1_response
    raw = module.ConsumerGroupHeartbeatResponse(
        throttle_time=i32Timedelta.parse(datetime.timedelta()),
        error_code=ErrorCode.none,
        member_id="m",
        member_epoch=i32(3),
        heartbeat_interval=i32Timedelta.parse(datetime.timedelta(milliseconds=1000)),
        assignment=module.Assignment(
            topic_partitions=(
                module.TopicPartitions(topic_id=_TOPIC_B, partitions=(i32(3), i32(1))),
                module.TopicPartitions(topic_id=_TOPIC_A, partitions=(i32(0),)),
            )
        ),
    )
    names = {_TOPIC_A: "alpha", _TOPIC_B: "beta"}
    answer = d.ConsumerHeartbeatResult.of(raw, names)
    assert answer.ok and answer.assignment == {"alpha": [0], "beta": [1, 3]}
    assert d.Normaliser().value(answer) == {
        "error_code": "NONE",
        "error_message": None,
        "member_id": "m",
        "member_epoch": 3,
        "heartbeat_interval_ms": 1000,
        "assignment": {"alpha": [0], "beta": [1, 3]},
    }
    no_assignment = d.ConsumerHeartbeatResult.of(replace(raw, assignment=None), names)
    assert no_assignment.assignment is None


def _described_member(member_id: str, instance_id: str | None, topics: tuple[str, ...]) -> Any:
    module = describe_v1_response
    assigned = module.Assignment(
        topic_partitions=(
            module.TopicPartitions(topic_id=_TOPIC_A, topic_name=TopicName("alpha"), partitions=(i32(1),)),
        )
    )
    return module.Member(
        member_id=member_id,
        instance_id=instance_id,
        rack_id=None,
        member_epoch=i32(4),
        client_id="c",
        client_host="/127.0.0.1",
        subscribed_topic_names=tuple(TopicName(t) for t in topics),
        subscribed_topic_regex="",
        assignment=assigned,
        target_assignment=module.Assignment(topic_partitions=()),
        member_type=i8(1),
    )


def test_consumer_group_view_sorts_members_and_subscriptions() -> None:
    module = describe_v1_response
    group = module.DescribedGroup(
        error_code=ErrorCode.none,
        group_id=GroupId("grp-1"),
        group_state="Stable",
        group_epoch=i32(4),
        assignment_epoch=i32(4),
        assignor_name="uniform",
        members=(
            _described_member("m-2", None, ("zeta-topic", "alpha")),
            _described_member("m-1", "B", ("alpha",)),
            _described_member("m-3", None, ()),
        ),
    )
    raw = module.ConsumerGroupDescribeResponse(
        throttle_time=i32Timedelta.parse(datetime.timedelta()), groups=(group,)
    )
    view = d.ConsumerGroupView.of(raw, {})
    assert [m.member_id for m in view.members] == ["m-2", "m-3", "m-1"]  # no instance id first
    norm = d.Normaliser({"grp-1": "<group>", "zeta-topic": "<topic>"})
    value = norm.value(view)
    assert isinstance(value, dict) and value["group_id"] == "<group>"
    members = value["members"]
    assert isinstance(members, list) and isinstance(members[0], dict)
    # Sorted once normalised; the client host is kept (it is dropped from classic answers).
    assert members[0]["subscribed_topic_names"] == ["<topic>", "alpha"]
    assert members[0]["client_host"] == "/127.0.0.1"
    assert members[0]["assignment"] == {"alpha": [1]} and members[0]["target_assignment"] == {}


def test_normaliser_names_member_ids_it_is_told() -> None:
    norm = d.Normaliser({"grp-1": "<group>"})
    norm.add_member("Xq0bS3pWQ1qj7mYhZcR2Lg", "<generated>")
    assert norm.text("Xq0bS3pWQ1qj7mYhZcR2Lg") == "<generated>"
    assert norm.text("Member Xq0bS3pWQ1qj7mYhZcR2Lg is not a member of group grp-1.") == (
        "Member <generated> is not a member of group <group>."
    )


def test_group_settings_reach_both_backends_by_kafkas_names() -> None:
    assert GroupSettings().consumer_arguments() == []
    assert "group.consumer.session.timeout.ms" not in GroupSettings().kafka_properties()
    settings = GroupSettings(
        consumer_session_timeout_ms=2000,
        consumer_heartbeat_interval_ms=500,
        consumer_assignment_interval_ms=0,
        consumer_max_size=3,
        consumer_assignors=("range", "uniform"),
    )
    props = settings.kafka_properties()
    assert (
        props["group.consumer.session.timeout.ms"] == props["group.consumer.min.session.timeout.ms"] == "2000"
    )
    assert (
        props["group.consumer.heartbeat.interval.ms"]
        == props["group.consumer.min.heartbeat.interval.ms"]
        == "500"
    )
    assert props["group.consumer.assignment.interval.ms"] == "0"
    assert props["group.consumer.max.size"] == "3"
    assert props["group.consumer.assignors"] == "range,uniform"
    assert settings.consumer_arguments() == [
        "--group-consumer-session-timeout-ms",
        "2000",
        "--group-consumer-heartbeat-interval-ms",
        "500",
        "--group-consumer-assignment-interval-ms",
        "0",
        "--group-consumer-max-size",
        "3",
        "--group-consumer-assignors",
        "range,uniform",
    ]


def test_waiting_for_listeners_lasts_until_each_port_takes_connections() -> None:
    # Kafka opens its SASL and SSL listeners after the one it serves groups on; the wait spans that gap.
    async def body() -> None:
        late, never = free_port(), free_port()  # free ports, below the range the kernel picks from
        waiting = asyncio.create_task(d.wait_until_accepting("127.0.0.1", [late], timeout=30.0))
        await asyncio.sleep(0.3)
        assert not waiting.done()
        server = await asyncio.start_server(lambda r, w: w.close(), "127.0.0.1", late)
        async with server:
            await asyncio.wait_for(waiting, timeout=10.0)
        with pytest.raises(TimeoutError, match=str(never)):
            await d.wait_until_accepting("127.0.0.1", [never], timeout=0.3)

    asyncio.run(body())
