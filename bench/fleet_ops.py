"""Fleet operations on Kubernetes: time from `kubectl scale` to a Stable group of the new size, and the
rebalances each operation costs, with staticfleet's flows versus plain static membership.

    .venv/bin/python bench/fleet_ops.py [--runs N] [--session-timeout-ms MS]

Everything is real and local: the e2e control plane (kube-apiserver, etcd, kube-controller-manager) with
the local pod runner, `staticfleet coordinator` and `staticfleet operator` as local processes, and pods
running examples/consumer/consumer.py (confluent-kafka). Two fleet configurations:

- staticfleet: scaleDown.removeMembers Immediate (departed members removed by LeaveGroup once their pods
  are gone) and scaleUp.preRegister true (the coordinator holds one join phase for all new instances);
- plain static membership: removeMembers AfterSessionTimeout and preRegister false, i.e. what static
  membership gives without the operator's help (departed members expire after the session timeout).

Rebalances are counted by the coordinator (its HTTP API), from the scale command until the group has been
Stable with the new members for a settle period.
"""

from __future__ import annotations

import argparse
import os
import secrets
import signal
import statistics
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "operator"))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.report import publish, table
from e2e.helpers import Kubectl, wait_until
from e2e.localcluster import binaries, procs
from e2e.localcluster.controlplane import LocalCluster
from e2e.localcluster.podrunner import DEFAULT_NODE_NAME, RUNNER_MARKER, runner_command
from e2e.tests.operator.harness import (
    CRD_DIR,
    REPO_ROOT,
    Coordinator,
    OperatorRunner,
    consumer_template,
    fleet_manifest,
    ready_with,
    start_coordinator,
    stop_coordinator,
    wait_fleet,
)

NAME = "fleet"
SETTLE_S = 5.0
CONFIGS = {
    "staticfleet": {"scaleDown": {"removeMembers": "Immediate"}, "scaleUp": {"preRegister": True}},
    "plain static membership": {
        "scaleDown": {"removeMembers": "AfterSessionTimeout"},
        "scaleUp": {"preRegister": False},
    },
}
STAGGER_S = 2
# (label, from, to, pod k starts its consumer k x stagger seconds late: uneven image pulls or init containers)
OPERATIONS = (
    ("3→1", 3, 1, 0),
    ("1→4, pods start together", 1, 4, 0),
    (f"1→4, pods start {STAGGER_S} s apart", 1, 4, STAGGER_S),
)


@dataclass
class Sample:
    config: str
    operation: str
    seconds: float
    rebalances: int


@contextmanager
def local_cluster(workdir: Path) -> Iterator[tuple[LocalCluster, Kubectl]]:
    bin_dir = binaries.ensure_binaries()
    cluster = LocalCluster(bin_dir, workdir / "cluster")
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


def stable_with(coordinator: Coordinator, group: str, replicas: int, name: str) -> bool:
    view = coordinator.group(group) or {}
    expected = {f"{name}-{i}" for i in range(replicas)}
    return (
        view.get("state") == "Stable"
        and not view.get("rebalanceInProgress")
        and coordinator.members(group) == expected
        and all(m.get("partitions") is not None for m in view.get("memberList", []))
    )


def measure(
    kubectl: Kubectl,
    coordinator: Coordinator,
    config: str,
    operation: tuple[str, int, int, int],
    session_ms: int,
    run: int,
) -> Sample:
    label, start, end, stagger_s = operation
    namespace = f"bench-{run}-{secrets.token_hex(3)}"
    kubectl.run("create", "namespace", namespace)
    topic = f"{namespace}-topic"
    coordinator.create_topic(topic, partitions=12)
    group = f"{namespace}.{NAME}"
    spec: dict[str, Any] = {
        "sessionTimeoutMs": session_ms,
        "template": consumer_template(start_stagger_s=stagger_s),
        **CONFIGS[config],
    }
    try:
        kubectl.apply(fleet_manifest(NAME, start, coordinator, topic, **spec), namespace)
        wait_fleet(kubectl, namespace, NAME, ready_with(start), timeout=120, what=f"Ready with {start}")
        wait_until(lambda: stable_with(coordinator, group, start, NAME), timeout=60, what="a stable start")
        before = int((coordinator.group(group) or {})["rebalances"])
        began = time.monotonic()
        kubectl.run("scale", f"scg/{NAME}", "-n", namespace, f"--replicas={end}")
        wait_until(
            lambda: stable_with(coordinator, group, end, NAME),
            timeout=session_ms / 1000 + 120,
            what=f"a Stable group of {end}",
            interval=0.1,
        )
        seconds = time.monotonic() - began
        time.sleep(SETTLE_S)  # a rebalance still to come would count
        after = int((coordinator.group(group) or {})["rebalances"])
        return Sample(config, label, seconds, after - before)
    finally:
        kubectl.run("delete", "scg", "--all", "-n", namespace, "--wait=false", check=False)
        wait_until(lambda: not kubectl.items("staticconsumergroups", namespace), timeout=120, what="clean-up")
        kubectl.run("delete", "namespace", namespace, "--wait=false", check=False)


def summarize(samples: list[Sample]) -> list[list[object]]:
    rows: list[list[object]] = []
    for operation, *_ in OPERATIONS:
        for config in CONFIGS:
            chosen = [s for s in samples if s.config == config and s.operation == operation]
            seconds = [s.seconds for s in chosen]
            rebalances = [s.rebalances for s in chosen]
            rows.append(
                [
                    operation,
                    config,
                    f"{statistics.median(seconds):.1f}",
                    f"{min(seconds):.1f} to {max(seconds):.1f}",
                    "/".join(str(r) for r in rebalances),
                ]
            )
    return rows


def main() -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--runs", type=int, default=2, help="repetitions of each operation (default 2)")
    parser.add_argument("--session-timeout-ms", type=int, default=30_000, help="the fleets' session timeout")
    args = parser.parse_args()
    samples: list[Sample] = []
    with (
        tempfile.TemporaryDirectory(prefix="staticfleet-bench-") as tmp,
        local_cluster(Path(tmp)) as (
            cluster,
            kubectl,
        ),
    ):
        kubectl.run("apply", "-f", str(CRD_DIR))
        kubectl.run("wait", "--for=condition=Established", "crd/staticconsumergroups.staticfleet.io")
        coordinator = start_coordinator(Path(tmp) / "coordinator")
        operator = OperatorRunner(cluster.kubeconfig_path, None, Path(tmp))
        operator.start()
        try:
            for run in range(args.runs):
                for operation in OPERATIONS:
                    for config in CONFIGS:
                        sample = measure(
                            kubectl,
                            coordinator,
                            config,
                            operation,
                            args.session_timeout_ms,
                            run,
                        )
                        line = f"{sample.operation} {sample.config}: {sample.seconds:.1f}s"
                        print(f"{line}, {sample.rebalances} rebalances", flush=True)
                        samples.append(sample)
        finally:
            operator.stop()
            stop_coordinator(coordinator)
    rows = summarize(samples)
    body = (
        f"Fleets of `examples/consumer` pods (confluent-kafka, 12 partitions, sessionTimeoutMs "
        f"{args.session_timeout_ms}) on the local cluster with the embedded coordinator; "
        f'{args.runs} runs each. "Pods start {STAGGER_S} s apart": pod k runs `sleep {STAGGER_S}·k` '
        "before the consumer, as when image pulls or init containers take different times. "
        "Time is from `kubectl scale` until the coordinator reports a Stable group of exactly the new "
        f"members; rebalances are the coordinator's count over the operation plus {SETTLE_S:.0f} s.\n\n"
        + table(["operation", "fleet", "median s", "range s", "rebalances per run"], rows)
        + "\n\n*staticfleet*: `scaleDown.removeMembers: Immediate`, `scaleUp.preRegister: true` "
        "(the defaults). "
        "*plain static membership*: `removeMembers: AfterSessionTimeout`, `preRegister: false`: departed "
        "members hold their partitions until the session timeout, and new members join one by one. "
        "Scaling down costs one rebalance either way here (both pods stop together, so their sessions "
        "expire together); the difference is how long the departed members' partitions go unconsumed. "
        "Scaling up costs one rebalance either way when the pods join within one join phase; pods that "
        "start apart cost plain static membership more than one (a new join phase for each pod that "
        "misses the previous one)."
    )
    publish(
        "fleet_ops",
        "Fleet operations: scale to a Stable group",
        ".venv/bin/python bench/fleet_ops.py",
        body,
        {
            "session_timeout_ms": args.session_timeout_ms,
            "samples": [s.__dict__ for s in samples],
            "rows": rows,
        },
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
