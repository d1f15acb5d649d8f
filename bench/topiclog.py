"""Topic log throughput: append with and without fsync, sequential and random reads.

Usage: python bench/topiclog.py [--seconds-per-case 3] [--batch-records 100] [--value-bytes 150] [--dir PATH]

Batches are built once with kafka-python's record encoder (what a producer sends), then appended again
and again, so the numbers measure the log, not the encoder. Each case runs for a bounded time.
"""

from __future__ import annotations

import argparse
import asyncio
import random
import shutil
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kafka.record.memory_records import MemoryRecordsBuilder

from staticfleet.broker.topiclog import TopicLog

MIB = 1024 * 1024


@dataclass(frozen=True)
class Row:
    case: str
    operations: int
    seconds: float
    bytes_moved: int

    @property
    def mib_per_s(self) -> float:
        return self.bytes_moved / MIB / self.seconds if self.seconds else 0.0

    @property
    def ops_per_s(self) -> float:
        return self.operations / self.seconds if self.seconds else 0.0


def build_batch(records: int, value_bytes: int) -> bytes:
    builder = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=1 << 30)
    now = int(time.time() * 1000)
    for i in range(records):
        builder.append(
            timestamp=now + i, key=b"key-%08d" % i, value=random.randbytes(value_bytes), headers=[]
        )
    builder.close()
    return bytes(builder.buffer())


def timed(budget_s: float, max_ops: int, step: Callable[[], int]) -> tuple[int, float, int]:
    """Run `step` (which returns bytes moved) until the time budget or `max_ops` is used up."""
    operations = 0
    moved = 0
    started = time.perf_counter()
    deadline = started + budget_s
    while operations < max_ops and time.perf_counter() < deadline:
        moved += step()
        operations += 1
    return operations, time.perf_counter() - started, moved


def run(root: Path, budget_s: float, batch_records: int, value_bytes: int) -> list[Row]:
    batch = build_batch(batch_records, value_bytes)
    rows: list[Row] = []
    log = TopicLog(root)
    try:
        configs = {"segment.bytes": str(256 * MIB), "retention.ms": "-1"}
        for name in ("nosync", "sync", "sync64", "async"):
            log.create_topic(name, 1, configs=configs)

        def append(topic: str, flush_every: int) -> Callable[[], int]:
            counter = 0

            def step() -> int:
                nonlocal counter
                log.append(topic, 0, batch)
                counter += 1
                if flush_every and counter % flush_every == 0:
                    log.flush([(topic, 0)])
                return len(batch)

            return step

        max_appends = (1024 * MIB) // len(batch)  # cap the data written per case at 1 GiB
        ops, secs, moved = timed(budget_s, max_appends, append("nosync", 0))
        rows.append(Row("append, no fsync", ops, secs, moved))
        ops, secs, moved = timed(budget_s, max_appends, append("sync", 1))
        rows.append(Row("append + fsync every request (acks=-1)", ops, secs, moved))
        ops, secs, moved = timed(budget_s, max_appends, append("sync64", 64))
        rows.append(Row("append + fsync every 64 requests", ops, secs, moved))
        rows.append(_async_flush_row(log, batch, budget_s, max_appends))
        log.flush()

        end = log.log_end_offset("nosync", 0)
        position = 0

        def sequential() -> int:
            nonlocal position
            if position >= end:
                position = 0
            data = log.read("nosync", 0, position, MIB).records
            position = _next_offset(data)
            return len(data)

        ops, secs, moved = timed(budget_s, 10**9, sequential)
        rows.append(Row("read sequential, 1 MiB fetches", ops, secs, moved))

        rng = random.Random(7)

        def random_read() -> int:
            return len(log.read("nosync", 0, rng.randrange(end), len(batch)).records)

        ops, secs, moved = timed(budget_s, 10**9, random_read)
        rows.append(Row("read random offset, one batch", ops, secs, moved))
    finally:
        log.close()
    return rows


def _async_flush_row(log: TopicLog, batch: bytes, budget_s: float, max_appends: int) -> Row:
    """acks=-1 the way the server would do it: append on the loop, fsync in the executor."""

    async def scenario() -> tuple[int, float]:
        operations = 0
        started = time.perf_counter()
        deadline = started + budget_s
        while operations < max_appends and time.perf_counter() < deadline:
            log.append("async", 0, batch)
            await log.flush_async([("async", 0)])
            operations += 1
        return operations, time.perf_counter() - started

    ops, secs = asyncio.run(scenario())
    return Row("append + flush_async every request", ops, secs, ops * len(batch))


def _next_offset(data: bytes) -> int:
    """Offset after the last batch in a fetch response."""
    pos = 0
    last = 0
    while pos < len(data):
        last = pos
        pos += int.from_bytes(data[pos + 8 : pos + 12], "big", signed=True) + 12
    base = int.from_bytes(data[last : last + 8], "big", signed=True)
    delta = int.from_bytes(data[last + 23 : last + 27], "big", signed=True)
    return base + delta + 1


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--seconds-per-case", type=float, default=3.0, help="time budget of each case")
    parser.add_argument("--batch-records", type=int, default=100)
    parser.add_argument("--value-bytes", type=int, default=150)
    parser.add_argument("--dir", type=Path, default=None, help="data directory (default: a fresh temp dir)")
    args = parser.parse_args()
    budget = min(max(args.seconds_per_case, 0.1), 4.0)  # 7 cases: the whole run stays under 30 s
    root = Path(tempfile.mkdtemp(prefix="topiclog-bench-", dir=args.dir))
    try:
        batch_bytes = len(build_batch(args.batch_records, args.value_bytes))
        rows = run(root, budget, args.batch_records, args.value_bytes)
    finally:
        shutil.rmtree(root, ignore_errors=True)
    print(
        f"topic log benchmark: batches of {args.batch_records} records, {batch_bytes} bytes; data in {root}"
    )
    print(f"{'case':<42} {'ops':>9} {'ops/s':>11} {'MiB/s':>9}")
    for row in rows:
        print(f"{row.case:<42} {row.operations:>9} {row.ops_per_s:>11.0f} {row.mib_per_s:>9.1f}")


if __name__ == "__main__":
    main()
