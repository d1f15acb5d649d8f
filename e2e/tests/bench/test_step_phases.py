"""Where a scale step went, computed from hand-made consumer, pod runner and coordinator logs."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from bench.fleet_report import SCALE_DOWN, SCALE_UP
from bench.step_phases import PHASES, Step, collect, main, moments, namespace_of, phases, steps_of, summary
from e2e.streams_logs import History, Rebalance

T0 = 1_796_000_000.0  # 2026-11-30 00:53:20 UTC
NAMESPACES = [
    "embedded-4-0-staticfleet",
    "embedded-4-1-plain-dynamic-250-ms",
    "embedded-4-2-plain-dynamic-250-ms-cooperative",
]


def line(ts: float, event: str, **fields: Any) -> str:
    return json.dumps({"ts": T0 + ts, "event": event, **fields})


def history(*rebalances: tuple[float, float]) -> History:
    return History(
        [
            Rebalance(g, T0 + start, T0 + stable, "member-left", False, 2)
            for g, (start, stable) in enumerate(rebalances, 1)
        ],
        None,
    )


def step(operation: str, seconds: float, kind: str = "staticfleet") -> Step:
    return Step("embedded", kind, operation, 4, T0 + 10.0, seconds)


def split(operation: str, seconds: float, logs: dict[int, str], *args: Any) -> dict[str, float]:
    """The phases of a step of a fleet of N=4 begun at T0 + 10 (`args`: the runner's lines, the history)."""
    return phases(operation, moments(step(operation, seconds), logs, *args))


def test_a_scale_down_is_split_at_the_departures_and_the_join_phase_it_ends_with() -> None:
    logs = {
        2: "\n".join(
            [line(1.0, "started"), line(10.3, "departing", instance="fleet-2"), line(10.5, "stopped")]
        ),
        3: "\n".join([line(1.0, "started"), line(10.35, "stopped", exit_code=0)]),
    }
    # An earlier step's join phase and a later one fall outside the step.
    got = split(SCALE_DOWN, 1.0, logs, {}, history((4.0, 5.0), (10.3, 10.8), (12.0, 12.5)))
    assert got == pytest.approx(
        {
            "command to first member out": 0.3,
            "first to last member out": 0.05,
            "last member out to join phase complete": 0.45,
            "join phase complete to seen Stable": 0.2,
        },
        abs=1e-6,
    )


def test_a_departing_pod_whose_log_shows_no_departure_leaves_the_departures_out() -> None:
    logs = {2: line(10.3, "departing"), 3: line(1.0, "started")}
    assert set(split(SCALE_DOWN, 1.0, logs, {}, history((10.3, 10.8)))) == {
        "join phase complete to seen Stable"
    }


def test_a_scale_up_is_split_at_the_new_pods_binding_and_their_consumers_start() -> None:
    # N=4: a scale-up goes from 2 to 3 pods, so only fleet-2 is new; fleet-3's lines are not its.
    logs = {2: line(10.9, "started"), 3: line(10.5, "started")}
    runner = {2: [(T0 + 2.0, "bound"), (T0 + 10.2, "bound")], 3: [(T0 + 10.1, "bound")]}
    got = split(SCALE_UP, 1.5, logs, runner, history((10.95, 11.3)))
    assert list(got.values()) == pytest.approx([0.2, 0.7, 0.4, 0.2], abs=1e-6)
    assert list(got) == [name for name, _, _ in PHASES[SCALE_UP]]


def test_a_step_whose_group_completed_no_join_phase_within_it_has_no_join_moment() -> None:
    found = moments(step(SCALE_UP, 1.5), {2: line(10.9, "started")}, {}, history((4.0, 5.0)))
    assert "joined" not in found


def test_a_fleet_namespace_is_matched_whole_so_one_kind_never_takes_anothers() -> None:
    assert namespace_of(step(SCALE_DOWN, 1.0, "plain dynamic 250 ms"), NAMESPACES) == NAMESPACES[1]
    cooperative = step(SCALE_DOWN, 1.0, "plain dynamic 250 ms cooperative")
    assert namespace_of(cooperative, NAMESPACES) == NAMESPACES[2]
    assert namespace_of(step(SCALE_DOWN, 1.0, "plain static"), NAMESPACES) is None


def test_only_scale_steps_are_read_from_the_samples() -> None:
    began = datetime.fromtimestamp(T0, UTC).isoformat(timespec="milliseconds")
    samples = [
        {
            "backend": "kafka",
            "kind": "staticfleet",
            "operation": op,
            "replicas": 20,
            "began_at": began,
            "seconds": 1.2,
        }
        for op in (SCALE_DOWN, SCALE_UP, "rolling restart")
    ]
    found = steps_of(samples)
    assert [s.operation for s in found] == [SCALE_DOWN, SCALE_UP]
    assert found[0].began == pytest.approx(T0) and found[0].seen == pytest.approx(T0 + 1.2)
    assert list(found[1].pods()) == [10, 11, 12, 13, 14] and list(found[0].pods()) == list(range(10, 20))


def test_the_summary_gives_each_phase_its_median_and_range_per_kind() -> None:
    down = [{"command to first member out": v} for v in (0.3, 0.1, 0.2)]
    text = summary({("embedded", SCALE_DOWN): {"staticfleet": down, "plain dynamic": [{}]}})
    assert "| command to first member out | 0.20 (0.10-0.30) | - |" in text
    assert "embedded, scale down by half (median (range) of 3 runs, s):" in text


def test_a_run_directory_is_read_end_to_end(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    namespace = NAMESPACES[0]
    for ordinal, text in ((2, line(10.3, "departing")), (3, line(10.4, "stopped"))):
        pod = tmp_path / "cluster" / "pods" / namespace / f"fleet-{ordinal}"
        pod.mkdir(parents=True)
        (pod / "consumer.log").write_text(text + "\n")
    events = tmp_path / "embedded" / "coordinator" / "data" / "events"
    events.mkdir(parents=True)
    group = f"{namespace}.fleet"
    records = [
        {
            "ts": int((T0 + 10.3) * 1000),
            "type": "rebalance_started",
            "group": group,
            "generation": 1,
            "reason": "member-left",
        },
        {
            "ts": int((T0 + 10.8) * 1000),
            "type": "join_completed",
            "group": group,
            "generation": 2,
            "members": [],
        },
    ]
    (events / "events.jsonl").write_text("".join(json.dumps(r) + "\n" for r in records))
    began = datetime.fromtimestamp(T0 + 10.0, UTC).isoformat(timespec="milliseconds")
    sample = {
        "backend": "embedded",
        "kind": "staticfleet",
        "operation": SCALE_DOWN,
        "replicas": 4,
        "began_at": began,
        "seconds": 1.0,
    }
    split = collect(tmp_path, steps_of([sample]))
    assert split[("embedded", SCALE_DOWN)]["staticfleet"][0]["first to last member out"] == pytest.approx(
        0.1, abs=1e-6
    )
    samples = tmp_path / "samples.json"
    samples.write_text(json.dumps([sample]))
    assert main([str(tmp_path), str(samples)]) == 0
    assert "| last member out to join phase complete | 0.40 (0.40-0.40) |" in capsys.readouterr().out
    assert main([str(tmp_path / "missing"), str(samples)]) == 1
