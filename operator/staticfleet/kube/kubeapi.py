"""The Kubernetes API calls the operator makes, with plain-dict bodies.

It rides on the official client's configuration and transport (kubeconfig or in-cluster service
account, TLS, token refresh) but speaks JSON directly: the operator builds its objects as dicts and
applies them server-side, so generated models would only be in the way.
"""

from __future__ import annotations

import json
import urllib.parse
from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

from staticfleet.kube.spec import GROUP, PLURAL, VERSION, Manifest

FIELD_MANAGER = "staticfleet-operator"
REQUEST_TIMEOUT_S = 15.0


class KubeError(RuntimeError):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


def group_path(namespace: str, name: str | None = None) -> str:
    base = f"/apis/{GROUP}/{VERSION}/namespaces/{namespace}/{PLURAL}"
    return f"{base}/{name}" if name else base


def statefulset_path(namespace: str, name: str) -> str:
    return f"/apis/apps/v1/namespaces/{namespace}/statefulsets/{name}"


def service_path(namespace: str, name: str) -> str:
    return f"/api/v1/namespaces/{namespace}/services/{name}"


def pdb_path(namespace: str, name: str) -> str:
    return f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets/{name}"


def object_path(manifest: Mapping[str, Any]) -> str:
    kind, meta = manifest["kind"], manifest["metadata"]
    paths = {"StatefulSet": statefulset_path, "Service": service_path, "PodDisruptionBudget": pdb_path}
    return paths[kind](meta["namespace"], meta["name"])


class KubeApi:
    def __init__(self, kubeconfig: Path | None = None) -> None:
        from kubernetes import client, config

        configuration = client.Configuration()
        if kubeconfig is not None:
            config.load_kube_config(config_file=str(kubeconfig), client_configuration=configuration)  # type: ignore[no-untyped-call]
        else:
            try:
                config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
            except config.ConfigException:
                config.load_kube_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
        self._client = client.ApiClient(configuration)

    def close(self) -> None:
        self._client.close()  # type: ignore[no-untyped-call]

    def request(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, str] | None = None,
        body: Any = None,
        content_type: str = "application/json",
    ) -> Manifest:
        headers = {"Accept": "application/json", "Content-Type": content_type}
        url_path = path + (f"?{urllib.parse.urlencode(query)}" if query else "")
        method_, url, headers_, body_, post = self._client.param_serialize(
            method, url_path, header_params=headers, body=body, auth_settings=["BearerToken"]
        )
        response = self._client.call_api(
            method_, url, headers_, body_, post, _request_timeout=REQUEST_TIMEOUT_S
        )
        response.read()  # type: ignore[no-untyped-call]
        data = response.data or b"{}"
        if not 200 <= int(response.status) < 300:
            try:
                message = json.loads(data).get("message", "")
            except ValueError:
                message = data.decode(errors="replace")
            raise KubeError(int(response.status), f"{method} {path}: HTTP {response.status}: {message}")
        return cast(Manifest, json.loads(data))

    def get(self, path: str) -> Manifest | None:
        try:
            return self.request("GET", path)
        except KubeError as exc:
            if exc.status == 404:
                return None
            raise

    def list_items(self, path: str, label_selector: str | None = None) -> list[Manifest]:
        query = {"labelSelector": label_selector} if label_selector else None
        return list(self.request("GET", path, query=query).get("items", []))

    def apply(self, manifest: Manifest) -> Manifest:
        """Server-side apply: idempotent, and a no-op on the server when nothing changed."""
        return self.request(
            "PATCH",
            object_path(manifest),
            query={"fieldManager": FIELD_MANAGER, "force": "true"},
            body=manifest,
            content_type="application/apply-patch+yaml",
        )

    def merge_patch(self, path: str, patch: Manifest) -> Manifest:
        return self.request("PATCH", path, body=patch, content_type="application/merge-patch+json")

    # -- the resource ---------------------------------------------------------------------------------------

    def get_group(self, namespace: str, name: str) -> Manifest | None:
        return self.get(group_path(namespace, name))

    def patch_group_status(self, namespace: str, name: str, status: Manifest) -> Manifest:
        return self.merge_patch(group_path(namespace, name) + "/status", {"status": status})

    # -- children --------------------------------------------------------------------------------------------

    def get_statefulset(self, namespace: str, name: str) -> Manifest | None:
        return self.get(statefulset_path(namespace, name))

    def scale_statefulset(self, namespace: str, name: str, replicas: int) -> Manifest:
        return self.merge_patch(statefulset_path(namespace, name), {"spec": {"replicas": replicas}})

    def list_pods(self, namespace: str, label_selector: str) -> list[Manifest]:
        return self.list_items(f"/api/v1/namespaces/{namespace}/pods", label_selector)

    def get_secret(self, namespace: str, name: str) -> Manifest | None:
        return self.get(f"/api/v1/namespaces/{namespace}/secrets/{name}")

    def create_event(self, namespace: str, event: Manifest) -> None:
        self.request("POST", f"/api/v1/namespaces/{namespace}/events", body=event)
