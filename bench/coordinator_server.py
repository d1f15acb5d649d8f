"""Loopback load against the embedded coordinator and, in the same run, against Apache Kafka.

    .venv/bin/python bench/coordinator_server.py [--repeat N] [--quick] [--no-kafka] [--only groups]
    .venv/bin/python bench/coordinator_server.py --compare-tree DIR [--rounds N]
    .venv/bin/python bench/coordinator_server.py --compare-tree DIR --only groups [--repeat N]
    .venv/bin/python bench/coordinator_server.py --security [--quick]

Measures, for each backend:
  * heartbeat capacity: pipelined heartbeats from 1,000 static members, as fast as the server answers;
  * heartbeat latency p50/p99 at a 3 s interval for 1,000 and 10,000 static members;
  * wall time of a 1,000-member rebalance (the leader rejoins; everyone rejoins and syncs);
  * produce and fetch throughput (1 MiB batches... of 16 KiB records batches).
The load generator runs in this process; the server runs in its own process. For the heartbeat latencies
each has a core of its own (`cores_apart`); the other measures, bursts that keep both busy, leave both
free to use any.
Kafka runs with its normal JIT (not the conformance suite's fast-start settings).
With --repeat N, each backend runs N times, each a fresh server, the backends alternating; each figure
is reported as the median of the runs and their range, the ratio as that of the medians.

With --compare-tree, the coordinator of another checkout (another branch, say) runs against this one
instead of Kafka: heartbeat capacity and produce/fetch cost, in alternating rounds, reported per second
of server CPU (what a change to the server's code moves) and as the ratio of this tree to the other.
With --only groups, the heartbeat latencies and the 1,000-member rebalance are compared instead, each
tree --repeat times (default --rounds), alternating.

With --security, each server runs with the conformance suite's secured settings (PLAINTEXT, SASL_PLAINTEXT,
SASL_SSL and SSL listeners, SCRAM and PLAIN users, StandardAuthorizer) and heartbeat capacity is measured
per second of server CPU over its PLAINTEXT, SASL_PLAINTEXT and SASL_SSL listeners, staticfleet and then
Kafka in the same run.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import gc
import os
import statistics
import struct
import sys
import tempfile
import time
from collections.abc import Awaitable, Callable, Coroutine, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "operator"))
sys.path.insert(0, str(ROOT))


from bench.proc import cpu_seconds  # noqa: E402
from bench.report import publish, table  # noqa: E402
from conformance import driver as d  # noqa: E402
from conformance.kafka_broker import GroupSettings, KafkaBroker, java_executable  # noqa: E402

GROUP_SIZE = 1_000


# --- framing ----------------------------------------------------------------------------------------


def frame(request: Any, correlation: int = 1) -> bytes:
    return d.request_frame(request, correlation, "bench")


class RawConnection:
    """Pipelined requests on one socket; answers arrive in order, so they are matched by position."""

    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader = reader
        self.writer = writer
        self.lock = asyncio.Lock()  # one request at a time (see _request)

    @classmethod
    async def open(cls, bootstrap: str) -> RawConnection:
        host, port = bootstrap.split(":")
        reader, writer = await asyncio.open_connection(host, int(port), limit=2**22)
        return cls(reader, writer)

    async def read(self) -> bytes:
        (size,) = struct.unpack(">i", await self.reader.readexactly(4))
        return await self.reader.readexactly(size)

    def close(self) -> None:
        self.writer.close()


def heartbeat_error(response: bytes) -> int:
    # HeartbeatResponse v4: correlation id, empty tagged fields, throttle time, then the error code.
    (error,) = struct.unpack_from(">h", response, 9)
    return int(error)


# --- a group of static members, joined through the raw protocol ----------------------------------------


@dataclass
class Member:
    instance: str
    member_id: str = ""
    generation: int = -1
    leader: bool = False


# Long enough that no member of the 10,000-member run expires while the other groups are still forming.
SESSION_TIMEOUT_MS = 300_000
REBALANCE_IN_PROGRESS = 27


async def form_group(bootstrap: str, group: str, size: int) -> list[Member]:
    """`size` static members join `group` and sync, each on its own connection as real clients do
    (a broker reads a connection's next request only after answering the previous one)."""
    protocols = (("range", d.subscription("bench")),)
    members = [Member(f"{group}-{i}") for i in range(size)]
    conns = [await RawConnection.open(bootstrap) for _ in members]
    joins = [
        _request(conn, d.join_group(9, group, instance_id=m.instance, protocols=protocols,
                                    session_timeout_ms=SESSION_TIMEOUT_MS, rebalance_timeout_ms=120_000))
        for m, conn in zip(members, conns, strict=True)
    ]  # fmt: skip
    responses = await asyncio.gather(*joins)
    leader = ""
    for member, raw in zip(members, responses, strict=True):
        parsed = _parse_join(raw)
        assert parsed["error"] == 0, parsed
        member.member_id = parsed["member_id"]
        member.generation = parsed["generation"]
        leader = parsed["leader"]
    for member in members:
        member.leader = member.member_id == leader
    assignments = [(m.member_id, d.assignment({"bench": [i]})) for i, m in enumerate(members)]
    syncs = [
        _request(conn, d.sync_group(5, group, generation=m.generation, member_id=m.member_id,
                                    instance_id=m.instance, protocol_type="consumer", protocol_name="range",
                                    assignments=assignments if m.member_id == leader else []))
        for m, conn in zip(members, conns, strict=True)
    ]  # fmt: skip
    await asyncio.gather(*syncs)
    for conn in conns:
        conn.close()
    return members


async def _request(conn: RawConnection, request: Any) -> bytes:
    """One request and its answer; requests on a connection are serialised like a Kafka client does."""
    async with conn.lock:
        conn.writer.write(frame(request))
        return await conn.read()


def _parse_join(raw: bytes) -> dict[str, Any]:
    from kio.schema.join_group.v9.response import JoinGroupResponse
    from kio.serial import entity_reader

    # Response header v1: correlation id (4) and an empty tagged-field section (1).
    response, _ = entity_reader(JoinGroupResponse)(raw, 5)
    return {
        "error": int(response.error_code),
        "member_id": response.member_id,
        "generation": int(response.generation_id),
        "leader": response.leader,
    }


# --- measurements ------------------------------------------------------------------------------------


@contextmanager
def collector_paused() -> Iterator[None]:
    """No collection of this process's cyclic garbage inside a timed window: with 10,000 members' tasks
    alive, one full collection stalls the load generator for tens of milliseconds, and every answer
    that arrives meanwhile would be timed late, whichever server gave it. What is alive now is frozen
    out of the collector's way; what the window allocates is freed as it goes or collected after."""
    gc.collect()
    gc.freeze()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
        gc.unfreeze()


def _pin_threads(pid: int, cores: set[int]) -> None:
    """Every thread of process `pid` onto these cores (threads that ended meanwhile are skipped)."""
    with contextlib.suppress(FileNotFoundError):
        for tid in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(ProcessLookupError):
                os.sched_setaffinity(int(tid), cores)


@contextmanager
def cores_apart(server_pid: int) -> Iterator[None]:
    """For the heartbeat latencies, this thread (the load generator) on one core and every thread of the
    server on another, as if on machines of their own; both get back all the cores after. Left to
    themselves, the scheduler wakes the server on the core of the load generator that woke it, and its
    answers wait there behind the generator's own work: latency of the co-location, not of the server.
    With fewer than two cores this does nothing."""
    cores = set(os.sched_getaffinity(0))
    if len(cores) < 2:
        yield
        return
    generator, server = min(cores), max(cores)
    try:
        _pin_threads(server_pid, {server})
        os.sched_setaffinity(0, {generator})
        yield
    finally:
        os.sched_setaffinity(0, cores)
        # Threads the server started meanwhile inherited the pin from their parents: all are freed.
        _pin_threads(server_pid, cores)


async def heartbeat_capacity(
    bootstrap: str,
    seconds: float,
    pid: int,
    *,
    connect: Callable[[], Awaitable[RawConnection]] | None = None,
    members: list[Member] | None = None,
) -> tuple[float, float]:
    """Heartbeats answered per second of wall time, and per second of the server's CPU time.

    `connect` opens the 20 heartbeating connections (plain TCP to `bootstrap` by default); `members`
    is a group "capacity" already formed (one is formed over `bootstrap` by default)."""
    if members is None:
        members = await form_group(bootstrap, "capacity", GROUP_SIZE)
    connections = [await (connect or (lambda: RawConnection.open(bootstrap)))() for _ in range(20)]
    frames = [
        frame(
            d.heartbeat(4, "capacity", generation=m.generation, member_id=m.member_id, instance_id=m.instance)
        )
        for m in members
    ]
    per_conn = len(frames) // len(connections)
    answered = 0
    errors = 0
    stop_at = time.perf_counter() + seconds

    async def pump(conn: RawConnection, mine: Sequence[bytes]) -> None:
        nonlocal answered, errors
        window = 32
        sent = 0
        in_flight = 0
        while time.perf_counter() < stop_at or in_flight:
            while in_flight < window and time.perf_counter() < stop_at:
                conn.writer.write(mine[sent % len(mine)])
                sent += 1
                in_flight += 1
            response = await conn.read()
            in_flight -= 1
            answered += 1
            if heartbeat_error(response):
                errors += 1

    start = time.perf_counter()
    cpu_start = cpu_seconds(pid)
    await asyncio.gather(
        *(pump(c, frames[i * per_conn : (i + 1) * per_conn]) for i, c in enumerate(connections))
    )
    elapsed = time.perf_counter() - start
    cpu = cpu_seconds(pid) - cpu_start
    for c in connections:
        c.close()
    assert errors == 0, f"{errors} heartbeats failed"
    return answered / elapsed, answered / cpu


async def heartbeat_latency(bootstrap: str, total_members: int, seconds: float) -> tuple[float, float, int]:
    """p50 and p99 (ms) of heartbeats sent every 3 s by every member, spread over the interval."""
    groups = max(1, total_members // GROUP_SIZE)
    connections = [await RawConnection.open(bootstrap) for _ in range(min(500, total_members // 10))]
    members: list[tuple[str, Member]] = []
    for g in range(groups):
        group = f"latency-{total_members}-{g}"
        for m in await form_group(bootstrap, group, GROUP_SIZE):
            members.append((group, m))
    interval = 3.0
    latencies: list[float] = []
    failures = 0

    async def member_loop(index: int, group: str, m: Member, conn: RawConnection) -> None:
        nonlocal failures
        await asyncio.sleep(interval * index / len(members))
        request = d.heartbeat(
            4, group, generation=m.generation, member_id=m.member_id, instance_id=m.instance
        )
        end = time.perf_counter() + seconds
        while time.perf_counter() < end:
            started = time.perf_counter()
            response = await _request(conn, request)
            latencies.append((time.perf_counter() - started) * 1000)
            if heartbeat_error(response):
                failures += 1
            await asyncio.sleep(max(0.0, interval - (time.perf_counter() - started)))

    with collector_paused():
        await asyncio.gather(
            *(
                member_loop(i, group, m, connections[i % len(connections)])
                for i, (group, m) in enumerate(members)
            )
        )
    for c in connections:
        c.close()
    latencies.sort()
    p50 = statistics.median(latencies)
    p99 = latencies[int(len(latencies) * 0.99) - 1]
    return p50, p99, failures


async def rebalance_wall_time(bootstrap: str) -> float:
    """Seconds from the leader's rejoin to the last member's SyncGroup answer, 1,000 members."""
    members = await form_group(bootstrap, "rebalance", GROUP_SIZE)
    connections = [await RawConnection.open(bootstrap) for _ in members]
    with collector_paused():
        started = time.perf_counter()
        # The leader rejoining forces a rebalance; every member rejoins with its id, as clients do when
        # their heartbeat says REBALANCE_IN_PROGRESS.
        await form_group_rejoin(members, connections)
        elapsed = time.perf_counter() - started
    for c in connections:
        c.close()
    return elapsed


async def form_group_rejoin(members: list[Member], connections: list[RawConnection]) -> None:
    """The leader rejoins, which starts a rebalance; once a heartbeat says REBALANCE_IN_PROGRESS (as
    clients learn it), every other member rejoins with its id, then all sync."""
    protocols = (("range", d.subscription("bench")),)
    conns = [connections[i % len(connections)] for i in range(len(members))]

    def join(m: Member, conn: RawConnection) -> asyncio.Task[bytes]:
        request = d.join_group(
            9,
            "rebalance",
            member_id=m.member_id,
            instance_id=m.instance,
            protocols=protocols,
            session_timeout_ms=SESSION_TIMEOUT_MS,
            rebalance_timeout_ms=120_000,
        )
        return asyncio.create_task(_request(conn, request))

    leader_index = next(i for i, m in enumerate(members) if m.leader)
    probe_index = (leader_index + 1) % len(members)
    probe = members[probe_index]
    leader_join = join(members[leader_index], conns[leader_index])
    heartbeat = d.heartbeat(
        4, "rebalance", generation=probe.generation, member_id=probe.member_id, instance_id=probe.instance
    )
    while heartbeat_error(await _request(conns[probe_index], heartbeat)) != REBALANCE_IN_PROGRESS:
        await asyncio.sleep(0.001)
    joins = [leader_join] + [
        join(m, conn) for i, (m, conn) in enumerate(zip(members, conns, strict=True)) if i != leader_index
    ]
    responses = [_parse_join(r) for r in await asyncio.gather(*joins)]
    assert all(r["error"] == 0 for r in responses), responses[:3]
    leader = responses[0]["leader"]
    generation = responses[0]["generation"]
    assignments = [(m.member_id, d.assignment({"bench": [i]})) for i, m in enumerate(members)]
    await asyncio.gather(
        *(
            _request(
                conn,
                d.sync_group(
                    5,
                    "rebalance",
                    generation=generation,
                    member_id=m.member_id,
                    instance_id=m.instance,
                    protocol_type="consumer",
                    protocol_name="range",
                    assignments=assignments if m.member_id == leader else [],
                ),
            )
            for m, conn in zip(members, conns, strict=True)
        )
    )


def _record_batch(records: int, value_size: int) -> bytes:
    from kafka.record.memory_records import MemoryRecordsBuilder

    builder = MemoryRecordsBuilder(magic=2, compression_type=0, batch_size=2**24)
    value = b"x" * value_size
    for _ in range(records):
        builder.append(timestamp=int(time.time() * 1000), key=None, value=value)
    builder.close()
    return bytes(builder.buffer())


async def produce_fetch_throughput(
    bootstrap: str,
    megabytes: int,
    pid: int | None = None,
    *,
    fetch_passes: int = 1,
    topic_name: str = "throughput",
) -> dict[str, float]:
    """Produce, then fetch back (`fetch_passes` times, each from the first offset), `megabytes` MiB
    on one connection: MiB/s of each, and (given the server's pid) fetched MiB per second of the
    server's CPU."""
    control = await RawConnection.open(bootstrap)
    await _request(control, d.create_topics(7, {topic_name: 1}))
    await asyncio.sleep(1.0)
    batch = _record_batch(64, 1024)  # ~66 KiB per produce request
    from kio.schema.fetch.v11.request import FetchPartition, FetchRequest, FetchTopic
    from kio.schema.produce.v9.request import PartitionProduceData, ProduceRequest, TopicProduceData
    from kio.schema.types import TopicName
    from kio.static.primitive import Records, i16, i32, i32Timedelta, i64

    topic = TopicName(topic_name)
    request = ProduceRequest(
        transactional_id=None,
        acks=i16(1),
        timeout=i32Timedelta.parse(datetime.timedelta(seconds=30)),
        topic_data=(
            TopicProduceData(
                name=topic, partition_data=(PartitionProduceData(index=i32(0), records=Records(batch)),)
            ),
        ),
    )
    produce_frame = frame(request)
    total = megabytes * 1024 * 1024
    sent_bytes = 0
    started = time.perf_counter()
    in_flight = 0
    while sent_bytes < total or in_flight:
        while in_flight < 8 and sent_bytes < total:
            control.writer.write(produce_frame)
            sent_bytes += len(batch)
            in_flight += 1
        await control.read()
        in_flight -= 1
    produce_mb_s = sent_bytes / (time.perf_counter() - started) / 2**20
    end_offset = (sent_bytes // len(batch)) * 64  # records produced

    offset = 0
    fetched = 0
    started = time.perf_counter()
    cpu_start = cpu_seconds(pid) if pid is not None else 0.0
    passes_done = 0
    while passes_done < fetch_passes:
        if offset >= end_offset:  # the next pass, from the first offset
            passes_done += 1
            offset = 0
            continue
        fetch = FetchRequest(
            max_wait=i32Timedelta.parse(datetime.timedelta(milliseconds=100)),
            min_bytes=i32(1),
            max_bytes=i32(4 * 2**20),
            topics=(
                FetchTopic(
                    topic=topic,
                    partitions=(
                        FetchPartition(
                            partition=i32(0), fetch_offset=i64(offset), partition_max_bytes=i32(4 * 2**20)
                        ),
                    ),
                ),
            ),
            forgotten_topics_data=(),
        )
        control.writer.write(frame(fetch))
        raw = await control.read()
        records = _fetched_records(raw)
        if not records:
            break
        fetched += len(records)
        offset = _next_offset(records)
    fetch_s = time.perf_counter() - started
    fetch_cpu_s = cpu_seconds(pid) - cpu_start if pid is not None else 0.0
    control.close()
    result = {"produce_mb_s": produce_mb_s, "fetch_mb_s": fetched / fetch_s / 2**20}
    if fetch_cpu_s > 0:
        result["fetch_mib_per_cpu_s"] = fetched / fetch_cpu_s / 2**20
    return result


_V11_PARTITION_HEAD = struct.Struct(">ihqqq")  # index, error, high watermark, last stable, log start


def _fetched_records(raw: bytes) -> memoryview:
    """The records of the one partition of a Fetch v11 answer, read in place (decoding the whole
    response with a general decoder would copy the records and cost the load generator more than
    the server it measures)."""
    view = memoryview(raw)
    pos = 4 + 4 + 2 + 4  # correlation id, throttle time, error code, session id
    (topics,) = struct.unpack_from(">i", raw, pos)
    assert topics == 1, topics
    (name_length,) = struct.unpack_from(">h", raw, pos + 4)
    pos += 4 + 2 + name_length + 4  # topic count, name, partition count
    _, error, _, _, _ = _V11_PARTITION_HEAD.unpack_from(raw, pos)
    assert error == 0, f"fetch error {error}"
    pos += _V11_PARTITION_HEAD.size
    (aborted,) = struct.unpack_from(">i", raw, pos)
    pos += 4 + 16 * max(aborted, 0) + 4  # aborted transactions, preferred read replica
    (size,) = struct.unpack_from(">i", raw, pos)
    return view[pos + 4 : pos + 4 + max(size, 0)]


def _next_offset(records: bytes | memoryview) -> int:
    """The offset after the last whole batch in a fetch answer."""
    pos = 0
    last = 0
    while pos + 61 <= len(records):
        base, length = struct.unpack_from(">qi", records, pos)
        if pos + 12 + length > len(records):
            break
        (last_delta,) = struct.unpack_from(">i", records, pos + 23)
        last = base + last_delta + 1
        pos += 12 + length
    return last


# --- backends ----------------------------------------------------------------------------------------


class FastKafka(KafkaBroker):
    """Kafka with its normal JIT and GC, for a fair comparison."""

    def _java(self, main: str, *args: str) -> list[str]:
        command = super()._java(main, *args)
        keep = [a for a in command if a not in ("-XX:TieredStopAtLevel=1", "-XX:+UseSerialGC", "-Xmx512m")]
        return [keep[0], "-Xmx1g", *keep[1:]]


async def measure(bootstrap: str, quick: bool, pid: int, *, groups_only: bool = False) -> dict[str, float]:
    """Every figure of the table (with `groups_only`, the heartbeat latencies and the rebalance)."""
    seconds = 3.0 if quick else 10.0
    result: dict[str, float] = {}
    if not groups_only:
        result["heartbeats_per_s"], result["heartbeats_per_cpu_s"] = await heartbeat_capacity(
            bootstrap, seconds, pid
        )
    for members in (1_000,) if quick else (1_000, 10_000):
        with cores_apart(pid):
            p50, p99, failures = await heartbeat_latency(bootstrap, members, 6.0 if quick else 15.0)
        result[f"hb_p50_ms_{members}"] = p50
        result[f"hb_p99_ms_{members}"] = p99
        result[f"hb_failures_{members}"] = failures
    result["rebalance_1000_s"] = await rebalance_wall_time(bootstrap)
    if not groups_only:
        result.update(await produce_fetch_throughput(bootstrap, 32 if quick else 256, pid))
    return result


Work = Callable[[str, int], Awaitable[dict[str, float]]]


async def run_staticfleet(
    quick: bool, workdir: Path, work: Work | None = None, *, root: Path = ROOT
) -> dict[str, float]:
    """A fresh coordinator of the source tree `root` (this one by default) under `work` (every
    measure by default)."""
    from tests.broker.processes import CoordinatorProcess

    # The same initial rebalance delay as Kafka's default, so a 1,000-member group forms in one round.
    process = CoordinatorProcess(
        workdir / "staticfleet", "--group-initial-rebalance-delay-ms", "3000", root=root
    )
    await asyncio.to_thread(process.start)
    try:
        assert process.process is not None
        if work is not None:
            return await work(process.bootstrap, process.process.pid)
        return await measure(process.bootstrap, quick, process.process.pid)
    finally:
        await asyncio.to_thread(process.stop)


async def run_kafka(quick: bool, workdir: Path, work: Work | None = None) -> dict[str, float]:
    broker = FastKafka(
        GroupSettings(
            initial_rebalance_delay_ms=3_000, min_session_timeout_ms=1_000, max_session_timeout_ms=1_800_000
        ),
        workdir / "kafka",
    )
    (workdir / "kafka").mkdir(parents=True, exist_ok=True)
    await broker.start()
    try:
        assert broker._process is not None
        if work is not None:
            return await work(broker.bootstrap, broker._process.pid)
        return await measure(broker.bootstrap, quick, broker._process.pid)
    finally:
        await asyncio.to_thread(broker.stop)


async def server_cost(root: Path, workdir: Path, seconds: float, megabytes: int) -> dict[str, float]:
    """Heartbeats and produced+fetched MiB per second of server CPU, for the coordinator of `root`."""
    from tests.broker.processes import CoordinatorProcess

    process = CoordinatorProcess(workdir, "--group-initial-rebalance-delay-ms", "3000", root=root)
    await asyncio.to_thread(process.start)
    try:
        assert process.process is not None
        pid = process.process.pid
        _, heartbeats = await heartbeat_capacity(process.bootstrap, seconds, pid)
        cpu = cpu_seconds(pid)
        await produce_fetch_throughput(process.bootstrap, megabytes)
        return {"heartbeats_per_cpu_s": heartbeats, "mib_per_cpu_s": 2 * megabytes / (cpu_seconds(pid) - cpu)}
    finally:
        await asyncio.to_thread(process.stop)


def compare_trees(other: Path, rounds: int) -> None:
    trees = {"this tree": ROOT, str(other): other}
    results: dict[str, list[dict[str, float]]] = {name: [] for name in trees}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(rounds):
            order = list(trees.items()) if r % 2 == 0 else list(reversed(trees.items()))
            for name, root in order:
                results[name].append(
                    asyncio.run(
                        server_cost(root, Path(tmp) / f"{r}-{len(results[name])}-{root.name}", 5.0, 64)
                    )
                )
    rows = []
    for key, label in (
        ("heartbeats_per_cpu_s", "heartbeats per s of server CPU"),
        ("mib_per_cpu_s", "MiB produced and fetched per s of server CPU"),
    ):
        ours = statistics.median(x[key] for x in results["this tree"])
        theirs = statistics.median(x[key] for x in results[str(other)])
        rows.append([label, f"{ours:,.0f}", f"{theirs:,.0f}", f"{ours / theirs:.3f}"])
    print(table(["measure (median of rounds)", "this tree", str(other), "ratio"], rows))


# --- --security: heartbeats over SASL_SSL and SASL_PLAINTEXT against PLAINTEXT --------------------------

SECURITY_USER, SECURITY_PASSWORD = "alice", "alice-secret"


async def sasl_connection(host: str, port: int, tls: Any) -> RawConnection:
    """A connection (over TLS unless `tls` is None) logged in with SCRAM-SHA-512 as SECURITY_USER, as a
    Java client logs in."""
    from kio.schema.sasl_authenticate.v2.response import SaslAuthenticateResponse
    from kio.schema.sasl_handshake.v1.response import SaslHandshakeResponse
    from kio.serial import entity_reader

    from conformance import security as sec
    from staticfleet.broker.security.scram import ScramClient, ScramMechanism

    reader, writer = await asyncio.open_connection(
        host, port, ssl=tls, server_hostname="" if tls is not None else None, limit=2**22
    )
    conn = RawConnection(reader, writer)
    conn.writer.write(frame(d.sasl_handshake(1, sec.SCRAM_SHA_512)))
    handshake, _ = entity_reader(SaslHandshakeResponse)(await conn.read(), 4)
    assert int(handshake.error_code) == 0, handshake
    client = ScramClient(ScramMechanism.SCRAM_SHA_512, SECURITY_USER, SECURITY_PASSWORD)
    read_authenticate = entity_reader(SaslAuthenticateResponse)
    conn.writer.write(frame(d.sasl_authenticate(2, client.first())))
    first, _ = read_authenticate(await conn.read(), 5)
    assert int(first.error_code) == 0, first
    conn.writer.write(frame(d.sasl_authenticate(2, client.final(bytes(first.auth_bytes)))))
    final, _ = read_authenticate(await conn.read(), 5)
    assert int(final.error_code) == 0 and client.verify(bytes(final.auth_bytes)), final
    return conn


async def security_overhead(
    name: str, listener_ports: dict[str, int], ca_file: Path, pid: int, seconds: float, rounds: int
) -> dict[str, list[float]]:
    """Heartbeats per server CPU-second of one secured backend over three listeners: PLAINTEXT
    (User:ANONYMOUS, a super user, so no ACL is looked up), SASL_PLAINTEXT and SASL_SSL (SCRAM-SHA-512, a
    user whose Read on the group comes from a prefixed ACL), `rounds` of each after a warm-up round. The
    group is formed over PLAINTEXT."""
    from conformance import security as sec

    plaintext = f"127.0.0.1:{listener_ports[sec.PLAINTEXT]}"
    admin = await RawConnection.open(plaintext)
    acl = d.Acl(d.RESOURCE_GROUP, "capacity", d.PATTERN_PREFIXED, f"User:{SECURITY_USER}", "*", d.OP_READ,
                d.PERMISSION_ALLOW)  # fmt: skip
    await _request(admin, d.create_acls(3, acl))
    admin.close()
    await asyncio.sleep(1.0)  # Kafka applies an ACL once its metadata record is replayed
    members = await form_group(plaintext, "capacity", GROUP_SIZE)
    tls = sec.client_tls(ca_file)
    port = listener_ports[sec.SASL_SSL]
    sasl_port = listener_ports[sec.SASL_PLAINTEXT]
    modes: dict[str, Callable[[], Awaitable[RawConnection]] | None] = {
        "PLAINTEXT": None,
        "SASL_PLAINTEXT": lambda: sasl_connection("127.0.0.1", sasl_port, None),
        "SASL_SSL": lambda: sasl_connection("127.0.0.1", port, tls),
    }
    results: dict[str, list[float]] = {mode: [] for mode in modes}
    # The first round warms up (Kafka's JIT) and is not counted; then the order alternates.
    for r in range(rounds + 1):
        for mode in list(modes) if r % 2 == 0 else list(reversed(modes)):
            _, per_cpu = await heartbeat_capacity(
                plaintext, seconds, pid, connect=modes[mode], members=members
            )
            if r:
                results[mode].append(per_cpu)
            print(f"{name} {mode}: {per_cpu:,.0f} heartbeats per server CPU-second", flush=True)
    return results


def run_security(seconds: float, rounds: int, publish_results: bool) -> None:
    from conformance.backends import StaticfleetBackend
    from conformance.kafka_broker import kafka_version
    from conformance.security import SecurityProfile

    settings = GroupSettings(
        initial_rebalance_delay_ms=3_000,
        min_session_timeout_ms=1_000,
        max_session_timeout_ms=1_800_000,
        security=SecurityProfile(),
    )
    results: dict[str, dict[str, list[float]]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        ours = StaticfleetBackend(settings, Path(tmp) / "staticfleet")
        asyncio.run(ours.start())
        try:
            assert ours._process is not None and ours.ca_file is not None
            results["staticfleet"] = asyncio.run(
                security_overhead(
                    "staticfleet", ours.listener_ports, ours.ca_file, ours._process.pid, seconds, rounds
                )
            )
        finally:
            ours.stop()
        kafka = FastKafka(settings, Path(tmp) / "kafka")
        (Path(tmp) / "kafka").mkdir()

        async def measure_kafka() -> dict[str, list[float]]:
            await kafka.start()
            assert kafka._process is not None and kafka.ca_file is not None
            return await security_overhead(
                "Apache Kafka", kafka.listener_ports, kafka.ca_file, kafka._process.pid, seconds, rounds
            )

        try:
            results["kafka"] = asyncio.run(measure_kafka())
        finally:
            kafka.stop()
    rows = []
    for key, label in (("staticfleet", "staticfleet"), ("kafka", f"Apache Kafka {kafka_version()}")):
        plain = statistics.mean(results[key]["PLAINTEXT"])
        sasl = statistics.mean(results[key]["SASL_PLAINTEXT"])
        secured = statistics.mean(results[key]["SASL_SSL"])
        rows.append(
            [label, f"{plain:,.0f}", f"{sasl:,.0f}", f"{secured:,.0f}", f"{sasl / plain:.2f}",
             f"{secured / plain:.2f}"]
        )  # fmt: skip
    body = table(
        ["server", "PLAINTEXT", "SASL_PLAINTEXT", "SASL_SSL", "SASL_PLAINTEXT / PLAINTEXT",
         "SASL_SSL / PLAINTEXT"],
        rows,
    )  # fmt: skip
    body += (
        f"\n\nHeartbeats per second of server CPU. 1,000 static members, heartbeats pipelined on 20 "
        f"connections for {seconds:.0f} s per measurement; after one warm-up round, {rounds} measurements "
        "per listener in alternating order, and the figures are their means. SASL connections log in with "
        "SCRAM-SHA-512 as a user whose Read on the group comes from a prefixed ACL (SASL_SSL: TLS 1.3, "
        "each server's default cipher); PLAINTEXT is User:ANONYMOUS, a super user, so no ACL is looked up. "
        f"Apache Kafka ran on {java_executable()} with its default JIT and a 1 GiB heap, after "
        "staticfleet. One run on a shared 2-core machine: compare the ratios, not the absolute figures."
    )
    print(body)
    if not publish_results:
        return
    publish(
        "coordinator_security",
        "Heartbeats over SASL_SSL and SASL_PLAINTEXT against PLAINTEXT, staticfleet and Kafka in one run",
        ".venv/bin/python bench/coordinator_server.py --security",
        body,
        results,
    )


FETCH_MEGABYTES = 256


FETCH_PASSES = 4
WARMUP_MEGABYTES = 64


async def fetch_work(bootstrap: str, pid: int) -> dict[str, float]:
    # A pass on a topic of its own first: the JVM's JIT (and any server's caches) warm, as they are
    # by the heartbeat and rebalance runs before produce and fetch in the full benchmark.
    await produce_fetch_throughput(bootstrap, WARMUP_MEGABYTES, topic_name="warmup")
    return await produce_fetch_throughput(bootstrap, FETCH_MEGABYTES, pid, fetch_passes=FETCH_PASSES)


def _spread(values: Sequence[float], fmt: str) -> str:
    return f"{fmt.format(statistics.median(values))} ({fmt.format(min(values))} to {fmt.format(max(values))})"


def fetch_only(repeat: int) -> None:
    """Produce and fetch only, each backend `repeat` times in alternating order, each run a fresh
    server: medians with their spread, and the ratio of the medians."""
    runs: dict[str, list[dict[str, float]]] = {"staticfleet": [], "kafka": []}
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(repeat):
            order = ["staticfleet", "kafka"] if r % 2 == 0 else ["kafka", "staticfleet"]
            for name in order:
                workdir = Path(tmp) / f"{name}-{r}"
                workdir.mkdir()
                run = run_staticfleet if name == "staticfleet" else run_kafka
                runs[name].append(asyncio.run(run(False, workdir, fetch_work)))
                print(name, r, runs[name][-1], flush=True)
    rows = []
    for key, label, fmt in (
        ("fetch_mb_s", "fetch, 4 MiB responses (MiB/s)", "{:.0f}"),
        ("fetch_mib_per_cpu_s", "fetched MiB per second of server CPU", "{:.0f}"),
        ("produce_mb_s", "produce, 66 KiB batches, acks=1 (MiB/s)", "{:.0f}"),
    ):
        ours = [x[key] for x in runs["staticfleet"]]
        theirs = [x[key] for x in runs["kafka"]]
        ratio = statistics.median(ours) / statistics.median(theirs)
        rows.append([label, _spread(ours, fmt), _spread(theirs, fmt), f"{ratio:.2f}"])
    from conformance.kafka_broker import kafka_version

    body = table(
        [f"measure (median of {repeat}, lowest to highest)", "staticfleet", "Apache Kafka", "ratio"], rows
    ) + (
        f"\n\n{FETCH_MEGABYTES} MiB produced to one partition, then fetched back {FETCH_PASSES} times on "
        f"one connection (Fetch v11, 4 MiB per response), after a {WARMUP_MEGABYTES} MiB warm-up pass on "
        f"another topic. Apache Kafka {kafka_version()} ran on {java_executable()} "
        "with its default JIT and a 1 GiB heap; each run is a fresh server, the backends alternating. "
        "The load generator shares the machine (2 cores) with the server, and other work may share it "
        "too: the absolute figures say little, the ratios of the runs side by side more."
    )
    print(body)
    publish(
        "coordinator_fetch",
        "Fetch: staticfleet (sendfile from the segment files) and Apache Kafka, side by side",
        f".venv/bin/python bench/coordinator_server.py --only fetch --repeat {repeat}",
        body,
        runs,
    )


FULL_LABELS = (
    ("heartbeats_per_s", "heartbeat capacity, 1,000 static members (per s of wall time)", "{:,.0f}"),
    ("heartbeats_per_cpu_s", "heartbeats per second of server CPU (one core)", "{:,.0f}"),
    ("hb_p50_ms_1000", "heartbeat p50, 1,000 members at 3 s (ms)", "{:.2f}"),
    ("hb_p99_ms_1000", "heartbeat p99, 1,000 members at 3 s (ms)", "{:.2f}"),
    ("hb_p50_ms_10000", "heartbeat p50, 10,000 members at 3 s (ms)", "{:.2f}"),
    ("hb_p99_ms_10000", "heartbeat p99, 10,000 members at 3 s (ms)", "{:.2f}"),
    ("rebalance_1000_s", "1,000-member rebalance, wall time (s)", "{:.2f}"),
    ("produce_mb_s", "produce, 66 KiB batches, acks=1 (MiB/s)", "{:.1f}"),
    ("fetch_mb_s", "fetch, 4 MiB responses (MiB/s)", "{:.1f}"),
)


def alternating_runs(
    backends: dict[str, Callable[[Path], Coroutine[Any, Any, dict[str, float]]]], repeat: int
) -> dict[str, list[dict[str, float]]]:
    """`repeat` runs of each backend, each on a fresh server and data directory, the order of the
    backends alternating from one round to the next."""
    runs: dict[str, list[dict[str, float]]] = {name: [] for name in backends}
    names = list(backends)
    with tempfile.TemporaryDirectory() as tmp:
        for r in range(repeat):
            for name in names if r % 2 == 0 else list(reversed(names)):
                workdir = Path(tmp) / f"{r}-{names.index(name)}"
                workdir.mkdir()
                runs[name].append(asyncio.run(backends[name](workdir)))
                print(f"{name}, run {r + 1} of {repeat}:", runs[name][-1], flush=True)
    return runs


def spread_table(runs: dict[str, list[dict[str, float]]], headers: Sequence[str]) -> str:
    """Each figure as the median of the runs and their range; the ratio of the first backend's median
    to the second's."""
    names = list(runs)
    repeat = len(runs[names[0]])
    rows = []
    for key, label, fmt in FULL_LABELS:
        if any(key not in run for backend in runs.values() for run in backend):
            continue
        cells: list[str] = [label]
        medians = []
        for name in names:
            values = [run[key] for run in runs[name]]
            medians.append(statistics.median(values))
            cells.append(_spread(values, fmt) if repeat > 1 else fmt.format(values[0]))
        if len(names) == 2:
            cells.append(f"{medians[0] / medians[1]:.2f}" if medians[1] else "")
        rows.append(cells)
    measure = f"measure (median of {repeat}, lowest to highest)" if repeat > 1 else "measure"
    return table([measure, *headers, *(["ratio"] if len(names) == 2 else [])], rows)


def _failures(runs: dict[str, list[dict[str, float]]], labels: dict[str, str]) -> str:
    return "; ".join(
        f"{labels[name]} "
        + ", ".join(
            f"{size} members: {sum(int(run.get(f'hb_failures_{size}', 0)) for run in backend)}"
            for size in (1_000, 10_000)
            if any(f"hb_failures_{size}" in run for run in backend)
        )
        for name, backend in runs.items()
    )


def full_run(repeat: int, quick: bool, no_kafka: bool, *, groups_only: bool = False) -> None:
    """Every measure (with `groups_only`, heartbeat latencies and the rebalance) on staticfleet and
    Apache Kafka, `repeat` fresh servers of each, alternating."""
    backends: dict[str, Callable[[Path], Coroutine[Any, Any, dict[str, float]]]] = {
        "staticfleet": lambda workdir: run_staticfleet(quick, workdir, _work(quick, groups_only)),
    }
    if not no_kafka:
        backends["kafka"] = lambda workdir: run_kafka(quick, workdir, _work(quick, groups_only))
    runs = alternating_runs(backends, repeat)
    labels = {"staticfleet": "staticfleet", "kafka": "Apache Kafka"}
    body = spread_table(runs, [labels[name] for name in runs])
    if not no_kafka:
        from conformance.kafka_broker import kafka_version

        body += (
            f"\n\nApache Kafka {kafka_version()} ran on {java_executable()} with its default JIT and a "
            "1 GiB heap. "
            + (
                f"Each backend ran {repeat} times, each run a fresh server, the backends alternating. "
                if repeat > 1
                else ""
            )
            + "The load generator shares the machine (2 cores) with whichever server is measured; for the "
            "heartbeat latencies the generator has one core and every thread of the server the other, so "
            "that no answer waits behind the generator's own work on a shared core. "
            f"Heartbeat errors over all runs (should be 0): {_failures(runs, labels)}."
        )
    print(body)
    if not quick and not no_kafka and not groups_only:
        publish(
            "coordinator_server",
            "Embedded coordinator over loopback, side by side with Apache Kafka",
            ".venv/bin/python bench/coordinator_server.py" + (f" --repeat {repeat}" if repeat > 1 else ""),
            body,
            {"repeat": repeat, **runs},
        )


def _work(quick: bool, groups_only: bool) -> Work:
    return lambda bootstrap, pid: measure(bootstrap, quick, pid, groups_only=groups_only)


def compare_groups(other: Path, repeat: int) -> None:
    """Heartbeat latencies and the rebalance on this tree's coordinator and `other`'s, alternating."""
    backends: dict[str, Callable[[Path], Coroutine[Any, Any, dict[str, float]]]] = {
        "this tree": lambda workdir: run_staticfleet(False, workdir, _work(False, True)),
        str(other): lambda workdir: run_staticfleet(False, workdir, _work(False, True), root=other),
    }
    print(spread_table(alternating_runs(backends, repeat), list(backends)))


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--no-kafka", action="store_true")
    parser.add_argument(
        "--compare-tree", type=Path, help="another checkout whose coordinator runs against this one"
    )
    parser.add_argument("--rounds", type=int, default=4, help="alternating rounds of --compare-tree [4]")
    parser.add_argument(
        "--security",
        action="store_true",
        help="heartbeats per server CPU-second over PLAINTEXT, SASL_PLAINTEXT and SASL_SSL, on both servers",
    )
    parser.add_argument(
        "--only",
        choices=("all", "fetch", "groups"),
        default="all",
        help="fetch: produce and fetch only; groups: heartbeat latencies and the rebalance only [all]",
    )
    parser.add_argument(
        "--repeat",
        type=int,
        help="fresh server runs of each backend, alternating; figures are their medians and ranges "
        "[1; 3 with --only fetch]",
    )
    args = parser.parse_args()
    if args.security:
        run_security(3.0 if args.quick else 8.0, 2 if args.quick else 3, not args.quick)
        return
    if args.only == "fetch":
        fetch_only(args.repeat or 3)
        return
    if args.compare_tree is not None:
        if args.only == "groups":
            compare_groups(args.compare_tree.resolve(), args.repeat or args.rounds)
        else:
            compare_trees(args.compare_tree.resolve(), args.rounds)
        return
    full_run(args.repeat or 1, args.quick, args.no_kafka, groups_only=args.only == "groups")


if __name__ == "__main__":
    main()
