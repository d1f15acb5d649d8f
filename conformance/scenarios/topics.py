"""Topic configs, DeleteRecords and OffsetDelete: what Kafka Streams (at least once) and
`kafka-consumer-groups --delete-offsets` ask of a broker."""

from __future__ import annotations

import asyncio
from typing import Any

from kio.schema.errors import ErrorCode

from conformance import driver as d
from conformance.scenario import SECURED, Outcome, ScenarioContext, scenario, setup_s2
from conformance.scenarios.security_acl import GROUP, TOPIC, acl

# The configs Kafka Streams gives its internal topics (InternalTopicManager): a store's changelog, a
# windowed store's changelog and a repartition topic.
CHANGELOG = {
    "cleanup.policy": "compact",
    "message.timestamp.type": "CreateTime",
    "min.compaction.lag.ms": "0",
    "max.compaction.lag.ms": "9223372036854775807",
    "min.cleanable.dirty.ratio": "0.5",
    "segment.bytes": "52428800",
    "delete.retention.ms": "86400000",
}
WINDOWED_CHANGELOG = {"cleanup.policy": "compact,delete", "retention.ms": "172800000"}
REPARTITION = {
    "cleanup.policy": "delete",
    "segment.bytes": "52428800",
    "retention.ms": "-1",
    "message.timestamp.type": "CreateTime",
}
_TOPIC_RESOURCE = 2


def _created(raw: Any) -> d.Json:
    return [{"error_code": t.error_code.name.upper(), "error_message": t.error_message} for t in raw.topics]


async def _configs(conn: d.Connection, topic: str, names: list[str]) -> d.Json:
    """The values of these configs of a topic, and whether each is set on the topic (source 1)."""
    raw = await conn.request(d.describe_configs(4, [(_TOPIC_RESOURCE, topic)]))
    (result,) = raw.results
    shown = {c.name: [c.value, int(c.config_source) == 1] for c in result.configs if c.name in names}
    return {"error_code": result.error_code.name.upper(), "configs": dict(sorted(shown.items()))}


async def _topic(ctx: ScenarioContext, suffix: str, partitions: int, configs: dict[str, str]) -> str:
    """A new topic of this scenario with these configs, usable (Metadata shows its leaders)."""
    name = f"{ctx.group}-{suffix}"
    conn = await ctx.observer()
    created = await conn.request(d.create_topics(7, {name: partitions}, configs={name: configs}))
    assert created.topics[0].error_code == ErrorCode.none, created
    await d.ensure_topic(conn, name, partitions)
    return name


async def _produce(
    conn: d.Connection, topic: str, partition: int, count: int, *, key: bytes | None = None
) -> None:
    """Appends `count` records as one batch. A partition Metadata already shows a leader for may not be
    led yet (Kafka's replica manager takes it up a moment later): such a retriable refusal is retried, as
    every producer does, for up to 5 s."""
    values = [f"v{n}".encode() for n in range(count)]
    for _ in range(50):
        answer = await conn.request(d.produce(topic, partition, d.record_batch(values, key=key)))
        error = answer.responses[0].partition_responses[0].error_code
        if error not in (ErrorCode.not_leader_or_follower, ErrorCode.leader_not_available):
            break
        await asyncio.sleep(0.1)
    assert error == ErrorCode.none, answer


def _partitions(raw: Any, fields: tuple[str, ...]) -> d.Json:
    """Each topic's partitions as {field: value}, topics and partitions in a stable order."""

    def plain(value: Any) -> int | str:
        return str(value.name).upper() if isinstance(value, ErrorCode) else int(value)

    out: dict[str, d.Json] = {}
    for t in raw.topics:
        rows = sorted(([plain(getattr(p, f)) for f in fields] for p in t.partitions), key=lambda row: row[0])
        out[str(t.name)] = [dict(zip(fields, row, strict=True)) for row in rows]
    return dict(sorted(out.items()))  # Kafka's order of topics is its hash map's


@scenario(
    "CreateTopics accepts the configs Kafka Streams gives its internal topics (a compacted changelog, a "
    "compact,delete windowed changelog, a repartition topic with infinite retention) and DescribeConfigs "
    "shows each as set on the topic.",
    rule="Kafka Streams InternalTopicManager; LogConfig",
)
async def create_topics_with_the_configs_of_streams_internal_topics(ctx: ScenarioContext) -> Outcome:
    conn = await ctx.observer()
    for suffix, configs in (
        ("store-changelog", CHANGELOG),
        ("window-changelog", WINDOWED_CHANGELOG),
        ("repartition", REPARTITION),
    ):
        name = f"{ctx.group}-{suffix}"
        raw = await conn.request(d.create_topics(7, {name: 2}, configs={name: configs}))
        ctx.fact(f"create.{suffix}", _created(raw))
        await d.ensure_topic(conn, name, 2)
        ctx.fact(f"describe.{suffix}", await _configs(conn, name, sorted(configs)))
    return ctx.outcome


@scenario(
    "CreateTopics refuses topic configs outside Kafka's bounds with INVALID_CONFIG and Kafka's message: an "
    "unknown cleanup.policy, a dirty ratio above 1 or not a number, negative compaction lags, a minimum "
    "compaction lag above the maximum, an integer beyond INT, a null value, and config names Kafka 4 no "
    "longer knows.",
    rule="LogConfig.validate; ConfigDef validators",
)
async def create_topics_refuses_invalid_topic_configs(ctx: ScenarioContext) -> Outcome:
    conn = await ctx.observer()
    cases: dict[str, dict[str, str | None]] = {
        "policy": {"cleanup.policy": "compact,shred"},
        "ratio_high": {"min.cleanable.dirty.ratio": "2"},
        "ratio_text": {"min.cleanable.dirty.ratio": "half"},
        "min_lag": {"min.compaction.lag.ms": "-1"},
        "max_lag": {"max.compaction.lag.ms": "0"},
        "lags": {"min.compaction.lag.ms": "10", "max.compaction.lag.ms": "5"},
        "delete_retention": {"delete.retention.ms": "-1"},
        "retention": {"retention.ms": "-2"},
        "timestamp_type": {"message.timestamp.type": "createtime"},
        "segment_int": {"segment.bytes": "3000000000"},
        "boolean": {"preallocate": "yes"},
        "null": {"retention.ms": None},
        "removed": {"message.format.version": "3.0"},
        "unknown": {"no.such.config": "1"},
    }
    for label, configs in cases.items():
        name = f"{ctx.group}-{label.replace('_', '-')}"
        raw = await conn.request(d.create_topics(7, {name: 1}, configs={name: configs}))
        ctx.fact(f"create.{label}", _created(raw))
    return ctx.outcome


@scenario(
    "IncrementalAlterConfigs on a topic's cleanup.policy: SET compact, APPEND delete, a SET of an unknown "
    "policy refused with INVALID_CONFIG, DELETE; DescribeConfigs shows the value after each.",
    rule="KIP-339; LogConfig",
)
async def incremental_alter_configs_of_cleanup_policy(ctx: ScenarioContext) -> Outcome:
    conn = await ctx.observer()
    name = await _topic(ctx, "t", 1, {})
    shown = await _configs(conn, name, ["cleanup.policy"])
    for label, op, value in (
        ("set_compact", 0, "compact"),
        ("append_delete", 2, "delete"),
        ("set_unknown", 0, "shred"),
        ("delete", 1, None),
    ):
        raw = await conn.request(
            d.incremental_alter_configs(1, [(_TOPIC_RESOURCE, name, [("cleanup.policy", op, value)])])
        )
        answers: list[d.Json] = [
            {"error_code": r.error_code.name.upper(), "error_message": r.error_message} for r in raw.responses
        ]
        ctx.fact(f"alter.{label}", answers)
        # Kafka's DescribeConfigs reads the broker's copy of the metadata, which follows an accepted change
        # a moment later (seconds on a loaded machine): read until the value changes, for at most 15 s.
        accepted = all(r.error_code == ErrorCode.none for r in raw.responses)
        deadline = asyncio.get_running_loop().time() + (15.0 if accepted else 0.0)
        before = shown
        while (shown := await _configs(conn, name, ["cleanup.policy"])) == before:
            if asyncio.get_running_loop().time() > deadline:
                break
            await asyncio.sleep(0.05)
        ctx.fact(f"describe.{label}", shown)
    return ctx.outcome


@scenario(
    "DeleteRecords moves a partition's log start offset (the low watermark) up, never down; -1 means the "
    "high watermark; beyond it is OFFSET_OUT_OF_RANGE; an unknown partition or topic is "
    "UNKNOWN_TOPIC_OR_PARTITION. ListOffsets and Fetch honour the new start.",
    rule="ReplicaManager.deleteRecords; Partition.deleteRecordsOnLeader",
)
async def delete_records_moves_the_low_watermark(ctx: ScenarioContext) -> Outcome:
    conn = await ctx.observer()
    topic = await _topic(ctx, "repartition", 2, REPARTITION)
    absent = f"{ctx.group}-absent"
    for _ in range(3):
        await _produce(conn, topic, 0, 4)  # three batches: offsets 0..11
    await _produce(conn, topic, 1, 2)
    fields = ("partition_index", "low_watermark", "error_code")
    for label, offsets in (
        ("to_5", {topic: {0: 5, 1: 2}}),
        ("back_to_3", {topic: {0: 3}}),
        ("beyond_high_watermark", {topic: {0: 13, 1: 3}}),
        ("unknown", {topic: {7: 0}, absent: {0: 0}}),
        ("negative", {topic: {0: -2}}),
        ("to_high_watermark", {topic: {1: -1}}),
    ):
        ctx.fact(f"delete.{label}", _partitions(await conn.request(d.delete_records(2, offsets)), fields))
    listed = await conn.request(d.list_offsets(topic, {0: -2, 1: -2}))
    ctx.fact("earliest", _partitions(listed, ("partition_index", "offset", "error_code")))
    for label, offset in (("below_start", 4), ("at_start", 5)):
        fetched = await conn.request(d.fetch(topic, 0, offset))
        (partition,) = fetched.responses[0].partitions
        ctx.fact(
            f"fetch.{label}",
            {
                "error_code": partition.error_code.name.upper(),
                "log_start_offset": int(partition.log_start_offset),
                "high_watermark": int(partition.high_watermark),
                "has_records": bool(partition.records),
            },
        )
    return ctx.outcome


@scenario(
    "DeleteRecords v0, v1 and v2 answer alike; a topic whose cleanup.policy is compact alone refuses it "
    "with POLICY_VIOLATION, a compact,delete topic accepts it. A compacted topic refuses records without a "
    "key (INVALID_RECORD, each named in record_errors).",
    rule="Partition.deleteRecordsOnLeader; LogValidator",
)
async def delete_records_versions_and_cleanup_policy(ctx: ScenarioContext) -> Outcome:
    conn = await ctx.observer()
    plain = await _topic(ctx, "plain", 1, {})
    compacted = await _topic(ctx, "changelog", 1, CHANGELOG)
    windowed = await _topic(ctx, "window", 1, WINDOWED_CHANGELOG)
    await _produce(conn, plain, 0, 6)
    for topic in (compacted, windowed):
        await _produce(conn, topic, 0, 6, key=b"k")
    unkeyed = d.record_batch([b"a", b"b"])
    ctx.record("produce.unkeyed_to_compacted", await conn.request(d.produce(compacted, 0, unkeyed)))
    fields = ("partition_index", "low_watermark", "error_code")
    for version in (0, 1, 2):
        raw = await conn.request(d.delete_records(version, {plain: {0: version + 1}}))
        ctx.fact(f"delete.v{version}", _partitions(raw, fields))
    raw = await conn.request(d.delete_records(2, {compacted: {0: 2}, windowed: {0: 2}}))
    ctx.fact("delete.by_policy", _partitions(raw, fields))
    return ctx.outcome


@scenario(
    "OffsetDelete of a group that does not exist is GROUP_ID_NOT_FOUND; in an Empty group it removes the "
    "committed offsets asked for (NONE also for a partition without one), an unknown topic or partition "
    "is UNKNOWN_TOPIC_OR_PARTITION, and OffsetFetch no longer finds them.",
    rule="OffsetMetadataManager.deleteOffsets; KafkaApis.handleOffsetDeleteRequest",
)
async def offset_delete_in_an_empty_group(ctx: ScenarioContext) -> Outcome:
    conn = await ctx.observer()
    topic = await _topic(ctx, "t", 3, {})
    absent = f"{ctx.group}-absent"
    missing = await conn.request(d.offset_delete(0, ctx.new_group(), {topic: [0]}))
    ctx.record("delete.unknown_group", missing)
    commit = d.offset_commit(9, ctx.group, generation=-1, member_id="", offsets={topic: {0: 3, 1: 4}})
    ctx.record("commit", await conn.request(commit))
    deleted = await conn.request(d.offset_delete(0, ctx.group, {topic: [0, 2, 9], absent: [0]}))
    ctx.fact("delete.error_code", deleted.error_code.name.upper())
    ctx.fact("delete.partitions", _partitions(deleted, ("partition_index", "error_code")))
    fetched = await conn.request(d.offset_fetch(7, ctx.group, partitions={topic: [0, 1, 2]}))
    ctx.record("fetch", fetched)
    await ctx.snapshot("describe")
    return ctx.outcome


@scenario(
    "OffsetDelete in a Stable consumer group: GROUP_SUBSCRIBED_TO_TOPIC for every partition of a topic its "
    "members subscribe to (the offset stays), NONE for another topic; once its members have left, the "
    "group subscribes to nothing; a group with members whose protocol type is not consumer is "
    "NON_EMPTY_GROUP.",
    rule="ClassicGroup.validateDeleteOffset; ClassicGroup.isSubscribedToTopic",
)
async def offset_delete_in_a_group_with_members(ctx: ScenarioContext) -> Outcome:
    await ctx.ensure_topic("t1", 4)
    other = await _topic(ctx, "other", 2, {})
    a, _ = await setup_s2(ctx, record=False)
    commit = d.offset_commit(
        9,
        ctx.group,
        generation=1,
        member_id=a.member_id,
        instance_id="A",
        offsets={"t1": {0: 5}, other: {0: 6}},
    )
    ctx.record("commit", await a.conn.request(commit))
    deleted = await a.conn.request(d.offset_delete(0, ctx.group, {"t1": [0, 1], other: [0]}))
    ctx.fact("delete.error_code", deleted.error_code.name.upper())
    ctx.fact("delete.partitions", _partitions(deleted, ("partition_index", "error_code")))
    fetched = await a.conn.request(d.offset_fetch(7, ctx.group, partitions={"t1": [0], other: [0]}))
    ctx.record("fetch", fetched)
    ctx.record("leave", await a.conn.request(d.leave_group(5, ctx.group, members=[("", "A"), ("", "B")])))
    await ctx.snapshot("describe.after_leave")
    ctx.record("delete.after_leave", await a.conn.request(d.offset_delete(0, ctx.group, {"t1": [0]})))
    connect_group = ctx.new_group()
    c = await ctx.member("C", group=connect_group)
    ctx.record("join.connect", await c.join(9, protocol_type="connect").result())
    ctx.record("delete.connect", await c.conn.request(d.offset_delete(0, connect_group, {other: [0]})))
    return ctx.outcome


@scenario(
    "ApiVersions advertises DeleteRecords v0-v2 and OffsetDelete v0, and the topic APIs Kafka Streams uses "
    "(CreateTopics, DescribeConfigs, IncrementalAlterConfigs) with Kafka's ranges.",
    rule="ApiVersions; KIP-896",
)
async def api_versions_streams_admin_apis(ctx: ScenarioContext) -> Outcome:
    conn = await ctx.connect("c")
    wanted = {19: "create_topics", 21: "delete_records", 32: "describe_configs"}
    wanted |= {44: "incremental_alter_configs", 47: "offset_delete"}
    raw = await conn.request(d.api_versions(3))
    ctx.fact(
        "api_versions",
        {
            wanted[int(k.api_key)]: [int(k.min_version), int(k.max_version)]
            for k in raw.api_keys
            if int(k.api_key) in wanted
        },
    )
    return ctx.outcome


@scenario(
    "ACLs: DeleteRecords needs DELETE on the topic (TOPIC_AUTHORIZATION_FAILED per partition otherwise); "
    "OffsetDelete needs DELETE on the group (GROUP_AUTHORIZATION_FAILED for the whole request) and READ on "
    "each topic (TOPIC_AUTHORIZATION_FAILED for that topic's partitions, the others are deleted).",
    rule="KafkaApis.handleDeleteRecordsRequest; KafkaApis.handleOffsetDeleteRequest",
    settings=SECURED,
)
async def acl_delete_records_and_offset_delete(ctx: ScenarioContext) -> Outcome:
    deletable, kept = ctx.new_topic(), ctx.new_topic()
    for topic in (deletable, kept):
        await ctx.ensure_topic(topic, 1)
    admin = await ctx.admin()
    for topic in (deletable, kept):
        await _produce(admin, topic, 0, 4)
    await admin.request(
        d.offset_commit(9, ctx.group, generation=-1, member_id="", offsets={deletable: {0: 1}, kept: {0: 2}})
    )
    other = ctx.new_group()
    await ctx.grant(
        acl(TOPIC, deletable, d.OP_DELETE),
        acl(TOPIC, deletable, d.OP_READ),
        acl(GROUP, ctx.group, d.OP_DELETE),
    )
    bob = await ctx.login("bob")
    fields = ("partition_index", "low_watermark", "error_code")
    raw = await bob.request(d.delete_records(2, {deletable: {0: 2}, kept: {0: 2}}))
    ctx.fact("delete_records", {ctx.norm.text(k): v for k, v in _as_dict(_partitions(raw, fields)).items()})
    ctx.record("offset_delete.group_denied", await bob.request(d.offset_delete(0, other, {deletable: [0]})))
    deleted = await bob.request(d.offset_delete(0, ctx.group, {deletable: [0], kept: [0]}))
    ctx.fact("offset_delete.error_code", deleted.error_code.name.upper())
    ctx.fact(
        "offset_delete.partitions",
        {
            ctx.norm.text(k): v
            for k, v in _as_dict(_partitions(deleted, ("partition_index", "error_code"))).items()
        },
    )
    fetched = await admin.request(d.offset_fetch(7, ctx.group, partitions={deletable: [0], kept: [0]}))
    ctx.record("offset_fetch", fetched)
    return ctx.outcome


def _as_dict(value: d.Json) -> dict[str, d.Json]:
    assert isinstance(value, dict)
    return value
