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
    "index.interval.bytes": "4096",
    "max.message.bytes": "1048588",
    "message.timestamp.type": "CreateTime",
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

# Integer configs and their smallest legal value (Kafka's bounds).
_INT_CONFIGS: Final[Mapping[str, int]] = {
    "index.interval.bytes": 0,
    "max.message.bytes": 0,
    "min.insync.replicas": 1,
    "retention.bytes": -1,
    "retention.ms": -1,
    "segment.bytes": 14,
    "segment.ms": 1,
}

# Kafka topic configs that are accepted and kept (DescribeConfigs shows them) but change nothing on a
# single node without compaction, tiered storage or follower replication.
_STORED_ONLY_CONFIGS: Final = frozenset(
    {
        "delete.retention.ms",
        "file.delete.delay.ms",
        "flush.messages",
        "flush.ms",
        "follower.replication.throttled.replicas",
        "leader.replication.throttled.replicas",
        "local.retention.bytes",
        "local.retention.ms",
        "max.compaction.lag.ms",
        "message.downconversion.enable",
        "message.format.version",
        "message.timestamp.after.max.ms",
        "message.timestamp.before.max.ms",
        "message.timestamp.difference.max.ms",
        "min.cleanable.dirty.ratio",
        "min.compaction.lag.ms",
        "preallocate",
        "remote.log.copy.disable",
        "remote.log.delete.on.disable",
        "remote.storage.enable",
        "segment.index.bytes",
        "segment.jitter.ms",
        "unclean.leader.election.enable",
    }
)

_INT64_MAX: Final = (1 << 63) - 1


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


def validate_topic_configs(configs: Mapping[str, str | None]) -> dict[str, str]:
    """Check topic config overrides (names and values); return them as a plain dict."""
    out: dict[str, str] = {}
    for name, value in configs.items():
        if value is None:
            raise InvalidConfigError(f"config {name} has no value; give one or leave it out")
        if name in _INT_CONFIGS:
            try:
                number = int(value.strip())
            except ValueError:
                raise InvalidConfigError(f"config {name}={value!r} is not an integer") from None
            minimum = _INT_CONFIGS[name]
            if number < minimum or number > _INT64_MAX:
                raise InvalidConfigError(f"config {name}={number} is out of range: it must be >= {minimum}")
            value = str(number)
        elif name == "cleanup.policy":
            policies = {part.strip() for part in value.split(",") if part.strip()}
            if "compact" in policies:
                raise InvalidConfigError(
                    "cleanup.policy=compact is not supported: this broker does not compact logs; "
                    "use cleanup.policy=delete"
                )
            if policies != {"delete"}:
                raise InvalidConfigError(
                    f"cleanup.policy={value!r} is invalid: the only supported value is delete"
                )
            value = "delete"
        elif name == "compression.type":
            if value.strip().lower() != "producer":
                raise InvalidConfigError(
                    f"compression.type={value} is not supported: batches are stored as the producer "
                    "compressed them; use compression.type=producer and set compression on the producer"
                )
            value = "producer"
        elif name == "message.timestamp.type":
            if value not in ("CreateTime", "LogAppendTime"):
                raise InvalidConfigError(
                    f"message.timestamp.type={value!r} is invalid: use CreateTime or LogAppendTime"
                )
        elif name not in _STORED_ONLY_CONFIGS:
            raise InvalidConfigError(f"unknown topic config {name!r}")
        out[name] = value
    return out


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
