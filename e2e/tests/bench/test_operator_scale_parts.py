"""bench/operator_scale.py's pure parts: the audit log read per user, requests per fleet per minute,
percentiles, growth, and which fleets are sampled."""

from __future__ import annotations

import json

import pytest

from bench.operator_scale import (
    AuditRecord,
    busiest,
    command_line,
    per_fleet_minute,
    percentile,
    read_audit,
    sample_names,
    slope,
)


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
