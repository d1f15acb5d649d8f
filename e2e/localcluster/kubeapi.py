"""The few Kubernetes API calls the pod runner makes, with plain-dict results.

Pods travel as JSON dicts (the watch stream's raw objects); the generated client's models are used
only where a request body must be one.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import cast

from kubernetes import client, config, watch
from kubernetes.client.exceptions import ApiException

from e2e.localcluster.podspec import Manifest, decode_secret_data

MERGE_PATCH = "application/merge-patch+json"


class WatchExpired(Exception):
    """The resourceVersion is too old (HTTP 410): list again."""


def _status_of(error: ApiException) -> int:
    return int(error.status or 0)


class KubeApi:
    """Typed, dict-based access to the core/v1 calls a kubelet makes."""

    def __init__(self, kubeconfig: Path) -> None:
        self._client: client.ApiClient = config.new_client_from_config(config_file=str(kubeconfig))  # type: ignore[no-untyped-call]
        self.core = client.CoreV1Api(self._client)

    def close(self) -> None:
        self._client.close()  # type: ignore[no-untyped-call]

    def _as_manifest(self, model: object) -> Manifest:
        return cast(Manifest, self._client.sanitize_for_serialization(model))  # type: ignore[no-untyped-call]

    # -- pods

    def list_pods(self) -> tuple[list[Manifest], str]:
        pods = self.core.list_pod_for_all_namespaces()
        items = [self._as_manifest(pod) for pod in pods.items]
        return items, str(pods.metadata.resource_version if pods.metadata else "")

    def watch_pods(self, resource_version: str, timeout_seconds: int) -> Iterator[tuple[str, Manifest]]:
        """(event type, pod) pairs until the server ends the watch; BOOKMARKs carry only a resourceVersion."""
        stream = watch.Watch()  # type: ignore[no-untyped-call]
        events = stream.stream(  # type: ignore[no-untyped-call]
            self.core.list_pod_for_all_namespaces,
            resource_version=resource_version,
            timeout_seconds=timeout_seconds,
            allow_watch_bookmarks=True,
            deserialize=False,
        )
        try:
            for event in events:
                yield str(event["type"]), cast(Manifest, event["object"])
        except ApiException as error:
            if _status_of(error) == 410:
                raise WatchExpired(str(error.reason)) from error
            raise
        finally:
            stream.stop()  # type: ignore[no-untyped-call]

    def bind_pod(self, namespace: str, name: str, uid: str, node_name: str) -> None:
        binding = client.V1Binding(
            metadata=client.V1ObjectMeta(name=name, namespace=namespace, uid=uid),
            target=client.V1ObjectReference(api_version="v1", kind="Node", name=node_name),
        )
        try:
            self.core.create_namespaced_pod_binding(name, namespace, binding, _preload_content=False)
        except ApiException as error:
            # 409: someone bound it already; 404: it is gone. Both end this attempt.
            if _status_of(error) not in (404, 409):
                raise

    def patch_pod_status(self, namespace: str, name: str, status: Manifest) -> bool:
        """Merge-patches the status; False when the pod is gone."""
        try:
            self.core.patch_namespaced_pod_status(
                name, namespace, {"status": status}, _content_type=MERGE_PATCH, _preload_content=False
            )
        except ApiException as error:
            if _status_of(error) == 404:
                return False
            raise
        return True

    def force_delete_pod(self, namespace: str, name: str, uid: str) -> None:
        """Deletes with grace 0, only if the pod is still the same object (uid precondition)."""
        options = client.V1DeleteOptions(
            grace_period_seconds=0, preconditions=client.V1Preconditions(uid=uid)
        )
        try:
            self.core.delete_namespaced_pod(
                name, namespace, grace_period_seconds=0, body=options, _preload_content=False
            )
        except ApiException as error:
            # 404: already gone; 409: the name now belongs to a newer pod.
            if _status_of(error) not in (404, 409):
                raise

    # -- env sources (the podspec.SourceLookup protocol)

    def config_map(self, namespace: str, name: str) -> Mapping[str, str] | None:
        try:
            found = self.core.read_namespaced_config_map(name, namespace)
        except ApiException as error:
            if _status_of(error) == 404:
                return None
            raise
        return dict(found.data or {})

    def secret(self, namespace: str, name: str) -> Mapping[str, str] | None:
        try:
            found = self.core.read_namespaced_secret(name, namespace)
        except ApiException as error:
            if _status_of(error) == 404:
                return None
            raise
        return decode_secret_data(found.data)

    # -- service accounts

    def service_account_token(
        self,
        namespace: str,
        service_account: str,
        pod_name: str,
        pod_uid: str,
        audience: str | None,
        expiration_seconds: int,
    ) -> str | None:
        """A token bound to the pod (TokenRequest API, as the kubelet asks); None without the account."""
        request = client.AuthenticationV1TokenRequest(
            spec=client.V1TokenRequestSpec(
                audiences=[audience] if audience else [],
                expiration_seconds=expiration_seconds,
                bound_object_ref=client.V1BoundObjectReference(
                    api_version="v1", kind="Pod", name=pod_name, uid=pod_uid
                ),
            )
        )
        try:
            created = self.core.create_namespaced_service_account_token(service_account, namespace, request)
        except ApiException as error:
            if _status_of(error) == 404:
                return None
            raise
        if created.status is None:
            raise RuntimeError(f"TokenRequest for {namespace}/{service_account} returned no status")
        return str(created.status.token)

    def api_server(self) -> tuple[str, str | None]:
        """The API server's URL and the CA bundle that verifies it (None: not verified)."""
        configuration = self._client.configuration
        ca_file = configuration.ssl_ca_cert
        ca_pem = Path(ca_file).read_text() if ca_file and configuration.verify_ssl else None
        return str(configuration.host), ca_pem

    # -- persistent volume claims

    def claim(self, namespace: str, name: str) -> Manifest | None:
        try:
            return self._as_manifest(self.core.read_namespaced_persistent_volume_claim(name, namespace))
        except ApiException as error:
            if _status_of(error) == 404:
                return None
            raise

    def mark_claim_bound(self, namespace: str, name: str, claim: Manifest) -> None:
        """Plays the volume binder: the claim is Bound with the capacity it asked for."""
        spec: Manifest = claim.get("spec", {})
        status = {
            "phase": "Bound",
            "accessModes": spec.get("accessModes", ["ReadWriteOnce"]),
            "capacity": dict(spec.get("resources", {}).get("requests", {"storage": "1Gi"})),
        }
        self.core.patch_namespaced_persistent_volume_claim_status(
            name, namespace, {"status": status}, _content_type=MERGE_PATCH, _preload_content=False
        )

    # -- node

    def ensure_node(self, name: str, labels: Mapping[str, str], status: Manifest) -> None:
        node = client.V1Node(
            api_version="v1", kind="Node", metadata=client.V1ObjectMeta(name=name, labels=dict(labels))
        )
        try:
            self.core.create_node(node, _preload_content=False)
        except ApiException as error:
            if _status_of(error) != 409:
                raise
        self.patch_node_status(name, status)

    def patch_node_status(self, name: str, status: Manifest) -> None:
        self.core.patch_node_status(
            name, {"status": status}, _content_type=MERGE_PATCH, _preload_content=False
        )


__all__ = ["ApiException", "KubeApi", "WatchExpired"]
