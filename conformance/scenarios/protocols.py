"""Protocol type and protocol selection on JoinGroup."""

from __future__ import annotations

from conformance import driver as d
from conformance.scenario import Outcome, ScenarioContext, expect_all, join_all, scenario, sync_all

M = d.subscription("t1")


@scenario(
    "Protocol mismatches on JoinGroup: an empty protocol type or an empty protocol list into a new group "
    "(which is created all the same, Empty), protocol type 'connect' into a 'consumer' group, and protocols "
    "disjoint from the group's are all INCONSISTENT_GROUP_PROTOCOL with an empty member id.",
    rule="§7.25; §1.14 supportsProtocols",
    sanity=expect_all(("join.connect_into_consumer", {"error_code": "INCONSISTENT_GROUP_PROTOCOL"})),
)
async def protocol_mismatch_on_join(ctx: ScenarioContext) -> Outcome:
    empty_type_group = ctx.new_group()
    x = await ctx.member("X", group=empty_type_group)
    ctx.record("join.empty_protocol_type", await x.join(9, protocol_type="").result())
    await ctx.snapshot("describe.empty_protocol_type", group=empty_type_group)
    no_protocols_group = ctx.new_group()
    y = await ctx.member("Y", group=no_protocols_group)
    ctx.record("join.no_protocols", await y.join(9, protocols=()).result())
    await ctx.snapshot("describe.no_protocols", group=no_protocols_group)
    a = await ctx.member("A")
    ctx.record("join.A", await a.join(9).result())
    await sync_all(ctx, [a])
    b = await ctx.member("B")
    ctx.record("join.connect_into_consumer", await b.join(9, protocol_type="connect").result())
    ctx.record("join.disjoint_protocols", await b.join(9, protocols=(("sticky", M),)).result())
    c = await ctx.member(None, client_id="c")
    ctx.record("join.dynamic.disjoint_v3", await c.join(3, protocols=(("sticky", M),)).result())
    await ctx.snapshot("describe")
    return ctx.outcome


@scenario(
    "Protocol selection: among the protocols every member supports, each member votes for its first; the "
    "most votes win (A prefers range, B and C prefer roundrobin).",
    rule="§1.14 selectProtocol",
    sanity=expect_all(("join.A", {"protocol_name": "roundrobin"})),
)
async def protocol_selected_by_votes(ctx: ScenarioContext) -> Outcome:
    a = await ctx.member("A", protocols=(("range", M), ("roundrobin", M)))
    b = await ctx.member("B", protocols=(("roundrobin", M), ("range", M)))
    c = await ctx.member("C", protocols=(("sticky", M), ("roundrobin", M), ("range", M)))
    ctx.record_each(("join.A", "join.B", "join.C"), await join_all(ctx, [a, b, c]))
    ctx.record_each(("sync.A", "sync.B", "sync.C"), await sync_all(ctx, [a, b, c]))
    await ctx.snapshot("describe")
    return ctx.outcome


@scenario(
    "A sole member cannot switch to a disjoint protocol list: its own current protocols count among the "
    "group's, so a known-id rejoin or a static restart with only 'roundrobin' is "
    "INCONSISTENT_GROUP_PROTOCOL.",
    rule="§1.14 (the member's own protocols are counted); §6.4",
    sanity=expect_all(("rejoin.known_id", {"error_code": "INCONSISTENT_GROUP_PROTOCOL"})),
)
async def sole_member_cannot_switch_protocol(ctx: ScenarioContext) -> Outcome:
    a = await ctx.member("A", protocols=(("range", M),))
    ctx.record("join.A", await a.join(9).result())
    await sync_all(ctx, [a])
    rr = (("roundrobin", M),)
    ctx.record("rejoin.known_id", await a.join(9, protocols=rr).result())
    ctx.record("restart.empty_id", await a.join(9, member_id="", protocols=rr).result())
    ctx.record("heartbeat.A", await a.heartbeat().result())
    await ctx.snapshot("describe")
    return ctx.outcome
