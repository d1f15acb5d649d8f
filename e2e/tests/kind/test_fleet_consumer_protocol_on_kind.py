"""A fleet on Kafka 4's consumer group protocol (`groupProtocol: consumer`, KIP-848) on a real kubelet, on
each coordinator: the chart's secured embedded coordinator, and Apache Kafka 4.3.1 on kind (e2e/kind/kafka)
as the README's "Use a real Kafka cluster" installs it. examples/embedded.yaml with the protocol changed, in
a namespace of its own, beside the same fleet on the classic protocol in another. A rollout moves no
partition (each static member leaves with epoch -2 and its successor takes its partitions back). A
scale-down by half is over once the operator has removed the departed members by instance id, which it does
as soon as all have left; it is timed beside the classic fleet's (both coordinators heartbeat
consumer-protocol members every second, the chart's default and e2e/kind/kafka's setting; the classic fleet
heartbeats every 250 ms, the operator's default). The times are printed, not asserted (docs/benchmarks.md
has the measured comparison)."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from e2e.helpers import Cluster, Kubectl, Manifest
from e2e.tests.operator.harness import stopwatch, timing
from examples.demo.driver import rolling_restart, stable_with

from .streams import EMBEDDED_BOOTSTRAP, KAFKA_NAMESPACE, TOOLBOX, Toolbox, toolbox_pod
from .support import (
    FLEET,
    PARTITIONS,
    RELEASE_NAMESPACE,
    allow_topics,
    forget_policy,
    readme_fleet,
    wait_explained,
)

pytestmark = pytest.mark.kind

EMBEDDED, KAFKA = "embedded", "kafka"
TOPIC = "orders"  # examples/embedded.yaml; examples/producer.yaml makes it on the embedded coordinator


@dataclass(frozen=True)
class Fleets:
    coordinator: str
    consumer: str  # the namespace of the consumer-protocol fleet
    classic: str  # the namespace of the same fleet on the classic protocol

    def namespaces(self, *extra: str) -> list[str]:
        kafka = [KAFKA_NAMESPACE] if self.coordinator == KAFKA else []
        return [*extra, RELEASE_NAMESPACE, *kafka]


@pytest.fixture(scope="module", params=[EMBEDDED, KAFKA])
def fleets(request: pytest.FixtureRequest, cluster: Cluster, chart: None, image: str) -> Iterator[Fleets]:
    kubectl = cluster.kubectl
    suffix = secrets.token_hex(3)
    run = Fleets(request.param, f"kind-modern-{suffix}", f"kind-classic-{suffix}")
    bootstrap = request.getfixturevalue("kafka_on_kind") if run.coordinator == KAFKA else EMBEDDED_BOOTSTRAP
    policies = []
    try:
        for namespace in (run.consumer, run.classic):
            kubectl.run("create", "namespace", namespace)
            policies.append(allow_topics(kubectl, namespace, TOPIC))
        if run.coordinator == KAFKA:  # the topic, made as a user would, from a pod beside Kafka
            kubectl.apply(toolbox_pod(image), run.consumer)
            wait_explained(
                kubectl,
                run.namespaces(run.consumer),
                lambda: kubectl.get("pod", TOOLBOX, run.consumer).get("status", {}).get("phase") == "Running",
                timeout=120,
                what="the toolbox pod",
            )
            Toolbox(kubectl, bootstrap, run.consumer).create_topic(TOPIC, PARTITIONS)
        else:
            kubectl.run("apply", "-f", "examples/producer.yaml")  # in the release's namespace
        kubectl.apply(readme_fleet(replicas=4, groupProtocol="consumer"), run.consumer)
        kubectl.apply(readme_fleet(replicas=4), run.classic)
        yield run
    finally:
        for namespace in (run.consumer, run.classic):
            kubectl.run(
                "delete", "scg", FLEET, "-n", namespace, "--ignore-not-found", "--timeout=120s", check=False
            )
            kubectl.run("delete", "namespace", namespace, "--wait=false", check=False)
        for policy in policies:
            forget_policy(kubectl, policy)


def stable(kubectl: Kubectl, run: Fleets, namespace: str, replicas: int) -> Manifest:
    def probe() -> Manifest | None:
        body = kubectl.get_or_none("scg", FLEET, namespace)
        return body if body is not None and stable_with(body, replicas) else None

    found: Manifest = wait_explained(
        kubectl,
        run.namespaces(namespace),
        probe,
        timeout=300,
        what=f"a Stable group of {replicas} in {namespace}",
    )
    return found


def holdings(body: Manifest) -> dict[str, list[int]]:
    return {
        m["instanceId"]: sorted(p for ps in (m.get("partitions") or {}).values() for p in ps)
        for m in body["status"]["members"]
    }


def scale_down_by_half(kubectl: Kubectl, run: Fleets, namespace: str, label: str) -> Manifest:
    elapsed = stopwatch()
    kubectl.run("scale", f"scg/{FLEET}", "-n", namespace, "--replicas=2")
    body = stable(kubectl, run, namespace, 2)
    timing(f"kind, {run.coordinator}, {label}: scale 4->2, Stable after", elapsed())
    final = holdings(body)
    assert sorted(final) == [f"{FLEET}-0", f"{FLEET}-1"]
    assert sorted(p for ps in final.values() for p in ps) == list(range(PARTITIONS))
    removed = [e for e in kubectl.items("events", namespace) if e.get("reason") == "MembersRemoved"]
    assert removed, "the operator removed the departed members"
    return body


def test_a_consumer_protocol_fleet_rolls_without_moving_a_partition_and_scales_down_by_half(
    cluster: Cluster, fleets: Fleets
) -> None:
    kubectl = cluster.kubectl
    body = stable(kubectl, fleets, fleets.consumer, 4)
    before = holdings(body)
    assert sorted(before) == [f"{FLEET}-{i}" for i in range(4)]
    assert sorted(p for ps in before.values() for p in ps) == list(range(PARTITIONS))
    assert body["status"]["group"]["protocol"] == "uniform"
    env = kubectl.run(
        "exec", "-n", fleets.consumer, f"{FLEET}-0", "-c", "consumer", "--", "env"
    ).stdout.splitlines()
    assert "KAFKA_GROUP_PROTOCOL=consumer" in env

    elapsed = stopwatch()
    rolling_restart(kubectl, fleets.consumer, timeout=300)
    after = holdings(stable(kubectl, fleets, fleets.consumer, 4))
    timing(f"kind, {fleets.coordinator}, consumer protocol: rolling restart of 4 pods", elapsed())
    assert after == before, "a rollout moves no partition"

    scale_down_by_half(kubectl, fleets, fleets.consumer, "consumer protocol")


def test_the_same_fleet_on_the_classic_protocol_scales_down_by_half_beside_it(
    cluster: Cluster, fleets: Fleets
) -> None:
    kubectl = cluster.kubectl
    body = stable(kubectl, fleets, fleets.classic, 4)
    assert body["status"]["group"]["protocol"] == "range"  # librdkafka's first default assignor
    scale_down_by_half(kubectl, fleets, fleets.classic, "classic protocol")
