"""A failure inside the image surfaces in the test's failure message: the waits of the kind tests report
each pod's container state and log. Shown with a consumer that writes to the read-only root filesystem."""

from __future__ import annotations

import pytest

from e2e.helpers import Cluster
from e2e.tests.operator.harness import condition

from .support import FLEET, wait_explained

pytestmark = pytest.mark.kind


def test_a_consumer_failing_in_its_image_fails_the_wait_with_the_pods_log(
    cluster: Cluster, chart: None, namespace: str
) -> None:
    kubectl = cluster.kubectl
    fleet = {
        "apiVersion": "staticfleet.io/v1alpha1",
        "kind": "StaticConsumerGroup",
        "metadata": {"name": FLEET},
        "spec": {
            "replicas": 1,
            "topics": [f"{namespace}.orders"],  # the namespace's own prefix: no policy needed
            "template": {
                "spec": {
                    "containers": [
                        {
                            "name": "consumer",
                            "image": "staticfleet-consumer-example:0.1.0",
                            "command": ["python", "-c", "open('/app/offsets.json', 'w')"],
                            "securityContext": {"readOnlyRootFilesystem": True},
                        }
                    ]
                }
            },
        },
    }
    kubectl.apply(fleet, namespace)
    try:
        with pytest.raises(AssertionError) as failure:
            wait_explained(
                kubectl,
                [namespace],
                lambda: condition(kubectl.get("scg", FLEET, namespace), "Ready").get("status") == "True",
                timeout=30,
                what="a consumer that cannot start",
            )
        message = str(failure.value)
        assert f"pod {namespace}/{FLEET}-0" in message
        assert "Read-only file system: '/app/offsets.json'" in message  # the container's own log
    finally:
        kubectl.run("delete", "scg", FLEET, "-n", namespace, "--timeout=120s", check=False)
