"""The coordinator's durable log: checksummed, length-prefixed frames of records, plus snapshots.

Layout of a directory:
  log-<seq>.sfl        frames appended since snapshot <seq> (the newest file is the active one)
  snapshot-<seq>.sfs   the live state at the moment log <seq> was started

A frame is  u32 payload length | u32 CRC-32C of the payload | payload, and a payload is
u8 format version | u32 record count | records.  Every append writes one frame with os.write, so a
record survives a crash of this process as soon as append returns; `sync` makes it survive a crash of
the machine. Recovery verifies every frame: a torn or corrupt tail of the newest log is cut off (and
kept aside in a `.corrupt` file, never loaded); damage anywhere else stops recovery with an error
rather than loading state that is known to be incomplete.

A write that fails or comes up short (a full disk, an I/O error) is cut off at once: the file is
truncated back to the end of the last good frame, so frames appended after it stay recoverable. No
frame is ever written that recovery would refuse: an append larger than the frame limit is refused
with MESSAGE_TOO_LARGE, and snapshots are split into frames by size.
"""

from __future__ import annotations

import errno
import fcntl
import logging
import os
import re
import struct
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import crc32c

from staticfleet.coordinator.errors import ErrorCode, StoreError
from staticfleet.coordinator.records import Record, RecordDecodeError, decode_records, encode_record
from staticfleet.fsutil import fsync_directory

log = logging.getLogger(__name__)

FILE_MAGIC = b"SFLOG\x00\x01\n"
SNAPSHOT_MAGIC = b"SFSNP\x00\x01\n"
_FRAME_HEAD = struct.Struct(">II")
_PAYLOAD_HEAD = struct.Struct(">BI")
_FORMAT_VERSION = 1
MAX_FRAME_BYTES = 256 * 1024 * 1024
"""The largest frame recovery reads; appends and snapshots never write a larger one."""
SNAPSHOT_FRAME_BYTES = 4 * 1024 * 1024
"""Snapshot frames are cut at about this size (a single record may make one larger, up to the limit)."""
_LOG_NAME = re.compile(r"^log-(\d{20})\.sfl$")
_SNAPSHOT_NAME = re.compile(r"^snapshot-(\d{20})\.sfs$")


class LogCorruptError(RuntimeError):
    """Damage that recovery cannot safely cut off."""


def encode_frame(records: Sequence[Record]) -> bytes:
    return _frame_of(len(records), b"".join(encode_record(r) for r in records))


def _frame_of(count: int, encoded_records: bytes) -> bytes:
    payload = _PAYLOAD_HEAD.pack(_FORMAT_VERSION, count) + encoded_records
    return _FRAME_HEAD.pack(len(payload), crc32c.crc32c(payload)) + payload


FRAME_OVERHEAD = _FRAME_HEAD.size + _PAYLOAD_HEAD.size


def snapshot_frames(records: Iterable[Record], target_bytes: int, max_bytes: int) -> Iterator[bytes]:
    """Frames of about `target_bytes`, none over `max_bytes`; StoreError for a record that cannot fit."""
    parts: list[bytes] = []
    size = FRAME_OVERHEAD
    for record in records:
        encoded = encode_record(record)
        if FRAME_OVERHEAD + len(encoded) > max_bytes:
            raise StoreError(
                f"a {type(record).__name__} of {len(encoded)} bytes exceeds the frame limit "
                f"of {max_bytes} bytes",
                ErrorCode.message_too_large,
            )
        if parts and size + len(encoded) > target_bytes:
            yield _frame_of(len(parts), b"".join(parts))
            parts, size = [], FRAME_OVERHEAD
        parts.append(encoded)
        size += len(encoded)
    if parts:
        yield _frame_of(len(parts), b"".join(parts))


_DISK_FULL = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})


class DataDirLockedError(RuntimeError):
    """Another process holds the data directory."""


@dataclass(frozen=True, slots=True)
class _Scan:
    frames: list[tuple[int, memoryview]]
    """(record count, records bytes) of every good frame, in order."""
    good_bytes: int
    """Length of the prefix made of the header and good frames."""
    damage: str | None


def _scan(data: bytes, magic: bytes) -> _Scan:
    if len(data) < len(magic):
        return _Scan([], 0, "file shorter than its header" if data else None)
    if data[: len(magic)] != magic:
        return _Scan([], 0, "bad file header")
    view = memoryview(data)
    pos = len(magic)
    frames: list[tuple[int, memoryview]] = []
    end = len(data)
    while pos < end:
        if end - pos < _FRAME_HEAD.size:
            return _Scan(frames, pos, f"torn frame header at byte {pos}")
        length, checksum = _FRAME_HEAD.unpack_from(data, pos)
        start = pos + _FRAME_HEAD.size
        if length < _PAYLOAD_HEAD.size or length > MAX_FRAME_BYTES or start + length > end:
            return _Scan(frames, pos, f"torn or oversized frame at byte {pos}")
        payload = view[start : start + length]
        if crc32c.crc32c(payload) != checksum:
            return _Scan(frames, pos, f"checksum mismatch in frame at byte {pos}")
        version, count = _PAYLOAD_HEAD.unpack_from(payload, 0)
        if version != _FORMAT_VERSION:
            return _Scan(frames, pos, f"unknown frame format {version} at byte {pos}")
        frames.append((count, payload[_PAYLOAD_HEAD.size :]))
        pos = start + length
    return _Scan(frames, pos, None)


class DurableLog:
    """Append-only record log with snapshots. Not thread-safe: one owner appends; `sync` and the
    writing half of a snapshot (`write_snapshot`) may run in a worker thread."""

    def __init__(
        self,
        directory: str | os.PathLike[str],
        *,
        fsync: bool = True,
        max_frame_bytes: int = MAX_FRAME_BYTES,
        snapshot_frame_bytes: int = SNAPSHOT_FRAME_BYTES,
    ) -> None:
        if not 0 < max_frame_bytes <= MAX_FRAME_BYTES:
            raise ValueError(f"max_frame_bytes must be in 1..{MAX_FRAME_BYTES}, not {max_frame_bytes}")
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.fsync = fsync
        self.max_frame_bytes = max_frame_bytes
        self.snapshot_frame_bytes = min(snapshot_frame_bytes, max_frame_bytes)
        self._fd: int | None = None
        self._retiring: list[tuple[int, int]] = []
        """(seq, fd) of logs replaced by a newer one whose last appends still need an fsync."""
        self._sync_lock = threading.Lock()
        self._seq = 0
        self._dirty = False
        self._size = 0
        """Bytes of the active log that hold its header and whole, good frames."""
        self._torn = False
        """A failed write left bytes past `_size` that could not be cut off yet."""
        self.bytes_since_snapshot = 0
        self.snapshot_bytes = 0
        self._recovered = False
        self._write: Callable[[int, bytes], int] = os.write
        """The system call that appends (replaced by fault-injection tests)."""

    # --- recovery ----------------------------------------------------------------------------------

    def _files(self, pattern: re.Pattern[str]) -> list[tuple[int, Path]]:
        found = []
        for path in self.directory.iterdir():
            match = pattern.match(path.name)
            if match:
                found.append((int(match.group(1)), path))
        return sorted(found)

    def recover(self) -> Iterator[Record]:
        """Yield every durable record, oldest first, repairing a torn tail. Call once, before appending."""
        if self._recovered:
            raise RuntimeError("recover() runs once per DurableLog")
        self._recovered = True
        for stale in self.directory.glob("*.tmp"):
            stale.unlink()
        snapshots = self._files(_SNAPSHOT_NAME)
        base_seq = 0
        if snapshots:
            base_seq, snapshot_path = snapshots[-1]
            data = snapshot_path.read_bytes()
            scan = _scan(data, SNAPSHOT_MAGIC)
            if scan.damage is not None:
                raise LogCorruptError(f"{snapshot_path}: {scan.damage}; refusing to load a damaged snapshot")
            self.snapshot_bytes = len(data)
            for count, payload in scan.frames:
                yield from self._decode(snapshot_path, count, payload)
        logs = [(seq, path) for seq, path in self._files(_LOG_NAME) if seq >= base_seq]
        for index, (seq, path) in enumerate(logs):
            data = path.read_bytes()
            scan = _scan(data, FILE_MAGIC)
            last = index == len(logs) - 1
            if scan.damage is not None:
                if not last:
                    raise LogCorruptError(f"{path}: {scan.damage}, and newer log files follow it")
                self._cut_tail(path, data, scan)
            for count, payload in scan.frames:
                yield from self._decode(path, count, payload)
            if last:
                self._seq = seq
                self.bytes_since_snapshot = scan.good_bytes
                self._size = scan.good_bytes
        if not logs:
            self._seq = base_seq
        self._open_active()

    @staticmethod
    def _decode(path: Path, count: int, payload: memoryview) -> Iterator[Record]:
        try:
            yield from decode_records(payload, count)
        except RecordDecodeError as exc:
            raise LogCorruptError(f"{path}: a checksummed frame holds an undecodable record: {exc}") from exc

    def _cut_tail(self, path: Path, data: bytes, scan: _Scan) -> None:
        keep = max(scan.good_bytes, 0)
        aside = path.with_name(f"{path.name}.corrupt-{keep}")
        aside.write_bytes(data[keep:])
        log.warning("%s: %s; %d bytes moved to %s", path, scan.damage, len(data) - keep, aside.name)
        if keep < len(FILE_MAGIC):
            path.write_bytes(FILE_MAGIC)
        else:
            with open(path, "r+b") as handle:
                handle.truncate(keep)
                handle.flush()
                os.fsync(handle.fileno())

    # --- appending ---------------------------------------------------------------------------------

    def _log_path(self, seq: int) -> Path:
        return self.directory / f"log-{seq:020d}.sfl"

    def _open_active(self) -> None:
        path = self._log_path(self._seq)
        is_new = not path.exists()
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._size = os.fstat(self._fd).st_size
        if is_new or self._size == 0:
            self._write_all(FILE_MAGIC)
            self._size = len(FILE_MAGIC)
            self.bytes_since_snapshot = self._size
            if self.fsync:
                os.fsync(self._fd)
                fsync_directory(self.directory)

    def _write_all(self, data: bytes) -> None:
        assert self._fd is not None
        written = self._write(self._fd, data)
        if written != len(data):
            raise OSError(errno.ENOSPC, f"short write: {written} of {len(data)} bytes")

    def _cut_torn_write(self) -> bool:
        """Truncate the active log back to its last good frame; False if even that failed."""
        assert self._fd is not None
        try:
            os.ftruncate(self._fd, self._size)
        except OSError:
            log.warning("cannot cut a failed write off %s", self._log_path(self._seq), exc_info=True)
            self._torn = True
            return False
        self._torn = False
        return True

    def append(self, records: Sequence[Record]) -> None:
        """Append one frame of records, or raise StoreError and leave the log as it was."""
        if not self._recovered:
            raise RuntimeError("recover() must run before append()")
        if not records:
            return
        assert self._fd is not None
        frame = encode_frame(records)
        if len(frame) > self.max_frame_bytes:
            raise StoreError(
                f"{len(records)} records take {len(frame)} bytes, above the frame limit of "
                f"{self.max_frame_bytes} bytes",
                ErrorCode.message_too_large,
            )
        path = self._log_path(self._seq)
        if self._torn and not self._cut_torn_write():
            raise StoreError(f"cannot append to {path}: an earlier failed write could not be cut off")
        try:
            self._write_all(frame)
        except OSError as exc:
            self._cut_torn_write()
            kind = "disk full" if exc.errno in _DISK_FULL else "I/O error"
            raise StoreError(f"cannot append to {path} ({kind}): {exc}") from exc
        self._size += len(frame)
        self.bytes_since_snapshot += len(frame)
        self._dirty = True

    @property
    def unsynced(self) -> bool:
        return self._dirty

    def sync(self) -> None:
        """Make every record appended before this call durable; StoreError if the disk refused.

        May run in another thread than append."""
        retiring = self._retiring
        if not (self._dirty or retiring) or self._fd is None:
            return
        with self._sync_lock:
            self._dirty = False  # cleared first: an append racing with the fsync marks the log dirty again
            try:
                while retiring:
                    if self.fsync:
                        os.fsync(retiring[0][1])
                    os.close(retiring.pop(0)[1])
                if self.fsync:
                    os.fsync(self._fd)
            except OSError as exc:
                self._dirty = True
                raise StoreError(f"cannot fsync {self._log_path(self._seq)}: {exc}") from exc

    # --- snapshots ---------------------------------------------------------------------------------

    def should_snapshot(self, min_bytes: int = 64 * 1024 * 1024) -> bool:
        return self.bytes_since_snapshot > max(min_bytes, self.snapshot_bytes)

    def begin_snapshot(self) -> int:
        """Start a new log for appends made from now on; the snapshot of the state at this moment
        is then written by `write_snapshot(seq, records)`, possibly in another thread."""
        if self._torn and not self._cut_torn_write():
            raise StoreError(f"cannot start a snapshot: {self._log_path(self._seq)} ends in a failed write")
        old_fd, old_seq = self._fd, self._seq
        self._seq += 1
        try:
            self._open_active()
        except OSError as exc:
            self._log_path(self._seq).unlink(missing_ok=True)
            self._fd, self._seq = old_fd, old_seq
            raise StoreError(f"cannot start a new log for a snapshot: {exc}") from exc
        if old_fd is not None:
            self._retiring.append((old_seq, old_fd))
        return self._seq

    def write_snapshot(self, seq: int, live_records: Iterable[Record]) -> int:
        """Write snapshot `seq` and drop the logs and snapshots it replaces; returns its size.

        Until it is renamed into place, recovery reads the older snapshot and every log after it."""
        final = self.directory / f"snapshot-{seq:020d}.sfs"
        tmp = final.with_name(final.name + ".tmp")
        size = 0
        try:
            with open(tmp, "wb") as handle:
                size += handle.write(SNAPSHOT_MAGIC)
                for frame in snapshot_frames(live_records, self.snapshot_frame_bytes, self.max_frame_bytes):
                    size += handle.write(frame)
                handle.flush()
                os.fsync(handle.fileno())
            os.replace(tmp, final)
            fsync_directory(self.directory)
        except OSError as exc:
            tmp.unlink(missing_ok=True)
            raise StoreError(f"cannot write {final.name}: {exc}") from exc
        except StoreError:
            tmp.unlink(missing_ok=True)
            raise
        self.snapshot_bytes = size
        self.bytes_since_snapshot = self._size
        with self._sync_lock:
            # The snapshot holds what the replaced logs hold: their fsyncs are owed no more.
            for entry in [e for e in self._retiring if e[0] < seq]:
                self._retiring.remove(entry)
                os.close(entry[1])
        for old, path in self._files(_LOG_NAME):
            if old < seq:
                path.unlink()
        for old, path in self._files(_SNAPSHOT_NAME):
            if old < seq:
                path.unlink()
        return size

    def snapshot(self, live_records: Iterable[Record]) -> None:
        """Write the live state as a new snapshot and start a new log after it; drop what it replaces."""
        seq = self.begin_snapshot()
        self.sync()
        self.write_snapshot(seq, live_records)

    def close(self) -> None:
        if self._fd is not None:
            try:
                self.sync()
            finally:
                for _, fd in self._retiring:
                    os.close(fd)
                self._retiring.clear()
                os.close(self._fd)
                self._fd = None


def lock_data_dir(directory: str | os.PathLike[str]) -> int:
    """Hold an exclusive lock on a data directory for the life of this process; returns its fd.

    Raises DataDirLockedError, having created and changed nothing, if another process holds it."""
    path = Path(directory) / ".lock"
    flags = os.O_RDWR | os.O_CLOEXEC
    try:
        fd = os.open(path, flags)
    except FileNotFoundError:
        Path(directory).mkdir(parents=True, exist_ok=True)
        fd = os.open(path, flags | os.O_CREAT, 0o644)
    try:
        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        os.close(fd)
        raise DataDirLockedError(
            f"data directory {directory} is in use by another coordinator (lock held on {path}); "
            "stop it first, or give this one its own --data-dir"
        ) from None
    return fd


class MemoryStore:
    """An in-memory store for tests: keeps every appended batch, can be told to fail."""

    def __init__(self) -> None:
        self.batches: list[list[Record]] = []
        self.fail_with: StoreError | None = None

    def append(self, records: Sequence[Record]) -> None:
        if self.fail_with is not None:
            raise self.fail_with
        if records:
            self.batches.append(list(records))

    @property
    def records(self) -> list[Record]:
        return [r for batch in self.batches for r in batch]
