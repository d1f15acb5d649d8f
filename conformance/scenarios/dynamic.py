"""Dynamic members and KIP-394 (MEMBER_ID_REQUIRED), JoinGroup at every version."""

from __future__ import annotations

import asyncio

from conformance import driver as d
from conformance.scenario import Outcome, ScenarioContext, expect_all, join_all, scenario, sync_all


@scenario(
    "KIP-394: a dynamic member's first JoinGroup at v4..v9 gets MEMBER_ID_REQUIRED with a member id and "
    "generation -1; rejoining with that id joins. At v3 the first JoinGroup joins directly.",
    rule="§7.2; §1.3 new member path, dynamic",
    sanity=expect_all(
        ("first_join.v4", {"error_code": "MEMBER_ID_REQUIRED", "member_id": "c4#1", "generation_id": -1}),
        ("rejoin.v9", {"error_code": "NONE", "generation_id": 1, "member_id": "c9#1", "leader": "c9#1"}),
        ("first_join.v3", {"error_code": "NONE", "generation_id": 1}),
    ),
)
async def kip394_member_id_required(ctx: ScenarioContext) -> Outcome:
    members = {}
    for version in range(4, 10):
        group = ctx.group if version == 9 else ctx.new_group()
        member = await ctx.member(None, client_id=f"c{version}", group=group)
        members[version] = member
        ctx.record(f"first_join.v{version}", await member.join(version).result())
    ctx.record("rejoin.v9", await members[9].join(9).result())
    v3 = await ctx.member(None, client_id="c3", group=ctx.new_group())
    ctx.record("first_join.v3", await v3.join(3).result())
    return ctx.outcome


@scenario(
    "A dynamic member's first JoinGroup at v0..v3 joins a new group directly (after the initial delay) and "
    "leads it; v0 carries no rebalance timeout.",
    rule="§1.3 new member path, dynamic v0-3; §2.1",
)
async def dynamic_first_join_v0_to_v3(ctx: ScenarioContext) -> Outcome:
    pending = []
    for version in range(4):
        group = ctx.group if version == 0 else ctx.new_group()
        member = await ctx.member(None, client_id=f"c{version}", group=group)
        pending.append((version, member.join(version)))
    for version, join in pending:
        ctx.record(f"join.v{version}", await join.result())
    return ctx.outcome


@scenario(
    "A KIP-394 pending member (told MEMBER_ID_REQUIRED, not yet rejoined) keeps the join phase open: the "
    "leader's rejoin stays parked until the pending member joins with its id.",
    rule="§7.2 (pending blocks completion); §1.10 hasAllMembersJoined",
    sanity=expect_all(("join.C", {"error_code": "NONE", "generation_id": 2})),
)
async def kip394_pending_member_blocks_join(ctx: ScenarioContext) -> Outcome:
    a = await ctx.member(None, client_id="ca")
    ctx.record("first_join.A", await a.join(9).result())
    ctx.record("join.A", await a.join(9).result())
    ctx.record("sync.A", await a.sync(assignments=[(a.member_id, d.assignment({"t1": [0]}))]).result())
    c = await ctx.member(None, client_id="cc")
    ctx.record("first_join.C", await c.join(9).result())
    await ctx.state("state.with_pending")
    rejoin_a = a.join(9)
    await rejoin_a.assert_parked(500)
    await ctx.state("state.leader_rejoined")
    join_c = c.join(9)
    ctx.record("rejoin.A", await rejoin_a.result())
    ctx.record("join.C", await join_c.result())
    return ctx.outcome


@scenario(
    "A KIP-394 pending member that never rejoins expires after its session timeout; the parked join phase "
    "then completes without it, and its member id is unknown afterwards.",
    rule="§1.3 pendingMembers expiry; §1.11",
)
async def kip394_pending_member_expires(ctx: ScenarioContext) -> Outcome:
    a = await ctx.member(None, client_id="ca", rebalance_ms=4000)
    await a.join(9).result()
    ctx.record("join.A", await a.join(9).result())
    await a.sync(assignments=[(a.member_id, d.assignment({"t1": [0]}))]).result()
    c = await ctx.member(None, client_id="cc", session_ms=600)
    ctx.record("first_join.C", await c.join(9).result())
    loop = asyncio.get_running_loop()
    started = loop.time()
    rejoin_a = a.join(9)
    result = await rejoin_a.result()
    ctx.fact("rejoin.A.before_rebalance_timeout", loop.time() - started < 3.0)
    ctx.record("rejoin.A", result)
    ctx.record("join.C.expired_id", await c.join(9).result())
    return ctx.outcome


@scenario(
    "JoinGroup with a non-empty member id for a group that does not exist is UNKNOWN_MEMBER_ID (static or "
    "dynamic, any version), and the group is not created.",
    rule="§1.3 check 2",
    sanity=expect_all(("join.static.v9", {"error_code": "UNKNOWN_MEMBER_ID", "member_id": "bogus"})),
)
async def join_unknown_group_with_member_id(ctx: ScenarioContext) -> Outcome:
    a = await ctx.member("A")
    ctx.record("join.static.v9", await a.join(9, member_id="bogus").result())
    ctx.record("join.static.v5", await a.join(5, member_id="bogus").result())
    c = await ctx.member(None, client_id="c")
    ctx.record("join.dynamic.v4", await c.join(4, member_id="bogus").result())
    ctx.record("join.dynamic.v1", await c.join(1, member_id="bogus").result())
    await ctx.snapshot("describe")
    return ctx.outcome


@scenario(
    "Dynamic members that do not rejoin before the rebalance timeout are removed when the join phase "
    "completes (static ones would be kept); the removed member is unknown afterwards.",
    rule="§1.10 dynamic members removed on completion",
    sanity=expect_all(("heartbeat.B", {"error_code": "UNKNOWN_MEMBER_ID"})),
)
async def dynamic_member_removed_at_rebalance_timeout(ctx: ScenarioContext) -> Outcome:
    # 2 s: A's sync must come within one rebalance timeout of the join's completion, which a busy
    # machine's broker (a GC pause, the other test workers) has been seen to miss at 0.8 s.
    a = await ctx.member(None, client_id="ca", rebalance_ms=2000)
    b = await ctx.member(None, client_id="cb", rebalance_ms=2000)
    ctx.record_each(("join.A", "join.B"), await join_all(ctx, [a, b], version=3))
    await sync_all(ctx, [a, b])
    rejoin = a.join(3)
    await rejoin.assert_parked(300)
    ctx.record("rejoin.A", await rejoin.result(5.0))
    # A syncs at once: its sync deadline is the same short rebalance timeout, and the group's end state
    # must not depend on how long the checks below take.
    ctx.record_each(("sync.A",), await sync_all(ctx, [a]))
    ctx.record("heartbeat.B", await b.heartbeat(2).result())
    await ctx.snapshot("describe")
    return ctx.outcome
