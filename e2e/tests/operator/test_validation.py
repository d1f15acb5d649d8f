"""Invalid StaticConsumerGroups are rejected by the real API server, each with a message that says what
to fix (the CRD's schema and CEL rules; no operator involved)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from e2e.helpers import Cluster

pytestmark = pytest.mark.usefixtures("crd")


def manifest(name: str = "fleet", **spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "staticfleet.io/v1alpha1",
        "kind": "StaticConsumerGroup",
        "metadata": {"name": name},
        "spec": {"topics": ["orders"], "template": {"spec": {"containers": [{"name": "c", "image": "x"}]}}},
    }
    body["spec"].update(spec)
    return body


INVALID = [
    ({"replicas": -1}, "replicas must be 0 or more"),
    ({"membersPerPod": 0}, "membersPerPod must be between 1 and 64"),
    ({"membersPerPod": 65}, "should be less than or equal to 64"),
    ({"sessionTimeoutMs": 5000}, "sessionTimeoutMs must be between 6000 and 1800000"),
    ({"sessionTimeoutMs": 1_800_001}, "sessionTimeoutMs must be between 6000 and 1800000"),
    ({"topics": []}, "topics must list at least one topic"),
    ({"topics": ["orders", "bad topic"]}, "each topic must be a Kafka topic name"),
    ({"groupId": "orders/eu"}, "groupId may contain only letters, digits, '.', '_' and '-'"),
    ({"groupId": "g" * 250}, "groupId must be at most 249 characters"),
    ({"instanceIdTemplate": "consumer"}, "instanceIdTemplate must contain {pod} or {ordinal}"),
    ({"instanceIdTemplate": "{pod}@{node}"}, "instanceIdTemplate may contain only letters, digits"),
    ({"heartbeatIntervalMs": 120_000}, "heartbeatIntervalMs must be less than sessionTimeoutMs"),
    ({"rebalanceTimeoutMs": 10_000}, "rebalanceTimeoutMs must be at least sessionTimeoutMs"),
    (
        {"kafka": {"bootstrapServers": "kafka"}},
        "bootstrapServers must be a comma-separated list of host:port",
    ),
    ({"kafka": {"coordinatorApi": "coordinator:8080"}}, "coordinatorApi must be an http:// or https:// URL"),
    ({"template": {"spec": {"containers": []}}}, "template.spec.containers must list at least one container"),
    ({"volumeClaimTemplates": [{"spec": {}}]}, "every volumeClaimTemplate needs metadata.name"),
    ({"scaleDown": {"removeMembers": "Later"}}, 'supported values: "Immediate", "AfterSessionTimeout"'),
    ({"deletionPolicy": "Delete"}, 'supported values: "RemoveMembers", "Retain"'),
    ({"kafka": {"credentials": "Operator"}}, 'supported values: "Provisioned", "External"'),
    (
        {"kafka": {"credentials": "Provisioned", "sasl": {"secretName": "mine"}}},
        "kafka.credentials Provisioned means the operator makes the fleet's SASL user",
    ),
    (
        {"kafka": {"credentials": "External", "access": {"internalTopics": True}}},
        "with kafka.credentials External it grants nothing, so remove kafka.access",
    ),
    (
        {"kafka": {"sasl": {"secretName": "mine"}, "access": {"outputTopics": ["counts"]}}},
        "with kafka.credentials External it grants nothing, so remove kafka.access",
    ),
    (
        {"kafka": {"access": {"outputTopics": ["counts!"]}}},
        "each output topic must be a Kafka topic name",
    ),
]


@pytest.mark.parametrize(("spec", "message"), INVALID, ids=[m[:40] for _, m in INVALID])
def test_an_invalid_resource_is_rejected_with_a_clear_message(
    cluster: Cluster, namespace: str, spec: dict[str, Any], message: str
) -> None:
    done = cluster.kubectl.run(
        "apply", "-n", namespace, "-f", "-", stdin=json.dumps(manifest(**spec)), check=False
    )
    assert done.returncode != 0
    assert message in done.stderr, done.stderr
    assert not cluster.kubectl.items("staticconsumergroups", namespace)


def test_credentials_managed_elsewhere_are_accepted_with_or_without_kafka_sasl(
    cluster: Cluster, namespace: str
) -> None:
    for name, kafka in (
        ("external", {"credentials": "External"}),
        ("sasl", {"credentials": "External", "sasl": {"secretName": "mine"}}),
    ):
        cluster.kubectl.run(
            "apply", "-n", namespace, "-f", "-", stdin=json.dumps(manifest(name, kafka=kafka))
        )
        stored = cluster.kubectl.get("staticconsumergroup", name, namespace)["spec"]["kafka"]
        assert stored["credentials"] == "External"


def test_access_is_accepted_with_provisioned_credentials_explicit_or_by_default(
    cluster: Cluster, namespace: str
) -> None:
    access = {"outputTopics": ["counts"], "internalTopics": True}
    for name, kafka in (
        ("default", {"access": access}),
        ("provisioned", {"credentials": "Provisioned", "access": access}),
    ):
        cluster.kubectl.run(
            "apply", "-n", namespace, "-f", "-", stdin=json.dumps(manifest(name, kafka=kafka))
        )
        stored = cluster.kubectl.get("staticconsumergroup", name, namespace)["spec"]["kafka"]
        assert stored["access"] == access


def test_a_name_too_long_for_pod_names_is_rejected(cluster: Cluster, namespace: str) -> None:
    done = cluster.kubectl.run(
        "apply", "-n", namespace, "-f", "-", stdin=json.dumps(manifest(name="n" * 53)), check=False
    )
    assert done.returncode != 0
    assert "metadata.name must be at most 52 characters" in done.stderr


def test_the_defaults_are_filled_in(cluster: Cluster, namespace: str) -> None:
    cluster.kubectl.run("apply", "-n", namespace, "-f", "-", stdin=json.dumps(manifest()))
    spec = cluster.kubectl.get("staticconsumergroup", "fleet", namespace)["spec"]
    assert spec["replicas"] == 1
    assert spec["sessionTimeoutMs"] == 120_000
    assert spec["instanceIdTemplate"] == "{pod}"
    assert spec["scaleDown"] == {"removeMembers": "Immediate"}
    assert spec["scaleUp"] == {"preRegister": True}
    assert spec["deletionPolicy"] == "RemoveMembers"
    assert spec["persistentVolumeClaimRetentionPolicy"] == {"whenDeleted": "Retain", "whenScaled": "Retain"}


@pytest.mark.parametrize(
    ("patch", "message"),
    [
        ({"spec": {"groupId": "other"}}, "groupId cannot be added or removed after creation"),
        ({"spec": {"instanceIdTemplate": "{ordinal}"}}, "instanceIdTemplate is immutable"),
    ],
)
def test_identity_fields_cannot_change(
    cluster: Cluster, namespace: str, patch: dict[str, Any], message: str
) -> None:
    kubectl = cluster.kubectl
    kubectl.run("apply", "-n", namespace, "-f", "-", stdin=json.dumps(manifest()))
    done = kubectl.run(
        "patch", "scg", "fleet", "-n", namespace, "--type", "merge", "-p", json.dumps(patch), check=False
    )
    assert done.returncode != 0
    assert message in done.stderr, done.stderr


def test_a_set_group_id_is_immutable(cluster: Cluster, namespace: str) -> None:
    kubectl = cluster.kubectl
    kubectl.run("apply", "-n", namespace, "-f", "-", stdin=json.dumps(manifest(groupId="payments")))
    patch = json.dumps({"spec": {"groupId": "payments-v2"}})
    done = kubectl.run("patch", "scg", "fleet", "-n", namespace, "--type", "merge", "-p", patch, check=False)
    assert done.returncode != 0
    assert "groupId is immutable" in done.stderr
