"""A fleet on Kafka 4's consumer group protocol (`groupProtocol: consumer`, KIP-848), on the embedded
coordinator and on Apache Kafka: the operator reads the group through ConsumerGroupDescribe, a rollout
moves no partition (each static member leaves with epoch -2 and comes back to its own), and a scale-down
is over once the operator has removed the departed members by instance id."""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conformance.kafka_broker import GroupSettings, KafkaBroker
from e2e.helpers import Cluster, Kubectl, Manifest, wait_until
from staticfleet.admin import GroupAdmin, GroupNotFound, KafkaConnection

from .harness import (
    Coordinator,
    OperatorRunner,
    events,
    fleet_manifest,
    pod_uids,
    ready_with,
    rolled_out,
    start_coordinator,
    stop_coordinator,
    stopwatch,
    timing,
    wait_fleet,
)

pytestmark = pytest.mark.localcluster

NAME = "orders"
PARTITIONS = 8
# The coordinator's heartbeat for consumer-protocol groups, the same on both: a reconciliation step waits
# for a member's next heartbeat, and Kafka's 5 s would make every step of this test wait that long.
HEARTBEAT_MS = 1_000


@pytest.fixture(scope="module", params=["embedded", "kafka"])
def backend(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Any]:
    workdir = tmp_path_factory.mktemp(request.param)
    if request.param == "embedded":
        running = start_coordinator(workdir, ["--group-consumer-heartbeat-interval-ms", str(HEARTBEAT_MS)])
        try:
            yield running
        finally:
            stop_coordinator(running)
        return
    broker = KafkaBroker(
        GroupSettings(initial_rebalance_delay_ms=0, consumer_heartbeat_interval_ms=HEARTBEAT_MS), workdir
    )
    asyncio.run(broker.start())
    try:
        yield broker
    finally:
        broker.stop()


def bootstrap(backend: Any) -> str:
    return str(backend.bootstrap)


def create_topic(backend: Any, topic: str) -> None:
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap(backend))
    try:
        admin.create_topics([NewTopic(topic, PARTITIONS, 1)])
    finally:
        admin.close()


def holdings(backend: Any, group: str) -> dict[str, list[int]]:
    """Each member's partitions by instance id, once the group is Stable (else {})."""
    with GroupAdmin(KafkaConnection(bootstrap(backend))) as admin:
        try:
            described = admin.describe_consumer_group(group)
        except GroupNotFound:
            return {}
    if described.state != "Stable":
        return {}
    return {
        m.instance_id or m.member_id: sorted(p for ps in (m.partitions or {}).values() for p in ps)
        for m in described.members
    }


def start(kubectl: Kubectl, namespace: str, backend: Any, operator: OperatorRunner, replicas: int) -> str:
    topic = f"{namespace}-orders"
    create_topic(backend, topic)
    operator.start()
    # The embedded coordinator's HTTP API knows classic groups only: this fleet is read over Kafka's protocol.
    target: Coordinator | str = bootstrap(backend)
    manifest = fleet_manifest(NAME, replicas, target, topic, groupProtocol="consumer")
    kubectl.apply(manifest, namespace)
    wait_fleet(kubectl, namespace, NAME, ready_with(replicas), timeout=150, what=f"Ready with {replicas}")
    return f"{namespace}.{NAME}"


def test_a_consumer_protocol_fleet_rolls_without_moving_a_partition_and_scales_down(
    cluster: Cluster, namespace: str, backend: Any, operator: OperatorRunner, tmp_path: Path
) -> None:
    kubectl = cluster.kubectl
    gid = start(kubectl, namespace, backend, operator, 4)
    before = wait_until(lambda: holdings(backend, gid), timeout=60, what="the group Stable")
    assert sorted(before) == ["orders-0", "orders-1", "orders-2", "orders-3"]
    assert sorted(p for ps in before.values() for p in ps) == list(range(PARTITIONS))
    # Nothing to pre-register, and it says so while the scale-up runs (status.preRegistration) and after:
    # the pass that sees the group complete drops it, which may come a moment after the fleet is Ready.
    body = wait_fleet(
        kubectl,
        namespace,
        NAME,
        lambda body: "preRegistration" not in body["status"] and body["status"]["group"]["state"] == "Stable",
        timeout=30,
        what="the scale-up's preRegistration news gone once the group is Stable",
    )
    group = body["status"]["group"]
    assert (group["state"], group["protocol"], group["members"]) == ("Stable", "uniform", 4)
    (scaled,) = events(kubectl, namespace, NAME, "Scaled")
    assert "no pre-registration (not needed: on the consumer protocol" in scaled["message"], scaled
    assert group["groupEpoch"] >= group["assignmentEpoch"] > 0
    assert all(m["memberEpoch"] > 0 for m in body["status"]["members"])
    env = {
        e["name"]: e.get("value")
        for e in kubectl.get("statefulset", NAME, namespace)["spec"]["template"]["spec"]["containers"][0][
            "env"
        ]
    }
    assert env["KAFKA_GROUP_PROTOCOL"] == "consumer" and "KAFKA_SESSION_TIMEOUT_MS" not in env

    # A rollout: every static member leaves with epoch -2 and its successor takes its partitions back.
    old_uids = pod_uids(kubectl, namespace, NAME)
    elapsed = stopwatch()
    patch = '[{"op": "add", "path": "/spec/template/metadata/annotations/rollout", "value": "2"}]'
    kubectl.run("patch", "scg", NAME, "-n", namespace, "--type", "json", "-p", patch)
    wait_until(
        lambda: rolled_out(kubectl, namespace, NAME, 4, old_uids), timeout=240, what="every pod replaced"
    )
    wait_fleet(kubectl, namespace, NAME, ready_with(4), timeout=60, what="Ready after the rollout")
    timing(f"{type(backend).__name__}: consumer-protocol rollout of 4 pods", elapsed())
    after = wait_until(lambda: holdings(backend, gid), timeout=60, what="the group Stable after the rollout")
    assert after == before, "a rollout moves no partition"

    # Scale down by half: the departed members are removed by instance id, the survivors take the rest.
    elapsed = stopwatch()
    kubectl.run("scale", f"scg/{NAME}", "-n", namespace, "--replicas=2")
    wait_until(
        lambda: sorted(holdings(backend, gid)) == ["orders-0", "orders-1"],
        timeout=90,
        what="orders-2 and orders-3 gone",
    )
    timing(f"{type(backend).__name__}: consumer-protocol scale 4->2, Stable after", elapsed())
    final = holdings(backend, gid)
    assert sorted(p for ps in final.values() for p in ps) == list(range(PARTITIONS))
    body = wait_fleet(kubectl, namespace, NAME, ready_with(2), timeout=60, what="Ready with 2")
    assert "scaleDown" not in body["status"]
    assert events(kubectl, namespace, NAME, "MembersRemoved"), "the operator removed the departed members"


def produce(backend: Any, topic: str, records: int) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap(backend))
    try:
        for i in range(records):
            producer.send(topic, key=f"k{i}".encode(), value=b"v", partition=i % PARTITIONS)
        producer.flush(timeout=30)
    finally:
        producer.close()


def committed(backend: Any, group: str, topic: str) -> dict[int, int | None]:
    with GroupAdmin(KafkaConnection(bootstrap(backend))) as admin:
        return {row.partition: row.committed for row in admin.partition_offsets(group, [topic])}


def test_a_classic_fleet_switched_to_the_consumer_protocol_keeps_its_offsets(
    cluster: Cluster, namespace: str, backend: Any, operator: OperatorRunner
) -> None:
    """On Apache Kafka the switch is a rollout: the first consumer-protocol member upgrades the classic
    group in place (group.consumer.migration.policy, bidirectional by default). The embedded coordinator
    upgrades only an empty group, so there the fleet is emptied first, as docs/operator.md says."""
    kubectl = cluster.kubectl
    name, topic = "migrating", f"{namespace}-migrating"
    gid = f"{namespace}.{name}"
    create_topic(backend, topic)
    produce(backend, topic, 4 * PARTITIONS)
    operator.start()
    # A session timeout within the brokers' bounds (this Kafka's group.max.session.timeout.ms is 30 s).
    kubectl.apply(fleet_manifest(name, 3, bootstrap(backend), topic, sessionTimeoutMs=20_000), namespace)
    wait_fleet(kubectl, namespace, name, ready_with(3), timeout=150, what="the classic fleet Ready with 3")
    consumed = {p: 4 for p in range(PARTITIONS)}
    wait_until(lambda: committed(backend, gid, topic) == consumed, timeout=60, what="every record committed")

    old_uids = pod_uids(kubectl, namespace, name)
    if isinstance(backend, KafkaBroker):
        patch = '{"spec": {"groupProtocol": "consumer"}}'
        kubectl.run("patch", "scg", name, "-n", namespace, "--type", "merge", "-p", patch)
        wait_until(
            lambda: rolled_out(kubectl, namespace, name, 3, old_uids), timeout=240, what="pods replaced"
        )
    else:
        kubectl.run("scale", f"scg/{name}", "-n", namespace, "--replicas=0")

        def emptied(body: Manifest) -> bool:
            status = body.get("status", {})
            return "scaleDown" not in status and status.get("group", {}).get("state") == "Empty"

        wait_fleet(kubectl, namespace, name, emptied, timeout=120, what="the fleet's group emptied")
        patch = '{"spec": {"groupProtocol": "consumer", "replicas": 3}}'
        kubectl.run("patch", "scg", name, "-n", namespace, "--type", "merge", "-p", patch)

    def stable_of_three() -> dict[str, list[int]] | None:
        found = holdings(backend, gid)
        return found if len(found) == 3 else None

    members = wait_until(stable_of_three, timeout=180, what="a Stable consumer-protocol group of 3")
    assert sorted(members) == [f"{name}-{i}" for i in range(3)]
    assert sorted(p for ps in members.values() for p in ps) == list(range(PARTITIONS))
    body = wait_fleet(
        kubectl, namespace, name, ready_with(3), timeout=120, what="Ready with 3 on the new protocol"
    )
    assert body["status"]["group"]["protocol"] == "uniform"
    assert committed(backend, gid, topic) == consumed, "the group kept its offsets"
    if isinstance(backend, KafkaBroker):  # converted in place with members, not emptied first
        log = backend.log_file.read_text(errors="replace")
        assert f"[GroupId {gid}] Converted the classic group to a consumer group." in log
