"""A coordinator whose data directory fills up: a real 4 MiB tmpfs, real consumers.

Commits answer Kafka's error for a failed append, heartbeats go on, the group stays Stable, nothing
acknowledged is lost, and once space is back commits succeed without a restart.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import subprocess
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
from kafka import KafkaConsumer, TopicPartition
from kafka.structs import OffsetAndMetadata

from conformance import driver as d

from .processes import CoordinatorProcess, wait_until
from .test_real_clients import PARTITIONS, Fleet, committed

SESSION_S = 15  # the consumers' session timeout (test_real_clients.SESSION_MS)


@pytest.fixture
def small_disk(tmp_path: Path) -> Iterator[Path]:
    """A 4 MiB tmpfs mounted for this test (needs root, as the test machines and CI run)."""
    mount_point = tmp_path / "small"
    mount_point.mkdir()
    subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", str(mount_point)], check=True)
    try:
        yield mount_point
    finally:
        subprocess.run(["umount", "-l", str(mount_point)], check=False)


def _fill(directory: Path) -> Path:
    """Write a file until the file system has no space left."""
    filler = directory / "filler"
    chunk = b"\0" * 65536
    with filler.open("wb", buffering=0) as handle:
        while True:
            try:
                handle.write(chunk)
            except OSError as exc:
                assert exc.errno == errno.ENOSPC
                break
        with contextlib.suppress(OSError):
            while handle.write(b"\0" * 512):  # the last few blocks
                pass
    return filler


def _probe_commit(bootstrap: str, group: str, offset: int, topic: str) -> list[int]:
    """One OffsetCommit (a group outside group management), answered per partition."""

    async def run() -> list[int]:
        host, port = bootstrap.split(":")
        async with d.Driver(host, int(port)) as driver:
            connection = await driver.connect("probe")
            raw = await connection.send(d.offset_commit(8, group, offsets={topic: {0: offset}})).result(10)
            return [int(code) for code in d.partition_errors(raw)]

    return asyncio.run(run())


def test_a_full_disk_refuses_commits_keeps_the_group_stable_and_loses_nothing(
    small_disk: Path, tmp_path: Path
) -> None:
    coordinator = CoordinatorProcess(small_disk / "data")
    coordinator.start()
    fleet = Fleet(coordinator, "confluent")
    filler: Path | None = None
    client: KafkaConsumer | None = None
    try:
        values = fleet.produce(60)
        for instance in ("c0", "c1", "c2"):
            fleet.start(instance)
        before = fleet.settled_with("c0", "c1", "c2")
        wait_until(lambda: sum(committed(coordinator.bootstrap, fleet.group).values()) == 60, 60, "commits")
        acknowledged = committed(coordinator.bootstrap, fleet.group)
        assignments = {i: len(c.of("assigned")) for i, c in fleet.consumers.items()}
        assert _probe_commit(coordinator.bootstrap, "probe", 1, fleet.topic) == [0]

        filler = _fill(small_disk)
        # The log's last page may still take a few small frames; then the disk refuses. Kafka answers
        # an append that failed with a storage error NOT_COORDINATOR (16).
        for offset in range(2, 1_000):
            answer = _probe_commit(coordinator.bootstrap, "probe", offset, fleet.topic)
            if answer == [16]:
                break
            assert answer == [0]
        else:
            raise AssertionError("the full disk took every commit")
        assert _probe_commit(coordinator.bootstrap, "probe", 5_000, fleet.topic) == [16]
        assert _probe_commit(coordinator.bootstrap, "probe-new", 1, fleet.topic) == [16]
        # A real client's commit is retried by the client while the disk is full ...
        client = KafkaConsumer(bootstrap_servers=coordinator.bootstrap, group_id="manual")
        outcome: list[BaseException | None] = []

        def commit() -> None:
            try:
                client.commit(
                    {TopicPartition(fleet.topic, 0): OffsetAndMetadata(42, "", -1)}, timeout_ms=60_000
                )
                outcome.append(None)
            except BaseException as exc:
                outcome.append(exc)

        committer = threading.Thread(target=commit)
        committer.start()
        # Heartbeats go on for longer than a session timeout: no member expires, nobody rebalances.
        time.sleep(SESSION_S + 3)
        during = fleet.view()
        assert (during["state"], during["generation"], during["rebalances"]) == (
            "Stable",
            before["generation"],
            before["rebalances"],
        )
        assert outcome == [], "the commit cannot have succeeded on a full disk"
        metrics = coordinator_metrics(coordinator)
        assert metrics["staticfleet_log_append_failures_total"] >= 2

        filler.unlink()  # space is back: no restart
        filler = None
        committer.join(timeout=60)
        assert outcome == [None], f"the client's commit did not go through once space was back: {outcome}"
        client.close()
        assert _probe_commit(coordinator.bootstrap, "probe", 10_000, fleet.topic) == [0]

        after = fleet.settled_with("c0", "c1", "c2")
        assert (after["generation"], after["rebalances"]) == (before["generation"], before["rebalances"])
        for instance, consumer in fleet.consumers.items():
            assert len(consumer.of("assigned")) == assignments[instance], f"reassigned: {consumer.describe()}"
        for consumer in fleet.consumers.values():
            consumer.stop()

        # Nothing acknowledged is lost: a crash and a restart bring every commit back.
        coordinator.kill()
        coordinator.start()
        assert committed(coordinator.bootstrap, fleet.group) == acknowledged
        assert sorted(acknowledged) == list(range(PARTITIONS)) and sum(acknowledged.values()) == len(values)
        assert committed(coordinator.bootstrap, "manual") == {0: 42}
        assert committed(coordinator.bootstrap, "probe") == {0: 10_000}
        assert committed(coordinator.bootstrap, "probe-new") == {}, "the refused commit stayed refused"
    finally:
        if client is not None:
            client.close()  # a client left open would keep retrying the coordinator after the test
        if filler is not None:
            filler.unlink()
        for consumer in fleet.consumers.values():
            consumer.stop()
        coordinator.stop()


def coordinator_metrics(coordinator: CoordinatorProcess) -> dict[str, float]:
    import urllib.request

    with urllib.request.urlopen(f"http://127.0.0.1:{coordinator.http_port}/metrics", timeout=5) as r:
        text = r.read().decode()
    values = {}
    for line in text.splitlines():
        if line and not line.startswith("#") and "{" not in line:
            name, _, value = line.rpartition(" ")
            values[name] = float(value)
    return values
