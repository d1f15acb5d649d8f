"""`/api/groups` a page at a time: listings, continue tokens and their expiry, and pages built a chunk
at a time (the pure parts; test_http_groups.py reads them over HTTP)."""

from __future__ import annotations

import asyncio
import json

import pytest

from conformance import driver as d
from staticfleet.broker.group_pages import (
    CHUNK_GROUPS,
    CHUNK_MEMBERS,
    MAX_PAGE_GROUPS,
    BadPageRequest,
    GroupListings,
    ListingGone,
    group_detail,
    parse_limit,
    render_page,
)
from staticfleet.coordinator import GroupState
from staticfleet.coordinator.group import ClassicGroup
from staticfleet.coordinator.group_view import CoordinatorGroupView
from staticfleet.coordinator.messages import Protocol

from ..coordinator.harness import Harness


def _ids(n: int) -> list[str]:
    return [f"g{i}" for i in range(n)]


def test_a_listing_is_read_page_by_page_from_the_ids_it_started_with() -> None:
    listings = GroupListings()
    ids = _ids(25)
    first = listings.page(lambda: list(ids), 10, None)
    assert (first.start, first.end) == (0, 10)
    ids.append("created-after-the-listing-started")
    second = listings.page(lambda: [], 10, f"{first.listing}.10")
    third = listings.page(lambda: [], 10, f"{first.listing}.20")
    assert (second.start, second.end, third.start, third.end) == (10, 20, 20, 25)
    assert len(listings) == 0, "a listing read to its end is dropped"
    with pytest.raises(ListingGone):
        listings.page(lambda: [], 10, f"{first.listing}.20")


def test_a_listing_not_read_for_its_idle_time_expires() -> None:
    now = [0.0]
    listings = GroupListings(idle_s=300.0, now=lambda: now[0])
    first = listings.page(lambda: _ids(30), 10, None)
    now[0] = 299.0
    listings.page(lambda: [], 10, f"{first.listing}.10")
    now[0] = 598.0
    listings.page(lambda: [], 10, f"{first.listing}.20")  # read 299 s ago: still there
    other = listings.page(lambda: _ids(30), 10, None)
    now[0] = 899.0
    with pytest.raises(ListingGone):
        listings.page(lambda: [], 10, f"{other.listing}.10")


def test_the_oldest_listing_is_dropped_when_too_many_are_open() -> None:
    listings = GroupListings(max_listings=2)
    tokens = [listings.page(lambda: _ids(30), 10, None).listing for _ in range(3)]
    with pytest.raises(ListingGone):
        listings.page(lambda: [], 10, f"{tokens[0]}.10")
    assert listings.page(lambda: [], 10, f"{tokens[2]}.10").start == 10


@pytest.mark.parametrize("token", ["", "no-position", "key.", ".10", "key.-1", "key.ten"])
def test_a_malformed_continue_token_is_a_bad_request(token: str) -> None:
    with pytest.raises(BadPageRequest):
        GroupListings().page(lambda: _ids(3), 10, token)


def test_limit_defaults_to_the_largest_page_and_is_bounded_by_it() -> None:
    assert parse_limit(None) == MAX_PAGE_GROUPS
    assert parse_limit("7") == 7
    assert parse_limit(str(MAX_PAGE_GROUPS * 10)) == MAX_PAGE_GROUPS
    for wrong in ("0", "-3", "many"):
        with pytest.raises(BadPageRequest):
            parse_limit(wrong)


def test_a_page_is_built_a_chunk_at_a_time_and_leaves_out_groups_deleted_since_the_listing() -> None:
    groups = {group_id: ClassicGroup(group_id) for group_id in _ids(3 * CHUNK_GROUPS)}
    listings = GroupListings()
    page = listings.page(lambda: list(groups), 3 * CHUNK_GROUPS - 1, None)
    del groups["g5"]

    async def main() -> tuple[str, int]:
        ticks = 0
        stop = asyncio.Event()

        async def count_ticks() -> None:
            nonlocal ticks
            while not stop.is_set():
                ticks += 1
                await asyncio.sleep(0)

        ticker = asyncio.create_task(count_ticks())
        await asyncio.sleep(0)
        body = await render_page(groups, page)
        stop.set()
        await ticker
        return body, ticks

    body, ticks = asyncio.run(main())
    assert ticks >= 3, "the loop ran other work between the chunks"
    data = json.loads(body)
    listed = [g["groupId"] for g in data["groups"]]
    assert listed == [f"g{i}" for i in range(3 * CHUNK_GROUPS - 1) if i != 5]
    assert data["remaining"] == 1 and data["continue"] == f"{page.listing}.{3 * CHUNK_GROUPS - 1}"
    assert data["groups"][0] == {
        "groupId": "g0",
        "state": "Empty",
        "generation": 0,
        "protocolType": "",
        "protocol": None,
        "leader": None,
        "leaderInstanceId": None,
        "members": 0,
        "rebalances": 0,
        "lastRebalance": None,
    }


def test_the_detailed_view_built_a_chunk_of_members_at_a_time_is_the_groups_view() -> None:
    h = Harness()
    members = 2 * CHUNK_MEMBERS + 7
    replies = [
        h.join("", f"m{i:03d}", protocols=(Protocol("range", d.subscription("t1")),)) for i in range(members)
    ]
    h.tick()
    ids = [r.get().member_id for r in replies]
    group = h.group()
    assignments = {member_id: d.assignment({"t1": [i]}) for i, member_id in enumerate(ids)}
    for i, member_id in enumerate(ids):
        h.sync(member_id, 1, f"m{i:03d}", assignments=assignments if member_id == group.leader_id else None)
    assert h.state() is GroupState.STABLE
    detail = asyncio.run(group_detail(h.coordinator, group))
    assert detail == CoordinatorGroupView.of(h.coordinator, group).to_json()
    assert len(detail["memberList"]) == members and detail["memberList"][7]["partitions"] == {"t1": [7]}
