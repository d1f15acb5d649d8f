"""How long partitions went without a consumer, from the example consumer's log (pure functions).

examples/consumer/consumer.py logs, as JSON lines, each assignment (`assigned`: the partitions given),
each revocation (`revoked`, or `lost` when they were taken away without one), each assigned
partition's first fetch (`first_fetch`: its first record, or its end when it had none to read) and its
own stop (`stopped`). A partition is *consumed* from its owner's first fetch after the assignment until
its revocation or the owner's stop; at every other moment it has no owner consuming it. The cost of a
fleet operation to the consumers is the partition-seconds without one over the operation's window.

With eager assignors every member gives up all its partitions in each rebalance and gets its new
assignment at the end: every partition stops. With cooperative ones (and Kafka 4's consumer protocol)
the callbacks name only the partitions that change hands: only those stop. A consumer killed without
a revocation (SIGKILL) stops consuming when its process ends, which its own log cannot say: the pod
runner's line that starts the container's next run does, else the caller's `ended_at`.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

Event = Mapping[str, Any]
# The pod runner starts each run of a container with this line in the container's log.
RUN_MARKER = "--- "


@dataclass(frozen=True, slots=True)
class Span:
    """One owner consuming one partition, from its first fetch to its revocation or stop."""

    partition: str
    start: float
    end: float | None  # None: still consuming when the log ends


@dataclass(frozen=True, slots=True)
class ConsumerRun:
    """One process of the consumer: its events, in order, and when it ended if its log cannot say."""

    events: tuple[Event, ...]
    ended_at: float | None = None


@dataclass(frozen=True, slots=True)
class Stopped:
    partition_seconds: float
    partitions: int  # how many partitions were without a consumer at some moment of the window


def consuming_spans(run: ConsumerRun) -> list[Span]:
    """The partitions one consumer process consumed, and when."""
    awaiting: dict[str, float] = {}  # assigned, not fetched yet
    consuming: dict[str, float] = {}  # fetched since: when it started
    spans: list[Span] = []

    def stop(partition: str, at: float) -> None:
        awaiting.pop(partition, None)
        began = consuming.pop(partition, None)
        if began is not None:
            spans.append(Span(partition, began, max(began, at)))

    for event in run.events:
        kind, at = event.get("event"), float(event.get("ts", 0.0))
        if kind == "assigned":
            for partition in event.get("partitions", []):
                if partition not in consuming:
                    awaiting[str(partition)] = at
        elif kind == "first_fetch":
            partition = str(event.get("partition"))
            if awaiting.pop(partition, None) is not None:
                consuming[partition] = at
        elif kind in ("revoked", "lost"):
            for partition in event.get("partitions", []):
                stop(str(partition), at)
        elif kind == "stopped":
            for partition in [*consuming, *awaiting]:
                stop(partition, at)
    for partition, began in consuming.items():
        end = run.ended_at
        spans.append(Span(partition, began, None if end is None else max(began, end)))
    return spans


def stopped(spans: Iterable[Span], partitions: Iterable[str], begin: float, end: float) -> Stopped:
    """Partition-seconds within [begin, end] during which no owner consumed the partition, over every
    partition named (one that nobody consumed at all counts for the whole window)."""
    by_partition: dict[str, list[tuple[float, float]]] = {p: [] for p in partitions}
    for span in spans:
        if span.partition not in by_partition:
            continue
        low, high = max(span.start, begin), min(end if span.end is None else span.end, end)
        if high > low:
            by_partition[span.partition].append((low, high))
    total, count = 0.0, 0
    window = max(0.0, end - begin)
    for covered in by_partition.values():
        gap = window - _union_length(covered)
        if gap > 1e-9:
            total += gap
            count += 1
    return Stopped(round(total, 3), count)


def _union_length(intervals: Sequence[tuple[float, float]]) -> float:
    length, reach = 0.0, float("-inf")
    for low, high in sorted(intervals):
        if high <= reach:
            continue
        length += high - max(low, reach)
        reach = high
    return length


def parse_log(text: str) -> list[ConsumerRun]:
    """A container's log as the pod runner writes it: one run per start, each begun by its marker
    line; other lines that are not JSON objects with an event are skipped. A run whose consumer did not
    log its stop ended, at the latest, when the next run began."""
    runs: list[tuple[float | None, list[Event]]] = []
    current: list[Event] | None = None
    for line in text.splitlines():
        if line.startswith(RUN_MARKER):
            current = []
            runs.append((_marker_time(line), current))
            continue
        try:
            record = json.loads(line)
        except ValueError:
            continue
        if not isinstance(record, dict) or "event" not in record:
            continue
        if current is None:  # a log without markers: one run
            current = []
            runs.append((None, current))
        current.append(record)
    out = []
    for index, (_, events) in enumerate(runs):
        following = runs[index + 1][0] if index + 1 < len(runs) else None
        ended = None if any(e.get("event") == "stopped" for e in events) else following
        out.append(ConsumerRun(tuple(events), ended))
    return out


def _marker_time(line: str) -> float | None:
    """`--- 2026-11-26T16:23:51.765Z pod <uid> restartCount 0`: the time the run started."""
    parts = line.split()
    if len(parts) < 2:
        return None
    try:
        return datetime.fromisoformat(parts[1].replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None
