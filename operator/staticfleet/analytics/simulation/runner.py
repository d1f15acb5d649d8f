"""Run a simulation, split over worker processes by group, and write its event logs.

Layout of the output directory:
  coordinator-<w>/events.jsonl (+ events-<n>.jsonl)   the coordinator's event log of worker w
  operator/fleet-<w>.jsonl                           operator events for the same groups
  _simulation.json                                   parameters and counts (ignored by readers of the logs)
"""

from __future__ import annotations

import dataclasses
import json
import multiprocessing
import time
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from staticfleet.analytics.simulation.engine import Simulation
from staticfleet.analytics.simulation.fleet import Fleet
from staticfleet.analytics.simulation.output import JsonLinesLog
from staticfleet.analytics.simulation.params import SimulationParams
from staticfleet.coordinator import CoordinatorConfig

# Generous: a step is one request or one timer; a simulated operation takes a few hundred.
_MAX_STEPS_PER_GROUP = 5_000_000


@dataclass(frozen=True, slots=True)
class ShardResult:
    worker: int
    groups: int
    events: int
    operator_events: int
    heartbeats: int
    steps: int
    virtual_end_ms: int
    unsettled_operations: int
    failed_consumers: int
    files: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class SimulationReport:
    params: SimulationParams
    out_dir: Path
    events: int
    operator_events: int
    heartbeats: int
    groups: int
    virtual_ms: int
    wall_seconds: float
    unsettled_operations: int
    failed_consumers: int
    files: tuple[str, ...]

    @property
    def events_per_second(self) -> float:
        return self.events / self.wall_seconds if self.wall_seconds > 0 else 0.0

    def as_json(self) -> dict[str, Any]:
        return {
            "params": dataclasses.asdict(self.params),
            "events": self.events,
            "operator_events": self.operator_events,
            "heartbeats": self.heartbeats,
            "groups": self.groups,
            "virtual_ms": self.virtual_ms,
            "wall_seconds": round(self.wall_seconds, 3),
            "events_per_second": round(self.events_per_second),
            "unsettled_operations": self.unsettled_operations,
            "failed_consumers": self.failed_consumers,
            "files": list(self.files),
        }


def run_shard(params: SimulationParams, worker: int, out_dir: Path) -> ShardResult:
    """Simulate the groups of one worker (every `workers`-th group) against one coordinator."""
    groups = params.group_ids()[worker :: params.workers]
    events = JsonLinesLog(out_dir / f"coordinator-{worker}", "events", params.max_file_bytes)
    operator = JsonLinesLog(out_dir / "operator", f"fleet-{worker}", params.max_file_bytes)
    try:
        sim = Simulation(
            params.start_ms,
            CoordinatorConfig(initial_rebalance_delay_ms=params.initial_rebalance_delay_ms),
            events,
            operator,
            uuid_seed=f"{params.seed}/uuids/{worker}",
        )
        fleets = []
        for offset, (mode, group_id) in enumerate(groups):
            fleet = Fleet(sim, params, mode, group_id, index=worker + offset * params.workers)
            fleet.start()
            fleets.append(fleet)
        sim.run(max_steps=_MAX_STEPS_PER_GROUP * max(1, len(groups)) * params.rounds)
    finally:
        events.close()
        operator.close()
    return ShardResult(
        worker=worker,
        groups=len(groups),
        events=events.lines,
        operator_events=operator.lines,
        heartbeats=sim.heartbeats,
        steps=sim.steps,
        virtual_end_ms=sim.now(),
        unsettled_operations=sum(f.unsettled for f in fleets),
        failed_consumers=sum(f.failed for f in fleets),
        files=tuple(str(p.relative_to(out_dir)) for p in [*events.files(), *operator.files()]),
    )


def simulate(params: SimulationParams, out_dir: Path) -> SimulationReport:
    params.validate()
    out_dir.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    if params.workers == 1:
        shards = [run_shard(params, 0, out_dir)]
    else:
        # spawn, not fork: the caller may hold threads (a Spark gateway, for one).
        context = multiprocessing.get_context("spawn")
        with ProcessPoolExecutor(params.workers, mp_context=context) as pool:
            futures = [pool.submit(run_shard, params, w, out_dir) for w in range(params.workers)]
            shards = [f.result() for f in futures]
    wall = time.perf_counter() - started
    report = SimulationReport(
        params=params,
        out_dir=out_dir,
        events=sum(s.events for s in shards),
        operator_events=sum(s.operator_events for s in shards),
        heartbeats=sum(s.heartbeats for s in shards),
        groups=sum(s.groups for s in shards),
        virtual_ms=max(s.virtual_end_ms for s in shards) - params.start_ms,
        wall_seconds=wall,
        unsettled_operations=sum(s.unsettled_operations for s in shards),
        failed_consumers=sum(s.failed_consumers for s in shards),
        files=tuple(f for s in shards for f in s.files),
    )
    (out_dir / "_simulation.json").write_text(json.dumps(report.as_json(), indent=2) + "\n")
    return report
