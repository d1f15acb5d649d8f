"""Prometheus metrics of the embedded broker (one registry per server, so tests can run several)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily
from prometheus_client.registry import Collector

from staticfleet.broker import registry as kafka_apis
from staticfleet.broker.registry import KafkaApi
from staticfleet.coordinator import GroupCoordinator, GroupState
from staticfleet.coordinator import events as ev

_LATENCY_BUCKETS = (
    0.0005,
    0.001,
    0.0025,
    0.005,
    0.01,
    0.025,
    0.05,
    0.1,
    0.25,
    0.5,
    1,
    2.5,
    5,
    10,
    30,
    60,
    300,
)


class _GroupCollector(Collector):
    def __init__(self, coordinator: GroupCoordinator) -> None:
        self.coordinator = coordinator

    def collect(self) -> Iterator[GaugeMetricFamily]:
        by_state = GaugeMetricFamily("staticfleet_groups", "Consumer groups by state", labels=["state"])
        counts: dict[GroupState, int] = {state: 0 for state in GroupState if state is not GroupState.DEAD}
        members = GaugeMetricFamily("staticfleet_group_members", "Members of each group", labels=["group"])
        generation = GaugeMetricFamily(
            "staticfleet_group_generation", "Generation of each group", labels=["group"]
        )
        for group in list(self.coordinator.groups.values()):
            counts[group.state] = counts.get(group.state, 0) + 1
            members.add_metric([group.group_id], len(group.members))
            generation.add_metric([group.group_id], group.generation_id)
        for state, count in counts.items():
            by_state.add_metric([str(state)], count)
        yield by_state
        yield members
        yield generation


class _RequestCollector(Collector):
    def __init__(self, counts: dict[tuple[int, int, int], int]) -> None:
        self.counts = counts

    def collect(self) -> Iterator[CounterMetricFamily]:
        family = CounterMetricFamily(
            "staticfleet_requests",
            "Kafka requests handled, by API, version and error",
            labels=["api", "version", "error"],
        )
        for (key, version, error), count in sorted(self.counts.items()):
            family.add_metric([kafka_apis.title_of(key), str(version), str(error)], count)
        yield family


class BrokerMetrics:
    def __init__(self) -> None:
        self.registry = CollectorRegistry()
        # Request counts are kept in a plain dict on the hot path and exported at scrape time.
        self.request_counts: dict[tuple[int, int, int], int] = {}
        self._latency_of: dict[int, Any] = {}  # the histogram's child of each timed API, by key
        self.registry.register(_RequestCollector(self.request_counts))
        self.request_latency = Histogram(
            "staticfleet_request_latency_seconds",
            "Time from reading a JoinGroup or SyncGroup to answering it (parking included)",
            ["api"],
            buckets=_LATENCY_BUCKETS,
            registry=self.registry,
        )
        # By group (a fleet's group.id: the label the operator's fleet series carry too) and reason
        # (one of the few the event log documents); a deleted group's series go with it.
        self.rebalances = Counter(
            "staticfleet_rebalances",
            "Rebalances started, by group and reason",
            ["group", "reason"],
            registry=self.registry,
        )
        self.rebalances_completed = Counter(
            "staticfleet_rebalances_completed",
            "Rebalances completed (group Stable again, or Empty), by group",
            ["group"],
            registry=self.registry,
        )
        self._reasons_of: dict[str, set[str]] = {}
        self.static_restarts = Counter(
            "staticfleet_static_member_restarts_absorbed",
            "Static members that rejoined with a new member id without causing a rebalance",
            registry=self.registry,
        )
        self.member_events = Counter(
            "staticfleet_member_events", "Membership events by type", ["type"], registry=self.registry
        )
        self.log_append_latency = Histogram(
            "staticfleet_log_append_seconds",
            "Time to append one frame to the coordinator log (fsync not included)",
            buckets=_LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.log_fsync_latency = Histogram(
            "staticfleet_log_fsync_seconds",
            "Time of one group-commit fsync of the coordinator log",
            buckets=_LATENCY_BUCKETS,
            registry=self.registry,
        )
        self.connections = Counter(
            "staticfleet_connections_closed",
            "Connections closed, by reason",
            ["reason"],
            registry=self.registry,
        )

    def observe_request(self, api: KafkaApi[Any] | None, version: int, error: int, seconds: float) -> None:
        if api is None:
            return
        counted = (api.key, version, error)
        counts = self.request_counts
        counts[counted] = counts.get(counted, 0) + 1
        if api.timed:
            child = self._latency_of.get(api.key)
            if child is None:
                child = self._latency_of[api.key] = self.request_latency.labels(api.title)
            child.observe(seconds)

    def _forget(self, group: str) -> None:
        for reason in self._reasons_of.pop(group, set()):
            with contextlib.suppress(KeyError):
                self.rebalances.remove(group, reason)
        with contextlib.suppress(KeyError):
            self.rebalances_completed.remove(group)

    def watch(self, coordinator: GroupCoordinator) -> None:
        self.registry.register(_GroupCollector(coordinator))

    # An EventSink: membership events feed the counters.
    def emit(self, event: Mapping[str, Any]) -> None:
        kind, group = event.get("type"), str(event.get("group", ""))
        if kind == ev.REBALANCE_STARTED:
            reason = str(event.get("reason", ""))
            self._reasons_of.setdefault(group, set()).add(reason)
            self.rebalances.labels(group, reason).inc()
        elif kind in (ev.REBALANCE_COMPLETED, ev.GROUP_EMPTY):
            self.rebalances_completed.labels(group).inc()
        elif kind == ev.GROUP_DELETED:
            self._forget(group)
        elif kind == ev.STATIC_MEMBER_REPLACED and not event.get("rebalance"):
            self.static_restarts.inc()
        if kind in (ev.MEMBER_JOINED, ev.MEMBER_LEFT, ev.MEMBER_REMOVED, ev.MEMBER_EXPIRED, ev.MEMBER_FENCED):
            self.member_events.labels(str(kind)).inc()
