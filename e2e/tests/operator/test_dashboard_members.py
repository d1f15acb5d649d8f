"""The dashboard's fleet page for pods of two members each, in a real headless Chromium: each pod spans
the rows of its two members (tests/ui/test_views.py covers a member missing and one no pod runs)."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from e2e.browser import WIDE, chromium, rows, texts, wait_in_page
from e2e.helpers import Cluster

from .dashboard_harness import Dashboard, delete_fleets, open_page, operator_with_dashboard
from .harness import Coordinator, fleet_manifest, ready_with, wait_fleet

pytestmark = pytest.mark.localcluster

FLEET = "orders"
REPLICAS = 2
PER_POD = 2


@pytest.fixture
def dashboard(
    cluster: Cluster, namespace: str, crd: None, coordinator: Coordinator, tmp_path: Path
) -> Iterator[Dashboard]:
    kubectl = cluster.kubectl
    topic = f"{namespace}-orders"
    coordinator.create_topic(topic, 4)
    running = operator_with_dashboard(cluster.kubeconfig, namespace, tmp_path)
    try:
        kubectl.apply(fleet_manifest(FLEET, REPLICAS, coordinator, topic, membersPerPod=PER_POD), namespace)
        wait_fleet(
            kubectl, namespace, FLEET, ready_with(REPLICAS, PER_POD), timeout=150, what="Ready with 2 x 2"
        )
        yield running
    finally:
        try:
            delete_fleets(kubectl, namespace)
        finally:
            running.runner.stop()


@pytest.fixture
def browser() -> Iterator[Any]:
    with chromium(WIDE) as driver:
        yield driver


def test_each_pod_spans_the_rows_of_its_two_members(
    dashboard: Dashboard, namespace: str, coordinator: Coordinator, browser: Any
) -> None:
    open_page(browser, f"{dashboard.url}/fleets/{namespace}/{FLEET}")
    expected = [f"{FLEET}-{o}-{k}" for o in range(REPLICAS) for k in range(1, PER_POD + 1)]
    wait_in_page(
        browser,
        lambda d: texts(d, "#members tbody td.instance") == expected,
        timeout=15,
        what="four member rows in pod order",
    )
    members = {m["instanceId"]: m for m in (coordinator.group(f"{namespace}.{FLEET}") or {})["memberList"]}
    cells = {"pod": ".pod", "instance": ".instance", "member": ".member", "phase": ".phase"}
    shown = rows(browser, "#members tbody tr", cells)
    # The pod's own cells come once, on its first row, spanning both of its members' rows.
    assert [(r["pod"], r["phase"]) for r in shown] == [
        (f"{FLEET}-0", "Running, ready"),
        (None, None),
        (f"{FLEET}-1", "Running, ready"),
        (None, None),
    ]
    assert [r["member"] for r in shown] == [members[i]["memberId"] for i in expected]
    spans = browser.execute_script(
        "return Array.from(document.querySelectorAll('#members tbody th.pod')).map((c) => c.rowSpan)"
    )
    assert spans == [PER_POD, PER_POD]
    assert browser.execute_script(
        "return Array.from(document.querySelectorAll('#members tbody tr')).map((r) => r.dataset.pod)"
    ) == [f"{FLEET}-0", f"{FLEET}-0", f"{FLEET}-1", f"{FLEET}-1"]
    assert not texts(browser, "#alerts li")

    with urllib.request.urlopen(f"{dashboard.url}/api/fleets/{namespace}/{FLEET}", timeout=10) as response:
        detail = json.load(response)
    assert [(m["pod"], m["podRows"], m["expectedInstanceId"]) for m in detail["members"]] == [
        (f"{FLEET}-0", 2, expected[0]),
        (f"{FLEET}-0", 0, expected[1]),
        (f"{FLEET}-1", 2, expected[2]),
        (f"{FLEET}-1", 0, expected[3]),
    ]
