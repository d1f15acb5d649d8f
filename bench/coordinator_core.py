"""Benchmarks of the coordinator state machine and its durable log.

    .venv/bin/python bench/coordinator_core.py [--quick]

Measures heartbeats/s through the state machine, the CPU time of a 1,000-member join+sync round, log
appends/s with and without fsync, and recovery time for 1M offset records.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "operator"))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.report import publish, table
from staticfleet.coordinator import CoordinatorConfig, GroupCoordinator, InProcessCoordinator, ManualClock
from staticfleet.coordinator.log import DurableLog, MemoryStore
from staticfleet.coordinator.messages import (
    HeartbeatRequest,
    JoinGroupRequest,
    JoinGroupResponse,
    Protocol,
    RequestContext,
    SyncGroupAssignment,
    SyncGroupRequest,
    SyncGroupResponse,
)
from staticfleet.coordinator.records import OffsetCommitRecord

PROTOCOLS = (Protocol("range", b"\x00\x01\x00\x00\x00\x01\x00\x06orders\xff\xff\xff\xff"),)
CONFIG = CoordinatorConfig(initial_rebalance_delay_ms=0)


def stable_group(members: int) -> tuple[InProcessCoordinator, ManualClock, list[str]]:
    clock = ManualClock()
    coordinator = InProcessCoordinator(GroupCoordinator(clock, CONFIG), MemoryStore())
    ids = join_and_sync(coordinator, members)
    return coordinator, clock, ids


def join_and_sync(coordinator: InProcessCoordinator, members: int) -> list[str]:
    ctx = RequestContext(9, "bench")
    joined: list[JoinGroupResponse] = []
    for i in range(members):
        request = JoinGroupRequest("g", 45_000, 300_000, "", f"consumer-{i}", "consumer", PROTOCOLS)
        coordinator.join_group(ctx, request, joined.append)
    coordinator.fire_due_timers()
    generation = joined[0].generation_id
    leader = next(r for r in joined if r.members)
    assignments = tuple(SyncGroupAssignment(m.member_id, b"\x00\x01") for m in leader.members)
    synced: list[SyncGroupResponse] = []
    for response in joined:
        coordinator.sync_group(
            RequestContext(5),
            SyncGroupRequest(
                "g",
                generation,
                response.member_id,
                None,
                "consumer",
                "range",
                assignments if response.member_id == leader.member_id else (),
            ),
            synced.append,
        )
    assert len(synced) == members and all(s.error == 0 for s in synced)
    return [r.member_id for r in joined]


def bench_heartbeats(seconds: float) -> float:
    coordinator, clock, ids = stable_group(1_000)
    ctx = RequestContext(4)
    requests = [HeartbeatRequest("g", 1, member_id, f"consumer-{i}") for i, member_id in enumerate(ids)]
    heartbeat = coordinator.coordinator.heartbeat  # a read: straight to the state machine
    count = 0
    start = time.process_time()
    deadline = start + seconds
    while time.process_time() < deadline:
        for request in requests:
            heartbeat(ctx, request)
        count += len(requests)
        clock.advance(1)
    elapsed = time.process_time() - start
    return count / elapsed


def bench_round(members: int, repeats: int) -> float:
    best = float("inf")
    for _ in range(repeats):
        coordinator = InProcessCoordinator(GroupCoordinator(ManualClock(), CONFIG), MemoryStore())
        start = time.process_time()
        join_and_sync(coordinator, members)
        best = min(best, time.process_time() - start)
    return best * 1000


def bench_appends(fsync: bool, seconds: float, per_frame: int) -> float:
    with tempfile.TemporaryDirectory() as tmp:
        log = DurableLog(tmp, fsync=fsync)
        list(log.recover())
        batch = [OffsetCommitRecord("group", "orders", p, 123456, -1, "", 1) for p in range(per_frame)]
        count = 0
        start = time.perf_counter()
        while time.perf_counter() - start < seconds:
            log.append(batch)
            log.sync()
            count += 1
        elapsed = time.perf_counter() - start
        log.close()
        return count / elapsed


def bench_recovery(records: int) -> tuple[float, int]:
    with tempfile.TemporaryDirectory() as tmp:
        log = DurableLog(tmp, fsync=False)
        list(log.recover())
        per_frame = 10
        for base in range(0, records, per_frame):
            log.append(
                [
                    OffsetCommitRecord(
                        f"group-{(base + i) % 100}", f"topic-{(base + i) % 50}", base + i, base, -1, "", 1
                    )
                    for i in range(per_frame)
                ]
            )
        log.close()
        start = time.perf_counter()
        reopened = DurableLog(tmp, fsync=False)
        coordinator = InProcessCoordinator(GroupCoordinator(ManualClock(), CONFIG), reopened)
        loaded = coordinator.load(reopened.recover())
        elapsed = time.perf_counter() - start
        reopened.close()
        return elapsed, loaded


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="short runs, for a smoke test")
    args = parser.parse_args()
    seconds = 0.5 if args.quick else 3.0
    recovery_records = 100_000 if args.quick else 1_000_000

    heartbeats = bench_heartbeats(seconds)
    round_ms = bench_round(1_000, 1 if args.quick else 5)
    appends_nofsync = bench_appends(False, seconds, 1)
    appends_fsync = bench_appends(True, seconds, 1)
    recovery_s, loaded = bench_recovery(recovery_records)

    rows = [
        [
            "heartbeats through the state machine (1,000 static members, one core)",
            f"{heartbeats:,.0f} /s",
            "≥ 200,000 /s",
        ],
        ["1,000-member join + sync round (CPU time)", f"{round_ms:.1f} ms", "< 50 ms"],
        ["log appends, one offset record each, no fsync", f"{appends_nofsync:,.0f} /s", ""],
        ["log appends, one offset record each, fsync each", f"{appends_fsync:,.0f} /s", ""],
        [
            f"recovery of {loaded:,} offset records (read, verify, replay)",
            f"{recovery_s:.2f} s",
            "< 5 s for 1M",
        ],
    ]
    body = table(["measure", "result", "target"], rows)
    print(body)
    if not args.quick:
        publish(
            "coordinator_core",
            "Coordinator state machine and durable log",
            ".venv/bin/python bench/coordinator_core.py",
            body,
            {
                "heartbeats_per_s": heartbeats,
                "join_sync_round_1000_ms_cpu": round_ms,
                "log_appends_per_s_nofsync": appends_nofsync,
                "log_appends_per_s_fsync": appends_fsync,
                "recovery_s": recovery_s,
                "recovery_records": loaded,
            },
        )


if __name__ == "__main__":
    main()
