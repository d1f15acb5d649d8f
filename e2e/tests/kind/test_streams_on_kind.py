"""The fleets static membership was made for: a Kafka Streams application with local state, several members
per pod. examples/streams.yaml (the example application of examples/streams/: two stream threads, so two
static members `<pod>-1` and `<pod>-2` per pod, and `membersPerPod: 2`; a count per key in a RocksDB store
on the pod's PersistentVolumeClaim) as a fleet of 4 pods, beside examples/producer.yaml writing its input,
taken through a scale-down 4 -> 2, a scale-up 2 -> 4 and a rolling restart, in file order, on each
coordinator: the chart's embedded coordinator, and Apache Kafka 4.3.1 on kind (e2e/kind/kafka) named by
`spec.kafka.bootstrapServers`.

What is counted, per operation and fleet:
- rebalances as the coordinator saw them: one per generation (the embedded coordinator's event log, Kafka's
  own "Preparing to rebalance" / "Stabilized group" lines), each with the trigger it logged. Those a
  current member started by joining again are Kafka Streams' own follow-ups (after an assignment that
  moves a task from one member to another, cooperative rebalancing revokes it first and rejoins); they
  are counted apart from the membership rebalances (members joining, leaving, removed, expired);
- seconds from the command to the last of those rebalances, once the group has stayed Stable with the
  fleet's members and every pod is ready for a few seconds;
- records restored per store, from the application's `restore_ended` / `restore_suspended` lines.

Counts intact: once the producer has stopped and the group has committed the end of every input partition,
the last count the application wrote for each key equals the number of records of that key in the input
topic. At least once, Kafka Streams counts a record twice only when an instance stops without committing
(a crash, or a kill at the end of its grace period); every stop here is a clean close (SIGTERM, then
KafkaStreams.close commits), so a count over is a failure as much as a count short, and the failure names
the keys.

The scale-down is compared with a plain StatefulSet of the same application in dynamic membership
(KAFKA_MEMBERSHIP=dynamic), with the same settings but Kafka's default session timeout (45 s, where the
fleet's 90 s outlast a pod's restart), scaled at the same moment: Kafka Streams does not leave the group
on close, so its departed members go only when their session times out. The baseline is deleted after
that comparison, so the fleet's later operations share the node with nothing else.

On the embedded coordinator everything logs in as the chart makes it (secured): the fleet as its own user
with the ACLs `kafka.access` adds for a Kafka Streams application, the dynamic baseline as a user of its
own with the same ACLs (made as the chart's admin, as examples/demo does), the producer as the admin.
Apache Kafka runs as the README's "Use a real Kafka cluster" installs it: the release upgraded to
`coordinator.enabled=false` and `externalKafka.bootstrapServers` for this module, then back.
"""

from __future__ import annotations

import base64
import copy
import json
import os
import secrets
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from e2e.helpers import Cluster, Kubectl, Manifest
from e2e.streams_logs import (
    History,
    Rebalance,
    embedded_history,
    json_lines,
    kafka_history,
    restored_records,
    running_tasks,
)
from examples.demo.fleet import plain_access, plain_workload
from examples.demo.incluster import GRANT_SCRIPT, in_coordinator
from staticfleet.kube.access import FleetAccess

from .streams import (
    EMBEDDED_BOOTSTRAP,
    KAFKA_NAMESPACE,
    TOOLBOX,
    Toolbox,
    compare_counts,
    embedded_events,
    kafka_log,
    toolbox_pod,
)
from .support import RELEASE, RELEASE_NAMESPACE, REPO_ROOT, wait_explained

pytestmark = pytest.mark.kind

NAME = "order-counts"  # examples/streams.yaml
BASELINE = f"{NAME}-dynamic"
CONTAINER = "streams"
PER_POD = 2
PARTITIONS = 8  # one task per stream thread of the fleet at 4 pods
PRODUCER = "orders-producer"  # examples/producer.yaml, in the release's namespace
# The fleet's: twice Kafka's client default, so that a pod replaced in a rollout on a busy two-core node (its
# container stopped, a JVM starting, its stores opening) is back well before its members expire.
SESSION_TIMEOUT_MS = 90_000
# The dynamic baseline's: Kafka's default. Its members need not outlast a restart, and its scale-down waits
# for the departed ones to expire, so a longer timeout would only make it slower than its users run it.
BASELINE_SESSION_TIMEOUT_MS = 45_000
QUIET_S = 6.0  # a group Stable this long after its last rebalance has settled (follow-ups come at once)
EMBEDDED, KAFKA = "embedded", "kafka"
_METRICS_SCRIPT = (
    "import urllib.request as u; print(u.urlopen('http://127.0.0.1:9090/metrics', timeout=5).read().decode())"
)


@dataclass(frozen=True)
class Coordinator:
    name: str
    bootstrap: str
    kubectl: Kubectl

    @property
    def secured(self) -> bool:
        return self.name == EMBEDDED  # the chart's default; Apache Kafka here is plain text

    def history(self, group: str) -> History:
        if self.name == KAFKA:
            return kafka_history(kafka_log(self.kubectl), group)
        return embedded_history(embedded_events(self.kubectl, group), group)

    def toolbox(self, namespace: str) -> Toolbox:
        return Toolbox(self.kubectl, self.bootstrap, None if self.secured else namespace)


def set_env(container: Manifest, **values: str) -> None:
    """Sets environment variables of a container spec, replacing those it has."""
    env = [e for e in container.get("env", []) if e["name"] not in values]
    container["env"] = env + [{"name": k, "value": v} for k, v in values.items()]


def streams_fleet(topic: str, output: str, bootstrap: str | None) -> Manifest:
    """examples/streams.yaml at 4 pods, reading `topic`, writing `output`, on the cluster `bootstrap` (None:
    the operator's default, the embedded coordinator)."""
    body: Manifest = yaml.safe_load((REPO_ROOT / "examples" / "streams.yaml").read_text())
    spec = body["spec"]
    assert spec["membersPerPod"] == PER_POD
    spec.update(replicas=4, topics=[topic], sessionTimeoutMs=SESSION_TIMEOUT_MS)
    spec["kafka"]["access"]["outputTopics"] = [output]
    if bootstrap is not None:
        spec["kafka"]["bootstrapServers"] = bootstrap
    set_env(spec["template"]["spec"]["containers"][0], OUTPUT_TOPIC=output)
    return body


def dynamic_baseline(fleet: Manifest, heartbeat_ms: str | None) -> Manifest:
    """`fleet` renamed BASELINE, with the application in dynamic membership writing its own output topic,
    the operator's heartbeat (which a plain fleet would not get by itself) and Kafka's default session
    timeout: the same pods and settings otherwise."""
    body = copy.deepcopy(fleet)
    body["metadata"]["name"] = BASELINE
    body["spec"]["sessionTimeoutMs"] = BASELINE_SESSION_TIMEOUT_MS
    if heartbeat_ms is not None:
        body["spec"]["heartbeatIntervalMs"] = int(heartbeat_ms)
    container = body["spec"]["template"]["spec"]["containers"][0]
    output = next(e["value"] for e in container["env"] if e["name"] == "OUTPUT_TOPIC")
    set_env(container, KAFKA_MEMBERSHIP="dynamic", OUTPUT_TOPIC=f"{output}-dynamic")
    body["spec"]["kafka"]["access"]["outputTopics"] = [f"{output}-dynamic"]
    return body


PRODUCER_SECURITY = ("KAFKA_SECURITY_PROTOCOL", "KAFKA_SASL_MECHANISM", "KAFKA_SASL_USERNAME",
                     "KAFKA_SASL_PASSWORD", "KAFKA_SSL_CA_LOCATION")  # fmt: skip


def producer(name: str, bootstrap: str, topic: str, secured: bool) -> Manifest:
    """examples/producer.yaml named `name` (in the release's namespace, as the admin user, when `secured`;
    else in plain text) writing `topic` (PARTITIONS partitions) on the cluster `bootstrap`."""
    body: Manifest = yaml.safe_load((REPO_ROOT / "examples" / "producer.yaml").read_text())
    body["metadata"]["name"] = name
    for labels in (body["metadata"]["labels"], body["spec"]["template"]["metadata"]["labels"]):
        labels["app.kubernetes.io/name"] = name
    body["spec"]["selector"]["matchLabels"]["app.kubernetes.io/name"] = name
    pod = body["spec"]["template"]["spec"]
    container = pod["containers"][0]
    if not secured:
        container["env"] = [e for e in container["env"] if e["name"] not in PRODUCER_SECURITY]
        container["volumeMounts"] = [m for m in container["volumeMounts"] if m["name"] != "kafka-ca"]
        pod["volumes"] = [v for v in pod["volumes"] if v["name"] != "kafka-ca"]
    set_env(container, KAFKA_BOOTSTRAP_SERVERS=bootstrap, TOPIC=topic, PARTITIONS=str(PARTITIONS))
    return body


def _event_time(event: Manifest) -> float:
    """When an Event last happened (epoch seconds; the kubelet's Events carry whole seconds)."""
    stamp = event.get("lastTimestamp") or event.get("eventTime") or event["metadata"]["creationTimestamp"]
    return datetime.fromisoformat(str(stamp)).timestamp()


@dataclass(frozen=True)
class Fleet:
    """The StaticConsumerGroup (operated) or the plain dynamic StatefulSet, and its group."""

    kubectl: Kubectl
    namespace: str
    name: str
    operated: bool

    @property
    def group(self) -> str:
        return f"{self.namespace}.{self.name}"

    @property
    def kind(self) -> str:
        return "staticfleet" if self.operated else "plain dynamic"

    def _resource(self) -> str:
        return f"scg/{self.name}" if self.operated else f"statefulset/{self.name}"

    def body(self) -> Manifest:
        return self.kubectl.get("scg" if self.operated else "statefulset", self.name, self.namespace)

    def scale(self, replicas: int) -> None:
        self.kubectl.run("scale", self._resource(), "-n", self.namespace, f"--replicas={replicas}")

    def pods(self) -> list[Manifest]:
        return self.kubectl.items("pods", self.namespace, "-l", f"staticfleet.io/group={self.name}")

    def member_ids(self, replicas: int) -> set[str]:
        return {f"{self.name}-{i}-{k}" for i in range(replicas) for k in range(1, PER_POD + 1)}

    def ready(self, replicas: int) -> bool:
        """Every pod ready at this size: the operator's own status for the fleet (a Stable group of every
        member of every pod, by instance id), the StatefulSet's for the plain one."""
        body = self.body()
        status = body.get("status", {})
        if body["spec"]["replicas"] != replicas or status.get("readyReplicas") != replicas:
            return False
        if not self.operated:
            return len(self.pods()) == replicas
        conditions = {c["type"]: c["status"] for c in status.get("conditions") or []}
        return (
            status.get("observedGeneration") == body["metadata"]["generation"]
            and conditions.get("Ready") == "True"
            and status.get("group", {}).get("state") == "Stable"
            and {m["instanceId"] for m in status.get("members") or []} == self.member_ids(replicas)
            and not status.get("podsMissingMembers")
        )

    def lines(self) -> list[dict[str, Any]]:
        """The application's JSON lines from every pod of the fleet."""
        found: list[dict[str, Any]] = []
        for pod in self.pods():
            done = self.kubectl.run("logs", "-n", self.namespace, pod["metadata"]["name"], "-c", CONTAINER)
            found.extend(json_lines(done.stdout))
        return found

    def assert_no_fatal_error(self) -> None:
        """Fails at once, with the application's own words, when an instance stopped on a fatal error."""
        for pod in self.pods():
            for status in pod.get("status", {}).get("containerStatuses") or []:
                for previous, state in ((False, status.get("state")), (True, status.get("lastState"))):
                    if not (state or {}).get("terminated"):
                        continue
                    args = ["logs", "-n", self.namespace, pod["metadata"]["name"], "-c", CONTAINER]
                    done = self.kubectl.run(*args, *(["--previous"] if previous else []), check=False)
                    fatal = [line for line in json_lines(done.stdout) if line.get("event") == "fatal"]
                    if fatal:
                        raise AssertionError(f"{pod['metadata']['name']} stopped: {json.dumps(fatal[-1])}")


@dataclass
class Outcome:
    """What one operation cost one fleet."""

    coordinator: str
    fleet: str
    operation: str
    rebalances: list[Rebalance]
    seconds_to_stable: float | None  # from the command to the last rebalance's completion
    restored: dict[str, int]

    @property
    def membership(self) -> list[Rebalance]:
        return [r for r in self.rebalances if not r.follow_up]

    @property
    def follow_ups(self) -> list[Rebalance]:
        return [r for r in self.rebalances if r.follow_up]

    def summary(self) -> str:
        stable = "-" if self.seconds_to_stable is None else f"{self.seconds_to_stable:.1f} s"
        lines = [
            f"[{self.coordinator}] {self.fleet}, {self.operation}: {len(self.membership)} membership"
            f" rebalance(s) + {len(self.follow_ups)} follow-up(s), Stable after {stable}, records restored "
            f"{sum(self.restored.values())} {json.dumps(self.restored, sort_keys=True)}"
        ]
        lines += [f"    {r.describe()}" for r in self.rebalances]
        return "\n".join(lines)


# bench/streams_fleet.py runs this module with a file to append every outcome to, and publishes them.
RESULTS_ENV = "STATICFLEET_STREAMS_RESULTS"


def record_outcomes(outcomes: list[Outcome]) -> None:
    path = os.environ.get(RESULTS_ENV)
    if not path:
        return
    with open(path, "a") as results:
        for outcome in outcomes:
            row = {
                "coordinator": outcome.coordinator,
                "fleet": outcome.fleet,
                "operation": outcome.operation,
                "membership_rebalances": len(outcome.membership),
                "follow_ups": len(outcome.follow_ups),
                "seconds_to_stable": outcome.seconds_to_stable,
                "session_timeout_ms": SESSION_TIMEOUT_MS
                if outcome.fleet == "staticfleet"
                else BASELINE_SESSION_TIMEOUT_MS,
                "records_restored": sum(outcome.restored.values()),
                "triggers": [r.describe() for r in outcome.rebalances],
            }
            results.write(json.dumps(row) + "\n")


@dataclass
class StreamsRun:
    """One coordinator's fleet, its dynamic baseline, the producer and the toolbox, in one namespace."""

    kubectl: Kubectl
    namespace: str
    coordinator: Coordinator
    topic: str
    output: str
    producer: str
    outcomes: list[Outcome] = field(default_factory=list)

    @property
    def fleet(self) -> Fleet:
        return Fleet(self.kubectl, self.namespace, NAME, operated=True)

    @property
    def baseline(self) -> Fleet:
        return Fleet(self.kubectl, self.namespace, BASELINE, operated=False)

    @property
    def toolbox(self) -> Toolbox:
        return self.coordinator.toolbox(self.namespace)

    def wait(self, probe: Callable[[], Any], *, timeout: float, what: str, interval: float = 1.0) -> Any:
        namespaces = [self.namespace, RELEASE_NAMESPACE]
        if self.coordinator.name == KAFKA:
            namespaces.append(KAFKA_NAMESPACE)
        return wait_explained(self.kubectl, namespaces, probe, timeout=timeout, what=what, interval=interval)

    def settle(self, fleet: Fleet, replicas: int, started: float, generation: int) -> list[Rebalance]:
        """Waits until `fleet`'s pods are ready at `replicas`, its group is Stable with their members and has
        not rebalanced for QUIET_S (nor since `started`, epoch seconds, if it has not rebalanced at all);
        returns the rebalances after `generation`."""

        def probe() -> tuple[list[Rebalance]] | None:
            if not fleet.ready(replicas):
                return None
            history = self.coordinator.history(fleet.group)
            if history.running is not None or not history.rebalances:
                return None
            if history.rebalances[-1].members != replicas * PER_POD:
                return None
            new = history.after(generation)
            last = max((r.stable_at for r in new), default=started)
            return (new,) if time.time() - last >= QUIET_S else None

        what = f"{fleet.kind} {fleet.name}: {replicas} ready pods, a settled group"
        settled: tuple[list[Rebalance]] = self.wait(probe, timeout=300, what=what)
        return settled[0]

    def measure(
        self, fleet: Fleet, operation: str, replicas: int, started: float, generation: int
    ) -> Outcome:
        new = self.settle(fleet, replicas, started, generation)
        outcome = Outcome(
            coordinator=self.coordinator.name,
            fleet=fleet.kind,
            operation=operation,
            rebalances=new,
            seconds_to_stable=max(r.stable_at for r in new) - started if new else None,
            restored=restored_records(fleet.lines(), started),
        )
        self.outcomes.append(outcome)
        print(outcome.summary())
        return outcome

    def at(self, fleet: Fleet, replicas: int) -> int:
        """Brings `fleet` to `replicas` (if it is not) and a settled group; returns its generation."""
        if fleet.body()["spec"]["replicas"] != replicas:
            fleet.scale(replicas)
        generation = self.coordinator.history(fleet.group).generation
        self.settle(fleet, replicas, 0.0, generation)
        return self.coordinator.history(fleet.group).generation

    def counts(self) -> Manifest:
        """Stops the producer, then waits until the fleet has committed the end of the input; returns the
        records per key in the input and the last count per key in the output."""
        self.kubectl.run("scale", f"deployment/{self.producer}", "-n", RELEASE_NAMESPACE, "--replicas=0")
        selector = f"app.kubernetes.io/name={self.producer}"
        self.wait(
            lambda: not self.kubectl.items("pods", RELEASE_NAMESPACE, "-l", selector),
            timeout=60,
            what="the producer to stop",
        )

        def caught_up() -> Manifest | None:
            found = self.toolbox.counts(self.fleet.group, self.topic, self.output)
            return found if "records" in found else None

        what = "the fleet to commit the end of its input"
        found: Manifest = self.wait(caught_up, timeout=180, interval=2, what=what)
        return found

    def resume_producer(self) -> None:
        self.kubectl.run("scale", f"deployment/{self.producer}", "-n", RELEASE_NAMESPACE, "--replicas=1")

    def assert_counts_intact(self) -> None:
        found = self.counts()
        check = compare_counts(found["records"], found["counts"])
        assert check.records > 0 and check.keys > 0, found
        assert check.intact, (
            f"of {check.records} records over {check.keys} keys, counts short (lost): {check.lost}; counts"
            f" over (counted twice, which at least once allows only after a stop without a commit, and no"
            f" stop here is one): {check.extra}"
        )
        print(f"[{self.coordinator.name}] counts intact: {check.records} records over {check.keys} keys")

    def removals(self) -> tuple[float, float]:
        """LeaveGroup batches sent for the fleet's group and members they removed (the operator's
        metrics, summed over its pods: only the leader acts)."""
        batches = members = 0.0
        selector = "app.kubernetes.io/component=operator"
        for pod in self.kubectl.items("pods", RELEASE_NAMESPACE, "-l", selector):
            done = self.kubectl.run(
                "exec", "-n", RELEASE_NAMESPACE, pod["metadata"]["name"], "-c", "operator", "--",
                "python", "-c", _METRICS_SCRIPT,
            )  # fmt: skip
            for family in text_string_to_metric_families(done.stdout):
                for sample in family.samples:
                    if sample.labels.get("group") != self.fleet.group:
                        continue
                    if sample.name == "staticfleet_operator_removal_batches_total":
                        batches += sample.value if sample.labels["result"] == "ok" else 0
                    elif sample.name == "staticfleet_operator_members_removed_total":
                        members += sample.value
        return batches, members

    def away(self, since: float) -> dict[str, float]:
        """Seconds each of the fleet's pods was away in a rollout from `since`: from the kubelet stopping
        its container to the new one's instance RUNNING. Static members must be back within their
        session timeout."""
        stopped = {
            str(e["involvedObject"]["name"]): _event_time(e)
            for e in self.kubectl.items("events", self.namespace)
            if e.get("reason") == "Killing" and _event_time(e) >= int(since)
        }
        away = {}
        for pod in self.fleet.pods():
            name = pod["metadata"]["name"]
            done = self.kubectl.run("logs", "-n", self.namespace, name, "-c", CONTAINER)
            running = [line["ts"] for line in json_lines(done.stdout) if line.get("to") == "RUNNING"]
            if name in stopped and running:
                away[name] = round(float(running[0]) - stopped[name], 1)
        return away

    def removal_events(self) -> dict[str, str]:
        return {
            e["metadata"]["uid"]: str(e.get("message"))
            for e in self.kubectl.items("events", self.namespace)
            if e.get("reason") == "MembersRemoved" and e.get("involvedObject", {}).get("name") == NAME
        }


@pytest.fixture(scope="module", params=[EMBEDDED, KAFKA])
def coordinator(request: pytest.FixtureRequest, cluster: Cluster, chart: None) -> Coordinator:
    if request.param == KAFKA:
        bootstrap: str = request.getfixturevalue("kafka_on_kind")
        return Coordinator(KAFKA, bootstrap, cluster.kubectl)
    return Coordinator(EMBEDDED, EMBEDDED_BOOTSTRAP, cluster.kubectl)


def baseline_login(kubectl: Kubectl, resource: Manifest, namespace: str) -> FleetAccess:
    """The dynamic baseline's own user on the secured embedded coordinator, as the operator would make it
    for a fleet (its Secret in `namespace`, the ACLs of fleet_acls), made as the chart's admin."""
    tls = kubectl.get("secret", f"{RELEASE}-coordinator-tls", RELEASE_NAMESPACE)
    login = plain_access(resource, namespace, base64.b64decode(tls["data"]["ca.crt"]))
    kubectl.apply(login.secret, namespace)
    in_coordinator(kubectl, RELEASE, RELEASE_NAMESPACE, GRANT_SCRIPT, kafka=True, stdin=login.grant_request())
    return login.access


@pytest.fixture(scope="module")
def run(cluster: Cluster, coordinator: Coordinator, image: str) -> Iterator[StreamsRun]:
    """The fleet at 4 pods and its dynamic baseline, both settled, the producer writing their input."""
    kubectl = cluster.kubectl
    namespace = f"kind-streams-{secrets.token_hex(3)}"
    # Names under the namespace's own prefix, which tenancy lets its fleets claim without a policy.
    topic = f"{namespace}.orders"
    producer_name = f"{PRODUCER}-{namespace}"
    streams = StreamsRun(kubectl, namespace, coordinator, topic, f"{topic}-counts", producer_name)
    kubectl.run("create", "namespace", namespace)
    try:
        if not coordinator.secured:
            kubectl.apply(toolbox_pod(image), namespace)
            streams.wait(
                lambda: kubectl.get("pod", TOOLBOX, namespace).get("status", {}).get("phase") == "Running",
                timeout=120,
                what="the toolbox pod",
            )
        kubectl.apply(
            producer(producer_name, coordinator.bootstrap, topic, coordinator.secured), RELEASE_NAMESPACE
        )
        streams.wait(
            lambda: (
                kubectl.get("deployment", producer_name, RELEASE_NAMESPACE)
                .get("status", {})
                .get("readyReplicas")
            ),
            timeout=180,
            what="the producer to create its topic and write",
        )
        resource = streams_fleet(topic, streams.output, None)  # the operator's default cluster
        for output in (streams.output, f"{streams.output}-dynamic"):
            streams.toolbox.create_topic(output, PARTITIONS)  # output topics exist before their writers
        kubectl.apply(resource, namespace)
        built = streams.wait(
            lambda: kubectl.get_or_none("statefulset", NAME, namespace),
            timeout=60,
            what="the fleet's StatefulSet",
        )
        env = built["spec"]["template"]["spec"]["containers"][0]["env"]
        heartbeat = next((e.get("value") for e in env if e["name"] == "KAFKA_HEARTBEAT_INTERVAL_MS"), None)
        baseline = dynamic_baseline(resource, heartbeat)
        access = baseline_login(kubectl, baseline, namespace) if coordinator.secured else None
        kubectl.apply(plain_workload(baseline, namespace, coordinator.bootstrap, access), namespace)

        def running(fleet: Fleet) -> Callable[[], bool]:
            def probe() -> bool:
                fleet.assert_no_fatal_error()
                return fleet.ready(4)

            return probe

        for fleet in (streams.fleet, streams.baseline):
            streams.wait(running(fleet), timeout=420, interval=3, what=f"{fleet.kind} {fleet.name} to run")
        for fleet in (streams.fleet, streams.baseline):
            streams.settle(fleet, 4, 0.0, 0)
        yield streams
    finally:
        for outcome in streams.outcomes:
            print(outcome.summary())
        record_outcomes(streams.outcomes)
        kubectl.run(
            "delete", "scg", NAME, "-n", namespace, "--ignore-not-found", "--timeout=120s", check=False
        )
        kubectl.run(
            "delete", "deployment", producer_name, "-n", RELEASE_NAMESPACE, "--ignore-not-found", check=False
        )
        kubectl.run("delete", "namespace", namespace, "--wait=false", check=False)


def test_four_two_thread_pods_are_eight_static_members_each_running_one_task_on_its_own_volume(
    run: StreamsRun,
) -> None:
    fleet = run.fleet
    run.at(fleet, 4)
    status = fleet.body()["status"]
    assert [(m["pod"], m["instanceId"]) for m in status["members"]] == [
        (f"{NAME}-{i}", f"{NAME}-{i}-{k}") for i in range(4) for k in range(1, PER_POD + 1)
    ]
    tasks: dict[str, list[str]] = {}
    for pod in fleet.pods():
        done = run.kubectl.run("logs", "-n", run.namespace, pod["metadata"]["name"], "-c", CONTAINER)
        tasks.update(running_tasks(json_lines(done.stdout)))
    assert set(tasks) == fleet.member_ids(4), tasks
    owned = sorted(p for found in tasks.values() for p in found)
    assert owned == sorted(f"{run.topic}-{p}" for p in range(PARTITIONS)), tasks
    claims = {
        c["metadata"]["name"]: c["status"].get("phase") for c in run.kubectl.items("pvc", run.namespace)
    }
    assert {f"state-{NAME}-{i}": "Bound" for i in range(4)}.items() <= claims.items(), claims


def test_scaling_four_to_two_removes_four_members_in_one_batch_one_rebalance_stable_before_a_dynamic_fleet(
    run: StreamsRun,
) -> None:
    fleet, baseline = run.fleet, run.baseline
    generations = {fleet.name: run.at(fleet, 4), baseline.name: run.at(baseline, 4)}
    batches, removed = run.removals()
    events = run.removal_events()
    started = {fleet.name: time.time()}
    fleet.scale(2)
    started[baseline.name] = time.time()
    baseline.scale(2)
    static = run.measure(fleet, "scale 4 -> 2", 2, started[fleet.name], generations[fleet.name])
    dynamic = run.measure(baseline, "scale 4 -> 2", 2, started[baseline.name], generations[baseline.name])

    assert len(static.rebalances) == 1 and not static.follow_ups, static.summary()
    departed = fleet.member_ids(4) - fleet.member_ids(2)
    (message,) = [m for uid, m in run.removal_events().items() if uid not in events]
    assert all(member in message for member in departed), message
    assert run.removals() == (batches + 1, removed + len(departed)), "one LeaveGroup batch of the 4 members"
    assert static.seconds_to_stable is not None and dynamic.seconds_to_stable is not None
    assert static.seconds_to_stable <= dynamic.seconds_to_stable, f"{static.summary()}\n{dynamic.summary()}"
    # The baseline serves this comparison only.
    run.kubectl.run("delete", "statefulset", BASELINE, "-n", run.namespace, "--wait=false")


def test_scaling_two_to_four_is_one_rebalance_and_every_count_stays_intact(run: StreamsRun) -> None:
    fleet = run.fleet
    generation = run.at(fleet, 2)
    started = time.time()
    fleet.scale(4)
    outcome = run.measure(fleet, "scale 2 -> 4", 4, started, generation)
    assert len(outcome.membership) == 1, outcome.summary()
    run.assert_counts_intact()
    run.resume_producer()


def test_a_rolling_restart_costs_no_rebalance_restores_nothing_and_keeps_every_count(run: StreamsRun) -> None:
    fleet = run.fleet
    generation = run.at(fleet, 4)
    old = {p["metadata"]["uid"] for p in fleet.pods()}
    started = time.time()
    stamp = datetime.now(UTC).isoformat(timespec="milliseconds")
    patch = {"spec": {"template": {"metadata": {"annotations": {"staticfleet.io/restartedAt": stamp}}}}}
    run.kubectl.run("patch", f"scg/{NAME}", "-n", run.namespace, "--type=merge", "-p", json.dumps(patch))

    def rolled() -> bool:
        pods = fleet.pods()
        sts = run.kubectl.get("statefulset", NAME, run.namespace).get("status", {})
        return (
            len(pods) == 4
            and not {p["metadata"]["uid"] for p in pods} & old
            and sts.get("updatedReplicas") == 4
            and sts.get("currentRevision") == sts.get("updateRevision")
        )

    run.wait(rolled, timeout=600, interval=2, what="every pod of the fleet to be replaced")
    outcome = run.measure(fleet, "rolling restart", 4, started, generation)
    print(f"[{run.coordinator.name}] pods away (stopped until RUNNING again): {run.away(started)}")
    assert outcome.rebalances == [], f"static members restarted cost no rebalance:\n{outcome.summary()}"
    assert sum(outcome.restored.values()) == 0, f"checkpointed stores restore nothing:\n{outcome.summary()}"
    run.assert_counts_intact()
    run.resume_producer()
