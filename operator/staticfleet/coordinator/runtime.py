"""The one place where what the state machine decided meets the store: append, then settle.

`CoordinatorRuntime.run` appends an operation's records as one frame and hands the outcome back to
the state machine (`settle`), which applies the records or undoes what it did and answers with
Kafka's error for a failed append. The caller sends the replies: at once (`InProcessCoordinator`, for
tests, simulations and benchmarks) or once the records are fsynced (the broker's host).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import Any, Protocol, TypeVar

from staticfleet.coordinator.coordinator import GroupCoordinator
from staticfleet.coordinator.errors import StoreError
from staticfleet.coordinator.records import Record
from staticfleet.coordinator.result import CoordinatorResult

log = logging.getLogger(__name__)
T = TypeVar("T")


class GroupStore(Protocol):
    def append(self, records: Sequence[Record]) -> None: ...


class CoordinatorRuntime:
    def __init__(self, coordinator: GroupCoordinator, store: GroupStore) -> None:
        self.coordinator = coordinator
        self.store = store
        self.failed_appends = 0
        self.on_append_failed: Callable[[StoreError], None] | None = None

    def run(self, result: CoordinatorResult[T]) -> CoordinatorResult[T]:
        """Append what the operation wants durable and settle it, until nothing is left to write."""
        while not result.settled:
            failure: StoreError | None = None
            if result.records:
                try:
                    self.store.append(result.records)
                except StoreError as exc:
                    failure = exc
                    self.failed_appends += 1
                    if self.on_append_failed is not None:
                        self.on_append_failed(exc)
            result = self.coordinator.settle(result, failure)
        return result

    def fire_due_timers(self) -> list[CoordinatorResult[None]]:
        """Run every timer due at the clock's current time, each settled on its own."""
        results = []
        while (due := self.coordinator.fire_next_timer()) is not None:
            results.append(self.run(due))
        return results


class InProcessCoordinator:
    """The state machine and its runtime in one object that answers at once: every operation's
    records go to `store` and its replies are sent as soon as it is settled."""

    def __init__(self, coordinator: GroupCoordinator, store: GroupStore) -> None:
        self.coordinator = coordinator
        self.runtime = CoordinatorRuntime(coordinator, store)

    def describe_group_config(self, group_id: str) -> dict[str, str]:
        return self.coordinator.describe_group_config(group_id)

    def fire_due_timers(self) -> int:
        results = self.runtime.fire_due_timers()
        for result in results:
            self._answer(result)
        return len(results)

    def _answer(self, result: CoordinatorResult[T]) -> T:
        for reply in result.replies:
            reply.send()
        if result.error is not None:
            raise result.error
        return result.response

    def __getattr__(self, name: str) -> Any:
        # Everything else is the coordinator's, with operations run and answered on the way out.
        attribute = getattr(self.coordinator, name)
        if callable(attribute):
            method = attribute

            def call(*args: Any, **kwargs: Any) -> Any:
                value = method(*args, **kwargs)
                if isinstance(value, CoordinatorResult):
                    return self._answer(self.runtime.run(value))
                return value

            attribute = call
        setattr(self, name, attribute)  # found once: later lookups do not come here
        return attribute
