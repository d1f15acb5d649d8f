"""Session timeout bounds and group.max.size."""

from __future__ import annotations

from conformance.scenario import (
    KAFKA_DEFAULTS,
    MAX_SIZE_2,
    Outcome,
    ScenarioContext,
    expect_all,
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
