"""Fleet operations side by side: staticfleet, plain static membership and plain dynamic membership.

    .venv/bin/python bench/fleet_ops.py [--replicas 20] [--runs 3] [--backend embedded|kafka|both]
    .venv/bin/python bench/fleet_ops.py --app streams [--replicas 6] [--runs 1] [--backend ...]

Everything is real and local: the e2e control plane (kube-apiserver, etcd, kube-controller-manager) with
the local pod runner, `staticfleet operator` as a local process, and pods running
examples/consumer/consumer.py (confluent-kafka). The group coordinator is the embedded one
(`staticfleet coordinator`) or Apache Kafka (conformance/kafka_broker.py, the cached jars).

Fleets of the same consumer and pod template run at once, one of each kind (bench/fleet_kinds.py), each
with its own topic and group, among them:

- staticfleet: a StaticConsumerGroup with the operator's defaults (removal, pre-registration);
- plain static: the StatefulSet the operator would build, created as it is and operated by nobody: what
  static membership gives on its own (departed members expire after the session timeout);
- plain dynamic: the same plain StatefulSet with the consumer in dynamic membership
  (KAFKA_MEMBERSHIP=dynamic: no group.instance.id; it sends LeaveGroup when it stops), at the client's
  heartbeat and tuned as its users would tune it;
- the consumer protocol (KIP-848), as plain fleets and as a StaticConsumerGroup.

A rolling restart and a scale step go to one fleet at a time, each alone with the control plane, each run
beginning one fleet further on; a coordinator restart to all at once. Each is timed per fleet, from its own
command until its group is Stable with exactly the expected members, every one of them assigned (for a
rolling restart: and every pod replaced and ready). Rebalances are counted by the coordinator over the
operation plus a settle period: the generation on the embedded coordinator, the broker's "Preparing to
rebalance" log lines on Apache Kafka. The machine is shared: only the figures of one run, side by side,
compare; the medians and ranges across runs show the noise.

With `--app streams` the fleets run the Kafka Streams example instead (examples/streams, two stream threads
a pod), as staticfleet, plain static and plain dynamic, and each operation's cost is the records restored
into their stores: bench/fleet_streams.py says how. Its results go to their own section of
docs/benchmarks.md and of the README.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import random
import re
import shlex
import signal
import subprocess
import sys
import tempfile
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager, suppress
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any, Protocol, TypeVar

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "operator"))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench import fleet_streams
from bench.consumption import ConsumerRun, Stopped, consuming_spans, parse_log, stopped
from bench.fleet_kinds import (
    CONSUMER,
    EMBEDDED,
    KAFKA,
    KAFKA_CONSUMER_HEARTBEAT_MS,
    KINDS,
    OPERATOR_INTERVAL_S,
    FleetKind,
    backend_name,
    kinds_on,
)
from bench.fleet_report import (
    COORDINATOR_RESTART,
    DETAIL_HEADERS,
    OPERATIONS,
    PARTITION_SECONDS_MARGIN,
    ROLLING_RESTART,
    SCALE_DOWN,
    SCALE_UP,
    SECONDS_MARGIN,
    SECONDS_MARGIN_SHARE,
    Sample,
    Summary,
    comparison_headers,
    comparison_rows,
    detail_rows,
    kinds_of,
    summarize,
)
from bench.report import ROOT, machine, publish, table
from e2e.helpers import Kubectl, wait_until
from e2e.localcluster import binaries, procs
from e2e.localcluster.controlplane import LocalCluster
from e2e.localcluster.podrunner import DEFAULT_NODE_NAME, RUNNER_MARKER, runner_command
from e2e.localcluster.ports import free_port
from e2e.streams_logs import History, embedded_history, json_lines, kafka_history
from e2e.tests.operator.harness import (
    CRD_DIR,
    REPO_ROOT,
    OperatorRunner,
    consumer_template,
    fleet_manifest,
)
from examples.demo.fleet import (
    CLIENT_HEARTBEAT_MS,
    PLAIN_STATIC,
    GroupView,
    cycle_moment,
    group_settled,
    last_rebalance_at,
    plain_workload,
)
from staticfleet.admin import GroupAdmin, KafkaConnection
from staticfleet.admin.coordinator_api import fetch_group_json

NAME = "fleet"
RESTARTED_AT = "kubectl.kubernetes.io/restartedAt"
CONSUMER_APP = "consumer"
SETTLE_S = 5.0
# How often each group is observed while an operation runs: every 0.05 s while one fleet is watched (a
# scale step, whose seconds to Stable are short, or a rolling restart); while several are (a coordinator
# restart) they are observed in turn, with 0.2 s between rounds, so that the polls of nine fleets do not
# load the machine they are measured on. A fleet's end is then seen up to one round late.
POLL_S = 0.2
ALONE_POLL_S = 0.05
# How long the new fleets may take to be Stable before the first operation: longer than a member's rebalance
# timeout (max.poll.interval.ms, 300 s), after which the coordinator removes a consumer-protocol member that
# never revoked (librdkafka 2.16 can lose the heartbeat answer that told it to, with 180 consumers starting
# on 2 cores; docs/benchmarks.md), so that such a start costs minutes, not the run.
START_S = 420.0
README = ROOT / "README.md"
SAVED: list[Sample] = []  # every sample of this process, in order


# -- the coordinator: the embedded one or Apache Kafka ---------------------------------------------------


class Backend(Protocol):
    name: str
    bootstrap: str
    api: str | None
    consumer_groups: set[str]  # groups of the consumer protocol (KIP-848), described and counted apart

    def view(self, group: str) -> GroupView | None: ...
    def rebalance_mark(self, group: str) -> int: ...
    def last_rebalance_at(self, group: str) -> float | None: ...
    def history(self, group: str) -> History: ...
    def create_topic(self, topic: str, partitions: int) -> None: ...
    def restart(self) -> None: ...
    def stop(self) -> None: ...


def _create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    from kafka import KafkaAdminClient
    from kafka.admin import NewTopic

    admin = KafkaAdminClient(bootstrap_servers=bootstrap)
    try:
        admin.create_topics([NewTopic(topic, partitions, 1)])
    finally:
        admin.close()


def commit_start_offsets(bootstrap: str, group: str, topic: str, partitions: int) -> None:
    """Offset 0 committed for every partition of `topic` in `group`, before any member joins: a fleet
    that has consumed has its offsets committed, so a partition's new owner starts fetching at once. With
    none, librdkafka first waits 0.1 s on a timer before the ListOffsets that `auto.offset.reset` needs,
    which every first fetch on these topics (nobody writes to them) would otherwise count."""
    from confluent_kafka import Consumer, TopicPartition

    committer = Consumer({"bootstrap.servers": bootstrap, "group.id": group, "enable.auto.commit": False})
    try:
        committer.commit(offsets=[TopicPartition(topic, p, 0) for p in range(partitions)], asynchronous=False)
    finally:
        committer.close()


def consumer_group_view(admin: GroupAdmin, group: str) -> GroupView:
    """A consumer-protocol group through ConsumerGroupDescribe (DescribeGroups reports it as Dead):
    Stable once every member runs the group's target assignment."""
    found = admin.describe_consumer_group(group)
    return GroupView(
        state=found.state,
        members=tuple(m.instance_id or m.member_id for m in found.members),
        assigned=all(m.partitions for m in found.members),
    )


class _Admin:
    """One admin client for the bench's reads of a backend, made again after a failure (a restart)."""

    bootstrap: str
    _admin: GroupAdmin | None

    def admin(self) -> GroupAdmin:
        if self._admin is None:
            self._admin = GroupAdmin(KafkaConnection(self.bootstrap, client_id="bench"), timeout_s=3)
        return self._admin

    def _reset_admin(self) -> None:
        if self._admin is not None:
            with suppress(Exception):
                self._admin.close()
            self._admin = None

    def _consumer_group_view(self, group: str) -> GroupView:
        try:
            return consumer_group_view(self.admin(), group)
        except Exception:
            self._reset_admin()
            raise


class Embedded(_Admin):
    """`staticfleet coordinator` on fixed free ports, so that a restart comes back at the same address."""

    name = EMBEDDED

    def __init__(self, workdir: Path, consumer_heartbeat_ms: int = KAFKA_CONSUMER_HEARTBEAT_MS) -> None:
        self.workdir = workdir
        self.consumer_groups: set[str] = set()
        port, http = free_port(), free_port()
        self.bootstrap = f"127.0.0.1:{port}"
        self.api: str | None = f"http://127.0.0.1:{http}"
        self.argv = [
            sys.executable, "-m", "staticfleet.cli", "coordinator",
            "--listen", self.bootstrap, "--advertised-listener", self.bootstrap,
            "--http", f"127.0.0.1:{http}", "--data-dir", str(workdir / "data"),
            # Consumer-protocol groups heartbeat as on Kafka (group.consumer.heartbeat.interval.ms).
            "--group-consumer-heartbeat-interval-ms", str(consumer_heartbeat_ms),
        ]  # fmt: skip
        self.process: subprocess.Popen[bytes] | None = None
        self._admin: GroupAdmin | None = None
        self.start()

    def start(self) -> None:
        self.workdir.mkdir(parents=True, exist_ok=True)
        with (self.workdir / "coordinator.log").open("ab") as log:
            self.process = procs.spawn(self.argv, log=log, env=dict(os.environ), cwd=REPO_ROOT)
        wait_until(self._ready, timeout=60, what="the coordinator to be ready", interval=0.1)

    def _ready(self) -> bool:
        assert self.process is not None
        if self.process.poll() is not None:
            raise RuntimeError(f"the coordinator exited; see {self.workdir / 'coordinator.log'}")
        try:
            with urllib.request.urlopen(f"{self.api}/readyz", timeout=2) as response:
                return bool(response.status == 200)
        except OSError:
            return False

    def _group(self, group: str) -> dict[str, Any] | None:
        assert self.api is not None
        return fetch_group_json(self.api, group)

    def view(self, group: str) -> GroupView | None:
        if group in self.consumer_groups:
            return self._consumer_group_view(group)
        data = self._group(group)
        return None if data is None else GroupView.from_json(data)

    def rebalance_mark(self, group: str) -> int:
        """The group's generation: each rebalance's join phase raises it by one, and it is durable; for a
        consumer-protocol group its epoch, which each new target assignment raises (as Kafka's log counts)."""
        if group in self.consumer_groups:
            return int(self.admin().describe_consumer_group(group).group_epoch or 0)
        data = self._group(group) or {}
        return int(data.get("generation", 0))

    def last_rebalance_at(self, group: str) -> float | None:
        """When the group's last rebalance completed (epoch seconds), as the coordinator recorded it."""
        if group in self.consumer_groups:
            return None  # the consumer protocol has no join phase whose cycle a command could meet
        return last_rebalance_at(self._group(group))

    def history(self, group: str) -> History:
        """The group's completed join phases, from the coordinator's event log (docs/events.md)."""
        path = self.workdir / "data" / "events" / "events.jsonl"
        text = path.read_text(errors="replace") if path.exists() else ""
        return embedded_history(json_lines(text), group)

    def create_topic(self, topic: str, partitions: int) -> None:
        _create_topic(self.bootstrap, topic, partitions)

    def restart(self) -> None:
        self.stop()
        self.start()

    def stop(self) -> None:
        if self.process is not None:
            procs.stop(self.process, grace_seconds=10)
            self.process = None


def last_stabilized_at(broker_log: str, group: str) -> float | None:
    """When Apache Kafka's log last says the group is Stable after a rebalance (epoch seconds; the broker
    logs in this machine's local time)."""
    pattern = re.compile(
        r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3})\] INFO .*"
        rf"Stabilized group {re.escape(group)} generation",
        re.MULTILINE,
    )
    found = pattern.findall(broker_log)
    return datetime.strptime(found[-1], "%Y-%m-%d %H:%M:%S,%f").timestamp() if found else None


def epochs_bumped(broker_log: str, group: str) -> int:
    """How many times Apache Kafka's log says a consumer-protocol group's epoch went up: each time
    membership or subscriptions changed and the broker computed a new target assignment (the consumer
    protocol's rebalance, without the classic protocol's stop-the-world join phase)."""
    return len(re.findall(rf"\[GroupId {re.escape(group)}\] Bumped group epoch to ", broker_log))


class Kafka(_Admin):
    """Apache Kafka (single-node KRaft) from the conformance suite's cached jars, with Kafka's group
    defaults (initial rebalance delay 3 s, session timeouts 6 s to 30 min; consumer-protocol groups
    heartbeat every `consumer_heartbeat_ms`, Kafka's 5 s unless told otherwise)."""

    name = KAFKA
    api: str | None = None

    def __init__(self, workdir: Path, consumer_heartbeat_ms: int = KAFKA_CONSUMER_HEARTBEAT_MS) -> None:
        from conformance.kafka_broker import GroupSettings, KafkaBroker

        settings = GroupSettings(
            initial_rebalance_delay_ms=3000,
            min_session_timeout_ms=6000,
            max_session_timeout_ms=1_800_000,
            consumer_heartbeat_interval_ms=(
                None if consumer_heartbeat_ms == KAFKA_CONSUMER_HEARTBEAT_MS else consumer_heartbeat_ms
            ),
        )
        self.broker = KafkaBroker(settings, workdir)
        asyncio.run(self.broker.start())
        self.bootstrap = self.broker.bootstrap
        self.consumer_groups: set[str] = set()
        self._admin: GroupAdmin | None = None

    def view(self, group: str) -> GroupView | None:
        if group in self.consumer_groups:
            return self._consumer_group_view(group)
        try:
            found = self.admin().describe_group(group)
        except Exception:
            self._reset_admin()
            raise
        return GroupView(
            state=found.state,
            members=tuple(m.instance_id or m.member_id for m in found.members),
            assigned=all(m.partitions for m in found.members),
        )

    def rebalance_mark(self, group: str) -> int:
        """How many times the broker has logged that the group starts a rebalance, or for a
        consumer-protocol group that its epoch went up (its own log lines: Kafka does not report a
        generation through DescribeGroups)."""
        try:
            text = self.broker.log_file.read_text(errors="replace")
        except OSError:
            return 0
        if group in self.consumer_groups:
            return epochs_bumped(text, group)
        pattern = re.compile(rf"Preparing to rebalance group {re.escape(group)} in state")
        return len(pattern.findall(text))

    def last_rebalance_at(self, group: str) -> float | None:
        if group in self.consumer_groups:
            return None  # the consumer protocol has no join phase whose cycle a command could meet
        try:
            return last_stabilized_at(self.broker.log_file.read_text(errors="replace"), group)
        except OSError:
            return None

    def history(self, group: str) -> History:
        """The group's completed rebalances, from the broker's log lines."""
        try:
            return kafka_history(self.broker.log_file.read_text(errors="replace"), group)
        except OSError:
            return History([], None)

    def create_topic(self, topic: str, partitions: int) -> None:
        _create_topic(self.bootstrap, topic, partitions)

    def restart(self) -> None:
        self._reset_admin()
        asyncio.run(self.broker.restart())

    def stop(self) -> None:
        self._reset_admin()
        self.broker.stop()


# -- the cluster and the fleets --------------------------------------------------------------------------


@contextmanager
def local_cluster(workdir: Path, **options: Any) -> Iterator[tuple[LocalCluster, Kubectl]]:
    """The local control plane and the pod runner; `options` go to LocalCluster (users, apiserver_args)."""
    bin_dir = binaries.ensure_binaries()
    cluster = LocalCluster(bin_dir, workdir / "cluster", **options)
    cluster.start()
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO_ROOT), env.get("PYTHONPATH", "")]))
    argv = [
        *runner_command(cluster.kubeconfig_path, cluster.run_dir, DEFAULT_NODE_NAME),
        f"--api-host=127.0.0.1:{cluster.api_port}",
    ]
    with (cluster.logs_dir / "podrunner.log").open("ab") as log:
        runner = procs.spawn(argv, log=log, env=env, cwd=REPO_ROOT, parent_death_signal=signal.SIGTERM)
    kubectl = Kubectl(bin_dir / "kubectl", cluster.kubeconfig_path)
    try:
        wait_until(
            lambda: bool(kubectl.get_or_none("node", DEFAULT_NODE_NAME, "default")), timeout=30, what="node"
        )
        yield cluster, kubectl
    finally:
        procs.stop(runner, grace_seconds=30)
        procs.sweep(RUNNER_MARKER, str(cluster.run_dir))
        cluster.stop()


@dataclass
class Fleet:
    kind: str
    namespace: str
    replicas: int
    heartbeat_ms: int | None = None
    partitions: int = 0
    per_pod: int = 1  # members a pod runs (Kafka Streams: one per stream thread)
    ready: Callable[[int], bool] | None = None  # whether every pod is ready at a size, where that counts

    @property
    def group(self) -> str:
        return f"{self.namespace}.{NAME}"

    @property
    def topic(self) -> str:
        return f"{self.namespace}-topic"

    @property
    def spec(self) -> FleetKind:
        return KINDS[self.kind]

    def expected(self, view: GroupView | None, replicas: int) -> bool:
        """Stable with the members of exactly `replicas` pods, each assigned: static fleets by instance id."""
        return group_settled(view, self.spec.expected(NAME, replicas, self.per_pod))

    def settled(self, view: GroupView | None, replicas: int) -> bool:
        """`expected`, and every pod ready where the fleet's readiness counts (a Kafka Streams instance is
        ready once RUNNING: its stores restored)."""
        return self.expected(view, replicas) and (self.ready is None or self.ready(replicas))


def stopped_consumption(run_dir: Path, fleet: Fleet, begin: float, end: float) -> Stopped:
    """Partition-seconds in [begin, end] (epoch seconds) that the fleet's topic went without a consumer,
    from the consumer logs of every pod the fleet ever had (the pod runner keeps them by pod name)."""
    runs: list[ConsumerRun] = []
    for path in sorted((run_dir / "pods" / fleet.namespace).glob("*/consumer.log")):
        runs += parse_log(path.read_text(errors="replace"))
    spans = [span for run in runs for span in consuming_spans(run)]
    return stopped(spans, [f"{fleet.topic}-{i}" for i in range(fleet.partitions)], begin, end)


class Kube:
    """The few API calls of the measured loop, through the Python client (cheaper than kubectl)."""

    def __init__(self, kubeconfig: Path) -> None:
        from kubernetes import client, config

        api_client = config.new_client_from_config(config_file=str(kubeconfig))  # type: ignore[no-untyped-call]
        self.custom = client.CustomObjectsApi(api_client)
        self.apps = client.AppsV1Api(api_client)
        self.core = client.CoreV1Api(api_client)

    def _patch(self, fleet: Fleet, patch: dict[str, Any]) -> None:
        """The fleet's resource: its StaticConsumerGroup, or the plain StatefulSet nobody operates."""
        if fleet.spec.operated:
            self.custom.patch_namespaced_custom_object(
                "staticfleet.io", "v1alpha1", fleet.namespace, "staticconsumergroups", NAME, patch
            )
        else:
            self.apps.patch_namespaced_stateful_set(NAME, fleet.namespace, patch)

    def scale(self, fleet: Fleet, replicas: int) -> None:
        self._patch(fleet, {"spec": {"replicas": replicas}})

    def restart_pods(self, fleet: Fleet) -> None:
        """`kubectl rollout restart statefulset/<name>`: the annotation it sets on the pod template, on
        every fleet's StatefulSet, operated or not (kubectl rolls only built-in workloads; the operator
        leaves the annotation, which its apply does not name, in place)."""
        stamp = datetime.now(UTC).isoformat(timespec="seconds")
        patch = {"spec": {"template": {"metadata": {"annotations": {RESTARTED_AT: stamp}}}}}
        self.apps.patch_namespaced_stateful_set(NAME, fleet.namespace, patch)

    def statefulset(self, fleet: Fleet) -> tuple[int, dict[str, Any]]:
        """The StatefulSet's generation and status (as the API writes them)."""
        sts: Any = self.apps.read_namespaced_stateful_set(NAME, fleet.namespace)
        body: dict[str, Any] = self.apps.api_client.sanitize_for_serialization(sts)
        return int(body["metadata"]["generation"]), body.get("status", {})

    def rolled(self, fleet: Fleet, generation_before: int) -> bool:
        generation, status = self.statefulset(fleet)
        return bool(
            generation > generation_before
            and status.get("observedGeneration", 0) >= generation
            and status.get("currentRevision") == status.get("updateRevision")
            and status.get("updatedReplicas", 0) == fleet.replicas
            and status.get("readyReplicas", 0) == fleet.replicas
        )

    def ready(self, fleet: Fleet, replicas: int) -> bool:
        """Exactly `replicas` pods, every one ready."""
        _, status = self.statefulset(fleet)
        return bool(status.get("replicas", 0) == replicas and status.get("readyReplicas", 0) == replicas)

    def pods_at_size(self, fleet: Fleet) -> bool:
        """The fleet's namespace holds exactly its replicas' pods, none of them terminating: a pod of the
        last scale-down still being deleted would hold back the StatefulSet's next pod of that name."""
        pods: Any = self.core.list_namespaced_pod(fleet.namespace)
        return len(pods.items) == fleet.replicas and all(
            p.metadata.deletion_timestamp is None for p in pods.items
        )

    def operator_done(self, fleet: Fleet) -> bool:
        """An operated fleet's resource records no scale step still under way (a scale-down waiting for
        its pods or its removal, a pre-registration not yet withdrawn); always True for a plain fleet."""
        if not fleet.spec.operated:
            return True
        body: Any = self.custom.get_namespaced_custom_object(
            "staticfleet.io", "v1alpha1", fleet.namespace, "staticconsumergroups", NAME
        )
        return step_finished(body.get("status") or {})

    def statefulset_generation(self, fleet: Fleet) -> int:
        return self.statefulset(fleet)[0]

    def heartbeat_ms(self, fleet: Fleet) -> int | None:
        """The heartbeat interval the fleet's consumers were given (None: the client's default)."""
        sts: Any = self.apps.read_namespaced_stateful_set(NAME, fleet.namespace)
        body: dict[str, Any] = self.apps.api_client.sanitize_for_serialization(sts)
        for env in body["spec"]["template"]["spec"]["containers"][0].get("env", []):
            if env["name"] == "KAFKA_HEARTBEAT_INTERVAL_MS":
                return int(env["value"])
        return None


@dataclass
class Watch:
    fleet: Fleet
    began: float
    done: Callable[[GroupView | None], bool]
    began_wall: float  # epoch seconds, as the consumers log
    finished: float | None = None
    unstable: float = 0.0
    last: float = field(default_factory=time.monotonic)

    @property
    def began_at(self) -> str:
        return datetime.fromtimestamp(self.began_wall, UTC).isoformat(timespec="milliseconds")


def observe(backend: Backend, fleet: Fleet) -> GroupView | None:
    try:
        return backend.view(fleet.group)
    except Exception:  # the coordinator restarting, or between connections
        return None


def measure(
    backend: Backend,
    fleets: Sequence[Fleet],
    act: Callable[[Fleet], Callable[[GroupView | None], bool]],
    *,
    operation: str,
    run: int,
    replicas: int,
    timeout_s: float,
    begin_all: Callable[[], None] | None = None,
    cost: Callable[[Fleet, float, float], Mapping[str, Any]] | None = None,
) -> list[Sample]:
    """Runs `act` on each fleet (it returns the fleet's done-check), polls every group until done, then
    counts the rebalances over the operation and a settle period, and with `cost` what the operation cost
    the application over the same window (the Sample fields it returns: the partition-seconds without a
    consumer, or the records a Kafka Streams fleet restored)."""
    marks = {f.kind: backend.rebalance_mark(f.group) for f in fleets}
    watches: list[Watch] = []
    if begin_all is not None:  # one action for every fleet (a coordinator restart)
        began, began_wall = time.monotonic(), time.time()
        begin_all()
        back = time.monotonic()  # the groups were unreachable until now
        watches = [Watch(f, began, act(f), began_wall, unstable=back - began, last=back) for f in fleets]
    else:
        for fleet in fleets:
            began, began_wall = time.monotonic(), time.time()
            watches.append(Watch(fleet, began, act(fleet), began_wall, last=began))
    deadline = time.monotonic() + timeout_s
    while any(w.finished is None for w in watches) and time.monotonic() < deadline:
        for watch in watches:
            if watch.finished is not None:
                continue
            view = observe(backend, watch.fleet)
            now = time.monotonic()
            if view is None or view.state != "Stable":
                watch.unstable += now - watch.last
            watch.last = now
            if watch.done(view):
                watch.finished = now
        time.sleep(ALONE_POLL_S if len(watches) == 1 else POLL_S)
    time.sleep(SETTLE_S)  # a rebalance still to come counts
    samples = []
    ended_wall = time.time()
    for watch in watches:
        finished = watch.finished if watch.finished is not None else time.monotonic()
        costs = {} if cost is None else cost(watch.fleet, watch.began_wall, ended_wall)
        samples.append(
            Sample(
                backend=backend.name,
                replicas=replicas,
                run=run,
                operation=operation,
                kind=watch.fleet.kind,
                seconds=round(finished - watch.began, 2),
                rebalances=backend.rebalance_mark(watch.fleet.group) - marks[watch.fleet.kind],
                unstable_seconds=round(watch.unstable, 2),
                timed_out=watch.finished is None,
                heartbeat_ms=watch.fleet.heartbeat_ms,
                began_at=watch.began_at,
                **costs,
            )
        )
    return samples


def step_finished(status: dict[str, Any]) -> bool:
    """A StaticConsumerGroup's status records no scale step still under way."""
    return not status.get("scaleDown") and not status.get("preRegistration")


def wait_settled(
    backend: Backend,
    fleets: Sequence[Fleet],
    timeout_s: float,
    *,
    strict: bool = True,
    kube: Kube | None = None,
) -> None:
    """Every fleet Stable at its size (and, with `kube`, its pods exactly its replicas and an operated fleet's
    operator done with the step, so that the next operation does not meet the end of this one); `strict`
    False: a fleet that does not get there is reported and the run goes on (its next operation then shows
    as timed out)."""
    for fleet in fleets:
        try:
            wait_until(
                lambda f=fleet: (
                    f.settled(observe(backend, f), f.replicas)  # type: ignore[misc]
                    and (kube is None or (kube.pods_at_size(f) and kube.operator_done(f)))
                ),
                timeout=timeout_s,
                what=f"{fleet.group} to be Stable with {fleet.replicas} members",
                interval=0.5,
            )
        except TimeoutError as exc:
            if strict:
                raise
            print(f"  warning: {exc}", flush=True)


def with_env(template: dict[str, Any], env: list[dict[str, str]]) -> dict[str, Any]:
    """The pod template with the consumer container (the first) given `env` too."""
    containers = template["spec"]["containers"]
    first = {**containers[0], "env": [*containers[0].get("env", []), *env]}
    return {**template, "spec": {**template["spec"], "containers": [first, *containers[1:]]}}


def create_fleets(
    kubectl: Kubectl, kube: Kube, backend: Backend, args: argparse.Namespace, tag: str
) -> list[Fleet]:
    fleets = []
    extra = parse_fleet_specs(args.fleet_spec)
    streams = args.app == fleet_streams.APP
    for index, kind in enumerate(kinds_on(backend.name, args.kinds)):
        namespace = f"{tag}-{index}-{kind.name.replace(' ', '-')}"
        kubectl.run("create", "namespace", namespace)
        fleet = Fleet(kind.name, namespace, args.replicas, partitions=args.partitions)
        backend.create_topic(fleet.topic, args.partitions)
        if kind.protocol == CONSUMER:
            backend.consumer_groups.add(fleet.group)
        kafka = {"bootstrapServers": backend.bootstrap}
        if backend.api is not None:
            kafka["coordinatorApi"] = backend.api
        if streams:
            output = fleet_streams.output_topic(fleet.topic)
            backend.create_topic(output, args.partitions)
            fleet_streams.fill_topic(backend.bootstrap, fleet.topic, args.records)
            fleet.per_pod = fleet_streams.members_per_pod()
            fleet.ready = lambda replicas, f=fleet: kube.ready(f, replicas)
            app = fleet_streams.fleet_fields(kind, fleet_streams.command(), output)
        else:
            commit_start_offsets(backend.bootstrap, fleet.group, fleet.topic, args.partitions)
            app = {"template": with_env(consumer_template(), kind.env()), **kind.spec()}
        spec = {
            "sessionTimeoutMs": args.session_timeout_ms,
            "kafka": kafka,
            **app,
            **extra.get(kind.name, {}),
        }
        resource = fleet_manifest(NAME, args.replicas, backend.bootstrap, fleet.topic, **spec)
        if kind.operated:
            kubectl.apply(resource, namespace)
        else:
            for body in plain_workload(resource, namespace, backend.bootstrap):
                kubectl.apply(body, namespace)
        fleets.append(fleet)
    return fleets


def parse_fleet_specs(values: Sequence[str]) -> dict[str, dict[str, Any]]:
    """`KIND=JSON` options: spec fields one fleet kind gets on top of its own."""
    found: dict[str, dict[str, Any]] = {}
    for value in values:
        kind, _, text = value.partition("=")
        if kind not in KINDS:
            raise SystemExit(f"--fleet-spec: {kind!r} is not one of {', '.join(KINDS)}")
        found.setdefault(kind, {}).update(json.loads(text))
    return found


def wait_for_phase(backend: Backend, fleet: Fleet, fraction: float, rng: random.Random) -> None:
    """Until `fraction` of the fleet's heartbeat cycle, counted from its group's last rebalance (a random
    moment of the cycle when the coordinator has none on record)."""
    cycle_s = (fleet.heartbeat_ms or CLIENT_HEARTBEAT_MS) / 1000
    origin = backend.last_rebalance_at(fleet.group)
    if origin is None:
        time.sleep(rng.uniform(0, cycle_s))
        return
    now = time.time()
    time.sleep(max(0.0, cycle_moment(origin, now, cycle_s, fraction) - now))


Operated = TypeVar("Operated")


def in_turn(fleets: Sequence[Operated], run: int) -> list[Operated]:
    """The fleets in the order run `run` operates them: each run begins one fleet further on, so that no
    kind always goes first (on a fresh coordinator) or last."""
    if not fleets:
        return []
    first = (run - 1) % len(fleets)
    return [*fleets[first:], *fleets[:first]]


def run_operations(
    backend: Backend,
    kube: Kube,
    fleets: Sequence[Fleet],
    args: argparse.Namespace,
    run: int,
    cost: Callable[[Fleet, float, float], Mapping[str, Any]],
) -> list[Sample]:
    n = args.replicas
    down, up = n // 2, n // 2 + n // 4
    slow = args.session_timeout_ms / 1000 + 120
    # What a rolling restart may take per pod: a JVM closing and starting is slower than a consumer.
    per_pod_s = fleet_streams.POD_RESTART_S if args.app == fleet_streams.APP else 20
    samples: list[Sample] = []

    def report(found: list[Sample]) -> None:
        for s in found:
            flag = " (timed out)" if s.timed_out else ""
            spent = (
                f"{s.stopped_partition_seconds} partition-s stopped ({s.partitions_stopped} partitions)"
                if s.records_restored is None
                else f"{s.records_restored} records restored, {s.follow_ups} follow-ups"
            )
            print(
                f"  {backend.name} run {run} {s.operation:<20} {s.kind:<33} {s.seconds:6.1f} s"
                f"  {s.rebalances} rebalances  not Stable {s.unstable_seconds:.1f} s  {spent}{flag}",
                flush=True,
            )
        samples.extend(found)
        SAVED.extend(found)
        if args.json is not None:  # kept as the run goes, so that a failed run still leaves its samples
            args.json.write_text(json.dumps([asdict(s) for s in SAVED], indent=1) + "\n")

    # rolling restart of N
    generations = {f.kind: kube.statefulset_generation(f) for f in fleets}

    def restart(fleet: Fleet) -> Callable[[GroupView | None], bool]:
        kube.restart_pods(fleet)
        generation = generations[fleet.kind]
        return lambda view: fleet.expected(view, n) and kube.rolled(fleet, generation)

    # Members learn of a rebalance from their next heartbeat, and their heartbeats keep the phase of the
    # group's last rebalance: where in that cycle a command lands decides how long its rebalance waits.
    # Run i of k sends each command (i - 1/2)/k of the fleet's heartbeat interval into the cycle, so that
    # the runs cover it evenly and their median is its middle.
    fraction = (run - 0.5) / args.runs
    rng = random.Random(run)
    if ROLLING_RESTART in args.operations:
        # One fleet at a time, as a scale step: a static member's partitions wait out its pod's restart,
        # and fleets rolled at once restart one pod each at the same time on this machine's cores, each
        # restart slower for the others' (where a cluster's nodes would each restart their own), while a
        # dynamic fleet's partitions wait on rebalances, which need less of the machine.
        for fleet in in_turn(fleets, run):
            wait_for_phase(backend, fleet, fraction, rng)
            report(measure(backend, [fleet], restart, operation=ROLLING_RESTART, run=run, replicas=n,
                           timeout_s=slow + per_pod_s * n, cost=cost))  # fmt: skip
            wait_settled(backend, [fleet], slow, strict=False)

    def scaler(replicas: int) -> Callable[[Fleet], Callable[[GroupView | None], bool]]:
        def act(fleet: Fleet) -> Callable[[GroupView | None], bool]:
            kube.scale(fleet, replicas)
            fleet.replicas = replicas
            return lambda view: fleet.settled(view, replicas)

        return act

    if SCALE_DOWN in args.operations or SCALE_UP in args.operations:
        # A scale step goes to one fleet at a time: scaled at once, the fleets' pods would queue behind
        # each other in the controller manager's client rate limit (about 20 requests a second), and the
        # fleet whose StatefulSet changes last (the operated one, by a few hundred milliseconds) waits for
        # the others' pods.
        if SCALE_DOWN not in args.operations:  # the scale-up starts from the scaled-down fleet: not measured
            for fleet in fleets:
                kube.scale(fleet, down)
                fleet.replicas = down
            wait_settled(backend, fleets, slow, strict=False, kube=kube)
        for operation, replicas in ((SCALE_DOWN, down), (SCALE_UP, up)):
            if operation not in args.operations:
                continue
            for fleet in in_turn(fleets, run):
                wait_for_phase(backend, fleet, fraction, rng)
                report(measure(backend, [fleet], scaler(replicas), operation=operation, run=run, replicas=n,
                               timeout_s=slow, cost=cost))  # fmt: skip
                wait_settled(backend, [fleet], slow, strict=False, kube=kube)
        # back to N, not measured
        for fleet in fleets:
            kube.scale(fleet, n)
            fleet.replicas = n
        wait_settled(backend, fleets, slow, strict=False, kube=kube)
        time.sleep(SETTLE_S)
    if COORDINATOR_RESTART not in args.operations:
        return samples
    report(
        measure(
            backend,
            fleets,
            lambda fleet: lambda view: fleet.settled(view, n),
            operation=COORDINATOR_RESTART,
            run=run,
            replicas=n,
            timeout_s=slow,
            begin_all=backend.restart,
            cost=cost,
        )
    )
    wait_settled(backend, fleets, slow, strict=False)
    return samples


def bench_backend(
    backend_name: str, cluster: LocalCluster, kubectl: Kubectl, workdir: Path, args: argparse.Namespace
) -> list[Sample]:
    backend: Backend = (
        Embedded(workdir / "coordinator", args.consumer_heartbeat_ms)
        if backend_name == EMBEDDED
        else Kafka(workdir / "kafka", args.consumer_heartbeat_ms)
    )
    operator = OperatorRunner(
        cluster.kubeconfig_path, None, workdir / f"operator-{backend_name}", interval_s=OPERATOR_INTERVAL_S
    )
    operator.workdir.mkdir(parents=True, exist_ok=True)
    operator.start()
    kube = Kube(cluster.kubeconfig_path)
    streams = args.app == fleet_streams.APP
    samples: list[Sample] = []
    fleets: list[Fleet] = []
    try:
        fleets = create_fleets(kubectl, kube, backend, args, f"{backend_name}-{args.replicas}")
        wait_settled(backend, fleets, fleet_streams.START_S if streams else START_S)
        for fleet in fleets:
            broker_side = fleet.spec.protocol == CONSUMER
            fleet.heartbeat_ms = args.consumer_heartbeat_ms if broker_side else kube.heartbeat_ms(fleet)
            if streams:  # every store complete before the first operation
                wait_until(
                    lambda f=fleet: fleet_streams.caught_up(backend.bootstrap, f.group, f.topic),  # type: ignore[misc]
                    timeout=fleet_streams.START_S,
                    what=f"{fleet.group} to process its input",
                    interval=2,
                )
        time.sleep(SETTLE_S)

        def cost(fleet: Fleet, begin: float, end: float) -> Mapping[str, Any]:
            if streams:
                return {
                    "records_restored": fleet_streams.restored_since(cluster.run_dir, fleet.namespace, begin),
                    "follow_ups": fleet_streams.follow_ups(backend.history(fleet.group), begin, end),
                }
            found = stopped_consumption(cluster.run_dir, fleet, begin, end)
            return {
                "stopped_partition_seconds": found.partition_seconds,
                "partitions_stopped": found.partitions,
            }

        for run in range(1, args.runs + 1):
            samples += run_operations(backend, kube, fleets, args, run, cost)
    finally:
        for fleet in fleets:
            kubectl.run("delete", "scg", "--all", "-n", fleet.namespace, "--wait=false", check=False)
            kubectl.run("delete", "statefulset", "--all", "-n", fleet.namespace, "--wait=false", check=False)
        for fleet in fleets:
            with suppress(TimeoutError):
                wait_until(
                    lambda f=fleet: not kubectl.items("pods", f.namespace),  # type: ignore[misc]
                    timeout=180,
                    what="clean-up",
                )
            kubectl.run("delete", "namespace", fleet.namespace, "--wait=false", check=False)
        operator.stop()
        backend.stop()
    return samples


# -- what is published -----------------------------------------------------------------------------------


def publish_readme(summaries: Sequence[Summary], backend: str, replicas: int, runs: int) -> None:
    """Replaces the README's generated comparison table (between its bench:fleet_ops markers)."""
    text = README.read_text()
    begin, end = "<!-- bench:fleet_ops -->", "<!-- /bench:fleet_ops -->"
    if begin not in text or end not in text:
        return
    info = machine()
    body = (
        f"{begin}\n"
        + table(comparison_headers(kinds_of(summaries, backend)), comparison_rows(summaries, backend))
        + "\n\nEach cell: rebalances / seconds to Stable / partition-seconds without a consumer. "
        f"N={replicas} consumers, median of {runs} runs on {backend_name(backend)}, measured side by side "
        f"by `bench/fleet_ops.py` on {info['date']} ({info['cpus']} CPUs, Python {info['python']}); every "
        "run, both coordinators (Kafka's consumer protocol too), the ranges and how to read them are in "
        "[docs/benchmarks.md](docs/benchmarks.md#fleet-operations-side-by-side).\n"
        f"{end}"
    )
    start, stop = text.index(begin), text.index(end) + len(end)
    README.write_text(text[:start] + body + text[stop:])


def parse_args(argv: Sequence[str] | None = None) -> argparse.Namespace:
    """The options, with the defaults of the application chosen where they were left out."""
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--app",
        choices=(CONSUMER_APP, fleet_streams.APP),
        default=CONSUMER_APP,
        help="what the fleets run: the example consumer (default), or the Kafka Streams example with the "
        "records it restores (bench/fleet_streams.py)",
    )
    parser.add_argument(
        "--replicas", type=int, help=f"N, the fleets' size (default 20; {fleet_streams.REPLICAS} for streams)"
    )
    parser.add_argument("--runs", type=int, default=3, help="repetitions of every operation (default 3)")
    parser.add_argument("--backend", choices=(EMBEDDED, KAFKA, "both"), default="both")
    parser.add_argument(
        "--partitions",
        type=int,
        help="partitions of each fleet's topic (default 40; for streams one per stream thread at N)",
    )
    parser.add_argument(
        "--session-timeout-ms",
        type=int,
        help=f"default 30000; for streams {fleet_streams.SESSION_TIMEOUT_MS}, Kafka's default",
    )
    parser.add_argument(
        "--records",
        type=int,
        default=fleet_streams.RECORDS,
        help=f"streams: records in each fleet's input topic, a key each (default {fleet_streams.RECORDS})",
    )
    parser.add_argument(
        "--consumer-heartbeat-ms",
        type=int,
        default=KAFKA_CONSUMER_HEARTBEAT_MS,
        help="Kafka's heartbeat interval for consumer-protocol groups (the broker sets it; default Kafka's "
        f"{KAFKA_CONSUMER_HEARTBEAT_MS})",
    )
    parser.add_argument(
        "--kinds",
        type=lambda v: v.split(","),
        help=f"comma-separated fleet kinds (default: every one a coordinator runs): {', '.join(KINDS)}; "
        f"for streams, of (and by default): {', '.join(fleet_streams.KINDS)}",
    )
    parser.add_argument(
        "--operations",
        type=lambda v: v.split(","),
        default=list(OPERATIONS),
        help=f"comma-separated, of: {', '.join(OPERATIONS)}",
    )
    parser.add_argument(
        "--fleet-spec",
        action="append",
        default=[],
        metavar="KIND=JSON",
        help="spec fields for one kind of fleet, e.g. 'staticfleet={\"heartbeatIntervalMs\": 1000}'",
    )
    parser.add_argument("--no-publish", action="store_true", help="print only; leave docs and README alone")
    parser.add_argument("--json", type=Path, help="also write every sample here")
    parser.add_argument(
        "--workdir",
        type=Path,
        help="keep the cluster's, pod runner's, coordinator's and operator's logs here (default: a temporary "
        "directory, removed at the end)",
    )
    parser.add_argument(
        "--replay", type=Path, help="publish the samples a --json run wrote instead of measuring again"
    )
    args = parser.parse_args(argv)
    streams = args.app == fleet_streams.APP
    # Kafka Streams brings its own assignor and runs the classic protocol here: only the kinds that differ
    # in who operates the fleet and its membership apply.
    kinds = fleet_streams.KINDS if streams else tuple(KINDS)
    if args.replicas is None:
        args.replicas = fleet_streams.REPLICAS if streams else 20
    if args.partitions is None:
        args.partitions = args.replicas * fleet_streams.members_per_pod() if streams else 40
    if args.session_timeout_ms is None:
        args.session_timeout_ms = fleet_streams.SESSION_TIMEOUT_MS if streams else 30_000
    if args.kinds is None:
        args.kinds = list(kinds)
    for given, known, option in (
        (args.kinds, kinds, "--kinds"),
        (args.operations, OPERATIONS, "--operations"),
    ):
        unknown = [v for v in given if v not in known]
        if unknown:
            parser.error(f"{option}: {', '.join(map(repr, unknown))} not among {', '.join(map(repr, known))}")
    if streams and args.fleet_spec:
        parser.error("--fleet-spec: the Kafka Streams fleets run examples/streams.yaml's spec as it is")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    streams = args.app == fleet_streams.APP
    if streams and args.replay is None:
        fleet_streams.command()  # built (or found) before anything starts
    backends = (EMBEDDED, KAFKA) if args.backend == "both" else (args.backend,)
    samples: list[Sample] = []
    if args.replay is not None:
        saved = json.loads(args.replay.read_text())
        samples = [Sample(**s) for s in (saved["samples"] if isinstance(saved, dict) else saved)]
    else:
        with (
            _workdir(args.workdir) as tmp,
            local_cluster(tmp) as (cluster, kubectl),
        ):
            kubectl.run("apply", "-f", str(CRD_DIR))
            kubectl.wait_established("staticconsumergroups.staticfleet.io")
            for backend in backends:
                samples += bench_backend(backend, cluster, kubectl, tmp / backend, args)
    summaries = summarize(samples)
    if streams:
        return report_streams(args, argv, samples, backends)
    print(table(DETAIL_HEADERS, detail_rows(summaries)))
    for backend in backends:
        print(f"\nOn {backend_name(backend)}, medians (rebalances / s to Stable / partition-s stopped):\n")
        print(table(comparison_headers(kinds_of(summaries, backend)), comparison_rows(summaries, backend)))
    absent = _absent_kinds(args.kinds, backends)
    if absent:
        print(f"\n{absent}")
    if args.json is not None:
        args.json.write_text(json.dumps([asdict(s) for s in samples], indent=1) + "\n")
    if args.no_publish:
        return 0
    command = " ".join([".venv/bin/python bench/fleet_ops.py", *_measuring_options(argv)])
    body = _doc_body(args, summaries, backends) + "\n\n" + table(DETAIL_HEADERS, detail_rows(summaries))
    # the demo reads the samples too (where a baseline does better)
    publish("fleet_ops", "Fleet operations side by side", command, body, _published(args, samples))
    publish_readme(summaries, backends[0], args.replicas, args.runs)
    return 0


def _published(args: argparse.Namespace, samples: Sequence[Sample]) -> dict[str, Any]:
    return {
        "args": {k: v for k, v in vars(args).items() if k not in ("no_publish", "json", "replay", "workdir")},
        "samples": [asdict(s) for s in samples],
    }


def report_streams(
    args: argparse.Namespace, argv: Sequence[str] | None, samples: Sequence[Sample], backends: Sequence[str]
) -> int:
    """Prints the Kafka Streams fleets' tables and publishes them in their own sections."""
    summaries = summarize(samples)
    body = fleet_streams.doc_body(
        summaries,
        backends,
        replicas=args.replicas,
        runs=args.runs,
        partitions=args.partitions,
        records=args.records,
        session_timeout_ms=args.session_timeout_ms,
    )
    print(body)
    if args.json is not None:
        args.json.write_text(json.dumps([asdict(s) for s in samples], indent=1) + "\n")
    if args.no_publish:
        return 0
    command = " ".join([".venv/bin/python bench/fleet_ops.py", *_measuring_options(argv)])
    publish(fleet_streams.BLOCK, fleet_streams.TITLE, command, body, _published(args, samples))
    fleet_streams.publish_readme(
        fleet_streams.readme_body(
            summaries,
            backends[0],
            replicas=args.replicas,
            runs=args.runs,
            records=args.records,
            partitions=args.partitions,
        )
    )
    return 0


@contextmanager
def _workdir(kept: Path | None) -> Iterator[Path]:
    if kept is not None:
        kept.mkdir(parents=True, exist_ok=True)
        yield kept.resolve()
        return
    with tempfile.TemporaryDirectory(prefix="staticfleet-bench-") as tmp:
        yield Path(tmp)


def _absent_kinds(kinds: Sequence[str], backends: Sequence[str]) -> str:
    """Says which of the wanted kinds a coordinator could not run."""
    missing = {b: [k for k in kinds if b not in KINDS[k].backends] for b in backends}
    parts = [f"Not on {backend_name(b)}: {', '.join(m)}." for b, m in missing.items() if m]
    return " ".join(parts)


def _heartbeats(summaries: Sequence[Summary]) -> str:
    """Which heartbeat interval each kind of fleet ran with on each coordinator, as the samples say."""
    found: dict[str, dict[str, set[int | None]]] = {}
    for summary in summaries:
        found.setdefault(summary.backend, {}).setdefault(summary.kind, set()).update(summary.heartbeats)

    def shown(values: set[int | None]) -> str:
        known = sorted(v for v in values if v is not None)
        return ", ".join(
            [
                *([f"the client default ({CLIENT_HEARTBEAT_MS} ms)"] if None in values else []),
                *(f"{v} ms" for v in known),
            ]
        )

    parts = []
    for backend, kinds in found.items():
        fleets = ", ".join(f"{kind}: {shown(values)}" for kind, values in kinds.items())
        parts.append(f"on {backend_name(backend)}: {fleets}")
    return "; ".join(parts)


def _measuring_options(argv: Sequence[str] | None) -> list[str]:
    """The command line without the options that only say where results go."""
    given = list(sys.argv[1:] if argv is None else argv)
    kept: list[str] = []
    skip = False
    for item in given:
        if skip:
            skip = False
            continue
        if item in ("--json", "--replay", "--workdir"):
            skip = True
            continue
        if item == "--no-publish" or item.startswith(("--json=", "--replay=", "--workdir=")):
            continue
        kept.append(shlex.quote(item))
    return kept


def _doc_body(args: argparse.Namespace, summaries: Sequence[Summary], backends: Sequence[str]) -> str:
    n = args.replicas
    shown = [(kind, json.dumps(spec)) for kind, spec in parse_fleet_specs(args.fleet_spec).items()]
    lines = [
        f"Fleets of N={n} `examples/consumer` pods (confluent-kafka, {args.partitions} partitions each, "
        f"sessionTimeoutMs {args.session_timeout_ms}; heartbeat interval: {_heartbeats(summaries)}) on the "
        "local cluster, side by side against one coordinator, one fleet of each kind: *staticfleet* (a "
        f"StaticConsumerGroup with the defaults, its operator at the chart's `--interval` of "
        f"{OPERATOR_INTERVAL_S:g} s) and *staticfleet cooperative* (the same with "
        "`assignmentStrategy: cooperative-sticky`); *plain static* (the StatefulSet the operator would "
        "build, operated by nobody: instance ids, no removal, no pre-registration); *plain dynamic* (that "
        "StatefulSet with `KAFKA_MEMBERSHIP=dynamic`: no instance id, LeaveGroup as a consumer stops) at "
        "the client's default heartbeat, at staticfleet's, and at staticfleet's with cooperative-sticky "
        "(KIP-429); and the consumer protocol (KIP-848, `group.protocol=consumer`): *staticfleet consumer "
        "protocol* (a StaticConsumerGroup with `groupProtocol: consumer`) and plain StatefulSets, dynamic "
        f"and static, whose heartbeat the coordinator sets ({args.consumer_heartbeat_ms} ms here on both; "
        "Kafka's default and floor are 5 s, and shorter is not simply faster: librdkafka gives each "
        "ConsumerGroupHeartbeat the interval as its timeout, and a static member whose leaving heartbeat "
        "times out keeps its instance id taken until the session times out). A scale step patches the "
        "StaticConsumerGroup or the plain StatefulSet, as `kubectl scale` does; a rolling restart patches "
        "every fleet's StatefulSet, as `kubectl rollout restart statefulset/<name>` does (kubectl rolls "
        "only built-in workloads; the operator leaves the annotation in place), so it waits for no "
        "operator pass, which a template change made in the StaticConsumerGroup does. A rolling restart "
        "and a scale step go to one fleet at a time, each run beginning one fleet further on (rolled at "
        "once, the fleets would restart one pod each at the same time on this machine's two cores, each "
        "restart slower for the others', where a cluster's nodes restart their own; scaled at once, their "
        "pods would queue behind each other in the controller manager's client rate limit). "
        "Members learn of a rebalance from their next heartbeat, which keeps the phase of the "
        "group's last rebalance, so where a command lands in that cycle decides how long its rebalance "
        "waits: run i of k sends each command (i - 1/2)/k of the fleet's heartbeat interval after a "
        "multiple of it from the group's last rebalance (as the coordinator recorded it; a random moment "
        "for the consumer protocol, which has no join phase), so that the runs cover the cycle evenly "
        "and their median is its middle. Each fleet's time runs from its own command until its group is "
        "Stable with exactly the expected members, all assigned (a rolling restart also waits for every "
        f"pod to be replaced and ready). Rebalances are counted over the operation plus {SETTLE_S:.0f} s "
        "(for the consumer protocol: the group epochs the broker logged, each a new target assignment). "
        "*s not Stable* is how long the group was not Stable (or the coordinator not answering) during "
        f"the operation. Median (range) of {args.runs} runs; after the scale-up each run scales back to N "
        "unmeasured before the coordinator restart."
        + "".join(f" The {kind} fleet also had `{spec}`." for kind, spec in shown),
        "",
        "*partition-s stopped* is what the operation cost the consumers: over the operation and its settle "
        "period, the seconds each partition had no owner consuming it, summed over the partitions "
        "(bench/consumption.py, from each consumer's log: a partition stops at its revocation or its "
        "owner's stop, and is consumed again from its new owner's first fetch; nobody writes to these "
        "topics, so a first fetch is the first that reaches the partition's end, within the consumers' "
        "`fetch.wait.max.ms` of 100 ms; each group starts with offset 0 committed for every partition, as a "
        "fleet that has consumed has, so a new owner fetches at once). With the eager assignors every "
        "partition stops in every rebalance; with cooperative-sticky and the consumer protocol only the "
        "partitions that move. A coordinator restart moves no partition: its fetches wait for the broker, "
        "which this does not count.",
        "",
        "The machine is shared with other work and noisy: compare the fleets within one coordinator's "
        "table (they ran side by side, in one run), not with figures from another run or day. The last "
        "column holds each measure against the best of staticfleet's fleets on that measure, and counts a "
        "baseline better with fewer rebalances, Stable sooner by more than "
        f"{SECONDS_MARGIN:g} s or {SECONDS_MARGIN_SHARE:.0%} of the time, whichever is more (a rolling "
        "restart's time, each pod's readiness seen at the probe's 1 s period, spreads over seconds from "
        f"run to run for every kind), or more than {PARTITION_SECONDS_MARGIN:g} partition-second fewer "
        "stopped.",
        "",
        "How to read the scale steps: *s not Stable* is the rebalance itself, while every member waits for "
        "the others; members learn of a rebalance from their next heartbeat, so it lasts up to one "
        "heartbeat interval and more when members join or leave in several waves. The rest of a fleet's "
        "*s to Stable* the group keeps consuming: for staticfleet it is the operator's work and the pods' "
        "start or stop (on a scale-down a departing consumer leaves the group itself, and the operator "
        "removes what is left once the pods have stopped; on a scale-up the new instance ids are "
        "pre-registered before the StatefulSet grows, or on Apache Kafka the join phase held for them); "
        "a dynamic consumer leaves the group itself as it stops, and plain static members are only "
        "dropped after the session timeout. A fleet's scale step therefore spreads over up to its whole "
        "heartbeat interval across the runs: 3 s for the fleets on the client's default, whose range "
        "shows it.",
    ]
    absent = _absent_kinds(args.kinds, backends)
    for backend in backends:
        rows = comparison_rows(summaries, backend)
        if rows:
            lines += [
                "",
                f"On {backend_name(backend)}, medians (rebalances / s to Stable / partition-s stopped):",
                "",
                table(comparison_headers(kinds_of(summaries, backend)), rows),
            ]
    if absent:
        lines += ["", absent]
    if KAFKA in backends:
        lines += [
            "",
            "On Apache Kafka the operator's pre-registration is refused (an unknown group config), so for "
            "a scale-up the operator holds the join phase with Kafka's own protocol: a pending member "
            "(KIP-394, a JoinGroup answered with MEMBER_ID_REQUIRED) that no join phase completes without, "
            "removed the moment every new instance has joined. The staticfleet fleet therefore heartbeats "
            "as often as on the embedded coordinator; removal by LeaveGroup works the same.",
        ]
        down = [
            s.median_s
            for s in summaries
            if s.backend == KAFKA and s.operation == COORDINATOR_RESTART and s.kind == PLAIN_STATIC
        ]
        if down and down[0] * 1000 > args.session_timeout_ms:
            lines[-1] += (
                f" The broker took longer to come back ({down[0]:.0f} s, median) than the session timeout: "
                "the dynamic consumers then joined again without their member ids, as new members (the "
                "broker's log says so), a rebalance that also waits for the old members to expire, while "
                "static members came back under their instance ids."
            )
    return "\n".join(lines)


if __name__ == "__main__":
    sys.exit(main())
