"""What the operator refuses to act on: targets above --max-replicas, and clusters or coordinator APIs
outside the hosts it was told to trust (no request leaves the operator for them)."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from e2e.helpers import Cluster, Manifest

from .harness import (
    Coordinator,
    OperatorRunner,
    condition,
    events,
    fleet_manifest,
    get_fleet,
    ready_with,
    wait_fleet,
)

pytestmark = pytest.mark.localcluster

# Loopback, but not among the hosts the test operator allows (127.0.0.1 and localhost).
UNTRUSTED = "127.0.0.2"


class CountingListener:
    """A TCP listener that accepts and counts connections (and closes them)."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind((UNTRUSTED, 0))
        self.sock.listen(16)
        self.sock.settimeout(0.2)
        self.port = int(self.sock.getsockname()[1])
        self.connections = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._accept, daemon=True)
        self._thread.start()

    def _accept(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.connections += 1
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self._thread.join(timeout=5)
        self.sock.close()


@pytest.fixture
def listeners() -> Iterator[tuple[CountingListener, CountingListener]]:
    kafka, api = CountingListener(), CountingListener()
    try:
        yield kafka, api
    finally:
        kafka.close()
        api.close()


def degraded_with(reason: str) -> Callable[[Manifest], bool]:
    return lambda body: condition(body, "Degraded").get("reason") == reason


def rss_kib(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1])
    raise AssertionError(f"no VmRSS for {pid}")


def test_a_target_above_the_limit_is_refused_with_a_condition_and_the_fleet_kept(
    cluster: Cluster, namespace: str, coordinator: Coordinator, operator: OperatorRunner
) -> None:
    kubectl = cluster.kubectl
    topic = f"{namespace}-orders"
    coordinator.create_topic(topic)
    operator.start()
    kubectl.apply(fleet_manifest("orders", 2, coordinator, topic), namespace)
    wait_fleet(kubectl, namespace, "orders", ready_with(2), timeout=120, what="Ready with 2")

    # Beyond the CRD's maximum the API server itself refuses, and says why.
    done = kubectl.run("scale", "scg/orders", "-n", namespace, "--replicas=10000000", check=False)
    assert done.returncode != 0 and "10000" in done.stderr, done.stderr

    # Within the CRD, beyond the operator's --max-replicas (1000): a condition, nothing built.
    assert operator.process is not None
    before = rss_kib(operator.process.pid)
    kubectl.run("scale", "scg/orders", "-n", namespace, "--replicas=5000")
    body = wait_fleet(
        kubectl,
        namespace,
        "orders",
        degraded_with("ReplicasAboveLimit"),
        timeout=60,
        what="ReplicasAboveLimit",
    )
    message = condition(body, "Degraded")["message"]
    assert "replicas 5000" in message and "limit of 1000" in message
    time.sleep(3)  # a few more passes
    assert operator.process.poll() is None, "the operator stays up"
    assert rss_kib(operator.process.pid) - before < 50 * 1024, "no memory grows with the target"
    assert kubectl.get("statefulset", "orders", namespace)["spec"]["replicas"] == 2
    assert [e["reason"] for e in events(kubectl, namespace, "orders", "ReplicasAboveLimit")] == [
        "ReplicasAboveLimit"
    ]

    kubectl.run("scale", "scg/orders", "-n", namespace, "--replicas=2")
    wait_fleet(kubectl, namespace, "orders", ready_with(2), timeout=60, what="Ready again with 2")


def test_a_cluster_or_api_outside_the_allowed_hosts_gets_no_request(
    cluster: Cluster,
    namespace: str,
    coordinator: Coordinator,
    operator: OperatorRunner,
    listeners: tuple[CountingListener, CountingListener],
) -> None:
    kubectl = cluster.kubectl
    kafka, api = listeners
    operator.start()
    elsewhere = fleet_manifest("elsewhere", 1, f"{UNTRUSTED}:{kafka.port}", "orders")
    probing = fleet_manifest("probing", 1, coordinator, "orders")
    probing["spec"]["kafka"]["coordinatorApi"] = f"http://{UNTRUSTED}:{api.port}"
    kubectl.apply([elsewhere, probing], namespace)

    for name, reason, where in (
        ("elsewhere", "ClusterNotAllowed", f"{UNTRUSTED}:{kafka.port}"),
        ("probing", "CoordinatorApiNotAllowed", f"http://{UNTRUSTED}:{api.port}"),
    ):
        body = wait_fleet(
            kubectl,
            namespace,
            name,
            degraded_with(reason),
            timeout=60,
            what=reason,
        )
        message = condition(body, "Degraded")["message"]
        assert where in message and "no request was sent" in message, message
        assert kubectl.get_or_none("statefulset", name, namespace) is None
    time.sleep(3)  # a few more passes of each
    assert (kafka.connections, api.connections) == (0, 0)
    assert get_fleet(kubectl, namespace, "probing")["status"].get("group") is None
