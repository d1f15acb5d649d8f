"""What an operation of the state machine decided: records to make durable and replies to send.

Kafka's group coordinator returns a `CoordinatorResult(records, response)` from every operation and
leaves writing to one runtime; this is the same shape. The state machine never touches a store: an
operation that needs a record durable hands it over with two continuations, one for when the append
succeeded (apply what the record says, answer) and one for when it failed (undo, answer with the
error). Replies (the answers to parked JoinGroup and SyncGroup requests) are collected, not sent.

Each operation also says how it answers an error of its own (Kafka's service does so with
`handleOperationException`): if something raises while it decides, the operation is abandoned with the
exception in `unexpected`, and the runtime settles it as a failed append whose answer is that error.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any, Generic, TypeVar

from staticfleet.coordinator.errors import CoordinatorError, ErrorCode
from staticfleet.coordinator.records import Record

T = TypeVar("T")

OnWritten = Callable[[], None]
OnFailed = Callable[[ErrorCode, str], None]
"""Called with the error the client sees (Kafka's mapping of the append error) and what went wrong."""
AnswerError = Callable[[ErrorCode], Any]
"""The operation's whole answer for an error (run inside an operation: it may record replies)."""


@dataclass(slots=True)
class Reply:
    """An answer to a parked request, to be sent once the records before it are durable."""

    respond: Callable[[Any], None]
    response: Any

    def send(self) -> None:
        self.respond(self.response)


@dataclass(slots=True)
class CoordinatorResult(Generic[T]):
    response: T
    """The operation's own answer (None for operations that answer through replies)."""
    records: list[Record] = field(default_factory=list)
    replies: list[Reply] = field(default_factory=list)
    on_written: list[OnWritten] = field(default_factory=list)
    on_failed: list[OnFailed] = field(default_factory=list)
    error: CoordinatorError | None = None
    """Raised to the caller once the result is settled (a request-level failure)."""
    name: str = ""
    """What the operation is, for the log (JoinGroup, a timer, ...)."""
    answer_error: AnswerError | None = None
    unexpected: Exception | None = None
    """What raised while the operation was deciding: it must be settled as a failure."""

    @property
    def settled(self) -> bool:
        """Nothing is left to append and no continuation waits for an append."""
        return not self.records and not self.on_written and not self.on_failed and self.unexpected is None


@dataclass(slots=True)
class Operation:
    """What the operation in progress decided so far."""

    records: list[Record] = field(default_factory=list)
    replies: list[Reply] = field(default_factory=list)
    on_written: list[OnWritten] = field(default_factory=list)
    on_failed: list[OnFailed] = field(default_factory=list)
    response_instead: list[Any] = field(default_factory=list)
    error: CoordinatorError | None = None


class Recorder:
    """Collects the records and replies of one operation at a time."""

    __slots__ = ("_operation",)

    def __init__(self) -> None:
        self._operation: Operation | None = None

    def run(
        self, body: Callable[[], T], name: str = "", answer_error: AnswerError | None = None
    ) -> CoordinatorResult[T]:
        """Run one operation. With `answer_error`, an exception other than a CoordinatorError (a
        request-level failure, raised to the caller) does not escape: the result carries it in
        `unexpected`, with what was decided before it."""
        if self._operation is not None:
            raise RuntimeError("an operation of the coordinator started inside another one")
        operation = self._operation = Operation()
        unexpected: Exception | None = None
        response: Any = None
        try:
            response = body()
        except CoordinatorError:
            raise
        except Exception as exc:
            if answer_error is None:
                raise
            unexpected = exc
        finally:
            self._operation = None
        if operation.response_instead:
            response = operation.response_instead[-1]
        return CoordinatorResult(
            response,
            operation.records,
            operation.replies,
            operation.on_written,
            operation.on_failed,
            operation.error,
            name,
            answer_error,
            unexpected,
        )

    def _current(self) -> Operation:
        operation = self._operation
        if operation is None:
            raise RuntimeError("the coordinator decided something outside an operation")
        return operation

    def write(
        self,
        records: Sequence[Record],
        on_written: OnWritten | None = None,
        on_failed: OnFailed | None = None,
    ) -> None:
        """Ask for records to be made durable; the continuations run once the append succeeded or failed."""
        operation = self._current()
        operation.records.extend(records)
        if on_written is not None:
            operation.on_written.append(on_written)
        if on_failed is not None:
            operation.on_failed.append(on_failed)

    def reply(self, respond: Callable[[Any], None], response: Any) -> None:
        self._current().replies.append(Reply(respond, response))

    def respond_instead(self, response: Any) -> None:
        """Replace the operation's own answer (a continuation learnt the append failed)."""
        self._current().response_instead.append(response)

    def fail(self, error: CoordinatorError) -> None:
        self._current().error = error


class Once:
    """A responder that answers at most once, like a completed CompletableFuture; the answer is
    recorded as a reply of the operation in progress."""

    __slots__ = ("_recorder", "_respond", "done")

    def __init__(self, recorder: Recorder, respond: Callable[[Any], None]) -> None:
        self._recorder = recorder
        self._respond = respond
        self.done = False

    def __call__(self, response: Any) -> None:
        if not self.done:
            self.done = True
            self._recorder.reply(self._respond, response)
