"""The topic log on real files: round trips with kafka-python batches, fetch and ListOffsets semantics,
segments, retention, recovery, topic operations and long polling."""

from __future__ import annotations

import asyncio
import logging
import os
import struct
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka.record.memory_records import MemoryRecords

from staticfleet.broker.partitionlog import RECOVERY_POINT_FILE
from staticfleet.broker.recordbatch import parse_header
from staticfleet.broker.segment import segment_file_name
from staticfleet.broker.topiclog import (
    EARLIEST_TIMESTAMP,
    LATEST_TIMESTAMP,
    MAX_TIMESTAMP,
    CorruptMessageError,
    InvalidConfigError,
    InvalidPartitionsError,
    InvalidRecordError,
    InvalidReplicationFactorError,
    InvalidTopicError,
    KafkaStorageError,
    MessageTooLargeError,
    OffsetAndTimestamp,
    OffsetOutOfRangeError,
    PolicyViolationError,
    RecordListTooLargeError,
    TopicAlreadyExistsError,
    TopicLog,
    TopicLogError,
    UnknownTopicOrPartitionError,
    UnsupportedForMessageFormatError,
)
from tests.broker.kafka_batches import GZIP, Rec, build_batch, decode, decode_records, simple_batch

NOW = 1_700_000_000_000
HOUR = 3_600_000


class Clock:
    def __init__(self, now: int = NOW) -> None:
        self.now = now

    def __call__(self) -> int:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def tl(tmp_path: Path, clock: Clock) -> Iterator[TopicLog]:
    log = TopicLog(tmp_path, clock_ms=clock)
    yield log
    log.close()


def reopen(log: TopicLog, path: Path, clock: Clock) -> TopicLog:
    log.close()
    return TopicLog(path, clock_ms=clock)


def partition_dir(root: Path, topic: str, partition: int = 0) -> Path:
    return root / "topics" / topic / str(partition)


def segment_files(root: Path, topic: str, partition: int = 0) -> list[str]:
    return sorted(p.name for p in partition_dir(root, topic, partition).glob("*.log"))


def fill(log: TopicLog, topic: str, batches: int, per_batch: int = 3, value_size: int = 10) -> list[int]:
    """Append `batches` batches; return their base offsets."""
    return [
        log.append(
            topic,
            0,
            simple_batch(per_batch, first_timestamp=NOW + i * 1000, value_size=value_size, tag=f"b{i}-"),
        ).base_offset
        for i in range(batches)
    ]


# -- round trips ---------------------------------------------------------------------------------------


@pytest.mark.parametrize("compression", [0, GZIP])
def test_client_batches_round_trip_with_offsets_keys_values_headers_and_timestamps(
    tl: TopicLog, compression: int
) -> None:
    tl.create_topic("orders", 1)
    first = [
        Rec(b"v" * 100, NOW, key=b"k1", headers=(("trace", b"abc"), ("empty", b""))),
        Rec(None, NOW + 5, key=b"k2"),
        Rec(b"third" * 30, NOW + 2, key=None, headers=(("h", b"\x00\xff"),)),
    ]
    second = [Rec(b"x" * 200, NOW + 10 + i, key=b"k%d" % i) for i in range(4)]
    batch_one = build_batch(first, compression=compression)
    batch_two = build_batch(second, compression=compression)
    assert batch_one[22] & 0x07 == batch_two[22] & 0x07 == compression  # really compressed when asked

    assert tl.append("orders", 0, batch_one).base_offset == 0
    result = tl.append("orders", 0, batch_two)
    assert (result.base_offset, result.last_offset, result.log_start_offset) == (3, 6, 0)
    assert result.log_append_time_ms == -1

    fetched = tl.read("orders", 0, 0, 1 << 20)
    assert fetched.high_watermark == 7 and fetched.log_start_offset == 0 and fetched.last_stable_offset == 7
    batches = decode(fetched.records)
    assert [b.base_offset for b in batches] == [0, 3]
    assert all(b.crc_valid for b in batches)
    assert [b.size for b in batches] == [len(batch_one), len(batch_two)]
    got = [(r.offset, r.timestamp, r.key, r.value, r.headers) for b in batches for r in b.records]
    want = [(i, r.timestamp, r.key, r.value, r.headers) for i, r in enumerate(first + second)]
    assert got == want


def test_batches_are_stored_byte_for_byte_except_base_offset(tl: TopicLog) -> None:
    tl.create_topic("t", 1)
    fill(tl, "t", 2)
    batch = simple_batch(2, tag="z")
    tl.append("t", 0, batch)
    stored = tl.read("t", 0, 6, 1 << 20).records
    assert struct.unpack_from(">q", stored)[0] == 6
    assert stored[8:] == batch[8:]


def test_several_batches_in_one_produce_request_get_consecutive_offsets(tl: TopicLog) -> None:
    tl.create_topic("t", 1)
    tl.append("t", 0, simple_batch(1))
    result = tl.append("t", 0, simple_batch(2) + simple_batch(3, tag="w") + simple_batch(1, tag="u"))
    assert (result.base_offset, result.last_offset) == (1, 6)
    assert [b.base_offset for b in decode(tl.read("t", 0, 0, 1 << 20).records)] == [0, 1, 3, 6]


def test_log_append_time_topic_stamps_batches_with_the_append_time(tl: TopicLog, clock: Clock) -> None:
    tl.create_topic("stamped", 1, configs={"message.timestamp.type": "LogAppendTime"})
    clock.now = NOW + 42
    result = tl.append("stamped", 0, simple_batch(3, first_timestamp=5))
    assert result.log_append_time_ms == NOW + 42
    (batch,) = decode(tl.read("stamped", 0, 0, 1 << 20).records)
    assert batch.crc_valid
    assert {(r.timestamp, r.timestamp_type) for r in batch.records} == {(NOW + 42, 1)}
    assert tl.list_offset("stamped", 0, NOW + 40) == OffsetAndTimestamp(0, NOW + 42)


# -- fetch ---------------------------------------------------------------------------------------------


def test_fetch_in_the_middle_of_a_batch_returns_the_whole_batch_containing_the_offset(tl: TopicLog) -> None:
    tl.create_topic("t", 1)
    fill(tl, "t", 3, per_batch=5)
    batches = decode(tl.read("t", 0, 7, 1 << 20).records)
    assert [(b.base_offset, b.last_offset) for b in batches] == [(5, 9), (10, 14)]


def test_fetch_returns_whole_batches_within_max_bytes(tl: TopicLog) -> None:
    tl.create_topic("t", 1)
    fill(tl, "t", 5, per_batch=2)
    size = len(tl.read("t", 0, 0, 1).records)  # one batch
    data = tl.read("t", 0, 0, 2 * size + size // 2).records
    assert len(data) == 2 * size
    assert MemoryRecords(data).valid_bytes() == len(data)
    assert [b.base_offset for b in decode(data)] == [0, 2]


def test_first_batch_is_returned_whole_even_when_larger_than_max_bytes(tl: TopicLog) -> None:
    tl.create_topic("t", 1)
    big = simple_batch(3, value_size=5000)
    tl.append("t", 0, big)
    tl.append("t", 0, simple_batch(1))
    data = tl.read("t", 0, 0, 100).records
    assert len(data) == len(big)
    assert [b.base_offset for b in decode(data)] == [0]
    assert tl.read("t", 0, 0, 100, min_one_batch=False).records == b""


def test_fetch_at_the_log_end_is_empty_and_past_it_out_of_range(tl: TopicLog) -> None:
    tl.create_topic("t", 1)
    fill(tl, "t", 2)
    assert tl.read("t", 0, 6, 1000).records == b""
    with pytest.raises(OffsetOutOfRangeError) as info:
        tl.read("t", 0, 7, 1000)
    assert info.value.error_code == 1
    with pytest.raises(OffsetOutOfRangeError):
        tl.read("t", 0, -1, 1000)


def test_unknown_topic_or_partition(tl: TopicLog) -> None:
    tl.create_topic("t", 2)
    for call in (
        lambda: tl.read("nope", 0, 0, 100),
        lambda: tl.read("t", 2, 0, 100),
        lambda: tl.append("t", -1, simple_batch(1)),
        lambda: tl.list_offset("nope", 0, LATEST_TIMESTAMP),
        lambda: tl.log_end_offset("t", 5),
    ):
        with pytest.raises(UnknownTopicOrPartitionError) as info:
            call()
        assert info.value.error_code == 3


def test_sequential_fetches_walk_the_log_across_segments(tmp_path: Path, clock: Clock) -> None:
    log = TopicLog(tmp_path, clock_ms=clock)
    log.create_topic("t", 1, configs={"segment.bytes": "600", "index.interval.bytes": "150"})
    fill(log, "t", 40, per_batch=2)
    assert len(segment_files(tmp_path, "t")) > 5
    offsets: list[int] = []
    position = 0
    for _ in range(100):
        data = log.read("t", 0, position, 350).records
        if not data:
            break
        records = decode_records(data)
        offsets.extend(r.offset for r in records if r.offset >= position)
        position = records[-1].offset + 1
    assert offsets == list(range(80))
    # every offset resolves to its own batch, through the sparse index, from a fresh start too
    log = reopen(log, tmp_path, clock)
    for offset in range(80):
        assert decode(log.read("t", 0, offset, 1).records)[0].base_offset == offset - offset % 2
    log.close()


# -- list offsets --------------------------------------------------------------------------------------


def test_list_offsets_earliest_latest_and_max_timestamp(tl: TopicLog) -> None:
    tl.create_topic("t", 1)
    assert tl.list_offset("t", 0, EARLIEST_TIMESTAMP) == OffsetAndTimestamp(0, -1)
    assert tl.list_offset("t", 0, LATEST_TIMESTAMP) == OffsetAndTimestamp(0, -1)
    assert tl.list_offset("t", 0, MAX_TIMESTAMP) == OffsetAndTimestamp(-1, -1)
    tl.append("t", 0, build_batch([Rec(b"a", 100), Rec(b"b", 900), Rec(b"c", 300)]))
    tl.append("t", 0, build_batch([Rec(b"d", 500), Rec(b"e", 900)]))
    assert tl.list_offset("t", 0, LATEST_TIMESTAMP) == OffsetAndTimestamp(5, -1)
    assert tl.list_offset("t", 0, MAX_TIMESTAMP) == OffsetAndTimestamp(1, 900)


@pytest.mark.parametrize("compression", [0, GZIP])
def test_list_offsets_by_timestamp_finds_the_first_record_at_or_after_it(
    tl: TopicLog, compression: int
) -> None:
    tl.create_topic("t", 1)
    pad = b"p" * 200
    tl.append("t", 0, build_batch([Rec(pad, 100), Rec(pad, 200), Rec(pad, 150)], compression=compression))
    tl.append("t", 0, build_batch([Rec(pad, 400), Rec(pad, 300)], compression=compression))
    assert tl.list_offset("t", 0, 0) == OffsetAndTimestamp(0, 100)
    assert tl.list_offset("t", 0, 101) == OffsetAndTimestamp(1, 200)
    assert tl.list_offset("t", 0, 201) == OffsetAndTimestamp(3, 400)
    assert tl.list_offset("t", 0, 400) == OffsetAndTimestamp(3, 400)
    assert tl.list_offset("t", 0, 401) == OffsetAndTimestamp(-1, -1)


def test_list_offsets_by_timestamp_across_many_segments_and_index_entries(
    tmp_path: Path, clock: Clock
) -> None:
    log = TopicLog(tmp_path, clock_ms=clock)
    log.create_topic("t", 1, configs={"segment.bytes": "1000", "index.interval.bytes": "200"})
    fill(log, "t", 60, per_batch=3)  # batch i holds timestamps NOW + 1000 i + (0, 1, 2)
    for reopened in (False, True):
        if reopened:
            log = reopen(log, tmp_path, clock)
        for i in (0, 1, 17, 33, 59):
            assert log.list_offset("t", 0, NOW + 1000 * i + 1) == OffsetAndTimestamp(
                3 * i + 1, NOW + 1000 * i + 1
            )
            assert log.list_offset("t", 0, NOW + 1000 * i - 500) == OffsetAndTimestamp(3 * i, NOW + 1000 * i)
        assert log.list_offset("t", 0, MAX_TIMESTAMP) == OffsetAndTimestamp(179, NOW + 59_002)
    log.close()


# -- segments and retention ----------------------------------------------------------------------------


def test_segments_roll_by_size_and_are_named_by_base_offset(tmp_path: Path, clock: Clock) -> None:
    log = TopicLog(tmp_path, clock_ms=clock)
    log.create_topic("t", 1, configs={"segment.bytes": "500"})
    batch_size = len(simple_batch(2))
    fill(log, "t", 10, per_batch=2)
    per_segment = 500 // batch_size
    files = segment_files(tmp_path, "t")
    assert files[0] == "00000000000000000000.log"
    assert files == [segment_file_name(2 * per_segment * i) for i in range(len(files))]
    for name in files[:-1]:
        assert os.path.getsize(partition_dir(tmp_path, "t") / name) <= 500
    log.close()


def test_segments_roll_by_time(tmp_path: Path, clock: Clock) -> None:
    log = TopicLog(tmp_path, clock_ms=clock)
    log.create_topic("t", 1, configs={"segment.ms": str(HOUR)})
    log.append("t", 0, simple_batch(1))
    clock.now += HOUR // 2
    log.append("t", 0, simple_batch(1))
    assert len(segment_files(tmp_path, "t")) == 1
    clock.now += HOUR
    log.append("t", 0, simple_batch(1))
    assert segment_files(tmp_path, "t") == [segment_file_name(0), segment_file_name(2)]
    log.close()


def test_a_produce_request_larger_than_a_segment_is_record_list_too_large(tl: TopicLog) -> None:
    tl.create_topic("t", 1, configs={"segment.bytes": "300"})
    with pytest.raises(RecordListTooLargeError) as info:
        tl.append("t", 0, simple_batch(10, value_size=50))
    assert info.value.error_code == 18


def test_retention_by_size_deletes_whole_old_segments_and_advances_the_log_start(
    tmp_path: Path, clock: Clock
) -> None:
    log = TopicLog(tmp_path, clock_ms=clock)
    log.create_topic("t", 1, configs={"segment.bytes": "500", "retention.bytes": "1000"})
    fill(log, "t", 20, per_batch=2)
    before = segment_files(tmp_path, "t")
    deleted = log.enforce_retention()
    after = segment_files(tmp_path, "t")
    assert deleted == len(before) - len(after) > 0
    assert after == before[deleted:]
    sizes = [os.path.getsize(partition_dir(tmp_path, "t") / name) for name in after]
    # as in Kafka: delete while what remains stays at or above retention.bytes
    assert sum(sizes) >= 1000 > sum(sizes) - sizes[0]
    assert log.enforce_retention() == 0
    start = int(after[0].split(".")[0])
    assert log.log_start_offset("t", 0) == start > 0
    assert log.append("t", 0, simple_batch(1)).log_start_offset == start
    assert log.list_offset("t", 0, EARLIEST_TIMESTAMP).offset == start
    assert decode(log.read("t", 0, start, 1).records)[0].base_offset == start
    with pytest.raises(OffsetOutOfRangeError):
        log.read("t", 0, start - 1, 1000)
    log = reopen(log, tmp_path, clock)
    assert log.log_start_offset("t", 0) == start
    log.close()


def test_retention_by_age_uses_the_largest_timestamp_of_each_segment(tmp_path: Path, clock: Clock) -> None:
    log = TopicLog(tmp_path, clock_ms=clock)
    log.create_topic("t", 1, configs={"segment.bytes": "500", "retention.ms": str(HOUR)})
    old = [log.append("t", 0, simple_batch(2, first_timestamp=NOW - 3 * HOUR)) for _ in range(6)]
    fresh = [log.append("t", 0, simple_batch(2, first_timestamp=NOW)) for _ in range(6)]
    assert old[-1].last_offset + 1 == fresh[0].base_offset
    log.enforce_retention(NOW + 10)
    start = log.log_start_offset("t", 0)
    assert 0 < start <= fresh[0].base_offset
    assert decode(log.read("t", 0, start, 1).records)[0].base_offset == start
    # once everything is older than retention.ms, the active segment goes too and the log is empty
    log.enforce_retention(NOW + 2 * HOUR)
    assert log.log_start_offset("t", 0) == log.log_end_offset("t", 0) == fresh[-1].last_offset + 1
    assert segment_files(tmp_path, "t") == [segment_file_name(fresh[-1].last_offset + 1)]
    assert log.read("t", 0, fresh[-1].last_offset + 1, 100).records == b""
    assert log.append("t", 0, simple_batch(1)).base_offset == fresh[-1].last_offset + 1
    log = reopen(log, tmp_path, clock)
    assert log.log_start_offset("t", 0) == fresh[-1].last_offset + 1
    assert log.log_end_offset("t", 0) == fresh[-1].last_offset + 2
    log.close()


def test_unlimited_retention_keeps_everything(tl: TopicLog) -> None:
    tl.create_topic("t", 1, configs={"segment.bytes": "300", "retention.ms": "-1", "retention.bytes": "-1"})
    fill(tl, "t", 10)
    assert tl.enforce_retention(NOW + 1000 * HOUR) == 0
    assert tl.log_start_offset("t", 0) == 0


def test_altered_retention_applies_and_persists(tmp_path: Path, clock: Clock) -> None:
    log = TopicLog(tmp_path, clock_ms=clock)
    log.create_topic("t", 1, configs={"segment.bytes": "500"})
    fill(log, "t", 20, per_batch=2)
    assert log.enforce_retention() == 0
    log.alter_topic_configs("t", {"retention.bytes": "600"})
    assert log.topic_configs("t")["retention.bytes"] == "600"
    assert log.enforce_retention() > 0
    log = reopen(log, tmp_path, clock)
    assert log.describe_topic("t").configs == {"segment.bytes": "500", "retention.bytes": "600"}
    log.alter_topic_configs("t", {"retention.bytes": None})
    assert log.describe_topic("t").configs == {"segment.bytes": "500"}
    log.alter_topic_configs("t", {"retention.ms": "1000"}, replace=True)
    assert log.describe_topic("t").configs == {"retention.ms": "1000"}
    with pytest.raises(InvalidConfigError):
        log.alter_topic_configs("t", {"cleanup.policy": "compacted"})
    with pytest.raises(InvalidConfigError, match="conflict"):
        log.alter_topic_configs("t", {"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"})
    assert log.describe_topic("t").configs == {"retention.ms": "1000"}
    log.close()


# -- validation on append ------------------------------------------------------------------------------


def test_rejected_appends_change_nothing_and_carry_the_kafka_error_code(tl: TopicLog) -> None:
    tl.create_topic("t", 1, configs={"max.message.bytes": "2000"})
    tl.append("t", 0, simple_batch(2))
    corrupt = bytearray(simple_batch(2))
    corrupt[70] ^= 0xFF
    cases: list[tuple[bytes, type[TopicLogError], int]] = [
        (bytes(corrupt), CorruptMessageError, 2),
        (build_batch([Rec(b"v1", NOW)], magic=1), UnsupportedForMessageFormatError, 43),
        (simple_batch(3, value_size=1000), MessageTooLargeError, 10),
        (simple_batch(1) + simple_batch(2)[:-3], CorruptMessageError, 2),  # the valid first batch is not kept
    ]
    for data, error, code in cases:
        with pytest.raises(error) as info:
            tl.append("t", 0, data)
        assert info.value.error_code == code
        assert tl.log_end_offset("t", 0) == 2
    assert tl.append("t", 0, simple_batch(1)).base_offset == 2


# -- recovery ------------------------------------------------------------------------------------------


def test_recovery_truncates_a_torn_tail_and_appends_continue_at_the_right_offset(
    tmp_path: Path, clock: Clock
) -> None:
    log = TopicLog(tmp_path, clock_ms=clock)
    log.create_topic("t", 1)
    fill(log, "t", 4)  # offsets 0..11
    log.close()
    segment = partition_dir(tmp_path, "t") / segment_file_name(0)
    whole = os.path.getsize(segment)
    batch_size = whole // 4
    with open(segment, "r+b") as f:
        f.truncate(whole - batch_size // 2)  # the fourth batch is torn
    log = TopicLog(tmp_path, clock_ms=clock)
    assert log.log_end_offset("t", 0) == 9
    assert os.path.getsize(segment) == 3 * batch_size
    assert [r.offset for r in decode_records(log.read("t", 0, 0, 1 << 20).records)] == list(range(9))
    assert log.append("t", 0, simple_batch(2, tag="new")).base_offset == 9
    records = decode_records(log.read("t", 0, 9, 1 << 20).records)
    assert [(r.offset, r.value) for r in records] == [(9, b"new0......"), (10, b"new1......")]
    log.close()


def test_recovery_drops_everything_from_a_batch_with_a_bad_crc_in_the_last_segment(
    tmp_path: Path, clock: Clock, caplog: pytest.LogCaptureFixture
) -> None:
    log = TopicLog(tmp_path, clock_ms=clock)
    log.create_topic("t", 1)
    fill(log, "t", 5)  # offsets 0..14, batches of equal size
    log.close()
    segment = partition_dir(tmp_path, "t") / segment_file_name(0)
    batch_size = os.path.getsize(segment) // 5
    with open(segment, "r+b") as f:
        f.seek(2 * batch_size + 70)  # inside the records of the third batch
        byte = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([byte[0] ^ 0x55]))
    with caplog.at_level(logging.WARNING):
        log = TopicLog(tmp_path, clock_ms=clock)
    assert (
        f"to {2 * batch_size} bytes: record batch at position {2 * batch_size} failed its CRC" in caplog.text
    )
    assert log.log_end_offset("t", 0) == 6
    data = log.read("t", 0, 0, 1 << 20).records
    assert [b.base_offset for b in decode(data)] == [0, 3]
    assert all(b.crc_valid for b in decode(data))
    assert log.append("t", 0, simple_batch(1)).base_offset == 6
    log.close()


def test_recovery_of_a_bad_closed_segment_truncates_there_and_drops_later_segments(
    tmp_path: Path, clock: Clock
) -> None:
    log = TopicLog(tmp_path, clock_ms=clock)
    log.create_topic("t", 1, configs={"segment.bytes": "500"})
    fill(log, "t", 12, per_batch=2)
    log.close()
    files = segment_files(tmp_path, "t")
    assert len(files) >= 3
    victim = partition_dir(tmp_path, "t") / files[1]
    with open(victim, "r+b") as f:
        f.seek(8)
        f.write(struct.pack(">i", 3))  # an impossible batch length in the first batch
    log = TopicLog(tmp_path, clock_ms=clock)
    second_base = int(files[1].split(".")[0])
    assert segment_files(tmp_path, "t") == files[:2]
    assert os.path.getsize(victim) == 0
    assert log.log_end_offset("t", 0) == second_base
    assert log.append("t", 0, simple_batch(1)).base_offset == second_base
    log.close()


def test_recovery_truncates_at_a_batch_whose_base_offset_breaks_the_sequence(
    tmp_path: Path, clock: Clock
) -> None:
    log = TopicLog(tmp_path, clock_ms=clock)
    log.create_topic("t", 1)
    fill(log, "t", 4)
    log.close()
    segment = partition_dir(tmp_path, "t") / segment_file_name(0)
    batch_size = os.path.getsize(segment) // 4
    with open(segment, "r+b") as f:
        f.seek(2 * batch_size)
        f.write(struct.pack(">q", 1000))  # baseOffset is outside the CRC, so only the sequence betrays it
    log = TopicLog(tmp_path, clock_ms=clock)
    assert log.log_end_offset("t", 0) == 6
    assert os.path.getsize(segment) == 2 * batch_size
    log.close()


def test_segments_past_the_recovery_point_have_their_crcs_checked(tmp_path: Path, clock: Clock) -> None:
    log = TopicLog(tmp_path, clock_ms=clock)
    log.create_topic("t", 1, configs={"segment.bytes": "500"})
    fill(log, "t", 12, per_batch=2)
    log.close()
    (partition_dir(tmp_path, "t") / RECOVERY_POINT_FILE).unlink()  # as if no flush ever completed
    files = segment_files(tmp_path, "t")
    first = partition_dir(tmp_path, "t") / files[0]
    batch_size = len(simple_batch(2))
    with open(first, "r+b") as f:
        f.seek(batch_size + 70)  # the records of the second batch of the first, closed, segment
        byte = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([byte[0] ^ 0x01]))
    log = TopicLog(tmp_path, clock_ms=clock)
    assert log.log_end_offset("t", 0) == 2
    assert segment_files(tmp_path, "t") == files[:1]
    assert all(b.crc_valid for b in decode(log.read("t", 0, 0, 1 << 20).records))
    log.close()


def test_flush_after_a_roll_records_the_recovery_point(tmp_path: Path, clock: Clock) -> None:
    log = TopicLog(tmp_path, clock_ms=clock)
    log.create_topic("t", 1, configs={"segment.bytes": "500"})
    fill(log, "t", 10, per_batch=2)
    recovery_point = partition_dir(tmp_path, "t") / RECOVERY_POINT_FILE
    assert not recovery_point.exists()
    log.flush([("t", 0)])
    active_base = int(segment_files(tmp_path, "t")[-1].split(".")[0])
    assert int(recovery_point.read_text()) == active_base > 0
    log.close()


def test_flush_async_fsyncs_in_the_executor_and_records_the_recovery_point(
    tmp_path: Path, clock: Clock
) -> None:
    log = TopicLog(tmp_path, clock_ms=clock)
    log.create_topic("t", 2, configs={"segment.bytes": "500"})
    fill(log, "t", 10, per_batch=2)
    asyncio.run(log.flush_async())
    active_base = int(segment_files(tmp_path, "t")[-1].split(".")[0])
    assert int((partition_dir(tmp_path, "t") / RECOVERY_POINT_FILE).read_text()) == active_base
    asyncio.run(log.flush_async([("t", 1)]))  # nothing to do, still fine
    log.close()


# -- topics --------------------------------------------------------------------------------------------


def test_created_topics_survive_a_restart_with_their_ids_and_configs(tmp_path: Path, clock: Clock) -> None:
    log = TopicLog(tmp_path, clock_ms=clock)
    created = log.create_topic("payments", 3, 1, {"retention.ms": "1000", "flush.ms": "5"})
    assert created.partitions == 3 and created.configs == {"retention.ms": "1000", "flush.ms": "5"}
    assert log.topic_name_for_id(created.topic_id) == "payments"
    log.append("payments", 2, simple_batch(4))
    log = reopen(log, tmp_path, clock)
    assert log.describe_topic("payments") == created
    assert log.topic_names() == ["payments"]
    assert log.log_end_offset("payments", 2) == 4
    assert log.topic_configs("payments")["retention.ms"] == "1000"
    assert log.topic_configs("payments")["cleanup.policy"] == "delete"
    log.close()


def test_broker_defaults_apply_to_topics_without_overrides(tmp_path: Path, clock: Clock) -> None:
    log = TopicLog(tmp_path, clock_ms=clock, default_configs={"retention.ms": "1000", "segment.bytes": "400"})
    log.create_topic("t", 1, configs={"segment.bytes": "600"})
    assert log.describe_topic("t").configs == {"segment.bytes": "600"}
    assert log.topic_configs("t")["retention.ms"] == "1000"
    fill(log, "t", 3, per_batch=2)
    clock.now = NOW + 10 * HOUR
    assert log.enforce_retention() > 0
    log.close()
    with pytest.raises(InvalidConfigError):
        TopicLog(tmp_path, default_configs={"cleanup.policy": "compacted"})


def test_creating_an_existing_topic_is_topic_already_exists(tl: TopicLog) -> None:
    tl.create_topic("t", 1)
    with pytest.raises(TopicAlreadyExistsError) as info:
        tl.create_topic("t", 2)
    assert info.value.error_code == 36
    assert tl.partition_count("t") == 1


@pytest.mark.parametrize("name", ["", ".", "..", "a" * 250, "has space", "slash/name", "ümlaut", "star*"])
def test_illegal_topic_names_are_invalid_topic(tl: TopicLog, name: str) -> None:
    with pytest.raises(InvalidTopicError) as info:
        tl.create_topic(name, 1)
    assert info.value.error_code == 17
    assert tl.topic_names() == []


def test_legal_topic_names_at_the_limits(tl: TopicLog) -> None:
    for name in ("a" * 249, "...x", "A-b_c.9", "-"):
        tl.create_topic(name, 1)
    assert len(tl.topic_names()) == 4


def test_names_differing_only_by_dot_and_underscore_collide(tl: TopicLog) -> None:
    tl.create_topic("a.b", 1)
    with pytest.raises(InvalidTopicError, match="collides"):
        tl.create_topic("a_b", 1)


def test_partition_count_and_replication_factor_are_checked(tmp_path: Path, clock: Clock) -> None:
    log = TopicLog(tmp_path, clock_ms=clock, default_partitions=4, max_partitions_per_topic=8)
    for partitions in (0, -2):
        with pytest.raises(InvalidPartitionsError) as p_info:
            log.create_topic("t", partitions)
        assert p_info.value.error_code == 37
    for factor in (0, 3):
        with pytest.raises(InvalidReplicationFactorError) as r_info:
            log.create_topic("t", 1, factor)
        assert r_info.value.error_code == 38
    with pytest.raises(PolicyViolationError) as v_info:
        log.create_topic("t", 9)
    assert v_info.value.error_code == 44
    assert log.create_topic("t").partitions == 4  # -1 means the default
    log.close()


@pytest.mark.parametrize(
    ("configs", "message"),
    [
        ({"cleanup.policy": "compact,shred"}, "Invalid value shred for configuration cleanup.policy"),
        ({"compression.type": "gzip"}, "compression.type=gzip is not supported"),
        ({"compression.type": "brotli"}, "String must be one of: uncompressed, zstd"),
        ({"retention.ms": "soon"}, "Not a number of type LONG"),
        ({"segment.bytes": "1"}, "Value must be at least 14"),
        ({"segment.bytes": "3000000000"}, "Not a number of type INT"),
        ({"message.timestamp.type": "WallClock"}, "String must be one of: CreateTime, LogAppendTime"),
        ({"min.cleanable.dirty.ratio": "2"}, "Invalid value 2.0 .* no more than 1"),
        ({"min.compaction.lag.ms": "-1"}, "at least 0"),
        ({"max.compaction.lag.ms": "0"}, "at least 1"),
        ({"delete.retention.ms": "-1"}, "at least 0"),
        ({"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"}, r"conflict .* \(10\) > .* \(5\)"),
        ({"preallocate": "yes"}, "either true or false"),
        ({"message.format.version": "3.0"}, "Unknown topic config name: message.format.version"),
        ({"no.such.config": "1"}, "Unknown topic config name: no.such.config"),
    ],
)
def test_bad_topic_configs_are_invalid_config(tl: TopicLog, configs: dict[str, str], message: str) -> None:
    with pytest.raises(InvalidConfigError, match=message) as info:
        tl.create_topic("t", 1, configs=configs)
    assert info.value.error_code == 40
    assert not tl.has_topic("t")


def test_the_configs_kafka_streams_gives_its_internal_topics_are_kept_as_kafka_shows_them(
    tl: TopicLog,
) -> None:
    changelog = {
        "cleanup.policy": "compact",
        "message.timestamp.type": "CreateTime",
        "min.compaction.lag.ms": "0",
        "max.compaction.lag.ms": "9223372036854775807",
        "min.cleanable.dirty.ratio": "0.5",
        "segment.bytes": "52428800",
        "delete.retention.ms": "86400000",
    }
    assert tl.create_topic("app-store-changelog", 1, configs=changelog).configs == changelog
    windowed = {"cleanup.policy": "compact, delete,compact", "retention.ms": "172800000"}
    tl.create_topic("app-window-changelog", 1, configs=windowed)
    assert tl.describe_topic("app-window-changelog").configs["cleanup.policy"] == "compact,delete"
    repartition = {"cleanup.policy": "delete", "segment.bytes": "52428800", "retention.ms": "-1"}
    assert tl.create_topic("app-repartition", 1, configs=repartition).configs == repartition
    tl.create_topic("empty-policy", 1, configs={"cleanup.policy": ""})
    assert tl.topic_configs("empty-policy")["cleanup.policy"] == ""


def test_a_compact_topic_keeps_every_record_and_retention_applies_only_with_delete(
    tmp_path: Path, clock: Clock
) -> None:
    log = TopicLog(tmp_path, clock_ms=clock)
    small = {"segment.bytes": "500", "retention.ms": "1000", "retention.bytes": "500"}
    for name, policy in (("c", "compact"), ("none", ""), ("cd", "compact,delete"), ("d", "delete")):
        log.create_topic(name, 1, configs={**small, "cleanup.policy": policy})
        fill(log, name, 6, per_batch=2)
    clock.now = NOW + 10 * HOUR
    log.enforce_retention()
    assert log.log_start_offset("c", 0) == 0 and log.log_start_offset("none", 0) == 0
    assert log.log_start_offset("cd", 0) > 0 and log.log_start_offset("d", 0) > 0
    log.alter_topic_configs("c", {"cleanup.policy": "compact,delete"})
    log.enforce_retention()
    assert log.log_start_offset("c", 0) > 0
    log.close()


def test_validate_only_creates_nothing(tmp_path: Path, tl: TopicLog) -> None:
    described = tl.create_topic("t", 2, validate_only=True)
    assert described.partitions == 2
    assert not tl.has_topic("t")
    assert not (tmp_path / "topics" / "t").exists()


def test_topic_ids_are_unique_and_resolve_to_names(tl: TopicLog) -> None:
    ids = {tl.create_topic(f"t{i}", 1).topic_id for i in range(20)}
    assert len(ids) == 20
    for topic_id in ids:
        name = tl.topic_name_for_id(topic_id)
        assert name is not None and tl.describe_topic(name).topic_id == topic_id
    assert tl.topic_name_for_id(uuid.uuid4()) is None


def test_deleted_topic_loses_its_files_and_a_recreated_one_starts_empty(tmp_path: Path, tl: TopicLog) -> None:
    first = tl.create_topic("t", 2)
    tl.append("t", 1, simple_batch(3))
    tl.delete_topic("t")
    assert not (tmp_path / "topics" / "t").exists()
    assert list((tmp_path / "trash").iterdir()) == []
    with pytest.raises(UnknownTopicOrPartitionError):
        tl.read("t", 1, 0, 100)
    with pytest.raises(UnknownTopicOrPartitionError):
        tl.delete_topic("t")
    assert tl.topic_name_for_id(first.topic_id) is None
    second = tl.create_topic("t", 2)
    assert second.topic_id != first.topic_id
    assert tl.log_end_offset("t", 1) == 0


def test_adding_partitions_keeps_existing_data_and_persists(tmp_path: Path, clock: Clock) -> None:
    log = TopicLog(tmp_path, clock_ms=clock)
    log.create_topic("t", 2)
    log.append("t", 1, simple_batch(2))
    log.create_partitions("t", 5)
    assert log.partition_count("t") == 5
    assert log.append("t", 4, simple_batch(1)).base_offset == 0
    log = reopen(log, tmp_path, clock)
    assert log.partition_count("t") == 5
    assert log.log_end_offset("t", 1) == 2 and log.log_end_offset("t", 4) == 1
    log.close()


def test_partitions_can_only_be_added(tl: TopicLog) -> None:
    tl.create_topic("t", 3)
    with pytest.raises(InvalidPartitionsError, match="higher than the requested 2"):
        tl.create_partitions("t", 2)
    with pytest.raises(InvalidPartitionsError, match="already has 3"):
        tl.create_partitions("t", 3)
    with pytest.raises(UnknownTopicOrPartitionError):
        tl.create_partitions("other", 4)
    tl.create_partitions("t", 4, validate_only=True)
    assert tl.partition_count("t") == 3


def test_leftover_partition_directories_from_an_unfinished_increase_are_removed(
    tmp_path: Path, clock: Clock
) -> None:
    log = TopicLog(tmp_path, clock_ms=clock)
    log.create_topic("t", 1)
    log.close()
    stray = tmp_path / "topics" / "t" / "1"
    stray.mkdir()
    (stray / segment_file_name(0)).write_bytes(simple_batch(1))
    log = TopicLog(tmp_path, clock_ms=clock)
    assert not stray.exists()
    log.create_partitions("t", 2)
    assert log.log_end_offset("t", 1) == 0
    log.close()


def test_partition_listeners_hear_create_grow_and_delete(tl: TopicLog) -> None:
    heard: list[tuple[str, int, int]] = []

    def failing(topic: str, old: int, new: int) -> None:
        raise RuntimeError("listener bug")

    tl.subscribe_partitions_changed(failing)
    unsubscribe = tl.subscribe_partitions_changed(lambda t, old, new: heard.append((t, old, new)))
    tl.create_topic("t", 2)
    tl.create_partitions("t", 6)
    with pytest.raises(InvalidPartitionsError):
        tl.create_partitions("t", 6)
    tl.delete_topic("t")
    unsubscribe()
    tl.create_topic("u", 1)
    assert heard == [("t", 0, 2), ("t", 2, 6), ("t", 6, 0)]


def test_a_closed_log_refuses_work(tmp_path: Path, clock: Clock) -> None:
    log = TopicLog(tmp_path, clock_ms=clock)
    log.create_topic("t", 1)
    log.close()
    with pytest.raises(KafkaStorageError):
        log.append("t", 0, simple_batch(1))


def test_staging_and_trash_leftovers_are_cleared_on_open(tmp_path: Path, clock: Clock) -> None:
    (tmp_path / "staging" / "half-created").mkdir(parents=True)
    (tmp_path / "trash" / "half-deleted").mkdir(parents=True)
    log = TopicLog(tmp_path, clock_ms=clock)
    assert list((tmp_path / "staging").iterdir()) == [] and list((tmp_path / "trash").iterdir()) == []
    assert log.topic_names() == []
    log.close()


# -- long poll -----------------------------------------------------------------------------------------


def test_long_poll_wakes_as_soon_as_data_is_appended(tl: TopicLog) -> None:
    tl.create_topic("t", 2)

    async def scenario() -> tuple[bool, float]:
        started = time.monotonic()
        waiter = asyncio.create_task(tl.wait_for_data({("t", 0): 0, ("t", 1): 0}, timeout_s=10))
        await asyncio.sleep(0.05)
        assert not waiter.done()
        tl.append("t", 1, simple_batch(1))
        woke = await asyncio.wait_for(waiter, timeout=5)
        return woke, time.monotonic() - started

    woke, elapsed = asyncio.run(scenario())
    assert woke and elapsed < 2


def test_long_poll_times_out_without_data(tl: TopicLog) -> None:
    tl.create_topic("t", 1)
    tl.append("t", 0, simple_batch(1))

    async def scenario() -> tuple[bool, float]:
        started = time.monotonic()
        woke = await tl.wait_for_data({("t", 0): 1}, timeout_s=0.2)
        return woke, time.monotonic() - started

    woke, elapsed = asyncio.run(scenario())
    assert not woke and 0.15 <= elapsed < 2


def test_long_poll_returns_at_once_for_existing_data_or_errors(tl: TopicLog) -> None:
    tl.create_topic("t", 1)
    tl.append("t", 0, simple_batch(2))

    async def scenario() -> list[bool]:
        return [
            await tl.wait_for_data({("t", 0): 1}, timeout_s=30),
            await tl.wait_for_data({("t", 0): 5}, timeout_s=30),  # out of range
            await tl.wait_for_data({("gone", 0): 0}, timeout_s=30),  # unknown
            await tl.wait_for_data({("t", 0): 2}, timeout_s=0),
        ]

    assert asyncio.run(asyncio.wait_for(scenario(), timeout=5)) == [True, True, True, False]


def test_long_poll_with_min_bytes_waits_for_enough_data(tl: TopicLog) -> None:
    tl.create_topic("t", 1)
    batch = simple_batch(1)

    async def scenario() -> list[bool]:
        waiter = asyncio.create_task(tl.wait_for_data({("t", 0): 0}, timeout_s=10, min_bytes=3 * len(batch)))
        steps = []
        for _ in range(3):
            await asyncio.sleep(0.02)
            steps.append(waiter.done())
            tl.append("t", 0, batch)
        steps.append(await asyncio.wait_for(waiter, timeout=5))
        return steps

    assert asyncio.run(scenario()) == [False, False, False, True]


def test_long_poll_wakes_when_the_topic_is_deleted(tl: TopicLog) -> None:
    tl.create_topic("t", 1)

    async def scenario() -> bool:
        waiter = asyncio.create_task(tl.wait_for_data({("t", 0): 0}, timeout_s=10))
        await asyncio.sleep(0.02)
        tl.delete_topic("t")
        return await asyncio.wait_for(waiter, timeout=5)

    assert asyncio.run(scenario())


def test_topics_created_off_the_event_loop_exist_once_and_survive_a_reopen(
    tmp_path: Path, clock: Clock
) -> None:
    async def main() -> None:
        log = TopicLog(tmp_path, clock_ms=clock)
        ticks = 0

        async def tick() -> None:
            nonlocal ticks
            while True:
                ticks += 1
                await asyncio.sleep(0)

        ticker = asyncio.create_task(tick())
        names = [f"auto-{i}" for i in range(50)]
        created = await asyncio.gather(*(log.create_topic_async(n, 2) for n in names))
        twice = await asyncio.gather(
            log.create_topic_async("same", 1), log.create_topic_async("same", 1), return_exceptions=True
        )
        ticker.cancel()
        assert [d.name for d in created] == names and all(d.partitions == 2 for d in created)
        assert sum(isinstance(r, TopicAlreadyExistsError) for r in twice) == 1
        assert ticks > 0, "the loop ran other work while topics were being created"
        log.close()

    asyncio.run(main())
    reopened = TopicLog(tmp_path, clock_ms=clock)
    assert {f"auto-{i}" for i in range(50)} | {"same"} == set(reopened.topic_names())
    reopened.close()


# -- DeleteRecords --------------------------------------------------------------------------------------


def test_delete_records_moves_the_log_start_and_it_holds_after_a_reopen(tmp_path: Path, clock: Clock) -> None:
    log = TopicLog(tmp_path, clock_ms=clock)
    log.create_topic("t", 1, configs={"segment.bytes": "500", "retention.ms": "-1"})
    fill(log, "t", 8, per_batch=2)
    end = log.log_end_offset("t", 0)
    assert log.delete_records("t", 0, 5) == 5
    assert log.delete_records("t", 0, 3) == 5, "never backwards"
    with pytest.raises(OffsetOutOfRangeError):
        log.read("t", 0, 4, 1000)
    assert parse_header(log.read("t", 0, 5, 1000).records).base_offset == 4, "the batch holding 5"
    assert log.list_offset("t", 0, EARLIEST_TIMESTAMP).offset == 5
    log = reopen(log, tmp_path, clock)
    assert log.log_start_offset("t", 0) == 5
    with pytest.raises(OffsetOutOfRangeError):
        log.delete_records("t", 0, end + 1)
    with pytest.raises(OffsetOutOfRangeError):
        log.delete_records("t", 0, -2)
    assert log.delete_records("t", 0, -1) == end, "-1 is the high watermark"
    assert log.read("t", 0, end, 1000).records == b""
    segments = list((tmp_path / "topics" / "t" / "0").glob("*.log"))
    assert len(segments) == 1, "the segments below the new start are deleted; the active one stays"
    log.close()


def test_delete_records_is_refused_on_a_compact_topic_and_an_unknown_partition(tl: TopicLog) -> None:
    tl.create_topic("c", 1, configs={"cleanup.policy": "compact"})
    fill(tl, "c", 2)
    with pytest.raises(PolicyViolationError, match="can not be deleted due to the configured policy"):
        tl.delete_records("c", 0, 1)
    with pytest.raises(UnknownTopicOrPartitionError):
        tl.delete_records("c", 1, 0)
    tl.create_topic("cd", 1, configs={"cleanup.policy": "compact,delete"})
    fill(tl, "cd", 2)
    assert tl.delete_records("cd", 0, 2) == 2


def test_a_compacted_topic_refuses_records_without_a_key_and_names_each(tl: TopicLog) -> None:
    tl.create_topic("c", 1, configs={"cleanup.policy": "compact"})
    batch = build_batch([Rec(b"a", 1_000, b"k"), Rec(b"b", 1_001), Rec(b"c", 1_002)])
    with pytest.raises(InvalidRecordError) as info:
        tl.append("c", 0, batch)
    assert info.value.error_code == 87
    assert [index for index, _ in info.value.record_errors] == [1, 2]
    assert "Compacted topic cannot accept message without key in topic partition c-0" in str(info.value)
    assert tl.log_end_offset("c", 0) == 0, "nothing of the batch is appended"
    tl.append("c", 0, build_batch([Rec(b"a", 1_000, b"k")], compression=GZIP))
    tl.create_topic("d", 1)
    tl.append("d", 0, batch)
    assert (tl.log_end_offset("c", 0), tl.log_end_offset("d", 0)) == (1, 3)
