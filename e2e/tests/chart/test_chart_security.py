"""The chart's security values, rendered by `helm template` and judged by `helm lint --strict` and the API
server: the coordinator's SASL listener, users, TLS and HTTP token from Secrets, the operator's own Kafka
login from a Secret (and the Secret rights per-fleet users need), and the NetworkPolicies. The local network
plugin does not enforce NetworkPolicy, so the policies are checked as rendered and as the API server
accepts them."""

from __future__ import annotations

import json
from typing import Any

import pytest

from e2e.helm import CHART, Helm, HelmError, set_flags
from e2e.helpers import Cluster

from .test_chart_render import OPERATOR_RULES, container, find, flag, one, rules

SECURED: dict[str, Any] = {
    "coordinator.security.enabled": True,
    "coordinator.security.usersSecret": "coordinator-users",
    "coordinator.security.tlsSecret": "coordinator-tls",
    "coordinator.security.superUsers": ["User:admin"],
    "coordinator.httpTokenSecret": "coordinator-http-token",
    "operator.kafka.configSecret": "operator-kafka",
}
POLICED: dict[str, Any] = {
    **SECURED,
    "networkPolicy.enabled": True,
    "networkPolicy.metricsFrom": [
        {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}}
    ],
    "networkPolicy.kafkaFrom": [{"podSelector": {"matchLabels": {"app": "producer"}}}],
}
OPERATOR_PODS = {
    "podSelector": {
        "matchLabels": {
            "app.kubernetes.io/name": "staticfleet",
            "app.kubernetes.io/instance": "sf",
            "app.kubernetes.io/component": "operator",
        }
    }
}
FLEET_PODS = {"app.kubernetes.io/name": "staticfleet-consumer", "app.kubernetes.io/managed-by": "staticfleet"}


def volumes(workload: dict[str, Any]) -> dict[str, Any]:
    return {v["name"]: v for v in workload["spec"]["template"]["spec"]["volumes"]}


def test_helm_lint_strict_passes_for_a_secured_install_with_network_policies(helm: Helm) -> None:
    done = helm.run("lint", "--strict", str(CHART), *set_flags(POLICED))
    assert "1 chart(s) linted, 0 chart(s) failed" in done.stdout, done.stdout
    assert "[WARNING]" not in done.stdout and "[ERROR]" not in done.stdout


def test_a_secured_coordinator_has_one_sasl_listener_its_users_tls_and_token_from_secrets(helm: Helm) -> None:
    docs = helm.template(SECURED)
    coordinator = one(docs, "StatefulSet", "sf-staticfleet-coordinator")
    args = container(coordinator)["args"]
    host = "sf-staticfleet-coordinator-0.sf-staticfleet-coordinator.staticfleet.svc.cluster.local"
    assert flag(args, "listen") is None
    assert flag(args, "listener") == "SASL_SSL://0.0.0.0:9092"
    assert flag(args, "advertised-listener") == f"SASL_SSL://{host}:9092"
    assert flag(args, "sasl-enabled-mechanisms") == "SCRAM-SHA-512"
    assert flag(args, "authorizer") == "standard"
    assert flag(args, "super-users") == "User:admin;User:staticfleet-operator"
    assert flag(args, "users-file") == "/etc/staticfleet/users/users"
    assert (flag(args, "tls-cert"), flag(args, "tls-key")) == (
        "/etc/staticfleet/tls/tls.crt",
        "/etc/staticfleet/tls/tls.key",
    )
    assert flag(args, "http-token-file") == "/etc/staticfleet/http/token"
    mounted = volumes(coordinator)
    assert mounted["users"]["secret"]["secretName"] == "coordinator-users"
    assert mounted["tls"]["secret"]["secretName"] == "coordinator-tls"
    assert mounted["http-token"]["secret"]["secretName"] == "coordinator-http-token"

    # The operator logs in with its own Secret and reads the API with the token.
    operator = one(docs, "Deployment", "sf-staticfleet-operator")
    operator_args = container(operator)["args"]
    assert flag(operator_args, "kafka-config") == "/etc/staticfleet/kafka/client.properties"
    assert flag(operator_args, "coordinator-api-token-file") == "/etc/staticfleet/coordinator-http/token"
    assert flag(operator_args, "default-bootstrap-servers") == f"{host}:9092"
    assert volumes(operator)["kafka"]["secret"] == {"secretName": "operator-kafka"}

    # SASL_PLAINTEXT needs no certificate; the operator need not be a super user.
    plain = helm.template(
        {
            **SECURED,
            "coordinator.security.protocol": "SASL_PLAINTEXT",
            "coordinator.security.operatorSuperUser": False,
        }
    )
    plain_args = container(one(plain, "StatefulSet", "sf-staticfleet-coordinator"))["args"]
    assert flag(plain_args, "listener") == "SASL_PLAINTEXT://0.0.0.0:9092"
    assert flag(plain_args, "tls-cert") is None and flag(plain_args, "super-users") == "User:admin"


def test_provisioning_fleet_users_adds_exactly_get_create_patch_on_secrets(helm: Helm) -> None:
    role = one(helm.template(SECURED), "ClusterRole", "sf-staticfleet-operator")
    assert rules(role) == {**OPERATOR_RULES, ("", "secrets"): {"get", "create", "patch"}}
    assert rules(one(helm.template(), "ClusterRole", "sf-staticfleet-operator")) == OPERATOR_RULES


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (
            {k: v for k, v in SECURED.items() if k != "coordinator.security.usersSecret"},
            "coordinator.security.enabled needs coordinator.security.usersSecret",
        ),
        (
            {k: v for k, v in SECURED.items() if k != "coordinator.security.tlsSecret"},
            "coordinator.security.protocol SASL_SSL needs coordinator.security.tlsSecret",
        ),
        (
            {k: v for k, v in SECURED.items() if k != "operator.kafka.configSecret"},
            "coordinator.security.enabled needs operator.kafka.configSecret",
        ),
    ],
)
def test_a_secured_coordinator_without_its_secrets_fails_with_what_to_set(
    helm: Helm, values: dict[str, Any], message: str
) -> None:
    with pytest.raises(HelmError) as raised:
        helm.template(values)
    assert message in raised.value.stderr


@pytest.mark.parametrize(
    ("values", "where"),
    [
        ({"coordinator.security.protocol": "PLAINTEXT"}, "/coordinator/security/protocol"),
        ({"coordinator.security.saslMechanisms": ["OAUTHBEARER"]}, "/coordinator/security/saslMechanisms/0"),
        ({"coordinator.security.superUsers": ["admin"]}, "/coordinator/security/superUsers/0"),
        ({"networkPolicy.metricsFrom": [{"namespace": "monitoring"}]}, "/networkPolicy/metricsFrom/0"),
        ({"networkPolicy.enable": True}, "additional properties 'enable' not allowed"),
    ],
)
def test_the_values_schema_rejects_bad_security_values(
    helm: Helm, values: dict[str, Any], where: str
) -> None:
    with pytest.raises(HelmError) as raised:
        helm.template(values)
    assert "values don't meet the specifications of the schema" in raised.value.stderr
    assert where in raised.value.stderr


def test_network_policies_admit_only_fleet_pods_the_operator_and_metrics_scrapers(helm: Helm) -> None:
    assert not find(helm.template(SECURED), "NetworkPolicy")
    docs = helm.template(POLICED)
    coordinator = one(docs, "NetworkPolicy", "sf-staticfleet-coordinator")["spec"]
    assert coordinator["podSelector"]["matchLabels"]["app.kubernetes.io/component"] == "coordinator"
    assert coordinator["policyTypes"] == ["Ingress"]
    kafka, http = coordinator["ingress"]
    assert kafka["ports"] == [{"port": "kafka", "protocol": "TCP"}]
    assert kafka["from"] == [
        {"podSelector": {"matchLabels": FLEET_PODS}, "namespaceSelector": {}},
        OPERATOR_PODS,
        {"podSelector": {"matchLabels": {"app": "producer"}}},
    ]
    assert http["ports"] == [{"port": "http", "protocol": "TCP"}]
    assert http["from"] == [OPERATOR_PODS, *POLICED["networkPolicy.metricsFrom"]]

    operator = one(docs, "NetworkPolicy", "sf-staticfleet-operator")["spec"]
    health, metrics = operator["ingress"]
    assert health == {"ports": [{"port": "health", "protocol": "TCP"}]}
    assert metrics == {
        "ports": [{"port": "metrics", "protocol": "TCP"}],
        "from": POLICED["networkPolicy.metricsFrom"],
    }

    # With watched namespaces, fleet pods of those namespaces only.
    scoped = helm.template({**POLICED, "operator.watchNamespaces": ["shop"]})
    fleet_peer = one(scoped, "NetworkPolicy", "sf-staticfleet-coordinator")["spec"]["ingress"][0]["from"][0]
    assert fleet_peer["namespaceSelector"] == {
        "matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["shop"]}]
    }
    # Without metrics scrapers nobody reaches the operator's metrics port.
    quiet = helm.template({**SECURED, "networkPolicy.enabled": True})
    assert one(quiet, "NetworkPolicy", "sf-staticfleet-operator")["spec"]["ingress"] == [health]


def test_the_api_server_accepts_every_object_of_a_secured_install_with_network_policies(
    cluster: Cluster, helm: Helm, namespace: str
) -> None:
    docs = helm.template(POLICED, namespace=namespace)
    done = cluster.kubectl.run(
        "apply", "--dry-run=server", "-n", namespace, "-f", "-",
        stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": docs}), check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    for kind, name in (
        ("NetworkPolicy", "sf-staticfleet-coordinator"),
        ("NetworkPolicy", "sf-staticfleet-operator"),
    ):
        assert f"networkpolicy.networking.k8s.io/{name} created (server dry run)" in done.stdout, (
            kind,
            done.stdout,
        )
