"""Partition-seconds without a consumer, computed from hand-made example-consumer logs."""

from __future__ import annotations

import json
from typing import Any

import pytest

from bench.consumption import ConsumerRun, Span, consuming_spans, parse_log, stopped

P = [f"t-{i}" for i in range(4)]


def ev(ts: float, event: str, **fields: Any) -> dict[str, Any]:
    return {"ts": ts, "event": event, **fields}


def fetch(ts: float, *partitions: str) -> list[dict[str, Any]]:
    return [ev(ts, "first_fetch", partition=p, record=False) for p in partitions]


def spans_of(*runs: ConsumerRun) -> list[Span]:
    return [span for run in runs for span in consuming_spans(run)]


def test_a_partition_is_consumed_from_its_first_fetch_not_from_its_assignment() -> None:
    run = ConsumerRun((ev(10, "started"), ev(11, "assigned", partitions=["t-0"]), *fetch(11.5, "t-0")))
    assert consuming_spans(run) == [Span("t-0", 11.5, None)]
    # Over [10, 20]: nothing consumed it until 11.5.
    assert stopped(consuming_spans(run), ["t-0"], 10, 20).partition_seconds == pytest.approx(1.5)


def test_an_eager_rebalance_stops_every_partition_from_its_revocation_to_its_next_first_fetch() -> None:
    a = ConsumerRun(
        (
            ev(0, "assigned", partitions=["t-0", "t-1"]),
            *fetch(0.1, "t-0", "t-1"),
            ev(10.0, "revoked", partitions=["t-0", "t-1"]),
            ev(10.5, "assigned", partitions=["t-0", "t-1"]),  # the same partitions back
            *fetch(10.7, "t-0", "t-1"),
        )
    )
    b = ConsumerRun(
        (
            ev(0, "assigned", partitions=["t-2", "t-3"]),
            *fetch(0.1, "t-2", "t-3"),
            ev(10.2, "revoked", partitions=["t-2", "t-3"]),
            ev(10.5, "assigned", partitions=["t-2", "t-3"]),
            *fetch(10.6, "t-2"),
            *fetch(11.0, "t-3"),
        )
    )
    result = stopped(spans_of(a, b), P, 5, 20)
    # t-0, t-1: 0.7 s each; t-2: 0.4 s; t-3: 0.8 s.
    assert result.partition_seconds == pytest.approx(0.7 + 0.7 + 0.4 + 0.8)
    assert result.partitions == 4


def test_a_cooperative_rebalance_stops_only_the_partitions_that_move() -> None:
    # The leaver gives up t-2 and t-3; the stayer keeps t-0 and t-1 throughout and is given the others
    # incrementally (no revocation of its own).
    stayer = ConsumerRun(
        (
            ev(0, "assigned", partitions=["t-0", "t-1"], incremental=True),
            *fetch(0.1, "t-0", "t-1"),
            ev(12.0, "assigned", partitions=["t-2", "t-3"], incremental=True),
            *fetch(12.3, "t-2", "t-3"),
        )
    )
    leaver = ConsumerRun(
        (
            ev(0, "assigned", partitions=["t-2", "t-3"], incremental=True),
            *fetch(0.1, "t-2", "t-3"),
            ev(11.0, "revoked", partitions=["t-2", "t-3"], incremental=True),
            ev(11.1, "stopped"),
        )
    )
    result = stopped(spans_of(stayer, leaver), P, 5, 20)
    assert result.partition_seconds == pytest.approx(2 * 1.3)
    assert result.partitions == 2


def test_a_consumer_killed_without_a_revocation_stops_consuming_when_its_process_ends() -> None:
    killed = ConsumerRun(
        (ev(0, "assigned", partitions=["t-0", "t-1"]), *fetch(0.2, "t-0", "t-1")),
        ended_at=10.0,
    )
    # The survivor is given the partitions after the coordinator expired the killed member.
    survivor = ConsumerRun(
        (
            ev(0, "assigned", partitions=["t-2", "t-3"], incremental=True),
            *fetch(0.2, "t-2", "t-3"),
            ev(16.0, "assigned", partitions=["t-0", "t-1"], incremental=True),
            *fetch(16.5, "t-0", "t-1"),
        )
    )
    assert consuming_spans(killed) == [Span("t-0", 0.2, 10.0), Span("t-1", 0.2, 10.0)]
    assert stopped(spans_of(killed, survivor), P, 5, 20).partition_seconds == pytest.approx(2 * 6.5)


def test_a_killed_consumer_whose_end_is_unknown_counts_as_still_consuming() -> None:
    run = ConsumerRun((ev(0, "assigned", partitions=["t-0"]), *fetch(0.2, "t-0")))
    assert consuming_spans(run) == [Span("t-0", 0.2, None)]
    assert stopped(consuming_spans(run), ["t-0"], 5, 20).partition_seconds == 0


def test_a_static_restart_stops_the_partitions_until_the_new_process_fetches_them() -> None:
    before = ConsumerRun(
        (
            ev(0, "assigned", partitions=["t-0"]),
            *fetch(0.1, "t-0"),
            ev(10.0, "revoked", partitions=["t-0"]),
            ev(10.1, "stopped"),
        )
    )
    after = ConsumerRun((ev(11.0, "started"), ev(12.0, "assigned", partitions=["t-0"]), *fetch(12.4, "t-0")))
    assert stopped(spans_of(before, after), ["t-0"], 5, 20).partition_seconds == pytest.approx(2.4)


def test_a_lost_partition_stops_at_once_and_a_revocation_of_what_is_not_held_changes_nothing() -> None:
    run = ConsumerRun(
        (
            ev(0, "assigned", partitions=["t-0"]),
            *fetch(0.1, "t-0"),
            ev(3.0, "revoked", partitions=["t-9"]),
            ev(4.0, "lost", partitions=["t-0"]),
        )
    )
    assert consuming_spans(run) == [Span("t-0", 0.1, 4.0)]


def test_a_partition_assigned_and_revoked_before_any_fetch_was_never_consumed() -> None:
    run = ConsumerRun(
        (ev(0, "assigned", partitions=["t-0"]), ev(1.0, "revoked", partitions=["t-0"]), *fetch(2.0, "t-0"))
    )
    assert consuming_spans(run) == []


def test_two_owners_at_once_count_once_and_the_window_bounds_every_span() -> None:
    spans = [Span("t-0", 0, 12), Span("t-0", 11, 13), Span("t-0", 15, None)]
    # [10, 20]: consumed 10-13 and 15-20: stopped 2 s.
    assert stopped(spans, ["t-0"], 10, 20).partition_seconds == pytest.approx(2.0)
    # A partition nobody consumed at all counts for the whole window; one not named is not counted.
    assert stopped(spans, ["t-0", "t-1"], 10, 20).partition_seconds == pytest.approx(12.0)
    assert stopped([Span("t-5", 0, 1)], [], 10, 20).partition_seconds == 0


def test_the_pod_runners_log_splits_into_runs_and_a_run_without_its_stop_ends_when_the_next_begins() -> None:
    def line(**record: Any) -> str:
        return json.dumps(record)

    text = "\n".join(
        [
            "--- 2026-11-26T16:23:50Z pod aaa restartCount 0",
            line(ts=1795710230.5, event="started"),
            line(ts=1795710231.0, event="assigned", partitions=["t-0"]),
            line(ts=1795710231.2, event="first_fetch", partition="t-0", record=False),
            "%4|1795710232.000|WARN|rdkafka#consumer-1| not a JSON line",
            '["not", "an", "event"]',
            "--- 2026-11-26T16:23:55Z pod aaa restartCount 1",  # killed: no stop logged
            line(ts=1795710236.0, event="started"),
            line(ts=1795710237.0, event="stopped"),
        ]
    )
    first, second = parse_log(text)
    assert [e["event"] for e in first.events] == ["started", "assigned", "first_fetch"]
    assert first.ended_at == pytest.approx(1795710235.0)
    assert second.ended_at is None  # it logged its stop
    assert consuming_spans(first) == [Span("t-0", 1795710231.2, 1795710235.0)]
    assert parse_log(line(ts=1.0, event="started")) == [ConsumerRun(({"ts": 1.0, "event": "started"},))]
