"""The topic log: topics, partitions and their record batches on local disk, for a single-node broker.

Storage only, no networking. The protocol server maps Produce, Fetch, ListOffsets, Metadata,
CreateTopics, DeleteTopics, CreatePartitions and topic configs onto this class and turns a raised
`TopicLogError` into its `error_code`.

Layout under the data directory:

    topics/<topic>/topic.json            name, topic id, partition count, config overrides
    topics/<topic>/<partition>/          segment files and a recovery point (see partitionlog.py)
    staging/, trash/                     topic creation and deletion in progress; emptied on open

A topic appears by renaming a fully written staging directory into `topics/`, and disappears by renaming
it into `trash/`, so a crash leaves either the whole topic or none of it. `topic.json` is replaced
atomically (write, fsync, rename, fsync the directory).

Concurrency model: one owner. Every method is called from the thread that runs the asyncio event loop
(or from one thread of a program without a loop); appends, reads and topic operations are synchronous
and short (page-cache I/O). `wait_for_data` is the one coroutine: it parks a future that `append`,
retention and topic changes resolve. `flush_async` runs only the fsyncs in the default executor, on
duplicated file descriptors, so the loop keeps serving meanwhile.

Durability model: an append is in the page cache when `append` returns. The server decides when to make
it durable: `flush()` / `flush_async()` before answering an acks=-1 produce request, or periodically.
After a crash, recovery truncates each partition at its first torn or corrupt batch (see partitionlog.py);
no corrupt batch is ever served.

What Kafka does that this log does not: compaction (a compacted topic keeps every record; readers see each
key's latest value last, after the earlier ones), transactions and idempotent-producer de-duplication
(producer ids are stored, not checked), recompression (compression.type other than `producer` is
refused), replication. Unlike Kafka, a produce request may carry several batches for one partition;
they are appended together.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import shutil
import time
import uuid
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Final

from staticfleet.broker.partitionlog import (
    AppendResult,
    FlushPlan,
    LogConfig,
    OffsetAndTimestamp,
    PartitionLog,
)
from staticfleet.broker.recordbatch import Buffer
from staticfleet.broker.topic_configs import (
    DEFAULT_TOPIC_CONFIGS,
    TopicDescription,
    check_effective_configs,
    collision_key,
    log_config_from,
    new_topic_id,
    validate_topic_configs,
    validate_topic_name,
)
from staticfleet.broker.topic_fetch import FetchResult, FetchWaits, RegionFetchResult, TopicPartition
from staticfleet.broker.topiclog_errors import (
    CorruptMessageError,
    InvalidConfigError,
    InvalidPartitionsError,
    InvalidRecordError,
    InvalidReplicationFactorError,
    InvalidRequestError,
    InvalidTopicError,
    KafkaStorageError,
    MessageTooLargeError,
    OffsetOutOfRangeError,
    PolicyViolationError,
    RecordListTooLargeError,
    TopicAlreadyExistsError,
    TopicLogError,
    UnknownTopicOrPartitionError,
    UnsupportedForMessageFormatError,
)
from staticfleet.fsutil import fsync_directory, write_atomically

__all__ = [
    "EARLIEST_LOCAL_TIMESTAMP",
    "EARLIEST_TIMESTAMP",
    "LATEST_TIMESTAMP",
    "MAX_TIMESTAMP",
    "CorruptMessageError",
    "InvalidConfigError",
    "InvalidPartitionsError",
    "InvalidRecordError",
    "InvalidReplicationFactorError",
    "InvalidTopicError",
    "KafkaStorageError",
    "MessageTooLargeError",
    "OffsetAndTimestamp",
    "OffsetOutOfRangeError",
    "PartitionsChangedCallback",
    "PolicyViolationError",
    "RecordListTooLargeError",
    "TopicAlreadyExistsError",
    "TopicLog",
    "TopicLogError",
    "UnknownTopicOrPartitionError",
    "UnsupportedForMessageFormatError",
]

log = logging.getLogger(__name__)

PartitionsChangedCallback = Callable[[str, int, int], None]
"""Called as (topic, old partition count, new partition count): 0 -> n on create, n -> 0 on delete."""

LATEST_TIMESTAMP: Final = -1
EARLIEST_TIMESTAMP: Final = -2
MAX_TIMESTAMP: Final = -3
EARLIEST_LOCAL_TIMESTAMP: Final = -4

_TOPIC_FILE: Final = "topic.json"
_TOPIC_FILE_VERSION: Final = 1


@dataclass
class _Topic:
    name: str
    topic_id: uuid.UUID
    directory: Path
    overrides: dict[str, str]
    log_config: LogConfig
    created_ms: int
    partitions: list[PartitionLog] = field(default_factory=list)

    def describe(self) -> TopicDescription:
        return TopicDescription(self.name, self.topic_id, len(self.partitions), dict(self.overrides))


@dataclass(frozen=True, slots=True)
class _TopicPlan:
    """A topic about to be created: everything decided, nothing written yet."""

    name: str
    topic_id: uuid.UUID
    partitions: int
    overrides: dict[str, str]
    log_config: LogConfig
    created_ms: int


def _write_json_atomically(path: Path, payload: Mapping[str, Any]) -> None:
    write_atomically(path, (json.dumps(payload, indent=2, sort_keys=True) + "\n").encode())


def _wall_clock_ms() -> int:
    return time.time_ns() // 1_000_000


class TopicLog:
    """All topics of the broker. See the module docstring for the concurrency and durability model."""

    def __init__(
        self,
        data_dir: str | os.PathLike[str],
        *,
        default_configs: Mapping[str, str] | None = None,
        default_partitions: int = 1,
        max_partitions_per_topic: int = 10000,
        clock_ms: Callable[[], int] = _wall_clock_ms,
    ) -> None:
        """Open (and recover) the log under `data_dir`, creating it if needed.

        `default_configs` are broker-level defaults for topic configs (same names as the topic configs);
        `default_partitions` is used when CreateTopics asks for -1 partitions; `clock_ms` supplies the
        time for LogAppendTime, segment.ms and retention when the caller gives none.
        """
        if default_partitions < 1:
            raise ValueError(f"default_partitions must be >= 1, not {default_partitions}")
        self._root = Path(data_dir)
        self._topics_dir = self._root / "topics"
        self._staging_dir = self._root / "staging"
        self._trash_dir = self._root / "trash"
        self._defaults: dict[str, str] = {
            **DEFAULT_TOPIC_CONFIGS,
            **validate_topic_configs(default_configs or {}),
        }
        self._default_partitions = default_partitions
        self._max_partitions = max_partitions_per_topic
        self._clock_ms = clock_ms
        self._topics: dict[str, _Topic] = {}
        self._by_id: dict[uuid.UUID, str] = {}
        self._creating: set[str] = set()
        """Topics whose files are being written by `create_topic_async`."""
        self._waits = FetchWaits()
        self._listeners: list[PartitionsChangedCallback] = []
        self._closed = False
        try:
            for directory in (self._topics_dir, self._staging_dir, self._trash_dir):
                directory.mkdir(parents=True, exist_ok=True)
            for leftover in (self._staging_dir, self._trash_dir):
                for entry in leftover.iterdir():
                    shutil.rmtree(entry, ignore_errors=True)
            self._load()
        except OSError as exc:
            self._close_partitions()
            raise KafkaStorageError(f"cannot open the topic log in {self._root}: {exc}") from exc

    def _load(self) -> None:
        for directory in sorted(self._topics_dir.iterdir()):
            if not directory.is_dir():
                continue
            meta_path = directory / _TOPIC_FILE
            try:
                meta = json.loads(meta_path.read_text())
                name = str(meta["name"])
                topic_id = uuid.UUID(str(meta["topic_id"]))
                count = int(meta["partitions"])
                overrides = {str(k): str(v) for k, v in dict(meta.get("configs", {})).items()}
                created_ms = int(meta.get("created_ms", 0))
            except (OSError, ValueError, KeyError, TypeError) as exc:
                log.error("skipping %s: its %s cannot be read (%s)", directory, _TOPIC_FILE, exc)
                continue
            if name != directory.name:
                log.error("skipping %s: %s names topic %r", directory, _TOPIC_FILE, name)
                continue
            config = log_config_from({**self._defaults, **overrides})
            topic = _Topic(name, topic_id, directory, overrides, config, created_ms)
            self._topics[name] = topic
            self._by_id[topic_id] = name
            for entry in directory.iterdir():
                if entry.is_dir() and entry.name.isdigit() and int(entry.name) >= count:
                    log.warning("removing %s: left over from an unfinished partition increase", entry)
                    shutil.rmtree(entry)
            for partition in range(count):
                topic.partitions.append(PartitionLog(directory / str(partition), config))

    # -- observers ----------------------------------------------------------------------------------

    def subscribe_partitions_changed(self, callback: PartitionsChangedCallback) -> Callable[[], None]:
        """Call `callback(topic, old_count, new_count)` after a topic is created (old 0), gains
        partitions, or is deleted (new 0). Returns a function that unsubscribes."""
        self._listeners.append(callback)

        def unsubscribe() -> None:
            if callback in self._listeners:
                self._listeners.remove(callback)

        return unsubscribe

    def _partitions_changed(self, topic: str, old: int, new: int) -> None:
        for callback in list(self._listeners):
            try:
                callback(topic, old, new)
            except Exception:
                log.exception("partitions-changed listener failed for topic %s (%d -> %d)", topic, old, new)

    # -- topics -------------------------------------------------------------------------------------

    @property
    def default_partitions(self) -> int:
        return self._default_partitions

    def create_topic(
        self,
        name: str,
        num_partitions: int = -1,
        replication_factor: int = -1,
        configs: Mapping[str, str | None] | None = None,
        *,
        validate_only: bool = False,
    ) -> TopicDescription:
        """Create a topic (CreateTopics). -1 partitions means the default; the replication factor must be
        1 or -1 on this single node. With `validate_only`, check everything and change nothing."""
        plan = self._plan_topic(name, num_partitions, replication_factor, configs)
        if validate_only:
            return TopicDescription(name, plan.topic_id, plan.partitions, plan.overrides)
        self._stage_topic(plan)
        return self._open_topic(plan)

    async def create_topic_async(
        self,
        name: str,
        num_partitions: int = -1,
        replication_factor: int = -1,
        configs: Mapping[str, str | None] | None = None,
        *,
        validate_only: bool = False,
    ) -> TopicDescription:
        """`create_topic` with its file-system work (directories, fsyncs) in a worker thread, so that
        creating many topics does not hold up the event loop."""
        plan = self._plan_topic(name, num_partitions, replication_factor, configs)
        if validate_only:
            return TopicDescription(name, plan.topic_id, plan.partitions, plan.overrides)
        self._creating.add(name)
        try:
            await asyncio.to_thread(self._stage_topic, plan)
            self._check_open()
            return self._open_topic(plan)
        finally:
            self._creating.discard(name)

    def _plan_topic(
        self,
        name: str,
        num_partitions: int,
        replication_factor: int,
        configs: Mapping[str, str | None] | None,
    ) -> _TopicPlan:
        self._check_open()
        validate_topic_name(name)
        if name in self._topics or name in self._creating:
            raise TopicAlreadyExistsError(f"topic {name!r} already exists")
        key = collision_key(name)
        for existing in (*self._topics, *self._creating):
            if collision_key(existing) == key:
                raise InvalidTopicError(
                    f"topic {name!r} collides with existing topic {existing!r}: "
                    "names that differ only by '.' and '_' cannot coexist"
                )
        if num_partitions == -1:
            num_partitions = self._default_partitions
        if num_partitions <= 0:
            raise InvalidPartitionsError(f"number of partitions must be larger than 0, not {num_partitions}")
        self._check_partition_limit(num_partitions)
        if replication_factor == 0 or replication_factor < -1:
            raise InvalidReplicationFactorError(
                f"replication factor must be larger than 0, not {replication_factor}"
            )
        if replication_factor > 1:
            raise InvalidReplicationFactorError(
                f"replication factor {replication_factor} cannot be reached: this broker is a single node; "
                "use 1 (or -1 for the default)"
            )
        overrides = validate_topic_configs(configs or {})
        check_effective_configs({**self._defaults, **overrides})
        log_config = log_config_from({**self._defaults, **overrides})
        return _TopicPlan(name, new_topic_id(), num_partitions, overrides, log_config, self._clock_ms())

    def _stage_topic(self, plan: _TopicPlan) -> None:
        """Write the topic's directories and file, then rename them into place (blocking I/O)."""
        staging = self._staging_dir / uuid.uuid4().hex
        final = self._topics_dir / plan.name
        try:
            staging.mkdir()
            for partition in range(plan.partitions):
                (staging / str(partition)).mkdir()
            _write_json_atomically(
                staging / _TOPIC_FILE,
                self._topic_file(plan.name, plan.topic_id, plan.partitions, plan.overrides, plan.created_ms),
            )
            os.rename(staging, final)
            fsync_directory(self._topics_dir)
        except OSError as exc:
            shutil.rmtree(staging, ignore_errors=True)
            raise KafkaStorageError(f"cannot create topic {plan.name!r}: {exc}") from exc

    def _open_topic(self, plan: _TopicPlan) -> TopicDescription:
        name = plan.name
        final = self._topics_dir / name
        topic = _Topic(name, plan.topic_id, final, plan.overrides, plan.log_config, plan.created_ms)
        try:
            for partition in range(plan.partitions):
                topic.partitions.append(PartitionLog(final / str(partition), plan.log_config))
        except TopicLogError:
            for opened in topic.partitions:
                opened.close_without_flush()
            with contextlib.suppress(OSError):
                os.rename(final, self._trash_dir / uuid.uuid4().hex)
            raise
        self._topics[name] = topic
        self._by_id[plan.topic_id] = name
        self._partitions_changed(name, 0, plan.partitions)
        return topic.describe()

    def _check_partition_limit(self, count: int) -> None:
        if count > self._max_partitions:
            raise PolicyViolationError(
                f"{count} partitions exceed this broker's limit of {self._max_partitions} per topic"
            )

    @staticmethod
    def _topic_file(
        name: str, topic_id: uuid.UUID, partitions: int, overrides: Mapping[str, str], created_ms: int
    ) -> dict[str, Any]:
        return {
            "version": _TOPIC_FILE_VERSION,
            "name": name,
            "topic_id": str(topic_id),
            "partitions": partitions,
            "configs": dict(overrides),
            "created_ms": created_ms,
        }

    def _topic(self, name: str) -> _Topic:
        self._check_open()
        topic = self._topics.get(name)
        if topic is None:
            raise UnknownTopicOrPartitionError(f"unknown topic {name!r}")
        return topic

    def delete_topic(self, name: str) -> None:
        """Delete a topic and its files (DeleteTopics)."""
        topic = self._topic(name)
        trash = self._trash_dir / uuid.uuid4().hex
        try:
            os.rename(topic.directory, trash)
            fsync_directory(self._topics_dir)
        except OSError as exc:
            raise KafkaStorageError(f"cannot delete topic {name!r}: {exc}") from exc
        del self._topics[name]
        del self._by_id[topic.topic_id]
        for partition in topic.partitions:
            partition.close_without_flush()
        shutil.rmtree(trash, ignore_errors=True)
        count = len(topic.partitions)
        for index in range(count):
            self._notify((name, index))
        self._partitions_changed(name, count, 0)

    def create_partitions(self, name: str, total_count: int, *, validate_only: bool = False) -> None:
        """Grow a topic to `total_count` partitions (CreatePartitions); shrinking is refused."""
        topic = self._topic(name)
        old = len(topic.partitions)
        if total_count < old:
            raise InvalidPartitionsError(
                f"topic {name!r} currently has {old} partitions, which is higher than the requested "
                f"{total_count}; partitions can only be added"
            )
        if total_count == old:
            raise InvalidPartitionsError(f"topic {name!r} already has {old} partitions")
        self._check_partition_limit(total_count)
        if validate_only:
            return
        added: list[PartitionLog] = []
        try:
            for index in range(old, total_count):
                added.append(PartitionLog(topic.directory / str(index), topic.log_config))
            for partition in added:
                partition.flush()
            fsync_directory(topic.directory)
            _write_json_atomically(
                topic.directory / _TOPIC_FILE,
                self._topic_file(name, topic.topic_id, total_count, topic.overrides, topic.created_ms),
            )
        except (OSError, TopicLogError) as exc:
            for partition in added:
                partition.close_without_flush()
                shutil.rmtree(partition.directory, ignore_errors=True)
            raise KafkaStorageError(f"cannot add partitions to topic {name!r}: {exc}") from exc
        topic.partitions.extend(added)
        self._partitions_changed(name, old, total_count)

    def alter_topic_configs(
        self,
        name: str,
        changes: Mapping[str, str | None],
        *,
        replace: bool = False,
        validate_only: bool = False,
    ) -> None:
        """Change config overrides: a value sets, None removes (IncrementalAlterConfigs); with `replace`
        the overrides become exactly `changes` (AlterConfigs)."""
        topic = self._topic(name)
        overrides = {} if replace else dict(topic.overrides)
        for key, value in changes.items():
            if value is None:
                overrides.pop(key, None)
            else:
                overrides[key] = value
        checked = validate_topic_configs(overrides)
        check_effective_configs({**self._defaults, **checked})
        log_config = log_config_from({**self._defaults, **checked})
        if validate_only:
            return
        try:
            _write_json_atomically(
                topic.directory / _TOPIC_FILE,
                self._topic_file(name, topic.topic_id, len(topic.partitions), checked, topic.created_ms),
            )
        except OSError as exc:
            raise KafkaStorageError(f"cannot store the configs of topic {name!r}: {exc}") from exc
        topic.overrides = checked
        topic.log_config = log_config
        for partition in topic.partitions:
            partition.config = log_config

    def has_topic(self, name: str) -> bool:
        return name in self._topics

    def topic_names(self) -> list[str]:
        return sorted(self._topics)

    def describe_topic(self, name: str) -> TopicDescription:
        return self._topic(name).describe()

    def partition_count(self, name: str) -> int:
        return len(self._topic(name).partitions)

    def topic_name_for_id(self, topic_id: uuid.UUID) -> str | None:
        return self._by_id.get(topic_id)

    def topic_configs(self, name: str) -> dict[str, str]:
        """Effective configs of a topic: broker defaults overlaid with the topic's overrides."""
        return {**self._defaults, **self._topic(name).overrides}

    # -- records ------------------------------------------------------------------------------------

    def _partition(self, topic: str, partition: int) -> PartitionLog:
        self._check_open()
        entry = self._topics.get(topic)
        if entry is None or not 0 <= partition < len(entry.partitions):
            raise UnknownTopicOrPartitionError(f"unknown topic or partition {topic}-{partition}")
        return entry.partitions[partition]

    def append(
        self, topic: str, partition: int, records: Buffer, *, now_ms: int | None = None
    ) -> AppendResult:
        """Validate the record batches of one partition of a produce request and append them."""
        log_ = self._partition(topic, partition)
        result = log_.append(records, self._clock_ms() if now_ms is None else now_ms)
        self._notify((topic, partition))
        return result

    def read(
        self, topic: str, partition: int, offset: int, max_bytes: int, *, min_one_batch: bool = True
    ) -> FetchResult:
        """Whole batches starting with the one that holds `offset` (Fetch).

        At most `max_bytes`, except that with `min_one_batch` the first batch is returned whole even if
        larger. At the log end: no records. Raises OffsetOutOfRangeError below the log start or past the
        log end, UnknownTopicOrPartitionError for an unknown partition."""
        log_ = self._partition(topic, partition)
        records = log_.read(offset, max_bytes, min_one_batch=min_one_batch)
        return FetchResult(records, log_.log_end_offset, log_.log_start_offset)

    def read_regions(
        self, topic: str, partition: int, offset: int, max_bytes: int, *, min_one_batch: bool = True
    ) -> RegionFetchResult:
        """`read`, with the batches left in the segment files: regions to send as they are (each
        holding a duplicate descriptor that whoever sends it closes)."""
        log_ = self._partition(topic, partition)
        regions = log_.regions(offset, max_bytes, min_one_batch=min_one_batch)
        return RegionFetchResult(tuple(regions), log_.log_end_offset, log_.log_start_offset)

    def delete_records(self, topic: str, partition: int, offset: int) -> int:
        """DeleteRecords: `offset` (-1: the high watermark) becomes the log start offset unless it lies
        beyond; return the log start offset (the low watermark). POLICY_VIOLATION without delete policy."""
        log_ = self._partition(topic, partition)
        if not log_.config.delete_policy:
            raise PolicyViolationError(
                f"Records of partition {topic}-{partition} can not be deleted due to the configured policy"
            )
        start = log_.delete_records_before(log_.log_end_offset if offset == -1 else offset)
        self._notify((topic, partition))
        return start

    def log_start_offset(self, topic: str, partition: int) -> int:
        return self._partition(topic, partition).log_start_offset

    def log_end_offset(self, topic: str, partition: int) -> int:
        """Also the high watermark: a single node commits what it appends."""
        return self._partition(topic, partition).log_end_offset

    high_watermark = log_end_offset

    def list_offset(self, topic: str, partition: int, timestamp: int) -> OffsetAndTimestamp:
        """ListOffsets: -1 latest, -2 earliest, -3 the record with the largest timestamp, -4 earliest
        local; a timestamp >= 0 finds the first record whose timestamp is at least that. Offset and
        timestamp are -1 when no record matches (and the timestamp is -1 for -1, -2 and -4)."""
        log_ = self._partition(topic, partition)
        if timestamp == LATEST_TIMESTAMP:
            return OffsetAndTimestamp(log_.log_end_offset, -1)
        if timestamp in (EARLIEST_TIMESTAMP, EARLIEST_LOCAL_TIMESTAMP):
            return OffsetAndTimestamp(log_.log_start_offset, -1)
        if timestamp == MAX_TIMESTAMP:
            found = log_.max_timestamp()
        elif timestamp >= 0:
            found = log_.offset_for_timestamp(timestamp)
        else:
            raise InvalidRequestError(f"ListOffsets timestamp {timestamp} is not supported")
        return found if found is not None else OffsetAndTimestamp(-1, -1)

    # -- long poll ----------------------------------------------------------------------------------

    def _ready(self, positions: Mapping[TopicPartition, int], min_bytes: int) -> bool:
        """True when a fetch at these positions has something to answer: enough bytes, or an error."""
        if self._closed:
            return True
        total = 0
        for (topic, index), offset in positions.items():
            entry = self._topics.get(topic)
            if entry is None or not 0 <= index < len(entry.partitions):
                return True
            log_ = entry.partitions[index]
            if offset < log_.log_start_offset or offset > log_.log_end_offset:
                return True
            if offset < log_.log_end_offset:
                if min_bytes <= 1:
                    return True
                total += log_.bytes_available(offset)
                if total >= min_bytes:
                    return True
        return False

    async def wait_for_data(
        self, positions: Mapping[TopicPartition, int], timeout_s: float, *, min_bytes: int = 1
    ) -> bool:
        """Wait until a fetch at `positions` (partition -> next offset) would return at least
        `min_bytes`, or would fail (unknown partition, offset out of range), or `timeout_s` passes.

        True if it returned because of data or an error, False on timeout. Must run on the loop that
        owns this log; appends resolve the wait synchronously, with no polling."""
        if self._ready(positions, min_bytes):
            return True
        return await self._waits.wait(positions, min_bytes, timeout_s)

    def _notify(self, key: TopicPartition) -> None:
        self._waits.notify(key, self._ready)

    # -- retention and durability -------------------------------------------------------------------

    def enforce_retention(self, now_ms: int | None = None) -> int:
        """Apply retention.ms and retention.bytes to every partition; return the segments deleted."""
        self._check_open()
        now = self._clock_ms() if now_ms is None else now_ms
        deleted = 0
        for name, topic in list(self._topics.items()):
            for index, partition in enumerate(topic.partitions):
                removed = partition.enforce_retention(now)
                if removed:
                    deleted += removed
                    self._notify((name, index))
        return deleted

    def _selected(self, partitions: Iterable[TopicPartition] | None) -> list[PartitionLog]:
        if partitions is None:
            return [p for topic in self._topics.values() for p in topic.partitions]
        return [self._partition(topic, index) for topic, index in partitions]

    def flush(self, partitions: Iterable[TopicPartition] | None = None) -> None:
        """fsync what was appended to these partitions (all when None), blocking the caller."""
        self._check_open()
        for partition in self._selected(partitions):
            partition.flush()

    async def flush_async(self, partitions: Iterable[TopicPartition] | None = None) -> None:
        """Like flush(), with the fsyncs in the default executor so the event loop keeps running."""
        self._check_open()
        logs = [p for p in self._selected(partitions) if p.needs_flush]
        if not logs:
            return
        plans = [p.prepare_flush() for p in logs]
        await asyncio.get_running_loop().run_in_executor(None, _execute_plans, plans)
        for partition, plan in zip(logs, plans, strict=True):
            partition.complete_flush(plan)

    # -- lifecycle ----------------------------------------------------------------------------------

    def _check_open(self) -> None:
        if self._closed:
            raise KafkaStorageError("the topic log is closed")

    def _close_partitions(self) -> None:
        for topic in self._topics.values():
            for partition in topic.partitions:
                partition.close_without_flush()

    def close(self) -> None:
        """Flush and close everything; pending waits return True."""
        if self._closed:
            return
        try:
            for topic in self._topics.values():
                for partition in topic.partitions:
                    partition.close()
        finally:
            self._close_partitions()
            self._closed = True
            self._waits.release_all()

    def __enter__(self) -> TopicLog:
        return self

    def __exit__(self, *exc_info: object) -> None:
        self.close()


def _execute_plans(plans: list[FlushPlan]) -> None:
    errors: list[KafkaStorageError] = []
    for plan in plans:
        try:
            plan.execute()
        except KafkaStorageError as exc:
            errors.append(exc)
    if errors:
        raise errors[0]
