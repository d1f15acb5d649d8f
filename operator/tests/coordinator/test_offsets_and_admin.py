"""OffsetCommit / OffsetFetch by state, and DescribeGroups / ListGroups / DeleteGroups."""

from __future__ import annotations

from staticfleet.coordinator import ErrorCode, GroupState
from staticfleet.coordinator.consumer_protocol import Subscription, encode_subscription
from staticfleet.coordinator.messages import (
    ListGroupsRequest,
    OffsetFetchRequest,
    OffsetFetchTopic,
    Protocol,
    RequestContext,
)

from .harness import Harness

E = ErrorCode


def _errors(resp: object) -> list[int]:
    return [p.error for t in resp.topics for p in t.partitions]  # type: ignore[attr-defined]


def _fetch(h: Harness, group: str = "g", topics: dict[str, tuple[int, ...]] | None = None) -> dict:  # type: ignore[type-arg]
    request = OffsetFetchRequest(
        group, None if topics is None else tuple(OffsetFetchTopic(t, p) for t, p in topics.items())
    )
    resp = h.coordinator.fetch_offsets(RequestContext(8), request)
    return {(t.name, p.partition): (p.offset, p.metadata, p.error) for t in resp.topics for p in t.partitions}


# --- OffsetCommit ------------------------------------------------------------------------------------


def test_commit_with_generation_minus_one_to_unknown_group_creates_a_simple_group() -> None:
    h = Harness()
    assert _errors(h.commit("", -1, offsets={("t", 0): 5})) == [E.none]
    assert h.state() is GroupState.EMPTY
    assert h.describe().protocol_type == ""
    assert _fetch(h, topics={"t": (0,)}) == {("t", 0): (5, "", 0)}


def test_commit_to_unknown_group_with_a_generation_is_illegal_generation_before_v9() -> None:
    h = Harness()
    assert _errors(h.commit("m", 1, version=8)) == [E.illegal_generation]
    assert h.state() is GroupState.DEAD


def test_commit_to_unknown_group_with_a_generation_is_group_id_not_found_from_v9() -> None:
    assert _errors(Harness().commit("m", 1, version=9)) == [E.group_id_not_found]


def test_manual_commit_to_an_empty_group_skips_member_validation_even_with_an_instance_id() -> None:
    h = Harness()
    ids = h.stable_static_group("a")
    h.leave((ids["a"], "a"))
    assert _errors(h.commit("whoever", -1, "zzz")) == [E.none]


def test_commit_without_identity_to_a_non_empty_group_is_unknown_member_id() -> None:
    h = Harness()
    h.stable_static_group("a")
    assert _errors(h.commit("", -1)) == [E.unknown_member_id]


def test_commit_in_completing_rebalance_is_rebalance_in_progress() -> None:
    h = Harness()
    a = h.join("", "a")
    h.tick()
    assert _errors(h.commit(a.get().member_id, 1, "a")) == [E.rebalance_in_progress]


def test_commit_in_preparing_rebalance_is_accepted_and_refreshes_the_session() -> None:
    h = Harness()
    ids = h.stable_static_group("a", "b", session=2_000, rebalance=60_000)
    h.join(ids["a"], "a", session=2_000, rebalance=60_000)
    for _ in range(4):
        h.advance(1_500)
        assert _errors(h.commit(ids["b"], 1, "b")) == [E.none]
    assert ids["b"] in h.coordinator.groups["g"].members


def test_commit_with_wrong_generation_is_illegal_generation_and_identity_is_checked_first() -> None:
    h = Harness()
    ids = h.stable_static_group("a", "b")
    assert _errors(h.commit(ids["a"], 5, "a")) == [E.illegal_generation]
    assert _errors(h.commit(ids["a"], 5, "b")) == [E.fenced_instance_id]
    assert _errors(h.commit("nope", 1, None)) == [E.unknown_member_id]


def test_commit_metadata_over_the_limit_fails_only_that_partition() -> None:
    h = Harness()
    resp = h.commit("", -1, offsets={("t", 0): 1}, metadata="x" * 4097)
    assert _errors(resp) == [E.offset_metadata_too_large]
    assert _errors(h.commit("", -1, offsets={("t", 0): 1}, metadata="x" * 4096)) == [E.none]


def test_committed_offsets_are_persisted_and_fetched_back() -> None:
    h = Harness()
    ids = h.stable_static_group("a")
    h.commit(ids["a"], 1, "a", offsets={("t", 0): 10, ("t", 1): 20, ("u", 0): 3}, metadata="m")
    assert _fetch(h, topics={"t": (0, 1, 2)}) == {
        ("t", 0): (10, "m", 0),
        ("t", 1): (20, "m", 0),
        ("t", 2): (-1, "", 0),
    }
    assert set(_fetch(h)) == {("t", 0), ("t", 1), ("u", 0)}
    assert sum(1 for r in h.store.records if r.__class__.__name__ == "OffsetCommitRecord") == 3


def test_fetch_from_unknown_group_returns_no_offsets_without_error() -> None:
    h = Harness()
    assert _fetch(h, "nope", {"t": (0,)}) == {("t", 0): (-1, "", 0)}
    assert _fetch(h, "nope") == {}


# --- DescribeGroups ----------------------------------------------------------------------------------


def test_describe_stable_group_shows_instance_ids_metadata_and_assignments() -> None:
    h = Harness()
    ids = h.stable_static_group("a", "b")
    d = h.describe()
    assert (d.state, d.protocol_type, d.protocol_data) == ("Stable", "consumer", "range")
    assert {(m.member_id, m.group_instance_id, m.metadata, m.assignment) for m in d.members} == {
        (ids["a"], "a", b"m", b"assignment-a"),
        (ids["b"], "b", b"m", b"assignment-b"),
    }


def test_describe_rebalancing_group_shows_no_protocol_and_no_metadata() -> None:
    h = Harness()
    ids = h.stable_static_group("a", "b")
    h.join(ids["a"], "a")
    d = h.describe()
    assert (d.state, d.protocol_data) == ("PreparingRebalance", "")
    assert {m.metadata for m in d.members} == {b""}


def test_describe_unknown_group_is_dead_before_v6_and_group_id_not_found_from_v6() -> None:
    h = Harness()
    old = h.describe("nope", version=5)
    assert (old.error, old.state, old.members) == (E.none, "Dead", ())
    new = h.describe("nope", version=6)
    assert (new.error, new.state, new.error_message) == (
        E.group_id_not_found,
        "Dead",
        "Group nope not found.",
    )


# --- ListGroups --------------------------------------------------------------------------------------


def test_list_groups_filters_states_case_insensitively_and_types() -> None:
    h = Harness()
    h.stable_static_group("a", group="stable")
    h.commit("", -1, group="simple")
    ctx = RequestContext(5)
    every = h.coordinator.list_groups(ctx, ListGroupsRequest())
    assert {(g.group_id, g.protocol_type, g.state) for g in every.groups} == {
        ("stable", "consumer", "Stable"),
        ("simple", "", "Empty"),
    }
    only_stable = h.coordinator.list_groups(ctx, ListGroupsRequest(states_filter=(" STABLE",)))
    assert [g.group_id for g in only_stable.groups] == ["stable"]
    assert h.coordinator.list_groups(ctx, ListGroupsRequest(types_filter=("consumer",))).groups == ()
    assert len(h.coordinator.list_groups(ctx, ListGroupsRequest(types_filter=("Classic",))).groups) == 2


# --- DeleteGroups ------------------------------------------------------------------------------------


def test_delete_non_empty_group_is_non_empty_group_and_unknown_is_group_id_not_found() -> None:
    h = Harness()
    h.stable_static_group("a")
    results = h.coordinator.delete_groups(RequestContext(2), ["g", "nope"])
    assert [(r.group_id, r.error) for r in results] == [
        ("g", E.non_empty_group),
        ("nope", E.group_id_not_found),
    ]


def test_delete_empty_group_removes_it_and_its_offsets() -> None:
    h = Harness()
    ids = h.stable_static_group("a")
    h.commit(ids["a"], 1, "a")
    h.leave((ids["a"], "a"))
    results = h.coordinator.delete_groups(RequestContext(2), ["g", "g"])
    assert [(r.group_id, r.error) for r in results] == [("g", E.none)]
    assert h.state() is GroupState.DEAD
    assert _fetch(h, topics={"t": (0,)}) == {("t", 0): (-1, "", 0)}
    kinds = [r.__class__.__name__ for r in h.store.records[-2:]]
    assert kinds == ["OffsetTombstone", "GroupTombstone"]


# --- offset retention --------------------------------------------------------------------------------


def retention_harness() -> Harness:
    """Offsets kept 60 s, looked at every 10 s, the cleanup scheduled."""
    from staticfleet.coordinator import CoordinatorConfig

    h = Harness(
        config=CoordinatorConfig(
            initial_rebalance_delay_ms=0,
            min_session_timeout_ms=10,
            offsets_retention_ms=60_000,
            offsets_retention_check_interval_ms=10_000,
        )
    )
    h.coordinator.schedule_cleanup()
    return h


def test_offsets_of_an_empty_group_expire_after_retention_and_the_group_is_deleted() -> None:
    h = retention_harness()
    ids = h.stable_static_group("a", session=600_000)
    h.commit(ids["a"], 1, "a")
    h.advance(100_000)
    assert h.state() is GroupState.STABLE, "offsets of an active group never expire"
    h.leave((ids["a"], "a"))
    h.advance(59_000)
    assert h.state() is GroupState.EMPTY
    h.advance(20_000)
    assert h.state() is GroupState.DEAD
    assert _fetch(h, topics={"t": (0,)})[("t", 0)][0] == -1


# --- OffsetDelete ------------------------------------------------------------------------------------


def _delete(h: Harness, topics: dict[str, tuple[int, ...]], group: str = "g") -> tuple[int, dict]:  # type: ignore[type-arg]
    response = h.coordinator.delete_offsets(group, tuple(OffsetFetchTopic(t, p) for t, p in topics.items()))
    return response.error, {(t.name, p.partition): p.error for t in response.topics for p in t.partitions}


def test_offset_delete_of_an_unknown_group_is_group_id_not_found() -> None:
    assert _delete(Harness(), {"t": (0,)}) == (E.group_id_not_found, {})


def test_offset_delete_in_an_empty_group_removes_the_offsets_and_the_removal_is_durable() -> None:
    h = Harness()
    h.commit("", -1, offsets={("t", 0): 5, ("t", 1): 6, ("u", 0): 7})
    assert _delete(h, {"t": (0, 9)}) == (E.none, {("t", 0): E.none, ("t", 9): E.none})
    assert _fetch(h) == {("t", 1): (6, "", 0), ("u", 0): (7, "", 0)}
    restarted = Harness()
    restarted.coordinator.load(h.store.records)
    assert _fetch(restarted) == {("t", 1): (6, "", 0), ("u", 0): (7, "", 0)}


def test_offset_delete_in_a_consumer_group_refuses_the_topics_its_members_subscribe_to() -> None:
    h = Harness()
    subscription = encode_subscription(Subscription(0, ("t",)))
    protocols = (Protocol("range", subscription),)
    ids = h.stable_static_group("a", protocols=protocols)
    h.commit(ids["a"], 1, "a", offsets={("t", 0): 5, ("u", 0): 7})
    assert _delete(h, {"t": (0,), "u": (0,)}) == (
        E.none,
        {("t", 0): E.group_subscribed_to_topic, ("u", 0): E.none},
    )
    assert _fetch(h) == {("t", 0): (5, "", 0)}
    h.leave((ids["a"], "a"))
    assert h.state() is GroupState.EMPTY
    assert _delete(h, {"t": (0,)}) == (E.none, {("t", 0): E.none}), "an Empty group subscribes to nothing"
    assert _fetch(h) == {}


def test_offset_delete_in_a_non_empty_group_of_another_protocol_type_is_non_empty_group() -> None:
    h = Harness()
    h.join("", "a", protocol_type="connect")
    h.tick()
    assert h.state() is GroupState.COMPLETING_REBALANCE
    assert _delete(h, {"t": (0,)}) == (E.non_empty_group, {})


def test_a_stable_consumer_group_loses_the_offsets_of_topics_it_no_longer_subscribes_to() -> None:
    h = retention_harness()
    subscription = encode_subscription(Subscription(0, ("t",)))
    ids = h.stable_static_group("a", session=600_000, protocols=(Protocol("range", subscription),))
    h.commit(ids["a"], 1, "a", offsets={("t", 0): 5, ("u", 0): 7})
    h.advance(70_000)
    assert h.state() is GroupState.STABLE
    assert _fetch(h) == {("t", 0): (5, "", 0)}, "u is subscribed to by nobody: expired from its commit"
