"""Pods reach the API server as their ServiceAccount: the runner fills the admission plugin's
kube-api-access volume with a pod-bound token and hands the process a kubeconfig in KUBECONFIG."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from e2e.helpers import Cluster, wait_until
from e2e.tests.workloads import container

pytestmark = pytest.mark.localcluster

# Lists pods (granted), lists secrets (not granted) and asks who it is, with the kubeconfig it was given.
CLIENT = r"""
import json, os, time
from pathlib import Path
result = {"kubeconfig": os.environ.get("KUBECONFIG")}
if result["kubeconfig"]:
    from kubernetes import client, config
    from kubernetes.client.exceptions import ApiException
    config.load_kube_config()
    core = client.CoreV1Api()
    result["pods"] = sorted(p.metadata.name for p in core.list_namespaced_pod(os.environ["NS"]).items)
    try:
        core.list_namespaced_secret(os.environ["NS"])
        result["secrets"] = "listed"
    except ApiException as error:
        result["secrets"] = error.status
    review = client.AuthenticationV1Api().create_self_subject_review(client.V1SelfSubjectReview())
    result["user"] = review.status.user_info.username
Path("result.json").write_text(json.dumps(result))
while True:
    time.sleep(1)
"""


def pod(name: str, **spec: Any) -> dict[str, Any]:
    app = container(
        CLIENT, env=[{"name": "NS", "valueFrom": {"fieldRef": {"fieldPath": "metadata.namespace"}}}]
    )
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {"terminationGracePeriodSeconds": 1, "containers": [app], **spec},
    }


def result(cluster: Cluster, namespace: str, name: str) -> dict[str, Any]:
    path = cluster.pod_dir(namespace, name) / "result.json"
    wait_until(path.exists, timeout=60, what=f"{name} to report")
    found: dict[str, Any] = json.loads(path.read_text())
    return found


def test_a_pod_calls_the_api_server_with_its_own_service_account(cluster: Cluster, namespace: str) -> None:
    kubectl = cluster.kubectl
    kubectl.run("create", "serviceaccount", "reader", "-n", namespace)
    kubectl.run("create", "role", "pod-reader", "--verb=list", "--resource=pods", "-n", namespace)
    kubectl.run(
        "create", "rolebinding", "reader", "--role=pod-reader", f"--serviceaccount={namespace}:reader",
        "-n", namespace,
    )  # fmt: skip
    kubectl.apply(
        [pod("reader", serviceAccountName="reader"), pod("no-token", automountServiceAccountToken=False)],
        namespace,
    )

    seen = result(cluster, namespace, "reader")
    assert seen["user"] == f"system:serviceaccount:{namespace}:reader"
    assert seen["pods"] == ["no-token", "reader"]
    assert seen["secrets"] == 403  # the pod's own rights, not the runner's

    volume_dir = Path(seen["kubeconfig"]).parent
    assert volume_dir.parent == cluster.pod_dir(namespace, "reader") / "volumes"
    assert (volume_dir / "namespace").read_text() == namespace
    assert (volume_dir / "ca.crt").read_text().startswith("-----BEGIN CERTIFICATE-----")
    # Bound to the pod as a kubelet's token is, so it dies with the pod.
    payload = (volume_dir / "token").read_text().split(".")[1]
    claims = json.loads(base64.urlsafe_b64decode(payload + "=" * (-len(payload) % 4)))
    uid = kubectl.get("pod", "reader", namespace)["metadata"]["uid"]
    assert claims["kubernetes.io"]["pod"] == {"name": "reader", "uid": uid}
    assert claims["kubernetes.io"]["serviceaccount"]["name"] == "reader"

    assert result(cluster, namespace, "no-token") == {"kubeconfig": None}
