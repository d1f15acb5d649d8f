"""Kafka's classic group coordinator with static membership, as a pure state machine, plus its durable
log and its event log."""

from staticfleet.coordinator.clock import Clock, ManualClock, SystemClock
from staticfleet.coordinator.config import CoordinatorConfig
from staticfleet.coordinator.coordinator import EXPECTED_INSTANCE_IDS, CoordinatorResult, GroupCoordinator
from staticfleet.coordinator.errors import CoordinatorError, ErrorCode, StoreError
from staticfleet.coordinator.group import ClassicGroup, GroupState, Member
from staticfleet.coordinator.runtime import CoordinatorRuntime, GroupStore, InProcessCoordinator

__all__ = [
    "EXPECTED_INSTANCE_IDS",
    "ClassicGroup",
    "Clock",
    "CoordinatorConfig",
    "CoordinatorError",
    "CoordinatorResult",
    "CoordinatorRuntime",
    "ErrorCode",
    "GroupCoordinator",
    "GroupState",
    "GroupStore",
    "InProcessCoordinator",
    "ManualClock",
    "Member",
    "StoreError",
    "SystemClock",
]
