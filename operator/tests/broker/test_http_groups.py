"""`GET /api/groups` over real loopback sockets: pages of at most 500 groups with a `continue` token,
a listing that leaves out groups deleted since it started, 400 for a bad `limit` or token, 410 for a
listing that is gone, and the admin client that reads every page."""

from __future__ import annotations

import asyncio
import json
import urllib.error
import urllib.request
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import pytest

from staticfleet.admin.coordinator_api import CoordinatorApiUnavailable, list_group_views
from staticfleet.broker.group_pages import MAX_PAGE_GROUPS, GroupListings
from staticfleet.broker.host import CoordinatorHost
from staticfleet.broker.http import start_http
from staticfleet.broker.metrics import BrokerMetrics
from staticfleet.coordinator import CoordinatorConfig, ManualClock
from staticfleet.coordinator.messages import (
    OffsetCommitPartition,
    OffsetCommitRequest,
    OffsetCommitTopic,
    RequestContext,
)

GROUPS = 1_234


def _commit(host: CoordinatorHost, group_id: str, offset: int) -> None:
    topics = (OffsetCommitTopic("t", (OffsetCommitPartition(0, offset),)),)
    commit = OffsetCommitRequest(group_id, -1, "", None, topics)
    host.call(lambda c: c.commit_offsets(RequestContext(9), commit))


@asynccontextmanager
async def api_with_groups(
    tmp_path: Path, listings: GroupListings | None = None
) -> AsyncIterator[tuple[str, CoordinatorHost]]:
    """The HTTP API of a coordinator holding GROUPS groups (made by offset commits): its URL and host."""
    host = CoordinatorHost(tmp_path / "data", CoordinatorConfig(), clock=ManualClock(), fsync=False)
    await host.start()
    for i in range(GROUPS):
        _commit(host, f"group-{i:05d}", i)
    await host.flush()
    api = await start_http(host, BrokerMetrics(), lambda: True, "127.0.0.1", 0, listings=listings)
    try:
        yield f"http://127.0.0.1:{api.port}", host
    finally:
        await api.cleanup()
        await host.close()


def _get(url: str) -> tuple[int, Any]:
    try:
        with urllib.request.urlopen(url, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_the_groups_come_in_pages_of_at_most_500_with_a_continue_token(tmp_path: Path) -> None:
    async def main() -> None:
        async with api_with_groups(tmp_path) as (base, _):
            status, first = await asyncio.to_thread(_get, f"{base}/api/groups")
            assert status == 200 and len(first["groups"]) == MAX_PAGE_GROUPS
            assert first["remaining"] == GROUPS - MAX_PAGE_GROUPS and first["continue"]
            status, asked_more = await asyncio.to_thread(_get, f"{base}/api/groups?limit=100000")
            assert len(asked_more["groups"]) == MAX_PAGE_GROUPS, "one request gets at most the largest page"
            seen: list[str] = []
            url = f"{base}/api/groups?limit=300"
            for _ in range(GROUPS // 300 + 2):
                status, page = await asyncio.to_thread(_get, url)
                assert status == 200
                seen += [g["groupId"] for g in page["groups"]]
                if "continue" not in page:
                    break
                url = f"{base}/api/groups?limit=300&continue={page['continue']}"
            assert seen == [f"group-{i:05d}" for i in range(GROUPS)]
            views = await asyncio.to_thread(list_group_views, base, limit=200)
            assert [v.group_id for v in views] == seen
            assert {v.state for v in views} == {"Empty"}
            status, one = await asyncio.to_thread(_get, f"{base}/api/groups/group-00007")
            assert status == 200 and one["groupId"] == "group-00007" and one["memberList"] == []

    asyncio.run(main())


def test_a_listing_leaves_out_a_group_deleted_after_it_started(tmp_path: Path) -> None:
    async def main() -> None:
        async with api_with_groups(tmp_path) as (base, host):
            status, page = await asyncio.to_thread(_get, f"{base}/api/groups")
            assert status == 200
            gone = "group-01100"  # on the third page
            [result] = host.call(lambda c: c.delete_groups(RequestContext(5), [gone]))
            assert result.error == 0
            listed = [g["groupId"] for g in page["groups"]]
            for _ in range(3):
                if "continue" not in page:
                    break
                status, page = await asyncio.to_thread(_get, f"{base}/api/groups?continue={page['continue']}")
                listed += [g["groupId"] for g in page["groups"]]
            assert gone not in listed and len(listed) == GROUPS - 1 and "continue" not in page

    asyncio.run(main())


@pytest.mark.parametrize(
    ("query", "status"),
    [("limit=0", 400), ("limit=lots", 400), ("continue=no-position", 400), ("continue=unknown.500", 410)],
)
def test_a_bad_limit_or_token_is_400_and_a_listing_that_is_gone_is_410(
    tmp_path: Path, query: str, status: int
) -> None:
    async def main() -> None:
        async with api_with_groups(tmp_path) as (base, _):
            got, body = await asyncio.to_thread(_get, f"{base}/api/groups?{query}")
            assert got == status and body["error"]

    asyncio.run(main())


def test_a_reader_starts_an_expired_listing_over_and_gives_up_after_a_few_tries(tmp_path: Path) -> None:
    async def main() -> None:
        async with api_with_groups(tmp_path, GroupListings(idle_s=0.0)) as (base, _):
            with pytest.raises(CoordinatorApiUnavailable, match="expired 3 times"):
                await asyncio.to_thread(list_group_views, base)

    asyncio.run(main())
