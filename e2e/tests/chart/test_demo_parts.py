"""The demo's pure parts: the operator events it records, the table it prints, and its agreement with the
chart (names) and the image (script paths)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from e2e.helm import REPO_ROOT, Helm
from examples.demo import fleet
from examples.demo.driver import OPERATIONS, _fullname, stable_with
from examples.demo.summary import OperationLog, Row, format_table, operation_rows


def test_operations_are_recorded_as_the_documented_operator_events(tmp_path: Path) -> None:
    log = OperationLog(tmp_path / "ops.jsonl", "shop.orders")
    first = log.started("scale-down", 3, 1)
    log.completed(first, "scale-down", 3, 1)
    second = log.started("scale-up", 1, 4)
    started, completed, again = (json.loads(line) for line in log.path.read_text().splitlines())
    assert started["type"] == "fleet_operation_started" and completed["type"] == "fleet_operation_completed"
    assert started["id"] == completed["id"] == first != second
    assert {k: started[k] for k in ("v", "group", "operation", "from_replicas", "to_replicas", "mode")} == {
        "v": 1,
        "group": "shop.orders",
        "operation": "scale-down",
        "from_replicas": 3,
        "to_replicas": 1,
        "mode": "staticfleet",
    }
    assert started["ts"] <= completed["ts"] <= again["ts"]


def analysed(**overrides: object) -> dict[str, object]:
    row: dict[str, object] = {
        "status": "completed",
        "operation_id": "demo/1",
        "from_replicas": 3,
        "rebalances": 1,
        "duration_ms": 2940,
        "partitions_moved": 4,
        "restarts_absorbed": 0,
        "removed": 2,
    }
    row.update(overrides)
    return row


def test_rows_come_from_the_analysis_and_the_table_aligns_them() -> None:
    rows = operation_rows(
        [analysed(), analysed(rebalances=0, partitions_moved=None, removed=None, duration_ms=61)],
        [("scale 3 -> 1", "2, each after the session timeout"), ("rolling restart of 3", "3 or more")],
    )
    assert rows[0] == Row("scale 3 -> 1", 1, 2.94, 4, 0, 2, "2, each after the session timeout")
    assert (rows[1].partitions_moved, rows[1].members_removed) == (None, 0)
    lines = format_table(rows).splitlines()
    header, rule, scale_down, restart = lines

    def column(line: str, title: str) -> str:
        """The cell under `title` (numbers are right-aligned to the end of their header)."""
        end = header.index(title) + len(title)
        start = rule.rfind(" ", 0, end) + 1
        return line[start:end].strip()

    assert column(scale_down, "rebalances") == "1" and column(restart, "rebalances") == "0"
    assert column(scale_down, "time to stable") == "2.9 s" and column(restart, "time to stable") == "0.1 s"
    assert column(scale_down, "partitions moved") == "4" and column(restart, "partitions moved") == "-"
    assert column(scale_down, "members removed") == "2" and column(restart, "members removed") == "0"
    assert restart.endswith("3 or more")


def test_an_operation_missing_from_the_analysis_or_incomplete_is_an_error() -> None:
    with pytest.raises(ValueError, match="expected 4 operations"):
        operation_rows([analysed()], OPERATIONS)
    with pytest.raises(ValueError, match="did not complete"):
        operation_rows([analysed(status="incomplete")], OPERATIONS[:1])


def test_the_demo_waits_for_a_stable_group_of_ready_consumers_at_the_observed_generation() -> None:
    status: dict[str, Any] = {
        "observedGeneration": 4,
        "readyReplicas": 3,
        "group": {"state": "Stable", "members": 3},
        "conditions": [{"type": "Ready", "status": "True"}],
    }
    body: dict[str, Any] = {"metadata": {"generation": 4}, "spec": {"replicas": 3}, "status": status}
    assert stable_with(body, 3)
    assert not stable_with(body, 1)
    assert not stable_with({**body, "metadata": {"generation": 5}}, 3)  # status not yet caught up
    assert not stable_with({**body, "status": {**status, "readyReplicas": 2}}, 3)
    assert not stable_with(
        {**body, "status": {**status, "group": {"state": "PreparingRebalance", "members": 3}}}, 3
    )


@pytest.mark.parametrize("release", ["staticfleet", "demo-1a2b3c", "x" * 45])
def test_the_demo_derives_the_chart_names_as_the_chart_does(helm: Helm, release: str) -> None:
    names = {d["metadata"]["name"] for d in helm.template(release=release) if d["kind"] == "Deployment"}
    assert names == {f"{_fullname(release)}-operator"}


def test_the_fleet_runs_scripts_that_exist_here_and_in_the_image() -> None:
    dockerfile = (REPO_ROOT / "Dockerfile").read_text()
    for name in ("consumer.py", "producer.py"):
        local = Path(fleet.script(name, local=True))
        assert local.is_file()
        assert f"{local.relative_to(REPO_ROOT)}" in dockerfile
        assert fleet.script(name, local=False) == f"/app/{name}"
    assert "examples/producer/producer.py /app/" in dockerfile
    consumers = fleet.consumer_fleet(3, image="i", local=False)
    assert consumers["spec"]["template"]["spec"]["containers"][0]["command"] == ["python", "/app/consumer.py"]
