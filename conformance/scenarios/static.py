"""Static membership (KIP-345, KIP-814): first joins, restarts (replacement), fencing, known-id rejoins."""

from __future__ import annotations

from conformance import driver as d
from conformance.scenario import (
    Outcome,
    ScenarioContext,
    expect,
    expect_all,
    join_all,
    scenario,
    setup_s2,
    sync_all,
)


def _first_join_sane(outcome: Outcome) -> None:
    expect(
        outcome,
        "join",
        error_code="NONE",
        generation_id=1,
        member_id="i0#1",
        leader="i0#1",
        skip_assignment=False,
    )
    join = outcome["join"]
    assert isinstance(join, dict) and isinstance(join["members"], list) and len(join["members"]) == 1


@scenario(
    "A static member's first JoinGroup (v9, empty member id) into a new group waits out the initial delay "
    "and joins directly: no MEMBER_ID_REQUIRED; it leads generation 1.",
    rule="§7.1; §1.3 new member path, static unknown instance",
    sanity=_first_join_sane,
)
async def static_first_join(ctx: ScenarioContext) -> Outcome:
    member = await ctx.member("i0")
    pending = member.join(9)
    ctx.fact("answered_within_half_the_initial_delay", await pending.answered_within(150))
    ctx.record("join", await pending.result())
    await ctx.snapshot("describe")
    return ctx.outcome


@scenario(
    "Follower restart (S2, B joins again with an empty member id at v5..v9): answered at once with "
    "generation 1, a new member id, the leader unchanged and no members; its old assignment comes back on "
    "SyncGroup.",
    rule="§7.3; §1.4 Stable, selected protocol unchanged",
    sanity=expect_all(
        (
            "restart.v5",
            {"error_code": "NONE", "generation_id": 1, "member_id": "B#2", "leader": "A#1", "members": []},
        ),
        (
            "restart.v9",
            {"error_code": "NONE", "generation_id": 1, "member_id": "B#6", "skip_assignment": False},
        ),
    ),
)
async def follower_restart_no_rebalance(ctx: ScenarioContext) -> Outcome:
    a, b = await setup_s2(ctx)
    for version in (5, 6, 7, 8, 9):
        ctx.record(f"restart.v{version}", await b.join(version, member_id="").result())
    ctx.record("sync.B", await b.sync().result())
    ctx.record("heartbeat.A", await a.heartbeat().result())
    ctx.record("heartbeat.B", await b.heartbeat().result())
    await ctx.snapshot("describe")
    return ctx.outcome


@scenario(
    "Leader restart at JoinGroup v9 (S2): generation 1, the new id is the leader, skip_assignment true and "
    "the full member list; SyncGroup with no assignments returns its old assignment.",
    rule="§7.4; §1.4 KIP-814",
    sanity=expect_all(
        (
            "restart.A",
            {
                "error_code": "NONE",
                "generation_id": 1,
                "member_id": "A#2",
                "leader": "A#2",
                "skip_assignment": True,
            },
        ),
    ),
)
async def leader_restart_v9_skip_assignment(ctx: ScenarioContext) -> Outcome:
    a, b = await setup_s2(ctx)
    ctx.record("restart.A", await a.join(9, member_id="").result())
    ctx.record("sync.A", await a.sync(assignments=()).result())
    ctx.record("heartbeat.B", await b.heartbeat().result())
    await ctx.snapshot("describe")
    return ctx.outcome


@scenario(
    "Leader restart at JoinGroup v5 and v8 (S2): generation 1, but the answer names the previous leader id, "
    "so the restarted leader does not think it leads; no members, no rebalance.",
    rule="§7.5; §1.4 JoinGroup v<9 (KAFKA-8500)",
    sanity=expect_all(("restart.v5", {"member_id": "A#2", "leader": "A#1", "members": []})),
)
async def leader_restart_pre_v9(ctx: ScenarioContext) -> Outcome:
    a, _ = await setup_s2(ctx)
    ctx.record("restart.v5", await a.join(5, member_id="").result())
    ctx.record("restart.v8", await a.join(8, member_id="").result())
    ctx.record("sync.A", await a.sync(3).result())
    await ctx.snapshot("describe")
    return ctx.outcome


@scenario(
    "After a follower restart, the stale incarnation is fenced on every API that carries the instance id "
    "(Heartbeat v3+, SyncGroup v3+, OffsetCommit v7+, JoinGroup, LeaveGroup v3+) and unknown on those that "
    "do not.",
    rule="§7.6; §1.5 validateCurrentMember",
    sanity=expect_all(("heartbeat.v4", {"error_code": "FENCED_INSTANCE_ID"})),
)
async def stale_incarnation_fenced_everywhere(ctx: ScenarioContext) -> Outcome:
    await ctx.ensure_topic()
    a, b = await setup_s2(ctx)
    old = await ctx.restart(b)
    ctx.record("restart.B", await b.join(9, member_id="").result())
    for version in range(5):
        ctx.record(f"heartbeat.v{version}", await old.heartbeat(version).result())
    for version in (3, 4, 5):
        ctx.record(f"sync.v{version}", await old.sync(version).result())
    for version in (6, 7, 8, 9):
        ctx.record(f"commit.v{version}", await old.commit(version).result())
    for version in (5, 9):
        ctx.record(f"join.v{version}", await old.join(version).result())
    for version in (3, 5):
        leave = d.leave_group(version, ctx.group, members=[(old.member_id, "B")])
        ctx.record(f"leave.v{version}", await old.conn.request(leave))
    ctx.record("heartbeat.current.B", await b.heartbeat().result())
    ctx.record("heartbeat.A", await a.heartbeat().result())
    await ctx.snapshot("describe")
    return ctx.outcome


@scenario(
    "Identity mismatches on JoinGroup in a Stable group: unknown id + known instance is fenced, known id + "
    "unknown instance is unknown, known id + another member's instance is fenced, unknown id without "
    "instance is unknown.",
    rule="§7.7; §1.3 current member path; §1.5",
    sanity=expect_all(
        (
            "join.bogus_id.instance_A",
            {"error_code": "FENCED_INSTANCE_ID", "member_id": "bogus", "generation_id": -1},
        ),
        ("join.A_id.instance_zzz", {"error_code": "UNKNOWN_MEMBER_ID"}),
    ),
)
async def join_identity_mismatches(ctx: ScenarioContext) -> Outcome:
    a, b = await setup_s2(ctx)
    a_id = a.member_id
    for version in (5, 9):
        suffix = "" if version == 9 else f".v{version}"
        ctx.record(f"join.bogus_id.instance_A{suffix}", await a.join(version, member_id="bogus").result())
        ctx.record(
            f"join.A_id.instance_zzz{suffix}",
            await a.join(version, member_id=a_id, instance_id="zzz").result(),
        )
        ctx.record(
            f"join.A_id.instance_B{suffix}", await a.join(version, member_id=a_id, instance_id="B").result()
        )
        ctx.record(
            f"join.bogus_id.no_instance{suffix}",
            await a.join(version, member_id="bogus", instance_id=None).result(),
        )
    ctx.record("heartbeat.A", await a.heartbeat().result())
    ctx.record("heartbeat.B", await b.heartbeat().result())
    await ctx.snapshot("describe")
    return ctx.outcome


@scenario(
    "A restarted follower whose protocols change the selected protocol (S2, B offers only roundrobin) is "
    "parked: the group rebalances and generation 2 uses roundrobin once A rejoins.",
    rule="§7.10; §1.4 Stable, selected protocol changes",
    sanity=expect_all(("join.B", {"generation_id": 2, "protocol_name": "roundrobin"})),
)
async def static_replacement_changes_selected_protocol(ctx: ScenarioContext) -> Outcome:
    a, b = await setup_s2(ctx)
    pending = b.join(9, member_id="", protocols=(("roundrobin", d.subscription("t1")),))
    await pending.assert_parked(300)
    await ctx.state("state.after_B_restart")
    ctx.record("heartbeat.A", await a.heartbeat().result())
    join_a = a.join(9)
    ctx.record("join.B", await pending.result())
    ctx.record("join.A", await join_a.result())
    await ctx.snapshot("describe")
    return ctx.outcome


@scenario(
    "A restarted follower with a changed subscription but the same selected protocol is answered at once "
    "with generation 1: no rebalance (KAFKA-12759, Kafka compares only the selected protocol).",
    rule="§7.11 first part; §1.4 quirk",
    sanity=expect_all(("restart.B", {"error_code": "NONE", "generation_id": 1, "member_id": "B#2"})),
)
async def static_replacement_changed_metadata_same_protocol(ctx: ScenarioContext) -> Outcome:
    a, b = await setup_s2(ctx)
    changed = (("range", d.subscription("t1", "t2")), ("roundrobin", d.subscription("t1")))
    ctx.record("restart.B", await b.join(9, member_id="", protocols=changed).result())
    ctx.record("heartbeat.A", await a.heartbeat().result())
    await ctx.snapshot("describe")
    return ctx.outcome


@scenario(
    "A follower rejoining with its known member id and a changed subscription starts a rebalance: it is "
    "parked until the leader rejoins, then generation 2.",
    rule="§7.11 contrast; §1.3 current member path, Stable follower changed metadata",
    sanity=expect_all(("join.B", {"generation_id": 2})),
)
async def known_id_rejoin_changed_metadata_rebalances(ctx: ScenarioContext) -> Outcome:
    a, b = await setup_s2(ctx)
    changed = (("range", d.subscription("t1", "t2")), ("roundrobin", d.subscription("t1")))
    pending = b.join(9, protocols=changed)
    await pending.assert_parked(300)
    await ctx.state("state.after_B_rejoin")
    ctx.record("heartbeat.A", await a.heartbeat().result())
    join_a = a.join(9)
    ctx.record("join.B", await pending.result())
    ctx.record("join.A", await join_a.result())
    return ctx.outcome


@scenario(
    "A follower rejoining a Stable group with its known id and identical metadata is answered at once with "
    "the current generation and no members; nothing rebalances.",
    rule="§7.12 first part; §1.3 Stable follower identical metadata",
    sanity=expect_all(("rejoin.B", {"error_code": "NONE", "generation_id": 1, "members": []})),
)
async def known_id_rejoin_follower_identical(ctx: ScenarioContext) -> Outcome:
    a, b = await setup_s2(ctx)
    for version in (5, 9):
        ctx.record("rejoin.B", await b.join(version).result())
    ctx.record("heartbeat.A", await a.heartbeat().result())
    await ctx.state("state")
    return ctx.outcome


@scenario(
    "The leader rejoining a Stable group with its known id and identical metadata always rebalances; the "
    "follower learns it from Heartbeat (REBALANCE_IN_PROGRESS), rejoins, and the leader gets the full list.",
    rule="§7.12 second part; §1.3 Stable leader",
    sanity=expect_all(
        ("heartbeat.B", {"error_code": "REBALANCE_IN_PROGRESS"}), ("join.A", {"generation_id": 2})
    ),
)
async def known_id_rejoin_leader_rebalances(ctx: ScenarioContext) -> Outcome:
    a, b = await setup_s2(ctx)
    pending = a.join(9)
    await pending.assert_parked(300)
    await ctx.state("state.after_leader_rejoin")
    ctx.record("heartbeat.B", await b.heartbeat().result())
    join_b = b.join(9)
    ctx.record("join.A", await pending.result())
    ctx.record("join.B", await join_b.result())
    await ctx.state("state")
    return ctx.outcome


@scenario(
    "Rejoins with identical metadata while the group is CompletingRebalance are answered at once with the "
    "current generation; the leader's answer carries the member list.",
    rule="§7.13 first part; §1.3 CompletingRebalance, same metadata",
    sanity=expect_all(("rejoin.B", {"error_code": "NONE", "generation_id": 1, "members": []})),
)
async def rejoin_completing_rebalance_identical(ctx: ScenarioContext) -> Outcome:
    a = await ctx.member("A")
    b = await ctx.member("B")
    ctx.record_each(("join.A", "join.B"), await join_all(ctx, [a, b]))
    await ctx.state("state.before")
    ctx.record("rejoin.B", await b.join(9).result())
    ctx.record("rejoin.A", await a.join(9).result())
    await ctx.state("state.after")
    ctx.record_each(("sync.A", "sync.B"), await sync_all(ctx, [a, b]))
    return ctx.outcome


@scenario(
    "A rejoin with changed metadata while the group is CompletingRebalance sends it back to "
    "PreparingRebalance; a parked SyncGroup is told REBALANCE_IN_PROGRESS.",
    rule="§7.13 second part; §1.3 CompletingRebalance, changed metadata",
)
async def rejoin_completing_rebalance_changed(ctx: ScenarioContext) -> Outcome:
    a = await ctx.member("A")
    b = await ctx.member("B")
    await join_all(ctx, [a, b])
    sync_b = b.sync()
    await sync_b.assert_parked(200)
    changed = (("range", d.subscription("t1", "t2")), ("roundrobin", d.subscription("t1")))
    rejoin_a = a.join(9, protocols=changed)
    ctx.record("sync.B", await sync_b.result())
    await ctx.state("state.after_A_rejoin")
    rejoin_b = b.join(9)
    ctx.record("rejoin.A", await rejoin_a.result())
    ctx.record("rejoin.B", await rejoin_b.result())
    return ctx.outcome


@scenario(
    "A static restart while the group is CompletingRebalance: the old incarnation's parked SyncGroup is "
    "fenced, other parked SyncGroups get REBALANCE_IN_PROGRESS, and the group rebalances again.",
    rule="§1.4 CompletingRebalance (KAFKA-9801)",
    sanity=expect_all(("sync.B_old", {"error_code": "FENCED_INSTANCE_ID"})),
)
async def static_replacement_in_completing_rebalance(ctx: ScenarioContext) -> Outcome:
    a = await ctx.member("A")
    b = await ctx.member("B")
    c = await ctx.member("C")
    ctx.record_each(("join.A", "join.B", "join.C"), await join_all(ctx, [a, b, c]))
    sync_b = b.sync()
    sync_c = c.sync()
    await sync_b.assert_parked(200)
    old = await ctx.restart(b)
    restart = b.join(9, member_id="")
    ctx.record("sync.B_old", await sync_b.result())
    ctx.record("sync.C", await sync_c.result())
    await ctx.state("state.after_restart")
    ctx.record("heartbeat.B_old", await old.heartbeat().result())
    join_a = a.join(9)
    join_c = c.join(9)
    ctx.record("restart.B", await restart.result())
    ctx.record("rejoin.A", await join_a.result())
    ctx.record("rejoin.C", await join_c.result())
    return ctx.outcome


@scenario(
    "A static restart while the group is PreparingRebalance: the old incarnation's parked JoinGroup is "
    "fenced (it carries the old member id) and the new one waits for the join phase like everyone else.",
    rule="§1.4 PreparingRebalance; KAFKA-8500",
    sanity=expect_all(("join.B_old", {"error_code": "FENCED_INSTANCE_ID", "member_id": "B#1"})),
)
async def static_replacement_in_preparing_rebalance(ctx: ScenarioContext) -> Outcome:
    a = await ctx.member("A")
    b = await ctx.member("B")
    c = await ctx.member("C")
    ctx.record_each(("join.A", "join.B", "join.C"), await join_all(ctx, [a, b, c]))
    await sync_all(ctx, [a, b, c])
    join_a = a.join(9)  # the leader's rejoin starts a rebalance
    await join_a.assert_parked(200)
    join_b_old = b.join(9)
    await join_b_old.assert_parked(200)
    await ctx.restart(b)
    restart = b.join(9, member_id="")
    ctx.record("join.B_old", await join_b_old.result())
    await restart.assert_parked(200)
    await ctx.state("state.after_restart")
    join_c = c.join(9)
    ctx.record("rejoin.A", await join_a.result())
    ctx.record("restart.B", await restart.result())
    ctx.record("rejoin.C", await join_c.result())
    return ctx.outcome


@scenario(
    "Quirk: a known member id sent without its instance id passes validation (only the member id is "
    "checked): JoinGroup, Heartbeat and SyncGroup answer as for the member itself.",
    rule="§1.3 note on validation; §1.5",
)
async def known_member_id_without_instance_id(ctx: ScenarioContext) -> Outcome:
    a, b = await setup_s2(ctx)
    ctx.record("join.B_no_instance", await b.join(9, instance_id=None).result())
    hb = d.heartbeat(4, ctx.group, generation=b.generation, member_id=b.member_id, instance_id=None)
    ctx.record("heartbeat.B_no_instance", await b.conn.request(hb))
    sync = d.sync_group(
        5,
        ctx.group,
        generation=b.generation,
        member_id=b.member_id,
        protocol_type="consumer",
        protocol_name=b.protocol_name,
    )
    ctx.record("sync.B_no_instance", await b.conn.request(sync))
    ctx.record("heartbeat.A", await a.heartbeat().result())
    return ctx.outcome


@scenario(
    "After the group became Empty, JoinGroup with the old member id is unknown; with an empty member id the "
    "instance joins as a new member (initial delay, next generation).",
    rule="§7.31; §1.3 state Empty",
    sanity=expect_all(("join.old_id", {"error_code": "UNKNOWN_MEMBER_ID"})),
)
async def empty_group_rejoin_with_known_id(ctx: ScenarioContext) -> Outcome:
    a = await ctx.member("A")
    ctx.record("join.A", await a.join(9).result())
    ctx.record("sync.A", await a.sync(assignments=[(a.member_id, d.assignment({"t1": [0]}))]).result())
    leave = d.leave_group(5, ctx.group, members=[("", "A")])
    ctx.record("leave.A", await a.conn.request(leave))
    await ctx.snapshot("describe.after_leave")
    ctx.record("join.old_id", await a.join(9).result())
    ctx.record("join.new", await a.join(9, member_id="").result())
    await ctx.snapshot("describe")
    return ctx.outcome
