"""OffsetCommit validation by group state and identity; OffsetFetch by version."""

from __future__ import annotations

from kio.static.protocol import RequestPayload

from conformance import driver as d
from conformance.scenario import Outcome, ScenarioContext, join_all, scenario, setup_s2, sync_all


def _commit_sane(outcome: Outcome) -> None:
    for label, code in (
        ("commit.completing", "REBALANCE_IN_PROGRESS"),
        ("commit.unknown_group.v9", "GROUP_ID_NOT_FOUND"),
    ):
        value = outcome[label]
        assert isinstance(value, dict)
        assert code in str(value["topics"]), (label, value)


@scenario(
    "OffsetCommit by state: CompletingRebalance is REBALANCE_IN_PROGRESS, PreparingRebalance is accepted; an "
    "unknown group with a generation is ILLEGAL_GENERATION (v8) or GROUP_ID_NOT_FOUND (v9); with generation "
    "-1 it is accepted and creates an Empty group; a non-empty group without identity is UNKNOWN_MEMBER_ID.",
    rule="§7.23; §1.8",
    sanity=_commit_sane,
)
async def offset_commit_by_state(ctx: ScenarioContext) -> Outcome:
    await ctx.ensure_topic()
    a = await ctx.member("A")
    b = await ctx.member("B")
    await join_all(ctx, [a, b])
    ctx.record("commit.completing", await a.commit().result())
    await sync_all(ctx, [a, b])
    ctx.record("commit.stable", await a.commit().result())
    rejoin_a = a.join(9)
    await rejoin_a.assert_parked(200)
    ctx.record("commit.preparing", await b.commit().result())
    rejoin_b = b.join(9)
    await rejoin_a.result()
    await rejoin_b.result()
    anonymous = d.offset_commit(9, ctx.group, generation=-1, member_id="", offsets={"t1": {0: 1}})
    ctx.record("commit.no_identity_non_empty", await a.conn.request(anonymous))
    unknown = ctx.new_group()
    for version in (8, 9):
        request = d.offset_commit(version, unknown, generation=1, member_id="x", offsets={"t1": {0: 1}})
        ctx.record(f"commit.unknown_group.v{version}", await a.conn.request(request))
    await ctx.snapshot("describe.unknown_group", group=unknown)
    simple = ctx.new_group()
    request = d.offset_commit(9, simple, generation=-1, member_id="", offsets={"t1": {0: 3}})
    ctx.record("commit.unknown_group.generation_-1", await a.conn.request(request))
    await ctx.snapshot("describe.simple_group", group=simple)
    return ctx.outcome


@scenario(
    "OffsetCommit identity checks in a Stable static group: unknown instance id is UNKNOWN_MEMBER_ID, an "
    "empty member id with a known instance is FENCED_INSTANCE_ID, a wrong generation is ILLEGAL_GENERATION, "
    "an unknown member id without instance (v6) is UNKNOWN_MEMBER_ID, a known member id without instance is "
    "accepted.",
    rule="§1.8; §1.5",
)
async def offset_commit_member_validation(ctx: ScenarioContext) -> Outcome:
    await ctx.ensure_topic()
    a, _ = await setup_s2(ctx, record=False)

    def commit(version: int, generation: int, member_id: str, instance_id: str | None) -> RequestPayload:
        return d.offset_commit(
            version,
            ctx.group,
            generation=generation,
            member_id=member_id,
            instance_id=instance_id,
            offsets={"t1": {1: 9}},
        )

    cases = {
        "unknown_instance": commit(9, 1, a.member_id, "zzz"),
        "empty_member_id_known_instance": commit(9, 1, "", "B"),
        "wrong_generation": commit(9, 0, a.member_id, "A"),
        "fenced_and_wrong_generation": commit(9, 0, "bogus", "A"),
        "unknown_member_v6": commit(6, 1, "nobody", None),
        "known_member_without_instance": commit(9, 1, a.member_id, None),
        "valid": commit(7, 1, a.member_id, "A"),
    }
    for label, request in cases.items():
        ctx.record(f"commit.{label}", await a.conn.request(request))
    return ctx.outcome


@scenario(
    "OffsetCommit v2..v9 from a Stable member are accepted; OffsetFetch v1..v9 returns what was committed "
    "(v2+ also with all partitions requested).",
    rule="§1.8; §2.1 OffsetCommit/OffsetFetch versions",
)
async def offset_commit_and_fetch_versions(ctx: ScenarioContext) -> Outcome:
    await ctx.ensure_topic()
    a, _ = await setup_s2(ctx, record=False)
    for version in range(2, 10):
        ctx.record(
            f"commit.v{version}",
            await a.commit(version, offsets={"t1": {version % 4: 100 + version}}).result(),
        )
    for version in range(1, 10):
        fetch = d.offset_fetch(version, ctx.group, partitions={"t1": [0, 1, 2, 3]})
        ctx.record(f"fetch.v{version}", await a.conn.request(fetch))
    for version in (2, 7, 8, 9):
        ctx.record(
            f"fetch.all.v{version}", await a.conn.request(d.offset_fetch(version, ctx.group, partitions=None))
        )
    return ctx.outcome


@scenario(
    "A commit with generation -1 into an Empty group is accepted without validating the member id or "
    "instance id; with a generation the identity is validated.",
    rule="§1.8 (testManualCommitOffsetShouldNotValidateMemberIdAndInstanceId)",
)
async def offset_commit_empty_group_skips_member_validation(ctx: ScenarioContext) -> Outcome:
    await ctx.ensure_topic()
    a = await ctx.member("A")
    await a.join(9).result()
    await sync_all(ctx, [a])
    await a.conn.request(d.leave_group(3, ctx.group, members=[("", "A")]))
    await ctx.state("state")
    for label, generation, member_id, instance_id in (
        ("generation_-1.member_and_instance", -1, "x", "A"),
        ("generation_-1.anonymous", -1, "", None),
        ("generation_5.member_and_instance", 5, "x", "A"),
        ("generation_5.member_only", 5, "x", None),
    ):
        request = d.offset_commit(
            9,
            ctx.group,
            generation=generation,
            member_id=member_id,
            instance_id=instance_id,
            offsets={"t1": {2: 4}},
        )
        ctx.record(f"commit.{label}", await a.conn.request(request))
    return ctx.outcome


@scenario(
    "Commit metadata longer than offset.metadata.max.bytes (4096) is OFFSET_METADATA_TOO_LARGE per "
    "partition; 4096 is accepted. A commit for a topic that does not exist is UNKNOWN_TOPIC_OR_PARTITION.",
    rule="§1.1 offset.metadata.max.bytes; §1.8",
)
async def offset_commit_metadata_limit_and_unknown_topic(ctx: ScenarioContext) -> Outcome:
    await ctx.ensure_topic()
    conn = await ctx.connect("c")
    for size in (4096, 4097):
        request = d.offset_commit(9, ctx.group, offsets={"t1": {0: 1}}, metadata="m" * size)
        ctx.record(f"commit.metadata_{size}", await conn.request(request))
    request = d.offset_commit(9, ctx.group, offsets={"no-such-topic": {0: 1}, "t1": {1: 2}})
    ctx.record("commit.unknown_topic", await conn.request(request))
    ctx.record("fetch", await conn.request(d.offset_fetch(8, ctx.group, partitions=None)))
    return ctx.outcome


@scenario(
    "OffsetFetch for a group that does not exist (v1, v5, v7, v8, v9): offsets -1, no error.",
    rule="§1.16; §2.1 OffsetFetch versions",
)
async def offset_fetch_unknown_group(ctx: ScenarioContext) -> Outcome:
    await ctx.ensure_topic()
    conn = await ctx.connect("c")
    for version in (1, 5, 7, 8, 9):
        ctx.record(
            f"fetch.v{version}",
            await conn.request(d.offset_fetch(version, ctx.group, partitions={"t1": [0]})),
        )
    ctx.record("fetch.all.v8", await conn.request(d.offset_fetch(8, ctx.group, partitions=None)))
    await ctx.snapshot("describe")
    return ctx.outcome
