"""`staticfleet simulate`: event logs from the real coordinator state machine and virtual consumers."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

from staticfleet.analytics.simulation.params import MODES, SCENARIOS, SimulationParams


def _names(allowed: tuple[str, ...]) -> Callable[[str], tuple[str, ...]]:
    def parse(value: str) -> tuple[str, ...]:
        names = tuple(v.strip() for v in value.split(",") if v.strip())
        unknown = [n for n in names if n not in allowed]
        if unknown or not names:
            raise argparse.ArgumentTypeError(f"expected a comma-separated subset of {', '.join(allowed)}")
        return names

    return parse


def register(subparsers: argparse._SubParsersAction[argparse.ArgumentParser]) -> None:
    defaults = SimulationParams()
    p = subparsers.add_parser(
        "simulate",
        help="write event logs by driving the coordinator with virtual consumers",
        description="Run fleets of virtual consumers (Kafka client behaviour) against the real coordinator "
        "state machine in virtual time, through rollouts, scale-downs, scale-ups, crashes and network "
        "blips, under dynamic, static or staticfleet membership. Writes the coordinator's event log and "
        "operator events to --out.",
    )
    p.add_argument("--out", type=Path, required=True, help="output directory")
    p.add_argument("--modes", type=_names(MODES), default=defaults.modes, help=f"of {','.join(MODES)}")
    p.add_argument(
        "--scenarios", type=_names(SCENARIOS), default=defaults.scenarios, help=f"of {','.join(SCENARIOS)}"
    )
    p.add_argument("--groups", type=int, default=defaults.groups, help="groups per mode")
    p.add_argument("--members", type=int, default=defaults.members, help="consumers per group at the start")
    p.add_argument("--partitions", type=int, default=defaults.partitions, help="partitions per topic")
    p.add_argument("--topics", type=int, default=defaults.topics)
    p.add_argument("--rounds", type=int, default=defaults.rounds, help="times each group runs the scenarios")
    p.add_argument("--scale-by", type=int, default=defaults.scale_by)
    p.add_argument("--session-timeout-ms", type=int, default=defaults.session_timeout_ms)
    p.add_argument("--heartbeat-interval-ms", type=int, default=defaults.heartbeat_interval_ms)
    p.add_argument("--rebalance-timeout-ms", type=int, default=defaults.rebalance_timeout_ms)
    p.add_argument("--restart-downtime-ms", type=int, default=defaults.restart_downtime_ms)
    p.add_argument("--blip-ms", type=int, default=defaults.blip_ms, help="network blip length")
    p.add_argument(
        "--cooldown-ms", type=int, default=defaults.cooldown_ms, help="quiet time between operations"
    )
    p.add_argument("--pod-start-spread-ms", type=int, default=defaults.pod_start_spread_ms)
    p.add_argument("--initial-rebalance-delay-ms", type=int, default=defaults.initial_rebalance_delay_ms)
    p.add_argument("--seed", type=int, default=defaults.seed)
    p.add_argument("--workers", type=int, default=defaults.workers, help="processes (groups are split)")
    p.add_argument(
        "--all-heartbeats",
        action="store_true",
        help="send every heartbeat (same event log, slower; skipped heartbeats cannot change it)",
    )
    p.set_defaults(run=run)


def params_from(args: argparse.Namespace) -> SimulationParams:
    return SimulationParams(
        modes=args.modes,
        scenarios=args.scenarios,
        groups=args.groups,
        members=args.members,
        partitions=args.partitions,
        topics=args.topics,
        rounds=args.rounds,
        scale_by=args.scale_by,
        session_timeout_ms=args.session_timeout_ms,
        heartbeat_interval_ms=args.heartbeat_interval_ms,
        rebalance_timeout_ms=args.rebalance_timeout_ms,
        restart_downtime_ms=args.restart_downtime_ms,
        blip_ms=args.blip_ms,
        cooldown_ms=args.cooldown_ms,
        pod_start_spread_ms=args.pod_start_spread_ms,
        initial_rebalance_delay_ms=args.initial_rebalance_delay_ms,
        seed=args.seed,
        workers=args.workers,
        all_heartbeats=args.all_heartbeats,
    )


def run(args: argparse.Namespace) -> int:
    from staticfleet.analytics.simulation import simulate

    params = params_from(args)
    try:
        params.validate()
    except ValueError as exc:
        print(f"staticfleet simulate: {exc}", file=sys.stderr)
        return 2
    report = simulate(params, args.out)
    print(
        f"{report.events} events and {report.operator_events} operator events from {report.groups} groups "
        f"({report.virtual_ms / 1000:.0f} s of virtual time) in {report.wall_seconds:.1f} s "
        f"({report.events_per_second:,.0f} events/s); {report.heartbeats} heartbeats"
    )
    if report.unsettled_operations or report.failed_consumers:
        print(
            f"warning: {report.unsettled_operations} operations did not settle, "
            f"{report.failed_consumers} consumers failed",
            file=sys.stderr,
        )
    print(f"logs: {args.out}")
    return 0
