"""Membership events: what happened to which member of which group, as JSON lines.

The coordinator hands each event (a plain dict) to an EventSink; `EventLogWriter` appends them to
`events.jsonl` and rotates the file by size. The schema is documented in docs/events.md and is the
input of the analytics pipeline.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

SCHEMA_VERSION = 1

# Event types
MEMBER_JOINED = "member_joined"
STATIC_MEMBER_REPLACED = "static_member_replaced"
MEMBER_FENCED = "member_fenced"
MEMBER_LEFT = "member_left"
MEMBER_REMOVED = "member_removed"
MEMBER_EXPIRED = "member_expired"
REBALANCE_STARTED = "rebalance_started"
JOIN_COMPLETED = "join_completed"
REBALANCE_COMPLETED = "rebalance_completed"
GROUP_EMPTY = "group_empty"
GROUP_DELETED = "group_deleted"
GROUP_LOADED = "group_loaded"
GROUP_CONFIG_CHANGED = "group_config_changed"

# Rebalance reasons (machine-readable; a free-text `detail` travels alongside)
REASON_MEMBER_JOINED = "member-joined"
REASON_METADATA_CHANGED = "metadata-changed"
REASON_LEADER_REJOINED = "leader-rejoined"
REASON_STATIC_PROTOCOL_CHANGED = "static-member-protocol-changed"
REASON_STATIC_REPLACED_DURING_SYNC = "static-member-replaced-during-sync"
REASON_MEMBER_LEFT = "member-left"
REASON_MEMBER_REMOVED = "member-removed"
REASON_SESSION_TIMEOUT = "session-timeout"
REASON_SYNC_TIMEOUT = "sync-timeout"
REASON_ASSIGNMENT_NOT_STORED = "assignment-not-stored"
REASON_OVER_CAPACITY = "over-capacity"
REASON_PARTITIONS_CHANGED = "partitions-changed"


class EventSink(Protocol):
    def emit(self, event: Mapping[str, Any]) -> None: ...


class NullSink:
    def emit(self, event: Mapping[str, Any]) -> None:
        return None


class ListSink:
    """Keeps events in memory (tests, and the source of the HTTP API's recent history)."""

    def __init__(self) -> None:
        self.events: list[dict[str, Any]] = []

    def emit(self, event: Mapping[str, Any]) -> None:
        self.events.append(dict(event))

    def of_type(self, kind: str) -> list[dict[str, Any]]:
        return [e for e in self.events if e["type"] == kind]


class FanOutSink:
    def __init__(self, *sinks: EventSink) -> None:
        self.sinks = list(sinks)

    def emit(self, event: Mapping[str, Any]) -> None:
        for sink in self.sinks:
            sink.emit(event)


class EventLogWriter:
    """Appends events as JSON lines to `<dir>/events.jsonl`, rotating to `events-<n>.jsonl` by size.

    Lines are written with a single os.write each, so a reader never sees half a line from a live
    writer, and a crash leaves at most the last line incomplete.
    """

    def __init__(self, directory: str | os.PathLike[str], max_bytes: int = 64 * 1024 * 1024, keep: int = 20):
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.max_bytes = max_bytes
        self.keep = keep
        self.path = self.directory / "events.jsonl"
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._size = os.fstat(self._fd).st_size

    def emit(self, event: Mapping[str, Any]) -> None:
        line = (json.dumps(event, separators=(",", ":"), sort_keys=False) + "\n").encode("utf-8")
        if self._size and self._size + len(line) > self.max_bytes:
            self._rotate()
        os.write(self._fd, line)
        self._size += len(line)

    def rotated_files(self) -> list[Path]:
        return sorted(self.directory.glob("events-*.jsonl"), key=lambda p: int(p.stem.split("-")[1]))

    def _rotate(self) -> None:
        os.close(self._fd)
        existing = self.rotated_files()
        next_index = int(existing[-1].stem.split("-")[1]) + 1 if existing else 1
        os.replace(self.path, self.directory / f"events-{next_index:06d}.jsonl")
        for old in existing[: max(0, len(existing) + 1 - self.keep)]:
            old.unlink()
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._size = 0

    def close(self) -> None:
        os.close(self._fd)
