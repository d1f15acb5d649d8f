"""The operator's Prometheus metrics (docs/observability.md lists them all).

A fleet is named by the label `group`, its Kafka group.id, on every series about it, the embedded
coordinator's too, so that the two join on it; `staticfleet_fleet_info` adds where the fleet lives in
Kubernetes (`fleet_namespace`, `fleet_name`: not `namespace`, which Prometheus gives the scraped pod's).

The fleet gauges are read from each fleet's status as the operator last wrote it, so a deleted fleet's
series end with it and a replica that does not lead exports none.
"""

from __future__ import annotations

import contextlib
import threading
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector


@dataclass(frozen=True)
class FleetSnapshot:
    namespace: str
    name: str
    group: str
    replicas: int
    status: Mapping[str, Any]


def _condition_gauge(family: GaugeMetricFamily, group: str, conditions: Any) -> None:
    for found in conditions if isinstance(conditions, list) else []:
        if isinstance(found, Mapping) and found.get("type"):
            value = 1.0 if found.get("status") == "True" else 0.0
            family.add_metric([group, str(found["type"]), str(found.get("reason") or "")], value)


class _FleetCollector(Collector):
    def __init__(self) -> None:
        self.fleets: dict[tuple[str, str], FleetSnapshot] = {}
        self.lock = threading.Lock()

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        with self.lock:
            fleets = list(self.fleets.values())

        def gauge(name: str, help_text: str, labels: tuple[str, ...] = ("group",)) -> GaugeMetricFamily:
            return GaugeMetricFamily(name, help_text, labels=list(labels))

        info = gauge(
            "staticfleet_fleet_info",
            "1 for each fleet: its group and the StaticConsumerGroup's namespace and name",
            ("group", "fleet_namespace", "fleet_name"),
        )
        ready = gauge("staticfleet_fleet_ready", "1 while the fleet's Ready condition is True, else 0")
        conditions = gauge(
            "staticfleet_fleet_condition",
            "1 while the fleet's condition of this type holds (status True), else 0; reason as in the status",
            ("group", "type", "reason"),
        )
        replicas = gauge("staticfleet_fleet_replicas", "Consumers the fleet asks for (spec.replicas)")
        ready_replicas = gauge("staticfleet_fleet_ready_replicas", "Consumer pods that are ready")
        members = gauge("staticfleet_fleet_members", "Members of the fleet's group on its coordinator")
        rebalances = CounterMetricFamily(
            "staticfleet_fleet_rebalances",
            "Rebalances of the fleet's group, as its status counts them (from the embedded coordinator, "
            "or observed on any Kafka cluster)",
            labels=["group"],
        )
        lag = gauge(
            "staticfleet_fleet_lag_messages",
            "Messages the fleet's group has not committed yet, over its partitions with a committed offset",
        )
        worst = gauge(
            "staticfleet_fleet_max_partition_lag_messages", "The lag of the fleet's partition furthest behind"
        )
        for fleet in fleets:
            status, group = fleet.status, fleet.group
            info.add_metric([group, fleet.namespace, fleet.name], 1.0)
            found = [c for c in status.get("conditions") or [] if isinstance(c, Mapping)]
            is_ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in found)
            ready.add_metric([group], 1.0 if is_ready else 0.0)
            _condition_gauge(conditions, group, found)
            replicas.add_metric([group], float(fleet.replicas))
            ready_replicas.add_metric([group], float(status.get("readyReplicas") or 0))
            seen = status.get("group") or {}
            if isinstance(seen.get("members"), int):
                members.add_metric([group], float(seen["members"]))
            if isinstance(seen.get("rebalances"), int):
                rebalances.add_metric([group], float(seen["rebalances"]))
            measured = status.get("lag") or {}
            if isinstance(measured.get("total"), int):
                lag.add_metric([group], float(measured["total"]))
                furthest = (measured.get("worstPartition") or {}).get("lag")
                worst.add_metric([group], float(furthest or 0))
        yield from (info, ready, conditions, replicas, ready_replicas, members, rebalances, lag, worst)


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
            "Instance ids removed from a fleet's group by LeaveGroup (already-gone ones not counted)",
            ["group"],
            registry=self.registry,
        )
        self.removal_batches = Counter(
            "staticfleet_operator_removal_batches_total",
            "LeaveGroup batches sent for a fleet, by result (ok, failed)",
            ["group", "result"],
            registry=self.registry,
        )
        self.departure_handshakes = Counter(
            "staticfleet_operator_departure_handshakes_total",
            "Departure handshakes with departing pods, by result (sooner, unread, unanswered, refused)",
            ["group", "result"],
            registry=self.registry,
        )
        self.scale_operations = Counter(
            "staticfleet_operator_scale_operations_total",
            "Scale operations started on a fleet, by direction (Up, Down)",
            ["group", "direction"],
            registry=self.registry,
        )
        self.scale_duration = Histogram(
            "staticfleet_operator_scale_duration_seconds",
            "From the start of a scale operation to a Stable group of the new size, by direction",
            ["direction"],
            buckets=(1, 2, 5, 10, 20, 30, 60, 120, 300, 600, 1800),
            registry=self.registry,
        )
        self.leading = Gauge(
            "staticfleet_operator_leading",
            "1 while this replica acts (it holds the Lease, or runs without leader election), else 0",
            registry=self.registry,
        )
        self._fleets = _FleetCollector()
        self.registry.register(self._fleets)

    def observe_fleet(
        self, namespace: str, name: str, group: str, replicas: int, status: Mapping[str, Any]
    ) -> None:
        """The fleet's status as just written: the source of its staticfleet_fleet_* series."""
        with self._fleets.lock:
            self._fleets.fleets[(namespace, name)] = FleetSnapshot(namespace, name, group, replicas, status)

    def forget(self, namespace: str, name: str) -> None:
        """A deleted fleet's series end with it."""
        with self._fleets.lock:
            gone = self._fleets.fleets.pop((namespace, name), None)
        if gone is None:
            return
        children = [
            (self.members_removed, (gone.group,)),
            *((self.removal_batches, (gone.group, result)) for result in ("ok", "failed")),
            *((self.scale_operations, (gone.group, direction)) for direction in ("Up", "Down")),
            *(
                (self.departure_handshakes, (gone.group, r))
                for r in ("sooner", "unread", "unanswered", "refused")
            ),
        ]
        for counter, labels in children:
            with contextlib.suppress(KeyError):  # never counted
                counter.remove(*labels)
