"""The consumer group protocol (KIP-848): ConsumerGroupHeartbeat, ConsumerGroupDescribe, and how the
classic APIs meet a consumer-protocol group.

From ConsumerGroupHeartbeat v1 the client names itself, so members here have fixed ids (`member-a`) and the
ids appear in the outcome as they are. Topic ids differ between coordinators by nature: assignments are
recorded as {topic name: sorted partitions}, and topic ids are left out of every answer.
"""

from __future__ import annotations

import asyncio
import functools
import uuid
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from typing import Any

from conformance import driver as d
from conformance.kafka_broker import GroupSettings
from conformance.scenario import (
    DEFAULT,
    UNSET,
    Outcome,
    ScenarioContext,
    SetUpRaced,
    Unset,
    expect,
    expect_all,
    scenario,
)

# The settings most scenarios share: a heartbeat interval unlike Kafka's default (answers show the
# configured one) and no assignment interval, so that every group epoch bump computes its target
# assignment at once (with Kafka's default of 1 s, assignments would depend on timing).
CONSUMER = GroupSettings(consumer_heartbeat_interval_ms=1000, consumer_assignment_interval_ms=0)
# Session expiry within a scenario: 2 s sessions, heartbeats every 500 ms.
SHORT_SESSION = replace(CONSUMER, consumer_heartbeat_interval_ms=500, consumer_session_timeout_ms=2000)
CONSUMER_MAX_2 = replace(CONSUMER, consumer_max_size=2)
RANGE_FIRST = replace(CONSUMER, consumer_assignors=("range", "uniform"))
ASSIGNMENT_INTERVAL = replace(CONSUMER, consumer_assignment_interval_ms=2000)
# Expired offsets looked for twice a second, so that offsets committed with a retention time expire within a
# scenario.
OFFSET_EXPIRY = replace(CONSUMER, offsets_retention_check_interval_ms=500)

REBALANCE_MS = 30_000
TOPIC_WAIT_S = 20.0
TIMEOUT_WAIT_S = 10.0


@dataclass
class Topics:
    """A scenario's topics: names in creation order and the coordinator's topic ids."""

    names: list[str]
    ids: dict[str, uuid.UUID]
    by_id: d.TopicNames

    def owned(self, partitions: Mapping[str, Sequence[int]]) -> d.TopicPartitionIds:
        return {self.ids[name]: ps for name, ps in partitions.items()}

    def add(self, found: d.TopicNames) -> None:
        """Topics created after the scenario's first ones."""
        self.by_id = {**self.by_id, **found}
        self.ids.update({name: topic_id for topic_id, name in found.items()})


async def topics(ctx: ScenarioContext, *partitions: int) -> Topics:
    """New topics with these partition counts, once the group coordinator can assign them.

    Metadata shows a topic before the group coordinator's view of the cluster has it, so a throwaway
    consumer group subscribes to the new topics until it is assigned every partition, then leaves.
    """
    conn = await ctx.observer()
    names = [ctx.new_topic() for _ in partitions]
    for name, count in zip(names, partitions, strict=True):
        await d.ensure_topic(conn, name, count)
    by_id = await d.topic_ids(conn, names)
    expected = {name: list(range(count)) for name, count in zip(names, partitions, strict=True)}
    probe_group = f"{ctx.group}-topic-probe"
    loop = asyncio.get_running_loop()
    deadline = loop.time() + TOPIC_WAIT_S
    n = 0
    while True:
        n += 1
        member = f"probe-{n}"
        raw = await conn.request(
            d.consumer_group_heartbeat(
                1,
                probe_group,
                member,
                0,
                rebalance_timeout_ms=REBALANCE_MS,
                subscribed_topic_names=names,
                topic_partitions={},
            )
        )
        answer = d.ConsumerHeartbeatResult.of(raw, by_id)
        if answer.ok:
            await conn.request(d.consumer_group_heartbeat(1, probe_group, member, -1))
        if answer.ok and answer.assignment == expected:
            break
        if loop.time() > deadline:
            raise TimeoutError(f"the group coordinator never assigned {expected} (last {answer})")
        await asyncio.sleep(0.05)
    return Topics(names, {name: topic_id for topic_id, name in by_id.items()}, by_id)


@dataclass
class Consumer:
    """A simulated consumer-protocol client: its connection, identity and what the coordinator told it.

    `assigned` is the last assignment the coordinator sent; `owned` is what the member reports it holds.
    A well-behaved member acknowledges an assignment by reporting it as owned on its next heartbeat.
    """

    conn: d.Connection
    group: str
    member_id: str
    topics: Topics
    instance_id: str | None = None
    rack_id: str | None = None
    epoch: int = 0
    assigned: dict[str, list[int]] = field(default_factory=dict)
    owned: dict[str, list[int]] = field(default_factory=dict)

    def send(
        self,
        *,
        version: int = 1,
        epoch: int | None = None,
        member_id: str | None = None,
        instance_id: str | Unset | None = UNSET,
        rack_id: str | None = None,
        rebalance_timeout_ms: int = -1,
        subscribe: Sequence[str] | None = None,
        regex: str | None = None,
        server_assignor: str | None = None,
        owned: Mapping[str, Sequence[int]] | Unset | None = UNSET,
    ) -> d.Pending[d.ConsumerHeartbeatResult]:
        """One ConsumerGroupHeartbeat with this member's identity (overridable); an answer without an error
        updates the member's epoch and, when it carries one, its assignment."""
        sent_owned = self.owned if isinstance(owned, Unset) else owned
        request = d.consumer_group_heartbeat(
            version,
            self.group,
            self.member_id if member_id is None else member_id,
            self.epoch if epoch is None else epoch,
            instance_id=self.instance_id if isinstance(instance_id, Unset) else instance_id,
            rack_id=rack_id,
            rebalance_timeout_ms=rebalance_timeout_ms,
            subscribed_topic_names=subscribe,
            subscribed_topic_regex=regex,
            server_assignor=server_assignor,
            topic_partitions=None if sent_owned is None else self.topics.owned(sent_owned),
        )

        def update(answer: d.ConsumerHeartbeatResult) -> d.ConsumerHeartbeatResult:
            if answer.ok:
                self.epoch = answer.member_epoch
                if answer.assignment is not None:
                    self.assigned = answer.assignment
            return answer

        names = self.topics.by_id
        return self.conn.send(request).then(lambda raw: d.ConsumerHeartbeatResult.of(raw, names)).then(update)

    async def join(
        self,
        subscribe: Sequence[str],
        *,
        version: int = 1,
        rebalance_timeout_ms: int = REBALANCE_MS,
        server_assignor: str | None = None,
    ) -> d.ConsumerHeartbeatResult:
        """Joins (epoch 0) with a full request: rebalance timeout, subscription, no owned partitions."""
        self.owned = {}
        return await self.send(
            version=version,
            epoch=0,
            rack_id=self.rack_id,
            rebalance_timeout_ms=rebalance_timeout_ms,
            subscribe=subscribe,
            server_assignor=server_assignor,
            owned={},
        ).result()

    async def beat(self) -> d.ConsumerHeartbeatResult:
        """A plain heartbeat: the member's epoch and what it owns, nothing else."""
        return await self.send().result()

    async def ack(self) -> d.ConsumerHeartbeatResult:
        """Reports the last assignment as owned (the member has revoked and taken what it was told)."""
        self.owned = {t: list(ps) for t, ps in self.assigned.items()}
        return await self.send().result()

    async def leave(self, epoch: int = -1) -> d.ConsumerHeartbeatResult:
        """Leaves (-1), or as a static member leaves for now (-2)."""
        return await self.send(epoch=epoch, owned=None).result()


async def consumer(
    ctx: ScenarioContext,
    name: str,
    tops: Topics,
    *,
    instance_id: str | None = None,
    group: str | None = None,
    member_id: str | None = None,
) -> Consumer:
    """A consumer on a connection of its own; client id `name`, member id `member-<name>` unless given."""
    conn = await ctx.connect(f"consumer-{name}", client_id=name)
    group_id = ctx.group if group is None else group
    return Consumer(conn, group_id, f"member-{name}" if member_id is None else member_id, tops, instance_id)


async def describe(
    ctx: ScenarioContext, label: str, tops: Topics, *groups: str, version: int = 1
) -> d.ConsumerGroupView:
    """Records ConsumerGroupDescribe of the scenario's group, or of `groups` (a list when several)."""
    targets = groups or (ctx.group,)
    raw = await (await ctx.observer()).request(d.consumer_group_describe(version, *targets))
    views = [d.ConsumerGroupView.of(raw, tops.by_id, i) for i in range(len(raw.groups))]
    if len(views) == 1:
        ctx.record(label, views[0])
    else:
        ctx.record(label, views)
    return views[0]


async def pair(ctx: ScenarioContext, tops: Topics, *, static: bool = False) -> tuple[Consumer, Consumer]:
    """A and B (instances A and B when static) joined in that order, every assignment acknowledged: the
    topic's partitions are split in halves, A the first, at group epoch 3. Records the group as it then
    stands."""
    a = await consumer(ctx, "a", tops, instance_id="A" if static else None)
    b = await consumer(ctx, "b", tops, instance_id="B" if static else None)
    await a.join(tops.names)
    await a.ack()
    await b.join(tops.names)
    await settle([a, b])
    await describe(ctx, "pair.describe", tops)
    return a, b


async def settle(members: Sequence[Consumer], rounds: int = 3) -> None:
    """Rounds of heartbeats, members in order, each acknowledging its last assignment."""
    for _ in range(rounds):
        for member in members:
            await member.ack()


async def beat_until(
    member: Consumer,
    done: Callable[[d.ConsumerHeartbeatResult], bool],
    *,
    timeout: float = TIMEOUT_WAIT_S,
    interval: float = 0.2,
) -> d.ConsumerHeartbeatResult:
    """Heartbeats, acknowledging what it is given, until an answer satisfies `done`; returns that answer."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        answer = await member.ack()
        if done(answer):
            return answer
        if loop.time() > deadline:
            raise TimeoutError(f"{member.member_id}: no such answer within {timeout:.0f}s (last {answer})")
        await asyncio.sleep(interval)


def listed(raw: Any, groups: Mapping[str, str]) -> dict[str, object]:
    """ListGroups' error and its entries for these groups, by label (a shared broker lists every group)."""
    found = {g.group_id: g for g in raw.groups}
    return {"error_code": raw.error_code, "groups": {label: found.get(gid) for label, gid in groups.items()}}


def _items(value: d.Json, what: str) -> list[dict[str, d.Json]]:
    assert isinstance(value, list), f"{what}: not a list"
    return [item for item in value if isinstance(item, dict)]


def described_member(outcome: Outcome, label: str, member_id: str) -> dict[str, d.Json]:
    """Oracle sanity: one member of a recorded ConsumerGroupDescribe."""
    group = outcome.get(label)
    assert isinstance(group, dict), f"{label}: not a described group"
    for member in _items(group.get("members"), f"{label}.members"):
        if member.get("member_id") == member_id:
            return member
    raise AssertionError(f"{label}: no member {member_id}")


def expect_member(label: str, member_id: str, **expected: d.Json) -> Callable[[Outcome], None]:
    def check(outcome: Outcome) -> None:
        member = described_member(outcome, label, member_id)
        for key, want in expected.items():
            got = member.get(key)
            assert got == want, f"{label}.{member_id}.{key} = {got!r}, expected {want!r}"

    return check


def assert_equal(got: object, want: object) -> None:
    assert got == want, f"{got!r}, expected {want!r}"


def partition_errors(outcome: Outcome, label: str) -> list[d.Json]:
    """Oracle sanity: the per-partition error codes of a recorded OffsetCommit answer."""
    answer = outcome.get(label)
    assert isinstance(answer, dict), f"{label}: not recorded"
    return [
        p.get("error_code")
        for t in _items(answer.get("topics"), label)
        for p in _items(t.get("partitions"), label)
    ]


def checks(*parts: Callable[[Outcome], None]) -> Callable[[Outcome], None]:
    def check(outcome: Outcome) -> None:
        for part in parts:
            part(outcome)

    return check


T = "<topic>"
T2 = "<topic2>"
T3 = "<topic3>"


# --------------------------------------------------------------------------------------------------
# Joining, reconciliation, leaving


@scenario(
    "A first member joins a new group with the broker's default settings: member epoch 2 (a new group "
    "starts at epoch 1), every partition at once, Kafka's 5 s heartbeat interval and the uniform assignor; "
    "later heartbeats carry no assignment unless they are full requests.",
    rule="GroupMetadataManager.consumerGroupHeartbeat (the assignment only on epoch 0, a full request or a "
    "change); ModernGroup (group epoch starts at 1); GroupCoordinatorConfig defaults",
    settings=DEFAULT,
    sanity=checks(
        expect_all(
            ("join.A", {"error_code": "NONE", "member_epoch": 2, "heartbeat_interval_ms": 5000}),
            ("join.A", {"assignment": {T: [0, 1, 2, 3]}}),
            ("heartbeat.A", {"assignment": None}),
            ("describe", {"group_state": "Stable", "group_epoch": 2, "assignor_name": "uniform"}),
        ),
        expect_member("describe", "member-a", member_type=1, client_id="a", subscribed_topic_regex=""),
    ),
)
async def consumer_group_first_join_with_broker_defaults(ctx: ScenarioContext) -> Outcome:
    tops = await topics(ctx, 4)
    a = await consumer(ctx, "a", tops)
    ctx.record("join.A", await a.join(tops.names))
    await describe(ctx, "describe", tops)
    ctx.record("ack.A", await a.ack())
    ctx.record("heartbeat.A", await a.beat())
    ctx.record(
        "heartbeat.A.full", await a.send(rebalance_timeout_ms=REBALANCE_MS, subscribe=tops.names).result()
    )
    await describe(ctx, "describe.v0", tops, version=0)
    return ctx.outcome


def _revocation_sane(outcome: Outcome) -> None:
    expect(outcome, "join.B", member_epoch=3, assignment={})
    expect(outcome, "heartbeat.A.revoke", member_epoch=2, assignment={T: [0, 1]})
    expect(outcome, "heartbeat.B.still_waiting", member_epoch=3, assignment=None)
    expect(outcome, "ack.A.revoked", member_epoch=3, assignment=None)
    expect(outcome, "heartbeat.B.assigned", member_epoch=3, assignment={T: [2, 3]})
    expect_member(
        "describe.revoking", "member-a", assignment={T: [0, 1, 2, 3]}, target_assignment={T: [0, 1]}
    )(outcome)


@scenario(
    "A second member joins: the group epoch goes to 3 and B gets epoch 3 with no partitions; A, still at "
    "epoch 2, is told to keep 0,1 (revoke 2,3); only after A reports it owns just 0,1 does A reach epoch "
    "3 and B get 2,3 on its next heartbeat. Describe shows A's revoking partitions in its assignment.",
    rule="GroupMetadataManager.consumerGroupHeartbeat; CurrentAssignmentBuilder (UNREVOKED_PARTITIONS, "
    "UNRELEASED_PARTITIONS: a partition is given only once its previous owner released it)",
    settings=CONSUMER,
    sanity=_revocation_sane,
)
async def consumer_group_second_member_waits_for_revocation(ctx: ScenarioContext) -> Outcome:
    tops = await topics(ctx, 4)
    a = await consumer(ctx, "a", tops)
    b = await consumer(ctx, "b", tops)
    ctx.record("join.A", await a.join(tops.names))
    ctx.record("ack.A", await a.ack())
    ctx.record("join.B", await b.join(tops.names))
    await describe(ctx, "describe.after_B_joined", tops)
    ctx.record("heartbeat.B.before_revocation", await b.beat())
    ctx.record("heartbeat.A.revoke", await a.beat())
    await describe(ctx, "describe.revoking", tops)
    ctx.record("heartbeat.B.still_waiting", await b.beat())
    ctx.record("ack.A.revoked", await a.ack())
    await describe(ctx, "describe.revoked", tops)
    ctx.record("heartbeat.B.assigned", await b.beat())
    ctx.record("ack.B", await b.ack())
    await describe(ctx, "describe.stable", tops)
    return ctx.outcome


@scenario(
    "A member loses the answer that tells it to revoke (its client's request timed out) and goes on with "
    "plain heartbeats, owning what it owned, or naming nothing it owns: each is answered at its epoch "
    "without the assignment, A keeps its partitions to revoke and B waits for them. Only a full request "
    "(rebalance timeout, subscription, owned partitions) brings the assignment again; acknowledged, A "
    "reaches epoch 3 and B gets 2,3. A client that never sends one waits for its rebalance timeout.",
    rule="GroupMetadataManager.consumerGroupHeartbeat (the assignment only on epoch 0, a full request or a "
    "change); CurrentAssignmentBuilder (UNREVOKED_PARTITIONS while the member owns a partition to revoke, "
    "or says nothing of what it owns)",
    settings=CONSUMER,
    sanity=expect_all(
        ("heartbeat.A.revoke", {"member_epoch": 2, "assignment": {T: [0, 1]}}),
        ("heartbeat.A.as_before", {"error_code": "NONE", "member_epoch": 2, "assignment": None}),
        ("heartbeat.A.owned_null", {"error_code": "NONE", "member_epoch": 2, "assignment": None}),
        ("heartbeat.B.waiting", {"member_epoch": 3, "assignment": None}),
        ("heartbeat.A.full", {"member_epoch": 2, "assignment": {T: [0, 1]}}),
        ("ack.A.revoked", {"member_epoch": 3}),
        ("heartbeat.B.assigned", {"member_epoch": 3, "assignment": {T: [2, 3]}}),
    ),
)
async def consumer_group_lost_revocation_answer(ctx: ScenarioContext) -> Outcome:
    tops = await topics(ctx, 4)
    a = await consumer(ctx, "a", tops)
    b = await consumer(ctx, "b", tops)
    await a.join(tops.names)
    await a.ack()
    await b.join(tops.names)
    ctx.record("heartbeat.A.revoke", await a.beat())  # the answer its client never read
    ctx.record("heartbeat.A.as_before", await a.beat())  # still owning 0-3
    ctx.record("heartbeat.A.owned_null", await a.send(owned=None).result())
    await describe(ctx, "describe.stuck", tops)
    ctx.record("heartbeat.B.waiting", await b.beat())
    full = a.send(rebalance_timeout_ms=REBALANCE_MS, subscribe=tops.names)
    ctx.record("heartbeat.A.full", await full.result())
    ctx.record("ack.A.revoked", await a.ack())
    ctx.record("heartbeat.B.assigned", await b.beat())
    await describe(ctx, "describe", tops)
    return ctx.outcome


@scenario(
    "A member that leaves (epoch -1) while it is revoking releases everything at once: the group epoch goes "
    "to 4 (Assigning: the target is computed on the next heartbeat) and B gets all four partitions at "
    "epoch 4.",
    rule="GroupMetadataManager.consumerGroupLeave, consumerGroupFenceMember",
    settings=CONSUMER,
    sanity=expect_all(
        ("leave.A", {"member_epoch": -1, "member_id": "member-a", "heartbeat_interval_ms": 0}),
        ("describe.after_leave", {"group_state": "Assigning", "group_epoch": 4, "assignment_epoch": 3}),
        ("heartbeat.B", {"member_epoch": 4, "assignment": {T: [0, 1, 2, 3]}}),
    ),
)
async def consumer_group_member_leaves_while_revoking(ctx: ScenarioContext) -> Outcome:
    tops = await topics(ctx, 4)
    a = await consumer(ctx, "a", tops)
    b = await consumer(ctx, "b", tops)
    await a.join(tops.names)
    await a.ack()
    ctx.record("join.B", await b.join(tops.names))
    ctx.record("heartbeat.A.revoke", await a.beat())
    ctx.record("leave.A", await a.leave())
    await describe(ctx, "describe.after_leave", tops)
    ctx.record("heartbeat.B", await b.beat())
    ctx.record("ack.B", await b.ack())
    await describe(ctx, "describe", tops)
    return ctx.outcome


@scenario(
    "Member epoch checks (A at epoch 3): an older epoch is FENCED_MEMBER_EPOCH, except the previous epoch "
    "with owned partitions that are a subset of the current assignment (a lost answer); a greater epoch is "
    "fenced; error answers carry no member id, epoch 0 and interval 0. A fenced member rejoins with epoch "
    "0 and its own id and gets its partitions back at the current epoch.",
    rule="GroupMetadataManager.throwIfConsumerGroupMemberEpochIsInvalid; KIP-848 fenced member recovery",
    settings=CONSUMER,
    sanity=expect_all(
        ("heartbeat.A.epoch_1", {"error_code": "FENCED_MEMBER_EPOCH", "member_id": None, "member_epoch": 0}),
        ("heartbeat.A.epoch_2.subset", {"error_code": "NONE", "member_epoch": 3}),
        ("heartbeat.A.epoch_2.not_subset", {"error_code": "FENCED_MEMBER_EPOCH"}),
        ("heartbeat.A.epoch_9", {"error_code": "FENCED_MEMBER_EPOCH"}),
        ("rejoin.A", {"error_code": "NONE", "member_epoch": 3, "assignment": {T: [0, 1]}}),
    ),
)
async def consumer_group_stale_member_epoch(ctx: ScenarioContext) -> Outcome:
    tops = await topics(ctx, 4)
    a, b = await pair(ctx, tops)
    ctx.record("heartbeat.A.epoch_1", await a.send(epoch=1).result())
    ctx.record(
        "heartbeat.A.epoch_2.not_subset", await a.send(epoch=2, owned={tops.names[0]: [0, 1, 2]}).result()
    )
    ctx.record("heartbeat.A.epoch_2.subset", await a.send(epoch=2, owned={tops.names[0]: [0]}).result())
    ctx.record("heartbeat.A.epoch_2.owned_null", await a.send(epoch=2, owned=None).result())
    ctx.record("heartbeat.A.epoch_9", await a.send(epoch=9).result())
    ctx.record("heartbeat.A", await a.beat())
    ctx.record("rejoin.A", await a.join(tops.names))
    ctx.record("ack.A", await a.ack())
    ctx.record("heartbeat.B", await b.beat())
    await describe(ctx, "describe", tops)
    return ctx.outcome


@scenario(
    "Unknown identities: a member id the group does not know is UNKNOWN_MEMBER_ID ('Member ... is not a "
    "member of group ...') on heartbeats and leaves; an unknown instance id on a static leave is "
    "UNKNOWN_MEMBER_ID ('Instance id G is unknown.'); a heartbeat (epoch > 0) or leave to a group that "
    "does not exist is GROUP_ID_NOT_FOUND, with different messages.",
    rule="ConsumerGroup.getOrMaybeCreateMember; GroupMetadataManager.getOrMaybeCreateConsumerGroup, "
    "consumerGroupLeave, throwIfStaticMemberIsUnknown",
    settings=CONSUMER,
    sanity=expect_all(
        ("heartbeat.ghost.epoch_1", {"error_code": "UNKNOWN_MEMBER_ID"}),
        ("heartbeat.unknown_group", {"error_code": "GROUP_ID_NOT_FOUND"}),
        ("describe.unknown_group", {"error_code": "GROUP_ID_NOT_FOUND", "group_state": ""}),
    ),
)
async def consumer_group_unknown_member_id(ctx: ScenarioContext) -> Outcome:
    tops = await topics(ctx, 4)
    a = await consumer(ctx, "a", tops)
    await a.join(tops.names)
    ghost = await consumer(ctx, "ghost", tops)
    ctx.record("heartbeat.ghost.epoch_1", await ghost.send(epoch=1).result())
    ctx.record("heartbeat.ghost.epoch_2", await ghost.send(epoch=2, owned={}).result())
    ctx.record("leave.ghost", await ghost.leave())
    ctx.record("leave.ghost.static", await ghost.send(epoch=-2, instance_id="G", owned=None).result())
    other = await consumer(ctx, "other", tops, group=ctx.new_group())
    ctx.record("heartbeat.unknown_group", await other.send(epoch=1).result())
    ctx.record("leave.unknown_group", await other.leave())
    ctx.record("heartbeat.A", await a.beat())
    await describe(ctx, "describe", tops)
    await describe(ctx, "describe.unknown_group", tops, other.group)
    return ctx.outcome


@scenario(
    "A dynamic member leaves (epoch -1): the answer echoes its id with epoch -1; the group epoch goes to 4 "
    "but the target assignment waits for the next heartbeat (Assigning), which gives A all four partitions; "
    "the departed id is unknown afterwards and rejoining with it is a new member (epoch 5).",
    rule="GroupMetadataManager.consumerGroupLeave, consumerGroupFenceMember",
    settings=CONSUMER,
    sanity=expect_all(
        ("leave.B", {"error_code": "NONE", "member_id": "member-b", "member_epoch": -1}),
        ("describe.after_leave", {"group_state": "Assigning", "group_epoch": 4, "assignment_epoch": 3}),
        ("heartbeat.A", {"member_epoch": 4, "assignment": {T: [0, 1, 2, 3]}}),
        ("heartbeat.B.after_leave", {"error_code": "UNKNOWN_MEMBER_ID"}),
        ("rejoin.B", {"member_epoch": 5, "assignment": {}}),
    ),
)
async def consumer_group_dynamic_leave(ctx: ScenarioContext) -> Outcome:
    tops = await topics(ctx, 4)
    a, b = await pair(ctx, tops)
    ctx.record("leave.B", await b.leave())
    await describe(ctx, "describe.after_leave", tops)
    ctx.record("heartbeat.A", await a.beat())
    ctx.record("ack.A", await a.ack())
    ctx.record("heartbeat.B.after_leave", await b.send(epoch=3).result())
    ctx.record("leave.B.again", await b.leave())
    ctx.record("rejoin.B", await b.join(tops.names))
    await describe(ctx, "describe", tops)
    return ctx.outcome


# --------------------------------------------------------------------------------------------------
# Static members


@scenario(
    "Static members (instance ids A, B) join and reconcile as dynamic ones do; a heartbeat without the "
    "instance id is accepted; a static member that left with epoch -2 and rejoins with its own member id "
    "gets its partitions back at once, nobody else moves and the group epoch stays 3.",
    rule="GroupMetadataManager.getOrMaybeSubscribeStaticConsumerGroupMember, "
    "consumerGroupStaticMemberGroupLeave",
    settings=CONSUMER,
    sanity=checks(
        expect_all(
            ("leave.B.static", {"member_epoch": -2}),
            ("rejoin.B.same_member_id", {"member_epoch": 3, "assignment": {T: [2, 3]}}),
            ("describe", {"group_epoch": 3, "group_state": "Stable"}),
        ),
        expect_member("describe", "member-a", instance_id="A", assignment={T: [0, 1]}),
    ),
)
async def consumer_group_static_members_join(ctx: ScenarioContext) -> Outcome:
    tops = await topics(ctx, 4)
    a = await consumer(ctx, "a", tops, instance_id="A")
    b = await consumer(ctx, "b", tops, instance_id="B")
    ctx.record("join.A", await a.join(tops.names))
    ctx.record("ack.A", await a.ack())
    ctx.record("join.B", await b.join(tops.names))
    ctx.record("heartbeat.A.no_instance_id", await a.send(instance_id=None).result())
    ctx.record("ack.A", await a.ack())
    ctx.record("heartbeat.B", await b.beat())
    ctx.record("ack.B", await b.ack())
    await describe(ctx, "describe.stable", tops)
    ctx.record("leave.B.static", await b.leave(-2))
    ctx.record("rejoin.B.same_member_id", await b.join(tops.names))
    await describe(ctx, "describe", tops)
    return ctx.outcome


@scenario(
    "A static member leaves with epoch -2: it stays in the group with epoch -2 and its partitions (the "
    "group shows Reconciling, the group epoch unchanged); its old id heartbeating then is fenced (greater "
    "epoch than -2). A restart with a new member id and the same instance id gets the same partitions at "
    "epoch 3 at once and B is not disturbed; the old id is then FENCED_INSTANCE_ID.",
    rule="GroupMetadataManager.consumerGroupStaticMemberGroupLeave, "
    "getOrMaybeSubscribeStaticConsumerGroupMember (replaceMember), throwIfInstanceIdIsFenced",
    settings=CONSUMER,
    sanity=checks(
        expect_all(
            ("leave.A.static", {"member_epoch": -2, "member_id": "member-a"}),
            ("describe.after_leave", {"group_state": "Reconciling", "group_epoch": 3}),
            ("rejoin.A.new_member_id", {"member_epoch": 3, "assignment": {T: [0, 1]}}),
            ("heartbeat.B.after_rejoin", {"member_epoch": 3, "assignment": None}),
            ("heartbeat.A.old_id.after_rejoin", {"error_code": "FENCED_INSTANCE_ID"}),
        ),
        expect_member("describe.after_leave", "member-a", member_epoch=-2, assignment={T: [0, 1]}),
    ),
)
async def consumer_group_static_leave_and_rejoin(ctx: ScenarioContext) -> Outcome:
    tops = await topics(ctx, 4)
    a, b = await pair(ctx, tops, static=True)
    ctx.record("leave.A.static", await a.leave(-2))
    await describe(ctx, "describe.after_leave", tops)
    ctx.record("heartbeat.B", await b.beat())
    ctx.record("heartbeat.A.old_id", await a.send(epoch=3).result())
    restarted = await consumer(ctx, "a2", tops, instance_id="A", member_id="member-a-restarted")
    ctx.record("rejoin.A.new_member_id", await restarted.join(tops.names))
    await describe(ctx, "describe.after_rejoin", tops)
    ctx.record("ack.A", await restarted.ack())
    ctx.record("heartbeat.B.after_rejoin", await b.beat())
    ctx.record("heartbeat.A.old_id.after_rejoin", await a.send(epoch=3).result())
    ctx.record("leave.A.old_id", await a.leave(-2))
    await describe(ctx, "describe", tops)
    return ctx.outcome


@scenario(
    "Instance id conflicts while A holds instance A: another member id joining as A is "
    "UNRELEASED_INSTANCE_ID, and so is A itself rejoining (epoch 0, its own id) without having left; the "
    "other id's heartbeats and leaves are FENCED_INSTANCE_ID; an unknown instance id is UNKNOWN_MEMBER_ID; "
    "epoch -2 without an instance id is INVALID_REQUEST.",
    rule="GroupMetadataManager.throwIfInstanceIdIsUnreleased, throwIfInstanceIdIsFenced, "
    "throwIfStaticMemberIsUnknown; GroupCoordinatorService.throwIfConsumerGroupHeartbeatRequestIsInvalid",
    settings=CONSUMER,
    sanity=expect_all(
        ("join.second_A", {"error_code": "UNRELEASED_INSTANCE_ID"}),
        ("rejoin.A.same_member_id", {"error_code": "UNRELEASED_INSTANCE_ID"}),
        ("heartbeat.second_A", {"error_code": "FENCED_INSTANCE_ID"}),
        ("leave.unknown_instance", {"error_code": "UNKNOWN_MEMBER_ID"}),
        ("leave.static.no_instance", {"error_code": "INVALID_REQUEST"}),
        ("heartbeat.A", {"error_code": "NONE", "member_epoch": 2}),
    ),
)
async def consumer_group_static_identity_conflicts(ctx: ScenarioContext) -> Outcome:
    tops = await topics(ctx, 4)
    a = await consumer(ctx, "a", tops, instance_id="A")
    ctx.record("join.A", await a.join(tops.names))
    await a.ack()
    imposter = await consumer(ctx, "a2", tops, instance_id="A", member_id="member-a-imposter")
    ctx.record("join.second_A", await imposter.join(tops.names))
    ctx.record("rejoin.A.same_member_id", await a.join(tops.names))
    ctx.record("heartbeat.second_A", await imposter.send(epoch=2).result())
    ctx.record("leave.second_A.static", await imposter.leave(-2))
    ctx.record("leave.second_A", await imposter.leave(-1))
    ctx.record("heartbeat.A.other_instance", await a.send(instance_id="Z").result())
    ctx.record("leave.unknown_instance", await a.send(epoch=-2, instance_id="Z", owned=None).result())
    ctx.record("leave.static.no_instance", await a.send(epoch=-2, instance_id=None, owned=None).result())
    ctx.record("heartbeat.A", await a.beat())
    await describe(ctx, "describe", tops)
    return ctx.outcome


# --------------------------------------------------------------------------------------------------
# Request validation and member ids


@scenario(
    "ConsumerGroupHeartbeat validation, each INVALID_REQUEST with Kafka's message unless said: an empty or "
    "blank member id (v1; on v0 when epoch > 0 or leaving), an empty group id, a join without a rebalance "
    "timeout, with owned partitions or a null list, with neither topic names nor a regex, epoch -3, an "
    "empty instance or rack id; an unknown server assignor is UNSUPPORTED_ASSIGNOR (checked last). Nothing "
    "is created.",
    rule="GroupCoordinatorService.throwIfConsumerGroupHeartbeatRequestIsInvalid; Utils.throwIfEmptyString "
    "(blank counts as empty)",
    settings=CONSUMER,
    sanity=expect_all(
        (
            "v1.empty_member_id",
            {"error_code": "INVALID_REQUEST", "error_message": "MemberId can't be empty."},
        ),
        ("unsupported_assignor", {"error_code": "UNSUPPORTED_ASSIGNOR"}),
        ("empty_member_id.unsupported_assignor", {"error_code": "INVALID_REQUEST"}),
        ("describe", {"error_code": "GROUP_ID_NOT_FOUND"}),
    ),
)
async def consumer_group_heartbeat_request_validation(ctx: ScenarioContext) -> Outcome:
    tops = await topics(ctx, 4)
    c = await consumer(ctx, "c", tops)
    join = functools.partial(
        c.send, epoch=0, rebalance_timeout_ms=REBALANCE_MS, subscribe=tops.names, owned={}
    )
    cases: dict[str, Callable[[], d.Pending[d.ConsumerHeartbeatResult]]] = {
        "v1.empty_member_id": lambda: join(member_id=""),
        "v1.blank_member_id": lambda: join(member_id="  "),
        "v0.empty_member_id.epoch_1": lambda: c.send(version=0, epoch=1, member_id=""),
        "v0.empty_member_id.leave": lambda: c.send(version=0, epoch=-1, member_id="", owned=None),
        "join.no_rebalance_timeout": lambda: join(rebalance_timeout_ms=-1),
        "join.owned_partitions": lambda: join(owned={tops.names[0]: [0]}),
        "join.owned_null": lambda: join(owned=None),
        "join.no_subscription": lambda: join(subscribe=None),
        "epoch_minus_3": lambda: c.send(epoch=-3),
        "empty_instance_id": lambda: join(instance_id=""),
        "empty_rack_id": lambda: join(rack_id=""),
        "unsupported_assignor": lambda: join(server_assignor="sticky"),
        "empty_member_id.unsupported_assignor": lambda: join(member_id="", server_assignor="sticky"),
        "no_subscription.unsupported_assignor": lambda: join(subscribe=None, server_assignor="sticky"),
    }
    for label, send in cases.items():
        ctx.record(label, await send().result())
    no_group = await consumer(ctx, "e", tops, group="")
    ctx.record(
        "empty_group_id",
        await no_group.send(
            epoch=0, rebalance_timeout_ms=REBALANCE_MS, subscribe=tops.names, owned={}
        ).result(),
    )
    await describe(ctx, "describe", tops)
    return ctx.outcome


@scenario(
    "ConsumerGroupHeartbeat v0 with an empty member id on joining: the coordinator makes the id (22 "
    "characters, Kafka's Uuid in base64); v0 and v1 heartbeats with it work; a v0 join with the client's "
    "own id keeps that id.",
    rule="GroupMetadataManager.consumerGroupHeartbeat (Uuid.randomUuid() when the member id is empty); "
    "CONSUMER_GENERATED_MEMBER_ID_REQUIRED_VERSION = 1",
    settings=CONSUMER,
    sanity=checks(
        lambda outcome: assert_equal(outcome.get("generated_member_id_length"), 22),
        expect_all(
            ("join.v0.empty_member_id", {"member_id": "<generated>", "member_epoch": 2}),
            ("join.v0.own_member_id", {"member_id": "member-b", "member_epoch": 3}),
        ),
    ),
)
async def consumer_group_heartbeat_v0_coordinator_member_id(ctx: ScenarioContext) -> Outcome:
    tops = await topics(ctx, 2)
    a = await consumer(ctx, "a", tops, member_id="")
    answer = await a.join(tops.names, version=0)
    generated = answer.member_id or ""
    ctx.fact("generated_member_id_length", len(generated))
    ctx.norm.add_member(generated, "<generated>")
    ctx.record("join.v0.empty_member_id", answer)
    a.member_id = generated
    a.owned = a.assigned
    ctx.record("heartbeat.v0", await a.send(version=0).result())
    ctx.record("heartbeat.v1", await a.send(version=1).result())
    b = await consumer(ctx, "b", tops)
    ctx.record("join.v0.own_member_id", await b.join(tops.names, version=0))
    await describe(ctx, "describe", tops)
    ctx.record("leave.v0", await a.send(version=0, epoch=-1, owned=None).result())
    return ctx.outcome


# --------------------------------------------------------------------------------------------------
# Subscriptions


@scenario(
    "A member joining with an empty subscription is a member without partitions and does not bump the "
    "group epoch (a new group stays at epoch 1, the member gets epoch 1); subscribing later bumps it, and "
    "so does unsubscribing again.",
    rule="GroupMetadataManager.hasMemberSubscriptionChanged (only a changed topic set bumps the epoch); "
    "GroupCoordinatorService (an empty list of names is accepted)",
    settings=CONSUMER,
    sanity=expect_all(
        ("join.A.no_topics", {"member_epoch": 1, "assignment": {}}),
        ("describe.A_only", {"group_epoch": 1, "group_state": "Stable"}),
        ("join.C.no_topics", {"member_epoch": 2}),
        ("subscribe.A", {"member_epoch": 3}),
        ("unsubscribe.A", {"member_epoch": 4}),
    ),
)
async def consumer_group_empty_subscription(ctx: ScenarioContext) -> Outcome:
    tops = await topics(ctx, 4)
    a = await consumer(ctx, "a", tops)
    b = await consumer(ctx, "b", tops)
    ctx.record("join.A.no_topics", await a.join([]))
    await describe(ctx, "describe.A_only", tops)
    ctx.record("join.B", await b.join(tops.names))
    await b.ack()
    ctx.record("join.C.no_topics", await (await consumer(ctx, "c", tops)).join([]))
    await describe(ctx, "describe.with_C", tops)
    ctx.record("subscribe.A", await a.send(subscribe=tops.names).result())
    ctx.record("heartbeat.B", await b.beat())
    ctx.record("unsubscribe.A", await a.send(subscribe=[]).result())
    await describe(ctx, "describe", tops)
    return ctx.outcome


@scenario(
    "Subscription changes: B adding a topic bumps the group epoch to 4 and is answered at epoch 3 with the "
    "partition it must give up removed; the same set in another order changes nothing; A switching to the "
    "other topic gives up everything (epoch 5) and B then takes the whole first topic.",
    rule="GroupMetadataManager.consumerGroupHeartbeat (subscription change bumps the epoch, "
    "reconciliation is forced); CurrentAssignmentBuilder",
    settings=CONSUMER,
    sanity=expect_all(
        ("subscribe.B.both", {"member_epoch": 3, "assignment": {T: [2]}}),
        ("describe.B_subscribed_both", {"group_epoch": 4}),
        ("subscribe.B.same_set", {"member_epoch": 4, "assignment": None}),
        ("describe", {"group_epoch": 5, "group_state": "Stable"}),
    ),
)
async def consumer_group_subscription_change(ctx: ScenarioContext) -> Outcome:
    tops = await topics(ctx, 4, 2)
    t1, t2 = tops.names
    a = await consumer(ctx, "a", tops)
    b = await consumer(ctx, "b", tops)
    ctx.record("join.A", await a.join([t1]))
    await a.ack()
    ctx.record("join.B", await b.join([t1]))
    await settle([a, b])
    await describe(ctx, "describe.one_topic", tops)
    ctx.record("subscribe.B.both", await b.send(subscribe=[t1, t2]).result())
    await describe(ctx, "describe.B_subscribed_both", tops)
    ctx.record("heartbeat.A", await a.beat())
    ctx.record("ack.B", await b.ack())
    ctx.record("subscribe.B.same_set", await b.send(subscribe=[t2, t1]).result())
    ctx.record("subscribe.A.second_topic", await a.send(subscribe=[t2]).result())
    ctx.record("ack.A", await a.ack())
    ctx.record("heartbeat.B", await b.beat())
    await settle([a, b])
    await describe(ctx, "describe", tops)
    return ctx.outcome


@scenario(
    "A subscription naming a topic that does not exist: the member gets the partitions of the topics that "
    "do and describe lists the missing name; once the topic is created, a later heartbeat bumps the group "
    "epoch once (to 3) and assigns it.",
    rule="GroupMetadataManager.updateSubscriptionMetadata (metadata hash of the subscribed topics), "
    "onNewMetadataImage",
    settings=CONSUMER,
    sanity=checks(
        expect_all(
            ("join.A", {"member_epoch": 2, "assignment": {T: [0, 1]}}),
            ("heartbeat.A.created", {"member_epoch": 3, "assignment": {T: [0, 1], T2: [0, 1, 2]}}),
        ),
        expect_member("describe.missing", "member-a", subscribed_topic_names=[T2, T]),
    ),
)
async def consumer_group_subscribed_topic_missing(ctx: ScenarioContext) -> Outcome:
    tops = await topics(ctx, 2)
    missing = ctx.new_topic()
    a = await consumer(ctx, "a", tops)
    ctx.record("join.A", await a.join([tops.names[0], missing]))
    await a.ack()
    await describe(ctx, "describe.missing", tops)
    conn = await ctx.observer()
    await d.ensure_topic(conn, missing, 3)
    tops.add(await d.topic_ids(conn, [missing]))
    # When the coordinator learns of the topic is not in the scenario's hands: only the answer that
    # assigns it is recorded.
    answer = await beat_until(a, lambda r: r.assignment is not None, interval=0.05)
    ctx.record("heartbeat.A.created", answer)
    await a.ack()
    await describe(ctx, "describe.created", tops)
    return ctx.outcome


@scenario(
    "A regular expression subscription (v1): an invalid one is INVALID_REGULAR_EXPRESSION with the RE2J "
    "message; names plus a regex join at once with the named topic, and the regex's topic follows once the "
    "coordinator has resolved it (group epoch 3). Describe shows both.",
    rule="Utils.throwIfRegularExpressionIsInvalid; GroupMetadataManager.maybeUpdateRegularExpressions "
    "(resolved asynchronously, then the epoch is bumped)",
    settings=CONSUMER,
    sanity=checks(
        expect_all(
            ("join.invalid_regex", {"error_code": "INVALID_REGULAR_EXPRESSION"}),
            ("join.names_and_regex", {"member_epoch": 2, "assignment": {T2: [0, 1, 2]}}),
            ("heartbeat.A.regex_resolved", {"member_epoch": 3, "assignment": {T: [0, 1], T2: [0, 1, 2]}}),
        ),
        expect_member("describe", "member-a", subscribed_topic_regex=T, subscribed_topic_names=[T2]),
    ),
)
async def consumer_group_regex_subscription(ctx: ScenarioContext) -> Outcome:
    tops = await topics(ctx, 2, 3)
    t1, t2 = tops.names
    a = await consumer(ctx, "a", tops)
    join = functools.partial(a.send, epoch=0, rebalance_timeout_ms=REBALANCE_MS, owned={})
    ctx.record("join.invalid_regex", await join(regex="[").result())
    # The first topic's own name is the regex: it matches only that topic and normalises as <topic>.
    ctx.record("join.names_and_regex", await join(subscribe=[t2], regex=t1).result())
    answer = await beat_until(a, lambda r: r.assignment is not None and t1 in r.assignment, interval=0.05)
    ctx.record("heartbeat.A.regex_resolved", answer)
    await describe(ctx, "describe", tops)
    return ctx.outcome


@scenario(
    "A heartbeat that carries a new rack id updates the member without bumping the group epoch; the client "
    "id (from the request header) and host are taken from every heartbeat.",
    rule="GroupMetadataManager.consumerGroupHeartbeat (maybeUpdateRackId, setClientId, setClientHost)",
    settings=CONSUMER,
    sanity=checks(
        expect_member(
            "describe.rack_2", "member-a", rack_id="rack-2", client_id="a", client_host="/127.0.0.1"
        ),
        expect_member("describe", "member-a", rack_id="rack-2", client_id="a-renamed"),
        expect_all(("describe", {"group_epoch": 2})),
    ),
)
async def consumer_group_member_updates_rack_and_client_id(ctx: ScenarioContext) -> Outcome:
    tops = await topics(ctx, 4)
    a = await consumer(ctx, "a", tops)
    a.rack_id = "rack-1"
    ctx.record("join.A", await a.join(tops.names))
    await a.ack()
    ctx.record("heartbeat.A.rack_2", await a.send(rack_id="rack-2").result())
    await describe(ctx, "describe.rack_2", tops)
    a.conn = await ctx.connect("consumer-a-renamed", client_id="a-renamed")
    ctx.record("heartbeat.A.new_client_id", await a.beat())
    await describe(ctx, "describe", tops)
    return ctx.outcome


# --------------------------------------------------------------------------------------------------
# Server-side assignors


async def join_in_turn(
    ctx: ScenarioContext, tops: Topics, subscriptions: Mapping[str, Sequence[str]], assignor: str | None
) -> None:
    """Members join one after the other, each once the group before it has settled; records each join, the
    group after it, and the final assignment per member."""
    members: list[Consumer] = []
    for name, subscribed in subscriptions.items():
        member = await consumer(ctx, name, tops)
        members.append(member)
        ctx.record(f"join.{name}", await member.join(subscribed, server_assignor=assignor))
        await settle(members)
        await describe(ctx, f"describe.after_{name}", tops)
    ctx.record("assigned", {m.member_id: m.assigned for m in members})


# The uniform assignor orders topics by topic id where nothing else decides (a homogeneous group's topic
# set is a hash set of ids), and ids differ between coordinators: with several topics only a heterogeneous
# group whose topics differ in partitions per subscriber has an assignment both must agree on.


@scenario(
    "The uniform assignor (server_assignor 'uniform') on one seven-partition topic as three members join "
    "in turn: sticky, A keeps 0,1,2, B gets 4,5 and C 3,6.",
    rule="UniformAssignor; UniformHomogeneousAssignmentBuilder",
    settings=CONSUMER,
    sanity=lambda outcome: assert_equal(
        outcome.get("assigned"),
        {"member-a": {T: [0, 1, 2]}, "member-b": {T: [4, 5]}, "member-c": {T: [3, 6]}},
    ),
)
async def consumer_group_uniform_assignor(ctx: ScenarioContext) -> Outcome:
    tops = await topics(ctx, 7)
    await join_in_turn(ctx, tops, {"a": tops.names, "b": tops.names, "c": tops.names}, "uniform")
    return ctx.outcome


@scenario(
    "The uniform assignor with different subscriptions (A: topics 1,2; B: 2,3; C: 1,2,3; 4, 3 and 2 "
    "partitions), members joining in turn without naming an assignor (uniform is the default).",
    rule="UniformHeterogeneousAssignmentBuilder (topics by partitions per subscriber, then subscribers)",
    settings=CONSUMER,
    sanity=lambda outcome: assert_equal(
        outcome.get("assigned"),
        {
            "member-a": {T: [0, 1], T2: [0]},
            "member-b": {T2: [1, 2], T3: [0]},
            "member-c": {T: [2, 3], T3: [1]},
        },
    ),
)
async def consumer_group_uniform_assignor_mixed_subscriptions(ctx: ScenarioContext) -> Outcome:
    tops = await topics(ctx, 4, 3, 2)
    t1, t2, t3 = tops.names
    await join_in_turn(ctx, tops, {"a": [t1, t2], "b": [t2, t3], "c": [t1, t2, t3]}, None)
    return ctx.outcome


@scenario(
    "The range assignor (server_assignor 'range'), three members on two topics of 4 and 3 partitions: each "
    "topic split in ranges in member order, A 0,1 and 0, B 2 and 1, C 3 and 2; describe names 'range'.",
    rule="RangeAssignor",
    settings=CONSUMER,
    sanity=lambda outcome: assert_equal(
        outcome.get("assigned"),
        {"member-a": {T: [0, 1], T2: [0]}, "member-b": {T: [2], T2: [1]}, "member-c": {T: [3], T2: [2]}},
    ),
)
async def consumer_group_range_assignor(ctx: ScenarioContext) -> Outcome:
    tops = await topics(ctx, 4, 3)
    await join_in_turn(ctx, tops, {"a": tops.names, "b": tops.names, "c": tops.names}, "range")
    return ctx.outcome


@scenario(
    "The range assignor with different subscriptions (A: topics 1,2; B: 2,3; C: 1,2,3): each topic is "
    "split among its own subscribers only.",
    rule="RangeAssignor (heterogeneous subscriptions)",
    settings=CONSUMER,
    sanity=lambda outcome: assert_equal(
        outcome.get("assigned"),
        {
            "member-a": {T: [0, 1], T2: [0]},
            "member-b": {T2: [1], T3: [0]},
            "member-c": {T: [2, 3], T2: [2], T3: [1]},
        },
    ),
)
async def consumer_group_range_assignor_mixed_subscriptions(ctx: ScenarioContext) -> Outcome:
    tops = await topics(ctx, 4, 3, 2)
    t1, t2, t3 = tops.names
    await join_in_turn(ctx, tops, {"a": [t1, t2], "b": [t2, t3], "c": [t1, t2, t3]}, "range")
    return ctx.outcome


@scenario(
    "With group.consumer.assignors = range,uniform the first is the default: two members co-partitioned "
    "by range; once every member that names an assignor names 'uniform', describe reports uniform (the "
    "target is not recomputed until the next epoch bump).",
    rule="GroupCoordinatorConfig (the first assignor is the default); "
    "ConsumerGroup.computePreferredServerAssignor",
    settings=RANGE_FIRST,
    sanity=expect_all(
        ("describe.range", {"assignor_name": "range", "group_epoch": 3}),
        ("describe.A_prefers_uniform", {"assignor_name": "uniform", "group_epoch": 3}),
    ),
)
async def consumer_group_default_assignor_is_the_first_configured(ctx: ScenarioContext) -> Outcome:
    tops = await topics(ctx, 4, 4)
    a = await consumer(ctx, "a", tops)
    b = await consumer(ctx, "b", tops)
    ctx.record("join.A", await a.join(tops.names))
    await a.ack()
    ctx.record("join.B", await b.join(tops.names))
    await settle([a, b])
    await describe(ctx, "describe.range", tops)
    ctx.record("heartbeat.A.uniform", await a.send(server_assignor="uniform").result())
    await describe(ctx, "describe.A_prefers_uniform", tops)
    ctx.record("heartbeat.B.uniform", await b.send(server_assignor="uniform").result())
    await settle([a, b])
    await describe(ctx, "describe.uniform", tops)
    return ctx.outcome


# --------------------------------------------------------------------------------------------------
# Timeouts and limits


@scenario(
    "Session timeout (2 s): B stops heartbeating and is removed once its session expires; A's next "
    "heartbeat is answered at group epoch 4 with all four partitions; B's heartbeat is then "
    "UNKNOWN_MEMBER_ID and B rejoining with its id is a new member (epoch 5).",
    rule="GroupMetadataManager.scheduleConsumerGroupSessionTimeout (group.consumer.session.timeout.ms)",
    settings=SHORT_SESSION,
    sanity=expect_all(
        ("heartbeat.A.after_B_expired", {"member_epoch": 4, "heartbeat_interval_ms": 500}),
        ("heartbeat.A.after_B_expired", {"assignment": {T: [0, 1, 2, 3]}}),
        ("heartbeat.B", {"error_code": "UNKNOWN_MEMBER_ID"}),
        ("rejoin.B", {"member_epoch": 5}),
    ),
)
async def consumer_group_session_timeout_fences_member(ctx: ScenarioContext) -> Outcome:
    tops = await topics(ctx, 4)
    a, b = await pair(ctx, tops)
    loop = asyncio.get_running_loop()
    started = loop.time()
    # How many heartbeats A sends before B expires is a matter of timing: only the answer that carries
    # the new assignment is recorded.
    answer = await beat_until(a, lambda r: r.assignment is not None)
    session_s = (ctx.settings.consumer_session_timeout_ms or 0) / 1000
    ctx.fact("removed_after_the_session_timeout", loop.time() - started >= session_s - 0.2)
    ctx.record("heartbeat.A.after_B_expired", answer)
    await describe(ctx, "describe.after_expiry", tops)
    ctx.record("heartbeat.B", await b.beat())
    ctx.record("rejoin.B", await b.join(tops.names))
    return ctx.outcome


@scenario(
    "A static member that left with epoch -2 keeps its partitions only for the session timeout (2 s): then "
    "it is removed (group epoch 4, A takes everything), and the instance coming back is a new member that "
    "makes A give up partitions again.",
    rule="GroupMetadataManager.consumerGroupStaticMemberGroupLeave (the session timer keeps running)",
    settings=SHORT_SESSION,
    sanity=expect_all(
        ("leave.B.static", {"member_epoch": -2}),
        ("heartbeat.A.after_B_expired", {"member_epoch": 4, "assignment": {T: [0, 1, 2, 3]}}),
        ("rejoin.B", {"member_epoch": 5, "assignment": {}}),
        ("heartbeat.A", {"member_epoch": 5, "assignment": {T: [0, 1]}}),
    ),
)
async def consumer_group_static_member_expires_after_leaving(ctx: ScenarioContext) -> Outcome:
    tops = await topics(ctx, 4)
    a, b = await pair(ctx, tops, static=True)
    ctx.record("leave.B.static", await b.leave(-2))
    answer = await beat_until(a, lambda r: r.assignment is not None)
    ctx.record("heartbeat.A.after_B_expired", answer)
    await describe(ctx, "describe.after_expiry", tops)
    restarted = await consumer(ctx, "b2", tops, instance_id="B", member_id="member-b-restarted")
    ctx.record("rejoin.B", await restarted.join(tops.names))
    ctx.record("heartbeat.A", await a.beat())
    await describe(ctx, "describe", tops)
    return ctx.outcome


@scenario(
    "Rebalance timeout (A joined with 1 s): A is asked to revoke 2,3 and keeps heartbeating without ever "
    "reporting the revocation; after its rebalance timeout it is removed (UNKNOWN_MEMBER_ID) and B gets "
    "all four partitions at epoch 4.",
    rule="GroupMetadataManager.scheduleConsumerGroupRebalanceTimeout (the member's RebalanceTimeoutMs)",
    settings=CONSUMER,
    sanity=expect_all(
        ("heartbeat.A.revoke", {"member_epoch": 2, "assignment": {T: [0, 1]}}),
        ("heartbeat.A.fenced", {"error_code": "UNKNOWN_MEMBER_ID"}),
        ("heartbeat.B", {"member_epoch": 4, "assignment": {T: [0, 1, 2, 3]}}),
    ),
)
async def consumer_group_rebalance_timeout_fences_member(ctx: ScenarioContext) -> Outcome:
    tops = await topics(ctx, 4)
    a = await consumer(ctx, "a", tops)
    b = await consumer(ctx, "b", tops)
    ctx.record("join.A", await a.join(tops.names, rebalance_timeout_ms=1000))
    await a.ack()
    ctx.record("join.B", await b.join(tops.names))
    ctx.record("heartbeat.A.revoke", await a.beat())
    loop = asyncio.get_running_loop()
    started = loop.time()
    deadline = started + TIMEOUT_WAIT_S
    # A goes on reporting all four partitions as owned; how many heartbeats that takes is timing.
    while (answer := await a.beat()).ok and loop.time() < deadline:
        await asyncio.sleep(0.2)
    ctx.fact("removed_after_the_rebalance_timeout", loop.time() - started >= 0.8)
    ctx.record("heartbeat.A.fenced", answer)
    ctx.record("heartbeat.B", await b.beat())
    await describe(ctx, "describe", tops)
    return ctx.outcome


@scenario(
    "group.consumer.assignment.interval.ms = 2 s: B joining right after the first assignment bumps the "
    "group epoch to 3, but the target is not recomputed, so B is answered at the assignment epoch 2 with "
    "nothing (Assigning); after the interval B's heartbeat computes the target for epoch 3.",
    rule="GroupMetadataManager.maybeUpdateTargetAssignment, canComputeNextTargetAssignment",
    settings=ASSIGNMENT_INTERVAL,
    sanity=expect_all(
        ("join.B", {"member_epoch": 2, "assignment": {}}),
        ("describe.within_interval", {"group_state": "Assigning", "group_epoch": 3, "assignment_epoch": 2}),
        ("heartbeat.B.after_interval", {"member_epoch": 3}),
        ("heartbeat.A.after_interval", {"member_epoch": 2, "assignment": {T: [0, 1]}}),
    ),
)
async def consumer_group_assignment_interval_defers_target(ctx: ScenarioContext) -> Outcome:
    tops = await topics(ctx, 4)
    a = await consumer(ctx, "a", tops)
    b = await consumer(ctx, "b", tops)
    loop = asyncio.get_running_loop()
    ctx.record("join.A", await a.join(tops.names))
    computed = loop.time()
    await a.ack()
    ctx.record("join.B", await b.join(tops.names))
    ctx.record("heartbeat.A.within_interval", await a.beat())
    await describe(ctx, "describe.within_interval", tops)
    interval_s = (ctx.settings.consumer_assignment_interval_ms or 0) / 1000
    if loop.time() - computed >= interval_s:  # a loaded machine: "within" may have been after it
        raise SetUpRaced(f"B's join and the describe took over the {interval_s:g} s interval after A's")
    await asyncio.sleep(max(0.0, computed + interval_s + 0.3 - loop.time()))
    ctx.record("heartbeat.B.after_interval", await b.beat())
    ctx.record("heartbeat.A.after_interval", await a.beat())
    await describe(ctx, "describe.after_interval", tops)
    return ctx.outcome


@scenario(
    "group.consumer.max.size = 2 on a group of two static members: a third member is "
    "GROUP_MAX_SIZE_REACHED; so is a restart of B with a new member id after B left with epoch -2 (the "
    "check counts members before the replacement).",
    rule="GroupMetadataManager.throwIfConsumerGroupIsFull",
    settings=CONSUMER_MAX_2,
    sanity=expect_all(
        ("join.C", {"error_code": "GROUP_MAX_SIZE_REACHED"}),
        ("rejoin.B.new_member_id", {"error_code": "GROUP_MAX_SIZE_REACHED"}),
    ),
)
async def consumer_group_max_size(ctx: ScenarioContext) -> Outcome:
    tops = await topics(ctx, 4)
    a, b = await pair(ctx, tops, static=True)
    c = await consumer(ctx, "c", tops)
    ctx.record("join.C", await c.join(tops.names))
    ctx.record("leave.B.static", await b.leave(-2))
    restarted = await consumer(ctx, "b2", tops, instance_id="B", member_id="member-b-restarted")
    ctx.record("rejoin.B.new_member_id", await restarted.join(tops.names))
    ctx.record("rejoin.B.same_member_id", await b.join(tops.names))
    ctx.record("heartbeat.A", await a.beat())
    await describe(ctx, "describe", tops)
    return ctx.outcome


# --------------------------------------------------------------------------------------------------
# ConsumerGroupDescribe, and the classic APIs on consumer-protocol groups


@scenario(
    "ConsumerGroupDescribe v0 and v1 with several ids, one unknown and one repeated: answered per id in "
    "request order (the repeated one twice; the unknown one GROUP_ID_NOT_FOUND 'Group ... not found.' with "
    "an empty state); rack id and instance id shown; v0 has no member type; authorized operations when "
    "asked (no authorizer: READ, DELETE, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS). No ids, no groups.",
    rule="GroupMetadataManager.consumerGroupDescribe; ConsumerGroup.asDescribedGroup",
    settings=CONSUMER,
    sanity=checks(
        lambda outcome: assert_equal(len(_items(outcome.get("describe.v1"), "describe.v1")), 3),
        expect_member("describe", "member-a", member_type=1, rack_id="rack-1", instance_id="A"),
        lambda outcome: assert_equal(outcome.get("describe.without_operations"), -2147483648),
    ),
)
async def consumer_group_describe_variants(ctx: ScenarioContext) -> Outcome:
    tops = await topics(ctx, 3)
    a = await consumer(ctx, "a", tops, instance_id="A")
    a.rack_id = "rack-1"
    await a.join(tops.names)
    await a.ack()
    conn = await ctx.observer()
    unknown = ctx.new_group()
    for version in (0, 1):
        request = d.consumer_group_describe(
            version, ctx.group, unknown, ctx.group, include_authorized_operations=True
        )
        raw = await conn.request(request)
        ctx.record(
            f"describe.v{version}",
            [d.ConsumerGroupView.of(raw, tops.by_id, i) for i in range(len(raw.groups))],
        )
    ctx.record("describe.without_operations", (await describe(ctx, "describe", tops)).authorized_operations)
    ctx.record("describe.no_ids", list((await conn.request(d.consumer_group_describe(1))).groups))
    return ctx.outcome


@scenario(
    "DescribeGroups does not describe a consumer-protocol group: v0-v5 answer Dead with no error and no "
    "members, v6 GROUP_ID_NOT_FOUND 'Group ... is not a classic group.'. ListGroups lists it with protocol "
    "type 'consumer', state Stable (v4+) and type 'consumer' (v5+); state and type filters are "
    "case-insensitive.",
    rule="GroupMetadataManager.describeGroups (classicGroup throws GroupIdNotFoundException), listGroups; "
    "ConsumerGroup.isInStates",
    settings=CONSUMER,
    sanity=lambda outcome: assert_equal(
        outcome.get("list_groups.types.classic"), {"error_code": "NONE", "groups": {"group": None}}
    ),
)
async def consumer_group_in_describe_groups_and_list_groups(ctx: ScenarioContext) -> Outcome:
    tops = await topics(ctx, 2)
    a = await consumer(ctx, "a", tops)
    await a.join(tops.names)
    await a.ack()
    conn = await ctx.observer()
    for version in (0, 5, 6):
        ctx.record(f"describe_groups.v{version}", await conn.request(d.describe_groups(version, ctx.group)))
    ours = {"group": ctx.group}
    for version in range(6):
        ctx.record(f"list_groups.v{version}", listed(await conn.request(d.list_groups(version)), ours))
    for state in ("Stable", "stable", "Empty"):
        raw = await conn.request(d.list_groups(5, states_filter=[state]))
        ctx.record(f"list_groups.states.{state}", listed(raw, ours))
    for group_type in ("consumer", "Consumer", "classic"):
        raw = await conn.request(d.list_groups(5, types_filter=[group_type]))
        ctx.record(f"list_groups.types.{group_type}", listed(raw, ours))
    return ctx.outcome


@scenario(
    "A ConsumerGroupHeartbeat into a live classic group whose protocol type is not 'consumer' (here "
    "'connect'): joining is GROUP_ID_NOT_FOUND ('Cannot upgrade classic group ... does not use the consumer "
    "embedded protocol.'), other heartbeats and leaves 'Group ... is not a consumer group.'; "
    "ConsumerGroupDescribe says the same, and the classic group is untouched.",
    rule="GroupMetadataManager.getOrMaybeCreateConsumerGroup, validateOnlineUpgrade, consumerGroup",
    settings=CONSUMER,
    sanity=expect_all(
        ("join.A", {"error_code": "GROUP_ID_NOT_FOUND"}),
        ("consumer_group_describe", {"error_code": "GROUP_ID_NOT_FOUND"}),
        ("classic.heartbeat.W", {"error_code": "NONE"}),
    ),
)
async def consumer_group_heartbeat_into_classic_group(ctx: ScenarioContext) -> Outcome:
    tops = await topics(ctx, 2)
    connect = await ctx.member("W", protocols=(("sticky", b"\x00"),))
    ctx.record("classic.join", await connect.join(9, protocol_type="connect").result())
    assignments = [(connect.member_id, b"x")]
    ctx.record("classic.sync", await connect.sync(protocol_type="connect", assignments=assignments).result())
    a = await consumer(ctx, "a", tops)
    ctx.record("join.A", await a.join(tops.names))
    ctx.record("heartbeat.A.epoch_1", await a.send(epoch=1).result())
    ctx.record("leave.A", await a.leave())
    await describe(ctx, "consumer_group_describe", tops)
    ctx.record("classic.heartbeat.W", await connect.heartbeat().result())
    await ctx.snapshot("describe_groups")
    return ctx.outcome


@scenario(
    "Classic requests at a consumer-protocol group: JoinGroup with protocol type 'connect' (static or "
    "dynamic) is INCONSISTENT_GROUP_PROTOCOL with an empty member id; Heartbeat and SyncGroup with a "
    "consumer-protocol member's id are UNKNOWN_MEMBER_ID; the member is unaffected.",
    rule="GroupMetadataManager.classicGroupJoinToConsumerGroup (throwIfClassicProtocolIsNotSupported), "
    "classicGroupHeartbeatToConsumerGroup, classicGroupSyncToConsumerGroup "
    "(throwIfMemberDoesNotUseClassicProtocol)",
    settings=CONSUMER,
    sanity=expect_all(
        ("join_group.connect", {"error_code": "INCONSISTENT_GROUP_PROTOCOL", "member_id": ""}),
        ("heartbeat.v4", {"error_code": "UNKNOWN_MEMBER_ID"}),
        ("heartbeat.A", {"error_code": "NONE", "member_epoch": 2}),
    ),
)
async def consumer_group_classic_requests(ctx: ScenarioContext) -> Outcome:
    tops = await topics(ctx, 2)
    a = await consumer(ctx, "a", tops)
    await a.join(tops.names)
    await a.ack()
    joiner = await ctx.member("J")
    ctx.record("join_group.connect", await joiner.join(9, protocol_type="connect").result())
    dynamic = await ctx.member(None, client_id="dyn")
    ctx.record("join_group.connect.dynamic", await dynamic.join(9, protocol_type="connect").result())
    heartbeat = d.heartbeat(4, ctx.group, generation=2, member_id=a.member_id)
    ctx.record("heartbeat.v4", await a.conn.request(heartbeat))
    sync = d.sync_group(
        5, ctx.group, generation=2, member_id=a.member_id, protocol_type="consumer", protocol_name="range"
    )
    ctx.record("sync_group.v5", await a.conn.request(sync))
    ctx.record("heartbeat.A", await a.beat())
    await describe(ctx, "describe", tops)
    return ctx.outcome


@scenario(
    "LeaveGroup v5 (what Admin.removeMembersFromConsumerGroup sends) removes consumer-protocol members by "
    "instance id or member id, answering each; an unknown instance is UNKNOWN_MEMBER_ID. Two removals bump "
    "the group epoch once; the removed members' heartbeats are unknown; the last member's removal leaves "
    "the group Empty.",
    rule="GroupMetadataManager.classicGroupLeaveToConsumerGroup (consumerGroupFenceMembers)",
    settings=CONSUMER,
    sanity=expect_all(
        ("describe.after_removal", {"group_epoch": 5, "group_state": "Assigning"}),
        ("heartbeat.A", {"member_epoch": 5, "assignment": {T: [0, 1, 2, 3]}}),
        ("heartbeat.B", {"error_code": "UNKNOWN_MEMBER_ID"}),
        ("describe", {"group_state": "Empty"}),
    ),
)
async def consumer_group_leave_group_removes_members(ctx: ScenarioContext) -> Outcome:
    tops = await topics(ctx, 4)
    a = await consumer(ctx, "a", tops)
    b = await consumer(ctx, "b", tops, instance_id="B")
    c = await consumer(ctx, "c", tops)
    members = [a, b, c]
    for n, member in enumerate(members, start=1):
        await member.join(tops.names)
        await settle(members[:n])
    await describe(ctx, "describe.stable", tops)
    admin = await ctx.connect("admin")
    leave = d.leave_group(
        5, ctx.group, members=[("", "B", "removed by admin"), (c.member_id, None), ("", "Z")]
    )
    ctx.record("leave_group", await admin.request(leave))
    await describe(ctx, "describe.after_removal", tops)
    ctx.record("heartbeat.A", await a.beat())
    ctx.record("ack.A", await a.ack())
    ctx.record("heartbeat.B", await b.beat())
    ctx.record("heartbeat.C", await c.beat())
    leave_a = d.leave_group(3, ctx.group, members=[(a.member_id, None)])
    ctx.record("leave_group.v3.A", await admin.request(leave_a))
    await describe(ctx, "describe", tops)
    return ctx.outcome


@scenario(
    "Once every member has left (epoch -1 each), the group is Empty: the group epoch counts the leaves (5), "
    "the assignment epoch stays at the last target (3), no members; ListGroups shows Empty. DeleteGroups is "
    "NON_EMPTY_GROUP while members remain and deletes the empty group; a group joined after that starts "
    "again at epoch 2.",
    rule="ConsumerGroup.validateDeleteGroup; GroupMetadataManager.consumerGroupFenceMember",
    settings=CONSUMER,
    sanity=expect_all(
        ("describe.empty", {"group_state": "Empty", "group_epoch": 5, "assignment_epoch": 3, "members": []}),
        ("rejoin.A", {"member_epoch": 6}),
        ("describe.deleted", {"error_code": "GROUP_ID_NOT_FOUND"}),
        ("join.B.after_delete", {"member_epoch": 2}),
    ),
)
async def consumer_group_empty_after_members_leave(ctx: ScenarioContext) -> Outcome:
    tops = await topics(ctx, 4)
    a, b = await pair(ctx, tops)
    admin = await ctx.connect("admin")
    ctx.record("delete_groups.live", await admin.request(d.delete_groups(2, ctx.group)))
    ctx.record("leave.A", await a.leave())
    ctx.record("leave.B", await b.leave())
    await describe(ctx, "describe.empty", tops)
    ctx.record("list_groups", listed(await admin.request(d.list_groups(5)), {"group": ctx.group}))
    ctx.record("rejoin.A", await a.join(tops.names))
    await describe(ctx, "describe.rejoined", tops)
    ctx.record("leave.A.again", await a.leave())
    ctx.record("delete_groups.empty", await admin.request(d.delete_groups(2, ctx.group)))
    await describe(ctx, "describe.deleted", tops)
    ctx.record("join.B.after_delete", await b.join(tops.names))
    return ctx.outcome


@scenario(
    "OffsetCommit from consumer-protocol members (A holds partition 0 since epoch 2, now at epoch 3): v9 "
    "with the current epoch, or an older one no older than the partition's assignment epoch, is accepted; "
    "a greater epoch, an older one or a partition the member does not hold is STALE_MEMBER_EPOCH (for "
    "every partition of the request); v8 is UNSUPPORTED_VERSION; no member id on a non-empty group is "
    "UNKNOWN_MEMBER_ID.",
    rule="ConsumerGroup.validateOffsetCommit, createAssignmentEpochValidator; "
    "OffsetMetadataManager.commitOffset",
    settings=CONSUMER,
    sanity=checks(
        lambda outcome: assert_equal(partition_errors(outcome, "commit.v9.previous_epoch"), ["NONE"]),
        lambda outcome: assert_equal(
            partition_errors(outcome, "commit.v8.current_epoch"), ["UNSUPPORTED_VERSION"]
        ),
        lambda outcome: assert_equal(
            partition_errors(outcome, "commit.v9.previous_epoch.held_and_not_held"),
            ["STALE_MEMBER_EPOCH", "STALE_MEMBER_EPOCH"],
        ),
    ),
)
async def consumer_group_member_commits_offsets(ctx: ScenarioContext) -> Outcome:
    tops = await topics(ctx, 2)
    t1 = tops.names[0]
    a, b = await pair(ctx, tops)
    for label, version, member_id, epoch in (
        ("v9.current_epoch", 9, a.member_id, 3),
        ("v9.previous_epoch", 9, a.member_id, 2),
        ("v9.greater_epoch", 9, a.member_id, 4),
        ("v9.older_than_assignment", 9, a.member_id, 1),
        ("v9.unknown_member", 9, "member-x", 3),
        ("v9.no_member", 9, "", -1),
        ("v8.current_epoch", 8, a.member_id, 3),
        ("v8.no_member", 8, "", -1),
        ("v9.B.partition_of_A", 9, b.member_id, 3),
    ):
        request = d.offset_commit(
            version, ctx.group, generation=epoch, member_id=member_id, offsets={t1: {0: 5}}
        )
        ctx.record(f"commit.{label}", await a.conn.request(request))
    both = d.offset_commit(9, ctx.group, generation=2, member_id=a.member_id, offsets={t1: {0: 6, 1: 6}})
    ctx.record("commit.v9.previous_epoch.held_and_not_held", await a.conn.request(both))
    ctx.record("fetch", await a.conn.request(d.offset_fetch(8, ctx.group, partitions={t1: [0, 1]})))
    return ctx.outcome


@scenario(
    "Offset retention in consumer-protocol groups: each group had a member, which left (both Empty), then "
    "got an admin commit (OffsetCommit v2, no member) of partition 0 with a retention time of 1 s; the "
    "second group also got partition 1 without one (v9). 3 s later the first group's offset is gone and, "
    "empty with no offset left, so is the group (ConsumerGroupDescribe GROUP_ID_NOT_FOUND, not listed); "
    "the second group keeps partition 1's offset, and itself.",
    rule="OffsetMetadataManager.cleanupExpiredOffsets; ConsumerGroup.offsetExpirationCondition; "
    "GroupCoordinatorShard.cleanupGroupMetadata",
    settings=OFFSET_EXPIRY,
    sanity=expect_all(
        ("describe.first.after", {"error_code": "GROUP_ID_NOT_FOUND"}),
        ("describe.second.after", {"group_state": "Empty"}),
    ),
)
async def consumer_group_offsets_expire_and_the_empty_group_with_them(ctx: ScenarioContext) -> Outcome:
    tops = await topics(ctx, 2)
    t1 = tops.names[0]
    first, second = ctx.group, ctx.new_group()
    admin = await ctx.connect("admin")
    for label, group in (("first", first), ("second", second)):
        member = await consumer(ctx, f"a-{label}", tops, group=group)
        await member.join(tops.names)
        ctx.record(f"leave.{label}", await member.leave())
        expiring = d.offset_commit(2, group, offsets={t1: {0: 5}}, retention_ms=1000)
        ctx.record(f"commit.{label}.v2_retention", await admin.request(expiring))
    kept = d.offset_commit(9, second, offsets={t1: {1: 7}})
    ctx.record("commit.second.v9", await admin.request(kept))
    # Empty, the second group has no offset from its member's leave to the first commit, and none that
    # stays from the retention commit's expiry to the v9 commit: a cleanup that falls in either gap (a
    # request late on a loaded machine) deletes it, and the commit after it makes a new classic group.
    # That outcome would say nothing about the backend, so the scenario runs again with new groups.
    now = listed(await admin.request(d.list_groups(5)), {"second": second})["groups"]
    assert isinstance(now, dict)
    if getattr(now["second"], "group_type", None) != "consumer":
        raise SetUpRaced(f"the second group is not a consumer group after its commits: {now['second']!r}")
    for label, group in (("first", first), ("second", second)):
        fetched = await admin.request(d.offset_fetch(8, group, partitions={t1: [0, 1]}))
        ctx.record(f"fetch.{label}.before", fetched)
    await asyncio.sleep(3.0)
    for label, group in (("first", first), ("second", second)):
        fetched = await admin.request(d.offset_fetch(8, group, partitions={t1: [0, 1]}))
        ctx.record(f"fetch.{label}.after", fetched)
        await describe(ctx, f"describe.{label}.after", tops, group)
    ctx.record(
        "list_groups", listed(await admin.request(d.list_groups(5)), {"first": first, "second": second})
    )
    return ctx.outcome
