"""A fleet on Kafka 4's consumer group protocol (`groupProtocol: consumer`, KIP-848) on a real kubelet,
against the chart's secured embedded coordinator: examples/embedded.yaml with the protocol changed, in a
namespace of its own. A rollout moves no partition (each static member leaves with epoch -2 and its
successor takes its partitions back), and a scale-down by half is over once the operator has removed the
departed members by instance id."""

from __future__ import annotations

import secrets
from collections.abc import Iterator

import pytest

from e2e.helpers import Cluster, Kubectl, Manifest
from e2e.tests.operator.harness import stopwatch, timing
from examples.demo.driver import rolling_restart, stable_with

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


@pytest.fixture(scope="module")
def namespace(cluster: Cluster, chart: None) -> Iterator[str]:
    kubectl = cluster.kubectl
    name = f"kind-modern-{secrets.token_hex(3)}"
    kubectl.run("create", "namespace", name)
    policy = allow_topics(kubectl, name, "orders")
    try:
        kubectl.run("apply", "-f", "examples/producer.yaml")  # in the release's namespace
        kubectl.apply(readme_fleet(replicas=4, groupProtocol="consumer"), name)
        yield name
    finally:
        kubectl.run("delete", "scg", FLEET, "-n", name, "--ignore-not-found", "--timeout=120s", check=False)
        kubectl.run("delete", "namespace", name, "--wait=false", check=False)
        forget_policy(kubectl, policy)


def stable(kubectl: Kubectl, namespace: str, replicas: int) -> Manifest:
    def probe() -> Manifest | None:
        body = kubectl.get_or_none("scg", FLEET, namespace)
        return body if body is not None and stable_with(body, replicas) else None

    found: Manifest = wait_explained(
        kubectl, [namespace, RELEASE_NAMESPACE], probe, timeout=300, what=f"a Stable group of {replicas}"
    )
    return found


def holdings(body: Manifest) -> dict[str, list[int]]:
    return {
        m["instanceId"]: sorted(p for ps in (m.get("partitions") or {}).values() for p in ps)
        for m in body["status"]["members"]
    }


def test_a_consumer_protocol_fleet_rolls_without_moving_a_partition_and_scales_down_by_half(
    cluster: Cluster, namespace: str
) -> None:
    kubectl = cluster.kubectl
    body = stable(kubectl, namespace, 4)
    before = holdings(body)
    assert sorted(before) == [f"{FLEET}-{i}" for i in range(4)]
    assert sorted(p for ps in before.values() for p in ps) == list(range(PARTITIONS))
    assert body["status"]["group"]["protocol"] == "uniform"
    env = kubectl.run(
        "exec", "-n", namespace, f"{FLEET}-0", "-c", "consumer", "--", "env"
    ).stdout.splitlines()
    assert "KAFKA_GROUP_PROTOCOL=consumer" in env

    elapsed = stopwatch()
    rolling_restart(kubectl, namespace, timeout=300)
    after = holdings(stable(kubectl, namespace, 4))
    timing("kind, consumer protocol: rolling restart of 4 pods", elapsed())
    assert after == before, "a rollout moves no partition"

    elapsed = stopwatch()
    kubectl.run("scale", f"scg/{FLEET}", "-n", namespace, "--replicas=2")
    body = stable(kubectl, namespace, 2)
    timing("kind, consumer protocol: scale 4->2, Stable after", elapsed())
    final = holdings(body)
    assert sorted(final) == [f"{FLEET}-0", f"{FLEET}-1"]
    assert sorted(p for ps in final.values() for p in ps) == list(range(PARTITIONS))
    removed = [e for e in kubectl.items("events", namespace) if e.get("reason") == "MembersRemoved"]
    assert removed, "the operator removed the departed members"
