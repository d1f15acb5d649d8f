"""The README's "Install with Helm" quick start, run line by line as written on the kind cluster: the
images built and loaded, the chart installed secured (SASL_SSL, SCRAM-SHA-512, ACLs, the HTTP API on HTTPS
behind a token, the operator with its own ACLs and not a super user), the tenancy policy, the producer
creating the topic as the chart's admin, three consumers logged in as the fleet's own user in a Stable group
that owns every partition, and `kubectl scale` to one consumer costing one rebalance."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from e2e.helpers import Cluster, Kubectl
from examples.demo.driver import stable_with

from .support import (
    COORDINATOR_POD,
    FLEET,
    PARTITIONS,
    RELEASE_NAMESPACE,
    Shell,
    assigned_partitions,
    coordinator_group,
    instance_ids,
    usage_lines,
    wait_explained,
)

pytestmark = pytest.mark.kind

NAMESPACE = "default"  # the README's kubectl commands name none
GROUP_ID = f"{NAMESPACE}.{FLEET}"


@pytest.fixture
def cleanup(cluster: Cluster) -> Iterator[None]:
    """Deletes what the quick start made in the default namespace (while the operator still runs)."""
    yield
    kubectl = cluster.kubectl
    kubectl.run("delete", "scg", FLEET, "-n", NAMESPACE, "--ignore-not-found", "--timeout=120s", check=False)
    kubectl.run("delete", "-f", "examples/tenancy.yaml", "--ignore-not-found", check=False)


def _stable(kubectl: Kubectl, replicas: int) -> bool:
    body = kubectl.get_or_none("scg", FLEET, NAMESPACE)
    return body is not None and stable_with(body, replicas)


def test_the_readme_helm_quick_start_works_as_written(
    cluster: Cluster, chart: None, shell: Shell, cleanup: None
) -> None:
    kubectl = cluster.kubectl
    lines = usage_lines()
    scale_at = next(i for i, line in enumerate(lines) if line.startswith("kubectl scale"))
    assert lines[scale_at] == f"kubectl scale scg/{FLEET} --replicas=1"

    for line in lines[:scale_at]:
        shell.run(line)
    wait_explained(
        kubectl,
        [NAMESPACE, RELEASE_NAMESPACE],
        lambda: _stable(kubectl, 3),
        timeout=240,
        what="three ready consumers in a Stable group",
    )
    group = coordinator_group(kubectl, GROUP_ID)
    assert group is not None and group["state"] == "Stable"
    pods = {
        p["metadata"]["name"] for p in kubectl.items("pods", NAMESPACE, "-l", f"staticfleet.io/group={FLEET}")
    }
    assert instance_ids(group) == pods == {f"{FLEET}-{i}" for i in range(3)}
    # The producer made the topic with 6 partitions, and each consumer owns some of them.
    assert assigned_partitions(group) == PARTITIONS
    assert all(m.get("partitions", {}).get("orders") for m in group["memberList"])
    generation = int(group["generation"])
    assert_secured(kubectl)
    shown = kubectl.get("scg", FLEET, NAMESPACE)["status"]["group"]["rebalances"]

    shell.run(lines[scale_at])
    for line in lines[scale_at + 1 :]:
        shell.run(line)
    wait_explained(
        kubectl,
        [NAMESPACE, RELEASE_NAMESPACE],
        lambda: _stable(kubectl, 1),
        timeout=120,
        what="one ready consumer in a Stable group",
    )
    group = coordinator_group(kubectl, GROUP_ID)
    assert group is not None
    assert instance_ids(group) == {f"{FLEET}-0"}
    assert int(group["generation"]) == generation + 1, "scaling 3 -> 1 is one rebalance"
    assert assigned_partitions(group) == PARTITIONS
    assert kubectl.get("scg", FLEET, NAMESPACE)["status"]["group"]["rebalances"] == shown + 1


def assert_secured(kubectl: Kubectl) -> None:
    """What the quick start installed: the coordinator's one listener is SASL_SSL with SCRAM-SHA-512 and
    ACLs, its HTTP API on HTTPS with a token; only the admin is a super user, and beside it the operator's
    exact ACLs are granted; the fleet logs in as its own user from its own Secret."""
    pod = kubectl.get("pod", COORDINATOR_POD, RELEASE_NAMESPACE)["spec"]
    args = pod["containers"][0]["args"]
    for expected in (
        "--sasl-enabled-mechanisms=SCRAM-SHA-512",
        "--authorizer=standard",
        "--super-users=User:admin",
        "--http-token-file=/etc/staticfleet/http/token",
    ):
        assert expected in args, args
    assert any(a.startswith("--listener=SASL_SSL://") for a in args), args
    assert any(a.startswith("--http-tls-cert=") for a in args), args
    assert [c["name"] for c in pod["containers"]] == ["coordinator", "operator-acls"]
    body = kubectl.get("scg", FLEET, NAMESPACE)
    user = f"staticfleet.{NAMESPACE}.{FLEET}"
    assert body["status"]["kafkaUser"] == {"name": user, "secretName": f"{FLEET}-kafka-user"}
    assert kubectl.get("secret", f"{FLEET}-kafka-user", NAMESPACE)["data"].keys() >= {
        "username",
        "password",
        "ca.crt",
    }
    env = kubectl.run(
        "exec", "-n", NAMESPACE, f"{FLEET}-0", "-c", "consumer", "--", "env"
    ).stdout.splitlines()
    assert "KAFKA_SECURITY_PROTOCOL=SASL_SSL" in env and f"KAFKA_SASL_USERNAME={user}" in env
