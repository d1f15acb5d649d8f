"""Kafka's kafka-consumer-groups.sh (ConsumerGroupCommand from the pinned tools jar) prints the same on Apache
Kafka and on the embedded coordinator, for a group of static Java consumers and after it:

* `--describe --members --verbose` while the members run, and `--describe` (offsets and lag);
* `--reset-offsets --execute` once the departed members are removed (the group must be empty), and the
  offsets it leaves;
* `--delete-offsets` of one partition, and the offsets it leaves.

The same group and topic names are used on both backends; only what must differ is normalised: member ids
(a client id and a random UUID) keep their client id.
"""

from __future__ import annotations

import re
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from conformance.backends import KAFKA, STATICFLEET, Backend, create_topic
from conformance.java_consumers import JavaFleet
from conformance.java_process import JavaProcess, wait_until
from conformance.kafka_tools import ToolRun, kafka_consumer_groups
from conformance.runner import ConformanceRun
from staticfleet.admin.client import GroupAdmin
from staticfleet.admin.connection import KafkaConnection

PARTITIONS = 2
RECORDS_PER_PARTITION = 5
_MEMBER_ID = re.compile(r"^(?P<client>.+)-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")

_HEADERS = ("GROUP", "TOPIC")

pytestmark = pytest.mark.filterwarnings("ignore:.*is deprecated. Use files\\(\\) instead:DeprecationWarning")


def normalised(run: ToolRun) -> list[str]:
    """The tool's output, one line per non-blank line, cells separated by one space (column widths follow
    the longest cell), member ids without their UUID, and each table's rows sorted (the tool prints them
    in the order of hash maps: of members on the coordinator, of partitions in the client); the exit code
    first."""
    lines = [f"exit {run.returncode}"]
    rows: list[str] = []
    width = 0
    for line in [*(run.stdout + run.stderr).splitlines(), ""]:
        cells = [_MEMBER_ID.sub(r"\g<client>-<uuid>", cell) for cell in line.split()]
        if rows and len(cells) != width:
            lines += sorted(rows)
            rows = []
        if not cells:
            continue
        if cells[0] in _HEADERS:
            lines.append(" ".join(cells))
            width = len(cells)
        elif width and len(cells) == width:
            rows.append(" ".join(cells))
        else:
            lines.append(" ".join(cells))
            width = 0
    return lines


def produce(backend: Backend, topic: str) -> None:
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=backend.bootstrap)
    try:
        for partition in range(PARTITIONS):
            for n in range(RECORDS_PER_PARTITION):
                producer.send(topic, key=f"k{n}".encode(), value=f"v{n}".encode(), partition=partition)
        producer.flush(30)
    finally:
        producer.close()


class ToolSession:
    """The same group and topic on one backend, with the tool's normalised output per step."""

    def __init__(self, backend: Backend, jar: Path, name: str) -> None:
        self.backend = backend
        self.jar = jar
        self.group = name
        self.topic = f"{name}-orders"
        self.outputs: dict[str, list[str]] = {}
        self.fleet: JavaFleet | None = None
        self.processes: list[JavaProcess] = []
        create_topic(backend, self.topic, PARTITIONS)
        produce(backend, self.topic)

    def tool(self, step: str, *args: str) -> ToolRun:
        run = kafka_consumer_groups(self.backend.bootstrap, *args)
        self.outputs[step] = normalised(run)
        return run

    def static_members_consumed_everything(self) -> JavaFleet:
        """Two static Java members that consumed and committed every record."""
        fleet = JavaFleet(self.backend, self.jar, PARTITIONS, group=self.group, topic=self.topic)
        self.fleet = fleet
        fleet.start("c-0"), fleet.start("c-1")
        fleet.settled()

        def committed_everything() -> bool:
            ends: dict[str, int] = {}
            for consumer in fleet.consumers.values():
                for event in consumer.of("committed"):
                    ends.update(event["offsets"])
            return ends == {str(p): RECORDS_PER_PARTITION for p in range(PARTITIONS)}

        wait_until(committed_everything, 60, f"every record committed\n{fleet.describe()}")
        return fleet

    def members_gone(self) -> None:
        """The static members crash and are removed by instance id: the group is empty."""
        assert self.fleet is not None
        for consumer in self.fleet.consumers.values():
            consumer.kill()
        with GroupAdmin(KafkaConnection(self.backend.bootstrap)) as admin:
            report = admin.remove_members(self.group, sorted(self.fleet.consumers))
        assert report.removed == ("c-0", "c-1"), report

    def committed_and_left(self) -> None:
        """A dynamic Java member that consumes and commits every record, then leaves: the group is empty."""
        args = ["--bootstrap", self.backend.bootstrap, "--group", self.group, "--topic", self.topic,
                "--exit-after-records", str(PARTITIONS * RECORDS_PER_PARTITION)]  # fmt: skip
        process = JavaProcess(self.jar, args, name="dynamic")
        self.processes.append(process)
        wait_until(
            lambda: process.process.poll() is not None, 90, f"the member to finish\n{process.describe()}"
        )
        assert process.process.returncode == 0, process.describe()

    def stop(self) -> None:
        if self.fleet is not None:
            self.fleet.stop()
        for process in self.processes:
            process.stop()


@pytest.fixture
def sessions() -> Iterator[dict[str, ToolSession]]:
    started: dict[str, ToolSession] = {}
    yield started
    for session in started.values():
        session.stop()


def open_sessions(run: ConformanceRun, jar: Path, sessions: dict[str, ToolSession]) -> None:
    name = f"tools-{uuid.uuid4().hex[:8]}"
    for kind in (KAFKA, STATICFLEET):
        sessions[kind] = ToolSession(run.shared_backend(kind), jar, name)


class NotAlike(AssertionError):
    """The embedded coordinator's output of a step differs from Kafka's."""


def assert_alike(sessions: dict[str, ToolSession], step: str) -> None:
    kafka, staticfleet = sessions[KAFKA].outputs[step], sessions[STATICFLEET].outputs[step]
    if staticfleet != kafka:
        raise NotAlike("\n".join([f"{step}: Kafka printed", *kafka, "and staticfleet", *staticfleet]))


def test_describe_members_and_reset_offsets_print_the_same_on_both(
    conformance_run: ConformanceRun, driver_jar: Path, sessions: dict[str, ToolSession]
) -> None:
    open_sessions(conformance_run, driver_jar, sessions)
    for session in sessions.values():
        session.static_members_consumed_everything()
        g = session.group
        session.tool("members", "--describe", "--group", g, "--members", "--verbose")
        session.tool("offsets", "--describe", "--group", g)
        session.members_gone()
        session.tool("reset", "--reset-offsets", "--group", g, "--topic", session.topic, "--to-earliest",
                     "--execute")  # fmt: skip
        session.tool("after reset", "--describe", "--group", g)
        session.tool("shift", "--reset-offsets", "--group", g, "--topic", f"{session.topic}:1", "--shift-by",
                     "3", "--execute")  # fmt: skip
        session.tool("after shift", "--describe", "--group", g)

    for step in ("members", "offsets", "reset", "after reset", "shift", "after shift"):
        assert_alike(sessions, step)
    # What Kafka printed is what the steps did: both static members with their instance ids, every
    # partition committed at its end, then reset to 0, then partition 1 moved to 3.
    out, g, t = sessions[KAFKA].outputs, sessions[KAFKA].group, sessions[KAFKA].topic
    assert out["members"][2:] == [
        f"{g} c-{p}-<uuid> c-{p} /127.0.0.1 c-{p} 1 - {t}:{p} - -" for p in range(PARTITIONS)
    ]
    assert out["after reset"][2:4] == [f"{g} {t} {p} 0 5 5 - - -" for p in range(PARTITIONS)]
    assert out["after shift"][2:4] == [f"{g} {t} 0 0 5 5 - - -", f"{g} {t} 1 3 5 2 - - -"]


def test_delete_offsets_prints_the_same_on_both(
    conformance_run: ConformanceRun, driver_jar: Path, sessions: dict[str, ToolSession]
) -> None:
    open_sessions(conformance_run, driver_jar, sessions)
    for session in sessions.values():
        session.committed_and_left()
        g = session.group
        session.tool("before", "--describe", "--group", g)
        session.tool("delete", "--delete-offsets", "--group", g, "--topic", f"{session.topic}:0")
        session.tool("after", "--describe", "--group", g)
    out, g, t = sessions[KAFKA].outputs, sessions[KAFKA].group, sessions[KAFKA].topic
    assert out["delete"][1:] == [
        f"Request succeeded for deleting offsets from group {g}.",
        "TOPIC PARTITION STATUS",
        f"{t} 0 Successful",
    ]
    assert out["after"][2:3] == [f"{g} {t} 1 5 5 0 - - -"], "partition 0 has no committed offset left"
    for step in ("before", "delete", "after"):
        assert_alike(sessions, step)
