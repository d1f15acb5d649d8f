"""The instance ids of a process that runs several static members: Kafka Streams' rule.

Kafka Streams runs one consumer per stream thread and gives each its own static identity:
`StreamsConfig.getMainConsumerConfigs` sets `group.instance.id + "-" + threadIdx` for the thread's
consumer, and `KafkaStreams` numbers its threads from 1. A process configured with the instance id
`orders-3` and two threads is the members `orders-3-1` and `orders-3-2`; the group has no member
`orders-3`, so removing `orders-3` by instance id removes nothing. Any client that runs several consumers
in one process can follow the same rule.
"""

from __future__ import annotations

MAX_MEMBERS_PER_POD = 64
"""The most members one pod may run (the CRD's bound on spec.membersPerPod)."""


def member_instance_ids(base: str, members_per_pod: int) -> tuple[str, ...]:
    """The instance ids of a process whose own instance id is `base`: `base` itself for one member,
    else `base-1` .. `base-<members_per_pod>`."""
    if members_per_pod < 1:
        raise ValueError(f"members per pod must be at least 1, not {members_per_pod}")
    if members_per_pod == 1:
        return (base,)
    return tuple(f"{base}-{k}" for k in range(1, members_per_pod + 1))


def member_index(instance_id: str, base: str) -> int | None:
    """k when `instance_id` is `base-k` (k from 1, written without leading zeros), else None."""
    prefix = f"{base}-"
    if not instance_id.startswith(prefix):
        return None
    tail = instance_id[len(prefix) :]
    if not (tail.isascii() and tail.isdigit()) or tail != str(int(tail)) or int(tail) < 1:
        return None
    return int(tail)
