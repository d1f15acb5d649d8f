"""Fetch over sendfile: the records go from the segment files to the socket without entering Python,
and the bytes on the wire are those of the copying path (kio's encoder over records read into memory),
at every Fetch version, across segment boundaries and size limits, on both event loops."""

from __future__ import annotations

import asyncio
import datetime
import os
import socket
import struct
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from unittest import mock

import pytest
import uvloop
from kio.schema.errors import ErrorCode
from kio.schema.fetch.v12 import response as fetch_res
from kio.schema.types import TopicName
from kio.static.primitive import Records, i32, i32Timedelta, i64

from conformance import driver as d
from staticfleet.broker import fetch_wire
from staticfleet.broker.codec import encode_response, for_version
from staticfleet.broker.partitionlog import FileRegion
from staticfleet.broker.registry import Peer
from staticfleet.broker.sendfile import SplicedSender, can_splice
from staticfleet.broker.server import BrokerServer, BrokerSettings
from staticfleet.broker.topiclog import TopicLog
from staticfleet.coordinator import CoordinatorConfig

from .kafka_batches import simple_batch

LOOPS: dict[str, Callable[[], asyncio.AbstractEventLoop]] = {
    "asyncio": asyncio.new_event_loop,
    "uvloop": uvloop.new_event_loop,
}


# -- the encoder against kio's, on regions of a real file --------------------------------------------


@pytest.fixture
def segment_file(tmp_path: Path) -> Iterator[tuple[int, bytes]]:
    data = b"".join(simple_batch(n + 1, tag=f"b{n}") for n in range(6))
    path = tmp_path / "segment.log"
    path.write_bytes(data)
    fd = os.open(path, os.O_RDONLY)
    yield fd, data
    os.close(fd)


def _partition(index: int, records: bytes | None, error: ErrorCode = ErrorCode.none) -> Any:
    return fetch_res.PartitionData(
        partition_index=i32(index),
        error_code=error,
        high_watermark=i64(100 + index),
        last_stable_offset=i64(90 + index),
        log_start_offset=i64(index),
        aborted_transactions=None,
        records=None if records is None else Records(records),
    )


@pytest.mark.parametrize("version", list(fetch_wire.VERSIONS))
def test_a_spliced_frame_is_byte_for_byte_the_copying_paths_frame(
    version: int, segment_file: tuple[int, bytes]
) -> None:
    fd, data = segment_file
    cut = len(data) // 3
    # Records in two regions (as across two segments), in one, none at all, an error, an empty read.
    spans: list[list[tuple[int, int]]] = [[(0, cut), (cut, len(data) - cut)], [(cut, 200)], [], [], []]
    partitions = [
        _partition(0, b"".join(data[p : p + n] for p, n in spans[0])),
        _partition(1, data[cut : cut + 200]),
        _partition(2, None, ErrorCode.offset_out_of_range),
        _partition(3, b""),
        _partition(4, None, ErrorCode.topic_authorization_failed),
    ]
    response = fetch_res.FetchResponse(
        throttle_time=i32Timedelta.parse(datetime.timedelta(milliseconds=7)),
        error_code=ErrorCode.none,
        session_id=i32(0),
        responses=(
            fetch_res.FetchableTopicResponse(topic=TopicName("orders"), partitions=tuple(partitions[:2])),
            fetch_res.FetchableTopicResponse(topic=TopicName("élan"), partitions=tuple(partitions[2:])),
        ),
    )
    regions = (
        tuple(tuple(FileRegion(os.dup(fd), p, n) for p, n in spans[i]) for i in range(2)),
        ((), (), ()),
    )
    spliced = fetch_wire.RegionFetchResponse(response, regions)
    assert fetch_wire.supports(response)
    frame = fetch_wire.encode(response, version, 4242, spliced.regions)
    try:
        expected = encode_response(4242, for_version(response, version))
        assert frame.materialize() == expected
        assert frame.length == len(expected)
        assert [r.length for r in frame.regions()] == [cut, len(data) - cut, 200]
    finally:
        frame.close()
    assert all(r.fd == -1 for r in frame.regions())


# -- the server: spliced answers on the wire against the copying path --------------------------------


def _fetch_request(
    version: int, topic: str, offsets: dict[int, int], max_bytes: int, partition_max: int
) -> Any:
    module = __import__(f"kio.schema.fetch.v{version}.request", fromlist=["FetchRequest"])
    partition_cls, topic_cls = module.FetchPartition, module.FetchTopic
    partitions = tuple(
        d._build(
            partition_cls,
            {
                "partition": i32(p),
                "current_leader_epoch": i32(-1),
                "fetch_offset": i64(offset),
                "last_fetched_epoch": i32(-1),
                "log_start_offset": i64(-1),
                "partition_max_bytes": i32(partition_max),
            },
            droppable=("current_leader_epoch", "last_fetched_epoch", "log_start_offset"),
        )
        for p, offset in offsets.items()
    )
    return d._build(
        module.FetchRequest,
        {
            "replica_id": i32(-1),
            "max_wait": d._ms(0),
            "min_bytes": i32(0),
            "max_bytes": i32(max_bytes),
            "isolation_level": 0,
            "session_id": i32(0),
            "session_epoch": i32(-1),
            "topics": (d._build(topic_cls, {"topic": topic, "partitions": partitions}),),
            "forgotten_topics_data": (),
            "rack_id": "",
        },
        droppable=("session_id", "session_epoch", "forgotten_topics_data", "rack_id"),
    )


def _read_frame(sock: socket.socket, pause_s: float = 0.0) -> bytes:
    def exactly(n: int) -> bytes:
        chunks = bytearray()
        while len(chunks) < n:
            time.sleep(pause_s)
            chunk = sock.recv(min(n - len(chunks), 1 << 16))
            if not chunk:
                raise ConnectionError("closed")
            chunks += chunk
        return bytes(chunks)

    size = exactly(4)
    return size + exactly(struct.unpack(">i", size)[0])


def _serve(tmp_path: Path, loop: str, test: Callable[[BrokerServer], Any]) -> None:
    async def main() -> None:
        server = BrokerServer(
            BrokerSettings(
                data_dir=tmp_path / "data",
                listen_port=0,
                fsync=False,
                coordinator=CoordinatorConfig(initial_rebalance_delay_ms=0),
            )
        )
        await server.start()
        try:
            await test(server)
        finally:
            await server.stop()

    with asyncio.Runner(loop_factory=LOOPS[loop]) as runner:
        runner.run(main())


def _fill(
    topics: TopicLog,
    topic: str,
    partitions: int,
    batches: int,
    value_size: int,
    segment_bytes: int = 64 * 1024,
) -> None:
    topics.create_topic(topic, partitions, configs={"segment.bytes": str(segment_bytes)})
    for p in range(partitions):
        for n in range(batches):
            topics.append(topic, p, simple_batch(1 + n % 7, value_size=value_size, tag=f"p{p}n{n}-"))


@pytest.mark.parametrize("loop", list(LOOPS))
def test_fetches_over_sendfile_answer_what_the_copying_path_answers(tmp_path: Path, loop: str) -> None:
    cases = [
        # (version, offsets per partition, max_bytes, partition_max_bytes)
        (12, {0: 0, 1: 0, 2: 0}, 50 * 1024 * 1024, 1024 * 1024),  # across segments (64 KiB each)
        (12, {0: 17, 1: 5}, 50 * 1024 * 1024, 10_000),  # mid-batch offsets, cut at whole batches
        (12, {0: 0}, 100, 100),  # the first batch alone exceeds the limit: sent whole
        (12, {0: 3, 1: 0, 2: 0}, 30_000, 1024 * 1024),  # the response limit shared by partitions
        (12, {0: 10**6}, 1024, 1024),  # out of range
        (11, {0: 0, 1: 40}, 1024 * 1024, 200_000),
        (7, {2: 9}, 1024 * 1024, 200_000),
        (5, {0: 0}, 1024 * 1024, 70_000),
        (4, {1: 0}, 1024 * 1024, 70_000),
    ]

    async def test(server: BrokerServer) -> None:
        assert server.topics is not None
        _fill(server.topics, "orders", 3, 150, 600)
        ends = {p: server.topics.log_end_offset("orders", p) for p in range(3)}
        cases.append((12, ends, 1024 * 1024, 1024 * 1024))  # at the log end: nothing to send
        with mock.patch("staticfleet.broker.sendfile.os.sendfile", wraps=os.sendfile) as sendfile:
            reader, writer = await asyncio.open_connection("127.0.0.1", server.port)
            try:
                for n, (version, offsets, max_bytes, partition_max) in enumerate(cases):
                    request = d.request_frame(
                        _fetch_request(version, "orders", offsets, max_bytes, partition_max), correlation=n
                    )
                    writer.write(request)
                    size = await reader.readexactly(4)
                    spliced = size + await reader.readexactly(struct.unpack(">i", size)[0])
                    copied = (await server._answer(Peer("/127.0.0.1"), request[4:])).frame
                    assert isinstance(copied, bytes)
                    assert spliced == copied, (version, offsets)
            finally:
                writer.close()
        assert sendfile.call_count >= 8, "the records went out by sendfile"

    _serve(tmp_path, loop, test)


@pytest.mark.parametrize("loop", list(LOOPS))
def test_a_slow_reader_gets_every_byte_of_a_large_spliced_fetch(tmp_path: Path, loop: str) -> None:
    """Megabytes to a client with a small receive window: sendfile runs into a full socket and the
    sender waits for it to drain, while the server goes on answering other connections."""

    async def test(server: BrokerServer) -> None:
        assert server.topics is not None
        _fill(server.topics, "big", 1, 80, 16 * 1024, segment_bytes=1 << 20)
        request = d.request_frame(_fetch_request(12, "big", {0: 0}, 64 << 20, 64 << 20), correlation=1)
        copied = (await server._answer(Peer("/127.0.0.1"), request[4:])).frame
        assert isinstance(copied, bytes) and len(copied) > 2 << 20

        def slow_client() -> bytes:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 32768)
            sock.connect(("127.0.0.1", server.port))
            try:
                sock.sendall(request)
                return _read_frame(sock, pause_s=0.002)
            finally:
                sock.close()

        waits = 0
        writable = SplicedSender._writable

        async def counted(sender: SplicedSender) -> None:
            nonlocal waits
            waits += 1
            await writable(sender)

        with mock.patch.object(SplicedSender, "_writable", counted):
            slow = asyncio.create_task(asyncio.to_thread(slow_client))
            async with d.Driver("127.0.0.1", server.port) as driver:
                other = await driver.connect("other")
                for _ in range(5):  # answered while the large response is still going out
                    response = await other.request(d.metadata(12, ["big"], allow_auto_topic_creation=False))
                    assert [t.name for t in response.topics] == ["big"]
            assert await slow == copied
        assert waits > 0, "the socket filled up and the sender waited for it"

    _serve(tmp_path, loop, test)


def test_a_client_that_goes_away_mid_fetch_closes_only_its_connection(tmp_path: Path) -> None:
    async def test(server: BrokerServer) -> None:
        assert server.topics is not None
        _fill(server.topics, "big", 1, 300, 16 * 1024, segment_bytes=1 << 20)
        request = d.request_frame(_fetch_request(12, "big", {0: 0}, 64 << 20, 64 << 20), correlation=1)
        open_before = len(os.listdir("/proc/self/fd"))

        def impatient_client() -> None:
            sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
            sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
            sock.connect(("127.0.0.1", server.port))
            sock.sendall(request)
            assert sock.recv(1000)
            sock.close()  # with most of the response unread: the server's next send is refused

        for _ in range(3):
            await asyncio.to_thread(impatient_client)
        async with d.Driver("127.0.0.1", server.port) as driver:
            conn = await driver.connect("after")
            response = await conn.request(d.metadata(12, ["big"], allow_auto_topic_creation=False))
            assert [t.name for t in response.topics] == ["big"]
        for _ in range(100):  # the server notices the resets and closes the segments' duplicates
            if len(os.listdir("/proc/self/fd")) <= open_before:
                break
            await asyncio.sleep(0.05)
        assert len(os.listdir("/proc/self/fd")) <= open_before

    _serve(tmp_path, "asyncio", test)


@pytest.mark.parametrize("loop", list(LOOPS))
def test_a_spliced_frame_waits_for_what_the_transport_still_holds(loop: str, tmp_path: Path) -> None:
    """Bytes the transport buffered for an earlier answer go out first, then the spliced frame."""
    earlier = bytes(range(256)) * (8 * 4096)  # 8 MiB: more than the sockets hold at once
    records = os.urandom(3 * 2**20)
    path = tmp_path / "records"
    path.write_bytes(records)
    fd = os.open(path, os.O_RDONLY)

    async def main() -> bytes:
        done: asyncio.Future[None] = asyncio.get_running_loop().create_future()

        async def handler(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            assert can_splice(writer)
            writer.write(earlier)
            assert writer.transport.get_write_buffer_size() > 0
            sender = SplicedSender(writer)
            try:
                await sender.send(
                    fetch_wire.SplicedFrame(
                        (b"head", FileRegion(os.dup(fd), 0, len(records)), b"tail"), len(records) + 8
                    )
                )
            finally:
                sender.close()
                writer.close()
                done.set_result(None)

        server = await asyncio.start_server(handler, "127.0.0.1", 0)
        port = server.sockets[0].getsockname()[1]

        def slow_client() -> bytes:
            with socket.create_connection(("127.0.0.1", port)) as sock:
                received = bytearray()
                while chunk := sock.recv(1 << 16):
                    received += chunk
                    time.sleep(0.0002)
                return bytes(received)

        received = await asyncio.to_thread(slow_client)
        await done
        server.close()
        return received

    try:
        with asyncio.Runner(loop_factory=LOOPS[loop]) as runner:
            received = runner.run(main())
    finally:
        os.close(fd)
    assert received == earlier + b"head" + records + b"tail"
