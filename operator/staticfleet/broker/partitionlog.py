"""One partition's log: append-only segment files, sparse in-memory indexes, recovery, reads, retention.

A partition directory holds segment files named by the offset of their first batch
(`00000000000000000000.log`, like Kafka) and a `recovery-point` file. Batches are stored exactly as the
producer sent them, with baseOffset and partitionLeaderEpoch filled in.

Indexes are rebuilt on open by scanning batch headers. Each segment keeps a sparse index with an entry
every `index.interval.bytes`: (base offset, file position, largest timestamp of the batches before that
position). A lookup bisects the index and then reads a few batch headers from that position on.

Durability: appends are `os.write`s into the page cache; `flush()` fsyncs the segments written since the
last flush, the directory when segments were created or deleted, and then records in `recovery-point`
the base offset of the active segment: every segment below it is durable. Recovery after a crash checks
the CRC of every batch in the segments at or above the recovery point and truncates the log at the first
torn or corrupt batch; the segments below are checked for consistent framing only.

Not thread-safe: one owner (the asyncio event loop thread) calls every method. The only work that may
run elsewhere is the fsync step of a flush (see `prepare_flush`), which touches duplicated descriptors.
"""

from __future__ import annotations

import bisect
import logging
import os
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Final, TypeVar

from staticfleet.broker.recordbatch import (
    BatchRef,
    Buffer,
    UnsupportedCompressionError,
    assign_offsets,
    first_record_at_or_after,
    keyless_records,
    max_timestamp_record,
    parse_header,
    validate_produce_records,
)
from staticfleet.broker.segment import Segment, parse_segment_file_name, segment_file_name
from staticfleet.broker.topiclog_errors import (
    InvalidRecordError,
    KafkaStorageError,
    OffsetOutOfRangeError,
    RecordListTooLargeError,
)
from staticfleet.fsutil import fsync_directory, write_atomically

log = logging.getLogger(__name__)

LEADER_EPOCH: Final = 0  # a single node that never changes leadership
RECOVERY_POINT_FILE: Final = "recovery-point"
LOG_START_FILE: Final = "log-start-offset"

_POSITION_CACHE_LIMIT: Final = 1024
_Taken = TypeVar("_Taken")


@dataclass(frozen=True, slots=True)
class LogConfig:
    """The topic configs the log acts on, parsed (Kafka's names in the comments)."""

    segment_bytes: int = 1073741824  # segment.bytes
    segment_ms: int = 604800000  # segment.ms
    retention_bytes: int = -1  # retention.bytes, per partition; -1 keeps everything
    retention_ms: int = 604800000  # retention.ms; -1 keeps everything
    max_message_bytes: int = 1048588  # max.message.bytes, per batch
    index_interval_bytes: int = 4096  # index.interval.bytes
    log_append_time: bool = False  # message.timestamp.type=LogAppendTime
    delete_policy: bool = True  # cleanup.policy holds delete: retention applies
    compact_policy: bool = False  # cleanup.policy holds compact: every record needs a key


@dataclass(frozen=True, slots=True)
class AppendResult:
    base_offset: int
    last_offset: int
    log_append_time_ms: int  # -1 unless the topic uses LogAppendTime
    log_start_offset: int


@dataclass(frozen=True, slots=True)
class OffsetAndTimestamp:
    offset: int
    timestamp: int


@dataclass(slots=True)
class FileRegion:
    """Bytes of a segment file, sent as they are. `fd` is a duplicate of the segment's descriptor,
    owned by the region: the segment may be closed or deleted before the region is sent, and the
    duplicate keeps the file's bytes readable until `close`."""

    fd: int
    position: int
    length: int

    def read(self) -> bytes:
        return os.pread(self.fd, self.length, self.position)

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1


@dataclass
class FlushPlan:
    """What one flush of a partition must make durable; built and completed on the owning thread."""

    directory: Path
    segments: list[tuple[Segment, int, int]] = field(default_factory=list)  # (segment, dup fd, size)
    directory_version: int = 0
    sync_directory: bool = False
    recovery_point: int | None = None

    def execute(self) -> None:
        """The blocking part: fsync and record the recovery point. Safe to run in a worker thread."""
        try:
            for _, fd, _ in self.segments:
                os.fsync(fd)
            if self.sync_directory:
                fsync_directory(self.directory)
            if self.recovery_point is not None:
                _write_recovery_point(self.directory, self.recovery_point)
        except FileNotFoundError:
            pass  # the partition was deleted meanwhile
        except OSError as exc:
            raise KafkaStorageError(f"cannot flush {self.directory}: {exc}") from exc
        finally:
            for _, fd, _ in self.segments:
                os.close(fd)


def _write_recovery_point(directory: Path, offset: int) -> None:
    write_atomically(directory / RECOVERY_POINT_FILE, f"{offset}\n".encode())


def _read_recovery_point(directory: Path) -> int:
    return _read_offset(directory / RECOVERY_POINT_FILE)


def _read_offset(path: Path) -> int:
    try:
        return int(path.read_text().strip())
    except (FileNotFoundError, ValueError):
        return 0


class PartitionLog:
    """The log of one partition. Offsets are contiguous: the high watermark is the log end offset."""

    def __init__(self, directory: Path, config: LogConfig, *, verify_all: bool = False) -> None:
        self.directory = directory
        self._config = config
        self._segments: list[Segment] = []
        self._bases: list[int] = []
        self._positions: dict[int, tuple[Segment, int]] = {}
        self._dirty: set[Segment] = set()
        self._directory_version = 0
        self._directory_synced_version = 0
        self._closed = False
        try:
            directory.mkdir(parents=True, exist_ok=True)
            self._recovery_point = _read_recovery_point(directory)
            # Where DeleteRecords moved the log start, which may lie inside the first segment.
            self._deleted_before = _read_offset(directory / LOG_START_FILE)
            self._load(verify_all)
        except OSError as exc:
            self.close_without_flush()
            raise KafkaStorageError(f"cannot open partition log {directory}: {exc}") from exc
        except BaseException:
            self.close_without_flush()
            raise

    def _load(self, verify_all: bool) -> None:
        for name in os.listdir(self.directory):
            if name.startswith((RECOVERY_POINT_FILE, LOG_START_FILE)) and name.endswith(".tmp"):
                (self.directory / name).unlink()
        bases = sorted(
            base for name in os.listdir(self.directory) if (base := parse_segment_file_name(name)) is not None
        )
        if bases and self._recovery_point > bases[-1]:
            self._recovery_point = 0  # not this log's: trust nothing it claims
        if not bases:
            self._add_segment(Segment.create(self.directory, 0, self._config.index_interval_bytes))
            self._directory_version += 1
            return
        for i, base in enumerate(bases):
            path = self.directory / segment_file_name(base)
            if self._segments and base < self._segments[-1].next_offset:
                self._drop_files(bases[i:], f"segment {path.name} overlaps the segment before it")
                return
            if self._segments and base > self._segments[-1].next_offset:
                log.warning(
                    "offsets %d..%d are missing before %s", self._segments[-1].next_offset, base, path
                )
            segment = Segment.open(path, base, self._config.index_interval_bytes)
            last = i == len(bases) - 1
            truncated = segment.recover(verify_crc=verify_all or last or base >= self._recovery_point)
            self._add_segment(segment)
            if truncated and not last:
                self._drop_files(bases[i + 1 :], f"segment {path.name} was truncated")
                return

    def _drop_files(self, bases: list[int], reason: str) -> None:
        for base in bases:
            path = self.directory / segment_file_name(base)
            log.error("deleting segment %s: %s", path, reason)
            path.unlink()
        self._directory_version += 1

    def _add_segment(self, segment: Segment) -> None:
        self._segments.append(segment)
        self._bases.append(segment.base_offset)

    # -- properties ---------------------------------------------------------------------------------

    @property
    def config(self) -> LogConfig:
        return self._config

    @config.setter
    def config(self, config: LogConfig) -> None:
        self._config = config

    @property
    def log_start_offset(self) -> int:
        return min(max(self._segments[0].base_offset, self._deleted_before), self.log_end_offset)

    @property
    def log_end_offset(self) -> int:
        return self._segments[-1].next_offset

    @property
    def size_bytes(self) -> int:
        return sum(segment.size for segment in self._segments)

    # -- append -------------------------------------------------------------------------------------

    def append(self, records: Buffer, now_ms: int) -> AppendResult:
        """Validate and append the record batches of one produce request; assign their offsets."""
        self._check_open()
        config = self._config
        batches = validate_produce_records(records, max_message_bytes=config.max_message_bytes)
        if config.compact_policy:
            self._check_keys(records, batches)
        total = len(records)
        if total > config.segment_bytes:
            raise RecordListTooLargeError(
                f"{total} bytes of record batches exceed segment.bytes {config.segment_bytes}"
            )
        data = bytearray(records)
        append_time = now_ms if config.log_append_time else None
        first = self.log_end_offset
        assigned = assign_offsets(
            data, batches, first, leader_epoch=LEADER_EPOCH, log_append_time_ms=append_time
        )
        active = self._segments[-1]
        if active.size > 0 and (
            active.size + total > config.segment_bytes
            or (active.rolling_base_ms is not None and now_ms - active.rolling_base_ms > config.segment_ms)
        ):
            active = self._roll()
        active.append(data, assigned, now_ms)
        self._dirty.add(active)
        return AppendResult(
            base_offset=first,
            last_offset=assigned[-1].header.last_offset,
            log_append_time_ms=-1 if append_time is None else append_time,
            log_start_offset=self.log_start_offset,
        )

    def _check_keys(self, records: Buffer, batches: list[BatchRef]) -> None:
        """Kafka's rule for compacted topics: a record without a key is refused (INVALID_RECORD), with
        each such record named by its index in the batch. Batches this module cannot decompress (snappy,
        lz4, zstd) are not checked."""
        name = f"{self.directory.parent.name}-{self.directory.name}"
        refused: list[tuple[int, str]] = []
        view = memoryview(records)
        for ref in batches:
            try:
                keyless = keyless_records(view[ref.position : ref.position + ref.header.size])
            except UnsupportedCompressionError:
                continue
            reason = f"Compacted topic cannot accept message without key in topic partition {name}"
            refused.extend((index, reason) for index in keyless)
        if refused:
            shown = ", ".join(f"RecordError(batchIndex={i}, message='{why}')" for i, why in refused[:3])
            raise InvalidRecordError(
                f"One or more records have been rejected due to {len(refused)} record errors in total, "
                f"and only showing the first three errors at most: [{shown}]",
                tuple(refused),
            )

    def _roll(self) -> Segment:
        segment = Segment.create(self.directory, self.log_end_offset, self._config.index_interval_bytes)
        self._add_segment(segment)
        self._directory_version += 1
        return segment

    # -- reads --------------------------------------------------------------------------------------

    def _check_range(self, offset: int) -> None:
        start, end = self.log_start_offset, self.log_end_offset
        if offset < start or offset > end:
            raise OffsetOutOfRangeError(
                f"offset {offset} is out of range for {self.directory.parent.name}-{self.directory.name}: "
                f"the log holds offsets {start} to {end}"
            )

    def _locate(self, offset: int) -> tuple[int, int]:
        """(segment index, position) of the batch holding `offset` or the first batch after it."""
        cached = self._positions.get(offset)
        if cached is not None:
            segment, pos = cached
            i = bisect.bisect_left(self._bases, segment.base_offset)
            if i < len(self._segments) and self._segments[i] is segment:
                return i, pos
        i = max(bisect.bisect_right(self._bases, offset) - 1, 0)
        return i, self._segments[i].position_of(offset)

    def _remember(self, offset: int, segment: Segment, pos: int) -> None:
        if len(self._positions) >= _POSITION_CACHE_LIMIT:
            self._positions.clear()
        self._positions[offset] = (segment, pos)

    def read(self, offset: int, max_bytes: int, *, min_one_batch: bool = True) -> bytes:
        """Whole batches from the one holding `offset`, up to `max_bytes` (but at least one batch when
        `min_one_batch`). Empty at the log end; OffsetOutOfRangeError outside [log start, log end]."""

        def take(segment: Segment, pos: int, budget: int, min_one: bool) -> tuple[bytes, int, int]:
            data, next_offset = segment.read(pos, budget, min_one)
            return data, len(data), next_offset

        chunks = self._batches(offset, max_bytes, min_one_batch, take)
        return chunks[0] if len(chunks) == 1 else b"".join(chunks)

    def regions(self, offset: int, max_bytes: int, *, min_one_batch: bool = True) -> list[FileRegion]:
        """The batches `read` would return, as regions of the segment files (each with a duplicate
        descriptor the caller closes) rather than bytes."""

        def take(
            segment: Segment, pos: int, budget: int, min_one: bool
        ) -> tuple[FileRegion | None, int, int]:
            length, next_offset = segment.span(pos, budget, min_one)
            # Nothing fits: no region, so no descriptor to duplicate (the walk stops there).
            region = FileRegion(segment.duplicate_fd(), pos, length) if length else None
            return region, length, next_offset

        return [region for region in self._batches(offset, max_bytes, min_one_batch, take) if region]

    def _batches(
        self,
        offset: int,
        max_bytes: int,
        min_one_batch: bool,
        take: Callable[[Segment, int, int, bool], tuple[_Taken, int, int]],
    ) -> list[_Taken]:
        """What `take` makes of each segment's run of whole batches from `offset` within `max_bytes`;
        `take(segment, position, budget, min_one)` answers (item, length, offset after its last batch)."""
        self._check_open()
        self._check_range(offset)
        if offset == self.log_end_offset:
            return []
        index, pos = self._locate(offset)
        found: list[_Taken] = []
        budget = max_bytes
        min_one = min_one_batch
        while index < len(self._segments):
            segment = self._segments[index]
            if pos < segment.size:
                item, length, next_offset = take(segment, pos, budget, min_one)
                if not length:
                    break
                found.append(item)
                budget -= length
                min_one = False
                pos += length
                self._remember(next_offset, segment, pos)
                if pos < segment.size or budget <= 0:
                    break
            index += 1
            pos = 0
        return found

    def bytes_available(self, offset: int) -> int:
        """Bytes from the batch holding `offset` to the log end (0 at or past the end)."""
        if offset >= self.log_end_offset:
            return 0
        index, pos = self._locate(max(offset, self.log_start_offset))
        return self._segments[index].size - pos + sum(s.size for s in self._segments[index + 1 :])

    def offset_for_timestamp(self, timestamp: int) -> OffsetAndTimestamp | None:
        """The first record whose timestamp is >= `timestamp` (Kafka's ListOffsets by time)."""
        self._check_open()
        for segment in self._segments:
            pos = segment.position_of_timestamp(timestamp)
            if pos is None:
                continue
            batch = segment.batch_at(pos)
            found = first_record_at_or_after(batch, timestamp)
            if found is None:  # the header's maxTimestamp promised more than its records hold
                header = parse_header(batch)
                return OffsetAndTimestamp(header.base_offset, header.max_timestamp)
            return OffsetAndTimestamp(*found)
        return None

    def max_timestamp(self) -> OffsetAndTimestamp | None:
        """The record with the largest timestamp (the earliest one on ties), if any record has one."""
        self._check_open()
        best: Segment | None = None
        for segment in self._segments:
            if segment.max_timestamp_position >= 0 and (
                best is None or segment.max_timestamp > best.max_timestamp
            ):
                best = segment
        if best is None or best.max_timestamp < 0:
            return None
        return OffsetAndTimestamp(*max_timestamp_record(best.batch_at(best.max_timestamp_position)))

    # -- DeleteRecords ------------------------------------------------------------------------------

    def delete_records_before(self, offset: int) -> int:
        """Advance the log start offset to `offset` (DeleteRecords; never backwards) and delete the
        segments wholly below it; return the log start offset. The new start is written to its own
        file before it is answered, so it holds after a restart."""
        self._check_open()
        if not 0 <= offset <= self.log_end_offset:
            raise OffsetOutOfRangeError(
                f"cannot delete records of {self.directory.parent.name}-{self.directory.name} before "
                f"offset {offset}: the high watermark is {self.log_end_offset}"
            )
        if offset <= self.log_start_offset:
            return self.log_start_offset
        try:
            write_atomically(self.directory / LOG_START_FILE, f"{offset}\n".encode())
        except OSError as exc:
            raise KafkaStorageError(f"cannot record the log start offset of {self.directory}: {exc}") from exc
        self._deleted_before = offset
        # Whole segments below the new start go; the active one stays (it may be empty at the log end).
        count = 0
        while count < len(self._segments) - 1 and self._segments[count].next_offset <= offset:
            count += 1
        if count:
            self._delete_oldest(count)
        return self.log_start_offset

    def _delete_oldest(self, count: int) -> None:
        doomed = self._segments[:count]
        del self._segments[:count]
        del self._bases[:count]
        for segment in doomed:
            self._dirty.discard(segment)
            segment.delete()
        self._positions.clear()
        self._directory_version += 1

    # -- retention ----------------------------------------------------------------------------------

    def enforce_retention(self, now_ms: int) -> int:
        """Delete the oldest segments past retention.ms or beyond retention.bytes; return how many.

        Whole segments only. As in Kafka, the active segment is deleted too when it is past retention
        (a new empty segment at the log end takes its place), so the log start offset can reach the
        log end offset.
        """
        self._check_open()
        config = self._config
        if not config.delete_policy:
            return 0  # a compact-only topic keeps its records whatever their age or size
        segments = self._segments
        count = 0

        def deletable(i: int) -> bool:
            return i < len(segments) and not (i == len(segments) - 1 and segments[i].size == 0)

        if config.retention_ms >= 0:
            while (
                deletable(count) and now_ms - segments[count].retention_timestamp_ms() > config.retention_ms
            ):
                count += 1
        if config.retention_bytes >= 0:
            excess = sum(s.size for s in segments[count:]) - config.retention_bytes
            while deletable(count) and excess - segments[count].size >= 0:
                excess -= segments[count].size
                count += 1
        if count == 0:
            return 0
        if count == len(segments):
            self._roll()
        self._delete_oldest(count)
        log.info(
            "deleted %d segment(s) of %s; log start offset is now %d",
            count,
            self.directory,
            self.log_start_offset,
        )
        return count

    # -- durability ---------------------------------------------------------------------------------

    @property
    def needs_flush(self) -> bool:
        return (
            bool(self._dirty)
            or self._directory_version != self._directory_synced_version
            or self._segments[-1].base_offset > self._recovery_point
        )

    def prepare_flush(self) -> FlushPlan:
        """Capture what is not yet durable. Run `plan.execute()` (anywhere), then `complete_flush(plan)`."""
        plan = FlushPlan(self.directory, directory_version=self._directory_version)
        for segment in sorted(self._dirty, key=lambda s: s.base_offset):
            plan.segments.append((segment, os.dup(segment.fd), segment.size))
        plan.sync_directory = self._directory_version != self._directory_synced_version
        active_base = self._segments[-1].base_offset
        if active_base > self._recovery_point:
            plan.recovery_point = active_base
        return plan

    def complete_flush(self, plan: FlushPlan) -> None:
        for segment, _, size in plan.segments:
            segment.flushed_size = max(segment.flushed_size, size)
            if segment.flushed_size >= segment.size:
                self._dirty.discard(segment)
        self._directory_synced_version = max(self._directory_synced_version, plan.directory_version)
        if plan.recovery_point is not None:
            self._recovery_point = max(self._recovery_point, plan.recovery_point)

    def flush(self) -> None:
        """fsync everything appended so far (blocking)."""
        self._check_open()
        if not self.needs_flush:
            return
        plan = self.prepare_flush()
        plan.execute()
        self.complete_flush(plan)

    # -- lifecycle ----------------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise KafkaStorageError(f"partition log {self.directory} is closed")

    def close(self) -> None:
        """Flush and close the segment files."""
        if self._closed:
            return
        try:
            self.flush()
        finally:
            self.close_without_flush()

    def close_without_flush(self) -> None:
        self._closed = True
        for segment in self._segments:
            segment.close()
        self._positions.clear()
