"""A writer appending under load is SIGKILLed at random moments; recovery keeps every acknowledged
record and loads nothing corrupt."""

from __future__ import annotations

import os
import random
import select
import signal
import subprocess
import sys
import time
from pathlib import Path

from staticfleet.coordinator.log import DurableLog
from staticfleet.coordinator.records import OffsetCommitRecord

WRITER = r"""
import sys
from staticfleet.coordinator.log import DurableLog
from staticfleet.coordinator.records import OffsetCommitRecord

directory, start = sys.argv[1], int(sys.argv[2])
log = DurableLog(directory, fsync=False)
for _ in log.recover():
    pass
sys.stdout.write("ready\n")  # the kill timer starts here: start-up time must not eat the window
sys.stdout.flush()
seq = start
while True:
    batch_size = 1 + (seq * 7919) % 3000  # frames from tiny to ~200 KB, so kills land mid-write
    batch = [OffsetCommitRecord("g", "t", p, seq + p, -1, "x" * (seq % 50), 0) for p in range(batch_size)]
    log.append(batch)
    log.sync()
    seq += batch_size
    sys.stdout.write(f"{seq}\n")
    sys.stdout.flush()
"""

KILLS = 50
KILLS_PER_LOG = 5


def _recover(directory: Path) -> list[OffsetCommitRecord]:
    log = DurableLog(directory, fsync=False)
    records = [r for r in log.recover() if isinstance(r, OffsetCommitRecord)]
    log.close()
    return records


def _read_line(fd: int) -> bytes:
    """One line, read unbuffered so that the reads after it see every later byte."""
    line = b""
    while not line.endswith(b"\n"):
        byte = os.read(fd, 1)
        if not byte:
            break
        line += byte
    return line.rstrip(b"\n")


def test_sigkilled_writer_loses_no_acknowledged_record_and_never_loads_a_corrupt_one(tmp_path: Path) -> None:
    rng = random.Random(20261122)
    env = dict(os.environ, PYTHONPATH=os.pathsep.join(sys.path))
    next_seq = 0
    kills = 0
    torn_tails = 0
    records_checked = 0
    while kills < KILLS:
        # Recovery replays the whole log, so each log takes a bounded number of kills and the test
        # stays linear in the number of kills.
        directory = tmp_path / f"log-{kills // KILLS_PER_LOG}"
        if kills % KILLS_PER_LOG == 0:
            assert kills == 0 or next_seq > 0, "a log took every kill without recovering a record"
            records_checked += next_seq
            next_seq = 0
        child = subprocess.Popen(
            [sys.executable, "-c", WRITER, str(directory), str(next_seq)],
            stdout=subprocess.PIPE,
            env=env,
        )
        assert child.stdout is not None
        assert _read_line(child.stdout.fileno()) == b"ready"
        acknowledged = next_seq
        deadline = time.monotonic() + rng.uniform(0.02, 0.25)
        buffered = b""
        while time.monotonic() < deadline:
            ready, _, _ = select.select([child.stdout], [], [], 0.01)
            if ready:
                chunk = os.read(child.stdout.fileno(), 65536)
                if not chunk:
                    break
                buffered += chunk
                *lines, buffered = buffered.split(b"\n")
                if lines:
                    acknowledged = int(lines[-1])
        child.send_signal(signal.SIGKILL)
        child.wait(timeout=10)
        # Whatever was printed before the kill counts as acknowledged too.
        rest = buffered + child.stdout.read()
        child.stdout.close()
        complete = [line for line in rest.split(b"\n")[:-1] if line]
        if complete:
            acknowledged = int(complete[-1])
        kills += 1
        torn_tails += len(list(directory.glob("*.corrupt-*")))
        for aside in directory.glob("*.corrupt-*"):
            aside.unlink()

        records = _recover(directory)
        expected = 0
        remaining_in_batch = 0
        batch_start = 0
        for record in records:
            assert record.offset == expected, f"kill {kills}: gap or garbage at offset {expected}"
            if remaining_in_batch == 0:
                assert record.partition == 0, "a batch must be recovered whole or not at all"
                batch_start = record.offset
                remaining_in_batch = 1 + (batch_start * 7919) % 3000
            assert record.partition == record.offset - batch_start
            assert record.metadata == "x" * (batch_start % 50)
            remaining_in_batch -= 1
            expected += 1
        assert remaining_in_batch == 0, "the last recovered batch is incomplete"
        assert expected >= acknowledged, f"kill {kills}: acknowledged {acknowledged}, recovered {expected}"
        next_seq = expected
    records_checked += next_seq
    assert kills == KILLS
    assert next_seq > 0
    print(f"{kills} kills, {torn_tails} torn tails cut, {records_checked} records")
