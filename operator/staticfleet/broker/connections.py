"""Connection accounting for the Kafka listener: how many connections, from where, how fast they come,
how long idle, and how many request bytes are buffered, with Kafka's setting names.

Every connection gets a `Connection` slot, or is refused at once (too many), or is held unread and then
closed (too fast from its address, as Kafka's ConnectionQuotas throttles an IP); the server reads each
request through it. Before a SASL login completes, a frame announcing more than
sasl.server.max.receive.size closes the connection before anything is read or reserved for it.

A request up to `SMALL_REQUEST_BYTES` is read straight away, so heartbeats and commits are never held
up by anyone else's large requests. A larger one is read a chunk at a time, each chunk reserved from a
pool shared by all connections (`queued.max.request.bytes`) before it is read, so a stalled sender holds
what it sent and at most one chunk more. While the pool has no room for its next chunk, a connection is
not read from (the kernel's socket buffer pushes back on the sender), as Kafka mutes a channel. The
oldest request being read may use the whole pool; the others leave room for one largest request
(socket.request.max.bytes), so that one can always finish and nothing waits on requests that never
will. So the request bytes the listener holds are bounded by about max.connections x 2 x
STREAM_BUFFER_BYTES (what a connection buffers before its reads pause) + queued.max.request.bytes.
"""

from __future__ import annotations

import asyncio
import collections
import ipaddress
import time
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Final

INT32_MAX: Final = 2**31 - 1
SMALL_REQUEST_BYTES: Final = 64 * 1024
CHUNK_BYTES: Final = 64 * 1024
"""How much of a large request is reserved and read at a time."""
STREAM_BUFFER_BYTES: Final = 256 * 1024
"""The stream reader's limit: a connection not being read from stops reading its socket once about
twice this much is buffered, so one waiting for the pool holds little (smaller costs throughput:
more pauses and resumes of reading)."""
SASL_SERVER_MAX_RECEIVE_SIZE: Final = 524_288
"""sasl.server.max.receive.size (Kafka's default): the largest frame read before a SASL login completes."""
QUOTA_SAMPLES: Final = 11
QUOTA_WINDOW_MS: Final = 1_000
"""quota.window.num and quota.window.size.seconds (Kafka's defaults): the connection rate is measured
over 11 one-second samples, and a throttled connection is held at most one window."""


@dataclass(frozen=True, slots=True)
class ConnectionLimits:
    max_connections: int = 4_096
    """max.connections (Kafka's default is unbounded; a file-descriptor-sized bound here)"""
    max_connections_per_ip: int = INT32_MAX
    """max.connections.per.ip (Kafka's default)"""
    max_connections_per_ip_overrides: Mapping[str, int] = field(default_factory=dict)
    """max.connections.per.ip.overrides: the limit for particular addresses (IP addresses here)"""
    connection_creation_rate: int = INT32_MAX
    """connection_creation_rate, Kafka's quota on the `ips` entity (its default entity here: one rate
    for every address): new connections per second from one address; a faster one is held unread
    and then closed, as Kafka throttles it (Kafka's default: unbounded)"""
    connections_max_idle_ms: int = 600_000
    """connections.max.idle.ms (Kafka's default): a connection not answering a request for this long
    is closed, including one whose request has been arriving (stalled) for this long"""
    socket_request_max_bytes: int = 104_857_600
    """socket.request.max.bytes (Kafka's default): the largest request; more closes the connection"""
    sasl_server_max_receive_size: int = SASL_SERVER_MAX_RECEIVE_SIZE
    """sasl.server.max.receive.size (Kafka's default): the largest frame before a SASL login completes;
    more closes the connection"""
    queued_max_request_bytes: int = 200 * 1024 * 1024
    """queued.max.request.bytes: request bytes above SMALL_REQUEST_BYTES buffered at once, all
    connections together (Kafka's default is unbounded)"""

    def __post_init__(self) -> None:
        if self.max_connections < 1 or self.max_connections_per_ip < 1:
            raise ValueError("max.connections and max.connections.per.ip must be at least 1")
        for address, count in self.max_connections_per_ip_overrides.items():
            try:
                ipaddress.ip_address(address)
            except ValueError:
                raise ValueError(
                    f"max.connections.per.ip.overrides: {address!r} is not an IP address"
                ) from None
            if count < 0:
                raise ValueError(f"max.connections.per.ip.overrides: {address} has a negative limit")
        if self.connection_creation_rate < 1:
            raise ValueError("connection_creation_rate must be at least 1")
        if self.connections_max_idle_ms < 1:
            raise ValueError("connections.max.idle.ms must be at least 1")
        if self.socket_request_max_bytes < 1:
            raise ValueError("socket.request.max.bytes must be at least 1")
        if self.sasl_server_max_receive_size < 1:
            raise ValueError("sasl.server.max.receive.size must be at least 1")
        if self.queued_max_request_bytes < self.socket_request_max_bytes:
            raise ValueError(
                f"queued.max.request.bytes {self.queued_max_request_bytes} must be at least "
                f"socket.request.max.bytes {self.socket_request_max_bytes}, or the largest request never fits"
            )

    def max_connections_from(self, ip: str) -> int:
        """The connection limit for `ip` (as the server writes it, "/1.2.3.4")."""
        return self.max_connections_per_ip_overrides.get(ip.lstrip("/"), self.max_connections_per_ip)


def parse_overrides(text: str) -> dict[str, int]:
    """max.connections.per.ip.overrides as Kafka writes it: "address:count,address:count"."""
    overrides: dict[str, int] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        address, sep, count = item.rpartition(":")
        if not sep or not count.strip().isdigit():
            raise ValueError(f"max.connections.per.ip.overrides: {item!r} is not address:count")
        overrides[str(ipaddress.ip_address(address.strip().strip("[]")))] = int(count)
    return overrides


class Reading:
    """One large request being read: the bytes it holds in the pool."""

    __slots__ = ("held",)

    def __init__(self) -> None:
        self.held = 0


class BytePool:
    """Bytes of large requests, reserved a chunk at a time as they are read and given back when the
    request is answered. The oldest request being read may fill the pool; the others leave room for
    one largest request, so the oldest can always finish; a chunk that fits is granted whoever waits."""

    def __init__(self, capacity: int, largest: int, chunk: int = CHUNK_BYTES) -> None:
        self.capacity = capacity
        self.largest = largest
        self.chunk = chunk
        self.reserved = 0
        self.grants = 0
        """Chunks granted so far (tests and metrics: did a connection take anything)."""
        self._reading: dict[Reading, None] = {}  # oldest first
        self._waiting: dict[Reading, tuple[int, asyncio.Future[None]]] = {}

    def open(self) -> Reading:
        reading = Reading()
        self._reading[reading] = None
        return reading

    def _fits(self, reading: Reading, size: int) -> bool:
        oldest = next(iter(self._reading), None)
        room = self.capacity if reading is oldest else self.capacity - self.largest
        return self.reserved + size <= room

    def _take(self, reading: Reading, size: int) -> None:
        reading.held += size
        self.reserved += size
        self.grants += 1

    async def take(self, reading: Reading, size: int) -> None:
        """Reserve `size` more bytes for `reading`, waiting while there is no room for them."""
        if self._fits(reading, size):
            self._take(reading, size)
            return
        waiter: asyncio.Future[None] = asyncio.get_running_loop().create_future()
        self._waiting[reading] = (size, waiter)
        try:
            await waiter
        except BaseException:
            if not (waiter.done() and not waiter.cancelled()):
                self._waiting.pop(reading, None)
            raise  # bytes granted just as we gave up stay held: `release` gives them back

    def finished_reading(self, reading: Reading) -> None:
        """The request is read: it no longer counts as being read (the next oldest may fill the pool)."""
        self._reading.pop(reading, None)
        self._grant()

    def abandon(self, reading: Reading) -> None:
        """The connection was closed while waiting for room: its wait ends with ConnectionAbortedError."""
        waiting = self._waiting.pop(reading, None)
        if waiting is not None and not waiting[1].done():
            waiting[1].set_exception(ConnectionAbortedError("closed while waiting for the request pool"))

    def release(self, reading: Reading) -> None:
        """The request was answered or abandoned: everything it held goes back."""
        self._reading.pop(reading, None)
        self._waiting.pop(reading, None)
        self.reserved -= reading.held
        reading.held = 0
        self._grant()

    def _grant(self) -> None:
        for reading, (size, waiter) in list(self._waiting.items()):
            if waiter.done():
                del self._waiting[reading]
            elif self._fits(reading, size):
                del self._waiting[reading]
                self._take(reading, size)
                waiter.set_result(None)


class ConnectionRate:
    """Kafka's connection rate of one address (a Rate over a SampledStat): new connections counted in
    up to 11 one-second samples, divided by their span, taken as at least ten windows."""

    def __init__(self) -> None:
        self._samples: collections.deque[list[float]] = collections.deque()  # [start, last event, count]
        self.last_ms = 0.0

    def record(self, now_ms: float, value: float = 1.0) -> None:
        self.last_ms = now_ms
        if not self._samples or now_ms - self._samples[-1][0] >= QUOTA_WINDOW_MS:
            if len(self._samples) > QUOTA_SAMPLES:
                self._samples.popleft()
            self._samples.append([now_ms, now_ms, 0.0])
        sample = self._samples[-1]
        sample[1] = now_ms
        sample[2] += value

    def _purge(self, now_ms: float) -> None:
        for sample in self._samples:
            if now_ms - sample[1] >= QUOTA_SAMPLES * QUOTA_WINDOW_MS:
                sample[:] = [now_ms, now_ms, 0.0]

    def window_ms(self, now_ms: float) -> float:
        self._purge(now_ms)
        oldest = min((sample[0] for sample in self._samples), default=now_ms)
        elapsed = now_ms - oldest
        full = int(elapsed // QUOTA_WINDOW_MS)
        if full < QUOTA_SAMPLES - 1:
            elapsed += (QUOTA_SAMPLES - 1 - full) * QUOTA_WINDOW_MS
        return max(elapsed, 1.0)

    def per_second(self, now_ms: float) -> float:
        self._purge(now_ms)
        total = sum(sample[2] for sample in self._samples)
        return total / (self.window_ms(now_ms) / 1000)

    def throttle_ms(self, now_ms: float, bound: int) -> float:
        """Record a new connection; if that puts the rate over `bound`, un-record it and return how long
        to hold it (Kafka's QuotaUtils.boundedThrottleTime: the time the rate needs to fall to the
        bound, at most one quota window); else 0."""
        self.record(now_ms)
        rate = self.per_second(now_ms)
        if rate <= bound:
            return 0.0
        self.record(now_ms, -1.0)
        return float(min(round((rate - bound) / bound * self.window_ms(now_ms)), QUOTA_WINDOW_MS))


@dataclass(frozen=True, slots=True)
class Refused:
    """A connection not admitted: closed at once, or after `hold_s` unread (a throttled one)."""

    reason: str
    hold_s: float = 0.0


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
    reading: Reading | None = None
    handling: bool = False
    """A request is being answered (a parked JoinGroup may take minutes): not idle."""
    close_reason: str = "client"
    close_detail: str = ""
    _open: bool = field(default=True, repr=False)

    async def read_request(self, reader: asyncio.StreamReader, *, logged_in: bool = True) -> bytes | None:
        """The next request frame, or None when the connection should close (see `close_reason`).
        Before a SASL login (`logged_in` false) frames are bounded by sasl.server.max.receive.size."""
        limits = self.registry.limits
        try:
            head = await reader.readexactly(4)
            size = int.from_bytes(head, "big", signed=True)
            largest = (
                limits.socket_request_max_bytes
                if logged_in
                else min(limits.sasl_server_max_receive_size, limits.socket_request_max_bytes)
            )
            if size <= 0 or size > largest:
                self.close_reason = "bad-size"
                self.close_detail = (
                    f"request size {size} out of bounds"
                    if logged_in or size <= 0 or size > limits.socket_request_max_bytes
                    else f"frame of {size} bytes before login (sasl.server.max.receive.size {largest})"
                )
                return None
            frame = await (
                reader.readexactly(size) if size <= SMALL_REQUEST_BYTES else self._read_large(reader, size)
            )
        except (asyncio.IncompleteReadError, ConnectionError):
            self.done_with_request()
            return None
        self.handling = True
        return frame

    async def _read_large(self, reader: asyncio.StreamReader, size: int) -> bytes:
        """Read a chunk at a time, each reserved first, so a stalled sender holds what it sent."""
        pool = self.registry.pool
        reading = self.reading = pool.open()
        chunks = []
        remaining = size
        while remaining:
            step = min(pool.chunk, remaining)
            await pool.take(reading, step)
            chunks.append(await reader.readexactly(step))
            remaining -= step
        pool.finished_reading(reading)
        return b"".join(chunks)

    def done_with_request(self) -> None:
        """The request was answered (or abandoned): its bytes are no longer held, the idle clock restarts."""
        self.handling = False
        self.answered += 1
        if self.reading is not None:
            self.registry.pool.release(self.reading)
            self.reading = None

    def close(self) -> None:
        if self._open:
            self._open = False
            self.done_with_request()
            self.registry._closed(self)


class ConnectionRegistry:
    def __init__(self, limits: ConnectionLimits | None = None) -> None:
        self.limits = limits or ConnectionLimits()
        self.pool = BytePool(self.limits.queued_max_request_bytes, self.limits.socket_request_max_bytes)
        self.connections: set[Connection] = set()
        self.per_ip: collections.Counter[str] = collections.Counter()
        self.refused: collections.Counter[str] = collections.Counter()
        self.rates: dict[str, ConnectionRate] = {}
        self._rates_pruned_ms = 0.0
        self._sweeper: asyncio.Task[None] | None = None

    def admit(
        self, ip: str, writer: asyncio.StreamWriter, *, now_ms: float | None = None
    ) -> Connection | Refused:
        """A slot for a new connection from `ip`, or why not, in Kafka's order (ConnectionQuotas.inc):
        the address's connection rate first (a connection over it is not counted), then its count."""
        limits = self.limits
        if len(self.connections) >= limits.max_connections:
            self.refused["max-connections"] += 1
            return Refused("refused")
        if limits.connection_creation_rate < INT32_MAX:
            now = time.monotonic() * 1000 if now_ms is None else now_ms
            self._prune_rates(now)
            rate = self.rates.get(ip)
            if rate is None:
                rate = self.rates[ip] = ConnectionRate()
            throttle_ms = rate.throttle_ms(now, limits.connection_creation_rate)
            if throttle_ms > 0:
                self.refused["connection-creation-rate"] += 1
                return Refused("throttled", throttle_ms / 1000)
        if self.per_ip[ip] >= limits.max_connections_from(ip):
            self.refused["max-connections-per-ip"] += 1
            return Refused("refused")
        connection = Connection(self, ip, writer)
        self.connections.add(connection)
        self.per_ip[ip] += 1
        if self._sweeper is None or self._sweeper.done():
            self._sweeper = asyncio.get_running_loop().create_task(self._sweep_idle())
        return connection

    def _prune_rates(self, now_ms: float) -> None:
        """Forget addresses with no new connection for the whole measured span (so many addresses
        cost memory only while they keep connecting)."""
        span = QUOTA_SAMPLES * QUOTA_WINDOW_MS
        if now_ms - self._rates_pruned_ms < span:
            return
        self._rates_pruned_ms = now_ms
        for ip in [ip for ip, rate in self.rates.items() if now_ms - rate.last_ms >= span]:
            del self.rates[ip]

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
                if connection.reading is not None:
                    self.pool.abandon(connection.reading)  # a read waiting for room would not see the abort
