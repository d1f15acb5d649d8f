"""The chart as rendered by `helm template` and judged by `helm lint --strict`, without a cluster:
least-privilege RBAC, security contexts, probes, the operator's defaults, external-Kafka mode, and a
values schema that rejects typos and wrong types. What the secured default makes and runs is in
test_chart_security.py."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import pytest

from e2e.helm import CHART, REPO_ROOT, Helm, HelmError, set_flags

Manifest = dict[str, Any]
Rules = dict[tuple[str, str], set[str]]

# What the operator needs, and why, is documented next to each rule in templates/operator-rbac.yaml
# and in docs/install.md.
OPERATOR_RULES: Rules = {
    ("staticfleet.io", "staticconsumergroups"): {"get", "list", "watch", "patch"},
    ("staticfleet.io", "staticconsumergroups/status"): {"patch"},
    ("staticfleet.io", "staticconsumergroups/finalizers"): {"update"},
    ("apps", "statefulsets"): {"get", "list", "watch", "create", "patch"},
    ("", "services"): {"create", "patch"},
    ("policy", "poddisruptionbudgets"): {"create", "patch"},
    ("", "pods"): {"list", "watch", "patch"},
    ("", "events"): {"create", "list"},
    ("apps", "controllerrevisions"): {"list"},
}
# Without the dashboard the operator neither lists Events nor reads the StatefulSets' revisions.
NO_DASHBOARD_RULES: Rules = {
    **{k: v for k, v in OPERATOR_RULES.items() if k != ("apps", "controllerrevisions")},
    ("", "events"): {"create"},
}
DISCOVERY_RULES: Rules = {("apiextensions.k8s.io", "customresourcedefinitions"): {"list", "watch"}}
# Tenancy (the default): the policies, and the namespaces' labels they select by, watched cluster-wide.
TENANCY_RULES: Rules = {
    ("", "namespaces"): {"list", "watch"},
    ("staticfleet.io", "staticfleettenancypolicies"): {"list", "watch"},
}
# With the secured coordinator (the default) the operator provisions each fleet's user in a Secret.
FLEET_SECRETS: Rules = {("", "secrets"): {"get", "create", "patch"}}
# Otherwise it only creates each fleet's departure key's Secret, which it never reads or changes.
DEPARTURE_KEY_SECRETS: Rules = {("", "secrets"): {"create"}}
# Everything security-related off, explicitly.
OPEN = {
    "coordinator.security.enabled": False,
    "dashboard.secure": False,
    "networkPolicy.enabled": False,
    "tenancy.enforced": False,
    "rbac.editorsManageFleets": False,
}
EXTERNAL = {
    "coordinator.enabled": False,
    "externalKafka.bootstrapServers": "kafka-0.kafka:9093,kafka-1.kafka:9093",
}


def find(docs: Iterable[Manifest], kind: str, name: str | None = None) -> list[Manifest]:
    return [d for d in docs if d["kind"] == kind and (name is None or d["metadata"]["name"] == name)]


def one(docs: Iterable[Manifest], kind: str, name: str) -> Manifest:
    (found,) = find(docs, kind, name)
    return found


def rules(role: Manifest) -> Rules:
    merged: Rules = {}
    for rule in role["rules"]:
        assert "resourceNames" not in rule or rule["resources"] == ["secrets"]
        for group in rule["apiGroups"]:
            for resource in rule["resources"]:
                merged.setdefault((group, resource), set()).update(rule["verbs"])
    return merged


def container(workload: Manifest) -> Manifest:
    """The workload's own container (the coordinator's pod also runs operator-acls beside it)."""
    found = workload["spec"]["template"]["spec"]["containers"]
    assert found[0]["name"] in ("operator", "coordinator"), found[0]["name"]
    return dict(found[0])


def flag(args: list[str], name: str) -> str | None:
    values = [a.split("=", 1)[1] for a in args if a.startswith(f"--{name}=")]
    assert len(values) <= 1, args
    return values[0] if values else None


def test_helm_lint_strict_passes_with_defaults_and_with_an_external_kafka(helm: Helm) -> None:
    for values in ({}, EXTERNAL):
        done = helm.run("lint", "--strict", str(CHART), *set_flags(values))
        assert "1 chart(s) linted, 0 chart(s) failed" in done.stdout, done.stdout
        assert "[WARNING]" not in done.stdout and "[ERROR]" not in done.stdout


def test_the_chart_installs_the_repository_crd_byte_for_byte() -> None:
    source = sorted((REPO_ROOT / "crds").glob("*.yaml"))
    copies = sorted((CHART / "crds").glob("*.yaml"))
    assert [p.name for p in copies] == [p.name for p in source], "run `make chart-crds`"
    for original, copy in zip(source, copies, strict=True):
        assert copy.read_bytes() == original.read_bytes(), (
            f"{copy} differs from {original}: run `make chart-crds`"
        )


def test_the_operator_cluster_role_grants_exactly_what_the_operator_does(helm: Helm) -> None:
    docs = helm.template()
    assert rules(one(docs, "ClusterRole", "sf-staticfleet-operator")) == {**OPERATOR_RULES, **FLEET_SECRETS}
    assert rules(one(docs, "ClusterRole", "sf-staticfleet-operator-discovery")) == {
        **DISCOVERY_RULES,
        **TENANCY_RULES,
    }
    open_docs = helm.template(OPEN)
    assert rules(one(open_docs, "ClusterRole", "sf-staticfleet-operator")) == {
        **OPERATOR_RULES,
        **DEPARTURE_KEY_SECRETS,
    }
    assert rules(one(open_docs, "ClusterRole", "sf-staticfleet-operator-discovery")) == DISCOVERY_RULES
    # Watching every namespace: bound cluster-wide, to the chart's service account only.
    for name in ("sf-staticfleet-operator", "sf-staticfleet-operator-discovery"):
        binding = one(docs, "ClusterRoleBinding", name)
        assert binding["roleRef"] == {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": name,
        }
        assert binding["subjects"] == [
            {"kind": "ServiceAccount", "name": "sf-staticfleet-operator", "namespace": "staticfleet"}
        ]
    # Namespaced: only the Lease of the leader election, in the release's namespace.
    namespaced = [(d["kind"], d["metadata"]["name"]) for d in find(docs, "RoleBinding") + find(docs, "Role")]
    assert namespaced == [
        ("RoleBinding", "sf-staticfleet-operator-leader-election"),
        ("Role", "sf-staticfleet-operator-leader-election"),
    ]


def test_the_dashboard_is_a_service_on_the_operator_with_its_token_from_a_secret(helm: Helm) -> None:
    docs = helm.template({"dashboard.tokenSecret": "dashboard-token", "dashboard.port": 8123})
    service = one(docs, "Service", "sf-staticfleet-dashboard")
    assert service["spec"]["type"] == "ClusterIP"
    assert service["spec"]["ports"] == [{"name": "dashboard", "port": 8123, "targetPort": "dashboard"}]
    assert service["spec"]["selector"]["app.kubernetes.io/component"] == "operator"
    deployment = one(docs, "Deployment", "sf-staticfleet-operator")
    operator = container(deployment)
    assert flag(operator["args"], "ui") == "0.0.0.0:8123"
    assert flag(operator["args"], "ui-token-file") == "/etc/staticfleet/dashboard/token"
    assert {"name": "dashboard", "containerPort": 8123} in operator["ports"]
    (volume,) = [
        v for v in deployment["spec"]["template"]["spec"]["volumes"] if v["name"] == "dashboard-token"
    ]
    assert volume["secret"] == {"secretName": "dashboard-token", "items": [{"key": "token", "path": "token"}]}

    local = helm.template({"bindAddress": "127.0.0.1", "dashboard.secure": False})
    plain = container(one(local, "Deployment", "sf-staticfleet-operator"))
    assert flag(plain["args"], "ui") == "127.0.0.1:8000" and flag(plain["args"], "ui-token-file") is None
    assert flag(plain["args"], "ui-tls-cert") is None

    off = helm.template({"dashboard.enabled": False})
    assert not find(off, "Service", "sf-staticfleet-dashboard")
    assert flag(container(one(off, "Deployment", "sf-staticfleet-operator"))["args"], "ui") is None
    assert rules(one(off, "ClusterRole", "sf-staticfleet-operator")) == {
        **NO_DASHBOARD_RULES,
        **FLEET_SECRETS,
    }


def test_no_role_uses_a_wildcard_and_none_touches_secrets_unless_asked(helm: Helm) -> None:
    """Secrets only for the fleets' own users, which the secured default provisions, and otherwise only
    to create each fleet's departure key."""
    for values in ({}, EXTERNAL, {"operator.watchNamespaces": ["a", "b"]}, OPEN):
        docs = helm.template(values)
        roles = find(docs, "ClusterRole") + find(docs, "Role")
        provisions = values in ({}, {"operator.watchNamespaces": ["a", "b"]})
        for role in roles:
            for rule in role["rules"]:
                for key in ("apiGroups", "resources", "verbs"):
                    assert "*" not in rule[key], (role["metadata"]["name"], rule)
                if "secrets" in rule["resources"]:
                    assert role["metadata"]["name"] == "sf-staticfleet-operator", rule
                    assert rule == {
                        "apiGroups": [""],
                        "resources": ["secrets"],
                        "verbs": ["get", "create", "patch"] if provisions else ["create"],
                    }
                assert "escalate" not in rule["verbs"] and "bind" not in rule["verbs"]
                assert "impersonate" not in rule["verbs"]


def test_watched_namespaces_bind_the_operator_role_in_those_namespaces_only(helm: Helm) -> None:
    docs = helm.template({"operator.watchNamespaces": ["shop", "billing"]})
    bindings = find(docs, "RoleBinding", "sf-staticfleet-operator")
    assert sorted(b["metadata"]["namespace"] for b in bindings) == ["billing", "shop"]
    assert all(b["roleRef"]["name"] == "sf-staticfleet-operator" for b in bindings)
    assert not find(docs, "ClusterRoleBinding", "sf-staticfleet-operator")
    # kopf follows which of the watched namespaces exist (tenancy watches their labels anyway).
    assert rules(one(docs, "ClusterRole", "sf-staticfleet-operator-discovery")) == {
        **DISCOVERY_RULES,
        **TENANCY_RULES,
    }
    untenanted = helm.template({**OPEN, "operator.watchNamespaces": ["shop"]})
    assert rules(one(untenanted, "ClusterRole", "sf-staticfleet-operator-discovery")) == {
        **DISCOVERY_RULES,
        ("", "namespaces"): {"list", "watch"},
    }
    args = container(one(docs, "Deployment", "sf-staticfleet-operator"))["args"]
    assert [a for a in args if a.startswith("--namespace=")] == ["--namespace=shop", "--namespace=billing"]


def test_secret_access_is_get_only_and_scoped_to_the_namespaces_and_names_granted(helm: Helm) -> None:
    docs = helm.template(
        {"rbac.secrets.namespaces": ["shop"], "rbac.secrets.names": ["kafka-ca", "shop-sasl"]}
    )
    role = one(docs, "ClusterRole", "sf-staticfleet-operator-secrets")
    assert role["rules"] == [
        {
            "apiGroups": [""],
            "resources": ["secrets"],
            "verbs": ["get"],
            "resourceNames": ["kafka-ca", "shop-sasl"],
        }
    ]
    (binding,) = find(docs, "RoleBinding", "sf-staticfleet-operator-secrets")
    assert binding["metadata"]["namespace"] == "shop"
    assert not find(docs, "ClusterRoleBinding", "sf-staticfleet-operator-secrets")

    wide = helm.template({"rbac.secrets.clusterWide": True})
    assert one(wide, "ClusterRole", "sf-staticfleet-operator-secrets")["rules"] == [
        {"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}
    ]
    assert find(wide, "ClusterRoleBinding", "sf-staticfleet-operator-secrets")
    assert not find(helm.template(), "ClusterRole", "sf-staticfleet-operator-secrets")


def test_user_roles_aggregate_into_view_edit_and_admin_with_the_scale_subresource(helm: Helm) -> None:
    docs = helm.template()
    view = one(docs, "ClusterRole", "sf-staticfleet-view")
    edit = one(docs, "ClusterRole", "sf-staticfleet-edit")
    admin = one(docs, "ClusterRole", "sf-staticfleet-admin")
    assert view["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-view"] == "true"
    assert edit["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-edit"] == "true"
    assert admin["metadata"]["labels"]["rbac.authorization.k8s.io/aggregate-to-admin"] == "true"
    read = {"get", "list", "watch"}
    write = {"create", "update", "patch", "delete", "deletecollection"}
    assert rules(view) == {
        ("staticfleet.io", "staticconsumergroups"): read,
        ("staticfleet.io", "staticconsumergroups/status"): read,
        ("staticfleet.io", "staticconsumergroups/scale"): read,
    }
    assert rules(edit) == {
        ("staticfleet.io", "staticconsumergroups"): read | write,
        ("staticfleet.io", "staticconsumergroups/scale"): {"get", "update", "patch"},
        ("staticfleet.io", "staticconsumergroups/status"): {"get"},
    }
    assert rules(admin)[("staticfleet.io", "staticconsumergroups/status")] == {"get", "update", "patch"}
    # Without rbac.editorsManageFleets (needed with tenancy off) edit and admin read and scale only.
    readers = helm.template({"rbac.editorsManageFleets": False})
    for name in ("sf-staticfleet-edit", "sf-staticfleet-admin"):
        assert rules(one(readers, "ClusterRole", name))[("staticfleet.io", "staticconsumergroups")] == read
        assert rules(one(readers, "ClusterRole", name))[("staticfleet.io", "staticconsumergroups/scale")] == {
            "get",
            "update",
            "patch",
        }
    assert not find(
        helm.template({"rbac.aggregateToDefaultRoles": False}), "ClusterRole", "sf-staticfleet-view"
    )
    assert not find(helm.template({"rbac.create": False}), "ClusterRole")


def test_both_workloads_run_as_non_root_on_a_read_only_root_with_writable_mounts(helm: Helm) -> None:
    docs = helm.template()
    operator = one(docs, "Deployment", "sf-staticfleet-operator")
    coordinator = one(docs, "StatefulSet", "sf-staticfleet-coordinator")
    for workload in (operator, coordinator):
        pod = workload["spec"]["template"]["spec"]
        assert pod["securityContext"]["runAsNonRoot"] is True
        assert pod["securityContext"]["runAsUser"] != 0
        assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
        security = container(workload)["securityContext"]
        assert security == {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]},
        }
        mounts = {m["mountPath"]: m["name"] for m in container(workload)["volumeMounts"]}
        volumes = {v["name"]: v for v in pod["volumes"]}
        assert volumes[mounts["/tmp"]] == {"name": "tmp", "emptyDir": {}}
        assert {"name": "TMPDIR", "value": "/tmp"} in container(workload)["env"]
    # The coordinator's data is a claim from the StatefulSet's template, and it needs no API token.
    assert {m["mountPath"]: m["name"] for m in container(coordinator)["volumeMounts"]}["/data"] == "data"
    (claim,) = coordinator["spec"]["volumeClaimTemplates"]
    assert claim["metadata"]["name"] == "data"
    assert claim["spec"]["resources"]["requests"]["storage"] == "1Gi"
    assert "storageClassName" not in claim["spec"]
    assert coordinator["spec"]["template"]["spec"]["automountServiceAccountToken"] is False
    assert coordinator["spec"]["template"]["spec"]["securityContext"]["fsGroup"] == 65532


def test_persistence_can_be_an_empty_dir_or_a_named_or_empty_storage_class(helm: Helm) -> None:
    ephemeral = one(
        helm.template({"coordinator.persistence.enabled": False}), "StatefulSet", "sf-staticfleet-coordinator"
    )
    assert "volumeClaimTemplates" not in ephemeral["spec"]
    assert {"name": "data", "emptyDir": {}} in ephemeral["spec"]["template"]["spec"]["volumes"]
    for storage_class, expected in (("fast-ssd", "fast-ssd"), ("-", "")):
        sts = one(
            helm.template({"coordinator.persistence.storageClass": storage_class}),
            "StatefulSet",
            "sf-staticfleet-coordinator",
        )
        assert sts["spec"]["volumeClaimTemplates"][0]["spec"]["storageClassName"] == expected


def test_probes_use_the_coordinator_health_endpoints_and_the_operator_liveness_port(helm: Helm) -> None:
    docs = helm.template()
    coordinator = container(one(docs, "StatefulSet", "sf-staticfleet-coordinator"))
    ports = {p["name"]: p["containerPort"] for p in coordinator["ports"]}
    assert ports == {"kafka": 9092, "http": 8080}
    # The HTTP API is on HTTPS (the kubelet does not verify a probe's certificate).
    assert coordinator["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "http", "scheme": "HTTPS"}
    assert coordinator["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "http", "scheme": "HTTPS"}
    assert flag(coordinator["args"], "http") == "0.0.0.0:8080"
    plain = container(one(helm.template(OPEN), "StatefulSet", "sf-staticfleet-coordinator"))
    assert plain["readinessProbe"]["httpGet"]["scheme"] == "HTTP"

    operator = container(one(docs, "Deployment", "sf-staticfleet-operator"))
    ports = {p["name"]: p["containerPort"] for p in operator["ports"]}
    assert ports == {"metrics": 9090, "health": 8081, "ready": 8082, "dashboard": 8000}
    assert operator["livenessProbe"]["httpGet"] == {"path": "/healthz", "port": "health"}
    assert flag(operator["args"], "liveness") == "http://0.0.0.0:8081/healthz"
    assert operator["readinessProbe"]["httpGet"] == {"path": "/readyz", "port": "ready"}
    assert flag(operator["args"], "readiness") == "http://0.0.0.0:8082/readyz"
    assert flag(operator["args"], "metrics-port") == "9090"


def test_the_operator_replicas_prefer_different_nodes_unless_an_affinity_is_given(helm: Helm) -> None:
    deployment = one(helm.template(), "Deployment", "sf-staticfleet-operator")
    spread = deployment["spec"]["template"]["spec"]["affinity"]["podAntiAffinity"]
    (term,) = spread["preferredDuringSchedulingIgnoredDuringExecution"]
    assert term["podAffinityTerm"]["topologyKey"] == "kubernetes.io/hostname"
    assert (
        term["podAffinityTerm"]["labelSelector"]["matchLabels"]
        == deployment["spec"]["selector"]["matchLabels"]
    )
    assert "requiredDuringSchedulingIgnoredDuringExecution" not in spread  # one node still runs both
    own: dict[str, Any] = {
        "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}}
    }
    given = one(helm.template({"operator.affinity": own}), "Deployment", "sf-staticfleet-operator")
    assert given["spec"]["template"]["spec"]["affinity"] == own


def test_the_operator_runs_two_replicas_that_elect_a_leader_with_a_disruption_budget(helm: Helm) -> None:
    docs = helm.template()
    operator = one(docs, "Deployment", "sf-staticfleet-operator")
    assert operator["spec"]["replicas"] == 2
    assert operator["spec"]["strategy"] == {"type": "RollingUpdate"}
    args = container(operator)["args"]
    assert "--leader-election" in args and flag(args, "leader-election-name") == "sf-staticfleet-operator"
    # Its replicas share one field manager; another release has its own (ApplyConflict between them).
    assert flag(args, "field-manager") == "staticfleet-operator/staticfleet/sf"
    env = {e["name"]: e for e in container(operator)["env"]}
    assert env["POD_NAMESPACE"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.namespace"
    role = one(docs, "Role", "sf-staticfleet-operator-leader-election")
    assert role["rules"] == [
        {"apiGroups": ["coordination.k8s.io"], "resources": ["leases"], "verbs": ["create"]},
        {
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "resourceNames": ["sf-staticfleet-operator"],
            "verbs": ["get", "update"],
        },
    ]
    pdb = one(docs, "PodDisruptionBudget", "sf-staticfleet-operator")
    assert pdb["spec"]["minAvailable"] == 1
    assert pdb["spec"]["selector"]["matchLabels"] == operator["spec"]["selector"]["matchLabels"]
    single = helm.template({"operator.replicas": 1})
    assert not find(single, "PodDisruptionBudget", "sf-staticfleet-operator")
    assert operator["spec"]["template"]["spec"]["serviceAccountName"] == "sf-staticfleet-operator"
    assert container(operator)["command"] == ["staticfleet", "operator"]
    assert container(operator)["image"] == "staticfleet:0.1.0"


def test_the_operator_defaults_to_the_embedded_coordinator_at_its_stable_pod_name(helm: Helm) -> None:
    docs = helm.template(release="sf", namespace="kafka-apps")
    host = "sf-staticfleet-coordinator-0.sf-staticfleet-coordinator.kafka-apps.svc.cluster.local"
    args = container(one(docs, "Deployment", "sf-staticfleet-operator"))["args"]
    assert flag(args, "default-bootstrap-servers") == f"{host}:9092"
    assert flag(args, "default-coordinator-api") == f"https://{host}:8080"
    coordinator = one(docs, "StatefulSet", "sf-staticfleet-coordinator")
    assert coordinator["spec"]["replicas"] == 1
    assert coordinator["spec"]["serviceName"] == "sf-staticfleet-coordinator"
    cargs = container(coordinator)["args"]
    assert container(coordinator)["command"] == ["staticfleet", "coordinator"]
    assert flag(cargs, "listener") == "SASL_SSL://0.0.0.0:9092"
    assert flag(cargs, "advertised-listener") == f"SASL_SSL://{host}:9092"
    plain = container(
        one(helm.template(OPEN, namespace="kafka-apps"), "StatefulSet", "sf-staticfleet-coordinator")
    )
    assert flag(plain["args"], "listen") == "0.0.0.0:9092"
    assert flag(plain["args"], "advertised-listener") == f"{host}:9092"
    assert flag(cargs, "data-dir") == "/data"
    assert flag(cargs, "group-max-session-timeout-ms") == "1800000"
    assert flag(cargs, "group-consumer-heartbeat-interval-ms") == "1000"
    service = one(docs, "Service", "sf-staticfleet-coordinator")
    assert service["spec"]["clusterIP"] == "None"
    assert service["spec"]["selector"] == coordinator["spec"]["selector"]["matchLabels"]
    assert {p["name"]: p["port"] for p in service["spec"]["ports"]} == {"kafka": 9092, "http": 8080}


def test_an_advertised_host_and_ports_reach_every_place_that_names_them(helm: Helm) -> None:
    docs = helm.template(
        {
            "bindAddress": "127.0.0.1",
            "coordinator.advertisedHost": "127.0.0.1",
            "coordinator.ports.kafka": 19092,
            "coordinator.ports.http": 18080,
            "operator.ports.metrics": 19090,
            "operator.ports.health": 18081,
        }
    )
    cargs = container(one(docs, "StatefulSet", "sf-staticfleet-coordinator"))["args"]
    assert (flag(cargs, "listener"), flag(cargs, "advertised-listener"), flag(cargs, "http")) == (
        "SASL_SSL://127.0.0.1:19092",
        "SASL_SSL://127.0.0.1:19092",
        "127.0.0.1:18080",
    )
    sidecar = one(docs, "StatefulSet", "sf-staticfleet-coordinator")["spec"]["template"]["spec"][
        "containers"
    ][1]
    assert flag(sidecar["args"], "bootstrap-server") == "127.0.0.1:19092"
    args = container(one(docs, "Deployment", "sf-staticfleet-operator"))["args"]
    assert flag(args, "default-bootstrap-servers") == "127.0.0.1:19092"
    assert flag(args, "default-coordinator-api") == "https://127.0.0.1:18080"
    assert flag(args, "liveness") == "http://127.0.0.1:18081/healthz"
    assert (flag(args, "metrics-host"), flag(args, "metrics-port")) == ("127.0.0.1", "19090")


def test_an_external_kafka_renders_no_coordinator_and_becomes_the_operator_default(helm: Helm) -> None:
    docs = helm.template(EXTERNAL)
    assert not find(docs, "StatefulSet")
    services = sorted(s["metadata"]["name"] for s in find(docs, "Service"))
    assert services == ["sf-staticfleet-dashboard", "sf-staticfleet-operator-metrics"]
    assert not any("coordinator" in d["metadata"]["name"] for d in docs)
    args = container(one(docs, "Deployment", "sf-staticfleet-operator"))["args"]
    assert flag(args, "default-bootstrap-servers") == "kafka-0.kafka:9093,kafka-1.kafka:9093"
    assert flag(args, "default-coordinator-api") is None


@pytest.mark.parametrize(
    ("values", "message"),
    [
        ({"coordinator.enbled": False}, "additional properties 'enbled' not allowed"),
        ({"operator.watchNamespace": ["a"]}, "additional properties 'watchNamespace' not allowed"),
        ({"imag": {"tag": "x"}}, "additional properties 'imag' not allowed"),
        ({"coordinator.ports.kafka": "9092"}, "at '/coordinator/ports/kafka': got string, want integer"),
        ({"coordinator.ports.http": 70000}, "at '/coordinator/ports/http': maximum"),
        ({"image.pullPolicy": "Sometimes"}, "at '/image/pullPolicy': value must be one of"),
        ({"operator.logLevel": "verbose"}, "at '/operator/logLevel': value must be one of"),
        ({"rbac.secrets.clusterWide": "yes"}, "at '/rbac/secrets/clusterWide': got string, want boolean"),
        ({"rbac.secrets.namespaces": ["Not_A_Namespace"]}, "at '/rbac/secrets/namespaces/0'"),
        ({"coordinator.persistence.size": "lots"}, "at '/coordinator/persistence/size'"),
        ({"externalKafka.bootstrapServers": "kafka"}, "at '/externalKafka/bootstrapServers'"),
        ({"operator.resources": {"request": {"cpu": "1"}}}, "additional properties 'request' not allowed"),
    ],
)
def test_the_values_schema_rejects_typos_and_wrong_types(
    helm: Helm, values: dict[str, Any], message: str
) -> None:
    with pytest.raises(HelmError) as raised:
        helm.template(values)
    assert "values don't meet the specifications of the schema" in raised.value.stderr
    assert message in raised.value.stderr


@pytest.mark.parametrize(
    ("values", "message"),
    [
        (
            {"coordinator.enabled": False},
            "externalKafka.bootstrapServers is required when coordinator.enabled is false",
        ),
        (
            {"externalKafka.bootstrapServers": "kafka:9092"},
            "externalKafka.bootstrapServers is set while coordinator.enabled is true",
        ),
        (
            {"serviceAccount.create": False},
            "serviceAccount.name is required when serviceAccount.create is false",
        ),
    ],
)
def test_contradictory_values_fail_with_a_message_that_says_what_to_set(
    helm: Helm, values: dict[str, Any], message: str
) -> None:
    with pytest.raises(HelmError) as raised:
        helm.template(values)
    assert message in raised.value.stderr


def test_an_ipv6_bind_address_renders_flags_the_programs_parse(helm: Helm) -> None:
    """`::` ends a flag with a colon: unquoted, YAML would read `--metrics-host=::` as a mapping."""
    from staticfleet.broker.security.listeners import build_listeners
    from staticfleet.commands.coordinator import host_port

    docs = helm.template({"bindAddress": "::"})
    operator = container(one(docs, "Deployment", "sf-staticfleet-operator"))
    assert flag(operator["args"], "metrics-host") == "::"
    statefulset = one(docs, "StatefulSet", "sf-staticfleet-coordinator")
    coordinator = container(statefulset)
    listener, http = flag(coordinator["args"], "listener"), flag(coordinator["args"], "http")
    assert listener is not None and http is not None
    (parsed,) = build_listeners([listener], [], {})
    assert (parsed.bind.host, parsed.bind.port) == ("::", 9092) and host_port(http)[0] == "::"
    sidecar = statefulset["spec"]["template"]["spec"]["containers"][1]
    assert host_port(str(flag(sidecar["args"], "bootstrap-server"))) == ("::1", 9092)
    plain = container(
        one(helm.template({**OPEN, "bindAddress": "::"}), "StatefulSet", "sf-staticfleet-coordinator")
    )
    listen = flag(plain["args"], "listen")
    assert listen is not None and host_port(listen) == ("::", 9092)


def test_the_operator_derives_departure_keys_from_a_signing_key_the_chart_keeps(helm: Helm) -> None:
    """Every replica reads the same signing key, from a Secret made at install (looked up and kept on
    upgrades), so that the fleets' departure keys survive a restart and a change of leader."""
    for values in ({}, OPEN, EXTERNAL):
        docs = helm.template(values)
        secret = one(docs, "Secret", "sf-staticfleet-departure-signing-key")
        assert len(secret["stringData"]["key"]) >= 32
        deployment = one(docs, "Deployment", "sf-staticfleet-operator")
        operator = container(deployment)
        assert flag(operator["args"], "departure-signing-key-file") == "/etc/staticfleet/departure/key"
        (mount,) = [m for m in operator["volumeMounts"] if m["name"] == "departure-signing-key"]
        assert mount == {
            "name": "departure-signing-key",
            "mountPath": "/etc/staticfleet/departure",
            "readOnly": True,
        }
        (volume,) = [
            v
            for v in deployment["spec"]["template"]["spec"]["volumes"]
            if v["name"] == "departure-signing-key"
        ]
        assert volume["secret"] == {
            "secretName": "sf-staticfleet-departure-signing-key",
            "items": [{"key": "key", "path": "key"}],
        }


def test_the_operators_limits_render_as_flags_its_parser_takes_with_the_same_defaults(helm: Helm) -> None:
    """reconcileThreads, maxReplicas and scaleDownStepTimeout: by default the CLI's own defaults, and what
    a user sets reaches the operator's parser as given."""
    from staticfleet.cli import build_parser

    names = ("reconcile-threads", "max-replicas", "scale-down-step-timeout")

    def parsed(values: dict[str, Any]) -> tuple[object, ...]:
        args = container(one(helm.template(values), "Deployment", "sf-staticfleet-operator"))["args"]
        limits = [f"--{name}={flag(args, name)}" for name in names]
        got = build_parser().parse_args(["operator", *limits])
        return (got.reconcile_threads, got.max_replicas, got.scale_down_step_timeout)

    cli = build_parser().parse_args(["operator"])
    assert parsed({}) == (cli.reconcile_threads, cli.max_replicas, cli.scale_down_step_timeout)
    custom = {"operator.reconcileThreads": 8, "operator.maxReplicas": 50, "operator.scaleDownStepTimeout": 90}
    assert parsed(custom) == (8, 50, 90.0)
    with pytest.raises(HelmError) as raised:
        helm.template({"operator.reconcileThreads": 0})
    assert "at '/operator/reconcileThreads': minimum" in raised.value.stderr
