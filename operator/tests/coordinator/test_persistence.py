"""The durable log and recovery: what is acknowledged survives, nothing corrupt is loaded."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from staticfleet.coordinator import ErrorCode, GroupCoordinator, GroupState, ManualClock
from staticfleet.coordinator.integrity import LogCorruptError
from staticfleet.coordinator.log import DurableLog
from staticfleet.coordinator.logformat import encode_frame
from staticfleet.coordinator.records import (
    GroupConfigRecord,
    GroupMetadataRecord,
    GroupTombstone,
    MemberRecord,
    OffsetCommitRecord,
    OffsetTombstone,
    Record,
    decode_records,
    encode_record,
)

from .harness import Harness

E = ErrorCode

SAMPLE: list[Record] = [
    GroupMetadataRecord(
        "g",
        "consumer",
        3,
        "range",
        "a-1",
        1234,
        (
            MemberRecord("a-1", "a", "client", "/10.0.0.1", 30000, 10000, b"sub", b"asg"),
            MemberRecord("dyn-2", None, "client", "/10.0.0.2", 30000, 10000, b"", b""),
        ),
    ),
    GroupMetadataRecord("empty", "", 0, None, None, -1, ()),
    OffsetCommitRecord("g", "topic", 7, 123456789, 5, "meta", 99, -1),
    OffsetCommitRecord("g", "tópico", 0, 0, -1, None, 1, 2),
    OffsetTombstone("g", "topic", 7),
    GroupTombstone("empty"),
    GroupConfigRecord("g", (("staticfleet.expected.instance.ids", "a,b"),)),
    GroupConfigRecord("g", ()),
]


def test_every_record_kind_round_trips_through_the_encoding() -> None:
    payload = b"".join(encode_record(r) for r in SAMPLE)
    assert list(decode_records(payload, len(SAMPLE))) == SAMPLE


def _reopen(directory: Path) -> tuple[DurableLog, list[Record]]:
    log = DurableLog(directory, fsync=False)
    return log, list(log.recover())


def test_appended_records_are_recovered_in_order(tmp_path: Path) -> None:
    log, records = _reopen(tmp_path)
    assert records == []
    log.append(SAMPLE[:3])
    log.append(SAMPLE[3:])
    log.close()
    _, records = _reopen(tmp_path)
    assert records == SAMPLE


def test_a_torn_tail_is_cut_and_appending_continues_after_the_last_good_frame(tmp_path: Path) -> None:
    log, _ = _reopen(tmp_path)
    log.append(SAMPLE[:2])
    log.append(SAMPLE[2:4])
    log.close()
    path = next(tmp_path.glob("log-*.sfl"))
    data = path.read_bytes()
    path.write_bytes(data[:-5])  # the last frame lost its end
    log, records = _reopen(tmp_path)
    assert records == SAMPLE[:2]
    assert list(tmp_path.glob("*.corrupt-*")), "the damaged bytes are kept aside, not thrown away"
    log.append(SAMPLE[4:5])
    log.close()
    assert _reopen(tmp_path)[1] == SAMPLE[:2] + SAMPLE[4:5]


def test_a_corrupt_frame_with_an_intact_frame_after_it_stops_recovery(tmp_path: Path) -> None:
    log, _ = _reopen(tmp_path)
    log.append(SAMPLE[:2])
    log.append(SAMPLE[2:4])
    log.append(SAMPLE[4:6])
    log.close()
    path = next(tmp_path.glob("log-*.sfl"))
    data = bytearray(path.read_bytes())
    second_frame = len(b"SFLOG\x00\x01\n") + len(encode_frame(SAMPLE[:2]))
    data[second_frame + 20] ^= 0xFF  # flip a bit inside the second frame's payload
    path.write_bytes(bytes(data))
    with pytest.raises(LogCorruptError, match=f"checksum mismatch in the frame at byte {second_frame}"):
        _reopen(tmp_path)


def test_corruption_in_an_older_log_file_stops_recovery(tmp_path: Path) -> None:
    log, _ = _reopen(tmp_path)
    log.append(SAMPLE[:2])
    log.close()
    first = next(tmp_path.glob("log-*.sfl"))
    (tmp_path / "log-00000000000000000001.sfl").write_bytes(b"SFLOG\x00\x01\n" + encode_frame(SAMPLE[2:3]))
    first.write_bytes(first.read_bytes()[:-3])
    with pytest.raises(LogCorruptError, match=r"1 intact frame \(\d+ bytes\) follows it"):
        _reopen(tmp_path)


def test_snapshot_replaces_older_files_and_recovery_reads_snapshot_then_log(tmp_path: Path) -> None:
    log, _ = _reopen(tmp_path)
    log.append(SAMPLE[:4])
    log.snapshot(SAMPLE[:2])
    log.append(SAMPLE[6:7])
    log.close()
    assert [p.name[:4] for p in sorted(tmp_path.iterdir())] == ["log-", "snap"]
    assert _reopen(tmp_path)[1] == SAMPLE[:2] + SAMPLE[6:7]


def test_an_unfinished_snapshot_is_ignored(tmp_path: Path) -> None:
    log, _ = _reopen(tmp_path)
    log.append(SAMPLE[:3])
    log.close()
    (tmp_path / "snapshot-00000000000000000001.sfs.tmp").write_bytes(b"half")
    assert _reopen(tmp_path)[1] == SAMPLE[:3]
    assert not list(tmp_path.glob("*.tmp"))


def test_a_damaged_snapshot_is_refused(tmp_path: Path) -> None:
    log, _ = _reopen(tmp_path)
    log.append(SAMPLE[:3])
    log.snapshot(SAMPLE[:3])
    log.close()
    snap = next(tmp_path.glob("snapshot-*.sfs"))
    snap.write_bytes(snap.read_bytes()[:-1])
    with pytest.raises(LogCorruptError, match="a snapshot is complete before it is renamed"):
        _reopen(tmp_path)


def test_append_failure_surfaces_as_a_store_error(tmp_path: Path) -> None:
    from staticfleet.coordinator import StoreError

    log, _ = _reopen(tmp_path)
    assert log._fd is not None
    os.close(log._fd)
    log._fd = os.open(os.devnull, os.O_RDONLY)
    with pytest.raises(StoreError):
        log.append(SAMPLE[:1])


# --- coordinator recovery ----------------------------------------------------------------------------


def _restart(h: Harness) -> Harness:
    """A new coordinator over the same records, at the same time."""
    restarted = Harness(config=h.config, clock=h.clock)
    restarted.coordinator.load(h.store.records)
    restarted.store.batches = [list(h.store.records)]
    return restarted


def test_recovery_reloads_groups_as_stable_with_the_same_generation_and_assignments() -> None:
    h = Harness()
    ids = h.stable_static_group("a", "b")
    replaced = h.join("", "b").get().member_id  # the replacement must survive the restart
    h.commit(ids["a"], 1, "a", offsets={("t", 0): 42})
    r = _restart(h)
    assert r.state() is GroupState.STABLE and r.generation() == 1
    assert r.heartbeat(replaced, 1, "b") == E.none, "the new id was persisted before it was answered"
    assert r.heartbeat(ids["b"], 1, "b") == E.fenced_instance_id
    assert r.sync(ids["a"], 1, "a").get().assignment == b"assignment-a"
    d = r.describe()
    assert {m.group_instance_id for m in d.members} == {"a", "b"}
    offsets = r.coordinator.offsets.get("g", "t", 0)
    assert offsets is not None and offsets.offset == 42


def test_members_that_stop_heartbeating_after_recovery_are_expired_after_their_session() -> None:
    h = Harness()
    ids = h.stable_static_group("a", "b", session=10_000)
    r = _restart(h)
    for _ in range(4):
        r.advance(3_000)
        assert r.heartbeat(ids["a"], 1, "a") in (E.none, E.rebalance_in_progress)
    assert ids["b"] not in r.coordinator.groups["g"].members
    assert ids["a"] in r.coordinator.groups["g"].members


def test_an_in_flight_rebalance_is_lost_on_recovery_and_members_rejoin() -> None:
    h = Harness()
    ids = h.stable_static_group("a", "b")
    h.join(ids["a"], "a")
    assert h.state() is GroupState.PREPARING_REBALANCE
    r = _restart(h)
    assert r.state() is GroupState.STABLE and r.generation() == 1
    assert r.heartbeat(ids["b"], 1, "b") == E.none


def test_a_reloaded_member_knows_only_the_selected_protocol() -> None:
    h = Harness()
    ids = h.stable_static_group("a", "b")
    r = _restart(h)
    member = r.coordinator.groups["g"].members[ids["b"]]
    assert [p.name for p in member.protocols] == ["range"]
    r.join(ids["b"], "b")  # a known-id rejoin with its full list no longer matches: rebalance
    assert r.state() is GroupState.PREPARING_REBALANCE


def test_a_reloaded_group_over_capacity_rebalances() -> None:
    from staticfleet.coordinator import CoordinatorConfig

    h = Harness()
    h.stable_static_group("a", "b", "c")
    r = Harness(config=CoordinatorConfig(initial_rebalance_delay_ms=0, min_session_timeout_ms=10, max_size=2))
    r.coordinator.load(h.store.records)
    assert r.state() is GroupState.PREPARING_REBALANCE
    assert r.events.of_type("rebalance_started")[0]["reason"] == "over-capacity"


def test_snapshot_of_live_state_rebuilds_the_same_coordinator_as_the_full_log() -> None:
    h = Harness()
    ids = h.stable_static_group("a", "b")
    h.stable_static_group("x", group="other")
    h.commit(ids["a"], 1, "a", offsets={("t", 0): 1, ("t", 1): 2})
    h.commit("", -1, group="simple", offsets={("u", 0): 9})
    h.coordinator.alter_group_config("g", {"staticfleet.expected.instance.ids": "a,b"})
    h.join(ids["a"], "a")  # in flight: not part of the durable image
    full = GroupCoordinator(ManualClock())
    full.load(h.store.records)
    compact = GroupCoordinator(ManualClock())
    compact.load(list(h.coordinator.snapshot_records()))
    assert _durable_view(full) == _durable_view(compact)
    assert len(list(h.coordinator.snapshot_records())) < len(h.store.records)


def _durable_view(c: GroupCoordinator) -> object:
    groups = {
        gid: (
            g.state,
            g.generation_id,
            g.protocol_type,
            g.protocol_name,
            g.leader_id,
            tuple((m.member_id, m.group_instance_id, m.protocols, m.assignment) for m in g.members.values()),
        )
        for gid, g in c.groups.items()
    }
    offsets = sorted((r.group_id, r.topic, r.partition, r.offset) for r in c.offsets.all())
    return groups, offsets, c.group_configs


def test_a_crash_at_any_byte_of_the_last_frames_loses_only_the_unfinished_frame(tmp_path: Path) -> None:
    reference = tmp_path / "reference"
    log, _ = _reopen(reference)
    for i in range(0, len(SAMPLE), 2):
        log.append(SAMPLE[i : i + 2])
    log.close()
    full = next(reference.glob("log-*.sfl")).read_bytes()
    frame_ends = []
    pos = len(b"SFLOG\x00\x01\n")
    for i in range(0, len(SAMPLE), 2):
        pos += len(encode_frame(SAMPLE[i : i + 2]))
        frame_ends.append(pos)
    start = frame_ends[-3]
    for cut in range(start, len(full) + 1):
        case = tmp_path / f"cut-{cut}"
        case.mkdir()
        (case / "log-00000000000000000000.sfl").write_bytes(full[:cut])
        complete_frames = sum(1 for end in frame_ends if end <= cut)
        _, records = _reopen(case)
        assert records == SAMPLE[: 2 * complete_frames], f"cut at byte {cut}"
