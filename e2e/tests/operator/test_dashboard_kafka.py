"""The same dashboard page for a fleet on Apache Kafka 4.3.1 (KRaft, jars from Maven Central): no
coordinator HTTP API, so generations are not shown and rebalances are the assignment changes the
dashboard observed, each with the partitions it moved."""

from __future__ import annotations

import asyncio
import secrets
from collections.abc import Iterator
from typing import Any

import pytest

from conformance.kafka_broker import GroupSettings, KafkaBroker
from e2e.browser import WIDE, chromium, texts, wait_in_page
from e2e.helpers import Cluster, wait_until
from staticfleet.admin import GroupAdmin, KafkaConnection
from staticfleet.admin.model import GroupDescription

from .dashboard_harness import (
    Dashboard,
    all_committed_without_lag,
    card,
    delete_fleets,
    lag_shown,
    open_page,
    operator_with_dashboard,
    produce,
)
from .harness import PARTITIONS, fleet_manifest, paused, ready_with, wait_fleet

pytestmark = pytest.mark.localcluster

FLEET = "orders"
REPLICAS = 2


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


@pytest.fixture(scope="module")
def on_kafka(
    cluster: Cluster,
    pod_runner: str | None,
    crd: None,
    kafka: KafkaBroker,
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[tuple[Dashboard, str, str]]:
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic

    kubectl = cluster.kubectl
    namespace = f"dashboard-kafka-{secrets.token_hex(3)}"
    kubectl.run("create", "namespace", namespace)
    topic = f"{namespace}-orders"
    admin = KafkaAdminClient(bootstrap_servers=kafka.bootstrap)
    try:
        admin.create_topics([NewTopic(topic, PARTITIONS, 1)])
    finally:
        admin.close()
    dashboard = operator_with_dashboard(cluster.kubeconfig, namespace, tmp_path_factory.mktemp("operator"))
    try:
        kubectl.apply(fleet_manifest(FLEET, REPLICAS, kafka.bootstrap, topic), namespace)
        wait_fleet(kubectl, namespace, FLEET, ready_with(REPLICAS), timeout=120, what="Ready on Kafka")
        yield dashboard, namespace, topic
    finally:
        try:
            delete_fleets(kubectl, namespace)
        finally:
            dashboard.runner.stop()
            kubectl.run("delete", "namespace", namespace, "--wait=false")
            wait_until(lambda: not kubectl.items("pods", namespace), timeout=120, what="the pods to be gone")


def wait_for_members(browser: Any) -> None:
    wait_in_page(
        browser,
        lambda d: len([t for t in texts(d, "#members tbody td.member") if t != "—"]) == REPLICAS,
        timeout=15,
        what="both pods with their members",
    )


def assert_members_shown(browser: Any, described: GroupDescription) -> None:
    """Each pod beside its member, with the partitions the coordinator described for it."""
    for member in described.members:
        pod = f'#members tr[data-pod="{member.instance_id}"]'
        assert texts(browser, f"{pod} .member") == [member.member_id]
        expected = [f"{t}-{p}" for t, ps in sorted((member.partitions or {}).items()) for p in sorted(ps)]
        assert texts(browser, f"{pod} td.partitions code") == expected


@pytest.fixture(scope="module")
def browser() -> Iterator[Any]:
    with chromium(WIDE) as driver:
        yield driver


def test_the_fleet_page_works_the_same_on_apache_kafka(
    cluster: Cluster, on_kafka: tuple[Dashboard, str, str], kafka: KafkaBroker, browser: Any
) -> None:

    dashboard, namespace, topic = on_kafka
    gid = f"{namespace}.{FLEET}"
    open_page(browser, f"{dashboard.url}/fleets/{namespace}/{FLEET}")

    # Each pod beside its member, with the partitions Kafka assigned it.
    wait_for_members(browser)
    with GroupAdmin(KafkaConnection(kafka.bootstrap)) as admin:
        described = admin.describe_group(gid)
    assert_members_shown(browser, described)
    assert "Stable" in card(browser, "state")
    assert card(browser, "generation").startswith("—"), "Kafka has no HTTP API telling the generation"

    # Lag rises while the consumers are paused and falls after.
    produce(kafka.bootstrap, topic, 1, PARTITIONS)  # a first commit on every partition
    wait_in_page(browser, all_committed_without_lag, timeout=30, what="every partition committed, no lag")
    with paused(gid, REPLICAS):
        produce(kafka.bootstrap, topic, 10, PARTITIONS)
        wait_in_page(browser, lambda d: lag_shown(d) == 10 * PARTITIONS, timeout=15, what="lag while paused")
    wait_in_page(browser, lambda d: lag_shown(d) == 0, timeout=30, what="the lag to fall back to 0")

    # A scale-down: the operation and the assignment change it caused, on the same timeline.
    browser.execute_script("window.sameDocument = 'yes'")
    cluster.kubectl.run("scale", f"scg/{FLEET}", "-n", namespace, f"--replicas={REPLICAS - 1}")
    rebalance = wait_in_page(
        browser,
        lambda d: [text for text in texts(d, "#timeline li.rebalance") if "moved" in text],
        timeout=60,
        what="the scale-down's rebalance, observed",
    )[-1]
    departing = next(m for m in described.members if m.instance_id == f"{FLEET}-{REPLICAS - 1}")
    assert "rebalance (observed)" in rebalance
    assert f"{departing.partition_count} partitions moved" in rebalance, "the departed member's partitions"
    # The operation is written to the status once the operator has finished it, which can be after
    # the group has already rebalanced.
    (operation,) = wait_in_page(
        browser,
        lambda d: texts(d, '#timeline li.operation[data-kind="scale down"]'),
        timeout=30,
        what="the scale-down operation in the timeline",
    )
    assert f"scale down {REPLICAS} → {REPLICAS - 1}" in operation and "1 rebalance" in operation
    assert browser.execute_script("return window.sameDocument") == "yes", "no reload"


def test_a_consumer_protocol_fleet_shows_its_members_from_consumer_group_describe(
    cluster: Cluster, on_kafka: tuple[Dashboard, str, str], kafka: KafkaBroker, browser: Any
) -> None:
    """DescribeGroups calls a consumer-protocol group Dead: the page reads it as the operator does."""
    dashboard, namespace, topic = on_kafka
    name = "modern"
    manifest = fleet_manifest(name, REPLICAS, kafka.bootstrap, topic, groupProtocol="consumer")
    cluster.kubectl.apply(manifest, namespace)
    wait_fleet(cluster.kubectl, namespace, name, ready_with(REPLICAS), timeout=120, what="Ready on Kafka")
    open_page(browser, f"{dashboard.url}/fleets/{namespace}/{name}")
    wait_for_members(browser)
    with GroupAdmin(KafkaConnection(kafka.bootstrap)) as admin:
        described = admin.describe_consumer_group(f"{namespace}.{name}")
    assert described.state == "Stable"
    assert_members_shown(browser, described)
    assert "Stable" in card(browser, "state")
