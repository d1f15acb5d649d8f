"""Kafka 4's consumer group protocol (KIP-848) on the coordinator state machine, in virtual time.

The wire behaviour is compared with Apache Kafka by the conformance scenarios
(conformance/scenarios/consumer_group.py); these tests pin the rules and the durability around them:
what is written, what a restart brings back, what an append that fails leaves behind.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

import pytest

from staticfleet.coordinator import ErrorCode, GroupCoordinator, InProcessCoordinator, ManualClock
from staticfleet.coordinator.config import CoordinatorConfig
from staticfleet.coordinator.consumer_group import GroupState, MemberState
from staticfleet.coordinator.consumer_heartbeat import (
    ConsumerHeartbeatRequest,
    ConsumerHeartbeatResponse,
    DescribedConsumerGroup,
)
from staticfleet.coordinator.errors import StoreError
from staticfleet.coordinator.events import ListSink
from staticfleet.coordinator.log import MemoryStore
from staticfleet.coordinator.messages import (
    JoinGroupRequest,
    JoinGroupResponse,
    LeaveGroupRequest,
    MemberIdentity,
    OffsetCommitPartition,
    OffsetCommitRequest,
    OffsetCommitResponse,
    OffsetCommitTopic,
    OffsetFetchRequest,
    Protocol,
    RequestContext,
)
from staticfleet.coordinator.records import ConsumerGroupRecord, decode_records, encode_record

E = ErrorCode
T1 = uuid.UUID(int=1)
T2 = uuid.UUID(int=2)


@dataclass
class Topics:
    """A topic catalog: name -> (id, partitions)."""

    by_name: dict[str, tuple[uuid.UUID, int]] = field(default_factory=lambda: {"t1": (T1, 4)})

    def topic_id(self, name: str) -> uuid.UUID | None:
        found = self.by_name.get(name)
        return None if found is None else found[0]

    def topic_name(self, topic_id: uuid.UUID) -> str | None:
        return next((n for n, (i, _) in self.by_name.items() if i == topic_id), None)

    def partition_count(self, topic_id: uuid.UUID) -> int:
        return next((p for i, p in self.by_name.values() if i == topic_id), -1)

    def topic_names(self) -> list[str]:
        return sorted(self.by_name)


@dataclass
class Cluster:
    config: CoordinatorConfig = field(
        default_factory=lambda: CoordinatorConfig(
            consumer_session_timeout_ms=3_000,
            consumer_heartbeat_interval_ms=1_000,
            consumer_assignment_interval_ms=0,
        )
    )
    clock: ManualClock = field(default_factory=ManualClock)
    store: MemoryStore = field(default_factory=MemoryStore)
    topics: Topics = field(default_factory=Topics)
    events: ListSink = field(default_factory=ListSink)

    def __post_init__(self) -> None:
        self.coordinator = self._start()

    def _start(self) -> InProcessCoordinator:
        machine = GroupCoordinator(self.clock, self.config, self.events)
        machine.state.topics = self.topics
        return InProcessCoordinator(machine, self.store)

    def restart(self) -> None:
        """A new coordinator that loads what the old one made durable."""
        self.coordinator = self._start()
        self.coordinator.load(self.store.records)

    def heartbeat(
        self,
        member: str,
        epoch: int,
        *,
        owned: dict[uuid.UUID, tuple[int, ...]] | None = None,
        topics: tuple[str, ...] | None = None,
        regex: str | None = None,
        instance: str | None = None,
        assignor: str | None = None,
        rebalance_timeout_ms: int = -1,
        group: str = "g",
    ) -> ConsumerHeartbeatResponse:
        if epoch == 0:
            owned = {} if owned is None else owned
            rebalance_timeout_ms = 5_000 if rebalance_timeout_ms == -1 else rebalance_timeout_ms
            if topics is None and regex is None:
                topics = ("t1",)
        request = ConsumerHeartbeatRequest(
            group_id=group,
            member_id=member,
            member_epoch=epoch,
            instance_id=instance,
            rebalance_timeout_ms=rebalance_timeout_ms,
            subscribed_topic_names=topics,
            subscribed_topic_regex=regex,
            server_assignor=assignor,
            owned=owned,
        )
        response: ConsumerHeartbeatResponse = self.coordinator.consumer_group_heartbeat(
            RequestContext(1, client_id=member), request
        )
        return response

    def join(self, member: str, **kwargs: object) -> ConsumerHeartbeatResponse:
        return self.heartbeat(member, 0, **kwargs)  # type: ignore[arg-type]

    def describe(self, group: str = "g") -> DescribedConsumerGroup:
        described: list[DescribedConsumerGroup] = self.coordinator.describe_consumer_groups([group])
        return described[0]

    def advance(self, ms: int) -> None:
        target = self.clock.now_ms() + ms
        while (deadline := self.coordinator.next_deadline()) is not None and deadline <= target:
            self.clock.set(max(deadline, self.clock.now_ms()))
            self.coordinator.fire_due_timers()
        self.clock.set(target)
        self.coordinator.fire_due_timers()


def partitions(response: ConsumerHeartbeatResponse, topic: uuid.UUID = T1) -> tuple[int, ...]:
    assert response.assignment is not None, response
    return response.assignment.get(topic, ())


def test_the_first_member_gets_every_partition_at_the_new_groups_second_epoch() -> None:
    c = Cluster()
    a = c.join("a")
    assert (a.error, a.member_epoch, partitions(a)) == (E.none, 2, (0, 1, 2, 3))
    assert a.heartbeat_interval_ms == 1_000
    described = c.describe()
    assert (described.state, described.group_epoch, described.assignment_epoch) == ("Stable", 2, 2)
    # A heartbeat that changes nothing writes nothing and carries no assignment.
    written = len(c.store.records)
    again = c.heartbeat("a", 2)
    assert (again.member_epoch, again.assignment) == (2, None)
    assert len(c.store.records) == written


def test_a_partition_moves_only_after_its_owner_says_it_let_it_go() -> None:
    c = Cluster()
    c.join("a")
    b = c.join("b")
    # B is in the new epoch, but its partitions are still A's: it waits for them.
    assert (b.member_epoch, partitions(b)) == (3, ())
    a = c.heartbeat("a", 2, owned={T1: (0, 1, 2, 3)})
    assert (a.member_epoch, partitions(a)) == (2, (0, 1))
    assert c.describe().state == "Reconciling"
    # Still owning what it must give up: nothing moves.
    assert c.heartbeat("b", 3, owned={}).assignment is None
    released = c.heartbeat("a", 2, owned={T1: (0, 1)})
    assert released.member_epoch == 3
    b = c.heartbeat("b", 3, owned={})
    assert partitions(b) == (2, 3)
    assert c.describe().state == "Stable"


def test_a_stale_or_future_epoch_is_fenced_but_the_previous_one_with_a_subset_is_accepted() -> None:
    c = Cluster()
    c.join("a")
    c.join("b")
    c.heartbeat("a", 2, owned={T1: (0, 1, 2, 3)})
    c.heartbeat("a", 2, owned={T1: (0, 1)})  # now at epoch 3, previous epoch 2
    future = c.heartbeat("a", 9, owned={T1: (0, 1)})
    assert future.error == E.fenced_member_epoch
    assert "greater member epoch (9)" in (future.message or "")
    assert c.heartbeat("a", 2, owned={T1: (0, 1)}).error == E.none
    assert c.heartbeat("a", 2, owned={T1: (0, 1, 2)}).error == E.fenced_member_epoch


def test_a_static_member_that_leaves_for_a_restart_gets_its_partitions_back_and_nobody_moves() -> None:
    c = Cluster()
    c.join("a-1", instance="a")
    c.join("b-1", instance="b")
    c.heartbeat("a-1", 2, owned={T1: (0, 1, 2, 3)})
    c.heartbeat("a-1", 2, owned={T1: (0, 1)})
    c.heartbeat("b-1", 3, owned={})
    before = c.describe()
    left = c.heartbeat("a-1", -2, instance="a")
    assert (left.error, left.member_epoch) == (E.none, -2)
    assert c.describe().group_epoch == before.group_epoch
    # The same instance under a new member id while a-1 has not left would be refused.
    assert c.join("a-x", instance="b").error == E.unreleased_instance_id
    back = c.join("a-2", instance="a")
    assert (back.error, back.member_epoch, partitions(back)) == (E.none, 3, (0, 1))
    after = c.describe()
    assert after.group_epoch == before.group_epoch
    assert [m.member_id for m in after.members] == ["b-1", "a-2"]
    fenced = c.heartbeat("a-1", 3, instance="a")
    assert fenced.error == E.fenced_instance_id


def test_a_member_silent_for_its_session_is_fenced_and_its_partitions_move() -> None:
    c = Cluster()
    c.join("a")
    c.join("b")
    c.heartbeat("a", 2, owned={T1: (0, 1, 2, 3)})
    c.heartbeat("a", 2, owned={T1: (0, 1)})
    answers = []
    for _ in range(4):  # B says nothing for longer than its session; A keeps heartbeating
        c.advance(1_000)
        answers.append(c.heartbeat("a", 3, owned={T1: (0, 1)}))
    assert c.heartbeat("b", 3).error == E.unknown_member_id
    # B's session ends 3 s after its last heartbeat: A's heartbeat then gets B's partitions.
    assert [(a.member_epoch, a.assignment) for a in answers[:2]] == [(3, None)] * 2
    assert (answers[2].member_epoch, partitions(answers[2])) == (4, (0, 1, 2, 3))
    assert any(e["type"] == "member_expired" and e["member_id"] == "b" for e in c.events.events)


def test_a_member_that_does_not_revoke_within_its_rebalance_timeout_is_fenced() -> None:
    c = Cluster()
    c.join("a", rebalance_timeout_ms=1_000)
    c.join("b")
    c.heartbeat("a", 2, owned={T1: (0, 1, 2, 3)})
    member = c.coordinator.state.consumer_groups["g"].members["a"]
    assert member.state is MemberState.UNREVOKED_PARTITIONS
    c.advance(999)
    assert "a" in c.coordinator.state.consumer_groups["g"].members
    c.advance(2)
    assert c.heartbeat("a", 2, owned={T1: (0, 1, 2, 3)}).error == E.unknown_member_id
    assert partitions(c.heartbeat("b", 3, owned={})) == (0, 1, 2, 3)


def test_an_admin_leave_by_instance_id_removes_members_with_one_new_epoch() -> None:
    c = Cluster()
    for n in "abc":
        c.join(f"{n}-1", instance=n)
    epoch = c.describe().group_epoch
    request = LeaveGroupRequest(
        "g", (MemberIdentity("", "a"), MemberIdentity("", "b"), MemberIdentity("", "z"))
    )
    response = c.coordinator.leave_group(RequestContext(5), request)
    assert [m.error for m in response.members] == [E.none, E.none, E.unknown_member_id]
    described = c.describe()
    assert described.group_epoch == epoch + 1
    assert [m.member_id for m in described.members] == ["c-1"]


def test_a_restart_brings_back_the_group_and_its_members_sessions() -> None:
    c = Cluster()
    c.join("a", instance="i-a")
    c.join("b")
    c.heartbeat("a", 2, owned={T1: (0, 1, 2, 3)})
    before = c.describe()
    c.restart()
    assert c.describe() == before
    # Sessions start again on load: a member that never comes back is fenced a session later.
    c.advance(2_000)
    assert c.heartbeat("a", 2, owned={T1: (0, 1)}).error == E.none
    c.advance(2_000)
    c.heartbeat("a", 3, owned={T1: (0, 1)})
    assert [m.member_id for m in c.describe().members] == ["a"]


def test_the_group_record_round_trips_through_the_encoding() -> None:
    c = Cluster()
    c.join("a", instance="i", regex="t.*", topics=("t1",))
    c.join("b", assignor="range")
    group = c.coordinator.state.consumer_groups["g"]
    record = ConsumerGroupRecord(group)
    assert list(decode_records(encode_record(record), 1)) == [record]


def test_an_append_that_fails_changes_nothing_and_answers_as_kafka_maps_the_failure() -> None:
    c = Cluster()
    c.join("a")
    before = c.describe()
    c.store.fail_with = StoreError("disk full")
    b = c.join("b")
    assert b.error == E.not_coordinator
    c.store.fail_with = None
    assert c.describe() == before


def test_offset_commits_follow_the_member_epoch() -> None:
    c = Cluster()
    c.join("a")

    def commit(member: str, epoch: int, version: int = 9) -> ErrorCode:
        request = OffsetCommitRequest(
            "g", epoch, member, None, (OffsetCommitTopic("t1", (OffsetCommitPartition(0, 42, -1, ""),)),)
        )
        response: OffsetCommitResponse = c.coordinator.commit_offsets(RequestContext(version), request)
        return response.topics[0].partitions[0].error

    assert commit("a", 2) == E.none
    assert commit("a", 3) == E.stale_member_epoch
    assert commit("a", 2, version=8) == E.unsupported_version
    assert commit("ghost", 2) == E.unknown_member_id
    fetched = c.coordinator.fetch_offsets(RequestContext(8), OffsetFetchRequest("g", None))
    assert [(t.name, [p.offset for p in t.partitions]) for t in fetched.topics] == [("t1", [42])]


def test_a_regular_expression_is_resolved_in_an_operation_of_its_own_and_bumps_the_epoch() -> None:
    c = Cluster()
    c.topics.by_name["t2"] = (T2, 2)
    invalid = c.join("a", regex="[", topics=None)
    assert invalid.error == E.invalid_regular_expression
    assert invalid.message == "SubscribedTopicRegex `[` is not a valid regular expression: missing closing ]."
    a = c.join("a", regex="t2", topics=("t1",))
    assert (a.member_epoch, partitions(a, T1), partitions(a, T2)) == (2, (0, 1, 2, 3), ())
    c.advance(0)  # the resolution runs
    assert c.describe().group_epoch == 3
    a = c.heartbeat("a", 2)
    assert (a.member_epoch, partitions(a, T2)) == (3, (0, 1))


def test_a_classic_join_takes_an_empty_consumer_group_but_not_one_with_members() -> None:
    c = Cluster()
    c.join("a")
    replies: list[JoinGroupResponse] = []
    join = JoinGroupRequest("g", 10_000, 30_000, "", None, "consumer", (Protocol("range", b""),))
    c.coordinator.join_group(RequestContext(9), join, replies.append)
    assert replies[0].error == E.inconsistent_group_protocol
    c.heartbeat("a", -1)
    assert c.describe().state == str(GroupState.EMPTY)
    c.coordinator.join_group(RequestContext(9), join, replies.append)
    assert replies[1].error == E.member_id_required
    assert "g" not in c.coordinator.state.consumer_groups
    assert c.describe().error == E.group_id_not_found


@pytest.mark.parametrize("assignor", ["uniform", "range"])
def test_every_partition_has_one_owner_once_a_churning_group_settles(assignor: str) -> None:
    c = Cluster()
    c.topics.by_name["t2"] = (T2, 5)
    names = {"a": ("t1", "t2"), "b": ("t2",), "c": ("t1", "t2"), "d": ("t1",)}
    epochs = {m: c.join(m, topics=t, assignor=assignor).member_epoch for m, t in names.items()}
    c.heartbeat("b", -1)
    del epochs["b"]
    owned: dict[str, dict[uuid.UUID, tuple[int, ...]]] = {m: {} for m in epochs}
    for _ in range(6):  # members acknowledge what they hold until nothing changes
        for m in epochs:
            r = c.heartbeat(m, epochs[m], owned=owned[m])
            assert r.error == E.none, r
            epochs[m] = r.member_epoch
            if r.assignment is not None:
                owned[m] = {t: ps for t, ps in r.assignment.items() if ps}
    assert c.describe().state == "Stable"
    held = [(t, p) for m in owned.values() for t, ps in m.items() for p in ps]
    assert sorted(held) == sorted([(T1, p) for p in range(4)] + [(T2, p) for p in range(5)])


def test_an_empty_classic_group_becomes_a_consumer_group_at_its_first_member_and_keeps_its_offsets() -> None:
    c = Cluster()
    commit = OffsetCommitRequest(
        "g", -1, "", None, (OffsetCommitTopic("t1", (OffsetCommitPartition(0, 7, -1, ""),)),)
    )
    c.coordinator.commit_offsets(RequestContext(9), commit)  # a simple (empty, classic) group
    assert "g" in c.coordinator.state.groups
    a = c.join("a")
    assert (a.error, a.member_epoch) == (E.none, 2)
    assert "g" not in c.coordinator.state.groups and "g" in c.coordinator.state.consumer_groups
    fetched = c.coordinator.fetch_offsets(RequestContext(8), OffsetFetchRequest("g", None))
    assert [p.offset for t in fetched.topics for p in t.partitions] == [7]
    c.restart()
    assert "g" not in c.coordinator.state.groups and c.describe().members[0].member_id == "a"


def test_a_classic_group_with_members_is_not_upgraded() -> None:
    c = Cluster()
    replies: list[JoinGroupResponse] = []
    join = JoinGroupRequest("g", 10_000, 30_000, "", "x", "consumer", (Protocol("range", b""),))
    c.coordinator.join_group(RequestContext(9), join, replies.append)  # a static member: in at once
    refused = c.join("a")
    assert refused.error == E.group_id_not_found
    assert (
        refused.message
        == "Cannot upgrade classic group g to consumer group because online upgrade is disabled."
    )


def test_the_event_log_tells_a_consumer_protocol_rebalance_as_it_tells_a_classic_one() -> None:
    c = Cluster()
    c.join("a-1", instance="a")
    c.join("b-1", instance="b")
    c.heartbeat("a-1", 2, owned={T1: (0, 1, 2, 3)})
    c.heartbeat("a-1", 2, owned={T1: (0, 1)})
    c.heartbeat("b-1", 3, owned={})
    c.heartbeat("a-1", -2, instance="a")
    c.join("a-2", instance="a")
    lines = [e for e in c.events.events if e["group"] == "g"]
    kinds = [(e["type"], e.get("reason"), e["generation"]) for e in lines]
    assert kinds == [
        ("member_joined", None, 2),
        ("rebalance_started", "member-joined", 2),
        ("rebalance_completed", "member-joined", 2),
        ("member_joined", None, 3),
        ("rebalance_started", "member-joined", 3),
        ("rebalance_completed", "member-joined", 3),
        ("static_member_replaced", None, 3),
    ]
    completed = [e for e in lines if e["type"] == "rebalance_completed"][-1]
    assert completed["state"] == "Stable" and completed["protocol"] == "uniform"
    assert completed["members"] == [
        {"member_id": "a-1", "instance_id": "a", "assignment": {"t1": [0, 1]}},
        {"member_id": "b-1", "instance_id": "b", "assignment": {"t1": [2, 3]}},
    ]
    replaced = lines[-1]
    assert (replaced["old_member_id"], replaced["new_member_id"], replaced["rebalance"]) == (
        "a-1",
        "a-2",
        False,
    )
    # The target is computed in the heartbeat that raised the epoch: the members are reconciling at once.
    started = [e for e in lines if e["type"] == "rebalance_started"][-1]
    assert (started["from_state"], started["state"], started["group_state"]) == (
        "Stable",
        "CompletingRebalance",
        "Reconciling",
    )


def test_a_deleted_group_made_again_starts_its_own_rebalances_in_the_event_log() -> None:
    c = Cluster()
    c.join("a")
    c.join("b")  # a rebalance still open: b waits for a's partitions
    c.heartbeat("a", -1)
    c.heartbeat("b", -1)
    assert [r.error for r in c.coordinator.delete_groups(RequestContext(2), ["g"])] == [E.none]
    c.join("a")
    started = [e for e in c.events.events if e["type"] == "rebalance_started"]
    completed = [e for e in c.events.events if e["type"] == "rebalance_completed"]
    assert (started[-1]["generation"], completed[-1]["generation"]) == (2, 2)


def test_offsets_of_topics_no_member_subscribes_to_expire_and_an_empty_group_goes_with_its_last() -> None:
    c = Cluster(
        config=CoordinatorConfig(
            consumer_session_timeout_ms=3_000,
            consumer_heartbeat_interval_ms=1_000,
            consumer_assignment_interval_ms=0,
            offsets_retention_ms=60_000,
            offsets_retention_check_interval_ms=10_000,
        )
    )
    c.topics.by_name["t2"] = (T2, 2)
    c.coordinator.schedule_cleanup()
    c.join("a")
    commit = OffsetCommitRequest(
        "g",
        2,
        "a",
        None,
        tuple(OffsetCommitTopic(t, (OffsetCommitPartition(0, 5, -1, ""),)) for t in ("t1", "t2")),
    )
    c.coordinator.commit_offsets(RequestContext(9), commit)

    def committed() -> list[str]:
        fetched = c.coordinator.fetch_offsets(RequestContext(8), OffsetFetchRequest("g", None))
        return [t.name for t in fetched.topics if any(p.offset >= 0 for p in t.partitions)]

    for _ in range(60):  # the member stays, heartbeating, past the retention of its commits
        c.heartbeat("a", 2)
        c.advance(1_000)
    assert committed() == ["t1"], "t2 is subscribed to by nobody: its offsets expired; t1's are kept"
    assert c.describe().error == E.none
    c.heartbeat("a", -1)  # leaves: nothing is subscribed to any more
    c.advance(20_000)
    assert committed() == [] and c.describe().error == E.group_id_not_found
    c.restart()
    assert "g" not in c.coordinator.state.consumer_groups, "the expiry is durable"
