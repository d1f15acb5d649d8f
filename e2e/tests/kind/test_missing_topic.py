"""A fleet subscribed to a topic that does not exist says so on the resource (Degraded/TopicNotFound,
naming the topic), and becomes Ready once the topic is created."""

from __future__ import annotations

import secrets

import pytest

from e2e.helpers import Cluster
from e2e.tests.operator.harness import condition

from .support import FLEET, RELEASE_NAMESPACE, create_topic, readme_fleet, wait_explained

pytestmark = pytest.mark.kind


def test_a_missing_topic_is_named_on_the_resource_until_it_is_created(
    cluster: Cluster, chart: None, namespace: str
) -> None:
    kubectl = cluster.kubectl
    topic = f"{namespace}.absent-{secrets.token_hex(3)}"  # the namespace's own prefix: no policy needed
    fleet = readme_fleet(replicas=1, topics=[topic])
    kubectl.apply(fleet, namespace)
    try:
        degraded = wait_explained(
            kubectl,
            [namespace],
            lambda: (
                (c := condition(kubectl.get("scg", FLEET, namespace), "Degraded")).get("status") == "True"
                and c
            ),
            timeout=90,
            what="the fleet to be Degraded",
        )
        assert degraded["reason"] == "TopicNotFound"
        assert f"topic {topic} does not exist" in degraded["message"]
        warnings = kubectl.items("events", namespace, "--field-selector=reason=TopicNotFound")
        assert warnings and topic in warnings[0]["message"]

        create_topic(kubectl, topic, partitions=2)
        wait_explained(
            kubectl,
            [namespace, RELEASE_NAMESPACE],
            lambda: condition(kubectl.get("scg", FLEET, namespace), "Ready").get("status") == "True",
            timeout=120,
            what="the fleet to be Ready once its topic exists",
        )
        assert condition(kubectl.get("scg", FLEET, namespace), "Degraded")["status"] == "False"
    finally:
        kubectl.run("delete", "scg", FLEET, "-n", namespace, "--timeout=120s", check=False)
