"""bench/heartbeat_wake.py: its pure parts, and one short run against the real embedded coordinator with
real librdkafka members."""

from __future__ import annotations

from pathlib import Path

import pytest

from bench.fleet_ops import Embedded
from bench.heartbeat_wake import TOPIC, TRIAL_BOUND_S, VARIANTS, WAKE_EVERY_S, measure, spread, wake_due


def test_the_loop_wakes_librdkafka_once_the_period_has_passed_and_not_before() -> None:
    assert wake_due(10.0, 0.0)
    assert not wake_due(10.0, 10.0 - WAKE_EVERY_S / 2)
    assert wake_due(10.0, 10.0 - WAKE_EVERY_S)


def test_the_trials_cover_the_heartbeat_cycle_evenly() -> None:
    waits = [spread(trial, 4, 0.25) for trial in range(4)]
    assert waits == pytest.approx([0.03125, 0.09375, 0.15625, 0.21875])
    assert all(0 < wait < 0.25 for wait in waits)


def test_each_trial_measures_the_others_reassignment_after_a_leave(tmp_path: Path) -> None:
    coordinator = Embedded(tmp_path / "embedded")
    try:
        coordinator.create_topic(TOPIC, 16)
        results = measure(coordinator.bootstrap, members=3, trials=2, heartbeat_ms=250, tag="t")
    finally:
        coordinator.stop()
    assert set(results) == set(VARIANTS)
    for seconds in results.values():
        assert len(seconds) == 2
        # A leave reaches the others through a rebalance: never at once, and within the trial's bound.
        assert all(0 < s < TRIAL_BOUND_S for s in seconds), seconds
