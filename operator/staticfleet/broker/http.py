"""The coordinator's HTTP API: health, readiness, Prometheus metrics and a JSON view of the groups.

GET /healthz            200 while the process serves HTTP
GET /readyz             200 once the coordinator recovered its log and listens for Kafka clients
GET /metrics            Prometheus text format
GET /api/groups         every group, summarised
GET /api/groups/{id}    one group: members with instance ids and decoded partitions, recent rebalances
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from aiohttp import web
from prometheus_client import CONTENT_TYPE_LATEST, generate_latest

from staticfleet.coordinator import EXPECTED_INSTANCE_IDS, GroupCoordinator
from staticfleet.coordinator.consumer_protocol import assignment_partitions, subscribed_topics
from staticfleet.coordinator.group import ClassicGroup

if TYPE_CHECKING:
    from staticfleet.broker.server import BrokerServer


def group_summary(group: ClassicGroup) -> dict[str, Any]:
    leader = group.members.get(group.leader_id) if group.leader_id else None
    last = group.rebalances[-1] if group.rebalances else None
    return {
        "groupId": group.group_id,
        "state": str(group.state),
        "generation": group.generation_id,
        "protocolType": group.protocol_type or "",
        "protocol": group.protocol_name,
        "leader": group.leader_id,
        "leaderInstanceId": leader.group_instance_id if leader else None,
        "members": len(group.members),
        "rebalances": group.rebalance_count,
        "lastRebalance": None
        if last is None
        else {
            "generation": last.generation,
            "reason": last.reason,
            "startedMs": last.started_ms,
            "completedMs": last.completed_ms,
            "durationMs": last.duration_ms,
        },
    }


def group_detail(coordinator: GroupCoordinator, group: ClassicGroup) -> dict[str, Any]:
    detail = group_summary(group)
    consumer = group.protocol_type == "consumer"
    members = []
    for m in group.members.values():
        entry: dict[str, Any] = {
            "memberId": m.member_id,
            "instanceId": m.group_instance_id,
            "clientId": m.client_id,
            "clientHost": m.client_host,
            "sessionTimeoutMs": m.session_timeout_ms,
            "rebalanceTimeoutMs": m.rebalance_timeout_ms,
        }
        if consumer:
            entry["partitions"] = assignment_partitions(m.assignment)
            if group.protocol_name:
                topics = subscribed_topics(m.metadata(group.protocol_name))
                entry["subscription"] = sorted(topics) if topics is not None else None
        members.append(entry)
    detail["memberList"] = members
    detail["rebalanceInProgress"] = (
        None
        if group.rebalance_started_ms is None
        else {"reason": group.rebalance_reason, "startedMs": group.rebalance_started_ms}
    )
    detail["recentRebalances"] = [
        {
            "generation": r.generation,
            "reason": r.reason,
            "startedMs": r.started_ms,
            "completedMs": r.completed_ms,
            "durationMs": r.duration_ms,
            "members": r.members,
        }
        for r in group.rebalances
    ]
    expected = coordinator.describe_group_config(group.group_id).get(EXPECTED_INSTANCE_IDS)
    detail["expectedInstanceIds"] = expected.split(",") if expected else []
    return detail


class HttpApi:
    def __init__(self, runner: web.AppRunner, port: int) -> None:
        self.runner = runner
        self.port = port

    async def cleanup(self) -> None:
        await self.runner.cleanup()


async def start_http(server: BrokerServer, host: str, port: int) -> HttpApi:
    coordinator = server.host.coordinator

    async def healthz(request: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def readyz(request: web.Request) -> web.Response:
        if server.ready:
            return web.json_response({"status": "ready", "recoveredRecords": server.host.recovered_records})
        return web.json_response({"status": "recovering"}, status=503)

    async def metrics(request: web.Request) -> web.Response:
        body = generate_latest(server.metrics.registry)
        return web.Response(body=body, headers={"Content-Type": CONTENT_TYPE_LATEST})

    async def groups(request: web.Request) -> web.Response:
        return web.json_response({"groups": [group_summary(g) for g in list(coordinator.groups.values())]})

    async def group(request: web.Request) -> web.Response:
        group_id = request.match_info["group_id"]
        found = coordinator.groups.get(group_id)
        if found is None:
            return web.json_response({"error": f"group {group_id} not found"}, status=404)
        return web.json_response(group_detail(coordinator, found))

    app = web.Application()
    app.add_routes(
        [
            web.get("/healthz", healthz),
            web.get("/readyz", readyz),
            web.get("/metrics", metrics),
            web.get("/api/groups", groups),
            web.get("/api/groups/{group_id}", group),
        ]
    )
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, host, port)
    await site.start()
    sockets = getattr(site._server, "sockets", None) or []
    bound = sockets[0].getsockname()[1] if sockets else port
    return HttpApi(runner, bound)
