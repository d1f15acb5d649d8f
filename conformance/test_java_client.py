"""The Java KafkaConsumer (kafka-clients 4.3.1, Kafka's reference client) with static membership, on Apache
Kafka and on the embedded coordinator alike:

* a static member that crashes and comes back with its instance id gets its partitions again at the same
  generation, and the other members see nothing (no rebalance);
* the same for the group's leader (KIP-814: its JoinGroup answer says to skip the assignment, and it keeps
  the one it had);
* a crashed member removed by instance id through the admin path (one LeaveGroup) is replaced at once: the
  survivor gets every partition in the next generation, long before the session timeout would expire it.

Each consumer is conformance/javaclient's driver in its own JVM; what it reports (assignments with their
generation and member id, records, commits) comes as JSON lines, and the consumer coordinator's own log
lines tell which member led an assignment.
"""

from __future__ import annotations

import re
import time
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from conformance.backends import Backend, create_topic, describe_group
from conformance.java_build import ensure_jar
from conformance.java_process import JavaProcess, wait_until
from staticfleet.admin.client import GroupAdmin, KafkaConnection

HERE = Path(__file__).resolve().parent
DRIVER = HERE / "javaclient"
PARTITIONS = 6
SESSION_MS = 10_000
WAIT_S = 90.0
QUIET_S = 3.0
COORDINATOR_LOGGER = "org.apache.kafka.clients.consumer.internals.ConsumerCoordinator"
_FINISHED = re.compile(r"Finished assignment for group at generation (\d+)")
_SKIPPED = re.compile(r"Skipped assignment for returning static leader at generation (\d+)")

# kafka-python (the admin path) loads its protocol schemas with importlib.resources calls that Python 3.11
# deprecates.
pytestmark = pytest.mark.filterwarnings("ignore:.*is deprecated. Use files\\(\\) instead:DeprecationWarning")


@pytest.fixture(scope="module")
def driver_jar() -> Path:
    return ensure_jar(DRIVER)


@pytest.fixture
def backend(plain_backend: Backend) -> Backend:
    return plain_backend


class JavaFleet:
    """Java consumers of one group on one topic, by instance id."""

    def __init__(self, backend: Backend, jar: Path, session_ms: int = SESSION_MS) -> None:
        self.backend = backend
        self.jar = jar
        self.session_ms = session_ms
        self.group = f"java-{uuid.uuid4().hex[:8]}"
        self.topic = f"{self.group}-in"
        self.consumers: dict[str, JavaProcess] = {}
        self.stopped: list[JavaProcess] = []

        create_topic(backend, self.topic, PARTITIONS)

    def start(self, instance: str) -> JavaProcess:
        args = ["--bootstrap", self.backend.bootstrap, "--group", self.group, "--topic", self.topic,
                "--instance", instance, "--session-ms", str(self.session_ms)]  # fmt: skip
        process = JavaProcess(self.jar, args, name=instance, log_levels={COORDINATOR_LOGGER: "info"})
        old = self.consumers.get(instance)
        if old is not None:
            self.stopped.append(old)
        self.consumers[instance] = process
        return process

    def assignments(self) -> dict[str, dict[str, Any]]:
        """Each consumer's last assignment event."""
        found = {name: c.last("assigned") for name, c in self.consumers.items()}
        return {name: event for name, event in found.items() if event is not None}

    def settled(self) -> dict[str, dict[str, Any]]:
        """Waits until every consumer holds an assignment of one generation, the assignments cover every
        partition once, and nothing has changed for QUIET_S seconds; returns the assignments."""

        def agreed() -> dict[str, dict[str, Any]] | None:
            current = self.assignments()
            if set(current) != set(self.consumers):
                return None
            if len({e["generation"] for e in current.values()}) != 1:
                return None
            owned = sorted(p for e in current.values() for p in e["partitions"])
            return current if owned == list(range(PARTITIONS)) else None

        while True:
            first: dict[str, dict[str, Any]] = wait_until(
                agreed, WAIT_S, f"group {self.group} to agree on one assignment\n{self.describe()}"
            )
            time.sleep(QUIET_S)
            if self.assignments() == first:
                return first

    def leader(self, generation: int) -> str:
        """The instance whose coordinator logged the assignment of `generation`."""
        leaders = [
            name
            for name, c in self.consumers.items()
            if any(int(g) == generation for g in _FINISHED.findall(c.stderr_text()))
        ]
        assert len(leaders) == 1, (
            f"one leader for generation {generation}, found {leaders}\n{self.describe()}"
        )
        return leaders[0]

    def describe(self) -> str:
        return "\n".join(c.describe() for c in self.consumers.values())

    def stop(self) -> None:
        for consumer in [*self.consumers.values(), *self.stopped]:
            consumer.stop()


@pytest.fixture
def fleets() -> Iterator[list[JavaFleet]]:
    created: list[JavaFleet] = []
    yield created
    for fleet in created:
        fleet.stop()


@pytest.mark.parametrize("who", ["follower", "leader"])
def test_a_restarted_static_java_consumer_gets_its_partitions_at_the_same_generation(
    backend: Backend, driver_jar: Path, fleets: list[JavaFleet], who: str
) -> None:
    fleet = JavaFleet(backend, driver_jar)
    fleets.append(fleet)
    for instance in ("c-0", "c-1", "c-2"):
        fleet.start(instance)
    before = fleet.settled()
    generation = next(iter(before.values()))["generation"]
    leader = fleet.leader(generation)
    target = leader if who == "leader" else next(i for i in sorted(before) if i != leader)
    others = {name: len(c.events) for name, c in fleet.consumers.items() if name != target}

    fleet.consumers[target].kill()  # a crash: no LeaveGroup
    restarted = fleet.start(target)
    came_back = wait_until(lambda: restarted.last("assigned"), WAIT_S, f"{target} back\n{fleet.describe()}")

    assert came_back["generation"] == generation, f"no new generation\n{fleet.describe()}"
    assert came_back["partitions"] == before[target]["partitions"]
    assert came_back["member_id"] != before[target]["member_id"], "a new member id replaced the old one"
    after = fleet.settled()
    assert after[target]["generation"] == generation
    for name, seen in others.items():
        news = [e["event"] for e in fleet.consumers[name].events[seen:]]
        assert not {"assigned", "revoked", "lost"} & set(news), f"{name} saw a rebalance: {news}"
    skipped = [int(g) for g in _SKIPPED.findall(restarted.stderr_text())]
    if who == "leader":
        assert skipped == [generation], (
            f"KIP-814: the returning leader skips the assignment\n{fleet.describe()}"
        )
    else:
        assert skipped == []
    members = describe_group(backend, fleet.group).members
    assert sorted(m.instance_id or "" for m in members) == ["c-0", "c-1", "c-2"]
    assert {m.member_id for m in members if m.instance_id == target} == {came_back["member_id"]}


def test_a_crashed_static_java_consumer_removed_by_instance_id_is_replaced_at_once(
    backend: Backend, driver_jar: Path, fleets: list[JavaFleet]
) -> None:
    # The session timeout is the coordinator's largest (GroupSettings: 30 s) and the wait below is shorter:
    # the survivor's new assignment comes from the removal, not from the crashed member's expiry.
    fleet = JavaFleet(backend, driver_jar, session_ms=30_000)
    fleets.append(fleet)
    fleet.start("c-0"), fleet.start("c-1")
    before = fleet.settled()
    generation = before["c-0"]["generation"]

    fleet.consumers["c-1"].kill()
    fleet.stopped.append(fleet.consumers.pop("c-1"))
    with GroupAdmin(KafkaConnection(backend.bootstrap)) as admin:
        report = admin.remove_members(fleet.group, ["c-1"], reason="scaled down")
    assert report.removed == ("c-1",), report

    survivor = fleet.consumers["c-0"]
    taken = wait_until(
        lambda: (e := survivor.last("assigned")) and e["generation"] > generation and e,
        20.0,
        f"c-0 to take every partition\n{fleet.describe()}",
    )
    assert taken["generation"] == generation + 1, "one rebalance"
    assert taken["partitions"] == list(range(PARTITIONS))
    members = describe_group(backend, fleet.group).members
    assert [m.instance_id for m in members] == ["c-0"]
