"""bench/fleet_ops.py's samples and what is published from them (pure): medians and ranges per
coordinator, operation and kind of fleet, the tables, and where a baseline does better than staticfleet.
What an operation cost the application beside rebalances and time is a `Cost`: partition-seconds without
a consumer for the example consumer, records restored for a Kafka Streams fleet.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass

from bench.fleet_kinds import KINDS

ROLLING_RESTART = "rolling restart"
SCALE_DOWN = "scale down by half"
SCALE_UP = "scale up by half"
COORDINATOR_RESTART = "coordinator restart"
OPERATIONS = (ROLLING_RESTART, SCALE_DOWN, SCALE_UP, COORDINATOR_RESTART)
# Differences smaller than these are noise on this machine, not a baseline doing better: in time, 0.1 s
# or a share of the time, whichever is more (a rolling restart's 40 s spread over seconds from run to run,
# each pod's readiness seen at a probe period of 1 s, the same for every kind).
SECONDS_MARGIN = 0.1
SECONDS_MARGIN_SHARE = 0.01
PARTITION_SECONDS_MARGIN = 1.0


def seconds_margin(best_s: float) -> float:
    """How much sooner than `best_s` a baseline must be Stable to count as sooner."""
    return max(SECONDS_MARGIN, SECONDS_MARGIN_SHARE * best_s)


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
    # A Kafka Streams fleet's: records restored into its stores over the operation and its settle period,
    # and how many of the rebalances Kafka Streams asked for itself (follow-ups); None: not measured.
    records_restored: int | None = None
    follow_ups: int | None = None


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
    restored: tuple[int, ...] = ()  # records restored, of the runs that measured it
    follow_ups: tuple[int, ...] = ()

    @property
    def median_s(self) -> float:
        return statistics.median(self.seconds)

    @property
    def median_rebalances(self) -> float:
        return statistics.median(self.rebalances)

    @property
    def median_stopped(self) -> float | None:
        return statistics.median(self.stopped) if self.stopped else None

    @property
    def median_restored(self) -> float | None:
        return statistics.median(self.restored) if self.restored else None


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
                tuple(s.records_restored for s in chosen if s.records_restored is not None),
                tuple(s.follow_ups for s in chosen if s.follow_ups is not None),
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


@dataclass(frozen=True)
class Cost:
    """What an operation cost the application beside rebalances and time: its column in the detailed
    table, its median and range there, its median in a summary, how a baseline's lower cost reads, and the
    difference below which it is noise."""

    header: str
    shown: Callable[[Summary], str]
    median: Callable[[Summary], float | None]
    less: str  # formatted with the difference
    margin: float


STOPPED = Cost(
    "partition-s stopped",
    lambda s: spread(s.stopped),
    lambda s: s.median_stopped,
    "{:.0f} partition-s less stopped",
    PARTITION_SECONDS_MARGIN,
)
RESTORED = Cost(
    "records restored",
    lambda s: counts(s.restored) if s.restored else "-",
    lambda s: s.median_restored,
    "{:g} fewer records restored",
    0.0,
)


def detail_headers(cost: Cost = STOPPED) -> list[str]:
    return ["coordinator", "operation", "fleet", "rebalances", "s to Stable", "s not Stable", cost.header,
            "timed out"]  # fmt: skip


DETAIL_HEADERS = detail_headers()


def rebalances_shown(s: Summary) -> str:
    """The rebalances, and of them the follow-ups Kafka Streams asked for itself where it did."""
    if not any(s.follow_ups):
        return counts(s.rebalances)
    shown = counts(s.follow_ups)
    return f"{counts(s.rebalances)} ({shown} follow-up{'' if shown == '1' else 's'})"


def detail_rows(summaries: Sequence[Summary], cost: Cost = STOPPED) -> list[list[object]]:
    return [
        [
            s.backend,
            label(s.operation, s.replicas),
            s.kind,
            rebalances_shown(s),
            spread(s.seconds),
            spread(s.unstable_seconds),
            cost.shown(s),
            s.timed_out or "",
        ]
        for s in summaries
    ]


def cell(s: Summary, cost: Cost = STOPPED) -> str:
    """rebalances / s to Stable / the cost (partition-seconds stopped unless told), medians."""
    value = cost.median(s)
    return f"{counts(s.rebalances)} / {s.median_s:.1f} s / " + ("-" if value is None else f"{value:.0f}")


def baseline_wins(
    by_kind: Mapping[str, Summary], ours: Sequence[str], baselines: Sequence[str], cost: Cost = STOPPED
) -> list[tuple[str, list[str]]]:
    """Each baseline that does better than the best of our kinds in one operation, with how: fewer
    rebalances, sooner Stable, a lower cost (partition-seconds without a consumer unless told), beyond
    the noise margins. Each measure is held against the best of our kinds on that measure."""
    mine = [by_kind[k] for k in ours if k in by_kind]
    if not mine:
        return []
    best_rebalances = min(s.median_rebalances for s in mine)
    best_seconds = min(s.median_s for s in mine)
    costs = [c for c in map(cost.median, mine) if c is not None]
    best_cost = min(costs) if costs else None
    found = []
    for kind in baselines:
        theirs = by_kind.get(kind)
        if theirs is None:
            continue
        how = []
        if theirs.median_rebalances < best_rebalances:
            how.append(f"{best_rebalances - theirs.median_rebalances:g} fewer rebalances")
        if theirs.median_s < best_seconds - seconds_margin(best_seconds):
            how.append(f"Stable {best_seconds - theirs.median_s:.1f} s sooner")
        their_cost = cost.median(theirs)
        if best_cost is not None and their_cost is not None and their_cost < best_cost - cost.margin:
            how.append(cost.less.format(best_cost - their_cost))
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


def comparison_rows(summaries: Sequence[Summary], backend: str, cost: Cost = STOPPED) -> list[list[object]]:
    """One row per operation: each kind's rebalances / s to Stable / cost (medians: partition-seconds
    stopped unless told), then every baseline that does better than staticfleet's best kind, and how."""
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
        cells: list[object] = [label(operation, first.replicas), *(cell(found[k], cost) for k in kinds)]
        cells.append(wins_text(baseline_wins(found, ours, others, cost)))
        rows.append(cells)
    return rows


def comparison_lines(summaries: Sequence[Summary], backend: str) -> list[str]:
    """Where a baseline does better, one line per operation that has one (for the demo's output)."""
    lines = []
    for row in comparison_rows(summaries, backend):
        if row[-1] != "none":
            lines.append(f"{row[0]}: {row[-1]}")
    return lines
