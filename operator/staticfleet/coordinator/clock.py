"""Time sources. The state machine only ever asks a Clock, so tests run in exact virtual time."""

from __future__ import annotations

import time
from typing import Protocol


class Clock(Protocol):
    def now_ms(self) -> int: ...


class SystemClock:
    """Wall-clock milliseconds that never run backwards: anchored to the wall clock once, then monotonic."""

    def __init__(self) -> None:
        self._wall_anchor_ms = time.time_ns() // 1_000_000
        self._mono_anchor_ns = time.monotonic_ns()

    def now_ms(self) -> int:
        return self._wall_anchor_ms + (time.monotonic_ns() - self._mono_anchor_ns) // 1_000_000


class ManualClock:
    """A clock that moves only when told to."""

    def __init__(self, start_ms: int = 1_700_000_000_000) -> None:
        self._now = start_ms

    def now_ms(self) -> int:
        return self._now

    def advance(self, ms: int) -> None:
        if ms < 0:
            raise ValueError("time does not run backwards")
        self._now += ms

    def set(self, now_ms: int) -> None:
        if now_ms < self._now:
            raise ValueError("time does not run backwards")
        self._now = now_ms
