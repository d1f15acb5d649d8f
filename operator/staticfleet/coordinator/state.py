"""What the parts of the coordinator share: time, settings, groups, offsets, group configs, timers, the
event sink and the operation in progress."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Final

from staticfleet.coordinator import events as ev
from staticfleet.coordinator.clock import Clock
from staticfleet.coordinator.config import CoordinatorConfig
from staticfleet.coordinator.consumer_group import ConsumerGroup, NoTopics, TopicCatalog
from staticfleet.coordinator.group import ClassicGroup
from staticfleet.coordinator.offsets import OffsetStore
from staticfleet.coordinator.result import Recorder
from staticfleet.coordinator.timers import Timers

EXPECTED_INSTANCE_IDS: Final = "staticfleet.expected.instance.ids"
"""Group config (a staticfleet extension): instance ids a join phase waits for."""


def parse_instance_ids(value: str) -> tuple[str, ...]:
    """The comma-separated instance-id list of the expected-instances config, validated."""
    ids = tuple(part.strip() for part in value.split(",")) if value.strip() else ()
    if any(not part for part in ids):
        raise ValueError(f"{EXPECTED_INSTANCE_IDS} has an empty instance id in {value!r}")
    if len(set(ids)) != len(ids):
        raise ValueError(f"{EXPECTED_INSTANCE_IDS} lists an instance id twice in {value!r}")
    return ids


class CoordinatorState:
    def __init__(
        self, clock: Clock, config: CoordinatorConfig, events: ev.EventSink, new_uuid: Callable[[], str]
    ) -> None:
        self.clock = clock
        self.config = config
        self.events = events
        self.new_uuid = new_uuid
        self.groups: dict[str, ClassicGroup] = {}
        self.consumer_groups: dict[str, ConsumerGroup] = {}
        """Groups of Kafka 4's consumer protocol (KIP-848); an id names a group of one kind only."""
        self.topics: TopicCatalog = NoTopics()
        """The topics consumer-protocol groups subscribe to (the broker sets its own)."""
        self.offsets = OffsetStore()
        self.group_configs: dict[str, dict[str, str]] = {}
        self.timers = Timers()
        self.recorder = Recorder()

    def create_group(self, group_id: str) -> ClassicGroup:
        group = ClassicGroup(group_id=group_id, current_state_timestamp=self.clock.now_ms())
        group.rebalances = type(group.rebalances)(maxlen=self.config.rebalance_history_size)
        self.groups[group_id] = group
        return group

    def expected_instances(self, group_id: str) -> tuple[str, ...] | None:
        """The instance ids a join phase of this group waits for, if any are configured."""
        expected = self.group_configs.get(group_id, {}).get(EXPECTED_INSTANCE_IDS)
        return parse_instance_ids(expected) if expected else None

    def emit(self, kind: str, group: ClassicGroup | str, **fields: Any) -> None:
        group_id = group if isinstance(group, str) else group.group_id
        event: dict[str, Any] = {
            "v": ev.SCHEMA_VERSION,
            "ts": self.clock.now_ms(),
            "type": kind,
            "group": group_id,
        }
        if not isinstance(group, str):
            event["generation"] = group.generation_id
            event["state"] = str(group.state)
        event.update(fields)
        self.events.emit(event)

    def emit_fenced(self, group: ClassicGroup, member_id: str, instance_id: str | None, api: str) -> None:
        self.emit(ev.MEMBER_FENCED, group, member_id=member_id, instance_id=instance_id, api=api)
