"""Static membership (KIP-345) and the restarted leader (KIP-814): replacement, fencing, no rebalance."""

from __future__ import annotations

from staticfleet.coordinator import ErrorCode, GroupState, StoreError
from staticfleet.coordinator.messages import Protocol

from .harness import RANGE_RR, Harness

E = ErrorCode


def test_follower_restart_in_stable_is_answered_at_once_with_a_new_id_and_no_rebalance() -> None:
    h = Harness()
    ids = h.stable_static_group("a", "b")
    resp = h.join("", "b", version=5).get()
    assert resp.error == E.none
    assert resp.member_id.startswith("b-") and resp.member_id != ids["b"]
    assert (resp.generation_id, resp.leader, resp.members, resp.skip_assignment) == (1, ids["a"], (), False)
    assert h.state() is GroupState.STABLE and h.generation() == 1
    sync = h.sync(resp.member_id, 1, "b").get()
    assert sync.assignment == b"assignment-b", "the replaced member keeps its assignment"
    assert h.heartbeat(ids["a"], 1, "a") == E.none


def test_static_replacement_is_persisted_before_it_is_answered() -> None:
    h = Harness()
    h.stable_static_group("a", "b")
    before = len(h.store.records)
    resp = h.join("", "b").get()
    last = h.store.records[-1]
    assert len(h.store.records) == before + 1
    assert resp.member_id in {m.member_id for m in last.members}  # type: ignore[union-attr]


def test_leader_restart_v9_gets_skip_assignment_and_the_full_member_list() -> None:
    h = Harness()
    ids = h.stable_static_group("a", "b")
    resp = h.join("", "a", version=9).get()
    assert resp.error == E.none
    assert resp.leader == resp.member_id != ids["a"]
    assert resp.skip_assignment is True
    assert sorted((m.group_instance_id or "", m.metadata) for m in resp.members) == [("a", b"m"), ("b", b"m")]
    assert h.generation() == 1
    sync = h.sync(resp.member_id, 1, "a", assignments={}).get()
    assert sync.assignment == b"assignment-a", (
        "a leader's SyncGroup in Stable gets the stored assignment back"
    )


def test_leader_restart_before_v9_is_told_the_old_leader_id_and_no_members() -> None:
    for version in (5, 6, 7, 8):
        h = Harness()
        ids = h.stable_static_group("a", "b")
        resp = h.join("", "a", version=version).get()
        assert resp.leader == ids["a"] != resp.member_id, version
        assert (resp.members, resp.skip_assignment, resp.generation_id) == ((), False, 1)
        assert h.leader() == resp.member_id, "the group itself does move the leadership to the new id"


def test_follower_restart_v9_has_no_skip_assignment_and_no_members() -> None:
    h = Harness()
    ids = h.stable_static_group("a", "b")
    resp = h.join("", "b", version=9).get()
    assert (resp.leader, resp.members, resp.skip_assignment) == (ids["a"], (), False)


def test_replacement_fences_the_old_incarnation_in_every_api() -> None:
    h = Harness()
    ids = h.stable_static_group("a", "b")
    old = ids["b"]
    h.join("", "b")
    assert h.heartbeat(old, 1, "b", version=3) == E.fenced_instance_id
    assert h.heartbeat(old, 1, None, version=2) == E.unknown_member_id
    assert h.sync(old, 1, "b").get().error == E.fenced_instance_id
    commit = h.commit(old, 1, "b")
    assert commit.topics[0].partitions[0].error == E.fenced_instance_id
    join = h.join(old, "b").get()
    assert (join.error, join.member_id, join.generation_id) == (E.fenced_instance_id, old, -1)
    leave = h.leave((old, "b"))
    assert (leave.error, leave.members[0].error) == (E.none, E.fenced_instance_id)
    assert h.state() is GroupState.STABLE


def test_fenced_takes_precedence_over_illegal_generation() -> None:
    h = Harness()
    ids = h.stable_static_group("a", "b")
    h.join("", "b")
    assert h.heartbeat(ids["b"], 99, "b") == E.fenced_instance_id


def test_replacement_fences_a_parked_join_of_the_old_incarnation_immediately() -> None:
    h = Harness()
    ids = h.stable_static_group("a", "b", "c")
    h.join(ids["a"], "a")  # rebalance starts; b's old incarnation rejoins and parks (c has not rejoined)
    parked = h.join(ids["b"], "b")
    assert not parked.done
    new = h.join("", "b")
    old_resp = parked.get()
    assert (old_resp.error, old_resp.member_id, old_resp.leader) == (E.fenced_instance_id, ids["b"], "")
    assert not new.done
    h.join(ids["c"], "c")
    assert new.get().generation_id == 2


def test_replacement_fences_a_parked_sync_of_the_old_incarnation_and_restarts_the_rebalance() -> None:
    h = Harness()
    a = h.join("", "a")
    b = h.join("", "b")
    h.tick()
    b_sync = h.sync(b.get().member_id, 1, "b")
    assert not b_sync.done
    new_b = h.join("", "b")
    assert b_sync.get().error == E.fenced_instance_id
    assert h.state() is GroupState.PREPARING_REBALANCE, (
        "a replacement in CompletingRebalance always rebalances"
    )
    assert not new_b.done
    h.join(a.get().member_id, "a")
    assert new_b.get().generation_id == 2


def test_replacement_with_a_changed_selected_protocol_rebalances() -> None:
    h = Harness()
    ids = h.stable_static_group("a", "b")
    b = h.join("", "b", protocols=(Protocol("roundrobin", b"m"),))
    assert not b.done and h.state() is GroupState.PREPARING_REBALANCE
    a = h.join(ids["a"], "a")
    assert a.get().protocol_name == b.get().protocol_name == "roundrobin"
    assert b.get().generation_id == 2


def test_replacement_with_changed_metadata_but_same_selected_protocol_does_not_rebalance() -> None:
    # Kafka compares only the selected protocol name on a static restart (KAFKA-12759).
    h = Harness()
    h.stable_static_group("a", "b")
    resp = h.join("", "b", protocols=(Protocol("range", b"m-prime"), Protocol("roundrobin", b"m"))).get()
    assert (resp.error, resp.generation_id) == (E.none, 1)
    assert h.state() is GroupState.STABLE


def test_known_id_rejoin_with_changed_metadata_does_rebalance() -> None:
    h = Harness()
    ids = h.stable_static_group("a", "b")
    h.join(ids["b"], "b", protocols=(Protocol("range", b"m-prime"), Protocol("roundrobin", b"m")))
    assert h.state() is GroupState.PREPARING_REBALANCE


def test_replacement_during_preparing_rebalance_just_takes_the_place_of_the_old_member() -> None:
    h = Harness()
    ids = h.stable_static_group("a", "b")
    a = h.join(ids["a"], "a")
    b = h.join("", "b")
    assert a.done and b.done
    assert b.get().member_id != ids["b"] and b.get().generation_id == 2
    assert h.coordinator.groups["g"].static_members["b"] == b.get().member_id


def test_replacement_updates_the_members_timeouts() -> None:
    h = Harness()
    ids = h.stable_static_group("a", "b")
    resp = h.join("", "b", session=25_000, rebalance=40_000).get()
    member = h.coordinator.groups["g"].members[resp.member_id]
    assert (member.session_timeout_ms, member.rebalance_timeout_ms) == (25_000, 40_000)
    assert ids["b"] not in h.coordinator.groups["g"].members


def test_replacement_keeps_client_id_and_host_of_the_original_member() -> None:
    h = Harness()
    h.stable_static_group("a", "b", client_id="first")
    resp = h.join("", "b", client_id="second").get()
    assert h.coordinator.groups["g"].members[resp.member_id].client_id == "first"


def test_failed_persistence_of_a_replacement_reverts_it() -> None:
    h = Harness()
    ids = h.stable_static_group("a", "b")
    h.store.fail_with = StoreError("disk full")
    resp = h.join("", "b", version=5).get()
    assert (resp.error, resp.member_id, resp.generation_id, resp.leader) == (
        E.not_coordinator,
        "",
        1,
        ids["a"],
    )
    group = h.coordinator.groups["g"]
    assert group.static_members["b"] == ids["b"]
    assert group.members[ids["b"]].protocols == RANGE_RR
    h.store.fail_with = None
    assert h.heartbeat(ids["b"], 1, "b") == E.none


def test_two_processes_with_one_instance_id_the_older_is_fenced() -> None:
    h = Harness()
    first_id = h.stable_static_group("a", "b")["b"]
    second = h.join("", "b").get()
    assert second.error == E.none
    assert h.heartbeat(first_id, 1, "b") == E.fenced_instance_id
    assert h.heartbeat(second.member_id, 1, "b") == E.none
    fenced = h.events.of_type("member_fenced")
    assert fenced and fenced[-1]["member_id"] == first_id


def test_static_member_restart_emits_a_replacement_event_without_rebalance() -> None:
    h = Harness()
    ids = h.stable_static_group("a", "b")
    resp = h.join("", "b").get()
    replaced = h.events.of_type("static_member_replaced")
    assert replaced[-1]["old_member_id"] == ids["b"]
    assert replaced[-1]["new_member_id"] == resp.member_id
    assert replaced[-1]["rebalance"] is False
    assert h.events.of_type("rebalance_started") == h.events.of_type("rebalance_started")[:1]


def test_unloading_answers_parked_joins_and_syncs_with_not_coordinator() -> None:
    h = Harness()
    ids = h.stable_static_group("a", "b", "c")
    parked_join = h.join(ids["a"], "a")
    h.coordinator.unload()
    assert parked_join.get().error == E.not_coordinator
    h2 = Harness()
    a = h2.join("", "a")
    b = h2.join("", "b")
    h2.tick()
    parked_sync = h2.sync(b.get().member_id, 1, "b")
    h2.coordinator.unload()
    assert parked_sync.get().error == E.not_coordinator
    assert a.get().error == E.none
