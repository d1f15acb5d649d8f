"""The demo's workloads as manifests (pure functions): the consumer fleet and the producer.

On the local pod runner containers run as processes of this machine, so their commands name the
scripts in this repository; on any other cluster they name the scripts in the image (the repository's
Dockerfile puts them in /app).
"""

from __future__ import annotations

import base64
import json
import math
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from staticfleet.kube.access import FleetAccess

REPO_ROOT = Path(__file__).resolve().parents[2]
FLEET = "orders"
TOPIC = "orders"
PARTITIONS = 6
PRODUCER = "producer"
IMAGE_APP_DIR = Path("/app")

Manifest = dict[str, Any]

# The three kinds of fleet the demo and bench/fleet_ops.py run side by side, with the same consumer, pod
# template and StatefulSet:
# - staticfleet: a StaticConsumerGroup with the operator's defaults (removal, pre-registration);
# - plain static: the StatefulSet the operator would build, created as it is and operated by nobody
#   (static members by pod name; departed members expire after the session timeout);
# - plain dynamic: the same plain StatefulSet with the consumer in dynamic membership (KAFKA_MEMBERSHIP).
STATICFLEET = "staticfleet"
PLAIN_STATIC = "plain static"
PLAIN_DYNAMIC = "plain dynamic"
FLEET_KINDS = (STATICFLEET, PLAIN_STATIC, PLAIN_DYNAMIC)
MANAGED_BY = "app.kubernetes.io/managed-by"
# The label the chart's NetworkPolicy lets through to the coordinator's Kafka port (producers, plain fleets).
KAFKA_CLIENT_LABEL = "staticfleet.io/kafka-client"
HEARTBEAT_ENV = "KAFKA_HEARTBEAT_INTERVAL_MS"
CLIENT_HEARTBEAT_MS = 3_000  # librdkafka's heartbeat.interval.ms default
# The fleets' session timeout: Kafka's and librdkafka's default, short enough for the plain static fleet's
# scale-down (which waits it out) to fit the demo, long enough that a pod replaced by a rollout on a busy
# node (three fleets rolling at once on two cores) comes back within it.
SESSION_TIMEOUT_MS = 45_000


def operated(kind: str) -> bool:
    """Whether the operator runs this kind of fleet (a StaticConsumerGroup) or nobody does (a StatefulSet)."""
    return kind == STATICFLEET


def plain_workload(
    resource: Manifest, namespace: str, bootstrap_servers: str, access: FleetAccess | None = None
) -> list[Manifest]:
    """The headless Service and StatefulSet the operator builds for `resource` (its own builders), as
    plain objects: no owner, without the label the operator watches for, and with the one that lets a
    Kafka client through the chart's NetworkPolicy. With `access`, the pods log
    in as that user, from its Secret, as a provisioned fleet's do (the demo makes both: plain_access)."""
    from staticfleet.kube import builders
    from staticfleet.kube.spec import parse_group

    body = {**resource, "metadata": {**resource["metadata"], "namespace": namespace}}
    spec = parse_group(body)
    statefulset = builders.statefulset(spec, bootstrap_servers, spec.replicas, access)
    objects = [builders.headless_service(spec), statefulset]
    for found in objects:
        found["metadata"].pop("ownerReferences", None)
        found["metadata"].get("labels", {}).pop(MANAGED_BY, None)
        template = found.get("spec", {}).get("template")
        if template is None:
            continue
        pod_labels = template.setdefault("metadata", {}).setdefault("labels", {})
        pod_labels.pop(MANAGED_BY, None)
        # Not the operator's: the chart's NetworkPolicy lets it reach the coordinator as a Kafka client.
        pod_labels[KAFKA_CLIENT_LABEL] = "true"
        if "heartbeatIntervalMs" not in resource["spec"]:
            # The operator's heartbeat default is its help too: a plain fleet runs the client's own.
            for container in template["spec"]["containers"]:
                container["env"] = [e for e in container["env"] if e["name"] != HEARTBEAT_ENV]
    return objects


@dataclass(frozen=True)
class PlainLogin:
    """A plain fleet's own Kafka user: its Secret (manifest), password and ACLs."""

    access: FleetAccess
    secret: Manifest
    password: str
    acls: tuple[tuple[str, str, str, str, str], ...]
    """(resource type, name, principal, operation, pattern type) of each ACL, as AclBinding takes them."""

    def grant_request(self) -> str:
        """What incluster.GRANT_SCRIPT reads on stdin: the user, its mechanism and password, its ACLs."""
        return json.dumps(
            {
                "user": self.access.user,
                "mechanism": self.access.mechanism,
                "password": self.password,
                "acls": [list(acl) for acl in self.acls],
            }
        )


def plain_access(resource: Manifest, namespace: str, ca: bytes | None) -> PlainLogin:
    """A plain fleet's own SCRAM user (`demo.<namespace>.<name>`), its Secret `<name>-kafka-user` with a
    fresh password, and exactly the ACLs of a consumer of its group (the operator's fleet_acls): what the
    operator would provision, made by the demo as the chart's admin for a fleet nobody operates."""
    from staticfleet.kube import access as provisioning
    from staticfleet.kube.spec import parse_group

    spec = parse_group({**resource, "metadata": {**resource["metadata"], "namespace": namespace}})
    login = provisioning.FleetAccess(
        f"demo.{namespace}.{spec.name}",
        f"{spec.name}{provisioning.SECRET_SUFFIX}",
        provisioning.DEFAULT_FLEET_MECHANISM,
        "SASL_SSL",
        ca,
    )
    password = provisioning.new_password()
    data = provisioning.secret_data(login, password)
    secret = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": login.secret_name, "labels": {"app.kubernetes.io/name": "staticfleet-demo"}},
        "type": "Opaque",
        "data": {k: base64.b64encode(v).decode() for k, v in data.items()},
    }
    acls = tuple(
        sorted(
            (a.resource_type, a.name, a.principal, a.operation, a.pattern)
            for a in provisioning.fleet_acls(spec, login.principal)
        )
    )
    return PlainLogin(login, secret, password, acls)


def tenancy_policy(name: str, namespace: str, topics: list[str]) -> Manifest:
    """A StaticFleetTenancyPolicy letting one namespace's fleets read `topics` (docs/security.md#tenancy)."""
    return {
        "apiVersion": "staticfleet.io/v1alpha1",
        "kind": "StaticFleetTenancyPolicy",
        "metadata": {"name": name[:63]},
        "spec": {
            "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": namespace}},
            "topics": [{"name": t} for t in topics],
        },
    }


def membership(kind: str) -> str:
    """The consumer's KAFKA_MEMBERSHIP for a fleet kind."""
    return "dynamic" if kind == PLAIN_DYNAMIC else "static"


def with_membership(template: Manifest, kind: str) -> Manifest:
    """The pod template with the consumer container told its membership."""
    containers = template["spec"]["containers"]
    first = {**containers[0], "env": [*containers[0].get("env", []), membership_env(kind)]}
    return {**template, "spec": {**template["spec"], "containers": [first, *containers[1:]]}}


def membership_env(kind: str) -> Manifest:
    return {"name": "KAFKA_MEMBERSHIP", "value": membership(kind)}


FLEET_NAMES = {STATICFLEET: FLEET, PLAIN_STATIC: f"{FLEET}-static", PLAIN_DYNAMIC: f"{FLEET}-dynamic"}


@dataclass(frozen=True)
class GroupView:
    """A fleet's consumer group as its coordinator describes it, as much as tells an operation over."""

    state: str  # PreparingRebalance while a rebalance runs, whatever the group's state
    members: tuple[str, ...]  # instance ids of static members, member ids of dynamic ones
    assigned: bool  # every member holds an assignment

    @classmethod
    def from_json(cls, data: Mapping[str, Any]) -> GroupView:
        """From the embedded coordinator's `/api/groups/{id}`."""
        members = data.get("memberList") or []
        return cls(
            state="PreparingRebalance" if data.get("rebalanceInProgress") else str(data.get("state")),
            members=tuple(str(m.get("instanceId") or m.get("memberId")) for m in members),
            assigned=all(m.get("partitions") for m in members),
        )


def expected_members(name: str, kind: str, replicas: int) -> frozenset[str] | int:
    """The members a settled fleet `name` of `replicas` pods has: its pods' instance ids, or for dynamic
    members only their number."""
    if membership(kind) == "dynamic":
        return replicas
    return frozenset(f"{name}-{i}" for i in range(replicas))


def group_settled(view: GroupView | None, expected: frozenset[str] | int) -> bool:
    """Stable with exactly the `expected` members (instance ids, or a number of dynamic members), each
    assigned."""
    if view is None or view.state != "Stable" or not view.assigned:
        return False
    if isinstance(expected, int):
        return len(view.members) == expected
    return frozenset(view.members) == expected


def script(name: str, *, local: bool) -> str:
    """Path of an example script (consumer.py, producer.py) as the container sees it."""
    stem = name.removesuffix(".py")
    return str(REPO_ROOT / "examples" / stem / name) if local else str(IMAGE_APP_DIR / name)


# The example consumer's readiness over HTTP (READY_PORT), and the operator's departure handshake on the
# same port, which the container names `departure` so that the operator finds it.
READY_PORT = 8080
DEPARTURE_PORT_NAME = "departure"
# The local pod runner's pods share this machine's network: annotated so, each gets a loopback address of
# its own (e2e/localcluster/podspec.py), which the consumer listens on (READY_HOST).
OWN_IP_ANNOTATION = "ip.e2e.staticfleet.io/own"


def ready_probe(http_port: int | None = None) -> Manifest:
    """Every second: an httpGet on `http_port`, which the kubelet makes itself, or else an exec probe of the
    ready file, which starts a process in the container each time."""
    if http_port is not None:
        return {"httpGet": {"path": "/ready", "port": http_port}, "periodSeconds": 1}
    return {"exec": {"command": ["test", "-f", "/scratch/ready"]}, "periodSeconds": 1}


def consumer_pod_template(
    command: list[str],
    *,
    image: str,
    grace_seconds: int = 10,
    ready_port: int | None = READY_PORT,
    own_address: bool = False,
) -> Manifest:
    """The example consumer's pod: partition state under /state (the `state` claim), Ready once the
    consumer answers /ready on `ready_port` (where it also answers the departure handshake), or else
    writes /scratch/ready. `own_address`: for the local pod runner, a pod address of its own to listen on."""
    env: list[Manifest] = [
        {"name": "STATE_DIR", "value": "/state"},
        {"name": "READY_FILE", "value": "/scratch/ready"},
    ]
    container: Manifest = {"name": "consumer", "image": image, "command": command}
    if ready_port is not None:
        env.append({"name": "READY_PORT", "value": str(ready_port)})
        if own_address:
            env.append({"name": "READY_HOST", "valueFrom": {"fieldRef": {"fieldPath": "status.podIP"}}})
        container["ports"] = [{"name": DEPARTURE_PORT_NAME, "containerPort": ready_port}]
    template: Manifest = {
        "spec": {
            "terminationGracePeriodSeconds": grace_seconds,
            "containers": [
                {
                    **container,
                    "env": env,
                    "volumeMounts": [
                        {"name": "state", "mountPath": "/state"},
                        {"name": "scratch", "mountPath": "/scratch"},
                    ],
                    "readinessProbe": ready_probe(ready_port),
                }
            ],
            "volumes": [{"name": "scratch", "emptyDir": {}}],
        }
    }
    if own_address:
        template["metadata"] = {"annotations": {OWN_IP_ANNOTATION: "true"}}
    return template


def consumer_fleet(
    replicas: int,
    *,
    image: str,
    local: bool,
    kind: str = STATICFLEET,
    session_timeout_ms: int = SESSION_TIMEOUT_MS,
) -> Manifest:
    """A StaticConsumerGroup of the example consumer, keeping its per-partition state on a claim; `kind`
    chooses the consumer's membership and the fleet's name (FLEET_KINDS). The plain kinds run as
    plain_workload(this resource)."""
    template = consumer_pod_template(
        ["python", script("consumer.py", local=local)], image=image, own_address=local
    )
    return {
        "apiVersion": "staticfleet.io/v1alpha1",
        "kind": "StaticConsumerGroup",
        "metadata": {"name": FLEET_NAMES[kind]},
        "spec": {
            "replicas": replicas,
            "topics": [TOPIC],
            "sessionTimeoutMs": session_timeout_ms,
            "template": with_membership(template, kind),
            "volumeClaimTemplates": [
                {
                    "metadata": {"name": "state"},
                    "spec": {
                        "accessModes": ["ReadWriteOnce"],
                        "resources": {"requests": {"storage": "64Mi"}},
                    },
                }
            ],
            "persistentVolumeClaimRetentionPolicy": {"whenScaled": "Retain", "whenDeleted": "Delete"},
        },
    }


@dataclass(frozen=True)
class ProducerLogin:
    """How the producer logs in: a Secret with `username`, `password` and `mechanism` (the chart's admin),
    and the ca.crt of another (the coordinator's certificate)."""

    secret: str
    ca_secret: str
    protocol: str = "SASL_SSL"


def producer(
    bootstrap_servers: str, *, image: str, local: bool, rate: int, login: ProducerLogin | None = None
) -> Manifest:
    """A Deployment writing `rate` messages per second to the topic (created with PARTITIONS partitions)."""
    labels = {"app.kubernetes.io/name": "staticfleet-demo-producer"}
    env: list[Manifest] = [
        {"name": "KAFKA_BOOTSTRAP_SERVERS", "value": bootstrap_servers},
        {"name": "TOPIC", "value": TOPIC},
        {"name": "PARTITIONS", "value": str(PARTITIONS)},
        {"name": "RATE", "value": str(rate)},
        {"name": "READY_FILE", "value": "/scratch/ready"},
    ]
    mounts: list[Manifest] = [{"name": "scratch", "mountPath": "/scratch"}]
    volumes: list[Manifest] = [{"name": "scratch", "emptyDir": {}}]
    if login is not None:
        env += [{"name": "KAFKA_SECURITY_PROTOCOL", "value": login.protocol}]
        env += [
            {"name": name, "valueFrom": {"secretKeyRef": {"name": login.secret, "key": key}}}
            for name, key in (
                ("KAFKA_SASL_MECHANISM", "mechanism"),
                ("KAFKA_SASL_USERNAME", "username"),
                ("KAFKA_SASL_PASSWORD", "password"),
            )
        ]
        env.append({"name": "KAFKA_SSL_CA_LOCATION", "value": "/etc/kafka-ca/ca.crt"})
        mounts.append({"name": "kafka-ca", "mountPath": "/etc/kafka-ca", "readOnly": True})
        items = [{"key": "ca.crt", "path": "ca.crt"}]
        volumes.append({"name": "kafka-ca", "secret": {"secretName": login.ca_secret, "items": items}})
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": PRODUCER, "labels": labels},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {
                # Through the chart's NetworkPolicy (labels narrow who can try; SASL decides who may).
                "metadata": {"labels": {**labels, KAFKA_CLIENT_LABEL: "true"}},
                "spec": {
                    "terminationGracePeriodSeconds": 10,
                    "containers": [
                        {
                            "name": "producer",
                            "image": image,
                            "command": ["python", script("producer.py", local=local)],
                            "env": env,
                            "volumeMounts": mounts,
                            "readinessProbe": ready_probe(),
                        }
                    ],
                    "volumes": volumes,
                },
            },
        },
    }


# Members learn of a rebalance from their next heartbeat, and their heartbeats keep the phase of the
# group's last rebalance: where in that cycle a scale command lands decides how long its rebalance waits.


def cycle_moment(origin_s: float, now_s: float, cycle_s: float, fraction: float) -> float:
    """The first moment from `now_s` on that lies `fraction` of a cycle past a multiple of `cycle_s` from
    `origin_s`."""
    cycles = math.ceil((now_s - origin_s) / cycle_s - fraction)
    return origin_s + (cycles + fraction) * cycle_s


def heartbeat_ms(statefulset: Mapping[str, Any]) -> int:
    """The consumers' heartbeat interval: the one the pod template sets, else the client's default."""
    for container in statefulset.get("spec", {}).get("template", {}).get("spec", {}).get("containers", []):
        for env in container.get("env", []) or []:
            if env.get("name") == HEARTBEAT_ENV and str(env.get("value", "")).isdigit():
                return int(env["value"])
    return CLIENT_HEARTBEAT_MS


def last_rebalance_at(group: Mapping[str, Any] | None) -> float | None:
    """When the group's last rebalance completed (epoch seconds), from the coordinator's group JSON."""
    completed = ((group or {}).get("lastRebalance") or {}).get("completedMs")
    return int(completed) / 1000 if completed else None
