"""The coordinator's failures, each carrying one of kio's Kafka error codes."""

from __future__ import annotations

from kio.schema.errors import ErrorCode

__all__ = ["CoordinatorError", "ErrorCode", "StoreError", "append_error_to_response_error"]


class CoordinatorError(Exception):
    """A request-level failure that maps to one Kafka error code."""

    def __init__(self, code: ErrorCode, message: str = "") -> None:
        super().__init__(message or code.name.upper())
        self.code = code


class StoreError(Exception):
    """The durable store could not append a record; `code` is the Kafka append error it corresponds to."""

    def __init__(self, message: str, code: ErrorCode = ErrorCode.kafka_storage_error) -> None:
        super().__init__(message)
        self.code = code


def append_error_to_response_error(code: ErrorCode) -> ErrorCode:
    """How Kafka maps a failed group-metadata append to the error a client sees."""
    if code in (ErrorCode.unknown_topic_or_partition,):
        return ErrorCode.coordinator_not_available
    if code in (ErrorCode.kafka_storage_error,):
        return ErrorCode.not_coordinator
    if code in (ErrorCode.message_too_large, ErrorCode.record_list_too_large):
        return ErrorCode.unknown_server_error
    return code
