"""The consumer protocol: kio reads it; the hand-written writer writes exactly what kio's writer would."""

from __future__ import annotations

import io
import struct
from typing import Any

import pytest
from kio.schema.consumer_protocol_assignment.v1 import data as assignment_v1
from kio.schema.consumer_protocol_subscription.v3 import data as subscription_v3
from kio.schema.types import TopicName
from kio.serial import entity_writer
from kio.static.primitive import i32

from staticfleet.coordinator.consumer_protocol import (
    Assignment,
    ProtocolDecodeError,
    Subscription,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)


def _kio_bytes(version: int, entity: Any) -> bytes:
    out = io.BytesIO()
    out.write(struct.pack(">h", version))
    entity_writer(type(entity))(out, entity)
    return out.getvalue()


def test_a_subscription_is_written_exactly_as_kio_writes_it() -> None:
    sub = Subscription(3, ("a", "b"), b"ud", {"a": (0, 1)}, 7, "rack")
    kio = subscription_v3.ConsumerProtocolSubscription(
        topics=("a", "b"),
        user_data=b"ud",
        owned_partitions=(subscription_v3.TopicPartition(topic=TopicName("a"), partitions=(i32(0), i32(1))),),
        generation_id=i32(7),
        rack_id="rack",
    )
    assert encode_subscription(sub) == _kio_bytes(3, kio)


def test_an_assignment_is_written_exactly_as_kio_writes_it() -> None:
    kio = assignment_v1.ConsumerProtocolAssignment(
        assigned_partitions=(
            assignment_v1.TopicPartition(topic=TopicName("t"), partitions=(i32(2), i32(0))),
        ),
        user_data=None,
    )
    assert encode_assignment(Assignment(1, {"t": (2, 0)})) == _kio_bytes(1, kio)


def test_an_array_count_larger_than_the_bytes_is_a_decode_error() -> None:
    garbled = struct.pack(">hi", 0, 2**31 - 1) + b"\x00\x01t"
    with pytest.raises(ProtocolDecodeError):
        decode_subscription(garbled)


def test_a_negative_version_is_a_decode_error() -> None:
    with pytest.raises(ProtocolDecodeError, match="negative"):
        decode_subscription(struct.pack(">hi", -1, 0))


@pytest.mark.parametrize(
    ("payload", "field"),
    [
        (struct.pack(">hi", 0, -1) + struct.pack(">i", -1), "topics"),  # v0: topics null, user data null
        (struct.pack(">hi", 1, 0) + struct.pack(">ii", -1, -1), "ownedPartitions"),  # v1: owned null
        (
            struct.pack(">hi", 1, 0) + struct.pack(">ii", -1, 1) + b"\x00\x01t" + struct.pack(">i", -1),
            "partitions",
        ),
    ],
)
def test_a_null_array_is_a_decode_error_as_kafka_refuses_it(payload: bytes, field: str) -> None:
    """kio reads a null non-nullable array as None; Kafka's readers refuse it, and a group whose member
    sent one has subscriptions nobody can read (found by bench/fuzz_frames.py: a timer failed on it)."""
    with pytest.raises(ProtocolDecodeError, match=f"non-nullable field {field} was serialized as null"):
        decode_subscription(payload)


def test_an_assignment_with_null_partitions_is_a_decode_error() -> None:
    with pytest.raises(ProtocolDecodeError, match="assignedPartitions"):
        decode_assignment(struct.pack(">hi", 0, -1) + struct.pack(">i", -1))
