"""A byte flipped at 100 positions of a coordinator log, and at 100 of a snapshot, each followed by a
restart: never an acknowledged record missing while the coordinator reports ready. Either recovery
loads everything that is intact, or it refuses to start with the error that names the damage; then
`staticfleet coordinator repair` brings it up, the start logs the loss, and exactly what the repair
reports as kept is there.

The logs are written by a real coordinator (an in-process BrokerServer, fsync on) answering OffsetCommit
and JoinGroup/SyncGroup over sockets; "acknowledged" is an answer with no error. Each restart runs the
recovery `staticfleet coordinator` runs before it is ready (CoordinatorHost.recover); a few positions
also start the real process, which must exit with status 4 and never answer /readyz.
"""

from __future__ import annotations

import asyncio
import json
import logging
import shutil
import subprocess
import sys
import time
import urllib.request
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from conformance import driver as d
from e2e.localcluster.ports import free_port
from staticfleet import cli
from staticfleet.broker.host import CoordinatorHost
from staticfleet.broker.security.state import SecurityState
from staticfleet.broker.security.users import CredentialStore
from staticfleet.broker.server import BrokerServer, BrokerSettings
from staticfleet.coordinator import CoordinatorConfig
from staticfleet.coordinator.integrity import COORDINATOR_LOG_DIR, LogCorruptError, inspect
from staticfleet.coordinator.logformat import FRAME_OVERHEAD, Frame
from staticfleet.coordinator.records import GroupMetadataRecord, OffsetCommitRecord, decode_records

from ..broker.processes import CoordinatorProcess, _env

LEDGER = "ledger"  # simple commits, one set of partitions per request
FLEET = "fleet"  # a static member's group: its group record
INSTANCE = "fleet-0"
TOPIC = "orders"
REQUESTS = 120
PARTITIONS_PER_REQUEST = 10
METADATA = "m" * 200  # larger records: a snapshot takes several frames
POSITIONS = 100
CONFIG = CoordinatorConfig(initial_rebalance_delay_ms=0, min_session_timeout_ms=100)

Key = tuple[str, str, int]


@dataclass
class Written:
    data_dir: Path
    acknowledged: dict[Key, int]
    instance_ids: set[str]


def _write(data_dir: Path, **settings: Any) -> Written:
    """Run a real coordinator, commit through it, stop it cleanly; what it acknowledged."""
    acknowledged: dict[Key, int] = {}
    instances: set[str] = set()

    async def main() -> None:
        server = BrokerServer(
            BrokerSettings(data_dir=data_dir, listen_port=0, coordinator=CONFIG, fsync=True, **settings)
        )
        await server.start()
        try:
            async with d.Driver("127.0.0.1", server.port) as driver:
                conn = await driver.connect("writer")
                created = await conn.request(d.create_topics(7, {TOPIC: REQUESTS * PARTITIONS_PER_REQUEST}))
                assert int(created.topics[0].error_code) == 0
                join = await conn.request(
                    d.join_group(
                        5, FLEET, instance_id=INSTANCE, protocols=(("range", d.subscription(TOPIC)),)
                    )
                )
                assert int(join.error_code) == 0
                sync = await conn.request(
                    d.sync_group(
                        3,
                        FLEET,
                        generation=int(join.generation_id),
                        member_id=join.member_id,
                        instance_id=INSTANCE,
                        assignments=((join.member_id, d.assignment({TOPIC: [0]})),),
                    )
                )
                if int(sync.error_code) == 0:
                    instances.add(INSTANCE)
                for i in range(REQUESTS):
                    parts = {
                        p: 1000 + p
                        for p in range(i * PARTITIONS_PER_REQUEST, (i + 1) * PARTITIONS_PER_REQUEST)
                    }
                    raw = await conn.send(
                        d.offset_commit(8, LEDGER, offsets={TOPIC: parts}, metadata=METADATA)
                    ).result(10)
                    if set(d.partition_errors(raw)) == {0}:
                        acknowledged.update({(LEDGER, TOPIC, p): o for p, o in parts.items()})
        finally:
            await server.stop()

    asyncio.run(main())
    assert len(acknowledged) == REQUESTS * PARTITIONS_PER_REQUEST and instances == {INSTANCE}
    return Written(data_dir, acknowledged, instances)


@pytest.fixture(scope="module")
def plain_log(tmp_path_factory: pytest.TempPathFactory) -> Written:
    return _write(tmp_path_factory.mktemp("plain") / "data")


@pytest.fixture(scope="module")
def with_snapshot(tmp_path_factory: pytest.TempPathFactory) -> Written:
    written = _write(tmp_path_factory.mktemp("snap") / "data", max_record_bytes_between_snapshots=64 * 1024)
    assert list((written.data_dir / COORDINATOR_LOG_DIR).glob("snapshot-*.sfs")), (
        "the workload made a snapshot"
    )
    return written


# --- the state a set of frames rebuilds ----------------------------------------------------------------


@dataclass(frozen=True)
class Placed:
    file: str
    frame: Frame
    records: list[Any]


def _frames(log_dir: Path) -> list[Placed]:
    """Every frame recovery reads, in order, with its records."""
    placed = []
    for file in inspect(log_dir).files:
        data = file.path.read_bytes()
        for frame in file.scan.frames:
            records = list(decode_records(data[frame.records_at : frame.end], frame.record_count))
            placed.append(Placed(file.path.name, frame, records))
    return placed


def _state(frames: list[Placed]) -> tuple[dict[Key, int], set[str]]:
    offsets: dict[Key, int] = {}
    instances: set[str] = set()
    for placed in frames:
        for record in placed.records:
            if isinstance(record, OffsetCommitRecord):
                offsets[(record.group_id, record.topic, record.partition)] = record.offset
            elif isinstance(record, GroupMetadataRecord) and record.group_id == FLEET:
                instances = {m.group_instance_id for m in record.members if m.group_instance_id}
    return offsets, instances


def _restart(data_dir: Path) -> tuple[dict[Key, int], set[str]] | LogCorruptError:
    """The coordinator's recovery, as `staticfleet coordinator` runs it before it is ready."""
    host = CoordinatorHost(data_dir, CONFIG, fsync=False)
    host.security = SecurityState(None, CredentialStore())
    try:
        try:
            host.recover()
        except LogCorruptError as refused:
            assert not host.ready, "a refused recovery never reports ready"
            return refused
        assert host.ready
        offsets = {(r.group_id, r.topic, r.partition): r.offset for r in host.coordinator.offsets.all()}
        group = host.coordinator.groups.get(FLEET)
        members = group.members.values() if group is not None else []
        return offsets, {m.group_instance_id for m in members if m.group_instance_id}
    finally:
        host.durable.close()
        host.release()


# --- positions -----------------------------------------------------------------------------------------


def _positions(size: int, frames: list[Frame]) -> list[int]:
    """100 positions: the file header, every field of the first and the last frame, and the rest spread
    evenly over the file."""
    first, last = frames[0], frames[-1]
    fields = (0, 3, 4, 7, 8, 9, 12, FRAME_OVERHEAD, FRAME_OVERHEAD + 20)
    chosen = {0, 4, 7} | {first.offset + f for f in fields} | {last.offset + f for f in fields}
    chosen |= {size - 1, size - 2}
    step = 1
    while len(chosen) < POSITIONS:
        chosen.add((len(chosen) * 7919 * step) % size)
        step += 1
    return sorted(chosen)[:POSITIONS]


def _target(written: Written, kind: str) -> Path:
    log_dir = written.data_dir / COORDINATOR_LOG_DIR
    return sorted(log_dir.glob("snapshot-*.sfs" if kind == "snapshot" else "log-*.sfl"))[-1]


def _flipped_copy(
    written: Written, kind: str, position: int, where: Path, *, whole: bool = False
) -> tuple[Path, Path]:
    """A copy of the data directory (or of its coordinator log only) with one byte flipped."""
    data_dir = where / f"{kind}-{position}"
    if whole:
        shutil.copytree(written.data_dir, data_dir)
    else:
        shutil.copytree(written.data_dir / COORDINATOR_LOG_DIR, data_dir / COORDINATOR_LOG_DIR)
    target = data_dir / COORDINATOR_LOG_DIR / _target(written, kind).name
    data = bytearray(target.read_bytes())
    data[position] ^= 0xFF
    target.write_bytes(bytes(data))
    return data_dir, target


def _damage_start(position: int, frames: list[Frame], header: int) -> int:
    """Where the damage a flip at `position` makes begins: the file header, or the frame holding it."""
    if position < header:
        return 0
    return next(f.offset for f in frames if f.offset <= position < f.end)


def _sweep(written: Written, kind: str, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> dict[str, int]:
    original = _frames(written.data_dir / COORDINATOR_LOG_DIR)
    name = _target(written, kind).name
    in_target = [p.frame for p in original if p.file == name]
    size = _target(written, kind).stat().st_size
    outcomes = {"recovered": 0, "refused": 0}
    for position in _positions(size, in_target):
        data_dir, target = _flipped_copy(written, kind, position, tmp_path)
        outcome = _restart(data_dir)
        if not isinstance(outcome, LogCorruptError):
            offsets, instances = outcome
            assert all(offsets.get(k) == o for k, o in written.acknowledged.items()), position
            assert instances == written.instance_ids, position
            outcomes["recovered"] += 1
            continue
        outcomes["refused"] += 1
        message = str(outcome)
        start = _damage_start(position, in_target, 8)
        assert f"{target}: " in message and f"(bytes {start} to " in message, (position, message)
        assert f"staticfleet coordinator repair --data-dir {data_dir}" in message

        assert cli.main(["coordinator", "repair", "--data-dir", str(data_dir)]) == 0
        (report_path,) = (data_dir / COORDINATOR_LOG_DIR).glob("repair-*.json")
        report = json.loads(report_path.read_text())
        dropped = [(x["file"], x["start"], x["end"]) for x in report["dropped"]]
        assert any(f == name and s <= position < e for f, s, e in dropped), (position, dropped)
        caplog.clear()
        with caplog.at_level(logging.WARNING, logger="staticfleet.coordinator.log"):
            repaired = _restart(data_dir)
        assert not isinstance(repaired, LogCorruptError), (position, repaired)
        assert f"repaired at {report['repairedAt']}" in caplog.text, "the start logs the loss"
        # Exactly what the repair kept: every frame outside the dropped bytes, nothing else.
        kept = [
            p
            for p in original
            if not any(f == p.file and s < p.frame.end and p.frame.offset < e for f, s, e in dropped)
        ]
        assert len(kept) < len(original) or position < 8, "only a file header's damage loses no frame"
        assert repaired == _state(kept), position
        shutil.rmtree(data_dir)
    return outcomes


def test_a_byte_flipped_anywhere_in_the_log_is_recovered_or_refused_then_repaired_with_the_loss_reported(
    plain_log: Written, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    outcomes = _sweep(plain_log, "log", tmp_path, caplog)
    assert sum(outcomes.values()) == POSITIONS
    # A flipped byte is never a crash's torn tail (a frame cut short): every flip refuses.
    assert outcomes["refused"] == POSITIONS, outcomes


def test_a_byte_flipped_anywhere_in_a_snapshot_is_recovered_or_refused_then_repaired_with_the_loss_reported(
    with_snapshot: Written, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    outcomes = _sweep(with_snapshot, "snapshot", tmp_path, caplog)
    assert sum(outcomes.values()) == POSITIONS and outcomes["refused"] == POSITIONS, outcomes


def test_a_write_a_crash_cut_short_at_any_byte_is_cut_and_everything_acknowledged_is_there(
    plain_log: Written, tmp_path: Path
) -> None:
    """The other half of the rule: an unfinished last write (never acknowledged) is cut by itself."""
    log_dir = plain_log.data_dir / COORDINATOR_LOG_DIR
    unfinished = (log_dir / _target(plain_log, "log").name).read_bytes()
    last = _frames(log_dir)[-1].frame
    frame = unfinished[last.offset : last.end]  # a frame as the coordinator writes one
    for cut in range(1, len(frame), max(1, len(frame) // 40)):
        data_dir = tmp_path / f"cut-{cut}"
        shutil.copytree(log_dir, data_dir / COORDINATOR_LOG_DIR)
        target = data_dir / COORDINATOR_LOG_DIR / _target(plain_log, "log").name
        with target.open("ab") as handle:
            handle.write(frame[:cut])
        outcome = _restart(data_dir)
        assert not isinstance(outcome, LogCorruptError), (cut, outcome)
        assert outcome == (plain_log.acknowledged, plain_log.instance_ids), cut
        assert target.read_bytes() == unfinished, "cut back to the last intact frame"
        shutil.rmtree(data_dir)


# --- the real process ----------------------------------------------------------------------------------


def _run_refused(data_dir: Path, timeout: float = 60) -> tuple[int, str]:
    """Start `staticfleet coordinator` on a damaged log: it must exit without ever being ready."""
    http = free_port()
    command = [
        sys.executable, "-m", "staticfleet.cli", "coordinator", "--listen", f"127.0.0.1:{free_port()}",
        "--http", f"127.0.0.1:{http}", "--data-dir", str(data_dir),
    ]  # fmt: skip
    process = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=_env())
    deadline = time.monotonic() + timeout
    while process.poll() is None:
        assert time.monotonic() < deadline, "the coordinator neither became ready nor exited"
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{http}/readyz", timeout=1) as r:
                assert r.status != 200, "a coordinator on a damaged log reported ready"
        except OSError:
            pass
        time.sleep(0.1)
    _, stderr = process.communicate()
    return process.returncode, stderr.decode()


def _fetch_committed(bootstrap: str) -> dict[Key, int]:
    async def fetch() -> dict[Key, int]:
        host, port = bootstrap.split(":")
        async with d.Driver(host, int(port)) as driver:
            conn = await driver.connect("fetch")
            partitions = list(range(REQUESTS * PARTITIONS_PER_REQUEST))
            raw = await conn.send(d.offset_fetch(7, LEDGER, partitions={TOPIC: partitions})).result(10)
            return {
                (LEDGER, t.name, p.partition_index): p.committed_offset
                for t in raw.topics
                for p in t.partitions
                if p.committed_offset >= 0
            }

    return asyncio.run(fetch())


@pytest.mark.parametrize(
    ("kind", "where"), [("log", "header"), ("log", "middle"), ("log", "last"), ("snapshot", "middle")]
)
def test_the_coordinator_process_refuses_a_damaged_log_and_starts_after_repair_reporting_the_loss(
    plain_log: Written, with_snapshot: Written, tmp_path: Path, kind: str, where: str
) -> None:
    written = plain_log if kind == "log" else with_snapshot
    original = _frames(written.data_dir / COORDINATOR_LOG_DIR)
    name = _target(written, kind).name
    in_target = [p.frame for p in original if p.file == name]
    position = {
        "header": 5,
        "middle": in_target[len(in_target) // 2].offset + FRAME_OVERHEAD + 7,
        "last": in_target[-1].end - 1,
    }[where]
    data_dir, target = _flipped_copy(written, kind, position, tmp_path, whole=True)
    start = _damage_start(position, in_target, 8)

    status, stderr = _run_refused(data_dir)
    assert status == 4, stderr
    (error,) = [line for line in stderr.splitlines() if " ERROR " in line]
    assert f"{target}: " in error and f"(bytes {start} to " in error
    assert f"staticfleet coordinator repair --data-dir {data_dir}" in error

    repair = subprocess.run(
        [sys.executable, "-m", "staticfleet.cli", "coordinator", "repair", "--data-dir", str(data_dir)],
        capture_output=True,
        env=_env(),
        timeout=60,
    )
    assert repair.returncode == 0, repair.stderr
    assert f"{name}: dropped bytes {start} to " in repair.stdout.decode()

    report = json.loads(next((data_dir / COORDINATOR_LOG_DIR).glob("repair-*.json")).read_text())
    dropped = [(x["file"], x["start"], x["end"]) for x in report["dropped"]]
    kept = [
        p
        for p in original
        if not any(f == p.file and s < p.frame.end and p.frame.offset < e for f, s, e in dropped)
    ]
    coordinator = CoordinatorProcess(data_dir)
    coordinator.start(timeout=60)
    try:
        offsets, instances = _state(kept)
        assert _fetch_committed(coordinator.bootstrap) == offsets
        group = coordinator.group(FLEET)
        members = group["memberList"] if group is not None else []
        assert {m["instanceId"] for m in members} == instances
    finally:
        coordinator.stop()
    started = coordinator.log_path.read_text()
    assert f"this coordinator log was repaired at {report['repairedAt']}" in started
