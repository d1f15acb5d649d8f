"""The coordinator host: persist first, answer second; group commit; snapshots as the log grows."""

from __future__ import annotations

import asyncio
import threading
from pathlib import Path
from types import SimpleNamespace
from typing import Any, cast

from staticfleet.broker.apis.common import gated
from staticfleet.broker.host import CoordinatorHost
from staticfleet.broker.registry import BrokerContext
from staticfleet.coordinator import CoordinatorConfig, ManualClock
from staticfleet.coordinator.messages import (
    OffsetCommitPartition,
    OffsetCommitRequest,
    OffsetCommitTopic,
    RequestContext,
)


def _commit(host: CoordinatorHost, partition: int, offset: int) -> None:
    request = OffsetCommitRequest(
        "g", -1, "", None, (OffsetCommitTopic("t", (OffsetCommitPartition(partition, offset),)),)
    )
    host.call(lambda c: c.commit_offsets(RequestContext(9), request))


def test_a_response_that_depends_on_a_record_waits_for_the_fsync(tmp_path: Path) -> None:
    async def main() -> None:
        host = CoordinatorHost(tmp_path, CoordinatorConfig(), clock=ManualClock())
        await host.start()
        sent: list[str] = []
        host.deliver(lambda: sent.append("before any record"))
        assert sent == ["before any record"], "nothing to wait for: answered at once"
        _commit(host, 0, 1)
        assert host.unsynced
        host.deliver(lambda: sent.append("after a record"))
        assert sent == ["before any record"], "held until the record is durable"
        await host.flush()
        assert sent == ["before any record", "after a record"] and not host.unsynced
        await host.close()

    asyncio.run(main())


def test_an_answer_held_for_the_fsync_is_dropped_quietly_once_its_connection_is_gone(tmp_path: Path) -> None:
    async def main() -> None:
        loop = asyncio.get_running_loop()
        unexpected: list[dict[str, Any]] = []
        loop.set_exception_handler(lambda _loop, context: unexpected.append(context))
        host = CoordinatorHost(tmp_path, CoordinatorConfig(), clock=ManualClock())
        await host.start()
        # The fsync (in its worker thread) ends only when the test says so: a quick disk would otherwise
        # make the record durable before the answers are even held.
        fsync_may_end = threading.Event()

        def hold_the_fsync(seconds: float) -> None:
            fsync_may_end.wait(10)

        host.observe_fsync = hold_the_fsync
        ctx = cast(BrokerContext, SimpleNamespace(host=host))
        _commit(host, 0, 1)
        gone = asyncio.create_task(gated(ctx, "answer to a closed connection"))
        kept = asyncio.create_task(gated(ctx, "answer to an open connection"))
        await asyncio.sleep(0)
        gone.cancel()  # the connection closed while its answer waited for the fsync
        await asyncio.gather(gone, return_exceptions=True)
        fsync_may_end.set()
        await host.flush()
        assert gone.cancelled()
        assert await kept == "answer to an open connection"
        assert unexpected == [], "releasing the held answers raised nothing"
        await host.close()

    asyncio.run(main())


def test_the_log_is_snapshotted_when_it_grows_and_recovery_reads_the_snapshot(tmp_path: Path) -> None:
    async def main() -> None:
        host = CoordinatorHost(
            tmp_path, CoordinatorConfig(), clock=ManualClock(), max_record_bytes_between_snapshots=4096
        )
        await host.start()
        for round_ in range(20):
            for partition in range(10):
                _commit(host, partition, round_ * 100 + partition)
            await host.flush()
            await asyncio.sleep(0)
        while host._snapshot_task is not None:
            await asyncio.sleep(0.01)
        await host.close()
        files = sorted(p.name.split("-")[0] for p in (tmp_path / "coordinator").iterdir())
        assert "snapshot" in files, files
        reopened = CoordinatorHost(tmp_path, CoordinatorConfig(), clock=ManualClock())
        reopened.recover()
        offsets = {r.partition: r.offset for r in reopened.coordinator.offsets.all()}
        assert offsets == {p: 1900 + p for p in range(10)}
        assert reopened.recovered_records < 200, "recovery reads live state, not every commit ever made"
        reopened.durable.close()
        reopened.event_writer.close()

    asyncio.run(main())
