"""LeaveGroup: v0-2 single member, v3+ batches with per-member errors, removal by instance id."""

from __future__ import annotations

from staticfleet.coordinator import ErrorCode, GroupState
from staticfleet.coordinator.messages import LeaveGroupResponse, LeaveMemberResponse

from .harness import Harness

E = ErrorCode


def test_batch_leave_echoes_the_request_and_reports_each_member() -> None:
    h = Harness()
    ids = h.stable_static_group("a", "b")
    resp = h.leave(("", "a"), ("", "unknown"), ("bogus", "b"))
    assert resp.error == E.none
    assert resp.members == (
        LeaveMemberResponse("", "a", E.none),
        LeaveMemberResponse("", "unknown", E.unknown_member_id),
        LeaveMemberResponse("bogus", "b", E.fenced_instance_id),
    )
    assert ids["a"] not in h.coordinator.groups["g"].members
    assert h.state() is GroupState.PREPARING_REBALANCE
    assert h.generation() == 1, "the generation moves only when the join phase completes"


def test_remove_by_instance_id_with_empty_member_id_removes_the_mapped_member() -> None:
    h = Harness()
    ids = h.stable_static_group("a", "b", "c")
    resp = h.leave(("", "b"), ("", "c"))
    assert [m.error for m in resp.members] == [E.none, E.none]
    group = h.coordinator.groups["g"]
    assert set(group.members) == {ids["a"]} and set(group.static_members) == {"a"}
    assert h.heartbeat(ids["a"], 1, "a") == E.rebalance_in_progress
    a = h.join(ids["a"], "a").get()
    assert (a.generation_id, len(a.members)) == (2, 1), "one batch, one rebalance"
    removed = h.events.of_type("member_removed")
    assert [e["instance_id"] for e in removed] == ["b", "c"]


def test_empty_member_id_without_instance_id_is_unknown_member_id() -> None:
    h = Harness()
    h.stable_static_group("a")
    assert h.leave(("", None)).members[0].error == E.unknown_member_id


def test_static_member_can_be_removed_by_member_id_alone_and_the_mapping_is_cleared() -> None:
    h = Harness()
    ids = h.stable_static_group("a", "b")
    assert h.leave((ids["b"], None)).members[0].error == E.none
    assert "b" not in h.coordinator.groups["g"].static_members
    h.join(ids["a"], "a")
    new_b = h.join("", "b")
    assert not new_b.done, "a later join of b is a new member, not a replacement"


def test_leave_of_unknown_group_is_none_at_top_level_and_unknown_member_for_each() -> None:
    h = Harness()
    resp = h.leave(("m1", "x"), ("", "y"))
    assert resp == LeaveGroupResponse(
        E.none,
        (
            LeaveMemberResponse("m1", "x", E.unknown_member_id),
            LeaveMemberResponse("", "y", E.unknown_member_id),
        ),
    )
    assert resp.single_member_error() == E.unknown_member_id  # what a v0-2 client sees


def test_leave_with_empty_group_id_is_invalid_group_id_at_top_level() -> None:
    resp = Harness().leave(("m", None), group="")
    assert (resp.error, resp.members) == (E.invalid_group_id, ())


def test_leave_of_a_dead_group_is_coordinator_not_available_at_top_level() -> None:
    h = Harness()
    ids = h.stable_static_group("a")
    h.coordinator.groups["g"].state = GroupState.DEAD
    resp = h.leave((ids["a"], "a"))
    assert (resp.error, resp.members) == (E.coordinator_not_available, ())


def test_leaving_the_last_member_empties_the_group_and_bumps_the_generation() -> None:
    h = Harness()
    ids = h.stable_static_group("a")
    h.leave((ids["a"], "a"))
    assert h.state() is GroupState.EMPTY
    assert h.generation() == 2
    described = h.describe()
    assert (described.state, described.protocol_data, described.protocol_type) == ("Empty", "", "consumer")
    assert h.store.records[-1].members == ()  # type: ignore[union-attr]


def test_leave_of_a_pending_member_removes_it_and_still_triggers_a_rebalance() -> None:
    h = Harness()
    h.stable_static_group("a")
    pending = h.join("", None, version=5).get().member_id
    assert h.leave((pending, None)).members[0].error == E.none
    assert not h.coordinator.groups["g"].pending_join_members
    # Kafka counts any successful removal in the batch, so a Stable group rebalances here too.
    assert h.state() is GroupState.PREPARING_REBALANCE


def test_leave_during_preparing_rebalance_can_complete_the_join() -> None:
    h = Harness()
    ids = h.stable_static_group("a", "b")
    a = h.join(ids["a"], "a")
    assert not a.done
    h.leave((ids["b"], "b"))
    assert a.get().generation_id == 2


def test_leave_completes_a_parked_join_of_the_leaving_member_with_unknown_member_id() -> None:
    h = Harness()
    ids = h.stable_static_group("a", "b", "c")
    h.join(ids["a"], "a")
    b = h.join(ids["b"], "b")
    h.leave(("", "b"))
    resp = b.get()
    assert (resp.error, resp.member_id) == (E.unknown_member_id, "")


def test_v2_leave_reports_the_first_member_error_at_top_level() -> None:
    h = Harness()
    h.stable_static_group("a")
    resp = h.leave(("nobody", None), version=2)
    assert resp.single_member_error() == E.unknown_member_id
