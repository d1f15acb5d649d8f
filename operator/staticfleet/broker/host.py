"""Runs the pure coordinator inside an asyncio process: its durable log, its timers, its event log.

The one place where decisions become durable and answers leave: every operation of the state
machine returns a `CoordinatorResult`; the runtime appends its records and settles it; the replies
and the response are held until the log has been fsynced (persist first, answer second). Appends
happen on the event loop; fsyncs run in a worker thread and cover every append made before they
started, so concurrent requests share one fsync (group commit).

One failure policy. An append the disk refuses (full, or an I/O error) is cut off the log and the
operation is undone: the client gets Kafka's answer for a failed append (NOT_COORDINATOR for a storage
error, so it looks the coordinator up again and retries), and the next write simply tries again, so
writes resume by themselves when space returns. A failed fsync leaves it unknown whether the records
since the last good one are on disk: their answers stay held and new writes are refused while the
host writes the whole live state into a fresh snapshot (with backoff); once that is durable the held
answers go out. Reads and heartbeats never touch the disk and keep working throughout.
"""

from __future__ import annotations

import asyncio
import logging
import os
import time
from collections import deque
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TypeVar

from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector, CollectorRegistry

from staticfleet.broker.security.state import SecurityState
from staticfleet.coordinator import CoordinatorConfig, CoordinatorResult, GroupCoordinator, SystemClock
from staticfleet.coordinator.clock import Clock
from staticfleet.coordinator.errors import StoreError
from staticfleet.coordinator.events import EventLogWriter, EventSink, FanOutSink
from staticfleet.coordinator.integrity import COORDINATOR_LOG_DIR, LogCorruptError
from staticfleet.coordinator.log import MAX_RECORD_BYTES_BETWEEN_SNAPSHOTS, DurableLog, lock_data_dir
from staticfleet.coordinator.logformat import MAX_FRAME_BYTES
from staticfleet.coordinator.records import Record, SecurityRecord
from staticfleet.coordinator.result import Reply
from staticfleet.coordinator.runtime import CoordinatorRuntime

log = logging.getLogger(__name__)
T = TypeVar("T")

SNAPSHOT_RETRY_FIRST_S = 1.0
SNAPSHOT_RETRY_MAX_S = 300.0


def _ignore(seconds: float) -> None:
    return None


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
        event_log_max_bytes: int = 32 * 1024 * 1024,
        event_log_keep: int = 4,
        max_record_bytes_between_snapshots: int = MAX_RECORD_BYTES_BETWEEN_SNAPSHOTS,
        max_frame_bytes: int = MAX_FRAME_BYTES,
    ) -> None:
        self.data_dir = Path(data_dir)
        # Before anything else touches the directory: a second coordinator on it must change nothing.
        self._lock_fd: int | None = lock_data_dir(self.data_dir)
        self.clock = clock or SystemClock()
        self.durable = DurableLog(
            self.data_dir / COORDINATOR_LOG_DIR,
            fsync=fsync,
            max_frame_bytes=max_frame_bytes,
            data_dir=self.data_dir,
        )
        self.event_writer = EventLogWriter(
            self.data_dir / "events", max_bytes=event_log_max_bytes, keep=event_log_keep
        )
        self.events = FanOutSink(self.event_writer, *extra_sinks)
        self.coordinator = GroupCoordinator(
            self.clock, config, self.events, rebalance_on_partition_growth=rebalance_on_partition_growth
        )
        self.runtime = CoordinatorRuntime(self.coordinator, self)
        self.security: SecurityState | None = None
        """ACLs and credentials, whose records share this log (set before `start`)."""
        self.max_record_bytes_between_snapshots = max_record_bytes_between_snapshots
        self.ready = False
        self.recovered_records = 0
        self.appended = 0
        """Appends made so far; `_synced` of them are known durable."""
        self._synced = 0
        self._held: deque[tuple[int, Callable[[], None]]] = deque()
        self._flusher: asyncio.Task[None] | None = None
        self._fsync_running: tuple[int, asyncio.Future[None]] | None = None
        """The fsync in a worker thread, and how many appends it covers."""
        self._timer: asyncio.TimerHandle | None = None
        self._timer_deadline: int | None = None
        self._closed = False
        self._snapshot_task: asyncio.Task[None] | None = None
        self._snapshot_retry_at = 0.0
        self._snapshot_backoff_s = SNAPSHOT_RETRY_FIRST_S
        self.storage_broken: str | None = None
        """Why appends are refused until a fresh snapshot is durable (after a failed fsync)."""
        self.failed_appends = 0
        self.failed_fsyncs = 0
        self.failed_snapshots = 0
        self.snapshots = 0
        self.observe_fsync: Callable[[float], None] = _ignore
        self._observe_append: Callable[[float], None] = _ignore

    def observe_append(self, observe: Callable[[float], None]) -> None:
        self._observe_append = observe

    def register_metrics(self, registry: CollectorRegistry) -> None:
        registry.register(_HostCollector(self))

    # --- the store the runtime appends to ----------------------------------------------------------

    def append(self, records: Sequence[Record]) -> None:
        if self.storage_broken is not None:
            raise StoreError(
                f"the coordinator log is not writable until it is rewritten: {self.storage_broken}"
            )
        start = time.perf_counter()
        try:
            self.durable.append(records)
        except StoreError as exc:
            self.failed_appends += 1
            log.warning("append refused, answering with the storage error: %s", exc)
            raise
        self.appended += 1
        self._observe_append(time.perf_counter() - start)
        self._begin_fsync()

    def _begin_fsync(self) -> None:
        """Start the fsync of what is appended so far in a worker thread now, unless one is running: it
        then overlaps the rest of the operation (settling, building the answers), which would
        otherwise have to finish before the flusher even started it."""
        if self._fsync_running is not None or self.storage_broken is not None or self._closed:
            return
        try:
            loop = asyncio.get_running_loop()
        except RuntimeError:
            return  # recovery, in a worker thread: it syncs once at the end
        self._fsync_running = (self.appended, loop.run_in_executor(None, self._fsync))

    # --- lifecycle ---------------------------------------------------------------------------------

    def recover(self) -> int:
        """Load the durable state (blocking; run before serving)."""
        result = self.runtime.run(self.coordinator.load(self._hand_over_security(self.durable.recover())))
        if not self.durable.recovery_complete:
            # Whatever became of the exception on its way out of the load, a partial state is never served.
            raise self.durable.recovery_failure or LogCorruptError(
                "recovery stopped before the end of the log"
            )
        self.recovered_records = result.response
        self._synced = self.appended
        self.ready = True
        log.info("recovered %d records, %d groups", self.recovered_records, len(self.coordinator.groups))
        return self.recovered_records

    def _hand_over_security(self, records: Iterator[Record]) -> Iterator[Record]:
        """The log's records, less the security records, which go to the security state."""
        security = self.security
        for record in records:
            if type(record) is SecurityRecord:
                if security is None:
                    raise RuntimeError("the coordinator log holds security records: set host.security")
                security.replay(record)
            else:
                yield record

    async def start(self) -> None:
        await asyncio.to_thread(self.recover)
        self.after_change()

    def unload(self) -> None:
        """Shutting down: parked joins and syncs are answered NOT_COORDINATOR, so in-flight work drains."""
        self.call(lambda c: c.unload())

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
        try:
            self.durable.close()
        except StoreError:
            log.error("the coordinator log could not be synced at close", exc_info=True)
        self.event_writer.close()
        self.release()

    def release(self) -> None:
        """Give up the data directory's lock (close does this)."""
        if self._lock_fd is not None:
            os.close(self._lock_fd)
            self._lock_fd = None

    # --- calling the coordinator -------------------------------------------------------------------

    def call(self, operation: Callable[[GroupCoordinator], CoordinatorResult[T]]) -> T:
        """Run one coordinator operation: append what it decided, settle it, send its replies once
        durable, and return its response (raising the request-level error it ended with, if any)."""
        result = self.runtime.run(operation(self.coordinator))
        self._send(result.replies)
        self.after_change()
        if result.error is not None:
            raise result.error
        return result.response

    def _send(self, replies: list[Reply]) -> None:
        for reply in replies:
            self.deliver(reply.send)

    @property
    def unsynced(self) -> bool:
        """Whether some appended record is not yet durable (a response now would have to wait)."""
        return self.appended > self._synced

    def deliver(self, send: Callable[[], None]) -> None:
        """Send a response now, or once every record appended so far is durable."""
        if self.appended > self._synced:
            self._held.append((self.appended, send))
        else:
            send()

    async def persisted(self) -> None:
        """Returns once every record appended so far is durable."""
        if not self.unsynced:
            return
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        def resolve() -> None:
            if not done.done():
                done.set_result(None)

        self.deliver(resolve)
        self.after_change()
        await done

    def responder(self, future: asyncio.Future[T]) -> Callable[[T], None]:
        """A coordinator callback that resolves `future` (the host sends it through the persist gate)."""

        def respond(value: T) -> None:
            if not future.done():
                future.set_result(value)

        return respond

    def after_change(self) -> None:
        if self._closed:
            return
        if self.appended > self._synced and self._flusher is None and self.storage_broken is None:
            self._flusher = asyncio.get_running_loop().create_task(self._flush_loop())
        self._arm_timer()
        due = self.durable.should_snapshot(self.max_record_bytes_between_snapshots)
        if (
            self._snapshot_task is None
            and (self.storage_broken is not None or due)
            and time.monotonic() >= self._snapshot_retry_at
        ):
            self._snapshot_task = asyncio.get_running_loop().create_task(self._snapshot())

    async def flush(self) -> None:
        if self._flusher is not None:
            await self._flusher
        if self.appended > self._synced and self.storage_broken is None:
            await self._flush_loop()

    async def _flush_loop(self) -> None:
        try:
            while self.appended > self._synced and self.storage_broken is None:
                self._begin_fsync()
                assert self._fsync_running is not None
                target, running = self._fsync_running
                try:
                    await running
                except StoreError as exc:
                    self._storage_failed(f"fsync failed: {exc}")
                    return
                finally:
                    self._fsync_running = None
                self._release_held(target)
        finally:
            self._flusher = None

    def _release_held(self, target: int) -> None:
        self._synced = max(self._synced, target)
        while self._held and self._held[0][0] <= self._synced:
            _, send = self._held.popleft()
            send()

    def _fsync(self) -> None:
        start = time.perf_counter()
        self.durable.sync()
        self.observe_fsync(time.perf_counter() - start)

    def _storage_failed(self, why: str) -> None:
        """Appends since the last good fsync may be lost: refuse writes until a snapshot holds them."""
        self.failed_fsyncs += 1
        self.storage_broken = why
        self._snapshot_retry_at = 0.0
        log.error("%s; holding %d answers until a fresh snapshot is durable", why, len(self._held))
        self.after_change()

    # --- snapshots ---------------------------------------------------------------------------------

    async def _snapshot(self) -> None:
        """Write the live state as a snapshot, off the event loop; retried with backoff if it fails."""
        try:
            if self.storage_broken is None:
                await self.flush()
            appended = self.appended
            records = list(self.coordinator.snapshot_records())
            if self.security is not None:
                records.extend(self.security.snapshot_records())
            try:
                seq = self.durable.begin_snapshot()
                size = await asyncio.to_thread(self.durable.write_snapshot, seq, records)
            except (StoreError, OSError) as exc:
                self.failed_snapshots += 1
                delay = self._snapshot_backoff_s
                self._snapshot_backoff_s = min(delay * 2, SNAPSHOT_RETRY_MAX_S)
                self._snapshot_retry_at = time.monotonic() + delay
                log.warning("snapshot failed, next try in %.0f s: %s", delay, exc)
                if not self._closed:
                    asyncio.get_running_loop().call_later(delay, self._retry_snapshot)
                return
            self.snapshots += 1
            self._snapshot_backoff_s = SNAPSHOT_RETRY_FIRST_S
            self._snapshot_retry_at = 0.0
            log.info("wrote a snapshot of %d records (%d bytes)", len(records), size)
            if self.storage_broken is not None:
                log.warning("the coordinator log is writable again (%s)", self.storage_broken)
                self.storage_broken = None
                self._release_held(appended)  # everything appended so far is in the snapshot
        finally:
            self._snapshot_task = None
        if not self._closed:
            self.after_change()

    def _retry_snapshot(self) -> None:
        if not self._closed and self._snapshot_task is None:
            self.after_change()

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
        for result in self.runtime.fire_due_timers():
            self._send(result.replies)
        self.after_change()


class _HostCollector(Collector):
    """How the coordinator's storage is doing, for /metrics."""

    def __init__(self, host: CoordinatorHost) -> None:
        self.host = host

    def collect(self) -> Iterator[CounterMetricFamily | GaugeMetricFamily]:
        host = self.host
        counters = (
            (
                "staticfleet_log_append_failures",
                "Appends the disk refused (answered with the storage error)",
                host.failed_appends,
            ),
            ("staticfleet_log_fsync_failures", "Failed fsyncs of the coordinator log", host.failed_fsyncs),
            ("staticfleet_snapshots", "Snapshots of the coordinator state written", host.snapshots),
            ("staticfleet_snapshot_failures", "Snapshots that could not be written", host.failed_snapshots),
            (
                "staticfleet_event_lines_dropped",
                "Event-log lines dropped because they could not be written",
                host.event_writer.dropped,
            ),
            (
                "staticfleet_log_appends_too_large",
                "Operations whose records were above message.max.bytes (answered UNKNOWN_SERVER_ERROR)",
                host.runtime.too_large_appends,
            ),
            (
                "staticfleet_coordinator_unexpected_errors",
                "Operations that raised while deciding or writing (answered UNKNOWN_SERVER_ERROR, undone)",
                host.runtime.unexpected_errors,
            ),
        )
        for name, documentation, value in counters:
            yield CounterMetricFamily(name, documentation, value=value)
        yield GaugeMetricFamily(
            "staticfleet_log_writable",
            "1 while the coordinator log takes appends, 0 while it must be rewritten after a failed fsync",
            value=0 if host.storage_broken is not None else 1,
        )
