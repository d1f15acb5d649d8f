"""SyncGroup and Heartbeat by group state, generation and identity."""

from __future__ import annotations

from conformance import driver as d
from conformance.scenario import Outcome, ScenarioContext, expect_all, join_all, scenario, setup_s2, sync_all


@scenario(
    "Heartbeat by state: wrong generation is ILLEGAL_GENERATION, but a fenced instance with a stale "
    "generation is FENCED_INSTANCE_ID; PreparingRebalance is REBALANCE_IN_PROGRESS, CompletingRebalance "
    "NONE; an Empty or unknown group is UNKNOWN_MEMBER_ID.",
    rule="§7.21; §1.7",
    sanity=expect_all(
        ("heartbeat.wrong_generation", {"error_code": "ILLEGAL_GENERATION"}),
        ("heartbeat.fenced_stale_generation", {"error_code": "FENCED_INSTANCE_ID"}),
        ("heartbeat.preparing", {"error_code": "REBALANCE_IN_PROGRESS"}),
        ("heartbeat.completing", {"error_code": "NONE"}),
    ),
)
async def heartbeat_by_state(ctx: ScenarioContext) -> Outcome:
    a, b = await setup_s2(ctx, record=False)
    ctx.record("heartbeat.wrong_generation", await a.heartbeat(generation=0).result())
    ctx.record("heartbeat.stable", await a.heartbeat().result())
    old = await ctx.restart(b)
    ctx.record("restart.B", await b.join(9, member_id="").result())
    ctx.record("heartbeat.fenced_stale_generation", await old.heartbeat(generation=0).result())
    rejoin_a = a.join(9)
    await rejoin_a.assert_parked(200)
    ctx.record("heartbeat.preparing", await b.heartbeat().result())
    rejoin_b = b.join(9)
    await rejoin_a.result()
    await rejoin_b.result()
    ctx.record("heartbeat.completing", await a.heartbeat().result())
    ctx.record("heartbeat.completing.old_generation", await a.heartbeat(generation=1).result())
    await sync_all(ctx, [a, b])
    ctx.record("leave", await a.conn.request(d.leave_group(3, ctx.group, members=[("", "A"), ("", "B")])))
    await ctx.state("state.after_leave")
    ctx.record("heartbeat.empty_group", await a.heartbeat().result())
    unknown = d.heartbeat(4, ctx.new_group(), generation=1, member_id=a.member_id, instance_id="A")
    ctx.record("heartbeat.unknown_group", await a.conn.request(unknown))
    return ctx.outcome


@scenario(
    "The identity check runs before the generation check for every member id: a live member's id sent with "
    "another member's instance id and a wrong generation is FENCED_INSTANCE_ID (not ILLEGAL_GENERATION) on "
    "Heartbeat, SyncGroup and OffsetCommit; with an unknown instance id it is UNKNOWN_MEMBER_ID.",
    rule="§1.5 identity before generation; §1.6; §1.7; §1.8",
    sanity=expect_all(("heartbeat.other_instance", {"error_code": "FENCED_INSTANCE_ID"})),
)
async def identity_check_precedes_generation_for_live_members(ctx: ScenarioContext) -> Outcome:
    await ctx.ensure_topic()
    a, _ = await setup_s2(ctx, record=False)
    other = d.heartbeat(4, ctx.group, generation=7, member_id=a.member_id, instance_id="B")
    ctx.record("heartbeat.other_instance", await a.conn.request(other))
    unknown = d.heartbeat(4, ctx.group, generation=7, member_id=a.member_id, instance_id="Z")
    ctx.record("heartbeat.unknown_instance", await a.conn.request(unknown))
    sync = d.sync_group(
        5, ctx.group, generation=7, member_id=a.member_id, instance_id="B",
        protocol_type="consumer", protocol_name="range",
    )  # fmt: skip
    ctx.record("sync.other_instance", await a.conn.request(sync))
    commit = d.offset_commit(
        9, ctx.group, generation=7, member_id=a.member_id, instance_id="B", offsets={"t1": {0: 1}}
    )
    ctx.record("commit.other_instance", await a.conn.request(commit))
    await ctx.state("state.after")
    return ctx.outcome


@scenario(
    "Heartbeat v0..v4 from a current member is NONE; with another member id it is UNKNOWN_MEMBER_ID at v0-2 "
    "and FENCED_INSTANCE_ID at v3+ (the instance id belongs to the real member).",
    rule="§1.7; §2.1 Heartbeat versions",
)
async def heartbeat_versions(ctx: ScenarioContext) -> Outcome:
    a, _ = await setup_s2(ctx, record=False)
    for version in range(5):
        ctx.record(f"heartbeat.v{version}", await a.heartbeat(version).result())
        ctx.record(f"heartbeat.unknown.v{version}", await a.heartbeat(version, member_id="nobody").result())
    return ctx.outcome


@scenario(
    "SyncGroup checks while CompletingRebalance: wrong generation is ILLEGAL_GENERATION; at v5 a null "
    "protocol type, a different protocol name or type is INCONSISTENT_GROUP_PROTOCOL; a member the leader "
    "leaves out gets an empty assignment; SyncGroup in PreparingRebalance is REBALANCE_IN_PROGRESS.",
    rule="§7.22; §1.6",
    sanity=expect_all(
        ("sync.wrong_generation", {"error_code": "ILLEGAL_GENERATION"}),
        ("sync.null_protocol_type", {"error_code": "INCONSISTENT_GROUP_PROTOCOL"}),
        ("sync.B", {"error_code": "NONE", "assignment": ""}),
    ),
)
async def sync_group_checks(ctx: ScenarioContext) -> Outcome:
    a = await ctx.member("A")
    b = await ctx.member("B")
    await join_all(ctx, [a, b])
    ctx.record("sync.wrong_generation", await b.sync(generation=0).result())
    ctx.record("sync.null_protocol_type", await b.sync(protocol_type=None).result())
    ctx.record("sync.null_protocol_name", await b.sync(protocol_name=None).result())
    ctx.record("sync.other_protocol_name", await b.sync(protocol_name="roundrobin").result())
    ctx.record("sync.other_protocol_type", await b.sync(protocol_type="connect").result())
    sync_b = b.sync(4)
    await sync_b.assert_parked(200)
    ctx.record("sync.A", await a.sync(assignments=[(a.member_id, d.assignment({"t1": [0, 1]}))]).result())
    ctx.record("sync.B", await sync_b.result())
    rejoin_a = a.join(9)
    await rejoin_a.assert_parked(200)
    ctx.record("sync.preparing", await b.sync().result())
    rejoin_b = b.join(9)
    await rejoin_a.result()
    await rejoin_b.result()
    return ctx.outcome


@scenario(
    "SyncGroup to an unknown group and to an Empty group is UNKNOWN_MEMBER_ID; from a member id the group "
    "does not know it is FENCED_INSTANCE_ID when the instance id belongs to a member (v5) and "
    "UNKNOWN_MEMBER_ID without instance id (v0).",
    rule="§1.6 checks 1 and 3, state Empty",
)
async def sync_group_unknown_group_member_or_empty(ctx: ScenarioContext) -> Outcome:
    conn = await ctx.connect("c")
    unknown = d.sync_group(
        5, ctx.new_group(), generation=1, member_id="x", protocol_type="consumer", protocol_name="range"
    )
    ctx.record("sync.unknown_group", await conn.request(unknown))
    a, _ = await setup_s2(ctx, record=False)
    ctx.record("sync.unknown_member", await a.sync(member_id="nobody").result())
    ctx.record("sync.unknown_member.v0", await a.sync(0, member_id="nobody").result())
    await conn.request(d.leave_group(3, ctx.group, members=[("", "A"), ("", "B")]))
    await ctx.state("state.after_leave")
    ctx.record("sync.empty_group", await a.sync().result())
    return ctx.outcome


@scenario(
    "A follower's SyncGroup stays parked until the leader's SyncGroup arrives; then both get their "
    "assignments (SyncGroup v0..v5 from followers of separate groups).",
    rule="§1.6 CompletingRebalance parks syncs",
)
async def sync_follower_parked_until_leader(ctx: ScenarioContext) -> Outcome:
    for version in range(6):
        group = ctx.group if version == 0 else ctx.new_group()
        a = await ctx.member("A", group=group)
        b = await ctx.member("B", group=group)
        await join_all(ctx, [a, b])
        sync_b = b.sync(version)
        await sync_b.assert_parked(150)
        plan = [(a.member_id, d.assignment({"t1": [0]})), (b.member_id, d.assignment({"t1": [1]}))]
        ctx.record(f"sync.A.v{version}", await a.sync(version, assignments=plan).result())
        ctx.record(f"sync.B.v{version}", await sync_b.result())
    return ctx.outcome


@scenario(
    "In a Stable group the leader's SyncGroup assignments are ignored: every member gets the stored "
    "assignment.",
    rule="§1.4 last paragraph; §1.6 Stable",
)
async def sync_leader_assignments_ignored_in_stable(ctx: ScenarioContext) -> Outcome:
    a, b = await setup_s2(ctx)
    swapped = [(a.member_id, d.assignment({"t1": [3]})), (b.member_id, d.assignment({"t1": [2]}))]
    ctx.record("sync.A.again", await a.sync(assignments=swapped).result())
    ctx.record("sync.B.again", await b.sync().result())
    await ctx.snapshot("describe")
    return ctx.outcome


@scenario(
    "One request at a time per connection: a Heartbeat sent behind a parked JoinGroup on the same connection "
    "is not answered until the JoinGroup is (and is then judged against the new generation), while the same "
    "Heartbeat on another connection is answered at once.",
    rule="Kafka request handling: a connection's next request is read after the previous one is answered",
    sanity=expect_all(("heartbeat.behind_join", {"error_code": "ILLEGAL_GENERATION"})),
)
async def requests_on_one_connection_are_served_in_order(ctx: ScenarioContext) -> Outcome:
    a, b = await setup_s2(ctx, record=False)
    rejoin_a = a.join(9)
    behind = a.heartbeat()
    ctx.fact("heartbeat.behind_join.answered_early", await behind.answered_within(300))
    other = await ctx.connect("A-other", client_id="A")
    request = d.heartbeat(4, ctx.group, generation=a.generation, member_id=a.member_id, instance_id="A")
    ctx.record("heartbeat.other_connection", await other.request(request))
    rejoin_b = b.join(9)
    ctx.record("rejoin.A", await rejoin_a.result())
    ctx.record("heartbeat.behind_join", await behind.result())
    ctx.record("rejoin.B", await rejoin_b.result())
    return ctx.outcome
