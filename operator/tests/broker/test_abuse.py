"""Abuse on loopback while three real consumers keep their sessions: a thousand idle connections, fifty
stalled maximum-size requests and a slowloris on the HTTP API. Memory stays bounded, idle connections
are closed after connections.max.idle.ms, the slowloris after the HTTP API's request timeout, and the
consumers see no rebalance."""

from __future__ import annotations

import contextlib
import socket
import time
import urllib.request
from pathlib import Path

from staticfleet.broker.http import HTTP_REQUEST_TIMEOUT_S

from .processes import CoordinatorProcess, wait_until
from .test_real_clients import Fleet

IDLE_MS = 6_000
IDLE_CONNECTIONS = 1_000
STALLED_FRAMES = 50
SENT_PER_STALLED_FRAME = 4 * 1024 * 1024
MAX_REQUEST = 104_857_600  # socket.request.max.bytes, Kafka's default
QUEUED_MAX_REQUEST_BYTES = 128 * 1024 * 1024
RSS_GROWTH_BOUND_KIB = 96 * 1024
"""Documented in docs/reliability.md: buffered request bytes are bounded by queued.max.request.bytes
(128 MiB here; requests other than the oldest being read leave room for one largest request, so they
share 28 MiB), and a stalled request holds only what it sent (here 4 MiB); fifty of them unbounded
would hold 200 MiB."""
SLOWLORIS = 100
SLOWLORIS_ADDRESSES = 10
"""Ten slow HTTP clients per address: all held (under the per-address limit) until their timeout."""


def _open(port: int, count: int, sources: int = 1) -> list[socket.socket]:
    """`count` connections, spread over `sources` loopback addresses (127.0.1.1 and up when more than one:
    the HTTP API takes at most 16 connections from one address, and 127.0.0.1 is the health check's)."""
    sockets = []
    for i in range(count):
        source = "127.0.0.1" if sources == 1 else f"127.0.1.{1 + i % sources}"
        s = socket.create_connection(("127.0.0.1", port), timeout=5, source_address=(source, 0))
        sockets.append(s)
    return sockets


def _stall_max_size_frame(s: socket.socket) -> int:
    """Announce a request of the maximum size, send part of it, and stop."""
    s.sendall(MAX_REQUEST.to_bytes(4, "big"))
    s.setblocking(False)
    chunk = b"\x01" * 65536
    sent = 0
    with contextlib.suppress(BlockingIOError):
        while sent < SENT_PER_STALLED_FRAME:
            sent += s.send(chunk)
    return sent


def _closed_by_peer(s: socket.socket) -> bool:
    s.setblocking(False)
    try:
        return s.recv(1) == b""
    except BlockingIOError:
        return False
    except ConnectionError:
        return True


def test_idle_connections_stalled_frames_and_a_slowloris_leave_consumers_alone(tmp_path: Path) -> None:
    coordinator = CoordinatorProcess(
        tmp_path / "data",
        "--connections-max-idle-ms",
        str(IDLE_MS),
        "--queued-max-request-bytes",
        str(QUEUED_MAX_REQUEST_BYTES),
    )
    coordinator.start()
    fleet = Fleet(coordinator, "confluent")
    abusers: list[socket.socket] = []
    try:
        fleet.produce(30)
        for instance in ("c0", "c1", "c2"):
            fleet.start(instance)
        before = fleet.settled_with("c0", "c1", "c2")
        assignments = {i: len(c.of("assigned")) for i, c in fleet.consumers.items()}
        rss_before = coordinator.rss_kib()

        idle = _open(coordinator.port, IDLE_CONNECTIONS)
        stalled = _open(coordinator.port, STALLED_FRAMES)
        opened_at = time.monotonic()
        sent = sum(_stall_max_size_frame(s) for s in stalled)
        slow = _open(coordinator.http_port, SLOWLORIS, sources=SLOWLORIS_ADDRESSES)
        for s in slow:
            s.sendall(b"GET /api/groups HTTP/1.1\r\nHost: x\r\n")
        abusers = idle + stalled + slow
        peak = rss_before
        while time.monotonic() < opened_at + IDLE_MS / 1000 - 1:
            for s in slow:
                with contextlib.suppress(OSError):
                    s.send(b"X")  # one byte of a header that never ends
            peak = max(peak, coordinator.rss_kib())
            assert coordinator.api("/healthz") == {"status": "ok"}
            time.sleep(0.5)
        assert sent >= STALLED_FRAMES * 65536
        assert peak - rss_before < RSS_GROWTH_BOUND_KIB, f"RSS grew {peak - rss_before} KiB"

        # Past connections.max.idle.ms every idle connection and every stalled request is closed.
        wait_until(lambda: all(_closed_by_peer(s) for s in idle + stalled), 30, "idle connections closed")
        closed_after = time.monotonic() - opened_at
        assert closed_after >= IDLE_MS / 1000 - 0.5, f"closed after {closed_after:.1f} s, before the timeout"

        def slowloris_closed() -> bool:
            for s in slow:
                with contextlib.suppress(OSError):
                    s.send(b"X")  # still trickling: the header never ends
            return all(_closed_by_peer(s) for s in slow)

        # The HTTP API closes a request whose headers have not arrived within HTTP_REQUEST_TIMEOUT_S.
        wait_until(slowloris_closed, HTTP_REQUEST_TIMEOUT_S + 15, "slow HTTP requests closed", 0.5)
        http_closed_after = time.monotonic() - opened_at
        assert coordinator.api("/healthz") == {"status": "ok"}

        after = fleet.settled_with("c0", "c1", "c2")
        assert after["generation"] == before["generation"], "the abuse caused a rebalance"
        for instance, consumer in fleet.consumers.items():
            assert len(consumer.of("assigned")) == assignments[instance], consumer.describe()
        with urllib.request.urlopen(f"http://127.0.0.1:{coordinator.http_port}/metrics", timeout=5) as r:
            metrics = r.read().decode()
        idle_closed = sum(
            float(line.rpartition(" ")[2])
            for line in metrics.splitlines()
            if line.startswith('staticfleet_connections_closed_total{reason="idle"}')
        )
        assert idle_closed >= IDLE_CONNECTIONS + STALLED_FRAMES
        print(
            f"\n{IDLE_CONNECTIONS} idle connections, {STALLED_FRAMES} stalled {MAX_REQUEST}-byte requests"
            f" ({sent // 1024} KiB sent), {SLOWLORIS} slow HTTP requests: RSS {rss_before // 1024} MiB ->"
            f" peak {peak // 1024} MiB; idle ones closed after {closed_after:.1f} s, slow HTTP ones after"
            f" {http_closed_after:.1f} s; generation unchanged"
        )
    finally:
        for s in abusers:
            s.close()
        for consumer in fleet.consumers.values():
            consumer.stop()
        coordinator.stop()
