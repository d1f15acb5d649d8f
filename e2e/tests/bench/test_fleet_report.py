"""The fleet benchmark's kinds of fleet and its report: medians per kind, the comparison table, and where
a baseline does better than staticfleet's best kind."""

from __future__ import annotations

import json
from dataclasses import asdict
from pathlib import Path

from bench.fleet_kinds import (
    CONSUMER_STATIC,
    DYNAMIC_TUNED,
    DYNAMIC_TUNED_COOPERATIVE,
    EMBEDDED,
    KAFKA,
    KINDS,
    STATICFLEET_CONSUMER,
    STATICFLEET_COOPERATIVE,
    kinds_on,
)
from bench.fleet_report import (
    ROLLING_RESTART,
    SCALE_DOWN,
    SCALE_UP,
    Sample,
    baseline_wins,
    comparison_lines,
    comparison_rows,
    summarize,
    wins_text,
)
from examples.demo.fleet import PLAIN_DYNAMIC, PLAIN_STATIC, STATICFLEET
from examples.demo.summary import published_comparison


def sample(
    kind: str, seconds: float, rebalances: int, stopped: float | None, *, run: int = 1, **kw: object
) -> Sample:
    fields: dict[str, object] = {"backend": EMBEDDED, "replicas": 20, "operation": SCALE_DOWN, **kw}
    return Sample(
        run=run,
        kind=kind,
        seconds=seconds,
        rebalances=rebalances,
        unstable_seconds=0.0,
        stopped_partition_seconds=stopped,
        **fields,  # type: ignore[arg-type]
    )


def test_each_kind_tells_its_consumers_and_its_resource_what_it_is() -> None:
    tuned = KINDS[DYNAMIC_TUNED_COOPERATIVE]
    assert tuned.spec() == {"heartbeatIntervalMs": 250, "assignmentStrategy": "cooperative-sticky"}
    assert {"name": "KAFKA_MEMBERSHIP", "value": "dynamic"} in tuned.env()
    assert tuned.expected("fleet", 3) == 3 and tuned.cooperative
    ours = KINDS[STATICFLEET]
    assert ours.operated and ours.spec() == {}  # the operator's defaults, its 250 ms heartbeat included
    assert ours.expected("fleet", 2) == frozenset({"fleet-0", "fleet-1"})
    modern = KINDS[CONSUMER_STATIC]
    assert {"name": "KAFKA_GROUP_PROTOCOL", "value": "consumer"} in modern.env() and modern.cooperative
    assert KINDS[PLAIN_DYNAMIC].spec() == {}  # the client's default heartbeat


def test_every_kind_runs_on_both_coordinators_the_consumer_protocol_included() -> None:
    every = list(KINDS)
    assert CONSUMER_STATIC in every and STATICFLEET_CONSUMER in every
    assert [k.name for k in kinds_on(EMBEDDED, every)] == [k.name for k in kinds_on(KAFKA, every)] == every
    assert KINDS[STATICFLEET_CONSUMER].spec() == {"groupProtocol": "consumer"}


def test_a_baseline_does_better_only_beyond_the_noise_and_against_our_best_kind_on_each_measure() -> None:
    summaries = summarize(
        [
            sample(STATICFLEET, 1.5, 1, 40.0),
            sample(STATICFLEET_COOPERATIVE, 1.6, 1, 12.0),
            sample(DYNAMIC_TUNED, 0.5, 1, 20.0),
            sample(DYNAMIC_TUNED_COOPERATIVE, 1.45, 1, 11.5),  # within the margins of our best
            sample(PLAIN_DYNAMIC, 1.4, 2, 60.0),
        ]
    )
    by_kind = {s.kind: s for s in summaries}
    wins = baseline_wins(
        by_kind,
        [STATICFLEET, STATICFLEET_COOPERATIVE],
        [DYNAMIC_TUNED, DYNAMIC_TUNED_COOPERATIVE, PLAIN_DYNAMIC],
    )
    # Stable sooner than our best (1.5 s); more partition-seconds than our best (12): not better there.
    assert wins == [(DYNAMIC_TUNED, ["Stable 1.0 s sooner"])]
    assert wins_text(wins) == "plain dynamic 250 ms: Stable 1.0 s sooner"
    assert wins_text([]) == "none"


def test_a_long_operation_counts_as_sooner_only_beyond_a_share_of_its_time() -> None:
    def wins(ours_s: float, theirs_s: float) -> list[tuple[str, list[str]]]:
        summaries = summarize(
            [
                sample(STATICFLEET, ours_s, 0, 30.0, operation=ROLLING_RESTART),
                sample(DYNAMIC_TUNED, theirs_s, 40, 400.0, operation=ROLLING_RESTART),
            ]
        )
        return baseline_wins({s.kind: s for s in summaries}, [STATICFLEET], [DYNAMIC_TUNED])

    assert wins(41.34, 41.19) == []  # 0.15 s of 41 s: within 1 %
    assert wins(41.0, 40.5) == [(DYNAMIC_TUNED, ["Stable 0.5 s sooner"])]
    assert wins(1.5, 1.3) == [(DYNAMIC_TUNED, ["Stable 0.2 s sooner"])]  # a short step: beyond 0.1 s counts


def test_the_comparison_has_a_row_per_operation_with_every_kind_and_the_baselines_that_do_better() -> None:
    samples = [
        sample(STATICFLEET, 1.0, 1, 10.0, run=1),
        sample(STATICFLEET, 2.0, 1, 14.0, run=2),
        sample(PLAIN_STATIC, 30.0, 1, 300.0),
        sample(PLAIN_DYNAMIC, 0.6, 1, 9.0),
        sample(STATICFLEET, 2.0, 1, 2.0, operation=SCALE_UP),
        sample(PLAIN_STATIC, 3.0, 1, 3.0, operation=SCALE_UP),
        sample(PLAIN_DYNAMIC, 2.0, 1, 2.5, operation=SCALE_UP),
        sample(PLAIN_DYNAMIC, 1.0, 1, 1.0, backend=KAFKA),  # another coordinator: not in this table
    ]
    rows = comparison_rows(summarize(samples), EMBEDDED)
    assert rows == [
        [
            "scale 20 → 10",
            "1 / 1.5 s / 12",
            "1 / 30.0 s / 300",
            "1 / 0.6 s / 9",
            "plain dynamic: Stable 0.9 s sooner, 3 partition-s less stopped",
        ],
        ["scale 10 → 15", "1 / 2.0 s / 2", "1 / 3.0 s / 3", "1 / 2.0 s / 2", "none"],
    ]
    assert comparison_lines(summarize(samples), EMBEDDED) == [
        "scale 20 → 10: plain dynamic: Stable 0.9 s sooner, 3 partition-s less stopped"
    ]


def test_the_demo_says_where_the_published_runs_found_a_baseline_doing_better(tmp_path: Path) -> None:
    results = tmp_path / "fleet_ops.json"
    samples = [
        sample(STATICFLEET, 1.5, 1, 12.0),
        sample(DYNAMIC_TUNED, 0.5, 1, 6.0),
        sample(STATICFLEET, 1.0, 1, 6.0, backend=KAFKA),
        sample(DYNAMIC_TUNED, 1.0, 1, 6.0, backend=KAFKA),
    ]
    document = {"machine": {"date": "2026-11-28"}, "args": {"replicas": 20, "runs": 3}}
    results.write_text(json.dumps({**document, "samples": [asdict(s) for s in samples]}))
    head = "bench/fleet_ops.py, N=20, 3 runs on 2026-11-28, on"
    assert published_comparison(results).splitlines() == [
        f"{head} the embedded coordinator: a baseline does better in",
        "  scale 20 → 10: plain dynamic 250 ms: Stable 1.0 s sooner, 6 partition-s less stopped",
        f"{head} Apache Kafka: no baseline does better than staticfleet",
    ]
    assert published_comparison(tmp_path / "absent.json") == ""
