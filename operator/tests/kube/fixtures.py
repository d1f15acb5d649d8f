"""Sample resources for the kube unit tests."""

from __future__ import annotations

import copy
from typing import Any

from staticfleet.kube.spec import GroupSpec, OperatorDefaults, parse_group


def resource(**spec: Any) -> dict[str, Any]:
    body: dict[str, Any] = {
        "apiVersion": "staticfleet.io/v1alpha1",
        "kind": "StaticConsumerGroup",
        "metadata": {
            "name": "orders",
            "namespace": "shop",
            "uid": "uid-1",
            "generation": 1,
            "creationTimestamp": "2026-11-22T10:00:00Z",
            "labels": {"team": "payments", "app.kubernetes.io/name": "user-value"},
        },
        "spec": {
            "replicas": 3,
            "topics": ["orders", "refunds"],
            "kafka": {"bootstrapServers": "kafka:9092"},
            "template": {
                "metadata": {"labels": {"tier": "backend"}},
                "spec": {
                    "containers": [
                        {
                            "name": "consumer",
                            "image": "example/consumer:1",
                            "env": [
                                {"name": "LOG_LEVEL", "value": "debug"},
                                {"name": "KAFKA_GROUP_ID", "value": "user-tried-to-override"},
                            ],
                        }
                    ]
                },
            },
        },
    }
    body["spec"].update(copy.deepcopy(spec))
    return body


def group_spec(defaults: OperatorDefaults | None = None, **spec: Any) -> GroupSpec:
    return parse_group(resource(**spec), defaults)
