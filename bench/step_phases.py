"""Where each scale step of a fleet went, phase by phase, from the logs a `bench/fleet_ops.py --workdir D
--json F` run keeps: the example consumer's (`D/cluster/pods/<namespace>/<pod>/consumer.log`), the local
pod runner's (`D/cluster/logs/podrunner.log`) and the coordinator's (the embedded one's event log, or
Apache Kafka's log: the join phases of each group, e2e/streams_logs.py).

    .venv/bin/python bench/step_phases.py D F

A step's time runs from its command to the moment the bench saw the group Stable with the expected
members, all assigned (fleet_ops.py's *s to Stable*). On the way, a scale-down by half:

- command to first member out: the operator's or the controller manager's reaction, until a departing
  consumer leaves the group (`departing`) or stops (`stopped`: a static member that was not told stays in
  the group until it is removed or its session times out);
- first to last member out;
- last member out to join phase complete: the members left learn of the rebalance from their next
  heartbeat and join again (a static member that stopped without leaving: until its removal or expiry);
- join phase complete to seen Stable: the SyncGroup round, the assignment, and the bench's next look.

A scale-up by half (from half to three quarters of N):

- command to first new pod bound: the operator (for staticfleet, pre-registration first) and the
  controller manager;
- first new pod bound to last new member subscribed: the local pod runner starts containers one after
  another, and each consumer process starts;
- last new member subscribed to join phase complete: a join phase waits for the members it knows to
  join again (each at its next heartbeat), or, pre-registered or held, for the last new member;
- join phase complete to seen Stable.

A phase whose moments a log does not show (the consumer protocol has no join phase) is left out, as is
a step whose group completed no join phase within it. Prints, per coordinator and step, the median and
range of every phase across the runs, one column per fleet kind.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.consumption import parse_log
from bench.fleet_report import SCALE_DOWN, SCALE_UP
from bench.pod_phases import runner_events
from e2e.streams_logs import History, embedded_history, json_lines, kafka_history

NAME = "fleet"
DOWN_PHASES = (
    ("command to first member out", "command", "first_out"),
    ("first to last member out", "first_out", "last_out"),
    ("last member out to join phase complete", "last_out", "joined"),
    ("join phase complete to seen Stable", "joined", "seen"),
)
UP_PHASES = (
    ("command to first new pod bound", "command", "first_bound"),
    ("first new pod bound to last new member subscribed", "first_bound", "last_subscribed"),
    ("last new member subscribed to join phase complete", "last_subscribed", "joined"),
    ("join phase complete to seen Stable", "joined", "seen"),
)
PHASES = {SCALE_DOWN: DOWN_PHASES, SCALE_UP: UP_PHASES}
OUT_EVENTS = ("departing", "stopped")


@dataclass(frozen=True, slots=True)
class Step:
    """One fleet's scale step, as fleet_ops.py's --json records it."""

    backend: str
    kind: str
    operation: str
    replicas: int  # the fleet's N
    began: float  # epoch seconds
    seconds: float

    @property
    def seen(self) -> float:
        return self.began + self.seconds

    def pods(self) -> range:
        """The ordinals the step takes away (scale-down: N/2 up) or adds (scale-up: N/2 to 3N/4)."""
        half = self.replicas // 2
        return (
            range(half, self.replicas)
            if self.operation == SCALE_DOWN
            else range(half, half + self.replicas // 4)
        )


def steps_of(samples: Iterable[Mapping[str, Any]]) -> list[Step]:
    """The scale steps among fleet_ops.py's samples."""
    found = []
    for sample in samples:
        if sample.get("operation") not in PHASES or not isinstance(sample.get("began_at"), str):
            continue
        found.append(
            Step(
                backend=str(sample["backend"]),
                kind=str(sample["kind"]),
                operation=str(sample["operation"]),
                replicas=int(sample["replicas"]),
                began=datetime.fromisoformat(str(sample["began_at"])).timestamp(),
                seconds=float(sample["seconds"]),
            )
        )
    return found


def namespace_of(step: Step, namespaces: Iterable[str]) -> str | None:
    """The fleet's namespace, as fleet_ops.py names it: `<backend>-<N>-<index>-<kind, dashed>`."""
    pattern = re.compile(
        rf"{re.escape(step.backend)}-{step.replicas}-\d+-{re.escape(step.kind.replace(' ', '-'))}"
    )
    return next((ns for ns in namespaces if pattern.fullmatch(ns)), None)


def _first_after(events: Iterable[Mapping[str, Any]], kinds: Sequence[str], since: float) -> float | None:
    return min(
        (float(e["ts"]) for e in events if e.get("event") in kinds and float(e["ts"]) >= since), default=None
    )


def moments(
    step: Step,
    consumer_logs: Mapping[int, str],
    runner: Mapping[int, Sequence[tuple[float, str]]],
    history: History,
) -> dict[str, float]:
    """The step's moments that the logs show: `consumer_logs` and `runner` (the pod runner's (time, what)
    lines) by pod ordinal, `history` the group's join phases."""
    found = {"command": step.began, "seen": step.seen}
    ordinals = [i for i in step.pods() if i in consumer_logs]
    events = {i: [e for run in parse_log(consumer_logs[i]) for e in run.events] for i in ordinals}
    if step.operation == SCALE_DOWN:
        outs = [_first_after(events[i], OUT_EVENTS, step.began) for i in ordinals]
        if outs and all(at is not None for at in outs):
            known = [at for at in outs if at is not None]
            found |= {"first_out": min(known), "last_out": max(known)}
    else:
        bound = [
            at for i in step.pods() for at, what in runner.get(i, ()) if what == "bound" and at >= step.began
        ]
        subscribed = [_first_after(events[i], ("started",), step.began) for i in ordinals]
        if bound:
            found["first_bound"] = min(bound)
        if subscribed and len(subscribed) == len(step.pods()) and all(at is not None for at in subscribed):
            found["last_subscribed"] = max(at for at in subscribed if at is not None)
    completed = [r.stable_at for r in history.rebalances if step.began <= r.stable_at <= step.seen]
    if completed:
        found["joined"] = max(completed)
    return found


def phases(operation: str, found: Mapping[str, float]) -> dict[str, float]:
    """The phases of one step whose two moments the logs show, in seconds."""
    return {
        name: found[end] - found[start]
        for name, start, end in PHASES[operation]
        if start in found and end in found
    }


def summary(split: Mapping[tuple[str, str], Mapping[str, Sequence[Mapping[str, float]]]]) -> str:
    """Per (coordinator, step): one row per phase, one column per kind, `median (min-max)` seconds."""
    out = []
    for (backend, operation), by_kind in split.items():
        kinds = list(by_kind)
        out += [
            f"{backend}, {operation} (median (range) of {max(len(v) for v in by_kind.values())} runs, s):",
            "",
            "| phase | " + " | ".join(kinds) + " |",
            "|---|" + "---|" * len(kinds),
        ]
        for name, _, _ in PHASES[operation]:
            cells = []
            for kind in kinds:
                values = [p[name] for p in by_kind[kind] if name in p]
                cells.append(
                    f"{statistics.median(values):.2f} ({min(values):.2f}-{max(values):.2f})"
                    if values
                    else "-"
                )
            out.append(f"| {name} | " + " | ".join(cells) + " |")
        out.append("")
    return "\n".join(out)


def _histories(workdir: Path) -> dict[str, Any]:
    """Per coordinator, a function from a group to its join phases."""
    events = workdir / "embedded" / "coordinator" / "data" / "events" / "events.jsonl"
    broker_logs = sorted((workdir / "kafka").glob("**/broker.log")) if (workdir / "kafka").is_dir() else []
    embedded = list(json_lines(events.read_text(errors="replace"))) if events.exists() else []
    kafka = "\n".join(p.read_text(errors="replace") for p in broker_logs)
    return {
        "embedded": lambda group: embedded_history(embedded, group),
        "kafka": lambda group: kafka_history(kafka, group),
    }


def collect(workdir: Path, steps: Sequence[Step]) -> dict[tuple[str, str], dict[str, list[dict[str, float]]]]:
    pods_dir = workdir / "cluster" / "pods"
    namespaces = [p.name for p in pods_dir.iterdir()] if pods_dir.is_dir() else []
    runner_log = workdir / "cluster" / "logs" / "podrunner.log"
    by_pod = runner_events(runner_log.read_text(errors="replace")) if runner_log.exists() else {}
    histories = _histories(workdir)
    # One fleet's logs serve each of its runs' steps: read once.
    fleets: dict[str, tuple[dict[int, str], dict[int, list[tuple[float, str]]], History]] = {}
    split: dict[tuple[str, str], dict[str, list[dict[str, float]]]] = {}
    for step in steps:
        namespace = namespace_of(step, namespaces)
        history_of = histories.get(step.backend)
        if namespace is None or history_of is None:
            continue
        if namespace not in fleets:
            logs = {
                int(path.parent.name.rsplit("-", 1)[1]): path.read_text(errors="replace")
                for path in (pods_dir / namespace).glob(f"{NAME}-*/consumer.log")
            }
            runner = {
                int(key.rsplit("-", 1)[1]): [(e.at, e.what) for e in events]
                for key, events in by_pod.items()
                if key.startswith(f"{namespace}/{NAME}-")
            }
            fleets[namespace] = (logs, runner, history_of(f"{namespace}.{NAME}"))
        found = moments(step, *fleets[namespace])
        if "joined" not in found:
            continue
        split.setdefault((step.backend, step.operation), {}).setdefault(step.kind, []).append(
            phases(step.operation, found)
        )
    return split


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("workdir", type=Path, help="the --workdir of a bench/fleet_ops.py run")
    parser.add_argument("samples", type=Path, help="the --json file of the same run")
    args = parser.parse_args(argv)
    split = collect(args.workdir, steps_of(json.loads(args.samples.read_text())))
    if not split:
        print(f"no scale step with a completed join phase in the logs under {args.workdir}", file=sys.stderr)
        return 1
    print(summary(split))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
