"""The embedded coordinator's HTTP API (`/api/groups/{id}`): what DescribeGroups cannot say — the
generation, the rebalance count and the last rebalance with its reason and duration."""

from __future__ import annotations

import json
import urllib.error
import urllib.parse
import urllib.request
from dataclasses import dataclass, field
from typing import Any

from staticfleet.admin.errors import AdminError


class CoordinatorApiUnavailable(AdminError):
    pass


@dataclass(frozen=True, slots=True)
class RebalanceRecord:
    generation: int
    reason: str
    started_ms: int | None
    completed_ms: int | None
    duration_ms: int | None


@dataclass(frozen=True, slots=True)
class CoordinatorGroupView:
    group_id: str
    state: str
    generation: int
    protocol: str | None
    leader_instance_id: str | None
    members: int
    rebalances: int
    last_rebalance: RebalanceRecord | None
    rebalance_in_progress: str | None
    expected_instance_ids: tuple[str, ...] = ()
    member_list: tuple[dict[str, Any], ...] = field(default_factory=tuple)


def parse_group_view(data: dict[str, Any]) -> CoordinatorGroupView:
    last = data.get("lastRebalance")
    in_progress = data.get("rebalanceInProgress")
    return CoordinatorGroupView(
        group_id=str(data.get("groupId", "")),
        state=str(data.get("state", "")),
        generation=int(data.get("generation", 0)),
        protocol=data.get("protocol"),
        leader_instance_id=data.get("leaderInstanceId"),
        members=int(data.get("members", 0)),
        rebalances=int(data.get("rebalances", 0)),
        last_rebalance=None
        if not last
        else RebalanceRecord(
            generation=int(last.get("generation", 0)),
            reason=str(last.get("reason") or ""),
            started_ms=last.get("startedMs"),
            completed_ms=last.get("completedMs"),
            duration_ms=last.get("durationMs"),
        ),
        rebalance_in_progress=str(in_progress.get("reason") or "") if in_progress else None,
        expected_instance_ids=tuple(data.get("expectedInstanceIds", []) or []),
        member_list=tuple(data.get("memberList", []) or []),
    )


def fetch_group_view(base_url: str, group_id: str, timeout_s: float = 3.0) -> CoordinatorGroupView | None:
    """The group as the coordinator sees it; None when it does not know the group."""
    url = f"{base_url.rstrip('/')}/api/groups/{urllib.parse.quote(group_id, safe='')}"
    try:
        with urllib.request.urlopen(url, timeout=timeout_s) as response:
            data = json.loads(response.read())
    except urllib.error.HTTPError as exc:
        if exc.code == 404:
            return None
        raise CoordinatorApiUnavailable(f"coordinator API {url} answered HTTP {exc.code}") from exc
    except (OSError, ValueError) as exc:
        raise CoordinatorApiUnavailable(f"coordinator API {url} unreachable: {exc}") from exc
    return parse_group_view(data)
