"""message.max.bytes bounds what one operation appends, as Kafka bounds a batch of __consumer_offsets,
and ids are bounded by the longest string Kafka's protocol carries."""

from __future__ import annotations

import pytest
from kio.schema.errors import ErrorCode as E

from staticfleet.coordinator import GroupState
from staticfleet.coordinator.config import MAX_MESSAGE_MAX_BYTES, CoordinatorConfig
from staticfleet.coordinator.messages import MAX_STRING_BYTES, Protocol
from staticfleet.coordinator.records import (
    GroupMetadataRecord,
    MemberRecord,
    OffsetCommitRecord,
    Record,
    SecurityRecord,
    encode_record,
    encoded_size,
)

from .harness import RANGE_RR, Harness
from .test_persistence import SAMPLE

LIMIT = 4_000


def _harness() -> Harness:
    return Harness(
        CoordinatorConfig(initial_rebalance_delay_ms=0, min_session_timeout_ms=10, message_max_bytes=LIMIT)
    )


def _completing(h: Harness, *protocols: tuple[Protocol, ...]) -> list[str]:
    """Static members a, b, ... join with these protocols; the group is CompletingRebalance."""
    replies = [h.join("", chr(ord("a") + i), protocols=p) for i, p in enumerate(protocols)]
    h.tick()
    return [r.get().member_id for r in replies]


def test_encoded_size_is_the_length_of_the_encoding_for_every_record_kind() -> None:
    more: list[Record] = [
        GroupMetadataRecord(
            "grüppe", "consumer", 1, "range", "m", 0, (MemberRecord("m", "ï", "c", "/h", 1, 2, b"", b""),)
        ),
        OffsetCommitRecord("g", "topic", 7, 1, 5, "méta", 99, -1),
        SecurityRecord(b"\x01\x02acl"),
    ]
    for record in SAMPLE + more:
        assert encoded_size(record) == len(encode_record(record)), record


def test_a_leader_sync_whose_group_record_passes_message_max_bytes_fails_every_parked_sync() -> None:
    h = _harness()
    big = (Protocol("range", b"s" * (LIMIT // 2)),)
    a, b = _completing(h, big, big)
    follower = h.sync(b, 1, "b")
    leader = h.sync(a, 1, "a", assignments={a: b"A", b: b"B"})
    assert leader.get().error == follower.get().error == E.unknown_server_error
    assert h.state() is GroupState.PREPARING_REBALANCE
    assert h.store.records[-1] == h.group().last_persisted, "nothing of the refused record was written"
    assert h.coordinator.runtime.too_large_appends == 1


def test_a_group_record_just_under_message_max_bytes_is_stored() -> None:
    h = _harness()
    a, b = _completing(h, (Protocol("range", b"s" * 1_500),), (Protocol("range", b"s" * 1_500),))
    h.sync(b, 1, "b")
    assert h.sync(a, 1, "a", assignments={a: b"A", b: b"B"}).get().error == E.none
    assert h.state() is GroupState.STABLE
    assert encoded_size(h.store.records[-1]) <= LIMIT


def test_a_static_replacement_over_message_max_bytes_is_undone_and_answered_unknown_server_error() -> None:
    h = _harness()
    ids = h.stable_static_group("a", "b")
    big = (Protocol("range", b"s" * LIMIT), Protocol("roundrobin", b"m"))
    resp = h.join("", "b", protocols=big).get()
    assert (resp.error, resp.member_id, resp.generation_id, resp.leader) == (
        E.unknown_server_error,
        "",
        1,
        ids["a"],
    )
    group = h.group()
    assert group.static_members["b"] == ids["b"]
    assert group.members[ids["b"]].protocols == RANGE_RR
    assert h.heartbeat(ids["b"], 1, "b") == E.none


def test_an_offset_commit_batch_over_message_max_bytes_commits_nothing() -> None:
    h = _harness()
    offsets = {("t", p): 7 for p in range(10)}
    fits = h.commit("", -1, group="fits", offsets=offsets, metadata="m" * 300)
    assert {r.error for t in fits.topics for r in t.partitions} == {E.none}
    over = h.commit("", -1, group="over", offsets=offsets, metadata="m" * 400)
    assert [r.error for t in over.topics for r in t.partitions] == [E.unknown_server_error] * 10
    assert "over" not in h.coordinator.groups, "the simple group the commit created is taken back out"
    assert {r.group_id for r in h.coordinator.offsets.all()} == {"fits"}


def test_message_max_bytes_is_bounded_by_what_a_frame_of_the_log_holds() -> None:
    CoordinatorConfig(message_max_bytes=MAX_MESSAGE_MAX_BYTES)
    for wrong in (0, MAX_MESSAGE_MAX_BYTES + 1):
        with pytest.raises(ValueError, match=r"message\.max\.bytes"):
            CoordinatorConfig(message_max_bytes=wrong)


def test_a_join_whose_member_id_would_pass_the_longest_protocol_string_is_unknown_server_error() -> None:
    h = Harness()  # member ids are "<instance or client id>-uuid<n>"
    fits = h.join("", "i" * (MAX_STRING_BYTES - len("-uuid1")), group="fits")
    h.tick()
    assert fits.get().error == E.none
    assert len(fits.get().member_id) == MAX_STRING_BYTES
    refused = h.join("", "i" * (MAX_STRING_BYTES - len("-uuid2") + 1), group="over").get()
    assert (refused.error, refused.member_id, refused.generation_id) == (E.unknown_server_error, "", -1)
    assert h.group("over").members == {}
    dynamic = h.join("", None, group="dynamic", client_id="c" * MAX_STRING_BYTES).get()
    assert (dynamic.error, dynamic.member_id) == (E.unknown_server_error, "")
    assert not h.group("dynamic").pending_join_members
