"""Where a pod's restart went, computed from a hand-made pod runner log and consumer logs."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from bench.consumption import parse_log
from bench.pod_phases import collect, main, phases, restarts, runner_events, summary, windows

T0 = 1_796_000_000.0  # 2026-11-30 00:53:20 UTC

RUNNER = """\
2026-11-30 00:53:20,000 INFO podrunner: bound ns/fleet-0 to node
2026-11-30 00:53:20,100 INFO podrunner: started ns/fleet-0/consumer pid 1: python consumer.py
2026-11-30 00:53:30,000 INFO podrunner: stopping ns/fleet-0 (grace 10s)
2026-11-30 00:53:30,300 INFO podrunner: stopped ns/fleet-0: pod phase Succeeded
2026-11-30 00:53:30,500 INFO podrunner: bound ns/fleet-0 to node
2026-11-30 00:53:30,600 INFO podrunner: started ns/fleet-0/consumer pid 2: python consumer.py
2026-11-30 00:53:30,650 INFO podrunner: started ns/other-0/consumer pid 3: python consumer.py
"""


def line(ts: float, event: str, **fields: Any) -> str:
    return json.dumps({"ts": T0 + ts, "event": event, **fields})


CONSUMER = "\n".join(
    [
        "--- 2026-11-30T00:53:20Z pod a restartCount 0",
        line(0.5, "started"),
        line(0.6, "assigned", partitions=["t-0", "t-1"]),
        line(0.7, "first_fetch", partition="t-0", record=False),
        line(0.8, "first_fetch", partition="t-1", record=False),
        line(10.1, "stopped", exit_code=0),
        "--- 2026-11-30T00:53:30Z pod b restartCount 0",
        line(11.0, "started"),
        line(11.1, "assigned", partitions=["t-0", "t-1"]),
        line(11.2, "first_fetch", partition="t-1", record=False),
        line(11.4, "first_fetch", partition="t-0", record=False),
    ]
)


def test_a_restart_is_split_at_each_moment_the_pod_runner_and_the_consumer_logged() -> None:
    found = restarts(parse_log(CONSUMER), runner_events(RUNNER)["ns/fleet-0"])
    assert len(found) == 1
    got = phases(found[0])
    expected = {
        "signal to consumer stop": 0.1,
        "consumer stop to pod stop": 0.2,
        "pod stop to new pod bound": 0.2,
        "bound to container start": 0.1,
        "container start to subscribed": 0.4,
        "subscribed to assigned": 0.1,
        "assigned to consuming": 0.3,  # until the last partition of the assignment is fetched
        "unowned (consumer stop to consuming)": 1.3,
    }
    assert got == pytest.approx(expected, abs=1e-6)


def test_a_log_whose_runs_and_the_runners_starts_differ_in_number_gives_no_restart() -> None:
    runner = runner_events(RUNNER)["ns/fleet-0"]
    only_second = CONSUMER.split("--- 2026-11-30T00:53:30Z")[1]
    assert restarts(parse_log("--- 2026-11-30T00:53:30Z" + only_second), runner) == []


def test_a_restart_whose_new_consumer_never_fetched_is_left_out() -> None:
    unfinished = "\n".join(CONSUMER.splitlines()[:-2])
    assert restarts(parse_log(unfinished), runner_events(RUNNER)["ns/fleet-0"]) == []


def test_the_workdir_is_read_per_fleet_namespace_and_an_operations_window_filters(tmp_path: Path) -> None:
    (tmp_path / "cluster" / "logs").mkdir(parents=True)
    (tmp_path / "cluster" / "logs" / "podrunner.log").write_text(RUNNER)
    pod = tmp_path / "cluster" / "pods" / "ns" / "fleet-0"
    pod.mkdir(parents=True)
    (pod / "consumer.log").write_text(CONSUMER)
    assert list(collect(tmp_path, None)) == ["ns"]
    assert collect(tmp_path, None, "other-*") == {}
    samples = [
        {"operation": "rolling restart", "began_at": "2026-11-30T00:53:29.000+00:00", "seconds": 5},
        {"operation": "scale up by half", "began_at": "2026-11-30T00:53:00.000+00:00", "seconds": 60},
    ]
    assert collect(tmp_path, windows(samples, "rolling restart"))["ns"]
    assert collect(tmp_path, windows(samples, "scale down by half")) == {}
    table = summary(collect(tmp_path, None))
    assert "| unowned (consumer stop to consuming) | 1.300 (1.300) |" in table
    assert main([str(tmp_path)]) == 0


def test_a_workdir_without_a_complete_restart_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "cluster" / "logs").mkdir(parents=True)
    (tmp_path / "cluster" / "logs" / "podrunner.log").write_text("")
    assert main([str(tmp_path)]) == 1
    assert "no complete pod restart" in capsys.readouterr().err
