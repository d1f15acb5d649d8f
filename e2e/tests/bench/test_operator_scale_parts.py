"""bench/operator_scale.py's pure parts: the audit log read per user, requests per fleet per minute,
percentiles, growth, and which fleets are sampled."""

from __future__ import annotations

import json
import os
import time

import pytest

from bench.operator_scale import (
    AuditRecord,
    SizeResult,
    busiest,
    command_line,
    cpu_share_per_fleet,
    growth,
    headers,
    per_fleet_minute,
    percentile,
    read_audit,
    rows,
    sample_names,
    slope,
)
from bench.proc import cpu_seconds


def audit_line(user: str, verb: str, resource: str | None, at: str, subresource: str | None = None) -> str:
    ref = {"resource": resource, "namespace": "fleets"} if resource else {}
    if subresource:
        ref["subresource"] = subresource
    return json.dumps(
        {
            "kind": "Event",
            "stage": "ResponseComplete",
            "verb": verb,
            "user": {"username": user, "groups": ["system:masters"]},
            "objectRef": ref,
            "requestReceivedTimestamp": at,
        }
    )


def test_only_the_operators_requests_are_read_with_their_time_verb_and_resource() -> None:
    text = "\n".join(
        [
            audit_line("staticfleet-operator", "get", "statefulsets", "2026-11-28T10:00:00.250000Z"),
            audit_line("admin", "list", "pods", "2026-11-28T10:00:01.000000Z"),
            audit_line(
                "staticfleet-operator", "patch", "staticconsumergroups", "2026-11-28T10:00:02Z", "status"
            ),
            audit_line("staticfleet-operator", "get", None, "2026-11-28T10:00:03Z"),
            "not json",
        ]
    )
    found = read_audit(text, "staticfleet-operator")
    assert [(r.verb, r.resource) for r in found] == [
        ("get", "statefulsets"),
        ("patch", "staticconsumergroups/status"),
        ("get", "-"),
    ]
    assert found[0].at == pytest.approx(1795860000.25)


def test_requests_per_fleet_per_minute_count_only_the_window() -> None:
    records = [AuditRecord(float(t), "get", "pods") for t in range(0, 130)]  # one a second
    # 60 requests in [10, 70) over 2 fleets and one minute: 30 per fleet per minute.
    assert per_fleet_minute(records, 10, 70, 2) == pytest.approx(30.0)
    assert busiest(records, 10, 70) == [("get pods", 60)]


def test_percentiles_take_the_nearest_rank() -> None:
    values = [float(v) for v in range(1, 21)]  # 1..20
    assert percentile(values, 0.5) == 10.0
    assert percentile(values, 0.99) == 20.0
    assert percentile([3.0], 0.99) == 3.0


def test_growth_is_the_slope_from_the_first_to_the_last_size() -> None:
    assert slope([10, 50, 100], [100, 140, 190]) == pytest.approx(1.0)
    assert slope([10], [5]) == 0.0


def size(fleets: int, per_fleet: float) -> SizeResult:
    return SizeResult(fleets, per_fleet, 60.0, [], 100.0 + fleets / 10, 90.0, [0.5], [0.5 + fleets / 1000])


def test_the_text_says_whether_the_passes_kept_their_cadence_as_fleets_were_added() -> None:
    kept = growth([size(10, 102.0), size(100, 91.8)])
    assert "kept their cadence at every size" in kept and "1020, 9180" in kept
    lost = growth([size(10, 169.2), size(100, 25.4)])
    assert "kept their cadence" not in lost and "waits its turn" in lost


def test_cpu_time_is_read_from_proc_and_shared_out_per_fleet() -> None:
    before = cpu_seconds(os.getpid())
    deadline = time.process_time() + 0.2
    while time.process_time() < deadline:
        pass
    assert cpu_seconds(os.getpid()) - before >= 0.15
    assert cpu_share_per_fleet(6.0, 60.0, 10) == pytest.approx(0.01)
    assert cpu_share_per_fleet(6.0, 0.0, 10) == 0.0


def test_samples_spread_over_every_fleet() -> None:
    names = [f"f-{i}" for i in range(100)]
    assert sample_names(names, 4) == ["f-0", "f-25", "f-50", "f-75"]
    assert sample_names(names[:3], 20) == ["f-0", "f-1", "f-2"]


def test_the_published_command_leaves_out_where_the_logs_went() -> None:
    assert command_line(["--samples", "12", "--workdir", "/tmp/x", "--rest-s=30"]) == (
        ".venv/bin/python bench/operator_scale.py --samples 12 --rest-s=30"
    )
    assert (
        command_line(["--workdir=/tmp/x", "--replay", "r.json"]) == ".venv/bin/python bench/operator_scale.py"
    )


def test_the_scale_downs_at_once_get_a_column_only_when_they_were_measured() -> None:
    alone = [size(10, 100.0)]
    assert "scale-downs at once: fleets, p50 / max (s)" not in headers(alone)
    assert len(rows(alone)[0]) == len(headers(alone))
    together = [size(10, 100.0), size(50, 100.0)]
    together[1].reactions_together_s = [1.2, 1.0, 2.6]
    assert headers(together)[2] == "scale-downs at once: fleets, p50 / max (s)"
    assert [row[2] for row in rows(together)] == ["", "3: 1.20 / 2.60"]
    assert all(len(row) == len(headers(together)) for row in rows(together))
