"""Every command of the README, run as written (read from the README, so a changed line is run as it
now reads): `make kind-up`, `make demo` and `make demo-down`, the "Use a real Kafka cluster" install,
the CRD upgrade, and the "Use it without Helm" block with the coordinator and the operator as pods of
the project's image running the README's lines. The "Install with Helm" block is
test_readme_quick_start.py's. This file runs first of the kind tests (file order): the quick start's
release, installed after it, watches every namespace and must not meet these.
"""

from __future__ import annotations

import json
import re
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from e2e.helpers import Cluster, Kubectl, Manifest, wait_until
from e2e.localcluster import binaries

from .support import (
    HELM_SECTION,
    README,
    RELEASE,
    RELEASE_NAMESPACE,
    Shell,
    assert_demo_outcomes,
    readme_blocks,
    wait_explained,
)

pytestmark = pytest.mark.kind

# Where each README command is run: by a test of this file, by another test, or by the run itself.
RUN_HERE = {
    ("The demo", "make demo"),
    ("The demo", "make demo-down"),
    ("Use a real Kafka cluster", "helm install"),
    ("Run on kind", "make kind-up"),
    ("Use it without Helm", "kubectl apply -f crds/"),
    ("Use it without Helm", "staticfleet coordinator"),
    ("Use it without Helm", "staticfleet operator"),
    ("Use it without Helm", "KAFKA_BOOTSTRAP_SERVERS=coordinator:9092 python /app/producer.py"),
    ("Use it without Helm", "kubectl apply -f examples/tenancy.yaml"),
    ("Use it without Helm", "kubectl apply -f examples/embedded.yaml"),
    ("Use it without Helm", "kubectl scale scg/orders"),
    ("", "make demo"),  # the same command as in "The demo"
}
RUN_ELSEWHERE = {
    (HELM_SECTION, ""): "e2e/tests/kind/test_readme_quick_start.py and the `chart` fixture, line by line",
    ("Run on kind", "make kind-down"): "test_foreign_cluster.py runs it with KIND_CLUSTER naming a cluster "
    "it must leave alone; the cluster's own deletion is cluster.sh down at the end of `make kind-e2e`",
}
THIS_RUN = {
    ("", "make test"): "this suite is `make test`'s kind pass",
    ("Run the tests", "make test"): "this suite is `make test`'s kind pass",
    ("Run on kind", "make kind-e2e"): "this suite is `make kind-e2e`",
}
DEMO_RELEASE = DEMO_NAMESPACE = "staticfleet-demo"


def _command(section: str, starting: str) -> str:
    words = starting.split()  # word by word: `make demo` is not `make demo-down`
    found = [line for line in readme_blocks()[section] if line.split()[: len(words)] == words]
    assert len(found) == 1, f"README section {section!r}: {len(found)} commands start with {starting!r}"
    return found[0]


def _run(shell: Shell, line: str, *, env: dict[str, str] | None = None, timeout: float = 900) -> str:
    done = subprocess.run(
        ["bash", "-euo", "pipefail", "-c", line],
        cwd=README.parent,
        env=env or shell.env(),
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    assert done.returncode == 0, (
        f"README command failed ({done.returncode}): {line}\n{done.stdout[-4000:]}\n{done.stderr[-4000:]}"
    )
    return done.stdout + done.stderr


def test_every_readme_command_is_run_by_a_test() -> None:
    """A command added to the README fails this test until a test runs it."""
    covered = {key for key in RUN_HERE} | set(RUN_ELSEWHERE) | set(THIS_RUN)
    for section, commands in readme_blocks().items():
        for line in commands:
            keys = {(section, start) for s, start in covered if s == section and line.startswith(start)}
            assert keys, f"README section {section!r}: no test runs {line!r}"


def test_make_kind_up_finds_this_cluster_and_loads_the_images(cluster: Cluster, shell: Shell) -> None:
    output = _run(shell, _command("Run on kind", "make kind-up"))
    exported = re.search(r"export KUBECONFIG=(\S+)", output)
    assert exported is not None, output
    assert Path(exported.group(1)) == Path(cluster.kubeconfig)


def _helm_status(shell: Shell, release: str, namespace: str) -> int:
    done = subprocess.run(
        ["helm", "status", release, "--namespace", namespace],
        env=shell.env(),
        capture_output=True,
        check=False,
    )
    return done.returncode


def test_make_demo_then_make_demo_down_without_the_kubeconfig_stops_it_on_this_cluster(
    cluster: Cluster, shell: Shell
) -> None:
    """`make demo` with the kind cluster's KUBECONFIG exported (as it tells people), then `make demo-down`
    in a shell without it: the demo's state says where it ran, and that is where it stops."""
    assert _helm_status(shell, RELEASE, RELEASE_NAMESPACE) != 0, "the README's release must not run yet"
    state = binaries.cache_dir() / "demo" / "state.json"
    assert not state.exists(), f"a demo is running ({state}): `make demo-down` first"
    kubectl = cluster.kubectl
    results = state.parent / "results.json"
    results.unlink(missing_ok=True)
    try:
        output = _run(shell, _command("The demo", "make demo"), timeout=1800)
        assert "The demo keeps running" in output and "staticfleet against plain dynamic" in output, output
        assert_demo_outcomes(results, output, kubectl, DEMO_NAMESPACE)
        assert json.loads(state.read_text())["release"] == DEMO_RELEASE
        assert _helm_status(shell, DEMO_RELEASE, DEMO_NAMESPACE) == 0
        assert kubectl.get_or_none("ClusterRole", f"{DEMO_RELEASE}-operator", "default") is not None
        assert kubectl.items("staticconsumergroups", DEMO_NAMESPACE)
    finally:
        elsewhere = {k: v for k, v in shell.env().items() if k != "KUBECONFIG"}
        output = _run(shell, _command("The demo", "make demo-down"), env=elsewhere)
    assert f"release {DEMO_RELEASE}" in output
    assert not state.exists()
    assert _helm_status(shell, DEMO_RELEASE, DEMO_NAMESPACE) != 0
    assert kubectl.get_or_none("ClusterRole", f"{DEMO_RELEASE}-operator", "default") is None
    wait_until(lambda: not _namespace(kubectl, DEMO_NAMESPACE), timeout=300, what="the demo's namespace gone")


def _namespace(kubectl: Kubectl, name: str) -> bool:
    done = kubectl.run("get", "namespace", name, "--ignore-not-found", "-o", "name", check=False)
    return bool(done.stdout.strip())


@pytest.fixture
def payments(cluster: Cluster) -> Iterator[str]:
    """The namespace the README's line grants Secrets in: a user's namespace, there before the install."""
    cluster.kubectl.run("create", "namespace", "payments")
    yield "payments"
    cluster.kubectl.run("delete", "namespace", "payments", "--wait=false", check=False)


def test_the_real_kafka_install_line_installs_an_operator_for_that_cluster(
    cluster: Cluster, shell: Shell, payments: str
) -> None:
    kubectl = cluster.kubectl
    assert _helm_status(shell, RELEASE, RELEASE_NAMESPACE) != 0, "the README's release must not run yet"
    try:
        _run(shell, _command("Use a real Kafka cluster", "helm install"))
        operator = f"{RELEASE}-operator"

        def available() -> bool:
            status = kubectl.get("deployment", operator, RELEASE_NAMESPACE).get("status", {})
            return int(status.get("readyReplicas") or 0) == 2  # the readiness probe passed on both

        wait_explained(
            kubectl, [RELEASE_NAMESPACE], available, timeout=240, what="both operator replicas ready"
        )
        deployment = kubectl.get("deployment", operator, RELEASE_NAMESPACE)
        args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
        assert "--default-bootstrap-servers=kafka-0.kafka:9093,kafka-1.kafka:9093" in args
        assert not [a for a in args if a.startswith("--default-coordinator-api")]
        assert kubectl.get_or_none("statefulset", f"{RELEASE}-coordinator", RELEASE_NAMESPACE) is None
        assert kubectl.get_or_none("rolebinding", f"{RELEASE}-operator-secrets", payments) is not None
    finally:
        _run(shell, f"helm uninstall {RELEASE} --namespace {RELEASE_NAMESPACE} --wait --timeout=180s")
        kubectl.run("delete", "namespace", RELEASE_NAMESPACE, "--wait=false", check=False)
    # The quick start installs the same release into the same namespace later in this session.
    wait_until(lambda: not _namespace(kubectl, RELEASE_NAMESPACE), timeout=300, what="its namespace gone")


# -- "Use it without Helm" ---------------------------------------------------------------------------------

WITHOUT_HELM = "Use it without Helm"
NAMESPACE = "default"  # the README's kubectl lines name none
OPERATOR_ACCOUNT = "readme-operator"


def _pod(name: str, line: str, image: str, **spec: Any) -> Manifest:
    """A pod of the project's image running one README line as it reads. Its shell, the container's first
    process, ignores SIGTERM, and the pod keeps nothing: it is killed 2 s after its deletion rather than
    after the default grace period of 30 s."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": name}},
        "spec": {
            "terminationGracePeriodSeconds": 2,
            "containers": [
                {"name": name, "image": image, "command": ["sh", "-c", line], **spec.pop("container", {})}
            ],
            **spec,
        },
    }


def _operator_rights() -> list[Manifest]:
    """The README's operator runs with a ServiceAccount allowed everything (a test's shortcut: the
    chart's least-privilege roles are tested in e2e/tests/chart)."""
    return [
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": OPERATOR_ACCOUNT}},
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": OPERATOR_ACCOUNT},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "cluster-admin",
            },
            "subjects": [{"kind": "ServiceAccount", "name": OPERATOR_ACCOUNT, "namespace": NAMESPACE}],
        },
    ]


def _fleet(kubectl: Kubectl) -> Manifest | None:
    return kubectl.get_or_none("scg", "orders", NAMESPACE)


def _ready_with(kubectl: Kubectl, replicas: int) -> Manifest | None:
    body = _fleet(kubectl)
    status = (body or {}).get("status") or {}
    ready = any(c["type"] == "Ready" and c["status"] == "True" for c in status.get("conditions") or [])
    members = (status.get("group") or {}).get("members")
    return body if ready and members == replicas and status.get("readyReplicas") == replicas else None


@pytest.fixture
def without_helm(cluster: Cluster, image: str) -> Iterator[None]:
    kubectl = cluster.kubectl
    yield
    kubectl.run(
        "delete", "scg", "orders", "-n", NAMESPACE, "--ignore-not-found", "--timeout=180s", check=False
    )
    kubectl.run(
        "delete", "pod", "coordinator", "operator", "producer", "-n", NAMESPACE, "--ignore-not-found",
        "--wait=true", "--timeout=120s", check=False,
    )  # fmt: skip
    kubectl.run(
        "delete", "service", "coordinator", "-n", NAMESPACE, "--ignore-not-found",
        "--wait=true", "--timeout=120s", check=False,
    )  # fmt: skip
    kubectl.run("delete", "clusterrolebinding", OPERATOR_ACCOUNT, "--ignore-not-found", check=False)
    policy = README.parent / "examples" / "tenancy.yaml"
    kubectl.run("delete", "-f", str(policy), "--ignore-not-found", check=False)
    kubectl.run(
        "delete", "serviceaccount", OPERATOR_ACCOUNT, "-n", NAMESPACE, "--ignore-not-found", check=False
    )
    kubectl.run("delete", "pvc", "-n", NAMESPACE, "-l", "staticfleet.io/group=orders", check=False)
    for claim in kubectl.items("pvc", NAMESPACE):
        if claim["metadata"]["name"].startswith("state-orders-"):
            kubectl.run("delete", "pvc", claim["metadata"]["name"], "-n", NAMESPACE, check=False)


def test_the_crd_and_its_upgrade_command_apply_as_written(cluster: Cluster, shell: Shell) -> None:
    """`kubectl apply -f crds/` on a CRD Helm created (the demo's install did), then the upgrade command
    of the README's "Install with Helm" prose, which takes the fields over from Helm's field manager."""
    _run(shell, _command(WITHOUT_HELM, "kubectl apply -f crds/"))
    upgrade = re.search(r"`(kubectl apply --server-side[^`]*-f crds/)`", README.read_text())
    assert upgrade is not None, "the README names no CRD upgrade command"
    _run(shell, upgrade.group(1))
    crd = cluster.kubectl.json("get", "crd", "staticconsumergroups.staticfleet.io", "--show-managed-fields")
    appliers = {m["manager"] for m in crd["metadata"]["managedFields"] if m["operation"] == "Apply"}
    assert "kubectl" in appliers


def test_the_block_without_helm_runs_a_fleet_and_scales_it_with_one_rebalance(
    cluster: Cluster, shell: Shell, image: str, without_helm: None
) -> None:
    kubectl = cluster.kubectl
    assert _helm_status(shell, RELEASE, RELEASE_NAMESPACE) != 0, "no other operator may watch this fleet"
    _run(shell, _command(WITHOUT_HELM, "kubectl apply -f crds/"))
    coordinator = _pod(
        "coordinator",
        _command(WITHOUT_HELM, "staticfleet coordinator"),
        image,
        container={"volumeMounts": [{"name": "data", "mountPath": "/data"}]},
        volumes=[{"name": "data", "emptyDir": {}}],
    )
    service: Manifest = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "coordinator"},
        "spec": {
            "selector": {"app": "coordinator"},
            "ports": [{"name": "kafka", "port": 9092}, {"name": "http", "port": 8080}],
        },
    }
    operator = _pod(
        "operator", _command(WITHOUT_HELM, "staticfleet operator"), image, serviceAccountName=OPERATOR_ACCOUNT
    )
    producer = _pod("producer", _command(WITHOUT_HELM, "KAFKA_BOOTSTRAP_SERVERS=coordinator:9092"), image)
    kubectl.apply([*_operator_rights(), coordinator, service, operator, producer], NAMESPACE)
    for pod in ("coordinator", "operator", "producer"):
        wait_explained(
            kubectl,
            [NAMESPACE],
            lambda pod=pod: kubectl.get("pod", pod, NAMESPACE).get("status", {}).get("phase") == "Running",  # type: ignore[misc]
            timeout=120,
            what=f"the README's {pod} running",
        )

    _run(shell, _command(WITHOUT_HELM, "kubectl apply -f examples/tenancy.yaml"))
    _run(shell, _command(WITHOUT_HELM, "kubectl apply -f examples/embedded.yaml"))
    body = wait_explained(kubectl, [NAMESPACE], lambda: _ready_with(kubectl, 3), timeout=300, what="3 Ready")
    before = int(body["status"]["group"]["rebalances"])
    assert body["status"]["bootstrapServers"] == "coordinator:9092"

    _run(shell, _command(WITHOUT_HELM, "kubectl scale scg/orders"))
    after = wait_explained(kubectl, [NAMESPACE], lambda: _ready_with(kubectl, 1), timeout=180, what="1 Ready")
    assert int(after["status"]["group"]["rebalances"]) == before + 1, (
        f"scaling 3 -> 1 is one rebalance: {json.dumps(after['status']['group'])}"
    )
    assert [m["instanceId"] for m in after["status"]["members"]] == ["orders-0"]
