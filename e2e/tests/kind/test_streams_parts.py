"""The readers of test_streams_on_kind.py, on lines as Apache Kafka 4.3.1 (e2e/kind/kafka/log4j2.xml's
layout), the embedded coordinator (docs/events.md) and the example Streams application write them."""

from __future__ import annotations

import json

from e2e.streams_logs import embedded_history, json_lines, kafka_history, restored_records, running_tasks

from .streams import compare_counts

GROUP = "ns.order-counts"
PREFIX = "INFO [GroupCoordinator id=1 topic=__consumer_offsets partition=0]"
SOURCE = "(org.apache.kafka.coordinator.group.GroupMetadataManager)"


def kafka_line(at: str, message: str) -> str:
    return f"[2026-11-28T22:{at}Z] {PREFIX} {message} {SOURCE}"


def preparing(at: str, old: int, reason: str, group: str = GROUP) -> str:
    return kafka_line(
        at, f"Preparing to rebalance group {group} in state PreparingRebalance with old generation {old} "
        f"(reason: {reason})."
    )  # fmt: skip


KAFKA_LOG = "\n".join(
    [
        "[2026-11-28T22:40:00.000Z] INFO [KafkaRaftServer nodeId=1] Kafka Server started (kafka.Kafka)",
        preparing(
            "42:29.100",
            0,
            "Adding new member order-counts-3-2-01d8 with group instance id order-counts-3-2; "
            "client reason: need to re-join with the given member-id: order-counts-3-2-01d8",
        ),
        preparing(
            "42:29.200",
            0,
            "Adding new member x with group instance id None; client reason: not provided",
            group=f"{GROUP}-dynamic",
        ),
        kafka_line("42:35.133", f"Stabilized group {GROUP} generation 1 with 8 members."),
        preparing(
            "43:21.513",
            1,
            "removing member order-counts-3-1-6048 on LeaveGroup; client reason: scale-down (operator)",
        ),
        preparing(
            "43:22.000",
            1,
            "Leader order-counts-0-1-2c4e re-joining group during PreparingRebalance; client reason: x",
        ),
        kafka_line("43:25.952", f"Stabilized group {GROUP} generation 2 with 4 members."),
        preparing(
            "43:28.010",
            2,
            "Leader order-counts-0-1-2c4e re-joining group during Stable; client reason: "
            "need to revoke partitions and re-join",
        ),
        kafka_line("43:30.187", f"Stabilized group {GROUP} generation 3 with 4 members."),
        preparing(
            "43:40.000",
            3,
            "Updating metadata for member order-counts-1-2-b027 during Stable; client "
            "reason: triggered followup rebalance scheduled for 0",
        ),
    ]
)


def test_kafka_rebalances_are_one_per_generation_with_the_trigger_that_started_each() -> None:
    history = kafka_history(KAFKA_LOG, GROUP)
    assert [(r.generation, r.members, r.follow_up) for r in history.rebalances] == [
        (1, 8, False),
        (2, 4, False),
        (3, 4, True),
    ]
    first, removal, follow_up = history.rebalances
    assert first.trigger.startswith("Adding new member order-counts-3-2-01d8")
    assert removal.trigger.startswith("removing member order-counts-3-1-6048 on LeaveGroup")
    assert removal.client_reason == "scale-down (operator)"
    assert follow_up.client_reason == "need to revoke partitions and re-join"
    assert round(follow_up.stable_at - (follow_up.started_at or 0), 3) == 2.177
    assert history.generation == 3
    assert history.running is not None and "triggered followup rebalance" in history.running
    assert [r.generation for r in history.after(1)] == [2, 3]


def test_kafka_lines_of_another_group_or_level_are_not_counted() -> None:
    assert kafka_history(KAFKA_LOG, f"{GROUP}-dynamic").rebalances == []
    assert kafka_history(KAFKA_LOG, f"{GROUP}-dynamic").running is not None
    warned = KAFKA_LOG.replace("] INFO [", "] WARN [")
    assert kafka_history(warned, GROUP).rebalances == []
    assert kafka_history("", GROUP).generation == 0


def event(ts: int, kind: str, generation: int, **fields: object) -> dict[str, object]:
    return {"v": 1, "ts": ts, "type": kind, "group": GROUP, "generation": generation, **fields}


EVENTS = [
    event(
        1000, "rebalance_started", 0, reason="member-joined", detail="new member a (instance x-0-1) joined"
    ),
    event(
        1500, "rebalance_started", 0, reason="member-joined", detail="new member b (instance x-0-2) joined"
    ),
    event(4000, "join_completed", 1, members=[{"member_id": "a"}, {"member_id": "b"}]),
    event(4010, "rebalance_completed", 1, reason="member-joined"),
    {**event(4500, "rebalance_started", 0, reason="member-joined"), "group": "other"},
    event(
        9000,
        "rebalance_started",
        1,
        reason="metadata-changed",
        detail="member a rejoined during Stable; client reason: triggered followup rebalance scheduled for 0",
    ),
    event(9800, "join_completed", 2, members=[{"member_id": "a"}, {"member_id": "b"}]),
    event(9900, "rebalance_started", 2, reason="member-removed", detail="LeaveGroup for x-0-2"),
]


def test_embedded_rebalances_are_its_join_phases_with_the_reason_and_detail_of_the_first_trigger() -> None:
    history = embedded_history(EVENTS, GROUP)
    assert [(r.generation, r.members, r.follow_up) for r in history.rebalances] == [
        (1, 2, False),
        (2, 2, True),
    ]
    first, follow_up = history.rebalances
    assert (first.started_at, first.stable_at) == (1.0, 4.0)
    assert first.trigger == "member-joined: new member a (instance x-0-1) joined"
    assert follow_up.client_reason == "triggered followup rebalance scheduled for 0"
    assert history.running == "member-removed"
    assert embedded_history(EVENTS[:4], GROUP).running is None


APP_LOG = "\n".join(
    [
        "[main] WARN org.apache.kafka.streams.StreamsConfig - a warning of Kafka's own",
        json.dumps({"event": "restore_ended", "store": "order-counts", "restored": 7, "ts": 99.5}),
        json.dumps({"event": "restore_ended", "store": "order-counts", "restored": 40, "ts": 100.0}),
        json.dumps({"event": "restore_suspended", "store": "order-counts", "restored": 2, "ts": 101.0}),
        json.dumps({"event": "restore_ended", "store": "other", "restored": 0, "ts": 102.0}),
        '{"event": "progress", "truncated',
        json.dumps(
            {
                "event": "tasks",
                "threads": [
                    {"member": "order-counts-0-1", "partitions": ["orders-1"]},
                    {"member": "order-counts-0-2", "partitions": []},
                ],
                "ts": 103.0,
            }
        ),
    ]
)


def test_records_restored_are_summed_per_store_from_a_moment_on_skipping_lines_that_are_not_json() -> None:
    lines = list(json_lines(APP_LOG))
    assert len(lines) == 5
    assert restored_records(lines, since=100.0) == {"order-counts": 42, "other": 0}
    assert restored_records(lines, since=200.0) == {}
    assert running_tasks(lines) == {"order-counts-0-1": ["orders-1"], "order-counts-0-2": []}
    assert running_tasks([]) == {}


def test_counts_are_intact_only_when_every_key_counts_each_of_its_records_once() -> None:
    assert compare_counts({"a": 2, "b": 1}, {"a": 2, "b": 1}).intact
    check = compare_counts({"a": 2, "b": 1, "c": 3}, {"a": 3, "b": 1, "d": 1})
    assert not check.intact
    assert check.lost == {"c": (3, 0)}
    assert check.extra == {"a": (2, 3), "d": (0, 1)}
    assert (check.keys, check.records) == (3, 6)
