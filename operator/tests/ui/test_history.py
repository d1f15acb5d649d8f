"""The dashboard's own record of assignment changes."""

from __future__ import annotations

from staticfleet.ui.history import AssignmentTracker

from .fixtures import T0, group, member

KEY = ("shop", "orders")


def test_the_first_assignment_is_a_baseline_and_a_change_is_recorded_with_its_moves() -> None:
    tracker = AssignmentTracker()
    tracker.observe(KEY, group(member("a", "h", {"t": [0, 1]}), member("b", "h", {"t": [2, 3]})), 5, T0)
    assert tracker.observed(KEY) == []
    tracker.observe(KEY, group(member("a", "h", {"t": [0, 1, 2, 3]})), 6, T0 + 1000)
    (change,) = tracker.observed(KEY)
    assert (change.generation, change.partitions_moved, change.completed_ms) == (6, 2, T0 + 1000)
    assert tracker.moved_by_generation(KEY) == {6: 2}


def test_a_static_restart_with_the_same_assignment_and_generation_is_no_change() -> None:
    tracker = AssignmentTracker()
    before = group(member("a", "h", {"t": [0]}))
    tracker.observe(KEY, before, 3, T0)
    restarted = group(member("a", "h2", {"t": [0]}))
    tracker.observe(KEY, restarted, 3, T0 + 1000)
    assert tracker.observed(KEY) == []


def test_groups_that_are_not_stable_are_not_compared() -> None:
    tracker = AssignmentTracker()
    tracker.observe(KEY, group(member("a", "h", {"t": [0]})), 1, T0)
    tracker.observe(KEY, group(member("a", "h", None), state="CompletingRebalance"), 2, T0 + 500)
    assert tracker.observed(KEY) == []
    tracker.observe(KEY, group(member("a", "h", {"t": [0]})), 2, T0 + 900)
    (change,) = tracker.observed(KEY)
    assert change.partitions_moved == 0 and change.generation == 2
