"""The coordinator's durable log: checksummed, length-prefixed frames of records, plus snapshots.

The files and frames are described in `logformat`. Every append writes one frame with os.write, so a
record survives a crash of this process as soon as append returns; `sync` makes it survive a crash of
the machine. Recovery first inspects every file it will read (`integrity.inspect`): a torn tail, the
unfinished last write of a crash, is cut off (and kept aside in a `.corrupt-*` file, never loaded);
any other damage stops recovery, before a record is loaded, with an error that says what to run.

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
import threading
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path

from staticfleet.coordinator.errors import ErrorCode, StoreError
from staticfleet.coordinator.integrity import (
    LogCorruptError,
    LogFile,
    commands_hint,
    inspect,
    numbered,
    refusal_message,
)
from staticfleet.coordinator.logformat import (
    FILE_MAGIC,
    LOG_NAME,
    MAX_FRAME_BYTES,
    SNAPSHOT_FRAME_BYTES,
    SNAPSHOT_MAGIC,
    SNAPSHOT_NAME,
    Damage,
    Frame,
    encode_frame,
    log_name,
    snapshot_frames,
    snapshot_name,
)
from staticfleet.coordinator.records import Record, RecordDecodeError, decode_records
from staticfleet.coordinator.repair import repair_notices
from staticfleet.fsutil import fsync_directory

log = logging.getLogger(__name__)

MAX_RECORD_BYTES_BETWEEN_SNAPSHOTS = 20 * 1024 * 1024
"""A snapshot is written once this many bytes were appended since the last one (or as many as the last
snapshot holds, if that is more): Kafka's metadata.log.max.record.bytes.between.snapshots and its default.
It bounds what recovery replays beyond the snapshot."""
_DISK_FULL = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})


class DataDirLockedError(RuntimeError):
    """Another process holds the data directory."""


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
        data_dir: str | os.PathLike[str] | None = None,
    ) -> None:
        if not 0 < max_frame_bytes <= MAX_FRAME_BYTES:
            raise ValueError(f"max_frame_bytes must be in 1..{MAX_FRAME_BYTES}, not {max_frame_bytes}")
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.data_dir = Path(data_dir) if data_dir is not None else self.directory.parent
        """The coordinator's --data-dir, named in the commands a recovery error gives."""
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
        self._created = False
        """The active log was created since the last sync, which must make its directory entry durable."""
        self.bytes_since_snapshot = 0
        self.snapshot_bytes = 0
        self._recovered = False
        self.recovery_complete = False
        """Every record was yielded and the log is open for appends."""
        self.recovery_failure: LogCorruptError | None = None
        self._write: Callable[[int, bytes], int] = os.write
        """The system call that appends (replaced by fault-injection tests)."""

    # --- recovery ----------------------------------------------------------------------------------

    def recover(self) -> Iterator[Record]:
        """Yield every durable record, oldest first, cutting a torn tail. Call once, before appending.

        Raises LogCorruptError, before yielding anything, for damage a crash cannot have made."""
        if self._recovered:
            raise RuntimeError("recover() runs once per DurableLog")
        self._recovered = True
        for stale in self.directory.glob("*.tmp"):
            stale.unlink()
        for notice in repair_notices(self.directory):
            log.warning("%s", notice)
        inspection = inspect(self.directory)
        if inspection.damaged:
            self.recovery_failure = LogCorruptError(refusal_message(inspection, self.data_dir))
            raise self.recovery_failure
        for passed in inspection.passed_over:
            log.warning(
                "%s is damaged (%s); recovering from %s and the %d logs after it, which hold all it held",
                passed.path,
                passed.scan.damages[0].reason,
                inspection.snapshot.path.name if inspection.snapshot is not None else "the first log",
                len(inspection.logs),
            )
        for file, damage in inspection.torn:
            self._cut_tail(file.path, damage)
        if inspection.snapshot is not None:
            self.snapshot_bytes = inspection.snapshot.scan.size
            yield from self._records_of(inspection.snapshot)
        for file in inspection.logs:
            yield from self._records_of(file)
        self._seq = inspection.logs[-1].seq if inspection.logs else inspection.base_seq
        self.bytes_since_snapshot = sum(f.path.stat().st_size for f in inspection.logs)
        self._open_active()
        self.recovery_complete = True

    def _records_of(self, file: LogFile) -> Iterator[Record]:
        data = file.path.read_bytes()
        view = memoryview(data)
        for frame in file.scan.frames:
            yield from self._decode(file, frame, view[frame.records_at : frame.end])

    def _decode(self, file: LogFile, frame: Frame, payload: memoryview) -> Iterator[Record]:
        try:
            yield from decode_records(payload, frame.record_count)
        except RecordDecodeError as exc:
            self.recovery_failure = LogCorruptError(
                f"the coordinator log is damaged, so the coordinator does not start: {file.path}: the frame "
                f"at byte {frame.offset} passes its checksum but holds an undecodable record ({exc}). "
                f"To go on, {commands_hint(self.data_dir)}"
            )
            raise self.recovery_failure from exc

    def _cut_tail(self, path: Path, damage: Damage) -> None:
        keep = damage.start
        aside = path.with_name(f"{path.name}.corrupt-{keep}")
        with open(path, "rb") as handle:
            handle.seek(keep)
            aside.write_bytes(handle.read())
        log.warning(
            "%s: cut a torn tail of %d bytes at byte %d (%s): no intact frame follows it, so it is the "
            "unfinished last write of a crash, never acknowledged; the bytes are kept in %s",
            path,
            damage.size,
            keep,
            damage.reason,
            aside.name,
        )
        if keep < len(FILE_MAGIC):
            path.write_bytes(FILE_MAGIC)
        else:
            with open(path, "r+b") as handle:
                handle.truncate(keep)
                handle.flush()
                os.fsync(handle.fileno())

    def _files(self, pattern: re.Pattern[str]) -> list[tuple[int, Path]]:
        return numbered(self.directory, pattern)

    # --- appending ---------------------------------------------------------------------------------

    def _log_path(self, seq: int) -> Path:
        return self.directory / log_name(seq)

    def _open_active(self, *, sync: bool = True) -> None:
        """Open (or create) the active log; without `sync`, a new file is made durable by the next
        `sync` instead of here (so that a snapshot never fsyncs on the event loop)."""
        path = self._log_path(self._seq)
        is_new = not path.exists()
        self._fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._size = os.fstat(self._fd).st_size
        if is_new or self._size == 0:
            self._write_all(FILE_MAGIC)
            self._size = len(FILE_MAGIC)
            self.bytes_since_snapshot = self._size
            if self.fsync and sync:
                os.fsync(self._fd)
                fsync_directory(self.directory)
            elif self.fsync:
                self._created = True

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
        if not (self._dirty or retiring or self._created) or self._fd is None:
            return
        with self._sync_lock:
            self._dirty = False  # cleared first: an append racing with the fsync marks the log dirty again
            created, self._created = self._created, False
            try:
                while retiring:
                    if self.fsync:
                        os.fsync(retiring[0][1])
                    os.close(retiring.pop(0)[1])
                if self.fsync:
                    os.fsync(self._fd)
                if created:
                    fsync_directory(self.directory)  # the new active log's entry
            except OSError as exc:
                self._dirty = True
                self._created = self._created or created
                raise StoreError(f"cannot fsync {self._log_path(self._seq)}: {exc}") from exc

    # --- snapshots ---------------------------------------------------------------------------------

    def should_snapshot(self, max_bytes_between: int = MAX_RECORD_BYTES_BETWEEN_SNAPSHOTS) -> bool:
        """Whether the logs since the last snapshot passed `max_bytes_between`, or the last snapshot's
        size if that is larger (so that writing snapshots never costs more than appending did)."""
        return self.bytes_since_snapshot > max(max_bytes_between, self.snapshot_bytes)

    def begin_snapshot(self) -> int:
        """Start a new log for appends made from now on; the snapshot of the state at this moment
        is then written by `write_snapshot(seq, records)`, possibly in another thread."""
        if self._torn and not self._cut_torn_write():
            raise StoreError(f"cannot start a snapshot: {self._log_path(self._seq)} ends in a failed write")
        old_fd, old_seq = self._fd, self._seq
        self._seq += 1
        try:
            self._open_active(sync=False)
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
        final = self.directory / snapshot_name(seq)
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
        for old, path in self._files(LOG_NAME):
            if old < seq:
                path.unlink()
        for old, path in self._files(SNAPSHOT_NAME):
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
