"""The pieces of the operator's e2e tests and of bench/fleet_ops.py: the embedded coordinator as a local
process on 127.0.0.1, the operator as a local process, and fleets whose pods run
`examples/consumer/consumer.py` (the local pod runner puts the project's Python on PATH).
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from e2e.helpers import Kubectl, Manifest, wait_until
from e2e.localcluster import procs
from e2e.localcluster.ports import free_port
from examples.demo.fleet import consumer_pod_template
from staticfleet.admin.coordinator_api import fetch_group_json
from staticfleet.kube.builders import POD_NAME_ENV

REPO_ROOT = Path(__file__).resolve().parents[3]
CONSUMER = REPO_ROOT / "examples" / "consumer" / "consumer.py"
CRD_DIR = REPO_ROOT / "crds"
PARTITIONS = 6


def timing(name: str, seconds: float) -> None:
    """Measured durations are printed (pytest -s shows them) and appended to $STATICFLEET_E2E_TIMINGS."""
    line = f"[timing] {name}: {seconds:.1f}s"
    print(line)
    target = os.environ.get("STATICFLEET_E2E_TIMINGS")
    if target:
        with open(target, "a") as out:
            out.write(json.dumps({"name": name, "seconds": round(seconds, 2)}) + "\n")


@dataclass
class Coordinator:
    bootstrap: str
    api: str
    data_dir: Path
    process: subprocess.Popen[bytes]

    def group(self, group_id: str) -> dict[str, Any] | None:
        return fetch_group_json(self.api, group_id, timeout_s=5)

    def members(self, group_id: str) -> set[str]:
        group = self.group(group_id) or {}
        return {m["instanceId"] for m in group.get("memberList", []) if m.get("instanceId")}

    def events(self, group_id: str) -> list[dict[str, Any]]:
        """The coordinator's event log lines for one group."""
        found = []
        for path in sorted((self.data_dir / "events").glob("events*.jsonl")):
            for line in path.read_text().splitlines():
                try:
                    record = json.loads(line)
                except ValueError:
                    continue
                if record.get("group") == group_id:
                    found.append(record)
        return found

    def create_topic(self, topic: str, partitions: int = PARTITIONS) -> None:
        from kafka import KafkaAdminClient
        from kafka.admin import NewTopic

        admin = KafkaAdminClient(bootstrap_servers=self.bootstrap)
        try:
            admin.create_topics([NewTopic(topic, partitions, 1)])
        finally:
            admin.close()


def start_coordinator(
    workdir: Path,
    extra_args: Sequence[str] = (),
    ports: tuple[int, int] | None = None,
    protocol: str | None = None,
    host: str = "127.0.0.1",
) -> Coordinator:
    """`staticfleet coordinator` on free ports of 127.0.0.1 (or of `host`, an address on a link the test
    made), or on these Kafka and HTTP ports to restart one where it was; ready to serve; stop it with
    stop_coordinator. With `protocol` (e.g. SASL_SSL) its one listener is of that kind (extra_args then
    carry the security settings)."""
    port, http = ports or (free_port(host), free_port(host))
    listener = (
        [
            "--listener",
            f"{protocol}://{host}:{port}",
            "--advertised-listener",
            f"{protocol}://{host}:{port}",
        ]
        if protocol
        else ["--listen", f"{host}:{port}", "--advertised-listener", f"{host}:{port}"]
    )
    argv = [
        sys.executable, "-m", "staticfleet.cli", "coordinator", *listener,
        "--http", f"{host}:{http}", "--data-dir", str(workdir / "data"), "--no-fsync", *extra_args,
    ]  # fmt: skip
    workdir.mkdir(parents=True, exist_ok=True)
    with (workdir / "coordinator.log").open("ab") as log:
        process = procs.spawn(argv, log=log, env=dict(os.environ), cwd=REPO_ROOT)
    api = f"http://{host}:{http}"

    def ready() -> bool:
        if process.poll() is not None:
            raise RuntimeError(
                f"coordinator exited with {process.returncode}; see {workdir / 'coordinator.log'}"
            )
        try:
            with urllib.request.urlopen(f"{api}/readyz", timeout=2) as response:
                return bool(response.status == 200)
        except OSError:
            return False

    wait_until(ready, timeout=30, what="the coordinator to be ready")
    return Coordinator(f"{host}:{port}", api, workdir / "data", process)


def stop_coordinator(coordinator: Coordinator) -> None:
    procs.stop(coordinator.process, grace_seconds=10)


def restart_coordinator(coordinator: Coordinator) -> Coordinator:
    """The same coordinator (ports and data) started again after stop_coordinator."""
    host, port = coordinator.bootstrap.rsplit(":", 1)
    http = int(coordinator.api.rsplit(":", 1)[1])
    return start_coordinator(coordinator.data_dir.parent, ports=(int(port), http), host=host)


@dataclass
class OperatorRunner:
    """`staticfleet operator` as a local process, watching one namespace (or all, with namespace None)."""

    kubeconfig: Path
    namespace: str | None
    workdir: Path
    interval_s: float = 1.0
    process: subprocess.Popen[bytes] | None = None
    starts: int = 0
    metrics_port: int = field(default_factory=free_port)
    extra_args: tuple[str, ...] = ()
    tenancy: str = "off"
    """`--tenancy`: off for the tests of everything else, whose fleets' names follow no namespace;
    `policies` (the operator's default) where tenancy is what is tested."""

    @property
    def log_path(self) -> Path:
        return self.workdir / f"operator-{self.starts}.log"

    def start(self, extra_env: dict[str, str] | None = None) -> None:
        assert self.process is None or self.process.poll() is not None, "the operator is already running"
        self.starts += 1
        self.metrics_port = free_port()
        argv = [
            sys.executable, "-m", "staticfleet.cli", "operator",
            "--kubeconfig", str(self.kubeconfig),
            *(["--namespace", self.namespace] if self.namespace else ["--all-namespaces"]),
            "--interval", str(self.interval_s),
            # The clusters of the tests: a coordinator or Kafka broker on loopback (never 127.0.0.2).
            "--allowed-bootstrap-servers", "127.0.0.1,localhost",
            "--allowed-coordinator-apis", "127.0.0.1,localhost",
            "--tenancy", self.tenancy,
            "--metrics-host", "127.0.0.1", "--metrics-port", str(self.metrics_port),
            *self.extra_args,
        ]  # fmt: skip
        env = {**os.environ, **(extra_env or {})}
        with self.log_path.open("ab") as log:
            self.process = procs.spawn(argv, log=log, env=env, cwd=REPO_ROOT)

    def wait_exit(self, timeout: float) -> int:
        assert self.process is not None
        code: int = self.process.wait(timeout=timeout)
        return code

    def stop(self) -> None:
        if self.process is not None:
            procs.stop(self.process, grace_seconds=10)

    def metrics(self) -> str:
        with urllib.request.urlopen(f"http://127.0.0.1:{self.metrics_port}/metrics", timeout=5) as response:
            return str(response.read().decode())

    def logs(self) -> str:
        return "\n".join(p.read_text(errors="replace") for p in sorted(self.workdir.glob("operator-*.log")))


def consumer_template(
    grace_seconds: int = 10, start_stagger_s: int = 0, *, leaves_when_departing: bool = True
) -> Manifest:
    """The example consumer. start_stagger_s > 0 delays each pod's consumer by ordinal x stagger seconds,
    as when image pulls or init containers take different times on different nodes. Without
    leaves_when_departing it ignores the operator's departure mark, as a consumer that does not read it
    would: the operator then removes its member once its pod has stopped."""
    command = ["python", str(CONSUMER)]
    if start_stagger_s:
        # $$ keeps Kubernetes' own $(VAR) expansion away from the shell's arithmetic.
        command = [
            "sh",
            "-c",
            f"sleep $$((STATICFLEET_POD_ORDINAL * {start_stagger_s})); exec python {CONSUMER}",
        ]
    template = consumer_pod_template(
        command, image="staticfleet-consumer-example", grace_seconds=grace_seconds, own_address=True
    )
    if not leaves_when_departing:
        (container,) = template["spec"]["containers"]
        container["env"].append({"name": "LEAVE_WHEN_DEPARTING", "value": "false"})
    return template


def fleet_manifest(
    name: str, replicas: int, coordinator: Coordinator | str, topic: str, **spec: Any
) -> Manifest:
    """A fleet of example consumers; `coordinator` is the embedded one, or the bootstrap servers of a
    cluster without the coordinator API (Apache Kafka)."""
    kafka = (
        {"bootstrapServers": coordinator}
        if isinstance(coordinator, str)
        else {"bootstrapServers": coordinator.bootstrap, "coordinatorApi": coordinator.api}
    )
    body: Manifest = {
        "apiVersion": "staticfleet.io/v1alpha1",
        "kind": "StaticConsumerGroup",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "topics": [topic],
            "sessionTimeoutMs": 60_000,
            "kafka": kafka,
            "template": consumer_template(),
            "volumeClaimTemplates": [
                {
                    "metadata": {"name": "state"},
                    "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": "1Mi"}}},
                }
            ],
        },
    }
    body["spec"].update(spec)
    return body


def start_fleet(
    kubectl: Kubectl,
    namespace: str,
    coordinator: Coordinator,
    operator: OperatorRunner,
    replicas: int,
    *,
    name: str = "orders",
    partitions: int = PARTITIONS,
    **spec: Any,
) -> Manifest:
    """The topic `<namespace>-orders`, the operator, and a fleet of example consumers, Ready."""
    topic = f"{namespace}-orders"
    coordinator.create_topic(topic, partitions)
    operator.start()
    elapsed = stopwatch()
    kubectl.apply(fleet_manifest(name, replicas, coordinator, topic, **spec), namespace)
    per_pod = int(spec.get("membersPerPod", 1))
    body = wait_fleet(
        kubectl, namespace, name, ready_with(replicas, per_pod), timeout=150, what=f"Ready with {replicas}"
    )
    members = f" x {per_pod} members" if per_pod > 1 else ""
    timing(f"create {replicas} replicas{members} -> Ready", elapsed())
    return body


def get_fleet(kubectl: Kubectl, namespace: str, name: str) -> Manifest:
    return kubectl.get("staticconsumergroup", name, namespace)


def condition(body: Manifest, type_: str) -> dict[str, Any]:
    for c in body.get("status", {}).get("conditions", []) or []:
        if c["type"] == type_:
            return dict(c)
    return {}


def wait_fleet(
    kubectl: Kubectl,
    namespace: str,
    name: str,
    check: Callable[[Manifest], bool],
    *,
    timeout: float,
    what: str,
) -> Manifest:
    def probe() -> Manifest | None:
        body = get_fleet(kubectl, namespace, name)
        return body if check(body) else None

    found: Manifest = wait_until(probe, timeout=timeout, what=f"{name}: {what}", interval=0.25)
    return found


def ready_with(replicas: int, members_per_pod: int = 1) -> Callable[[Manifest], bool]:
    def check(body: Manifest) -> bool:
        status = body.get("status", {})
        return (
            condition(body, "Ready").get("status") == "True"
            and status.get("group", {}).get("members") == replicas * members_per_pod
            and status.get("readyReplicas") == replicas
            and body["spec"]["replicas"] == replicas
        )

    return check


def events(kubectl: Kubectl, namespace: str, name: str, reason: str | None = None) -> list[Manifest]:
    found = [
        e
        for e in kubectl.items("events", namespace)
        if e.get("involvedObject", {}).get("kind") == "StaticConsumerGroup"
        and e["involvedObject"].get("name") == name
        and (reason is None or e.get("reason") == reason)
    ]
    return sorted(found, key=lambda e: str(e.get("eventTime") or e.get("lastTimestamp") or ""))


def pod_uids(kubectl: Kubectl, namespace: str, name: str) -> dict[str, str]:
    pods = kubectl.items("pods", namespace, "-l", f"staticfleet.io/group={name}")
    return {p["metadata"]["name"]: p["metadata"]["uid"] for p in pods}


def rolled_out(kubectl: Kubectl, namespace: str, name: str, replicas: int, old_uids: dict[str, str]) -> bool:
    """Every pod was replaced (none of `old_uids` is left) and the StatefulSet's rollout is done."""
    uids = pod_uids(kubectl, namespace, name)
    sts = kubectl.get("statefulset", name, namespace)["status"]
    return (
        len(uids) == replicas
        and not set(uids.values()) & set(old_uids.values())
        and sts.get("updatedReplicas") == replicas
        and sts.get("readyReplicas") == replicas
        and sts.get("currentRevision") == sts.get("updateRevision")
    )


def stopwatch() -> Callable[[], float]:
    start = time.monotonic()
    return lambda: time.monotonic() - start


def kill_hard(runner: OperatorRunner) -> None:
    assert runner.process is not None
    procs.signal_group(runner.process.pid, signal.SIGKILL)
    runner.process.wait(timeout=10)


def consumer_pids(group_id: str, pod: str | None = None) -> list[int]:
    """The pids of the group's consumer processes (the local pod runner runs them here); of one pod's only,
    with `pod`."""
    found = procs.processes_with_env("KAFKA_GROUP_ID", group_id)
    if pod is None:
        return found
    return sorted(set(found) & set(procs.processes_with_env(POD_NAME_ENV, pod)))


@contextlib.contextmanager
def paused(group_id: str, expected: int, pod: str | None = None) -> Iterator[list[int]]:
    """SIGSTOP the fleet's consumer processes (one pod's, with `pod`), SIGCONT after. A pause far shorter
    than the session timeout costs no rebalance."""

    def running() -> list[int] | None:
        found = consumer_pids(group_id, pod)
        return found if len(found) >= expected else None

    pids = wait_until(running, timeout=30, what=f"{expected} consumer processes of {group_id}")
    for pid in pids:
        os.kill(pid, signal.SIGSTOP)
    try:
        yield pids
    finally:
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(pid, signal.SIGCONT)
