"""The simulator (real coordinator, virtual consumers), checked in plain Python on the logs it writes."""

from __future__ import annotations

import dataclasses
import filecmp
import json
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from staticfleet.analytics.simulation import SimulationParams, simulate
from staticfleet.analytics.simulation.assignor import Subscriber, leader_assignments, range_assign
from staticfleet.analytics.simulation.output import JsonLinesLog
from staticfleet.coordinator.consumer_protocol import Subscription, decode_assignment, encode_subscription
from tests.analytics import reference


def run(tmp_path: Path, name: str, **overrides: Any) -> reference.Analysis:
    params = SimulationParams(**{"groups": 1, "members": 4, "partitions": 8, **overrides})
    out = tmp_path / name
    report = simulate(params, out)
    assert report.unsettled_operations == 0 and report.failed_consumers == 0
    return reference.analyze(reference.event_files(out))


def per_operation(analysis: reference.Analysis, operation: str) -> list[reference.Operation]:
    return [op for op in analysis.operations if op.operation == operation]


def kinds(op: reference.Operation) -> Counter[str]:
    return Counter(e["type"] for e in op.members)


def test_range_assignor_orders_static_members_by_instance_id() -> None:
    subscribers = [Subscriber("m-z", "pod-1", ("t",)), Subscriber("m-a", "pod-0", ("t",))]
    assert range_assign(subscribers, {"t": 5}) == {"m-a": {"t": (0, 1, 2)}, "m-z": {"t": (3, 4)}}
    dynamic = [Subscriber("b", None, ("t", "u")), Subscriber("a", None, ("t",))]
    assert range_assign(dynamic, {"t": 2, "u": 1}) == {"a": {"t": (0,)}, "b": {"t": (1,), "u": (0,)}}


def test_leader_assignments_are_consumer_protocol_bytes() -> None:
    metadata = encode_subscription(Subscription(0, ("t",)))
    encoded = leader_assignments([("m1", None, metadata), ("m2", None, metadata)], {"t": 3})
    assert decode_assignment(encoded["m1"]).partitions == {"t": (0, 1)}
    assert decode_assignment(encoded["m2"]).partitions == {"t": (2,)}


def test_json_lines_log_rotates_and_keeps_every_line(tmp_path: Path) -> None:
    log = JsonLinesLog(tmp_path, "events", max_bytes=200)
    for n in range(30):
        log.emit({"n": n, "pad": "x" * 20})
    log.close()
    files = log.files()
    assert [f.name for f in files[:2]] == ["events-000001.jsonl", "events-000002.jsonl"]
    assert files[-1].name == "events.jsonl" and all(f.stat().st_size <= 200 for f in files)
    lines = [json.loads(line)["n"] for f in files for line in f.read_text().splitlines()]
    assert lines == list(range(30))


def test_skipping_quiet_heartbeats_does_not_change_the_event_log(tmp_path: Path) -> None:
    for seed in (1, 2):
        params = SimulationParams(groups=1, members=4, partitions=8, seed=seed, rounds=2)
        fast = simulate(params, tmp_path / f"fast-{seed}")
        every = simulate(dataclasses.replace(params, all_heartbeats=True), tmp_path / f"all-{seed}")
        assert fast.events == every.events > 100
        assert fast.heartbeats * 2 < every.heartbeats
        for name in fast.files:
            assert filecmp.cmp(
                tmp_path / f"fast-{seed}" / name, tmp_path / f"all-{seed}" / name, shallow=False
            )


def test_same_seed_same_log_other_seed_other_log(tmp_path: Path) -> None:
    a = simulate(SimulationParams(groups=1, seed=5, modes=("dynamic",)), tmp_path / "a")
    b = simulate(SimulationParams(groups=1, seed=5, modes=("dynamic",)), tmp_path / "b")
    c = simulate(SimulationParams(groups=1, seed=6, modes=("dynamic",)), tmp_path / "c")
    name = "coordinator-0/events.jsonl"
    assert filecmp.cmp(a.out_dir / name, b.out_dir / name, shallow=False)
    assert not filecmp.cmp(a.out_dir / name, c.out_dir / name, shallow=False)


def test_rollout(tmp_path: Path) -> None:
    analysis = run(tmp_path, "rollout", scenarios=("rolling-restart",))
    by_mode = {op.mode: op for op in per_operation(analysis, "rollout")}
    # Dynamic: every pod leaves (a rebalance) and its new process joins (another).
    assert len(by_mode["dynamic"].rebalances) >= 4 and kinds(by_mode["dynamic"])["member_left"] == 4
    for mode in ("static", "staticfleet"):
        assert by_mode[mode].rebalances == []
        replaced = [e for e in by_mode[mode].members if e["type"] == "static_member_replaced"]
        assert len(replaced) == 4 and all(e["rebalance"] is False for e in replaced)


def test_scale_down(tmp_path: Path) -> None:
    analysis = run(tmp_path, "down", scenarios=("scale-down",), scale_by=2)
    by_mode = {op.mode: op for op in per_operation(analysis, "scale-down")}
    assert kinds(by_mode["dynamic"])["member_left"] == 2
    static = by_mode["static"]
    assert kinds(static)["member_expired"] == 2 and kinds(static)["member_left"] == 0
    # Static members are only noticed once their session times out.
    assert static.rebalances[0].start_ts - static.start_ts >= 45_000 - 3_000
    fleet = by_mode["staticfleet"]
    assert kinds(fleet)["member_removed"] == 2 and kinds(fleet)["member_expired"] == 0
    assert len(fleet.rebalances) == 1 and fleet.rebalances[0].reason == "member-removed"
    assert fleet.rebalances[0].start_ts - fleet.start_ts <= 1_000 + 1_000
    assert fleet.rebalances[0].members_after == 2


def test_scale_up_with_pre_registration_is_one_rebalance(tmp_path: Path) -> None:
    analysis = run(tmp_path, "up", scenarios=("scale-up",), scale_by=3, pod_start_spread_ms=20_000)
    by_mode = {op.mode: op for op in per_operation(analysis, "scale-up")}
    fleet = by_mode["staticfleet"]
    assert len(fleet.rebalances) == 1 and fleet.rebalances[0].members_after == 7
    assert kinds(fleet)["member_joined"] == 3
    assert len(by_mode["static"].rebalances) > 1  # pods 20 s apart: each joins on its own
    configs = [e for e in analysis.lines.events if e["type"] == "group_config_changed"]
    assert [bool(e["configs"]) for e in configs] == [True, False]  # set before, cleared once met


def test_crash_is_absorbed_only_with_static_membership(tmp_path: Path) -> None:
    analysis = run(tmp_path, "crash", scenarios=("crash",))
    by_mode = {op.mode: op for op in per_operation(analysis, "crash")}
    dynamic = by_mode["dynamic"]
    assert dynamic.rebalances and kinds(dynamic)["member_expired"] == 1
    assert kinds(dynamic)["member_left"] == 0  # a crash sends no LeaveGroup
    for mode in ("static", "staticfleet"):
        assert by_mode[mode].rebalances == []
        assert [e["rebalance"] for e in by_mode[mode].members if e["type"] == "static_member_replaced"] == [
            False
        ]


def test_network_blip_longer_than_the_session_expires_the_member(tmp_path: Path) -> None:
    analysis = run(tmp_path, "blip", scenarios=("network-blip",), blip_ms=60_000)
    for op in per_operation(analysis, "network-blip"):
        expired = [e for e in op.members if e["type"] == "member_expired"]
        assert [e["cause"] for e in expired] == ["session-timeout"], op.mode
        assert [r.reason for r in op.rebalances] == ["session-timeout", "member-joined"], op.mode


def test_short_network_blip_changes_nothing(tmp_path: Path) -> None:
    analysis = run(tmp_path, "short-blip", scenarios=("network-blip",), blip_ms=10_000)
    for op in per_operation(analysis, "network-blip"):
        assert op.rebalances == [] and op.members == [], op.mode


def test_workers_split_groups_into_their_own_logs(tmp_path: Path) -> None:
    report = simulate(SimulationParams(groups=2, members=3, partitions=6, workers=2), tmp_path / "w")
    assert sorted(report.files) == [
        "coordinator-0/events.jsonl",
        "coordinator-1/events.jsonl",
        "operator/fleet-0.jsonl",
        "operator/fleet-1.jsonl",
    ]
    groups = {
        f: {json.loads(line)["group"] for line in (tmp_path / "w" / f).read_text().splitlines()}
        for f in report.files
        if f.startswith("coordinator")
    }
    assert not groups["coordinator-0/events.jsonl"] & groups["coordinator-1/events.jsonl"]
    assert len(groups["coordinator-0/events.jsonl"] | groups["coordinator-1/events.jsonl"]) == 6
    written = json.loads((tmp_path / "w" / "_simulation.json").read_text())
    assert written["events"] == report.events and written["groups"] == 6


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        ({"modes": ("elastic",)}, "modes"),
        ({"scenarios": ("meteor",)}, "unknown scenario"),
        ({"heartbeat_interval_ms": 50_000}, "heartbeat interval"),
        ({"session_timeout_ms": 1_000}, "session timeout"),
        ({"members": 2, "scale_by": 2}, "scale-by"),
        ({"groups": 0}, "groups"),
    ],
)
def test_bad_parameters_are_refused(overrides: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        SimulationParams(**overrides).validate()
