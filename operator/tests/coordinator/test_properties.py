"""Random interleavings of static and dynamic members against the state machine, checking invariants.

- at most one member per instance id, and the instance map agrees with the members;
- a group's generation never decreases while the coordinator runs;
- a member id that was fenced never gets NONE again;
- replaying the log written so far rebuilds the durable state the coordinator had when it wrote it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from hypothesis import HealthCheck, event, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from staticfleet.coordinator import ErrorCode, GroupCoordinator, GroupState
from staticfleet.coordinator.group import ClassicGroup
from staticfleet.coordinator.messages import JoinGroupResponse, Protocol, SyncGroupResponse

from .harness import Harness, Reply

E = ErrorCode
GROUP = "g"
INSTANCES: list[str | None] = ["i0", "i1", "i2", None]
PROTOCOL_SETS = [
    (Protocol("range", b"m"), Protocol("roundrobin", b"m")),
    (Protocol("range", b"m2"), Protocol("roundrobin", b"m")),
    (Protocol("roundrobin", b"m"),),
]


@dataclass
class Process:
    instance: str | None
    member_id: str = ""
    generation: int = -1
    join: Reply[JoinGroupResponse] | None = None
    sync: Reply[SyncGroupResponse] | None = None
    members: tuple[str, ...] = ()
    synced_generation: int = -1


def durable_view(group: ClassicGroup) -> tuple[Any, ...]:
    protocol = group.protocol_name
    return (
        group.state if group.state in (GroupState.EMPTY,) else GroupState.STABLE,
        group.generation_id,
        group.protocol_type,
        protocol,
        group.leader_id,
        tuple(
            sorted(
                (
                    m.member_id,
                    m.group_instance_id,
                    m.client_id,
                    m.session_timeout_ms,
                    m.rebalance_timeout_ms,
                    m.metadata(protocol) if protocol else b"",
                    m.assignment,
                )
                for m in group.members.values()
            )
        ),
    )


class CoordinatorMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.h = Harness()
        self.procs = [Process(instance) for instance in INSTANCES]
        self.fenced: set[str] = set()
        self.max_generation = 0
        self.settled_view: dict[str, tuple[Any, ...]] = {}

    # --- helpers -------------------------------------------------------------------------------

    def _note(self, proc: Process, member_id: str, error: int) -> None:
        # A member id is fenced for good once a restart of its instance replaced it.
        self.fenced.update(e["old_member_id"] for e in self.h.events.of_type("static_member_replaced"))
        group = self.h.coordinator.groups.get(GROUP)
        if group is not None:
            assert not self.fenced & set(group.members), "a fenced member id is a member again"
        if error == E.none:
            assert member_id not in self.fenced, f"fenced member id {member_id} was answered NONE"
        if error in (E.fenced_instance_id, E.unknown_member_id) and proc.member_id == member_id:
            proc.member_id, proc.generation = "", -1

    def _collect(self) -> None:
        for proc in self.procs:
            if proc.join is not None and proc.join.done:
                for resp in proc.join.values:
                    if resp.error == E.none:
                        proc.member_id, proc.generation = resp.member_id, resp.generation_id
                        proc.members = tuple(m.member_id for m in resp.members)
                    elif resp.error == E.member_id_required:
                        proc.member_id = resp.member_id
                    else:
                        self._note(proc, resp.member_id or proc.member_id, resp.error)
                proc.join = None
            if proc.sync is not None and proc.sync.done:
                for sresp in proc.sync.values:
                    self._note(proc, proc.member_id, sresp.error)
                    if sresp.error == E.none:
                        proc.synced_generation = proc.generation
                proc.sync = None

    # --- rules ---------------------------------------------------------------------------------

    def _client_step(self, i: int, version: int) -> None:
        """What a well-behaved client does next: join, then sync, then heartbeat (rejoining when told)."""
        proc = self.procs[i]
        if proc.join is not None or proc.sync is not None:
            self.h.advance(0)
            self._collect()
            return
        if not proc.member_id or proc.generation < 0:
            self.join(i, bool(proc.member_id), version, 0)
            return
        if proc.synced_generation != proc.generation:
            self.sync(i)
            return
        error = self.h.heartbeat(proc.member_id, proc.generation, proc.instance)
        self._note(proc, proc.member_id, error)
        if error in (E.rebalance_in_progress, E.illegal_generation):
            self.join(i, True, version, 0)

    @rule(i=st.integers(0, 3))
    def process_restart(self, i: int) -> None:
        """The client process restarts: it forgets its member id but keeps its instance id."""
        proc = self.procs[i]
        proc.member_id, proc.generation, proc.join, proc.sync = "", -1, None, None

    @rule(i=st.integers(0, 3), version=st.sampled_from([5, 9]))
    def client_step(self, i: int, version: int) -> None:
        self._client_step(i, version)

    @rule(i=st.integers(0, 3), version=st.sampled_from([5, 9]))
    def client_step_again(self, i: int, version: int) -> None:
        self._client_step(i, version)

    @rule(i=st.integers(0, 3), version=st.sampled_from([5, 9]))
    def client_step_once_more(self, i: int, version: int) -> None:
        self._client_step(i, version)

    @rule(
        i=st.integers(0, 3), known=st.booleans(), version=st.sampled_from([3, 5, 7, 9]), p=st.integers(0, 2)
    )
    def join(self, i: int, known: bool, version: int, p: int) -> None:
        proc = self.procs[i]
        if proc.join is not None:
            return
        instance = proc.instance if version >= 5 else None
        member_id = proc.member_id if known else ""
        proc.join = self.h.join(
            member_id, instance, version=version, protocols=PROTOCOL_SETS[p], session=10_000, rebalance=8_000
        )
        self._collect()

    @rule(i=st.integers(0, 3))
    def sync(self, i: int) -> None:
        proc = self.procs[i]
        if proc.sync is not None or not proc.member_id:
            return
        group = self.h.coordinator.groups.get(GROUP)
        assignments = None
        if group is not None and group.leader_id == proc.member_id:
            assignments = {m: f"{m}@{proc.generation}".encode() for m in proc.members}
        proc.sync = self.h.sync(
            proc.member_id,
            proc.generation,
            proc.instance,
            assignments=assignments,
            protocol_type=None,
            protocol_name=None,
            version=4,
        )
        self._collect()

    @rule(i=st.integers(0, 3), version=st.sampled_from([2, 4]))
    def heartbeat(self, i: int, version: int) -> None:
        proc = self.procs[i]
        if not proc.member_id:
            return
        member_id = proc.member_id
        error = self.h.heartbeat(
            member_id, proc.generation, proc.instance if version >= 3 else None, version=version
        )
        self._note(proc, member_id, error)

    @rule(i=st.integers(0, 3))
    def commit(self, i: int) -> None:
        proc = self.procs[i]
        member_id = proc.member_id
        resp = self.h.commit(
            member_id, proc.generation if member_id else -1, proc.instance if member_id else None
        )
        self._note(proc, member_id, resp.topics[0].partitions[0].error)

    @rule(i=st.integers(0, 3))
    def leave(self, i: int) -> None:
        proc = self.procs[i]
        if not proc.member_id:
            return
        member_id = proc.member_id
        resp = self.h.leave((member_id, proc.instance))
        self._note(proc, member_id, resp.members[0].error if resp.members else resp.error)
        proc.member_id, proc.generation = "", -1
        self._collect()

    @rule(i=st.integers(0, 2))
    def remove_by_instance_id(self, i: int) -> None:
        self.h.leave(("", self.procs[i].instance))
        self._collect()

    @precondition(lambda self: bool(self.fenced))
    @rule(data=st.data())
    def zombie_heartbeat(self, data: st.DataObject) -> None:
        member_id = data.draw(st.sampled_from(sorted(self.fenced)))
        for instance in ("i0", "i1", "i2", None):
            assert self.h.heartbeat(member_id, self.max_generation, instance) != E.none
            assert (
                self.h.commit(member_id, self.max_generation, instance).topics[0].partitions[0].error
                != E.none
            )

    @rule(ms=st.sampled_from([0, 1, 500, 2_000, 3_000, 8_000, 12_000]))
    def advance(self, ms: int) -> None:
        self.h.advance(ms)
        self._collect()

    @rule()
    def restart(self) -> None:
        """A new coordinator loaded from the log, as after a crash. Parked requests are lost."""
        old = self.h
        self.h = Harness(config=old.config, clock=old.clock, counter=old.counter)
        self.h.store.batches = [list(old.store.records)]
        self.h.coordinator.load(old.store.records)
        for proc in self.procs:
            proc.join = proc.sync = None
        group = self.h.coordinator.groups.get(GROUP)
        self.max_generation = group.generation_id if group else 0
        # A replacement during a rebalance is not written down (as in Kafka), so a restart can bring
        # the replaced id back; only replacements that reached the log stay fenced.
        if group is not None:
            self.fenced -= set(group.members)

    # --- invariants ----------------------------------------------------------------------------

    @invariant()
    def one_member_per_instance_id(self) -> None:
        for group in self.h.coordinator.groups.values():
            static = {m.group_instance_id: m.member_id for m in group.members.values() if m.is_static}
            assert len(static) == sum(1 for m in group.members.values() if m.is_static)
            assert static == group.static_members

    @invariant()
    def generation_never_decreases(self) -> None:
        group = self.h.coordinator.groups.get(GROUP)
        if group is not None:
            assert group.generation_id >= self.max_generation
            self.max_generation = group.generation_id

    @invariant()
    def replaying_the_log_rebuilds_the_durable_state(self) -> None:
        group = self.h.coordinator.groups.get(GROUP)
        event(f"state {group.state if group else None}")
        event(f"replacements {min(len(self.h.events.of_type('static_member_replaced')), 3)}")
        replayed = GroupCoordinator(self.h.clock)
        for record in self.h.store.records:
            replayed.replay(record)
        live = self.h.coordinator
        for group_id, group in live.groups.items():
            if group.state in (GroupState.STABLE, GroupState.EMPTY) and (
                group.last_persisted is not None or group.protocol_type is None
            ):
                self.settled_view[group_id] = durable_view(group)
            expected = self.settled_view.get(group_id)
            if expected is not None:
                assert group_id in replayed.groups
                assert durable_view(replayed.groups[group_id]) == expected
        assert set(replayed.groups) >= {g for g in live.groups if g in self.settled_view}
        live_offsets = sorted((r.group_id, r.topic, r.partition, r.offset) for r in live.offsets.all())
        replayed_offsets = sorted(
            (r.group_id, r.topic, r.partition, r.offset) for r in replayed.offsets.all()
        )
        assert live_offsets == replayed_offsets


CoordinatorMachine.TestCase.settings = settings(
    max_examples=200,
    stateful_step_count=50,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
TestCoordinatorProperties = CoordinatorMachine.TestCase
