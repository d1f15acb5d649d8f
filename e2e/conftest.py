"""Session fixtures for the e2e suite.

By default the suite runs against a local control plane (etcd, kube-apiserver,
kube-controller-manager built by e2e/cluster/build.sh, cached) and the local pod runner.
With E2E_KUBECONFIG set it uses that cluster instead (kind, or any other) and starts neither;
tests marked `localcluster` (they read pod files on this host) are then deselected.

E2E_CLUSTER=kind (set by `make kind-e2e`, with E2E_KUBECONFIG naming the kind cluster) selects the
tests marked `kind` too: the chart installed as the README says, fleets run by a real kubelet from the
project's images. Elsewhere those are deselected: `make test` runs them in its kind pass, with the other
tests that use a cluster; those that do not (renders, parsers, reports) run in the local pass only.
"""

from __future__ import annotations

import os
import re
import secrets
import shutil
import signal
from collections.abc import Iterator
from pathlib import Path

import pytest

from e2e.helpers import Cluster, Kubectl, wait_until
from e2e.localcluster import binaries, procs
from e2e.localcluster.controlplane import LocalCluster
from e2e.localcluster.podrunner import DEFAULT_NODE_NAME, RUNNER_MARKER, runner_command

REPO_ROOT = Path(__file__).resolve().parent.parent
EXTERNAL_KUBECONFIG = os.environ.get("E2E_KUBECONFIG", "")
ON_KIND = os.environ.get("E2E_CLUSTER", "") == "kind"


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", "localcluster: reads pod files on this host (local pod runner only)")
    config.addinivalue_line("markers", "kind: runs on a kind cluster only (E2E_CLUSTER=kind, make kind-e2e)")
    if ON_KIND and not EXTERNAL_KUBECONFIG:
        raise pytest.UsageError("E2E_CLUSTER=kind needs E2E_KUBECONFIG (make kind-e2e sets both)")


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    def deselect(which: list[pytest.Item]) -> None:
        if which:
            config.hook.pytest_deselected(items=which)
            items[:] = [item for item in items if item not in which]

    if not ON_KIND:
        deselect([item for item in items if item.get_closest_marker("kind")])
    if EXTERNAL_KUBECONFIG:
        deselect([item for item in items if item.get_closest_marker("localcluster")])
    if ON_KIND:
        # The kind pass runs what needs a cluster; the rest (renders, parsers, reports) ran in the local
        # pass already and would only run again.
        deselect(
            [
                i
                for i in items
                if not i.get_closest_marker("kind") and "cluster" not in getattr(i, "fixturenames", ())
            ]
        )


def _external_kubectl() -> Kubectl:
    chosen = os.environ.get("E2E_KUBECTL") or shutil.which("kubectl")
    if not chosen:
        raise RuntimeError("E2E_KUBECONFIG is set but no kubectl found (set E2E_KUBECTL)")
    return Kubectl(chosen, Path(EXTERNAL_KUBECONFIG))


@pytest.fixture(scope="session")
def cluster(pytestconfig: pytest.Config, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Cluster]:
    if EXTERNAL_KUBECONFIG:
        yield Cluster(Path(EXTERNAL_KUBECONFIG), _external_kubectl(), None)
        return
    capture = pytestconfig.pluginmanager.getplugin("capturemanager")
    with capture.global_and_fixture_disabled():  # let a first build show its progress
        bin_dir = binaries.ensure_binaries()
    local = LocalCluster(bin_dir, tmp_path_factory.mktemp("localcluster"))
    local.start()
    try:
        yield Cluster(local.kubeconfig_path, Kubectl(bin_dir / "kubectl", local.kubeconfig_path), local)
    finally:
        local.stop()


@pytest.fixture(scope="session")
def pod_runner(cluster: Cluster) -> Iterator[str | None]:
    """The node name pods run on (the local runner's node), or None on an external cluster."""
    if cluster.local is None:
        yield None
        return
    run_dir = cluster.local.run_dir
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH", "")]))
    argv = [
        *runner_command(cluster.kubeconfig, run_dir, DEFAULT_NODE_NAME),
        f"--api-host=127.0.0.1:{cluster.local.api_port}",
    ]
    with (cluster.local.logs_dir / "podrunner.log").open("ab") as log_file:
        # SIGTERM on our death: the runner then stops the pod processes it started.
        process = procs.spawn(argv, log=log_file, env=env, cwd=REPO_ROOT, parent_death_signal=signal.SIGTERM)
    try:
        wait_until(
            lambda: process.poll() is not None or _node_ready(cluster.kubectl, DEFAULT_NODE_NAME),
            timeout=30,
            what="the pod runner's node to be Ready",
        )
        if process.poll() is not None:
            raise RuntimeError(f"pod runner exited with {process.returncode}; see {cluster.local.logs_dir}")
        yield DEFAULT_NODE_NAME
    finally:
        procs.stop(process, grace_seconds=30)
        procs.sweep(RUNNER_MARKER, str(run_dir))


def _node_ready(kubectl: Kubectl, name: str) -> bool:
    node = kubectl.get_or_none("node", name, "default")
    conditions = (node or {}).get("status", {}).get("conditions", [])
    return any(c["type"] == "Ready" and c["status"] == "True" for c in conditions)


@pytest.fixture
def namespace(cluster: Cluster, pod_runner: str | None, request: pytest.FixtureRequest) -> Iterator[str]:
    """A fresh namespace for one test, deleted afterwards.

    Teardown waits until the namespace has no pods left (so no process of this test outlives it),
    not for the namespace object itself, whose finalization takes the namespace controller a few
    more seconds.
    """
    slug = re.sub(r"[^a-z0-9]+", "-", request.node.name.lower()).strip("-")[:40].strip("-")
    name = f"{slug}-{secrets.token_hex(3)}"
    cluster.kubectl.run("create", "namespace", name)
    try:
        yield name
    finally:
        cluster.kubectl.run("delete", "namespace", name, "--wait=false")
        wait_until(
            lambda: not cluster.kubectl.items("pods", name),
            timeout=120,
            what=f"the pods of namespace {name} to be gone",
        )


@pytest.fixture
def kubectl(cluster: Cluster) -> Kubectl:
    return cluster.kubectl


@pytest.fixture(scope="session")
def image() -> str:
    """The project image for pod specs: built and loaded into kind by `make kind-up`; ignored by the
    local runner."""
    return os.environ.get("E2E_IMAGE", "staticfleet:0.1.0")
