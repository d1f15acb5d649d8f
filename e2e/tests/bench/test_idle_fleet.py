"""bench/idle_fleet.py: its pure parts, and one short run against the real embedded coordinator with the
example consumer's processes."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.consumption import ConsumerRun
from bench.fleet_ops import Embedded
from bench.idle_fleet import CONSUMING_BOUND_S, cpu_share, measure, rejoin_of, rows_of


def _run(*events: dict[str, object]) -> ConsumerRun:
    return ConsumerRun(tuple(events))


def test_a_rejoin_runs_from_the_subscription_to_the_assignment_and_then_to_the_last_first_fetch() -> None:
    run = _run(
        {"event": "started", "ts": 10.0},
        {"event": "assigned", "ts": 10.25, "partitions": ["t-0", "t-1"]},
        {"event": "first_fetch", "ts": 10.5, "partition": "t-1"},
        {"event": "first_fetch", "ts": 10.75, "partition": "t-0"},
    )
    found = rejoin_of(run)
    assert found is not None
    assert (found.assigned_s, found.consuming_s) == pytest.approx((0.25, 0.5))


def test_a_restart_that_never_fetched_every_partition_is_no_rejoin() -> None:
    run = _run(
        {"event": "started", "ts": 10.0},
        {"event": "assigned", "ts": 10.25, "partitions": ["t-0", "t-1"]},
        {"event": "first_fetch", "ts": 10.5, "partition": "t-1"},
    )
    assert rejoin_of(run) is None
    assert rejoin_of(_run({"event": "started", "ts": 10.0})) is None


def test_cpu_is_a_share_of_one_core() -> None:
    assert cpu_share(1.5, 10.0) == pytest.approx(0.15)
    assert cpu_share(1.0, 0.0) == 0.0


def test_a_short_run_reads_the_coordinators_cpu_and_times_each_rejoin(tmp_path: Path) -> None:
    coordinator = Embedded(tmp_path / "embedded")
    try:
        found = measure(coordinator, tmp_path, groups=1, members=3, restarts=2, window_s=1.0, busy=1)
    finally:
        coordinator.stop()
    assert found["consumers"] == 3
    # Three idle members heartbeat and fetch: the coordinator works, and not all the time.
    assert 0 < found["cpu_share"] < 1
    assert len(found["assigned_s"]) == len(found["consuming_s"]) == 2
    # A static member's rejoin is answered from the group's assignment: after its subscription, and well
    # before the bound the run waits for each restart.
    assert all(0 < s < CONSUMING_BOUND_S for s in found["assigned_s"] + found["consuming_s"])
    rows = rows_of({"embedded": [found]})
    assert rows[0][:3] == ["the embedded coordinator", 3, 1]
