"""What the Kafka Streams tests on kind read, and how: the rebalances a group went through as its coordinator
saw them (the embedded coordinator's event log, Apache Kafka's own log lines), the records each fleet
restored (the example application's JSON lines), and the topics' contents (from a toolbox pod in the
test's namespace, which has the project's Python and Kafka clients).

The parsers are pure functions; the classes at the end do the I/O through `kubectl`.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from datetime import datetime
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
class Rebalance:
    """One completed join phase of a group: the generation it made, when its first trigger put the group in
    PreparingRebalance, when the join phase completed with the new generation (Apache Kafka logs it as
    "Stabilized"; the members' SyncGroup follows at once), and that trigger as the coordinator logged
    it. A follow-up is one a current member asked for by joining again (Kafka Streams does after an
    assignment that moves a task between members, or when its assignor schedules one); the others are
    membership changes: a member joining, leaving, being removed or expiring."""

    generation: int
    started_at: float | None
    stable_at: float
    trigger: str
    follow_up: bool
    members: int

    @property
    def client_reason(self) -> str:
        """The reason the member's client gave (JoinGroup's reason field), where the trigger quotes one."""
        return self.trigger.partition("client reason: ")[2]

    def describe(self) -> str:
        kind = "follow-up" if self.follow_up else "membership"
        return f"generation {self.generation} ({kind}): {self.trigger}"


@dataclass(frozen=True)
class History:
    """A group's completed rebalances, oldest first, and the trigger of one still running (else None)."""

    rebalances: list[Rebalance]
    running: str | None

    @property
    def generation(self) -> int:
        return self.rebalances[-1].generation if self.rebalances else 0

    def after(self, generation: int) -> list[Rebalance]:
        return [r for r in self.rebalances if r.generation > generation]


# -- Apache Kafka's group coordinator, from its log (e2e/kind/kafka/log4j2.xml's layout) ------------------

_KAFKA_LINE = re.compile(r"^\[(?P<ts>[^\]]+)\] INFO (?P<message>.*)$")
# GroupMetadataManager's reasons for a rebalance that a current member starts by joining again.
_KAFKA_REJOIN = re.compile(r"^(Leader \S+ re-joining group|Updating metadata for member \S+ during)")


def _kafka_time(text: str) -> float:
    return datetime.fromisoformat(text).timestamp()


def kafka_history(log: str, group: str) -> History:
    """The group's completed rebalances in Apache Kafka's log: "Preparing to rebalance group G in state S
    with old generation N (reason: R)." (the first such line for N starts the rebalance to N + 1; later
    ones, as members join during it, do not) and "Stabilized group G generation N+1 with M members."."""
    preparing = re.compile(
        rf"Preparing to rebalance group {re.escape(group)} in state \S+ with old generation (?P<old>-?\d+) "
        r"\(reason: (?P<reason>.*)\)\.\s+\([\w.$]+\)$"
    )
    stabilized = re.compile(
        rf"Stabilized group {re.escape(group)} generation (?P<generation>\d+) with (?P<members>\d+) members"
    )
    started: dict[int, tuple[float, str]] = {}
    found: list[Rebalance] = []
    for line in log.splitlines():
        match = _KAFKA_LINE.match(line)
        if match is None:
            continue
        message = match.group("message")
        if (begin := preparing.search(message)) is not None:
            started.setdefault(
                int(begin.group("old")) + 1, (_kafka_time(match.group("ts")), begin.group("reason"))
            )
        elif (end := stabilized.search(message)) is not None:
            generation = int(end.group("generation"))
            at, reason = started.get(generation, (None, ""))
            found.append(
                Rebalance(
                    generation=generation,
                    started_at=at,
                    stable_at=_kafka_time(match.group("ts")),
                    trigger=reason,
                    follow_up=_KAFKA_REJOIN.match(reason) is not None,
                    members=int(end.group("members")),
                )
            )
    return _history(found, started)


def _history(found: list[Rebalance], started: Mapping[int, tuple[Any, ...]]) -> History:
    generation = found[-1].generation if found else 0
    running = started.get(generation + 1)
    return History(found, None if running is None else str(running[1]))


# -- the embedded coordinator, from its event log (docs/events.md) -----------------------------------------

# Its reasons for a rebalance that a current member starts by joining again.
_EMBEDDED_REJOIN = frozenset({"metadata-changed", "leader-rejoined"})


def embedded_history(events: Iterable[Mapping[str, Any]], group: str) -> History:
    """The group's completed join phases in the coordinator's events, one per generation as on Apache
    Kafka: the first `rebalance_started` with the old generation, and `join_completed` with the new one."""
    started: dict[int, tuple[float, str, str]] = {}
    found: list[Rebalance] = []
    for event in events:
        if event.get("group") != group:
            continue
        kind, generation = event.get("type"), int(event.get("generation") or 0)
        if kind == "rebalance_started":
            reason = str(event.get("reason") or "")
            started.setdefault(
                generation + 1, (int(event["ts"]) / 1000, reason, str(event.get("detail") or ""))
            )
        elif kind == "join_completed":
            at, reason, detail = started.get(generation, (None, "", ""))
            found.append(
                Rebalance(
                    generation=generation,
                    started_at=at,
                    stable_at=int(event["ts"]) / 1000,
                    trigger=f"{reason}: {detail}" if detail else reason,
                    follow_up=reason in _EMBEDDED_REJOIN,
                    members=len(event.get("members") or ()),
                )
            )
    return _history(found, started)


# -- the example application's JSON lines (examples/streams/README.md, "What it reports") -----------------


def json_lines(text: str) -> Iterator[dict[str, Any]]:
    """The JSON objects of a container's log; Kafka's own lines (on stderr, merged by `kubectl logs`) are
    not JSON and are skipped."""
    for line in text.splitlines():
        if line.startswith("{"):
            try:
                found = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(found, dict):
                yield found


def restored_records(lines: Iterable[Mapping[str, Any]], since: float) -> dict[str, int]:
    """Records restored per store from `since` (epoch seconds): each restore of a store partition ends
    with `restore_ended`, or `restore_suspended` when its task moves away first, with its total."""
    totals: Counter[str] = Counter()
    for line in lines:
        if line.get("event") in ("restore_ended", "restore_suspended") and float(line["ts"]) >= since:
            totals[str(line["store"])] += int(line["restored"])
    return dict(totals)


def running_tasks(lines: Iterable[Mapping[str, Any]]) -> dict[str, list[str]]:
    """Each stream thread's member and the input partitions its active tasks read, from the last `tasks`
    line (written each time the instance is RUNNING)."""
    last = None
    for line in lines:
        if line.get("event") == "tasks":
            last = line
    if last is None:
        return {}
    return {str(t["member"]): list(t["partitions"]) for t in last["threads"]}


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
