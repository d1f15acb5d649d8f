"""The leader's side of the consumer protocol: decode subscriptions, range-assign, encode assignments."""

from __future__ import annotations

import functools
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from staticfleet.coordinator.consumer_protocol import Assignment, decode_subscription, encode_assignment


@dataclass(frozen=True, slots=True)
class Subscriber:
    member_id: str
    instance_id: str | None
    topics: tuple[str, ...]

    def sort_key(self) -> tuple[int, str]:
        # Kafka's assignors order static members by instance id, before dynamic ones ordered by member id.
        return (0, self.instance_id) if self.instance_id is not None else (1, self.member_id)


def range_assign(
    subscribers: Sequence[Subscriber], partitions_per_topic: Mapping[str, int]
) -> dict[str, dict[str, tuple[int, ...]]]:
    """Kafka's RangeAssignor: consecutive ranges per topic, one more for the first `partitions % n`."""
    assignment: dict[str, dict[str, tuple[int, ...]]] = {s.member_id: {} for s in subscribers}
    for topic in sorted({t for s in subscribers for t in s.topics}):
        count = partitions_per_topic.get(topic, 0)
        consumers = sorted((s for s in subscribers if topic in s.topics), key=Subscriber.sort_key)
        share, extra = divmod(count, len(consumers))
        start = 0
        for index, consumer in enumerate(consumers):
            length = share + (1 if index < extra else 0)
            if length:
                assignment[consumer.member_id][topic] = tuple(range(start, start + length))
            start += length
    return assignment


def leader_assignments(
    members: Sequence[tuple[str, str | None, bytes]], partitions_per_topic: Mapping[str, int]
) -> dict[str, bytes]:
    """Encoded assignments for the (member id, instance id, subscription bytes) a JoinGroup leader got."""
    subscribers = [
        Subscriber(member_id, instance_id, subscribed_topics(metadata))
        for member_id, instance_id, metadata in members
    ]
    return {
        member_id: encode_assignment(Assignment(0, partitions))
        for member_id, partitions in range_assign(subscribers, partitions_per_topic).items()
    }


@functools.lru_cache(maxsize=1024)
def subscribed_topics(metadata: bytes) -> tuple[str, ...]:
    """The topics of a subscription; members of a fleet send the same bytes, so decode each once."""
    return decode_subscription(metadata).topics
