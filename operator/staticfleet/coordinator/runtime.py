"""The one place where what the state machine decided meets the store: append, then settle.

`CoordinatorRuntime.run` appends an operation's records as one frame and hands the outcome back to
the state machine (`settle`), which applies the records or undoes what it did and answers with
Kafka's error for a failed append. The caller sends the replies: at once (`InProcessCoordinator`, for
tests, simulations and benchmarks) or once the records are fsynced (the broker's host).

Every operation is settled, whatever happens:
  * records over `message.max.bytes` are refused before the store sees them, as Kafka's log refuses a
    batch over the offsets topic's `max.message.bytes` (MESSAGE_TOO_LARGE, answered UNKNOWN_SERVER_ERROR);
  * an exception other than a StoreError while the operation decides, or while its records are encoded
    or appended, is settled as a failed append too: undone, answered UNKNOWN_SERVER_ERROR, and logged
    with its traceback the first time (`FailureLog`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol, TypeVar

from staticfleet.coordinator.coordinator import GroupCoordinator
from staticfleet.coordinator.errors import ErrorCode, StoreError
from staticfleet.coordinator.records import Record, encoded_size
from staticfleet.coordinator.result import CoordinatorResult

log = logging.getLogger(__name__)
T = TypeVar("T")

MAX_SETTLE_ROUNDS = 16
"""An operation settles in one or two rounds (its append, then what its continuations write); undo
continuations that fail again and again are cut off here."""
REPEAT_LOG_INTERVAL_S = 60.0


class GroupStore(Protocol):
    def append(self, records: Sequence[Record]) -> None: ...


@dataclass(slots=True)
class _Seen:
    count: int
    logged_count: int
    logged_at: float


class FailureLog:
    """Logs each kind of failure (the operation, the exception type and where it was raised) once with
    its traceback; failures like one already logged are counted and summed up in one line at most every
    `interval_s`, so a client that retries a failing request does not flood the log."""

    def __init__(self, interval_s: float = REPEAT_LOG_INTERVAL_S, now: Callable[[], float] = time.monotonic):
        self.interval_s = interval_s
        self.now = now
        self._seen: dict[tuple[str, str, str], _Seen] = {}

    def report(self, operation: str, exc: BaseException, what: str, *, with_traceback: bool = True) -> None:
        key = (operation, type(exc).__name__, _raised_at(exc))
        seen = self._seen.get(key)
        now = self.now()
        if seen is None:
            self._seen[key] = _Seen(1, 1, now)
            log.error(
                "%s %s: %s", operation or "an operation", what, exc, exc_info=exc if with_traceback else None
            )
            return
        seen.count += 1
        if now - seen.logged_at >= self.interval_s:
            log.error(
                "%s %s %d more times since it was last logged (%s: %s)",
                operation or "an operation",
                what,
                seen.count - seen.logged_count,
                type(exc).__name__,
                exc,
            )
            seen.logged_count = seen.count
            seen.logged_at = now


def _raised_at(exc: BaseException) -> str:
    traceback = exc.__traceback__
    if traceback is None:
        return ""
    while traceback.tb_next is not None:
        traceback = traceback.tb_next
    code = traceback.tb_frame.f_code
    return f"{code.co_filename}:{traceback.tb_lineno}"


class CoordinatorRuntime:
    def __init__(self, coordinator: GroupCoordinator, store: GroupStore) -> None:
        self.coordinator = coordinator
        self.store = store
        self.max_append_bytes = coordinator.config.message_max_bytes
        self.failed_appends = 0
        self.too_large_appends = 0
        self.unexpected_errors = 0
        self.failures = FailureLog()
        self.on_append_failed: Callable[[StoreError], None] | None = None

    def run(self, result: CoordinatorResult[T]) -> CoordinatorResult[T]:
        """Append what the operation wants durable and settle it, until nothing is left to write."""
        rounds = 0
        while not result.settled:
            rounds += 1
            if rounds > MAX_SETTLE_ROUNDS:
                log.error(
                    "%s still had records to write after %d rounds of failures: they are dropped",
                    result.name or "an operation",
                    MAX_SETTLE_ROUNDS,
                )
                return CoordinatorResult(result.response, replies=result.replies, error=result.error)
            failure: StoreError | Exception | None = result.unexpected
            if failure is not None:
                self._unexpected(result, failure, "failed while deciding")
            elif result.records:
                try:
                    self._append(result.name, result.records)
                except StoreError as exc:
                    failure = exc
                    self.failed_appends += 1
                    if self.on_append_failed is not None:
                        self.on_append_failed(exc)
                except Exception as exc:
                    failure = exc
                    self._unexpected(result, exc, "failed while its records were written")
            result = self.coordinator.settle(result, failure)
        return result

    def _append(self, operation: str, records: Sequence[Record]) -> None:
        size = sum(map(encoded_size, records))
        if size > self.max_append_bytes:
            self.too_large_appends += 1
            error = StoreError(
                f"{len(records)} records of {size} bytes are above message.max.bytes "
                f"({self.max_append_bytes})",
                ErrorCode.message_too_large,
            )
            self.failures.report(operation, error, "could not be written", with_traceback=False)
            raise error
        self.store.append(records)

    def _unexpected(self, result: CoordinatorResult[Any], exc: Exception, what: str) -> None:
        self.unexpected_errors += 1
        self.failures.report(result.name, exc, f"{what}, answered UNKNOWN_SERVER_ERROR and undone")

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
