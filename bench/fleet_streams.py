"""Kafka Streams fleets in bench/fleet_ops.py (`--app streams`): what a fleet operation costs the stateful
application static membership was made for.

Every pod runs examples/streams (kafka-streams 4.3.1, two stream threads, so two members a pod) as a local
process of the local pod runner, with examples/streams.yaml's pod template: its sticky task assignor, its
commit interval, a RocksDB store in the state directory on the pod's PersistentVolumeClaim (from the
volumeClaimTemplates; the pod runner keeps a claim's directory by name, so a pod's state survives its
restart as on a persistent volume), ready while the instance is RUNNING (its ready file, which an exec
probe tests: the pod runner's pods share this machine's ports, where the template's READY_PORT would be
every pod's). Three fleets of it side by side:

- staticfleet: a StaticConsumerGroup with `membersPerPod: 2`, so that the operator removes, pre-registers
  and expects both members of a pod, `<pod>-1` and `<pod>-2` (Kafka Streams' names for its threads');
- plain static: the StatefulSet the operator would build, operated by nobody;
- plain dynamic: that StatefulSet with KAFKA_MEMBERSHIP=dynamic (no group.instance.id).

The three run the same session timeout and the same heartbeat interval, staticfleet's (a plain fleet
would run Kafka's 3 s), and the same assignor. Kafka Streams sends no LeaveGroup when it closes, static
or dynamic, so the plain fleets' departed members go when their session times out.

Each fleet's input topic is filled before its pods start, one record per key, and the fleet processes all
of it before the first operation: each task's store then holds one entry, and its changelog one record,
per record of its partition, and a task that moves to a pod which never ran it restores its whole
partition. Nothing is written during the operations.

Beside the rebalances and the seconds to Stable that bench/fleet_ops.py measures for every fleet (here
Stable means the group has exactly the expected members, each with a task, and every pod is ready:
RUNNING, its stores restored), each operation's cost is the records restored into the stores (the
application's `restore_ended` / `restore_suspended` lines in the pods' logs from the operation's start,
summed over the stores), and which of its rebalances were follow-ups Kafka Streams asked for itself
(from the coordinator's log, as the Streams test on kind reads it: e2e/streams_logs.py).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Sequence
from dataclasses import replace
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from bench.fleet_kinds import FleetKind, backend_name
from bench.fleet_report import (
    RESTORED,
    SECONDS_MARGIN,
    SECONDS_MARGIN_SHARE,
    Cost,
    Summary,
    comparison_headers,
    comparison_rows,
    detail_headers,
    detail_rows,
    kinds_of,
)
from bench.report import ROOT, machine, replace_block, table
from e2e.streams_logs import History, json_lines, restored_records
from examples.demo.fleet import PLAIN_DYNAMIC, PLAIN_STATIC, STATICFLEET, ready_probe
from staticfleet.kube.spec import DEFAULT_HEARTBEAT_INTERVAL_MS

APP = "streams"
EXAMPLE = ROOT / "examples" / "streams"
MANIFEST = ROOT / "examples" / "streams.yaml"
CONTAINER = "streams"  # examples/streams.yaml's container: its log is <pod dir>/streams.log
KINDS = (STATICFLEET, PLAIN_STATIC, PLAIN_DYNAMIC)
REPLICAS = 6
RECORDS = 24_000  # records in each fleet's input topic
# Kafka's consumer default (session.timeout.ms), which Kafka Streams keeps: a pod replaced in a rolling
# restart comes back within it on this machine, and the plain fleets' departed members wait it out.
SESSION_TIMEOUT_MS = 45_000
HEARTBEAT_MS = DEFAULT_HEARTBEAT_INTERVAL_MS  # staticfleet's, given to every kind
POD_RESTART_S = 90  # what a rolling restart may take per pod: a JVM closing, starting, opening its stores
START_S = 900  # the fleets' first start: every JVM at once on this machine, and the input processed
BLOCK = "fleet_ops_streams"  # docs/benchmarks.md's and the README's generated block
TITLE = "Kafka Streams fleets side by side"
README = ROOT / "README.md"


@cache
def example() -> dict[str, Any]:
    """examples/streams.yaml, as a user would apply it."""
    found: dict[str, Any] = yaml.safe_load(MANIFEST.read_text())
    return found


def members_per_pod() -> int:
    """The example's stream threads, which its membersPerPod says."""
    return int(example()["spec"]["membersPerPod"])


def java_command(java: str, jar: Path) -> list[str]:
    """How a pod starts the application: the JVM the conformance suite runs it with (its options and
    Kafka's client logging, warnings and errors only, on stderr)."""
    from conformance.java_process import JVM_OPTIONS, LOGGING

    return [java, *JVM_OPTIONS, *LOGGING, "-jar", str(jar)]


@cache
def command() -> tuple[str, ...]:
    """This machine's command for the application: the example built by Maven as the conformance suite
    builds it (cached: built again only when its sources change) and the JDK it runs on."""
    from conformance.java_build import ensure_jar
    from conformance.kafka_broker import java_executable

    return tuple(java_command(java_executable(), ensure_jar(EXAMPLE)))


def _set_env(container: dict[str, Any], values: dict[str, str]) -> None:
    kept = [e for e in container.get("env", []) if e["name"] not in values]
    container["env"] = kept + [{"name": k, "value": v} for k, v in values.items()]


def pod_template(run: Sequence[str], output_topic: str, membership: str) -> dict[str, Any]:
    """examples/streams.yaml's pod template, run by `run` (the local pod runner runs no image), writing
    `output_topic`, in `membership` ("static" or "dynamic"); its readiness probed every second, as the
    consumer fleets' (a pod's readiness is part of the time an operation takes), by an exec probe of its
    ready file on a scratch volume instead of the template's GET /ready on READY_PORT: the pod runner's
    pods share this machine's ports, and one fixed port would be every pod's."""
    template: dict[str, Any] = copy.deepcopy(example()["spec"]["template"])
    pod = template["spec"]
    container = pod["containers"][0]
    container["command"] = list(run)
    container.pop("ports", None)
    container["env"] = [e for e in container["env"] if e["name"] != "READY_PORT"]
    local = {"OUTPUT_TOPIC": output_topic, "KAFKA_MEMBERSHIP": membership, "READY_FILE": "/scratch/ready"}
    _set_env(container, local)
    container["volumeMounts"].append({"name": "scratch", "mountPath": "/scratch"})
    pod["volumes"] = [*pod.get("volumes", []), {"name": "scratch", "emptyDir": {}}]
    container["readinessProbe"] = ready_probe()
    return template


def fleet_fields(kind: FleetKind, run: Sequence[str], output_topic: str) -> dict[str, Any]:
    """The fields of a fleet's StaticConsumerGroup beside its topic and session timeout (a plain fleet's
    StatefulSet is built from them too): the example's members per pod, pod template (run by `run`) and
    volume claims, and one heartbeat interval for every kind. The example's `kafka.access` is left out: the
    benchmark's coordinators run without security, as for the consumer fleets."""
    spec = example()["spec"]
    return {
        "membersPerPod": spec["membersPerPod"],
        "heartbeatIntervalMs": HEARTBEAT_MS,
        "template": pod_template(run, output_topic, kind.membership),
        "volumeClaimTemplates": copy.deepcopy(spec["volumeClaimTemplates"]),
        "persistentVolumeClaimRetentionPolicy": dict(spec["persistentVolumeClaimRetentionPolicy"]),
    }


def output_topic(topic: str) -> str:
    return f"{topic}-counts"


# -- what an operation cost ------------------------------------------------------------------------------


def restored_since(run_dir: Path, namespace: str, since: float) -> int:
    """Records restored into every store of a fleet's pods from `since` (epoch seconds), from the logs of
    every pod it ever had (the pod runner keeps each container's log by pod name, across its runs)."""
    total = 0
    for path in sorted((run_dir / "pods" / namespace).glob(f"*/{CONTAINER}.log")):
        total += sum(restored_records(json_lines(path.read_text(errors="replace")), since).values())
    return total


def follow_ups(history: History, begin: float, end: float) -> int:
    """The rebalances completed within [begin, end] (epoch seconds) that a current member started by
    joining again: Kafka Streams' own, after an assignment that moved a task."""
    return sum(1 for r in history.rebalances if r.follow_up and begin <= r.stable_at <= end)


# -- the input -------------------------------------------------------------------------------------------


def fill_topic(bootstrap: str, topic: str, records: int) -> None:
    """`records` records, each under a key of its own (`order-<n>`, as the example producer names them)."""
    from kafka import KafkaProducer

    producer = KafkaProducer(bootstrap_servers=bootstrap, linger_ms=50)
    try:
        for n in range(records):
            producer.send(topic, key=f"order-{n}".encode(), value=json.dumps({"n": n}).encode())
        producer.flush(120)
    finally:
        producer.close()


def caught_up(bootstrap: str, group: str, topic: str) -> bool:
    """Whether the group has committed the end of every partition of its input topic."""
    from staticfleet.admin import GroupAdmin, KafkaConnection

    try:
        with GroupAdmin(KafkaConnection(bootstrap, client_id="bench"), timeout_s=5) as admin:
            offsets = admin.partition_offsets(group, [topic])
    except Exception:  # the coordinator busy or between connections: asked again
        return False
    return bool(offsets) and all(o.committed == o.log_end for o in offsets)


# -- what is published -----------------------------------------------------------------------------------


def restored_cost(records: int, partitions: int) -> Cost:
    """Records restored as the measure a baseline may do better on, beyond half of one task's store: the
    partitions' sizes spread with the keys' hash, so which tasks moved, not the membership, decides
    differences below that."""
    return replace(RESTORED, margin=records / partitions / 2)


def comparison(summaries: Sequence[Summary], backend: str, cost: Cost) -> str:
    """One coordinator's medians: a row per operation, rebalances / s to Stable / records restored for
    each kind, and where a baseline does better than staticfleet."""
    rows = comparison_rows(summaries, backend, cost)
    return table(comparison_headers(kinds_of(summaries, backend)), rows) if rows else ""


def doc_body(
    summaries: Sequence[Summary],
    backends: Sequence[str],
    *,
    replicas: int,
    runs: int,
    partitions: int,
    records: int,
    session_timeout_ms: int,
) -> str:
    per_pod = members_per_pod()
    kinds = {s.kind for s in summaries}
    lines = [
        f"Fleets of N={replicas} pods of the Kafka Streams example (`examples/streams`, kafka-streams 4.3.1, "
        f"{per_pod} stream threads a pod: {replicas * per_pod} members) on the local cluster, side by side "
        "against one coordinator, one fleet of each kind: *staticfleet* (a StaticConsumerGroup with "
        f"`membersPerPod: {per_pod}`: the operator removes, pre-registers and expects both members of a "
        "pod, `<pod>-1` and `<pod>-2`); *plain static* (the StatefulSet the operator would build, operated "
        "by nobody); *plain dynamic* (that StatefulSet with `KAFKA_MEMBERSHIP=dynamic`: no instance id). "
        "Every pod runs `examples/streams.yaml`'s template as a local process (its sticky task assignor, "
        "a RocksDB store on the pod's PersistentVolumeClaim, which the pod runner keeps across the pod's "
        f"restarts, ready while RUNNING); every fleet sessionTimeoutMs {session_timeout_ms} (Kafka's "
        f"default) and a {HEARTBEAT_MS} ms heartbeat (staticfleet's; a plain fleet would run Kafka's 3 s). "
        f"Each fleet's input topic ({partitions} partitions, one task per stream thread at N) holds "
        f"{records} records, one per key, all processed before the first operation, and nothing is "
        "written during the operations: a task's store holds a record per record of its partition, and a "
        "task that moves to a pod which never ran it restores its partition's from the changelog.",
        "",
        "Operations and timing as for the consumer fleets above: a rolling restart and a scale step go to "
        "one fleet at a time, a coordinator restart to all. "
        "Each fleet's time runs from its command until its group is Stable with exactly the expected "
        "members, each with a task, and every pod is ready (its instance RUNNING: stores restored). "
        "Rebalances are counted over the operation plus 5 s; in brackets, how many of them were "
        "follow-ups, those a current member started by joining again as the coordinator logged them "
        "(Kafka Streams does after an assignment that moves a task, which cooperative rebalancing revokes "
        "first, and when its group leader finds the topics' metadata changed). *records restored* "
        "sums the records every pod of the fleet restored into its stores from the operation's start "
        "(the application's `restore_ended` and `restore_suspended` lines). Kafka Streams sends no "
        "LeaveGroup when it closes, static or dynamic: the plain fleets' departed members go when their "
        "session times out. "
        + (f"Median (range) of {runs} runs" if runs != 1 else "One run")
        + "; after the scale-up each run scales back to N unmeasured before the coordinator restart. The "
        f"machine is shared with other work and noisy, and the fleets' {len(kinds) * replicas} JVMs start "
        f"and stop on its {machine()['cpus']} cores: compare the fleets within one coordinator's table, and "
        "read differences of a few seconds as noise.",
        "",
        "How to read it: a static member back within its session timeout keeps its tasks, so a rolling "
        "restart of a static fleet costs no rebalance; a restarted dynamic instance joins with new "
        "members while its former ones stay in the group until their session times out, which the join "
        "phase waits for, pod after pod. Either way an instance back on its volume finds its stores "
        "current: Kafka Streams keeps its process id in its state directory "
        "(`kafka-streams-process-metadata`), and the sticky assignor gives a process back the tasks it "
        "had. On a scale-down every kind rebuilds the departed pods' tasks on the pods left, from the "
        "changelog; staticfleet removes the departed members as soon as their pods have stopped, the "
        "plain fleets wait for their session timeout. On a scale-up Kafka Streams follows the membership "
        "rebalance with one of its own that moves tasks to the new pod, whose volume kept the stores it "
        "had before the scale-down: the records restored depend on which tasks the assignor moves there, "
        "not on the membership; staticfleet's new pod starts one operator pass later (the operator "
        "pre-registers its members, or on Apache Kafka holds the join phase for them, before the "
        "StatefulSet grows). As the coordinator comes back from a restart, a group's leader may find the "
        "topics' metadata changed and rejoin, a follow-up, on either coordinator.",
        "",
        f"*where a baseline does better*: fewer rebalances, Stable sooner by more than {SECONDS_MARGIN:g} s "
        f"or {SECONDS_MARGIN_SHARE:.0%} of the time (whichever is more), or fewer "
        f"records restored by more than half of one task's store ({records / partitions / 2:.0f} records: "
        "the partitions' sizes spread with the keys' hash, so below that it is which tasks moved, not the "
        "membership).",
    ]
    cost = restored_cost(records, partitions)
    for backend in backends:
        shown = comparison(summaries, backend, cost)
        if shown:
            lines += [
                "",
                f"On {backend_name(backend)}, {'medians' if runs > 1 else 'one run'} (rebalances / s to "
                "Stable / records restored):",
                "",
                shown,
            ]
    lines += ["", table(detail_headers(RESTORED), detail_rows(summaries, RESTORED))]
    return "\n".join(lines)


def readme_body(
    summaries: Sequence[Summary], backend: str, *, replicas: int, runs: int, records: int, partitions: int
) -> str:
    info = machine()
    return (
        comparison(summaries, backend, restored_cost(records, partitions))
        + "\n\nEach cell: rebalances / seconds to Stable / records restored. "
        f"N={replicas} pods x {members_per_pod()} stream threads of `examples/streams.yaml` on the local "
        f"cluster, {'median of ' + str(runs) + ' runs' if runs != 1 else 'one run'} on "
        f"{backend_name(backend)}, measured side by side by `bench/fleet_ops.py --app streams` on "
        f"{info['date']}; both coordinators and how to read them are in "
        "[docs/benchmarks.md](docs/benchmarks.md#kafka-streams-fleets-side-by-side)."
    )


def publish_readme(body: str) -> None:
    """Replaces the README's generated Streams table (between its bench:fleet_ops_streams markers)."""
    replace_block(README, BLOCK, body)
