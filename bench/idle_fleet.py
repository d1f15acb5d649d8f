"""What an idle fleet costs the coordinator, and how soon a restarted static member consumes again, as the
fleet grows: the embedded coordinator and Apache Kafka side by side.

    .venv/bin/python bench/idle_fleet.py [--sizes 2,9] [--busy 0,2] [--members 20] [--restarts 8]
        [--backend both]

For each size, that many groups of `--members` example consumers (examples/consumer/consumer.py, one
process each, static members, the settings of bench/fleet_ops.py's staticfleet fleets: a 250 ms heartbeat
and `fetch.wait.max.ms` 100) consume idle topics of 40 partitions, as the fleets of the fleet benchmark
do between operations: 9 groups are the 180 consumers of its N=20 runs. Measured, once every consumer
has fetched its partitions:

* the coordinator's CPU (user and system, all its threads, from /proc) over `--window` seconds, as a
  share of one core;
* `--restarts` times, with `--busy` processes spinning on the CPU beside it (none by default; with 2, both
  cores are contended, as during the fleet benchmark's rolling restarts), one member of the first group
  stopped (SIGTERM) and started again as a new process,
  as a pod's restart does without the pod: from the new consumer's subscription to its assignment (a
  static member's rejoin: no rebalance), and from there until it had fetched every partition it was
  given. The consumer's own start (Python and librdkafka) comes before the subscription and is not
  counted.
"""

from __future__ import annotations

import argparse
import itertools
import os
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "operator"))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from bench.consumption import ConsumerRun, parse_log
from bench.fleet_kinds import EMBEDDED, FETCH_WAIT_MAX_MS, KAFKA, backend_name
from bench.fleet_ops import Embedded, Kafka
from bench.pod_phases import consuming_at, event_at
from bench.proc import cpu_seconds
from bench.report import publish, table
from e2e.helpers import wait_until
from staticfleet.kube.spec import DEFAULT_HEARTBEAT_INTERVAL_MS

REPO_ROOT = Path(__file__).resolve().parent.parent
CONSUMER = REPO_ROOT / "examples" / "consumer" / "consumer.py"
PARTITIONS = 40
SESSION_TIMEOUT_MS = 30_000
# After the last consumer's first fetch: the groups' joins and first fetches are over before the window.
SETTLE_S = 3.0
# Between a restarted member's first fetches and its next stop: a few heartbeats as a running member.
BETWEEN_RESTARTS_S = 1.0
CONSUMING_BOUND_S = 60.0
# A spinning process stops itself after this long, should the run that started it die first.
SPIN_BOUND_S = 600
SPIN = "import time\nend = time.monotonic() + {bound}\nwhile time.monotonic() < end:\n    pass\n"


@dataclass(frozen=True, slots=True)
class Rejoin:
    """A restarted member: seconds from its subscription to its assignment, and from there until it had
    fetched every partition of that assignment."""

    assigned_s: float
    consuming_s: float


def rejoin_of(run: ConsumerRun) -> Rejoin | None:
    """The rejoin a consumer's log shows, or None where it did not get as far as consuming."""
    subscribed, assigned, consuming = event_at(run, "started"), event_at(run, "assigned"), consuming_at(run)
    if subscribed is None or assigned is None or consuming is None:
        return None
    return Rejoin(assigned - subscribed, consuming - assigned)


def cpu_share(cpu_s: float, wall_s: float) -> float:
    """CPU seconds over a window, as a share of one core."""
    return cpu_s / wall_s if wall_s > 0 else 0.0


def summary(values: Sequence[float], digits: int = 3) -> str:
    return f"{statistics.median(values):.{digits}f} ({min(values):.{digits}f}-{max(values):.{digits}f})"


def consumer_env(bootstrap: str, group: int, member: int, directory: Path) -> dict[str, str]:
    return {
        **os.environ,
        "KAFKA_BOOTSTRAP_SERVERS": bootstrap,
        "KAFKA_GROUP_ID": f"idle-{group}",
        "KAFKA_GROUP_INSTANCE_ID": f"idle-{group}-{member}",
        "KAFKA_TOPICS": f"idle-{group}",
        "KAFKA_HEARTBEAT_INTERVAL_MS": str(DEFAULT_HEARTBEAT_INTERVAL_MS),
        "KAFKA_SESSION_TIMEOUT_MS": str(SESSION_TIMEOUT_MS),
        "FETCH_WAIT_MAX_MS": str(FETCH_WAIT_MAX_MS),
        "STATE_DIR": str(directory / "state"),
        "READY_FILE": str(directory / "ready"),
    }


class Consumer:
    """One example consumer process; each start logs to a file of its own."""

    def __init__(self, bootstrap: str, group: int, member: int, workdir: Path) -> None:
        self.directory = workdir / f"idle-{group}" / f"m{member}"
        self.directory.mkdir(parents=True, exist_ok=True)
        self.env = consumer_env(bootstrap, group, member, self.directory)
        self.starts = 0
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def log(self) -> Path:
        return self.directory / f"consumer-{self.starts}.log"

    def start(self) -> None:
        self.starts += 1
        with self.log.open("wb") as out:
            self.process = subprocess.Popen(
                [sys.executable, str(CONSUMER)], env=self.env, stdout=out, stderr=subprocess.DEVNULL
            )

    def run(self) -> ConsumerRun | None:
        runs = parse_log(self.log.read_text(errors="replace")) if self.log.exists() else []
        return runs[0] if runs else None

    def consuming(self) -> bool:
        run = self.run()
        return run is not None and consuming_at(run) is not None

    def stop(self) -> None:
        if self.process is not None and self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()


def server_pid(backend: Embedded | Kafka) -> int:
    if isinstance(backend, Embedded):
        assert backend.process is not None
        return backend.process.pid
    pid = backend.broker.pid
    assert pid is not None
    return pid


def measure(
    backend: Embedded | Kafka,
    workdir: Path,
    groups: int,
    members: int,
    restarts: int,
    window_s: float,
    busy: int = 0,
) -> dict[str, Any]:
    """One size on one coordinator: the coordinator's CPU share over the window, and the rejoins, with
    `busy` processes spinning meanwhile."""
    for group in range(groups):
        backend.create_topic(f"idle-{group}", PARTITIONS)
    consumers = [Consumer(backend.bootstrap, g, m, workdir) for g in range(groups) for m in range(members)]
    spinning: list[subprocess.Popen[bytes]] = []
    try:
        for consumer in consumers:
            consumer.start()
        wait_until(
            lambda: all(c.consuming() for c in consumers),
            timeout=120 + groups * members,
            what="every consumer to fetch its partitions",
            interval=0.5,
        )
        time.sleep(SETTLE_S)
        pid = server_pid(backend)
        cpu_before, wall_before = cpu_seconds(pid), time.monotonic()
        time.sleep(window_s)
        share = cpu_share(cpu_seconds(pid) - cpu_before, time.monotonic() - wall_before)
        rejoins: list[Rejoin] = []
        spinning.extend(
            subprocess.Popen([sys.executable, "-c", SPIN.format(bound=SPIN_BOUND_S)]) for _ in range(busy)
        )
        restarted = consumers[0]
        for _ in range(restarts):
            restarted.stop()
            restarted.start()
            wait_until(restarted.consuming, timeout=CONSUMING_BOUND_S, what="the restarted member to consume")
            run = restarted.run()
            found = None if run is None else rejoin_of(run)
            if found is not None:
                rejoins.append(found)
            time.sleep(BETWEEN_RESTARTS_S)
    finally:
        for process in spinning:
            process.kill()
            process.wait()
        for consumer in consumers:
            if consumer.process is not None and consumer.process.poll() is None:
                consumer.process.send_signal(signal.SIGTERM)
        for consumer in consumers:
            consumer.stop()
    return {
        "consumers": groups * members,
        "busy": busy,
        "cpu_share": share,
        "assigned_s": [r.assigned_s for r in rejoins],
        "consuming_s": [r.consuming_s for r in rejoins],
    }


def rows_of(results: Mapping[str, Sequence[Mapping[str, Any]]]) -> list[list[object]]:
    """A row per coordinator and run, in the order the runs were made."""
    rows: list[list[object]] = []
    for name, runs in results.items():
        for found in runs:
            consumers = int(found["consumers"])
            rows.append(
                [
                    backend_name(name),
                    consumers,
                    found["busy"],
                    f"{100 * found['cpu_share']:.1f}%",
                    f"{1000 * found['cpu_share'] / consumers:.2f}",
                    summary(found["assigned_s"]),
                    summary(found["consuming_s"]),
                ]
            )
    return rows


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--sizes", default="2,9", help="groups of --members consumers, comma-separated")
    parser.add_argument(
        "--busy", default="0", help="processes spinning during the restarts, comma-separated (default 0)"
    )
    parser.add_argument("--members", type=int, default=20)
    parser.add_argument("--restarts", type=int, default=8)
    parser.add_argument("--window", type=float, default=10.0, help="seconds the coordinator's CPU is read")
    parser.add_argument("--backend", choices=(EMBEDDED, KAFKA, "both"), default="both")
    parser.add_argument("--no-publish", action="store_true", help="print only; leave docs alone")
    args = parser.parse_args(argv)
    sizes = [int(s) for s in args.sizes.split(",") if s.strip()]
    busy_levels = [int(b) for b in args.busy.split(",") if b.strip()]
    backends = (EMBEDDED, KAFKA) if args.backend == "both" else (args.backend,)
    results: dict[str, list[dict[str, Any]]] = {}
    with tempfile.TemporaryDirectory(prefix="idle-fleet-") as tmp:
        # The coordinators alternate at each size and load, one after the other on the same machine.
        for groups, busy in itertools.product(sizes, busy_levels):
            for name in backends:
                workdir = Path(tmp) / f"{name}-{groups}-{busy}"
                backend = Embedded(workdir) if name == EMBEDDED else Kafka(workdir)
                try:
                    found = measure(backend, workdir, groups, args.members, args.restarts, args.window, busy)
                finally:
                    backend.stop()
                results.setdefault(name, []).append(found)
                print(f"{name}: {rows_of({name: [found]})[0]}", flush=True)
    body = (
        f"Idle groups of {args.members} static example consumers (heartbeat {DEFAULT_HEARTBEAT_INTERVAL_MS} "
        f"ms, `fetch.wait.max.ms` {FETCH_WAIT_MAX_MS}, {PARTITIONS} partitions a group); the coordinator's "
        f"CPU over {args.window:g} s as a share of one core, and per consumer in milliseconds a second; then "
        f"{args.restarts} restarts of one member, with *busy* processes spinning on the CPU meanwhile: "
        "seconds from its subscription to its assignment, and from there to the first fetch of every "
        "partition it was given, median (range):\n\n"
        + table(
            [
                "coordinator",
                "consumers",
                "busy",
                "coordinator CPU",
                "ms/s per consumer",
                "subscription to assignment",
                "assignment to consuming",
            ],
            rows_of(results),
        )
    )
    print("\n" + body)
    if not args.no_publish:
        command = (
            ".venv/bin/python bench/idle_fleet.py"
            f" --sizes {args.sizes} --busy {args.busy} --members {args.members} --restarts {args.restarts}"
        )
        data = {"members": args.members, "window_s": args.window, "results": results}
        publish(
            "idle_fleet",
            "An idle fleet: the coordinator's CPU and a static member's rejoin",
            command,
            body,
            data,
        )


if __name__ == "__main__":
    main()
