"""A StatefulSet on the real control plane, its pods run by the local pod runner."""

from __future__ import annotations

from pathlib import Path

import pytest

from e2e.helpers import Cluster, Kubectl, Manifest, wait_until
from e2e.tests.workloads import (
    SERVER,
    claim_template,
    condition,
    container,
    process_alive,
    sigterm_received,
    starts,
    statefulset,
)

pytestmark = pytest.mark.localcluster


def _ready_statefulset(kubectl: Kubectl, namespace: str, name: str, replicas: int) -> Manifest:
    def settled() -> Manifest | None:
        sts = kubectl.get("statefulset", name, namespace)
        status = sts.get("status", {})
        done = (
            status.get("readyReplicas", 0) == replicas
            and status.get("updatedReplicas", 0) == replicas
            and status.get("currentRevision") == status.get("updateRevision")
            and status.get("observedGeneration") == sts["metadata"]["generation"]
        )
        return sts if done else None

    return wait_until(settled, timeout=90, what=f"statefulset {name} to have {replicas} ready replicas")


def _pods(kubectl: Kubectl, namespace: str, name: str) -> dict[str, Manifest]:
    return {p["metadata"]["name"]: p for p in kubectl.items("pods", namespace, "-l", f"app={name}")}


def _only_pid(cluster: Cluster, namespace: str, pod: str) -> int:
    started = wait_until(lambda: starts(cluster.pod_dir(namespace, pod)), timeout=10, what=f"{pod} to start")
    assert len(started) == 1, f"{pod} started {len(started)} processes"
    return next(iter(started))


def _starts_after(directory: Path, old_pid: int) -> dict[int, dict[str, str]]:
    """The pod's starts once a process other than `old_pid` has recorded itself: Ready comes with the
    process's start (no probe), a moment before the process writes its record."""

    def recorded() -> dict[int, dict[str, str]] | None:
        found = starts(directory)
        return found if set(found) - {old_pid} else None

    return wait_until(recorded, timeout=10, what=f"a new process in {directory.name} to record its start")


def test_parallel_statefulset_pods_run_and_become_ready(cluster: Cluster, namespace: str) -> None:
    kubectl = cluster.kubectl
    kubectl.apply(statefulset("web", 3, container(SERVER)), namespace)

    sts = _ready_statefulset(kubectl, namespace, "web", 3)

    assert sts["status"]["availableReplicas"] == 3
    pods = _pods(kubectl, namespace, "web")
    assert sorted(pods) == ["web-0", "web-1", "web-2"]
    for name, pod in pods.items():
        assert pod["status"]["phase"] == "Running"
        assert condition(pod, "Ready") == "True"
        assert pod["spec"]["nodeName"] == "staticfleet-node"
        assert pod["status"]["podIP"] == "127.0.0.1"
        (status,) = pod["status"]["containerStatuses"]
        assert status["ready"] is True and "running" in status["state"]
        pid = _only_pid(cluster, namespace, name)
        assert process_alive(pid)
        assert status["containerID"].endswith(f"/{pid}")
        env = starts(cluster.pod_dir(namespace, name))[pid]
        assert env["HOSTNAME"] == name


def test_scale_down_deletes_highest_ordinals_and_sends_sigterm(cluster: Cluster, namespace: str) -> None:
    kubectl = cluster.kubectl
    kubectl.apply(statefulset("scale", 3, container(SERVER)), namespace)
    _ready_statefulset(kubectl, namespace, "scale", 3)
    before = _pods(kubectl, namespace, "scale")
    pids = {name: _only_pid(cluster, namespace, name) for name in before}

    kubectl.run("scale", "statefulset", "scale", "--replicas=1", "-n", namespace)

    wait_until(
        lambda: sorted(_pods(kubectl, namespace, "scale")) == ["scale-0"],
        timeout=60,
        what="scale-1 and scale-2 to be deleted",
    )
    _ready_statefulset(kubectl, namespace, "scale", 1)
    for gone in ("scale-1", "scale-2"):
        directory = cluster.pod_dir(namespace, gone)
        assert sigterm_received(directory, pids[gone]), f"{gone} was not sent SIGTERM"
        assert not process_alive(pids[gone])
    survivor = _pods(kubectl, namespace, "scale")["scale-0"]
    assert survivor["metadata"]["uid"] == before["scale-0"]["metadata"]["uid"]
    assert process_alive(pids["scale-0"])
    assert not sigterm_received(cluster.pod_dir(namespace, "scale-0"), pids["scale-0"])


def test_rolling_update_replaces_every_pod_and_process(cluster: Cluster, namespace: str) -> None:
    kubectl = cluster.kubectl
    kubectl.apply(
        statefulset("roll", 3, container(SERVER, env=[{"name": "VERSION", "value": "1"}])), namespace
    )
    _ready_statefulset(kubectl, namespace, "roll", 3)
    old_uids = {name: pod["metadata"]["uid"] for name, pod in _pods(kubectl, namespace, "roll").items()}
    old_pids = {name: _only_pid(cluster, namespace, name) for name in old_uids}

    kubectl.run("set", "env", "statefulset/roll", "VERSION=2", "-n", namespace)

    _ready_statefulset(kubectl, namespace, "roll", 3)
    new_pods = _pods(kubectl, namespace, "roll")
    assert sorted(new_pods) == sorted(old_uids)
    for name, pod in new_pods.items():
        assert pod["metadata"]["uid"] != old_uids[name], f"{name} was not re-created"
        directory = cluster.pod_dir(namespace, name)
        assert sigterm_received(directory, old_pids[name])
        assert not process_alive(old_pids[name])
        started = _starts_after(directory, old_pids[name])
        (new_pid,) = [pid for pid in started if pid != old_pids[name]]
        assert started[new_pid]["VERSION"] == "2"
        assert process_alive(new_pid)


def test_claim_data_survives_pod_recreation(cluster: Cluster, namespace: str) -> None:
    kubectl = cluster.kubectl
    app = container(
        SERVER,
        env=[{"name": "DATA_DIR", "value": "/var/lib/app"}],
        volumeMounts=[{"name": "data", "mountPath": "/var/lib/app"}],
    )
    kubectl.apply(statefulset("store", 1, app, claims=[claim_template("data")]), namespace)
    _ready_statefulset(kubectl, namespace, "store", 1)
    claim = kubectl.get("pvc", "data-store-0", namespace)
    assert claim["status"]["phase"] == "Bound"
    volume = cluster.claim_dir(namespace, "data-store-0")
    assert (volume / "starts").read_text() == "1"
    first_uid = kubectl.get("pod", "store-0", namespace)["metadata"]["uid"]

    kubectl.run("delete", "pod", "store-0", "-n", namespace)

    def recreated() -> Manifest | None:
        pod = kubectl.get_or_none("pod", "store-0", namespace)
        fresh = pod is not None and pod["metadata"]["uid"] != first_uid and condition(pod, "Ready") == "True"
        return pod if fresh else None

    wait_until(recreated, timeout=60, what="store-0 to be re-created and Ready")
    wait_until(lambda: (volume / "starts").read_text() == "2", timeout=10, what="the second start to count")
    assert kubectl.get("pvc", "data-store-0", namespace)["metadata"]["uid"] == claim["metadata"]["uid"]
