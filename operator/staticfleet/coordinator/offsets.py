"""Committed offsets, keyed group -> topic -> partition. The stored value is the record that committed it."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from staticfleet.coordinator.records import OffsetCommitRecord


@dataclass(slots=True)
class OffsetStore:
    by_group: dict[str, dict[str, dict[int, OffsetCommitRecord]]] = field(default_factory=dict)

    def put(self, record: OffsetCommitRecord) -> None:
        topics = self.by_group.get(record.group_id)
        if topics is None:
            topics = self.by_group[record.group_id] = {}
        partitions = topics.get(record.topic)
        if partitions is None:
            partitions = topics[record.topic] = {}
        partitions[record.partition] = record

    def get(self, group_id: str, topic: str, partition: int) -> OffsetCommitRecord | None:
        topics = self.by_group.get(group_id)
        if topics is None:
            return None
        partitions = topics.get(topic)
        return None if partitions is None else partitions.get(partition)

    def delete(self, group_id: str, topic: str, partition: int) -> None:
        topics = self.by_group.get(group_id)
        if topics is None:
            return
        partitions = topics.get(topic)
        if partitions is None:
            return
        partitions.pop(partition, None)
        if not partitions:
            del topics[topic]
        if not topics:
            del self.by_group[group_id]

    def of_group(self, group_id: str) -> dict[str, dict[int, OffsetCommitRecord]]:
        return self.by_group.get(group_id, {})

    def has_group(self, group_id: str) -> bool:
        return group_id in self.by_group

    def all(self) -> Iterator[OffsetCommitRecord]:
        for topics in self.by_group.values():
            for partitions in topics.values():
                yield from partitions.values()

    def __len__(self) -> int:
        return sum(len(p) for topics in self.by_group.values() for p in topics.values())
