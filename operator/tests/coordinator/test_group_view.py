"""The coordinator's HTTP view of a group: what the coordinator writes, the operator reads back unchanged."""

from __future__ import annotations

import json

from staticfleet.coordinator import EXPECTED_INSTANCE_IDS
from staticfleet.coordinator.group_view import CoordinatorGroupView, summary_json

from .harness import Harness


def test_a_group_view_read_back_from_its_json_is_the_view_the_coordinator_wrote() -> None:
    h = Harness()
    h.stable_static_group("a", "b")
    h.coordinator.alter_group_config("g", {EXPECTED_INSTANCE_IDS: "a,b,c"})
    view = CoordinatorGroupView.of(h.coordinator, h.coordinator.groups["g"])
    assert view.rebalances >= 1 and view.last_rebalance is not None and view.recent_rebalances
    assert {m["instanceId"] for m in view.member_list} == {"a", "b"}
    assert view.expected_instance_ids == ("a", "b", "c")
    assert CoordinatorGroupView.from_json(json.loads(json.dumps(view.to_json()))) == view


def test_the_summary_leaves_out_members_and_history() -> None:
    h = Harness()
    h.stable_static_group("a")
    summary = CoordinatorGroupView.of(h.coordinator, h.coordinator.groups["g"]).to_json(detail=False)
    assert "memberList" not in summary and "recentRebalances" not in summary
    assert summary["lastRebalance"]["durationMs"] == (
        summary["lastRebalance"]["completedMs"] - summary["lastRebalance"]["startedMs"]
    )


def test_a_listing_entry_is_the_summary_of_the_view() -> None:
    h = Harness()
    h.stable_static_group("a", "b")
    h.stable_static_group("c", group="other")
    h.join("", "d", group="preparing")
    for group in h.coordinator.groups.values():
        view = CoordinatorGroupView.of(h.coordinator, group)
        assert summary_json(group) == view.to_json(detail=False), group.group_id
