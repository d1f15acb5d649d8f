"""The chart installed on a real API server: what its service account may and may not do, asked with
`kubectl auth can-i --as=system:serviceaccount:...`; the operator pod running under that account; an
upgrade that narrows the grant to one namespace; and an uninstall that leaves no cluster-wide objects.
The coordinator is disabled here (external-Kafka mode): the fleet scenarios run in test_demo.py."""

from __future__ import annotations

import secrets
from collections.abc import Iterator
from typing import Any

import pytest
import yaml

from e2e.helm import CHART, Helm, set_flags
from e2e.helpers import Cluster, Kubectl, wait_until
from e2e.localcluster.ports import free_port

# (verb, resource, subresource) the operator needs in every namespace it watches.
OPERATOR_NEEDS = [
    ("get", "staticconsumergroups.staticfleet.io", ""),
    ("list", "staticconsumergroups.staticfleet.io", ""),
    ("watch", "staticconsumergroups.staticfleet.io", ""),
    ("patch", "staticconsumergroups.staticfleet.io", ""),
    ("patch", "staticconsumergroups.staticfleet.io", "status"),
    ("update", "staticconsumergroups.staticfleet.io", "finalizers"),
    ("create", "statefulsets.apps", ""),
    ("patch", "statefulsets.apps", ""),
    ("get", "statefulsets.apps", ""),
    ("watch", "statefulsets.apps", ""),
    ("create", "services", ""),
    ("patch", "services", ""),
    ("create", "poddisruptionbudgets.policy", ""),
    ("patch", "poddisruptionbudgets.policy", ""),
    ("list", "pods", ""),
    ("watch", "pods", ""),
    ("create", "events", ""),
    ("list", "events", ""),
    ("list", "controllerrevisions.apps", ""),
]
# Things a compromised operator must not be able to do anywhere.
OPERATOR_MUST_NOT = [
    ("get", "secrets", ""),
    ("list", "secrets", ""),
    ("watch", "secrets", ""),
    ("delete", "namespaces", ""),
    ("delete", "statefulsets.apps", ""),
    ("delete", "pods", ""),
    ("create", "pods", ""),
    ("create", "pods", "exec"),
    ("update", "staticconsumergroups.staticfleet.io", ""),
    ("delete", "staticconsumergroups.staticfleet.io", ""),
    ("update", "staticconsumergroups.staticfleet.io", "status"),
    ("patch", "staticconsumergroups.staticfleet.io", "scale"),
    ("get", "configmaps", ""),
    ("create", "serviceaccounts", "token"),
    ("create", "rolebindings.rbac.authorization.k8s.io", ""),
    ("escalate", "clusterroles.rbac.authorization.k8s.io", ""),
    ("impersonate", "users", ""),
    ("patch", "nodes", ""),
    ("create", "customresourcedefinitions.apiextensions.k8s.io", ""),
]


def can_i(kubectl: Kubectl, user: str, verb: str, resource: str, subresource: str = "", **where: str) -> bool:
    """`kubectl auth can-i` as `user`; where: namespace=NS, or all_namespaces="true", or name=NAME too."""
    target = f"{resource}/{where['name']}" if "name" in where else resource
    args = ["auth", "can-i", verb, target, f"--as={user}"]
    if subresource:
        args.append(f"--subresource={subresource}")
    args += ["--all-namespaces"] if where.get("all_namespaces") else ["-n", where["namespace"]]
    done = kubectl.run(*args, check=False)
    answer = done.stdout.strip()
    assert answer in ("yes", "no"), f"kubectl {' '.join(args)}: {answer!r} {done.stderr!r}"
    return answer == "yes"


def denied(kubectl: Kubectl, user: str, checks: list[tuple[str, str, str]], **where: str) -> list[Any]:
    return [c for c in checks if can_i(kubectl, user, *c, **where)]


def allowed(kubectl: Kubectl, user: str, checks: list[tuple[str, str, str]], **where: str) -> list[Any]:
    return [c for c in checks if not can_i(kubectl, user, *c, **where)]


@pytest.fixture
def second_namespace(cluster: Cluster) -> Iterator[str]:
    name = f"chart-other-{secrets.token_hex(3)}"
    cluster.kubectl.run("create", "namespace", name)
    try:
        yield name
    finally:
        cluster.kubectl.run("delete", "namespace", name, "--wait=false")


def test_the_operator_account_can_do_its_job_and_nothing_more(
    cluster: Cluster, namespace: str, second_namespace: str, helm: Helm, image: str
) -> None:
    kubectl = cluster.kubectl
    installed = Helm(helm.binary, cluster.kubeconfig)
    release = f"rbac-{secrets.token_hex(3)}"
    repository, _, tag = image.rpartition(":")
    values: dict[str, Any] = {
        "coordinator.enabled": False,
        "externalKafka.bootstrapServers": f"127.0.0.1:{free_port()}",  # nothing listens: no fleet here
        "image.repository": repository,
        "image.tag": tag,
    }
    if cluster.local is not None:  # pods share this host's network: loopback, free ports
        values |= {"bindAddress": "127.0.0.1", "operator.ports.metrics": free_port()}
        values |= {"operator.ports.health": free_port(), "operator.ports.readiness": free_port()}
        values |= {"operator.replicas": 1}  # two replicas would bind the same ports on this host
    account = f"system:serviceaccount:{namespace}:{release}-staticfleet-operator"
    cluster_scoped = [
        ("ClusterRole", f"{release}-staticfleet-operator"),
        ("ClusterRole", f"{release}-staticfleet-operator-discovery"),
        ("ClusterRoleBinding", f"{release}-staticfleet-operator"),
        ("ClusterRoleBinding", f"{release}-staticfleet-operator-discovery"),
        ("ClusterRole", f"{release}-staticfleet-view"),
        ("ClusterRole", f"{release}-staticfleet-edit"),
        ("ClusterRole", f"{release}-staticfleet-admin"),
    ]
    flags = set_flags(values)
    done = installed.run("install", release, str(CHART), "-n", namespace, "--wait", "--timeout=120s", *flags)
    try:
        assert "STATUS: deployed" in done.stdout
        assert "grant the operator their Secrets" in done.stdout  # NOTES for an external Kafka

        # Watching every namespace: the grant holds in any namespace, Secrets stay out of reach: it may
        # create one (a fleet's departure key), never read or change one.
        for where in ({"namespace": second_namespace}, {"namespace": namespace}, {"all_namespaces": "true"}):
            assert allowed(kubectl, account, [*OPERATOR_NEEDS, ("create", "secrets", "")], **where) == [], (
                where
            )
            cannot = [*OPERATOR_MUST_NOT, ("patch", "secrets", ""), ("update", "secrets", "")]
            assert denied(kubectl, account, cannot, **where) == [], where
        assert can_i(
            kubectl, account, "watch", "customresourcedefinitions.apiextensions.k8s.io", all_namespaces="true"
        )
        # Tenancy: the policies, and the namespaces' labels they select by, read cluster-wide only.
        for verb in ("list", "watch"):
            assert can_i(kubectl, account, verb, "namespaces", all_namespaces="true")
            assert can_i(
                kubectl, account, verb, "staticfleettenancypolicies.staticfleet.io", all_namespaces="true"
            )
        for verb in ("create", "patch", "delete"):
            assert not can_i(kubectl, account, verb, "namespaces", all_namespaces="true")
            assert not can_i(
                kubectl, account, verb, "staticfleettenancypolicies.staticfleet.io", all_namespaces="true"
            )

        # The operator pod runs under that account (its own token, not the test's admin credentials).
        pods = kubectl.items("pods", namespace, "-l", "app.kubernetes.io/component=operator")
        chart_default = yaml.safe_load((CHART / "values.yaml").read_text())["operator"]["replicas"]
        assert len(pods) == values.get("operator.replicas", chart_default)
        for pod in pods:
            assert pod["spec"]["serviceAccountName"] == f"{release}-staticfleet-operator"
            assert pod["status"]["phase"] == "Running"
        if cluster.local is not None:
            log = cluster.pod_dir(namespace, pods[0]["metadata"]["name"]) / "operator.log"
            wait_until(
                lambda: "Activity 'login' succeeded" in log.read_text(), timeout=30, what="kopf's login"
            )
            assert "Forbidden" not in log.read_text() and " 403" not in log.read_text()

        # Narrowed by an upgrade: one watched namespace, and one named Secret in it.
        narrowed = {
            "operator.watchNamespaces": [namespace],
            "rbac.secrets.namespaces": [namespace],
            "rbac.secrets.names": ["kafka-ca"],
        }
        installed.run(
            "upgrade",
            release,
            str(CHART),
            "-n",
            namespace,
            "--wait",
            "--timeout=120s",
            *flags,
            *set_flags(narrowed),
        )
        assert allowed(kubectl, account, OPERATOR_NEEDS, namespace=namespace) == []
        assert denied(kubectl, account, OPERATOR_NEEDS, namespace=second_namespace) == []
        assert can_i(kubectl, account, "get", "secrets", namespace=namespace, name="kafka-ca")
        assert not can_i(kubectl, account, "get", "secrets", namespace=namespace, name="another-secret")
        assert not can_i(kubectl, account, "list", "secrets", namespace=namespace)
        assert not can_i(kubectl, account, "get", "secrets", namespace=second_namespace, name="kafka-ca")
        assert can_i(kubectl, account, "list", "namespaces", all_namespaces="true")  # kopf follows them

        # The user roles, bound directly.
        for role in ("view", "edit", "admin"):
            kubectl.run(
                "create", "rolebinding", f"jane-{role}", "-n", namespace,
                f"--clusterrole={release}-staticfleet-{role}", f"--user=jane-{role}",
            )  # fmt: skip
        scg = "staticconsumergroups.staticfleet.io"
        assert can_i(kubectl, "jane-view", "list", scg, namespace=namespace)
        assert can_i(kubectl, "jane-view", "get", scg, "scale", namespace=namespace)
        assert not can_i(kubectl, "jane-view", "patch", scg, "scale", namespace=namespace)
        assert not can_i(kubectl, "jane-view", "create", scg, namespace=namespace)
        assert can_i(kubectl, "jane-edit", "create", scg, namespace=namespace)
        assert can_i(kubectl, "jane-edit", "patch", scg, "scale", namespace=namespace)
        assert not can_i(kubectl, "jane-edit", "patch", scg, "status", namespace=namespace)
        assert not can_i(kubectl, "jane-edit", "list", scg, namespace=second_namespace)
        assert can_i(kubectl, "jane-admin", "patch", scg, "status", namespace=namespace)
        # And through aggregation: the built-in edit role picks up our rules (kube-controller-manager's
        # clusterrole-aggregation controller copies them in).
        kubectl.run(
            "create", "rolebinding", "jane-builtin-edit", "-n", namespace, "--clusterrole=edit",
            "--user=jane-builtin-edit",
        )  # fmt: skip
        wait_until(
            lambda: can_i(kubectl, "jane-builtin-edit", "patch", scg, "scale", namespace=namespace),
            timeout=60,
            what="the edit role to aggregate the StaticConsumerGroup rules",
        )
        assert not can_i(kubectl, "jane-builtin-edit", "patch", scg, "status", namespace=namespace)
    finally:
        installed.run("uninstall", release, "-n", namespace, "--wait", "--timeout=120s")
    for kind, name in cluster_scoped:
        assert kubectl.get_or_none(kind, name, "default") is None, f"{kind} {name} outlived the release"
    assert not can_i(kubectl, account, "patch", "staticconsumergroups.staticfleet.io", namespace=namespace)


def secret_data(kubectl: Kubectl, namespace: str, name: str) -> dict[str, str]:
    return dict(kubectl.get("secret", name, namespace)["data"])


def test_an_upgrade_keeps_the_logins_tokens_and_certificates_and_renews_certificates_near_their_end(
    cluster: Cluster, namespace: str, helm: Helm
) -> None:
    """What a secured install makes is looked up and kept by `helm upgrade`: the users' passwords, the
    tokens, the CA and the certificates; a certificate within renewBeforeDays of its end is made again
    by the same CA. (Pods are not waited for: this is about the Secrets.)"""
    kubectl = cluster.kubectl
    installed = Helm(helm.binary, cluster.kubeconfig)
    release = f"keep-{secrets.token_hex(3)}"
    values: dict[str, Any] = {"operator.replicas": 1, "coordinator.persistence.enabled": False}
    if cluster.local is not None:
        values |= {"bindAddress": "127.0.0.1", "coordinator.advertisedHost": "127.0.0.1"}
        values |= {k: free_port() for k in ("coordinator.ports.kafka", "coordinator.ports.http")}
        values |= {
            k: free_port() for k in ("operator.ports.metrics", "operator.ports.health", "dashboard.port")
        }
    full = f"{release}-staticfleet"
    made = [
        f"{full}-ca",
        f"{full}-coordinator-tls",
        f"{full}-dashboard-tls",
        f"{full}-coordinator-users",
        f"{full}-operator-kafka",
        f"{full}-kafka-admin",
        f"{full}-coordinator-http-token",
        f"{full}-dashboard-token",
    ]
    installed.run("install", release, str(CHART), "-n", namespace, *set_flags(values))
    try:
        first = {name: secret_data(kubectl, namespace, name) for name in made}
        installed.run("upgrade", release, str(CHART), "-n", namespace, "--reuse-values")
        assert {name: secret_data(kubectl, namespace, name) for name in made} == first

        # Renewal: every certificate is now within renewBeforeDays of its end; the CA is not.
        installed.run(
            "upgrade", release, str(CHART), "-n", namespace, "--reuse-values",
            *set_flags({"coordinator.security.certificates.renewBeforeDays": 400}),
        )  # fmt: skip
        renewed = {name: secret_data(kubectl, namespace, name) for name in made}
        for name in (f"{full}-coordinator-tls", f"{full}-dashboard-tls"):
            assert renewed[name]["tls.crt"] != first[name]["tls.crt"], name
            assert renewed[name]["ca.crt"] == first[name]["ca.crt"], "signed by the same CA"
        assert renewed[f"{full}-ca"] == first[f"{full}-ca"]
        unchanged = [n for n in made if not n.endswith("-tls")]
        assert {n: renewed[n] for n in unchanged} == {n: first[n] for n in unchanged}
    finally:
        installed.run("uninstall", release, "-n", namespace, "--wait", "--timeout=120s")
