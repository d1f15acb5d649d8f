"""Java KafkaConsumers (conformance/javaclient's driver, one JVM each) of one group, for the tests that
run the Java client on both backends."""

from __future__ import annotations

import re
import time
import uuid
from pathlib import Path
from typing import Any

from conformance.backends import Backend, create_topic
from conformance.java_process import JavaProcess, wait_until

DRIVER = Path(__file__).resolve().parent / "javaclient"
# The largest session timeout the backends allow (GroupSettings): a restarted JVM on a busy machine must
# rejoin before its old member expires, or the group rebalances.
SESSION_MS = 30_000
WAIT_S = 90.0
QUIET_S = 3.0
CONSUMER_PROTOCOL_QUIET_S = 6.0
# Its INFO lines say which member assigned a generation ("Finished assignment ...").
COORDINATOR_LOGGER = "org.apache.kafka.clients.consumer.internals.ConsumerCoordinator"
_FINISHED = re.compile(r"Finished assignment for group at generation (\d+)")


class JavaFleet:
    """Java consumers of one group on one topic, by instance id."""

    def __init__(
        self,
        backend: Backend,
        jar: Path,
        partitions: int,
        *,
        session_ms: int = SESSION_MS,
        group: str | None = None,
        topic: str | None = None,
        group_protocol: str = "classic",
    ) -> None:
        self.backend = backend
        self.group_protocol = group_protocol
        self.jar = jar
        self.partitions = partitions
        self.session_ms = session_ms
        self.group = group or f"java-{uuid.uuid4().hex[:8]}"
        self.topic = topic or f"{self.group}-in"
        self.consumers: dict[str, JavaProcess] = {}
        self.stopped: list[JavaProcess] = []

        create_topic(backend, self.topic, partitions)

    def start(self, instance: str) -> JavaProcess:
        args = ["--bootstrap", self.backend.bootstrap, "--group", self.group, "--topic", self.topic,
                "--instance", instance, "--session-ms", str(self.session_ms),
                "--group-protocol", self.group_protocol]  # fmt: skip
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
        """Waits until every consumer holds an assignment of one generation (on the consumer protocol each
        member has its own epoch), the assignments cover every partition once, and nothing has changed for
        QUIET_S seconds; returns the assignments."""

        def agreed() -> dict[str, dict[str, Any]] | None:
            current = self.assignments()
            if set(current) != set(self.consumers):
                return None
            if self.group_protocol == "classic" and len({e["generation"] for e in current.values()}) != 1:
                return None
            if self.group_protocol == "consumer" and not all(e["partitions"] for e in current.values()):
                return None  # members reconcile one heartbeat at a time: some have not received theirs yet
            owned = sorted(p for e in current.values() for p in e["partitions"])
            return current if owned == list(range(self.partitions)) else None

        while True:
            first: dict[str, dict[str, Any]] = wait_until(
                agreed, WAIT_S, f"group {self.group} to agree on one assignment\n{self.describe()}"
            )
            # On the consumer protocol a step of the reconciliation waits for a heartbeat (Kafka's 5 s).
            time.sleep(QUIET_S if self.group_protocol == "classic" else CONSUMER_PROTOCOL_QUIET_S)
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
