"""Record batches built and decoded by kafka-python's own record codec, the way a real client does."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from kafka.record.memory_records import MemoryRecords, MemoryRecordsBuilder

GZIP = 1


@dataclass(frozen=True)
class Rec:
    value: bytes | None
    timestamp: int
    key: bytes | None = None
    headers: tuple[tuple[str, bytes], ...] = ()


@dataclass(frozen=True)
class DecodedRecord:
    offset: int
    timestamp: int
    timestamp_type: int
    key: bytes | None
    value: bytes | None
    headers: tuple[tuple[str, bytes], ...]


@dataclass(frozen=True)
class DecodedBatch:
    base_offset: int
    last_offset: int
    size: int
    crc_valid: bool
    records: tuple[DecodedRecord, ...]


def build_batch(records: Sequence[Rec], *, compression: int = 0, magic: int = 2) -> bytes:
    """One record batch as a producer sends it (base offset 0)."""
    builder = MemoryRecordsBuilder(magic=magic, compression_type=compression, batch_size=1 << 30)
    for rec in records:
        metadata = builder.append(
            timestamp=rec.timestamp, key=rec.key, value=rec.value, headers=list(rec.headers)
        )
        assert metadata is not None
    builder.close()
    return bytes(builder.buffer())


def simple_batch(count: int, *, first_timestamp: int = 1_000, value_size: int = 10, tag: str = "v") -> bytes:
    records = [
        Rec(value=f"{tag}{i}".encode().ljust(value_size, b"."), timestamp=first_timestamp + i, key=b"k%d" % i)
        for i in range(count)
    ]
    return build_batch(records)


def decode(data: bytes) -> list[DecodedBatch]:
    """Decode the bytes of a fetch response partition with kafka-python's reader."""
    out: list[DecodedBatch] = []
    records = MemoryRecords(data)
    while records.has_next():
        batch = records.next_batch()
        if batch is None:
            break
        crc_valid = bool(batch.validate_crc())  # kafka-python checks the CRC only before iteration
        decoded = tuple(
            DecodedRecord(
                offset=r.offset,
                timestamp=r.timestamp,
                timestamp_type=r.timestamp_type,
                key=r.key,
                value=r.value,
                headers=tuple((k, v) for k, v in r.headers),
            )
            for r in batch
        )
        out.append(
            DecodedBatch(
                base_offset=int(batch.base_offset),
                last_offset=int(batch.last_offset),
                size=int(batch.size_in_bytes),
                crc_valid=crc_valid,
                records=decoded,
            )
        )
    return out


def decode_records(data: bytes) -> list[DecodedRecord]:
    return [record for batch in decode(data) for record in batch.records]
