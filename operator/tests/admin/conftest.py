"""Both kinds of cluster the admin path must work against: the embedded coordinator
(`staticfleet coordinator`, a subprocess on 127.0.0.1) and a real Apache Kafka broker (KRaft, jars from
Maven Central, provisioned by the conformance fixtures' code)."""

from __future__ import annotations

import asyncio
import itertools
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from confluent_kafka import Consumer
from kafka import KafkaAdminClient
from kafka.admin import NewTopic

from conformance.backends import Backend, KafkaBackend, StaticfleetBackend
from conformance.kafka_broker import GroupSettings

SETTINGS = GroupSettings(
    initial_rebalance_delay_ms=0, min_session_timeout_ms=1_000, max_session_timeout_ms=300_000
)
PARTITIONS = 4
_names = itertools.count()


def _started(backend: Backend) -> Backend:
    asyncio.run(backend.start())
    return backend


@pytest.fixture(scope="session")
def staticfleet_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Backend]:
    backend = _started(StaticfleetBackend(SETTINGS, tmp_path_factory.mktemp("staticfleet")))
    yield backend
    backend.stop()


@pytest.fixture(scope="session")
def kafka_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Backend]:
    backend = _started(KafkaBackend(SETTINGS, tmp_path_factory.mktemp("kafka")))
    yield backend
    backend.stop()


@pytest.fixture(params=["staticfleet", "kafka"])
def cluster(request: pytest.FixtureRequest) -> Backend:
    backend: Backend = request.getfixturevalue(f"{request.param}_cluster")
    return backend


def unique(prefix: str) -> str:
    return f"{prefix}-{next(_names)}-{int(time.time() * 1000) % 100000}"


def create_topic(bootstrap: str, topic: str, partitions: int = PARTITIONS) -> None:
    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(topic, partitions, 1)])
    finally:
        admin.close()


class StaticConsumer:
    """A confluent-kafka consumer with a group.instance.id, polled on its own thread."""

    def __init__(
        self, bootstrap: str, group: str, instance: str, topic: str, security: dict[str, Any] | None = None
    ) -> None:
        config: dict[str, Any] = {
            "bootstrap.servers": bootstrap,
            "group.id": group,
            "group.instance.id": instance,
            "session.timeout.ms": 60_000,
            "heartbeat.interval.ms": 500,
            "auto.offset.reset": "earliest",
            "log_level": 3,
            **(security or {}),
        }
        self.instance = instance
        self.assigned = threading.Event()
        self._stop = threading.Event()
        self._consumer = Consumer(config)
        self._consumer.subscribe([topic], on_assign=lambda c, parts: self.assigned.set())
        self._thread = threading.Thread(target=self._run, name=f"consumer-{instance}", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        while not self._stop.is_set():
            self._consumer.poll(0.1)

    def close(self) -> None:
        """Stops like a pod that goes away: a static member's close sends no LeaveGroup."""
        self._stop.set()
        self._thread.join(timeout=10)
        self._consumer.close()


@pytest.fixture
def consumers() -> Iterator[list[StaticConsumer]]:
    started: list[StaticConsumer] = []
    yield started
    for consumer in started:
        consumer.close()


def wait_for(probe: Any, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = probe()
        if last:
            return last
        time.sleep(0.2)
    raise TimeoutError(f"timed out after {timeout}s waiting for {what}; last: {last!r}")


def repo_root() -> Path:
    return Path(__file__).resolve().parents[3]
