"""What a Fetch gets from the topic log: its results, and the long poll (fetches parked until data
arrives, resolved by appends, retention and topic changes rather than by polling)."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Mapping
from dataclasses import dataclass

from staticfleet.broker.partitionlog import FileRegion

TopicPartition = tuple[str, int]
Ready = Callable[[Mapping[TopicPartition, int], int], bool]
"""Whether a fetch at these positions, wanting this many bytes, has something to answer."""


@dataclass(frozen=True, slots=True)
class FetchResult:
    records: bytes  # whole record batches, possibly empty
    high_watermark: int
    log_start_offset: int

    @property
    def last_stable_offset(self) -> int:
        return self.high_watermark  # no transactions, so nothing is ever unstable


@dataclass(frozen=True, slots=True)
class RegionFetchResult:
    regions: tuple[FileRegion, ...]  # whole record batches in the segment files, possibly none
    high_watermark: int
    log_start_offset: int

    @property
    def size(self) -> int:
        return sum(region.length for region in self.regions)

    @property
    def last_stable_offset(self) -> int:
        return self.high_watermark


@dataclass(eq=False)
class _Waiter:
    positions: dict[TopicPartition, int]
    min_bytes: int
    future: asyncio.Future[None]


class FetchWaits:
    """The fetches parked on each partition. One owner: the event loop that runs the topic log."""

    def __init__(self) -> None:
        self._waiters: dict[TopicPartition, set[_Waiter]] = {}

    async def wait(self, positions: Mapping[TopicPartition, int], min_bytes: int, timeout_s: float) -> bool:
        """Park until `notify` finds these positions ready or `timeout_s` passes (False)."""
        if timeout_s <= 0:
            return False
        waiter = _Waiter(dict(positions), min_bytes, asyncio.get_running_loop().create_future())
        for key in waiter.positions:
            self._waiters.setdefault(key, set()).add(waiter)
        try:
            done, _ = await asyncio.wait({waiter.future}, timeout=timeout_s)
            return bool(done)
        finally:
            for key in waiter.positions:
                waiting = self._waiters.get(key)
                if waiting is not None:
                    waiting.discard(waiter)
                    if not waiting:
                        del self._waiters[key]

    def notify(self, key: TopicPartition, ready: Ready) -> None:
        """The partition changed: wake the fetches parked on it that `ready` says can be answered."""
        waiting = self._waiters.get(key)
        if not waiting:
            return
        for waiter in list(waiting):
            if not waiter.future.done() and ready(waiter.positions, waiter.min_bytes):
                waiter.future.set_result(None)

    def release_all(self) -> None:
        """The log is closing: every parked fetch returns (as if ready)."""
        for waiting in self._waiters.values():
            for waiter in waiting:
                if not waiter.future.done():
                    waiter.future.set_result(None)
