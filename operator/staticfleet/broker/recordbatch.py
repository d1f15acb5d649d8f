"""Kafka record batch format v2 (magic 2): header parsing, produce validation, offset assignment.

Layout of a batch (big-endian), as defined by Kafka's DefaultRecordBatch:

    offset  size  field
         0     8  baseOffset
         8     4  batchLength           (bytes after this field)
        12     4  partitionLeaderEpoch
        16     1  magic                 (2)
        17     4  crc                   (CRC-32C of attributes .. end of batch)
        21     2  attributes            (bits 0-2 compression, 3 timestamp type, 4 transactional, 5 control)
        23     4  lastOffsetDelta
        27     8  baseTimestamp         (first timestamp)
        35     8  maxTimestamp
        43     8  producerId
        51     2  producerEpoch
        53     4  baseSequence
        57     4  recordsCount
        61        records (compressed as a whole when compression is set)

The CRC does not cover baseOffset, batchLength or partitionLeaderEpoch, so the log assigns offsets and the
leader epoch in place without recomputing it. Only a LogAppendTime topic, which rewrites attributes and
maxTimestamp, needs a new CRC.

Why not kio's record reader (`kio.records.readers.read_batch`): it decodes every record in Python, so
checking a produced batch of 64 records of 1 KiB costs 195x what this module's header and CRC check
does (990 us against 5.1 us a batch, side by side in bench/wire_codecs.py; never under 60x on this
shared machine); it cannot read compressed
batches; and it keeps record timestamps to the second, which ListOffsets by timestamp cannot use.
"""

from __future__ import annotations

import struct
import zlib
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Final

import crc32c

from staticfleet.broker.topiclog_errors import (
    CorruptMessageError,
    InvalidRecordError,
    InvalidTimestampError,
    MessageTooLargeError,
    UnsupportedForMessageFormatError,
)

Buffer = bytes | bytearray | memoryview

HEADER: Final = struct.Struct(">qiibIhiqqqhii")
HEADER_SIZE: Final = HEADER.size  # 61
LOG_OVERHEAD: Final = 12  # baseOffset + batchLength: the part of a batch not counted by batchLength
MIN_BATCH_LENGTH: Final = HEADER_SIZE - LOG_OVERHEAD

BASE_OFFSET_OFFSET: Final = 0
LENGTH_OFFSET: Final = 8
PARTITION_LEADER_EPOCH_OFFSET: Final = 12
MAGIC_OFFSET: Final = 16
CRC_OFFSET: Final = 17
ATTRIBUTES_OFFSET: Final = 21
LAST_OFFSET_DELTA_OFFSET: Final = 23
MAX_TIMESTAMP_OFFSET: Final = 35

CURRENT_MAGIC: Final = 2
NO_TIMESTAMP: Final = -1

COMPRESSION_MASK: Final = 0x07
COMPRESSION_NONE: Final = 0
COMPRESSION_GZIP: Final = 1
TIMESTAMP_TYPE_MASK: Final = 0x08
TRANSACTIONAL_MASK: Final = 0x10
CONTROL_MASK: Final = 0x20

_INT64: Final = struct.Struct(">q")
_INT32: Final = struct.Struct(">i")
_UINT32: Final = struct.Struct(">I")
_INT16: Final = struct.Struct(">h")


@dataclass(frozen=True, slots=True)
class RecordBatchHeader:
    """The fixed 61-byte header of a v2 record batch."""

    base_offset: int
    batch_length: int
    partition_leader_epoch: int
    magic: int
    crc: int
    attributes: int
    last_offset_delta: int
    first_timestamp: int
    max_timestamp: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    records_count: int

    @property
    def size(self) -> int:
        """Bytes the whole batch occupies, header included."""
        return self.batch_length + LOG_OVERHEAD

    @property
    def last_offset(self) -> int:
        return self.base_offset + self.last_offset_delta

    @property
    def next_offset(self) -> int:
        return self.base_offset + self.last_offset_delta + 1

    @property
    def compression(self) -> int:
        return self.attributes & COMPRESSION_MASK

    @property
    def log_append_time(self) -> bool:
        """True when the timestamp type is LogAppendTime: every record's timestamp is maxTimestamp."""
        return bool(self.attributes & TIMESTAMP_TYPE_MASK)

    @property
    def is_transactional(self) -> bool:
        return bool(self.attributes & TRANSACTIONAL_MASK)

    @property
    def is_control(self) -> bool:
        return bool(self.attributes & CONTROL_MASK)


@dataclass(frozen=True, slots=True)
class BatchRef:
    """A batch found in a buffer: where it starts and its header."""

    position: int
    header: RecordBatchHeader


def parse_header(buf: Buffer, pos: int = 0) -> RecordBatchHeader:
    """Parse the batch header at `pos`; the buffer must hold at least HEADER_SIZE bytes from there."""
    if len(buf) - pos < HEADER_SIZE:
        raise CorruptMessageError(
            f"record batch header needs {HEADER_SIZE} bytes, only {max(len(buf) - pos, 0)} are left"
        )
    return RecordBatchHeader(*HEADER.unpack_from(buf, pos))


def batch_size_at(buf: Buffer, pos: int) -> int:
    """Total size of the batch at `pos` read from its length field (needs LOG_OVERHEAD bytes)."""
    return int(_INT32.unpack_from(buf, pos + LENGTH_OFFSET)[0]) + LOG_OVERHEAD


def compute_crc(buf: Buffer, pos: int, size: int) -> int:
    """CRC-32C over attributes .. end of the batch at `pos` of `size` bytes."""
    view = memoryview(buf)[pos + ATTRIBUTES_OFFSET : pos + size]
    return int(crc32c.crc32c(view))


def check_framing(buf: Buffer, pos: int, end: int, *, at: int | None = None) -> RecordBatchHeader:
    """Check that a whole, uncorrupted v2 batch starts at `pos` and ends by `end`; return its header.

    Raises UnsupportedForMessageFormatError for magic 0/1 (message sets), CorruptMessageError for
    everything that makes the bytes unusable: truncation, a bad length, an unknown magic, a CRC mismatch.
    The errors name position `at` (default `pos`): where the batch is in its file, when `buf` holds
    only the batch.
    """
    left = end - pos
    where = pos if at is None else at
    if left < MAGIC_OFFSET + 1:
        raise CorruptMessageError(f"{left} trailing bytes at position {where} are not a record batch")
    length = int(_INT32.unpack_from(buf, pos + LENGTH_OFFSET)[0])
    magic = buf[pos + MAGIC_OFFSET]
    if magic in (0, 1):
        raise UnsupportedForMessageFormatError(
            f"record batch at position {where} uses message format v{magic}; "
            f"this broker stores only record batch v{CURRENT_MAGIC} (Kafka clients 0.11 and later)"
        )
    if magic != CURRENT_MAGIC:
        raise CorruptMessageError(f"record batch at position {where} has unknown magic {magic}")
    if length < MIN_BATCH_LENGTH:
        raise CorruptMessageError(
            f"record batch at position {where} has length {length}, below the minimum {MIN_BATCH_LENGTH}"
        )
    size = length + LOG_OVERHEAD
    if size > left:
        raise CorruptMessageError(
            f"record batch at position {where} declares {size} bytes but only {left} are present"
        )
    header = parse_header(buf, pos)
    actual = compute_crc(buf, pos, size)
    if actual != header.crc:
        raise CorruptMessageError(
            f"record batch at position {where} failed its CRC check (stored {header.crc:#010x}, "
            f"computed {actual:#010x})"
        )
    return header


def validate_produce_records(data: Buffer, *, max_message_bytes: int) -> list[BatchRef]:
    """Validate the record batches of one partition of a produce request, as Kafka does for client appends.

    Accepts one or more batches concatenated back to back. Every batch must be a complete, CRC-valid v2
    batch with a consistent offset range and record count; control batches, LogAppendTime batches and
    idempotent batches without a sequence are refused as Kafka refuses them from clients.
    """
    end = len(data)
    if not end:
        raise InvalidRecordError("produce request carries no record batch")
    batches: list[BatchRef] = []
    pos = 0
    while pos < end:
        header = check_framing(data, pos, end)
        if header.size > max_message_bytes:
            raise MessageTooLargeError(
                f"record batch of {header.size} bytes exceeds max.message.bytes {max_message_bytes}"
            )
        _check_client_batch(header, pos)
        batches.append(BatchRef(pos, header))
        pos += header.size
    return batches


def _check_client_batch(header: RecordBatchHeader, pos: int) -> None:
    if header.last_offset_delta < 0:
        raise InvalidRecordError(
            f"record batch at position {pos} has an invalid lastOffsetDelta {header.last_offset_delta}"
        )
    if header.records_count <= 0:
        raise InvalidRecordError(
            f"record batch at position {pos} reports an invalid record count {header.records_count}"
        )
    if header.records_count != header.last_offset_delta + 1:
        raise InvalidRecordError(
            f"record batch at position {pos} spans {header.last_offset_delta + 1} offsets "
            f"but reports {header.records_count} records"
        )
    if header.is_control:
        raise InvalidRecordError("clients are not allowed to write control batches")
    if header.producer_id >= 0 and header.base_sequence < 0:
        raise InvalidRecordError(
            f"record batch with producerId {header.producer_id} has an invalid sequence "
            f"{header.base_sequence}"
        )
    if header.log_append_time:
        raise InvalidTimestampError("producers must not set the timestamp type to LogAppendTime")


def assign_offsets(
    buf: bytearray,
    batches: list[BatchRef],
    first_offset: int,
    *,
    leader_epoch: int,
    log_append_time_ms: int | None,
) -> list[BatchRef]:
    """Rewrite baseOffset and partitionLeaderEpoch of each batch in place; return the updated headers.

    With `log_append_time_ms` the batches become LogAppendTime batches: the timestamp-type attribute is
    set, maxTimestamp becomes the append time, and the CRC is recomputed because both are covered by it.
    """
    out: list[BatchRef] = []
    offset = first_offset
    for ref in batches:
        pos, header = ref.position, ref.header
        _INT64.pack_into(buf, pos + BASE_OFFSET_OFFSET, offset)
        _INT32.pack_into(buf, pos + PARTITION_LEADER_EPOCH_OFFSET, leader_epoch)
        attributes, max_timestamp, crc = header.attributes, header.max_timestamp, header.crc
        if log_append_time_ms is not None:
            attributes |= TIMESTAMP_TYPE_MASK
            max_timestamp = log_append_time_ms
            _INT16.pack_into(buf, pos + ATTRIBUTES_OFFSET, attributes)
            _INT64.pack_into(buf, pos + MAX_TIMESTAMP_OFFSET, max_timestamp)
            crc = compute_crc(buf, pos, header.size)
            _UINT32.pack_into(buf, pos + CRC_OFFSET, crc)
        assigned = RecordBatchHeader(
            offset,
            header.batch_length,
            leader_epoch,
            header.magic,
            crc,
            attributes,
            header.last_offset_delta,
            header.first_timestamp,
            max_timestamp,
            header.producer_id,
            header.producer_epoch,
            header.base_sequence,
            header.records_count,
        )
        out.append(BatchRef(pos, assigned))
        offset += header.last_offset_delta + 1
    return out


class UnsupportedCompressionError(Exception):
    """The batch uses a codec this module cannot decompress (only gzip and none are built in)."""


def _read_varint(buf: Buffer, pos: int) -> tuple[int, int]:
    """Decode a zig-zag varint (Kafka's varint and varlong) at `pos`: (value, next position)."""
    raw = 0
    shift = 0
    while True:
        if pos >= len(buf):
            raise CorruptMessageError("record ends inside a varint")
        byte = buf[pos]
        pos += 1
        raw |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return (raw >> 1) ^ -(raw & 1), pos
        shift += 7
        if shift > 63:
            raise CorruptMessageError("varint longer than 10 bytes")


def _records_payload(batch: Buffer, header: RecordBatchHeader) -> Buffer:
    payload = memoryview(batch)[HEADER_SIZE : header.size]
    if header.compression == COMPRESSION_NONE:
        return payload
    if header.compression == COMPRESSION_GZIP:
        try:
            return zlib.decompress(payload, wbits=16 + zlib.MAX_WBITS)
        except zlib.error as exc:
            raise CorruptMessageError(f"gzip record batch does not decompress: {exc}") from exc
    raise UnsupportedCompressionError(f"compression codec {header.compression}")


def iter_record_timestamps(batch: Buffer) -> Iterator[tuple[int, int]]:
    """Yield (offset, timestamp) of every record of one whole batch, decoding only what that needs.

    Raises UnsupportedCompressionError for snappy, lz4 and zstd batches.
    """
    header = parse_header(batch)
    payload = _records_payload(batch, header)
    pos = 0
    for _ in range(header.records_count):
        length, pos = _read_varint(payload, pos)
        record_end = pos + length
        timestamp_delta, field = _read_varint(payload, pos + 1)  # after the attributes byte
        offset_delta, field = _read_varint(payload, field)
        if header.log_append_time:
            timestamp = header.max_timestamp
        else:
            timestamp = header.first_timestamp + timestamp_delta
        yield header.base_offset + offset_delta, timestamp
        pos = record_end


def keyless_records(batch: Buffer) -> list[int]:
    """The indexes, within one whole batch, of its records whose key is null.

    Raises UnsupportedCompressionError for snappy, lz4 and zstd batches.
    """
    header = parse_header(batch)
    payload = _records_payload(batch, header)
    found = []
    pos = 0
    for index in range(header.records_count):
        length, pos = _read_varint(payload, pos)
        record_end = pos + length
        _, field = _read_varint(payload, pos + 1)  # timestamp delta, after the attributes byte
        _, field = _read_varint(payload, field)  # offset delta
        key_length, _ = _read_varint(payload, field)
        if key_length < 0:
            found.append(index)
        pos = record_end
    return found


def first_record_at_or_after(batch: Buffer, timestamp: int) -> tuple[int, int] | None:
    """(offset, timestamp) of the first record of the batch whose timestamp is >= `timestamp`.

    Falls back to the batch's base offset and maxTimestamp for codecs that are not built in (and for
    records that do not decode); a consumer seeking there reads a few earlier records but misses none.
    """
    header = parse_header(batch)
    if header.max_timestamp < timestamp:
        return None
    if header.log_append_time:
        return header.base_offset, header.max_timestamp
    try:
        for offset, record_timestamp in iter_record_timestamps(batch):
            if record_timestamp >= timestamp:
                return offset, record_timestamp
    except (UnsupportedCompressionError, CorruptMessageError):
        return header.base_offset, header.max_timestamp
    return None


def max_timestamp_record(batch: Buffer) -> tuple[int, int]:
    """(offset, timestamp) of the record carrying the batch's max timestamp (the first one on ties).

    For LogAppendTime batches and codecs that are not built in, Kafka's answer is the batch's last offset.
    """
    header = parse_header(batch)
    if header.log_append_time:
        return header.last_offset, header.max_timestamp
    best: tuple[int, int] | None = None
    try:
        for offset, record_timestamp in iter_record_timestamps(batch):
            if best is None or record_timestamp > best[1]:
                best = offset, record_timestamp
    except (UnsupportedCompressionError, CorruptMessageError):
        return header.last_offset, header.max_timestamp
    if best is None:
        return header.last_offset, header.max_timestamp
    return best
