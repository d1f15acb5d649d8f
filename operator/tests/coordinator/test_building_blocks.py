"""Timers, the consumer embedded protocol, the event log writer and Java-compatible hashing."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from staticfleet.coordinator.consumer_protocol import (
    Assignment,
    ProtocolDecodeError,
    Subscription,
    assignment_partitions,
    decode_assignment,
    decode_subscription,
    encode_assignment,
    encode_subscription,
)
from staticfleet.coordinator.events import EventLogWriter
from staticfleet.coordinator.group import java_hashmap_order, java_string_hash
from staticfleet.coordinator.timers import Timers


def test_timers_fire_in_deadline_order_and_a_reschedule_replaces_the_earlier_one() -> None:
    t = Timers()
    t.schedule("a", 30)
    t.schedule("b", 10)
    t.schedule("c", 20)
    t.schedule("b", 40)  # later: b moves behind a
    t.schedule("c", 5)  # earlier: c moves to the front
    fired = []
    while (due := t.pop_due(100)) is not None:
        fired.append(due[0])
    assert fired == ["c", "a", "b"]


def test_timers_do_not_fire_early_and_cancel_removes_them() -> None:
    t = Timers()
    t.schedule("a", 10, payload="x")
    t.schedule("b", 10)
    t.cancel("b")
    assert t.pop_due(9) is None
    assert t.next_deadline() == 10
    assert t.pop_due(10) == ("a", "x")
    assert t.pop_due(1_000) is None and len(t) == 0


def test_subscription_round_trips_for_every_version() -> None:
    for version in range(4):
        sub = Subscription(
            version,
            ("a", "b"),
            b"ud",
            {"a": (0, 1)} if version else {},
            7 if version > 1 else -1,
            "rack" if version > 2 else None,
        )
        assert decode_subscription(encode_subscription(sub)) == sub


def test_assignment_round_trips_and_decodes_to_partitions() -> None:
    data = encode_assignment(Assignment(1, {"t": (2, 0, 1)}, None))
    assert decode_assignment(data) == Assignment(1, {"t": (2, 0, 1)}, None)
    assert assignment_partitions(data) == {"t": [0, 1, 2]}
    assert assignment_partitions(b"") == {}
    assert assignment_partitions(b"\x00\x01\xff") is None


def test_a_newer_subscription_version_with_extra_fields_still_decodes() -> None:
    data = encode_subscription(Subscription(3, ("t",), None, {}, 1, None)) + b"\x00\x00\x00\x07future"
    assert decode_subscription(data[:2].replace(b"\x03", b"\x04") + data[2:]).topics == ("t",)


def test_truncated_subscription_is_a_decode_error() -> None:
    with pytest.raises(ProtocolDecodeError):
        decode_subscription(encode_subscription(Subscription(0, ("topic",)))[:5])


def test_java_string_hash_matches_java() -> None:
    # Values of "x".hashCode() printed by jshell.
    assert java_string_hash("range") == 108280125
    assert java_string_hash("roundrobin") == -128548644
    assert java_string_hash("cooperative-sticky") == 1843682987
    assert java_string_hash("") == 0
    assert java_hashmap_order(["roundrobin", "range"]) == ["range", "roundrobin"]


def test_event_log_rotates_by_size_and_keeps_a_bounded_number_of_files(tmp_path: Path) -> None:
    writer = EventLogWriter(tmp_path, max_bytes=200, keep=3)
    for i in range(40):
        writer.emit({"type": "member_joined", "i": i})
    writer.close()
    rotated = writer.rotated_files()
    assert 1 <= len(rotated) <= 3
    lines = [
        json.loads(line) for f in [*rotated, tmp_path / "events.jsonl"] for line in f.read_text().splitlines()
    ]
    assert [e["i"] for e in lines] == list(range(40 - len(lines), 40)), "the newest events survive, in order"
    assert all(f.stat().st_size <= 200 for f in rotated)
