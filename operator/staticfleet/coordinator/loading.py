"""Loading: rebuilding the coordinator's state from durable records (Kafka's replay), and the live
state as records again for a snapshot."""

from __future__ import annotations

from collections.abc import Iterable, Iterator

from staticfleet.coordinator.consumer_heartbeat import ConsumerGroups
from staticfleet.coordinator.group import ClassicGroup, GroupState, Member
from staticfleet.coordinator.group_configs import GroupConfigs
from staticfleet.coordinator.messages import Protocol
from staticfleet.coordinator.records import (
    ConsumerGroupRecord,
    GroupConfigRecord,
    GroupMetadataRecord,
    GroupTombstone,
    OffsetCommitRecord,
    OffsetTombstone,
    Record,
)
from staticfleet.coordinator.state import CoordinatorState


class Loader:
    def __init__(
        self, state: CoordinatorState, configs: GroupConfigs, consumer_groups: ConsumerGroups
    ) -> None:
        self.state = state
        self.configs = configs
        self.consumer_groups = consumer_groups

    def replay(self, record: Record) -> None:
        """Apply one durable record while loading; no timers, no events."""
        state = self.state
        if isinstance(record, OffsetCommitRecord):
            if record.group_id not in state.groups and record.group_id not in state.consumer_groups:
                state.create_group(record.group_id)
            state.offsets.put(record)
        elif isinstance(record, ConsumerGroupRecord):
            state.groups.pop(record.group_id, None)
            self.consumer_groups.replay(record)
        elif isinstance(record, GroupMetadataRecord):
            self._replay_group(record)
        elif isinstance(record, OffsetTombstone):
            state.offsets.delete(record.group_id, record.topic, record.partition)
        elif isinstance(record, GroupTombstone):
            state.groups.pop(record.group_id, None)
            state.consumer_groups.pop(record.group_id, None)
        elif isinstance(record, GroupConfigRecord):
            self.configs.apply(record)
        # A SecurityRecord is the broker's security state's: its host hands those over, not to here.

    def _replay_group(self, record: GroupMetadataRecord) -> None:
        group = ClassicGroup(
            group_id=record.group_id,
            state=GroupState.STABLE if record.members else GroupState.EMPTY,
            generation_id=record.generation,
            protocol_type=record.protocol_type or None,
            protocol_name=record.protocol,
            leader_id=record.leader,
            current_state_timestamp=None
            if record.current_state_timestamp == -1
            else record.current_state_timestamp,
        )
        group.rebalances = type(group.rebalances)(maxlen=self.state.config.rebalance_history_size)
        previous = self.state.groups.get(record.group_id)
        if previous is not None:
            group.rebalances.extend(previous.rebalances)
            group.rebalance_count = previous.rebalance_count
        protocol_type = record.protocol_type
        for m in record.members:
            protocols = (Protocol(record.protocol, m.subscription),) if record.protocol is not None else ()
            group.add(
                Member(
                    member_id=m.member_id,
                    group_instance_id=m.group_instance_id,
                    client_id=m.client_id,
                    client_host=m.client_host,
                    rebalance_timeout_ms=m.rebalance_timeout_ms,
                    session_timeout_ms=m.session_timeout_ms,
                    protocol_type=protocol_type,
                    protocols=protocols,
                    assignment=m.assignment,
                )
            )
        group.subscribed_topics = group.consumer_topics()
        group.last_persisted = record
        self.state.groups[record.group_id] = group

    def replay_all(self, records: Iterable[Record]) -> int:
        count = 0
        put_offset = self.state.offsets.put
        groups = self.state.groups
        consumer_groups = self.state.consumer_groups
        for record in records:
            count += 1
            if type(record) is OffsetCommitRecord and (
                record.group_id in groups or record.group_id in consumer_groups
            ):
                put_offset(record)  # the bulk of any log: skip the general dispatch
            else:
                self.replay(record)
        return count

    def snapshot_records(self) -> Iterator[Record]:
        """The live durable state as records: replaying them rebuilds what a full log replay would."""
        state = self.state
        for group_id, configs in state.group_configs.items():
            yield GroupConfigRecord(group_id, tuple(sorted(configs.items())))
        for group in state.groups.values():
            if group.last_persisted is not None:
                yield group.last_persisted
        yield from self.consumer_groups.snapshot_records()
        yield from state.offsets.all()
