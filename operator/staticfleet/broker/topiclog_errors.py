"""Errors raised by the topic log, each carrying the Kafka error code the protocol server answers with."""

from __future__ import annotations

from kio.schema.errors import ErrorCode


class TopicLogError(Exception):
    """Base class: `error_code` is the Kafka protocol error code for the response."""

    error_code: ErrorCode = ErrorCode.unknown_server_error


class OffsetOutOfRangeError(TopicLogError):
    error_code = ErrorCode.offset_out_of_range


class CorruptMessageError(TopicLogError):
    error_code = ErrorCode.corrupt_message


class UnknownTopicOrPartitionError(TopicLogError):
    error_code = ErrorCode.unknown_topic_or_partition


class MessageTooLargeError(TopicLogError):
    error_code = ErrorCode.message_too_large


class InvalidTopicError(TopicLogError):
    error_code = ErrorCode.invalid_topic_exception


class RecordListTooLargeError(TopicLogError):
    error_code = ErrorCode.record_list_too_large


class InvalidTimestampError(TopicLogError):
    error_code = ErrorCode.invalid_timestamp


class TopicAlreadyExistsError(TopicLogError):
    error_code = ErrorCode.topic_already_exists


class InvalidPartitionsError(TopicLogError):
    error_code = ErrorCode.invalid_partitions


class InvalidReplicationFactorError(TopicLogError):
    error_code = ErrorCode.invalid_replication_factor


class InvalidConfigError(TopicLogError):
    error_code = ErrorCode.invalid_config


class InvalidRequestError(TopicLogError):
    error_code = ErrorCode.invalid_request


class UnsupportedForMessageFormatError(TopicLogError):
    error_code = ErrorCode.unsupported_for_message_format


class PolicyViolationError(TopicLogError):
    error_code = ErrorCode.policy_violation


class KafkaStorageError(TopicLogError):
    error_code = ErrorCode.kafka_storage_error


class InvalidRecordError(TopicLogError):
    error_code = ErrorCode.invalid_record

    def __init__(self, message: str, record_errors: tuple[tuple[int, str], ...] = ()) -> None:
        super().__init__(message)
        self.record_errors = record_errors
        """(index of the record in its batch, why it was refused), as Produce's record_errors carry them."""
