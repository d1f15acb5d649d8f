"""Keyed timers in virtual time. The coordinator's payloads are callables to run when due: named closures,
or for the timer every member has, a small object of its own (`rebalancing._SessionExpiry`).

Scheduling a key replaces any timer already under that key, as Kafka's coordinator timer does.
Rescheduling to a later deadline (every heartbeat does this) costs a dict lookup and an attribute
write: the heap entry stays where it is and is pushed back when it surfaces early.
"""

from __future__ import annotations

import heapq
import itertools
from collections.abc import Hashable
from dataclasses import dataclass, field
from typing import Any


@dataclass(slots=True, eq=False)
class _Entry:
    key: Hashable
    deadline: int
    payload: Any
    queued_at: int
    cancelled: bool = False


@dataclass(slots=True)
class Timers:
    _entries: dict[Hashable, _Entry] = field(default_factory=dict)
    _heap: list[tuple[int, int, _Entry]] = field(default_factory=list)
    _seq: itertools.count[int] = field(default_factory=itertools.count)

    def schedule(self, key: Hashable, deadline: int, payload: Any = None) -> None:
        """Due at `deadline` with `payload`, instead of whatever was scheduled under `key`."""
        entry = self._entries.get(key)
        if entry is not None and entry.queued_at <= deadline:
            entry.deadline = deadline
            entry.payload = payload
            return
        if entry is not None:
            entry.cancelled = True
        entry = _Entry(key, deadline, payload, deadline)
        self._entries[key] = entry
        heapq.heappush(self._heap, (deadline, next(self._seq), entry))

    def reschedule(self, key: Hashable, deadline: int) -> bool:
        """Move the timer under `key` to `deadline`, keeping its payload; False if there is none."""
        entry = self._entries.get(key)
        if entry is None:
            return False
        if entry.queued_at <= deadline:
            entry.deadline = deadline
        else:
            self.schedule(key, deadline, entry.payload)
        return True

    def cancel(self, key: Hashable) -> None:
        entry = self._entries.pop(key, None)
        if entry is not None:
            entry.cancelled = True

    def deadline(self, key: Hashable) -> int | None:
        entry = self._entries.get(key)
        return None if entry is None else entry.deadline

    def __contains__(self, key: Hashable) -> bool:
        return key in self._entries

    def __len__(self) -> int:
        return len(self._entries)

    def _earliest(self) -> _Entry | None:
        """The earliest live entry, its heap position made exact (rescheduled entries are pushed back)."""
        heap = self._heap
        while heap:
            queued, _, entry = heap[0]
            if entry.cancelled:
                heapq.heappop(heap)
            elif entry.deadline > queued:
                heapq.heapreplace(heap, (entry.deadline, next(self._seq), entry))
                entry.queued_at = entry.deadline
            else:
                return entry
        return None

    def next_deadline(self) -> int | None:
        """The earliest time at which `pop_due` may return something."""
        entry = self._earliest()
        return None if entry is None else entry.deadline

    def pop_due(self, now: int) -> tuple[Hashable, Any] | None:
        """Remove and return the key and payload of the earliest timer due at `now`, or None."""
        entry = self._earliest()
        if entry is None or entry.deadline > now:
            return None
        heapq.heappop(self._heap)
        del self._entries[entry.key]
        return entry.key, entry.payload
