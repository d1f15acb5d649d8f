"""The coordinator's HTTP API: health, readiness, Prometheus metrics and a JSON view of the groups.

GET /healthz            200 while the process serves HTTP
GET /readyz             200 once the coordinator recovered its log and listens for Kafka clients
GET /metrics            Prometheus text format
GET /api/groups         every group, summarised
GET /api/groups/{id}    one group: members with instance ids and decoded partitions, recent rebalances
"""

from __future__ import annotations

import ssl
from collections.abc import Callable

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from staticfleet.broker.host import CoordinatorHost
from staticfleet.broker.metrics import BrokerMetrics
from staticfleet.broker.security.http_auth import TokenSource, bearer_middleware
from staticfleet.coordinator.group_view import CoordinatorGroupView


class HttpApi:
    def __init__(self, runner: web.AppRunner, port: int) -> None:
        self.runner = runner
        self.port = port

    async def cleanup(self) -> None:
        await self.runner.cleanup()


async def start_http(
    coordinator_host: CoordinatorHost,
    metrics: BrokerMetrics,
    is_ready: Callable[[], bool],
    host: str,
    port: int,
    *,
    token: TokenSource | None = None,
    tls: ssl.SSLContext | None = None,
) -> HttpApi:
    """The HTTP API; with `token`, /api/* and /metrics need it as a bearer token (probes stay open)."""
    coordinator = coordinator_host.coordinator

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

    async def groups(request: web.Request) -> web.Response:
        views = [CoordinatorGroupView.of(coordinator, g) for g in list(coordinator.groups.values())]
        return web.json_response({"groups": [v.to_json(detail=False) for v in views]})

    async def group(request: web.Request) -> web.Response:
        group_id = request.match_info["group_id"]
        found = coordinator.groups.get(group_id)
        if found is None:
            return web.json_response({"error": f"group {group_id} not found"}, status=404)
        return web.json_response(CoordinatorGroupView.of(coordinator, found).to_json())

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
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port, ssl_context=tls)
    await site.start()
    sockets = getattr(site._server, "sockets", None) or []
    bound = sockets[0].getsockname()[1] if sockets else port
    return HttpApi(runner, bound)
