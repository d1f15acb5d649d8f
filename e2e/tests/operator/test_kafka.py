"""The same fleet against a real Apache Kafka broker (KRaft, jars from Maven Central via the conformance
suite's provisioning): no coordinator API and no pre-registration, so the operator holds a scale-up's join
phase with a pending member instead, and still one prompt removal on scale-down."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest

from conformance.kafka_broker import GroupSettings, KafkaBroker
from e2e.helpers import Cluster, wait_until
from staticfleet.admin import GroupAdmin, GroupNotFound, KafkaConnection

from .harness import (
    OperatorRunner,
    condition,
    consumer_template,
    events,
    fleet_manifest,
    ready_with,
    stopwatch,
    timing,
    wait_fleet,
)

pytestmark = pytest.mark.localcluster

NAME = "orders"


@pytest.fixture(scope="module")
def kafka(tmp_path_factory: pytest.TempPathFactory) -> Iterator[KafkaBroker]:
    broker = KafkaBroker(
        GroupSettings(
            initial_rebalance_delay_ms=0, min_session_timeout_ms=6_000, max_session_timeout_ms=1_800_000
        ),
        tmp_path_factory.mktemp("kafka"),
    )
    asyncio.run(broker.start())
    try:
        yield broker
    finally:
        broker.stop()


def members(bootstrap: str, group: str) -> set[str]:
    with GroupAdmin(KafkaConnection(bootstrap)) as admin:
        try:
            described = admin.describe_group(group)
        except GroupNotFound:
            return set()
        return set(described.instance_ids) if described.state == "Stable" else set()


def create_topic(kafka: KafkaBroker, topic: str, partitions: int) -> str:
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic

    admin = KafkaAdminClient(bootstrap_servers=kafka.bootstrap)
    try:
        admin.create_topics([NewTopic(topic, partitions, 1)])
    finally:
        admin.close()
    return topic


def test_a_fleet_on_apache_kafka_scales_down_with_a_prompt_removal(
    cluster: Cluster, namespace: str, kafka: KafkaBroker, operator: OperatorRunner
) -> None:
    kubectl = cluster.kubectl
    topic = create_topic(kafka, f"{namespace}-orders", 6)
    gid = f"{namespace}.{NAME}"
    operator.start()
    kubectl.apply(fleet_manifest(NAME, 2, kafka.bootstrap, topic, sessionTimeoutMs=60_000), namespace)
    body = wait_fleet(kubectl, namespace, NAME, ready_with(2), timeout=120, what="Ready with 2 on Kafka")

    status = body["status"]
    assert status["group"]["rebalancesSource"] == "observed"
    assert "generation" not in status["group"]
    assert [m["instanceId"] for m in status["members"]] == ["orders-0", "orders-1"]
    scaled = events(kubectl, namespace, NAME, "Scaled")[0]["message"]
    assert "the join phase is held until the new instances have joined" in scaled
    assert "preRegistration" not in status  # released once both had joined

    elapsed = stopwatch()
    kubectl.run("scale", f"scg/{NAME}", "-n", namespace, "--replicas=1")
    wait_until(
        lambda: members(kafka.bootstrap, gid) == {"orders-0"}, timeout=40, what="orders-1 gone on Kafka"
    )
    timing("Kafka: scale 2->1, departing member gone after", elapsed())
    body = wait_fleet(kubectl, namespace, NAME, ready_with(1), timeout=60, what="Ready with 1")
    assert elapsed() < 40, "well before the 60 s session timeout"
    assert "scaleDown" not in body["status"]
    # The departing consumer left on its own (a static member's LeaveGroup, on Kafka too); the operator's
    # removal once its pod had stopped found it gone.
    (removed,) = events(kubectl, namespace, NAME, "MembersRemoved")
    assert "already gone: orders-1" in removed["message"]
    assert condition(body, "Degraded")["status"] == "False"

    kubectl.run("scale", f"scg/{NAME}", "-n", namespace, "--replicas=3")
    wait_until(
        lambda: members(kafka.bootstrap, gid) == {"orders-0", "orders-1", "orders-2"},
        timeout=60,
        what="orders-1 and orders-2 joined on Kafka",
    )
    body = wait_fleet(kubectl, namespace, NAME, ready_with(3), timeout=60, what="Ready with 3")
    assert "preRegistration" not in body["status"]
    assert [m["instanceId"] for m in body["status"]["members"]] == ["orders-0", "orders-1", "orders-2"]


def test_a_fleet_of_two_member_pods_on_apache_kafka_removes_every_departed_member_in_one_batch(
    cluster: Cluster, namespace: str, kafka: KafkaBroker, operator: OperatorRunner
) -> None:
    kubectl = cluster.kubectl
    topic = create_topic(kafka, f"{namespace}-orders", 8)
    gid = f"{namespace}.{NAME}"
    pods = {0: {"orders-0-1", "orders-0-2"}, 1: {"orders-1-1", "orders-1-2"}, 2: {"orders-2-1", "orders-2-2"}}

    operator.start()
    # Consumers that do not read the departure mark: the operator's removal batch is what is tested.
    template = consumer_template(leaves_when_departing=False)
    manifest = fleet_manifest(
        NAME, 3, kafka.bootstrap, topic, sessionTimeoutMs=60_000, membersPerPod=2, template=template
    )
    kubectl.apply(manifest, namespace)
    body = wait_fleet(kubectl, namespace, NAME, ready_with(3, 2), timeout=150, what="Ready with 3 x 2")
    assert members(kafka.bootstrap, gid) == pods[0] | pods[1] | pods[2]
    assert [m["pod"] for m in body["status"]["members"]] == ["orders-0"] * 2 + ["orders-1"] * 2 + [
        "orders-2"
    ] * 2
    scaled = events(kubectl, namespace, NAME, "Scaled")[0]["message"]
    assert "the join phase is held until the new instances have joined" in scaled

    elapsed = stopwatch()
    kubectl.run("scale", f"scg/{NAME}", "-n", namespace, "--replicas=1")
    wait_until(
        lambda: members(kafka.bootstrap, gid) == pods[0], timeout=40, what="pods 1 and 2's members removed"
    )
    timing("Kafka: scale 3->1 pods x 2, departed members removed after", elapsed())
    body = wait_fleet(kubectl, namespace, NAME, ready_with(1, 2), timeout=60, what="Ready with 1 x 2")
    assert elapsed() < 40, "well before the 60 s session timeout"
    (removed,) = events(kubectl, namespace, NAME, "MembersRemoved")
    assert "removed orders-1-1, orders-1-2, orders-2-1, orders-2-2" in removed["message"]
    batches = f'staticfleet_operator_removal_batches_total{{group="{gid}",result="ok"}} 1.0'
    assert batches in operator.metrics(), "every departed member in one LeaveGroup batch"
    assert condition(body, "MembersOutsideFleet")["status"] == "False"

    kubectl.run("scale", f"scg/{NAME}", "-n", namespace, "--replicas=2")
    wait_until(
        lambda: members(kafka.bootstrap, gid) == pods[0] | pods[1], timeout=60, what="pod 1's members joined"
    )
    body = wait_fleet(kubectl, namespace, NAME, ready_with(2, 2), timeout=60, what="Ready with 2 x 2")
    assert "preRegistration" not in body["status"]  # the hold was released once all four had joined
    scaled = events(kubectl, namespace, NAME, "Scaled")[-1]["message"]
    assert scaled.startswith("scaling up from 1 to 2; the join phase is held")
