"""Errors raised by the topic log, each carrying the Kafka error code the protocol server answers with."""

from __future__ import annotations


class TopicLogError(Exception):
    """Base class: `error_code` is the Kafka protocol error code for the response."""

    error_code: int = -1  # UNKNOWN_SERVER_ERROR


class OffsetOutOfRangeError(TopicLogError):
    error_code = 1


class CorruptMessageError(TopicLogError):
    error_code = 2


class UnknownTopicOrPartitionError(TopicLogError):
    error_code = 3


class MessageTooLargeError(TopicLogError):
    error_code = 10


class InvalidTopicError(TopicLogError):
    error_code = 17


class RecordListTooLargeError(TopicLogError):
    error_code = 18


class InvalidTimestampError(TopicLogError):
    error_code = 32


class TopicAlreadyExistsError(TopicLogError):
    error_code = 36


class InvalidPartitionsError(TopicLogError):
    error_code = 37


class InvalidReplicationFactorError(TopicLogError):
    error_code = 38


class InvalidConfigError(TopicLogError):
    error_code = 40


class InvalidRequestError(TopicLogError):
    error_code = 42


class UnsupportedForMessageFormatError(TopicLogError):
    error_code = 43


class PolicyViolationError(TopicLogError):
    error_code = 44


class KafkaStorageError(TopicLogError):
    error_code = 56


class InvalidRecordError(TopicLogError):
    error_code = 87
