"""Rebalance timeout, pending-sync expiry and session expiry."""

from __future__ import annotations

from staticfleet.coordinator import ErrorCode, GroupState
from staticfleet.coordinator.messages import Protocol

from .harness import Harness

E = ErrorCode


def test_dynamic_member_that_does_not_rejoin_is_removed_at_the_rebalance_timeout() -> None:
    h = Harness()
    a = h.join("", None, version=3, session=60_000, rebalance=5_000)
    b = h.join("", None, version=3, session=60_000, rebalance=5_000)
    h.tick()
    a_id, b_id = a.get().member_id, b.get().member_id
    h.sync(a_id, 1, assignments={}), h.sync(b_id, 1)
    rejoin = h.join(a_id, None, version=3, session=60_000, rebalance=5_000)
    h.advance(4_999)
    assert not rejoin.done
    h.advance(1)
    resp = rejoin.get()
    assert (resp.generation_id, [m.member_id for m in resp.members]) == (2, [a_id])


def test_static_member_that_does_not_rejoin_is_kept_through_the_join_phase() -> None:
    h = Harness()
    ids = h.stable_static_group("a", "b", session=60_000, rebalance=5_000)
    a = h.join(ids["a"], "a", session=60_000, rebalance=5_000)
    h.advance(5_000)
    resp = a.get()
    assert resp.generation_id == 2
    assert sorted(m.group_instance_id or "" for m in resp.members) == ["a", "b"]


def test_offline_static_member_is_removed_at_the_sync_deadline_then_the_group_rebalances_again() -> None:
    h = Harness()
    ids = h.stable_static_group("a", "b", session=60_000, rebalance=5_000)
    a = h.join(ids["a"], "a", session=60_000, rebalance=5_000)
    h.advance(5_000)  # join phase over, b kept
    h.sync(ids["a"], 2, "a", assignments={})
    assert h.state() is GroupState.STABLE
    h.advance(5_000)  # b never sent SyncGroup: removed, new rebalance
    assert ids["b"] not in h.coordinator.groups["g"].members
    assert h.state() is GroupState.PREPARING_REBALANCE
    assert a.get().generation_id == 2
    causes = [e["cause"] for e in h.events.of_type("member_expired")]
    assert causes == ["sync-timeout"]


def test_pending_sync_expiry_removes_members_that_did_not_sync_in_completing_rebalance() -> None:
    h = Harness()
    a = h.join("", "a", rebalance=4_000)
    b = h.join("", "b", rebalance=4_000)
    h.tick()
    b_sync = h.sync(b.get().member_id, 1, "b")
    h.advance(4_000)  # the leader never synced
    assert a.get().member_id not in h.coordinator.groups["g"].members
    assert h.state() is GroupState.PREPARING_REBALANCE
    assert b_sync.get().error == E.rebalance_in_progress


def test_group_with_only_absent_static_members_stays_preparing_until_their_sessions_expire() -> None:
    h = Harness()
    ids = h.stable_static_group("a", session=20_000, rebalance=3_000)
    h.join("", "b", session=20_000, rebalance=3_000)  # starts a rebalance that a (offline) never joins
    group = h.coordinator.groups["g"]
    h.leave((group.static_members["b"], "b"))  # b goes away again: only the absent a is left
    for _ in range(5):
        h.advance(3_000)
        assert h.state() is GroupState.PREPARING_REBALANCE, "nobody rejoined: the join phase is rescheduled"
    h.advance(20_000)
    assert h.state() is GroupState.EMPTY
    assert h.generation() == 2
    assert h.coordinator.groups["g"].protocol_name is None
    assert ids["a"] not in group.members


def test_session_expiry_removes_a_static_member_like_a_dynamic_one() -> None:
    h = Harness()
    ids = h.stable_static_group("a", "b", session=10_000)
    for _ in range(3):
        h.advance(3_000)
        assert h.heartbeat(ids["a"], 1, "a") == E.none
    h.advance(1_000)  # t = 10s since b's last heartbeat (its sync)
    assert ids["b"] not in h.coordinator.groups["g"].members
    assert h.heartbeat(ids["a"], 1, "a") == E.rebalance_in_progress
    resp = h.join(ids["a"], "a").get()
    assert (resp.generation_id, len(resp.members)) == (2, 1)
    b = h.join("", "b")
    assert not b.done, "after expiry a restarted static instance is a new member: rebalance"
    h.join(ids["a"], "a")
    assert b.get().generation_id == 3


def test_session_expiry_during_preparing_rebalance_can_complete_the_join() -> None:
    h = Harness()
    ids = h.stable_static_group("a", "b", session=10_000, rebalance=60_000)
    a = h.join(ids["a"], "a", session=10_000, rebalance=60_000)
    h.advance(9_999)
    assert not a.done
    h.advance(1)
    assert a.get().generation_id == 2


def test_members_parked_in_join_do_not_expire() -> None:
    h = Harness()
    ids = h.stable_static_group("a", "b", "c", session=5_000, rebalance=60_000)
    a = h.join(ids["a"], "a", session=5_000, rebalance=60_000)
    b = h.join(ids["b"], "b", session=5_000, rebalance=60_000)
    h.advance(5_000)  # c expires; a and b are parked and therefore alive
    assert a.get().generation_id == b.get().generation_id == 2
    assert set(h.coordinator.groups["g"].static_members) == {"a", "b"}


def test_expired_member_with_a_parked_join_gets_unknown_member_id() -> None:
    h = Harness()
    h.stable_static_group("a", "b", session=600_000, rebalance=600_000)
    c = h.join("", "c", session=60_000, rebalance=600_000)  # a new member: 5-minute join timeout
    h.advance(300_000)
    assert (c.get().error, c.get().member_id) == (E.unknown_member_id, "")
    assert "c" not in h.coordinator.groups["g"].static_members


def test_heartbeat_in_preparing_rebalance_refreshes_the_session() -> None:
    h = Harness()
    ids = h.stable_static_group("a", "b", session=2_000, rebalance=60_000)
    h.join(ids["a"], "a", session=2_000, rebalance=60_000)
    for _ in range(5):
        h.advance(1_500)
        assert h.heartbeat(ids["b"], 1, "b") == E.rebalance_in_progress
    assert ids["b"] in h.coordinator.groups["g"].members


def test_offline_leader_during_a_rebalance_a_rejoined_member_leads_and_the_leader_stays_a_member() -> None:
    # Reference scenario 15: A (leader) is silent, B and C rejoin; at the rebalance timeout a joined
    # member is elected leader and A is kept in the member list (it is static).
    h = Harness()
    ids = h.stable_static_group("a", "b", "c", session=60_000, rebalance=5_000)
    changed = (Protocol("range", b"m2"), Protocol("roundrobin", b"m"))  # B's new subscription starts it
    b = h.join(ids["b"], "b", session=60_000, rebalance=5_000, protocols=changed)
    c = h.join(ids["c"], "c", session=60_000, rebalance=5_000)
    assert not b.done and not c.done
    h.advance(5_000)
    new_leader = b.get().leader
    assert new_leader in (ids["b"], ids["c"]) and new_leader == c.get().leader
    leader_view = b.get() if new_leader == ids["b"] else c.get()
    assert {m.group_instance_id for m in leader_view.members} == {"a", "b", "c"}
    assert ids["a"] in h.coordinator.groups["g"].members
