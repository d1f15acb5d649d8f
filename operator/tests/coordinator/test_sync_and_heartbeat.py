"""SyncGroup and Heartbeat, rule by rule."""

from __future__ import annotations

from staticfleet.coordinator import ErrorCode, GroupState, StoreError

from .harness import Harness

E = ErrorCode


def _completing(h: Harness) -> tuple[str, str]:
    a = h.join("", "a")
    b = h.join("", "b")
    h.tick()
    assert h.state() is GroupState.COMPLETING_REBALANCE
    return a.get().member_id, b.get().member_id


# --- SyncGroup ---------------------------------------------------------------------------------------


def test_sync_v5_without_protocol_type_or_name_is_inconsistent_group_protocol() -> None:
    h = Harness()
    a, _ = _completing(h)
    assert h.sync(a, 1, "a", protocol_type=None).get().error == E.inconsistent_group_protocol
    assert h.sync(a, 1, "a", protocol_name=None).get().error == E.inconsistent_group_protocol


def test_sync_v4_may_omit_protocol_type_and_name() -> None:
    h = Harness()
    a, _ = _completing(h)
    assert h.sync(a, 1, "a", version=4, protocol_type=None, protocol_name=None).get().error == E.none


def test_sync_empty_group_id_is_invalid_group_id() -> None:
    assert Harness().sync("m", 1, group="").get().error == E.invalid_group_id


def test_sync_unknown_group_is_unknown_member_id() -> None:
    assert Harness().sync("m", 1).get().error == E.unknown_member_id


def test_sync_to_an_empty_group_is_unknown_member_id() -> None:
    h = Harness()
    h.commit("", -1)
    assert h.state() is GroupState.EMPTY
    assert h.sync("m", 0).get().error == E.unknown_member_id


def test_sync_with_wrong_generation_is_illegal_generation() -> None:
    h = Harness()
    a, _ = _completing(h)
    assert h.sync(a, 7, "a").get().error == E.illegal_generation


def test_sync_with_mismatched_protocol_name_is_inconsistent_group_protocol() -> None:
    h = Harness()
    a, _ = _completing(h)
    assert h.sync(a, 1, "a", protocol_name="roundrobin").get().error == E.inconsistent_group_protocol
    assert h.sync(a, 1, "a", protocol_type="connect").get().error == E.inconsistent_group_protocol


def test_sync_identity_check_runs_before_generation_check() -> None:
    h = Harness()
    _completing(h)
    assert h.sync("bogus", 7, "a").get().error == E.fenced_instance_id
    assert h.sync("bogus", 7, None).get().error == E.unknown_member_id
    assert h.sync("bogus", 7, "zz").get().error == E.unknown_member_id


def test_sync_in_preparing_rebalance_is_rebalance_in_progress() -> None:
    h = Harness()
    ids = h.stable_static_group("a", "b")
    h.join(ids["a"], "a")
    assert h.sync(ids["b"], 1, "b").get().error == E.rebalance_in_progress


def test_follower_sync_waits_for_the_leader_then_gets_its_assignment() -> None:
    h = Harness()
    a, b = _completing(h)
    follower = h.sync(b, 1, "b")
    assert not follower.done
    leader = h.sync(a, 1, "a", assignments={a: b"A", b: b"B"})
    assert leader.get().assignment == b"A"
    resp = follower.get()
    assert (resp.error, resp.assignment, resp.protocol_type, resp.protocol_name) == (
        0,
        b"B",
        "consumer",
        "range",
    )
    assert h.state() is GroupState.STABLE


def test_leader_sync_that_omits_a_member_gives_it_an_empty_assignment() -> None:
    h = Harness()
    a, b = _completing(h)
    h.sync(a, 1, "a", assignments={a: b"A"})
    assert h.sync(b, 1, "b").get().assignment == b""


def test_leader_sync_persists_the_assignment_before_answering() -> None:
    h = Harness()
    a, b = _completing(h)
    h.sync(a, 1, "a", assignments={a: b"A", b: b"B"})
    record = h.store.records[-1]
    assert {m.member_id: m.assignment for m in record.members} == {a: b"A", b: b"B"}  # type: ignore[union-attr]


def test_failed_persistence_of_the_assignment_fails_every_parked_sync_and_rebalances() -> None:
    h = Harness()
    a, b = _completing(h)
    follower = h.sync(b, 1, "b")
    h.store.fail_with = StoreError("disk gone")
    leader = h.sync(a, 1, "a", assignments={a: b"A", b: b"B"})
    assert leader.get().error == follower.get().error == E.not_coordinator
    assert h.state() is GroupState.PREPARING_REBALANCE


def test_sync_in_stable_returns_the_stored_assignment_and_ignores_a_leaders_assignments() -> None:
    h = Harness()
    ids = h.stable_static_group("a", "b")
    resp = h.sync(ids["a"], 1, "a", assignments={ids["a"]: b"other"}).get()
    assert resp.assignment == b"assignment-a"


def test_sync_of_a_dead_group_is_coordinator_not_available() -> None:
    h = Harness()
    ids = h.stable_static_group("a")
    h.coordinator.groups["g"].state = GroupState.DEAD
    assert h.sync(ids["a"], 1, "a").get().error == E.coordinator_not_available


# --- Heartbeat ---------------------------------------------------------------------------------------


def test_heartbeat_unknown_group_is_unknown_member_id() -> None:
    assert Harness().heartbeat("m", 1) == E.unknown_member_id


def test_heartbeat_empty_group_id_is_invalid_group_id() -> None:
    assert Harness().heartbeat("m", 1, group="") == E.invalid_group_id


def test_heartbeat_empty_group_is_unknown_member_id() -> None:
    h = Harness()
    h.commit("", -1)
    assert h.heartbeat("m", 0) == E.unknown_member_id


def test_heartbeat_in_preparing_rebalance_is_rebalance_in_progress() -> None:
    h = Harness()
    ids = h.stable_static_group("a", "b")
    h.join(ids["a"], "a")
    assert h.heartbeat(ids["b"], 1, "b") == E.rebalance_in_progress


def test_heartbeat_in_completing_rebalance_is_none() -> None:
    h = Harness()
    a, _ = _completing(h)
    assert h.heartbeat(a, 1, "a") == E.none


def test_heartbeat_with_wrong_generation_is_illegal_generation() -> None:
    h = Harness()
    ids = h.stable_static_group("a")
    assert h.heartbeat(ids["a"], 2, "a") == E.illegal_generation


def test_heartbeat_identity_matrix() -> None:
    h = Harness()
    ids = h.stable_static_group("a", "b")
    assert h.heartbeat(ids["a"], 1, "b") == E.fenced_instance_id
    assert h.heartbeat(ids["a"], 1, "nope") == E.unknown_member_id
    assert h.heartbeat("nope", 1, None) == E.unknown_member_id
    assert h.heartbeat(ids["a"], 1, None) == E.none


def test_heartbeat_of_a_dead_group_is_coordinator_not_available() -> None:
    h = Harness()
    ids = h.stable_static_group("a")
    h.coordinator.groups["g"].state = GroupState.DEAD
    assert h.heartbeat(ids["a"], 1, "a") == E.coordinator_not_available


def test_heartbeats_keep_a_member_alive_past_its_session_timeout() -> None:
    h = Harness()
    ids = h.stable_static_group("a", session=1_000)
    for _ in range(10):
        h.advance(900)
        assert h.heartbeat(ids["a"], 1, "a") == E.none
    assert h.state() is GroupState.STABLE
