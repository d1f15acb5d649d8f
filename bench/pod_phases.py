"""Where each pod restart of a fleet went, phase by phase, from the logs a `bench/fleet_ops.py --workdir D`
run keeps: the local pod runner's (`D/cluster/logs/podrunner.log`: when it signalled a pod, when the pod
stopped, when its successor was bound and its container started) and the example consumer's
(`D/cluster/pods/<namespace>/<pod>/consumer.log`: when it stopped, subscribed, was assigned and fetched).

    .venv/bin/python bench/pod_phases.py D [--samples F --operation 'rolling restart'] [--namespaces GLOB]

A partition of the restarted pod has no owner consuming it from the old consumer's stop to the new one's
first fetch (bench/consumption.py): the restart's *unowned* time, which the phases after the consumer's
stop add up to. With `--samples` (the `--json` file of the same run) only the restarts signalled within an
operation's samples count. Prints, per fleet namespace, the median and mean of every phase.
"""

from __future__ import annotations

import argparse
import json
import re
import statistics
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.consumption import ConsumerRun, parse_log

# (phase, the moment it starts from, the moment it ends at)
PHASES = (
    ("signal to consumer stop", "signalled", "consumer_stopped"),
    ("consumer stop to pod stop", "consumer_stopped", "pod_stopped"),
    ("pod stop to new pod bound", "pod_stopped", "bound"),
    ("bound to container start", "bound", "spawned"),
    ("container start to subscribed", "spawned", "subscribed"),
    ("subscribed to assigned", "subscribed", "assigned"),
    ("assigned to consuming", "assigned", "consuming"),
    ("unowned (consumer stop to consuming)", "consumer_stopped", "consuming"),
)

_RUNNER_LINE = re.compile(
    r"^(?P<at>\d{4}-\d\d-\d\d \d\d:\d\d:\d\d,\d{3}) \w+ podrunner: "
    r"(?P<what>stopping|stopped|bound|started) (?P<pod>[^/\s]+/[^/\s:]+)"
)


@dataclass(frozen=True, slots=True)
class RunnerEvent:
    at: float
    what: str  # stopping (signalled), stopped (the pod's phase is terminal), bound, started (a container)


def runner_events(text: str) -> dict[str, list[RunnerEvent]]:
    """The pod runner's signal, stop, bind and start lines, by `namespace/pod`, in order (UTC times)."""
    found: dict[str, list[RunnerEvent]] = {}
    for line in text.splitlines():
        match = _RUNNER_LINE.match(line)
        if match is None:
            continue
        at = datetime.strptime(match["at"], "%Y-%m-%d %H:%M:%S,%f").replace(tzinfo=UTC).timestamp()
        found.setdefault(match["pod"], []).append(RunnerEvent(at, match["what"]))
    return found


def event_at(run: ConsumerRun, kind: str) -> float | None:
    return next((float(e["ts"]) for e in run.events if e.get("event") == kind), None)


def consuming_at(run: ConsumerRun) -> float | None:
    """When every partition of the run's first assignment had had its first fetch."""
    assigned = next((e for e in run.events if e.get("event") == "assigned"), None)
    if assigned is None:
        return None
    waiting = {str(p) for p in assigned.get("partitions", [])}
    for event in run.events:
        if event.get("event") == "first_fetch" and str(event.get("partition")) in waiting:
            waiting.discard(str(event.get("partition")))
            if not waiting:
                return float(event["ts"])
    return None


def _last(runner: Sequence[RunnerEvent], what: str, low: float, high: float) -> float | None:
    """The pod runner's last `what` line within [low, high]."""
    return max((e.at for e in runner if e.what == what and low <= e.at <= high), default=None)


def restarts(runs: Sequence[ConsumerRun], runner: Sequence[RunnerEvent]) -> list[dict[str, float]]:
    """The moments of each restart of one pod: the k-th container start of the pod runner is the k-th
    run of the consumer's log; a restart is a run that logged its stop and the run after it. A restart
    with a moment missing is left out, and so is every restart of a pod whose starts and runs differ in
    number (a log that is not this run's alone)."""
    starts = [e.at for e in runner if e.what == "started"]
    if len(starts) != len(runs):
        return []
    found = []
    for k in range(1, len(runs)):
        before, after, spawned = runs[k - 1], runs[k], starts[k]
        stopped = event_at(before, "stopped")
        if stopped is None:
            continue
        moments = {
            "signalled": _last(runner, "stopping", starts[k - 1], stopped),
            "consumer_stopped": stopped,
            "pod_stopped": _last(runner, "stopped", stopped, spawned),
            "bound": _last(runner, "bound", stopped, spawned),
            "spawned": spawned,
            "subscribed": event_at(after, "started"),
            "assigned": event_at(after, "assigned"),
            "consuming": consuming_at(after),
        }
        if all(v is not None for v in moments.values()):
            found.append({moment: float(at) for moment, at in moments.items() if at is not None})
    return found


def phases(moments: Mapping[str, float]) -> dict[str, float]:
    return {name: moments[end] - moments[start] for name, start, end in PHASES}


def summary(restarts_by_fleet: Mapping[str, Sequence[Mapping[str, float]]]) -> str:
    """A table: one row per phase, one column per fleet, `median (mean)` seconds."""
    fleets = sorted(restarts_by_fleet)
    header = "| phase | " + " | ".join(f"{f} ({len(restarts_by_fleet[f])} restarts)" for f in fleets) + " |"
    lines = [header, "|---|" + "---|" * len(fleets)]
    split = {fleet: [phases(m) for m in restarts_by_fleet[fleet]] for fleet in fleets}
    for name, _, _ in PHASES:
        cells = []
        for fleet in fleets:
            values = [p[name] for p in split[fleet]]
            middle = f"{statistics.median(values):.3f} ({statistics.mean(values):.3f})" if values else "-"
            cells.append(middle)
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def windows(samples: Sequence[Mapping[str, object]], operation: str) -> list[tuple[float, float]]:
    """[began, began + seconds] of each sample of `operation` (fleet_ops.py's --json)."""
    found = []
    for sample in samples:
        began = sample.get("began_at")
        if sample.get("operation") != operation or not isinstance(began, str):
            continue
        start = datetime.fromisoformat(began).timestamp()
        found.append((start, start + float(str(sample.get("seconds", 0)))))
    return found


def collect(
    workdir: Path, within: Sequence[tuple[float, float]] | None, namespaces: str = "*"
) -> dict[str, list[dict[str, float]]]:
    """Every complete restart under `workdir`, by fleet namespace (those matching the glob `namespaces`)."""
    runner = runner_events((workdir / "cluster" / "logs" / "podrunner.log").read_text(errors="replace"))
    by_fleet: dict[str, list[dict[str, float]]] = {}
    for log in sorted((workdir / "cluster" / "pods").glob(f"{namespaces}/*/consumer.log")):
        namespace, pod = log.parent.parent.name, log.parent.name
        runs = parse_log(log.read_text(errors="replace"))
        for moments in restarts(runs, runner.get(f"{namespace}/{pod}", [])):
            if within is None or any(low <= moments["signalled"] <= high for low, high in within):
                by_fleet.setdefault(namespace, []).append(moments)
    return by_fleet


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("workdir", type=Path, help="the --workdir of a bench/fleet_ops.py run")
    parser.add_argument("--samples", type=Path, help="the --json file of the same run")
    parser.add_argument(
        "--operation", default="rolling restart", help="with --samples (default: rolling restart)"
    )
    parser.add_argument(
        "--namespaces", default="*", help="only the fleets whose namespace matches this glob (default: all)"
    )
    args = parser.parse_args(argv)
    within = windows(json.loads(args.samples.read_text()), args.operation) if args.samples else None
    found = collect(args.workdir, within, args.namespaces)
    if not found:
        print(f"no complete pod restart in the logs under {args.workdir}", file=sys.stderr)
        return 1
    print(summary(found))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
