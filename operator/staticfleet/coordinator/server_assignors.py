"""The server-side assignors of consumer-protocol groups (KIP-848): `uniform` and `range`, as Kafka's.

Kafka's uniform assignor walks Java hash maps and sets: which member gives up a partition, and which
one receives it, follows their iteration order. So that the same group gets the same assignment here
as on Kafka, the walk follows that order too (`java_order`): a HashMap iterates by bucket, the bucket
being the key's Java hash spread over the table's size, and by insertion within a bucket.

An assignor sees the group as a `GroupSpec` and answers the target assignment of every member.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Hashable, Iterable, Mapping
from dataclasses import dataclass
from typing import Final, TypeVar

K = TypeVar("K", bound=Hashable)

TopicPartitions = dict[uuid.UUID, set[int]]
"""One member's assignment: partitions by topic id."""

UNIFORM: Final = "uniform"
RANGE: Final = "range"
BUILTIN_ASSIGNORS: Final = (UNIFORM, RANGE)
"""group.consumer.assignors by default: the first is the group's default."""


class AssignorError(Exception):
    """The assignor could not assign (Kafka's PartitionAssignorException)."""


# --- Java's iteration orders ------------------------------------------------------------------------


def _int32(value: int) -> int:
    value &= 0xFFFFFFFF
    return value - (1 << 32) if value & 0x80000000 else value


def java_string_hash(text: str) -> int:
    """String.hashCode: over UTF-16 code units."""
    h = 0
    raw = text.encode("utf-16-be")
    for i in range(0, len(raw), 2):
        h = (31 * h + ((raw[i] << 8) | raw[i + 1])) & 0xFFFFFFFF
    return _int32(h)


def java_uuid_hash(topic_id: uuid.UUID) -> int:
    """Kafka's Uuid.hashCode: the two halves xored, then the halves of that."""
    value = topic_id.int
    hilo = (value >> 64) ^ (value & 0xFFFFFFFFFFFFFFFF)
    return _int32((hilo >> 32) ^ hilo)


def java_hash(key: object) -> int:
    if isinstance(key, str):
        return java_string_hash(key)
    if isinstance(key, uuid.UUID):
        return java_uuid_hash(key)
    if isinstance(key, int):
        return _int32(key)
    raise TypeError(f"no Java hash for {key!r}")


def table_size(entries: int, initial_capacity: int | None = None) -> int:
    """The table size of a HashMap that held at most `entries` (it grows past 0.75 of its size)."""
    size = 16 if initial_capacity is None else max(1, 1 << max(0, (initial_capacity - 1).bit_length()))
    while entries > size * 0.75:
        size *= 2
    return size


def copy_table_size(entries: int) -> int:
    """The table size of `new HashSet<>(collection)` / `new HashMap<>(map)` of `entries` entries."""
    return table_size(entries, max(int(entries / 0.75) + 1, 16))


def java_order(keys: Iterable[K], size: int | None = None) -> list[K]:
    """`keys`, given in insertion order, in the order a HashMap of `size` buckets iterates them."""
    inserted = list(keys)
    buckets = size if size is not None else table_size(len(inserted))

    def bucket(key: K) -> int:
        h = java_hash(key) & 0xFFFFFFFF
        return (h ^ (h >> 16)) & (buckets - 1)

    return [key for _, key in sorted(enumerate(inserted), key=lambda pair: (bucket(pair[1]), pair[0]))]


def int_set_order(values: Iterable[int]) -> list[int]:
    """A HashSet<Integer>'s iteration order (ascending within a table's worth of values)."""
    items = sorted(values)
    return java_order(items, copy_table_size(len(items)))


# --- the group as assignors see it ------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MemberSpec:
    instance_id: str | None
    subscribed_topic_ids: tuple[uuid.UUID, ...]
    """In the order Kafka iterates the member's subscription."""
    assignment: Mapping[uuid.UUID, frozenset[int]]
    """The member's current target assignment."""


@dataclass(frozen=True, slots=True)
class GroupSpec:
    members: Mapping[str, MemberSpec]
    """In the order Kafka's map of member specs iterates."""
    homogeneous: bool
    partition_counts: Mapping[uuid.UUID, int]
    assigned: Mapping[tuple[uuid.UUID, int], str]
    """The group's current target assignment, by partition (Kafka's inverted target assignment)."""

    def partitions(self, topic_id: uuid.UUID) -> int:
        return self.partition_counts.get(topic_id, -1)


Assignor = Callable[[GroupSpec], dict[str, TopicPartitions]]


# --- uniform ----------------------------------------------------------------------------------------


def _topic_order(topic_ids: Iterable[uuid.UUID]) -> list[uuid.UUID]:
    ids = list(topic_ids)
    return java_order(ids, copy_table_size(len(ids)))


def uniform(spec: GroupSpec) -> dict[str, TopicPartitions]:
    if not spec.members:
        return {}
    if spec.homogeneous:
        return _uniform_homogeneous(spec)
    return _uniform_heterogeneous(spec)


def _uniform_homogeneous(spec: GroupSpec) -> dict[str, TopicPartitions]:
    """Every member subscribes to the same topics: keep what each has up to its quota, then hand the
    rest out in member order."""
    member_ids = list(spec.members)
    topics = _topic_order(spec.members[member_ids[0]].subscribed_topic_ids)
    subscribed = set(topics)
    if not topics:
        return {}
    unassigned: list[tuple[uuid.UUID, int]] = []
    total = 0
    for topic_id in topics:
        count = spec.partitions(topic_id)
        if count == -1:
            raise AssignorError(
                f"Members are subscribed to topic {topic_id} which doesn't exist in the topic metadata."
            )
        unassigned += [(topic_id, p) for p in range(count) if (topic_id, p) not in spec.assigned]
        total += count
    minimum_quota, extra_left = divmod(total, len(member_ids))

    target: dict[str, TopicPartitions] = {}
    unfilled: list[tuple[str, int]] = []
    for index, member_id in enumerate(member_ids):
        old = spec.members[member_id].assignment
        new: TopicPartitions = {}
        quota = minimum_quota
        takes_extra = extra_left > 0
        if takes_extra:
            quota += 1
        for topic_id in _topic_order(old):
            partitions = old[topic_id]
            if topic_id not in subscribed:
                continue
            if len(partitions) <= quota:
                quota -= len(partitions)
                new[topic_id] = set(partitions)
                continue
            kept: set[int] = set()
            for partition in int_set_order(partitions):
                if quota > 0:
                    quota -= 1
                    kept.add(partition)
                else:
                    unassigned.append((topic_id, partition))
            if kept:
                new[topic_id] = kept
        # Give the extra partition up for a later member, unless this one is among the last that must take it.
        if quota > 0 and takes_extra and len(member_ids) - index > extra_left:
            quota -= 1
            takes_extra = False
        if quota > 0:
            unfilled.append((member_id, quota))
        if takes_extra:
            extra_left -= 1
        target[member_id] = new

    position = 0
    for member_id, quota in unfilled:
        assignment = target[member_id]
        for _ in range(quota):
            if position >= len(unassigned):
                break
            topic_id, partition = unassigned[position]
            position += 1
            assignment.setdefault(topic_id, set()).add(partition)
    if position < len(unassigned):
        raise AssignorError("Partitions were left unassigned")
    return target


def java_uuid_order(topic_id: uuid.UUID) -> tuple[int, int]:
    """Kafka's Uuid.compareTo: the high then the low 64 bits, as signed longs."""

    def signed(value: int) -> int:
        return value - (1 << 64) if value >= 1 << 63 else value

    return signed(topic_id.int >> 64), signed(topic_id.int & 0xFFFFFFFFFFFFFFFF)


_MAX_BALANCING_ROUNDS: Final = 16
"""Kafka's bound on the heterogeneous builder's final balancing (each round roughly halves the imbalance)."""


class _Balancer:
    """Hands partitions to the least loaded subscribers of a topic and takes them from the most loaded,
    one load level at a time (Kafka's MemberAssignmentBalancer)."""

    def __init__(self, sizes: list[int]) -> None:
        self.sizes = sizes
        self.sorted: list[int] = []
        self.least_end = 0
        self.least_count = -1
        self.next_least = 0
        self.most_start = 0
        self.most_end = 0
        self.most_count = 1
        self.next_most = -1

    def initialize(self, members: list[int]) -> int:
        sizes = self.sizes
        self.sorted = sorted(members, key=lambda m: (sizes[m], m))
        self.least_end = 0
        self.least_count = sizes[self.sorted[0]] - 1
        self.next_least = 0
        self.most_start = len(self.sorted)
        self.most_end = len(self.sorted)
        self.most_count = sizes[self.sorted[-1]] + 1
        self.next_most = len(self.sorted) - 1
        return sizes[self.sorted[-1]] - sizes[self.sorted[0]]

    def next_least_loaded(self) -> int:
        if self.next_least >= self.least_end:
            self.least_count += 1
            while (
                self.least_end < len(self.sorted)
                and self.sizes[self.sorted[self.least_end]] == self.least_count
            ):
                self.least_end += 1
            self.next_least = 0
        member = self.sorted[self.next_least]
        self.next_least += 1
        return member

    def next_most_loaded(self) -> int:
        if self.next_most < self.most_start:
            if self.most_end <= self.most_start and self.most_start > 0:
                self.most_count = self.sizes[self.sorted[self.most_start - 1]]
            else:
                self.most_count -= 1
            while self.most_start > 0 and self.sizes[self.sorted[self.most_start - 1]] == self.most_count:
                self.most_start -= 1
            self.next_most = self.most_end - 1
        if self.next_most < 0:
            return -1
        member = self.sorted[self.next_most]
        self.next_most -= 1
        return member

    def exclude_most_loaded(self) -> None:
        i, last = self.next_most + 1, self.most_end - 1
        self.sorted[i], self.sorted[last] = self.sorted[last], self.sorted[i]
        self.most_end -= 1

    def balanced(self) -> bool:
        return self.most_count - self.least_count <= 1


def _uniform_heterogeneous(spec: GroupSpec) -> dict[str, TopicPartitions]:
    """Members subscribe to different topics: keep what each has of its topics, give the rest to the
    least loaded subscribers, then move partitions from the most to the least loaded until no two
    subscribers of a topic differ by more than one (Kafka's UniformHeterogeneousAssignmentBuilder)."""
    member_ids = list(spec.members)
    subscribers: dict[uuid.UUID, list[int]] = {}
    for index, member_id in enumerate(member_ids):
        for topic_id in spec.members[member_id].subscribed_topic_ids:
            if spec.partitions(topic_id) == -1:
                raise AssignorError(
                    f"Members are subscribed to topic {topic_id} which doesn't exist in the topic metadata."
                )
            subscribers.setdefault(topic_id, []).append(index)
    if not subscribers:
        return {}
    sizes = [0] * len(member_ids)
    owners = {t: [-1] * spec.partitions(t) for t in subscribers}
    target: dict[str, TopicPartitions] = {}
    for index, member_id in enumerate(member_ids):
        member = spec.members[member_id]
        kept: TopicPartitions = {}
        for topic_id, partitions in member.assignment.items():
            if topic_id not in member.subscribed_topic_ids:
                continue
            kept[topic_id] = set(partitions)
            sizes[index] += len(partitions)
            for p in partitions:
                owners[topic_id][p] = index
        target[member_id] = kept

    def topic_key(topic_id: uuid.UUID) -> tuple[float, int, tuple[int, int]]:
        count = len(subscribers[topic_id])
        return (-spec.partitions(topic_id) / count, count, java_uuid_order(topic_id))

    def move(topic_id: uuid.UUID, partition: int, index: int) -> None:
        old = owners[topic_id][partition]
        if old != -1:
            held = target[member_ids[old]][topic_id]
            held.discard(partition)
            if not held:
                del target[member_ids[old]][topic_id]
            sizes[old] -= 1
        target[member_ids[index]].setdefault(topic_id, set()).add(partition)
        owners[topic_id][partition] = index
        sizes[index] += 1

    balancer = _Balancer(sizes)
    unassigned = {t: [p for p, o in enumerate(owners[t]) if o == -1] for t in subscribers}
    for topic_id in sorted((t for t, ps in unassigned.items() if ps), key=topic_key):
        balancer.initialize(subscribers[topic_id])
        for partition in unassigned[topic_id]:
            move(topic_id, partition, balancer.next_least_loaded())

    shared = sorted((t for t in subscribers if len(subscribers[t]) >= 2), key=topic_key)
    last_moved = -1
    for _ in range(_MAX_BALANCING_ROUNDS):
        for position, topic_id in enumerate(shared):
            if position == last_moved:
                return target
            if (
                _balance_topic(topic_id, balancer, subscribers[topic_id], owners[topic_id], move)
                or last_moved == -1
            ):
                last_moved = position
    return target


def _balance_topic(
    topic_id: uuid.UUID,
    balancer: _Balancer,
    subscribers: list[int],
    owners: list[int],
    move: Callable[[uuid.UUID, int, int], None],
) -> int:
    """Move partitions of one topic from its most to its least loaded subscribers; how many moved."""
    if balancer.initialize(subscribers) <= 1:
        return 0
    partitions = sorted(range(len(owners)), key=lambda p: (owners[p], p))
    start: dict[int, int] = {}
    end: dict[int, int] = {}
    for i, p in enumerate(partitions):
        start.setdefault(owners[p], i)
        end[owners[p]] = i + 1
    moved = 0
    while not balancer.balanced():
        while True:
            most = balancer.next_most_loaded()
            if most == -1:
                break
            if most not in end or end[most] - start[most] <= 0:
                balancer.exclude_most_loaded()
                continue
            break
        if most == -1:
            break
        partition = partitions[end[most] - 1]
        end[most] -= 1
        least = balancer.next_least_loaded()
        if balancer.balanced():
            break
        move(topic_id, partition, least)
        moved += 1
    return moved


# --- range ------------------------------------------------------------------------------------------


def _range_order(spec: GroupSpec) -> list[str]:
    """Static members first, by instance id; then the others by member id."""

    def key(member_id: str) -> tuple[int, str]:
        instance_id = spec.members[member_id].instance_id
        return (0, instance_id) if instance_id is not None else (1, member_id)

    return sorted(spec.members, key=key)


def range_assignor(spec: GroupSpec) -> dict[str, TopicPartitions]:
    """Each topic cut into consecutive ranges, one per subscriber in order, the first ones a partition
    longer when the partitions do not divide evenly."""
    if not spec.members:
        return {}
    member_ids = _range_order(spec)
    subscribers: dict[uuid.UUID, int] = {}
    for member_id in member_ids:
        for topic_id in spec.members[member_id].subscribed_topic_ids:
            if spec.partitions(topic_id) == -1:
                raise AssignorError("Member is subscribed to a non-existent topic")
            subscribers[topic_id] = subscribers.get(topic_id, 0) + 1
    next_start = dict.fromkeys(subscribers, 0)
    extra = {t: spec.partitions(t) % n for t, n in subscribers.items()}
    target: dict[str, TopicPartitions] = {}
    for member_id in member_ids:
        assignment: TopicPartitions = {}
        for topic_id in spec.members[member_id].subscribed_topic_ids:
            count = spec.partitions(topic_id)
            quota = count // subscribers[topic_id]
            if extra[topic_id] > 0:
                quota += 1
                extra[topic_id] -= 1
            start = next_start[topic_id]
            end = min(start + quota, count)
            next_start[topic_id] = end
            if start < end:
                assignment[topic_id] = set(range(start, end))
        target[member_id] = assignment
    return target


ASSIGNORS: Final[dict[str, Assignor]] = {UNIFORM: uniform, RANGE: range_assignor}
