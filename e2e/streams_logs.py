"""What a Kafka Streams fleet's logs say, as pure functions: the rebalances its group went through as the
coordinator saw them (Apache Kafka's own log lines, the embedded coordinator's event log, docs/events.md),
and what the example application (examples/streams) reports in its JSON lines: records restored into its
stores, the tasks each stream thread runs.

The Streams tests on kind (e2e/tests/kind/test_streams_on_kind.py) read them through `kubectl`;
bench/fleet_ops.py (`--app streams`) reads the same from the local cluster's files.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any


@dataclass(frozen=True)
class Rebalance:
    """One completed join phase of a group: the generation it made, when its first trigger put the group in
    PreparingRebalance, when the join phase completed with the new generation (Apache Kafka logs it as
    "Stabilized"; the members' SyncGroup follows at once), and that trigger as the coordinator logged
    it. A follow-up is one a current member asked for by joining again (Kafka Streams does after an
    assignment that moves a task between members, or when its assignor schedules one); the others are
    membership changes: a member joining, leaving, being removed or expiring."""

    generation: int
    started_at: float | None
    stable_at: float
    trigger: str
    follow_up: bool
    members: int

    @property
    def client_reason(self) -> str:
        """The reason the member's client gave (JoinGroup's reason field), where the trigger quotes one."""
        return self.trigger.partition("client reason: ")[2]

    def describe(self) -> str:
        kind = "follow-up" if self.follow_up else "membership"
        return f"generation {self.generation} ({kind}): {self.trigger}"


@dataclass(frozen=True)
class History:
    """A group's completed rebalances, oldest first, and the trigger of one still running (else None)."""

    rebalances: list[Rebalance]
    running: str | None

    @property
    def generation(self) -> int:
        return self.rebalances[-1].generation if self.rebalances else 0

    def after(self, generation: int) -> list[Rebalance]:
        return [r for r in self.rebalances if r.generation > generation]


# -- Apache Kafka's group coordinator, from its log (e2e/kind/kafka/log4j2.xml's layout) ------------------

_KAFKA_LINE = re.compile(r"^\[(?P<ts>[^\]]+)\] INFO (?P<message>.*)$")
# GroupMetadataManager's reasons for a rebalance that a current member starts by joining again.
_KAFKA_REJOIN = re.compile(r"^(Leader \S+ re-joining group|Updating metadata for member \S+ during)")


def _kafka_time(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()


def kafka_history(log: str, group: str) -> History:
    """The group's completed rebalances in Apache Kafka's log: "Preparing to rebalance group G in state S
    with old generation N (reason: R)." (the first such line for N starts the rebalance to N + 1; later
    ones, as members join during it, do not) and "Stabilized group G generation N+1 with M members."."""
    preparing = re.compile(
        rf"Preparing to rebalance group {re.escape(group)} in state \S+ with old generation (?P<old>-?\d+) "
        r"\(reason: (?P<reason>.*)\)\.\s+\([\w.$]+\)$"
    )
    stabilized = re.compile(
        rf"Stabilized group {re.escape(group)} generation (?P<generation>\d+) with (?P<members>\d+) members"
    )
    started: dict[int, tuple[float, str]] = {}
    found: list[Rebalance] = []
    for line in log.splitlines():
        match = _KAFKA_LINE.match(line)
        if match is None:
            continue
        message = match.group("message")
        if (begin := preparing.search(message)) is not None:
            started.setdefault(
                int(begin.group("old")) + 1, (_kafka_time(match.group("ts")), begin.group("reason"))
            )
        elif (end := stabilized.search(message)) is not None:
            generation = int(end.group("generation"))
            at, reason = started.get(generation, (None, ""))
            found.append(
                Rebalance(
                    generation=generation,
                    started_at=at,
                    stable_at=_kafka_time(match.group("ts")),
                    trigger=reason,
                    follow_up=_KAFKA_REJOIN.match(reason) is not None,
                    members=int(end.group("members")),
                )
            )
    return _history(found, started)


def _history(found: list[Rebalance], started: Mapping[int, tuple[Any, ...]]) -> History:
    generation = found[-1].generation if found else 0
    running = started.get(generation + 1)
    return History(found, None if running is None else str(running[1]))


# -- the embedded coordinator, from its event log (docs/events.md) -----------------------------------------

# Its reasons for a rebalance that a current member starts by joining again.
_EMBEDDED_REJOIN = frozenset({"metadata-changed", "leader-rejoined"})


def embedded_history(events: Iterable[Mapping[str, Any]], group: str) -> History:
    """The group's completed join phases in the coordinator's events, one per generation as on Apache
    Kafka: the first `rebalance_started` with the old generation, and `join_completed` with the new one."""
    started: dict[int, tuple[float, str, str]] = {}
    found: list[Rebalance] = []
    for event in events:
        if event.get("group") != group:
            continue
        kind, generation = event.get("type"), int(event.get("generation") or 0)
        if kind == "rebalance_started":
            reason = str(event.get("reason") or "")
            started.setdefault(
                generation + 1, (int(event["ts"]) / 1000, reason, str(event.get("detail") or ""))
            )
        elif kind == "join_completed":
            at, reason, detail = started.get(generation, (None, "", ""))
            found.append(
                Rebalance(
                    generation=generation,
                    started_at=at,
                    stable_at=int(event["ts"]) / 1000,
                    trigger=f"{reason}: {detail}" if detail else reason,
                    follow_up=reason in _EMBEDDED_REJOIN,
                    members=len(event.get("members") or ()),
                )
            )
    return _history(found, started)


# -- the example application's JSON lines (examples/streams/README.md, "What it reports") -----------------


def json_lines(text: str) -> Iterator[dict[str, Any]]:
    """The JSON objects of a container's log; Kafka's own lines (on stderr, merged by `kubectl logs`) are
    not JSON and are skipped."""
    for line in text.splitlines():
        if line.startswith("{"):
            try:
                found = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(found, dict):
                yield found


def restored_records(lines: Iterable[Mapping[str, Any]], since: float) -> dict[str, int]:
    """Records restored per store from `since` (epoch seconds): each restore of a store partition ends
    with `restore_ended`, or `restore_suspended` when its task moves away first, with its total."""
    totals: Counter[str] = Counter()
    for line in lines:
        if line.get("event") in ("restore_ended", "restore_suspended") and float(line["ts"]) >= since:
            totals[str(line["store"])] += int(line["restored"])
    return dict(totals)


def running_tasks(lines: Iterable[Mapping[str, Any]]) -> dict[str, list[str]]:
    """Each stream thread's member and the input partitions its active tasks read, from the last `tasks`
    line (written each time the instance is RUNNING)."""
    last = None
    for line in lines:
        if line.get("event") == "tasks":
            last = line
    if last is None:
        return {}
    return {str(t["member"]): list(t["partitions"]) for t in last["threads"]}
