"""Checks that hold on any cluster (local or kind): they look only through the Kubernetes API."""

from __future__ import annotations

from e2e.helpers import Kubectl, wait_until
from e2e.tests.workloads import SERVER, container, statefulset


def _replicas(kubectl: Kubectl, namespace: str, name: str) -> tuple[int, int, list[str]]:
    sts = kubectl.get("statefulset", name, namespace)
    pods = sorted(p["metadata"]["name"] for p in kubectl.items("pods", namespace, "-l", f"app={name}"))
    return sts.get("status", {}).get("readyReplicas", 0), sts["spec"]["replicas"], pods


def test_statefulset_scales_up_and_down_through_the_api(kubectl: Kubectl, namespace: str, image: str) -> None:
    # SERVER writes into its working directory: an emptyDir, since the image's own /app is read-only to
    # its user on a real kubelet (the local runner maps the mount to a directory of the pod).
    app = container(
        SERVER,
        image=image,
        workingDir="/scratch",
        volumeMounts=[{"name": "scratch", "mountPath": "/scratch"}],
    )
    workload = statefulset("portable", 2, app)
    workload["spec"]["template"]["spec"]["volumes"] = [{"name": "scratch", "emptyDir": {}}]
    kubectl.apply(workload, namespace)
    wait_until(
        lambda: _replicas(kubectl, namespace, "portable") == (2, 2, ["portable-0", "portable-1"]),
        timeout=180,
        what="2 ready replicas",
    )
    server_version = kubectl.json("version")["serverVersion"]
    assert server_version["major"] == "1" and server_version["gitVersion"].startswith("v1.")

    kubectl.run("scale", "statefulset", "portable", "--replicas=1", "-n", namespace)

    wait_until(
        lambda: _replicas(kubectl, namespace, "portable") == (1, 1, ["portable-0"]),
        timeout=120,
        what="1 ready replica",
    )
