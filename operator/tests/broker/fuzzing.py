"""Malformed Kafka frames for a running coordinator: valid requests of every served API, mutated, sent by
many connections at once while a well-behaved static member keeps heartbeating. Used by the fuzz tests
and by bench/fuzz_frames.py (the long run)."""

from __future__ import annotations

import asyncio
import dataclasses
import datetime
import random
import struct
import sys
import time
import uuid
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

from kio.index import load_request_schema
from kio.static.primitive import Records, i16, i32, i32Timedelta, i64
from kio.static.protocol import RequestPayload

from conformance import driver as d
from staticfleet.broker.codec import _empty_entity

from .kafka_batches import simple_batch

TOPIC = "fuzz-topic"
GOOD_TOPIC = "good-topic"
GROUP = "fuzz-group"
PRODUCE, FETCH, LIST_OFFSETS, DELETE_TOPICS, CREATE_PARTITIONS, INIT_PRODUCER_ID = 0, 1, 2, 20, 37, 22
DESCRIBE_CLUSTER, DESCRIBE_QUOTAS = 60, 48


def _entity(key: int, version: int, name: str) -> Any:
    """A nested entity of an API's request at one version (e.g. Produce's PartitionProduceData)."""
    return getattr(sys.modules[load_request_schema(key, version).__module__], name)


def _ms(value: int) -> i32Timedelta:
    return i32Timedelta.parse(datetime.timedelta(milliseconds=value))


def _build(key: int, version: int, nested: str | None = None, **fields: Any) -> Any:
    """An entity of an API's request (or of its `nested` entity) at one version: the fields given, every
    other at its protocol default."""
    entity = load_request_schema(key, version) if nested is None else _entity(key, version, nested)
    return dataclasses.replace(_empty_entity(entity), **fields)


def _data_path_requests() -> list[RequestPayload]:
    """The APIs the conformance driver has no builder for: the data path and topic administration."""
    batch = Records(simple_batch(3))
    out: list[RequestPayload] = []
    for v in (3, 9, 12):
        partition = _build(PRODUCE, v, "PartitionProduceData", index=i32(0), records=batch)
        topic = _build(PRODUCE, v, "TopicProduceData", name=TOPIC, partition_data=(partition,))
        out.append(_build(PRODUCE, v, acks=i16(1), timeout=_ms(1000), topic_data=(topic,)))
    for v in (4, 12):
        partition = _build(FETCH, v, "FetchPartition", partition=i32(0), partition_max_bytes=i32(1 << 20))
        topic = _build(FETCH, v, "FetchTopic", topic=TOPIC, partitions=(partition,))
        out.append(
            _build(FETCH, v, replica_id=i32(-1), min_bytes=i32(1), max_bytes=i32(1 << 20), topics=(topic,))
        )
    for v in (1, 10):
        partition = _build(LIST_OFFSETS, v, "ListOffsetsPartition", partition_index=i32(0), timestamp=i64(-1))
        topic = _build(LIST_OFFSETS, v, "ListOffsetsTopic", name=TOPIC, partitions=(partition,))
        out.append(_build(LIST_OFFSETS, v, replica_id=i32(-1), topics=(topic,)))
    out.append(_build(DELETE_TOPICS, 5, topic_names=("fuzz-gone",), timeout=_ms(1000)))
    state = _build(DELETE_TOPICS, 6, "DeleteTopicState", name=None, topic_id=uuid.uuid4())
    out.append(_build(DELETE_TOPICS, 6, topics=(state,), timeout=_ms(1000)))
    for v in (0, 3):
        topic = _build(
            CREATE_PARTITIONS, v, "CreatePartitionsTopic", name=TOPIC, count=i32(2), assignments=None
        )
        out.append(_build(CREATE_PARTITIONS, v, topics=(topic,), timeout=_ms(1000), validate_only=True))
    out.append(_build(INIT_PRODUCER_ID, 5, transaction_timeout=_ms(1000)))
    out.append(_build(DESCRIBE_CLUSTER, 1, include_cluster_authorized_operations=True))
    return out


def seed_frames() -> list[bytes]:
    """Valid requests of every API the coordinator serves, at old and new versions."""
    protocols = (("range", d.subscription(TOPIC)),)
    requests = [
        d.api_versions(0),
        d.api_versions(3),
        d.metadata(1, [TOPIC]),
        d.metadata(12, [TOPIC]),
        d.metadata(12, None),
        d.find_coordinator(0, GROUP),
        d.find_coordinator(4, GROUP),
        d.join_group(0, GROUP, protocols=protocols),
        d.join_group(5, GROUP, instance_id="i", protocols=protocols),
        d.join_group(9, GROUP, member_id="m", instance_id="i", protocols=protocols),
        d.sync_group(0, GROUP, generation=1, member_id="m"),
        d.sync_group(5, GROUP, generation=1, member_id="m", instance_id="i", protocol_type="consumer",
                     protocol_name="range", assignments=[("m", d.assignment({TOPIC: [0]}))]),
        d.heartbeat(0, GROUP, generation=1, member_id="m"),
        d.heartbeat(4, GROUP, generation=1, member_id="m", instance_id="i"),
        d.leave_group(0, GROUP, member_id="m"),
        d.leave_group(5, GROUP, members=[("", "i"), ("m", None)]),
        d.offset_commit(2, GROUP, offsets={TOPIC: {0: 5}}),
        d.offset_commit(9, GROUP, offsets={TOPIC: {0: 5}}),
        d.offset_fetch(1, GROUP, partitions={TOPIC: [0]}),
        d.offset_fetch(8, GROUP, partitions={TOPIC: [0]}),
        d.describe_groups(0, GROUP),
        d.describe_groups(5, GROUP),
        d.list_groups(0),
        d.list_groups(5),
        d.delete_groups(2, GROUP),
        d.create_topics(2, {"fuzz-new": 1}),
        d.create_topics(7, {"fuzz-new": 1}),
        d.describe_configs(4, [(2, TOPIC), (32, GROUP), (4, "1")]),
        d.incremental_alter_configs(1, [(2, TOPIC, [("retention.ms", 0, "60000")])]),
        *_data_path_requests(),
    ]  # fmt: skip
    return [d.request_frame(r, i, "fuzz") for i, r in enumerate(requests)]


def mutate(frame: bytes, rng: random.Random) -> bytes:
    """One malformed variant of a valid frame."""
    body = bytearray(frame[4:])
    kind = rng.randrange(10)
    if kind == 0:  # flip bits
        for _ in range(rng.randint(1, 8)):
            body[rng.randrange(len(body))] ^= 1 << rng.randrange(8)
    elif kind == 1:  # truncate the body, fix the size
        body = body[: rng.randrange(len(body))]
    elif kind == 2:  # trailing garbage
        body += rng.randbytes(rng.randint(1, 64))
    elif kind == 3:  # any api key and version
        struct.pack_into(">hh", body, 0, rng.randint(-5, 80), rng.randint(-3, 30))
    elif kind == 4:  # a varint or length bomb in the middle
        at = rng.randrange(8, len(body)) if len(body) > 8 else 0
        body[at:at] = b"\xff" * rng.randint(1, 12)
    elif kind == 5:  # random bytes under a valid header
        body = body[:8] + rng.randbytes(rng.randint(0, 200))
    elif kind == 6:  # a size prefix that lies (smaller than the body)
        return struct.pack(">i", max(0, len(body) - rng.randint(1, len(body)))) + bytes(body)
    elif kind == 7:  # absurd sizes: zero, negative, enormous
        return struct.pack(">i", rng.choice([0, -1, -(2**31), 2**31 - 1, 200 * 1024 * 1024])) + bytes(
            body[:32]
        )
    elif kind == 8:  # a null where a length or count goes: -1 as int16 or int32, 0 as a compact length
        at = rng.randrange(8, len(body)) if len(body) > 8 else 0
        body[at : at + 4] = rng.choice([b"\xff\xff", b"\xff\xff\xff\xff", b"\x00"])
    else:  # overwrite a run of bytes
        at = rng.randrange(len(body))
        body[at : at + 4] = rng.randbytes(4)
    return struct.pack(">i", len(body)) + bytes(body)


async def fuzz_connections(
    host: str,
    port: int,
    total: int,
    *,
    workers: int,
    seed: int = 0,
    answer_wait_s: float = 0.02,
    progress: Callable[[int], None] | None = None,
) -> Counter[str]:
    """Sends `total` mutated frames from `workers` connections, each waiting up to `answer_wait_s` for
    the answer before it sends the next (and reconnecting when the server closed it, or did not answer:
    a parked request, or a size prefix that promised more bytes)."""
    seeds = seed_frames()
    counts: Counter[str] = Counter()

    async def worker(index: int) -> None:
        rng = random.Random(seed * 1_000_003 + index)
        reader: asyncio.StreamReader | None = None
        writer: asyncio.StreamWriter | None = None
        while counts["sent"] < total:
            if writer is None:
                reader, writer = await asyncio.open_connection(host, port)
            assert reader is not None
            frame = mutate(rng.choice(seeds), rng)
            counts["sent"] += 1
            if progress is not None and counts["sent"] % 10_000 == 0:
                progress(counts["sent"])
            try:
                writer.write(frame)
                await writer.drain()
                head = await asyncio.wait_for(reader.readexactly(4), answer_wait_s)
                (size,) = struct.unpack(">i", head)
                await asyncio.wait_for(reader.readexactly(size), 1)
                counts["answered"] += 1
                continue
            except (asyncio.IncompleteReadError, ConnectionError):
                counts["closed"] += 1
            except TimeoutError:
                counts["silent"] += 1  # parked, or waiting for bytes a lying size prefix promised
            writer.close()
            writer = reader = None
        if writer is not None:
            writer.close()

    await asyncio.gather(*(worker(i) for i in range(workers)))
    return counts


async def good_member(host: str, port: int, stop: asyncio.Event, group: str = "good-group") -> list[float]:
    """A static member that joins, syncs and then heartbeats every 50 ms until `stop`, timing each answer.
    It subscribes to a topic of its own: the fuzzed requests may add partitions to theirs, which (rightly)
    rebalances every group subscribed to it."""
    async with d.Driver(host, port) as driver:
        conn = await driver.connect("good")
        protocols = (("range", d.subscription(GOOD_TOPIC)),)
        joined = await conn.request(d.join_group(9, group, instance_id="good", protocols=protocols))
        assert int(joined.error_code) == 0, joined
        synced = await conn.request(
            d.sync_group(5, group, generation=joined.generation_id, member_id=joined.member_id,
                         instance_id="good", protocol_type="consumer", protocol_name="range",
                         assignments=[(joined.member_id, d.assignment({GOOD_TOPIC: [0]}))])
        )  # fmt: skip
        assert int(synced.error_code) == 0, synced
        latencies = []
        while not stop.is_set():
            started = time.perf_counter()
            response = await conn.request(
                d.heartbeat(4, group, generation=joined.generation_id, member_id=joined.member_id,
                            instance_id="good"),
                timeout=5,
            )  # fmt: skip
            latencies.append(time.perf_counter() - started)
            assert int(response.error_code) == 0, response
            await asyncio.sleep(0.05)
        return latencies


def log_problems(log: Path) -> list[str]:
    """Each ERROR (or worse) entry of a coordinator's log, with the traceback that follows it."""
    problems: list[str] = []
    inside = False
    for line in log.read_text(errors="replace").splitlines():
        entry = line[:4].isdigit()  # a new log entry starts with its date; a traceback's lines do not
        if entry:
            inside = " ERROR " in line or " CRITICAL " in line
            if inside:
                problems.append(line)
        elif inside or line.startswith("Traceback"):
            if not problems or not inside:
                problems.append(line)
                inside = True
            else:
                problems[-1] += "\n" + line
    return problems
