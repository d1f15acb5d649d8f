"""bench/fleet_ops.py's committed start offsets, against the real embedded coordinator with a real librdkafka
member: every partition of a fleet's topic has offset 0 committed in its group before any member joins, so
that a partition's first fetch by a new owner does not wait on librdkafka's offset query for
`auto.offset.reset`."""

from __future__ import annotations

from pathlib import Path

from confluent_kafka import Consumer, TopicPartition

from bench.fleet_ops import Embedded, commit_start_offsets

PARTITIONS = 3


def test_every_partition_of_a_fleets_topic_starts_with_offset_zero_committed_in_its_group(
    tmp_path: Path,
) -> None:
    coordinator = Embedded(tmp_path / "embedded")
    try:
        coordinator.create_topic("orders", PARTITIONS)
        commit_start_offsets(coordinator.bootstrap, "shop.fleet", "orders", PARTITIONS)
        reader = Consumer({"bootstrap.servers": coordinator.bootstrap, "group.id": "shop.fleet"})
        other = Consumer({"bootstrap.servers": coordinator.bootstrap, "group.id": "another.fleet"})
        try:
            asked = [TopicPartition("orders", p) for p in range(PARTITIONS)]
            committed = reader.committed(asked, timeout=10)
            elsewhere = other.committed(asked, timeout=10)
        finally:
            reader.close()
            other.close()
    finally:
        coordinator.stop()
    assert sorted((tp.partition, tp.offset) for tp in committed) == [(p, 0) for p in range(PARTITIONS)]
    assert all(tp.error is None for tp in committed)
    # Only the fleet's own group: another group still has nothing committed (-1001, OFFSET_INVALID).
    assert {tp.offset for tp in elsewhere} == {-1001}
