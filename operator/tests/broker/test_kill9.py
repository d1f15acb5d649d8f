"""kill -9 of the coordinator, again and again, under load from real clients.

Three confluent-kafka consumers of a static group consume a topic a producer keeps writing to and
commit after every batch, one of them restarts now and then (a static replacement, persisted before
it is answered), and a protocol client keeps eight offset commits in flight. The coordinator is
killed at a random moment of each round. Every commit a client saw acknowledged must be back after
the restart, and the group must never rebalance because of one.
"""

from __future__ import annotations

import asyncio
import contextlib
import random
import threading
import time
from pathlib import Path

from confluent_kafka import KafkaException, Producer
from kafka import KafkaAdminClient
from kafka.admin import NewTopic

from conformance import driver as d

from .processes import CoordinatorProcess, wait_until
from .test_real_clients import PARTITIONS, Fleet, committed

KILLS = 20
PROBE_GROUP = "probe"
PROBE_PARTITIONS = 8


class Prober:
    """Keeps one OffsetCommit per partition in flight; remembers the highest offset acknowledged."""

    def __init__(self) -> None:
        self.acknowledged: dict[int, int] = {}
        self.sent: dict[int, int] = {}
        self.next_offset = 0

    async def run(self, bootstrap: str, seconds: float) -> int:
        host, port = bootstrap.split(":")
        answered = 0
        async with d.Driver(host, int(port)) as driver:
            connection = await driver.connect("prober")
            deadline = time.monotonic() + seconds

            async def commit_loop(partition: int) -> None:
                nonlocal answered
                while time.monotonic() < deadline:
                    self.next_offset += 1
                    offset = self.next_offset
                    self.sent[partition] = offset
                    request = d.offset_commit(8, PROBE_GROUP, offsets={"probe-topic": {partition: offset}})
                    raw = await connection.send(request).result(10)
                    if d.partition_errors(raw) == [0]:
                        self.acknowledged[partition] = max(self.acknowledged.get(partition, 0), offset)
                        answered += 1

            # Killed under us: whatever was in flight was never acknowledged.
            with contextlib.suppress(ConnectionError, OSError, d.StillParked):
                await asyncio.gather(*(commit_loop(p) for p in range(PROBE_PARTITIONS)))
        return answered


def _probe_committed(bootstrap: str) -> dict[int, int]:
    async def fetch() -> dict[int, int]:
        host, port = bootstrap.split(":")
        async with d.Driver(host, int(port)) as driver:
            connection = await driver.connect("fetch")
            request = d.offset_fetch(
                7, PROBE_GROUP, partitions={"probe-topic": list(range(PROBE_PARTITIONS))}
            )
            raw = await connection.send(request).result(10)
            return {
                p.partition_index: p.committed_offset
                for t in raw.topics
                for p in t.partitions
                if p.committed_offset >= 0
            }

    return asyncio.run(fetch())


def _produce_until(bootstrap: str, topic: str, stop: threading.Event) -> None:
    """A record every 10 ms until `stop`. librdkafka retries through the kills on its own; what is still
    queued at the end is dropped, so that no client thread outlives the test."""
    producer = Producer({"bootstrap.servers": bootstrap, "reconnect.backoff.max.ms": 500})
    i = 0
    try:
        while not stop.is_set():
            # A full queue while the coordinator is down: that record is skipped.
            with contextlib.suppress(BufferError, KafkaException):
                producer.produce(topic, f"v{i}".encode(), partition=i % PARTITIONS)
            producer.poll(0)
            i += 1
            time.sleep(0.01)
    finally:
        # What was queued at the last kill may never be sent: that is fine.
        producer.purge()
        producer.flush(10)


def test_kill_9_loses_no_acknowledged_commit_and_causes_no_rebalance(tmp_path: Path) -> None:
    rng = random.Random(20261126)
    coordinator = CoordinatorProcess(tmp_path / "data")
    coordinator.start()
    fleet = Fleet(coordinator, "confluent")
    stop = threading.Event()
    producer = threading.Thread(target=_produce_until, args=(coordinator.bootstrap, fleet.topic, stop))
    prober = Prober()
    restarts_s: list[float] = []
    probe_commits = 0
    try:
        admin = KafkaAdminClient(bootstrap_servers=coordinator.bootstrap)
        admin.create_topics([NewTopic("probe-topic", PROBE_PARTITIONS, 1)])
        admin.close()
        for instance in ("c0", "c1", "c2"):
            fleet.start(instance)
        producer.start()
        before = fleet.settled_with("c0", "c1", "c2")
        rebalances_before = _rebalances(coordinator, fleet.group)
        for kill in range(KILLS):
            if kill % 7 == 3:
                # A consumer restarts: it rejoins with its instance id and replaces itself, no rebalance.
                fleet.consumers["c2"].kill()
                fleet.start("c2")
            probe_commits += asyncio.run(_killed_during(coordinator, prober, rng.uniform(0.5, 2.0)))
            started = time.monotonic()
            coordinator.start()
            restarts_s.append(time.monotonic() - started)
            recovered = _probe_committed(coordinator.bootstrap)
            for partition, offset in prober.acknowledged.items():
                assert recovered.get(partition, -1) >= offset, f"kill {kill + 1}: acknowledged {offset} lost"
                assert recovered[partition] <= prober.sent[partition], "a commit nobody sent"
        stop.set()
        producer.join(timeout=30)
        after = fleet.settled_with("c0", "c1", "c2")
        assert after["generation"] == before["generation"], "a restart caused a rebalance"
        acknowledged: dict[int, int] = {}
        for consumer in fleet.consumers.values():
            for event in consumer.of("committed"):
                for partition, offset in event["offsets"].items():
                    acknowledged[int(partition)] = max(acknowledged.get(int(partition), 0), offset)
        wait_until(lambda: committed(coordinator.bootstrap, fleet.group), 30, "committed offsets")
        final = committed(coordinator.bootstrap, fleet.group)
        lost = {p: o for p, o in acknowledged.items() if final.get(p, -1) < o}
        assert not lost, f"acknowledged consumer commits lost: {lost} (now {final})"
        assert sum(acknowledged.values()) > 0 and probe_commits > 100
        # A consumer that could not reach the coordinator for its whole session may join again, with its
        # member id, and be answered from the current generation: that is no rebalance.
        assert _rebalances(coordinator, fleet.group) == rebalances_before, "a restart caused a rebalance"
        restarts_s.sort()
        print(
            f"\n{KILLS} kills: {probe_commits} probe commits and {sum(acknowledged.values())} consumed"
            f" records acknowledged, 0 lost; generation {before['generation']} -> {after['generation']};"
            f" restart to ready median {restarts_s[len(restarts_s) // 2]:.2f} s, max {restarts_s[-1]:.2f} s"
        )
    finally:
        stop.set()
        producer.join(timeout=60)
        for consumer in fleet.consumers.values():
            consumer.stop()
        coordinator.stop()


def _rebalances(coordinator: CoordinatorProcess, group: str) -> int:
    return sum(1 for e in coordinator.events() if e["type"] == "rebalance_started" and e["group"] == group)


async def _killed_during(coordinator: CoordinatorProcess, prober: Prober, after_s: float) -> int:
    """Run the prober and SIGKILL the coordinator `after_s` seconds in."""
    load = asyncio.ensure_future(prober.run(coordinator.bootstrap, 30))
    await asyncio.sleep(after_s)
    await asyncio.to_thread(coordinator.kill)
    return await load
