"""The operator's own cost as fleets multiply: 10, 50 and 100 StaticConsumerGroups on one operator.

    .venv/bin/python bench/operator_scale.py [--sizes 10,50,100] [--samples 20] [--rest-s 60]

Everything is real and local: the e2e control plane (kube-apiserver with an audit log, etcd,
kube-controller-manager) with the local pod runner, one embedded coordinator, and two `staticfleet
operator` processes with leader election, as the chart runs them (one acts, the other waits for the
Lease), at the chart's `--interval` of 2 s. Each fleet has one replica whose pod is never started (a
nodeSelector no node has): the operator reconciles every fleet, its StatefulSet, Service, PDB and pod as
usual, and nothing measured here needs a consumer.

At each size, after every fleet has settled:
- *at rest*: the Kubernetes API requests the operators make per fleet per minute, from the API server's
  audit log (the operators log in as their own user, and only that user is audited);
- the resident memory (RSS) of the acting operator and of the waiting one;
- *reaction to a scale*: a sample of fleets, one at a time, scaled 1 -> 2 and back 2 -> 1; each reaction
  runs from the scale command (the patch of spec.replicas, as `kubectl scale` sends it) until the
  StatefulSet has the new size, as a watch on the StatefulSets sees it. A scale-up pre-registers the new
  instance id with the coordinator first; a scale-down first records itself in status and marks the
  departing pod;
- *scale-downs at once* (`--together K`): K fleets scaled 1 -> 2, then all K back 2 -> 1 at the same
  moment (a command each, from K threads), each reaction timed from its own command, as a cluster
  autoscaler or a scaler that follows a shared metric would scale them. A scale-down's pass waits for the
  departing consumers (the mark's moment, a second ahead), so this shows whether the passes of fleets
  scaling down hold up one another.
Then the next size adds fleets to those already there. The growth per fleet is the slope between the
smallest and the largest size.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import threading
import time
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import asdict, dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "operator"))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.fleet_kinds import OPERATOR_INTERVAL_S
from bench.fleet_ops import Embedded, _workdir, local_cluster
from bench.proc import cpu_seconds
from bench.report import publish, table
from e2e.helpers import Kubectl, wait_until
from e2e.localcluster.controlplane import LocalCluster
from e2e.tests.operator.harness import CRD_DIR, OperatorRunner, consumer_template

OPERATOR_USER = "staticfleet-operator"
NAMESPACE = "fleets"
LEASE_NAMESPACE = "staticfleet-system"
TOPIC = "scale-topic"
SCALE_TIMEOUT_S = 120.0
SETTLE_TIMEOUT_S = 600.0
AUDIT_POLICY = {
    "apiVersion": "audit.k8s.io/v1",
    "kind": "Policy",
    "omitStages": ["RequestReceived", "ResponseStarted"],
    "rules": [{"level": "Metadata", "users": [OPERATOR_USER]}, {"level": "None"}],
}


# -- what is measured (pure) ---------------------------------------------------------------------------------


@dataclass(frozen=True)
class AuditRecord:
    at: float  # epoch seconds the request was received
    verb: str
    resource: str


def read_audit(text: str, user: str) -> list[AuditRecord]:
    """The requests of `user` in a JSON audit log (one event per request: ResponseComplete only)."""
    found = []
    for line in text.splitlines():
        try:
            event = json.loads(line)
        except ValueError:
            continue
        if (event.get("user") or {}).get("username") != user:
            continue
        received = event.get("requestReceivedTimestamp")
        if not received:
            continue
        ref = event.get("objectRef") or {}
        resource = "/".join(filter(None, [ref.get("resource"), ref.get("subresource")])) or "-"
        found.append(AuditRecord(_timestamp(received), str(event.get("verb", "")), resource))
    return found


def _timestamp(text: str) -> float:
    return datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()


def per_fleet_minute(records: Sequence[AuditRecord], begin: float, end: float, fleets: int) -> float:
    inside = sum(1 for r in records if begin <= r.at < end)
    return inside / fleets / ((end - begin) / 60)


def busiest(records: Sequence[AuditRecord], begin: float, end: float, top: int = 5) -> list[tuple[str, int]]:
    """The most frequent verb/resource pairs in the window."""
    counts: dict[str, int] = {}
    for r in records:
        if begin <= r.at < end:
            key = f"{r.verb} {r.resource}"
            counts[key] = counts.get(key, 0) + 1
    return sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:top]


def percentile(values: Sequence[float], fraction: float) -> float:
    """The nearest-rank percentile (of 20 samples, p99 is the largest)."""
    ordered = sorted(values)
    rank = max(1, min(len(ordered), -(-int(fraction * 1000) * len(ordered) // 1000)))
    return ordered[rank - 1]


def slope(xs: Sequence[float], ys: Sequence[float]) -> float:
    """Growth per unit of x between the first and the last point."""
    return (ys[-1] - ys[0]) / (xs[-1] - xs[0]) if len(xs) > 1 and xs[-1] != xs[0] else 0.0


def cpu_share_per_fleet(cpu_s: float, window_s: float, fleets: int) -> float:
    """CPU time per fleet, as a share of one core: what each fleet at rest costs the operator."""
    return cpu_s / window_s / fleets if window_s > 0 and fleets else 0.0


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


# -- the cluster ---------------------------------------------------------------------------------------------


def fleet(name: str, bootstrap: str, api: str) -> dict[str, Any]:
    template = consumer_template()
    template["spec"]["nodeSelector"] = {"staticfleet.io/bench": "never-scheduled"}
    template["spec"]["volumes"].append({"name": "state", "emptyDir": {}})  # no claim: nothing is stored
    return {
        "apiVersion": "staticfleet.io/v1alpha1",
        "kind": "StaticConsumerGroup",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "spec": {
            "replicas": 1,
            "topics": [TOPIC],
            "sessionTimeoutMs": 30_000,
            "kafka": {"bootstrapServers": bootstrap, "coordinatorApi": api},
            "template": template,
        },
    }


class StatefulSetWatch:
    """When each StatefulSet in the namespace reached each size: a watch in a thread (relisting when
    the watch ends), so that a reaction is timed without polling the API server."""

    def __init__(self, kubeconfig: Path) -> None:
        from kubernetes import client, config

        api_client = config.new_client_from_config(config_file=str(kubeconfig))  # type: ignore[no-untyped-call]
        api_client.user_agent = "staticfleet-bench"
        self.apps = client.AppsV1Api(api_client)
        self.changes: dict[str, list[tuple[float, int]]] = {}  # name -> (when, replicas) at each change
        self.lock = threading.Lock()
        self.stopping = threading.Event()
        self.thread = threading.Thread(target=self._run, name="sts-watch", daemon=True)
        self.thread.start()

    def _note(self, body: Any, at: float) -> None:
        """A change of size, when first seen (a relist or another event of the same size is none)."""
        name, replicas = str(body.metadata.name), int(body.spec.replicas or 0)
        with self.lock:
            history = self.changes.setdefault(name, [])
            if not history or history[-1][1] != replicas:
                history.append((at, replicas))

    def _run(self) -> None:
        from kubernetes import watch

        while not self.stopping.is_set():
            try:
                listed = self.apps.list_namespaced_stateful_set(NAMESPACE)
                for item in listed.items:
                    self._note(item, time.time())
                stream = watch.Watch().stream(  # type: ignore[no-untyped-call]
                    self.apps.list_namespaced_stateful_set,
                    NAMESPACE,
                    resource_version=listed.metadata.resource_version if listed.metadata else None,
                    timeout_seconds=60,
                )
                for event in stream:
                    self._note(event["object"], time.time())
                    if self.stopping.is_set():
                        return
            except Exception:
                self.stopping.wait(0.5)

    def reached(self, name: str, replicas: int, since: float) -> float | None:
        """When the StatefulSet changed to `replicas` after `since`, if it has."""
        with self.lock:
            history = list(self.changes.get(name, []))
        return next((at for at, size in history if size == replicas and at >= since), None)

    def stop(self) -> None:
        self.stopping.set()


@dataclass
class SizeResult:
    fleets: int
    requests_per_fleet_minute: float
    rest_s: float
    busiest: list[tuple[str, int]]
    leader_rss_mib: float
    follower_rss_mib: float
    reactions_up_s: list[float] = field(default_factory=list)
    reactions_down_s: list[float] = field(default_factory=list)
    reactions_together_s: list[float] = field(default_factory=list)
    """The reactions of --together fleets scaled down at the same moment."""
    settle_s: float = 0.0
    load_average: float | None = None
    """The machine's 1-minute load average at the end of the at-rest window."""
    cpu_per_fleet: float | None = None
    """The acting operator's CPU time at rest per fleet, as a share of one core."""

    @property
    def reactions(self) -> list[float]:
        return [*self.reactions_up_s, *self.reactions_down_s]


def leader_of(kubectl: Kubectl, operators: Sequence[OperatorRunner]) -> OperatorRunner:
    """The replica holding the Lease (its identity is <host>-<pid>)."""
    lease = kubectl.get("lease", "staticfleet-operator", LEASE_NAMESPACE)
    holder = str(lease["spec"].get("holderIdentity") or "")
    for runner in operators:
        assert runner.process is not None
        if holder.endswith(f"-{runner.process.pid}"):
            return runner
    raise RuntimeError(f"the Lease is held by {holder!r}, none of the operators started here")


def settled(kubectl: Kubectl, names: Sequence[str]) -> bool:
    """Every fleet's status is of its current generation and its StatefulSet exists; a fleet the
    operator refused stops the run (the benchmark's own manifests must be valid)."""
    groups = {g["metadata"]["name"]: g for g in kubectl.items("staticconsumergroups", NAMESPACE)}
    sets = {s["metadata"]["name"] for s in kubectl.items("statefulsets", NAMESPACE)}
    for name in names:
        body = groups.get(name)
        status = (body or {}).get("status") or {}
        for condition in status.get("conditions") or []:
            if condition.get("reason") == "InvalidSpec":
                raise RuntimeError(f"{name}: {condition.get('message')}")
        if body is None or name not in sets:
            return False
        if status.get("observedGeneration") != body["metadata"].get("generation"):
            return False
    return True


def scale(kubectl: Kubectl, name: str, replicas: int) -> None:
    kubectl.run("scale", f"scg/{name}", "-n", NAMESPACE, f"--replicas={replicas}")


def react(kubectl: Kubectl, watch: StatefulSetWatch, name: str, replicas: int) -> float:
    began = time.time()
    scale(kubectl, name, replicas)
    at = wait_until(
        lambda: watch.reached(name, replicas, began),
        timeout=SCALE_TIMEOUT_S,
        what=f"{name}'s StatefulSet at {replicas}",
        interval=0.02,
    )
    return round(float(at) - began, 3)


def together(kubectl: Kubectl, watch: StatefulSetWatch, names: Sequence[str], gap_s: float) -> list[float]:
    """`names` scaled 1 -> 2 (and given time to settle), then all back 2 -> 1 at once: each reaction."""
    began = time.time()
    for name in names:
        scale(kubectl, name, 2)
    wait_until(
        lambda: all(watch.reached(n, 2, began) for n in names),
        timeout=SCALE_TIMEOUT_S,
        what=f"{len(names)} StatefulSets at 2",
        interval=0.1,
    )
    time.sleep(gap_s + OPERATOR_INTERVAL_S)  # their scale-ups' steps over
    reactions: dict[str, float] = {}
    start = threading.Barrier(len(names))

    def down(name: str) -> None:
        start.wait()
        reactions[name] = react(kubectl, watch, name, 1)

    threads = [threading.Thread(target=down, args=(n,), name=f"down-{n}") for n in names]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    missing = [n for n in names if n not in reactions]
    if missing:
        raise RuntimeError(f"no reaction measured for {', '.join(missing)}")
    return [reactions[n] for n in names]


def sample_names(names: Sequence[str], count: int) -> list[str]:
    """`count` fleets spread evenly over all of them."""
    if count >= len(names):
        return list(names)
    step = len(names) / count
    return [names[int(i * step)] for i in range(count)]


def measure_size(
    kubectl: Kubectl,
    cluster: LocalCluster,
    operators: Sequence[OperatorRunner],
    watch: StatefulSetWatch,
    names: Sequence[str],
    args: argparse.Namespace,
    settle_s: float,
) -> SizeResult:
    audit = cluster.logs_dir / "audit.log"
    pids = [o.process.pid for o in operators if o.process is not None]
    cpu_before = {pid: cpu_seconds(pid) for pid in pids}
    begin = time.time()
    time.sleep(args.rest_s)
    end = time.time()
    cpu_used = {pid: cpu_seconds(pid) - cpu_before[pid] for pid in pids}
    load_average = os.getloadavg()[0]
    records = read_audit(audit.read_text(errors="replace"), OPERATOR_USER)
    leader = leader_of(kubectl, operators)
    follower = next(o for o in operators if o is not leader)
    assert leader.process is not None and follower.process is not None
    result = SizeResult(
        fleets=len(names),
        requests_per_fleet_minute=round(per_fleet_minute(records, begin, end, len(names)), 2),
        rest_s=round(end - begin, 1),
        busiest=busiest(records, begin, end),
        leader_rss_mib=round(rss_mib(leader.process.pid), 1),
        follower_rss_mib=round(rss_mib(follower.process.pid), 1),
        settle_s=round(settle_s, 1),
        load_average=round(load_average, 1),
        cpu_per_fleet=round(cpu_share_per_fleet(cpu_used[leader.process.pid], end - begin, len(names)), 5),
    )
    for name in sample_names(names, args.samples):
        result.reactions_up_s.append(react(kubectl, watch, name, 2))
        time.sleep(args.gap_s)
        result.reactions_down_s.append(react(kubectl, watch, name, 1))
        time.sleep(args.gap_s)
    if args.together:
        result.reactions_together_s = together(kubectl, watch, sample_names(names, args.together), args.gap_s)
    together_line = (
        f"; scale-downs at once (fleets: p50 / max) {at_once(result)} s"
        if together_measured([result])
        else ""
    )
    print(
        f"  {len(names)} fleets: {result.requests_per_fleet_minute} API requests per fleet per minute at "
        f"rest; RSS {result.leader_rss_mib} MiB acting, {result.follower_rss_mib} MiB waiting; reaction "
        f"p50 {statistics.median(result.reactions):.2f} s, p99 {percentile(result.reactions, 0.99):.2f} s"
        f"{together_line}; CPU {result.cpu_per_fleet} of a core per fleet at rest",
        flush=True,
    )
    return result


@contextmanager
def operators_running(cluster: LocalCluster, workdir: Path) -> Iterator[list[OperatorRunner]]:
    runners = [
        OperatorRunner(
            cluster.kubeconfig_for(OPERATOR_USER),
            None,
            workdir / f"operator-{index}",
            interval_s=OPERATOR_INTERVAL_S,
            extra_args=("--leader-election", "--leader-election-namespace", LEASE_NAMESPACE),
        )
        for index in range(2)
    ]
    try:
        for runner in runners:
            runner.workdir.mkdir(parents=True, exist_ok=True)
            runner.start()
        yield runners
    finally:
        for runner in runners:
            runner.stop()


def run(args: argparse.Namespace, workdir: Path) -> list[SizeResult]:
    policy = workdir / "audit-policy.json"
    workdir.mkdir(parents=True, exist_ok=True)
    policy.write_text(json.dumps(AUDIT_POLICY))
    audit_args = (
        f"--audit-policy-file={policy}",
        f"--audit-log-path={workdir / 'cluster' / 'logs' / 'audit.log'}",
        "--audit-log-format=json",
    )
    results: list[SizeResult] = []
    coordinator = Embedded(workdir / "coordinator")
    try:
        coordinator.create_topic(TOPIC, 1)
        with (
            local_cluster(workdir, users=(OPERATOR_USER,), apiserver_args=audit_args) as (cluster, kubectl),
            operators_running(cluster, workdir) as operators,
        ):
            kubectl.run("apply", "-f", str(CRD_DIR))
            kubectl.wait_established("staticconsumergroups.staticfleet.io")
            for namespace in (NAMESPACE, LEASE_NAMESPACE):
                kubectl.run("create", "namespace", namespace)
            wait_until(
                lambda: kubectl.get_or_none("lease", "staticfleet-operator", LEASE_NAMESPACE),
                timeout=120,
                what="an operator to lead",
            )
            watch = StatefulSetWatch(cluster.kubeconfig_path)
            names: list[str] = []
            try:
                for size in args.sizes:
                    began = time.monotonic()
                    new = [f"fleet-{i:03d}" for i in range(len(names), size)]
                    assert coordinator.api is not None
                    kubectl.apply([fleet(n, coordinator.bootstrap, coordinator.api) for n in new], NAMESPACE)
                    names.extend(new)
                    wait_until(
                        lambda: settled(kubectl, names),
                        timeout=SETTLE_TIMEOUT_S,
                        what=f"{size} fleets to settle",
                        interval=2.0,
                    )
                    settle_s = time.monotonic() - began
                    results.append(measure_size(kubectl, cluster, operators, watch, names, args, settle_s))
            finally:
                watch.stop()
                kubectl.run("delete", "scg", "--all", "-n", NAMESPACE, "--wait=false", check=False)
                with suppress(TimeoutError):
                    wait_until(
                        lambda: not kubectl.items("staticconsumergroups", NAMESPACE),
                        timeout=300,
                        what="the fleets to go",
                        interval=2.0,
                    )
    finally:
        coordinator.stop()
    return results


# -- the report ----------------------------------------------------------------------------------------------


HEADERS = [
    "fleets",
    "reaction to a scale: p50 / p99 (s)",
    "API requests per fleet per minute, at rest",
    "operator RSS: acting / waiting (MiB)",
    "acting operator's CPU per fleet at rest (% of a core)",
    "settled in (s)",
]


TOGETHER_HEADER = "scale-downs at once: fleets, p50 / max (s)"


def together_measured(results: Sequence[SizeResult]) -> bool:
    return any(r.reactions_together_s for r in results)


def headers(results: Sequence[SizeResult]) -> list[str]:
    return [*HEADERS[:2], *([TOGETHER_HEADER] if together_measured(results) else []), *HEADERS[2:]]


def at_once(r: SizeResult) -> str:
    downs = r.reactions_together_s
    return f"{len(downs)}: {statistics.median(downs):.2f} / {max(downs):.2f}" if downs else ""


def rows(results: Sequence[SizeResult]) -> list[list[object]]:
    together = together_measured(results)
    return [
        [
            r.fleets,
            f"{statistics.median(r.reactions):.2f} / {percentile(r.reactions, 0.99):.2f}",
            *([at_once(r)] if together else []),
            f"{r.requests_per_fleet_minute:.1f}",
            f"{r.leader_rss_mib:.0f} / {r.follower_rss_mib:.0f}",
            f"{r.cpu_per_fleet * 100:.2f}" if r.cpu_per_fleet is not None else "",
            f"{r.settle_s:.0f}",
        ]
        for r in results
    ]


def growth(results: Sequence[SizeResult]) -> str:
    sizes = [float(r.fleets) for r in results]
    if len(sizes) < 2:
        return ""
    memory = slope(sizes, [r.leader_rss_mib for r in results]) * 1024
    p50 = slope(sizes, [statistics.median(r.reactions) for r in results]) * 1000
    totals = ", ".join(f"{r.requests_per_fleet_minute * r.fleets:.0f}" for r in results)
    cadence = (
        "and the passes kept their cadence at every size (the requests per fleet stayed within "
        f"{KEPT_CADENCE:.0%} of the smallest size's)"
        if kept_cadence(results)
        else "which it keeps only while the operator has the CPU for it: past that the passes, and with them "
        "the requests per fleet, spread out as fleets are added, and a scale command waits its turn behind "
        "the other fleets' passes"
    )
    return (
        f"From {results[0].fleets} to {results[-1].fleets} fleets the acting operator's memory grows by "
        f"{memory:.0f} KiB per fleet and the median reaction to a scale by {p50:.0f} ms per fleet. Its "
        f"API requests at rest, per minute in all, are {totals}: each fleet's pass at rest reads its "
        "resource, StatefulSet and pods (the equal counts of the busiest requests below) and writes "
        "nothing that has not changed (the children are applied again once a minute); a pass comes every "
        f"2 s, {cadence}."
    )


KEPT_CADENCE = 0.15


def kept_cadence(results: Sequence[SizeResult]) -> bool:
    """The largest size's passes came about as often per fleet as the smallest size's."""
    first, last = results[0].requests_per_fleet_minute, results[-1].requests_per_fleet_minute
    return last >= first * (1 - KEPT_CADENCE)


def load_sentence(results: Sequence[SizeResult]) -> str:
    loads = [r.load_average for r in results if r.load_average is not None]
    if not loads:
        return "The machine is shared: the operator's share of the CPU moves with its load."
    return (
        f"The machine's load average at the end of the at-rest windows was {min(loads):.1f} to "
        f"{max(loads):.1f} on its {os.cpu_count()} cores: the operator's share of the CPU, and so where it "
        "would run out of it, moves with that load."
    )


def command_line(argv: Sequence[str]) -> str:
    """The command as given, without where its logs went or what it replayed (and their values)."""
    kept: list[str] = []
    skip = False
    for item in argv:
        if skip:
            skip = False
        elif item in ("--workdir", "--replay"):
            skip = True
        elif not item.startswith(("--workdir=", "--replay=")):
            kept.append(item)
    return " ".join([".venv/bin/python bench/operator_scale.py", *kept])


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument(
        "--sizes", type=lambda v: [int(x) for x in v.split(",")], default=[10, 50, 100], help="fleets"
    )
    parser.add_argument("--samples", type=int, default=20, help="fleets scaled up and down at each size")
    parser.add_argument("--rest-s", type=float, default=60.0, help="the at-rest window, in seconds")
    parser.add_argument("--gap-s", type=float, default=1.0, help="pause between two scale commands")
    parser.add_argument(
        "--together", type=int, default=0, metavar="K", help="also scale K fleets down at the same moment"
    )
    parser.add_argument("--no-publish", action="store_true", help="print only; leave docs alone")
    parser.add_argument("--workdir", type=Path, help="keep the logs here (default: a temporary directory)")
    parser.add_argument(
        "--replay", type=Path, help="publish the results a run wrote (bench/results/operator_scale.json)"
    )
    args = parser.parse_args(argv)
    if args.sizes != sorted(args.sizes):
        parser.error("--sizes must grow: each size adds fleets to the ones already there")
    command = command_line(list(argv if argv is not None else sys.argv[1:]))
    if args.replay is not None:
        saved = json.loads(args.replay.read_text())
        results = [SizeResult(**r) for r in saved["results"]]
        command = saved.get("command") or command
        args.samples = saved.get("args", {}).get("samples", args.samples)
        args.together = saved.get("args", {}).get("together", args.together)
    else:
        with _workdir(args.workdir) as tmp:
            results = run(args, tmp)
    print(table(headers(results), rows(results)))
    print(growth(results))
    for r in results:
        print(f"  {r.fleets} fleets, busiest at rest: " + ", ".join(f"{k} {v}" for k, v in r.busiest))
    if args.no_publish:
        return 0
    body = "\n".join(
        [
            "Two `staticfleet operator` replicas with leader election (one acts, one waits), `--interval 2` "
            "as the chart sets it, against the local control plane and one embedded coordinator; each "
            "fleet one replica whose pod is never started (a nodeSelector no node has). Requests at rest "
            "are counted in the API server's audit log over "
            f"{results[0].rest_s if results else args.rest_s:.0f} s (the operators log in as their own "
            "user); a reaction runs from `kubectl scale scg/<name>` until a watch sees the StatefulSet at "
            f"the new size, {args.samples} fleets scaled 1 → 2 and back at each size (p99 of that many "
            "samples is close to their maximum)"
            + (
                f"; then {args.together} of them (every one where there are fewer) scaled 1 → 2 and all "
                "scaled back 2 → 1 at the same moment, a command each from its own thread, each reaction "
                "timed from its own command. "
                if args.together
                else ". "
            )
            + load_sentence(results),
            "",
            table(headers(results), rows(results)),
            "",
            growth(results),
            "",
            "Busiest requests at rest (verb and resource, count over the window): "
            + "; ".join(f"{r.fleets} fleets: " + ", ".join(f"{k} {v}" for k, v in r.busiest) for r in results)
            + ".",
        ]
    )
    publish(
        "operator_scale",
        "The operator as fleets multiply",
        command,
        body,
        {
            "command": command,
            "args": {k: v for k, v in vars(args).items() if k not in ("workdir", "replay", "no_publish")},
            "results": [asdict(r) for r in results],
        },
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
