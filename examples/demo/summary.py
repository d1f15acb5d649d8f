"""What each fleet operation cost, from the coordinator's event log.

The driver records each operation as operator events (docs/events.md, "Operator events") next to a copy
of the coordinator's log; `staticfleet analyze` attributes every rebalance and membership event to the
operation whose window covers it. `python -m examples.demo.summary EVENTS... --out DIR` runs the analysis
in its own process (a Spark JVM, local mode) and writes DIR/operations.json beside the report.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from staticfleet.analytics.operator_events import (
    FLEET_OPERATION_COMPLETED,
    FLEET_OPERATION_STARTED,
    operation_event,
)

OPERATIONS_FILE = "operations.json"
MODE = "staticfleet"


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class OperationLog:
    """Operator events for one group, appended to a JSON-lines file as the operations happen."""

    path: Path
    group: str
    count: int = 0

    def started(self, operation: str, from_replicas: int, to_replicas: int) -> str:
        self.count += 1
        operation_id = f"demo/{self.count}"
        self._write(FLEET_OPERATION_STARTED, operation, operation_id, from_replicas, to_replicas)
        return operation_id

    def completed(self, operation_id: str, operation: str, from_replicas: int, replicas: int) -> None:
        self._write(FLEET_OPERATION_COMPLETED, operation, operation_id, from_replicas, replicas)

    def _write(
        self, kind: str, operation: str, operation_id: str, from_replicas: int, to_replicas: int
    ) -> None:
        event = operation_event(
            kind, now_ms(), self.group, operation, operation_id, from_replicas, to_replicas, MODE
        )
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a") as out:
            out.write(json.dumps(event, sort_keys=True) + "\n")


# -- the analysis (its own process: Spark) ---------------------------------------------------------------


def analyze(inputs: Sequence[str], out_dir: Path) -> list[dict[str, Any]]:
    """Runs the pipeline and returns the `operations` table's rows, in the order they started."""
    from staticfleet.analytics.pipeline import analyze as run_pipeline
    from staticfleet.analytics.session import build_session

    spark = build_session("local[2]", app_name="staticfleet-demo", shuffle_partitions=2)
    try:
        result = run_pipeline(spark, list(inputs), out_dir)
        rows = spark.read.parquet(str(result.tables["operations"])).orderBy("start_ts").collect()
        operations = [row.asDict() for row in rows]
    finally:
        spark.stop()
    (out_dir / OPERATIONS_FILE).write_text(json.dumps(operations, indent=2, default=str) + "\n")
    return operations


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m examples.demo.summary", description=__doc__)
    parser.add_argument("events", nargs="+", help="coordinator and operator event logs")
    parser.add_argument("--out", type=Path, required=True)
    options = parser.parse_args(argv)
    analyze(options.events, options.out)
    return 0


# -- the table --------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Row:
    label: str
    rebalances: int
    seconds_to_stable: float
    partitions_moved: int | None
    restarts_absorbed: int
    members_removed: int
    dynamic: str  # what plain dynamic membership would have cost


def _int(value: Any) -> int:
    return int(value) if value is not None else 0


def operation_rows(operations: Sequence[dict[str, Any]], labels: Sequence[tuple[str, str]]) -> list[Row]:
    """Table rows for the analysed operations; `labels` gives (label, dynamic-membership cost) in order."""
    if len(operations) != len(labels):
        raise ValueError(f"expected {len(labels)} operations in the analysis, found {len(operations)}")
    rows = []
    for operation, (label, dynamic) in zip(operations, labels, strict=True):
        if operation.get("status") != "completed":
            raise ValueError(f"operation {operation.get('operation_id')} did not complete: {operation}")
        moved = operation.get("partitions_moved")  # null for a group's first assignment
        rows.append(
            Row(
                label=label,
                rebalances=_int(operation.get("rebalances")),
                seconds_to_stable=_int(operation.get("duration_ms")) / 1000,
                partitions_moved=None if moved is None else int(moved),
                restarts_absorbed=_int(operation.get("restarts_absorbed")),
                members_removed=_int(operation.get("removed")),
                dynamic=dynamic,
            )
        )
    return rows


HEADERS = (
    "operation",
    "rebalances",
    "time to stable",
    "partitions moved",
    "restarts absorbed",
    "members removed",
    "with dynamic membership",
)


def format_table(rows: Sequence[Row]) -> str:
    cells = [
        (
            row.label,
            str(row.rebalances),
            f"{row.seconds_to_stable:.1f} s",
            "-" if row.partitions_moved is None else str(row.partitions_moved),
            str(row.restarts_absorbed),
            str(row.members_removed),
            row.dynamic,
        )
        for row in rows
    ]
    widths = [max(len(line[i]) for line in [HEADERS, *cells]) for i in range(len(HEADERS))]
    numeric = {1, 2, 3, 4, 5}

    def line(values: Sequence[str]) -> str:
        pairs = enumerate(zip(values, widths, strict=True))
        parts = [v.rjust(w) if i in numeric else v.ljust(w) for i, (v, w) in pairs]
        return "  ".join(parts).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(HEADERS), rule, *(line(c) for c in cells)])


if __name__ == "__main__":
    sys.exit(main())
