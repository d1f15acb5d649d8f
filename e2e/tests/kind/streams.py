"""What the Kafka Streams tests on kind read, and how: the topics' contents (from a toolbox pod in the
test's namespace, which has the project's Python and Kafka clients), the embedded coordinator's event log
and Apache Kafka's log, which e2e/streams_logs.py's pure parsers read (the rebalances a group went through,
the records each fleet restored), and whether the counts are intact.

The comparison of counts is a pure function; the classes at the end do the I/O through `kubectl`.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from e2e.helpers import Kubectl, Manifest
from examples.demo.incluster import KAFKA_PRELUDE, in_coordinator

from .support import COORDINATOR_POD, RELEASE, RELEASE_NAMESPACE

EMBEDDED_BOOTSTRAP = f"{RELEASE}-coordinator.{RELEASE_NAMESPACE}.svc.cluster.local:9092"
KAFKA_NAMESPACE = "staticfleet-kafka"
KAFKA_HOST = f"kafka.{KAFKA_NAMESPACE}.svc.cluster.local"  # e2e/kind/kafka/kafka.yaml's Service
KAFKA_BOOTSTRAP = f"{KAFKA_HOST}:9092"
KAFKA_POD = "kafka-0"


@dataclass(frozen=True)
class CountCheck:
    """The last count written for each key against the records of that key in the input topic."""

    lost: dict[str, tuple[int, int]]  # key: (records, count) where the count is short
    extra: dict[str, tuple[int, int]]  # key: (records, count) where the count is over
    keys: int
    records: int

    @property
    def intact(self) -> bool:
        return not self.lost and not self.extra


def compare_counts(records: Mapping[str, int], counts: Mapping[str, int]) -> CountCheck:
    lost, extra = {}, {}
    for key in sorted(set(records) | set(counts)):
        wanted, got = records.get(key, 0), counts.get(key, 0)
        if got < wanted:
            lost[key] = (wanted, got)
        elif got > wanted:
            extra[key] = (wanted, got)
    return CountCheck(lost, extra, len(records), sum(records.values()))


# -- I/O ------------------------------------------------------------------------------------------------

# What the kind tests ask of a cluster, run where its address resolves: the embedded coordinator's pod,
# as the chart's admin user (examples.demo.incluster's prelude: CONFIG and options), or a toolbox pod
# beside Apache Kafka (plain text: the prelude below). Each prints one JSON line.
TOOLBOX_PRELUDE = """
import json, sys
from staticfleet.admin import KafkaConnection
BOOTSTRAP = sys.argv.pop(1)
options = {}
CONFIG = KafkaConnection(BOOTSTRAP).kafka_python_config(30)
"""

COUNTS_SCRIPT = """
import time
from collections import Counter
from kafka import KafkaConsumer, TopicPartition
from staticfleet.admin import GroupAdmin

group, source, sink = sys.argv[1:]


def records(topic):
    consumer = KafkaConsumer(**CONFIG, enable_auto_commit=False)
    try:
        partitions = [TopicPartition(topic, p) for p in sorted(consumer.partitions_for_topic(topic) or ())]
        consumer.assign(partitions)
        consumer.seek_to_beginning()
        ends = consumer.end_offsets(partitions)
        deadline = time.monotonic() + 90
        while any(consumer.position(p) < ends[p] for p in partitions):
            if time.monotonic() > deadline:
                raise SystemExit(f"reading {topic} to its end took over 90 s")
            for partition, batch in consumer.poll(timeout_ms=500).items():
                yield from (r for r in batch if r.offset < ends[partition])
    finally:
        consumer.close()


connection = KafkaConnection(",".join(CONFIG["bootstrap_servers"]), **options)
with GroupAdmin(connection, timeout_s=10) as admin:
    offsets = admin.partition_offsets(group, [source])
behind = {f"{o.topic}-{o.partition}": [o.committed, o.log_end] for o in offsets if o.committed != o.log_end}
if behind:
    print(json.dumps({"behind": behind}))
else:
    written = Counter(r.key.decode() for r in records(source))
    counts = {r.key.decode(): int(r.value.decode()) for r in records(sink)}
    print(json.dumps({"records": written, "counts": counts}))
"""

CREATE_TOPIC_SCRIPT = """
from kafka import KafkaAdminClient
from kafka.admin import NewTopic
from kafka.errors import TopicAlreadyExistsError
admin = KafkaAdminClient(**CONFIG)
try:
    admin.create_topics([NewTopic(sys.argv[1], int(sys.argv[2]), 1)])
except TopicAlreadyExistsError:
    pass
finally:
    admin.close()
print("null")
"""

TOOLBOX = "toolbox"


def toolbox_pod(image: str) -> Manifest:
    """A pod with the project's image that only waits, for `kubectl exec` (restricted security context)."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": TOOLBOX, "labels": {"app.kubernetes.io/name": TOOLBOX}},
        "spec": {
            "terminationGracePeriodSeconds": 0,
            "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
            "containers": [
                {
                    "name": TOOLBOX,
                    "image": image,
                    "command": ["python", "-c", "import time; time.sleep(86400)"],
                    "resources": {"requests": {"cpu": "10m", "memory": "64Mi"}},
                    "securityContext": {
                        "allowPrivilegeEscalation": False,
                        "readOnlyRootFilesystem": True,
                        "capabilities": {"drop": ["ALL"]},
                    },
                }
            ],
        },
    }


@dataclass(frozen=True)
class Toolbox:
    """Kafka clients where the cluster's address resolves: in the embedded coordinator's pod as the chart's
    admin user (`namespace` None), or in the toolbox pod of `namespace` beside Apache Kafka."""

    kubectl: Kubectl
    bootstrap: str
    namespace: str | None = None

    def _run(self, script: str, *args: str) -> Any:
        if self.namespace is None:
            return in_coordinator(
                self.kubectl, RELEASE, RELEASE_NAMESPACE, KAFKA_PRELUDE + script, *args, kafka=True
            )
        done = self.kubectl.run(
            "exec", "-n", self.namespace, TOOLBOX, "--", "python", "-c", TOOLBOX_PRELUDE + script,
            self.bootstrap, *args, timeout=180,
        )  # fmt: skip
        return json.loads(done.stdout.strip().splitlines()[-1])

    def counts(self, group: str, source: str, sink: str) -> Manifest:
        """`{"behind": {partition: [committed, end]}}` while the group has not committed the end of every
        input partition; then `{"records": per key in source, "counts": last value per key in sink}`."""
        found: Manifest = self._run(COUNTS_SCRIPT, group, source, sink)
        return found

    def create_topic(self, topic: str, partitions: int) -> None:
        self._run(CREATE_TOPIC_SCRIPT, topic, str(partitions))


_EVENTS_SCRIPT = """
import json, sys
group = sys.argv[1]
with open("/data/events/events.jsonl") as log:
    print(json.dumps([e for e in map(json.loads, log) if e.get("group") == group]))
"""


def embedded_events(kubectl: Kubectl, group: str) -> list[Manifest]:
    """The embedded coordinator's events of one group (docs/events.md), read in its pod."""
    done = kubectl.run(
        "exec", "-n", RELEASE_NAMESPACE, COORDINATOR_POD, "-c", "coordinator", "--",
        "python", "-c", _EVENTS_SCRIPT, group, timeout=60,
    )  # fmt: skip
    found: list[Manifest] = json.loads(done.stdout)
    return found


def kafka_log(kubectl: Kubectl) -> str:
    """Apache Kafka's log so far; empty while its container has not started."""
    done = kubectl.run("logs", "-n", KAFKA_NAMESPACE, KAFKA_POD, "-c", "kafka", timeout=60, check=False)
    return done.stdout if done.returncode == 0 else ""
