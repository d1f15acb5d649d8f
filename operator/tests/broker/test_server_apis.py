"""The broker's non-group APIs and framing rules, against an in-process server over real sockets."""

from __future__ import annotations

import asyncio
import json
import struct
import urllib.request
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

from kafka import KafkaAdminClient, KafkaConsumer, KafkaProducer, TopicPartition
from kafka.admin import NewPartitions

from conformance import driver as d
from staticfleet.broker.apis.groups import _ClearedWhenFull
from staticfleet.broker.server import BrokerServer, BrokerSettings
from staticfleet.coordinator import CoordinatorConfig
from staticfleet.coordinator.consumer_protocol import Subscription, encode_subscription
from tests.broker.kafka_batches import simple_batch


def serve(tmp_path: Path, test: Callable[[BrokerServer], Awaitable[None]], **settings: Any) -> None:
    """Run `test` against a fresh in-process server (Kafka on a random port, HTTP on another)."""

    async def main() -> None:
        server = BrokerServer(
            BrokerSettings(
                data_dir=tmp_path / "data",
                listen_port=0,
                http_host="127.0.0.1",
                http_port=0,
                fsync=False,
                coordinator=CoordinatorConfig(initial_rebalance_delay_ms=0, min_session_timeout_ms=100),
                **settings,
            )
        )
        await server.start()
        try:
            await test(server)
        finally:
            await server.stop()

    asyncio.run(main())


async def _connect(server: BrokerServer) -> AsyncIterator[d.Connection]:
    async with d.Driver("127.0.0.1", server.port) as driver:
        yield await driver.connect("t")


def test_metadata_for_a_missing_topic_without_auto_creation_is_unknown_topic_at_every_version(
    tmp_path: Path,
) -> None:
    async def test(server: BrokerServer) -> None:
        async for conn in _connect(server):
            for version in (4, 9, 10, 12):
                response = await conn.request(
                    d.metadata(version, ["absent"], allow_auto_topic_creation=False)
                )
                assert [(t.name, int(t.error_code)) for t in response.topics] == [("absent", 3)], version
            assert not conn.closed

    serve(tmp_path, test)


def test_metadata_auto_creates_a_requested_topic_with_the_default_partition_count(tmp_path: Path) -> None:
    async def test(server: BrokerServer) -> None:
        async for conn in _connect(server):
            response = await conn.request(d.metadata(12, ["auto"], allow_auto_topic_creation=True))
            (topic,) = response.topics
            assert int(topic.error_code) == 0 and len(topic.partitions) == 3
            assert {int(p.leader_id) for p in topic.partitions} == {1}
            assert [(b.host, int(b.port)) for b in response.brokers] == [("127.0.0.1", server.port)]

    serve(tmp_path, test, default_partitions=3)


def test_an_api_versions_request_with_a_version_too_new_is_answered_as_v0_listing_api_versions(
    tmp_path: Path,
) -> None:
    async def test(server: BrokerServer) -> None:
        async for conn in _connect(server):
            response = await d.send_at_version(conn, d.api_versions(3), 99).result()
            assert int(response.error_code) == 35
            assert [(int(k.api_key), int(k.min_version), int(k.max_version)) for k in response.api_keys] == [
                (18, 0, 4)
            ]

    serve(tmp_path, test)


def test_an_unknown_api_key_and_an_unsupported_version_close_only_that_connection(tmp_path: Path) -> None:
    async def test(server: BrokerServer) -> None:
        async with d.Driver("127.0.0.1", server.port) as driver:
            bystander = await driver.connect("bystander")
            for api_key, version in ((250, 0), (12, 99)):
                reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
                body = struct.pack(">hhih", api_key, version, 1, -1)
                writer.write(struct.pack(">i", len(body)) + body)
                assert await reader.read() == b"", "closed without an answer"
                writer.close()
            response = await bystander.request(d.api_versions(3))
            assert int(response.error_code) == 0

    serve(tmp_path, test)


def test_produce_with_acks_zero_gets_no_answer_but_later_requests_do(tmp_path: Path) -> None:
    producer_frames: list[bytes] = []

    async def test(server: BrokerServer) -> None:
        # Clients block while connecting: build them off the loop that serves them.
        producer = await asyncio.to_thread(
            KafkaProducer, bootstrap_servers=f"127.0.0.1:{server.port}", acks=0
        )
        await asyncio.to_thread(lambda: [producer.send("fire", b"x%d" % i) for i in range(10)])
        await asyncio.to_thread(producer.flush)
        await asyncio.to_thread(producer.close)
        assert server.topics is not None
        for _ in range(50):
            if server.topics.log_end_offset("fire", 0) == 10:
                break
            await asyncio.sleep(0.1)
        assert server.topics.log_end_offset("fire", 0) == 10
        producer_frames.append(b"ok")

    serve(tmp_path, test)
    assert producer_frames == [b"ok"]


def test_group_configs_through_describe_and_incremental_alter_configs(tmp_path: Path) -> None:
    from staticfleet.admin import GroupAdmin, KafkaConnection
    from staticfleet.admin.errors import ConfigRejected

    async def test(server: BrokerServer) -> None:
        def exercise() -> None:
            with GroupAdmin(KafkaConnection(f"127.0.0.1:{server.port}")) as admin:
                admin.set_group_config("g", "staticfleet.expected.instance.ids", "a,b")
                assert admin.describe_group_configs("g") == {"staticfleet.expected.instance.ids": "a,b"}
                try:
                    admin.set_group_config("g", "consumer.session.timeout.ms", "1000")
                    raise AssertionError("an unknown group config must be refused")
                except ConfigRejected as exc:
                    assert exc.code == 40 and "Unknown group config name" in str(exc)
                admin.set_group_config("g", "staticfleet.expected.instance.ids", None)
                assert admin.describe_group_configs("g") == {}

        await asyncio.to_thread(exercise)

    serve(tmp_path, test)


def test_partition_growth_rebalances_a_subscribed_consumer_group(tmp_path: Path) -> None:
    async def test(server: BrokerServer) -> None:
        bootstrap = f"127.0.0.1:{server.port}"
        async for conn in _connect(server):
            await d.ensure_topic(conn, "grow", 2)
            subscription = encode_subscription(Subscription(0, ("grow",)))
            joined = await conn.request(
                d.join_group(5, "g", instance_id="a", protocols=(("range", subscription),))
            )
            sync = d.sync_group(
                5,
                "g",
                generation=joined.generation_id,
                member_id=joined.member_id,
                instance_id="a",
                protocol_type="consumer",
                protocol_name="range",
                assignments=[(joined.member_id, d.assignment({"grow": [0, 1]}))],
            )
            await conn.request(sync)
            admin = await asyncio.to_thread(KafkaAdminClient, bootstrap_servers=bootstrap)
            await asyncio.to_thread(admin.create_partitions, {"grow": NewPartitions(4)})
            await asyncio.to_thread(admin.close)
            response = await conn.request(
                d.heartbeat(
                    4, "g", generation=joined.generation_id, member_id=joined.member_id, instance_id="a"
                )
            )
            assert int(response.error_code) == 27, "REBALANCE_IN_PROGRESS after the topic grew"

            def group() -> Any:
                with urllib.request.urlopen(f"http://127.0.0.1:{server.http_port}/api/groups/g") as r:
                    return json.loads(r.read())

            assert (await asyncio.to_thread(group))["rebalanceInProgress"]["reason"] == "partitions-changed"

    serve(tmp_path, test)


def test_fetch_long_poll_is_woken_by_a_produce(tmp_path: Path) -> None:
    async def test(server: BrokerServer) -> None:
        bootstrap = f"127.0.0.1:{server.port}"
        consumer = await asyncio.to_thread(
            KafkaConsumer, bootstrap_servers=bootstrap, fetch_max_wait_ms=5_000, consumer_timeout_ms=8_000
        )
        await asyncio.to_thread(consumer.assign, [TopicPartition("poll", 0)])
        producer = await asyncio.to_thread(KafkaProducer, bootstrap_servers=bootstrap)
        await asyncio.to_thread(lambda: producer.send("poll", b"ready").get(10))

        def first_value() -> bytes:
            consumer.seek(TopicPartition("poll", 0), 1)
            value: bytes = next(iter(consumer)).value  # parked in a long poll until the second record
            return value

        waiting = asyncio.create_task(asyncio.to_thread(first_value))
        await asyncio.sleep(1.0)
        started = asyncio.get_running_loop().time()
        await asyncio.to_thread(lambda: producer.send("poll", b"woken").get(10))
        assert await waiting == b"woken"
        assert asyncio.get_running_loop().time() - started < 3.0, "the append woke the fetch"
        await asyncio.to_thread(producer.close)
        await asyncio.to_thread(consumer.close)

    serve(tmp_path, test, auto_create_topics=True)


def test_http_api_serves_health_readiness_metrics_and_groups(tmp_path: Path) -> None:
    async def test(server: BrokerServer) -> None:
        base = f"http://127.0.0.1:{server.http_port}"

        def get(path: str) -> tuple[int, str]:
            try:
                with urllib.request.urlopen(base + path) as r:
                    return r.status, r.read().decode()
            except urllib.error.HTTPError as exc:
                return exc.code, exc.read().decode()

        async for conn in _connect(server):
            await conn.request(d.join_group(5, "visible", instance_id="a", protocols=(("range", b""),)))
        assert (await asyncio.to_thread(get, "/healthz"))[0] == 200
        status, body = await asyncio.to_thread(get, "/readyz")
        assert status == 200 and json.loads(body)["status"] == "ready"
        status, metrics = await asyncio.to_thread(get, "/metrics")
        assert 'staticfleet_requests_total{api="JoinGroup",error="0",version="5"} 1.0' in metrics
        assert "staticfleet_groups" in metrics and "staticfleet_request_latency_seconds" in metrics
        status, groups = await asyncio.to_thread(get, "/api/groups")
        listing = json.loads(groups)
        assert [g["groupId"] for g in listing["groups"]] == ["visible"]
        assert listing["remaining"] == 0 and "continue" not in listing, "one page holds it all"
        assert (await asyncio.to_thread(get, "/api/groups/nope"))[0] == 404

    serve(tmp_path, test)


def test_describe_cluster_and_init_producer_id(tmp_path: Path) -> None:
    async def test(server: BrokerServer) -> None:
        admin = await asyncio.to_thread(KafkaAdminClient, bootstrap_servers=f"127.0.0.1:{server.port}")
        cluster = await asyncio.to_thread(admin.describe_cluster)
        assert cluster["controller_id"] == 1 and len(cluster["brokers"]) == 1
        await asyncio.to_thread(admin.close)
        producer = await asyncio.to_thread(
            KafkaProducer, bootstrap_servers=f"127.0.0.1:{server.port}", enable_idempotence=True
        )
        await asyncio.to_thread(lambda: producer.send("idem", b"once").get(10))
        await asyncio.to_thread(producer.close)

    serve(tmp_path, test)


def test_delete_groups_reports_an_unknown_group_at_every_served_version(tmp_path: Path) -> None:
    async def test(server: BrokerServer) -> None:
        async for conn in _connect(server):
            for version in (0, 1, 2):
                response = await conn.request(d.delete_groups(version, f"absent-{version}"))
                assert [(r.group_id, int(r.error_code)) for r in response.results] == [
                    (f"absent-{version}", 69)  # GROUP_ID_NOT_FOUND
                ]

    serve(tmp_path, test)


def test_the_cache_of_encoded_answers_makes_each_key_once_and_starts_over_when_full() -> None:
    cache = _ClearedWhenFull[int, str](2)
    made: list[int] = []

    def get(key: int) -> str:
        def make() -> str:
            made.append(key)
            return f"body {key}"

        return cache.get(key, make)

    assert [get(k) for k in (1, 2, 1, 2)] == ["body 1", "body 2"] * 2
    assert made == [1, 2]
    assert get(3) == "body 3"  # full: 1 and 2 are dropped
    assert get(1) == "body 1"
    assert made == [1, 2, 3, 1]


def test_delete_records_at_every_served_version(tmp_path: Path) -> None:
    async def test(server: BrokerServer) -> None:
        assert server.topics is not None
        server.topics.create_topic("t", 2)
        for _ in range(3):
            server.topics.append("t", 0, simple_batch(2))
        async for conn in _connect(server):
            for version in (0, 1, 2):
                response = await conn.request(d.delete_records(version, {"t": {0: version + 1, 1: 1, 5: 0}}))
                assert [
                    (int(p.partition_index), int(p.low_watermark), int(p.error_code))
                    for p in response.topics[0].partitions
                ] == [
                    (0, version + 1, 0),
                    (1, -1, 1),  # OFFSET_OUT_OF_RANGE: beyond the high watermark 0
                    (5, -1, 3),  # UNKNOWN_TOPIC_OR_PARTITION
                ]
            response = await conn.request(d.delete_records(2, {"t": {0: -1}, "absent": {0: 0}}))
            assert [
                (t.name, [(int(p.low_watermark), int(p.error_code)) for p in t.partitions])
                for t in response.topics
            ] == [
                ("t", [(6, 0)]),
                ("absent", [(-1, 3)]),
            ]
            assert server.topics.log_start_offset("t", 0) == 6

    serve(tmp_path, test)


def test_offset_delete_answers_unknown_partitions_and_removes_a_committed_offset(tmp_path: Path) -> None:
    async def test(server: BrokerServer) -> None:
        assert server.topics is not None
        server.topics.create_topic("t", 2)
        async for conn in _connect(server):
            absent = await conn.request(d.offset_delete(0, "g", {"t": [0]}))
            assert (int(absent.error_code), absent.topics) == (69, ())  # GROUP_ID_NOT_FOUND
            commit = d.offset_commit(9, "g", generation=-1, member_id="", offsets={"t": {0: 3, 1: 4}})
            await conn.request(commit)
            deleted = await conn.request(d.offset_delete(0, "g", {"t": [0, 7], "u": [0]}))
            assert int(deleted.error_code) == 0
            assert {
                (t.name, int(p.partition_index)): int(p.error_code)
                for t in deleted.topics
                for p in t.partitions
            } == {
                ("t", 7): 3,  # UNKNOWN_TOPIC_OR_PARTITION
                ("u", 0): 3,
                ("t", 0): 0,
            }
            fetched = await conn.request(d.offset_fetch(7, "g", partitions={"t": [0, 1]}))
            assert [int(p.committed_offset) for p in fetched.topics[0].partitions] == [-1, 4]

    serve(tmp_path, test)


def test_find_coordinator_for_a_transactional_id_is_invalid_request_at_every_version(tmp_path: Path) -> None:
    async def test(server: BrokerServer) -> None:
        async for conn in _connect(server):
            for version in (1, 3):
                answer = await conn.request(d.find_coordinator(version, "txn", key_type=1))
                assert (int(answer.error_code), int(answer.node_id)) == (42, -1)  # INVALID_REQUEST
                assert "transactions (exactly-once) are not supported" in answer.error_message
            answer = await conn.request(d.find_coordinator(4, "txn", key_type=1))
            assert [(int(c.error_code), int(c.node_id)) for c in answer.coordinators] == [(42, -1)]

    serve(tmp_path, test)
