"""Connection accounting: admission by count and by address, and the pool of large-request bytes."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from staticfleet.broker.connections import BytePool, ConnectionLimits, ConnectionRegistry


def test_connections_over_max_connections_or_the_per_ip_limit_are_refused() -> None:
    async def main() -> None:
        registry = ConnectionRegistry(ConnectionLimits(max_connections=3, max_connections_per_ip=2))
        writer: Any = None  # never used: nothing is idle long enough here
        a1, a2 = registry.admit("/a", writer), registry.admit("/a", writer)
        assert a1 is not None and a2 is not None
        assert registry.admit("/a", writer) is None, "a third from one address"
        b1 = registry.admit("/b", writer)
        assert b1 is not None
        assert registry.admit("/c", writer) is None, "a fourth in all"
        a1.close()
        a1.close()  # closing twice counts once
        assert registry.admit("/c", writer) is not None
        assert registry.refused == {"max-connections-per-ip": 1, "max-connections": 1}
        for connection in list(registry.connections):
            connection.close()

    asyncio.run(main())


def test_the_pool_grants_in_arrival_order_and_a_waiter_that_gives_up_takes_nothing() -> None:
    async def main() -> None:
        pool = BytePool(100)
        await pool.reserve(60)
        second = asyncio.ensure_future(pool.reserve(50))
        third = asyncio.ensure_future(pool.reserve(10))
        await asyncio.sleep(0)
        assert not second.done() and not third.done(), "the small one waits behind the large one"
        with pytest.raises(TimeoutError):
            await asyncio.wait_for(asyncio.shield(second), 0.01)
        second.cancel()
        await asyncio.wait_for(third, 1)
        assert second.cancelled() and pool.reserved == 70
        pool.release(60)
        pool.release(10)
        assert pool.reserved == 0

    asyncio.run(main())


def test_limits_that_could_never_take_the_largest_request_are_refused() -> None:
    with pytest.raises(ValueError, match=r"queued\.max\.request\.bytes"):
        ConnectionLimits(socket_request_max_bytes=1000, queued_max_request_bytes=999)
