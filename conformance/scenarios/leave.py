"""LeaveGroup: v0-2 single member, v3+ batches by member id and/or instance id."""

from __future__ import annotations

from conformance import driver as d
from conformance.scenario import Outcome, ScenarioContext, expect_all, scenario, setup_s2, sync_all

BATCH = [("", "A"), ("", "unknown"), ("bogus", "B")]


def _batch_sane(outcome: Outcome) -> None:
    leave = outcome["leave.v3"]
    assert isinstance(leave, dict)
    members = leave["members"]
    assert isinstance(members, list)
    codes = [m["error_code"] for m in members if isinstance(m, dict)]
    assert codes == ["NONE", "UNKNOWN_MEMBER_ID", "FENCED_INSTANCE_ID"], codes
    assert leave["error_code"] == "NONE"


@scenario(
    "Batch LeaveGroup v3/v4/v5 on S2 with [(empty id, A), (empty id, unknown instance), (bogus id, B)]: "
    "top-level NONE, per member NONE / UNKNOWN_MEMBER_ID / FENCED_INSTANCE_ID echoing the request; the group "
    "rebalances and the generation moves only when the join phase completes.",
    rule="§7.18; §1.9 per-member rules",
    sanity=_batch_sane,
)
async def leave_batch_v3_to_v5(ctx: ScenarioContext) -> Outcome:
    for version in (3, 4, 5):
        group = ctx.group if version == 3 else ctx.new_group()
        _, b = await setup_s2(ctx, group=group, record=version == 3)
        batch = [(m, i, "scale down") for m, i in BATCH] if version == 5 else BATCH
        ctx.record(f"leave.v{version}", await b.conn.request(d.leave_group(version, group, members=batch)))
        await ctx.state(f"state.v{version}", group=group)
        ctx.record(f"heartbeat.B.v{version}", await b.heartbeat().result())
        ctx.record(f"rejoin.B.v{version}", await b.join(9).result())
    return ctx.outcome


@scenario(
    "LeaveGroup edge cases: unknown group (v3: top NONE, every member UNKNOWN_MEMBER_ID; v0: top-level "
    "UNKNOWN_MEMBER_ID), unknown member id at v1, and an empty group id (INVALID_GROUP_ID).",
    rule="§7.19 first part; §1.9",
    sanity=expect_all(("leave.empty_group_id.v0", {"error_code": "INVALID_GROUP_ID"})),
)
async def leave_edge_cases(ctx: ScenarioContext) -> Outcome:
    unknown = ctx.new_group()
    conn = await ctx.connect("admin")
    ctx.record(
        "leave.unknown_group.v3",
        await conn.request(d.leave_group(3, unknown, members=[("", "A"), ("x", None)])),
    )
    ctx.record("leave.unknown_group.v0", await conn.request(d.leave_group(0, unknown, member_id="x")))
    ctx.record("leave.empty_group_id.v0", await conn.request(d.leave_group(0, "", member_id="x")))
    ctx.record("leave.empty_group_id.v3", await conn.request(d.leave_group(3, "", members=[("", "A")])))
    await setup_s2(ctx, record=False)
    ctx.record("leave.unknown_member.v1", await conn.request(d.leave_group(1, ctx.group, member_id="nobody")))
    ctx.record("leave.unknown_member.v2", await conn.request(d.leave_group(2, ctx.group, member_id="nobody")))
    ctx.record("leave.no_identity.v3", await conn.request(d.leave_group(3, ctx.group, members=[("", None)])))
    await ctx.state("state")
    await ctx.snapshot("describe.unknown_group", group=unknown)
    return ctx.outcome


@scenario(
    "A static member removed by its member id alone (no instance id) is removed and its instance mapping "
    "cleared: a later JoinGroup with an empty id and the same instance is a new member (it waits for a "
    "rebalance) rather than a replacement.",
    rule="§7.19 last part; §1.9",
)
async def leave_static_member_by_member_id_only(ctx: ScenarioContext) -> Outcome:
    a, b = await setup_s2(ctx)
    leave = d.leave_group(3, ctx.group, members=[(a.member_id, None)])
    ctx.record("leave.A_by_member_id", await b.conn.request(leave))
    ctx.record("heartbeat.B", await b.heartbeat().result())
    ctx.record("rejoin.B", await b.join(9).result())
    await sync_all(ctx, [b])
    rejoin_a = a.join(9, member_id="")
    await rejoin_a.assert_parked(300)
    await ctx.state("state.after_A_join")
    ctx.record("heartbeat.B.2", await b.heartbeat().result())
    rejoin_b = b.join(9)
    ctx.record("join.A", await rejoin_a.result())
    ctx.record("rejoin.B.2", await rejoin_b.result())
    return ctx.outcome


@scenario(
    "The last member leaves: the join phase completes into Empty with the next generation, DescribeGroups "
    "shows Empty with no protocol, a commit with generation -1 and no member is accepted, and DeleteGroups "
    "(refused with NON_EMPTY_GROUP before) now succeeds.",
    rule="§7.20; §1.2 initNextGeneration to Empty; §1.16 DeleteGroups",
    sanity=expect_all(
        ("delete.before", {"results": [{"group_id": "<group>", "error_code": "NON_EMPTY_GROUP"}]})
    ),
)
async def leave_last_member_empties_group(ctx: ScenarioContext) -> Outcome:
    await ctx.ensure_topic()
    a = await ctx.member("A")
    ctx.record("join.A", await a.join(9).result())
    await sync_all(ctx, [a])
    ctx.record("delete.before", await a.conn.request(d.delete_groups(2, ctx.group)))
    ctx.record("leave.A", await a.conn.request(d.leave_group(4, ctx.group, members=[("", "A")])))
    await ctx.snapshot("describe.after_leave")
    commit = d.offset_commit(9, ctx.group, generation=-1, member_id="", offsets={"t1": {0: 7}})
    ctx.record("commit.no_member", await a.conn.request(commit))
    ctx.record("delete.after", await a.conn.request(d.delete_groups(2, ctx.group)))
    await ctx.snapshot("describe.after_delete")
    return ctx.outcome


@scenario(
    "LeaveGroup v0, v1 and v2 of a group's only dynamic member: top-level NONE and the group becomes Empty; "
    "leaving again is UNKNOWN_MEMBER_ID.",
    rule="§1.9 v0-2",
)
async def leave_dynamic_member_v0_to_v2(ctx: ScenarioContext) -> Outcome:
    for version in (0, 1, 2):
        group = ctx.group if version == 0 else ctx.new_group()
        member = await ctx.member(None, client_id=f"c{version}", group=group)
        await member.join(3).result()
        await sync_all(ctx, [member])
        request = d.leave_group(version, group, member_id=member.member_id)
        ctx.record(f"leave.v{version}", await member.conn.request(request))
        await ctx.state(f"state.v{version}", group=group)
        ctx.record(f"leave_again.v{version}", await member.conn.request(request))
    return ctx.outcome


@scenario(
    "Removing a member whose JoinGroup is parked completes that JoinGroup with UNKNOWN_MEMBER_ID (and an "
    "empty member id); the rest of the group carries on with the rebalance.",
    rule="§1.9 removal completes a parked join",
    sanity=expect_all(("join.A", {"error_code": "UNKNOWN_MEMBER_ID"})),
)
async def leave_member_with_parked_join(ctx: ScenarioContext) -> Outcome:
    a, b = await setup_s2(ctx)
    rejoin_a = a.join(9)
    await rejoin_a.assert_parked(300)
    admin = await ctx.connect("admin")
    ctx.record("leave.A", await admin.request(d.leave_group(5, ctx.group, members=[("", "A", "removed")])))
    ctx.record("join.A", await rejoin_a.result())
    ctx.record("heartbeat.B", await b.heartbeat().result())
    ctx.record("rejoin.B", await b.join(9).result())
    await ctx.snapshot("describe")
    return ctx.outcome


@scenario(
    "A KIP-394 pending member can be removed with LeaveGroup by its member id (NONE), and that puts the "
    "Stable group into PreparingRebalance; joining with the removed id afterwards is UNKNOWN_MEMBER_ID.",
    rule="§1.9 pending dynamic member",
)
async def leave_pending_member(ctx: ScenarioContext) -> Outcome:
    a = await ctx.member(None, client_id="ca")
    await a.join(9).result()
    ctx.record("join.A", await a.join(9).result())
    await sync_all(ctx, [a])
    c = await ctx.member(None, client_id="cc")
    ctx.record("first_join.C", await c.join(9).result())
    ctx.record("leave.C", await c.conn.request(d.leave_group(3, ctx.group, members=[(c.member_id, None)])))
    await ctx.state("state")
    ctx.record("join.C", await c.join(9).result())
    ctx.record("heartbeat.A", await a.heartbeat().result())
    return ctx.outcome
