"""The host's one failure policy: a disk that refuses a write, a failed fsync, a snapshot that cannot
be written, an event log on a full disk, a record over the frame limit."""

from __future__ import annotations

import asyncio
import errno
import os
from pathlib import Path
from typing import Any

import pytest

from staticfleet.broker.host import CoordinatorHost
from staticfleet.coordinator import CoordinatorConfig, ErrorCode, ManualClock, StoreError
from staticfleet.coordinator.events import EventLogWriter
from staticfleet.coordinator.messages import (
    JoinGroupRequest,
    JoinGroupResponse,
    OffsetCommitPartition,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetCommitTopic,
    Protocol,
    RequestContext,
    SyncGroupAssignment,
    SyncGroupRequest,
    SyncGroupResponse,
)

E = ErrorCode
CONFIG = CoordinatorConfig(initial_rebalance_delay_ms=0, min_session_timeout_ms=10)


def _commit(host: CoordinatorHost, partition: int, offset: int, group: str = "g") -> OffsetCommitResponse:
    request = OffsetCommitRequest(
        group, -1, "", None, (OffsetCommitTopic("t", (OffsetCommitPartition(partition, offset),)),)
    )
    return host.call(lambda c: c.commit_offsets(RequestContext(9), request))


def _error(response: OffsetCommitResponse) -> int:
    return response.topics[0].partitions[0].error


def _offsets(host: CoordinatorHost, group: str = "g") -> dict[int, int]:
    return {p: r.offset for p, r in host.coordinator.offsets.of_group(group).get("t", {}).items()}


def _disk_full(fd: int, data: bytes) -> int:
    os.write(fd, data[: len(data) // 2])  # half of it lands, as on a disk that fills mid-write
    raise OSError(errno.ENOSPC, "No space left on device")


def _reopened_offsets(directory: Path, group: str = "g") -> dict[int, int]:
    reopened = CoordinatorHost(directory, CONFIG, clock=ManualClock())
    reopened.recover()
    offsets = _offsets(reopened, group)
    reopened.durable.close()
    reopened.event_writer.close()
    reopened.release()
    return offsets


def test_a_commit_the_disk_refuses_is_answered_not_coordinator_changes_nothing_and_writes_resume(
    tmp_path: Path,
) -> None:
    async def main() -> None:
        host = CoordinatorHost(tmp_path, CONFIG, clock=ManualClock())
        await host.start()
        assert _error(_commit(host, 0, 1)) == E.none
        await host.flush()
        host.durable._write = _disk_full
        # Kafka answers a group-metadata append that failed with a storage error NOT_COORDINATOR.
        assert _error(_commit(host, 0, 2)) == E.not_coordinator
        assert _error(_commit(host, 0, 3, group="new")) == E.not_coordinator
        assert _offsets(host) == {0: 1}, "a refused commit changes nothing"
        assert "new" not in host.coordinator.groups, "the group a refused commit created is undone"
        host.durable._write = os.write  # space is back: the next commit goes through, no restart
        assert _error(_commit(host, 0, 4)) == E.none
        await host.flush()
        assert host.failed_appends == 2
        await host.close()
        assert _reopened_offsets(tmp_path) == {0: 4}

    asyncio.run(main())


def test_a_failed_fsync_holds_the_answers_refuses_writes_and_a_snapshot_makes_them_durable(
    tmp_path: Path,
) -> None:
    async def main() -> None:
        host = CoordinatorHost(tmp_path, CONFIG, clock=ManualClock())
        await host.start()
        real_sync = host.durable.sync
        failures = [StoreError("cannot fsync: [Errno 5] Input/output error")]

        def sync_failing_once() -> None:
            if failures:
                raise failures.pop()
            real_sync()

        host.durable.sync = sync_failing_once  # type: ignore[method-assign]
        sent: list[str] = []
        assert _error(_commit(host, 0, 7)) == E.none
        host.deliver(lambda: sent.append("commit of 7"))
        await host.flush()  # the fsync fails: the process lives on, the answer is held
        assert sent == [] and host.storage_broken is not None
        assert _error(_commit(host, 1, 1)) == E.not_coordinator, "writes wait for the rewrite"
        for _ in range(100):
            if host.storage_broken is None:
                break
            await asyncio.sleep(0.01)
        assert host.storage_broken is None and host.snapshots == 1
        assert sent == ["commit of 7"], "the snapshot made it durable: the answer went out"
        assert _error(_commit(host, 1, 2)) == E.none
        await host.close()
        assert _reopened_offsets(tmp_path) == {0: 7, 1: 2}

    asyncio.run(main())


def test_a_snapshot_that_keeps_failing_is_retried_with_backoff_not_on_every_change(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    async def main() -> None:
        host = CoordinatorHost(tmp_path, CONFIG, clock=ManualClock(), max_record_bytes_between_snapshots=0)
        await host.start()

        def refuse(seq: int, records: Any) -> int:
            raise StoreError("cannot write snapshot: [Errno 28] No space left on device")

        monkeypatch.setattr(host.durable, "write_snapshot", refuse)
        loop = asyncio.get_running_loop()
        end = loop.time() + 1.5
        commits = 0
        while loop.time() < end:
            assert _error(_commit(host, commits % 4, commits)) == E.none
            commits += 1
            await asyncio.sleep(0.005)
        assert commits > 100
        assert 1 <= host.failed_snapshots <= 2, f"{host.failed_snapshots} snapshot attempts in 1.5 s"
        monkeypatch.undo()
        await host.close()

    asyncio.run(main())


def test_the_event_log_drops_lines_it_cannot_write_and_counts_them(tmp_path: Path) -> None:
    writer = EventLogWriter(tmp_path)
    writer.emit({"type": "kept"})
    real_fd = writer._fd
    writer._fd = os.open("/dev/full", os.O_WRONLY)  # every write: ENOSPC
    writer.emit({"type": "lost"})
    writer.emit({"type": "lost"})
    assert writer.dropped == 2
    os.close(writer._fd)
    writer._fd = real_fd
    writer.emit({"type": "kept again"})
    writer.close()
    assert (tmp_path / "events.jsonl").read_text().splitlines() == [
        '{"type":"kept"}',
        '{"type":"kept again"}',
    ]


def test_the_event_log_keeps_a_bounded_number_of_rotated_files(tmp_path: Path) -> None:
    writer = EventLogWriter(tmp_path, max_bytes=200, keep=3)
    for i in range(200):
        writer.emit({"type": "x", "i": i})
    writer.close()
    files = sorted(tmp_path.iterdir())
    assert len(files) == 4 and sum(f.stat().st_size for f in files) <= 4 * 200


def test_an_assignment_over_the_frame_limit_is_refused_and_the_coordinator_restarts_cleanly(
    tmp_path: Path,
) -> None:
    async def main() -> None:
        host = CoordinatorHost(tmp_path, CONFIG, clock=ManualClock(), max_frame_bytes=4096)
        await host.start()
        loop = asyncio.get_running_loop()
        joined: asyncio.Future[JoinGroupResponse] = loop.create_future()
        join = JoinGroupRequest("g", 10_000, 10_000, "", "a", "consumer", (Protocol("range", b"m"),))
        host.call(lambda c: c.join_group(RequestContext(9), join, host.responder(joined)))
        host._on_timer()  # the initial delay (0 ms) ends the join phase
        leader = await asyncio.wait_for(joined, 5)
        assert leader.error == E.none
        synced: asyncio.Future[SyncGroupResponse] = loop.create_future()
        sync = SyncGroupRequest(
            "g",
            leader.generation_id,
            leader.member_id,
            "a",
            "consumer",
            "range",
            (SyncGroupAssignment(leader.member_id, b"x" * 10_000),),
        )
        host.call(lambda c: c.sync_group(RequestContext(5), sync, host.responder(synced)))
        # Kafka answers an append over its size limit UNKNOWN_SERVER_ERROR.
        assert (await asyncio.wait_for(synced, 5)).error == E.unknown_server_error
        assert host.coordinator.groups["g"].last_persisted is not None
        assert host.coordinator.groups["g"].last_persisted.members == ()
        assert _error(_commit(host, 0, 5, group="other")) == E.none
        await host.close()
        assert _reopened_offsets(tmp_path, group="other") == {0: 5}

    asyncio.run(main())
