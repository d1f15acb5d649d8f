"""The HTTP API against slow and abusive clients, over real loopback sockets: a header that never ends,
a connection that sends nothing, a body that trickles and an idle keep-alive connection are all closed
after a bounded time; connections over the per-address limit are closed at once, and at the overall cap
a new connection (a probe) closes the oldest of the busiest address; a TLS handshake that never finishes
is dropped. Slow clients connect from other loopback addresses (127.0.0.2 and up). Timeouts are
shortened here so the loops stay short; each loop is bounded."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import pytest

from conformance.certs import CertificateAuthority
from staticfleet.broker.host import CoordinatorHost
from staticfleet.broker.http import HttpApi, start_http
from staticfleet.broker.metrics import BrokerMetrics
from staticfleet.coordinator import CoordinatorConfig, ManualClock

TIMEOUT_S = 0.5
LINGER_S = 0.3
GIVE_UP_S = 15.0
"""How long a test waits for the server to close a connection before it fails (bounds every loop)."""


@asynccontextmanager
async def http_api(
    tmp_path: Path,
    *,
    max_connections: int = 16,
    per_address: int = 16,
    timeout_s: float = TIMEOUT_S,
    tls: ssl.SSLContext | None = None,
) -> AsyncIterator[HttpApi]:
    host = CoordinatorHost(tmp_path / "data", CoordinatorConfig(), clock=ManualClock())
    await host.start()
    api = await start_http(
        host,
        BrokerMetrics(),
        lambda: True,
        "127.0.0.1",
        0,
        tls=tls,
        request_timeout_s=timeout_s,
        linger_s=LINGER_S,
        max_connections=max_connections,
        max_connections_per_address=per_address,
    )
    try:
        yield api
    finally:
        await api.cleanup()
        await host.close()


async def closed_while(
    reader: asyncio.StreamReader, keep_sending: Callable[[], Awaitable[None]] | None = None
) -> bytes:
    """Keeps sending (a byte every 50 ms) until the server closes the connection; returns what it
    answered meanwhile. Fails if the server keeps the connection open for GIVE_UP_S."""
    received = b""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + GIVE_UP_S
    while loop.time() < deadline:
        if keep_sending is not None:
            try:
                await keep_sending()
            except ConnectionError:
                return received
        try:
            chunk = await asyncio.wait_for(reader.read(65536), 0.05)
        except TimeoutError:
            continue
        except ConnectionError:
            return received
        if not chunk:
            return received
        received += chunk
    raise AssertionError(f"the server kept the connection open for {GIVE_UP_S} s")


async def get(port: int, path: str = "/healthz", source: str = "127.0.0.1") -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port, local_addr=(source, 0))
    writer.write(f"GET {path} HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
    answer = await asyncio.wait_for(reader.read(), 5)
    writer.close()
    return answer


def trickle(writer: asyncio.StreamWriter, byte: bytes) -> Callable[[], Awaitable[None]]:
    async def send() -> None:
        writer.write(byte)
        await writer.drain()

    return send


def test_a_header_that_never_ends_is_closed_and_other_clients_are_served(tmp_path: Path) -> None:
    async def run() -> None:
        async with http_api(tmp_path) as api:
            reader, writer = await asyncio.open_connection("127.0.0.1", api.port)
            writer.write(b"GET /api/groups HTTP/1.1\r\nHost: x\r\nX-Slow: ")
            served = asyncio.create_task(get(api.port))
            assert await closed_while(reader, trickle(writer, b"a")) == b"", "closed without an answer"
            assert (await served).startswith(b"HTTP/1.1 200")
            writer.close()

    asyncio.run(run())


def test_a_connection_that_sends_nothing_is_closed(tmp_path: Path) -> None:
    async def run() -> None:
        async with http_api(tmp_path) as api:
            reader, writer = await asyncio.open_connection("127.0.0.1", api.port)
            assert await closed_while(reader) == b""
            writer.close()

    asyncio.run(run())


def test_a_body_that_trickles_is_answered_then_cut_off(tmp_path: Path) -> None:
    async def run() -> None:
        async with http_api(tmp_path) as api:
            reader, writer = await asyncio.open_connection("127.0.0.1", api.port)
            writer.write(b"POST /api/groups HTTP/1.1\r\nHost: x\r\nContent-Length: 1000000\r\n\r\n")
            answered = await closed_while(reader, trickle(writer, b"b"))
            assert answered.startswith(b"HTTP/1.1 405"), answered[:80]
            writer.close()

    asyncio.run(run())


def test_an_idle_keep_alive_connection_is_closed_after_its_answer(tmp_path: Path) -> None:
    async def run() -> None:
        async with http_api(tmp_path) as api:
            reader, writer = await asyncio.open_connection("127.0.0.1", api.port)
            writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            answered = await closed_while(reader)
            assert answered.startswith(b"HTTP/1.1 200") and b'"ok"' in answered
            writer.close()

    asyncio.run(run())


async def slow_clients(
    port: int, count: int, source: str
) -> list[tuple[asyncio.StreamReader, asyncio.StreamWriter]]:
    """`count` connections from `source` (another loopback address) that send half a request head."""
    held = []
    for _ in range(count):
        reader, writer = await asyncio.open_connection("127.0.0.1", port, local_addr=(source, 0))
        writer.write(b"GET /healthz HTTP/1.1\r\n")
        held.append((reader, writer))
    await asyncio.sleep(0.05)
    return held


async def closed_at_once(reader: asyncio.StreamReader) -> bool:
    try:
        return await asyncio.wait_for(reader.read(), 2) == b""
    except ConnectionError:
        return True


def test_connections_over_the_per_address_limit_are_closed_at_once_and_others_served(tmp_path: Path) -> None:
    async def run() -> None:
        # A long request timeout: whatever closes here is the limit, not the slow clients' timeout.
        async with http_api(tmp_path, per_address=3, timeout_s=60) as api:
            slow = await slow_clients(api.port, 3, "127.0.0.2")
            over, over_writer = await asyncio.open_connection(
                "127.0.0.1", api.port, local_addr=("127.0.0.2", 0)
            )
            assert await closed_at_once(over), "a fourth from the same address is closed at once"
            over_writer.close()
            assert (await get(api.port)).startswith(b"HTTP/1.1 200"), "another address is served"
            assert api.cap.refused == 1 and api.cap.evicted == 0
            for _, writer in slow:
                writer.close()

    asyncio.run(run())


def test_at_the_cap_a_probe_closes_the_oldest_connection_of_the_busiest_address(tmp_path: Path) -> None:
    async def run() -> None:
        async with http_api(tmp_path, max_connections=4, timeout_s=60) as api:
            busiest = await slow_clients(api.port, 3, "127.0.0.2")
            other = await slow_clients(api.port, 1, "127.0.0.3")
            assert (await get(api.port)).startswith(b"HTTP/1.1 200"), "the probe got in"
            assert await closed_at_once(busiest[0][0]), "the busiest address's oldest made room"
            assert api.cap.evicted == 1 and api.cap.refused == 0
            for reader, _ in busiest[1:] + other:
                with pytest.raises(TimeoutError):
                    await asyncio.wait_for(reader.read(), 0.2)  # still open
            for _, writer in busiest + other:
                writer.close()

    asyncio.run(run())


def test_probes_get_in_while_many_slow_clients_hold_connections(tmp_path: Path) -> None:
    async def run() -> None:
        async with http_api(tmp_path, max_connections=32, per_address=8, timeout_s=60) as api:
            slow = []
            for source in range(2, 12):  # 10 addresses x 8 = 80 slow connections for 32 slots
                slow += await slow_clients(api.port, 8, f"127.0.0.{source}")
            answers = [await get(api.port) for _ in range(20)]
            assert all(answer.startswith(b"HTTP/1.1 200") for answer in answers)
            for _, writer in slow:
                writer.close()

    asyncio.run(run())


def test_a_tls_handshake_that_never_finishes_is_dropped_and_does_not_hold_a_slot(tmp_path: Path) -> None:
    ca = CertificateAuthority.create(tmp_path / "ca")
    server = ca.server()
    tls = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    tls.load_cert_chain(server.cert, server.key)
    client = ssl.create_default_context(cafile=str(ca.cert_file))

    async def run() -> None:
        async with http_api(tmp_path, max_connections=2, tls=tls) as api:
            stuck = [await asyncio.open_connection("127.0.0.1", api.port) for _ in range(2)]
            stuck[0][1].write(b"\x16\x03\x01\x02\x00")  # a ClientHello that never comes
            for reader, writer in stuck:
                assert await closed_while(reader) == b""
                writer.close()
            reader, writer = await asyncio.open_connection(
                "127.0.0.1", api.port, ssl=client, server_hostname="127.0.0.1"
            )
            writer.write(b"GET /healthz HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
            assert (await asyncio.wait_for(reader.read(), 5)).startswith(b"HTTP/1.1 200")
            writer.close()

    asyncio.run(run())
