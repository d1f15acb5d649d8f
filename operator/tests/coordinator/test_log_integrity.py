"""The rule recovery applies to damage, one test per clause: a torn tail (the unfinished last write of a
crash, nothing intact after it) is cut; any other damage stops recovery with an error that names the
file, the offset, what follows and the commands to run; `check` and `repair` report and keep every
intact frame."""

from __future__ import annotations

import json
import logging
import os
from pathlib import Path
from typing import Any

import pytest

from staticfleet import cli
from staticfleet.coordinator.integrity import LogCorruptError, inspect
from staticfleet.coordinator.log import DurableLog, lock_data_dir
from staticfleet.coordinator.logformat import (
    FILE_MAGIC,
    FRAME_OVERHEAD,
    SNAPSHOT_MAGIC,
    encode_frame,
    find_intact_frame,
    frame_of,
    log_name,
    scan_file,
    snapshot_name,
)
from staticfleet.coordinator.records import GroupMetadataRecord, MemberRecord, OffsetCommitRecord, Record
from staticfleet.coordinator.repair import repair

_COMMITS: list[list[Record]] = [[OffsetCommitRecord("g", "t", p, 100 + p, -1, "", 1)] for p in range(6)]
FRAMES: list[list[Record]] = [
    *_COMMITS,
    [
        GroupMetadataRecord(
            "g", "consumer", 3, "range", "a-1", 5, (MemberRecord("a-1", "a", "c", "/h", 1, 2, b"s", b"a"),)
        ),
        OffsetCommitRecord("h", "t", 0, 7, -1, "m", 2),
    ],
]
ALL: list[Record] = [r for frame in FRAMES for r in frame]


def _data_dir(tmp_path: Path) -> tuple[Path, Path]:
    """A data dir whose coordinator log holds FRAMES, one append each: (data dir, the log file)."""
    data_dir = tmp_path / "data"
    log = DurableLog(data_dir / "coordinator", fsync=False)
    list(log.recover())
    for frame in FRAMES:
        log.append(frame)
    log.close()
    return data_dir, data_dir / "coordinator" / log_name(0)


def _recover(data_dir: Path) -> list[Record]:
    log = DurableLog(data_dir / "coordinator", fsync=False)
    try:
        return list(log.recover())
    finally:
        log.close()


def _frame_offsets(path: Path) -> list[int]:
    return [f.offset for f in scan_file(path.read_bytes(), FILE_MAGIC).frames]


def _flip(path: Path, at: int) -> None:
    data = bytearray(path.read_bytes())
    data[at] ^= 0x5A
    path.write_bytes(bytes(data))


# --- the rule ----------------------------------------------------------------------------------------


def test_an_incomplete_last_frame_with_nothing_after_it_is_a_torn_tail_and_is_cut(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    data_dir, path = _data_dir(tmp_path)
    last = _frame_offsets(path)[-1]
    size = path.stat().st_size
    path.write_bytes(path.read_bytes()[: size - 3])
    with caplog.at_level(logging.WARNING):
        assert _recover(data_dir) == ALL[: -len(FRAMES[-1])]
    assert path.stat().st_size == last, "cut back to the end of the last intact frame"
    assert f"cut a torn tail of {size - 3 - last} bytes at byte {last}" in caplog.text
    assert (path.parent / f"{path.name}.corrupt-{last}").read_bytes() != b"", "the cut bytes are kept aside"


def test_a_frame_header_cut_short_at_the_end_is_a_torn_tail(tmp_path: Path) -> None:
    data_dir, path = _data_dir(tmp_path)
    path.write_bytes(path.read_bytes() + encode_frame(FRAMES[0])[:5])
    assert _recover(data_dir) == ALL


def test_zeros_to_the_end_of_the_log_are_a_torn_tail(tmp_path: Path) -> None:
    # A file system may show blocks it had not yet written after a power loss as zeros.
    data_dir, path = _data_dir(tmp_path)
    path.write_bytes(path.read_bytes() + bytes(300))
    assert _recover(data_dir) == ALL


def test_a_log_header_cut_short_is_a_torn_tail(tmp_path: Path) -> None:
    data_dir = tmp_path / "data"
    (data_dir / "coordinator").mkdir(parents=True)
    (data_dir / "coordinator" / log_name(0)).write_bytes(FILE_MAGIC[:3])
    assert _recover(data_dir) == []
    assert (data_dir / "coordinator" / log_name(0)).read_bytes() == FILE_MAGIC


def test_damage_followed_by_an_intact_frame_stops_recovery_naming_file_offset_what_follows_and_commands(
    tmp_path: Path,
) -> None:
    data_dir, path = _data_dir(tmp_path)
    offsets = _frame_offsets(path)
    _flip(path, offsets[2] + FRAME_OVERHEAD + 3)
    before = path.read_bytes()
    with pytest.raises(LogCorruptError) as refused:
        _recover(data_dir)
    message = str(refused.value)
    assert str(path) in message
    assert (
        f"checksum mismatch in the frame at byte {offsets[2]} (bytes {offsets[2]} to {offsets[3]}" in message
    )
    follow = before[offsets[3] :]
    assert f"and 4 intact frames ({len(follow)} bytes) follow it" in message
    assert f"staticfleet coordinator check --data-dir {data_dir}" in message
    assert f"staticfleet coordinator repair --data-dir {data_dir}" in message
    assert path.read_bytes() == before, "a refused recovery changes nothing"
    assert not list(path.parent.glob("*.corrupt-*"))


def test_a_complete_last_frame_that_fails_its_checksum_is_damage_not_a_torn_tail(tmp_path: Path) -> None:
    # A crash cuts a write short; a frame that is all there was written in full (and perhaps answered).
    data_dir, path = _data_dir(tmp_path)
    _flip(path, path.stat().st_size - 2)
    with pytest.raises(LogCorruptError, match="no intact frame follows it, but it is not a write cut short"):
        _recover(data_dir)


@pytest.mark.parametrize("byte", [0, 1, 2, 3])
def test_a_last_frame_whose_length_field_was_damaged_is_damage_not_a_torn_tail(
    tmp_path: Path, byte: int
) -> None:
    data_dir, path = _data_dir(tmp_path)
    _flip(path, _frame_offsets(path)[-1] + byte)  # the frame now seems to run past the end, or stop short
    with pytest.raises(LogCorruptError):
        _recover(data_dir)


def test_a_damaged_file_header_with_frames_after_it_stops_recovery(tmp_path: Path) -> None:
    data_dir, path = _data_dir(tmp_path)
    _flip(path, 4)
    with pytest.raises(LogCorruptError, match=r"damaged file header \(bytes 0 to 8, 8 bytes\), and 7 intact"):
        _recover(data_dir)


def test_a_torn_tail_of_an_older_log_followed_only_by_an_empty_log_is_cut(tmp_path: Path) -> None:
    # A power loss right after a snapshot started a new log, before the old log's last write was synced.
    data_dir, path = _data_dir(tmp_path)
    path.write_bytes(path.read_bytes() + encode_frame(FRAMES[0])[:-4])
    (path.parent / log_name(1)).write_bytes(FILE_MAGIC)
    assert _recover(data_dir) == ALL


def test_a_torn_tail_of_an_older_log_followed_by_frames_in_a_newer_one_stops_recovery(tmp_path: Path) -> None:
    data_dir, path = _data_dir(tmp_path)
    path.write_bytes(path.read_bytes()[:-3])
    (path.parent / log_name(1)).write_bytes(FILE_MAGIC + encode_frame(FRAMES[0]))
    with pytest.raises(LogCorruptError, match=r"1 intact frame \(\d+ bytes\) follows it"):
        _recover(data_dir)


def test_a_log_missing_from_the_sequence_stops_recovery(tmp_path: Path) -> None:
    data_dir, path = _data_dir(tmp_path)
    (path.parent / log_name(2)).write_bytes(FILE_MAGIC + encode_frame(FRAMES[0]))
    with pytest.raises(LogCorruptError, match=f"{log_name(1)} is missing"):
        _recover(data_dir)


def _with_snapshot(tmp_path: Path, *, keep_older: bool) -> tuple[Path, Path]:
    """A data dir with snapshot 1 (holding FRAMES[:4]) and log 1 (FRAMES[4:]); with `keep_older`,
    log 0 is there too, as a crash between the snapshot's rename and the deletions leaves it."""
    data_dir = tmp_path / "data"
    directory = data_dir / "coordinator"
    log = DurableLog(directory, fsync=False)
    list(log.recover())
    for frame in FRAMES[:4]:
        log.append(frame)
    log.snapshot([r for f in FRAMES[:4] for r in f])
    for frame in FRAMES[4:]:
        log.append(frame)
    log.close()
    assert not (directory / log_name(0)).exists()
    if keep_older:
        (directory / log_name(0)).write_bytes(FILE_MAGIC + b"".join(encode_frame(f) for f in FRAMES[:4]))
    return data_dir, directory / snapshot_name(1)


def test_a_damaged_snapshot_is_passed_over_when_the_first_log_and_every_log_since_hold_its_state(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    data_dir, snapshot = _with_snapshot(tmp_path, keep_older=True)
    _flip(snapshot, len(SNAPSHOT_MAGIC) + FRAME_OVERHEAD + 2)
    with caplog.at_level(logging.WARNING):
        assert _recover(data_dir) == ALL
    assert f"{snapshot} is damaged" in caplog.text and "recovering from the first log" in caplog.text


def test_a_damaged_snapshot_is_passed_over_for_an_older_intact_snapshot_and_every_log_since(
    tmp_path: Path,
) -> None:
    data_dir, snapshot = _with_snapshot(tmp_path, keep_older=True)
    directory = snapshot.parent
    (directory / snapshot_name(0)).write_bytes(SNAPSHOT_MAGIC)  # an (empty) older snapshot, intact
    _flip(snapshot, len(SNAPSHOT_MAGIC) + 1)
    assert inspect(directory).snapshot is not None
    assert _recover(data_dir) == ALL


def test_a_damaged_snapshot_without_a_complete_older_base_stops_recovery(tmp_path: Path) -> None:
    data_dir, snapshot = _with_snapshot(tmp_path, keep_older=False)
    _flip(snapshot, len(SNAPSHOT_MAGIC) + FRAME_OVERHEAD + 2)
    with pytest.raises(LogCorruptError) as refused:
        _recover(data_dir)
    assert f"{snapshot}: checksum mismatch in the frame at byte {len(SNAPSHOT_MAGIC)}" in str(refused.value)


def test_a_frame_whose_checksum_holds_but_whose_record_does_not_decode_stops_recovery(tmp_path: Path) -> None:
    data_dir, path = _data_dir(tmp_path)
    path.write_bytes(path.read_bytes() + frame_of(1, b"\x63garbage"))
    with pytest.raises(LogCorruptError, match="passes its checksum but holds an undecodable record"):
        _recover(data_dir)
    assert inspect(path.parent, decode=True).damaged, "check and repair find it too"


def test_the_next_intact_frame_is_found_after_damage_of_any_length() -> None:
    frames = [encode_frame(f) for f in FRAMES]
    for garbage in (b"\x01", b"\x00\x00\x00\x09\x01", bytes(range(256)), b"\x01" * 40):
        data = frames[0] + garbage + frames[1] + frames[2]
        assert find_intact_frame(data, 1) == len(frames[0]) + len(garbage)


# --- check and repair ----------------------------------------------------------------------------


def test_check_reports_the_damage_and_exits_1_without_changing_anything(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data_dir, path = _data_dir(tmp_path)
    offsets = _frame_offsets(path)
    _flip(path, offsets[1] + FRAME_OVERHEAD + 1)
    before = path.read_bytes()
    assert cli.main(["coordinator", "check", "--data-dir", str(data_dir)]) == 1
    out = capsys.readouterr().out
    assert f"bytes {offsets[1]} to {offsets[2]}" in out and "5 intact frames" in out
    assert "result: DAMAGED" in out and f"repair --data-dir {data_dir}" in out
    assert path.read_bytes() == before


def test_check_of_an_intact_log_and_of_a_torn_tail_exits_0(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data_dir, path = _data_dir(tmp_path)
    assert cli.main(["coordinator", "check", "--data-dir", str(data_dir)]) == 0
    assert "result: intact" in capsys.readouterr().out
    path.write_bytes(path.read_bytes()[:-3])
    assert cli.main(["coordinator", "check", "--data-dir", str(data_dir)]) == 0
    assert "a torn tail: the coordinator cuts it when it starts" in capsys.readouterr().out


@pytest.mark.parametrize(
    ("argv", "error"),
    [
        (["check"], "the following arguments are required: --data-dir"),
        (["repair", "--data-dir"], "expected one argument"),
        (["check", "--data-dir", "/nonexistent/x"], "data directory /nonexistent/x does not exist"),
        (["repair", "--data-dir", "."], "holds no coordinator log"),
    ],
)
def test_bad_input_is_one_line_on_stderr_and_exit_status_2(
    argv: list[str],
    error: str,
    capsys: pytest.CaptureFixture[str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.chdir(tmp_path)
    with pytest.raises(SystemExit) as exited:
        cli.main(["coordinator", *argv])
    assert exited.value.code == 2
    err = capsys.readouterr().err
    assert error in err and err.count("\n") == 1, err


def test_check_and_repair_refuse_a_data_dir_a_running_coordinator_holds(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data_dir, _ = _data_dir(tmp_path)
    held = lock_data_dir(data_dir)
    try:
        for action in ("check", "repair"):
            assert cli.main(["coordinator", action, "--data-dir", str(data_dir)]) == 3
            assert "is in use by another coordinator" in capsys.readouterr().err
    finally:
        os.close(held)


def test_repair_keeps_every_intact_frame_byte_for_byte_drops_only_the_damage_and_says_what_it_held(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    data_dir, path = _data_dir(tmp_path)
    original = path.read_bytes()
    offsets = [*_frame_offsets(path), len(original)]
    _flip(path, offsets[2] + FRAME_OVERHEAD + 30)  # inside the record's fixed fields: it still reads
    damaged = path.read_bytes()
    assert cli.main(["coordinator", "repair", "--data-dir", str(data_dir)]) == 0
    out = capsys.readouterr().out
    assert f"dropped bytes {offsets[2]} to {offsets[3]} ({offsets[3] - offsets[2]} bytes)" in out
    assert 'they held group "g": 1 offset commit (t-2@' in out
    assert path.read_bytes() == original[: offsets[2]] + original[offsets[3] :]
    (aside,) = path.parent.glob("damaged-*")
    assert (aside / path.name).read_bytes() == damaged, "the original is kept as it was"
    (report_path,) = path.parent.glob("repair-*.json")
    report = json.loads(report_path.read_text())
    assert [(d["file"], d["start"], d["end"]) for d in report["dropped"]] == [
        (path.name, offsets[2], offsets[3])
    ]
    assert report["groups"] == ["g"]
    assert report["dropped"][0]["records"] == [
        {"type": "offsetCommit", "group": "g", "topic": "t", "partition": 2, "offset": 102, "metadata": ""}
    ], "enough to restore the commit by hand"
    with caplog.at_level(logging.WARNING):
        assert _recover(data_dir) == [r for i, f in enumerate(FRAMES) if i != 2 for r in f]
    assert f"repaired at {report['repairedAt']}" in caplog.text
    assert f"bytes {offsets[2]} to {offsets[3]}" in caplog.text


def test_repair_fills_a_missing_log_with_an_empty_one_and_says_so(tmp_path: Path) -> None:
    data_dir, path = _data_dir(tmp_path)
    (path.parent / log_name(2)).write_bytes(FILE_MAGIC + encode_frame(FRAMES[0]))
    result = repair(path.parent)
    assert result.filled == [log_name(1)] and "replaced the missing" in result.summary()
    assert _recover(data_dir) == ALL + FRAMES[0]


def test_repair_sets_aside_a_damaged_snapshot_that_older_files_make_unneeded(tmp_path: Path) -> None:
    data_dir, snapshot = _with_snapshot(tmp_path, keep_older=True)
    _flip(snapshot, len(SNAPSHOT_MAGIC) + 3)
    result = repair(snapshot.parent)
    assert result.set_aside == [snapshot.name] and not result.dropped
    assert not snapshot.exists()
    assert _recover(data_dir) == ALL


def test_repair_of_a_log_that_loads_changes_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data_dir, path = _data_dir(tmp_path)
    before = sorted(p.name for p in path.parent.iterdir())
    assert cli.main(["coordinator", "repair", "--data-dir", str(data_dir)]) == 0
    assert "nothing to repair" in capsys.readouterr().out
    assert sorted(p.name for p in path.parent.iterdir()) == before


def test_the_snapshot_interval_is_a_coordinator_flag_with_kafkas_default_and_must_be_positive(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    parse = cli.build_parser().parse_args
    assert parse(["coordinator", "--data-dir", "d"]).max_record_bytes_between_snapshots == 20 * 1024 * 1024
    args = parse(["coordinator", "--data-dir", "d", "--max-record-bytes-between-snapshots", "4096"])
    assert args.max_record_bytes_between_snapshots == 4096 and args.run is not None
    with pytest.raises(SystemExit) as refused:
        cli.main(["coordinator", "--data-dir", str(tmp_path), "--max-record-bytes-between-snapshots", "0"])
    assert refused.value.code == 2
    refusal = capsys.readouterr().err
    assert "--max-record-bytes-between-snapshots: expected a whole number of at least 1" in refusal
    assert cli.main(["coordinator"]) == 2
    assert "the following arguments are required: --data-dir" in capsys.readouterr().err


def test_the_coordinator_is_never_ready_when_the_load_stops_short_of_the_end_of_the_log(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Even if the load swallowed the error (as a runtime that settles every failure might)."""
    from collections.abc import Iterable, Iterator

    from staticfleet.broker.host import CoordinatorHost
    from staticfleet.coordinator import CoordinatorConfig

    data_dir, path = _data_dir(tmp_path)
    path.write_bytes(path.read_bytes() + frame_of(1, b"\x63garbage"))
    host = CoordinatorHost(data_dir, CoordinatorConfig(), fsync=False)
    load = host.coordinator.load

    def swallowing(records: Iterable[Record]) -> Any:
        def until_it_fails() -> Iterator[Record]:
            try:
                yield from records
            except LogCorruptError:
                return

        return load(until_it_fails())

    monkeypatch.setattr(host.coordinator, "load", swallowing)
    try:
        with pytest.raises(LogCorruptError, match="passes its checksum but holds an undecodable record"):
            host.recover()
        assert not host.ready
    finally:
        host.release()
