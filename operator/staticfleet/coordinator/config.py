"""Coordinator settings, named and defaulted as Kafka's `group.*` and `offsets.*` broker configs."""

from __future__ import annotations

from dataclasses import dataclass

from staticfleet.coordinator.logformat import FRAME_OVERHEAD, MAX_FRAME_BYTES
from staticfleet.coordinator.server_assignors import BUILTIN_ASSIGNORS

MAX_MESSAGE_MAX_BYTES = MAX_FRAME_BYTES - FRAME_OVERHEAD
"""The largest append the coordinator log's frames hold."""

INT32_MAX = 2**31 - 1
MESSAGE_MAX_BYTES = 1_048_588
"""Kafka's default message.max.bytes."""


@dataclass(frozen=True, slots=True)
class CoordinatorConfig:
    min_session_timeout_ms: int = 6_000
    """group.min.session.timeout.ms"""
    max_session_timeout_ms: int = 1_800_000
    """group.max.session.timeout.ms"""
    initial_rebalance_delay_ms: int = 3_000
    """group.initial.rebalance.delay.ms"""
    max_size: int = INT32_MAX
    """group.max.size"""
    new_member_join_timeout_ms: int = 300_000
    """How long a new member may stay parked in JoinGroup (a constant in Kafka)."""
    offset_metadata_max_bytes: int = 4_096
    """offset.metadata.max.bytes"""
    message_max_bytes: int = MESSAGE_MAX_BYTES
    """message.max.bytes: the most one operation may append to the coordinator log. Kafka's group
    coordinator writes to __consumer_offsets, whose max.message.bytes defaults to it; a group record or
    a batch of offset commits over it is refused and the request answered UNKNOWN_SERVER_ERROR."""
    offsets_retention_ms: int = 7 * 24 * 3_600_000
    """offsets.retention.minutes, in milliseconds"""
    offsets_retention_check_interval_ms: int = 600_000
    """offsets.retention.check.interval.ms"""
    rebalance_history_size: int = 20
    """How many completed rebalances each group remembers for the HTTP API."""
    consumer_session_timeout_ms: int = 45_000
    """group.consumer.session.timeout.ms: a consumer-protocol member silent this long is fenced."""
    consumer_heartbeat_interval_ms: int = 5_000
    """group.consumer.heartbeat.interval.ms: how often consumer-protocol members are told to heartbeat."""
    consumer_max_size: int = INT32_MAX
    """group.consumer.max.size"""
    consumer_assignors: tuple[str, ...] = BUILTIN_ASSIGNORS
    """group.consumer.assignors: the server-side assignors, the first being the default."""
    consumer_assignment_interval_ms: int = 1_000
    """group.consumer.assignment.interval.ms: a new target assignment at most this often."""

    def __post_init__(self) -> None:
        if self.min_session_timeout_ms > self.max_session_timeout_ms:
            raise ValueError(
                f"group.min.session.timeout.ms {self.min_session_timeout_ms} is above "
                f"group.max.session.timeout.ms {self.max_session_timeout_ms}"
            )
        if self.initial_rebalance_delay_ms < 0:
            raise ValueError("group.initial.rebalance.delay.ms must not be negative")
        if self.max_size < 1:
            raise ValueError("group.max.size must be at least 1")
        if self.consumer_max_size < 1:
            raise ValueError("group.consumer.max.size must be at least 1")
        interval, session = self.consumer_heartbeat_interval_ms, self.consumer_session_timeout_ms
        if not 0 < interval < session:
            raise ValueError(
                f"group.consumer.heartbeat.interval.ms {interval} must be positive and below "
                f"group.consumer.session.timeout.ms {session}"
            )
        if self.consumer_assignment_interval_ms < 0:
            raise ValueError("group.consumer.assignment.interval.ms must not be negative")
        unknown = [name for name in self.consumer_assignors if name not in BUILTIN_ASSIGNORS]
        if unknown or not self.consumer_assignors:
            names = ",".join(self.consumer_assignors)
            raise ValueError(
                f"group.consumer.assignors {names!r}: the assignors are {', '.join(BUILTIN_ASSIGNORS)}"
            )
        if not 0 < self.message_max_bytes <= MAX_MESSAGE_MAX_BYTES:
            raise ValueError(
                f"message.max.bytes {self.message_max_bytes} must be between 1 and {MAX_MESSAGE_MAX_BYTES} "
                "(the largest append a frame of the coordinator log holds)"
            )
