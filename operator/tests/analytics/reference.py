"""The analysis again, in plain Python over the same lines: simple enough to be obviously right.

Spark's numbers are checked against these. Events are ordered as the pipeline documents: by time,
then file modification time, file path and line number.
"""

from __future__ import annotations

import json
import os
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

OPERATOR_TYPES = ("fleet_operation_started", "fleet_operation_completed")
MEMBERSHIP_TYPES = (
    "member_joined",
    "static_member_replaced",
    "member_fenced",
    "member_left",
    "member_removed",
    "member_expired",
)
CAUSES = ("session-timeout", "join-timeout", "sync-timeout", "rebalance-timeout", "pending")


@dataclass
class Lines:
    events: list[dict[str, Any]]
    statuses: dict[str, int]


def status_of(line: str) -> tuple[str, dict[str, Any] | None]:
    try:
        event = json.loads(line)
    except json.JSONDecodeError:
        return "malformed", None
    if not isinstance(event, dict):
        return "malformed", None
    if not isinstance(event.get("ts"), int) and event.get("ts") is not None:
        return "malformed", None
    if any(event.get(k) in (None, "") for k in ("v", "ts", "type", "group")):
        return "missing-fields", None
    if event["v"] != 1:
        return "unsupported-version", None
    return "ok", event


def read(files: Iterable[Path]) -> Lines:
    keyed: list[tuple[tuple[Any, ...], dict[str, Any]]] = []
    statuses: dict[str, int] = defaultdict(int)
    for path in files:
        mtime = os.stat(path).st_mtime_ns // 1000  # Spark keeps microseconds
        with path.open(encoding="utf-8") as handle:
            for number, line in enumerate(handle):
                if not line.strip():
                    continue
                status, event = status_of(line)
                statuses[status] += 1
                if event is not None:
                    keyed.append(((event["ts"], mtime, str(path.resolve()), number), event))
    keyed.sort(key=lambda item: item[0])
    return Lines([event for _, event in keyed], dict(statuses))


def by_group(events: Iterable[dict[str, Any]]) -> dict[str, list[dict[str, Any]]]:
    grouped: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for event in events:
        grouped[event["group"]].append(event)
    return dict(grouped)


# --- rebalances ---------------------------------------------------------------------------------------


@dataclass
class Rebalance:
    group: str
    rebalance_no: int
    status: str
    reason: str | None
    from_state: str | None
    start_ts: int
    end_ts: int | None
    duration_ms: int | None
    start_events: int
    start_in_log: bool
    generation: int | None
    members_before: int | None
    members_after: int | None
    partitions_total: int | None
    partitions_moved: int | None
    operation_id: str | None = None

    def key(self) -> tuple[str, int]:
        return (self.group, self.rebalance_no)


def owners(members: list[dict[str, Any]]) -> dict[tuple[str, int], str] | None:
    """(topic, partition) -> instance id (or member id); None if any assignment is unknown."""
    result: dict[tuple[str, int], str] = {}
    for member in members:
        assignment = member.get("assignment")
        if assignment is None:
            return None
        owner = member.get("instance_id") or member["member_id"]
        for topic, partitions in assignment.items():
            for partition in partitions:
                result[(topic, partition)] = owner
    return result


def rebalances(events: list[dict[str, Any]]) -> list[Rebalance]:
    return [r for group, items in by_group(events).items() for r in group_rebalances(group, items)]


def group_rebalances(group: str, items: list[dict[str, Any]]) -> list[Rebalance]:
    out: list[Rebalance] = []
    episode: dict[str, Any] | None = None
    previous_count: int | None = None
    previous_owners: Any = "none yet"
    number = 0

    def close(status: str, end: dict[str, Any] | None) -> None:
        nonlocal number, previous_count, previous_owners, episode
        assert episode is not None
        number += 1
        ended = status in ("completed", "emptied")
        after = None
        moved = None
        total = None
        if status == "completed":
            assert end is not None
            after = len(end["members"])
            current = owners(end["members"])
            total = None if current is None else len(current)
            if isinstance(previous_owners, dict) and current is not None:
                moved = sum(
                    1 for tp, o in current.items() if tp in previous_owners and previous_owners[tp] != o
                )
            previous_owners = current
        elif status == "emptied":
            after = 0
        start_ts = episode["start"]
        if not episode["in_log"]:
            assert end is not None
            start_ts = end["ts"] - end["duration_ms"]
        duration = None
        if ended:
            assert end is not None
            duration = end["ts"] - episode["start"] if episode["in_log"] else end["duration_ms"]
        out.append(
            Rebalance(
                group=group,
                rebalance_no=number,
                status=status,
                reason=episode["reason"] if episode["in_log"] else (end or {}).get("reason"),
                from_state=episode["from_state"],
                start_ts=start_ts,
                end_ts=None if end is None else end["ts"],
                duration_ms=duration,
                start_events=episode["starts"],
                start_in_log=episode["in_log"],
                generation=end["generation"] if ended and end is not None else None,
                members_before=episode["before"],
                members_after=after,
                partitions_total=total,
                partitions_moved=moved,
            )
        )
        if ended:
            previous_count = after
        episode = None

    for event in items:
        kind = event["type"]
        if kind == "rebalance_started":
            if episode is None:
                before = previous_count
                if before is None and event.get("from_state") == "Empty":
                    before = 0
                episode = {
                    "start": event["ts"],
                    "reason": event.get("reason"),
                    "from_state": event.get("from_state"),
                    "starts": 1,
                    "in_log": True,
                    "before": before,
                }
            else:
                episode["starts"] += 1
        elif kind in ("rebalance_completed", "group_empty"):
            if episode is None:
                episode = {
                    "start": None,
                    "reason": None,
                    "from_state": None,
                    "starts": 0,
                    "in_log": False,
                }
                episode["before"] = previous_count
            close("completed" if kind == "rebalance_completed" else "emptied", event)
        elif kind == "group_loaded":
            if episode is not None:
                close("interrupted", None)
                out[-1].end_ts = event["ts"]
            previous_count = event.get("members")
    if episode is not None:
        close("open", None)
    return out


# --- membership, operations, groups ---------------------------------------------------------------------


def membership_counts(events: Iterable[dict[str, Any]]) -> dict[str, int]:
    counts = dict.fromkeys(
        [
            "joined",
            "left",
            "removed",
            "fenced",
            "expired",
            *[f"expired_{c.replace('-', '_')}" for c in CAUSES],
        ],
        0,
    )
    counts["restarts_absorbed"] = 0
    counts["restarts_rebalanced"] = 0
    names = {
        "member_joined": "joined",
        "member_left": "left",
        "member_removed": "removed",
        "member_fenced": "fenced",
        "member_expired": "expired",
    }
    for event in events:
        kind = event["type"]
        if kind in names:
            counts[names[kind]] += 1
        if kind == "member_expired" and event.get("cause") in CAUSES:
            counts[f"expired_{event['cause'].replace('-', '_')}"] += 1
        if kind == "static_member_replaced":
            counts["restarts_absorbed" if event.get("rebalance") is False else "restarts_rebalanced"] += 1
    return counts


@dataclass
class Operation:
    group: str
    operation_id: str
    operation: str
    mode: str | None
    status: str
    start_ts: int
    end_ts: int | None
    window_end: int
    rebalances: list[Rebalance] = field(default_factory=list)
    members: list[dict[str, Any]] = field(default_factory=list)


def operations(events: list[dict[str, Any]]) -> list[Operation]:
    out: list[Operation] = []
    for group, items in by_group(events).items():
        last_ts = max(e["ts"] for e in items)
        ops = [e for e in items if e["type"] in OPERATOR_TYPES]
        for index, event in enumerate(ops):
            if event["type"] != "fleet_operation_started":
                continue
            key = event.get("id") or event.get("operation")
            following = [e for e in ops[index + 1 :] if (e.get("id") or e.get("operation")) == key]
            done = following[0] if following and following[0]["type"] == "fleet_operation_completed" else None
            ordinal = 1 + sum(1 for e in ops[:index] if e["type"] == "fleet_operation_started")
            out.append(
                Operation(
                    group=group,
                    operation_id=event.get("id") or f"{group}#{ordinal}",
                    operation=event.get("operation") or "unknown",
                    mode=event.get("mode") or (done or {}).get("mode"),
                    status="completed" if done else "incomplete",
                    start_ts=event["ts"],
                    end_ts=done["ts"] if done else None,
                    window_end=done["ts"] if done else last_ts,
                )
            )
    return out


def operation_at(ops: list[Operation], group: str, ts: int) -> Operation | None:
    """The group's most recently started operation, if its window still covers ts."""
    started = [op for op in ops if op.group == group and op.start_ts <= ts]
    if not started:
        return None
    latest = max(started, key=lambda op: op.start_ts)
    return latest if ts <= latest.window_end else None


def attribute(events: list[dict[str, Any]], found: list[Rebalance], ops: list[Operation]) -> None:
    for rebalance in found:
        # A rebalance whose start precedes the log is placed at its end.
        at = rebalance.start_ts if rebalance.start_in_log else rebalance.end_ts
        assert at is not None
        op = operation_at(ops, rebalance.group, at)
        if op is not None:
            rebalance.operation_id = op.operation_id
            op.rebalances.append(rebalance)
    for event in events:
        if event["type"] in MEMBERSHIP_TYPES:
            op = operation_at(ops, event["group"], event["ts"])
            if op is not None:
                op.members.append(event)


@dataclass
class Analysis:
    lines: Lines
    rebalances: list[Rebalance]
    operations: list[Operation]

    def group_membership(self) -> dict[str, dict[str, int]]:
        return {g: membership_counts(items) for g, items in by_group(self.lines.events).items()}


def analyze(files: Iterable[Path]) -> Analysis:
    lines = read(files)
    found = rebalances(lines.events)
    ops = operations(lines.events)
    attribute(lines.events, found, ops)
    return Analysis(lines, found, ops)


def event_files(directory: Path) -> list[Path]:
    return sorted(p for p in directory.rglob("*") if p.is_file() and not p.name.startswith(("_", ".")))
