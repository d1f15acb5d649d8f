"""Fixtures of the kind tests: the chart installed by the README's own commands, once per session; Apache
Kafka beside it for the tests that run on both coordinators."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import yaml

from conformance.kafka_jars import kafka_version
from e2e.helm import ensure_helm
from e2e.helpers import Cluster, pod_report, wait_until

from .streams import KAFKA_BOOTSTRAP, KAFKA_NAMESPACE, KAFKA_POD, kafka_log
from .support import RELEASE, RELEASE_NAMESPACE, REPO_ROOT, Shell, install_lines, wait_explained


@pytest.fixture(scope="session")
def shell(cluster: Cluster, pytestconfig: pytest.Config) -> Shell:
    capture = pytestconfig.pluginmanager.getplugin("capturemanager")
    with capture.global_and_fixture_disabled():
        helm = ensure_helm()
    return Shell(cluster.kubeconfig, helm, cluster.kubectl.binary)  # type: ignore[arg-type]


@pytest.fixture(scope="session")
def chart(cluster: Cluster, shell: Shell) -> Iterator[None]:
    """The README's images, `make kind-load` and `helm install`, run as written; the operator and the
    coordinator Ready. Uninstalled at the end of the session."""
    kubectl = cluster.kubectl
    for line in install_lines():
        try:
            shell.run(line)
        except AssertionError as failure:  # `helm install --wait` gave up: say what the pods did
            raise AssertionError(f"{failure}\n{pod_report(kubectl, [RELEASE_NAMESPACE])}") from None
    try:

        def ready(kind: str, name: str) -> bool:
            status = kubectl.get(kind, name, RELEASE_NAMESPACE).get("status", {})
            return int(status.get("readyReplicas") or 0) >= 1

        for kind, name in (("deployment", f"{RELEASE}-operator"), ("statefulset", f"{RELEASE}-coordinator")):
            wait_explained(
                kubectl,
                [RELEASE_NAMESPACE],
                lambda kind=kind, name=name: ready(kind, name),  # type: ignore[misc]
                timeout=180,
                what=f"{kind} {name} to be ready",
            )
        yield
    finally:
        shell.run(f"helm uninstall {RELEASE} --namespace {RELEASE_NAMESPACE} --wait --timeout=120s")
        kubectl.run("delete", "namespace", RELEASE_NAMESPACE, "--wait=false", check=False)
        wait_until(
            lambda: not kubectl.items("pods", RELEASE_NAMESPACE),
            timeout=120,
            what=f"the pods of {RELEASE_NAMESPACE} to be gone",
        )


@pytest.fixture(scope="module")
def kafka_on_kind(cluster: Cluster, chart: None, shell: Shell) -> Iterator[str]:
    """Apache Kafka (e2e/kind/kafka/kafka.yaml, the version the conformance suite pins) in a namespace of
    its own, and the release switched to it as the README's "Use a real Kafka cluster" installs it
    (`coordinator.enabled=false`, `externalKafka.bootstrapServers`; the operator's pods roll). Returns the
    bootstrap address. At the end of the module the release gets its embedded coordinator back (its data
    on its volume, users and ACLs included) and Kafka is deleted."""
    kubectl = cluster.kubectl
    manifests = list(yaml.safe_load_all((REPO_ROOT / "e2e" / "kind" / "kafka" / "kafka.yaml").read_text()))
    for body in manifests:
        for container in body.get("spec", {}).get("template", {}).get("spec", {}).get("containers", []):
            container["image"] = f"staticfleet-kafka:{kafka_version()}"  # as `make images` tags it
    kubectl.run("create", "namespace", KAFKA_NAMESPACE)
    upgrade = (
        f"helm upgrade {RELEASE} charts/staticfleet --namespace {RELEASE_NAMESPACE} --reuse-values"
        " --wait --timeout=300s"
    )
    try:
        kubectl.apply(manifests, KAFKA_NAMESPACE)
        wait_explained(
            kubectl,
            [KAFKA_NAMESPACE],
            lambda: "Kafka Server started" in kafka_log(kubectl),
            timeout=180,
            interval=2,
            what=f"Apache Kafka ({KAFKA_POD}) to serve",
        )
        shell.run(
            f"{upgrade} --set coordinator.enabled=false"
            f" --set externalKafka.bootstrapServers={KAFKA_BOOTSTRAP}"
        )
        yield KAFKA_BOOTSTRAP
    finally:
        shell.run(f"{upgrade} --set coordinator.enabled=true --set externalKafka.bootstrapServers=")
        kubectl.run("delete", "namespace", KAFKA_NAMESPACE, "--wait=false", check=False)
