"""Fixtures for the operator's e2e tests on the local cluster: the CRD, the embedded coordinator as a
local process on 127.0.0.1 (one per session; every test has its own group), and an operator watching the
test's namespace (started by the test, so a test can restart it or start it with a crash point)."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

from e2e.helpers import Cluster, wait_until

from .harness import CRD_DIR, Coordinator, OperatorRunner, start_coordinator, stop_coordinator

# How many times each fault scenario runs (tests that take `chaos_round`). CI runs each once; the
# figures in docs/reliability.md come from STATICFLEET_CHAOS_ROUNDS=10.
CHAOS_ROUNDS_ENV = "STATICFLEET_CHAOS_ROUNDS"


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    if "chaos_round" in metafunc.fixturenames:
        rounds = int(os.environ.get(CHAOS_ROUNDS_ENV, "1"))
        metafunc.parametrize("chaos_round", range(1, rounds + 1), ids=lambda n: f"round{n}")


@pytest.fixture(scope="session")
def crd(cluster: Cluster) -> None:
    cluster.kubectl.run("apply", "-f", str(CRD_DIR))
    cluster.kubectl.wait_established(
        "staticconsumergroups.staticfleet.io", "staticfleettenancypolicies.staticfleet.io"
    )


@pytest.fixture(scope="session")
def coordinator(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Coordinator]:
    running = start_coordinator(tmp_path_factory.mktemp("coordinator"))
    try:
        yield running
    finally:
        stop_coordinator(running)


@pytest.fixture
def operator(cluster: Cluster, namespace: str, crd: None, tmp_path: Path) -> Iterator[OperatorRunner]:
    """An operator for this test's namespace. At teardown the fleets are deleted while an operator still
    runs, so that their finalizers are honoured."""
    runner = OperatorRunner(cluster.kubeconfig, namespace, tmp_path)
    try:
        yield runner
    finally:
        if runner.process is None or runner.process.poll() is not None:
            runner.start()
        cluster.kubectl.run(
            "delete", "staticconsumergroups", "--all", "-n", namespace, "--wait=false", check=False
        )
        try:
            wait_until(
                lambda: not cluster.kubectl.items("staticconsumergroups", namespace),
                timeout=90,
                what="the fleets to be deleted",
            )
        finally:
            runner.stop()
