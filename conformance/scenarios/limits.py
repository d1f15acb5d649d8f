"""Session timeout bounds, group.max.size, message.max.bytes and the longest string Kafka reads."""

from __future__ import annotations

from kio.schema.errors import ErrorCode
from kio.static.protocol import RequestPayload

from conformance import driver as d
from conformance.scenario import (
    KAFKA_DEFAULTS,
    MAX_SIZE_2,
    Outcome,
    ScenarioContext,
    expect_all,
    join_all,
    partition_plan,
    scenario,
    setup_s2,
    sync_all,
)


@scenario(
    "Session timeout bounds with Kafka's default bounds (6000..1800000 ms): 5999 and 1800001 are "
    "INVALID_SESSION_TIMEOUT with the request's member id echoed (and a new group is created, Empty); 6000 "
    "and 1800000 pass (MEMBER_ID_REQUIRED).",
    rule="§7.24; §1.3 check 1",
    settings=KAFKA_DEFAULTS,
    sanity=expect_all(
        ("join.5999", {"error_code": "INVALID_SESSION_TIMEOUT"}),
        ("join.6000", {"error_code": "MEMBER_ID_REQUIRED"}),
    ),
)
async def session_timeout_bounds(ctx: ScenarioContext) -> Outcome:
    c = await ctx.member(None, client_id="c")
    for session in (5999, 1_800_001, 6000, 1_800_000):
        ctx.record(f"join.{session}", await c.join(9, member_id="", session_ms=session).result())
    ctx.record("join.5999.with_member_id", await c.join(9, member_id="bogus", session_ms=5999).result())
    a = await ctx.member("A")
    ctx.record("join.static.5999", await a.join(5, session_ms=5999).result())
    await ctx.snapshot("describe")
    return ctx.outcome


@scenario(
    "group.max.size = 2 on a full Stable group: a third static or dynamic member is GROUP_MAX_SIZE_REACHED "
    "with an empty member id, and the group is untouched.",
    rule="§1.13 Stable: has(member) || size < max",
    settings=MAX_SIZE_2,
    sanity=expect_all(("join.C", {"error_code": "GROUP_MAX_SIZE_REACHED", "member_id": ""})),
)
async def max_size_rejects_new_members(ctx: ScenarioContext) -> Outcome:
    await setup_s2(ctx)
    c = await ctx.member("C")
    ctx.record("join.C", await c.join(9).result())
    dyn = await ctx.member(None, client_id="dyn")
    ctx.record("join.dynamic.v3", await dyn.join(3).result())
    ctx.record("join.dynamic.v4", await dyn.join(4).result())
    await ctx.snapshot("describe")
    return ctx.outcome


@scenario(
    "Quirk: with group.max.size = 2 and the group full, a static member restarting (empty member id, its own "
    "instance id) is GROUP_MAX_SIZE_REACHED although it would only replace itself; with its known id it "
    "rejoins.",
    rule="§1.13 quirk (KAFKA-20601 classic path); §6.10",
    settings=MAX_SIZE_2,
    sanity=expect_all(("restart.A", {"error_code": "GROUP_MAX_SIZE_REACHED"})),
)
async def max_size_rejects_static_restart_when_full(ctx: ScenarioContext) -> Outcome:
    a, b = await setup_s2(ctx)
    ctx.record("restart.A", await a.join(9, member_id="").result())
    ctx.record("restart.B", await b.join(5, member_id="").result())
    ctx.record("rejoin.B.known_id", await b.join(9).result())
    ctx.record("heartbeat.A", await a.heartbeat().result())
    await ctx.snapshot("describe")
    return ctx.outcome


@scenario(
    "group.max.size = 2 while PreparingRebalance counts only members that have rejoined: a newcomer is let "
    "in while fewer than 2 have rejoined, and a returning member that would exceed the size is kicked out.",
    rule="§1.13 PreparingRebalance (testLastJoiningMembersAreKickedOutWhenReJoiningGroupWithMaxSize)",
    settings=MAX_SIZE_2,
)
async def max_size_in_preparing_rebalance(ctx: ScenarioContext) -> Outcome:
    a, b = await setup_s2(ctx)
    rejoin_a = a.join(9)
    await rejoin_a.assert_parked(200)
    c = await ctx.member("C")
    join_c = c.join(9)
    await ctx.wait_members(3)
    await ctx.state("state.after_C")
    ctx.record("rejoin.B", await b.join(9).result())
    ctx.record("rejoin.A", await rejoin_a.result())
    ctx.record("join.C", await join_c.result())
    await sync_all(ctx, [a, c])
    await ctx.snapshot("describe")
    return ctx.outcome


# --- message.max.bytes and Kafka's longest protocol string -----------------------------------------------
#
# Kafka's group coordinator writes a group (every member's subscription and assignment) as one record of
# __consumer_offsets, and an OffsetCommit's offsets as one batch; a batch over the topic's
# max.message.bytes (the broker's message.max.bytes, 1048588 by default) is refused and the request
# answered UNKNOWN_SERVER_ERROR. Its generated readers refuse any string over 32767 bytes and close the
# connection; an answer it cannot write (a member id over 32767 bytes) is UNKNOWN_SERVER_ERROR.

OVER_LIMIT = 1_200_000  # bytes of user data: the group record is over 1048588
STRING_MAX = 0x7FFF
MEMBER_ID_SUFFIX = 37  # "-" and a UUID


def _big_subscription(size: int) -> bytes:
    return d.subscription("t1", user_data=b"u" * size)


def _join(ctx: ScenarioContext, result: d.JoinResult) -> dict[str, d.Json]:
    """A JoinGroup answer without the (large) member metadata: its size stands for it."""
    return {
        "error_code": ctx.norm.value(result.error),
        "generation": result.generation,
        "member_id": ctx.norm.text(result.member_id),
        "leader": ctx.norm.text(result.leader),
        "protocol_type": result.protocol_type,
        "protocol_name": result.protocol_name,
        "members": [
            [member, size]
            for member, size in sorted((ctx.norm.text(m.member_id), len(m.metadata)) for m in result.members)
        ],
    }


def _sync(result: d.SyncResult) -> dict[str, d.Json]:
    return {"error_code": result.error.name.upper(), "assignment_bytes": len(result.assignment)}


async def _closes(ctx: ScenarioContext, label: str, request: RequestPayload) -> None:
    """Records whether the broker answers `request` or closes the connection, on a connection of its own."""
    conn = await ctx.connect(label)
    try:
        ctx.record(label, await conn.request(request))
    except d.ConnectionClosed:
        ctx.fact(label, "connection closed")


@scenario(
    "A group record over message.max.bytes (1048588): a static member whose subscription is 1.2 MB joins "
    "and is answered with it (a join writes no member metadata), but the leader's SyncGroup cannot store "
    "the group: UNKNOWN_SERVER_ERROR, and the group prepares a rebalance. Rejoining with a small "
    "subscription it becomes Stable.",
    rule="message.max.bytes of __consumer_offsets; appendGroupMetadataErrorToResponseError "
    "(MESSAGE_TOO_LARGE -> UNKNOWN_SERVER_ERROR); resetAndPropagateAssignmentWithError",
    sanity=expect_all(("sync.A", {"error_code": "UNKNOWN_SERVER_ERROR"})),
)
async def group_record_over_message_max_bytes(ctx: ScenarioContext) -> Outcome:
    a = await ctx.member("A", protocols=(("range", _big_subscription(OVER_LIMIT)),))
    ctx.fact("join.A", _join(ctx, await a.join().result()))
    ctx.fact("sync.A", _sync(await a.sync(assignments=[(a.member_id, d.assignment({"t1": [0]}))]).result()))
    await ctx.state("state.after_sync")
    ctx.fact("rejoin.A", _join(ctx, await a.join(protocols=(("range", d.subscription("t1")),)).result()))
    plan = [(a.member_id, d.assignment({"t1": [0]}))]
    ctx.fact("sync.A.small", _sync(await a.sync(assignments=plan).result()))
    await ctx.snapshot("describe")
    return ctx.outcome


@scenario(
    "message.max.bytes counts the whole group: three members with 300 KB subscriptions each (0.9 MB) are "
    "stored and Stable; three with 400 KB each (1.2 MB) are not: the followers parked in SyncGroup and the "
    "leader are all answered UNKNOWN_SERVER_ERROR, and the group prepares a rebalance.",
    rule="message.max.bytes of __consumer_offsets; resetAndPropagateAssignmentWithError",
)
async def group_record_over_message_max_bytes_several_members(ctx: ScenarioContext) -> Outcome:
    for label, size, group in (("fits", 300_000, ctx.new_group()), ("over", 400_000, ctx.group)):
        protocols = (("range", _big_subscription(size)),)
        members = [await ctx.member(x, protocols=protocols, group=group) for x in ("A", "B", "C")]
        joined = await join_all(ctx, members)
        for member, result in zip(members, joined, strict=True):
            ctx.fact(f"{label}.join.{member.instance_id}", _join(ctx, result))
        followers = [m for m, r in zip(members, joined, strict=True) if not r.is_leader]
        leader = next(m for m, r in zip(members, joined, strict=True) if r.is_leader)
        parked = [(m, m.sync()) for m in followers]
        for _, pending in parked:
            await pending.assert_parked(200)
        plan = partition_plan(ctx, leader.joined[-1])
        ctx.fact(f"{label}.sync.leader", _sync(await leader.sync(assignments=plan).result()))
        for member, pending in parked:
            ctx.fact(f"{label}.sync.{member.instance_id}", _sync(await pending.result()))
        await ctx.state(f"{label}.state", group=group)
    return ctx.outcome


@scenario(
    "An assignment that makes the group record pass message.max.bytes: the leader's SyncGroup with 1.2 MB "
    "for one member is UNKNOWN_SERVER_ERROR for the leader and the parked follower, and the group prepares "
    "a rebalance; after both rejoin, a small assignment is stored and the group is Stable.",
    rule="message.max.bytes of __consumer_offsets; resetAndPropagateAssignmentWithError",
)
async def sync_assignment_over_message_max_bytes(ctx: ScenarioContext) -> Outcome:
    a = await ctx.member("A")
    b = await ctx.member("B")
    await join_all(ctx, [a, b])
    follower = b.sync()
    await follower.assert_parked(200)
    oversized = [(a.member_id, d.assignment({"t1": [0]})), (b.member_id, b"a" * OVER_LIMIT)]
    ctx.fact("sync.A", _sync(await a.sync(assignments=oversized).result()))
    ctx.fact("sync.B", _sync(await follower.result()))
    await ctx.state("state.after_sync")
    rejoin_a = a.join()
    await rejoin_a.assert_parked(100)
    ctx.fact("rejoin.B", _join(ctx, await b.join().result()))
    ctx.fact("rejoin.A", _join(ctx, await rejoin_a.result()))
    await sync_all(ctx, [a, b])
    await ctx.snapshot("describe")
    return ctx.outcome


@scenario(
    "A static member that restarts into a Stable group with a 1.2 MB subscription (the group's protocol "
    "unchanged) would be persisted at once; the record is over message.max.bytes, so the JoinGroup is "
    "UNKNOWN_SERVER_ERROR with no member id, and the replacement is undone: the old member id still "
    "heartbeats and the group keeps the old subscription.",
    rule="§6.10 static replacement persisted before answering; message.max.bytes",
    sanity=expect_all(("restart.B", {"error_code": "UNKNOWN_SERVER_ERROR", "member_id": ""})),
)
async def static_rejoin_over_message_max_bytes(ctx: ScenarioContext) -> Outcome:
    a, b = await setup_s2(ctx, record=False)
    old_b = await ctx.restart(b)
    big = (("range", _big_subscription(OVER_LIMIT)), ("roundrobin", d.subscription("t1")))
    ctx.fact("restart.B", _join(ctx, await b.join(member_id="", protocols=big).result()))
    ctx.record("heartbeat.B.old", await old_b.heartbeat().result())
    ctx.record("heartbeat.A", await a.heartbeat().result())
    await ctx.snapshot("describe")
    return ctx.outcome


@scenario(
    "A batch of offset commits over message.max.bytes: 300 partitions with 4000 bytes of metadata each "
    "(1.2 MB) are all UNKNOWN_SERVER_ERROR and nothing is committed; 200 of them (0.8 MB) are committed.",
    rule="message.max.bytes of __consumer_offsets; handleOperationException (MESSAGE_TOO_LARGE -> "
    "UNKNOWN_SERVER_ERROR)",
)
async def offset_commit_over_message_max_bytes(ctx: ScenarioContext) -> Outcome:
    topic = ctx.new_topic()
    await ctx.ensure_topic(topic, 300)
    conn = await ctx.connect("c")
    for count, group in ((200, ctx.new_group()), (300, ctx.group)):
        offsets = {topic: {p: 7 for p in range(count)}}
        answer = await conn.request(d.offset_commit(9, group, offsets=offsets, metadata="m" * 4000))
        ctx.fact(f"commit.{count}", _count(d.partition_errors(answer)))
        fetched = await conn.request(d.offset_fetch(8, group, partitions=None))
        found = [p.committed_offset for g in fetched.groups for t in g.topics for p in t.partitions]
        ctx.fact(f"fetch.{count}.committed", sum(1 for offset in found if offset >= 0))
    return ctx.outcome


def _count(errors: list[ErrorCode]) -> dict[str, d.Json]:
    counts: dict[str, d.Json] = {}
    for error in errors:
        name = error.name.upper()
        value = counts.get(name, 0)
        counts[name] = (value if isinstance(value, int) else 0) + 1
    return counts


@scenario(
    "Group ids up to 32767 bytes of UTF-8 work (join, commit, fetch); a longer one in any request "
    "(JoinGroup, Heartbeat, OffsetCommit, DescribeGroups; 32768 ASCII bytes, or 10923 three-byte "
    "characters) gets the connection closed without an answer, as Kafka's readers refuse the string.",
    rule="Kafka protocol strings: at most 0x7fff bytes (generated readers)",
)
async def oversized_group_id(ctx: ScenarioContext) -> Outcome:
    await ctx.ensure_topic()
    longest = "g" * STRING_MAX
    ctx.norm.add_group(longest, "<32767 bytes>")
    conn = await ctx.connect("c")
    join = d.join_group(9, longest, protocols=(("range", d.subscription("t1")),))
    ctx.record("join.32767", await conn.request(join))
    ctx.record("commit.32767", await conn.request(d.offset_commit(9, longest, offsets={"t1": {0: 5}})))
    ctx.record("fetch.32767", await conn.request(d.offset_fetch(8, longest, partitions=None)))
    over = "g" * (STRING_MAX + 1)
    await _closes(ctx, "join.32768", d.join_group(9, over, protocols=(("range", d.subscription("t1")),)))
    euro = "€" * 10923
    await _closes(ctx, "join.32769_utf8", d.join_group(9, euro, protocols=(("range", d.subscription("t1")),)))
    await _closes(ctx, "heartbeat.32768", d.heartbeat(4, over, generation=1, member_id="m"))
    await _closes(ctx, "commit.32768", d.offset_commit(9, over, offsets={"t1": {0: 5}}))
    await _closes(ctx, "describe.32768", d.describe_groups(5, over))
    await _closes(ctx, "join.1MB", d.join_group(9, "g" * 1_000_000, protocols=(("range", b"m"),)))
    return ctx.outcome


@scenario(
    "group.instance.id: the member id made from it (the id, '-' and a UUID) must fit in 32767 bytes: an "
    "instance id of 32730 bytes joins; one of 32731 bytes, or a dynamic member whose client id is 32767 "
    "bytes, is UNKNOWN_SERVER_ERROR with no member id; an instance id of 32768 bytes gets the connection "
    "closed.",
    rule="Kafka protocol strings: at most 0x7fff bytes (readers refuse, writers fail: KafkaApis answers "
    "UNKNOWN_SERVER_ERROR)",
)
async def oversized_group_instance_id(ctx: ScenarioContext) -> Outcome:
    protocols = (("range", d.subscription("t1")),)
    for size in (STRING_MAX - MEMBER_ID_SUFFIX, STRING_MAX - MEMBER_ID_SUFFIX + 1):
        group = ctx.new_group()
        conn = await ctx.connect(f"instance-{size}", client_id="c")
        request = d.join_group(9, group, instance_id="i" * size, protocols=protocols)
        result = d.JoinResult.of(await conn.request(request))
        ctx.fact(
            f"join.instance_id.{size}",
            {
                "error_code": result.error.name.upper(),
                "generation": result.generation,
                "member_id_bytes": len(result.member_id.encode()),
                "leader_is_member": result.leader == result.member_id,
                "members": len(result.members),
            },
        )
    conn = await ctx.connect("long-client", client_id="c" * STRING_MAX)
    request = d.join_group(9, ctx.new_group(), protocols=protocols)
    ctx.fact("join.dynamic.client_id.32767", _join(ctx, d.JoinResult.of(await conn.request(request))))
    await _closes(
        ctx,
        "join.instance_id.32768",
        d.join_group(9, ctx.new_group(), instance_id="i" * (STRING_MAX + 1), protocols=protocols),
    )
    return ctx.outcome
