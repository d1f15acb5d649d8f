"""The demo's workloads as manifests (pure functions): the consumer fleet and the producer.

On the local pod runner containers run as processes of this machine, so their commands name the
scripts in this repository; on any other cluster they name the scripts in the image (the repository's
Dockerfile puts them in /app).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

REPO_ROOT = Path(__file__).resolve().parents[2]
FLEET = "orders"
TOPIC = "orders"
PARTITIONS = 6
PRODUCER = "producer"
IMAGE_APP_DIR = Path("/app")

Manifest = dict[str, Any]

# The three kinds of fleet the demo and bench/fleet_ops.py run side by side. All three are the same
# StaticConsumerGroup of the same consumer, so they get the same StatefulSet, pods and rollout; they differ
# only in the consumer's membership (examples/consumer: KAFKA_MEMBERSHIP) and in the operator's help.
STATICFLEET = "staticfleet"
PLAIN_STATIC = "plain static"
PLAIN_DYNAMIC = "plain dynamic"
FLEET_KINDS = (STATICFLEET, PLAIN_STATIC, PLAIN_DYNAMIC)
_NO_OPERATOR_HELP: Manifest = {
    "scaleDown": {"removeMembers": "AfterSessionTimeout"},
    "scaleUp": {"preRegister": False},
}
_KIND_SPEC: dict[str, Manifest] = {
    STATICFLEET: {"scaleDown": {"removeMembers": "Immediate"}, "scaleUp": {"preRegister": True}},
    PLAIN_STATIC: _NO_OPERATOR_HELP,
    PLAIN_DYNAMIC: _NO_OPERATOR_HELP,
}


def kind_spec(kind: str) -> Manifest:
    """The resource's scale settings for a fleet kind: staticfleet's defaults, or no removal and no
    pre-registration (what the consumers' own membership gives without the operator)."""
    return {key: dict(value) for key, value in _KIND_SPEC[kind].items()}


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


def script(name: str, *, local: bool) -> str:
    """Path of an example script (consumer.py, producer.py) as the container sees it."""
    stem = name.removesuffix(".py")
    return str(REPO_ROOT / "examples" / stem / name) if local else str(IMAGE_APP_DIR / name)


def _ready_probe() -> Manifest:
    return {"exec": {"command": ["test", "-f", "/scratch/ready"]}, "periodSeconds": 1}


def consumer_pod_template(command: list[str], *, image: str, grace_seconds: int = 10) -> Manifest:
    """The example consumer's pod: partition state under /state (the `state` claim), Ready once the
    consumer writes /scratch/ready."""
    return {
        "spec": {
            "terminationGracePeriodSeconds": grace_seconds,
            "containers": [
                {
                    "name": "consumer",
                    "image": image,
                    "command": command,
                    "env": [
                        {"name": "STATE_DIR", "value": "/state"},
                        {"name": "READY_FILE", "value": "/scratch/ready"},
                    ],
                    "volumeMounts": [
                        {"name": "state", "mountPath": "/state"},
                        {"name": "scratch", "mountPath": "/scratch"},
                    ],
                    "readinessProbe": _ready_probe(),
                }
            ],
            "volumes": [{"name": "scratch", "emptyDir": {}}],
        }
    }


def consumer_fleet(
    replicas: int,
    *,
    image: str,
    local: bool,
    kind: str = STATICFLEET,
    session_timeout_ms: int = 30_000,
) -> Manifest:
    """A StaticConsumerGroup of the example consumer, keeping its per-partition state on a claim; `kind`
    chooses the consumer's membership and the operator's help (FLEET_KINDS), and the fleet's name."""
    template = consumer_pod_template(["python", script("consumer.py", local=local)], image=image)
    return {
        "apiVersion": "staticfleet.io/v1alpha1",
        "kind": "StaticConsumerGroup",
        "metadata": {"name": FLEET_NAMES[kind]},
        "spec": {
            "replicas": replicas,
            "topics": [TOPIC],
            "sessionTimeoutMs": session_timeout_ms,
            **kind_spec(kind),
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


def producer(bootstrap_servers: str, *, image: str, local: bool, rate: int) -> Manifest:
    """A Deployment writing `rate` messages per second to the topic (created with PARTITIONS partitions)."""
    labels = {"app.kubernetes.io/name": "staticfleet-demo-producer"}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": PRODUCER, "labels": labels},
        "spec": {
            "replicas": 1,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "terminationGracePeriodSeconds": 10,
                    "containers": [
                        {
                            "name": "producer",
                            "image": image,
                            "command": ["python", script("producer.py", local=local)],
                            "env": [
                                {"name": "KAFKA_BOOTSTRAP_SERVERS", "value": bootstrap_servers},
                                {"name": "TOPIC", "value": TOPIC},
                                {"name": "PARTITIONS", "value": str(PARTITIONS)},
                                {"name": "RATE", "value": str(rate)},
                                {"name": "READY_FILE", "value": "/scratch/ready"},
                            ],
                            "volumeMounts": [{"name": "scratch", "mountPath": "/scratch"}],
                            "readinessProbe": _ready_probe(),
                        }
                    ],
                    "volumes": [{"name": "scratch", "emptyDir": {}}],
                },
            },
        },
    }
