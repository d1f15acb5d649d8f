"""Each metric over a small hand-written log, against answers worked out by hand; then the whole result
against the plain-Python reference over the same lines."""

from __future__ import annotations

from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession

from staticfleet.analytics.pipeline import AnalysisResult, analyze
from tests.analytics import handwritten, reference
from tests.analytics.helpers import keyed, table

REBALANCE_FIELDS = (
    "status",
    "reason",
    "start_ts",
    "end_ts",
    "duration_ms",
    "start_events",
    "generation",
    "members_before",
    "members_after",
    "partitions_total",
    "partitions_moved",
    "operation_id",
)


@pytest.fixture(scope="module")
def log_dir(handwritten_log: Path) -> Path:
    return handwritten_log


@pytest.fixture(scope="module")
def result(handwritten_result: AnalysisResult) -> AnalysisResult:
    return handwritten_result


@pytest.fixture(scope="module")
def rebalances(spark: SparkSession, result: AnalysisResult) -> dict[Any, dict[str, Any]]:
    return keyed(table(spark, result.out_dir, "rebalances"), "group", "rebalance_no")


@pytest.fixture(scope="module")
def groups(spark: SparkSession, result: AnalysisResult) -> dict[Any, dict[str, Any]]:
    return keyed(table(spark, result.out_dir, "groups"), "group")


@pytest.fixture(scope="module")
def operations(spark: SparkSession, result: AnalysisResult) -> dict[Any, dict[str, Any]]:
    return keyed(table(spark, result.out_dir, "operations"), "operation_id")


def fields(row: dict[str, Any], names: tuple[str, ...] = REBALANCE_FIELDS) -> tuple[Any, ...]:
    return tuple(row[n] for n in names)


def test_episode_duration_counts_from_the_first_start_through_interruptions(
    rebalances: dict[Any, dict[str, Any]],
) -> None:
    # orders #2: started 10000 (member-joined), restarted from CompletingRebalance at 12500, done 15020.
    row = rebalances[("orders", 2)]
    assert (row["reason"], row["start_ts"], row["end_ts"], row["duration_ms"]) == (
        "member-joined",
        10000,
        15020,
        5020,
    )
    assert row["start_events"] == 2
    assert row["reported_duration_ms"] == 5020


def test_every_rebalance_of_a_group_is_found_in_order(rebalances: dict[Any, dict[str, Any]]) -> None:
    assert [fields(rebalances[("orders", n)]) for n in range(1, 6)] == [
        ("completed", "member-joined", 1000, 4010, 3010, 1, 1, 0, 2, 6, None, None),
        ("completed", "member-joined", 10000, 15020, 5020, 2, 3, 2, 3, 6, 3, None),
        ("interrupted", "session-timeout", 40000, 41000, None, 1, None, 3, None, None, None, None),
        ("completed", "member-left", 50000, 53000, 3000, 1, 4, 2, 1, 6, 4, None),
        ("completed", "member-joined", 53000, 56000, 3000, 1, 5, 1, 2, 6, 3, None),
    ]
    assert ("orders", 6) not in rebalances


def test_group_empty_ends_a_rebalance_and_open_ones_stay_open(rebalances: dict[Any, dict[str, Any]]) -> None:
    assert fields(rebalances[("payments", 4)]) == (
        "emptied",
        "member-left",
        9000,
        12000,
        3000,
        1,
        4,
        3,
        0,
        None,
        None,
        None,
    )
    assert fields(rebalances[("payments", 6)]) == (
        "open",
        "member-joined",
        30000,
        None,
        None,
        1,
        None,
        1,
        None,
        None,
        None,
        None,
    )


def test_members_before_and_after(rebalances: dict[Any, dict[str, Any]]) -> None:
    # payments: 0 -> 1 -> 2 -> 3 -> emptied (0) -> back from Empty with 1 -> open
    assert [
        (rebalances[("payments", n)]["members_before"], rebalances[("payments", n)]["members_after"])
        for n in range(1, 7)
    ] == [(0, 1), (1, 2), (2, 3), (3, 0), (0, 1), (1, None)]
    # orders #4 starts after a coordinator restart: the count comes from group_loaded (2 members).
    assert rebalances[("orders", 4)]["members_before"] == 2


def test_partitions_moved_by_instance_id_for_static_members(rebalances: dict[Any, dict[str, Any]]) -> None:
    # orders-1 restarted with a new member id between #1 and #2: still the same owner by instance id.
    assert [rebalances[("orders", n)]["partitions_moved"] for n in (1, 2, 4, 5)] == [None, 3, 4, 3]


def test_partitions_moved_by_member_id_for_dynamic_members_and_unknown_assignments(
    rebalances: dict[Any, dict[str, Any]],
) -> None:
    # #2: p1 went m-a -> m-b. #3 has an undecodable assignment; #5's predecessor is #3, so unknown too.
    assert [rebalances[("payments", n)]["partitions_moved"] for n in range(1, 6)] == [
        None,
        1,
        None,
        None,
        None,
    ]
    assert [rebalances[("payments", n)]["partitions_total"] for n in range(1, 6)] == [2, 2, None, None, 2]


def test_a_rebalance_that_started_before_the_log_uses_the_coordinators_duration(
    rebalances: dict[Any, dict[str, Any]],
) -> None:
    row = rebalances[("legacy", 1)]
    assert (row["start_in_log"], row["start_ts"], row["duration_ms"], row["reason"]) == (
        False,
        96000,
        4000,
        "session-timeout",
    )
    assert row["members_before"] is None and row["partitions_moved"] is None


def test_restarts_absorbed_and_rebalanced(groups: dict[Any, dict[str, Any]]) -> None:
    assert (groups["orders"]["restarts_absorbed"], groups["orders"]["restarts_rebalanced"]) == (1, 1)
    assert groups["fleet"]["restarts_absorbed"] == 4
    assert groups["payments"]["restarts_absorbed"] == 0


def test_fenced_expired_by_cause_removed_left(groups: dict[Any, dict[str, Any]]) -> None:
    orders, payments, fleet = groups["orders"], groups["payments"], groups["fleet"]
    assert (orders["fenced"], orders["expired"], orders["expired_session_timeout"], orders["left"]) == (
        1,
        1,
        1,
        1,
    )
    assert (
        payments["expired"],
        payments["expired_rebalance_timeout"],
        payments["expired_session_timeout"],
    ) == (
        2,
        1,
        1,
    )
    assert (payments["left"], payments["removed"], payments["joined"]) == (1, 0, 5)
    assert (fleet["removed"], fleet["joined"], fleet["fenced"]) == (1, 5, 0)


def test_group_totals(groups: dict[Any, dict[str, Any]]) -> None:
    orders = groups["orders"]
    assert (orders["rebalances"], orders["completed"], orders["interrupted"]) == (5, 4, 1)
    assert orders["rebalance_time_ms"] == 3010 + 5020 + 3000 + 3000
    assert orders["max_rebalance_ms"] == 5020
    assert orders["partitions_moved"] == 3 + 4 + 3
    assert (orders["state"], orders["generation"]) == ("Stable", 5)
    payments = groups["payments"]
    assert (payments["rebalances"], payments["emptied"], payments["open"]) == (6, 1, 1)
    assert payments["state"] == "PreparingRebalance"
    assert groups["other"]["events"] == 0 and groups["other"]["rebalances"] == 0


def test_operations_window_attribution(operations: dict[Any, dict[str, Any]]) -> None:
    names = (
        "operation",
        "mode",
        "status",
        "start_ts",
        "end_ts",
        "duration_ms",
        "rebalances",
        "rebalance_time_ms",
        "partitions_moved",
        "restarts_absorbed",
        "removed",
        "joined",
    )
    # op-1 owns the restart at its end boundary (15000); the one at 23001 is after op-2 and belongs to none.
    assert fields(operations["op-1"], names) == (
        "scale-down",
        "staticfleet",
        "completed",
        10000,
        15000,
        5000,
        1,
        2000,
        3,
        1,
        1,
        0,
    )
    assert fields(operations["op-2"], names) == (
        "rollout",
        "staticfleet",
        "completed",
        20000,
        23000,
        3000,
        0,
        0,
        0,
        2,
        0,
        0,
    )
    # No id and no completion: named after the group, running to the group's last event.
    assert fields(operations["fleet#3"], names) == (
        "scale-up",
        None,
        "incomplete",
        30000,
        None,
        None,
        1,
        3000,
        3,
        0,
        0,
        2,
    )
    assert set(operations) == {"op-1", "op-2", "fleet#3"}


def test_rebalances_carry_their_operation(rebalances: dict[Any, dict[str, Any]]) -> None:
    assert [rebalances[("fleet", n)]["operation_id"] for n in (1, 2, 3)] == [None, "op-1", "fleet#3"]
    assert rebalances[("fleet", 2)]["operation"] == "scale-down"


def test_skipped_lines_are_counted_and_kept(spark: SparkSession, result: AnalysisResult) -> None:
    lines = result.summary["lines"]
    assert (lines["malformed"], lines["missing-fields"], lines["unsupported-version"]) == (3, 2, 1)
    assert result.summary["skipped_lines"] == 6
    rejected = table(spark, result.out_dir, "rejected")
    assert sorted(r["status"] for r in rejected) == sorted(
        ["malformed"] * 3 + ["missing-fields"] * 2 + ["unsupported-version"]
    )
    assert sorted(r["raw_line"] for r in rejected) == sorted(line for line in handwritten.BAD_LINES if line)
    unsupported = next(r for r in rejected if r["status"] == "unsupported-version")
    assert (unsupported["v"], unsupported["type"], unsupported["group"]) == (2, "member_joined", "orders")


def test_summary_counts(result: AnalysisResult) -> None:
    summary = result.summary
    assert summary["operations"]["completions_without_start"] == 1
    assert summary["operations"]["by_operation"] == {"rollout": 1, "scale-down": 1, "scale-up": 1}
    assert summary["rebalances"]["total"] == 5 + 6 + 1 + 3
    assert summary["rebalances"]["not_in_an_operation"] == 13
    assert summary["membership"]["restarts_absorbed"] == 5


def test_everything_matches_the_reference(
    spark: SparkSession, result: AnalysisResult, log_dir: Path, rebalances: dict[Any, dict[str, Any]]
) -> None:
    expected = reference.analyze(reference.event_files(log_dir))
    assert {r.key(): asdict(r) for r in expected.rebalances}.keys() == rebalances.keys()
    for item in expected.rebalances:
        mine = rebalances[item.key()]
        want = asdict(item)
        assert {k: mine[k] for k in want} == want, item.key()
    assert {k: v for k, v in result.summary["lines"].items() if k != "read"} == expected.lines.statuses
    groups = keyed(table(spark, result.out_dir, "groups"), "group")
    for group, counts in expected.group_membership().items():
        assert {k: groups[group][k] for k in counts} == counts, group


def test_a_groups_state_is_its_last_state_change_in_log_order(spark: SparkSession, tmp_path: Path) -> None:
    """Two state changes in one millisecond: the later line decides. A line that changes no state
    (member_left) does not, whatever state it names; the mode comes from the operator's events."""
    members = [handwritten._m("a-1", "a-1", {"t": [0]})]
    lines = [
        handwritten._e(1000, "rebalance_started", "a", generation=0, state="PreparingRebalance"),
        handwritten._join_done(2000, "a", 1),
        handwritten._done(2000, "a", 1, 1000, members, "member-joined"),
        handwritten._e(3000, "member_left", "a", generation=1, state="PreparingRebalance", member_id="a-1"),
        handwritten._op(500, "started", "a", "scale-up", id="op-a", mode="static"),
        handwritten._e(1000, "rebalance_started", "b", generation=0, state="PreparingRebalance"),
        handwritten._done(2000, "b", 1, 1000, members, "member-joined"),
        handwritten._join_done(2000, "b", 2),
    ]
    (tmp_path / "log").mkdir()
    (tmp_path / "log" / "events.jsonl").write_text("\n".join(lines) + "\n")
    result = analyze(spark, [str(tmp_path / "log")], tmp_path / "out")
    groups = keyed(table(spark, result.out_dir, "groups"), "group")
    assert (groups["a"]["state"], groups["a"]["mode"]) == ("Stable", "static")
    assert (groups["b"]["state"], groups["b"]["mode"]) == ("CompletingRebalance", None)
