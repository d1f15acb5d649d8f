"""The operator's Prometheus metrics."""

from __future__ import annotations

import contextlib

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram


class OperatorMetrics:
    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        self.reconciles = Counter(
            "staticfleet_operator_reconciles_total",
            "Reconcile passes, by result (ok, error, conflict, invalid)",
            ["result"],
            registry=self.registry,
        )
        self.members_removed = Counter(
            "staticfleet_operator_members_removed_total",
            "Instance ids removed from groups by LeaveGroup (already-gone ones not counted)",
            registry=self.registry,
        )
        self.removal_batches = Counter(
            "staticfleet_operator_removal_batches_total",
            "LeaveGroup batches sent, by result (ok, failed)",
            ["result"],
            registry=self.registry,
        )
        self.scale_operations = Counter(
            "staticfleet_operator_scale_operations_total",
            "Scale operations started, by direction",
            ["direction"],
            registry=self.registry,
        )
        self.scale_duration = Histogram(
            "staticfleet_operator_scale_duration_seconds",
            "From the start of a scale operation to a Stable group of the new size, by direction",
            ["direction"],
            buckets=(1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1800),
            registry=self.registry,
        )
        self.lag = Gauge(
            "staticfleet_operator_consumer_lag",
            "Messages a fleet's group has not committed yet, summed over its partitions",
            ["namespace", "name"],
            registry=self.registry,
        )
        self.lag_max = Gauge(
            "staticfleet_operator_consumer_lag_max",
            "The lag of a fleet's partition furthest behind",
            ["namespace", "name"],
            registry=self.registry,
        )

    def set_lag(self, namespace: str, name: str, total: int, worst: int) -> None:
        self.lag.labels(namespace, name).set(total)
        self.lag_max.labels(namespace, name).set(worst)

    def forget(self, namespace: str, name: str) -> None:
        """A deleted fleet's series end with it."""
        for gauge in (self.lag, self.lag_max):
            with contextlib.suppress(KeyError):  # never set: no lag was read
                gauge.remove(namespace, name)
