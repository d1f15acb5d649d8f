"""DescribeGroups, ListGroups, DeleteGroups, FindCoordinator, ApiVersions, version shapes, empty group ids."""

from __future__ import annotations

import dataclasses
from typing import Any

from kio.schema.errors import ErrorCode

from conformance import driver as d
from conformance.scenario import Outcome, ScenarioContext, expect, scenario, setup_s2

GROUP_APIS = {
    d.OFFSET_COMMIT: "OffsetCommit",
    d.OFFSET_FETCH: "OffsetFetch",
    d.FIND_COORDINATOR: "FindCoordinator",
    d.JOIN_GROUP: "JoinGroup",
    d.HEARTBEAT: "Heartbeat",
    d.LEAVE_GROUP: "LeaveGroup",
    d.SYNC_GROUP: "SyncGroup",
    d.DESCRIBE_GROUPS: "DescribeGroups",
    d.LIST_GROUPS: "ListGroups",
    d.API_VERSIONS: "ApiVersions",
    d.DELETE_GROUPS: "DeleteGroups",
}


def _version_shape_sane(outcome: Outcome) -> None:
    expect(outcome, "join_error.v6", protocol_name="")
    expect(outcome, "join_error.v7", protocol_name=None)
    expect(outcome, "api_versions.v5", error_code="UNSUPPORTED_VERSION")


@scenario(
    "Response shapes by version: JoinGroup error answers v0..v9 (protocol name '' before v7, null from v7; "
    "skip_assignment from v9), SyncGroup error answers v0..v5, LeaveGroup v2 vs v3 errors; ApiVersions at an "
    "unsupported version gets a v0 answer listing only the ApiVersions key, and JoinGroup at an unsupported "
    "version gets the connection closed.",
    rule="§7.28; §2.1 framing rules",
    sanity=_version_shape_sane,
)
async def version_shapes(ctx: ScenarioContext) -> Outcome:
    conn = await ctx.connect("c")
    for version in range(10):
        request = d.join_group(version, ctx.group, member_id="bogus", protocols=(("range", b"m"),))
        ctx.record(f"join_error.v{version}", await conn.request(request))
    for version in range(6):
        request = d.sync_group(
            version,
            ctx.group,
            generation=1,
            member_id="bogus",
            protocol_type="consumer" if version >= 5 else None,
            protocol_name="range" if version >= 5 else None,
        )
        ctx.record(f"sync_error.v{version}", await conn.request(request))
    await setup_s2(ctx, record=False)
    ctx.record("leave_error.v2", await conn.request(d.leave_group(2, ctx.group, member_id="bogus")))
    ctx.record("leave_error.v3", await conn.request(d.leave_group(3, ctx.group, members=[("bogus", None)])))
    ctx.record("api_versions.v5", await d.send_at_version(conn, d.api_versions(3), 5).result())
    ctx.record("api_versions.v127", await d.send_at_version(conn, d.api_versions(3), 127).result())
    other = await ctx.connect("unsupported")
    request = d.join_group(9, ctx.group, protocols=(("range", b"m"),))
    try:
        answer = await d.send_at_version(other, request, 10).result(10.0)
        ctx.record("join.v10", answer)
    except d.ConnectionClosed:
        ctx.fact("join.v10", "connection closed")
    return ctx.outcome


@scenario(
    "DescribeGroups of a static group by state: Stable shows the protocol and each member's instance id, "
    "metadata and assignment; PreparingRebalance and CompletingRebalance show no protocol and empty "
    "metadata, but the assignment stays; an unknown group is Dead with NONE (v5) or GROUP_ID_NOT_FOUND with "
    "a message (v6).",
    rule="§7.32; §1.16",
)
async def describe_static_group_by_state(ctx: ScenarioContext) -> Outcome:
    a, b = await setup_s2(ctx, record=False)
    await ctx.snapshot("describe.stable")
    rejoin_a = a.join(9)
    await rejoin_a.assert_parked(200)
    await ctx.snapshot("describe.preparing")
    rejoin_b = b.join(9)
    await rejoin_a.result()
    await rejoin_b.result()
    await ctx.snapshot("describe.completing")
    unknown = ctx.new_group()
    await ctx.snapshot("describe.unknown.v5", group=unknown)
    await ctx.snapshot("describe.unknown.v6", group=unknown, version=6)
    return ctx.outcome


@scenario(
    "DescribeGroups v0..v6 of a Stable static group: instance ids from v4, authorized operations field from "
    "v3.",
    rule="§1.16; §2.1 DescribeGroups versions",
)
async def describe_groups_versions(ctx: ScenarioContext) -> Outcome:
    await setup_s2(ctx, record=False)
    for version in range(7):
        await ctx.snapshot(f"describe.v{version}", version=version)
    conn = await ctx.observer()
    unknown = ctx.new_group()
    both = await conn.request(d.describe_groups(5, ctx.group, unknown))
    ctx.record("describe.two_groups", both)
    return ctx.outcome


def _only(raw: Any, ctx: ScenarioContext, groups: set[str]) -> Any:
    kept = [g for g in raw.groups if g.group_id in groups]
    kept.sort(key=lambda g: ctx.norm.text(g.group_id))
    return dataclasses.replace(raw, groups=tuple(kept))


@scenario(
    "ListGroups v0..v5 (restricted to this scenario's groups): a Stable consumer group and an Empty simple "
    "group; v4 states filter (case-insensitive), v5 types filter.",
    rule="§1.16 ListGroups",
)
async def list_groups_versions_and_filters(ctx: ScenarioContext) -> Outcome:
    await ctx.ensure_topic()
    await setup_s2(ctx, record=False)
    simple = ctx.new_group()
    conn = await ctx.connect("c")
    await conn.request(d.offset_commit(9, simple, offsets={"t1": {0: 1}}))
    ours = {ctx.group, simple}
    for version in range(6):
        ctx.record(f"list.v{version}", _only(await conn.request(d.list_groups(version)), ctx, ours))
    for states in (["Stable"], ["stable"], ["Empty"], ["PreparingRebalance"]):
        listed = await conn.request(d.list_groups(4, states_filter=states))
        ctx.record(f"list.states.{'+'.join(states)}", _only(listed, ctx, ours))
    for types in (["classic"], ["consumer"], ["Classic"]):
        listed = await conn.request(d.list_groups(5, types_filter=types))
        ctx.record(f"list.types.{'+'.join(types)}", _only(listed, ctx, ours))
    return ctx.outcome


@scenario(
    "DeleteGroups v0..v2: unknown group GROUP_ID_NOT_FOUND, non-empty group NON_EMPTY_GROUP, Empty group "
    "deleted (then Dead, and deleting again is GROUP_ID_NOT_FOUND).",
    rule="§1.16 DeleteGroups",
)
async def delete_groups_cases(ctx: ScenarioContext) -> Outcome:
    await ctx.ensure_topic()
    await setup_s2(ctx, record=False)
    simple = ctx.new_group()
    unknown = ctx.new_group()
    conn = await ctx.connect("c")
    await conn.request(d.offset_commit(9, simple, offsets={"t1": {0: 1}}))
    ctx.record("delete.unknown.v0", await conn.request(d.delete_groups(0, unknown)))
    ctx.record("delete.non_empty.v1", await conn.request(d.delete_groups(1, ctx.group)))
    ctx.record("delete.empty.v2", await conn.request(d.delete_groups(2, simple)))
    await ctx.snapshot("describe.deleted", group=simple)
    ctx.record("fetch.deleted", await conn.request(d.offset_fetch(8, simple, partitions={"t1": [0]})))
    ctx.record("delete.again.v2", await conn.request(d.delete_groups(2, simple)))
    batch = await conn.request(d.delete_groups(2, ctx.group, unknown))
    ordered = sorted(batch.results, key=lambda r: ctx.norm.text(r.group_id))
    ctx.record("delete.batch", dataclasses.replace(batch, results=tuple(ordered)))
    return ctx.outcome


@scenario(
    "FindCoordinator v0..v6 for a group: NONE, and the coordinator is this broker (the node Metadata lists, "
    "at the bootstrap address).",
    rule="§2.1 FindCoordinator versions",
)
async def find_coordinator_versions(ctx: ScenarioContext) -> Outcome:
    conn = await ctx.connect("c")
    meta = await conn.request(d.metadata(12, []))
    node_ids = {int(b.node_id) for b in meta.brokers}
    for version in range(7):
        raw = await conn.request(d.find_coordinator(version, ctx.group))
        entry = raw.coordinators[0] if version >= 4 else raw
        ctx.fact(
            f"find.v{version}",
            {
                "error_code": ctx.norm.value(entry.error_code),
                "error_message": ctx.norm.value(getattr(entry, "error_message", "<absent>")),
                "key": ctx.norm.value(getattr(entry, "key", "<absent>")),
                "is_the_broker": int(entry.node_id) in node_ids
                and entry.host == ctx.backend.host
                and int(entry.port) == ctx.backend.port,
            },
        )
    return ctx.outcome


@scenario(
    "ApiVersions v0..v4 answer NONE and advertise the same version ranges for the group APIs.",
    rule="§2.1 version table",
)
async def api_versions_group_apis(ctx: ScenarioContext) -> Outcome:
    conn = await ctx.connect("c")
    for version in range(5):
        raw = await conn.request(d.api_versions(version))
        ranges: dict[str, d.Json] = {
            GROUP_APIS[int(k.api_key)]: [int(k.min_version), int(k.max_version)]
            for k in raw.api_keys
            if int(k.api_key) in GROUP_APIS
        }
        ctx.fact(
            f"api_versions.v{version}", {"error_code": ctx.norm.value(raw.error_code), "group_apis": ranges}
        )
    return ctx.outcome


@scenario(
    "An empty group id: JoinGroup, SyncGroup, Heartbeat and LeaveGroup are INVALID_GROUP_ID; OffsetCommit, "
    "OffsetFetch, DescribeGroups and DeleteGroups accept it.",
    rule="§1.2 group-level pre-checks",
)
async def empty_group_id(ctx: ScenarioContext) -> Outcome:
    await ctx.ensure_topic()
    conn = await ctx.connect("c")
    protocols = (("range", d.subscription("t1")),)
    ctx.record("join", await conn.request(d.join_group(9, "", instance_id="A", protocols=protocols)))
    ctx.record("join.dynamic.v3", await conn.request(d.join_group(3, "", protocols=protocols)))
    sync = d.sync_group(5, "", generation=1, member_id="x", protocol_type="consumer", protocol_name="range")
    ctx.record("sync", await conn.request(sync))
    ctx.record("heartbeat", await conn.request(d.heartbeat(4, "", generation=1, member_id="x")))
    ctx.record("leave.v0", await conn.request(d.leave_group(0, "", member_id="x")))
    ctx.record("leave.v5", await conn.request(d.leave_group(5, "", members=[("", "A")])))
    ctx.record("describe.before", await conn.request(d.describe_groups(5, "")))
    ctx.record("commit", await conn.request(d.offset_commit(9, "", offsets={"t1": {0: 11}})))
    ctx.record("fetch", await conn.request(d.offset_fetch(7, "", partitions={"t1": [0]})))
    ctx.record("describe.after_commit", await conn.request(d.describe_groups(5, "")))
    deleted = await conn.request(d.delete_groups(2, ""))
    ctx.record("delete", deleted)
    ctx.fact("delete.ok", all(r.error_code == ErrorCode.none for r in deleted.results))
    return ctx.outcome
