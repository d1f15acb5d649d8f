"""The dashboard's HTTP server against a fake source, over a real socket (aiohttp's test server)."""

from __future__ import annotations

import argparse
import asyncio
import json
import time
import urllib.request
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
from aiohttp.test_utils import TestClient, TestServer

from staticfleet.ui.run import read_token
from staticfleet.ui.server import DashboardThread, Hub, Overview, build_app, parse_listen
from staticfleet.ui.views import FleetInputs, Manifest

from .fixtures import T0, fleet, group, member, offsets, pod


class FakeSource:
    def __init__(self, fleets: Sequence[Manifest], namespaces: Sequence[str] = ()) -> None:
        self.fleets = list(fleets)
        self.namespaces = list(namespaces)
        self.down = False
        self.lag = 5
        self.fail_with: Exception | None = None

    async def list_fleets(self) -> list[Manifest]:
        return list(self.fleets)

    async def get_fleet(self, namespace: str, name: str) -> Manifest | None:
        if self.fail_with is not None:
            raise self.fail_with
        return next(
            (
                f
                for f in self.fleets
                if (f["metadata"]["namespace"], f["metadata"]["name"]) == (namespace, name)
            ),
            None,
        )

    async def read(self, body: Manifest, *, detail: bool) -> FleetInputs:
        if self.down:
            return FleetInputs(body=body, now_ms=T0, group_error="coordinator at kafka:9092 unreachable")
        return FleetInputs(
            body=body,
            now_ms=T0,
            pods=[pod("orders", 0)] if detail else [],
            group=group(member("orders-0", "10.0.0.1", {"orders": [0]})),
            offsets=offsets(("orders", 0, 10, 10 + self.lag)),
        )

    async def close(self) -> None:
        pass


def run(source: FakeSource, test: Callable[[TestClient[Any, Any]], Awaitable[None]], **kw: Any) -> None:
    async def main() -> None:
        async with TestClient(
            TestServer(build_app(source, refresh_s=0.05, **kw), host="127.0.0.1")
        ) as client:
            await test(client)

    asyncio.run(main())


async def next_snapshot(response: Any, timeout: float = 5.0) -> dict[str, Any]:
    async def read() -> dict[str, Any]:
        while True:
            line = (await response.content.readline()).decode()
            if line.startswith("data: "):
                data: dict[str, Any] = json.loads(line[6:])
                return data

    return await asyncio.wait_for(read(), timeout)


def test_an_unknown_fleet_or_namespace_is_a_404_page_not_a_stack_trace() -> None:
    async def test(client: TestClient[Any, Any]) -> None:
        for path in (
            "/fleets/shop/nope",
            "/fleets/elsewhere/orders",
            "/namespaces/elsewhere",
            "/no/such/page",
        ):
            response = await client.get(path)
            text = await response.text()
            assert response.status == 404, path
            assert response.content_type == "text/html"
            assert "Traceback" not in text and '<h2 id="problem">' in text
        response = await client.get("/api/fleets/shop/nope")
        assert response.status == 404 and "no StaticConsumerGroup" in (await response.json())["error"]
        assert (await client.get("/api/stream?fleet=shop/nope")).status == 404

    run(FakeSource([fleet()]), test)


def test_names_in_a_404_page_are_escaped() -> None:
    async def test(client: TestClient[Any, Any]) -> None:
        text = await (await client.get("/fleets/shop/%3Cscript%3Ex")).text()
        assert "<script>x" not in text and "&lt;script&gt;x" in text

    run(FakeSource([fleet()]), test)


def test_pages_and_their_json_are_served_for_known_fleets() -> None:
    async def test(client: TestClient[Any, Any]) -> None:
        assert (await client.get("/")).status == 200
        assert (await client.get("/namespaces/shop")).status == 200
        page = await client.get("/fleets/shop/orders")
        assert page.status == 200 and "Pods and members" in await page.text()
        overview = await (await client.get("/api/fleets")).json()
        (row,) = overview["fleets"]
        assert (row["name"], row["group"]["state"], row["lag"]["total"]) == ("orders", "Stable", 5)
        detail = await (await client.get("/api/fleets/shop/orders")).json()
        assert detail["members"][0]["partitions"] == ["orders-0"]
        assert detail["partitions"][0]["owner"] == "orders-0"
        assert (await client.get("/static/fleet.js")).status == 200

    run(FakeSource([fleet()]), test)


def test_a_namespace_the_operator_does_not_watch_is_not_found() -> None:
    async def test(client: TestClient[Any, Any]) -> None:
        assert (await client.get("/fleets/shop/orders")).status == 404
        assert (await client.get("/namespaces/shop")).status == 404

    run(FakeSource([fleet()], namespaces=["other"]), test)


def test_the_stream_sends_a_new_snapshot_when_something_changes() -> None:
    source = FakeSource([fleet()])

    async def test(client: TestClient[Any, Any]) -> None:
        response = await client.get("/api/stream?fleet=shop/orders")
        assert response.headers["Content-Type"].startswith("text/event-stream")
        first = await next_snapshot(response)
        assert first["lag"]["total"] == 5
        source.lag = 9
        second = await next_snapshot(response)
        assert second["lag"]["total"] == 9
        response.close()

    run(source, test)


def test_a_quiet_stream_sends_keepalives_and_still_delivers_the_next_change() -> None:
    source = FakeSource([fleet()])

    async def main() -> None:
        hub = Hub(source, refresh_s=0.05)
        updates = hub.subscribe(("fleet", "shop", "orders"), idle_s=0.2)
        first = await anext(updates)
        assert first is not None and first["lag"]["total"] == 5
        assert await anext(updates) is None, "a keepalive while nothing changes"
        assert await anext(updates) is None
        source.lag = 7
        while (changed := await anext(updates)) is None:
            pass
        assert changed["lag"]["total"] == 7
        await updates.aclose()
        await hub.close()

    asyncio.run(asyncio.wait_for(main(), 10))


def test_a_coordinator_that_is_down_is_shown_down_and_the_page_stays_up() -> None:
    source = FakeSource([fleet()])
    source.down = True

    async def test(client: TestClient[Any, Any]) -> None:
        assert (await client.get("/fleets/shop/orders")).status == 200
        detail = await (await client.get("/api/fleets/shop/orders")).json()
        assert detail["coordinator"]["up"] is False and "unreachable" in detail["coordinator"]["error"]
        overview = await (await client.get("/api/fleets")).json()
        assert overview["fleets"][0]["coordinator"]["up"] is False

    run(source, test)


def test_an_unexpected_failure_is_a_short_500_without_details() -> None:
    source = FakeSource([fleet()])
    source.fail_with = RuntimeError("secret internals")

    async def test(client: TestClient[Any, Any]) -> None:
        response = await client.get("/fleets/shop/orders")
        text = await response.text()
        assert response.status == 500 and "secret internals" not in text and "Traceback" not in text

    run(source, test)


def test_with_a_token_every_page_but_healthz_needs_it_and_a_token_link_sets_a_cookie() -> None:
    async def test(client: TestClient[Any, Any]) -> None:
        assert (await client.get("/healthz")).status == 200
        assert (await client.get("/")).status == 401
        assert (await client.get("/api/fleets")).status == 401
        assert (await client.get("/api/fleets", headers={"Authorization": "Bearer wrong"})).status == 401
        ok = await client.get("/api/fleets", headers={"Authorization": "Bearer s3cret"})
        assert ok.status == 200
        lower = await client.get("/api/fleets", headers={"Authorization": "bearer s3cret"})
        assert lower.status == 200, "the scheme is matched whatever its case"
        redirected = await client.get("/fleets/shop/orders?token=s3cret", allow_redirects=False)
        assert redirected.status == 303 and redirected.headers["Location"] == "/fleets/shop/orders"
        assert (await client.get("/fleets/shop/orders")).status == 200, "the cookie carries the token"

    run(FakeSource([fleet()]), test, token="s3cret")


def test_listen_addresses_are_host_and_port() -> None:
    assert parse_listen("127.0.0.1:8000") == ("127.0.0.1", 8000)
    assert parse_listen("[::1]:0") == ("::1", 0)
    assert parse_listen(":9000") == ("0.0.0.0", 9000)


def test_a_fleet_whose_cluster_answers_slowly_does_not_hold_up_the_overview() -> None:
    class Slow(FakeSource):
        async def read(self, body: Manifest, *, detail: bool) -> FleetInputs:
            if body["metadata"]["name"] == "slow":
                await asyncio.sleep(30)
            return await super().read(body, detail=detail)

    async def main() -> None:
        overview = Overview(Slow([fleet(), fleet(name="slow")]), budget_s=0.2)
        started = time.monotonic()
        snapshot = await overview.snapshot(None)
        assert time.monotonic() - started < 5
        rows = {r["name"]: r for r in snapshot["fleets"]}
        assert rows["orders"]["group"]["state"] == "Stable"
        assert rows["slow"].get("reading") is True
        overview.close()

    asyncio.run(main())


def test_the_dashboard_thread_serves_beside_another_event_loop_and_stops(tmp_path: Path) -> None:
    token_file = tmp_path / "token"
    token_file.write_text("s3cret\n")
    args = argparse.Namespace(ui_token_file=token_file)
    dashboard = DashboardThread(lambda: FakeSource([fleet()]), "127.0.0.1", 0, read_token(args))
    dashboard.start()
    try:
        assert dashboard.port != 0 and dashboard.url == f"http://127.0.0.1:{dashboard.port}/"
        with urllib.request.urlopen(f"{dashboard.url}healthz", timeout=5) as response:
            assert response.status == 200
        request = urllib.request.Request(
            f"{dashboard.url}api/fleets", headers={"Authorization": "Bearer s3cret"}
        )
        with urllib.request.urlopen(request, timeout=5) as response:
            assert json.loads(response.read())["fleets"][0]["name"] == "orders"
    finally:
        dashboard.stop()
    with pytest.raises(OSError):
        urllib.request.urlopen(f"{dashboard.url}healthz", timeout=2)


def test_an_empty_token_file_is_refused() -> None:
    import tempfile

    with tempfile.NamedTemporaryFile("w") as empty, pytest.raises(SystemExit, match="is empty"):
        read_token(argparse.Namespace(ui_token_file=Path(empty.name)))
