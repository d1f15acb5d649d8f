"""Property test: random appends, reads, ListOffsets, retention, restarts and torn tails keep the topic log
consistent with a plain in-memory model of its batches."""

from __future__ import annotations

import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path

import hypothesis.strategies as st
import pytest
from hypothesis import HealthCheck, settings
from hypothesis.stateful import RuleBasedStateMachine, invariant, rule

from staticfleet.broker.segment import segment_file_name
from staticfleet.broker.topiclog import (
    OffsetAndTimestamp,
    OffsetOutOfRangeError,
    RecordListTooLargeError,
    TopicLog,
)
from tests.broker.kafka_batches import GZIP, Rec, build_batch, decode

NOW = 1_700_000_000_000
TOPIC = "model"
CONFIGS = {"segment.bytes": "900", "index.interval.bytes": "120", "retention.ms": "-1"}


@dataclass(frozen=True)
class ModelBatch:
    base_offset: int
    size: int
    records: tuple[tuple[bytes, int], ...]  # (value, timestamp)

    @property
    def next_offset(self) -> int:
        return self.base_offset + len(self.records)


class TopicLogMachine(RuleBasedStateMachine):
    def __init__(self) -> None:
        super().__init__()
        self.root = Path(tempfile.mkdtemp(prefix="topiclog-model-"))
        self.log = TopicLog(self.root, clock_ms=lambda: NOW)
        self.log.create_topic(TOPIC, 1, configs=CONFIGS)
        self.batches: list[ModelBatch] = []
        self.start = 0
        self.end = 0
        self.serial = 0

    def teardown(self) -> None:
        self.log.close()
        shutil.rmtree(self.root, ignore_errors=True)

    # -- rules --------------------------------------------------------------------------------------

    @rule(
        shapes=st.lists(
            st.lists(st.tuples(st.integers(0, 150), st.integers(0, 50_000)), min_size=1, max_size=6),
            min_size=1,
            max_size=3,
        ),
        gzip=st.booleans(),
    )
    def append(self, shapes: list[list[tuple[int, int]]], gzip: bool) -> None:
        request = b""
        new: list[ModelBatch] = []
        offset = self.end
        for shape in shapes:
            records = []
            for size, timestamp in shape:
                self.serial += 1
                records.append((f"r{self.serial}:".encode().ljust(size, b"x"), NOW + timestamp))
            batch = build_batch([Rec(v, ts) for v, ts in records], compression=GZIP if gzip else 0)
            request += batch
            new.append(ModelBatch(offset, len(batch), tuple(records)))
            offset += len(records)
        if len(request) > int(CONFIGS["segment.bytes"]):
            with pytest.raises(RecordListTooLargeError):
                self.log.append(TOPIC, 0, request)
            return
        result = self.log.append(TOPIC, 0, request)
        assert result.base_offset == self.end
        assert result.last_offset == offset - 1
        assert result.log_start_offset == self.start
        self.batches.extend(new)
        self.end = offset

    @rule(choice=st.integers(0, 10**9), max_bytes=st.integers(1, 2500), min_one=st.booleans())
    def read(self, choice: int, max_bytes: int, min_one: bool) -> None:
        offset = self.start + choice % (self.end - self.start + 1)
        data = self.log.read(TOPIC, 0, offset, max_bytes, min_one_batch=min_one).records
        if offset == self.end:
            assert data == b""
            return
        first = next(i for i, b in enumerate(self.batches) if b.base_offset <= offset < b.next_offset)
        if not min_one and self.batches[first].size > max_bytes:
            assert data == b""
            return
        got = decode(data)
        want = self.batches[first : first + len(got)]
        assert len(got) >= 1
        assert sum(b.size for b in got) == len(data)
        assert [(b.base_offset, b.size) for b in got] == [(b.base_offset, b.size) for b in want]
        assert all(b.crc_valid for b in got)
        for got_batch, want_batch in zip(got, want, strict=True):
            assert [(r.offset, r.value, r.timestamp) for r in got_batch.records] == [
                (want_batch.base_offset + i, value, ts) for i, (value, ts) in enumerate(want_batch.records)
            ]
        assert len(data) <= max_bytes or len(got) == 1
        following = first + len(got)
        if following < len(self.batches):  # the next batch would not have fitted
            assert len(data) + self.batches[following].size > max_bytes

    @rule(timestamp=st.integers(-10, 51_000))
    def list_offset_by_time(self, timestamp: int) -> None:
        target = NOW + timestamp
        expected = OffsetAndTimestamp(-1, -1)
        for batch in self.batches:
            hit = next((i for i, (_, ts) in enumerate(batch.records) if ts >= target), None)
            if hit is not None:
                expected = OffsetAndTimestamp(batch.base_offset + hit, batch.records[hit][1])
                break
        assert self.log.list_offset(TOPIC, 0, target) == expected

    @rule(retention_bytes=st.integers(0, 4000))
    def retain(self, retention_bytes: int) -> None:
        self.log.alter_topic_configs(TOPIC, {"retention.bytes": str(retention_bytes)})
        deleted = self.log.enforce_retention()
        self.log.alter_topic_configs(TOPIC, {"retention.bytes": None})
        start = self.log.log_start_offset(TOPIC, 0)
        assert start >= self.start
        assert start == self.end or start in {b.base_offset for b in self.batches}
        assert (deleted > 0) == (start > self.start) or (deleted > 0 and start == self.start == self.end)
        if start > self.start:
            kept = sum(b.size for b in self.batches if b.base_offset >= start)
            assert kept >= retention_bytes or start == self.end
            with pytest.raises(OffsetOutOfRangeError):
                self.log.read(TOPIC, 0, start - 1, 100)
        self.batches = [b for b in self.batches if b.base_offset >= start]
        self.start = start

    @rule()
    def restart(self) -> None:
        self.log.close()
        self.log = TopicLog(self.root, clock_ms=lambda: NOW)

    @rule(cut=st.integers(1, 400))
    def crash_with_a_torn_tail(self, cut: int) -> None:
        self.log.close()
        directory = self.root / "topics" / TOPIC / "0"
        last = max(directory.glob("*.log"))
        base = int(last.name.split(".")[0])
        assert last.name == segment_file_name(base)
        size = last.stat().st_size
        remaining = max(size - cut, 0)
        with open(last, "r+b") as f:
            f.truncate(remaining)
        position = 0
        kept: list[ModelBatch] = []
        for batch in self.batches:
            if batch.base_offset >= base:
                position += batch.size
                if position > remaining:
                    break  # this batch is torn: it and everything after it are gone
            kept.append(batch)
        self.batches = kept
        self.end = max(kept[-1].next_offset if kept else base, base)
        self.log = TopicLog(self.root, clock_ms=lambda: NOW)

    # -- invariants ---------------------------------------------------------------------------------

    @invariant()
    def offsets_match_the_model(self) -> None:
        assert self.log.log_start_offset(TOPIC, 0) == self.start
        assert self.log.log_end_offset(TOPIC, 0) == self.end


TopicLogMachine.TestCase.settings = settings(
    max_examples=40,
    stateful_step_count=30,
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
test_topic_log_matches_its_model = TopicLogMachine.TestCase
