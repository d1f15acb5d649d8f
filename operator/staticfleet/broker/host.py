"""Runs the pure coordinator inside an asyncio process: its durable log, its timers, its event log.

Persist first, answer second: a response produced after a record was appended is held until the log
has been fsynced. Appends happen on the event loop; fsyncs run in a worker thread and cover every
append made before they started, so concurrent requests share one fsync (group commit).
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections import deque
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

from staticfleet.coordinator import CoordinatorConfig, GroupCoordinator, SystemClock
from staticfleet.coordinator.clock import Clock
from staticfleet.coordinator.events import EventLogWriter, EventSink, FanOutSink
from staticfleet.coordinator.log import DurableLog, lock_data_dir
from staticfleet.coordinator.records import Record

log = logging.getLogger(__name__)
T = TypeVar("T")


def _ignore(seconds: float) -> None:
    return None


class _CountingStore:
    """The coordinator's store: appends to the durable log and counts appends for the persist gate."""

    def __init__(self, durable: DurableLog) -> None:
        self.durable = durable
        self.appended = 0
        self.observe: Callable[[float], None] = _ignore

    def append(self, records: Sequence[Record]) -> None:
        if records:
            start = time.perf_counter()
            self.durable.append(records)
            self.appended += 1
            self.observe(time.perf_counter() - start)


class CoordinatorHost:
    def __init__(
        self,
        data_dir: str | os.PathLike[str],
        config: CoordinatorConfig,
        *,
        clock: Clock | None = None,
        fsync: bool = True,
        rebalance_on_partition_growth: bool = True,
        extra_sinks: Sequence[EventSink] = (),
        event_log_max_bytes: int = 64 * 1024 * 1024,
        snapshot_min_bytes: int = 64 * 1024 * 1024,
    ) -> None:
        self.data_dir = Path(data_dir)
        # Before anything else touches the directory: a second coordinator on it must change nothing.
        self._lock_fd: int | None = lock_data_dir(self.data_dir)
        self.clock = clock or SystemClock()
        self.durable = DurableLog(self.data_dir / "coordinator", fsync=fsync)
        self.store = _CountingStore(self.durable)
        self.event_writer = EventLogWriter(self.data_dir / "events", max_bytes=event_log_max_bytes)
        self.events = FanOutSink(self.event_writer, *extra_sinks)
        self.coordinator = GroupCoordinator(
            self.clock,
            self.store,
            config,
            self.events,
            rebalance_on_partition_growth=rebalance_on_partition_growth,
        )
        self.snapshot_min_bytes = snapshot_min_bytes
        self.ready = False
        self.recovered_records = 0
        self._synced = 0
        self._held: deque[tuple[int, Callable[[], None]]] = deque()
        self._flusher: asyncio.Task[None] | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._timer_deadline: int | None = None
        self._closed = False
        self._snapshot_task: asyncio.Task[None] | None = None
        self.observe_fsync: Callable[[float], None] = _ignore

    def observe_append(self, observe: Callable[[float], None]) -> None:
        self.store.observe = observe

    # --- lifecycle ---------------------------------------------------------------------------------

    def recover(self) -> int:
        """Load the durable state (blocking; run before serving)."""
        self.recovered_records = self.coordinator.load(self.durable.recover())
        self._synced = self.store.appended
        self.ready = True
        log.info("recovered %d records, %d groups", self.recovered_records, len(self.coordinator.groups))
        return self.recovered_records

    async def start(self) -> None:
        await asyncio.to_thread(self.recover)
        self.after_change()

    async def close(self) -> None:
        """Flush and release everything. Held responses are delivered once their records are durable."""
        if self._closed:
            return
        if self._timer is not None:
            self._timer.cancel()
        if self._snapshot_task is not None:
            await self._snapshot_task
        await self.flush()
        self._closed = True
        self.durable.close()
        self.event_writer.close()
        self.release()

    def release(self) -> None:
        """Give up the data directory's lock (close does this)."""
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    # --- calling the coordinator -------------------------------------------------------------------

    def call(self, operation: Callable[[GroupCoordinator], T]) -> T:
        """Run one coordinator operation, then take care of durability and timers."""
        result = operation(self.coordinator)
        self.after_change()
        return result

    @property
    def unsynced(self) -> bool:
        """Whether some appended record is not yet durable (a response now would have to wait)."""
        return self.store.appended > self._synced

    def deliver(self, send: Callable[[], None]) -> None:
        """Send a response now, or once every record appended so far is durable."""
        if self.store.appended > self._synced:
            self._held.append((self.store.appended, send))
        else:
            send()

    def responder(self, future: asyncio.Future[T]) -> Callable[[T], None]:
        """A coordinator callback that resolves `future` through the persist gate."""

        def respond(value: T) -> None:
            def send() -> None:
                if not future.done():
                    future.set_result(value)

            self.deliver(send)

        return respond

    def after_change(self) -> None:
        if self.store.appended > self._synced and self._flusher is None and not self._closed:
            self._flusher = asyncio.get_running_loop().create_task(self._flush_loop())
        self._arm_timer()
        if self.durable.should_snapshot(self.snapshot_min_bytes) and self._snapshot_task is None:
            self._snapshot_task = asyncio.get_running_loop().create_task(self._snapshot())

    async def flush(self) -> None:
        if self._flusher is not None:
            await self._flusher
        if self.store.appended > self._synced:
            await self._flush_loop()

    async def _flush_loop(self) -> None:
        try:
            while self.store.appended > self._synced:
                target = self.store.appended
                await asyncio.to_thread(self._fsync)
                self._synced = target
                while self._held and self._held[0][0] <= target:
                    _, send = self._held.popleft()
                    send()
        finally:
            self._flusher = None

    def _fsync(self) -> None:
        start = time.perf_counter()
        try:
            self.durable.sync()
            self.observe_fsync(time.perf_counter() - start)
        except OSError:
            # Durability of acknowledged-to-be records is unknown: stop rather than answer wrongly.
            log.critical("fsync of the coordinator log failed; exiting", exc_info=True)
            os._exit(70)

    async def _snapshot(self) -> None:
        try:
            await self.flush()
            records = list(self.coordinator.snapshot_records())
            self.durable.snapshot(records)
            log.info("wrote a snapshot of %d records", len(records))
        finally:
            self._snapshot_task = None

    # --- timers ------------------------------------------------------------------------------------

    def _arm_timer(self) -> None:
        deadline = self.coordinator.next_deadline()
        if deadline == self._timer_deadline:
            return
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
        self._timer_deadline = deadline
        if deadline is None or self._closed:
            return
        delay = max(0.0, (deadline - self.clock.now_ms()) / 1000)
        self._timer = asyncio.get_running_loop().call_later(delay, self._on_timer)

    def _on_timer(self) -> None:
        self._timer = None
        self._timer_deadline = None
        self.coordinator.fire_due_timers()
        self.after_change()
