"""Fixtures of the kind tests: the chart installed by the README's own commands, once per session."""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from e2e.helm import ensure_helm
from e2e.helpers import Cluster, pod_report, wait_until

from .support import RELEASE, RELEASE_NAMESPACE, Shell, install_lines, wait_explained


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
