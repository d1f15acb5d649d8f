"""The explicit repair of a damaged coordinator log (`staticfleet coordinator repair`), and what the
damaged bytes held as far as they can be read.

A repair keeps every intact frame, byte for byte, and drops only the damaged bytes: each damaged file is
rewritten as its header and its intact frames, a log missing from the sequence is replaced by an empty
one, a damaged snapshot that recovery no longer needs is set aside. The originals are kept in
`damaged-<time>/` beside the log (hard links: nothing is copied), and a `repair-<time>.json` report
says what was dropped; every start of the coordinator logs it until someone removes it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import time
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from staticfleet.coordinator.integrity import Inspection, LogCorruptError, inspect
from staticfleet.coordinator.logformat import (
    FILE_MAGIC,
    FRAME_HEAD,
    FRAME_OVERHEAD,
    MIN_RECORD_BYTES,
    PAYLOAD_HEAD,
    Damage,
)
from staticfleet.coordinator.records import (
    GroupConfigRecord,
    GroupMetadataRecord,
    GroupTombstone,
    OffsetCommitRecord,
    OffsetTombstone,
    Record,
    RecordDecodeError,
    SecurityRecord,
    decode_records,
)
from staticfleet.fsutil import fsync_directory

REPORT_NAME = re.compile(r"^repair-[0-9TZ-]+\.json$")
_LISTED_OFFSETS = 5


def read_damaged(data: bytes, damage: Damage, header_size: int) -> tuple[list[Record], bool]:
    """The records in a damaged stretch, as far as they can be read without their checksum, and
    whether that is every record the frame there declares. They may be wrong: the checksum failed."""
    start = max(damage.start, header_size)
    if start >= damage.end:
        return [], True  # only the file header: no records
    if damage.end - start < FRAME_OVERHEAD:
        return [], False
    length = FRAME_HEAD.unpack_from(data, start)[0]
    payload_end = damage.end
    if PAYLOAD_HEAD.size <= length and start + FRAME_HEAD.size + length <= damage.end:
        payload_end = start + FRAME_HEAD.size + length
    count = PAYLOAD_HEAD.unpack_from(data, start + FRAME_HEAD.size)[1]
    records_at = start + FRAME_OVERHEAD
    readable = min(count, (payload_end - records_at) // MIN_RECORD_BYTES)
    records: list[Record] = []
    try:
        for record in decode_records(memoryview(data)[records_at:payload_end], readable):
            records.append(record)
    except RecordDecodeError:
        return records, False
    return records, len(records) == count


def describe_records(records: Iterable[Record]) -> list[str]:
    """One line per group: what kind of records, and which offsets."""
    kinds: dict[str, dict[str, int]] = defaultdict(lambda: defaultdict(int))
    offsets: dict[str, list[str]] = defaultdict(list)
    security = 0
    for record in records:
        if isinstance(record, SecurityRecord):
            security += 1
            continue
        group = kinds[record.group_id]
        if isinstance(record, OffsetCommitRecord):
            group["offset commit"] += 1
            offsets[record.group_id].append(f"{record.topic}-{record.partition}@{record.offset}")
        elif isinstance(record, GroupMetadataRecord):
            group[f"group record (generation {record.generation}, {len(record.members)} members)"] += 1
        elif isinstance(record, GroupTombstone):
            group["group deletion"] += 1
        elif isinstance(record, OffsetTombstone):
            group["offset deletion"] += 1
        elif isinstance(record, GroupConfigRecord):
            group["group config"] += 1
    lines = []
    for group_id, counts in kinds.items():
        parts = []
        for kind, n in counts.items():
            text = f"{n} {kind}{'s' if n > 1 and kind[-1] != ')' else ''}"
            if kind == "offset commit":
                listed = offsets[group_id]
                shown = ", ".join(listed[:_LISTED_OFFSETS])
                rest = len(listed) - _LISTED_OFFSETS
                text += f" ({shown}{f' and {rest} more' if rest > 0 else ''})"
            parts.append(text)
        lines.append(f"group {json.dumps(group_id)}: {', '.join(parts)}")
    if security:
        lines.append(f"{security} ACL or SCRAM credential change{'s' if security > 1 else ''}")
    return lines


def record_json(record: Record) -> dict[str, Any]:
    """A dropped record in the report, with what it takes to restore it by hand (an offset commit's
    group, topic, partition and offset, say)."""
    if isinstance(record, OffsetCommitRecord):
        return {
            "type": "offsetCommit",
            "group": record.group_id,
            "topic": record.topic,
            "partition": record.partition,
            "offset": record.offset,
            "metadata": record.metadata,
        }
    if isinstance(record, GroupMetadataRecord):
        return {
            "type": "group",
            "group": record.group_id,
            "generation": record.generation,
            "instanceIds": [m.group_instance_id for m in record.members if m.group_instance_id],
        }
    if isinstance(record, GroupTombstone):
        return {"type": "groupDeletion", "group": record.group_id}
    if isinstance(record, OffsetTombstone):
        return {
            "type": "offsetDeletion",
            "group": record.group_id,
            "topic": record.topic,
            "partition": record.partition,
        }
    if isinstance(record, GroupConfigRecord):
        return {"type": "groupConfig", "group": record.group_id, "configs": dict(record.configs)}
    return {"type": "security"}


@dataclass(frozen=True, slots=True)
class Dropped:
    file: str
    start: int
    end: int
    reason: str
    torn: bool
    records: tuple[Record, ...]
    """What the dropped bytes held, as far as they could be read."""
    all_read: bool

    @property
    def size(self) -> int:
        return self.end - self.start

    def describe(self) -> str:
        kind = " (a torn tail a crash left: never acknowledged)" if self.torn else ""
        held = "; ".join(describe_records(self.records)) or (
            "no record" if self.all_read else "no record that could be read"
        )
        more = ", and more that could not be read" if self.records and not self.all_read else ""
        return (
            f"{self.file}: dropped bytes {self.start} to {self.end} ({self.size} bytes){kind}: "
            f"{self.reason}; they held {held}{more}"
        )


@dataclass
class RepairResult:
    dropped: list[Dropped] = field(default_factory=list)
    filled: list[str] = field(default_factory=list)
    """Logs missing from the sequence, replaced by empty ones: whatever they held is lost, unknown."""
    set_aside: list[str] = field(default_factory=list)
    """Damaged snapshots recovery no longer reads (an older snapshot and the logs since hold their state)."""
    repaired_at: str = ""
    aside_dir: Path | None = None
    report: Path | None = None
    kept_frames: int = 0
    kept_bytes: int = 0

    @property
    def changed(self) -> bool:
        return bool(self.dropped or self.filled or self.set_aside)

    def groups(self) -> list[str]:
        found = {r.group_id for d in self.dropped for r in d.records if not isinstance(r, SecurityRecord)}
        return sorted(found)

    def summary(self) -> str:
        parts = []
        if self.dropped:
            places = ", ".join(f"{d.file} bytes {d.start} to {d.end}" for d in self.dropped)
            parts.append(f"dropped {sum(d.size for d in self.dropped)} damaged bytes ({places})")
            held = describe_records(r for d in self.dropped for r in d.records)
            unread = any(not d.all_read for d in self.dropped)
            if held or unread:
                parts[-1] += (
                    ", which held "
                    + ("; ".join(held) or "no record that could be read")
                    + (", and more that could not be read" if unread else "")
                )
        if self.filled:
            missing = ", ".join(self.filled)
            parts.append(f"replaced the missing {missing} with empty logs (their records are lost)")
        if self.set_aside:
            damaged = ", ".join(self.set_aside)
            parts.append(f"set aside the damaged {damaged} (nothing lost: older files hold its state)")
        return "; ".join(parts) if parts else "nothing to repair"


def repair(directory: Path, *, now: float | None = None) -> RepairResult:
    """Keep every intact frame and drop only the damaged bytes; raises LogCorruptError if the result
    would still not load (it always does unless the files change meanwhile). Hold the data directory's
    lock while calling this."""
    inspection = inspect(directory, decode=True)
    result = RepairResult()
    rewrites: list[tuple[Path, bytes]] = []
    for file in inspection.files:
        if not file.scan.damages:
            continue
        data = file.path.read_bytes()
        kept = [data[f.offset : f.end] for f in file.scan.frames]
        rewrites.append((file.path, file.magic + b"".join(kept)))
        for damage in file.scan.damages:
            records, all_read = read_damaged(data, damage, len(file.magic))
            torn = any(d is damage for _, d in inspection.torn)
            dropped = Dropped(
                file.path.name, damage.start, damage.end, damage.reason, torn, tuple(records), all_read
            )
            result.dropped.append(dropped)
    for problem in inspection.problems:
        if problem.damage is None:
            result.filled.append(problem.path.name)
    result.set_aside = [f.path.name for f in inspection.passed_over]
    if not result.changed:
        _count_kept(result, inspection)
        return result
    when = time.gmtime(time.time() if now is None else now)
    stamp = time.strftime("%Y%m%dT%H%M%SZ", when)
    result.repaired_at = time.strftime("%Y-%m-%dT%H:%M:%SZ", when)
    aside = _unused(directory, f"damaged-{stamp}", "")
    result.aside_dir = aside
    result.report = _unused(directory, f"repair-{stamp}", ".json")
    # The report first: a repair interrupted after it changed a file is never a silent one.
    _write_durably(result.report, json.dumps(_report(result), indent=2).encode() + b"\n")
    aside.mkdir()
    for path, content in rewrites:
        _keep_original(path, aside / path.name)
        _write_durably(path, content)
    for name in result.filled:
        _write_durably(directory / name, FILE_MAGIC)
    for name in result.set_aside:
        os.replace(directory / name, aside / name)
    fsync_directory(aside)
    fsync_directory(directory)
    after = inspect(directory, decode=True)
    if after.damaged:
        raise LogCorruptError(f"the repaired log still does not load: {after.problems[0].describe()}")
    _count_kept(result, after)
    return result


def _count_kept(result: RepairResult, inspection: Inspection) -> None:
    result.kept_frames = sum(len(f.scan.frames) for f in inspection.files)
    result.kept_bytes = sum(fr.size for f in inspection.files for fr in f.scan.frames)


def _unused(directory: Path, stem: str, suffix: str) -> Path:
    path = directory / f"{stem}{suffix}"
    n = 1
    while path.exists():
        path = directory / f"{stem}-{n}{suffix}"
        n += 1
    return path


def _keep_original(path: Path, kept: Path) -> None:
    try:
        os.link(path, kept)  # the original inode stays as it is; the repaired file is a new one
    except OSError:
        shutil.copy2(path, kept)  # a file system without hard links
        with open(kept, "rb") as handle:
            os.fsync(handle.fileno())


def _write_durably(path: Path, content: bytes) -> None:
    """Replace `path` with `content` at once: written beside it, fsynced, renamed over it."""
    tmp = path.with_name(path.name + ".repairing")
    with open(tmp, "wb") as handle:
        handle.write(content)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(tmp, path)


def _report(result: RepairResult) -> dict[str, Any]:
    assert result.aside_dir is not None and result.report is not None
    return {
        "repairedAt": result.repaired_at,
        "originals": result.aside_dir.name,
        "summary": result.summary(),
        "groups": result.groups(),
        "dropped": [
            {
                "file": d.file,
                "start": d.start,
                "end": d.end,
                "bytes": d.size,
                "reason": d.reason,
                "tornTail": d.torn,
                "held": describe_records(d.records),
                "records": [record_json(r) for r in d.records],
                "allRecordsRead": d.all_read,
            }
            for d in result.dropped
        ],
        "filled": result.filled,
        "setAside": result.set_aside,
    }


def repair_notices(directory: Path) -> list[str]:
    """One line per repair report in the log directory, for the coordinator to log at every start."""
    notices = []
    for path in sorted(directory.glob("repair-*.json")):
        if not REPORT_NAME.match(path.name):
            continue
        try:
            report = json.loads(path.read_text())
            notices.append(
                f"this coordinator log was repaired at {report['repairedAt']} by `staticfleet coordinator "
                f"repair`: {report['summary']}; the original files are in {directory / report['originals']} "
                f"(remove {path} to stop this warning)"
            )
        except (OSError, ValueError, KeyError, TypeError) as exc:
            notices.append(f"{path} is the report of a repair of this log but cannot be read: {exc}")
    return notices
