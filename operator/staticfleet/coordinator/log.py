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
"""

from __future__ import annotations

import logging
import os
import re
import struct
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path

import crc32c

from staticfleet.coordinator.errors import StoreError
from staticfleet.coordinator.records import Record, RecordDecodeError, decode_records, encode_record
from staticfleet.fsutil import fsync_directory

log = logging.getLogger(__name__)

FILE_MAGIC = b"SFLOG\x00\x01\n"
SNAPSHOT_MAGIC = b"SFSNP\x00\x01\n"
_FRAME_HEAD = struct.Struct(">II")
_PAYLOAD_HEAD = struct.Struct(">BI")
_FORMAT_VERSION = 1
MAX_FRAME_BYTES = 256 * 1024 * 1024
_LOG_NAME = re.compile(r"^log-(\d{20})\.sfl$")
_SNAPSHOT_NAME = re.compile(r"^snapshot-(\d{20})\.sfs$")


class LogCorruptError(RuntimeError):
    """Damage that recovery cannot safely cut off."""


def encode_frame(records: Sequence[Record]) -> bytes:
    payload = _PAYLOAD_HEAD.pack(_FORMAT_VERSION, len(records)) + b"".join(encode_record(r) for r in records)
    return _FRAME_HEAD.pack(len(payload), crc32c.crc32c(payload)) + payload


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
    """Append-only record log with snapshots. Not thread-safe: one owner appends and syncs."""

    def __init__(self, directory: str | os.PathLike[str], *, fsync: bool = True) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.fsync = fsync
        self._fd: int | None = None
        self._seq = 0
        self._dirty = False
        self.bytes_since_snapshot = 0
        self.snapshot_bytes = 0
        self._recovered = False

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
        if is_new or os.fstat(self._fd).st_size == 0:
            os.write(self._fd, FILE_MAGIC)
            self.bytes_since_snapshot = len(FILE_MAGIC)
            if self.fsync:
                os.fsync(self._fd)
                fsync_directory(self.directory)

    def append(self, records: Sequence[Record]) -> None:
        if not self._recovered:
            raise RuntimeError("recover() must run before append()")
        if not records:
            return
        assert self._fd is not None
        frame = encode_frame(records)
        try:
            written = os.write(self._fd, frame)
            if written != len(frame):
                raise OSError(f"short write: {written} of {len(frame)} bytes")
        except OSError as exc:
            raise StoreError(f"cannot append to {self._log_path(self._seq)}: {exc}") from exc
        self.bytes_since_snapshot += len(frame)
        self._dirty = True

    def sync(self) -> None:
        """Make every record appended before this call durable. May run in another thread than append."""
        if self._dirty and self._fd is not None:
            self._dirty = False  # cleared first: an append racing with the fsync marks the log dirty again
            if self.fsync:
                os.fsync(self._fd)

    # --- snapshots ---------------------------------------------------------------------------------

    def should_snapshot(self, min_bytes: int = 64 * 1024 * 1024) -> bool:
        return self.bytes_since_snapshot > max(min_bytes, self.snapshot_bytes)

    def snapshot(self, live_records: Iterable[Record], batch: int = 1000) -> None:
        """Write the live state as a new snapshot and start a new log after it; drop what it replaces."""
        self.sync()
        new_seq = self._seq + 1
        final = self.directory / f"snapshot-{new_seq:020d}.sfs"
        tmp = final.with_name(final.name + ".tmp")
        size = 0
        with open(tmp, "wb") as handle:
            handle.write(SNAPSHOT_MAGIC)
            size += len(SNAPSHOT_MAGIC)
            chunk: list[Record] = []
            for record in live_records:
                chunk.append(record)
                if len(chunk) >= batch:
                    size += handle.write(encode_frame(chunk))
                    chunk = []
            if chunk:
                size += handle.write(encode_frame(chunk))
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(tmp, final)
        if self._fd is not None:
            os.close(self._fd)
        self._seq = new_seq
        self._open_active()
        fsync_directory(self.directory)
        self.snapshot_bytes = size
        for seq, path in self._files(_LOG_NAME):
            if seq < new_seq:
                path.unlink()
        for seq, path in self._files(_SNAPSHOT_NAME):
            if seq < new_seq:
                path.unlink()

    def close(self) -> None:
        if self._fd is not None:
            self.sync()
            os.close(self._fd)
            self._fd = None


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
