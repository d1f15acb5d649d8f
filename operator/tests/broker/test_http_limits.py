"""The HTTP API against slow and abusive clients, over real loopback sockets: a header that never ends,
a connection that sends nothing, a body that trickles and an idle keep-alive connection are all closed
after a bounded time; connections over the cap are closed at once; a TLS handshake that never finishes
is dropped. Timeouts are shortened here so the loops stay short; each loop is bounded."""

from __future__ import annotations

import asyncio
import ssl
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path

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
    tmp_path: Path, *, max_connections: int = 16, tls: ssl.SSLContext | None = None
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
        request_timeout_s=TIMEOUT_S,
        linger_s=LINGER_S,
        max_connections=max_connections,
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


async def get(port: int, path: str = "/healthz") -> bytes:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
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


def test_connections_over_the_cap_are_closed_at_once_until_slow_ones_time_out(tmp_path: Path) -> None:
    async def run() -> None:
        async with http_api(tmp_path, max_connections=4) as api:
            slow = [await asyncio.open_connection("127.0.0.1", api.port) for _ in range(4)]
            for _, writer in slow:
                writer.write(b"GET /healthz HTTP/1.1\r\n")
            await asyncio.sleep(0.05)
            over, over_writer = await asyncio.open_connection("127.0.0.1", api.port)
            assert await asyncio.wait_for(over.read(), 1) == b"", "over the cap: closed at once"
            over_writer.close()
            for reader, writer in slow:
                assert await closed_while(reader) == b""
                writer.close()
            assert (await get(api.port)).startswith(b"HTTP/1.1 200"), "room again once they are gone"

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
