"""Connection accounting for the Kafka listener: how many connections, from where, how long idle, and
how many request bytes are buffered, with Kafka's setting names.

Every connection gets a `Connection` slot (or is refused at once); the server reads each request
through it. A request up to `SMALL_REQUEST_BYTES` is read straight away, so heartbeats and commits are
never held up by anyone else's large requests; a larger one first reserves its size from a pool shared
by all connections (`queued.max.request.bytes`), and while the pool is spent the connection is not
read from (the kernel's socket buffer pushes back on the sender), as Kafka mutes a channel. So the
request bytes the listener holds are bounded by about max.connections x 2 x STREAM_BUFFER_BYTES (what a
connection buffers before its reads pause) + queued.max.request.bytes.
"""

from __future__ import annotations

import asyncio
import collections
import time
from dataclasses import dataclass, field
from typing import Final

INT32_MAX: Final = 2**31 - 1
SMALL_REQUEST_BYTES: Final = 64 * 1024
STREAM_BUFFER_BYTES: Final = 256 * 1024
"""The stream reader's limit: a connection not being read from stops reading its socket once about
twice this much is buffered, so one waiting for the pool holds little (smaller costs throughput:
more pauses and resumes of reading)."""


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    max_connections: int = 4_096
    """max.connections (Kafka's default is unbounded; a file-descriptor-sized bound here)"""
    max_connections_per_ip: int = INT32_MAX
    """max.connections.per.ip (Kafka's default)"""
    connections_max_idle_ms: int = 600_000
    """connections.max.idle.ms (Kafka's default): a connection not answering a request for this long
    is closed, including one whose request has been arriving (stalled) for this long"""
    socket_request_max_bytes: int = 104_857_600
    """socket.request.max.bytes (Kafka's default): the largest request; more closes the connection"""
    queued_max_request_bytes: int = 200 * 1024 * 1024
    """queued.max.request.bytes: request bytes above SMALL_REQUEST_BYTES buffered at once, all
    connections together (Kafka's default is unbounded)"""

    def __post_init__(self) -> None:
        if self.max_connections < 1 or self.max_connections_per_ip < 1:
            raise ValueError("max.connections and max.connections.per.ip must be at least 1")
        if self.connections_max_idle_ms < 1:
            raise ValueError("connections.max.idle.ms must be at least 1")
        if self.socket_request_max_bytes < 1:
            raise ValueError("socket.request.max.bytes must be at least 1")
        if self.queued_max_request_bytes < self.socket_request_max_bytes:
            raise ValueError(
                f"queued.max.request.bytes {self.queued_max_request_bytes} must be at least "
                f"socket.request.max.bytes {self.socket_request_max_bytes}, or the largest request never fits"
            )


class BytePool:
    """Bytes reserved for large requests being read or handled; reservations wait in arrival order."""

    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.reserved = 0
        self._waiting: collections.deque[tuple[int, asyncio.Future[None]]] = collections.deque()

    async def reserve(self, size: int) -> None:
        if not self._waiting and self.reserved + size <= self.capacity:
            self.reserved += size
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting.append((size, waiter))
        try:
            await waiter
        except BaseException:
            if waiter.done() and not waiter.cancelled():
                self.release(size)  # granted just as we gave up
            else:
                self._waiting.remove((size, waiter))
                self._grant()
            raise

    def release(self, size: int) -> None:
        self.reserved -= size
        self._grant()

    def _grant(self) -> None:
        while self._waiting and self.reserved + self._waiting[0][0] <= self.capacity:
            size, waiter = self._waiting.popleft()
            if not waiter.done():
                self.reserved += size
                waiter.set_result(None)


@dataclass(eq=False)
class Connection:
    """One admitted connection: reads its requests within the limits."""

    registry: ConnectionRegistry
    ip: str
    writer: asyncio.StreamWriter
    answered: int = 0
    """Requests answered so far: the sweeper watches this move (cheaper than a clock per request)."""
    idle_since: float = field(default_factory=time.monotonic)
    """When the sweeper last saw the connection answer a request (or when it opened)."""
    seen_answered: int = 0
    reserved: int = 0
    handling: bool = False
    """A request is being answered (a parked JoinGroup may take minutes): not idle."""
    close_reason: str = "client"
    _open: bool = field(default=True, repr=False)

    async def read_request(self, reader: asyncio.StreamReader) -> bytes | None:
        """The next request frame, or None when the connection should close (see `close_reason`)."""
        limits = self.registry.limits
        try:
            head = await reader.readexactly(4)
            size = int.from_bytes(head, "big", signed=True)
            if size <= 0 or size > limits.socket_request_max_bytes:
                self.close_reason = "bad-size"
                return None
            if size > SMALL_REQUEST_BYTES:
                await self.registry.pool.reserve(size)
                self.reserved = size
            frame = await reader.readexactly(size)
        except (asyncio.IncompleteReadError, ConnectionError):
            self.done_with_request()
            return None
        self.handling = True
        return frame

    def done_with_request(self) -> None:
        """The request was answered (or abandoned): its bytes are no longer held, the idle clock restarts."""
        self.handling = False
        self.answered += 1
        if self.reserved:
            self.registry.pool.release(self.reserved)
            self.reserved = 0

    def close(self) -> None:
        if self._open:
            self._open = False
            self.done_with_request()
            self.registry._closed(self)


class ConnectionRegistry:
    def __init__(self, limits: ConnectionLimits | None = None) -> None:
        self.limits = limits or ConnectionLimits()
        self.pool = BytePool(self.limits.queued_max_request_bytes)
        self.connections: set[Connection] = set()
        self.per_ip: collections.Counter[str] = collections.Counter()
        self.refused: collections.Counter[str] = collections.Counter()
        self._sweeper: asyncio.Task[None] | None = None

    def admit(self, ip: str, writer: asyncio.StreamWriter) -> Connection | None:
        """A slot for a new connection from `ip`, or None (refused: close it)."""
        limits = self.limits
        if len(self.connections) >= limits.max_connections:
            self.refused["max-connections"] += 1
            return None
        if self.per_ip[ip] >= limits.max_connections_per_ip:
            self.refused["max-connections-per-ip"] += 1
            return None
        connection = Connection(self, ip, writer)
        self.connections.add(connection)
        self.per_ip[ip] += 1
        if self._sweeper is None or self._sweeper.done():
            self._sweeper = asyncio.get_running_loop().create_task(self._sweep_idle())
        return connection

    def _closed(self, connection: Connection) -> None:
        self.connections.discard(connection)
        self.per_ip[connection.ip] -= 1
        if not self.per_ip[connection.ip]:
            del self.per_ip[connection.ip]

    async def _sweep_idle(self) -> None:
        """Close connections idle for connections.max.idle.ms, checking a few times per period (one
        task for all connections: no timer per request on the hot path)."""
        idle_s = self.limits.connections_max_idle_ms / 1000
        while self.connections:
            await asyncio.sleep(min(idle_s / 4, 1.0))
            now = time.monotonic()
            idle = []
            for connection in self.connections:
                if connection.handling or connection.answered != connection.seen_answered:
                    connection.seen_answered = connection.answered
                    connection.idle_since = now
                elif now - connection.idle_since >= idle_s:
                    idle.append(connection)
            for connection in idle:
                connection.close_reason = "idle"
                connection.idle_since = float("inf")  # once
                connection.writer.transport.abort()
