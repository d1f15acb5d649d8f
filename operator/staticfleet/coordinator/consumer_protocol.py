"""The "consumer" embedded protocol: subscription and assignment bytes carried inside JoinGroup/SyncGroup.

Layout (non-flexible, big-endian): int16 version, then
  Subscription v0: topics [string], user_data nullable bytes; v1 adds owned_partitions [(topic, [int32])];
  v2 adds generation_id int32; v3 adds rack_id nullable string.
  Assignment v0+: assigned_partitions [(topic, [int32])], user_data nullable bytes.
Later fields are optional on read: bytes a newer client appends are ignored, as Kafka does.
"""

from __future__ import annotations

import struct
from dataclasses import dataclass, field

_I16 = struct.Struct(">h")
_I32 = struct.Struct(">i")


class ProtocolDecodeError(ValueError):
    pass


class _Reader:
    __slots__ = ("buf", "pos")

    def __init__(self, buf: bytes) -> None:
        self.buf = buf
        self.pos = 0

    def remaining(self) -> int:
        return len(self.buf) - self.pos

    def _take(self, n: int) -> bytes:
        if n < 0 or self.pos + n > len(self.buf):
            raise ProtocolDecodeError("truncated consumer protocol payload")
        out = self.buf[self.pos : self.pos + n]
        self.pos += n
        return out

    def int16(self) -> int:
        value: int = _I16.unpack(self._take(2))[0]
        return value

    def int32(self) -> int:
        value: int = _I32.unpack(self._take(4))[0]
        return value

    def string(self) -> str:
        n = self.int16()
        if n < 0:
            raise ProtocolDecodeError("null string where a string is required")
        return self._take(n).decode("utf-8")

    def nullable_string(self) -> str | None:
        n = self.int16()
        return None if n < 0 else self._take(n).decode("utf-8")

    def nullable_bytes(self) -> bytes | None:
        n = self.int32()
        return None if n < 0 else self._take(n)

    def array_len(self) -> int:
        n = self.int32()
        if n > self.remaining():
            raise ProtocolDecodeError("array longer than the payload")
        return max(n, 0)

    def topic_partitions(self) -> dict[str, tuple[int, ...]]:
        out: dict[str, tuple[int, ...]] = {}
        for _ in range(self.array_len()):
            topic = self.string()
            out[topic] = tuple(self.int32() for _ in range(self.array_len()))
        return out


@dataclass(frozen=True, slots=True)
class Subscription:
    version: int
    topics: tuple[str, ...]
    user_data: bytes | None = None
    owned_partitions: dict[str, tuple[int, ...]] = field(default_factory=dict)
    generation_id: int = -1
    rack_id: str | None = None


@dataclass(frozen=True, slots=True)
class Assignment:
    version: int
    partitions: dict[str, tuple[int, ...]]
    user_data: bytes | None = None


def decode_subscription(data: bytes) -> Subscription:
    reader = _Reader(data)
    version = reader.int16()
    if version < 0:
        raise ProtocolDecodeError(f"negative subscription version {version}")
    topics = tuple(reader.string() for _ in range(reader.array_len()))
    user_data = reader.nullable_bytes() if reader.remaining() else None
    owned: dict[str, tuple[int, ...]] = {}
    generation = -1
    rack: str | None = None
    if version >= 1 and reader.remaining():
        owned = reader.topic_partitions()
    if version >= 2 and reader.remaining():
        generation = reader.int32()
    if version >= 3 and reader.remaining():
        rack = reader.nullable_string()
    return Subscription(version, topics, user_data, owned, generation, rack)


def decode_assignment(data: bytes) -> Assignment:
    """An empty payload is the empty assignment Kafka hands to members the leader left out."""
    if not data:
        return Assignment(0, {})
    reader = _Reader(data)
    version = reader.int16()
    if version < 0:
        raise ProtocolDecodeError(f"negative assignment version {version}")
    partitions = reader.topic_partitions()
    user_data = reader.nullable_bytes() if reader.remaining() else None
    return Assignment(version, partitions, user_data)


def _string(text: str) -> bytes:
    raw = text.encode("utf-8")
    return _I16.pack(len(raw)) + raw


def _nullable_bytes(data: bytes | None) -> bytes:
    return _I32.pack(-1) if data is None else _I32.pack(len(data)) + data


def _topic_partitions(mapping: dict[str, tuple[int, ...]]) -> bytes:
    parts = [_I32.pack(len(mapping))]
    for topic, partitions in mapping.items():
        parts.append(_string(topic))
        parts.append(_I32.pack(len(partitions)))
        parts.extend(_I32.pack(p) for p in partitions)
    return b"".join(parts)


def encode_subscription(sub: Subscription) -> bytes:
    parts = [_I16.pack(sub.version), _I32.pack(len(sub.topics))]
    parts.extend(_string(t) for t in sub.topics)
    parts.append(_nullable_bytes(sub.user_data))
    if sub.version >= 1:
        parts.append(_topic_partitions(sub.owned_partitions))
    if sub.version >= 2:
        parts.append(_I32.pack(sub.generation_id))
    if sub.version >= 3:
        parts.append(_I16.pack(-1) if sub.rack_id is None else _string(sub.rack_id))
    return b"".join(parts)


def encode_assignment(assignment: Assignment) -> bytes:
    return (
        _I16.pack(assignment.version)
        + _topic_partitions(assignment.partitions)
        + _nullable_bytes(assignment.user_data)
    )


def assignment_partitions(data: bytes) -> dict[str, list[int]] | None:
    """Decoded topic -> partitions of an assignment, or None when the bytes are not a consumer assignment."""
    try:
        decoded = decode_assignment(data)
    except (ProtocolDecodeError, UnicodeDecodeError):
        return None
    return {topic: sorted(parts) for topic, parts in decoded.partitions.items()}


def subscribed_topics(data: bytes) -> frozenset[str] | None:
    try:
        return frozenset(decode_subscription(data).topics)
    except (ProtocolDecodeError, UnicodeDecodeError):
        return None
