"""`staticfleet coordinator check` and `staticfleet coordinator repair`: what a data directory's
coordinator log holds and where it is damaged, and the explicit repair that keeps every intact frame."""

from __future__ import annotations

import argparse
import os
import shlex
import sys
from collections.abc import Callable
from pathlib import Path
from typing import NoReturn

from staticfleet.commands.arguments import Parser
from staticfleet.coordinator.integrity import (
    COORDINATOR_LOG_DIR,
    Inspection,
    LogCorruptError,
    Problem,
    inspect,
)
from staticfleet.coordinator.logformat import Damage
from staticfleet.coordinator.repair import describe_records, read_damaged, repair, repair_notices

EXIT_DAMAGED = 1
EXIT_USAGE = 2
EXIT_LOCKED = 3


def register(actions: argparse._SubParsersAction[Parser]) -> None:
    check = actions.add_parser(
        "check",
        help="report where a data directory's coordinator log is damaged (changes nothing)",
        description="Scan every file recovery would read and say what a start would do: load everything, "
        "cut a torn tail, or refuse. Exit status 0 if the coordinator would start without losing an "
        "acknowledged record, 1 if it would refuse (run repair), 2 for bad input, 3 if a running "
        "coordinator holds the data directory.",
    )
    check.add_argument("--data-dir", type=Path, required=True, help="the coordinator's --data-dir")
    check.set_defaults(run=run_check)
    fix = actions.add_parser(
        "repair",
        help="keep every intact frame of a damaged coordinator log and drop only the damaged bytes",
        description="Rewrite each damaged file as its intact frames, byte for byte; keep the originals in "
        "<data-dir>/coordinator/damaged-<time>/ and write what was dropped to "
        "<data-dir>/coordinator/repair-<time>.json, which the coordinator logs at every start. Prints "
        "each dropped stretch (file, bytes, and the records it held as far as they can be read). "
        "Stop the coordinator first.",
    )
    fix.add_argument("--data-dir", type=Path, required=True, help="the coordinator's --data-dir")
    fix.set_defaults(run=run_repair)


def _log_dir(parser_prog: str, data_dir: Path) -> Path:
    if not data_dir.is_dir():
        _usage(parser_prog, f"data directory {data_dir} does not exist")
    log_dir = data_dir / COORDINATOR_LOG_DIR
    if not log_dir.is_dir():
        _usage(parser_prog, f"{data_dir} holds no coordinator log ({log_dir} does not exist)")
    return log_dir


def _usage(prog: str, message: str) -> NoReturn:
    sys.stderr.write(f"{prog}: error: {message}\n")
    raise SystemExit(EXIT_USAGE)


def _holding_lock(action: str, data_dir: Path, work: Callable[[Path], int]) -> int:
    """Run `work` on the coordinator log of `data_dir` while holding the data directory's lock, as the
    coordinator does: a running coordinator makes this exit with status 3, having read nothing."""
    from staticfleet.coordinator.log import DataDirLockedError, lock_data_dir

    log_dir = _log_dir(f"staticfleet coordinator {action}", data_dir)
    try:
        lock = lock_data_dir(data_dir)
    except DataDirLockedError as exc:
        sys.stderr.write(f"{exc}\n")
        return EXIT_LOCKED
    try:
        return work(log_dir)
    finally:
        os.close(lock)


def run_check(args: argparse.Namespace) -> int:
    def check(log_dir: Path) -> int:
        inspection = inspect(log_dir, decode=True)
        for line in check_report(inspection, args.data_dir):
            print(line)
        return EXIT_DAMAGED if inspection.damaged else 0

    return _holding_lock("check", args.data_dir, check)


def check_report(inspection: Inspection, data_dir: Path) -> list[str]:
    lines = [f"coordinator log {inspection.directory}"]
    lines += [f"  earlier repair: {notice}" for notice in repair_notices(inspection.directory)]
    for passed in inspection.passed_over:
        lines.append(
            f"  {passed.path.name}: damaged ({passed.scan.damages[0].reason}); passed over, since "
            f"{inspection.snapshot.path.name if inspection.snapshot else 'the first log'} and the logs "
            "after it hold its state"
        )
    problems = {id(p.damage): p for p in inspection.problems if p.damage is not None}
    for missing in (p for p in inspection.problems if p.damage is None):
        lines.append(f"  {missing.path.name}: MISSING; {missing.frames_after} intact frames follow it")
    for file in inspection.files:
        scan = file.scan
        state = "intact"
        if scan.damages:
            state = f"{len(scan.damages)} damaged place{'s' if len(scan.damages) > 1 else ''}"
        frames = f"{len(scan.frames)} intact frame{'s' if len(scan.frames) != 1 else ''}"
        lines.append(f"  {file.path.name}: {scan.size} bytes, {frames}, {state}")
        data = file.path.read_bytes() if scan.damages else b""
        for damage in scan.damages:
            lines.append(f"    {_damage_line(damage, problems.get(id(damage)))}")
            records, all_read = read_damaged(data, damage, len(file.magic))
            held = describe_records(records)
            if held or not all_read:
                more = " (and more that cannot be read)" if not all_read else ""
                lines.append(
                    f"      held, as far as it can be read: {'; '.join(held) or 'nothing readable'}{more}"
                )
    quoted = shlex.quote(str(data_dir))
    if inspection.damaged:
        dropped = sum(p.damage.size for p in inspection.problems if p.damage is not None)
        lines.append(
            f"result: DAMAGED: the coordinator refuses to start on this log. Run `staticfleet coordinator "
            f"repair --data-dir {quoted}` to keep every intact frame and drop the {dropped} damaged bytes."
        )
    elif inspection.torn:
        lines.append(
            "result: intact but for a torn tail, the unfinished last write of a crash (never acknowledged), "
            "which the coordinator cuts when it starts"
        )
    else:
        lines.append("result: intact")
    return lines


def _damage_line(damage: Damage, problem: Problem | None) -> str:
    where = f"bytes {damage.start} to {damage.end} ({damage.size} bytes): {damage.reason}"
    if problem is None:
        return f"{where}; a torn tail: the coordinator cuts it when it starts"
    frames = f"{problem.frames_after} intact frame{'s' if problem.frames_after != 1 else ''}"
    verb = "follows" if problem.frames_after == 1 else "follow"
    return f"{where}; {frames} ({problem.bytes_after} bytes) {verb} it"


def run_repair(args: argparse.Namespace) -> int:
    return _holding_lock("repair", args.data_dir, _repair)


def _repair(log_dir: Path) -> int:
    try:
        result = repair(log_dir)
    except (OSError, LogCorruptError) as exc:
        sys.stderr.write(f"staticfleet coordinator repair: {exc}\n")
        return EXIT_DAMAGED
    if not result.changed:
        print(
            f"nothing to repair: the coordinator log in {log_dir} loads as it is "
            f"({result.kept_frames} intact frames)"
        )
        return 0
    print(f"repaired the coordinator log in {log_dir}:")
    for dropped in result.dropped:
        print(f"  {dropped.describe()}")
    for name in result.filled:
        print(f"  {name} was missing: replaced by an empty log; whatever it held is lost")
    for name in result.set_aside:
        print(f"  {name} is damaged and not needed (older files hold its state): set aside")
    print(f"  kept {result.kept_frames} intact frames ({result.kept_bytes} bytes)")
    print(f"  the original files are in {result.aside_dir}; the report is {result.report}")
    print(
        "the coordinator starts on this log now; it logs this repair at every start while the report is there"
    )
    return 0
