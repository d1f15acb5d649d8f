"""Every operation is settled even when something unexpected raises: while it decides, or while its
records are encoded or appended, it is undone as for a failed append, answered UNKNOWN_SERVER_ERROR
(Kafka's answer to an operation that hit an unexpected exception), and logged once with its traceback."""

from __future__ import annotations

import logging
from collections.abc import Sequence

import pytest
from kio.schema.errors import ErrorCode as E

from staticfleet.coordinator import GroupCoordinator, GroupState, ManualClock
from staticfleet.coordinator.errors import CoordinatorError, ErrorCode
from staticfleet.coordinator.log import MemoryStore
from staticfleet.coordinator.membership import Membership
from staticfleet.coordinator.records import GroupMetadataRecord, GroupTombstone, OffsetCommitRecord, Record
from staticfleet.coordinator.runtime import MAX_SETTLE_ROUNDS, CoordinatorRuntime, FailureLog

from .harness import RANGE_RR, Harness


class PoisonedStore(MemoryStore):
    """Appends raise a non-storage error for the records of one group, as an encoder that cannot write
    them would; every other group's records are kept."""

    def __init__(self, group: str) -> None:
        super().__init__()
        self.poisoned = group

    def append(self, records: Sequence[Record]) -> None:
        for record in records:
            kind = GroupMetadataRecord | OffsetCommitRecord
            if isinstance(record, kind) and record.group_id == self.poisoned:
                raise ValueError(f"cannot encode a record of {record.group_id}")
        super().append(records)


def _harness(poisoned: str = "poisoned") -> Harness:
    return Harness(store=PoisonedStore(poisoned))


def test_an_exception_while_appending_a_static_replacement_undoes_it() -> None:
    h = _harness("g")
    store = h.store
    assert isinstance(store, PoisonedStore)
    store.poisoned = "nobody"
    ids = h.stable_static_group("a", "b")
    store.poisoned = "g"
    resp = h.join("", "b", protocols=(RANGE_RR[0],)).get()
    assert (resp.error, resp.member_id, resp.generation_id, resp.leader) == (
        E.unknown_server_error,
        "",
        1,
        ids["a"],
    )
    group = h.group()
    assert group.static_members["b"] == ids["b"] and group.members[ids["b"]].protocols == RANGE_RR
    assert h.heartbeat(ids["b"], 1, "b") == E.none
    assert h.state() is GroupState.STABLE
    assert h.coordinator.runtime.unexpected_errors == 1


def test_an_exception_while_appending_offsets_fails_every_partition_and_commits_nothing() -> None:
    h = _harness()
    offsets = {("t", 0): 5, ("t", 1): 6}
    response = h.commit("", -1, group="poisoned", offsets=offsets)
    assert [p.error for t in response.topics for p in t.partitions] == [E.unknown_server_error] * 2
    assert "poisoned" not in h.coordinator.groups
    assert h.commit("", -1, group="healthy", offsets=offsets).topics[0].partitions[0].error == E.none
    assert {r.group_id for r in h.coordinator.offsets.all()} == {"healthy"}


def test_an_exception_while_deciding_answers_unknown_server_error_and_takes_a_new_group_back_out(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    h = Harness()

    def broken(*args: object) -> None:
        raise RuntimeError("a bug while deciding")

    monkeypatch.setattr(Membership, "_join_new_member", broken)
    resp = h.join("", "a", group="new").get()
    assert (resp.error, resp.member_id) == (E.unknown_server_error, "")
    assert "new" not in h.coordinator.groups, "the group this join created is taken back out"
    monkeypatch.undo()
    joined = h.join("", "a", group="new")
    h.tick()
    assert joined.get().error == E.none


def test_an_exception_while_deciding_leaves_a_stable_group_as_it_was(monkeypatch: pytest.MonkeyPatch) -> None:
    h = Harness()
    ids = h.stable_static_group("a", "b")

    def broken(*args: object) -> None:
        raise RuntimeError("a bug while deciding")

    monkeypatch.setattr(Membership, "_update_member_and_rebalance", broken)
    resp = h.join(ids["a"], "a").get()  # the leader rejoins: a rebalance would start
    assert resp.error == E.unknown_server_error
    assert h.state() is GroupState.STABLE and h.generation() == 1
    assert h.heartbeat(ids["a"], 1, "a") == h.heartbeat(ids["b"], 1, "b") == E.none


def test_a_sync_that_raises_is_answered_once(monkeypatch: pytest.MonkeyPatch) -> None:
    h = Harness()
    replies = [h.join("", i) for i in ("a", "b")]
    h.tick()
    a, b = (r.get().member_id for r in replies)

    def broken(*args: object) -> None:
        raise RuntimeError("a bug while storing the assignment")

    monkeypatch.setattr(Membership, "_store_assignment", broken)
    leader = h.sync(a, 1, "a", assignments={a: b"A", b: b"B"})
    assert [r.error for r in leader.values] == [E.unknown_server_error]


def test_a_request_level_error_still_reaches_the_caller() -> None:
    h = Harness()
    with pytest.raises(CoordinatorError) as raised:
        h.coordinator.alter_group_config("g", {"no.such.config": "x"})
    assert raised.value.code == E.invalid_config


def test_a_group_config_change_that_raises_is_unknown_server_error(monkeypatch: pytest.MonkeyPatch) -> None:
    h = _harness("g")

    def broken(records: Sequence[Record]) -> None:
        raise ValueError("cannot encode")

    monkeypatch.setattr(h.store, "append", broken)
    with pytest.raises(CoordinatorError) as raised:
        h.coordinator.alter_group_config("g", {"staticfleet.expected.instance.ids": "a,b"})
    assert raised.value.code == E.unknown_server_error
    assert h.coordinator.describe_group_config("g") == {}


def test_a_timer_that_raises_is_settled_and_the_other_timers_still_fire(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    h = Harness()
    ids = h.stable_static_group("a", group="one")
    h.stable_static_group("b", group="two")

    def broken(self: Membership, group_id: str, member_id: str) -> None:
        if group_id == "one":
            raise RuntimeError("a bug in a timer")
        original(self, group_id, member_id)

    original = Membership._expire_heartbeat
    monkeypatch.setattr(Membership, "_expire_heartbeat", broken)
    h.advance(10_001)  # both sessions expire
    assert h.state("two") is GroupState.EMPTY, "the other group's timer fired"
    assert h.group("one").members.keys() == {ids["a"]}
    assert h.coordinator.runtime.unexpected_errors == 1


def test_a_failure_is_logged_with_its_traceback_once_and_repeats_are_counted(
    caplog: pytest.LogCaptureFixture,
) -> None:
    h = _harness()
    caplog.set_level(logging.ERROR, logger="staticfleet.coordinator.runtime")
    for _ in range(5):
        h.commit("", -1, group="poisoned")
    logged = [r for r in caplog.records if r.name == "staticfleet.coordinator.runtime"]
    assert len(logged) == 1
    assert logged[0].exc_info is not None and "cannot encode a record of poisoned" in logged[0].getMessage()
    assert "OffsetCommit" in logged[0].getMessage()
    assert h.coordinator.runtime.unexpected_errors == 5


def test_repeats_of_a_logged_failure_are_summed_up_once_per_interval(
    caplog: pytest.LogCaptureFixture,
) -> None:
    now = [0.0]
    failures = FailureLog(interval_s=60.0, now=lambda: now[0])
    caplog.set_level(logging.ERROR, logger="staticfleet.coordinator.runtime")

    def fail() -> None:
        try:
            raise ValueError("same place")
        except ValueError as exc:
            failures.report("OffsetCommit", exc, "failed")

    for second in (0, 1, 2, 30, 61, 62, 121):
        now[0] = float(second)
        fail()
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 3, messages
    assert "4 more times" in messages[1] and "2 more times" in messages[2]
    assert caplog.records[0].exc_info is not None and caplog.records[1].exc_info is None


def test_undo_that_fails_again_and_again_is_cut_off(caplog: pytest.LogCaptureFixture) -> None:
    coordinator = GroupCoordinator(ManualClock())
    recorder = coordinator.state.recorder

    def write_again(error: ErrorCode, message: str) -> None:
        recorder.write([GroupTombstone("g")], None, write_again)

    class Broken:
        appends = 0

        def append(self, records: Sequence[Record]) -> None:
            self.appends += 1
            raise ValueError("cannot encode")

    store = Broken()
    result = recorder.run(lambda: write_again(E.none, ""), "an operation that loops", lambda error: None)
    settled = CoordinatorRuntime(coordinator, store).run(result)
    assert settled.settled and store.appends == MAX_SETTLE_ROUNDS
    assert any("dropped" in r.getMessage() for r in caplog.records)
