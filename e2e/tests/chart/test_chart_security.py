"""The chart's security, rendered by `helm template` and judged by `helm lint --strict` and the API server.

The default install is secured: the coordinator on SASL_SSL with SCRAM-SHA-512 and the standard
authorizer, its certificate from a CA the install makes (or from cert-manager where its API is served),
the operator's and an admin's logins and the HTTP tokens made at install, the HTTP API and the dashboard
on HTTPS behind a token, NetworkPolicies on, tenancy enforced, and the operator holding exactly its own
ACLs (granted by the operator-acls container beside the coordinator), not a super user. Turning it off is
explicit, and NOTES says so. Your own Secrets can stand in for what the install makes. The local network
plugin does not enforce NetworkPolicy, so the policies are checked as rendered and as the API server
accepts them. That the secrets are kept on upgrade (lookup) needs a cluster: test_chart_install.py."""

from __future__ import annotations

import base64
import datetime
import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization

from e2e.helm import CHART, Helm, HelmError, set_flags
from e2e.helpers import Cluster
from staticfleet.admin.client_properties import jaas_credentials, parse_properties

from .test_chart_render import FLEET_SECRETS, OPEN, OPERATOR_RULES, container, find, flag, one, rules

HOST = "sf-staticfleet-coordinator-0.sf-staticfleet-coordinator.staticfleet.svc.cluster.local"
CERT_MANAGER = ("cert-manager.io/v1/Certificate", "cert-manager.io/v1/Issuer")
# Your own Secrets instead of those the install makes (docs/install.md, "Your own Secrets").
YOUR_SECRETS: dict[str, Any] = {
    "coordinator.security.usersSecret": "coordinator-users",
    "coordinator.security.tlsSecret": "coordinator-tls",
    "coordinator.security.superUsers": ["User:admin"],
    "coordinator.httpTokenSecret": "coordinator-http-token",
    "operator.kafka.configSecret": "operator-kafka",
    "operator.departureSigningKeySecret": "departure-signing-key",
}
POLICED: dict[str, Any] = {
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
CLIENT_PODS = {"staticfleet.io/kafka-client": "true"}


def volumes(workload: dict[str, Any]) -> dict[str, Any]:
    return {v["name"]: v for v in workload["spec"]["template"]["spec"]["volumes"]}


def mounts(container: dict[str, Any]) -> dict[str, str]:
    return {m["mountPath"]: m["name"] for m in container["volumeMounts"]}


def sidecar(statefulset: dict[str, Any]) -> dict[str, Any]:
    (found,) = [
        c for c in statefulset["spec"]["template"]["spec"]["containers"] if c["name"] == "operator-acls"
    ]
    return dict(found)


def secret_data(secret: dict[str, Any]) -> dict[str, str]:
    data = {k: base64.b64decode(v).decode() for k, v in (secret.get("data") or {}).items()}
    return {**data, **(secret.get("stringData") or {})}


def test_helm_lint_strict_passes_by_default_with_your_own_secrets_and_with_security_off(helm: Helm) -> None:
    for values in ({}, {**YOUR_SECRETS, **POLICED}, OPEN):
        done = helm.run("lint", "--strict", str(CHART), *set_flags(values))
        assert "1 chart(s) linted, 0 chart(s) failed" in done.stdout, done.stdout
        assert "[WARNING]" not in done.stdout and "[ERROR]" not in done.stdout


def test_by_default_the_coordinator_speaks_sasl_ssl_scram_and_acls_and_the_operator_is_no_super_user(
    helm: Helm,
) -> None:
    docs = helm.template()
    statefulset = one(docs, "StatefulSet", "sf-staticfleet-coordinator")
    args = container(statefulset)["args"]
    assert flag(args, "listen") is None
    assert flag(args, "listener") == "SASL_SSL://0.0.0.0:9092"
    assert flag(args, "advertised-listener") == f"SASL_SSL://{HOST}:9092"
    assert flag(args, "sasl-enabled-mechanisms") == "SCRAM-SHA-512"
    assert flag(args, "authorizer") == "standard"
    assert flag(args, "super-users") == "User:admin", "the admin only: the operator holds exact ACLs"
    assert flag(args, "users-file") == "/etc/staticfleet/users/users"
    assert (flag(args, "tls-cert"), flag(args, "tls-key")) == (
        "/etc/staticfleet/tls/tls.crt",
        "/etc/staticfleet/tls/tls.key",
    )
    mounted = volumes(statefulset)
    assert mounted["users"]["secret"]["secretName"] == "sf-staticfleet-coordinator-users"
    assert mounted["tls"]["secret"]["secretName"] == "sf-staticfleet-coordinator-tls"

    # Beside it, the operator's ACLs are granted, and kept, by the admin: exactly, never super user.
    grants = sidecar(statefulset)
    assert grants["command"] == ["staticfleet", "operator-acls", "grant"]
    assert flag(grants["args"], "principal") == "User:staticfleet-operator"
    assert flag(grants["args"], "bootstrap-server") == "127.0.0.1:9092"
    assert flag(grants["args"], "command-config") == "/etc/staticfleet/admin/client.properties"
    assert flag(grants["args"], "ssl-cafile") == "/etc/staticfleet/kafka-ca/ca.crt"
    assert flag(grants["args"], "every") == "60"
    assert mounts(grants) == {
        "/tmp": "tmp",
        "/etc/staticfleet/admin": "admin",
        "/etc/staticfleet/kafka-ca": "kafka-ca",
    }, "the admin's login and the CA, not the coordinator's key"
    assert mounted["admin"]["secret"]["secretName"] == "sf-staticfleet-kafka-admin"
    assert mounted["kafka-ca"]["secret"]["items"] == [{"key": "ca.crt", "path": "ca.crt"}]
    assert grants["securityContext"]["readOnlyRootFilesystem"] is True

    # The operator logs in as its own user, provisions fleets, enforces tenancy.
    operator = one(docs, "Deployment", "sf-staticfleet-operator")
    operator_args = container(operator)["args"]
    assert flag(operator_args, "kafka-config") == "/etc/staticfleet/kafka/client.properties"
    assert flag(operator_args, "kafka-ca-file") == "/etc/staticfleet/kafka-ca/ca.crt"
    assert flag(operator_args, "tenancy") == "policies"
    assert volumes(operator)["kafka"]["secret"] == {"secretName": "sf-staticfleet-operator-kafka"}
    assert volumes(operator)["kafka-ca"]["secret"] == {
        "secretName": "sf-staticfleet-coordinator-tls",
        "items": [{"key": "ca.crt", "path": "ca.crt"}],
    }
    assert rules(one(docs, "ClusterRole", "sf-staticfleet-operator")) == {**OPERATOR_RULES, **FLEET_SECRETS}

    # SASL_PLAINTEXT: no TLS on Kafka, the HTTP API still on HTTPS.
    plain = helm.template({"coordinator.security.protocol": "SASL_PLAINTEXT"})
    plain_args = container(one(plain, "StatefulSet", "sf-staticfleet-coordinator"))["args"]
    assert flag(plain_args, "listener") == "SASL_PLAINTEXT://0.0.0.0:9092"
    assert flag(plain_args, "tls-cert") is None and flag(plain_args, "http-tls-cert") is not None
    # A super user operator, when asked: then nothing grants it ACLs.
    root = one(
        helm.template({"coordinator.security.operatorSuperUser": True}),
        "StatefulSet",
        "sf-staticfleet-coordinator",
    )
    assert flag(container(root)["args"], "super-users") == "User:staticfleet-operator;User:admin"
    assert [c["name"] for c in root["spec"]["template"]["spec"]["containers"]] == ["coordinator"]


def test_the_logins_made_at_install_agree_with_the_users_file_and_only_the_admin_is_super(helm: Helm) -> None:
    docs = helm.template()
    users = secret_data(one(docs, "Secret", "sf-staticfleet-coordinator-users"))["users"]
    lines = sorted(line for line in users.splitlines() if line)
    passwords = {}
    for line in lines:
        mechanism, _, rest = line.partition("=[")
        fields = dict(part.split("=", 1) for part in rest.rstrip("]").split(","))
        assert mechanism == "SCRAM-SHA-512"
        passwords[fields["name"]] = fields["password"]
    assert sorted(passwords) == ["admin", "staticfleet-operator"]
    assert len(set(passwords.values())) == 2 and all(len(p) >= 32 for p in passwords.values())
    for secret, user in (
        ("sf-staticfleet-operator-kafka", "staticfleet-operator"),
        ("sf-staticfleet-kafka-admin", "admin"),
    ):
        data = secret_data(one(docs, "Secret", secret))
        properties = parse_properties(data["client.properties"].splitlines())
        assert properties["security.protocol"] == "SASL_SSL"
        assert properties["sasl.mechanism"] == "SCRAM-SHA-512"
        assert properties["ssl.truststore.type"] == "PEM"
        assert properties["ssl.truststore.location"] == "/etc/staticfleet/kafka-ca/ca.crt"
        assert jaas_credentials(properties["sasl.jaas.config"]) == (user, passwords[user])
        assert (data["username"], data["password"]) == (user, passwords[user])
    # Tokens are random, and a fresh render (no cluster to look them up in) makes new ones.
    again = helm.template()
    for name in ("sf-staticfleet-coordinator-http-token", "sf-staticfleet-dashboard-token"):
        token = secret_data(one(docs, "Secret", name))["token"]
        assert len(token) >= 32 and token != secret_data(one(again, "Secret", name))["token"]


def certificate(secret: dict[str, Any], key: str = "tls.crt") -> x509.Certificate:
    return x509.load_pem_x509_certificate(base64.b64decode(secret["data"][key]))


def test_the_certificates_come_from_the_installs_ca_and_name_every_host_they_are_reached_by(
    helm: Helm,
) -> None:
    docs = helm.template()
    ca_secret = one(docs, "Secret", "sf-staticfleet-ca")
    ca = certificate(ca_secret)
    now = datetime.datetime.now(datetime.UTC)
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca
    assert ca.not_valid_after_utc - now > datetime.timedelta(days=3640)
    names = {
        "sf-staticfleet-coordinator-tls": [
            HOST,
            "sf-staticfleet-coordinator",
            "sf-staticfleet-coordinator.staticfleet.svc",
            "sf-staticfleet-coordinator.staticfleet.svc.cluster.local",
            "localhost",
        ],
        "sf-staticfleet-dashboard-tls": ["sf-staticfleet-dashboard.staticfleet.svc", "localhost"],
    }
    for name, hosts in names.items():
        secret = one(docs, "Secret", name)
        assert secret["type"] == "kubernetes.io/tls"
        leaf = certificate(secret)
        leaf.verify_directly_issued_by(ca)
        assert certificate(secret, "ca.crt") == ca
        sans = leaf.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        assert set(hosts) <= set(sans.get_values_for_type(x509.DNSName)), name
        assert "127.0.0.1" in {str(ip) for ip in sans.get_values_for_type(x509.IPAddress)}
        assert datetime.timedelta(days=364) < leaf.not_valid_after_utc - now <= datetime.timedelta(days=365)
        key = serialization.load_pem_private_key(base64.b64decode(secret["data"]["tls.key"]), None)
        assert key.public_key() == leaf.public_key()
        assert int(secret["metadata"]["annotations"]["staticfleet.io/expires"]) == pytest.approx(
            leaf.not_valid_after_utc.timestamp(), abs=120
        )
    # An IP as the advertised host goes into the IP names.
    local = helm.template({"coordinator.advertisedHost": "10.1.2.3"})
    extensions = certificate(one(local, "Secret", "sf-staticfleet-coordinator-tls")).extensions
    ips = extensions.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(
        x509.IPAddress
    )
    assert "10.1.2.3" in {str(ip) for ip in ips}


def test_where_cert_manager_is_served_its_certificates_replace_the_charts(helm: Helm) -> None:
    docs = helm.template(api_versions=CERT_MANAGER)
    assert not find(docs, "Secret", "sf-staticfleet-ca")
    assert not find(docs, "Secret", "sf-staticfleet-coordinator-tls")
    assert one(docs, "Issuer", "sf-staticfleet-selfsigned")["spec"] == {"selfSigned": {}}
    ca = one(docs, "Certificate", "sf-staticfleet-ca")["spec"]
    assert ca["isCA"] is True and ca["secretName"] == "sf-staticfleet-ca"
    assert one(docs, "Issuer", "sf-staticfleet-ca")["spec"] == {"ca": {"secretName": "sf-staticfleet-ca"}}
    leaf = one(docs, "Certificate", "sf-staticfleet-coordinator")["spec"]
    assert leaf["secretName"] == "sf-staticfleet-coordinator-tls", "the Secret the pods mount"
    assert HOST in leaf["dnsNames"] and "127.0.0.1" in leaf["ipAddresses"]
    assert (leaf["duration"], leaf["renewBefore"]) == ("8760h", "1440h")
    assert leaf["issuerRef"] == {"name": "sf-staticfleet-ca", "kind": "Issuer"}
    assert (
        one(docs, "Certificate", "sf-staticfleet-dashboard")["spec"]["secretName"]
        == "sf-staticfleet-dashboard-tls"
    )
    # Your own issuer; or the chart's CA even where cert-manager is served.
    theirs = helm.template(
        {"coordinator.security.certificates.issuerRef": {"name": "corp", "kind": "ClusterIssuer"}},
        api_versions=CERT_MANAGER,
    )
    assert not find(theirs, "Issuer")
    assert one(theirs, "Certificate", "sf-staticfleet-coordinator")["spec"]["issuerRef"] == {
        "name": "corp",
        "kind": "ClusterIssuer",
    }
    chart = helm.template({"coordinator.security.certificates.source": "chart"}, api_versions=CERT_MANAGER)
    assert not find(chart, "Certificate") and find(chart, "Secret", "sf-staticfleet-coordinator-tls")


def test_the_http_api_and_the_dashboard_are_on_https_behind_a_token(helm: Helm) -> None:
    docs = helm.template()
    coordinator = one(docs, "StatefulSet", "sf-staticfleet-coordinator")
    args = container(coordinator)["args"]
    assert (flag(args, "http-tls-cert"), flag(args, "http-tls-key")) == (
        "/etc/staticfleet/tls/tls.crt",
        "/etc/staticfleet/tls/tls.key",
    )
    assert flag(args, "http-token-file") == "/etc/staticfleet/http/token"
    assert (
        volumes(coordinator)["http-token"]["secret"]["secretName"] == "sf-staticfleet-coordinator-http-token"
    )
    operator = one(docs, "Deployment", "sf-staticfleet-operator")
    operator_args = container(operator)["args"]
    assert flag(operator_args, "default-coordinator-api") == f"https://{HOST}:8080"
    assert flag(operator_args, "coordinator-api-ca-file") == "/etc/staticfleet/kafka-ca/ca.crt"
    assert flag(operator_args, "coordinator-api-token-file") == "/etc/staticfleet/coordinator-http/token"
    assert flag(operator_args, "ui-token-file") == "/etc/staticfleet/dashboard/token"
    assert (flag(operator_args, "ui-tls-cert"), flag(operator_args, "ui-tls-key")) == (
        "/etc/staticfleet/dashboard-tls/tls.crt",
        "/etc/staticfleet/dashboard-tls/tls.key",
    )
    mounted = volumes(operator)
    assert mounted["coordinator-http"]["secret"]["secretName"] == "sf-staticfleet-coordinator-http-token"
    assert mounted["dashboard-token"]["secret"]["secretName"] == "sf-staticfleet-dashboard-token"
    assert mounted["dashboard-tls"]["secret"]["secretName"] == "sf-staticfleet-dashboard-tls"


def test_your_own_secrets_stand_in_for_those_the_install_makes(helm: Helm) -> None:
    docs = helm.template(YOUR_SECRETS)
    assert [s["metadata"]["name"] for s in find(docs, "Secret")] == [
        "sf-staticfleet-ca",
        "sf-staticfleet-dashboard-tls",
        "sf-staticfleet-dashboard-token",
    ], "only the dashboard's: the coordinator's are yours"
    coordinator = one(docs, "StatefulSet", "sf-staticfleet-coordinator")
    args = container(coordinator)["args"]
    assert flag(args, "super-users") == "User:admin"
    mounted = volumes(coordinator)
    assert mounted["users"]["secret"]["secretName"] == "coordinator-users"
    assert mounted["tls"]["secret"]["secretName"] == "coordinator-tls"
    assert mounted["http-token"]["secret"]["secretName"] == "coordinator-http-token"
    # Nothing grants the operator's ACLs without an admin login: grant them yourself (NOTES, docs).
    assert [c["name"] for c in coordinator["spec"]["template"]["spec"]["containers"]] == ["coordinator"]
    with_admin = helm.template({**YOUR_SECRETS, "coordinator.security.adminConfigSecret": "kafka-admin"})
    grants = sidecar(one(with_admin, "StatefulSet", "sf-staticfleet-coordinator"))
    assert flag(grants["args"], "principal") == "User:staticfleet-operator"
    operator = one(docs, "Deployment", "sf-staticfleet-operator")
    operator_args = container(operator)["args"]
    assert flag(operator_args, "kafka-config") == "/etc/staticfleet/kafka/client.properties"
    assert flag(operator_args, "coordinator-api-ca-file") == "/etc/staticfleet/kafka/ca.crt"
    assert flag(operator_args, "kafka-ca-file") is None, "your client.properties names its CA"
    assert volumes(operator)["kafka"]["secret"] == {"secretName": "operator-kafka"}
    assert "kafka-ca" not in volumes(operator)
    assert volumes(operator)["departure-signing-key"]["secret"]["secretName"] == "departure-signing-key"


def test_security_off_is_explicit_and_said_in_notes(helm: Helm, tmp_path: Path) -> None:
    docs = helm.template(OPEN)
    args = container(one(docs, "StatefulSet", "sf-staticfleet-coordinator"))["args"]
    assert flag(args, "listen") == "0.0.0.0:9092" and flag(args, "authorizer") is None
    assert flag(args, "http-tls-cert") is None and flag(args, "http-token-file") is None
    assert not find(docs, "NetworkPolicy")
    # The one Secret: what the fleets' departure keys are derived from, which no setting makes public.
    assert [s["metadata"]["name"] for s in find(docs, "Secret")] == ["sf-staticfleet-departure-signing-key"]
    operator_args = container(one(docs, "Deployment", "sf-staticfleet-operator"))["args"]
    assert flag(operator_args, "tenancy") == "off" and flag(operator_args, "kafka-config") is None

    # NOTES.txt, rendered into a ConfigMap by a copy of the chart (helm template leaves NOTES out).
    chart = tmp_path / "staticfleet"
    shutil.copytree(CHART, chart)
    (chart / "templates" / "NOTES.txt").rename(chart / "notes.txt")
    (chart / "templates" / "notes.yaml").write_text(
        "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: notes\ndata:\n  notes: |\n"
        '{{ tpl (.Files.Get "notes.txt") . | indent 4 }}\n'
    )

    def notes(values: dict[str, Any]) -> str:
        docs = helm.template(values, chart=chart)
        return str(one(docs, "ConfigMap", "notes")["data"]["notes"])

    loud = notes(OPEN)
    for warning in ("SECURITY IS OFF", "TENANCY IS OFF", "THE DASHBOARD IS OPEN", "NetworkPolicies are off"):
        assert warning in loud
    quiet = notes({})
    assert "IS OFF" not in quiet and "IS OPEN" not in quiet
    assert "Secret sf-staticfleet-kafka-admin" in quiet and "--cacert ca.crt https://localhost:8080" in quiet
    assert "any `helm upgrade` within\n60 days" in quiet


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (
            {"coordinator.security.usersSecret": "coordinator-users"},
            "coordinator.security.usersSecret needs operator.kafka.configSecret",
        ),
        (
            {"operator.kafka.configSecret": "operator-kafka"},
            "operator.kafka.configSecret needs coordinator.security.usersSecret",
        ),
        (
            {"coordinator.security.saslMechanisms": ["PLAIN"]},
            "coordinator.security.saslMechanisms needs SCRAM-SHA-512 or SCRAM-SHA-256",
        ),
        ({"tenancy.enforced": False}, "tenancy.enforced=false with rbac.editorsManageFleets"),
    ],
)
def test_settings_that_cannot_work_together_fail_with_what_to_set(
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
        ({"coordinator.security.certificates.source": "vault"}, "/coordinator/security/certificates/source"),
        ({"coordinator.security.certificates.days": 0}, "/coordinator/security/certificates/days"),
        ({"tenancy.enforced": "yes"}, "/tenancy/enforced"),
        ({"dashboard.secure": "no"}, "/dashboard/secure"),
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


def test_network_policies_admit_only_fleet_pods_kafka_clients_the_operator_and_metrics_scrapers(
    helm: Helm,
) -> None:
    assert not find(helm.template({"networkPolicy.enabled": False}), "NetworkPolicy")
    docs = helm.template(POLICED)
    coordinator = one(docs, "NetworkPolicy", "sf-staticfleet-coordinator")["spec"]
    assert coordinator["podSelector"]["matchLabels"]["app.kubernetes.io/component"] == "coordinator"
    assert coordinator["policyTypes"] == ["Ingress"]
    kafka, http = coordinator["ingress"]
    assert kafka["ports"] == [{"port": "kafka", "protocol": "TCP"}]
    assert kafka["from"] == [
        {"podSelector": {"matchLabels": FLEET_PODS}, "namespaceSelector": {}},
        {"podSelector": {"matchLabels": CLIENT_PODS}, "namespaceSelector": {}},
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

    # With watched namespaces, fleet pods of those namespaces only (and clients of the release's too).
    scoped = helm.template({**POLICED, "operator.watchNamespaces": ["shop"]})
    fleet_peer, client_peer = one(scoped, "NetworkPolicy", "sf-staticfleet-coordinator")["spec"]["ingress"][
        0
    ]["from"][:2]
    assert fleet_peer["namespaceSelector"] == {
        "matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In", "values": ["shop"]}]
    }
    assert client_peer["namespaceSelector"]["matchExpressions"][0]["values"] == ["shop", "staticfleet"]
    # Without metrics scrapers nobody reaches the operator's metrics port.
    quiet = helm.template()
    assert one(quiet, "NetworkPolicy", "sf-staticfleet-operator")["spec"]["ingress"] == [health]


def test_the_api_server_accepts_every_object_of_the_default_install_and_of_your_own_secrets(
    cluster: Cluster, helm: Helm, namespace: str
) -> None:
    for values in (POLICED, {**YOUR_SECRETS, **POLICED}):
        docs = helm.template(values, namespace=namespace)
        done = cluster.kubectl.run(
            "apply", "--dry-run=server", "-n", namespace, "-f", "-",
            stdin=json.dumps({"apiVersion": "v1", "kind": "List", "items": docs}), check=False,
        )  # fmt: skip
        assert done.returncode == 0, done.stderr
        for name in ("sf-staticfleet-coordinator", "sf-staticfleet-operator"):
            assert f"networkpolicy.networking.k8s.io/{name} created (server dry run)" in done.stdout
