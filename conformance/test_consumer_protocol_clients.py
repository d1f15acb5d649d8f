"""Real clients on Kafka 4's consumer group protocol (KIP-848, `group.protocol=consumer`), on Apache Kafka
and on the embedded coordinator alike: librdkafka (confluent-kafka) and the Java KafkaConsumer
(kafka-clients 4.3.1), each static member in its own process.

* a static member that restarts (it leaves with epoch -2, which keeps its partitions for it) comes back to
  the same partitions, and no other member is asked to revoke or take anything;
* a crashed member removed by instance id (the admin LeaveGroup the operator sends) is gone at once: the
  survivor takes every partition at its next heartbeat, long before the session timeout (45 s) would
  have fenced the crashed one.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conformance.backends import Backend, create_topic
from conformance.java_consumers import CONSUMER_PROTOCOL_QUIET_S, WAIT_S, JavaFleet
from conformance.java_process import wait_until
from staticfleet.admin.client import GroupAdmin
from staticfleet.admin.connection import KafkaConnection
from tests.broker.processes import ConsumerProcess

PARTITIONS = 6
# Well below the consumer protocol's 45 s session: what happens within it is not a session expiry.
REMOVAL_WAIT_S = 20.0

# kafka-python (the admin path) loads its protocol schemas with importlib.resources calls that Python 3.11
# deprecates.
pytestmark = pytest.mark.filterwarnings("ignore:.*is deprecated. Use files\\(\\) instead:DeprecationWarning")


@pytest.fixture
def backend(plain_backend: Backend) -> Backend:
    return plain_backend


# --- librdkafka --------------------------------------------------------------------------------------


class LibrdkafkaFleet:
    """confluent-kafka consumers of one group on one topic, by instance id."""

    def __init__(self, backend: Backend) -> None:
        self.backend = backend
        self.group = f"rdkafka-{uuid.uuid4().hex[:8]}"
        self.topic = f"{self.group}-in"
        self.consumers: dict[str, ConsumerProcess] = {}
        self.stopped: list[ConsumerProcess] = []
        create_topic(backend, self.topic, PARTITIONS)

    def start(self, instance: str) -> ConsumerProcess:
        process = ConsumerProcess(
            "confluent",
            self.backend.bootstrap,
            self.group,
            instance,
            self.topic,
            45_000,
            group_protocol="consumer",
        )
        old = self.consumers.get(instance)
        if old is not None:
            self.stopped.append(old)
        self.consumers[instance] = process
        return process

    def assignments(self) -> dict[str, list[int]]:
        return {name: a for name, c in self.consumers.items() if (a := c.assignment()) is not None}

    def settled(self) -> dict[str, list[int]]:
        """Every consumer holds partitions, together every partition once, unchanged for a while."""

        def agreed() -> dict[str, list[int]] | None:
            current = self.assignments()
            owned = sorted(p for ps in current.values() for p in ps)
            if set(current) != set(self.consumers) or owned != list(range(PARTITIONS)):
                return None
            return current if all(current.values()) else None

        while True:
            first: dict[str, list[int]] = wait_until(
                agreed, WAIT_S, f"group {self.group} to settle\n{self.describe()}"
            )
            time.sleep(CONSUMER_PROTOCOL_QUIET_S)
            if self.assignments() == first:
                return first

    def describe(self) -> str:
        return "\n".join(
            f"{name}: {c.events[-8:]}\n{''.join(c.stderr[-20:])}" for name, c in self.consumers.items()
        )

    def stop(self) -> None:
        for consumer in [*self.consumers.values(), *self.stopped]:
            consumer.stop()


@pytest.fixture
def rdkafka_fleet(backend: Backend) -> Iterator[LibrdkafkaFleet]:
    fleet = LibrdkafkaFleet(backend)
    yield fleet
    fleet.stop()


def _moves(consumer: ConsumerProcess, seen: int) -> list[dict[str, Any]]:
    return [e for e in consumer.events[seen:] if e["event"] in ("assigned", "revoked")]


def test_a_restarted_static_librdkafka_member_keeps_its_partitions_and_nothing_moves(
    rdkafka_fleet: LibrdkafkaFleet,
) -> None:
    fleet = rdkafka_fleet
    for instance in ("c-0", "c-1", "c-2"):
        fleet.start(instance)
    before = fleet.settled()
    others = {name: len(c.events) for name, c in fleet.consumers.items() if name != "c-1"}

    fleet.consumers["c-1"].stop()  # a graceful close: the leave with epoch -2
    back = fleet.start("c-1")
    wait_until(lambda: back.assignment() == before["c-1"], WAIT_S, f"c-1 back\n{fleet.describe()}")

    assert fleet.settled() == before
    for name, seen in others.items():
        assert _moves(fleet.consumers[name], seen) == [], f"{name} saw partitions move\n{fleet.describe()}"


def test_a_crashed_librdkafka_member_removed_by_instance_id_is_replaced_at_once(
    rdkafka_fleet: LibrdkafkaFleet,
) -> None:
    fleet = rdkafka_fleet
    fleet.start("c-0"), fleet.start("c-1")
    fleet.settled()
    fleet.consumers["c-1"].kill()
    fleet.stopped.append(fleet.consumers.pop("c-1"))
    with GroupAdmin(KafkaConnection(fleet.backend.bootstrap)) as admin:
        report = admin.remove_members(fleet.group, ["c-1"], reason="scaled down")
    assert report.removed == ("c-1",), report
    survivor = fleet.consumers["c-0"]
    wait_until(
        lambda: survivor.assignment() == list(range(PARTITIONS)),
        REMOVAL_WAIT_S,
        f"c-0 to take every partition\n{fleet.describe()}",
    )


# --- the Java KafkaConsumer --------------------------------------------------------------------------


def test_a_restarted_static_java_member_keeps_its_partitions_and_nothing_moves(
    backend: Backend, driver_jar: Path, java_fleets: list[JavaFleet]
) -> None:
    fleet = JavaFleet(backend, driver_jar, PARTITIONS, group_protocol="consumer")
    java_fleets.append(fleet)
    for instance in ("c-0", "c-1", "c-2"):
        fleet.start(instance)
    before = fleet.settled()
    others = {name: len(c.events) for name, c in fleet.consumers.items() if name != "c-1"}

    fleet.consumers["c-1"].stop()  # SIGTERM: close() leaves with epoch -2
    restarted = fleet.start("c-1")
    came_back = wait_until(lambda: restarted.last("assigned"), WAIT_S, f"c-1 back\n{fleet.describe()}")

    # Its epoch is the group's current one: the member's own epoch may have moved on since the last
    # callback reported it (a reconciliation that changes nothing calls no listener).
    assert came_back["partitions"] == before["c-1"]["partitions"]
    after = fleet.settled()
    assert {n: e["partitions"] for n, e in after.items()} == {n: e["partitions"] for n, e in before.items()}
    for name, seen in others.items():
        news = [e["event"] for e in fleet.consumers[name].events[seen:]]
        assert not {"assigned", "revoked", "lost"} & set(news), f"{name} saw partitions move: {news}"


def test_a_crashed_java_member_removed_by_instance_id_is_replaced_at_once(
    backend: Backend, driver_jar: Path, java_fleets: list[JavaFleet]
) -> None:
    fleet = JavaFleet(backend, driver_jar, PARTITIONS, group_protocol="consumer")
    java_fleets.append(fleet)
    fleet.start("c-0"), fleet.start("c-1")
    fleet.settled()
    fleet.consumers["c-1"].kill()
    fleet.stopped.append(fleet.consumers.pop("c-1"))
    with GroupAdmin(KafkaConnection(backend.bootstrap)) as admin:
        report = admin.remove_members(fleet.group, ["c-1"], reason="scaled down")
    assert report.removed == ("c-1",), report
    survivor = fleet.consumers["c-0"]
    wait_until(
        lambda: (e := survivor.last("assigned")) and e["partitions"] == list(range(PARTITIONS)) and e,
        REMOVAL_WAIT_S,
        f"c-0 to take every partition\n{fleet.describe()}",
    )
