"""The Kubernetes API calls the operator makes, with plain-dict bodies: the one client style of kube/.

It rides on the official client's configuration and transport (kubeconfig or in-cluster service
account, TLS, token refresh) but speaks JSON to REST paths rather than through the typed models. That
serves the operator better: its own resource has no generated model at all, the builders produce plain
dicts that kopf and the unit tests read as they are, and server-side apply (application/apply-patch)
takes exactly the fields we set, where a typed model would send every defaulted field as ours.
"""

from __future__ import annotations

import json
import re
import urllib.parse
from collections.abc import Mapping
from pathlib import Path
from typing import Any, cast

from staticfleet.kube.fleetstatus import merge_patch
from staticfleet.kube.spec import GROUP, KIND, PLURAL, VERSION, Manifest

FIELD_MANAGER = "staticfleet-operator"
"""The default field manager; the chart names one per release (`staticfleet-operator/<ns>/<release>`)."""
REQUEST_TIMEOUT_S = 15.0
_CONFLICT_MANAGER = re.compile(r'conflicts? with "([^"]+)"')


class KubeError(RuntimeError):
    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status = status


class ApplyConflict(KubeError):
    """Another staticfleet operator (another field manager of ours) owns fields this apply would change:
    two operators act on one resource, and this one does not overwrite the other."""

    def __init__(self, message: str, managers: tuple[str, ...]) -> None:
        super().__init__(409, message)
        self.managers = managers


def is_operator_manager(manager: str) -> bool:
    """A field manager that is a staticfleet operator (of any release)."""
    return manager == FIELD_MANAGER or manager.startswith(FIELD_MANAGER + "/")


def conflicting_managers(message: str) -> tuple[str, ...]:
    """The field managers a server-side apply conflict names (`conflict with "kubectl-scale" using ...`)."""
    return tuple(dict.fromkeys(_CONFLICT_MANAGER.findall(message)))


def prune(value: Any) -> Any:
    """Without the None values (for apply, absent is how a field is let go)."""
    if isinstance(value, Mapping):
        return {k: prune(v) for k, v in value.items() if v is not None}
    if isinstance(value, list):
        return [prune(v) for v in value]
    return value


def group_path(namespace: str, name: str | None = None) -> str:
    base = f"/apis/{GROUP}/{VERSION}/namespaces/{namespace}/{PLURAL}"
    return f"{base}/{name}" if name else base


def statefulset_path(namespace: str, name: str) -> str:
    return f"/apis/apps/v1/namespaces/{namespace}/statefulsets/{name}"


def service_path(namespace: str, name: str) -> str:
    return f"/api/v1/namespaces/{namespace}/services/{name}"


def pdb_path(namespace: str, name: str) -> str:
    return f"/apis/policy/v1/namespaces/{namespace}/poddisruptionbudgets/{name}"


def secret_path(namespace: str, name: str) -> str:
    return f"/api/v1/namespaces/{namespace}/secrets/{name}"


def object_path(manifest: Mapping[str, Any]) -> str:
    kind, meta = manifest["kind"], manifest["metadata"]
    paths = {
        "StatefulSet": statefulset_path,
        "Service": service_path,
        "PodDisruptionBudget": pdb_path,
        "Secret": secret_path,
    }
    return paths[kind](meta["namespace"], meta["name"])


class KubeApi:
    def __init__(
        self,
        kubeconfig: Path | None = None,
        field_manager: str = FIELD_MANAGER,
        connections: int | None = None,
    ) -> None:
        """`connections`: how many requests may be in flight at once and keep their connection (the
        client's default is five per CPU; a request beyond it opens one and then drops it, with a warning)."""
        from kubernetes import client, config

        self.field_manager = field_manager
        configuration = client.Configuration()
        if connections is not None:
            configuration.connection_pool_maxsize = connections
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

    def served(self, crd: str, version: str = VERSION) -> bool:
        """Whether the API server serves the resource of this CRD name (`<plural>.<group>`), by
        discovery (which every authenticated client may read)."""
        plural, _, group = crd.partition(".")
        found = self.get(f"/apis/{group}/{version}")
        return found is not None and any(r.get("name") == plural for r in found.get("resources") or [])

    def list_items(self, path: str, label_selector: str | None = None) -> list[Manifest]:
        query = {"labelSelector": label_selector} if label_selector else None
        return list(self.request("GET", path, query=query).get("items", []))

    def apply(self, manifest: Manifest) -> Manifest:
        """Server-side apply of a child (StatefulSet, Service, PDB): idempotent, and a no-op on the server
        when nothing changed.

        Applied without force, so the API server says when another manager owns a field we would
        change. Another staticfleet operator (a second release, or one run by hand, with its own field
        manager) raises ApplyConflict: neither silently overwrites the other. Anyone else (kubectl edit
        or scale, an autoscaler) is overruled, as the resource owns its children: the apply is made
        again with force."""
        try:
            return self._apply(manifest, force=False)
        except KubeError as exc:
            if exc.status != 409:
                raise
            managers = conflicting_managers(str(exc))
            peers = tuple(m for m in managers if is_operator_manager(m) and m != self.field_manager)
            if peers:
                raise ApplyConflict(str(exc), peers) from exc
            return self._apply(manifest, force=True)

    def _apply(self, manifest: Manifest, *, force: bool) -> Manifest:
        query = {"fieldManager": self.field_manager, **({"force": "true"} if force else {})}
        return self.request(
            "PATCH",
            object_path(manifest),
            query=query,
            body=manifest,
            content_type="application/apply-patch+yaml",
        )

    def merge_patch(self, path: str, patch: Manifest) -> Manifest:
        return self.request("PATCH", path, body=patch, content_type="application/merge-patch+json")

    # -- the resource ---------------------------------------------------------------------------------------

    def get_group(self, namespace: str, name: str) -> Manifest | None:
        return self.get(group_path(namespace, name))

    def apply_group_status(
        self, namespace: str, name: str, status: Mapping[str, Any], resource_version: str
    ) -> Manifest:
        """Server-side apply of the whole status, as of `resource_version` (a newer one: HTTP 409).

        Every replica of one operator applies as its one field manager, so fields of ours that `status`
        leaves out are removed. The resourceVersion precondition, not field ownership, is what detects
        another writer here. Fields another writer set (kubectl edit, or a status written by merge patch
        before) are not ours to drop by apply: a merge patch clears the ones `status` does not have.
        """
        path = group_path(namespace, name) + "/status"
        desired = prune(status)
        manifest = {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": KIND,
            "metadata": {"name": name, "namespace": namespace, "resourceVersion": resource_version},
            "status": desired,
        }
        written = self.request(
            "PATCH",
            path,
            query={"fieldManager": self.field_manager, "force": "true"},
            body=manifest,
            content_type="application/apply-patch+yaml",
        )
        leftover = merge_patch(written.get("status") or {}, desired)
        if leftover:
            version = str(written["metadata"].get("resourceVersion", ""))
            written = self.merge_patch(path, {"metadata": {"resourceVersion": version}, "status": leftover})
        return written

    # -- children --------------------------------------------------------------------------------------------

    def get_statefulset(self, namespace: str, name: str) -> Manifest | None:
        return self.get(statefulset_path(namespace, name))

    def scale_statefulset(self, namespace: str, name: str, replicas: int) -> Manifest:
        return self.request(
            "PATCH",
            statefulset_path(namespace, name),
            query={"fieldManager": self.field_manager},
            body={"spec": {"replicas": replicas}},
            content_type="application/merge-patch+json",
        )

    def annotate_pod(self, namespace: str, name: str, annotations: Mapping[str, str | None]) -> None:
        """Sets (or, with None, removes) annotations of a pod; a pod already gone is left alone."""
        path = f"/api/v1/namespaces/{namespace}/pods/{name}"
        try:
            self.merge_patch(path, {"metadata": {"annotations": dict(annotations)}})
        except KubeError as exc:
            if exc.status != 404:
                raise

    def list_pods(self, namespace: str, label_selector: str) -> list[Manifest]:
        return self.list_items(f"/api/v1/namespaces/{namespace}/pods", label_selector)

    def create_secret(self, secret: Manifest) -> bool:
        """Creates the Secret; False if one of that name exists (it is neither read nor changed)."""
        namespace = secret["metadata"]["namespace"]
        try:
            self.request("POST", f"/api/v1/namespaces/{namespace}/secrets", body=secret)
        except KubeError as exc:
            if exc.status != 409:
                raise
            return False
        return True

    def get_secret(self, namespace: str, name: str) -> Manifest | None:
        return self.get(secret_path(namespace, name))
