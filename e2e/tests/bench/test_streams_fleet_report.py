"""The Streams benchmark's tables (bench/streams_fleet.py): one row per outcome the kind module recorded,
the README's short form beside the dynamic fleet where both ran, and the rows where the baseline did better
said so."""

from __future__ import annotations

from typing import Any

from bench.streams_fleet import readme_table, report, session_timeouts


def outcome(coordinator: str, fleet: str, operation: str, **figures: Any) -> dict[str, Any]:
    found = {"membership_rebalances": 1, "follow_ups": 0, "seconds_to_stable": 7.5, "records_restored": 100}
    return {"coordinator": coordinator, "fleet": fleet, "operation": operation, **found, **figures}


ROWS = [
    outcome("embedded", "staticfleet", "rolling restart", membership_rebalances=0, seconds_to_stable=None,
            records_restored=0),
    outcome("embedded", "staticfleet", "scale 4 -> 2", records_restored=500),
    outcome("embedded", "plain dynamic", "scale 4 -> 2", seconds_to_stable=91.0, records_restored=400),
    outcome("kafka", "staticfleet", "scale 4 -> 2", records_restored=300),
    outcome("kafka", "plain dynamic", "scale 4 -> 2", seconds_to_stable=93.0, records_restored=350),
    outcome("kafka", "staticfleet", "scale 2 -> 4", follow_ups=1, seconds_to_stable=20.94),
]  # fmt: skip


def test_the_full_table_has_one_row_per_outcome_in_the_order_run() -> None:
    lines = [line for line in report(ROWS).splitlines() if line.startswith("| ")][1:]
    assert len(lines) == len(ROWS)
    assert lines[0] == "| embedded | staticfleet | rolling restart | 0 | 0 | - | 0 |"
    assert lines[-1] == "| kafka | staticfleet | scale 2 -> 4 | 1 | 1 | 20.9 | 100 |"


def test_the_readme_puts_the_dynamic_fleet_beside_staticfleet_and_names_where_it_restored_fewer() -> None:
    text = readme_table(ROWS, "2026-11-29")
    rows = [line for line in text.splitlines() if line.startswith("| ")][1:]
    assert rows == [
        "| embedded | rolling restart | 0 / - s / 0 | - |",
        "| embedded | scale 4 -> 2 | 1 / 7.5 s / 500 | 1 / 91.0 s / 400 |",
        "| kafka | scale 4 -> 2 | 1 / 7.5 s / 300 | 1 / 93.0 s / 350 |",
        "| kafka | scale 2 -> 4 | 1 + 1 follow-up / 20.9 s / 100 | - |",
    ]
    assert "the dynamic fleet restored fewer records on: embedded)" in text
    assert "restored fewer" not in readme_table(ROWS[3:], "2026-11-29")


def test_each_fleets_session_timeout_comes_from_its_rows() -> None:
    rows = [
        {**ROWS[1], "session_timeout_ms": 90_000},
        {**ROWS[2], "session_timeout_ms": 45_000},
        {**ROWS[3], "session_timeout_ms": 90_000},
    ]
    assert session_timeouts(rows) == "staticfleet 90 s, plain dynamic 45 s"
    assert "session timeout: staticfleet 90 s, plain dynamic 45 s" in " ".join(report(rows).split())
    assert session_timeouts(ROWS) == "not recorded"
