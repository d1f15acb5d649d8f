"""Durable records of the coordinator and their binary encoding.

A group record holds a whole group as Kafka's GroupMetadataValue does; an offset record holds one
committed offset; a config record holds a group's staticfleet settings. An empty config or a tombstone
removes the key. A security record carries an ACL binding or a SCRAM credential (or its removal) for the
broker's security state: the group coordinator never reads it, but keeping it in this log gives the
security state the log's fault handling, fsync policy and compaction by snapshot. The encoding is compact
and fixed-layout so that recovery of millions of offset records stays fast.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator
from dataclasses import dataclass
from typing import NamedTuple

from staticfleet.coordinator.consumer_group import ConsumerGroup, group_from_json, group_to_json


@dataclass(frozen=True, slots=True)
class MemberRecord:
    member_id: str
    group_instance_id: str | None
    client_id: str
    client_host: str
    rebalance_timeout_ms: int
    session_timeout_ms: int
    subscription: bytes
    assignment: bytes


@dataclass(frozen=True, slots=True)
class GroupMetadataRecord:
    group_id: str
    protocol_type: str
    generation: int
    protocol: str | None
    leader: str | None
    current_state_timestamp: int
    members: tuple[MemberRecord, ...]


@dataclass(frozen=True, slots=True)
class GroupTombstone:
    group_id: str


class OffsetCommitRecord(NamedTuple):
    """The bulk of any log: a tuple, so that recovering millions of them stays cheap."""

    group_id: str
    topic: str
    partition: int
    offset: int
    leader_epoch: int
    metadata: str | None
    commit_timestamp: int
    expire_timestamp: int = -1


@dataclass(frozen=True, slots=True)
class OffsetTombstone:
    group_id: str
    topic: str
    partition: int


@dataclass(frozen=True, slots=True)
class GroupConfigRecord:
    group_id: str
    configs: tuple[tuple[str, str], ...]


@dataclass(frozen=True, slots=True)
class SecurityRecord:
    """An ACL or SCRAM credential change, in the encoding of broker/security/records.py (Kafka keeps
    AccessControlEntryRecord and UserScramCredentialRecord in its metadata log the same way: beside the
    state they protect, replayed at start, compacted by snapshot)."""

    body: bytes


@dataclass(frozen=True, slots=True)
class ConsumerGroupRecord:
    """A whole consumer-protocol group (KIP-848): epochs, members with their assignments, the target."""

    group: ConsumerGroup

    @property
    def group_id(self) -> str:
        return self.group.group_id


Record = (
    GroupMetadataRecord
    | ConsumerGroupRecord
    | GroupTombstone
    | OffsetCommitRecord
    | OffsetTombstone
    | GroupConfigRecord
    | SecurityRecord
)

_GROUP, _GROUP_TOMBSTONE, _OFFSET, _OFFSET_TOMBSTONE, _CONFIG, _SECURITY, _CONSUMER_GROUP = (
    1,
    2,
    3,
    4,
    5,
    6,
    7,
)

_U8 = struct.Struct(">B")
_U32 = struct.Struct(">I")
_I32 = struct.Struct(">i")
_OFFSET_HEAD = struct.Struct(">BHHiqiqqi")
_GROUP_HEAD = struct.Struct(">iqI")
_MEMBER_HEAD = struct.Struct(">ii")
_NULL = 0xFFFFFFFF


class RecordDecodeError(ValueError):
    pass


def _str(text: str | None) -> bytes:
    if text is None:
        return _U32.pack(_NULL)
    raw = text.encode("utf-8")
    return _U32.pack(len(raw)) + raw


def _bytes(data: bytes) -> bytes:
    return _U32.pack(len(data)) + data


def encode_record(record: Record) -> bytes:
    if isinstance(record, OffsetCommitRecord):
        group = record.group_id.encode("utf-8")
        topic = record.topic.encode("utf-8")
        meta = None if record.metadata is None else record.metadata.encode("utf-8")
        head = _OFFSET_HEAD.pack(
            _OFFSET,
            len(group),
            len(topic),
            record.partition,
            record.offset,
            record.leader_epoch,
            record.commit_timestamp,
            record.expire_timestamp,
            -1 if meta is None else len(meta),
        )
        return head + group + topic + (meta or b"")
    if isinstance(record, GroupMetadataRecord):
        parts = [
            _U8.pack(_GROUP),
            _str(record.group_id),
            _str(record.protocol_type),
            _str(record.protocol),
            _str(record.leader),
            _GROUP_HEAD.pack(record.generation, record.current_state_timestamp, len(record.members)),
        ]
        for m in record.members:
            parts += [
                _str(m.member_id),
                _str(m.group_instance_id),
                _str(m.client_id),
                _str(m.client_host),
                _MEMBER_HEAD.pack(m.rebalance_timeout_ms, m.session_timeout_ms),
                _bytes(m.subscription),
                _bytes(m.assignment),
            ]
        return b"".join(parts)
    if isinstance(record, GroupTombstone):
        return _U8.pack(_GROUP_TOMBSTONE) + _str(record.group_id)
    if isinstance(record, OffsetTombstone):
        return (
            _U8.pack(_OFFSET_TOMBSTONE)
            + _str(record.group_id)
            + _str(record.topic)
            + _I32.pack(record.partition)
        )
    if isinstance(record, GroupConfigRecord):
        parts = [_U8.pack(_CONFIG), _str(record.group_id), _U32.pack(len(record.configs))]
        for name, value in record.configs:
            parts += [_str(name), _str(value)]
        return b"".join(parts)
    if isinstance(record, SecurityRecord):
        return _U8.pack(_SECURITY) + _bytes(record.body)
    if isinstance(record, ConsumerGroupRecord):
        return _U8.pack(_CONSUMER_GROUP) + _bytes(group_to_json(record.group))
    raise TypeError(f"not a record: {record!r}")


def _utf8_size(text: str) -> int:
    return len(text) if text.isascii() else len(text.encode("utf-8"))


def _text_size(text: str | None) -> int:
    """The size of `_str(text)`."""
    return 4 if text is None else 4 + _utf8_size(text)


def encoded_size(record: Record) -> int:
    """len(encode_record(record)), without encoding it (the runtime checks every append's size)."""
    if isinstance(record, OffsetCommitRecord):
        metadata = 0 if record.metadata is None else _utf8_size(record.metadata)
        return _OFFSET_HEAD.size + _utf8_size(record.group_id) + _utf8_size(record.topic) + metadata
    if isinstance(record, GroupMetadataRecord):
        size = 1 + _GROUP_HEAD.size
        size += _text_size(record.group_id) + _text_size(record.protocol_type)
        size += _text_size(record.protocol) + _text_size(record.leader)
        for m in record.members:
            size += _text_size(m.member_id) + _text_size(m.group_instance_id)
            size += _text_size(m.client_id) + _text_size(m.client_host)
            size += _MEMBER_HEAD.size + 8 + len(m.subscription) + len(m.assignment)
        return size
    if isinstance(record, GroupTombstone):
        return 1 + _text_size(record.group_id)
    if isinstance(record, OffsetTombstone):
        return 1 + _text_size(record.group_id) + _text_size(record.topic) + 4
    if isinstance(record, GroupConfigRecord):
        return 5 + _text_size(record.group_id) + sum(_text_size(n) + _text_size(v) for n, v in record.configs)
    if isinstance(record, SecurityRecord):
        return 5 + len(record.body)
    if isinstance(record, ConsumerGroupRecord):
        return 5 + len(group_to_json(record.group))
    raise TypeError(f"not a record: {record!r}")


class _Cursor:
    __slots__ = ("buf", "pos")

    def __init__(self, buf: bytes | memoryview, pos: int) -> None:
        self.buf = buf
        self.pos = pos

    def u32(self) -> int:
        value: int = _U32.unpack_from(self.buf, self.pos)[0]
        self.pos += 4
        return value

    def raw(self, n: int) -> bytes:
        end = self.pos + n
        if end > len(self.buf):
            raise RecordDecodeError("record runs past the end of its frame")
        out = bytes(self.buf[self.pos : end])
        self.pos = end
        return out

    def string(self) -> str | None:
        n = self.u32()
        return None if n == _NULL else self.raw(n).decode("utf-8")

    def required(self) -> str:
        value = self.string()
        if value is None:
            raise RecordDecodeError("null where a string is required")
        return value


def decode_records(payload: bytes | memoryview, count: int) -> Iterator[Record]:
    """Decode `count` records laid end to end in `payload`."""
    buf = bytes(payload)
    pos = 0
    end = len(buf)
    unpack_offset = _OFFSET_HEAD.unpack_from
    offset_head_size = _OFFSET_HEAD.size
    names: dict[bytes, str] = {}  # group and topic names repeat: decode each once, share the string
    try:
        for _ in range(count):
            kind = buf[pos]
            if kind == _OFFSET:
                _, glen, tlen, partition, offset, epoch, ts, expire, mlen = unpack_offset(buf, pos)
                pos += offset_head_size
                raw = buf[pos : pos + glen]
                group = names.get(raw)
                if group is None:
                    group = names[raw] = raw.decode("utf-8")
                pos += glen
                raw = buf[pos : pos + tlen]
                topic = names.get(raw)
                if topic is None:
                    topic = names[raw] = raw.decode("utf-8")
                pos += tlen
                if mlen < 0:
                    meta = None
                else:
                    meta = buf[pos : pos + mlen].decode("utf-8")
                    pos += mlen
                if pos > end:
                    raise RecordDecodeError("offset record runs past the end of its frame")
                yield OffsetCommitRecord(group, topic, partition, offset, epoch, meta, ts, expire)
                continue
            cur = _Cursor(buf, pos + 1)
            if kind == _GROUP:
                group_id = cur.required()
                protocol_type = cur.required()
                protocol = cur.string()
                leader = cur.string()
                generation, timestamp, n = _GROUP_HEAD.unpack_from(buf, cur.pos)
                cur.pos += _GROUP_HEAD.size
                members = []
                for _ in range(n):
                    member_id = cur.required()
                    instance_id = cur.string()
                    client_id = cur.required()
                    client_host = cur.required()
                    rebalance_timeout, session_timeout = _MEMBER_HEAD.unpack_from(buf, cur.pos)
                    cur.pos += _MEMBER_HEAD.size
                    subscription = cur.raw(cur.u32())
                    assignment = cur.raw(cur.u32())
                    members.append(
                        MemberRecord(
                            member_id,
                            instance_id,
                            client_id,
                            client_host,
                            rebalance_timeout,
                            session_timeout,
                            subscription,
                            assignment,
                        )
                    )
                yield GroupMetadataRecord(
                    group_id, protocol_type, generation, protocol, leader, timestamp, tuple(members)
                )
            elif kind == _GROUP_TOMBSTONE:
                yield GroupTombstone(cur.required())
            elif kind == _OFFSET_TOMBSTONE:
                group_id = cur.required()
                topic = cur.required()
                partition = _I32.unpack_from(buf, cur.pos)[0]
                cur.pos += 4
                yield OffsetTombstone(group_id, topic, partition)
            elif kind == _CONFIG:
                group_id = cur.required()
                n = cur.u32()
                configs = tuple((cur.required(), cur.required()) for _ in range(n))
                yield GroupConfigRecord(group_id, configs)
            elif kind == _SECURITY:
                yield SecurityRecord(cur.raw(cur.u32()))
            elif kind == _CONSUMER_GROUP:
                yield ConsumerGroupRecord(group_from_json(cur.raw(cur.u32())))
            else:
                raise RecordDecodeError(f"unknown record type {kind}")
            pos = cur.pos
    except (struct.error, IndexError, UnicodeDecodeError, KeyError, TypeError, ValueError) as exc:
        if isinstance(exc, RecordDecodeError):
            raise
        raise RecordDecodeError(f"malformed record: {exc}") from exc
