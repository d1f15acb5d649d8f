"""JoinGroup, rule by rule (Kafka's classic coordinator: new-member and current-member paths)."""

from __future__ import annotations

from staticfleet.coordinator import CoordinatorConfig, ErrorCode, GroupState
from staticfleet.coordinator.messages import Protocol

from .harness import RANGE_RR, Harness

E = ErrorCode


# --- group-level checks ------------------------------------------------------------------------------


def test_empty_group_id_is_invalid_group_id_with_member_id_echoed() -> None:
    h = Harness()
    resp = h.join("m-1", group="").get()
    assert (resp.error, resp.member_id, resp.generation_id) == (E.invalid_group_id, "m-1", -1)


def test_session_timeout_below_min_is_invalid_session_timeout_with_member_id_echoed() -> None:
    h = Harness(config=CoordinatorConfig())
    resp = h.join("", "i0", session=5_999).get()
    assert (resp.error, resp.member_id) == (E.invalid_session_timeout, "")
    assert h.state() is GroupState.DEAD, "the session-timeout check runs before the group is created"


def test_session_timeout_above_max_is_invalid_session_timeout() -> None:
    h = Harness(config=CoordinatorConfig())
    assert h.join("x", "i0", session=1_800_001).get().error == E.invalid_session_timeout
    assert h.join("", "i0", session=1_800_000).done is False  # the bound itself is allowed


def test_known_member_id_for_unknown_group_is_unknown_member_id() -> None:
    h = Harness()
    resp = h.join("ghost-1", "i0").get()
    assert (resp.error, resp.member_id) == (E.unknown_member_id, "ghost-1")
    assert h.state() is GroupState.DEAD


def test_join_with_unknown_member_id_creates_the_group_and_persists_an_empty_record() -> None:
    h = Harness()
    h.join("", "i0")
    assert h.state() is GroupState.PREPARING_REBALANCE
    record = h.store.records[0]
    assert record.__class__.__name__ == "GroupMetadataRecord"
    assert (record.generation, record.members, record.protocol) == (0, (), None)  # type: ignore[union-attr]


# --- new member path ---------------------------------------------------------------------------------


def test_static_first_join_is_parked_until_join_completes_then_answered_as_leader() -> None:
    h = Harness()
    reply = h.join("", "i0")
    assert not reply.done
    h.tick()
    resp = reply.get()
    assert resp.error == E.none
    assert resp.member_id.startswith("i0-")
    assert resp.generation_id == 1
    assert resp.leader == resp.member_id
    assert [(m.member_id, m.group_instance_id, m.metadata) for m in resp.members] == [
        (resp.member_id, "i0", b"m")
    ]
    assert (resp.protocol_type, resp.protocol_name, resp.skip_assignment) == ("consumer", "range", False)


def test_static_new_member_never_gets_member_id_required() -> None:
    h = Harness()
    reply = h.join("", "i0", version=4)
    h.tick()
    assert reply.get().error == E.none


def test_dynamic_member_v4_plus_gets_member_id_required_with_a_generated_id() -> None:
    h = Harness()
    resp = h.join("", None, version=4, client_id="app").get()
    assert resp.error == E.member_id_required
    assert resp.member_id.startswith("app-")
    assert resp.generation_id == -1
    assert h.coordinator.groups["g"].pending_join_members == {resp.member_id}


def test_dynamic_member_rejoining_with_the_required_id_is_added() -> None:
    h = Harness()
    member_id = h.join("", None, version=5).get().member_id
    reply = h.join(member_id, None, version=5)
    h.tick()
    assert reply.get().error == E.none
    assert reply.get().member_id == member_id
    assert not h.coordinator.groups["g"].pending_join_members


def test_dynamic_member_v3_joins_directly_without_member_id_required() -> None:
    h = Harness()
    reply = h.join("", None, version=3, client_id="old")
    h.tick()
    resp = reply.get()
    assert resp.error == E.none and resp.member_id.startswith("old-")


def test_pending_member_blocks_join_completion_until_it_rejoins() -> None:
    h = Harness()
    ids = h.stable_static_group("a")
    pending = h.join("", None, version=5).get().member_id
    a = h.join(ids["a"], "a")  # the leader rejoins: rebalance, but the pending member has not joined yet
    assert h.state() is GroupState.PREPARING_REBALANCE and not a.done
    h.join(pending, None, version=5)
    assert a.done, "the join completes once the pending member rejoins"
    assert len(h.coordinator.groups["g"].members) == 2


def test_pending_member_expires_after_its_session_timeout_and_unblocks_the_join() -> None:
    h = Harness()
    ids = h.stable_static_group("a")
    h.join("", None, version=5, session=3_000)
    a = h.join(ids["a"], "a")
    h.advance(2_999)
    assert not a.done
    h.advance(1)
    assert a.get().error == E.none
    assert "pending" in [e.get("cause") for e in h.events.of_type("member_expired")]


def test_new_member_into_dead_group_is_coordinator_not_available() -> None:
    h = Harness()
    h.join("", "i0")
    h.coordinator.groups["g"].state = GroupState.DEAD
    resp = h.join("", "i1").get()
    assert (resp.error, resp.member_id) == (E.coordinator_not_available, "")


def test_empty_protocol_type_into_empty_group_is_inconsistent_group_protocol() -> None:
    h = Harness()
    resp = h.join("", "i0", protocol_type="").get()
    assert (resp.error, resp.member_id) == (E.inconsistent_group_protocol, "")
    assert h.state() is GroupState.EMPTY, "Kafka keeps the freshly created group"


def test_empty_protocol_list_into_empty_group_is_inconsistent_group_protocol() -> None:
    h = Harness()
    assert h.join("", "i0", protocols=()).get().error == E.inconsistent_group_protocol


def test_other_protocol_type_into_consumer_group_is_inconsistent_group_protocol() -> None:
    h = Harness()
    h.stable_static_group("a")
    assert h.join("", "b", protocol_type="connect").get().error == E.inconsistent_group_protocol


def test_protocols_disjoint_from_every_member_is_inconsistent_group_protocol() -> None:
    h = Harness()
    h.stable_static_group("a")
    assert h.join("", "b", protocols=(Protocol("sticky", b""),)).get().error == E.inconsistent_group_protocol


def test_sole_member_cannot_switch_to_a_disjoint_protocol_list() -> None:
    h = Harness()
    ids = h.stable_static_group("a")
    resp = h.join(ids["a"], "a", protocols=(Protocol("sticky", b""),)).get()
    assert (resp.error, resp.member_id) == (E.inconsistent_group_protocol, ids["a"])


def test_protocol_vote_picks_the_most_preferred_candidate_supported_by_all() -> None:
    h = Harness()
    a = h.join("", "a", protocols=(Protocol("roundrobin", b""), Protocol("range", b"")))
    b = h.join("", "b", protocols=(Protocol("range", b""), Protocol("roundrobin", b""), Protocol("x", b"")))
    c = h.join("", "c", protocols=(Protocol("range", b""), Protocol("roundrobin", b"")))
    h.tick()
    assert {a.get().protocol_name, b.get().protocol_name, c.get().protocol_name} == {"range"}


def test_protocol_vote_tie_is_broken_in_java_hashmap_order() -> None:
    # "range" and "roundrobin" tie 1:1; Kafka iterates a HashMap, which puts "range" first.
    h = Harness()
    h.join("", "a", protocols=(Protocol("roundrobin", b""), Protocol("range", b"")))
    r = h.join("", "b", protocols=(Protocol("range", b""), Protocol("roundrobin", b"")))
    h.tick()
    assert r.get().protocol_name == "range"


# --- current member path ------------------------------------------------------------------------------


def test_known_member_id_with_unmapped_instance_id_is_unknown_member_id() -> None:
    h = Harness()
    ids = h.stable_static_group("a")
    resp = h.join(ids["a"], "zzz").get()
    assert (resp.error, resp.member_id, resp.protocol_name) == (E.unknown_member_id, ids["a"], None)


def test_known_member_id_with_another_members_instance_id_is_fenced() -> None:
    h = Harness()
    ids = h.stable_static_group("a", "b")
    resp = h.join(ids["a"], "b").get()
    assert (resp.error, resp.member_id, resp.generation_id) == (E.fenced_instance_id, ids["a"], -1)


def test_bogus_member_id_with_known_instance_id_is_fenced() -> None:
    h = Harness()
    h.stable_static_group("a")
    assert h.join("bogus", "a").get().error == E.fenced_instance_id


def test_bogus_member_id_without_instance_id_is_unknown_member_id() -> None:
    h = Harness()
    h.stable_static_group("a")
    assert h.join("bogus", None).get().error == E.unknown_member_id


def test_known_static_member_id_sent_without_instance_id_passes_validation() -> None:
    h = Harness()
    ids = h.stable_static_group("a", "b")
    resp = h.join(ids["b"], None).get()
    assert (resp.error, resp.generation_id, resp.members) == (E.none, 1, ())


def test_pending_member_rejoining_with_an_instance_id_is_unknown_server_error() -> None:
    h = Harness()
    h.stable_static_group("a")
    pending = h.join("", None, version=5).get().member_id
    assert h.join(pending, "b").get().error == E.unknown_server_error


def test_rejoin_in_preparing_rebalance_updates_the_member_and_parks() -> None:
    h = Harness()
    ids = h.stable_static_group("a", "b")
    a = h.join(ids["a"], "a")
    b = h.join(ids["b"], "b", session=20_000)
    assert a.done and b.done
    assert h.coordinator.groups["g"].members[ids["b"]].session_timeout_ms == 20_000


def test_follower_rejoin_in_stable_with_identical_metadata_is_answered_at_once_without_members() -> None:
    h = Harness()
    ids = h.stable_static_group("a", "b")
    resp = h.join(ids["b"], "b").get()
    assert (resp.error, resp.generation_id, resp.leader, resp.members) == (E.none, 1, ids["a"], ())
    assert h.state() is GroupState.STABLE


def test_follower_rejoin_in_stable_with_changed_metadata_rebalances() -> None:
    h = Harness()
    ids = h.stable_static_group("a", "b")
    b = h.join(ids["b"], "b", protocols=(Protocol("range", b"m2"), Protocol("roundrobin", b"m")))
    assert not b.done and h.state() is GroupState.PREPARING_REBALANCE


def test_follower_rejoin_with_reordered_protocols_counts_as_changed_metadata() -> None:
    h = Harness()
    ids = h.stable_static_group("a", "b")
    h.join(ids["b"], "b", protocols=tuple(reversed(RANGE_RR)))
    assert h.state() is GroupState.PREPARING_REBALANCE


def test_leader_rejoin_in_stable_always_rebalances_even_with_identical_metadata() -> None:
    h = Harness()
    ids = h.stable_static_group("a", "b")
    a = h.join(ids["a"], "a")
    assert h.state() is GroupState.PREPARING_REBALANCE and not a.done
    b = h.join(ids["b"], "b")
    resp = a.get()
    assert resp.generation_id == 2 and len(resp.members) == 2
    assert b.get().members == ()


def test_rejoin_in_completing_rebalance_with_identical_metadata_returns_current_generation() -> None:
    h = Harness()
    a = h.join("", "a")
    b = h.join("", "b")
    h.tick()
    a_id, b_id = a.get().member_id, b.get().member_id
    assert h.state() is GroupState.COMPLETING_REBALANCE
    again_a = h.join(a_id, "a").get()
    again_b = h.join(b_id, "b").get()
    assert (again_a.generation_id, len(again_a.members), again_a.skip_assignment) == (1, 2, False)
    assert (again_b.generation_id, again_b.members) == (1, ())
    assert h.state() is GroupState.COMPLETING_REBALANCE


def test_rejoin_in_completing_rebalance_with_changed_metadata_goes_back_to_preparing() -> None:
    h = Harness()
    a = h.join("", "a")
    b = h.join("", "b")
    h.tick()
    follower_sync = h.sync(b.get().member_id, 1, "b")
    assert not follower_sync.done, "a follower's SyncGroup waits for the leader's"
    h.join(a.get().member_id, "a", protocols=(Protocol("range", b"new"),))
    assert h.state() is GroupState.PREPARING_REBALANCE
    assert follower_sync.get().error == E.rebalance_in_progress


def test_rejoin_with_known_id_into_empty_group_is_unknown_member_id() -> None:
    h = Harness()
    ids = h.stable_static_group("a")
    h.leave(("", "a"))
    h.tick()
    assert h.state() is GroupState.EMPTY
    resp = h.join(ids["a"], "a").get()
    assert (resp.error, resp.member_id) == (E.unknown_member_id, ids["a"])


def test_static_join_after_group_became_empty_is_a_new_member() -> None:
    h = Harness()
    h.stable_static_group("a")
    h.leave(("", "a"))
    h.tick()
    reply = h.join("", "a")
    assert not reply.done and h.state() is GroupState.PREPARING_REBALANCE
    h.tick()
    assert reply.get().generation_id == 3


# --- group.max.size -----------------------------------------------------------------------------------


def test_join_beyond_max_size_in_stable_is_group_max_size_reached_with_empty_member_id() -> None:
    h = Harness(config=CoordinatorConfig(initial_rebalance_delay_ms=0, min_session_timeout_ms=10, max_size=2))
    h.stable_static_group("a", "b")
    resp = h.join("", "c").get()
    assert (resp.error, resp.member_id) == (E.group_max_size_reached, "")


def test_static_restart_into_a_full_stable_group_is_rejected_even_though_it_replaces_itself() -> None:
    h = Harness(config=CoordinatorConfig(initial_rebalance_delay_ms=0, min_session_timeout_ms=10, max_size=2))
    ids = h.stable_static_group("a", "b")
    assert h.join("", "b").get().error == E.group_max_size_reached
    assert h.coordinator.groups["g"].static_members["b"] == ids["b"], "the existing member stays"


def test_max_size_in_preparing_rebalance_counts_members_awaiting_join() -> None:
    h = Harness(config=CoordinatorConfig(initial_rebalance_delay_ms=0, min_session_timeout_ms=10, max_size=2))
    ids = h.stable_static_group("a", "b")
    a = h.join(ids["a"], "a")  # the leader forces a rebalance: 1 member awaiting join
    c = h.join("", "c")  # 1 awaiting < 2: accepted, parked
    assert not a.done and not c.done
    b = h.join(ids["b"], "b").get()  # b is a member but not awaiting, and 2 already await: kicked out
    assert (b.error, b.member_id) == (E.group_max_size_reached, "")
    assert ids["b"] not in h.coordinator.groups["g"].members
    assert h.state() is GroupState.PREPARING_REBALANCE, "kicking a member out does not complete the join"
    h.advance(30_000)
    assert a.get().generation_id == c.get().generation_id == 2


def test_member_already_awaiting_join_is_accepted_in_a_full_preparing_group() -> None:
    h = Harness(config=CoordinatorConfig(initial_rebalance_delay_ms=0, min_session_timeout_ms=10, max_size=2))
    ids = h.stable_static_group("a", "b")
    first = h.join(ids["a"], "a")
    h.join("", "c")
    second = h.join(ids["a"], "a")  # full, but a already awaits join: accepted
    assert not second.done
    h.advance(30_000)
    assert second.get().error == E.none
    assert not first.done, (
        "a second JoinGroup from the same member replaces the first, which stays unanswered"
    )


# --- initial rebalance delay -------------------------------------------------------------------------


def test_initial_rebalance_waits_the_delay_even_when_everyone_joined() -> None:
    h = Harness(config=CoordinatorConfig(initial_rebalance_delay_ms=3_000, min_session_timeout_ms=10))
    a = h.join("", "a")
    h.advance(2_999)
    assert not a.done
    h.advance(1)
    assert a.get().generation_id == 1


def test_initial_rebalance_delay_is_extended_when_a_new_member_joins_during_it() -> None:
    h = Harness(config=CoordinatorConfig(initial_rebalance_delay_ms=3_000, min_session_timeout_ms=10))
    a = h.join("", "a")
    h.advance(1_000)
    b = h.join("", "b")
    h.advance(2_000)  # t = 3000: first delay over, a new member was added, extend by another delay
    assert not a.done and not b.done
    h.advance(2_999)
    assert not a.done
    h.advance(1)  # t = 6000
    assert a.get().generation_id == b.get().generation_id == 1


def test_initial_rebalance_extension_is_bounded_by_the_rebalance_timeout() -> None:
    h = Harness(config=CoordinatorConfig(initial_rebalance_delay_ms=3_000, min_session_timeout_ms=10))
    a = h.join("", "a", rebalance=4_000)
    h.advance(1_000)
    h.join("", "b", rebalance=4_000)
    h.advance(2_000)  # remaining = 4000 - 3000 = 1000: extend by min(3000, 1000)
    assert not a.done
    h.advance(1_000)
    assert a.get().error == E.none


def test_first_member_does_not_count_as_a_new_member_for_the_extension() -> None:
    h = Harness(config=CoordinatorConfig(initial_rebalance_delay_ms=3_000, min_session_timeout_ms=10))
    a = h.join("", "a")
    h.advance(3_000)
    assert a.done


# --- new-member join timeout ---------------------------------------------------------------------


def test_new_member_parked_in_join_is_expired_after_the_new_member_join_timeout() -> None:
    h = Harness()
    # a never rejoins and has long timeouts, so the join phase outlasts b's patience as a new member
    h.stable_static_group("a", session=600_000, rebalance=600_000)
    b = h.join("", "b", rebalance=600_000)
    h.advance(299_999)
    assert not b.done
    h.advance(1)
    resp = b.get()
    assert (resp.error, resp.member_id) == (E.unknown_member_id, "")
    assert "join-timeout" in [e.get("cause") for e in h.events.of_type("member_expired")]


def test_v0_join_uses_the_session_timeout_as_rebalance_timeout() -> None:
    h = Harness()
    h.join("", None, version=0, session=7_000, rebalance=99_000)
    member = next(iter(h.coordinator.groups["g"].members.values()))
    assert member.rebalance_timeout_ms == 7_000
