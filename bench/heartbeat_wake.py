"""How soon the members of a classic-protocol group learn of a rebalance: librdkafka left idle, and woken.

    .venv/bin/python bench/heartbeat_wake.py [--members 8] [--trials 8] [--heartbeat-ms 250] [--backend both]

librdkafka sends a classic group's Heartbeat from its main thread, and only when that thread wakes: for a
request of the application, a broker's answer, or one of its own timers, of which the most frequent in a
consumer that reads nothing is the max.poll.interval.ms check, every 500 ms. A member that waits for
records then heartbeats every 500 ms whatever its heartbeat.interval.ms below that, and learns of a
rebalance that much later. An application request that goes through the main thread (here
`Consumer.assignment()`, every 50 ms of the poll loop) wakes it, and the member heartbeats at its interval.

Two groups of `--members` static members (confluent-kafka, one process, a thread each, range assignor,
`--heartbeat-ms`) consume one idle 16-partition topic, side by side against one coordinator (the
embedded one, Apache Kafka 4.3.1 from the cached jars, or both): *idle* polls only; *woken* also calls
`assignment()` every 50 ms. Each trial, the last member of each group leaves (unsubscribe: a LeaveGroup),
at moments spread over the heartbeat cycle; the measure is from its leave until every other member has
its new assignment. It then joins again before the next trial.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "operator"))
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from confluent_kafka import Consumer

from bench.fleet_kinds import EMBEDDED, KAFKA, backend_name
from bench.fleet_ops import Embedded, Kafka
from bench.report import publish, table
from e2e.helpers import wait_until

IDLE = "idle"
WOKEN = "woken"
VARIANTS = (IDLE, WOKEN)
WAKE_EVERY_S = 0.05
POLL_S = 0.1
TOPIC = "heartbeat-wake"
PARTITIONS = 16
SETTLE_S = 2.5
SESSION_TIMEOUT_MS = 10_000
# How long a trial waits for the others' new assignment: well past the session timeout, after which a
# member whose leave went unseen is dropped anyway, so that a trial on a busy machine, whose threads can
# stall for seconds, ends with its figure rather than an error.
TRIAL_BOUND_S = 3 * SESSION_TIMEOUT_MS / 1000
CHECK_S = 0.005  # how often a trial looks at the members' assignments: the measure's resolution


def wake_due(now: float, last: float, every: float = WAKE_EVERY_S) -> bool:
    """Whether the poll loop should wake librdkafka's main thread again."""
    return now - last >= every


def spread(trial: int, trials: int, heartbeat_s: float) -> float:
    """The extra wait before trial `trial` (0-based) so that the trials' leaves cover the heartbeat cycle."""
    return heartbeat_s * (trial + 0.5) / trials


@dataclass(eq=False)  # a Thread must stay hashable
class Member(threading.Thread):
    """One static member in its own thread; `leave` and `rejoin` are asked of it, it acts in its loop."""

    bootstrap: str
    group: str
    instance: str
    heartbeat_ms: int
    woken: bool
    assigned_at: float = 0.0
    leave: threading.Event = field(default_factory=threading.Event)
    rejoin: threading.Event = field(default_factory=threading.Event)
    stop: threading.Event = field(default_factory=threading.Event)

    def __post_init__(self) -> None:
        threading.Thread.__init__(self, name=f"{self.group}-{self.instance}", daemon=True)

    def on_assign(self, _consumer: Any, _partitions: Any) -> None:
        self.assigned_at = time.time()

    def run(self) -> None:
        consumer = Consumer(
            {
                "bootstrap.servers": self.bootstrap,
                "group.id": self.group,
                "group.instance.id": self.instance,
                "heartbeat.interval.ms": self.heartbeat_ms,
                "session.timeout.ms": SESSION_TIMEOUT_MS,
                "enable.auto.commit": False,
                "partition.assignment.strategy": "range",
            }
        )
        consumer.subscribe([TOPIC], on_assign=self.on_assign)
        woke = 0.0
        try:
            while not self.stop.is_set():
                if self.leave.is_set():
                    self.leave.clear()
                    consumer.unsubscribe()
                if self.rejoin.is_set():
                    self.rejoin.clear()
                    consumer.subscribe([TOPIC], on_assign=self.on_assign)
                consumer.poll(POLL_S)
                if self.woken and wake_due(time.monotonic(), woke):
                    consumer.assignment()  # a request served by librdkafka's main thread
                    woke = time.monotonic()
        finally:
            consumer.close()


@dataclass
class Group:
    variant: str
    members: list[Member]

    @property
    def leaving(self) -> Member:
        return self.members[-1]

    def reassigned_after(self, moment: float) -> float:
        return max(m.assigned_at for m in self.members[:-1]) - moment


def assigned_since(members: Sequence[Member], moment: float) -> bool:
    return all(m.assigned_at > moment for m in members)


def leave_and_rejoin(group: Group) -> float:
    """One trial: the seconds from the last member's leave until the others are reassigned; then that
    member joins again, and the group is whole before the next trial."""
    left = time.time()
    group.leaving.leave.set()
    others = group.members[:-1]
    wait_until(
        lambda: assigned_since(others, left),
        timeout=TRIAL_BOUND_S,
        what=f"{group.variant}: a new assignment",
        interval=0.005,
    )
    seconds = group.reassigned_after(left)
    rejoined = time.time()
    group.leaving.rejoin.set()
    wait_until(
        lambda: assigned_since(group.members, rejoined),
        timeout=30,
        what=f"{group.variant}: the rejoin",
        interval=0.005,
    )
    return seconds


def measure(bootstrap: str, members: int, trials: int, heartbeat_ms: int, tag: str) -> dict[str, list[float]]:
    """Seconds from the leave to every other member's new assignment, per trial, for each variant."""
    groups = [
        Group(
            variant,
            [
                Member(bootstrap, f"{tag}-{variant}", f"m-{i}", heartbeat_ms, variant == WOKEN)
                for i in range(members)
            ],
        )
        for variant in VARIANTS
    ]
    every = [m for g in groups for m in g.members]
    started = time.time()
    for member in every:
        member.start()
    results: dict[str, list[float]] = {g.variant: [] for g in groups}
    try:
        wait_until(
            lambda: assigned_since(every, started), timeout=60, what="the groups to form", interval=0.005
        )
        time.sleep(SETTLE_S)
        for trial in range(trials):
            for group in groups:  # side by side: each trial leaves from one group, then the other
                time.sleep(1.0 + spread(trial, trials, heartbeat_ms / 1000))
                results[group.variant].append(leave_and_rejoin(group))
    finally:
        for member in every:
            member.stop.set()
        for member in every:
            member.join(timeout=15)
    return results


def summary(seconds: Sequence[float]) -> str:
    return f"{statistics.median(seconds):.2f} ({min(seconds):.2f}-{max(seconds):.2f})"


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--members", type=int, default=8)
    parser.add_argument("--trials", type=int, default=8)
    parser.add_argument("--heartbeat-ms", type=int, default=250)
    parser.add_argument("--backend", choices=(EMBEDDED, KAFKA, "both"), default="both")
    parser.add_argument("--no-publish", action="store_true", help="print only; leave docs alone")
    args = parser.parse_args(argv)
    backends = (EMBEDDED, KAFKA) if args.backend == "both" else (args.backend,)
    rows: list[list[object]] = []
    data: dict[str, Any] = {"members": args.members, "heartbeat_ms": args.heartbeat_ms, "runs": {}}
    with tempfile.TemporaryDirectory(prefix="heartbeat-wake-") as tmp:
        for name in backends:
            backend = Embedded(Path(tmp) / name) if name == EMBEDDED else Kafka(Path(tmp) / name)
            try:
                backend.create_topic(TOPIC, PARTITIONS)
                results = measure(backend.bootstrap, args.members, args.trials, args.heartbeat_ms, name)
            finally:
                backend.stop()
            data["runs"][name] = results
            rows.append([backend_name(name), *(summary(results[v]) for v in VARIANTS)])
            print(f"{name}: " + ", ".join(f"{v} {summary(results[v])}" for v in VARIANTS), flush=True)
    body = (
        f"{args.members} static members a group, heartbeat.interval.ms {args.heartbeat_ms}, an idle topic; "
        f"seconds from one member's LeaveGroup until every other member has its new assignment, median "
        f"(range) of {args.trials} trials spread over the heartbeat cycle:\n\n"
        + table(["coordinator", "librdkafka idle", f"woken every {WAKE_EVERY_S * 1000:.0f} ms"], rows)
    )
    print("\n" + body)
    if not args.no_publish:
        command = (
            ".venv/bin/python bench/heartbeat_wake.py"
            f" --members {args.members} --trials {args.trials} --heartbeat-ms {args.heartbeat_ms}"
        )
        publish(
            "heartbeat_wake",
            "When a classic member learns of a rebalance: librdkafka idle and woken",
            command,
            body,
            data,
        )


if __name__ == "__main__":
    main()
