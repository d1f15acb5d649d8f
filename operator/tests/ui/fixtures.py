"""Plain-dict resources, pods and Events, and group descriptions, for the dashboard's unit tests."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from staticfleet.admin.model import GroupDescription, MemberDescription, Node, PartitionOffsets

T0 = 1_790_000_000_000  # an epoch ms, 2026


def iso(ms: int, fraction: bool = False) -> str:
    moment = datetime.fromtimestamp(ms / 1000, tz=UTC)
    return moment.strftime("%Y-%m-%dT%H:%M:%S.%fZ" if fraction else "%Y-%m-%dT%H:%M:%SZ")


def fleet(name: str = "orders", namespace: str = "shop", replicas: int = 2, **status: Any) -> dict[str, Any]:
    return {
        "apiVersion": "staticfleet.io/v1alpha1",
        "kind": "StaticConsumerGroup",
        "metadata": {"name": name, "namespace": namespace, "uid": "u1", "creationTimestamp": iso(T0)},
        "spec": {
            "replicas": replicas,
            "topics": ["orders"],
            "kafka": {"bootstrapServers": "kafka:9092"},
            "template": {"spec": {"containers": [{"name": "c", "image": "i"}]}},
        },
        "status": {"readyReplicas": replicas, **status},
    }


def pod(
    fleet_name: str, ordinal: int, *, ip: str = "10.0.0.1", restarts: int = 0, exit_code: int | None = None
) -> dict[str, Any]:
    status: dict[str, Any] = {"restartCount": restarts, "ready": True}
    if exit_code is not None:
        status["lastState"] = {"terminated": {"exitCode": exit_code, "finishedAt": iso(T0)}}
    return {
        "metadata": {
            "name": f"{fleet_name}-{ordinal}",
            "labels": {"apps.kubernetes.io/pod-index": str(ordinal)},
        },
        "status": {
            "phase": "Running",
            "podIP": ip,
            "conditions": [{"type": "Ready", "status": "True"}],
            "containerStatuses": [status],
        },
    }


def member(instance: str, host: str, partitions: dict[str, list[int]] | None) -> MemberDescription:
    return MemberDescription(f"{instance}-m", instance, "client", f"/{host}", partitions)


def group(*members: MemberDescription, state: str = "Stable") -> GroupDescription:
    return GroupDescription("shop.orders", state, "consumer", "range", tuple(members), Node(1, "kafka", 9092))


def event(reason: str, message: str, at_ms: int, type_: str = "Normal") -> dict[str, Any]:
    return {"reason": reason, "message": message, "type": type_, "eventTime": iso(at_ms, fraction=True)}


def offsets(*rows: tuple[str, int, int | None, int | None]) -> tuple[PartitionOffsets, ...]:
    return tuple(PartitionOffsets(t, p, c, e) for t, p, c, e in rows)
