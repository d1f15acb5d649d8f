"""bench/fleet_ops.py's samples and what is published from them (pure): medians and ranges per
coordinator, operation and kind of fleet, the tables, and where a baseline does better than staticfleet.
"""

from __future__ import annotations

import statistics
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from bench.fleet_kinds import KINDS

ROLLING_RESTART = "rolling restart"
SCALE_DOWN = "scale down by half"
SCALE_UP = "scale up by half"
COORDINATOR_RESTART = "coordinator restart"
OPERATIONS = (ROLLING_RESTART, SCALE_DOWN, SCALE_UP, COORDINATOR_RESTART)
# Differences smaller than these are noise on this machine, not a baseline doing better.
SECONDS_MARGIN = 0.1
PARTITION_SECONDS_MARGIN = 1.0


@dataclass
class Sample:
    backend: str
    replicas: int
    run: int
    operation: str
    kind: str
    seconds: float  # from the fleet's command to a Stable group of the expected members
    rebalances: int
    unstable_seconds: float  # of that time, how long the group was not Stable (or unreachable)
    timed_out: bool = False
    heartbeat_ms: int | None = None  # the consumers' heartbeat.interval.ms; None: the client's default
    began_at: str | None = None  # wall-clock time of the fleet's command (UTC), to read the logs against
    # Partition-seconds without a consumer over the operation and its settle period, and how many
    # partitions that was (bench/consumption.py); None: not measured.
    stopped_partition_seconds: float | None = None
    partitions_stopped: int | None = None


@dataclass(frozen=True)
class Summary:
    """One operation, one fleet kind, one backend: median and range over the runs."""

    backend: str
    replicas: int
    operation: str
    kind: str
    seconds: tuple[float, ...]
    rebalances: tuple[int, ...]
    unstable_seconds: tuple[float, ...]
    timed_out: int
    heartbeats: frozenset[int | None] = frozenset()
    stopped: tuple[float, ...] = ()  # partition-seconds without a consumer, of the runs that measured it

    @property
    def median_s(self) -> float:
        return statistics.median(self.seconds)

    @property
    def median_rebalances(self) -> float:
        return statistics.median(self.rebalances)

    @property
    def median_stopped(self) -> float | None:
        return statistics.median(self.stopped) if self.stopped else None


def summarize(samples: Sequence[Sample]) -> list[Summary]:
    keys: list[tuple[str, int, str, str]] = []
    for s in samples:
        key = (s.backend, s.replicas, s.operation, s.kind)
        if key not in keys:
            keys.append(key)
    out = []
    for backend, replicas, operation, kind in keys:
        chosen = [
            s
            for s in samples
            if (s.backend, s.replicas, s.operation, s.kind) == (backend, replicas, operation, kind)
        ]
        out.append(
            Summary(
                backend,
                replicas,
                operation,
                kind,
                tuple(s.seconds for s in chosen),
                tuple(s.rebalances for s in chosen),
                tuple(s.unstable_seconds for s in chosen),
                sum(s.timed_out for s in chosen),
                frozenset(s.heartbeat_ms for s in chosen),
                tuple(s.stopped_partition_seconds for s in chosen if s.stopped_partition_seconds is not None),
            )
        )
    return out


def spread(values: Sequence[float]) -> str:
    if not values:
        return "-"
    return f"{statistics.median(values):.1f} ({min(values):.1f}-{max(values):.1f})"


def counts(values: Sequence[int]) -> str:
    low, high = min(values), max(values)
    return str(low) if low == high else f"{statistics.median(values):g} ({low}-{high})"


def label(operation: str, replicas: int) -> str:
    down, up = replicas // 2, replicas // 2 + replicas // 4
    return {
        ROLLING_RESTART: f"rolling restart of {replicas}",
        SCALE_DOWN: f"scale {replicas} → {down}",
        SCALE_UP: f"scale {down} → {up}",
        COORDINATOR_RESTART: "coordinator restart",
    }[operation]


DETAIL_HEADERS = [
    "coordinator",
    "operation",
    "fleet",
    "rebalances",
    "s to Stable",
    "s not Stable",
    "partition-s stopped",
    "timed out",
]


def detail_rows(summaries: Sequence[Summary]) -> list[list[object]]:
    return [
        [
            s.backend,
            label(s.operation, s.replicas),
            s.kind,
            counts(s.rebalances),
            spread(s.seconds),
            spread(s.unstable_seconds),
            spread(s.stopped),
            s.timed_out or "",
        ]
        for s in summaries
    ]


def cell(s: Summary) -> str:
    """rebalances / s to Stable / partition-seconds stopped, medians."""
    stopped = s.median_stopped
    return f"{counts(s.rebalances)} / {s.median_s:.1f} s / " + ("-" if stopped is None else f"{stopped:.0f}")


def baseline_wins(
    by_kind: Mapping[str, Summary], ours: Sequence[str], baselines: Sequence[str]
) -> list[tuple[str, list[str]]]:
    """Each baseline that does better than the best of our kinds in one operation, with how: fewer
    rebalances, sooner Stable, fewer partition-seconds without a consumer (beyond the noise margins).
    Each measure is held against the best of our kinds on that measure."""
    mine = [by_kind[k] for k in ours if k in by_kind]
    if not mine:
        return []
    best_rebalances = min(s.median_rebalances for s in mine)
    best_seconds = min(s.median_s for s in mine)
    stops = [s.median_stopped for s in mine if s.median_stopped is not None]
    best_stopped = min(stops) if stops else None
    found = []
    for kind in baselines:
        theirs = by_kind.get(kind)
        if theirs is None:
            continue
        how = []
        if theirs.median_rebalances < best_rebalances:
            how.append(f"{best_rebalances - theirs.median_rebalances:g} fewer rebalances")
        if theirs.median_s < best_seconds - SECONDS_MARGIN:
            how.append(f"Stable {best_seconds - theirs.median_s:.1f} s sooner")
        their_stop = theirs.median_stopped
        if (
            best_stopped is not None
            and their_stop is not None
            and their_stop < best_stopped - PARTITION_SECONDS_MARGIN
        ):
            how.append(f"{best_stopped - their_stop:.0f} partition-s less stopped")
        if how:
            found.append((kind, how))
    return found


def wins_text(wins: Sequence[tuple[str, Sequence[str]]]) -> str:
    return "; ".join(f"{kind}: {', '.join(how)}" for kind, how in wins) or "none"


def kinds_of(summaries: Sequence[Summary], backend: str) -> list[str]:
    present = {s.kind for s in summaries if s.backend == backend}
    return [k for k in KINDS if k in present]


def comparison_headers(kinds: Sequence[str]) -> list[str]:
    return ["fleet operation", *kinds, "where a baseline does better"]


def comparison_rows(summaries: Sequence[Summary], backend: str) -> list[list[object]]:
    """One row per operation: each kind's rebalances / s to Stable / partition-seconds stopped (medians),
    then every baseline that does better than staticfleet's best kind, and how."""
    kinds = kinds_of(summaries, backend)
    by = {(s.operation, s.kind): s for s in summaries if s.backend == backend}
    ours = [k for k in kinds if KINDS[k].operated]
    others = [k for k in kinds if not KINDS[k].operated]
    rows: list[list[object]] = []
    for operation in OPERATIONS:
        found = {k: by[(operation, k)] for k in kinds if (operation, k) in by}
        if len(found) != len(kinds):
            continue
        first = next(iter(found.values()))
        cells: list[object] = [label(operation, first.replicas), *(cell(found[k]) for k in kinds)]
        cells.append(wins_text(baseline_wins(found, ours, others)))
        rows.append(cells)
    return rows


def comparison_lines(summaries: Sequence[Summary], backend: str) -> list[str]:
    """Where a baseline does better, one line per operation that has one (for the demo's output)."""
    lines = []
    for row in comparison_rows(summaries, backend):
        if row[-1] != "none":
            lines.append(f"{row[0]}: {row[-1]}")
    return lines
