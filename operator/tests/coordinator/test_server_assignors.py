"""The consumer-protocol server assignors: Java's iteration orders they follow, and what every
assignment they make must hold (each partition once, to a subscriber, balanced, sticky)."""

from __future__ import annotations

import random
import uuid

import pytest

from staticfleet.coordinator import server_assignors as sa

# Facts of Java 17 (HashMap<String, Integer> filled in this order, then keySet(); HashSet<Integer>).
JAVA_KEYS = [
    "member-c", "member-a", "member-b", "consumer-7f3a-1", "0d2c9a1e-4b", "22", "x", "y", "zeta", "alpha",
    "m-10", "m-2", "m-33", "m-4", "m-5", "m-6", "m-7", "m-8", "m-9", "m-11",
]  # fmt: skip
JAVA_KEY_ORDER = [
    "consumer-7f3a-1", "22", "zeta", "member-a", "member-b", "m-10", "m-33", "m-11", "m-2", "0d2c9a1e-4b",
    "m-5", "m-4", "m-7", "alpha", "m-6", "x", "m-9", "y", "m-8", "member-c",
]  # fmt: skip


def test_java_hashes_and_iteration_orders() -> None:
    assert sa.java_string_hash("polygenelubricants") == -(2**31)
    assert sa.java_string_hash("member-a") == -649440786
    assert sa.java_uuid_hash(uuid.UUID(int=(1 << 64) | 2)) == 3
    assert sa.java_order(JAVA_KEYS, sa.table_size(len(JAVA_KEYS))) == JAVA_KEY_ORDER
    assert sa.int_set_order([3, 17, 1, 33, 16, 2, 40, 18, 5, 21, 0, 7, 30, 12]) == [
        0, 1, 33, 2, 3, 5, 7, 40, 12, 16, 17, 18, 21, 30,
    ]  # fmt: skip


def spec(
    subscriptions: dict[str, tuple[uuid.UUID, ...]],
    counts: dict[uuid.UUID, int],
    current: dict[str, dict[uuid.UUID, frozenset[int]]] | None = None,
    instances: dict[str, str] | None = None,
) -> sa.GroupSpec:
    current = current or {}
    members = {
        m: sa.MemberSpec((instances or {}).get(m), topics, current.get(m, {}))
        for m, topics in subscriptions.items()
    }
    assigned = {(t, p): m for m, a in current.items() for t, ps in a.items() for p in ps}
    homogeneous = len({frozenset(t) for t in subscriptions.values()}) <= 1
    return sa.GroupSpec(members, homogeneous, counts, assigned)


def check(spec_: sa.GroupSpec, result: dict[str, sa.TopicPartitions]) -> None:
    """Every partition of a subscribed topic goes to exactly one of its subscribers."""
    owners: dict[tuple[uuid.UUID, int], str] = {}
    for member, assignment in result.items():
        for topic, partitions in assignment.items():
            assert topic in spec_.members[member].subscribed_topic_ids
            for p in partitions:
                assert (topic, p) not in owners
                owners[(topic, p)] = member
    subscribed = {t for m in spec_.members.values() for t in m.subscribed_topic_ids}
    assert set(owners) == {(t, p) for t in subscribed for p in range(spec_.partition_counts[t])}


T = [uuid.UUID(int=n) for n in range(1, 5)]


def test_range_cuts_each_topic_in_order_with_static_members_first() -> None:
    s = spec(
        {"z": (T[0], T[1]), "b": (T[0], T[1]), "a": (T[0], T[1])},
        {T[0]: 4, T[1]: 3},
        instances={"z": "i-0"},
    )
    result = sa.range_assignor(s)
    check(s, result)
    assert result == {
        "z": {T[0]: {0, 1}, T[1]: {0}},
        "a": {T[0]: {2}, T[1]: {1}},
        "b": {T[0]: {3}, T[1]: {2}},
    }


def test_uniform_keeps_what_fits_the_quota_and_hands_out_the_rest() -> None:
    # A held everything; B and C join: A keeps its first partitions up to its share.
    current = {"member-a": {T[0]: frozenset(range(7))}}
    s = spec({"member-a": (T[0],), "member-b": (T[0],), "member-c": (T[0],)}, {T[0]: 7}, current)
    result = sa.uniform(s)
    check(s, result)
    assert result == {"member-a": {T[0]: {0, 1, 2}}, "member-b": {T[0]: {3, 4}}, "member-c": {T[0]: {5, 6}}}


@pytest.mark.parametrize("seed", range(40))
def test_random_groups_are_assigned_whole_balanced_and_sticky(seed: int) -> None:
    rng = random.Random(seed)
    counts = {t: rng.randint(1, 9) for t in T}
    members = [f"m-{n}" for n in range(rng.randint(1, 6))]
    shared = rng.random() < 0.5
    topics = tuple(rng.sample(T, rng.randint(1, len(T))))
    subscriptions = {m: topics if shared else tuple(rng.sample(T, rng.randint(1, len(T)))) for m in members}
    first = spec(subscriptions, counts)
    previous = sa.uniform(first)
    check(first, previous)
    # A member leaves and another comes: most partitions stay where they were.
    survivors = {m: s for m, s in subscriptions.items() if m != members[0]}
    survivors["m-new"] = subscriptions[members[0]]
    current = {m: {t: frozenset(ps) for t, ps in previous[m].items()} for m in survivors if m in previous}
    again = spec(survivors, counts, current)
    result = sa.uniform(again)
    check(again, result)
    if first.homogeneous:
        sizes = [sum(map(len, result[m].values())) for m in survivors]
        assert max(sizes) - min(sizes) <= 1
    # Partitions a surviving member kept and still may hold are not moved needlessly: each survivor
    # keeps at least as many of its old partitions as its new share allows.
    for member, old in current.items():
        kept = sum(len(old.get(t, set()) & result[member].get(t, set())) for t in old)
        share = sum(map(len, result[member].values()))
        assert kept >= min(share, sum(map(len, old.values()))) - 1
