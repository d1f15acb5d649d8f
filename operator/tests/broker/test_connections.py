"""Connection accounting: admission by count, by address and by an address's connection rate, and the
pool of large-request bytes."""

from __future__ import annotations

import asyncio
import contextlib
from pathlib import Path
from typing import Any
from unittest.mock import Mock

import pytest

from conformance import driver as d
from staticfleet.broker.connections import (
    BytePool,
    Connection,
    ConnectionLimits,
    ConnectionRegistry,
    Refused,
    parse_overrides,
)
from staticfleet.broker.server import BrokerServer

from .test_server_apis import serve


def test_connections_over_max_connections_or_the_per_ip_limit_are_refused() -> None:
    async def main() -> None:
        registry = ConnectionRegistry(ConnectionLimits(max_connections=3, max_connections_per_ip=2))
        writer: Any = None  # never used: nothing is idle long enough here
        a1, a2 = registry.admit("/a", writer), registry.admit("/a", writer)
        assert isinstance(a1, Connection) and isinstance(a2, Connection)
        assert registry.admit("/a", writer) == Refused("refused"), "a third from one address"
        b1 = registry.admit("/b", writer)
        assert isinstance(b1, Connection)
        assert isinstance(registry.admit("/c", writer), Refused), "a fourth in all"
        a1.close()
        a1.close()  # closing twice counts once
        assert isinstance(registry.admit("/c", writer), Connection)
        assert registry.refused == {"max-connections-per-ip": 1, "max-connections": 1}
        for connection in list(registry.connections):
            connection.close()

    asyncio.run(main())


def test_per_ip_overrides_raise_or_lower_one_address_limit() -> None:
    async def main() -> None:
        limits = ConnectionLimits(
            max_connections_per_ip=1,
            max_connections_per_ip_overrides=parse_overrides("127.0.0.2:3, [::1]:0"),
        )
        assert limits.max_connections_per_ip_overrides == {"127.0.0.2": 3, "::1": 0}
        registry = ConnectionRegistry(limits)
        writer: Any = None
        admitted = [registry.admit("/127.0.0.2", writer) for _ in range(4)]
        assert [isinstance(a, Connection) for a in admitted] == [True, True, True, False]
        assert isinstance(registry.admit("/::1", writer), Refused)
        assert isinstance(registry.admit("/127.0.0.3", writer), Connection)
        assert isinstance(registry.admit("/127.0.0.3", writer), Refused)
        for connection in list(registry.connections):
            connection.close()

    asyncio.run(main())
    with pytest.raises(ValueError, match="not an IP address"):
        ConnectionLimits(max_connections_per_ip_overrides={"broker.example": 1})
    with pytest.raises(ValueError, match="address:count"):
        parse_overrides("127.0.0.1")


def test_the_creation_rate_throttles_an_address_as_kafka_measures_it() -> None:
    """Kafka counts connections over at least ten one-second windows: at 2 per second an address may
    open 20 at once; the 21st is held for the time the rate needs to fall back (at most one window),
    is not counted, and another address is not affected."""

    async def main() -> None:
        registry = ConnectionRegistry(ConnectionLimits(connection_creation_rate=2))
        writer: Any = None
        burst = [registry.admit("/a", writer, now_ms=1_000.0) for _ in range(21)]
        assert all(isinstance(a, Connection) for a in burst[:20])
        throttled = burst[20]
        assert isinstance(throttled, Refused) and throttled.reason == "throttled"
        assert throttled.hold_s == pytest.approx(0.5)  # (21/10 - 2) / 2 x 10 s, capped at 1 s: 0.5 s
        assert isinstance(registry.admit("/b", writer, now_ms=1_000.0), Connection)
        assert isinstance(registry.admit("/a", writer, now_ms=1_000.0), Refused), "still over"
        # 20 connections over 10.5 s is under 2 per second again
        assert isinstance(registry.admit("/a", writer, now_ms=11_500.0), Connection)
        assert registry.refused == {"connection-creation-rate": 2}
        assert len(registry.connections) == 22
        for connection in list(registry.connections):
            connection.close()

    asyncio.run(main())


def test_a_connection_rate_is_forgotten_once_its_address_stops_connecting() -> None:
    async def main() -> None:
        registry = ConnectionRegistry(ConnectionLimits(connection_creation_rate=5))
        writer: Any = None
        for ip in ("/a", "/b"):
            admitted = registry.admit(ip, writer, now_ms=20_000.0)
            assert isinstance(admitted, Connection)
            admitted.close()
        assert set(registry.rates) == {"/a", "/b"}
        admitted = registry.admit("/c", writer, now_ms=40_000.0)
        assert isinstance(admitted, Connection)
        admitted.close()
        assert set(registry.rates) == {"/c"}

    asyncio.run(main())


def test_a_stalled_reader_holds_only_its_chunks_and_a_waiter_blocks_no_one_whose_chunk_fits() -> None:
    async def main() -> None:
        pool = BytePool(capacity=10, largest=4, chunk=1)
        oldest, second, third = pool.open(), pool.open(), pool.open()
        for _ in range(3):
            await pool.take(oldest, 1)  # a stalled sender: three chunks, then nothing more
        for _ in range(3):
            await pool.take(second, 1)  # others may fill the pool but for one largest request
        waiting = asyncio.ensure_future(pool.take(third, 1))
        await asyncio.sleep(0)
        assert not waiting.done() and pool.reserved == 6
        await pool.take(oldest, 1)  # the oldest may use the room kept for the largest request
        pool.finished_reading(second)
        assert not waiting.done(), "the room kept for a largest request is still taken"
        pool.release(second)  # answered: its chunks go back, the waiter gets one
        await asyncio.wait_for(waiting, 1)
        assert (pool.reserved, oldest.held, third.held) == (5, 4, 1)
        pool.release(oldest)
        pool.release(third)
        assert pool.reserved == 0

    asyncio.run(main())


def test_the_oldest_request_always_finishes_so_large_requests_never_wait_on_each_other() -> None:
    """Many large requests arriving together, a chunk at a time: the pool never holds more than its
    capacity and every one is read, however the chunks interleave."""

    async def main() -> None:
        pool = BytePool(capacity=8, largest=4, chunk=1)
        most = 0

        async def request(size: int) -> None:
            nonlocal most
            reading = pool.open()
            for _ in range(size):
                await pool.take(reading, 1)
                most = max(most, pool.reserved)
                await asyncio.sleep(0)
            pool.finished_reading(reading)
            await asyncio.sleep(0)  # answered
            pool.release(reading)

        await asyncio.wait_for(asyncio.gather(*(request(4) for _ in range(10))), 5)
        assert pool.reserved == 0 and most <= 8

    asyncio.run(main())


def test_a_reader_that_gives_up_while_waiting_takes_nothing() -> None:
    async def main() -> None:
        pool = BytePool(capacity=2, largest=2, chunk=1)
        oldest, other = pool.open(), pool.open()
        await pool.take(oldest, 1)
        waiting = asyncio.ensure_future(pool.take(other, 1))
        await asyncio.sleep(0)
        waiting.cancel()
        with pytest.raises(asyncio.CancelledError):
            await waiting
        pool.release(other)
        pool.release(oldest)
        assert (pool.reserved, other.held) == (0, 0)

    asyncio.run(main())


def test_limits_that_could_never_take_the_largest_request_are_refused() -> None:
    with pytest.raises(ValueError, match=r"queued\.max\.request\.bytes"):
        ConnectionLimits(socket_request_max_bytes=1000, queued_max_request_bytes=999)


def test_an_idle_connection_waiting_for_room_in_the_pool_is_closed_and_takes_nothing() -> None:
    async def main() -> None:
        registry = ConnectionRegistry(
            ConnectionLimits(
                connections_max_idle_ms=100,
                socket_request_max_bytes=200_000,
                queued_max_request_bytes=200_000,
            )
        )
        writer: Any = Mock()
        busy, waiting = registry.admit("/a", writer), registry.admit("/b", writer)
        assert isinstance(busy, Connection) and isinstance(waiting, Connection)
        busy_reader, waiting_reader = asyncio.StreamReader(), asyncio.StreamReader()
        busy_reader.feed_data((150_000).to_bytes(4, "big") + b"\x00" * 140_000)  # stalls, oldest
        waiting_reader.feed_data((100_000).to_bytes(4, "big"))  # no room: the oldest may need it all
        busy_read = asyncio.ensure_future(busy.read_request(busy_reader))
        await asyncio.sleep(0.01)
        waiting_read = asyncio.ensure_future(waiting.read_request(waiting_reader))
        assert await asyncio.wait_for(waiting_read, 5) is None, "the idle sweeper closes it"
        assert waiting.close_reason == "idle" and waiting.reading is None
        busy_read.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await busy_read
        busy.close()
        waiting.close()
        assert registry.pool.reserved == 0

    asyncio.run(main())


def test_a_connection_over_the_creation_rate_is_held_unanswered_then_closed(tmp_path: Path) -> None:
    """Over a real socket: at 1 connection per second an address may open ten at once (Kafka's ten-second
    window); the eleventh is accepted but never read, then closed, and the first ten are served."""

    async def test(server: BrokerServer) -> None:
        admitted = [await d.Connection.open("127.0.0.1", server.port, name=f"c{i}") for i in range(10)]
        throttled = await d.Connection.open("127.0.0.1", server.port, name="throttled")
        try:
            unanswered = throttled.send(d.api_versions())
            assert await throttled.closed_within(5), "the throttled connection stays open"
            with pytest.raises(d.ConnectionClosed):
                await unanswered.result(1)  # closed without an answer
            for conn in admitted:
                assert (await conn.request(d.api_versions())).error_code == 0
            assert server.connections.refused == {"connection-creation-rate": 1}
        finally:
            for conn in [*admitted, throttled]:
                await conn.close()

    serve(tmp_path, test, connection_limits=ConnectionLimits(connection_creation_rate=1))
