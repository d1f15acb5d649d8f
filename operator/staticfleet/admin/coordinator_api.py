"""The embedded coordinator's HTTP API (`/api/groups/{id}`, and `/api/groups` page by page): what
DescribeGroups cannot say — the generation, the rebalance count and the last rebalance with its reason
and duration."""

from __future__ import annotations

import json
import ssl
import urllib.error
import urllib.parse
import urllib.request
from typing import Any

from staticfleet.admin.errors import AdminError
from staticfleet.coordinator.group_view import CoordinatorGroupView, RebalanceRecord

__all__ = [
    "CoordinatorApiUnavailable",
    "CoordinatorGroupView",
    "RebalanceRecord",
    "fetch_group_json",
    "fetch_group_view",
    "list_group_views",
]

LISTING_ATTEMPTS = 3
"""How often a listing of every group is started over when the coordinator dropped it meanwhile."""


class CoordinatorApiUnavailable(AdminError):
    pass


def _get_json(url: str, timeout_s: float, token: str | None, cafile: str | None = None) -> dict[str, Any]:
    request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"} if token else {})
    context = ssl.create_default_context(cafile=cafile) if cafile and url.startswith("https:") else None
    with urllib.request.urlopen(request, timeout=timeout_s, context=context) as response:
        data: dict[str, Any] = json.loads(response.read())
        return data


def fetch_group_json(
    base_url: str,
    group_id: str,
    timeout_s: float = 3.0,
    token: str | None = None,
    cafile: str | None = None,
) -> dict[str, Any] | None:
    """`/api/groups/{id}` as the coordinator wrote it; None when it does not know the group. `token` is
    the coordinator's HTTP bearer token (--http-token-file), when it requires one; `cafile` the CA that
    signed its HTTPS certificate (default: the system's trust store)."""
    url = f"{base_url.rstrip('/')}/api/groups/{urllib.parse.quote(group_id, safe='')}"
    try:
        return _get_json(url, timeout_s, token, cafile)
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return None
        raise CoordinatorApiUnavailable(f"coordinator API {url} answered HTTP {exc.code}") from exc
    except (OSError, ValueError) as exc:
        raise CoordinatorApiUnavailable(f"coordinator API {url} unreachable: {exc}") from exc


def fetch_group_view(
    base_url: str,
    group_id: str,
    timeout_s: float = 3.0,
    token: str | None = None,
    cafile: str | None = None,
) -> CoordinatorGroupView | None:
    """The group as the coordinator sees it; None when it does not know the group."""
    data = fetch_group_json(base_url, group_id, timeout_s, token, cafile)
    return None if data is None else CoordinatorGroupView.from_json(data)


def list_group_views(
    base_url: str,
    timeout_s: float = 3.0,
    token: str | None = None,
    cafile: str | None = None,
    *,
    limit: int | None = None,
) -> list[CoordinatorGroupView]:
    """Every group `/api/groups` lists (summaries: no member list), read page by page. `limit` asks for
    smaller pages than the coordinator's largest; a listing the coordinator dropped before it was read
    to its end (HTTP 410) is started over."""
    base = f"{base_url.rstrip('/')}/api/groups"
    for _ in range(LISTING_ATTEMPTS):
        views: list[CoordinatorGroupView] = []
        params: dict[str, str] = {} if limit is None else {"limit": str(limit)}
        try:
            while True:
                url = f"{base}?{urllib.parse.urlencode(params)}" if params else base
                page = _get_json(url, timeout_s, token, cafile)
                views.extend(CoordinatorGroupView.from_json(g) for g in page.get("groups") or ())
                next_page = page.get("continue")
                if not next_page:
                    return views
                params["continue"] = str(next_page)
        except urllib.error.HTTPError as exc:
            if exc.code != 410:
                raise CoordinatorApiUnavailable(f"coordinator API {base} answered HTTP {exc.code}") from exc
        except (OSError, ValueError) as exc:
            raise CoordinatorApiUnavailable(f"coordinator API {base} unreachable: {exc}") from exc
    raise CoordinatorApiUnavailable(
        f"coordinator API {base}: the listing expired {LISTING_ATTEMPTS} times before it was read to its end"
    )
