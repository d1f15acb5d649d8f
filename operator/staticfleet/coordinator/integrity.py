"""What recovery may load from a coordinator log directory, decided before anything is loaded.

Recovery reads the newest snapshot and then every log after it, in order. The rule for damage:

- A torn tail is cut automatically. It is the only damage a crash leaves: the last write cut short
  (an incomplete frame, or zeros where a file system had not yet written the blocks), with no intact
  frame after it anywhere in the logs. Its records were never acknowledged: an answer waits for the
  fsync that covers the whole frame.
- Anything else stops recovery before a single record is loaded: damage with intact frames after it,
  a frame that is all there but fails its checksum (written in full, so perhaps acknowledged, and
  damaged since), a damaged file header, a log missing from the sequence, and any damage in a snapshot
  (snapshots are complete before they are renamed into place). The error names the file, the byte
  offset, what follows, and the commands to run: `staticfleet coordinator check` and `repair`.
- A damaged snapshot is passed over only when an older intact snapshot (or the very first log) and
  every log since are still there: they hold everything the damaged one did.
"""

from __future__ import annotations

import re
import shlex
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Literal

from staticfleet.coordinator.logformat import (
    FILE_MAGIC,
    LOG_NAME,
    SNAPSHOT_MAGIC,
    SNAPSHOT_NAME,
    Damage,
    FileScan,
    Frame,
    log_name,
    scan_file,
)
from staticfleet.coordinator.records import RecordDecodeError, decode_records

COORDINATOR_LOG_DIR = "coordinator"
"""Where the coordinator log lives inside the coordinator's --data-dir."""


class LogCorruptError(RuntimeError):
    """Damage that recovery cannot safely cut off: the coordinator does not start."""


@dataclass(frozen=True, slots=True)
class LogFile:
    path: Path
    seq: int
    kind: Literal["snapshot", "log"]
    scan: FileScan

    @property
    def magic(self) -> bytes:
        return SNAPSHOT_MAGIC if self.kind == "snapshot" else FILE_MAGIC


@dataclass(frozen=True, slots=True)
class Problem:
    """A damaged stretch (or a missing file) that stops recovery."""

    path: Path
    damage: Damage | None
    """None: the file is missing."""
    frames_after: int
    bytes_after: int
    """Intact frames after it in this file and the files recovery reads after it."""

    def describe(self) -> str:
        if self.damage is None:
            return f"{self.path} is missing: recovery would go on from the log after it"
        d = self.damage
        text = f"{self.path}: {d.reason} (bytes {d.start} to {d.end}, {d.size} bytes)"
        if self.frames_after == 1:
            return f"{text}, and 1 intact frame ({self.bytes_after} bytes) follows it"
        if self.frames_after:
            return f"{text}, and {self.frames_after} intact frames ({self.bytes_after} bytes) follow it"
        if SNAPSHOT_NAME.match(self.path.name):
            return f"{text}; a snapshot is complete before it is renamed into place, so this is damage"
        return f"{text}; no intact frame follows it, but it is not a write cut short, so this is damage"


@dataclass(frozen=True)
class Inspection:
    directory: Path
    snapshot: LogFile | None
    """The snapshot recovery starts from (None: the first log)."""
    logs: tuple[LogFile, ...]
    """The logs recovery reads after it, oldest first."""
    torn: tuple[tuple[LogFile, Damage], ...]
    """Torn tails, which recovery cuts."""
    problems: tuple[Problem, ...]
    """Damage that stops recovery, in the order recovery meets it."""
    passed_over: tuple[LogFile, ...] = field(default=())
    """Damaged snapshots newer than the one recovery starts from, whose state that one and the logs
    after it rebuild."""

    @property
    def base_seq(self) -> int:
        return self.snapshot.seq if self.snapshot is not None else 0

    @property
    def files(self) -> tuple[LogFile, ...]:
        return ((self.snapshot,) if self.snapshot is not None else ()) + self.logs

    @property
    def damaged(self) -> bool:
        return bool(self.problems)


def numbered(directory: Path, pattern: re.Pattern[str]) -> list[tuple[int, Path]]:
    found = []
    for path in directory.iterdir():
        match = pattern.match(path.name)
        if match:
            found.append((int(match.group(1)), path))
    return sorted(found)


def inspect(directory: Path, *, decode: bool = False) -> Inspection:
    """Scan every file recovery would read and apply the rule above. Reads, never writes.

    With `decode`, every record of every intact frame is decoded too, and a frame whose checksum holds
    but whose records do not decode counts as damage (recovery finds those as it loads)."""
    snapshots = numbered(directory, SNAPSHOT_NAME)
    log_seqs = [seq for seq, _ in numbered(directory, LOG_NAME)]
    snapshot: LogFile | None = None
    passed_over: list[LogFile] = []
    if snapshots:
        snapshot = _read(snapshots[-1], "snapshot", decode)
        if snapshot.scan.damages:
            older = _older_base(snapshots[:-1], log_seqs, snapshot.seq, decode)
            if older is not None:
                passed_over = [snapshot, *older[1]]
                snapshot = older[0]
    base_seq = snapshot.seq if snapshot is not None else 0
    logs: list[LogFile] = []
    missing: list[int] = []
    expected = base_seq
    for seq, path in numbered(directory, LOG_NAME):
        if seq < base_seq:
            continue  # replaced by the snapshot; left by a crash before it could delete them
        missing += range(expected, seq)
        logs.append(_read((seq, path), "log", decode))
        expected = seq + 1
    return _judge(directory, snapshot, logs, missing, passed_over)


def _read(entry: tuple[int, Path], kind: Literal["snapshot", "log"], decode: bool) -> LogFile:
    seq, path = entry
    data = path.read_bytes()
    scan = scan_file(data, SNAPSHOT_MAGIC if kind == "snapshot" else FILE_MAGIC)
    if decode:
        scan = _with_undecodable_frames_as_damage(data, scan)
    return LogFile(path, seq, kind, scan)


def _with_undecodable_frames_as_damage(data: bytes, scan: FileScan) -> FileScan:
    frames: list[Frame] = []
    damages = list(scan.damages)
    for frame in scan.frames:
        try:
            for _ in decode_records(memoryview(data)[frame.records_at : frame.end], frame.record_count):
                pass
        except RecordDecodeError as exc:
            reason = (
                f"the frame at byte {frame.offset} passes its checksum but has an undecodable record ({exc})"
            )
            damages.append(Damage(frame.offset, frame.end, reason, torn=False))
        else:
            frames.append(frame)
    if len(frames) == len(scan.frames):
        return scan
    return replace(scan, frames=tuple(frames), damages=tuple(sorted(damages, key=lambda d: d.start)))


def _older_base(
    snapshots: list[tuple[int, Path]], log_seqs: list[int], damaged_seq: int, decode: bool
) -> tuple[LogFile | None, list[LogFile]] | None:
    """An older starting point whose logs reach past the damaged snapshot without a gap: an intact
    older snapshot, or nothing at all if the very first log is still there. Also the damaged older
    snapshots passed over on the way."""
    passed: list[LogFile] = []
    for entry in reversed(snapshots):
        if _complete_from(entry[0], log_seqs, damaged_seq):
            candidate = _read(entry, "snapshot", decode)
            if not candidate.scan.damages:
                return candidate, passed
            passed.append(candidate)
    if _complete_from(0, log_seqs, damaged_seq):
        return None, passed
    return None


def _complete_from(seq: int, log_seqs: list[int], damaged_seq: int) -> bool:
    chain = [s for s in log_seqs if s >= seq]
    return bool(chain) and chain == list(range(seq, seq + len(chain))) and chain[-1] >= damaged_seq


def _judge(
    directory: Path,
    snapshot: LogFile | None,
    logs: list[LogFile],
    missing: list[int],
    passed_over: list[LogFile],
) -> Inspection:
    files = ([snapshot] if snapshot is not None else []) + logs
    # Intact frames (and their bytes) in each file and every later one, to say what follows damage.
    later_frames = [0] * (len(files) + 1)
    later_bytes = [0] * (len(files) + 1)
    for i in range(len(files) - 1, -1, -1):
        later_frames[i] = later_frames[i + 1] + len(files[i].scan.frames)
        later_bytes[i] = later_bytes[i + 1] + sum(f.size for f in files[i].scan.frames)
    torn: list[tuple[LogFile, Damage]] = []
    problems: list[tuple[tuple[int, int], Problem]] = []  # keyed by where recovery meets them
    for i, file in enumerate(files):
        for damage in file.scan.damages:
            after = file.scan.frames_after(damage.end)
            frames_after = len(after) + later_frames[i + 1]
            bytes_after = sum(f.size for f in after) + later_bytes[i + 1]
            if file.kind == "log" and damage.torn and frames_after == 0:
                torn.append((file, damage))
            else:
                problems.append(((i, damage.start), Problem(file.path, damage, frames_after, bytes_after)))
    for seq in missing:
        i = next(i for i, f in enumerate(files) if f.kind == "log" and f.seq > seq)
        problem = Problem(directory / log_name(seq), None, later_frames[i], later_bytes[i])
        problems.append(((i, -1), problem))
    ordered = tuple(p for _, p in sorted(problems, key=lambda kp: kp[0]))
    return Inspection(directory, snapshot, tuple(logs), tuple(torn), ordered, tuple(passed_over))


def commands_hint(data_dir: str | Path) -> str:
    quoted = shlex.quote(str(data_dir))
    return (
        f"see what the damaged bytes held with `staticfleet coordinator check --data-dir {quoted}`, then "
        f"keep every intact frame with `staticfleet coordinator repair --data-dir {quoted}` (it sets the "
        "original files aside, drops only the damaged bytes and reports what they held)"
    )


def refusal_message(inspection: Inspection, data_dir: str | Path) -> str:
    """The one error a coordinator that will not start logs."""
    first, *others = inspection.problems
    more = f"; and {len(others)} more damaged place{'s' if len(others) > 1 else ''}" if others else ""
    return (
        f"the coordinator log is damaged, so nothing was loaded and the coordinator does not start: "
        f"{first.describe()}{more}. A crash leaves no such damage, only an unfinished last write, which "
        f"recovery cuts by itself. To go on, {commands_hint(data_dir)}"
    )
