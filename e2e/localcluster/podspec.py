"""Pure functions that turn a pod manifest into what a local process needs.

Everything here works on the JSON form of Kubernetes objects (camelCase keys, as `kubectl get -o json`
prints them) and does no I/O: ConfigMaps and Secrets come in through a `SourceLookup`.

Volume convention (documented in docs/local-cluster.md):
- every volume of the pod is a host directory; its path is exported to each container as
  `STATICFLEET_VOLUME_<NAME>` (name upper-cased, every character outside [A-Za-z0-9] turned into `_`);
- absolute paths under a container's `volumeMounts[].mountPath` are rewritten to the host directory
  wherever they appear at the start of an env value, of a command/args word, or of the value part of a
  `--flag=value` word; `workingDir` is rewritten the same way.
"""

from __future__ import annotations

import base64
import ipaddress
import random
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal, Protocol

Manifest = dict[str, Any]

LOCAL_IP = "127.0.0.1"
VOLUME_ENV_PREFIX = "STATICFLEET_VOLUME_"
_ENV_NAME = re.compile(r"^[-._a-zA-Z][-._a-zA-Z0-9]*$")
_SUBSCRIPTED_FIELD = re.compile(r"^metadata\.(labels|annotations)\['(.+)'\]$")


class EnvResolutionError(Exception):
    """A referenced ConfigMap, Secret or key is missing, or a reference is not supported.

    The kubelet reports this as the container waiting with reason CreateContainerConfigError.
    """


class SourceLookup(Protocol):
    """Reads the data of ConfigMaps and Secrets; None when the object does not exist."""

    def config_map(self, namespace: str, name: str) -> Mapping[str, str] | None: ...

    def secret(self, namespace: str, name: str) -> Mapping[str, str] | None: ...


def decode_secret_data(data: Mapping[str, str | bytes] | None) -> dict[str, str]:
    """Secret.data holds base64; pods see the decoded text."""
    return {key: base64.b64decode(value).decode("utf-8", "replace") for key, value in (data or {}).items()}


# ---------------------------------------------------------------------------------------------- env


def expand_references(value: str, env: Mapping[str, str]) -> str:
    """Expands `$(NAME)` the way the kubelet does: `$$` is a literal `$`, unknown names stay as written."""
    out: list[str] = []
    i = 0
    while i < len(value):
        char = value[i]
        if char != "$" or i + 1 == len(value):
            out.append(char)
            i += 1
            continue
        following = value[i + 1]
        if following == "$":
            out.append("$")
            i += 2
        elif following == "(":
            end = value.find(")", i + 2)
            if end == -1:
                out.append(value[i:])
                break
            name = value[i + 2 : end]
            out.append(env.get(name, value[i : end + 1]))
            i = end + 1
        else:
            out.append(char)
            i += 1
    return "".join(out)


def field_value(pod: Manifest, field_path: str, *, node_name: str, pod_ip: str = LOCAL_IP) -> str:
    """The Downward API value of `fieldRef.fieldPath` for this pod."""
    metadata: Manifest = pod.get("metadata", {})
    spec: Manifest = pod.get("spec", {})
    subscripted = _SUBSCRIPTED_FIELD.match(field_path)
    if subscripted:
        kind, key = subscripted.groups()
        return str(metadata.get(kind, {}).get(key, ""))
    simple: dict[str, str] = {
        "metadata.name": str(metadata.get("name", "")),
        "metadata.namespace": str(metadata.get("namespace", "")),
        "metadata.uid": str(metadata.get("uid", "")),
        "spec.nodeName": str(spec.get("nodeName") or node_name),
        "spec.serviceAccountName": str(spec.get("serviceAccountName", "")),
        "status.podIP": pod_ip,
        "status.podIPs": pod_ip,
        "status.hostIP": pod_ip,
        "status.hostIPs": pod_ip,
    }
    if field_path not in simple:
        raise EnvResolutionError(f"fieldRef {field_path!r} is not supported")
    return simple[field_path]


def _key_from(
    source: Mapping[str, str] | None, kind: str, ref: Manifest, namespace: str
) -> tuple[str | None, bool]:
    """Returns (value, found); raises when a required object or key is missing."""
    optional = bool(ref.get("optional", False))
    name, key = str(ref.get("name", "")), str(ref.get("key", ""))
    if source is None:
        if optional:
            return None, False
        raise EnvResolutionError(f'{kind} "{name}" not found in namespace "{namespace}"')
    if key not in source:
        if optional:
            return None, False
        raise EnvResolutionError(f"couldn't find key {key} in {kind} {namespace}/{name}")
    return source[key], True


def _env_from_sources(container: Manifest, namespace: str, lookup: SourceLookup) -> dict[str, str]:
    env: dict[str, str] = {}
    for entry in container.get("envFrom", []):
        prefix = str(entry.get("prefix", ""))
        if "configMapRef" in entry:
            ref, kind = entry["configMapRef"], "configmap"
            data = lookup.config_map(namespace, str(ref.get("name", "")))
        elif "secretRef" in entry:
            ref, kind = entry["secretRef"], "secret"
            data = lookup.secret(namespace, str(ref.get("name", "")))
        else:
            continue
        if data is None:
            if ref.get("optional", False):
                continue
            raise EnvResolutionError(f'{kind} "{ref.get("name", "")}" not found in namespace "{namespace}"')
        for key, value in data.items():
            if _ENV_NAME.match(prefix + key):
                env[prefix + key] = value
    return env


def resolve_env(
    container: Manifest, pod: Manifest, lookup: SourceLookup, *, node_name: str, pod_ip: str = LOCAL_IP
) -> dict[str, str]:
    """The container's environment: envFrom first, then env, each value expanded against the ones before."""
    namespace = str(pod.get("metadata", {}).get("namespace", "default"))
    env = _env_from_sources(container, namespace, lookup)
    for entry in container.get("env", []):
        name = str(entry["name"])
        if "value" in entry or "valueFrom" not in entry:
            env[name] = expand_references(str(entry.get("value", "")), env)
            continue
        source: Manifest = entry["valueFrom"]
        if "fieldRef" in source:
            field_path = str(source["fieldRef"]["fieldPath"])
            env[name] = field_value(pod, field_path, node_name=node_name, pod_ip=pod_ip)
        elif "configMapKeyRef" in source:
            ref = source["configMapKeyRef"]
            value, found = _key_from(
                lookup.config_map(namespace, str(ref.get("name", ""))), "configmap", ref, namespace
            )
            if found and value is not None:
                env[name] = value
        elif "secretKeyRef" in source:
            ref = source["secretKeyRef"]
            value, found = _key_from(
                lookup.secret(namespace, str(ref.get("name", ""))), "secret", ref, namespace
            )
            if found and value is not None:
                env[name] = value
        else:
            kinds = ", ".join(sorted(source))
            raise EnvResolutionError(
                f"env {name}: valueFrom {kinds} is not supported by the local pod runner"
            )
    return env


# ------------------------------------------------------------------------------------------ volumes


VolumeKind = Literal["pod", "claim", "configMap", "secret", "serviceAccount", "downwardAPI"]


@dataclass(frozen=True)
class VolumePlan:
    """Where one pod volume lives on the host and how it is filled."""

    name: str
    kind: VolumeKind
    host_dir: Path
    source: Manifest  # the volume's own source object (e.g. the persistentVolumeClaim block)


def volume_env_name(volume_name: str) -> str:
    return VOLUME_ENV_PREFIX + re.sub(r"[^A-Za-z0-9]", "_", volume_name).upper()


def pod_dir(run_dir: Path, namespace: str, name: str) -> Path:
    return run_dir / "pods" / namespace / name


def claim_dir(run_dir: Path, namespace: str, claim: str) -> Path:
    return run_dir / "volumes" / namespace / claim


def plan_volumes(pod: Manifest, run_dir: Path) -> list[VolumePlan]:
    """Host directories for the pod's volumes: PVCs by namespace/claim name, the rest inside the pod dir."""
    metadata = pod["metadata"]
    namespace, name = str(metadata["namespace"]), str(metadata["name"])
    own = pod_dir(run_dir, namespace, name) / "volumes"
    plans: list[VolumePlan] = []
    for volume in pod.get("spec", {}).get("volumes", []):
        volume_name = str(volume["name"])
        if "persistentVolumeClaim" in volume:
            claim = str(volume["persistentVolumeClaim"]["claimName"])
            plans.append(
                VolumePlan(
                    volume_name,
                    "claim",
                    claim_dir(run_dir, namespace, claim),
                    volume["persistentVolumeClaim"],
                )
            )
        elif "configMap" in volume:
            plans.append(VolumePlan(volume_name, "configMap", own / volume_name, volume["configMap"]))
        elif "secret" in volume:
            plans.append(VolumePlan(volume_name, "secret", own / volume_name, volume["secret"]))
        elif is_service_account_volume(volume):
            plans.append(VolumePlan(volume_name, "serviceAccount", own / volume_name, volume["projected"]))
        elif "downwardAPI" in volume:
            plans.append(VolumePlan(volume_name, "downwardAPI", own / volume_name, volume["downwardAPI"]))
        else:
            # emptyDir, and every other source (projected, ephemeral, ...) as an empty dir.
            plans.append(VolumePlan(volume_name, "pod", own / volume_name, {}))
    return plans


def downward_api_files(
    source: Manifest, pod: Manifest, *, node_name: str, pod_ip: str = LOCAL_IP
) -> dict[str, str]:
    """Relative file path -> content of a downwardAPI volume: one file per fieldRef item (an absent
    label or annotation gives an empty file, as the kubelet writes it)."""
    files: dict[str, str] = {}
    for item in source.get("items") or []:
        if "fieldRef" not in item:
            raise EnvResolutionError("downwardAPI items other than fieldRef are not supported")
        field_path = str(item["fieldRef"]["fieldPath"])
        files[str(item["path"])] = field_value(pod, field_path, node_name=node_name, pod_ip=pod_ip)
    return files


def projected_files(data: Mapping[str, str], source: Manifest) -> dict[str, str]:
    """Relative file path -> content for a configMap/secret volume (all keys, or only `items`)."""
    items = source.get("items")
    if not items:
        return dict(data)
    files: dict[str, str] = {}
    for item in items:
        key = str(item["key"])
        if key in data:
            files[str(item.get("path", key))] = data[key]
        elif not source.get("optional", False):
            raise EnvResolutionError(f"volume key {key!r} not found")
    return files


# ---------------------------------------------------------------------------- service-account tokens

# The projected volume the ServiceAccount admission plugin adds (kube-api-access-*): a token, the
# cluster's CA bundle from the kube-root-ca.crt ConfigMap, and the namespace.
ROOT_CA_CONFIG_MAP = "kube-root-ca.crt"
SERVICE_ACCOUNT_KUBECONFIG = "kubeconfig"


def is_service_account_volume(volume: Manifest) -> bool:
    sources = (volume.get("projected") or {}).get("sources") or []
    return any("serviceAccountToken" in source for source in sources)


@dataclass(frozen=True)
class TokenSpec:
    """What one serviceAccountToken projection asks for."""

    path: str
    audience: str | None
    expiration_seconds: int


def token_specs(projected: Manifest) -> list[TokenSpec]:
    found = []
    for source in projected.get("sources") or []:
        token = source.get("serviceAccountToken")
        if token is not None:
            found.append(
                TokenSpec(
                    path=str(token.get("path", "token")),
                    audience=str(token["audience"]) if token.get("audience") else None,
                    expiration_seconds=int(token.get("expirationSeconds", 3600)),
                )
            )
    return found


def service_account_files(
    projected: Manifest,
    pod: Manifest,
    tokens: Mapping[str, str],
    lookup: SourceLookup,
    *,
    ca_pem: str,
    node_name: str,
    pod_ip: str = LOCAL_IP,
) -> dict[str, str]:
    """Relative path -> content of a service-account projected volume.

    `tokens` maps each token's path to the token obtained for it. The kube-root-ca.crt ConfigMap is
    published by a controller this cluster does not run, so when it is absent the runner's own CA bundle
    stands in for it.
    """
    namespace = str(pod.get("metadata", {}).get("namespace", "default"))
    files: dict[str, str] = {}
    for source in projected.get("sources") or []:
        if "serviceAccountToken" in source:
            path = str(source["serviceAccountToken"].get("path", "token"))
            files[path] = tokens[path]
        elif "configMap" in source:
            ref = source["configMap"]
            data = lookup.config_map(namespace, str(ref.get("name", "")))
            if data is None and ref.get("name") == ROOT_CA_CONFIG_MAP:
                data = {"ca.crt": ca_pem}
            if data is None:
                if ref.get("optional"):
                    continue
                raise EnvResolutionError(f'configmap "{ref.get("name", "")}" not found')
            files.update(projected_files(data, ref))
        elif "secret" in source:
            ref = source["secret"]
            data = lookup.secret(namespace, str(ref.get("name", "")))
            if data is None:
                if ref.get("optional"):
                    continue
                raise EnvResolutionError(f'secret "{ref.get("name", "")}" not found')
            files.update(projected_files(data, ref))
        elif "downwardAPI" in source:
            for item in source["downwardAPI"].get("items") or []:
                if "fieldRef" not in item:
                    raise EnvResolutionError("downwardAPI items other than fieldRef are not supported")
                field_path = str(item["fieldRef"]["fieldPath"])
                value = field_value(pod, field_path, node_name=node_name, pod_ip=pod_ip)
                files[str(item["path"])] = value
    return files


def service_account_kubeconfig(server: str, namespace: str, token_file: Path, ca_pem: str | None) -> Manifest:
    """A kubeconfig that reads the projected token file, as in-cluster configuration would."""
    cluster: Manifest = {"server": server}
    if ca_pem:
        cluster["certificate-authority-data"] = base64.b64encode(ca_pem.encode()).decode()
    else:
        cluster["insecure-skip-tls-verify"] = True
    return {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [{"name": "in-cluster", "cluster": cluster}],
        "users": [{"name": "service-account", "user": {"tokenFile": str(token_file)}}],
        "contexts": [
            {
                "name": "in-cluster",
                "context": {"cluster": "in-cluster", "user": "service-account", "namespace": namespace},
            }
        ],
        "current-context": "in-cluster",
    }


def kubeconfig_for_container(container: Manifest, volumes: Sequence[VolumePlan]) -> Path | None:
    """The kubeconfig of the first service-account volume this container mounts (its `KUBECONFIG`)."""
    by_name = {plan.name: plan for plan in volumes}
    for mount in container.get("volumeMounts", []):
        plan = by_name.get(str(mount["name"]))
        if plan is not None and plan.kind == "serviceAccount":
            return plan.host_dir / SERVICE_ACCOUNT_KUBECONFIG
    return None


@dataclass(frozen=True)
class Mount:
    mount_path: str
    host_path: Path


def container_mounts(container: Manifest, volumes: Sequence[VolumePlan]) -> list[Mount]:
    """The container's mounts, longest mount path first so nested mounts win when rewriting."""
    by_name = {plan.name: plan for plan in volumes}
    mounts: list[Mount] = []
    for mount in container.get("volumeMounts", []):
        plan = by_name.get(str(mount["name"]))
        if plan is None:
            continue
        host = plan.host_dir / str(mount["subPath"]) if mount.get("subPath") else plan.host_dir
        mounts.append(Mount(str(mount["mountPath"]).rstrip("/") or "/", host))
    return sorted(mounts, key=lambda m: len(m.mount_path), reverse=True)


def rewrite_path(value: str, mounts: Sequence[Mount]) -> str:
    """Maps an absolute in-container path under a mount to the host directory; other values unchanged."""
    for mount in mounts:
        if mount.mount_path == "/":
            continue
        if value == mount.mount_path or value.startswith(mount.mount_path + "/"):
            return str(mount.host_path) + value[len(mount.mount_path) :]
    return value


def rewrite_word(word: str, mounts: Sequence[Mount]) -> str:
    """Like rewrite_path, and also for the value part of `--flag=/mount/path`."""
    rewritten = rewrite_path(word, mounts)
    if rewritten != word or "=" not in word:
        return rewritten
    flag, _, value = word.partition("=")
    return f"{flag}={rewrite_path(value, mounts)}"


def container_argv(container: Manifest, env: Mapping[str, str], mounts: Sequence[Mount]) -> list[str]:
    """command + args with `$(VAR)` expanded and mount paths rewritten; empty when there is no command."""
    words = [*container.get("command", []), *container.get("args", [])]
    return [rewrite_word(expand_references(str(word), env), mounts) for word in words]


# ------------------------------------------------------------------------------------------- probes


@dataclass(frozen=True)
class Probe:
    """A container probe, with the kubelet's defaults filled in."""

    action: Literal["exec", "http", "tcp"]
    command: tuple[str, ...] = ()
    scheme: str = "HTTP"
    host: str = LOCAL_IP
    port: int = 0
    path: str = "/"
    headers: tuple[tuple[str, str], ...] = ()
    initial_delay_seconds: float = 0
    period_seconds: float = 10
    timeout_seconds: float = 1
    success_threshold: int = 1
    failure_threshold: int = 3


class ProbeError(ValueError):
    pass


# A test can run one pod's processes in a network namespace it made (to cut that pod off the network
# while the pod stays Running): the pod template carries `netns.e2e.staticfleet.io/<pod name>: <netns>`,
# and only the pod of that name runs in it. An annotation on the template reaches the pods through the
# StatefulSet unchanged, so neither the operator nor the resource needs to know; the runner is root.
NETNS_ANNOTATION_PREFIX = "netns.e2e.staticfleet.io/"

# Pods share this machine's network, so two pods cannot listen on one port. A pod template annotated
# `ip.e2e.staticfleet.io/own: "true"` gives each of its pods an address of its own instead, one of the
# loopback block (127.0.0.0/8 is all this machine's): status.podIP, the downward API and the probes say
# it, and a process that listens on it alone (the example consumer's READY_HOST) is reached there only,
# as in a pod network. The pods' other traffic is unchanged.
OWN_IP_ANNOTATION = "ip.e2e.staticfleet.io/own"
OWN_IP_BLOCK = ipaddress.ip_network("127.16.0.0/12")


def wants_own_ip(pod: Manifest) -> bool:
    annotations = pod.get("metadata", {}).get("annotations") or {}
    return str(annotations.get(OWN_IP_ANNOTATION, "")).lower() == "true"


class OwnIps:
    """Hands out the addresses of OWN_IP_BLOCK in turn, from a random start (a restarted runner does not
    hand out again the addresses its pods may still hold), never the block's first or last."""

    SIZE = OWN_IP_BLOCK.num_addresses - 2

    def __init__(self, start: int | None = None) -> None:
        self._next = (random.randrange(self.SIZE) if start is None else start) % self.SIZE

    def take(self) -> str:
        address = OWN_IP_BLOCK.network_address + 1 + self._next
        self._next = (self._next + 1) % self.SIZE
        return str(address)


def network_namespace(pod: Manifest) -> str | None:
    annotations = pod.get("metadata", {}).get("annotations") or {}
    name = annotations.get(NETNS_ANNOTATION_PREFIX + str(pod.get("metadata", {}).get("name", "")))
    return str(name) if name else None


def in_network_namespace(argv: list[str], netns: str | None) -> list[str]:
    """argv, run inside the named network namespace (`ip netns exec` execs it: the pid stays the same)."""
    return ["ip", "netns", "exec", netns, *argv] if netns and argv else argv


def _probe_port(port: Any, container: Manifest) -> int:
    if isinstance(port, int):
        return port
    text = str(port)
    if text.isdigit():
        return int(text)
    for declared in container.get("ports", []):
        if declared.get("name") == text:
            return int(declared["containerPort"])
    raise ProbeError(f"probe port {text!r} is not a number nor a named container port")


def parse_probe(probe: Manifest | None, container: Manifest, pod_ip: str = LOCAL_IP) -> Probe | None:
    """Turns a probe block (readinessProbe, livenessProbe, startupProbe) into a Probe; without a host of
    its own, a probe asks the pod's address, as a kubelet's does."""
    if not probe:
        return None
    timing: dict[str, Any] = {
        "initial_delay_seconds": float(probe.get("initialDelaySeconds", 0)),
        "period_seconds": float(probe.get("periodSeconds", 10)),
        "timeout_seconds": float(probe.get("timeoutSeconds", 1)),
        "success_threshold": int(probe.get("successThreshold", 1)),
        "failure_threshold": int(probe.get("failureThreshold", 3)),
    }
    if "exec" in probe:
        command = tuple(str(word) for word in probe["exec"].get("command", []))
        if not command:
            raise ProbeError("exec probe without a command")
        return Probe("exec", command=command, **timing)
    if "httpGet" in probe:
        http = probe["httpGet"]
        headers = tuple((str(h["name"]), str(h["value"])) for h in http.get("httpHeaders", []))
        return Probe(
            "http",
            scheme=str(http.get("scheme", "HTTP")).upper(),
            host=str(http.get("host") or pod_ip),
            port=_probe_port(http.get("port"), container),
            path=str(http.get("path", "/")) or "/",
            headers=headers,
            **timing,
        )
    if "tcpSocket" in probe:
        tcp = probe["tcpSocket"]
        return Probe(
            "tcp", host=str(tcp.get("host") or pod_ip), port=_probe_port(tcp["port"], container), **timing
        )
    if "grpc" in probe:
        # No gRPC health client here: an open port is the closest local meaning.
        return Probe("tcp", host=pod_ip, port=_probe_port(probe["grpc"]["port"], container), **timing)
    raise ProbeError(f"probe has no supported action: {sorted(probe)}")


def probe_url(probe: Probe) -> str:
    path = probe.path if probe.path.startswith("/") else "/" + probe.path
    return f"{probe.scheme.lower()}://{probe.host}:{probe.port}{path}"


# ------------------------------------------------------------------------------------------ restarts


def should_restart(restart_policy: str, exit_code: int) -> bool:
    if restart_policy == "Never":
        return False
    if restart_policy == "OnFailure":
        return exit_code != 0
    return True


def restart_delay(restart_count: int, *, base_seconds: float, cap_seconds: float) -> float:
    """Crash-loop backoff: base, 2*base, 4*base, ... capped (the kubelet uses 10 s doubling to 300 s)."""
    if restart_count <= 0:
        return 0.0
    return float(min(cap_seconds, base_seconds * (2 ** (restart_count - 1))))


def termination_grace_seconds(pod: Manifest) -> float:
    """deletionGracePeriodSeconds once the pod is being deleted, else the spec's value, else 30."""
    metadata = pod.get("metadata", {})
    if metadata.get("deletionGracePeriodSeconds") is not None:
        return float(metadata["deletionGracePeriodSeconds"])
    spec_value = pod.get("spec", {}).get("terminationGracePeriodSeconds")
    return float(spec_value) if spec_value is not None else 30.0


def schedulable_here(pod: Manifest, node_labels: Mapping[str, str]) -> bool:
    """An unbound pod meant for the default scheduler whose nodeSelector this node satisfies."""
    spec = pod.get("spec", {})
    if spec.get("nodeName") or pod.get("metadata", {}).get("deletionTimestamp"):
        return False
    if spec.get("schedulerName", "default-scheduler") not in ("", "default-scheduler"):
        return False
    if pod.get("status", {}).get("phase") in ("Succeeded", "Failed"):
        return False
    selector: Mapping[str, str] = spec.get("nodeSelector") or {}
    return all(node_labels.get(key) == value for key, value in selector.items())
