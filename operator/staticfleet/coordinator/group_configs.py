"""Group configs: the settings a group carries beyond Kafka's classic protocol (Kafka's
GroupConfigManager). Today one: the instance ids a scale-up pre-registers."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

from staticfleet.coordinator import events as ev
from staticfleet.coordinator.errors import CoordinatorError, ErrorCode
from staticfleet.coordinator.membership import Membership
from staticfleet.coordinator.records import GroupConfigRecord
from staticfleet.coordinator.state import EXPECTED_INSTANCE_IDS, CoordinatorState, parse_instance_ids

GROUP_CONFIG_KEYS: Final = frozenset({EXPECTED_INSTANCE_IDS})


class GroupConfigs:
    def __init__(self, state: CoordinatorState, membership: Membership) -> None:
        self.state = state
        self.membership = membership
        self.configs = state.group_configs

    def describe(self, group_id: str) -> dict[str, str]:
        return dict(self.configs.get(group_id, {}))

    def alter(self, group_id: str, changes: Mapping[str, str | None], validate_only: bool = False) -> None:
        """Set (value) or delete (None) group configs; CoordinatorError(INVALID_CONFIG) says what is wrong."""
        for name, value in changes.items():
            if name not in GROUP_CONFIG_KEYS:
                raise CoordinatorError(
                    ErrorCode.invalid_config,
                    f"Unknown group config name: {name}. Supported: {', '.join(sorted(GROUP_CONFIG_KEYS))}",
                )
            if value is not None:
                try:
                    parse_instance_ids(value)
                except ValueError as exc:
                    raise CoordinatorError(ErrorCode.invalid_config, str(exc)) from exc
        if validate_only:
            return
        configs = dict(self.configs.get(group_id, {}))
        for name, value in changes.items():
            if value is None:
                configs.pop(name, None)
            else:
                configs[name] = ",".join(parse_instance_ids(value))
        record = GroupConfigRecord(group_id, tuple(sorted(configs.items())))
        state = self.state

        def written() -> None:
            self.apply(record)
            state.emit(ev.GROUP_CONFIG_CHANGED, group_id, configs=configs)
            group = state.groups.get(group_id)
            if group is not None:
                # A smaller expectation may let a waiting join phase finish now.
                self.membership.maybe_complete_join_phase(group)

        def failed(error: ErrorCode, message: str) -> None:
            state.recorder.fail(CoordinatorError(error, message))

        state.recorder.write([record], written, failed)

    def apply(self, record: GroupConfigRecord) -> None:
        if record.configs:
            self.configs[record.group_id] = dict(record.configs)
        else:
            self.configs.pop(record.group_id, None)
