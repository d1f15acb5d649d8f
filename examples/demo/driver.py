"""The demo's steps: cluster, chart, producer, fleets, rollout, scale down, scale up, summary.

Three fleets of the same consumer run side by side (examples.demo.fleet.FLEET_KINDS): staticfleet's,
plain static membership without the operator's help, and plain dynamic membership. Every operation goes
to all three, one right after the other, and each fleet is timed from its own command until its group is
Stable with exactly the expected members and every consumer ready.

Every wait is bounded and every step prints what it did and how long it took. The demo's state (which
cluster, namespace and release, where the coordinator is, and a kind cluster `make demo` created for it)
is kept in <state dir>/state.json, so that `down` stops what `up` started, whatever KUBECONFIG says by
then.
"""

from __future__ import annotations

import base64
import contextlib
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import asdict, dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from e2e.helm import CHART, Helm, HelmError, ensure_helm, set_flags
from e2e.helpers import Kubectl, KubectlError, Manifest, pod_report, port_forward, wait_until
from e2e.localcluster import binaries, procs
from e2e.localcluster.cli import read_state as read_cluster_state
from e2e.localcluster.ports import free_port
from examples.demo import fleet
from examples.demo.fleet import (
    FLEET_KINDS,
    FLEET_NAMES,
    STATICFLEET,
    GroupView,
    PlainLogin,
    ProducerLogin,
    cycle_moment,
    expected_members,
    group_settled,
    heartbeat_ms,
    last_rebalance_at,
    operated,
    plain_access,
    plain_workload,
)
from examples.demo.incluster import GRANT_SCRIPT, GROUP_SCRIPT, in_coordinator
from examples.demo.summary import (
    MODES,
    OPERATIONS_FILE,
    OperationLog,
    Row,
    details,
    format_table,
    operation_rows,
    published_comparison,
)
from staticfleet.admin import AclBinding, GroupAdmin, KafkaConnection
from staticfleet.admin.coordinator_api import CoordinatorApiUnavailable, fetch_group_json
from staticfleet.kube.access import SCRAM_ITERATIONS

REPO_ROOT = Path(__file__).resolve().parents[2]
POD_RUNNER_KUBELET = "staticfleet-podrunner"  # the kubeletVersion the local pod runner reports
STATE_FILE = "state.json"

# The four operations, in order; what each cost every fleet is measured (summary.py).
OPERATIONS = ("create 0 -> 3", "rolling restart of 3", "scale 3 -> 1", "scale 1 -> 4")
OPERATION_TIMEOUT_S = 300.0
COORDINATOR_HTTP_PORT = 8080  # the chart's coordinator.ports.http, which the demo leaves as it is


class DemoError(RuntimeError):
    pass


@dataclass(frozen=True)
class Settings:
    state_dir: Path
    kubeconfig: Path | None = None  # None: start a local cluster
    run_dir: Path | None = None  # the local pod runner's directory, for a cluster given by kubeconfig
    namespace: str = "staticfleet-demo"
    release: str = "staticfleet-demo"  # not the README's `staticfleet`: each release has its ClusterRoles
    kind_cluster: str | None = None  # a kind cluster created for the demo: `down` deletes it
    image: str = "staticfleet:0.1.0"
    watch_namespace_only: bool = False
    pause_s: float = 5.0
    rate: int = 20
    teardown: bool = False  # stop everything at the end (CI)
    keep_namespace: bool = False  # with teardown: the namespace belongs to the caller
    results: Path | None = None


@dataclass
class State:
    """What `down` and the closing instructions need; saved as JSON."""

    namespace: str
    release: str
    kubeconfig: str
    kubectl: str
    local: bool
    run_dir: str | None = None
    cluster_home: str | None = None  # a local cluster this demo started
    kind_cluster: str | None = None  # a kind cluster created for this demo (e2e/kind/cluster.sh)
    bootstrap_servers: str = ""
    coordinator_api: str | None = None
    dashboard: str | None = None  # the operator's dashboard, when this machine reaches it directly
    secured: bool = False  # the chart's secured default: logins, tokens and a CA made at install
    ca_file: str | None = None  # the install's CA, copied into the state dir (the local pod runner)
    api_token_file: str | None = None  # the coordinator API's token, likewise
    report: str | None = None
    started_at: str = field(default_factory=lambda: datetime.now(UTC).isoformat(timespec="seconds"))
    # The coordinator's API as this run reaches it where its pods are not reachable from here (a
    # port-forward for as long as `up` runs); never saved.
    forwarded_api: str | None = None

    @property
    def group_id(self) -> str:
        return self.group_of(STATICFLEET)

    def group_of(self, kind: str) -> str:
        return f"{self.namespace}.{FLEET_NAMES[kind]}"

    def kube(self) -> Kubectl:
        return Kubectl(self.kubectl, Path(self.kubeconfig))


def saved(state: State) -> dict[str, Any]:
    """The state as saved: what outlives this process."""
    return {k: v for k, v in asdict(state).items() if k != "forwarded_api"}


def save_state(state_dir: Path, state: State) -> None:
    state_dir.mkdir(parents=True, exist_ok=True)
    (state_dir / STATE_FILE).write_text(json.dumps(saved(state), indent=2) + "\n")


def load_state(state_dir: Path) -> State | None:
    try:
        return State(**json.loads((state_dir / STATE_FILE).read_text()))
    except (OSError, ValueError, TypeError):
        return None


# -- output ------------------------------------------------------------------------------------------------


class Progress:
    def __init__(self, total: int) -> None:
        self.total = total
        self.done = 0
        self.started = time.monotonic()
        self.seconds: dict[str, float] = {}  # each step's duration, by title

    @contextmanager
    def step(self, title: str) -> Iterator[Callable[[str], None]]:
        """Prints `[n/total] title`, then the outcome noted by the step and its duration."""
        self.done += 1
        print(f"[{self.done}/{self.total}] {title}", flush=True)
        outcome = ["done"]
        began = time.monotonic()
        yield lambda text: outcome.__setitem__(0, text)
        self.seconds[title] = round(time.monotonic() - began, 1)
        print(f"      {outcome[0]} ({self.seconds[title]:.1f} s)", flush=True)


# -- up ----------------------------------------------------------------------------------------------------


def up(settings: Settings) -> int:
    with contextlib.ExitStack() as cleanup:
        return _up(settings, cleanup)


def _up(settings: Settings, cleanup: contextlib.ExitStack) -> int:
    running = load_state(settings.state_dir)
    if running is not None and _alive(running):
        print(f"The demo is already running (since {running.started_at}); `make demo-down` stops it.\n")
        print(instructions(running))
        return 0
    if shutil.which("java") is None:
        raise DemoError(
            "the summary runs Spark, which needs Java 17 or 21 on PATH (e.g. openjdk-17-jre-headless)"
        )
    progress = Progress(total=8)
    print(
        "staticfleet demo: the chart, a producer, and three fleets of three consumers side by side:\n"
        "staticfleet's, plain static membership and plain dynamic membership\n",
        flush=True,
    )
    with progress.step(_cluster_title(settings)) as note:
        state = connect(settings)
        note(f"ready: {'local pod runner' if state.local else 'cluster'} via {state.kubeconfig}")
    save_state(settings.state_dir, state)
    kubectl = state.kube()
    operations_path = settings.state_dir / "analysis" / "input" / "operations.jsonl"
    operations_path.unlink(missing_ok=True)
    logs = {kind: OperationLog(operations_path, state.group_of(kind), MODES[kind]) for kind in FLEET_KINDS}

    with progress.step(
        f"helm upgrade --install {state.release} charts/staticfleet -n {state.namespace}"
    ) as note:
        install(state, settings)
        save_state(settings.state_dir, state)
        forward_coordinator_api(state, cleanup)
        note(f"operator and embedded coordinator ready; consumers bootstrap from {state.bootstrap_servers}")

    with progress.step(
        f"producer: {settings.rate} messages/s to topic {fleet.TOPIC} ({fleet.PARTITIONS} partitions)"
    ) as note:
        full = _fullname(state.release)
        login = ProducerLogin(f"{full}-kafka-admin", f"{full}-coordinator-tls") if state.secured else None
        manifest = fleet.producer(
            state.bootstrap_servers, image=settings.image, local=state.local, rate=settings.rate, login=login
        )
        kubectl.apply(manifest, state.namespace)
        wait_until(
            lambda: _deployment_available(kubectl, state.namespace, fleet.PRODUCER),
            timeout=120,
            what="the producer to be available",
        )
        note("producing")

    def create(kind: str) -> None:
        resource = fleet.consumer_fleet(3, image=settings.image, local=state.local, kind=kind)
        if operated(kind):
            kubectl.apply(resource, state.namespace)
            return
        access = None
        if state.secured:  # as the operator would for its fleet: a user, its Secret, its ACLs
            plain = plain_access(resource, state.namespace, Path(state.ca_file or "").read_bytes() or None)
            kubectl.apply(plain.secret, state.namespace)
            grant(state, plain)
            access = plain.access
        for body in plain_workload(resource, state.namespace, state.bootstrap_servers, access):
            kubectl.apply(body, state.namespace)

    def operation(
        title: str, kind: str, before: int, after: int, act: Callable[[str], None], *, one_at_a_time: bool
    ) -> None:
        """`act(fleet kind)` on every fleet, each timed until its group is Stable with `after` members:
        all at once, or `one_at_a_time` (each fleet alone with the control plane, so that none waits
        behind another's pods in the controller manager)."""
        with progress.step(title) as note:
            rollout = kind == "rollout"
            generations = _statefulset_generations(kubectl, state.namespace) if rollout else None
            operation_ids: dict[str, str] = {}

            def finished(fleet_kind: str) -> None:
                logs[fleet_kind].completed(operation_ids[fleet_kind], kind, before, after)

            def start(fleet_kind: str) -> float:
                operation_ids[fleet_kind] = logs[fleet_kind].started(kind, before, after)
                began = time.monotonic()
                act(fleet_kind)
                return began

            seconds: dict[str, float] = {}
            waves = [[k] for k in FLEET_KINDS] if one_at_a_time else [list(FLEET_KINDS)]
            for wave in waves:
                if one_at_a_time:
                    wait_for_mid_cycle(state, wave[0])
                began = {fleet_kind: start(fleet_kind) for fleet_kind in wave}
                seconds |= wait_fleets(state, after, began, finished, generations)
            note("Stable with " + ", ".join(f"{k} {seconds[k]:.1f} s" for k in FLEET_KINDS))
        time.sleep(settings.pause_s)

    operation(
        "fleets of 3 consumers: StaticConsumerGroup orders; plain StatefulSets orders-static, orders-dynamic",
        "scale-up",
        0,
        3,
        create,
        one_at_a_time=False,
    )
    operation(
        "rolling restart of each fleet (a change to the pod template)",
        "rollout",
        3,
        3,
        lambda kind: restart_pods(kubectl, state.namespace, kind),
        one_at_a_time=False,
    )
    operation(
        "kubectl scale scg/orders (statefulset/orders-static, statefulset/orders-dynamic) --replicas=1",
        "scale-down",
        3,
        1,
        lambda kind: scale(kubectl, state.namespace, kind, 1),
        one_at_a_time=True,
    )
    operation(
        "kubectl scale scg/orders (statefulset/orders-static, statefulset/orders-dynamic) --replicas=4",
        "scale-up",
        1,
        4,
        lambda kind: scale(kubectl, state.namespace, kind, 4),
        one_at_a_time=True,
    )

    with progress.step(
        "summary: staticfleet analyze over the coordinator's event log (Spark, local mode)"
    ) as note:
        rows, report = summarize(state, settings.state_dir / "analysis", operations_path)
        state.report = str(report)
        save_state(settings.state_dir, state)
        note(f"report: {report}")
    print()
    print(format_table(rows))
    print(f"\nstaticfleet's fleet, from the same log:\n{details(rows)}")
    published = published_comparison()
    if published:
        print(f"\nEvery tuned baseline (docs/benchmarks.md), where one does better:\n{published}")
    print(
        "\nEvery figure is measured in this run, the three fleets side by side on one coordinator (each\n"
        "scale step sent to one fleet at a time, halfway through its heartbeat cycle): rebalances come\n"
        "from the coordinator's event log; time runs from each fleet's command until its group is Stable\n"
        "with exactly the expected members and every consumer ready. This machine's load moves the\n"
        "times; bench/fleet_ops.py repeats the operations at N=20 (docs/benchmarks.md).\n"
    )
    if settings.results is not None:
        settings.results.write_text(
            json.dumps(
                {"rows": [asdict(r) for r in rows], "state": saved(state), "steps_s": progress.seconds},
                indent=2,
            )
            + "\n"
        )
    if settings.teardown:
        down(settings)
    else:
        print(instructions(state))
    print(f"demo finished in {time.monotonic() - progress.started:.0f} s")
    return 0


def _cluster_title(settings: Settings) -> str:
    if settings.kubeconfig is not None:
        return f"Kubernetes: the cluster of {settings.kubeconfig}"
    return (
        "Kubernetes: starting a local control plane (etcd, kube-apiserver, kube-controller-manager) "
        "and the pod runner"
    )


def connect(settings: Settings) -> State:
    """The cluster from settings.kubeconfig, or a local one started in the state dir."""
    kubectl_binary = binaries.ensure_binaries() / "kubectl"
    cluster_home: Path | None = None
    run_dir = settings.run_dir
    if settings.kubeconfig is not None:
        kubeconfig = settings.kubeconfig
    else:
        cluster_home = settings.state_dir / "cluster"
        started = subprocess.run(
            [sys.executable, "-m", "e2e.localcluster", "--home", str(cluster_home), "up"],
            cwd=REPO_ROOT,
            capture_output=True,
            text=True,
            timeout=900,
            check=False,
            env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        )
        cluster = read_cluster_state(cluster_home)
        if started.returncode != 0 or cluster is None:
            raise DemoError(f"the local cluster did not start:\n{started.stderr[-3000:]}")
        kubeconfig, run_dir = Path(cluster["kubeconfig"]), Path(cluster["run_dir"])
    kubectl = Kubectl(kubectl_binary, kubeconfig)
    readyz = kubectl.run("get", "--raw", "/readyz", check=False)
    if readyz.returncode != 0:
        raise DemoError(f"the cluster of {kubeconfig} is not reachable: {readyz.stderr.strip()}")
    nodes = wait_until(lambda: _ready_nodes(kubectl), timeout=60, what="a Ready node")
    local = any(n["status"]["nodeInfo"].get("kubeletVersion") == POD_RUNNER_KUBELET for n in nodes)
    if local and run_dir is None:
        guess = kubeconfig.parent  # the local cluster keeps its kubeconfig in its run directory
        if not (guess / "pods").is_dir():
            raise DemoError(
                "pods run on the local pod runner, but its run directory is unknown: pass --run-dir"
            )
        run_dir = guess
    return State(
        namespace=settings.namespace,
        release=settings.release,
        kubeconfig=str(kubeconfig),
        kubectl=str(kubectl_binary),
        local=local,
        run_dir=str(run_dir) if local and run_dir else None,
        cluster_home=str(cluster_home) if cluster_home else None,
        kind_cluster=settings.kind_cluster,
    )


def _ready_nodes(kubectl: Kubectl) -> list[Manifest]:
    nodes: list[Manifest] = kubectl.json("get", "nodes")["items"]
    ready = [
        n
        for n in nodes
        if any(
            c["type"] == "Ready" and c["status"] == "True" for c in n.get("status", {}).get("conditions", [])
        )
    ]
    return ready


def install(state: State, settings: Settings) -> None:
    """The chart, as users install it; on the local pod runner every server binds 127.0.0.1 on free ports."""
    values: dict[str, Any] = {"coordinator.defaultPartitions": fleet.PARTITIONS}
    if state.local:
        http, dashboard = free_port(), free_port()
        values |= {
            "bindAddress": "127.0.0.1",
            "coordinator.advertisedHost": "127.0.0.1",
            "coordinator.ports.kafka": free_port(),
            "coordinator.ports.http": http,
            "operator.ports.metrics": free_port(),
            "operator.ports.health": free_port(),
            "operator.ports.readiness": free_port(),
            "operator.replicas": 1,  # pods share this host's network: a second replica's ports would clash
            "dashboard.port": dashboard,
        }
        state.coordinator_api = f"http://127.0.0.1:{http}"
        state.dashboard = f"http://127.0.0.1:{dashboard}/"
    else:
        repository, _, tag = settings.image.rpartition(":")
        values |= {"image.repository": repository or settings.image, "image.tag": tag if repository else ""}
    if settings.watch_namespace_only:
        values["operator.watchNamespaces"] = [state.namespace]
    helm = Helm(ensure_helm(), Path(state.kubeconfig))
    try:
        helm.run(
            "upgrade", "--install", state.release, str(CHART),
            "--namespace", state.namespace, "--create-namespace",
            "--wait", "--timeout", "180s",
            *set_flags(values),
            timeout=240,
        )  # fmt: skip
    except HelmError as error:  # the pods' states and logs say why they never became ready
        raise DemoError(f"{error}\n{pod_report(state.kube(), [state.namespace])}") from None
    deployment = state.kube().get("deployment", f"{_fullname(state.release)}-operator", state.namespace)
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    state.bootstrap_servers = next(
        a.split("=", 1)[1] for a in args if a.startswith("--default-bootstrap-servers=")
    )
    secure(state, settings.state_dir)


def _secret(kubectl: Kubectl, namespace: str, name: str) -> dict[str, bytes] | None:
    found = kubectl.get_or_none("secret", name, namespace)
    return None if found is None else {k: base64.b64decode(v) for k, v in found["data"].items()}


def secure(state: State, state_dir: Path) -> None:
    """On the chart's secured default: the CA and the coordinator API's token copied into the state dir
    (owner-only files), HTTPS for the API and the dashboard, and a StaticFleetTenancyPolicy that lets the
    demo's namespace read the topic (the demo acts as the cluster's admin here)."""
    kubectl = state.kube()
    full = _fullname(state.release)
    tls = _secret(kubectl, state.namespace, f"{full}-coordinator-tls")
    token = _secret(kubectl, state.namespace, f"{full}-coordinator-http-token")
    state.secured = tls is not None and token is not None
    if tls is None or token is None:
        return
    for name, data in (("ca.crt", tls["ca.crt"]), ("http-token", token["token"])):
        path = state_dir / name
        path.touch(mode=0o600)
        path.write_bytes(data)
    state.ca_file, state.api_token_file = str(state_dir / "ca.crt"), str(state_dir / "http-token")
    if state.coordinator_api:
        state.coordinator_api = state.coordinator_api.replace("http://", "https://", 1)
    if state.dashboard:
        state.dashboard = state.dashboard.replace("http://", "https://", 1)
    kubectl.apply(tenancy_policy(state.namespace), state.namespace)


def tenancy_policy(namespace: str) -> Manifest:
    return fleet.tenancy_policy(f"staticfleet-demo-{namespace}", namespace, [fleet.TOPIC])


def grant(state: State, plain: PlainLogin) -> None:
    """The plain fleet's SCRAM user and ACLs, made as the chart's admin: directly on the local pod runner,
    else from inside the coordinator's pod (this machine may not reach its Kafka port)."""
    full = _fullname(state.release)
    if not state.local:
        in_coordinator(
            state.kube(), full, state.namespace, GRANT_SCRIPT, kafka=True, stdin=plain.grant_request()
        )
        return
    admin = _secret(state.kube(), state.namespace, f"{full}-kafka-admin") or {}
    connection = KafkaConnection(
        state.bootstrap_servers,
        security_protocol="SASL_SSL",
        sasl_mechanism=admin["mechanism"].decode(),
        sasl_username=admin["username"].decode(),
        sasl_password=admin["password"].decode(),
        ssl_cafile=state.ca_file,
    )
    with GroupAdmin(connection, timeout_s=10) as client:
        client.upsert_scram(plain.access.user, plain.access.mechanism, plain.password, SCRAM_ITERATIONS)
        client.create_acls(AclBinding(*acl) for acl in plain.acls)


def _fullname(release: str) -> str:
    """The chart's fullname for a release (templates/_helpers.tpl)."""
    name = release if "staticfleet" in release else f"{release}-staticfleet"
    return name[:40].rstrip("-")


def _deployment_available(kubectl: Kubectl, namespace: str, name: str) -> bool:
    status = kubectl.get("deployment", name, namespace).get("status", {})
    return bool(status.get("availableReplicas", 0) >= 1)


# -- the fleet's operations ----------------------------------------------------------------------------


def _resource(kind: str) -> str:
    """What an operation changes: the StaticConsumerGroup, or the plain StatefulSet nobody operates."""
    return f"{'scg' if operated(kind) else 'statefulset'}/{FLEET_NAMES[kind]}"


def fleet_done(
    kind: str,
    replicas: int,
    group: Manifest | None,
    statefulset: Manifest | None,
    generation_before: int | None = None,
) -> bool:
    """A Stable group of exactly the expected members, each assigned, and `replicas` ready pods (after a
    rollout: every pod of the new template). `group` is the coordinator's view (its HTTP API)."""
    if group is None or statefulset is None:
        return False
    in_group = group_settled(GroupView.from_json(group), expected_members(FLEET_NAMES[kind], kind, replicas))
    status = statefulset.get("status", {})
    generation = int(statefulset.get("metadata", {}).get("generation", 0))
    pods_ready = (
        statefulset.get("spec", {}).get("replicas") == replicas
        and status.get("readyReplicas", 0) == replicas
        and status.get("observedGeneration", 0) >= generation
    )
    if generation_before is not None:
        pods_ready = (
            pods_ready
            and generation > generation_before
            and status.get("currentRevision") == status.get("updateRevision")
            and status.get("updatedReplicas", 0) == replicas
        )
    return bool(in_group and pods_ready)


def _statefulsets(kubectl: Kubectl, namespace: str) -> dict[str, Manifest]:
    found = kubectl.items("statefulsets", namespace)
    return {str(s["metadata"]["name"]): s for s in found}


def _statefulset_generations(kubectl: Kubectl, namespace: str) -> dict[str, int]:
    return {
        name: int(body["metadata"]["generation"]) for name, body in _statefulsets(kubectl, namespace).items()
    }


def forward_coordinator_api(state: State, cleanup: contextlib.ExitStack) -> None:
    """Where this machine does not reach the coordinator's pod (a real kubelet's network), its HTTP API
    through one `kubectl port-forward` until `cleanup` closes: the demo asks it for its groups several
    times a second, and a `kubectl exec` for each would start processes in the pod every time. The
    certificate names 127.0.0.1, so HTTPS is verified as it is in the cluster. Without the forward, each
    question is asked in the pod."""
    if state.coordinator_api or state.local:
        return
    try:
        port = cleanup.enter_context(
            port_forward(
                state.kube(),
                state.namespace,
                f"pod/{_fullname(state.release)}-coordinator-0",
                COORDINATOR_HTTP_PORT,
            )
        )
    except KubectlError as error:
        print(f"      (no port-forward to the coordinator's API: {error}; asking in its pod instead)")
        return
    state.forwarded_api = f"{'https' if state.secured else 'http'}://127.0.0.1:{port}"


def coordinator_group(state: State, group_id: str) -> Manifest | None:
    """The embedded coordinator's view of a group (its HTTP API, with its token): directly on the local
    pod runner, through the port-forward elsewhere, else from inside the coordinator's pod."""
    api = state.coordinator_api or state.forwarded_api
    try:
        if api:
            token = Path(state.api_token_file).read_text().strip() if state.api_token_file else None
            return fetch_group_json(api, group_id, token=token, cafile=state.ca_file)
        found: Manifest | None = in_coordinator(
            state.kube(), _fullname(state.release), state.namespace, GROUP_SCRIPT, group_id
        )
        return found
    except (CoordinatorApiUnavailable, KubectlError, OSError, ValueError):
        return None


def wait_fleets(
    state: State,
    replicas: int,
    began: dict[str, float],
    finished: Callable[[str], None],
    generations: dict[str, int] | None = None,
    timeout: float = OPERATION_TIMEOUT_S,
) -> dict[str, float]:
    """Polls every fleet until it is done (fleet_done); calls `finished(kind)` as each one gets there and
    returns each fleet's seconds from its own start."""
    kubectl = state.kube()
    seconds: dict[str, float] = {}
    deadline = time.monotonic() + timeout
    while len(seconds) < len(began):
        if time.monotonic() > deadline:
            waiting = ", ".join(k for k in began if k not in seconds)
            raise DemoError(f"no Stable group of {replicas} ready consumers after {timeout:.0f} s: {waiting}")
        statefulsets = _statefulsets(kubectl, state.namespace)
        for kind in began:
            if kind in seconds:
                continue
            name = FLEET_NAMES[kind]
            before = None if generations is None else generations.get(name, 0)
            group = coordinator_group(state, state.group_of(kind))
            if fleet_done(kind, replicas, group, statefulsets.get(name), before):
                seconds[kind] = time.monotonic() - began[kind]
                finished(kind)
        time.sleep(0.25)
    return seconds


def wait_for_mid_cycle(state: State, kind: str) -> None:
    """Until halfway through the fleet's heartbeat cycle, counted from its group's last rebalance: where a
    command lands in that cycle decides how long the rebalance waits, and halfway is the typical case,
    which the one run of each scale step shows (bench/fleet_ops.py covers the cycle over its runs)."""
    origin = last_rebalance_at(coordinator_group(state, state.group_of(kind)))
    statefulset = _statefulsets(state.kube(), state.namespace).get(FLEET_NAMES[kind])
    if origin is None or statefulset is None:
        return
    now = time.time()
    time.sleep(max(0.0, cycle_moment(origin, now, heartbeat_ms(statefulset) / 1000, 0.5) - now))


def restart_pods(kubectl: Kubectl, namespace: str, kind: str) -> None:
    """A pod-template change of one fleet (what `kubectl rollout restart` makes); returns at once."""
    stamp = datetime.now(UTC).isoformat(timespec="milliseconds")
    patch = {"spec": {"template": {"metadata": {"annotations": {"staticfleet.io/restartedAt": stamp}}}}}
    kubectl.run("patch", _resource(kind), "-n", namespace, "--type=merge", "-p", json.dumps(patch))


def _condition(body: Manifest, kind: str) -> str | None:
    for condition in body.get("status", {}).get("conditions", []) or []:
        if condition.get("type") == kind:
            return str(condition.get("status"))
    return None


def stable_with(body: Manifest, replicas: int) -> bool:
    """The StaticConsumerGroup's own status says: a Stable group of `replicas` ready consumers."""
    status = body.get("status", {})
    return (
        body.get("spec", {}).get("replicas") == replicas
        and status.get("observedGeneration") == body.get("metadata", {}).get("generation")
        and _condition(body, "Ready") == "True"
        and status.get("group", {}).get("state") == "Stable"
        and status.get("group", {}).get("members") == replicas
        and status.get("readyReplicas") == replicas
    )


def _pod_uids(kubectl: Kubectl, namespace: str) -> set[str]:
    pods = kubectl.items("pods", namespace, "-l", f"staticfleet.io/group={fleet.FLEET}")
    return {str(p["metadata"]["uid"]) for p in pods}


def rolling_restart(kubectl: Kubectl, namespace: str, timeout: float = 300) -> None:
    """A pod-template change of the StaticConsumerGroup; waits until every pod is replaced."""
    old = _pod_uids(kubectl, namespace)
    restart_pods(kubectl, namespace, STATICFLEET)

    def rolled() -> bool:
        uids = _pod_uids(kubectl, namespace)
        sts = kubectl.get("statefulset", fleet.FLEET, namespace).get("status", {})
        return (
            len(uids) == len(old)
            and not uids & old
            and sts.get("updatedReplicas") == len(old)
            and sts.get("currentRevision") == sts.get("updateRevision")
        )

    wait_until(rolled, timeout=timeout, what="every consumer pod to be replaced", interval=0.5)


def scale(kubectl: Kubectl, namespace: str, kind: str, replicas: int) -> None:
    kubectl.run("scale", _resource(kind), "-n", namespace, f"--replicas={replicas}")


# -- summary ---------------------------------------------------------------------------------------------


def coordinator_events(state: State, target: Path) -> None:
    """Copies the coordinator's event log: from the claim's directory on the local pod runner, else
    through `kubectl exec`."""
    target.mkdir(parents=True, exist_ok=True)
    for old in target.glob("*.jsonl"):
        old.unlink()
    coordinator = f"{_fullname(state.release)}-coordinator"
    if state.local:
        assert state.run_dir is not None
        events = Path(state.run_dir) / "volumes" / state.namespace / f"data-{coordinator}-0" / "events"
        found = sorted(events.glob("events*.jsonl"))
        if not found:
            raise DemoError(f"no coordinator event log in {events}")
        for path in found:
            shutil.copy(path, target / path.name)
        return
    done = state.kube().run(
        "exec", "-n", state.namespace, f"{coordinator}-0", "-c", "coordinator", "--",
        "cat", "/data/events/events.jsonl",
    )  # fmt: skip
    (target / "events.jsonl").write_text(done.stdout)


def summarize(state: State, workdir: Path, operations_log: Path) -> tuple[list[Row], Path]:
    coordinator_events(state, workdir / "input" / "coordinator")
    out = workdir / "out"
    shutil.rmtree(out, ignore_errors=True)
    log = workdir / "analyze.log"
    with log.open("w") as output:
        done = subprocess.run(
            [sys.executable, "-m", "examples.demo.summary", str(workdir / "input"), "--out", str(out)],
            cwd=REPO_ROOT,
            stdout=output,
            stderr=subprocess.STDOUT,
            timeout=900,
            check=False,
            env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        )
    if done.returncode != 0:
        raise DemoError(f"the analysis failed; {log}:\n{log.read_text(errors='replace')[-3000:]}")
    operations = json.loads((out / OPERATIONS_FILE).read_text())
    return operation_rows(operations, OPERATIONS), out / "report.html"


def instructions(state: State) -> str:
    ns = state.namespace
    full = _fullname(state.release)
    scheme = "https" if state.secured else "http"
    token = ""
    if state.secured:
        secret = f"kubectl -n {ns} get secret {full}-dashboard-token -o jsonpath='{{.data.token}}'"
        token = f"?token=$({secret} | base64 -d)"
    if state.dashboard:
        dashboard = [f"  the dashboard: {state.dashboard}fleets/{ns}/{fleet.FLEET}{token}"]
    else:
        dashboard = [
            f"  kubectl -n {ns} port-forward svc/{full}-dashboard 8000:8000 &",
            f"  the dashboard: {scheme}://127.0.0.1:8000/fleets/{ns}/{fleet.FLEET}{token}",
        ]
    if state.secured:
        dashboard.append(f"  (its certificate is from the install's CA: {state.ca_file})")
    lines = [
        "The demo keeps running. Look at it:",
        *dashboard,
        f"  export KUBECONFIG={state.kubeconfig}",
        f"  alias kubectl={state.kubectl}",
        f"  kubectl -n {ns} get scg,statefulsets,pods",
        f"  kubectl -n {ns} get scg {fleet.FLEET} -o yaml       # status: group state, members, partitions",
        f"  kubectl -n {ns} get events --field-selector involvedObject.name={fleet.FLEET}",
        f"  kubectl -n {ns} scale scg/{fleet.FLEET} --replicas=2   # one more rebalance, no more",
    ]
    curl = "curl -s"
    if state.secured:
        curl = f'curl -s --cacert {state.ca_file} -H "Authorization: Bearer $(cat {state.api_token_file})"'
    if state.coordinator_api:
        lines.append(
            f"  {curl} {state.coordinator_api}/api/groups/{state.group_id}   # the coordinator's view"
        )
    else:
        lines += [
            f"  kubectl -n {ns} port-forward svc/{full}-coordinator 8080:8080 &",
            f"  {curl} {scheme}://localhost:8080/api/groups/{state.group_id}   # the coordinator's view",
        ]
    if state.local and state.run_dir:
        lines.append(f"  pod logs: {state.run_dir}/pods/{ns}/<pod>/<container>.log")
    if state.report:
        lines.append(f"  the analysis: {state.report}")
    lines.append("Stop it with: make demo-down")
    return "\n".join(lines)


# -- down ------------------------------------------------------------------------------------------------


def _alive(state: State) -> bool:
    if state.cluster_home is None:  # a cluster given by kubeconfig: the release is there until `down`
        reachable = state.kube().run(
            "get", "--raw", "/readyz", "--request-timeout=10s", check=False, timeout=20
        )
        return reachable.returncode == 0
    cluster = read_cluster_state(Path(state.cluster_home))
    return cluster is not None and procs.pid_alive(int(cluster["pid"]))


def _delete_kind_cluster(name: str) -> None:
    """The kind cluster `make demo` created for the demo (cluster.sh deletes only one it created)."""
    done = subprocess.run(
        [str(REPO_ROOT / "e2e" / "kind" / "cluster.sh"), "down"],
        cwd=REPO_ROOT,
        timeout=300,
        check=False,
        env={**os.environ, "KIND_CLUSTER": name},
    )
    if done.returncode != 0:
        raise DemoError(f"the kind cluster {name} was not deleted (e2e/kind/cluster.sh down said why)")


def down(settings: Settings) -> int:
    state = load_state(settings.state_dir)
    if state is None:
        print("no demo is running")
        return 0
    if state.cluster_home is not None:
        subprocess.run(
            [sys.executable, "-m", "e2e.localcluster", "--home", state.cluster_home, "down"],
            cwd=REPO_ROOT,
            timeout=120,
            check=True,
            env={**os.environ, "PYTHONPATH": str(REPO_ROOT)},
        )
    elif state.kind_cluster is not None:  # the whole cluster was the demo's: it goes with everything in it
        _delete_kind_cluster(state.kind_cluster)
    else:
        kubectl = state.kube()
        # The fleet goes first, while its operator still runs to honour the finalizer.
        kubectl.run("delete", "scg", "--all", "-n", state.namespace, "--wait=false", check=False)
        plain = [FLEET_NAMES[kind] for kind in FLEET_KINDS if not operated(kind)]
        kubectl.run(
            "delete", "statefulset,service", *plain, "-n", state.namespace, "--ignore-not-found", check=False
        )
        wait_until(
            lambda: not kubectl.items("staticconsumergroups", state.namespace),
            timeout=120,
            what="the fleet to be deleted",
        )
        helm = Helm(ensure_helm(), Path(state.kubeconfig))
        helm.run("uninstall", state.release, "--namespace", state.namespace, "--wait", timeout=240)
        policy = tenancy_policy(state.namespace)["metadata"]["name"]
        kubectl.run("delete", "staticfleettenancypolicy", policy, "--ignore-not-found", check=False)
        if not settings.keep_namespace:
            kubectl.run("delete", "namespace", state.namespace, "--wait=false", check=False)
    (settings.state_dir / STATE_FILE).unlink(missing_ok=True)
    if state.cluster_home:
        removed = "local cluster"
    elif state.kind_cluster:
        removed = f"kind cluster {state.kind_cluster}"
    else:
        removed = f"release {state.release} and namespace {state.namespace}"
    print(f"demo stopped ({removed} removed)")
    return 0
