"""A raw Kafka protocol client for conformance scenarios, built on kio entities.

It speaks exactly the API versions a scenario asks for, keeps many requests in flight on many
connections, and lets a scenario leave a request *parked* (sent, not answered yet; a JoinGroup waiting
for the rebalance, say) while it drives other connections, then await it later with a bound.

The module also holds the consumer-protocol codec (subscription and assignment bytes) and the
normaliser that turns responses into plain data two coordinators can be compared on.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import datetime
import enum
import io
import re
import ssl
import struct
import sys
import uuid
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Generic, TypeVar, cast

from kio.index import load_request_schema, load_response_schema
from kio.schema.consumer_protocol_assignment import v0 as assignment_v0
from kio.schema.consumer_protocol_assignment import v1 as assignment_v1
from kio.schema.consumer_protocol_assignment import v2 as assignment_v2
from kio.schema.consumer_protocol_assignment import v3 as assignment_v3
from kio.schema.consumer_protocol_subscription import v0 as subscription_v0
from kio.schema.consumer_protocol_subscription import v1 as subscription_v1
from kio.schema.consumer_protocol_subscription import v2 as subscription_v2
from kio.schema.consumer_protocol_subscription import v3 as subscription_v3
from kio.schema.errors import ErrorCode
from kio.schema.request_header.v1.header import RequestHeader as RequestHeaderV1
from kio.schema.request_header.v2.header import RequestHeader as RequestHeaderV2
from kio.schema.response_header.v0.header import ResponseHeader as ResponseHeaderV0
from kio.schema.types import BrokerId, TopicName
from kio.serial import entity_reader, entity_writer
from kio.serial.readers import read_int16, read_int32
from kio.static.primitive import Records, i8, i16, i32, i32Timedelta, i64, i64Timedelta
from kio.static.protocol import Entity, RequestPayload, ResponsePayload

R = TypeVar("R")
T = TypeVar("T")

DEFAULT_CLIENT_ID = "conformance"
DEFAULT_TIMEOUT_S = 15.0

# API keys used by the builders.
PRODUCE, METADATA, OFFSET_COMMIT, OFFSET_FETCH, FIND_COORDINATOR = 0, 3, 8, 9, 10
JOIN_GROUP, HEARTBEAT, LEAVE_GROUP, SYNC_GROUP, DESCRIBE_GROUPS, LIST_GROUPS = 11, 12, 13, 14, 15, 16
API_VERSIONS, CREATE_TOPICS, DELETE_GROUPS = 18, 19, 42
SASL_HANDSHAKE, SASL_AUTHENTICATE = 17, 36
DESCRIBE_ACLS, CREATE_ACLS, DELETE_ACLS = 29, 30, 31
DESCRIBE_USER_SCRAM_CREDENTIALS, ALTER_USER_SCRAM_CREDENTIALS = 50, 51
DESCRIBE_CONFIGS, INCREMENTAL_ALTER_CONFIGS = 32, 44
DELETE_RECORDS, OFFSET_DELETE = 21, 47
CONSUMER_GROUP_HEARTBEAT, CONSUMER_GROUP_DESCRIBE = 68, 69
CONFIG_GROUP = 32  # ConfigResource type of a consumer group

Json = None | bool | int | float | str | list["Json"] | dict[str, "Json"]


class ConnectionClosed(ConnectionError):
    """The peer closed the connection before answering."""


class StillParked(AssertionError):
    """A parked request was not answered within the time a scenario allowed."""


class AnsweredTooEarly(AssertionError):
    """A request expected to stay parked was answered."""


# --------------------------------------------------------------------------------------------------
# Connections and in-flight requests


class Pending(Generic[R]):
    """A request that has been sent; its answer arrives later, or never."""

    def __init__(self, future: asyncio.Future[R], description: str) -> None:
        self._future = future
        self.description = description

    def done(self) -> bool:
        return self._future.done()

    async def result(self, timeout: float = DEFAULT_TIMEOUT_S) -> R:
        """The answer; raises StillParked if it has not come within `timeout` seconds."""
        try:
            return await asyncio.wait_for(asyncio.shield(self._future), timeout)
        except TimeoutError:
            raise StillParked(f"{self.description}: no answer within {timeout:.1f}s") from None

    async def assert_parked(self, ms: float) -> None:
        """Waits `ms` milliseconds and fails if the request was answered meanwhile."""
        done, _ = await asyncio.wait({self._future}, timeout=ms / 1000)
        if done:
            raise AnsweredTooEarly(f"{self.description}: answered within {ms:.0f}ms, expected it parked")

    async def answered_within(self, ms: float) -> bool:
        """True if the answer arrives within `ms` milliseconds (the request stays in flight otherwise)."""
        done, _ = await asyncio.wait({self._future}, timeout=ms / 1000)
        return bool(done)

    def then(self, convert: Callable[[R], T]) -> Pending[T]:
        """The same request, with its answer passed through `convert`."""
        loop = asyncio.get_running_loop()
        mapped: asyncio.Future[T] = loop.create_future()

        def relay(source: asyncio.Future[R]) -> None:
            if mapped.done():
                return
            if source.cancelled():
                mapped.cancel()
            elif (error := source.exception()) is not None:
                mapped.set_exception(error)
            else:
                try:
                    mapped.set_result(convert(source.result()))
                except Exception as exc:
                    mapped.set_exception(exc)

        self._future.add_done_callback(relay)
        return Pending(mapped, self.description)


@dataclass
class _InFlight:
    future: asyncio.Future[ResponsePayload]
    response_type: type[ResponsePayload]
    header_type: type[Entity]


class Connection:
    """One TCP connection to a broker. Requests are pipelined; answers are matched by correlation id."""

    def __init__(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, name: str, client_id: str | None
    ) -> None:
        self.name = name
        self.client_id = client_id
        self._reader = reader
        self._writer = writer
        self._next_correlation = 1
        self._in_flight: dict[int, _InFlight] = {}
        self._closed: BaseException | None = None
        self._reader_task = asyncio.create_task(self._read_loop(), name=f"kafka-reader-{name}")

    @classmethod
    async def open(
        cls,
        host: str,
        port: int,
        *,
        name: str = "conn",
        client_id: str | None = DEFAULT_CLIENT_ID,
        timeout: float = 5.0,
        tls: ssl.SSLContext | None = None,
    ) -> Connection:
        """Opens a TCP connection, or a TLS one when `tls` is given (no SNI: clients dial an IP)."""
        reader, writer = await asyncio.wait_for(
            asyncio.open_connection(host, port, ssl=tls, server_hostname="" if tls is not None else None),
            timeout,
        )
        return cls(reader, writer, name, client_id)

    @property
    def closed(self) -> bool:
        return self._closed is not None

    async def closed_within(self, seconds: float) -> bool:
        """True if the peer closes the connection within `seconds` (nothing else is read meanwhile)."""
        with contextlib.suppress(TimeoutError, asyncio.CancelledError):
            await asyncio.wait_for(asyncio.shield(self._reader_task), seconds)
        return self._closed is not None

    def send(self, request: RequestPayload) -> Pending[Any]:
        """Sends `request` at its own version (the kio class decides) and returns its pending answer."""
        response_type = load_response_schema(request.__api_key__, request.__version__)
        body = io.BytesIO()
        entity_writer(type(request))(body, request)
        return self.send_raw(
            request.__api_key__,
            request.__version__,
            body.getvalue(),
            response_type,
            flexible_header=request.__header_schema__ is RequestHeaderV2,
            response_header=response_type.__header_schema__,
            description=f"{type(request).__name__} v{request.__version__} on {self.name}",
        )

    def send_raw(
        self,
        api_key: int,
        api_version: int,
        body: bytes,
        response_type: type[ResponsePayload],
        *,
        flexible_header: bool,
        response_header: type[Entity],
        description: str = "",
    ) -> Pending[Any]:
        """Sends a hand-made body under any header, e.g. an API version the broker does not support."""
        if self._closed is not None:
            raise ConnectionClosed(f"{self.name} is closed") from self._closed
        correlation = self._next_correlation
        self._next_correlation += 1
        cid = self.client_id
        frame = io.BytesIO()
        if flexible_header:
            header2 = RequestHeaderV2(
                request_api_key=i16(api_key),
                request_api_version=i16(api_version),
                correlation_id=i32(correlation),
                client_id=cid,
            )
            entity_writer(RequestHeaderV2)(frame, header2)
        else:
            header1 = RequestHeaderV1(
                request_api_key=i16(api_key),
                request_api_version=i16(api_version),
                correlation_id=i32(correlation),
                client_id=cid,
            )
            entity_writer(RequestHeaderV1)(frame, header1)
        frame.write(body)
        payload = frame.getvalue()
        future: asyncio.Future[ResponsePayload] = asyncio.get_running_loop().create_future()
        self._in_flight[correlation] = _InFlight(future, response_type, response_header)
        self._writer.write(struct.pack(">i", len(payload)) + payload)
        return Pending(future, description or f"api {api_key} v{api_version} on {self.name}")

    def send_bytes(self, data: bytes) -> None:
        """Writes `data` as it is: a size that lies, a frame that stalls half-way."""
        if self._closed is not None:
            raise ConnectionClosed(f"{self.name} is closed") from self._closed
        self._writer.write(data)

    async def request(self, request: RequestPayload, timeout: float = DEFAULT_TIMEOUT_S) -> Any:
        """Sends `request` and waits for its answer."""
        return await self.send(request).result(timeout)

    async def _read_loop(self) -> None:
        reason: BaseException = ConnectionClosed(f"{self.name}: closed by the peer")
        try:
            while True:
                size_bytes = await self._reader.readexactly(4)
                (size,) = struct.unpack(">i", size_bytes)
                frame = await self._reader.readexactly(size)
                correlation, _ = read_int32(frame, 0)
                in_flight = self._in_flight.pop(correlation, None)
                if in_flight is None:
                    continue
                try:
                    _header, header_size = entity_reader(in_flight.header_type)(frame, 0)
                    response, _ = entity_reader(in_flight.response_type)(frame, header_size)
                except Exception as exc:
                    if not in_flight.future.done():
                        in_flight.future.set_exception(exc)
                    continue
                if not in_flight.future.done():
                    in_flight.future.set_result(response)
        except (asyncio.IncompleteReadError, ConnectionError, OSError) as exc:
            reason = ConnectionClosed(f"{self.name}: connection lost ({type(exc).__name__})")
        except asyncio.CancelledError:
            reason = ConnectionClosed(f"{self.name}: closed")
            raise
        finally:
            self._closed = reason
            for in_flight in self._in_flight.values():
                if not in_flight.future.done():
                    in_flight.future.set_exception(reason)
            self._in_flight.clear()

    async def close(self) -> None:
        self._reader_task.cancel()
        self._writer.close()
        with contextlib.suppress(TimeoutError, ConnectionError, OSError):
            await asyncio.wait_for(self._writer.wait_closed(), 2.0)
        with contextlib.suppress(asyncio.CancelledError, ConnectionClosed):
            await self._reader_task


def request_frame(
    request: RequestPayload, correlation: int = 1, client_id: str | None = DEFAULT_CLIENT_ID
) -> bytes:
    """A whole request frame (size prefix, header at the request's own header version, body)."""
    header_cls = request.__header_schema__
    buffer = io.BytesIO()
    entity_writer(header_cls)(
        buffer,
        header_cls(
            request_api_key=i16(request.__api_key__),
            request_api_version=i16(request.__version__),
            correlation_id=i32(correlation),
            client_id=client_id,
        ),
    )
    entity_writer(type(request))(buffer, request)
    body = buffer.getvalue()
    return struct.pack(">i", len(body)) + body


class Driver:
    """Opens connections to one bootstrap address and closes them all at the end."""

    def __init__(self, host: str, port: int) -> None:
        self.host = host
        self.port = port
        self._connections: list[Connection] = []

    async def connect(
        self,
        name: str = "conn",
        *,
        client_id: str | None = DEFAULT_CLIENT_ID,
        port: int | None = None,
        tls: ssl.SSLContext | None = None,
    ) -> Connection:
        connection = await Connection.open(
            self.host, port or self.port, name=name, client_id=client_id, tls=tls
        )
        self._connections.append(connection)
        return connection

    async def connections(self, n: int, *, prefix: str = "conn") -> list[Connection]:
        return [await self.connect(f"{prefix}{i}") for i in range(n)]

    async def close(self) -> None:
        for connection in self._connections:
            await connection.close()
        self._connections.clear()

    async def __aenter__(self) -> Driver:
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.close()


# --------------------------------------------------------------------------------------------------
# Request builders: one function per API, any version kio knows.


def _module_entity(cls: type[Any], name: str) -> type[Any]:
    """A nested entity class defined next to `cls` (kio keeps them in the same module)."""
    entity = getattr(sys.modules[cls.__module__], name)
    assert isinstance(entity, type)
    return entity


def _build(cls: type[T], values: Mapping[str, object], *, droppable: Iterable[str] = ()) -> T:
    """Instantiates a kio entity, passing only the fields this version has.

    A value for a field the version lacks is an error unless it is None or listed in `droppable`
    (fields a version simply does not carry, such as the rebalance timeout of JoinGroup v0).
    """
    names = {f.name for f in dataclasses.fields(cast(Any, cls))}
    allowed_to_drop = set(droppable)
    kwargs: dict[str, object] = {}
    for key, value in values.items():
        if key in names:
            kwargs[key] = value
        elif value is not None and key not in allowed_to_drop:
            version = getattr(cls, "__version__", "?")
            raise ValueError(f"{cls.__name__} v{version} has no field {key!r} (value {value!r})")
    return cls(**kwargs)


def _ms(value: int) -> i32Timedelta:
    return i32Timedelta.parse(datetime.timedelta(milliseconds=value))


Protocols = Sequence[tuple[str, bytes]]


def api_versions(version: int = 3) -> RequestPayload:
    cls = load_request_schema(API_VERSIONS, version)
    return _build(
        cls,
        {"client_software_name": "staticfleet-conformance", "client_software_version": "1"},
        droppable=("client_software_name", "client_software_version"),
    )


def join_group(
    version: int,
    group_id: str,
    *,
    member_id: str = "",
    instance_id: str | None = None,
    protocol_type: str = "consumer",
    protocols: Protocols = (),
    session_timeout_ms: int = 10_000,
    rebalance_timeout_ms: int = 10_000,
    reason: str | None = None,
) -> RequestPayload:
    cls = load_request_schema(JOIN_GROUP, version)
    protocol_cls = _module_entity(cls, "JoinGroupRequestProtocol")
    return _build(
        cls,
        {
            "group_id": group_id,
            "session_timeout": _ms(session_timeout_ms),
            "rebalance_timeout": _ms(rebalance_timeout_ms),
            "member_id": member_id,
            "group_instance_id": instance_id,
            "protocol_type": protocol_type,
            "protocols": tuple(protocol_cls(name=name, metadata=meta) for name, meta in protocols),
            "reason": reason,
        },
        droppable=("rebalance_timeout", "reason"),
    )


def sync_group(
    version: int,
    group_id: str,
    *,
    generation: int,
    member_id: str,
    instance_id: str | None = None,
    protocol_type: str | None = None,
    protocol_name: str | None = None,
    assignments: Sequence[tuple[str, bytes]] = (),
) -> RequestPayload:
    cls = load_request_schema(SYNC_GROUP, version)
    assignment_cls = _module_entity(cls, "SyncGroupRequestAssignment")
    return _build(
        cls,
        {
            "group_id": group_id,
            "generation_id": i32(generation),
            "member_id": member_id,
            "group_instance_id": instance_id,
            "protocol_type": protocol_type,
            "protocol_name": protocol_name,
            "assignments": tuple(assignment_cls(member_id=m, assignment=a) for m, a in assignments),
        },
        droppable=("protocol_type", "protocol_name"),
    )


def heartbeat(
    version: int, group_id: str, *, generation: int, member_id: str, instance_id: str | None = None
) -> RequestPayload:
    cls = load_request_schema(HEARTBEAT, version)
    return _build(
        cls,
        {
            "group_id": group_id,
            "generation_id": i32(generation),
            "member_id": member_id,
            "group_instance_id": instance_id,
        },
    )


LeaveIdentity = tuple[str, str | None] | tuple[str, str | None, str | None]


def leave_group(
    version: int, group_id: str, *, member_id: str = "", members: Sequence[LeaveIdentity] = ()
) -> RequestPayload:
    """v0-2 carry one `member_id`; v3+ carry `members` as (member_id, instance_id[, reason])."""
    cls = load_request_schema(LEAVE_GROUP, version)
    if version < 3:
        if members:
            raise ValueError("LeaveGroup v0-2 carry a single member_id")
        return _build(cls, {"group_id": group_id, "member_id": member_id})
    identity_cls = _module_entity(cls, "MemberIdentity")
    identities = []
    for entry in members:
        reason = entry[2] if len(entry) > 2 else None
        identities.append(
            _build(
                identity_cls,
                {"member_id": entry[0], "group_instance_id": entry[1], "reason": reason},
                droppable=("reason",),
            )
        )
    return _build(cls, {"group_id": group_id, "members": tuple(identities)})


Offsets = Mapping[str, Mapping[int, int]]


def offset_commit(
    version: int,
    group_id: str,
    *,
    generation: int = -1,
    member_id: str = "",
    instance_id: str | None = None,
    offsets: Offsets,
    metadata: str | None = "",
    retention_ms: int = -1,
) -> RequestPayload:
    """`retention_ms` (v2-v4 only; -1: the broker's) makes each offset expire that long after the commit."""
    cls = load_request_schema(OFFSET_COMMIT, version)
    topic_cls = _module_entity(cls, "OffsetCommitRequestTopic")
    partition_cls = _module_entity(cls, "OffsetCommitRequestPartition")
    topics = tuple(
        topic_cls(
            name=topic,
            partitions=tuple(
                _build(
                    partition_cls,
                    {
                        "partition_index": i32(p),
                        "committed_offset": i64(o),
                        "committed_leader_epoch": i32(-1),
                        "committed_metadata": metadata,
                    },
                    droppable=("committed_leader_epoch",),
                )
                for p, o in sorted(parts.items())
            ),
        )
        for topic, parts in offsets.items()
    )
    return _build(
        cls,
        {
            "group_id": group_id,
            "generation_id_or_member_epoch": i32(generation),
            "member_id": member_id,
            "group_instance_id": instance_id,
            "retention_time": i64Timedelta.parse(datetime.timedelta(milliseconds=retention_ms)),
            "topics": topics,
        },
        droppable=("retention_time",),
    )


def offset_fetch(
    version: int, group_id: str, *, partitions: Mapping[str, Sequence[int]] | None = None
) -> RequestPayload:
    """v1-7 address one group; v8+ a list of groups (one here). `partitions=None` means all (v2+)."""
    cls = load_request_schema(OFFSET_FETCH, version)
    if version < 8:
        topic_cls = _module_entity(cls, "OffsetFetchRequestTopic")
        topics = (
            None
            if partitions is None
            else tuple(
                topic_cls(name=t, partition_indexes=tuple(i32(p) for p in ps)) for t, ps in partitions.items()
            )
        )
        return _build(cls, {"group_id": group_id, "topics": topics})
    topics_cls = _module_entity(cls, "OffsetFetchRequestTopics")
    group_cls = _module_entity(cls, "OffsetFetchRequestGroup")
    group_topics = (
        None
        if partitions is None
        else tuple(
            topics_cls(name=t, partition_indexes=tuple(i32(p) for p in ps)) for t, ps in partitions.items()
        )
    )
    group = _build(group_cls, {"group_id": group_id, "topics": group_topics})
    return _build(cls, {"groups": (group,)})


def describe_groups(
    version: int, *group_ids: str, include_authorized_operations: bool = False
) -> RequestPayload:
    cls = load_request_schema(DESCRIBE_GROUPS, version)
    return _build(
        cls,
        {"groups": tuple(group_ids), "include_authorized_operations": include_authorized_operations},
        droppable=("include_authorized_operations",) if not include_authorized_operations else (),
    )


def list_groups(
    version: int, *, states_filter: Sequence[str] = (), types_filter: Sequence[str] = ()
) -> RequestPayload:
    cls = load_request_schema(LIST_GROUPS, version)
    values: dict[str, object] = {}
    if version >= 4:
        values["states_filter"] = tuple(states_filter)
    elif states_filter:
        raise ValueError("ListGroups states filter needs v4+")
    if version >= 5:
        values["types_filter"] = tuple(types_filter)
    elif types_filter:
        raise ValueError("ListGroups types filter needs v5+")
    return _build(cls, values)


def delete_groups(version: int, *group_ids: str) -> RequestPayload:
    cls = load_request_schema(DELETE_GROUPS, version)
    return _build(cls, {"groups_names": tuple(group_ids)})


TopicPartitionIds = Mapping[uuid.UUID, Sequence[int]]


def consumer_group_heartbeat(
    version: int,
    group_id: str,
    member_id: str,
    member_epoch: int,
    *,
    instance_id: str | None = None,
    rack_id: str | None = None,
    rebalance_timeout_ms: int = -1,
    subscribed_topic_names: Sequence[str] | None = None,
    subscribed_topic_regex: str | None = None,
    server_assignor: str | None = None,
    topic_partitions: TopicPartitionIds | None = None,
) -> RequestPayload:
    """ConsumerGroupHeartbeat (KIP-848). None means "unchanged since the last heartbeat" for every optional
    field, as on the wire; `topic_partitions` are the owned partitions by topic id. v0 has no regex."""
    cls = load_request_schema(CONSUMER_GROUP_HEARTBEAT, version)
    partitions_cls = _module_entity(cls, "TopicPartitions")
    owned = (
        None
        if topic_partitions is None
        else tuple(
            partitions_cls(topic_id=topic_id, partitions=tuple(i32(p) for p in sorted(ps)))
            for topic_id, ps in topic_partitions.items()
        )
    )
    return _build(
        cls,
        {
            "group_id": group_id,
            "member_id": member_id,
            "member_epoch": i32(member_epoch),
            "instance_id": instance_id,
            "rack_id": rack_id,
            "rebalance_timeout": _ms(rebalance_timeout_ms),
            "subscribed_topic_names": None
            if subscribed_topic_names is None
            else tuple(subscribed_topic_names),
            "subscribed_topic_regex": subscribed_topic_regex,
            "server_assignor": server_assignor,
            "topic_partitions": owned,
        },
    )


def consumer_group_describe(
    version: int, *group_ids: str, include_authorized_operations: bool = False
) -> RequestPayload:
    cls = load_request_schema(CONSUMER_GROUP_DESCRIBE, version)
    return _build(
        cls, {"group_ids": tuple(group_ids), "include_authorized_operations": include_authorized_operations}
    )


def find_coordinator(version: int, key: str, *, key_type: int = 0) -> RequestPayload:
    cls = load_request_schema(FIND_COORDINATOR, version)
    if version >= 4:
        return _build(cls, {"key_type": i8(key_type), "coordinator_keys": (key,)})
    return _build(
        cls, {"key": key, "key_type": i8(key_type)}, droppable=("key_type",) if key_type == 0 else ()
    )


def metadata(
    version: int, topics: Sequence[str] | None = None, *, allow_auto_topic_creation: bool = False
) -> RequestPayload:
    cls = load_request_schema(METADATA, version)
    topic_cls = _module_entity(cls, "MetadataRequestTopic")
    request_topics = (
        None if topics is None else tuple(_build(topic_cls, {"name": t, "topic_id": None}) for t in topics)
    )
    return _build(
        cls,
        {
            "topics": request_topics,
            "allow_auto_topic_creation": allow_auto_topic_creation,
            "include_cluster_authorized_operations": False,
            "include_topic_authorized_operations": False,
        },
        droppable=(
            "allow_auto_topic_creation",
            "include_cluster_authorized_operations",
            "include_topic_authorized_operations",
        ),
    )


def create_topics(
    version: int,
    topics: Mapping[str, int],
    *,
    timeout_ms: int = 10_000,
    configs: Mapping[str, Mapping[str, str | None]] | None = None,
    validate_only: bool = False,
) -> RequestPayload:
    """CreateTopics for `topics` (name -> partition count), with each topic's `configs` if given."""
    cls = load_request_schema(CREATE_TOPICS, version)
    topic_cls = _module_entity(cls, "CreatableTopic")
    config_cls = _module_entity(cls, "CreatableTopicConfig")
    creatable = tuple(
        topic_cls(
            name=name,
            num_partitions=i32(partitions),
            replication_factor=i16(-1),
            assignments=(),
            configs=tuple(config_cls(name=k, value=v) for k, v in ((configs or {}).get(name) or {}).items()),
        )
        for name, partitions in topics.items()
    )
    return _build(cls, {"topics": creatable, "timeout": _ms(timeout_ms), "validate_only": validate_only})


def record_batch(values: Sequence[bytes], *, key: bytes | None = None, timestamp_ms: int = 1_000) -> bytes:
    """One uncompressed record batch (magic 2) of these values, built by kafka-python."""
    from kafka.record.memory_records import MemoryRecordsBuilder

    builder = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1 << 20)
    for n, value in enumerate(values):
        builder.append(timestamp=timestamp_ms + n, key=key, value=value, headers=[])
    builder.close()
    return bytes(builder.buffer())


def produce(topic: str, partition: int, records: bytes, *, acks: int = -1) -> RequestPayload:
    """Produce v9: one batch to one partition."""
    from kio.schema.produce.v9 import request as produce_v9

    return produce_v9.ProduceRequest(
        transactional_id=None,
        acks=i16(acks),
        timeout=_ms(10_000),
        topic_data=(
            produce_v9.TopicProduceData(
                name=TopicName(topic),
                partition_data=(
                    produce_v9.PartitionProduceData(index=i32(partition), records=Records(records)),
                ),
            ),
        ),
    )


def list_offsets(topic: str, partitions: Mapping[int, int]) -> RequestPayload:
    """ListOffsets v7: partition -> timestamp (-1 latest, -2 earliest)."""
    from kio.schema.list_offsets.v7 import request as list_offsets_v7

    return list_offsets_v7.ListOffsetsRequest(
        replica_id=BrokerId(-1),
        isolation_level=i8(0),
        topics=(
            list_offsets_v7.ListOffsetsTopic(
                name=TopicName(topic),
                partitions=tuple(
                    list_offsets_v7.ListOffsetsPartition(partition_index=i32(p), timestamp=i64(t))
                    for p, t in partitions.items()
                ),
            ),
        ),
    )


def fetch(topic: str, partition: int, offset: int, *, max_bytes: int = 1 << 20) -> RequestPayload:
    """Fetch v12 of one partition from `offset`, answered at once (max wait 0)."""
    from kio.schema.fetch.v12 import request as fetch_v12

    return fetch_v12.FetchRequest(
        max_wait=_ms(0),
        min_bytes=i32(1),
        topics=(
            fetch_v12.FetchTopic(
                topic=TopicName(topic),
                partitions=(
                    fetch_v12.FetchPartition(
                        partition=i32(partition), fetch_offset=i64(offset), partition_max_bytes=i32(max_bytes)
                    ),
                ),
            ),
        ),
        forgotten_topics_data=(),
    )


def delete_records(
    version: int, offsets: Mapping[str, Mapping[int, int]], *, timeout_ms: int = 10_000
) -> RequestPayload:
    """DeleteRecords: for each topic, partition -> the offset to delete before (-1: the high watermark)."""
    cls = load_request_schema(DELETE_RECORDS, version)
    topic_cls = _module_entity(cls, "DeleteRecordsTopic")
    partition_cls = _module_entity(cls, "DeleteRecordsPartition")
    return _build(
        cls,
        {
            "topics": tuple(
                topic_cls(
                    name=name,
                    partitions=tuple(
                        partition_cls(partition_index=i32(p), offset=i64(o)) for p, o in parts.items()
                    ),
                )
                for name, parts in offsets.items()
            ),
            "timeout": _ms(timeout_ms),
        },
    )


def offset_delete(version: int, group_id: str, partitions: Mapping[str, Sequence[int]]) -> RequestPayload:
    """OffsetDelete: the committed offsets of these partitions (topic -> partition indexes) of a group."""
    cls = load_request_schema(OFFSET_DELETE, version)
    topic_cls = _module_entity(cls, "OffsetDeleteRequestTopic")
    partition_cls = _module_entity(cls, "OffsetDeleteRequestPartition")
    topics = tuple(
        topic_cls(name=name, partitions=tuple(partition_cls(partition_index=i32(p)) for p in parts))
        for name, parts in partitions.items()
    )
    return _build(cls, {"group_id": group_id, "topics": topics})


def sasl_handshake(version: int, mechanism: str) -> RequestPayload:
    return _build(load_request_schema(SASL_HANDSHAKE, version), {"mechanism": mechanism})


def sasl_authenticate(version: int, auth_bytes: bytes) -> RequestPayload:
    return _build(load_request_schema(SASL_AUTHENTICATE, version), {"auth_bytes": auth_bytes})


@dataclass(frozen=True)
class Acl:
    """One ACL binding or filter with Kafka's codes (resource type, pattern type, operation, permission).

    As a filter, None matches anything and the codes ANY (1) and MATCH (2) are allowed.
    """

    resource_type: int
    name: str | None
    pattern_type: int = 3
    principal: str | None = "User:alice"
    host: str | None = "*"
    operation: int = 3
    permission: int = 3


# Kafka's codes, for scenarios (staticfleet.broker.security.acl holds the same enums for the server).
RESOURCE_ANY, RESOURCE_TOPIC, RESOURCE_GROUP, RESOURCE_CLUSTER = 1, 2, 3, 4
PATTERN_ANY, PATTERN_MATCH, PATTERN_LITERAL, PATTERN_PREFIXED = 1, 2, 3, 4
OP_ANY, OP_ALL, OP_READ, OP_WRITE, OP_CREATE, OP_DELETE, OP_ALTER, OP_DESCRIBE = 1, 2, 3, 4, 5, 6, 7, 8
OP_DESCRIBE_CONFIGS, OP_ALTER_CONFIGS = 10, 11
PERMISSION_ANY, PERMISSION_DENY, PERMISSION_ALLOW = 1, 2, 3


def create_acls(version: int, *acls: Acl) -> RequestPayload:
    cls = load_request_schema(CREATE_ACLS, version)
    creation_cls = _module_entity(cls, "AclCreation")
    creations = tuple(
        creation_cls(
            resource_type=i8(a.resource_type),
            resource_name=a.name or "",
            resource_pattern_type=i8(a.pattern_type),
            principal=a.principal or "",
            host=a.host or "",
            operation=i8(a.operation),
            permission_type=i8(a.permission),
        )
        for a in acls
    )
    return _build(cls, {"creations": creations})


def _filter_fields(a: Acl) -> dict[str, object]:
    return {
        "resource_type_filter": i8(a.resource_type),
        "resource_name_filter": a.name,
        "pattern_type_filter": i8(a.pattern_type),
        "principal_filter": a.principal,
        "host_filter": a.host,
        "operation": i8(a.operation),
        "permission_type": i8(a.permission),
    }


def describe_acls(version: int, acl_filter: Acl) -> RequestPayload:
    return _build(load_request_schema(DESCRIBE_ACLS, version), _filter_fields(acl_filter))


def delete_acls(version: int, *filters: Acl) -> RequestPayload:
    cls = load_request_schema(DELETE_ACLS, version)
    filter_cls = _module_entity(cls, "DeleteAclsFilter")
    return _build(cls, {"filters": tuple(_build(filter_cls, _filter_fields(f)) for f in filters)})


def describe_user_scram_credentials(users: Sequence[str] | None) -> RequestPayload:
    cls = load_request_schema(DESCRIBE_USER_SCRAM_CREDENTIALS, 0)
    name_cls = _module_entity(cls, "UserName")
    return _build(cls, {"users": None if users is None else tuple(name_cls(name=u) for u in users)})


@dataclass(frozen=True)
class ScramUpsertion:
    name: str
    mechanism: int
    iterations: int
    salt: bytes
    salted_password: bytes


def alter_user_scram_credentials(
    deletions: Sequence[tuple[str, int]] = (), upsertions: Sequence[ScramUpsertion] = ()
) -> RequestPayload:
    cls = load_request_schema(ALTER_USER_SCRAM_CREDENTIALS, 0)
    deletion_cls = _module_entity(cls, "ScramCredentialDeletion")
    upsertion_cls = _module_entity(cls, "ScramCredentialUpsertion")
    return _build(
        cls,
        {
            "deletions": tuple(deletion_cls(name=n, mechanism=i8(m)) for n, m in deletions),
            "upsertions": tuple(
                upsertion_cls(
                    name=u.name,
                    mechanism=i8(u.mechanism),
                    iterations=i32(u.iterations),
                    salt=u.salt,
                    salted_password=u.salted_password,
                )
                for u in upsertions
            ),
        },
    )


def describe_configs(version: int, resources: Sequence[tuple[int, str]]) -> RequestPayload:
    cls = load_request_schema(DESCRIBE_CONFIGS, version)
    resource_cls = _module_entity(cls, "DescribeConfigsResource")
    return _build(
        cls,
        {
            "resources": tuple(
                resource_cls(resource_type=i8(t), resource_name=n, configuration_keys=None)
                for t, n in resources
            ),
            "include_synonyms": False,
            "include_documentation": False,
        },
        droppable=("include_documentation",),
    )


def incremental_alter_configs(
    version: int, resources: Sequence[tuple[int, str, Sequence[tuple[str, int, str | None]]]]
) -> RequestPayload:
    """Each resource is (type, name, [(config name, operation: 0 SET / 1 DELETE, value)])."""
    cls = load_request_schema(INCREMENTAL_ALTER_CONFIGS, version)
    resource_cls = _module_entity(cls, "AlterConfigsResource")
    config_cls = _module_entity(cls, "AlterableConfig")
    return _build(
        cls,
        {
            "resources": tuple(
                resource_cls(
                    resource_type=i8(t),
                    resource_name=n,
                    configs=tuple(
                        config_cls(name=k, config_operation=i8(op), value=v) for k, op, v in configs
                    ),
                )
                for t, n, configs in resources
            ),
            "validate_only": False,
        },
    )


def send_at_version(connection: Connection, request: RequestPayload, version: int) -> Pending[Any]:
    """Sends `request`'s body under a header claiming `version`, e.g. one the broker does not support.

    The answer is read as `request`'s own version, except for ApiVersions, which a broker answers at v0
    when it does not know the version (KIP-511).
    """
    body = io.BytesIO()
    entity_writer(type(request))(body, request)
    if request.__api_key__ == API_VERSIONS:
        response_type = load_response_schema(API_VERSIONS, 0)
        response_header: type[Entity] = ResponseHeaderV0
    else:
        response_type = load_response_schema(request.__api_key__, request.__version__)
        response_header = response_type.__header_schema__
    return connection.send_raw(
        request.__api_key__,
        version,
        body.getvalue(),
        response_type,
        flexible_header=request.__header_schema__ is RequestHeaderV2,
        response_header=response_header,
        description=f"{type(request).__name__} as v{version} on {connection.name}",
    )


# --------------------------------------------------------------------------------------------------
# Typed views of the answers scenarios branch on (the raw kio entity stays in `raw`).


def _get(entity: object, name: str, default: object = None) -> Any:
    return getattr(entity, name, default)


@dataclass(frozen=True)
class JoinMember:
    member_id: str
    instance_id: str | None
    metadata: bytes


@dataclass(frozen=True)
class JoinResult:
    raw: Any
    error: ErrorCode
    generation: int
    member_id: str
    leader: str
    protocol_type: str | None
    protocol_name: str | None
    skip_assignment: bool
    members: tuple[JoinMember, ...]

    @property
    def ok(self) -> bool:
        return self.error == ErrorCode.none

    @property
    def is_leader(self) -> bool:
        return self.ok and self.leader == self.member_id

    @classmethod
    def of(cls, raw: Any) -> JoinResult:
        return cls(
            raw=raw,
            error=raw.error_code,
            generation=int(raw.generation_id),
            member_id=raw.member_id,
            leader=raw.leader,
            protocol_type=_get(raw, "protocol_type"),
            protocol_name=raw.protocol_name,
            skip_assignment=bool(_get(raw, "skip_assignment", False)),
            members=tuple(
                JoinMember(m.member_id, _get(m, "group_instance_id"), bytes(m.metadata)) for m in raw.members
            ),
        )


@dataclass(frozen=True)
class SyncResult:
    raw: Any
    error: ErrorCode
    assignment: bytes
    protocol_type: str | None
    protocol_name: str | None

    @classmethod
    def of(cls, raw: Any) -> SyncResult:
        return cls(
            raw=raw,
            error=raw.error_code,
            assignment=bytes(raw.assignment),
            protocol_type=_get(raw, "protocol_type"),
            protocol_name=_get(raw, "protocol_name"),
        )


@dataclass(frozen=True)
class DescribedMember:
    member_id: str
    instance_id: str | None
    client_id: str
    metadata: bytes
    assignment: bytes


@dataclass(frozen=True)
class GroupDescription:
    raw: Any
    error: ErrorCode
    group_id: str
    state: str
    protocol_type: str
    protocol: str
    members: tuple[DescribedMember, ...]

    @classmethod
    def of(cls, raw: Any) -> GroupDescription:
        group = raw.groups[0]
        return cls(
            raw=raw,
            error=group.error_code,
            group_id=group.group_id,
            state=group.group_state,
            protocol_type=group.protocol_type,
            protocol=group.protocol_data,
            members=tuple(
                DescribedMember(
                    m.member_id,
                    _get(m, "group_instance_id"),
                    m.client_id,
                    bytes(m.member_metadata),
                    bytes(m.member_assignment),
                )
                for m in group.members
            ),
        )


# Topic ids differ between coordinators (each creates its own), so consumer-protocol answers are read with
# a map from topic id to name and show assignments as {topic name: sorted partitions}.
TopicNames = Mapping[uuid.UUID, str]


def partitions_by_name(topic_partitions: Iterable[Any], names: TopicNames) -> dict[str, list[int]]:
    """Assigned partitions by topic name, each list sorted (Kafka keeps them in hash maps)."""
    out: dict[str, list[int]] = {}
    for tp in topic_partitions:
        name = _get(tp, "topic_name") or names.get(tp.topic_id, f"unknown-topic-id:{tp.topic_id}")
        out.setdefault(name, []).extend(int(p) for p in tp.partitions)
    return {name: sorted(ps) for name, ps in sorted(out.items())}


@dataclass(frozen=True)
class ConsumerHeartbeatResult:
    """A ConsumerGroupHeartbeat answer; `assignment` is None when the answer carries none."""

    error_code: ErrorCode
    error_message: str | None
    member_id: str | None
    member_epoch: int
    heartbeat_interval_ms: int
    assignment: dict[str, list[int]] | None

    @property
    def ok(self) -> bool:
        return self.error_code == ErrorCode.none

    @classmethod
    def of(cls, raw: Any, names: TopicNames) -> ConsumerHeartbeatResult:
        interval = raw.heartbeat_interval
        return cls(
            error_code=raw.error_code,
            error_message=raw.error_message,
            member_id=raw.member_id,
            member_epoch=int(raw.member_epoch),
            heartbeat_interval_ms=round(interval.total_seconds() * 1000),
            assignment=None
            if raw.assignment is None
            else partitions_by_name(raw.assignment.topic_partitions, names),
        )


@dataclass(frozen=True)
class ConsumerGroupMemberView:
    """One member in a ConsumerGroupDescribe answer. Topic ids are left out (they differ by nature);
    `member_type` is None before v1."""

    member_id: str
    instance_id: str | None
    rack_id: str | None
    member_epoch: int
    client_id: str
    client_host: str
    subscribed_topic_names: frozenset[str]
    subscribed_topic_regex: str | None
    assignment: dict[str, list[int]]
    target_assignment: dict[str, list[int]]
    member_type: int | None


@dataclass(frozen=True)
class ConsumerGroupView:
    """One group in a ConsumerGroupDescribe answer, members sorted by instance id, client id, member id."""

    error_code: ErrorCode
    error_message: str | None
    group_id: str
    group_state: str
    group_epoch: int
    assignment_epoch: int
    assignor_name: str
    members: tuple[ConsumerGroupMemberView, ...]
    authorized_operations: int

    @classmethod
    def of(cls, raw: Any, names: TopicNames, index: int = 0) -> ConsumerGroupView:
        group = raw.groups[index]
        members = [
            ConsumerGroupMemberView(
                member_id=m.member_id,
                instance_id=m.instance_id,
                rack_id=m.rack_id,
                member_epoch=int(m.member_epoch),
                client_id=m.client_id,
                client_host=m.client_host,
                # A set on the coordinator: its order is a hash map's.
                subscribed_topic_names=frozenset(m.subscribed_topic_names),
                subscribed_topic_regex=m.subscribed_topic_regex,
                assignment=partitions_by_name(m.assignment.topic_partitions, names),
                target_assignment=partitions_by_name(m.target_assignment.topic_partitions, names),
                member_type=None if _get(m, "member_type") is None else int(m.member_type),
            )
            for m in group.members
        ]
        return cls(
            error_code=group.error_code,
            error_message=group.error_message,
            group_id=group.group_id,
            group_state=group.group_state,
            group_epoch=int(group.group_epoch),
            assignment_epoch=int(group.assignment_epoch),
            assignor_name=group.assignor_name,
            # The client id before the member id: a member id the coordinator made is random, and would
            # put its member anywhere among the others.
            members=tuple(sorted(members, key=lambda m: (m.instance_id or "", m.client_id, m.member_id))),
            authorized_operations=int(group.authorized_operations),
        )


def error_of(raw: Any) -> ErrorCode:
    """The top-level error code of a response."""
    code = raw.error_code
    assert isinstance(code, ErrorCode)
    return code


def partition_errors(raw: Any) -> list[ErrorCode]:
    """Per-partition error codes of an OffsetCommit response, in response order."""
    return [p.error_code for t in raw.topics for p in t.partitions]


# --------------------------------------------------------------------------------------------------
# Consumer protocol (the bytes inside JoinGroup metadata and SyncGroup assignments).

_SUBSCRIPTIONS: dict[int, type[Any]] = {
    0: subscription_v0.ConsumerProtocolSubscription,
    1: subscription_v1.ConsumerProtocolSubscription,
    2: subscription_v2.ConsumerProtocolSubscription,
    3: subscription_v3.ConsumerProtocolSubscription,
}
_ASSIGNMENTS: dict[int, type[Any]] = {
    0: assignment_v0.ConsumerProtocolAssignment,
    1: assignment_v1.ConsumerProtocolAssignment,
    2: assignment_v2.ConsumerProtocolAssignment,
    3: assignment_v3.ConsumerProtocolAssignment,
}


@dataclass(frozen=True)
class Subscription:
    topics: tuple[str, ...]
    user_data: bytes | None = None
    owned_partitions: tuple[tuple[str, tuple[int, ...]], ...] = ()
    generation_id: int = -1
    rack_id: str | None = None
    version: int = 0


@dataclass(frozen=True)
class Assignment:
    partitions: tuple[tuple[str, tuple[int, ...]], ...]
    user_data: bytes | None = None
    version: int = 0


def encode_subscription(subscription: Subscription) -> bytes:
    cls = _SUBSCRIPTIONS[subscription.version]
    partition_cls = _module_entity(cls, "TopicPartition") if subscription.version >= 1 else None
    owned = (
        tuple(
            partition_cls(topic=t, partitions=tuple(i32(p) for p in ps))
            for t, ps in subscription.owned_partitions
        )
        if partition_cls is not None
        else ()
    )
    entity = _build(
        cls,
        {
            "topics": subscription.topics,
            "user_data": subscription.user_data,
            "owned_partitions": owned,
            "generation_id": i32(subscription.generation_id),
            "rack_id": subscription.rack_id,
        },
        droppable=("owned_partitions", "generation_id"),
    )
    out = io.BytesIO()
    out.write(struct.pack(">h", subscription.version))
    entity_writer(cls)(out, entity)
    return out.getvalue()


def decode_subscription(data: bytes) -> Subscription:
    version, size = read_int16(data, 0)
    cls = _SUBSCRIPTIONS[min(int(version), 3)]
    entity, _ = entity_reader(cls)(data, size)
    return Subscription(
        topics=tuple(entity.topics),
        user_data=None if entity.user_data is None else bytes(entity.user_data),
        owned_partitions=tuple(
            (tp.topic, tuple(int(p) for p in tp.partitions)) for tp in _get(entity, "owned_partitions", ())
        ),
        generation_id=int(_get(entity, "generation_id", -1)),
        rack_id=_get(entity, "rack_id"),
        version=int(version),
    )


def encode_assignment(assignment: Assignment) -> bytes:
    cls = _ASSIGNMENTS[assignment.version]
    partition_cls = _module_entity(cls, "TopicPartition")
    entity = cls(
        assigned_partitions=tuple(
            partition_cls(topic=t, partitions=tuple(i32(p) for p in ps)) for t, ps in assignment.partitions
        ),
        user_data=assignment.user_data,
    )
    out = io.BytesIO()
    out.write(struct.pack(">h", assignment.version))
    entity_writer(cls)(out, entity)
    return out.getvalue()


def decode_assignment(data: bytes) -> Assignment:
    version, size = read_int16(data, 0)
    cls = _ASSIGNMENTS[min(int(version), 3)]
    entity, _ = entity_reader(cls)(data, size)
    return Assignment(
        partitions=tuple(
            (tp.topic, tuple(int(p) for p in tp.partitions)) for tp in entity.assigned_partitions
        ),
        user_data=None if entity.user_data is None else bytes(entity.user_data),
        version=int(version),
    )


def subscription(*topics: str, user_data: bytes | None = None, version: int = 0) -> bytes:
    return encode_subscription(Subscription(topics=topics, user_data=user_data, version=version))


def assignment(partitions: Mapping[str, Sequence[int]], *, version: int = 0) -> bytes:
    return encode_assignment(
        Assignment(partitions=tuple((t, tuple(ps)) for t, ps in partitions.items()), version=version)
    )


# --------------------------------------------------------------------------------------------------
# Normalisation: responses as plain data that two coordinators can be compared on.

_UUID = r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}"
_MEMBER_ID = re.compile(rf"^(?P<prefix>.*)-(?P<uuid>{_UUID})$")
_MEMBER_ID_ANYWHERE = re.compile(rf"[A-Za-z0-9._-]*?-{_UUID}")
_DROPPED_FIELDS = frozenset({"throttle_time", "client_host"})
# Kafka's "Request Request(processor=..., connectionId=..., session=...@hash, ...) needs ALTER permission."
# names the server's own connection objects; only the permission is part of the answer.
_REQUEST_DESCRIPTION = re.compile(
    r"^Request Request\(.*\) needs (?P<permission>\w+) permission\.$", re.DOTALL
)
# Lists whose order the coordinator does not define (Kafka keeps them in hash maps), and the field to
# sort them by once normalised.
_UNORDERED_LISTS = {
    "JoinGroupResponseMember": "member_id",
    "DescribedGroupMember": "member_id",
    "OffsetFetchResponseTopic": "name",
    "OffsetFetchResponseTopics": "name",
    "OffsetFetchResponsePartition": "partition_index",
    "OffsetFetchResponsePartitions": "partition_index",
}


class Normaliser:
    """Maps coordinator-generated identifiers to stable names, per scenario.

    A generated member id `<prefix>-<uuid>` (the prefix is the group.instance.id for static members and
    the client id for dynamic ones) becomes `<prefix>#<n>`, where n counts the distinct ids seen with that
    prefix in this scenario. So "the same id as before" and "a new id" survive normalisation, the
    random part does not. Group ids become `<group>`, `<group2>`, ...
    """

    def __init__(self, groups: Mapping[str, str] | None = None) -> None:
        self._members: dict[str, str] = {}
        self._per_prefix: dict[str, int] = {}
        self._groups: dict[str, str] = dict(groups or {})
        self._named: dict[str, str] = {}  # member ids named by add_member

    def add_group(self, raw: str, symbol: str) -> None:
        self._groups[raw] = symbol

    def add_member(self, raw: str, symbol: str) -> None:
        """Names a member id no pattern recognises (ConsumerGroupHeartbeat v0 ids the coordinator made)."""
        self._members[raw] = symbol
        self._named[raw] = symbol

    def member(self, raw: str) -> str:
        """The symbolic name of a member id (ids not made by a coordinator are returned as they are)."""
        known = self._members.get(raw)
        if known is not None:
            return known
        match = _MEMBER_ID.match(raw)
        if match is None:
            return raw
        prefix = match.group("prefix")
        n = self._per_prefix.get(prefix, 0) + 1
        self._per_prefix[prefix] = n
        symbol = f"{prefix}#{n}"
        self._members[raw] = symbol
        return symbol

    def text(self, raw: str) -> str:
        """A string with every group id and generated member id in it replaced by its symbol."""
        if raw in self._groups:
            return self._groups[raw]
        if raw in self._named:
            return self._named[raw]
        request = _REQUEST_DESCRIPTION.match(raw)
        if request is not None:
            return f"Request Request(<request>) needs {request.group('permission')} permission."
        whole = _MEMBER_ID.match(raw)
        if whole is not None:
            return self.member(raw)
        out = _MEMBER_ID_ANYWHERE.sub(lambda m: self.member(m.group(0)), raw)
        for group, symbol in self._groups.items():
            out = out.replace(group, symbol)
        for member, symbol in self._named.items():
            out = out.replace(member, symbol)
        return out

    def value(self, obj: object) -> Json:
        """Plain JSON-able data for a kio entity, a view, or a plain value."""
        if obj is None or isinstance(obj, bool):
            return obj
        if isinstance(obj, ErrorCode):
            return obj.name.upper()
        if isinstance(obj, enum.Enum):
            return str(obj.name)
        if isinstance(obj, datetime.timedelta):
            return round(obj.total_seconds() * 1000)
        if isinstance(obj, int):
            return int(obj)
        if isinstance(obj, float):
            return obj
        if isinstance(obj, str):
            return self.text(obj)
        if isinstance(obj, bytes | bytearray | memoryview):
            return _bytes(bytes(obj))
        if isinstance(obj, uuid.UUID):
            return str(obj)
        if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
            return self._entity(obj)
        if isinstance(obj, Mapping):
            return {str(self.value(k)): self.value(v) for k, v in obj.items()}
        if isinstance(obj, frozenset):
            # An unordered collection: sorted once normalised, so that random raw names do not decide.
            return sorted((self.value(item) for item in obj), key=_sortable)
        if isinstance(obj, list | tuple):
            items = [self.value(item) for item in obj]
            sort_key = _UNORDERED_LISTS.get(type(obj[0]).__name__) if obj else None
            if sort_key is not None:
                items.sort(key=lambda item: _sortable(item.get(sort_key) if isinstance(item, dict) else None))
            return items
        raise TypeError(f"cannot normalise {type(obj).__name__}")

    def _entity(self, obj: Any) -> dict[str, Json]:
        out: dict[str, Json] = {}
        if hasattr(obj, "raw") and not hasattr(obj, "__api_key__"):
            # A typed view: its raw entity is the answer.
            return self._entity(obj.raw)
        # ConsumerGroupDescribe's client host is compared: both coordinators report the peer address the
        # same way ("/127.0.0.1").
        keep_host = isinstance(obj, ConsumerGroupMemberView)
        for f in dataclasses.fields(obj):
            if f.name in _DROPPED_FIELDS and not (keep_host and f.name == "client_host"):
                continue
            out[f.name] = self.value(getattr(obj, f.name))
        return out


def _sortable(value: Json) -> tuple[int, str]:
    return (value, "") if isinstance(value, int) else (0, str(value))


def _bytes(data: bytes) -> Json:
    """Bytes as readable data: consumer-protocol payloads decoded when they parse, else hex."""
    if not data:
        return ""
    for decode in (decode_subscription, decode_assignment):
        try:
            decoded = decode(data)
        except Exception:
            continue
        if _reencodes(decoded, data):
            return {"consumer_protocol": _plain(decoded)}
    try:
        text = data.decode("ascii")
    except UnicodeDecodeError:
        return "hex:" + data.hex()
    return text if text.isprintable() else "hex:" + data.hex()


def _reencodes(decoded: Subscription | Assignment, data: bytes) -> bool:
    try:
        again = (
            encode_subscription(decoded) if isinstance(decoded, Subscription) else encode_assignment(decoded)
        )
    except Exception:
        return False
    return again == data


def _plain(obj: Subscription | Assignment) -> Json:
    if isinstance(obj, Subscription):
        return {"topics": list(obj.topics), "version": obj.version}
    return {"partitions": {t: list(ps) for t, ps in obj.partitions}, "version": obj.version}


def walk_member_ids(obj: Json) -> Iterator[str]:
    """Every symbolic member id in normalised data (used by sanity checks)."""
    if isinstance(obj, dict):
        for value in obj.values():
            yield from walk_member_ids(value)
    elif isinstance(obj, list):
        for item in obj:
            yield from walk_member_ids(item)
    elif isinstance(obj, str) and "#" in obj:
        yield obj


# --------------------------------------------------------------------------------------------------
# Readiness and topics


async def ensure_topic(connection: Connection, name: str, partitions: int, *, timeout: float = 20.0) -> None:
    """Creates a topic unless it exists and waits until Metadata shows every partition with a leader."""
    await connection.request(create_topics(7, {name: partitions}))
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        meta = await connection.request(metadata(12, [name]))
        topic = meta.topics[0]
        ready = topic.error_code == ErrorCode.none and len(topic.partitions) == partitions
        if ready and all(p.leader_id >= 0 for p in topic.partitions):
            return
        if loop.time() > deadline:
            raise TimeoutError(f"topic {name} not ready: {topic.error_code.name}")
        await asyncio.sleep(0.05)


async def topic_ids(connection: Connection, names: Sequence[str]) -> dict[uuid.UUID, str]:
    """Topic id -> name for existing topics (Metadata v12), to read consumer-protocol answers by name."""
    meta = await connection.request(metadata(12, list(names)))
    found = {t.topic_id: str(t.name) for t in meta.topics if t.error_code == ErrorCode.none}
    missing = set(names) - set(found.values())
    if missing:
        raise LookupError(f"topics without an id: {sorted(missing)}")
    return found


async def wait_until_accepting(host: str, ports: Iterable[int], *, timeout: float = 60.0) -> None:
    """Waits until every port takes a TCP connection.

    Kafka opens the listener its brokers talk on first and the others only once its authorizer has
    loaded, so a broker that serves groups on PLAINTEXT may still refuse its SASL and SSL listeners.
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    waiting = list(ports)
    while waiting:
        port = waiting[0]
        try:
            _, writer = await asyncio.wait_for(asyncio.open_connection(host, port), timeout=2.0)
        except (OSError, TimeoutError) as exc:
            if loop.time() >= deadline:
                raise TimeoutError(f"{host}:{port} takes no connection after {timeout:.0f}s: {exc}") from exc
            await asyncio.sleep(0.1)
            continue
        writer.close()
        with contextlib.suppress(OSError):
            await writer.wait_closed()
        waiting.pop(0)


async def wait_until_serving(
    host: str,
    port: int,
    *,
    timeout: float = 60.0,
    group_probe: str = "ready",
    other_ports: Iterable[int] = (),
) -> str:
    """Waits until the broker answers ApiVersions and serves groups, and then until its `other_ports`
    (its other listeners) take connections.

    FindCoordinator for a group makes Kafka create its offsets topic lazily; until that is done it answers
    COORDINATOR_NOT_AVAILABLE. Then the coordinator loads the partition (DescribeGroups answers
    COORDINATOR_LOAD_IN_PROGRESS meanwhile).
    """
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    last = "not connected"
    while loop.time() < deadline:
        connection: Connection | None = None
        try:
            connection = await Connection.open(host, port, name="probe", timeout=2.0)
            versions = await connection.request(api_versions(3), timeout=5.0)
            if versions.error_code != ErrorCode.none:
                last = f"ApiVersions {versions.error_code.name}"
            else:
                found = await connection.request(find_coordinator(4, group_probe), timeout=5.0)
                code = found.coordinators[0].error_code
                if code != ErrorCode.none:
                    last = f"FindCoordinator {code.name}"
                else:
                    described = await connection.request(describe_groups(5, group_probe), timeout=5.0)
                    code = described.groups[0].error_code
                    if code == ErrorCode.none:
                        await wait_until_accepting(
                            host, other_ports, timeout=max(deadline - loop.time(), 1.0)
                        )
                        return "ready"
                    last = f"DescribeGroups {code.name}"
        except (OSError, ConnectionError, StillParked, TimeoutError) as exc:
            last = f"{type(exc).__name__}: {exc}"
        finally:
            if connection is not None:
                await connection.close()
        await asyncio.sleep(0.2)
    raise TimeoutError(f"broker {host}:{port} not serving after {timeout:.0f}s (last: {last})")
