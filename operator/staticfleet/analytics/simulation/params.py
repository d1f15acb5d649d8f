"""What a simulation runs: membership modes, scenarios and the consumers' and coordinator's settings."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Final

DYNAMIC: Final = "dynamic"
STATIC: Final = "static"
STATICFLEET: Final = "staticfleet"
MODES: Final = (DYNAMIC, STATIC, STATICFLEET)

ROLLING_RESTART: Final = "rolling-restart"
SCALE_DOWN: Final = "scale-down"
SCALE_UP: Final = "scale-up"
CRASH: Final = "crash"
NETWORK_BLIP: Final = "network-blip"
SCENARIOS: Final = (ROLLING_RESTART, SCALE_DOWN, SCALE_UP, CRASH, NETWORK_BLIP)

# 2026-01-01T00:00:00Z: a fixed start keeps runs with the same seed identical.
DEFAULT_START_MS: Final = 1_767_225_600_000


@dataclass(frozen=True, slots=True)
class SimulationParams:
    modes: tuple[str, ...] = MODES
    scenarios: tuple[str, ...] = SCENARIOS
    groups: int = 1
    """Groups per mode."""
    members: int = 6
    partitions: int = 12
    """Partitions of each topic."""
    topics: int = 1
    session_timeout_ms: int = 45_000
    heartbeat_interval_ms: int = 3_000
    rebalance_timeout_ms: int = 60_000
    restart_downtime_ms: int = 10_000
    """How long a restarted pod is gone before its new process starts (rollouts and crashes)."""
    blip_ms: int = 60_000
    """How long a network blip cuts one consumer off the coordinator."""
    scale_by: int = 2
    rounds: int = 1
    """How many times each group runs the scenario list."""
    cooldown_ms: int = 30_000
    """Quiet time between two operations of a group."""
    pod_start_spread_ms: int = 10_000
    """New pods start within this long of each other (scheduling, image pull, start-up)."""
    termination_spread_ms: int = 1_000
    """Pods removed by a scale-down stop within this long of each other."""
    operator_delay_ms: int = 1_000
    """How long the operator takes to notice that pods are gone."""
    initial_rebalance_delay_ms: int = 3_000
    seed: int = 1
    start_ms: int = DEFAULT_START_MS
    all_heartbeats: bool = False
    """Send every heartbeat. By default heartbeats that cannot change what the coordinator does are
    skipped; the event log is the same either way (a test checks it), the simulation is much faster."""
    workers: int = 1
    max_file_bytes: int = 64 * 1024 * 1024

    def validate(self) -> None:
        """Raise ValueError naming the first setting that cannot work."""
        unknown_modes = [m for m in self.modes if m not in MODES]
        if unknown_modes or not self.modes:
            raise ValueError(f"modes must be among {', '.join(MODES)}; got {', '.join(self.modes) or 'none'}")
        unknown = [s for s in self.scenarios if s not in SCENARIOS]
        if unknown:
            raise ValueError(f"unknown scenario(s) {', '.join(unknown)}; known: {', '.join(SCENARIOS)}")
        positive = {
            "groups": self.groups,
            "members": self.members,
            "partitions": self.partitions,
            "topics": self.topics,
            "heartbeat interval": self.heartbeat_interval_ms,
            "rounds": self.rounds,
            "workers": self.workers,
            "scale-by": self.scale_by,
        }
        for name, value in positive.items():
            if value < 1:
                raise ValueError(f"{name} must be at least 1, got {value}")
        if not 6_000 <= self.session_timeout_ms <= 1_800_000:
            raise ValueError("session timeout must be within the coordinator's bounds, 6000..1800000 ms")
        if self.heartbeat_interval_ms >= self.session_timeout_ms:
            raise ValueError("heartbeat interval must be below the session timeout")
        if self.rebalance_timeout_ms < self.heartbeat_interval_ms:
            raise ValueError("rebalance timeout must be at least the heartbeat interval")
        for name, value in {
            "restart downtime": self.restart_downtime_ms,
            "blip": self.blip_ms,
            "cooldown": self.cooldown_ms,
            "pod start spread": self.pod_start_spread_ms,
            "termination spread": self.termination_spread_ms,
            "operator delay": self.operator_delay_ms,
            "initial rebalance delay": self.initial_rebalance_delay_ms,
        }.items():
            if value < 0:
                raise ValueError(f"{name} must not be negative, got {value}")
        if self.cooldown_ms < self.heartbeat_interval_ms:
            raise ValueError("cooldown must be at least one heartbeat interval")
        if SCALE_DOWN in self.scenarios and self.scale_by >= self.members:
            raise ValueError("scale-by must leave at least one member after a scale-down")

    def group_ids(self) -> list[tuple[str, str]]:
        """(mode, group id) of every simulated group."""
        return [(mode, f"{mode}-{index:05d}") for mode in self.modes for index in range(self.groups)]

    def topic_names(self) -> tuple[str, ...]:
        return tuple(f"topic-{index}" for index in range(self.topics))
