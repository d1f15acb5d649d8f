"""Spark over an event log written by the real coordinator state machine (via `staticfleet simulate`),
cross-checked number by number against the plain-Python reference."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path
from typing import Any

import pytest
from pyspark.sql import SparkSession
from pyspark.sql.types import StructType

from tests.analytics import reference
from tests.analytics.helpers import keyed, table


@pytest.fixture(scope="module")
def expected(simulated_dir: Path) -> reference.Analysis:
    return reference.analyze(reference.event_files(simulated_dir))


@pytest.fixture(scope="module")
def summary(simulated_report: Path) -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads((simulated_report / "summary.json").read_text())
    return loaded


def test_every_line_is_an_event(summary: dict[str, Any], expected: reference.Analysis) -> None:
    assert summary["lines"] == {"read": len(expected.lines.events), "ok": len(expected.lines.events)}
    assert summary["skipped_lines"] == 0


def test_rebalances_match_the_reference(
    spark: SparkSession, simulated_report: Path, expected: reference.Analysis
) -> None:
    found = keyed(table(spark, simulated_report, "rebalances"), "group", "rebalance_no")
    assert len(expected.rebalances) > 50
    assert found.keys() == {r.key() for r in expected.rebalances}
    for item in expected.rebalances:
        want = asdict(item)
        assert {k: found[item.key()][k] for k in want} == want, item.key()
    assert {r["status"] for r in found.values()} == {"completed"}


def test_coordinator_durations_agree_with_the_event_times(
    spark: SparkSession, simulated_report: Path
) -> None:
    rows = table(spark, simulated_report, "rebalances")
    assert all(r["duration_ms"] == r["reported_duration_ms"] for r in rows)


def test_operations_match_the_reference(
    spark: SparkSession, simulated_report: Path, expected: reference.Analysis
) -> None:
    found = keyed(table(spark, simulated_report, "operations"), "operation_id")
    assert found.keys() == {op.operation_id for op in expected.operations}
    for op in expected.operations:
        row = found[op.operation_id]
        members = reference.membership_counts(op.members)
        assert (row["operation"], row["mode"], row["status"], row["start_ts"], row["end_ts"]) == (
            op.operation,
            op.mode,
            op.status,
            op.start_ts,
            op.end_ts,
        )
        assert row["rebalances"] == len(op.rebalances), op.operation_id
        assert row["rebalance_time_ms"] == sum(r.duration_ms or 0 for r in op.rebalances)
        assert row["partitions_moved"] == sum(r.partitions_moved or 0 for r in op.rebalances)
        assert {k: row[k] for k in members} == members, op.operation_id


def test_groups_match_the_reference(
    spark: SparkSession, simulated_report: Path, expected: reference.Analysis
) -> None:
    found = keyed(table(spark, simulated_report, "groups"), "group")
    counts = expected.group_membership()
    assert found.keys() == counts.keys()
    for group, want in counts.items():
        row = found[group]
        mine = [r for r in expected.rebalances if r.group == group]
        assert {k: row[k] for k in want} == want, group
        assert row["rebalances"] == len(mine)
        assert row["rebalance_time_ms"] == sum(r.duration_ms or 0 for r in mine)
        assert row["partitions_moved"] == sum(r.partitions_moved or 0 for r in mine)
        assert row["state"] == "Stable" and row["mode"] == group.split("-")[0]


def test_membership_table_holds_every_membership_event(
    spark: SparkSession, simulated_report: Path, expected: reference.Analysis
) -> None:
    rows = table(spark, simulated_report, "membership")
    events = [e for e in expected.lines.events if e["type"] in reference.MEMBERSHIP_TYPES]
    assert sorted((r["group"], r["ts"], r["type"]) for r in rows) == sorted(
        (e["group"], e["ts"], e["type"]) for e in events
    )
    absorbed = [r for r in rows if r["absorbed"]]
    assert len(absorbed) == sum(1 for e in events if e.get("rebalance") is False)


def test_comparison_shows_what_static_membership_saves(summary: dict[str, Any]) -> None:
    rows = {(r["mode"], r["operation"]): r for r in summary["comparison"]}
    assert len(rows) == 3 * 5
    # A rollout costs dynamic groups rebalances; static membership absorbs every restart.
    assert rows[("dynamic", "rollout")]["rebalances"] >= 2 * 4
    for mode in ("static", "staticfleet"):
        assert rows[(mode, "rollout")]["rebalances"] == 0
        assert rows[(mode, "rollout")]["restarts_absorbed"] == 2 * 4
        assert rows[(mode, "crash")]["rebalances"] == 0
    # Scale-down: the operator's removal is one prompt rebalance; plain static waits for expiry.
    assert rows[("staticfleet", "scale-down")]["removed"] == 2 * 2
    assert rows[("static", "scale-down")]["expired"] == 2 * 2
    assert rows[("staticfleet", "scale-down")]["rebalances"] == 2


def test_lookups_by_name_give_the_same_tables_as_hashes(
    spark: SparkSession,
    simulated_dir: Path,
    simulated_report: Path,
    analytics_tmp: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Were two groups' hashes to clash, groups are looked up by name."""
    from staticfleet.analytics import tables
    from staticfleet.analytics.pipeline import analyze

    monkeypatch.setattr(tables, "group_hashes_unique", lambda numbers: False)
    out = analytics_tmp / "simulated-report-by-name"
    analyze(spark, [str(simulated_dir)], out)
    for name in ("rebalances", "membership", "operations", "groups"):
        by_name = table(spark, out, name)
        assert by_name, name
        assert sorted(by_name, key=repr) == sorted(table(spark, simulated_report, name), key=repr), name


def test_tables_are_read_back_with_the_schema_in_their_files(
    spark: SparkSession, simulated_analysis: tuple[Path, list[StructType]]
) -> None:
    """Each written table is read back with the schema it was written with, not one found in a file:
    that schema must be the one Spark finds in the file."""
    from staticfleet.analytics import pipeline

    out, given = simulated_analysis
    assert len(given) >= len(pipeline.TABLES)
    for name in pipeline.TABLES:
        assert spark.read.parquet(str(out / name)).schema in given, name
