"""Record batch v2 parsing, produce validation and offset assignment, against kafka-python's encoder."""

from __future__ import annotations

import struct

import crc32c
import pytest

from staticfleet.broker import recordbatch as rb
from staticfleet.broker.topiclog_errors import (
    CorruptMessageError,
    InvalidRecordError,
    InvalidTimestampError,
    MessageTooLargeError,
    TopicLogError,
    UnsupportedForMessageFormatError,
)
from tests.broker.kafka_batches import GZIP, Rec, build_batch, decode, simple_batch

LIMIT = 1 << 20


def _resign(batch: bytearray) -> bytearray:
    """Recompute the CRC after editing a covered field, so only the edited field is wrong."""
    struct.pack_into(">I", batch, rb.CRC_OFFSET, crc32c.crc32c(bytes(batch[rb.ATTRIBUTES_OFFSET :])))
    return batch


def test_header_of_a_client_batch_is_parsed_field_by_field() -> None:
    batch = build_batch(
        [Rec(b"a" * 200, 5_000), Rec(b"b" * 200, 7_000), Rec(b"c" * 200, 6_000)],
        compression=GZIP,
    )
    header = rb.parse_header(batch)
    assert header.magic == 2
    assert header.base_offset == 0
    assert header.size == len(batch)
    assert header.records_count == 3
    assert header.last_offset_delta == 2
    assert header.first_timestamp == 5_000
    assert header.max_timestamp == 7_000
    assert header.compression == GZIP
    assert header.producer_id == -1
    assert not header.log_append_time and not header.is_control and not header.is_transactional
    assert header.crc == rb.compute_crc(batch, 0, len(batch))


def test_produce_validation_accepts_concatenated_batches_and_reports_their_positions() -> None:
    first, second = simple_batch(3), simple_batch(2, tag="w")
    refs = rb.validate_produce_records(first + second, max_message_bytes=LIMIT)
    assert [(ref.position, ref.header.records_count) for ref in refs] == [(0, 3), (len(first), 2)]


def test_empty_produce_data_is_an_invalid_record() -> None:
    with pytest.raises(InvalidRecordError) as info:
        rb.validate_produce_records(b"", max_message_bytes=LIMIT)
    assert info.value.error_code == 87


def test_flipped_payload_bit_fails_the_crc_check_with_corrupt_message() -> None:
    batch = bytearray(simple_batch(3))
    batch[-1] ^= 0x01
    with pytest.raises(CorruptMessageError, match="CRC") as info:
        rb.validate_produce_records(batch, max_message_bytes=LIMIT)
    assert info.value.error_code == 2


@pytest.mark.parametrize("cut", [1, 20, 62])
def test_truncated_batch_is_corrupt(cut: int) -> None:
    batch = simple_batch(3)
    with pytest.raises(CorruptMessageError) as info:
        rb.validate_produce_records(batch[: len(batch) - cut], max_message_bytes=LIMIT)
    assert info.value.error_code == 2


def test_trailing_bytes_after_a_whole_batch_are_corrupt() -> None:
    with pytest.raises(CorruptMessageError):
        rb.validate_produce_records(simple_batch(2) + b"\x00" * 5, max_message_bytes=LIMIT)


@pytest.mark.parametrize("magic", [0, 1])
def test_legacy_message_sets_are_unsupported_for_message_format(magic: int) -> None:
    legacy = build_batch([Rec(b"old", 1_000)], magic=magic)
    assert legacy[rb.MAGIC_OFFSET] == magic
    with pytest.raises(UnsupportedForMessageFormatError) as info:
        rb.validate_produce_records(legacy, max_message_bytes=LIMIT)
    assert info.value.error_code == 43


def test_unknown_magic_is_corrupt() -> None:
    batch = bytearray(simple_batch(1))
    batch[rb.MAGIC_OFFSET] = 3
    with pytest.raises(CorruptMessageError, match="magic 3"):
        rb.validate_produce_records(batch, max_message_bytes=LIMIT)


def test_batch_length_below_the_header_size_is_corrupt() -> None:
    batch = bytearray(simple_batch(1))
    struct.pack_into(">i", batch, rb.LENGTH_OFFSET, 10)
    with pytest.raises(CorruptMessageError, match="length 10"):
        rb.validate_produce_records(batch, max_message_bytes=LIMIT)


def test_record_count_that_disagrees_with_last_offset_delta_is_an_invalid_record() -> None:
    batch = bytearray(simple_batch(3))
    struct.pack_into(">i", batch, 57, 5)  # recordsCount
    with pytest.raises(InvalidRecordError, match="reports 5 records") as info:
        rb.validate_produce_records(_resign(batch), max_message_bytes=LIMIT)
    assert info.value.error_code == 87


def test_zero_record_count_is_an_invalid_record() -> None:
    batch = bytearray(simple_batch(1))
    struct.pack_into(">i", batch, 57, 0)
    struct.pack_into(">i", batch, rb.LAST_OFFSET_DELTA_OFFSET, -1)
    with pytest.raises(InvalidRecordError):
        rb.validate_produce_records(_resign(batch), max_message_bytes=LIMIT)


def test_clients_may_not_write_control_batches() -> None:
    batch = bytearray(simple_batch(1))
    struct.pack_into(">h", batch, rb.ATTRIBUTES_OFFSET, rb.CONTROL_MASK)
    with pytest.raises(InvalidRecordError, match="control"):
        rb.validate_produce_records(_resign(batch), max_message_bytes=LIMIT)


def test_producer_may_not_claim_log_append_time() -> None:
    batch = bytearray(simple_batch(1))
    struct.pack_into(">h", batch, rb.ATTRIBUTES_OFFSET, rb.TIMESTAMP_TYPE_MASK)
    with pytest.raises(InvalidTimestampError) as info:
        rb.validate_produce_records(_resign(batch), max_message_bytes=LIMIT)
    assert info.value.error_code == 32


def test_batch_larger_than_max_message_bytes_is_message_too_large() -> None:
    batch = simple_batch(2, value_size=500)
    with pytest.raises(MessageTooLargeError) as info:
        rb.validate_produce_records(batch, max_message_bytes=len(batch) - 1)
    assert info.value.error_code == 10
    assert rb.validate_produce_records(batch, max_message_bytes=len(batch))


def test_assigned_offsets_keep_the_client_crc_valid() -> None:
    data = bytearray(simple_batch(3) + simple_batch(4, tag="w"))
    refs = rb.validate_produce_records(data, max_message_bytes=LIMIT)
    assigned = rb.assign_offsets(data, refs, 100, leader_epoch=7, log_append_time_ms=None)
    assert [(ref.header.base_offset, ref.header.last_offset) for ref in assigned] == [(100, 102), (103, 106)]
    batches = decode(bytes(data))
    assert [b.base_offset for b in batches] == [100, 103]
    assert all(b.crc_valid for b in batches)
    assert [r.offset for b in batches for r in b.records] == list(range(100, 107))
    assert rb.parse_header(data, refs[1].position).partition_leader_epoch == 7
    rb.check_framing(data, 0, len(data))  # our own check agrees


def test_log_append_time_rewrites_max_timestamp_and_recomputes_the_crc() -> None:
    data = bytearray(simple_batch(3, first_timestamp=1_000))
    refs = rb.validate_produce_records(data, max_message_bytes=LIMIT)
    assigned = rb.assign_offsets(data, refs, 0, leader_epoch=0, log_append_time_ms=99_000)
    assert assigned[0].header.log_append_time and assigned[0].header.max_timestamp == 99_000
    (batch,) = decode(bytes(data))
    assert batch.crc_valid
    assert {(r.timestamp, r.timestamp_type) for r in batch.records} == {(99_000, 1)}


@pytest.mark.parametrize("compression", [0, GZIP])
def test_record_timestamps_are_decoded_from_the_batch(compression: int) -> None:
    values = [b"x" * 300, b"y" * 300, b"z" * 300, b"w" * 300]
    batch = bytearray(
        build_batch(
            [Rec(v, ts) for v, ts in zip(values, [50, 30, 70, 70], strict=True)], compression=compression
        )
    )
    assert rb.parse_header(batch).compression == compression
    struct.pack_into(">q", batch, 0, 10)  # as stored: base offset 10
    assert list(rb.iter_record_timestamps(batch)) == [(10, 50), (11, 30), (12, 70), (13, 70)]
    assert rb.first_record_at_or_after(batch, 40) == (10, 50)
    assert rb.first_record_at_or_after(batch, 51) == (12, 70)
    assert rb.first_record_at_or_after(batch, 71) is None
    assert rb.max_timestamp_record(batch) == (12, 70)


def test_errors_carry_kafka_codes() -> None:
    assert issubclass(CorruptMessageError, TopicLogError)
    assert TopicLogError.error_code == -1
