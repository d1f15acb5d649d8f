"""`GET /api/groups` a page at a time, so that no request holds the event loop (and with it the Kafka
listener) for long, however many groups there are.

A listing works as Kubernetes' `limit` and `continue` do. The first request takes the ids of every
group as they are at that moment (the listing) and answers the first `limit` of them; its `continue`
token names the listing and the position of the next page. A group deleted meanwhile is left out of
its page, one created meanwhile appears in the next listing, and each group is shown as it stands when
its page is built. `limit` is at most `MAX_PAGE_GROUPS`, which is also the default: what one request
may ask for is bounded. A page is built `CHUNK_GROUPS` groups at a time, giving the loop back between
chunks, so a heartbeat waits behind one chunk, not behind a page. One group's detailed view
(`/api/groups/{id}`) is taken at once and its members decoded `CHUNK_MEMBERS` at a time, the same way.
The HTTP API builds one view at a time (broker/http.py), so many readers do not add up either.

Listings are kept while they are read: the oldest is dropped when `MAX_LISTINGS` are open, and one
not read for `LISTING_IDLE_S` expires; a token of a listing that is gone is answered 410 Gone, and the
reader starts a new listing.
"""

from __future__ import annotations

import asyncio
import json
import secrets
import time
from collections import OrderedDict
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Final

from staticfleet.coordinator.group import ClassicGroup
from staticfleet.coordinator.group_view import (
    CoordinatorGroupView,
    GroupConfigSource,
    MemberSnapshot,
    summary_json,
)

MAX_PAGE_GROUPS: Final = 500
"""The most groups one request gets, and how many it gets when it does not ask (`limit`)."""
CHUNK_GROUPS: Final = 50
"""Groups built between two returns to the event loop."""
CHUNK_MEMBERS: Final = 100
"""Members of one group's detailed view turned into JSON between two returns to the event loop."""
MAX_LISTINGS: Final = 64
LISTING_IDLE_S: Final = 300.0


class BadPageRequest(ValueError):
    """A `limit` or `continue` that cannot be read (HTTP 400)."""


class ListingGone(LookupError):
    """The listing a `continue` token names has expired or was dropped (HTTP 410)."""


@dataclass(slots=True)
class _Listing:
    ids: list[str]
    read_at: float


@dataclass(frozen=True, slots=True)
class PageRequest:
    listing: str
    ids: Sequence[str]
    """The whole listing's ids; the page is `ids[start:end]`."""
    start: int
    end: int


class GroupListings:
    def __init__(
        self,
        *,
        max_listings: int = MAX_LISTINGS,
        idle_s: float = LISTING_IDLE_S,
        now: Callable[[], float] = time.monotonic,
    ) -> None:
        self.max_listings = max_listings
        self.idle_s = idle_s
        self.now = now
        self._listings: OrderedDict[str, _Listing] = OrderedDict()

    def __len__(self) -> int:
        return len(self._listings)

    def page(self, group_ids: Callable[[], list[str]], limit: int, token: str | None) -> PageRequest:
        """Which ids the page holds: from a new listing of `group_ids()` when `token` is None."""
        now = self.now()
        self._expire(now)
        if token is None:
            key = secrets.token_urlsafe(12)
            listing = self._listings[key] = _Listing(group_ids(), now)
            while len(self._listings) > self.max_listings:
                self._listings.popitem(last=False)
            start = 0
        else:
            key, start = _parse_token(token)
            found = self._listings.get(key)
            if found is None:
                raise ListingGone(
                    "the listing this continue token belongs to has expired; list again without it"
                )
            listing = found
            listing.read_at = now
            self._listings.move_to_end(key)
        end = min(start + limit, len(listing.ids))
        if end >= len(listing.ids):
            self._listings.pop(key, None)  # read to the end
        return PageRequest(key, listing.ids, start, end)

    def _expire(self, now: float) -> None:
        while self._listings:
            key, oldest = next(iter(self._listings.items()))
            if now - oldest.read_at < self.idle_s:
                return
            del self._listings[key]


def _parse_token(token: str) -> tuple[str, int]:
    key, sep, position = token.rpartition(".")
    if not sep or not key or not position.isdigit():
        raise BadPageRequest(f"continue token {token!r} is malformed")
    return key, int(position)


def parse_limit(value: str | None) -> int:
    """`limit` as asked, at most MAX_PAGE_GROUPS (the default)."""
    if value is None:
        return MAX_PAGE_GROUPS
    try:
        limit = int(value)
    except ValueError:
        raise BadPageRequest(f"limit {value!r} is not a number") from None
    if limit < 1:
        raise BadPageRequest(f"limit {limit} must be at least 1")
    return min(limit, MAX_PAGE_GROUPS)


async def render_page(groups: Mapping[str, ClassicGroup], page: PageRequest) -> str:
    """The page as JSON text: {"groups": [...], "continue": token, "remaining": n} (no `continue`
    once the listing is read to its end), built a chunk at a time."""
    parts: list[str] = []
    encode = json.JSONEncoder().encode
    for chunk_start in range(page.start, page.end, CHUNK_GROUPS):
        summaries = []
        for group_id in page.ids[chunk_start : min(chunk_start + CHUNK_GROUPS, page.end)]:
            group = groups.get(group_id)
            if group is not None:
                summaries.append(summary_json(group))
        if summaries:
            parts.append(encode(summaries)[1:-1])
        if chunk_start + CHUNK_GROUPS < page.end:
            await asyncio.sleep(0)
    tail: dict[str, object] = {"remaining": len(page.ids) - page.end}
    if page.end < len(page.ids):
        tail["continue"] = f"{page.listing}.{page.end}"
    return '{"groups": [' + ", ".join(parts) + "], " + encode(tail)[1:]


async def group_detail(coordinator: GroupConfigSource, group: ClassicGroup) -> dict[str, Any]:
    """`/api/groups/{id}`: the group and its members as they are now; the members' assignments and
    subscriptions are decoded CHUNK_MEMBERS at a time, giving the loop back in between."""
    snapshots = [MemberSnapshot.of(group, member) for member in group.members.values()]
    view = CoordinatorGroupView.of(coordinator, group, member_list=())
    entries: list[dict[str, Any]] = []
    for start in range(0, len(snapshots), CHUNK_MEMBERS):
        if start:
            await asyncio.sleep(0)
        entries.extend(snapshot.to_json() for snapshot in snapshots[start : start + CHUNK_MEMBERS])
    data = view.to_json()
    data["memberList"] = entries
    return data
