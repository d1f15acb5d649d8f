"""One segment file of a partition's log: its batches as the producer sent them (offsets filled in), a
sparse index rebuilt on open, recovery (CRC checks, truncation at the first torn or corrupt batch),
lookups by offset and timestamp, reads, and appends. See partitionlog.py for how segments make a log."""

from __future__ import annotations

import bisect
import logging
import os
import struct
from array import array
from pathlib import Path
from typing import Final

from staticfleet.broker.recordbatch import (
    HEADER_SIZE,
    LOG_OVERHEAD,
    MIN_BATCH_LENGTH,
    NO_TIMESTAMP,
    BatchRef,
    RecordBatchHeader,
    batch_size_at,
    check_framing,
    parse_header,
)
from staticfleet.broker.topiclog_errors import KafkaStorageError, TopicLogError

log = logging.getLogger(__name__)

SEGMENT_SUFFIX: Final = ".log"
_HEADER_WINDOW: Final = 64 * 1024
_CRC_WINDOW: Final = 1024 * 1024
# baseOffset, batchLength, partitionLeaderEpoch, magic, crc, attributes, lastOffsetDelta
_OFFSET_PREFIX: Final = struct.Struct(">qiibIhi")
_LAST_OFFSET_DELTA: Final = struct.Struct(">i")
_LENGTH: Final = struct.Struct(">i")


def segment_file_name(base_offset: int) -> str:
    return f"{base_offset:020d}{SEGMENT_SUFFIX}"


def parse_segment_file_name(name: str) -> int | None:
    stem, dot, suffix = name.partition(".")
    if dot and "." + suffix == SEGMENT_SUFFIX and len(stem) == 20 and stem.isdigit():
        return int(stem)
    return None


class _Window:
    """Sequential reader over a file that serves small reads from one larger pread."""

    def __init__(self, fd: int, file_size: int, chunk: int) -> None:
        self._fd = fd
        self._file_size = file_size
        self._chunk = chunk
        self._start = 0
        self._data = b""

    def get(self, pos: int, n: int) -> memoryview | None:
        if n < 0 or pos + n > self._file_size:
            return None
        off = pos - self._start
        if off < 0 or off + n > len(self._data):
            self._start = pos
            self._data = os.pread(self._fd, max(n, self._chunk), pos)
            off = 0
            if len(self._data) < n:
                return None
        return memoryview(self._data)[off : off + n]


class Segment:
    """One segment file and its in-memory indexes."""

    def __init__(self, path: Path, base_offset: int, fd: int, index_interval_bytes: int) -> None:
        self.path = path
        self.base_offset = base_offset
        self.fd = fd
        self.index_interval_bytes = index_interval_bytes
        self.size = 0
        self.flushed_size = 0
        self.next_offset = base_offset
        self.max_timestamp = NO_TIMESTAMP
        self.max_timestamp_position = -1
        self.rolling_base_ms: int | None = None
        self.broken = False
        self._index_offsets = array("q", [base_offset])
        self._index_positions = array("q", [0])
        self._index_max_timestamp_before = array("q", [NO_TIMESTAMP])
        self._last_indexed_position = 0

    @classmethod
    def create(cls, directory: Path, base_offset: int, index_interval_bytes: int) -> Segment:
        path = directory / segment_file_name(base_offset)
        try:
            fd = os.open(path, os.O_RDWR | os.O_CREAT | os.O_EXCL | os.O_APPEND | os.O_CLOEXEC, 0o644)
        except OSError as exc:
            raise KafkaStorageError(f"cannot create segment {path}: {exc}") from exc
        return cls(path, base_offset, fd, index_interval_bytes)

    @classmethod
    def open(cls, path: Path, base_offset: int, index_interval_bytes: int) -> Segment:
        try:
            fd = os.open(path, os.O_RDWR | os.O_APPEND | os.O_CLOEXEC)
        except OSError as exc:
            raise KafkaStorageError(f"cannot open segment {path}: {exc}") from exc
        return cls(path, base_offset, fd, index_interval_bytes)

    # -- state --------------------------------------------------------------------------------------

    def _note(self, position: int, header: RecordBatchHeader) -> None:
        """Account for a batch now present in the file at `position`."""
        if position - self._last_indexed_position >= self.index_interval_bytes and position > 0:
            self._index_offsets.append(header.base_offset)
            self._index_positions.append(position)
            self._index_max_timestamp_before.append(self.max_timestamp)
            self._last_indexed_position = position
        if header.max_timestamp > self.max_timestamp:
            self.max_timestamp = header.max_timestamp
            self.max_timestamp_position = position
        self.next_offset = header.next_offset
        self.size = position + header.size

    def retention_timestamp_ms(self) -> int:
        """The time retention.ms is measured from: the largest timestamp, else the file's mtime."""
        if self.max_timestamp >= 0:
            return self.max_timestamp
        return os.fstat(self.fd).st_mtime_ns // 1_000_000

    # -- recovery -----------------------------------------------------------------------------------

    def recover(self, *, verify_crc: bool) -> bool:
        """Rebuild the indexes from the file; truncate a torn or corrupt tail. True if truncated.

        Every batch must start at the expected offset (the segment's base, then the previous batch's
        next offset). With `verify_crc`, each batch's CRC is checked too; otherwise only its framing.
        """
        file_size = os.fstat(self.fd).st_size
        window = _Window(self.fd, file_size, _CRC_WINDOW if verify_crc else _HEADER_WINDOW)
        pos = 0
        expected = self.base_offset
        first_timestamp: int | None = None
        reason = ""
        while pos < file_size:
            header, reason = self._scan_one(window, pos, file_size, verify_crc)
            if header is None:
                break
            if header.base_offset != expected or header.last_offset_delta < 0:
                reason = f"batch at position {pos} has offsets [{header.base_offset}, {header.last_offset}]"
                reason += f" where offset {expected} was expected"
                break
            if first_timestamp is None:
                first_timestamp = header.max_timestamp
            self._note(pos, header)
            pos += header.size
            expected = header.next_offset
        self.flushed_size = pos
        if self.size > 0:
            if first_timestamp is not None and first_timestamp >= 0:
                self.rolling_base_ms = first_timestamp
            else:
                self.rolling_base_ms = os.fstat(self.fd).st_mtime_ns // 1_000_000
        if pos < file_size:
            log.warning(
                "truncating segment %s from %d to %d bytes: %s", self.path, file_size, pos, reason or "torn"
            )
            os.ftruncate(self.fd, pos)
            os.fsync(self.fd)
            return True
        return False

    @staticmethod
    def _scan_one(
        window: _Window, pos: int, file_size: int, verify_crc: bool
    ) -> tuple[RecordBatchHeader | None, str]:
        prefix = window.get(pos, LOG_OVERHEAD)
        if prefix is None:
            return None, f"{file_size - pos} trailing bytes at position {pos} are a torn batch"
        size = batch_size_at(prefix, 0)
        if size < HEADER_SIZE:
            return None, f"batch at position {pos} has an invalid length {size - LOG_OVERHEAD}"
        if pos + size > file_size:
            return None, f"batch at position {pos} of {size} bytes runs past the end of the file"
        if verify_crc:
            batch = window.get(pos, size)
            if batch is None:
                return None, f"batch at position {pos} cannot be read"
            try:
                return check_framing(batch, 0, size, at=pos), ""
            except TopicLogError as exc:
                return None, str(exc)
        head = window.get(pos, HEADER_SIZE)
        if head is None:
            return None, f"batch header at position {pos} cannot be read"
        header = parse_header(head)
        if header.magic != 2 or header.batch_length < MIN_BATCH_LENGTH:
            return None, f"batch at position {pos} has magic {header.magic}"
        return header, ""

    # -- lookups ------------------------------------------------------------------------------------

    def _offset_prefix_at(self, pos: int) -> tuple[int, int, int]:
        """(base offset, size, last offset) of the batch at `pos`, reading only its first 27 bytes."""
        raw = os.pread(self.fd, _OFFSET_PREFIX.size, pos)
        base, length, _, _, _, _, last_delta = _OFFSET_PREFIX.unpack(raw)
        return base, length + LOG_OVERHEAD, base + last_delta

    def position_of(self, offset: int) -> int:
        """Position of the first batch whose last offset is >= `offset`, or `size` if there is none."""
        i = bisect.bisect_right(self._index_offsets, offset) - 1
        pos = self._index_positions[max(i, 0)]
        while pos < self.size:
            _, size, last = self._offset_prefix_at(pos)
            if last >= offset:
                return pos
            pos += size
        return self.size

    def position_of_timestamp(self, timestamp: int) -> int | None:
        """Position of the first batch whose maxTimestamp is >= `timestamp`, if any."""
        if self.max_timestamp < timestamp:
            return None
        i = bisect.bisect_left(self._index_max_timestamp_before, timestamp) - 1
        pos = self._index_positions[max(i, 0)]
        while pos < self.size:
            header = self.header_at(pos)
            if header.max_timestamp >= timestamp:
                return pos
            pos += header.size
        return None

    def header_at(self, pos: int) -> RecordBatchHeader:
        return parse_header(os.pread(self.fd, HEADER_SIZE, pos))

    def batch_at(self, pos: int) -> bytes:
        size = batch_size_at(os.pread(self.fd, LOG_OVERHEAD, pos), 0)
        return os.pread(self.fd, size, pos)

    def read(self, pos: int, max_bytes: int, min_one_batch: bool) -> tuple[bytes, int]:
        """Whole batches from `pos` within `max_bytes`, and the offset after the last one.

        With `min_one_batch` the first batch is returned even when it alone exceeds `max_bytes`.
        Returns (b"", -1) when nothing fits.
        """
        available = self.size - pos
        if available <= 0:
            return b"", -1
        data = os.pread(self.fd, min(available, max(max_bytes, LOG_OVERHEAD)), pos)
        first_size = batch_size_at(data, 0)
        if first_size > len(data):  # the first batch alone is larger than max_bytes
            if not min_one_batch:
                return b"", -1
            data = os.pread(self.fd, first_size, pos)
            return data, self._next_offset_of(data, 0)
        end = 0
        last = 0
        length_at = _LENGTH.unpack_from
        limit = len(data) - LOG_OVERHEAD
        while end <= limit:
            size = length_at(data, end + 8)[0] + LOG_OVERHEAD
            if end + size > len(data):
                break
            last = end
            end += size
        if end < len(data):
            data = data[:end]
        return data, self._next_offset_of(data, last)

    def span(self, pos: int, max_bytes: int, min_one_batch: bool) -> tuple[int, int]:
        """What `read` would return, as (length, offset after the last batch), without reading the
        batches: whole batches from `pos` within `max_bytes`, found from the sparse index and a few
        batch headers. (0, -1) when nothing fits."""
        available = self.size - pos
        if available <= 0:
            return 0, -1
        if max_bytes >= available:
            return available, self.next_offset
        limit = pos + max(max_bytes, LOG_OVERHEAD)
        # The last indexed batch start within the limit; the batches from there are walked.
        i = bisect.bisect_right(self._index_positions, limit) - 1
        end, next_offset = pos, -1
        if self._index_positions[i] > pos:
            end, next_offset = self._index_positions[i], int(self._index_offsets[i])
        while end < self.size:
            _, size, last = self._offset_prefix_at(end)
            if end + size > limit:
                break
            end += size
            next_offset = last + 1
        if end > pos:
            return end - pos, next_offset
        if not min_one_batch:
            return 0, -1
        _, size, last = self._offset_prefix_at(pos)  # the first batch alone exceeds max_bytes
        return size, last + 1

    def duplicate_fd(self) -> int:
        return os.dup(self.fd)

    @staticmethod
    def _next_offset_of(data: bytes, pos: int) -> int:
        base = int(struct.unpack_from(">q", data, pos)[0])
        last_delta = int(_LAST_OFFSET_DELTA.unpack_from(data, pos + 23)[0])
        return base + last_delta + 1

    # -- writes -------------------------------------------------------------------------------------

    def append(self, data: bytearray, batches: list[BatchRef], now_ms: int) -> None:
        if self.broken:
            raise KafkaStorageError(f"segment {self.path} failed an earlier write; reopen the log to recover")
        start = self.size
        view = memoryview(data)
        written = 0
        try:
            while written < len(data):
                n = os.write(self.fd, view[written:])
                if n <= 0:
                    raise OSError(f"write returned {n}")
                written += n
        except OSError as exc:
            try:
                os.ftruncate(self.fd, start)
            except OSError:
                self.broken = True  # bytes past `size` would shift every later append
            raise KafkaStorageError(f"cannot append to {self.path}: {exc}") from exc
        for ref in batches:
            self._note(start + ref.position, ref.header)
        if self.rolling_base_ms is None:
            self.rolling_base_ms = now_ms

    def close(self) -> None:
        if self.fd >= 0:
            os.close(self.fd)
            self.fd = -1

    def delete(self) -> None:
        self.close()
        try:
            self.path.unlink()
        except FileNotFoundError:
            pass
        except OSError as exc:
            log.error("cannot delete segment %s: %s", self.path, exc)
