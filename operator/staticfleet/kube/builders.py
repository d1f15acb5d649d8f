"""Pure builders: a GroupSpec in, the child objects (StatefulSet, headless Service, PodDisruptionBudget)
out, as plain dicts ready for server-side apply.

The consumer contract lives here: every container of the pod template gets the KAFKA_* environment
(docs/operator.md lists it). The StatefulSet selector uses only the stable labels below, never the
parent's labels, because a selector cannot change after creation.
"""

from __future__ import annotations

import base64
import copy
from collections.abc import Mapping
from typing import Any, cast

import kopf

from staticfleet.kube import departure
from staticfleet.kube.access import CA_KEY, PASSWORD_KEY, USERNAME_KEY, FleetAccess
from staticfleet.kube.spec import (
    API_VERSION,
    CONSUMER_PROTOCOL,
    DEFAULT_USERNAME_KEY,
    JAAS_CONFIG_KEY,
    KIND,
    GroupSpec,
    Manifest,
    SaslSpec,
)

NAME_LABEL = "app.kubernetes.io/name"
INSTANCE_LABEL = "app.kubernetes.io/instance"
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"
GROUP_LABEL = "staticfleet.io/group"
CONSUMER_NAME = "staticfleet-consumer"
MANAGER = "staticfleet"
POD_INDEX_LABEL = "apps.kubernetes.io/pod-index"

TLS_VOLUME = "staticfleet-kafka-tls"
TLS_MOUNT_PATH = "/etc/staticfleet/kafka-tls"
# The CA from a provisioned fleet's own Secret (only that key is mounted, never the password).
USER_CA_VOLUME = "staticfleet-kafka-user-ca"
USER_CA_MOUNT_PATH = "/etc/staticfleet/kafka-user"
# A scale-down marks the pods it takes away with this annotation before the StatefulSet shrinks; each
# pod's downwardAPI volume shows it in the departure file, so that a consumer that reads it leaves the
# group at once (it is not coming back) instead of waiting for the operator to remove it.
DEPARTING_ANNOTATION = "staticfleet.io/departing"
POD_INFO_VOLUME = "staticfleet-pod-info"
POD_INFO_MOUNT_PATH = "/etc/staticfleet/pod"
DEPARTURE_FILE = "departing"

# Names the operator owns in every consumer container (a template's own value for one is replaced).
POD_NAME_ENV = "STATICFLEET_POD_NAME"
POD_ORDINAL_ENV = "STATICFLEET_POD_ORDINAL"
BOOTSTRAP_ENV = "KAFKA_BOOTSTRAP_SERVERS"
GROUP_ID_ENV = "KAFKA_GROUP_ID"
INSTANCE_ID_ENV = "KAFKA_GROUP_INSTANCE_ID"
MEMBERS_PER_POD_ENV = "KAFKA_MEMBERS_PER_POD"
TOPICS_ENV = "KAFKA_TOPICS"
SESSION_TIMEOUT_ENV = "KAFKA_SESSION_TIMEOUT_MS"
GROUP_PROTOCOL_ENV = "KAFKA_GROUP_PROTOCOL"
DEPARTURE_FILE_ENV = "STATICFLEET_DEPARTURE_FILE"
HEARTBEAT_INTERVAL_ENV = "KAFKA_HEARTBEAT_INTERVAL_MS"
REBALANCE_TIMEOUT_ENV = "KAFKA_REBALANCE_TIMEOUT_MS"
ASSIGNMENT_STRATEGY_ENV = "KAFKA_PARTITION_ASSIGNMENT_STRATEGY"
SECURITY_PROTOCOL_ENV = "KAFKA_SECURITY_PROTOCOL"
SASL_MECHANISM_ENV = "KAFKA_SASL_MECHANISM"
SASL_USERNAME_ENV = "KAFKA_SASL_USERNAME"
SASL_PASSWORD_ENV = "KAFKA_SASL_PASSWORD"
SASL_JAAS_CONFIG_ENV = "KAFKA_SASL_JAAS_CONFIG"
SSL_CA_ENV = "KAFKA_SSL_CA_LOCATION"
SSL_CERT_ENV = "KAFKA_SSL_CERTIFICATE_LOCATION"
SSL_KEY_ENV = "KAFKA_SSL_KEY_LOCATION"


def selector_labels(spec: GroupSpec) -> dict[str, str]:
    return {NAME_LABEL: CONSUMER_NAME, INSTANCE_LABEL: spec.name, GROUP_LABEL: spec.name}


def stable_labels(spec: GroupSpec) -> dict[str, str]:
    return {**selector_labels(spec), MANAGED_BY_LABEL: MANAGER}


def selector_string(spec: GroupSpec) -> str:
    """The serialized selector the scale subresource hands to HPA and KEDA."""
    return ",".join(f"{k}={v}" for k, v in sorted(selector_labels(spec).items()))


def _owner(spec: GroupSpec) -> kopf.Body:
    """The resource as far as an owner reference needs it."""
    raw = {"apiVersion": API_VERSION, "kind": KIND, "metadata": {"name": spec.name, "uid": spec.uid}}
    return kopf.Body(cast(kopf.RawBody, raw))


def child_metadata(spec: GroupSpec, name: str) -> Manifest:
    """Owned by the resource (controller, blocking its deletion), so the garbage collector removes the
    children with it. Only the stable labels: never the parent's, which may change."""
    child: Manifest = {"metadata": {"name": name, "namespace": spec.namespace, "labels": stable_labels(spec)}}
    kopf.append_owner_reference(child, owner=_owner(spec))
    metadata: Manifest = child["metadata"]
    return metadata


def _field_ref(path: str) -> Manifest:
    return {"valueFrom": {"fieldRef": {"apiVersion": "v1", "fieldPath": path}}}


def instance_id_env(spec: GroupSpec) -> Manifest:
    """KAFKA_GROUP_INSTANCE_ID: straight from the Downward API when the template is one placeholder,
    else composed with Kubernetes' $(VAR) expansion of the two variables defined before it."""
    template = spec.instance_id_template
    if template == "{pod}":
        return {"name": INSTANCE_ID_ENV, **_field_ref("metadata.name")}
    if template == "{ordinal}":
        return {"name": INSTANCE_ID_ENV, **_field_ref(f"metadata.labels['{POD_INDEX_LABEL}']")}
    value = (
        template.replace("{pod}", f"$({POD_NAME_ENV})")
        .replace("{ordinal}", f"$({POD_ORDINAL_ENV})")
        .replace("{name}", spec.name)
        .replace("{namespace}", spec.namespace)
    )
    return {"name": INSTANCE_ID_ENV, "value": value}


def consumer_env(
    spec: GroupSpec, bootstrap_servers: str, access: FleetAccess | None = None
) -> list[Manifest]:
    """The environment contract, in dependency order (a $(VAR) may only name an earlier variable).
    With `access` (a provisioned fleet) the SASL settings name the fleet's own user and Secret."""
    env: list[Manifest] = [
        {"name": POD_NAME_ENV, **_field_ref("metadata.name")},
        {"name": POD_ORDINAL_ENV, **_field_ref(f"metadata.labels['{POD_INDEX_LABEL}']")},
        {"name": BOOTSTRAP_ENV, "value": bootstrap_servers},
        {"name": GROUP_ID_ENV, "value": spec.group_id},
        instance_id_env(spec),
    ]
    if spec.members_per_pod > 1:
        # Only then: a fleet of one member per pod keeps the pod template it had before the field existed.
        env.append({"name": MEMBERS_PER_POD_ENV, "value": str(spec.members_per_pod)})
    env.append({"name": TOPICS_ENV, "value": ",".join(spec.topics)})
    if spec.group_protocol == CONSUMER_PROTOCOL:
        # The session timeout, heartbeat and assignor are the coordinator's (KIP-848): none is injected.
        env.append({"name": GROUP_PROTOCOL_ENV, "value": CONSUMER_PROTOCOL})
    else:
        env.append({"name": SESSION_TIMEOUT_ENV, "value": str(spec.session_timeout_ms)})
    env.append({"name": DEPARTURE_FILE_ENV, "value": f"{POD_INFO_MOUNT_PATH}/{DEPARTURE_FILE}"})
    if spec.heartbeat_interval_ms is not None:
        env.append({"name": HEARTBEAT_INTERVAL_ENV, "value": str(spec.heartbeat_interval_ms)})
    if spec.rebalance_timeout_ms is not None:
        env.append({"name": REBALANCE_TIMEOUT_ENV, "value": str(spec.rebalance_timeout_ms)})
    if spec.assignment_strategy is not None:
        env.append({"name": ASSIGNMENT_STRATEGY_ENV, "value": spec.assignment_strategy})
    if access is not None:
        return env + _provisioned_env(spec, access)
    env.append({"name": SECURITY_PROTOCOL_ENV, "value": spec.security_protocol})
    if spec.sasl is not None:
        sasl = spec.sasl
        env.append({"name": SASL_MECHANISM_ENV, "value": sasl.mechanism})
        env += _sasl_secret_env(sasl)
    if spec.tls is not None:
        tls = spec.tls
        env.append({"name": SSL_CA_ENV, "value": f"{TLS_MOUNT_PATH}/{tls.ca_key}"})
        if tls.cert_key and tls.key_key:
            env.append({"name": SSL_CERT_ENV, "value": f"{TLS_MOUNT_PATH}/{tls.cert_key}"})
            env.append({"name": SSL_KEY_ENV, "value": f"{TLS_MOUNT_PATH}/{tls.key_key}"})
    return env


def _sasl_secret_env(sasl: SaslSpec) -> list[Manifest]:
    """The user name and password from the resource's kafka.sasl Secret. A Strimzi KafkaUser's Secret
    has no `username` key but a `sasl.jaas.config` (which Java clients take as it is): with the default
    usernameKey both are optional, and a consumer reads the name from KAFKA_SASL_JAAS_CONFIG when
    KAFKA_SASL_USERNAME is unset. A Secret with neither is reported on the resource (secrets.py)."""

    def ref(key: str, optional: bool = False) -> Manifest:
        found: Manifest = {"name": sasl.secret_name, "key": key}
        return {"secretKeyRef": {**found, "optional": True}} if optional else {"secretKeyRef": found}

    default_key = sasl.username_key == DEFAULT_USERNAME_KEY
    env: list[Manifest] = [
        {"name": SASL_USERNAME_ENV, "valueFrom": ref(sasl.username_key, optional=default_key)},
        {"name": SASL_PASSWORD_ENV, "valueFrom": ref(sasl.password_key)},
    ]
    if default_key:
        env.append({"name": SASL_JAAS_CONFIG_ENV, "valueFrom": ref(JAAS_CONFIG_KEY, optional=True)})
    return env


def _provisioned_env(spec: GroupSpec, access: FleetAccess) -> list[Manifest]:
    """The fleet's own user: protocol and mechanism of the cluster, name and password from the fleet's
    Secret, and the CA (the resource's kafka.tls if set, else the one copied into the Secret)."""

    def from_secret(name: str, key: str) -> Manifest:
        return {"name": name, "valueFrom": {"secretKeyRef": {"name": access.secret_name, "key": key}}}

    env: list[Manifest] = [
        {"name": SECURITY_PROTOCOL_ENV, "value": access.security_protocol},
        {"name": SASL_MECHANISM_ENV, "value": access.mechanism},
        from_secret(SASL_USERNAME_ENV, USERNAME_KEY),
        from_secret(SASL_PASSWORD_ENV, PASSWORD_KEY),
    ]
    if spec.tls is not None:
        tls = spec.tls
        env.append({"name": SSL_CA_ENV, "value": f"{TLS_MOUNT_PATH}/{tls.ca_key}"})
        if tls.cert_key and tls.key_key:
            env.append({"name": SSL_CERT_ENV, "value": f"{TLS_MOUNT_PATH}/{tls.cert_key}"})
            env.append({"name": SSL_KEY_ENV, "value": f"{TLS_MOUNT_PATH}/{tls.key_key}"})
    elif access.ca is not None:
        env.append({"name": SSL_CA_ENV, "value": f"{USER_CA_MOUNT_PATH}/ca.crt"})
    return env


def _mounts(spec: GroupSpec, access: FleetAccess | None) -> list[tuple[Manifest, Manifest]]:
    """(volume, mount) pairs the contract adds to the pod and to every container."""
    departing = {"fieldRef": {"fieldPath": f"metadata.annotations['{DEPARTING_ANNOTATION}']"}}
    pairs: list[tuple[Manifest, Manifest]] = [
        (
            {"name": POD_INFO_VOLUME, "downwardAPI": {"items": [{"path": DEPARTURE_FILE, **departing}]}},
            {"name": POD_INFO_VOLUME, "mountPath": POD_INFO_MOUNT_PATH, "readOnly": True},
        )
    ]
    if spec.tls is not None:
        pairs.append(
            (
                {"name": TLS_VOLUME, "secret": {"secretName": spec.tls.secret_name}},
                {"name": TLS_VOLUME, "mountPath": TLS_MOUNT_PATH, "readOnly": True},
            )
        )
    elif access is not None and access.ca is not None:
        secret = {"secretName": access.secret_name, "items": [{"key": CA_KEY, "path": "ca.crt"}]}
        pairs.append(
            (
                {"name": USER_CA_VOLUME, "secret": secret},
                {"name": USER_CA_VOLUME, "mountPath": USER_CA_MOUNT_PATH, "readOnly": True},
            )
        )
    return pairs


def departure_key_env(spec: GroupSpec) -> Manifest:
    """The fleet's departure key, for a container that answers the departure handshake: it checks the
    marks the operator hands it (departure.py). Optional, so that a pod starts without it (and is then
    asked for the mark its file shows)."""
    ref = {"name": departure.key_secret_name(spec.name), "key": departure.KEY_SECRET_ENTRY, "optional": True}
    return {"name": departure.KEY_ENV, "valueFrom": {"secretKeyRef": ref}}


def departure_key_secret(spec: GroupSpec, key: str) -> Manifest:
    """The Secret of the fleet's departure key, owned by the resource so that it goes with it."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": child_metadata(spec, departure.key_secret_name(spec.name)),
        "type": "Opaque",
        "data": {departure.KEY_SECRET_ENTRY: base64.b64encode(key.encode()).decode()},
    }


def _with_contract(
    container: Manifest, env: list[Manifest], mounts: list[Manifest], spec: GroupSpec
) -> Manifest:
    if departure.departure_port(container) is not None:
        env = [*env, departure_key_env(spec)]
    ours = {e["name"] for e in env}
    out = dict(container)
    out["env"] = [*env, *(e for e in container.get("env", []) or [] if e.get("name") not in ours)]
    if mounts:
        names = {m["name"] for m in mounts}
        kept = [m for m in container.get("volumeMounts", []) or [] if m.get("name") not in names]
        out["volumeMounts"] = [*kept, *mounts]
    return out


def _runs_as_root(pod: Manifest) -> bool:
    contexts = [pod.get("securityContext") or {}]
    for key in ("initContainers", "containers"):
        contexts += [c.get("securityContext") or {} for c in pod.get(key, []) or []]
    return any(c.get("runAsUser") == 0 or c.get("runAsNonRoot") is False for c in contexts)


def with_restricted_defaults(pod: Manifest) -> Manifest:
    """The Pod Security Standard "restricted" settings for each field the template leaves unset: a
    non-root user (unless the template asks for root), the runtime's default seccomp profile, no
    privilege escalation and no capabilities. A value the template sets is kept, so a consumer that
    needs more says so in its own template."""
    out = dict(pod)
    security = dict(out.get("securityContext") or {})
    if not _runs_as_root(pod):
        security.setdefault("runAsNonRoot", True)
    security.setdefault("seccompProfile", {"type": "RuntimeDefault"})
    out["securityContext"] = security
    for key in ("initContainers", "containers"):
        if key not in out:
            continue
        containers = []
        for container in out[key] or []:
            context = dict(container.get("securityContext") or {})
            context.setdefault("allowPrivilegeEscalation", False)
            context.setdefault("capabilities", {"drop": ["ALL"]})
            containers.append({**container, "securityContext": context})
        out[key] = containers
    return out


def pod_template(spec: GroupSpec, bootstrap_servers: str, access: FleetAccess | None = None) -> Manifest:
    template: Manifest = copy.deepcopy(spec.template)
    metadata: Manifest = template.setdefault("metadata", {})
    metadata["labels"] = {**(metadata.get("labels") or {}), **stable_labels(spec)}
    pod: Manifest = template.setdefault("spec", {})
    env = consumer_env(spec, bootstrap_servers, access)
    pairs = _mounts(spec, access)
    mounts = [mount for _, mount in pairs]
    pod["containers"] = [_with_contract(c, env, mounts, spec) for c in pod.get("containers", []) or []]
    if pairs:
        names = {volume["name"] for volume, _ in pairs}
        volumes = [v for v in pod.get("volumes", []) or [] if v.get("name") not in names]
        pod["volumes"] = [*volumes, *(volume for volume, _ in pairs)]
    template["spec"] = with_restricted_defaults(pod)
    return template


def statefulset(
    spec: GroupSpec, bootstrap_servers: str, replicas: int, access: FleetAccess | None = None
) -> Manifest:
    """The StatefulSet; `replicas` is the scale flow's decision, which may lag spec.replicas."""
    body: dict[str, Any] = {
        "replicas": replicas,
        "serviceName": spec.name,
        "podManagementPolicy": "Parallel",
        "updateStrategy": {"type": "RollingUpdate", "rollingUpdate": {"partition": 0}},
        "selector": {"matchLabels": selector_labels(spec)},
        "template": pod_template(spec, bootstrap_servers, access),
        "persistentVolumeClaimRetentionPolicy": {
            "whenDeleted": spec.pvc_retention.get("whenDeleted", "Retain"),
            "whenScaled": spec.pvc_retention.get("whenScaled", "Retain"),
        },
    }
    if spec.volume_claim_templates:
        body["volumeClaimTemplates"] = [
            {"apiVersion": "v1", "kind": "PersistentVolumeClaim", **copy.deepcopy(t)}
            for t in spec.volume_claim_templates
        ]
    return {
        "apiVersion": "apps/v1",
        "kind": "StatefulSet",
        "metadata": child_metadata(spec, spec.name),
        "spec": body,
    }


def headless_service(spec: GroupSpec) -> Manifest:
    """Stable DNS names for the pods (<pod>.<name>.<namespace>.svc), as a StatefulSet expects."""
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": child_metadata(spec, spec.name),
        "spec": {
            "clusterIP": "None",
            "selector": selector_labels(spec),
            "publishNotReadyAddresses": True,
        },
    }


def pod_disruption_budget(spec: GroupSpec) -> Manifest:
    """At most one consumer evicted at a time by drains: each eviction is a restart the group absorbs."""
    return {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": child_metadata(spec, spec.name),
        "spec": {"maxUnavailable": 1, "selector": {"matchLabels": selector_labels(spec)}},
    }


def credentials_secret(spec: GroupSpec, access: FleetAccess, data: Mapping[str, bytes]) -> Manifest:
    """A provisioned fleet's Secret (access.secret_data), owned by the resource so that it goes with it."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": child_metadata(spec, access.secret_name),
        "type": "Opaque",
        "data": {k: base64.b64encode(v).decode() for k, v in sorted(data.items())},
    }


def pod_ordinal(pod: Manifest, statefulset_name: str) -> int | None:
    """A StatefulSet pod's ordinal: the pod-index label, else the name's numeric suffix."""
    labels = pod.get("metadata", {}).get("labels", {}) or {}
    index = labels.get(POD_INDEX_LABEL)
    if index is not None and str(index).isdigit():
        return int(index)
    name = str(pod.get("metadata", {}).get("name", ""))
    prefix = f"{statefulset_name}-"
    suffix = name[len(prefix) :] if name.startswith(prefix) else ""
    return int(suffix) if suffix.isdigit() else None


# A pod in one of these phases runs none of its containers again: the kubelet sets them once every
# container has stopped for good (and, since Kubernetes 1.27, for every pod being deleted, before the
# object goes; volumes may still be unmounting then).
TERMINAL_POD_PHASES = ("Succeeded", "Failed")


def consumer_may_run(pod: Manifest) -> bool:
    """False once the pod is in a terminal phase: its consumer has stopped and will not start again."""
    return (pod.get("status") or {}).get("phase") not in TERMINAL_POD_PHASES


def marked_departing(pod: Manifest) -> bool:
    return DEPARTING_ANNOTATION in ((pod.get("metadata") or {}).get("annotations") or {})
