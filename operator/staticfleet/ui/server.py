"""The dashboard's HTTP server (aiohttp, which the operator already runs on through kopf).

GET /                              the overview of every fleet the operator watches
GET /namespaces/{namespace}        the overview of one namespace
GET /fleets/{namespace}/{name}     one fleet
GET /api/fleets[?namespace=N]      the overview as JSON
GET /api/fleets/{namespace}/{name} one fleet as JSON
GET /api/stream?fleet=NS/NAME      server-sent events: a new snapshot whenever it changes
GET /api/stream[?namespace=N]      the same for the overview
GET /healthz                       200 while it serves

Read-only: nothing here writes to the cluster or to Kafka. Each open stream shares one refresh loop per
page (`Hub`), which runs only while someone watches. With a token, every request but /healthz needs it,
as `Authorization: Bearer <token>` or once as `?token=<token>`, which sets a cookie for the rest.
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import html
import json
import logging
import threading
import time
from collections.abc import AsyncGenerator, Awaitable, Callable
from dataclasses import dataclass, field
from importlib import resources
from typing import Any

from aiohttp import web

from staticfleet.broker.security.http_auth import bearer_credentials
from staticfleet.broker.security.tls import ReloadingContext, TlsSettings
from staticfleet.ui.sources import FleetSource
from staticfleet.ui.views import fleet_detail, fleet_summary

log = logging.getLogger(__name__)

# A fleet page is read twice a second, so that a change shows within 2 s even when one read takes most
# of a second; the overview, which reads every fleet, once a second.
REFRESH_S = 0.5
OVERVIEW_REFRESH_S = 1.0
KEEPALIVE_S = 15.0
RECONNECT_MS = 1000
COOKIE = "staticfleet_ui_token"
MAX_PARALLEL_READS = 8
OVERVIEW_BUDGET_S = 0.8

Snapshot = dict[str, Any]
FeedKey = tuple[str, ...]
Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]


def _static_text(name: str) -> str:
    return (resources.files("staticfleet.ui") / "static" / name).read_text(encoding="utf-8")


# -- snapshots ----------------------------------------------------------------------------------------------


class Overview:
    """The overview's rows. A fleet whose cluster answers slowly (one that is down takes the admin
    timeout) keeps its last row until its read finishes, so it never holds up the others."""

    def __init__(self, source: FleetSource, budget_s: float | None = OVERVIEW_BUDGET_S) -> None:
        self.source = source
        self.budget_s = budget_s
        self._reads: dict[tuple[str, str], asyncio.Task[dict[str, Any]]] = {}
        self._rows: dict[tuple[str, str], dict[str, Any]] = {}
        self._limit = asyncio.Semaphore(MAX_PARALLEL_READS)

    async def _read(self, body: dict[str, Any]) -> dict[str, Any]:
        async with self._limit:
            return fleet_summary(await self.source.read(body, detail=False))

    async def snapshot(self, namespace: str | None) -> Snapshot:
        bodies = await self.source.list_fleets()
        if namespace is not None:
            bodies = [b for b in bodies if b.get("metadata", {}).get("namespace") == namespace]
        keys = []
        for body in bodies:
            key = (str(body["metadata"].get("namespace")), str(body["metadata"].get("name")))
            keys.append(key)
            if key not in self._reads:
                self._reads[key] = asyncio.create_task(self._read(body))
        pending = [self._reads[k] for k in keys]
        if pending:
            await asyncio.wait(pending, timeout=self.budget_s)
        for key in keys:
            task = self._reads[key]
            if task.done():
                del self._reads[key]
                error = task.exception()
                if error is None:
                    self._rows[key] = task.result()
                else:
                    log.warning("dashboard: reading %s/%s failed: %s", *key, error)
        for gone in set(self._rows) - set(keys):
            del self._rows[gone]
        rows = [self._rows.get(k) or placeholder_row(*k) for k in keys]
        rows.sort(key=lambda r: (r["namespace"], r["name"]))
        return {"namespace": namespace, "fleets": rows, "generatedMs": int(time.time() * 1000)}

    def close(self) -> None:
        for task in self._reads.values():
            task.cancel()
        self._reads.clear()


def placeholder_row(namespace: str, name: str) -> dict[str, Any]:
    """A fleet whose first read has not finished yet."""
    return {
        "namespace": namespace,
        "name": name,
        "replicas": None,
        "readyReplicas": None,
        "group": {},
        "lag": None,
        "conditions": [],
        "coordinator": None,
        "reading": True,
    }


async def overview_snapshot(source: FleetSource, namespace: str | None) -> Snapshot:
    """One overview, waiting for every fleet (the JSON API)."""
    overview = Overview(source, budget_s=None)
    try:
        return await overview.snapshot(namespace)
    finally:
        overview.close()


async def fleet_snapshot(source: FleetSource, namespace: str, name: str) -> Snapshot | None:
    body = await source.get_fleet(namespace, name)
    if body is None:
        return None
    detail = fleet_detail(await source.read(body, detail=True))
    detail["generatedMs"] = int(time.time() * 1000)
    return detail


def _comparable(snapshot: Snapshot) -> str:
    return json.dumps({k: v for k, v in snapshot.items() if k != "generatedMs"}, sort_keys=True, default=str)


@dataclass
class _Feed:
    compute: Callable[[], Awaitable[Snapshot]]
    close: Callable[[], None] = lambda: None
    queues: set[asyncio.Queue[Snapshot]] = field(default_factory=set)
    last: Snapshot | None = None
    last_key: str = ""
    task: asyncio.Task[None] | None = None


class Hub:
    """One refresh loop per page shown, shared by every stream of that page; it stops with the last one."""

    def __init__(
        self,
        source: FleetSource,
        refresh_s: float = REFRESH_S,
        overview_refresh_s: float = OVERVIEW_REFRESH_S,
    ) -> None:
        self.source = source
        self.refresh_s = refresh_s
        self.overview_refresh_s = overview_refresh_s
        self._feeds: dict[FeedKey, _Feed] = {}

    def _feed(self, key: FeedKey) -> _Feed:
        if key[0] == "fleet":
            namespace, name = key[1], key[2]

            async def fleet() -> Snapshot:
                found = await fleet_snapshot(self.source, namespace, name)
                return found if found is not None else {"gone": True, "namespace": namespace, "name": name}

            return _Feed(fleet)
        namespace_or_none = key[1] or None
        overview = Overview(self.source)
        return _Feed(lambda: overview.snapshot(namespace_or_none), overview.close)

    async def subscribe(
        self, key: FeedKey, idle_s: float = KEEPALIVE_S
    ) -> AsyncGenerator[Snapshot | None, None]:
        """Snapshots as they change; None after idle_s without one (time for a keepalive)."""
        feed = self._feeds.get(key)
        if feed is None:
            feed = self._feeds[key] = self._feed(key)
        queue: asyncio.Queue[Snapshot] = asyncio.Queue(maxsize=1)
        feed.queues.add(queue)
        if feed.last is not None:
            queue.put_nowait(feed.last)
        if feed.task is None or feed.task.done():
            feed.task = asyncio.create_task(self._run(key, feed))
        try:
            while True:
                try:
                    yield await asyncio.wait_for(queue.get(), idle_s)
                except TimeoutError:
                    yield None
        finally:
            feed.queues.discard(queue)
            if not feed.queues and feed.task is not None:
                feed.task.cancel()
                feed.close()
                self._feeds.pop(key, None)

    async def _run(self, key: FeedKey, feed: _Feed) -> None:
        while feed.queues:
            started = time.monotonic()
            try:
                snapshot = await feed.compute()
            except asyncio.CancelledError:
                raise
            except Exception as exc:  # the page shows the error and keeps its last snapshot
                log.warning("dashboard refresh of %s failed: %s", "/".join(key), exc, exc_info=True)
                snapshot = {**(feed.last or {}), "error": f"refresh failed: {exc}"}
            comparable = _comparable(snapshot)
            if comparable != feed.last_key:
                feed.last, feed.last_key = snapshot, comparable
                for queue in list(feed.queues):
                    if queue.full():
                        queue.get_nowait()  # a slow reader gets the newest snapshot, not a backlog
                    queue.put_nowait(snapshot)
            interval = self.refresh_s if key[0] == "fleet" else self.overview_refresh_s
            await asyncio.sleep(max(0.0, interval - (time.monotonic() - started)))

    async def close(self) -> None:
        for feed in list(self._feeds.values()):
            if feed.task is not None:
                feed.task.cancel()
            feed.close()
        self._feeds.clear()


# -- pages --------------------------------------------------------------------------------------------------


def error_page(status: int, title: str, message: str) -> web.Response:
    page = _static_text("error.html").replace("{{title}}", html.escape(title))
    page = page.replace("{{message}}", html.escape(message))
    return web.Response(status=status, text=page, content_type="text/html", charset="utf-8")


def _page(name: str) -> web.Response:
    return web.Response(
        text=_static_text(name),
        content_type="text/html",
        charset="utf-8",
        headers={"Cache-Control": "no-cache"},
    )


def _is_api(request: web.Request) -> bool:
    return request.path.startswith("/api/")


def _token_middleware(token: str | None) -> Any:
    @web.middleware
    async def check(
        request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> Any:
        if token is None or request.path == "/healthz" or request.path.startswith("/static/"):
            return await handler(request)
        offered = request.query.get("token")
        if offered is not None and hmac.compare_digest(offered, token):
            query = {k: v for k, v in request.query.items() if k != "token"}
            target = request.rel_url.with_query(query)
            response = web.Response(status=303, headers={"Location": str(target)})
            response.set_cookie(COOKIE, token, httponly=True, samesite="Strict")
            return response
        header = request.headers.get("Authorization")
        presented = bearer_credentials(header) or request.cookies.get(COOKIE, "")
        if presented and hmac.compare_digest(presented.encode(), token.encode()):
            return await handler(request)
        if _is_api(request):
            return web.json_response({"error": "a bearer token is required"}, status=401)
        return error_page(
            401, "Sign-in needed", "This dashboard needs its token: open it once with ?token=<token>."
        )

    return check


@web.middleware
async def _errors(
    request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
) -> Any:
    """Known HTTP errors as pages; anything else as a short 500, with the details in the operator's log."""
    try:
        return await handler(request)
    except web.HTTPNotFound:
        if _is_api(request):
            return web.json_response({"error": f"no such path: {request.path}"}, status=404)
        return error_page(404, "Not found", f"There is no page at {request.path}.")
    except web.HTTPException:
        raise
    except (asyncio.CancelledError, ConnectionResetError):
        raise
    except Exception:
        log.exception("dashboard request %s failed", request.path)
        if _is_api(request):
            return web.json_response({"error": "internal error; see the operator's log"}, status=500)
        return error_page(500, "Something went wrong", "The dashboard could not build this page.")


def build_app(
    source: FleetSource,
    *,
    token: str | None = None,
    refresh_s: float = REFRESH_S,
    overview_refresh_s: float = OVERVIEW_REFRESH_S,
) -> web.Application:
    hub = Hub(source, refresh_s, overview_refresh_s)
    app = web.Application(middlewares=[_errors, _token_middleware(token)])

    def watched(namespace: str) -> bool:
        return not source.namespaces or namespace in source.namespaces

    async def find(namespace: str, name: str) -> dict[str, Any] | None:
        return await source.get_fleet(namespace, name) if watched(namespace) else None

    async def healthz(request: web.Request) -> web.Response:
        return web.json_response({"status": "ok"})

    async def overview(request: web.Request) -> web.Response:
        return _page("index.html")

    async def namespace_page(request: web.Request) -> web.Response:
        namespace = request.match_info["namespace"]
        fleets = [b for b in await source.list_fleets() if b["metadata"].get("namespace") == namespace]
        if not watched(namespace) or not fleets:
            return error_page(
                404, "Namespace not found", f"No StaticConsumerGroup is watched in namespace {namespace}."
            )
        return _page("index.html")

    async def fleet_page(request: web.Request) -> web.Response:
        namespace, name = request.match_info["namespace"], request.match_info["name"]
        if await find(namespace, name) is None:
            return error_page(
                404,
                "Fleet not found",
                f"There is no StaticConsumerGroup {name} in namespace {namespace} that this operator "
                "watches.",
            )
        return _page("fleet.html")

    async def api_overview(request: web.Request) -> web.Response:
        return web.json_response(await overview_snapshot(source, request.query.get("namespace") or None))

    async def api_fleet(request: web.Request) -> web.Response:
        namespace, name = request.match_info["namespace"], request.match_info["name"]
        found = await fleet_snapshot(source, namespace, name) if watched(namespace) else None
        if found is None:
            return web.json_response({"error": f"no StaticConsumerGroup {namespace}/{name}"}, status=404)
        return web.json_response(found)

    async def stream(request: web.Request) -> web.StreamResponse:
        fleet = request.query.get("fleet")
        if fleet:
            namespace, _, name = fleet.partition("/")
            if not name or await find(namespace, name) is None:
                return web.json_response({"error": f"no StaticConsumerGroup {fleet}"}, status=404)
            key: FeedKey = ("fleet", namespace, name)
        else:
            key = ("overview", request.query.get("namespace", ""))
        response = web.StreamResponse(
            headers={
                "Content-Type": "text/event-stream",
                "Cache-Control": "no-cache",
                "X-Accel-Buffering": "no",
            }
        )
        await response.prepare(request)
        await response.write(f"retry: {RECONNECT_MS}\n\n".encode())
        updates = hub.subscribe(key)
        try:
            async for snapshot in updates:
                if snapshot is None:
                    await response.write(b": keepalive\n\n")
                    continue
                data = json.dumps(snapshot, default=str)
                await response.write(f"event: snapshot\ndata: {data}\n\n".encode())
        except ConnectionResetError:
            pass  # the browser went away
        finally:
            await updates.aclose()
        return response

    static_dir = resources.files("staticfleet.ui") / "static"
    app.add_routes(
        [
            web.get("/healthz", healthz),
            web.get("/", overview),
            web.get("/namespaces/{namespace}", namespace_page),
            web.get("/fleets/{namespace}/{name}", fleet_page),
            web.get("/api/fleets", api_overview),
            web.get("/api/fleets/{namespace}/{name}", api_fleet),
            web.get("/api/stream", stream),
            web.static("/static", str(static_dir)),
        ]
    )

    async def closing(app: web.Application) -> None:
        await hub.close()
        await source.close()

    app.on_cleanup.append(closing)
    return app


# -- running beside the operator ---------------------------------------------------------------------------


def parse_listen(text: str) -> tuple[str, int]:
    """HOST:PORT (port 0: any free port); IPv6 hosts in brackets."""
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit():
        raise ValueError(f"--ui {text!r}: expected HOST:PORT, e.g. 127.0.0.1:8000")
    return host.strip("[]") or "0.0.0.0", int(port)


class DashboardThread:
    """The dashboard in its own thread and event loop, so that it neither waits on nor delays kopf's."""

    def __init__(
        self,
        make_source: Callable[[], FleetSource],
        host: str,
        port: int,
        token: str | None = None,
        tls: TlsSettings | None = None,
    ) -> None:
        self._make_source = make_source
        self.host, self.port, self.token = host, port, token
        # HTTPS with a certificate re-read when its files change (a renewed Secret applies to new
        # connections without a restart).
        self._tls = ReloadingContext(tls, interval=30.0) if tls is not None else None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stop: asyncio.Event | None = None
        self._ready = threading.Event()
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._main, name="staticfleet-dashboard", daemon=True)

    @property
    def url(self) -> str:
        shown = "127.0.0.1" if self.host in ("0.0.0.0", "::") else self.host
        scheme = "https" if self._tls is not None else "http"
        return f"{scheme}://{shown if ':' not in shown else f'[{shown}]'}:{self.port}/"

    def start(self, timeout_s: float = 15.0) -> None:
        self._thread.start()
        if not self._ready.wait(timeout_s):
            raise RuntimeError("the dashboard did not start")
        if self._error is not None:
            raise RuntimeError(f"the dashboard could not start: {self._error}") from self._error

    def _main(self) -> None:
        try:
            asyncio.run(self._serve())
        except BaseException as exc:  # reported to start()
            self._error = exc
            self._ready.set()

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stop = asyncio.Event()
        app = build_app(self._make_source(), token=self.token)
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=2.0)
        await runner.setup()
        try:
            context = None
            if self._tls is not None:
                context = self._tls.context()
                context.sni_callback = self._tls.sni_callback
            site = web.TCPSite(runner, self.host, self.port, ssl_context=context)
            await site.start()
            sockets = getattr(site._server, "sockets", None) or []
            if sockets:
                self.port = int(sockets[0].getsockname()[1])
            self._ready.set()
            await self._stop.wait()
        finally:
            await runner.cleanup()

    def stop(self, timeout_s: float = 10.0) -> None:
        if self._loop is not None and self._stop is not None:
            with contextlib.suppress(RuntimeError):  # the loop already ended
                self._loop.call_soon_threadsafe(self._stop.set)
        self._thread.join(timeout_s)
