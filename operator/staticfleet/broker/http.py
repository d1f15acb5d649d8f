"""The coordinator's HTTP API: health, readiness, Prometheus metrics and a JSON view of the groups.

GET /healthz            200 while the process serves HTTP
GET /readyz             200 once the coordinator recovered its log and listens for Kafka clients
GET /metrics            Prometheus text format
GET /api/groups         the groups, summarised, a page at a time (`limit`, `continue`: group_pages.py)
GET /api/groups/{id}    one group: members with instance ids and decoded partitions, recent rebalances

Bounded against slow and abusive clients. aiohttp has no header-read timeout of its own, but its
keep-alive timer starts when a connection opens and again after each answer, and bytes that arrive in
between do not push it back: so `keepalive_timeout` bounds both the time to deliver a request's headers
(a slowloris that trickles a header that never ends is closed) and how long an idle connection stays.
The rest of a request body is read for at most `lingering_time` after the answer (no handler reads
bodies), so a body that trickles is cut off too. Open connections are capped, in all and per client
address, so the HTTP API cannot take the file descriptors the Kafka listeners need, and at the cap a new
connection closes the oldest of the busiest address (ConnectionCap), so a kubelet's probe always gets in
however many slow clients hold connections; a TLS handshake must finish in time.
"""

from __future__ import annotations

import asyncio
import ssl
from collections import Counter
from collections.abc import Callable
from typing import TypeVar

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from staticfleet.broker.group_pages import (
    BadPageRequest,
    GroupListings,
    ListingGone,
    group_detail,
    parse_limit,
    render_page,
)
from staticfleet.broker.host import CoordinatorHost
from staticfleet.broker.metrics import BrokerMetrics
from staticfleet.broker.security.http_auth import TokenSource, bearer_middleware

_T = TypeVar("_T")

HTTP_REQUEST_TIMEOUT_S = 15.0
"""A request's headers must arrive within this long of the connection opening or of its last answer;
a connection idle this long is closed."""
HTTP_LINGER_S = 5.0
"""After the answer, the rest of a request body is read (and dropped) for at most this long."""
MAX_HTTP_CONNECTIONS = 128
"""Open HTTP connections (TLS handshakes in progress included) at most."""
MAX_HTTP_CONNECTIONS_PER_ADDRESS = 16
"""Open HTTP connections from one client address at most; another from it is closed at once."""


class HttpApi:
    def __init__(
        self, runner: web.AppRunner, listener: asyncio.Server, port: int, cap: ConnectionCap
    ) -> None:
        self.runner = runner
        self.listener = listener
        self.port = port
        self.cap = cap

    async def cleanup(self) -> None:
        self.listener.close()
        await self.runner.cleanup()


class _Refused(asyncio.Protocol):
    """A connection over the cap: closed as soon as it is made."""

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        transport.close()


class _Counted(asyncio.Protocol):
    """aiohttp's request handler for one connection, seen by the cap from accept to close. A connection
    the cap refuses once its address is known never reaches aiohttp."""

    def __init__(self, cap: ConnectionCap, handler: asyncio.Protocol) -> None:
        self._cap = cap
        self._handler = handler
        self._transport: asyncio.BaseTransport | None = None

    def connection_made(self, transport: asyncio.BaseTransport) -> None:
        peer = transport.get_extra_info("peername")
        address = str(peer[0]) if isinstance(peer, tuple) and peer else ""
        if not self._cap.made(self, address):
            transport.close()
            return
        self._transport = transport
        self._handler.connection_made(transport)

    def evict(self) -> None:
        if isinstance(self._transport, asyncio.Transport):
            self._transport.abort()
        elif self._transport is not None:
            self._transport.close()

    def connection_lost(self, exc: Exception | None) -> None:
        self._cap.lost(self)
        if self._transport is not None:
            self._handler.connection_lost(exc)

    def data_received(self, data: bytes) -> None:
        if self._transport is not None:
            self._handler.data_received(data)

    def eof_received(self) -> bool | None:
        return self._handler.eof_received() if self._transport is not None else None

    def pause_writing(self) -> None:
        self._handler.pause_writing()

    def resume_writing(self) -> None:
        self._handler.resume_writing()


def eviction_victim(open_connections: dict[_T, str]) -> _T | None:
    """The connection to close so that a new one fits: the oldest of the address holding the most (the
    dict is in the order the connections opened). A flood from a few addresses makes room for anyone
    else's probe out of its own connections."""
    per_address = Counter(open_connections.values())
    if not per_address:
        return None
    busiest = max(per_address, key=lambda address: per_address[address])
    return next(connection for connection, address in open_connections.items() if address == busiest)


class ConnectionCap:
    """The listener's protocol factory. At most `per_address` connections from one address: another is
    closed at once. At most `limit` open or in their TLS handshake (a handshake that fails never reaches
    `connection_made`; it stops counting when it must have ended): at the limit a new connection closes
    the oldest of the busiest address (eviction_victim), so slow clients cannot keep a kubelet's probe out;
    only when every slot is a handshake in progress is the new one refused."""

    def __init__(self, server: web.Server, limit: int, per_address: int, handshake_timeout_s: float) -> None:
        self._server = server
        self._limit = limit
        self._per_address = per_address
        self._handshake_timeout_s = handshake_timeout_s
        self._starting: dict[_Counted, float] = {}
        self._open: dict[_Counted, str] = {}
        self.refused = 0
        self.evicted = 0

    def __call__(self) -> asyncio.BaseProtocol:
        now = asyncio.get_running_loop().time()
        for connection, deadline in list(self._starting.items()):
            if deadline < now:
                del self._starting[connection]
        if len(self._open) + len(self._starting) >= self._limit:
            victim = eviction_victim(self._open)
            if victim is None:
                self.refused += 1
                return _Refused()
            del self._open[victim]
            self.evicted += 1
            victim.evict()
        connection = _Counted(self, self._server())
        self._starting[connection] = now + self._handshake_timeout_s
        return connection

    def made(self, connection: _Counted, address: str) -> bool:
        """Whether the connection, its address now known, is served."""
        self._starting.pop(connection, None)
        if sum(1 for held in self._open.values() if held == address) >= self._per_address:
            self.refused += 1
            return False
        self._open[connection] = address
        return True

    def lost(self, connection: _Counted) -> None:
        self._starting.pop(connection, None)
        self._open.pop(connection, None)


async def start_http(
    coordinator_host: CoordinatorHost,
    metrics: BrokerMetrics,
    is_ready: Callable[[], bool],
    host: str,
    port: int,
    *,
    token: TokenSource | None = None,
    tls: ssl.SSLContext | None = None,
    request_timeout_s: float = HTTP_REQUEST_TIMEOUT_S,
    linger_s: float = HTTP_LINGER_S,
    max_connections: int = MAX_HTTP_CONNECTIONS,
    max_connections_per_address: int = MAX_HTTP_CONNECTIONS_PER_ADDRESS,
    listings: GroupListings | None = None,
) -> HttpApi:
    """The HTTP API; with `token`, /api/* and /metrics need it as a bearer token (probes stay open)."""
    coordinator = coordinator_host.coordinator
    group_listings = listings if listings is not None else GroupListings()

    async def healthz(request: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def readyz(request: web.Request) -> web.Response:
        if is_ready():
            return web.json_response(
                {"status": "ready", "recoveredRecords": coordinator_host.recovered_records}
            )
        return web.json_response({"status": "recovering"}, status=503)

    async def metrics_text(request: web.Request) -> web.Response:
        body = generate_latest(metrics.registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    # One view is built at a time, so however many clients read, the Kafka listener waits behind one
    # chunk of one view at most.
    building = asyncio.Lock()

    async def groups(request: web.Request) -> web.Response:
        try:
            limit = parse_limit(request.query.get("limit"))
        except BadPageRequest as exc:
            return web.json_response({"error": str(exc)}, status=400)
        async with building:
            try:
                page = group_listings.page(
                    lambda: list(coordinator.groups), limit, request.query.get("continue")
                )
            except BadPageRequest as exc:
                return web.json_response({"error": str(exc)}, status=400)
            except ListingGone as exc:
                return web.json_response({"error": str(exc)}, status=410)
            body = await render_page(coordinator.groups, page)
        return web.Response(text=body, content_type="application/json")

    async def group(request: web.Request) -> web.Response:
        group_id = request.match_info["group_id"]
        async with building:
            found = coordinator.groups.get(group_id)
            if found is None:
                return web.json_response({"error": f"group {group_id} not found"}, status=404)
            detail = await group_detail(coordinator, found)
        return web.json_response(detail)

    app = web.Application(middlewares=[bearer_middleware(token)] if token is not None else [])
    app.add_routes(
        [
            web.get("/healthz", healthz),
            web.get("/readyz", readyz),
            web.get("/metrics", metrics_text),
            web.get("/api/groups", groups),
            web.get("/api/groups/{group_id}", group),
        ]
    )
    runner = web.AppRunner(app, access_log=None, keepalive_timeout=request_timeout_s, lingering_time=linger_s)
    await runner.setup()
    assert runner.server is not None
    cap = ConnectionCap(runner.server, max_connections, max_connections_per_address, request_timeout_s)
    listener = await asyncio.get_running_loop().create_server(
        cap,
        host or None,
        port,
        ssl=tls,
        ssl_handshake_timeout=request_timeout_s if tls is not None else None,
        reuse_address=True,
    )
    return HttpApi(runner, listener, listener.sockets[0].getsockname()[1], cap)
