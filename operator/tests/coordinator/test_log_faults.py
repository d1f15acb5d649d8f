"""Fault injection on the durable log: failed and short writes at every byte of a frame, oversized
frames, and snapshots cut into frames that recovery accepts."""

from __future__ import annotations

import errno
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from staticfleet.coordinator import ErrorCode, StoreError
from staticfleet.coordinator.log import DurableLog
from staticfleet.coordinator.logformat import (
    FRAME_OVERHEAD,
    MAX_FRAME_BYTES,
    SNAPSHOT_FRAME_BYTES,
    encode_frame,
)
from staticfleet.coordinator.records import (
    GroupMetadataRecord,
    MemberRecord,
    OffsetCommitRecord,
    Record,
    encode_record,
)

BEFORE: list[Record] = [OffsetCommitRecord("g", "t", p, 100 + p, -1, "", 1) for p in range(2)]
FAILED: list[Record] = [
    OffsetCommitRecord("g", "t", 0, 500, -1, "m" * 5, 2),
    GroupMetadataRecord(
        "g", "consumer", 4, "range", "a-1", 7, (MemberRecord("a-1", "a", "c", "/h", 1, 2, b"s", b"a"),)
    ),
    OffsetCommitRecord("g", "t", 1, 501, -1, "", 2),
]
AFTER: list[list[Record]] = [
    [OffsetCommitRecord("g", "t", 0, 900, -1, "", 3)],
    [OffsetCommitRecord("g", "t", 1, 901, -1, "x", 4), OffsetCommitRecord("h", "t", 0, 1, -1, "", 4)],
]
Writer = Callable[[int, bytes], int]


def _open(
    directory: Path, max_frame_bytes: int = MAX_FRAME_BYTES, snapshot_frame_bytes: int = SNAPSHOT_FRAME_BYTES
) -> tuple[DurableLog, list[Record]]:
    log = DurableLog(
        directory, fsync=False, max_frame_bytes=max_frame_bytes, snapshot_frame_bytes=snapshot_frame_bytes
    )
    return log, list(log.recover())


def _failing_after(cut: int, *, short: bool) -> Writer:
    """A write that puts `cut` bytes on disk, then comes up short or fails as a full disk does."""

    def write(fd: int, data: bytes) -> int:
        written = os.write(fd, data[:cut]) if cut else 0
        if short:
            return written
        raise OSError(errno.ENOSPC, "No space left on device")

    return write


def _record_boundaries() -> list[int]:
    """Byte offsets inside the failed frame where one record ends and the next begins."""
    offsets, position = [], FRAME_OVERHEAD
    for record in FAILED:
        offsets.append(position)
        position += len(encode_record(record))
    offsets.append(position)
    return offsets


@pytest.mark.parametrize("short", [False, True], ids=["write-fails", "write-is-short"])
def test_a_failed_write_at_any_byte_is_cut_off_and_later_acknowledged_frames_recover(
    tmp_path: Path, short: bool
) -> None:
    frame_size = len(encode_frame(FAILED))
    cuts = range(frame_size)  # every byte, which includes every record boundary and the frame header
    assert set(_record_boundaries()) <= set(cuts) | {frame_size}
    for cut in cuts:
        directory = tmp_path / f"cut-{cut}"
        log, _ = _open(directory)
        log.append(BEFORE)
        log._write = _failing_after(cut, short=short)
        with pytest.raises(StoreError) as failure:
            log.append(FAILED)
        assert failure.value.code == ErrorCode.kafka_storage_error
        log._write = os.write
        for batch in AFTER:
            log.append(batch)
        log.close()
        reopened, recovered = _open(directory)
        reopened.close()
        assert recovered == BEFORE + [r for batch in AFTER for r in batch], f"cut at byte {cut}"
        assert not list(directory.glob("*.corrupt-*")), "nothing torn was left for recovery to cut"


def test_a_failed_write_whose_cut_also_fails_is_cut_before_the_next_append(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log, _ = _open(tmp_path)
    log.append(BEFORE)
    log._write = _failing_after(7, short=False)

    def refuse(fd: int, length: int) -> None:
        raise OSError(errno.EIO, "Input/output error")

    with monkeypatch.context() as patched:
        patched.setattr(os, "ftruncate", refuse)
        with pytest.raises(StoreError):
            log.append(FAILED)
        log._write = os.write
        with pytest.raises(StoreError, match="could not be cut off"):
            log.append(AFTER[0])  # refused: the torn bytes are still there
    log.append(AFTER[0])  # the cut works again: the append goes through
    log.close()
    _, recovered = _open(tmp_path)
    assert recovered == BEFORE + AFTER[0]


def test_an_append_over_the_frame_limit_is_refused_and_the_log_reopens_cleanly(tmp_path: Path) -> None:
    log, _ = _open(tmp_path, max_frame_bytes=4096)
    log.append(BEFORE)
    size = (tmp_path / "log-00000000000000000000.sfl").stat().st_size
    huge = GroupMetadataRecord(
        "g", "consumer", 1, "range", "a", 1, (MemberRecord("a", "a", "c", "/h", 1, 2, b"s" * 5000, b""),)
    )
    with pytest.raises(StoreError) as refused:
        log.append([huge])
    assert refused.value.code == ErrorCode.message_too_large
    assert "frame limit of 4096 bytes" in str(refused.value)
    assert (tmp_path / "log-00000000000000000000.sfl").stat().st_size == size, "nothing was written"
    log.append(AFTER[0])
    log.close()
    _, recovered = _open(tmp_path, max_frame_bytes=4096)
    assert recovered == BEFORE + AFTER[0]


def test_snapshots_are_cut_into_frames_under_the_limit(tmp_path: Path) -> None:
    records: list[Record] = [OffsetCommitRecord("g", "t", p, p, -1, "x" * 40, 1) for p in range(500)]
    log, _ = _open(tmp_path, max_frame_bytes=2048, snapshot_frame_bytes=1024)
    log.append(records[:5])
    log.snapshot(records)
    log.close()
    snapshot = next(tmp_path.glob("snapshot-*.sfs")).read_bytes()
    reopened, recovered = _open(tmp_path, max_frame_bytes=2048)
    reopened.close()
    assert recovered == records
    # Walk the frames: many of them, none over the limit.
    position, frames = 8, 0
    while position < len(snapshot):
        length = int.from_bytes(snapshot[position : position + 4], "big")
        assert length + 8 <= 2048
        position += 8 + length
        frames += 1
    assert frames > 10


def test_a_snapshot_with_a_record_over_the_limit_is_refused_and_changes_nothing(tmp_path: Path) -> None:
    log, _ = _open(tmp_path, max_frame_bytes=1024)
    log.append(BEFORE)
    too_big = OffsetCommitRecord("g", "t", 9, 9, -1, "y" * 2000, 1)
    with pytest.raises(StoreError) as refused:
        log.snapshot([*BEFORE, too_big])
    assert refused.value.code == ErrorCode.message_too_large
    assert not list(tmp_path.glob("snapshot-*")), "no snapshot, not even a temporary file, is left"
    log.append(AFTER[0])
    log.close()
    _, recovered = _open(tmp_path, max_frame_bytes=1024)
    assert recovered == BEFORE + AFTER[0]


def test_a_failed_fsync_is_a_store_error_and_a_later_sync_retries(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    log = DurableLog(tmp_path, fsync=True)
    list(log.recover())
    log.append(BEFORE)

    def broken(fd: int) -> None:
        raise OSError(errno.EIO, "Input/output error")

    with monkeypatch.context() as patched:
        patched.setattr(os, "fsync", broken)
        with pytest.raises(StoreError, match="cannot fsync"):
            log.sync()
    assert log.unsynced, "what failed to sync is still owed an fsync"
    log.sync()
    assert not log.unsynced
    log.close()


def test_starting_a_snapshot_syncs_nothing_and_the_next_sync_makes_the_new_log_durable(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """begin_snapshot runs on the event loop: the new log's fsyncs wait for the sync in a worker thread."""
    from staticfleet.coordinator import log as log_module

    log = DurableLog(tmp_path, fsync=True)
    list(log.recover())
    log.append(BEFORE)
    log.sync()
    calls: list[str] = []
    monkeypatch.setattr(os, "fsync", lambda fd: calls.append("file"))
    monkeypatch.setattr(log_module, "fsync_directory", lambda path: calls.append("directory"))
    log.begin_snapshot()
    assert calls == []
    log.sync()
    assert calls == ["file", "file", "directory"], "the retired log, the new one, then its directory entry"
    log.sync()
    assert calls == ["file", "file", "directory"], "nothing left to sync"
    monkeypatch.undo()
    log.close()
