"""What each fleet operation cost each kind of fleet, from the coordinator's event log.

The driver records each operation of each fleet as operator events (docs/events.md, "Operator events",
with the fleet's membership mode) next to a copy of the coordinator's log; `staticfleet analyze`
attributes every rebalance and membership event to the operation whose window covers it. Every figure
of the table, the comparison with dynamic membership included, comes from that analysis.
`python -m examples.demo.summary EVENTS... --out DIR` runs the analysis
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

from examples.demo.fleet import FLEET_KINDS, PLAIN_DYNAMIC, PLAIN_STATIC, STATICFLEET
from staticfleet.analytics.operator_events import (
    FLEET_OPERATION_COMPLETED,
    FLEET_OPERATION_STARTED,
    operation_event,
)

OPERATIONS_FILE = "operations.json"
# What bench/fleet_ops.py last published: every kind of fleet, the tuned baselines too, at N=20.
BENCH_RESULTS = Path(__file__).resolve().parents[2] / "bench" / "results" / "fleet_ops.json"
# Each fleet kind records its operations under a membership mode of docs/events.md.
MODES = {STATICFLEET: "staticfleet", PLAIN_STATIC: "static", PLAIN_DYNAMIC: "dynamic"}


def operation_id(mode: str, number: int) -> str:
    """Unique across the three fleets: the analysis pairs and counts operations by id alone."""
    return f"demo/{mode}/{number}"


def now_ms() -> int:
    return int(time.time() * 1000)


@dataclass
class OperationLog:
    """Operator events for one group, appended to a JSON-lines file as the operations happen."""

    path: Path
    group: str
    mode: str = MODES[STATICFLEET]
    count: int = 0

    def started(self, operation: str, from_replicas: int, to_replicas: int) -> str:
        self.count += 1
        started_id = operation_id(self.mode, self.count)
        self._write(FLEET_OPERATION_STARTED, operation, started_id, from_replicas, to_replicas)
        return started_id

    def completed(self, operation_id: str, operation: str, from_replicas: int, replicas: int) -> None:
        self._write(FLEET_OPERATION_COMPLETED, operation, operation_id, from_replicas, replicas)

    def _write(
        self, kind: str, operation: str, operation_id: str, from_replicas: int, to_replicas: int
    ) -> None:
        event = operation_event(
            kind, now_ms(), self.group, operation, operation_id, from_replicas, to_replicas, self.mode
        )
        self.path.parent.mkdir(parents=True, exist_ok=True)
        with self.path.open("a") as out:
            out.write(json.dumps(event, sort_keys=True) + "\n")


# -- the analysis (its own process: Spark) ---------------------------------------------------------------


def analyze(inputs: Sequence[str], out_dir: Path) -> list[dict[str, Any]]:
    """Runs the pipeline and returns the `operations` table's rows, in the order they started."""
    from staticfleet.analytics.pipeline import analyze as run_pipeline
    from staticfleet.analytics.session import build_session

    # The demo's log is a few minutes of three small fleets: a small input (C1 alone compiles; on a quiet
    # 2-core machine its analysis took 43 s against 53 with C2).
    spark = build_session(
        "local[2]",
        app_name="staticfleet-demo",
        shuffle_partitions=2,
        writes_class_archive=True,
        small_input=True,
    )
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
class Outcome:
    """What one operation cost one fleet, as the analysis measured it."""

    rebalances: int
    seconds_to_stable: float
    partitions_moved: int | None
    restarts_absorbed: int
    members_removed: int
    members_expired: int = 0  # sessions that ran out: in a rollout, a pod that came back too late
    members_left: int = 0  # LeaveGroup of their own: a scale-down's departing consumers, dynamic ones


@dataclass(frozen=True)
class Row:
    label: str
    outcomes: dict[str, Outcome]  # by fleet kind (examples.demo.fleet.FLEET_KINDS)

    @property
    def against_dynamic(self) -> str:
        ours, theirs = self.outcomes.get(STATICFLEET), self.outcomes.get(PLAIN_DYNAMIC)
        if ours is None or theirs is None:
            return "-"
        return compare(ours.rebalances, ours.seconds_to_stable, theirs.rebalances, theirs.seconds_to_stable)


def compare(rebalances: float, seconds: float, baseline_rebalances: float, baseline_seconds: float) -> str:
    """How one fleet did against a baseline, in words, from the measured figures alone."""
    gap = abs(rebalances - baseline_rebalances)
    noun = "rebalance" if gap == 1 else "rebalances"
    if rebalances < baseline_rebalances:
        parts = [f"{gap:g} fewer {noun}"]
    elif rebalances > baseline_rebalances:
        parts = [f"{gap:g} more {noun}"]
    else:
        parts = ["as many rebalances"]
    difference = seconds - baseline_seconds
    if abs(difference) < 0.05:
        parts.append("as fast")
    else:
        parts.append(f"{abs(difference):.1f} s {'slower' if difference > 0 else 'faster'}")
    return ", ".join(parts)


def _int(value: Any) -> int:
    return int(value) if value is not None else 0


def _outcome(operation: dict[str, Any]) -> Outcome:
    if operation.get("status") != "completed":
        raise ValueError(f"operation {operation.get('operation_id')} did not complete: {operation}")
    moved = operation.get("partitions_moved")  # null for a group's first assignment
    return Outcome(
        rebalances=_int(operation.get("rebalances")),
        seconds_to_stable=_int(operation.get("duration_ms")) / 1000,
        partitions_moved=None if moved is None else int(moved),
        restarts_absorbed=_int(operation.get("restarts_absorbed")),
        members_removed=_int(operation.get("removed")),
        members_expired=_int(operation.get("expired")),
        members_left=_int(operation.get("left")),
    )


def operation_rows(
    operations: Sequence[dict[str, Any]], labels: Sequence[str], kinds: Sequence[str] = FLEET_KINDS
) -> list[Row]:
    """Table rows from the analysed operations: the n-th label is operation `demo/<mode>/<n>` of every
    fleet kind (each kind's fleet recorded its operations under its own mode, see MODES)."""
    by_key = {(str(o.get("mode")), str(o.get("operation_id"))): o for o in operations}
    rows = []
    for number, label in enumerate(labels, start=1):
        outcomes = {}
        for kind in kinds:
            wanted = operation_id(MODES[kind], number)
            found = by_key.get((MODES[kind], wanted))
            if found is None:
                raise ValueError(f"{kind}: operation {wanted} ({label}) is not in the analysis")
            outcomes[kind] = _outcome(found)
        rows.append(Row(label, outcomes))
    if len(operations) != len(labels) * len(kinds):
        raise ValueError(
            f"expected {len(labels) * len(kinds)} operations in the analysis, found {len(operations)}"
        )
    return rows


def _cell(outcome: Outcome) -> str:
    plural = "" if outcome.rebalances == 1 else "s"
    return f"{outcome.rebalances} rebalance{plural}, {outcome.seconds_to_stable:.1f} s"


def headers(kinds: Sequence[str]) -> tuple[str, ...]:
    return ("operation", *kinds, "staticfleet against plain dynamic")


def format_table(rows: Sequence[Row], kinds: Sequence[str] = FLEET_KINDS) -> str:
    titles = headers(kinds)
    cells = [(row.label, *(_cell(row.outcomes[kind]) for kind in kinds), row.against_dynamic) for row in rows]
    widths = [max(len(line[i]) for line in [titles, *cells]) for i in range(len(titles))]

    def line(values: Sequence[str]) -> str:
        return "  ".join(v.ljust(w) for v, w in zip(values, widths, strict=True)).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([line(titles), rule, *(line(c) for c in cells)])


def published_comparison(results: Path = BENCH_RESULTS) -> str:
    """Where a tuned baseline did better than staticfleet in the fleet benchmark's published runs (the
    demo runs three kinds of fleet once; the benchmark runs every kind, N=20, several times)."""
    from bench.fleet_report import Sample, comparison_lines, summarize

    try:
        published = json.loads(results.read_text())
    except (OSError, ValueError):
        return ""
    summaries = summarize([Sample(**s) for s in published.get("samples", [])])
    if not summaries:
        return ""
    args, date = published.get("args", {}), published.get("machine", {}).get("date", "?")
    lines = []
    for backend in dict.fromkeys(s.backend for s in summaries):
        name = "Apache Kafka" if backend == "kafka" else "the embedded coordinator"
        found = comparison_lines(summaries, backend)
        head = (
            f"bench/fleet_ops.py, N={args.get('replicas', '?')}, {args.get('runs', '?')} runs on {date}, "
            f"on {name}: "
        )
        if found:
            lines.append(head + "a baseline does better in")
            lines += [f"  {line}" for line in found]
        else:
            lines.append(head + "no baseline does better than staticfleet")
    return "\n".join(lines)


def details(rows: Sequence[Row], kind: str = STATICFLEET) -> str:
    """One line per operation: what the coordinator's event log says happened to `kind`'s members."""
    lines = []
    for row in rows:
        outcome = row.outcomes[kind]
        moved = "-" if outcome.partitions_moved is None else str(outcome.partitions_moved)
        expired = outcome.members_expired
        # Named only when it happened: why a rollout cost a rebalance (a session ran out).
        expiries = f", {expired} member{'' if expired == 1 else 's'} expired" if expired else ""
        # A scale-down's departing consumers leave on their own; the operator removes any that did not.
        left = f", {outcome.members_left} left on their own" if outcome.members_left else ""
        lines.append(
            f"  {row.label}: {moved} partitions moved, {outcome.restarts_absorbed} restarts absorbed, "
            f"{outcome.members_removed} members removed{left}{expiries}"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
