"""Membership events: what happened to which member of which group, as JSON lines.

The coordinator hands each event (a plain dict) to an EventSink; `EventLogWriter` appends them to
`events.jsonl` and rotates the file by size. The schema is documented in docs/events.md and is the
input of the analytics pipeline.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any, Protocol

log = logging.getLogger(__name__)

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
    """Appends events as JSON lines to `<dir>/events.jsonl`, rotating to `events-<n>.jsonl` by size and
    keeping `keep` rotated files, so the event log never holds more than about (keep + 1) * max_bytes.

    Lines are written with a single os.write each, so a reader never sees half a line from a live
    writer, and a crash leaves at most the last line incomplete. The event log is a record of what
    happened, not a part of it: a line the disk refuses is dropped and counted (`dropped`), never
    raised into the coordinator, and a torn line is cut off so the file stays line-aligned.
    """

    def __init__(
        self, directory: str | os.PathLike[str], max_bytes: int = 32 * 1024 * 1024, keep: int = 4
    ) -> None:
        self.directory = Path(directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.max_bytes = max_bytes
        self.keep = keep
        self.path = self.directory / "events.jsonl"
        self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        self._size = os.fstat(self._fd).st_size
        self.dropped = 0
        self._warned_at = -1.0

    def emit(self, event: Mapping[str, Any]) -> None:
        line = (json.dumps(event, separators=(",", ":"), sort_keys=False) + "\n").encode("utf-8")
        try:
            if self._size and self._size + len(line) > self.max_bytes:
                self._rotate()
            written = os.write(self._fd, line)
            if written != len(line):
                os.ftruncate(self._fd, self._size)
                raise OSError(f"short write: {written} of {len(line)} bytes")
        except OSError as exc:
            self._drop(exc)
            return
        self._size += len(line)

    def _drop(self, exc: OSError) -> None:
        self.dropped += 1
        now = time.monotonic()
        if self._warned_at < 0 or now - self._warned_at > 60:
            self._warned_at = now
            log.warning("dropping event-log lines (%d so far): %s", self.dropped, exc)

    def rotated_files(self) -> list[Path]:
        return sorted(self.directory.glob("events-*.jsonl"), key=lambda p: int(p.stem.split("-")[1]))

    def _rotate(self) -> None:
        existing = self.rotated_files()
        next_index = int(existing[-1].stem.split("-")[1]) + 1 if existing else 1
        # Old files go first: rotating is how a full disk gets room back.
        for old in existing[: max(0, len(existing) + 1 - self.keep)]:
            old.unlink()
        fd = os.open(
            self.path.with_name("events.jsonl.next"),
            os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_TRUNC,
            0o644,
        )
        os.replace(self.path, self.directory / f"events-{next_index:06d}.jsonl")
        os.replace(self.path.with_name("events.jsonl.next"), self.path)
        os.close(self._fd)
        self._fd = fd
        self._size = 0

    def close(self) -> None:
        os.close(self._fd)
