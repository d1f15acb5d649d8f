"""The kinds of fleet bench/fleet_ops.py runs side by side: staticfleet, and every baseline as its users
would tune it (pure: names, and the spec each kind's fleet is made from).

Every fleet runs the same consumer (examples/consumer) and pod template; they differ in who operates
them, their membership, heartbeat interval, assignor and group protocol:

- staticfleet, and staticfleet with the cooperative-sticky assignor: a StaticConsumerGroup with the
  operator's defaults (a 250 ms heartbeat, removal, pre-registration);
- plain static: the StatefulSet the operator would build, operated by nobody, at the client's default
  heartbeat (departed members expire after the session timeout);
- plain dynamic (no group.instance.id; a consumer sends LeaveGroup as it stops), at the client's default
  heartbeat (3 s), at staticfleet's 250 ms, and at 250 ms with cooperative-sticky (KIP-429);
- the consumer protocol (KIP-848, `group.protocol=consumer`), dynamic and static, as plain fleets and
  as a StaticConsumerGroup: the coordinator assigns and sets the heartbeat (Kafka's default, 5 s, unless
  the benchmark is told otherwise), on Apache Kafka 4 and on the embedded coordinator alike.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from examples.demo.fleet import PLAIN_DYNAMIC, PLAIN_STATIC, STATICFLEET
from staticfleet.admin.instance_ids import member_instance_ids
from staticfleet.kube.spec import DEFAULT_HEARTBEAT_INTERVAL_MS

EMBEDDED, KAFKA = "embedded", "kafka"
CLASSIC, CONSUMER = "classic", "consumer"
COOPERATIVE = "cooperative-sticky"
# The consumer protocol's heartbeat is the broker's (group.consumer.heartbeat.interval.ms), 5 s by default
# and at least group.consumer.min.heartbeat.interval.ms, also 5 s. Shorter is not simply faster:
# librdkafka gives each ConsumerGroupHeartbeat the interval as its timeout, and a static member whose
# leaving heartbeat times out as it closes keeps its instance id taken until the session times out.
KAFKA_CONSUMER_HEARTBEAT_MS = 5_000
# The operator's --interval as the chart sets it (operator.interval): seconds between a fleet's passes
# when nothing pokes it.
OPERATOR_INTERVAL_S = 2.0
# A fetch of a partition with nothing to read returns after this long at most (fetch.wait.max.ms): the
# resolution of a partition's first fetch in the consumer's log, on topics nobody writes to.
FETCH_WAIT_MAX_MS = 100


@dataclass(frozen=True, slots=True)
class FleetKind:
    name: str
    operated: bool = False  # a StaticConsumerGroup (else a plain StatefulSet nobody operates)
    membership: str = "static"
    heartbeat_ms: int | None = None  # a plain fleet's heartbeat.interval.ms (None: the client's default)
    assignor: str | None = None  # partition.assignment.strategy (None: the client's default, eager)
    protocol: str = CLASSIC

    @property
    def backends(self) -> tuple[str, ...]:
        return (EMBEDDED, KAFKA)

    @property
    def cooperative(self) -> bool:
        """Whether a rebalance stops only the partitions it moves."""
        return self.assignor == COOPERATIVE or self.protocol == CONSUMER

    def env(self) -> list[dict[str, str]]:
        """What the consumer container is told beside the operator's contract."""
        env = [
            {"name": "KAFKA_MEMBERSHIP", "value": self.membership},
            {"name": "FETCH_WAIT_MAX_MS", "value": str(FETCH_WAIT_MAX_MS)},
        ]
        if self.protocol == CONSUMER:
            env.append({"name": "KAFKA_GROUP_PROTOCOL", "value": CONSUMER})
        return env

    def spec(self) -> dict[str, Any]:
        """The fields of the fleet's StaticConsumerGroup (a plain fleet's StatefulSet is built from it)."""
        spec: dict[str, Any] = {}
        if self.heartbeat_ms is not None:
            spec["heartbeatIntervalMs"] = self.heartbeat_ms
        if self.assignor is not None:
            spec["assignmentStrategy"] = self.assignor
        if self.protocol == CONSUMER:
            spec["groupProtocol"] = CONSUMER
        return spec

    def expected(self, name: str, replicas: int, per_pod: int = 1) -> frozenset[str] | int:
        """A settled fleet's members: the instance ids of its pods' `per_pod` members each (a pod's own id
        for one, `<pod>-1` .. `<pod>-<per_pod>` for several, as Kafka Streams names its threads'), or for
        dynamic members their number."""
        if self.membership == "dynamic":
            return replicas * per_pod
        return frozenset(m for i in range(replicas) for m in member_instance_ids(f"{name}-{i}", per_pod))


STATICFLEET_COOPERATIVE = "staticfleet cooperative"
DYNAMIC_TUNED = f"plain dynamic {DEFAULT_HEARTBEAT_INTERVAL_MS} ms"
DYNAMIC_TUNED_COOPERATIVE = f"plain dynamic {DEFAULT_HEARTBEAT_INTERVAL_MS} ms cooperative"
CONSUMER_DYNAMIC = "consumer protocol dynamic"
CONSUMER_STATIC = "consumer protocol static"
STATICFLEET_CONSUMER = "staticfleet consumer protocol"

KINDS: dict[str, FleetKind] = {
    kind.name: kind
    for kind in (
        FleetKind(STATICFLEET, operated=True),
        FleetKind(STATICFLEET_COOPERATIVE, operated=True, assignor=COOPERATIVE),
        FleetKind(STATICFLEET_CONSUMER, operated=True, protocol=CONSUMER),
        FleetKind(PLAIN_STATIC),
        FleetKind(PLAIN_DYNAMIC, membership="dynamic"),
        FleetKind(DYNAMIC_TUNED, membership="dynamic", heartbeat_ms=DEFAULT_HEARTBEAT_INTERVAL_MS),
        FleetKind(
            DYNAMIC_TUNED_COOPERATIVE,
            membership="dynamic",
            heartbeat_ms=DEFAULT_HEARTBEAT_INTERVAL_MS,
            assignor=COOPERATIVE,
        ),
        FleetKind(CONSUMER_DYNAMIC, membership="dynamic", protocol=CONSUMER),
        FleetKind(CONSUMER_STATIC, protocol=CONSUMER),
    )
}
OURS = tuple(k.name for k in KINDS.values() if k.operated)
CLASSIC_BASELINES = tuple(k.name for k in KINDS.values() if not k.operated and k.protocol == CLASSIC)


def backend_name(backend: str) -> str:
    """A coordinator as the published text names it."""
    if backend == KAFKA:
        from conformance.kafka_broker import kafka_version

        return f"Apache Kafka {kafka_version()}"
    return "the embedded coordinator"


def kinds_on(backend: str, wanted: tuple[str, ...] | list[str]) -> list[FleetKind]:
    """The wanted kinds a backend can run, in the order given."""
    return [KINDS[name] for name in wanted if backend in KINDS[name].backends]
