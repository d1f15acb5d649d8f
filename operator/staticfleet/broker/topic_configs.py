"""A topic's name, id and configs: Kafka's rules for each, the log settings the configs give, and the
topic as the topic log describes it."""

from __future__ import annotations

import base64
import re
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Final

from staticfleet.broker.partitionlog import LogConfig
from staticfleet.broker.topiclog_errors import InvalidConfigError, InvalidTopicError

MAX_TOPIC_NAME_LENGTH: Final = 249
_LEGAL_TOPIC_NAME: Final = re.compile(r"[a-zA-Z0-9._-]+")

DEFAULT_TOPIC_CONFIGS: Final[Mapping[str, str]] = {
    "cleanup.policy": "delete",
    "compression.type": "producer",
    "delete.retention.ms": "86400000",
    "index.interval.bytes": "4096",
    "max.compaction.lag.ms": "9223372036854775807",
    "max.message.bytes": "1048588",
    "message.timestamp.type": "CreateTime",
    "min.cleanable.dirty.ratio": "0.5",
    "min.compaction.lag.ms": "0",
    "min.insync.replicas": "1",
    "retention.bytes": "-1",
    "retention.ms": "604800000",
    "segment.bytes": "1073741824",
    "segment.ms": "604800000",
}

BOUNDED_TOPIC_DEFAULTS: Final[Mapping[str, str]] = {
    "retention.bytes": str(32 * 1024 * 1024),
    "segment.bytes": str(8 * 1024 * 1024),
}
"""The coordinator's broker-level defaults (Kafka's log.retention.bytes, log.segment.bytes): a partition
keeps at most about retention.bytes + segment.bytes, so the topic log fits the chart's volume."""

_INT32_MIN: Final = -(1 << 31)
_INT32_MAX: Final = (1 << 31) - 1
_INT64_MIN: Final = -(1 << 63)
_INT64_MAX: Final = (1 << 63) - 1

# DescribeConfigs' config types (Kafka's ConfigType).
TYPE_BOOLEAN, TYPE_STRING, TYPE_INT, TYPE_LONG, TYPE_DOUBLE, TYPE_LIST = 1, 2, 3, 5, 6, 7


@dataclass(frozen=True, slots=True)
class _Spec:
    """How Kafka's LogConfig defines one topic config: its type and the values it accepts."""

    type: int
    low: int | None = None  # at least
    high: int | None = None  # no more than
    choices: tuple[str, ...] = ()  # a string's values, or a list's items
    also: int | None = None  # one more legal integer outside [low, high] (compression.gzip.level's -1)


_CONFIG_SPECS: Final[Mapping[str, _Spec]] = {
    "cleanup.policy": _Spec(TYPE_LIST, choices=("compact", "delete")),
    "compression.gzip.level": _Spec(TYPE_INT, 1, 9, also=-1),
    "compression.lz4.level": _Spec(TYPE_INT, 1, 17),
    "compression.type": _Spec(
        TYPE_STRING, choices=("uncompressed", "zstd", "lz4", "snappy", "gzip", "producer")
    ),
    "compression.zstd.level": _Spec(TYPE_INT, -131072, 22),
    "delete.retention.ms": _Spec(TYPE_LONG, 0),
    "file.delete.delay.ms": _Spec(TYPE_LONG, 0),
    "flush.messages": _Spec(TYPE_LONG, 1),
    "flush.ms": _Spec(TYPE_LONG, 0),
    "follower.replication.throttled.replicas": _Spec(TYPE_LIST),
    "index.interval.bytes": _Spec(TYPE_INT, 0),
    "leader.replication.throttled.replicas": _Spec(TYPE_LIST),
    "local.retention.bytes": _Spec(TYPE_LONG, -2),
    "local.retention.ms": _Spec(TYPE_LONG, -2),
    "max.compaction.lag.ms": _Spec(TYPE_LONG, 1),
    "max.message.bytes": _Spec(TYPE_INT, 0),
    "message.timestamp.after.max.ms": _Spec(TYPE_LONG, 0),
    "message.timestamp.before.max.ms": _Spec(TYPE_LONG, 0),
    "message.timestamp.type": _Spec(TYPE_STRING, choices=("CreateTime", "LogAppendTime")),
    "min.cleanable.dirty.ratio": _Spec(TYPE_DOUBLE, 0, 1),
    "min.compaction.lag.ms": _Spec(TYPE_LONG, 0),
    "min.insync.replicas": _Spec(TYPE_INT, 1),
    "preallocate": _Spec(TYPE_BOOLEAN),
    "remote.log.copy.disable": _Spec(TYPE_BOOLEAN),
    "remote.log.delete.on.disable": _Spec(TYPE_BOOLEAN),
    "remote.storage.enable": _Spec(TYPE_BOOLEAN),
    "retention.bytes": _Spec(TYPE_LONG),
    "retention.ms": _Spec(TYPE_LONG, -1),
    # Kafka's lower bound is 1 MiB; this log keeps 14 (one empty batch) so small segments can be tested.
    "segment.bytes": _Spec(TYPE_INT, 14),
    "segment.index.bytes": _Spec(TYPE_INT, 4),
    "segment.jitter.ms": _Spec(TYPE_LONG, 0),
    "segment.ms": _Spec(TYPE_LONG, 1),
    "unclean.leader.election.enable": _Spec(TYPE_BOOLEAN),
}
"""Every topic config Kafka 4.3 knows. Those beyond cleanup.policy's delete, compression.type,
index.interval.bytes, max.message.bytes, message.timestamp.type, retention.* and segment.bytes/ms are
validated and kept (DescribeConfigs shows them) but change nothing on a single node that neither compacts
nor replicates nor tiers its log."""

_LONG_TEXT: Final = re.compile(r"[+-]?[0-9]+")
_THROTTLED_REPLICA: Final = re.compile(r"[0-9]+:[0-9]+")


def validate_topic_name(name: str) -> None:
    """Kafka's rules: 1..249 characters from [a-zA-Z0-9._-], and not "." or ".."."""
    if not name:
        raise InvalidTopicError("topic name is illegal: it can't be empty")
    if name in (".", ".."):
        raise InvalidTopicError(f'topic name cannot be "{name}"')
    if len(name) > MAX_TOPIC_NAME_LENGTH:
        raise InvalidTopicError(
            f"topic name is illegal: it is {len(name)} characters long, "
            f"more than the maximum {MAX_TOPIC_NAME_LENGTH}"
        )
    if not _LEGAL_TOPIC_NAME.fullmatch(name):
        raise InvalidTopicError(
            f"topic name {name!r} is illegal: it contains a character other than "
            "ASCII alphanumerics, '.', '_' and '-'"
        )


def collision_key(name: str) -> str:
    # Kafka refuses two topics that differ only by '.' versus '_': their metric names would collide.
    return name.replace(".", "_")


def config_type(name: str) -> int:
    """A topic config's type as DescribeConfigs reports it."""
    spec = _CONFIG_SPECS.get(name)
    return TYPE_STRING if spec is None else spec.type


def _invalid(name: str, shown: str, reason: str) -> InvalidConfigError:
    return InvalidConfigError(f"Invalid value {shown} for configuration {name}: {reason}")


def _java_double(number: float) -> str:
    """A double as Java's Double.toString writes the common cases (Kafka quotes values so)."""
    text = repr(number)
    return text if ("." in text or "e" in text or "n" in text) else f"{text}.0"


def _checked_number(name: str, spec: _Spec, value: str) -> str:
    text = value.strip()
    if spec.type == TYPE_DOUBLE:
        try:
            number: float = float(text)
        except ValueError:
            raise _invalid(name, value, "Not a number of type DOUBLE") from None
        shown = _java_double(number)
    else:
        kind = "INT" if spec.type == TYPE_INT else "LONG"
        lowest, highest = (_INT32_MIN, _INT32_MAX) if spec.type == TYPE_INT else (_INT64_MIN, _INT64_MAX)
        if not _LONG_TEXT.fullmatch(text) or not lowest <= int(text) <= highest:
            raise _invalid(name, value, f"Not a number of type {kind}")
        number = int(text)
        shown = str(number)
    if spec.also is not None:
        if number != spec.also and not (spec.low or 0) <= number <= (spec.high or 0):
            raise _invalid(
                name, shown, f"Value must be between {spec.low} and {spec.high} or equal to {spec.also}"
            )
        return shown
    if spec.low is not None and number < spec.low:
        raise _invalid(name, shown, f"Value must be at least {spec.low}")
    if spec.high is not None and number > spec.high:
        raise _invalid(name, shown, f"Value must be no more than {spec.high}")
    return shown


def _checked_list(name: str, spec: _Spec, value: str) -> str:
    items = list(dict.fromkeys(item.strip() for item in value.split(",") if item.strip()))
    if spec.choices:
        for item in items:
            if item not in spec.choices:
                raise _invalid(name, item, f"String must be one of: {', '.join(spec.choices)}")
    elif items != ["*"] and not all(_THROTTLED_REPLICA.fullmatch(item) for item in items):
        raise _invalid(
            name,
            f"[{', '.join(items)}]",
            f"{name} must be the literal '*' or a list of replicas in the following format: "
            "[partitionId]:[brokerId],[partitionId]:[brokerId],...",
        )
    return ",".join(items)


def _checked_value(name: str, value: str) -> str:
    """The value of one known topic config as the log keeps it, or InvalidConfigError (Kafka's words)."""
    spec = _CONFIG_SPECS[name]
    if spec.type == TYPE_LIST:
        return _checked_list(name, spec, value)
    if spec.type == TYPE_BOOLEAN:
        flag = value.strip().lower()
        if flag not in ("true", "false"):
            raise _invalid(name, value, "Expected value to be either true or false")
        if name == "remote.storage.enable" and flag == "true":
            raise InvalidConfigError(
                "Tiered Storage functionality is disabled in the broker. "
                "Topic cannot be configured with remote log storage."
            )
        return flag
    if spec.type == TYPE_STRING:
        if value.strip() not in spec.choices:
            raise _invalid(name, value, f"String must be one of: {', '.join(spec.choices)}")
        return value.strip()
    return _checked_number(name, spec, value)


def validate_topic_configs(configs: Mapping[str, str | None]) -> dict[str, str]:
    """Check topic config overrides (names and values) as Kafka does; return them as the log keeps them.

    Refused beyond Kafka's rules: a compression.type other than `producer` (batches are stored as the
    producer compressed them)."""
    out: dict[str, str] = {}
    for name, value in configs.items():
        if name not in _CONFIG_SPECS:
            raise InvalidConfigError(f"Unknown topic config name: {name}")
        if value is None:
            raise InvalidConfigError(f"Null value not supported for topic configs: {name}")
        checked = _checked_value(name, value)
        if name == "compression.type" and checked != "producer":
            raise InvalidConfigError(
                f"compression.type={checked} is not supported: batches are stored as the producer "
                "compressed them; use compression.type=producer and set compression on the producer"
            )
        out[name] = checked
    return out


def check_effective_configs(effective: Mapping[str, str]) -> None:
    """Kafka's checks across configs, on a topic's effective (default + override) configs."""
    min_lag, max_lag = int(effective["min.compaction.lag.ms"]), int(effective["max.compaction.lag.ms"])
    if min_lag > max_lag:
        raise InvalidConfigError(
            f"conflict topic config setting min.compaction.lag.ms ({min_lag}) > "
            f"max.compaction.lag.ms ({max_lag})"
        )


def cleanup_policies(effective: Mapping[str, str]) -> frozenset[str]:
    return frozenset(item for item in effective["cleanup.policy"].split(",") if item)


def log_config_from(effective: Mapping[str, str]) -> LogConfig:
    """The LogConfig of a topic from its effective (default + override) configs."""
    return LogConfig(
        segment_bytes=int(effective["segment.bytes"]),
        segment_ms=int(effective["segment.ms"]),
        retention_bytes=int(effective["retention.bytes"]),
        retention_ms=int(effective["retention.ms"]),
        max_message_bytes=int(effective["max.message.bytes"]),
        index_interval_bytes=int(effective["index.interval.bytes"]),
        log_append_time=effective["message.timestamp.type"] == "LogAppendTime",
        delete_policy="delete" in cleanup_policies(effective),
        compact_policy="compact" in cleanup_policies(effective),
    )


def new_topic_id() -> uuid.UUID:
    """A random topic id, avoiding the values Kafka reserves (zero, one) and, like Kafka, ids whose
    URL-safe base64 form starts with '-' (they would read as command-line options)."""
    while True:
        candidate = uuid.uuid4()
        if candidate.int > 1 and not base64.urlsafe_b64encode(candidate.bytes).startswith(b"-"):
            return candidate


@dataclass(frozen=True, slots=True)
class TopicDescription:
    name: str
    topic_id: uuid.UUID
    partitions: int
    configs: Mapping[str, str]  # the overrides; effective values via TopicLog.topic_configs()
