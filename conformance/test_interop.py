"""Kafka's own tools against each backend, with real kafka-python consumers using static membership.

* the consumer-group command (`--describe --members --verbose`) lists both static members with their
  group.instance.id and one partition each;
* `Admin.removeMembersFromConsumerGroup` removes a stopped member by instance id (NONE) and reports an
  unknown instance id as UnknownMemberIdException; the remaining member gets every partition.
"""

from __future__ import annotations

import asyncio
import threading
import time
import uuid
from collections.abc import Iterator

import pytest

from conformance import driver as d
from conformance.backends import KAFKA, STATICFLEET, Backend, staticfleet_coordinator_available
from conformance.interop import describe_members, remove_members
from conformance.runner import ConformanceRun
from conformance.scenario import DEFAULT

TOPIC = "interop"
WAIT_S = 60.0

# kafka-python loads its protocol schemas with importlib.resources calls that Python 3.11 deprecates.
pytestmark = pytest.mark.filterwarnings("ignore:.*is deprecated. Use files\\(\\) instead:DeprecationWarning")


class StaticConsumer:
    """A kafka-python consumer with a group.instance.id, polling in a thread until stopped."""

    def __init__(self, bootstrap: str, group: str, instance_id: str) -> None:
        from kafka import KafkaConsumer

        self.instance_id = instance_id
        self._stop = threading.Event()
        self._consumer = KafkaConsumer(
            TOPIC,
            bootstrap_servers=bootstrap,
            group_id=group,
            group_instance_id=instance_id,
            client_id=instance_id,
            # The backends' largest: the member must outlive the JVM start of the tool that removes it,
            # which a loaded machine has taken past 10 s.
            session_timeout_ms=30_000,
            heartbeat_interval_ms=500,
            auto_offset_reset="earliest",
        )
        # The topic's metadata before the first join: see run_kafka_python in
        # operator/tests/broker/consumer_process.py for the kafka-python 3.0.x race this avoids.
        self._consumer.topics()
        self._thread = threading.Thread(target=self._poll, name=f"consumer-{instance_id}", daemon=True)
        self._thread.start()

    def _poll(self) -> None:
        while not self._stop.is_set():
            self._consumer.poll(timeout_ms=200)

    def stop(self) -> None:
        """Stops polling and closes; a static member sends no LeaveGroup, so it stays in the group."""
        self._stop.set()
        self._thread.join(timeout=30)
        self._consumer.close(autocommit=False)


def _backend(run: ConformanceRun, kind: str) -> Backend:
    return run.loop.run_until_complete(run.pool.shared(kind, DEFAULT))


def _describe(backend: Backend, group: str) -> d.GroupDescription:
    async def go() -> d.GroupDescription:
        async with d.Driver(backend.host, backend.port) as driver:
            connection = await driver.connect("interop")
            return d.GroupDescription.of(await connection.request(d.describe_groups(5, group)))

    return asyncio.run(go())


def _wait_for(backend: Backend, group: str, instances: set[str]) -> d.GroupDescription:
    deadline = time.monotonic() + WAIT_S
    while True:
        description = _describe(backend, group)
        present = {m.instance_id for m in description.members}
        if description.state == "Stable" and present == instances:
            return description
        if time.monotonic() > deadline:
            raise TimeoutError(f"group {description.state} with {present}, expected Stable with {instances}")
        time.sleep(0.2)


@pytest.fixture
def consumers(request: pytest.FixtureRequest) -> Iterator[list[StaticConsumer]]:
    started: list[StaticConsumer] = []
    yield started
    for consumer in started:
        consumer.stop()


@pytest.mark.parametrize("backend_kind", [KAFKA, STATICFLEET])
def test_consumer_group_command_and_remove_members(
    backend_kind: str, conformance_run: ConformanceRun, consumers: list[StaticConsumer]
) -> None:
    if backend_kind == STATICFLEET and not staticfleet_coordinator_available():
        pytest.skip("not run: the `staticfleet coordinator` command does not exist yet")
    backend = _backend(conformance_run, backend_kind)

    async def create_topic() -> None:
        async with d.Driver(backend.host, backend.port) as driver:
            await d.ensure_topic(await driver.connect("interop"), TOPIC, 2)

    asyncio.run(create_topic())
    group = f"interop-{uuid.uuid4().hex[:8]}"
    for instance in ("pod-0", "pod-1"):
        consumers.append(StaticConsumer(backend.bootstrap, group, instance))
    _wait_for(backend, group, {"pod-0", "pod-1"})

    run, rows = describe_members(backend.bootstrap, group)
    assert run.returncode == 0, run.stderr
    assert {r.instance_id for r in rows} == {"pod-0", "pod-1"}, run.stdout
    assert all(r.partitions == 1 for r in rows), run.stdout
    assert all(r.consumer_id.startswith(f"{r.instance_id}-") for r in rows), run.stdout

    stopped = consumers.pop()
    stopped.stop()
    run, outcomes = remove_members(backend.bootstrap, group, ["pod-1", "ghost"])
    assert outcomes == {"pod-1": "NONE", "ghost": "UnknownMemberIdException"}, run.stdout + run.stderr
    assert run.returncode == 1

    _wait_for(backend, group, {"pod-0"})
    run, rows = describe_members(backend.bootstrap, group)
    assert [(r.instance_id, r.partitions) for r in rows] == [("pod-0", 2)], run.stdout
